"""Choose the device, synchronise it, and describe the hardware.

Taught in notebook `start_here` (start here). Every other module takes a ``torch.device`` chosen here.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
from collections.abc import Iterator
from pathlib import Path

import torch

from . import environment

DEVICE_ENV = "LABKIT_DEVICE"
ALLOWED_DEVICES = ("auto", "cpu", "cuda", "cuda:N", "mps")


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def choose_device(name: str | torch.device | None = "auto") -> torch.device:
    """Return the device to run on: CUDA, then Apple MPS, then CPU (notebook `start_here`).

    ``name`` may be ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"mps"``. With ``"auto"``
    (or ``None``) the environment variable ``LABKIT_DEVICE`` wins if set, so a test run can pin
    the device without editing a notebook. A name that is unknown, or names hardware this machine
    does not have, raises ``ValueError`` saying what is allowed and what is available.
    """
    if isinstance(name, torch.device):
        name = str(name)
    requested = (name or "auto").strip().lower()
    if requested == "auto" and environment.get(DEVICE_ENV) != "auto":
        try:
            return _named_device(environment.get(DEVICE_ENV))
        except ValueError as exc:
            raise ValueError(f"{exc} (the device came from {DEVICE_ENV}; unset it or set it to one of these)") from None
    return _named_device(requested)


def _named_device(requested: str) -> torch.device:
    if requested == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")

    if not re.fullmatch(r"cpu|mps|cuda(:\d+)?", requested):
        raise ValueError(
            f"unknown device {requested!r}; allowed: {', '.join(ALLOWED_DEVICES)} "
            f"(available here: {', '.join(available_devices())})"
        )
    if requested.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(
                f"device {requested!r} was requested but this PyTorch sees no CUDA GPU; "
                f"available here: {', '.join(available_devices())}"
            )
        index = int(requested.split(":")[1]) if ":" in requested else torch.cuda.current_device()
        if index >= torch.cuda.device_count():
            raise ValueError(
                f"device {requested!r} does not exist: this machine has "
                f"{torch.cuda.device_count()} CUDA device(s), cuda:0..cuda:{torch.cuda.device_count() - 1}"
            )
        return torch.device("cuda", index)
    if requested == "mps" and not _mps_available():
        raise ValueError(
            f"device 'mps' was requested but Apple's Metal backend is not available here; "
            f"available here: {', '.join(available_devices())}"
        )
    return torch.device(requested)


def available_devices() -> list[str]:
    """Names of the devices this process can use, CPU always last."""
    names = [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    if _mps_available():
        names.append("mps")
    return [*names, "cpu"]


def sync(device: torch.device | str | None = None) -> None:
    """Wait until all queued work on ``device`` has finished (notebook `start_here`: the missing-sync mistake).

    Taught in notebook `inference_vs_training`.

    GPUs run asynchronously: a kernel launch returns before the kernel ends, so a timer read without
    a sync measures the launch, not the work. On CPU this is a no-op; ``device=None`` syncs
    every accelerator in use.
    """
    device = torch.device(device) if device is not None else None
    if device is None or device.type == "cuda":
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize(device)
    if (device is None or device.type == "mps") and _mps_available():
        torch.mps.synchronize()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:  # elsewhere (macOS, Windows): what the platform module says, below
        pass
    return platform.processor() or platform.machine()


def cpu_features() -> list[str]:
    """The CPU's vector and matrix extensions that matter for low-precision maths (Linux only)."""
    interesting = (
        "avx2",
        "fma",
        "avx_vnni",
        "avx512f",
        "avx512_vnni",
        "avx512_bf16",
        "avx512_fp16",
        "amx_bf16",
        "amx_int8",
        "asimd",
        "sve",
    )
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:  # elsewhere (macOS, Windows): none listed
        return []
    match = re.search(r"^(flags|Features)\s*:\s*(.*)$", text, re.MULTILINE)
    flags = set(match.group(2).split()) if match else set()
    return [f for f in interesting if f in flags]


def cpu_caches(
    root: str | Path = "/sys/devices/system/cpu/cpu0/cache",  # elsewhere: no such folder, so {}
) -> dict[str, int]:
    """The data caches one core sees, {"L1": bytes, "L2": bytes, "L3": bytes}, as Linux reports them.

    Taught in notebook `fused_attention`. Each size is one cache's, shared or not (an L3 is usually shared by
    several cores). Empty where the operating system does not say (macOS, Windows): callers print "unknown".
    """
    found: dict[str, int] = {}
    for index in sorted(Path(root).glob("index[0-9]*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        match = re.fullmatch(r"(\d+)([KMG]?)", size)
        if kind == "Instruction" or not match:
            continue
        found[f"L{level}"] = int(match.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2)]
    return found


def usable_cores() -> int:
    """CPU cores this process may run on (affinity-aware, so a container's limit shows)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # elsewhere (macOS, Windows): every core the machine has
        return os.cpu_count() or 1


def host_memory_bytes() -> int:
    """Total physical memory of the host in bytes."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # elsewhere (Windows): 0, not known
        return 0


def available_memory_bytes(device: torch.device | str) -> int:
    """Bytes a new allocation on ``device`` can still get (free GPU memory, or MemAvailable on CPU)."""
    device = torch.device(device)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:  # elsewhere (macOS, Windows): the total memory, below
        pass
    return host_memory_bytes()


def describe(device: torch.device | str) -> dict:
    """The hardware behind ``device`` as a flat dict (name, cores, memory, capability)."""
    device = torch.device(device)
    info: dict = {
        "device": str(device),
        "device_type": device.type,
        "cpu": _cpu_model(),
        "cpu_cores": usable_cores(),
        "cpu_features": cpu_features(),
        "torch_threads": torch.get_num_threads(),
        "host_memory_gib": round(host_memory_bytes() / 2**30, 1),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(
            device_name=props.name,
            device_memory_gib=round(props.total_memory / 2**30, 1),
            compute_capability=f"{props.major}.{props.minor}",
            multiprocessors=props.multi_processor_count,
            gpu_count=torch.cuda.device_count(),
        )
    elif device.type == "mps":
        info.update(device_name="Apple GPU (MPS)", device_memory_gib=info["host_memory_gib"])
    else:
        info.update(device_name=info["cpu"], device_memory_gib=info["host_memory_gib"])
    return info


@contextlib.contextmanager
def threads(n: int) -> Iterator[int]:
    """Run a block with ``n`` PyTorch CPU threads, then restore the previous count (notebooks `start_here`, `where_time_goes`, `sharing_a_gpu`)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"threads needs a whole number of threads, 1 or more; got {n!r}")
    saved = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield n
    finally:
        torch.set_num_threads(saved)
