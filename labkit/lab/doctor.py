"""``python -m labkit doctor``: the pre-flight check for a learner's or an attendee's machine.

Taught in notebook `start_here`. Each check prints one line, ``ok``, ``note`` (the course runs; read why) or
``PROBLEM`` (with what to do); then the machine card and the two ceilings, measured with the sizes and the
PyTorch thread count notebook `start_here` uses. It exits non-zero when a check found a problem. Warnings that
libraries raise while it works are caught and said in one plain line each, never printed raw.

The checks that start processes (a Jupyter kernel, two ranks of a process group) stop them on success, failure or
time-out: nothing is left running and the ports they used are free again.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import shutil
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core.errors import SetupProblem
from .doctor_checks import Finding, all_clear, check_kernel, check_process_group, check_widgets, needs_fix

REQUIRED = {
    "torch": "make lab (or pip install -e .) installs it",
    "torchvision": "make lab installs the torchvision that matches torch",
    "numpy": "make lab installs it",
    "matplotlib": "make lab installs it",
    "tqdm": "make lab installs it",
    "ipywidgets": "make lab installs it",
    "tabulate": "make lab installs it (torch's FLOP counter needs it to print tables)",
    "pandas": "make lab installs it (the notebooks show their tables as DataFrames)",
    "torchao": "make lab installs it (notebook `optimisation`'s quantization)",
    "simpy": "make lab installs it (notebook `sharing_a_gpu`'s cluster simulation)",
}

# Free disk wanted where the course lives, once the environment is installed: the build folder (results, the
# report, the book of `make book`), the files notebooks write while they run (notebook `checkpoints` writes its
# checkpoints and data files to disk, larger in the full profile), PyTorch's compile cache, and room to spare so
# that the laptop itself does not run out during the day.
MIN_FREE_GIB = 2.0


def check_settings() -> None:
    """Every ``LABKIT_*`` setting that is set parses, as ``labkit.start`` checks at a notebook's first cell."""
    from ..core import environment

    try:
        environment.check_all()  # an unknown LABKIT_* name is a warning, said in its own line at the end
    except ValueError as exc:
        raise SetupProblem(f"{exc}; fix: correct it or unset it (`python -m labkit settings` lists them)") from exc


def check_imports() -> dict[str, str]:
    """Import every package the course needs; return their versions, or say which one is broken and how to fix it."""
    versions = {}
    for name, fix in REQUIRED.items():
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            raise SetupProblem(f"cannot import {name} ({type(exc).__name__}: {exc}); fix: {fix}") from exc
        versions[name] = getattr(module, "__version__", "?")
    return versions


def check_torchvision_ops() -> None:
    """torchvision's compiled operators must match torch, or every detection model fails."""
    import torch
    import torchvision

    boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]])
    try:
        torchvision.ops.nms(boxes, torch.tensor([1.0, 0.5]), 0.5)
    except Exception as exc:
        raise SetupProblem(
            f"torchvision {torchvision.__version__} does not match torch {torch.__version__} "
            f"({type(exc).__name__}: {exc}); fix: reinstall both from the pins with `make clean lab`"
        ) from exc


def check_device(name: str | None):
    """Choose the device and check that a matmul on it gives the CPU's answer; return the device."""
    import torch

    from ..core.device import choose_device

    try:
        device = choose_device(name)
    except ValueError as exc:
        raise SetupProblem(f"{exc}; fix: set LABKIT_DEVICE to one of the available devices, or unset it") from exc
    a = torch.randn(64, 64)
    try:
        on_device = (a.to(device) @ a.to(device)).cpu()
    except Exception as exc:
        raise SetupProblem(f"a matmul on {device} failed ({type(exc).__name__}: {exc})") from exc
    if not torch.allclose(on_device, a @ a, rtol=1e-2, atol=1e-2):
        raise SetupProblem(f"a matmul on {device} gave a different answer from the CPU; the driver may be broken")
    return device


def check_cores() -> Finding:
    """The usable CPU cores, and what the course does with them (``labkit.start``'s thread setting)."""
    from ..core.device import usable_cores
    from .session import default_threads

    cores, threads = usable_cores(), default_threads()
    if cores >= 2:
        return all_clear(
            "cores",
            f"{cores} usable cores: the notebooks run PyTorch on {threads} of them and leave "
            f"{cores - threads} to the rest of the machine",
        )
    return Finding(
        "note",
        "cores",
        "1 usable core: the notebooks run, on 1 thread with no core left free, so every other program slows them "
        "and their timings are noisier; the quick profile's budgets were measured on 2 cores, and the claims whose "
        "premise is a free core (a pipeline's overlap, an async save, the background trainer, data-loader workers) "
        "will say undecided. Fix: give the virtual machine or container 2 cores or more",
    )


def check_disk(where: Path | None = None, min_free_gib: float = MIN_FREE_GIB) -> Finding:
    """Free space on the disk that holds the course's folder (``where``; default: the checkout, else here)."""
    from .records import project_root

    where = where or project_root() or Path.cwd()
    free_gib = shutil.disk_usage(where).free / 2**30
    if free_gib >= min_free_gib:
        return all_clear("disk", f"{free_gib:.1f} GiB free where the course lives (it wants {min_free_gib:g} GiB)")
    return needs_fix(
        "disk",
        f"only {free_gib:.2f} GiB free where the course lives; the build folder, the book and the files the "
        f"notebooks write want {min_free_gib:g} GiB. Fix: free some space (emptying the trash, or `pip cache purge` "
        "for pip's download cache), then run the doctor again",
    )


def find_cpp_compiler() -> str | None:
    """The C++ compiler torch.compile's CPU backend (inductor) would use: ``$CXX``, else g++, c++ or clang++."""
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _compiler_note() -> Finding:
    return Finding(
        "note",
        "compiler",
        "no C++ compiler found. torch.compile on a CPU needs one, so notebook `optimisation`'s compile section will "
        "fail; everything else runs. Fix: Debian/Ubuntu `apt install g++`, macOS `xcode-select --install`, conda "
        "`conda install cxx-compiler`, or set CXX",
    )


# Warnings libraries raise while the doctor works, each said in one plain line: what it means for the course.
KNOWN_WARNINGS = (
    (
        re.compile(r"Enum subclass and is now natively supported by torch.compile"),
        "torchao registers a type the way older PyTorch releases wanted, which this PyTorch calls deprecated: a "
        "message between two libraries' versions, harmless for the course",
    ),
    (
        re.compile(r"No CUDA runtime is found"),
        "PyTorch's C++ extension builder found a CUDA toolkit folder but no usable NVIDIA GPU: expected on a machine "
        "without one, harmless",
    ),
)


@contextmanager
def caught_warnings() -> Iterator[list[tuple[str, str]]]:
    """Catch what libraries warn (``warnings`` and ``logging`` records of WARNING and above) inside the block.

    Yields a list that fills with ``(kind, message)`` pairs; nothing reaches the terminal meanwhile. PyTorch's
    logger has a handler of its own and does not pass records on, so its handlers are swapped out too.
    """
    caught: list[tuple[str, str]] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            caught.append((record.name, record.getMessage()))

    handler = Collect(logging.WARNING)
    loggers = [logging.getLogger(), logging.getLogger("torch")]
    saved = [list(logger.handlers) for logger in loggers]
    for logger in loggers:
        logger.handlers = [handler]
    try:
        with warnings.catch_warnings(record=True) as recorded:
            try:
                yield caught
            finally:
                caught.extend((w.category.__name__, str(w.message)) for w in recorded)
    finally:
        for logger, handlers in zip(loggers, saved, strict=True):
            logger.handlers = handlers


def explain(caught: list[tuple[str, str]]) -> list[Finding]:
    """One plain line per kind of caught warning: what a known one means, else its first line without file or code.

    Noisy measurements (labkit's :class:`~labkit.instruments.timing.NoisyMeasurementWarning`) share one line.
    """
    from ..instruments.timing import NOISE_THRESHOLD, NoisyMeasurementWarning

    lines: dict[str, Finding] = {}
    noisy = [text for kind, text in caught if kind == NoisyMeasurementWarning.__name__]
    spreads = [int(m.group(1)) for m in (re.search(r"IQR is (\d+)% of the median", text) for text in noisy) if m]
    if noisy:
        low, high = (min(spreads), max(spreads)) if spreads else (None, None)
        by = f"{low}%" + (f" to {high}%" if high != low else "") if spreads else f"more than {NOISE_THRESHOLD:.0%}"
        lines["noise"] = Finding(
            "note",
            "noise",
            f"{len(noisy)} measurement(s) spread by {by} of their median (noisy above {NOISE_THRESHOLD:.0%}): "
            "another program was using the "
            "machine, so read the ceilings as rough; close other programs and run the doctor again, or see notebook "
            "`start_here`'s longer measurement",
        )
    for kind, text in caught:
        if kind == NoisyMeasurementWarning.__name__:
            continue
        meaning = next((meaning for pattern, meaning in KNOWN_WARNINGS if pattern.search(text)), None)
        if meaning is None and text.startswith("LABKIT_"):  # labkit's own, about a setting: plain already
            meaning = text
        elif meaning is None:
            first = text.strip().splitlines()[0][:200] if text.strip() else "(no message)"
            meaning = f"a library warned ({kind}): {first}; the doctor does not know it, and it stops nothing"
        lines.setdefault(meaning, Finding("note", "warning", meaning))
    return list(lines.values())


def _ceilings(device: Any, out: Any) -> None:
    """Notebook `start_here`'s ceilings, with its sizes for this device and the notebooks' thread count."""
    import torch

    from ..core.device import threads
    from ..instruments.ceilings import low_precision_dtype, measure_copy_bandwidth, measure_matmul_ceiling
    from . import sizes
    from .session import default_threads

    profile, _ = sizes.choose_profile("auto", device)
    cfg: Any = sizes.settings("start_here", profile)  # StartHereSizes
    n_threads = default_threads()
    print(f"labkit doctor: measured ceilings ({profile} profile sizes of notebook `start_here`, {n_threads} PyTorch "
          f"thread{'s' if n_threads > 1 else ''} as the notebooks use; short runs, so rough)", file=out)  # fmt: skip
    with threads(n_threads):
        for dtype in (torch.float32, low_precision_dtype(device)):
            c = measure_matmul_ceiling(device, dtype, n=cfg.matmul_n, min_run_s=cfg.min_run_s)
            print(f"  {c.name:20s} {c.value / 1e9:10.1f} GFLOP/s  ({c.size})", file=out)
        bw = measure_copy_bandwidth(device, mib=cfg.copy_mib, min_run_s=cfg.min_run_s)
        print(f"  {bw.name:20s} {bw.value / 1e9:10.1f} GB/s     ({bw.size}, read + write)", file=out)


def run(device_name: str | None = None, ceilings: bool = True, out=None, *, processes: bool = True) -> int:
    """Run every check, print one line each, the card and the ceilings; return the exit code (0 = ready).

    ``processes=False`` leaves out the two checks that start processes (the kernel and the process group).
    """
    out = out or sys.stdout  # read when called: a caller may have redirected it
    problems = 0

    def show(finding: Finding) -> None:
        nonlocal problems
        problems += finding.status == "PROBLEM"
        print(finding.line(), file=out)

    print("labkit doctor: checking this machine for the course", file=out)
    with caught_warnings() as caught:
        try:
            check_settings()
            versions = check_imports()
            check_torchvision_ops()
            device = check_device(device_name)
        except SetupProblem as exc:
            print(f"labkit doctor: PROBLEM: {exc}", file=out)
            return 1
        show(all_clear("packages", ", ".join(f"{k} {v}" for k, v in versions.items())))
        show(all_clear("device", f"{device}: a matmul on it gives the CPU's answer"))
        checks: list[Callable[[], Finding]] = [check_cores, check_disk, check_widgets]
        checks += [check_kernel, check_process_group] if processes else []
        for check in checks:
            show(check())
        if device.type == "cpu" and find_cpp_compiler() is None:
            show(_compiler_note())

        from ..core.device import threads
        from .records import machine_card
        from .session import default_threads

        with threads(default_threads()):  # the card's torch_threads: what the notebooks run with
            card = machine_card(device)
        print("labkit doctor: machine card", file=out)
        for key, value in card.items():
            if value not in (None, [], ""):
                print(f"  {key:20s} {value}", file=out)
        if ceilings:
            _ceilings(device, out)
    for finding in explain(caught):
        print(finding.line(), file=out)
    if problems:
        print(f"labkit doctor: {problems} PROBLEM line(s) above; fix them, then run the doctor again", file=out)
        return 1
    print(f"labkit doctor: OK, ready to run the notebooks on {device}", file=out)
    return 0
