"""``python -m labkit doctor``: the pre-flight check for a learner's or an attendee's machine.

Taught in notebook `start_here`. Prints the machine card and the measured ceilings; exits non-zero with
a message saying what is wrong and how to fix it when the set-up is broken.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys

from ..core.errors import SetupProblem

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


def find_cpp_compiler() -> str | None:
    """The C++ compiler torch.compile's CPU backend (inductor) would use: ``$CXX``, else g++, c++ or clang++."""
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def run(device_name: str | None = None, ceilings: bool = True, out=sys.stdout) -> int:
    """Run every check, print the card and ceilings; return the exit code (0 = ready)."""
    try:
        versions = check_imports()
        check_torchvision_ops()
        device = check_device(device_name)
    except SetupProblem as exc:
        print(f"labkit doctor: PROBLEM: {exc}", file=out)
        return 1

    from ..instruments.ceilings import low_precision_dtype, measure_copy_bandwidth, measure_matmul_ceiling
    from .records import machine_card

    card = machine_card(device)
    print("labkit doctor: machine card", file=out)
    for key, value in card.items():
        if value not in (None, [], ""):
            print(f"  {key:20s} {value}", file=out)
    print(f"  {'packages':20s} " + ", ".join(f"{k} {v}" for k, v in versions.items()), file=out)
    if ceilings:
        n = 4096 if device.type == "cuda" else 1024
        print("labkit doctor: measured ceilings (short runs; notebook `start_here` measures them properly)", file=out)
        for dtype in (None, low_precision_dtype(device)):
            import torch

            c = measure_matmul_ceiling(device, dtype or torch.float32, n=n, min_run_s=0.1)
            print(f"  {c.name:20s} {c.value / 1e9:10.1f} GFLOP/s  ({c.size})", file=out)
        bw = measure_copy_bandwidth(device, mib=256 if device.type == "cuda" else 64, min_run_s=0.1)
        print(f"  {bw.name:20s} {bw.value / 1e9:10.1f} GB/s     ({bw.size}, read + write)", file=out)
    if device.type == "cpu" and find_cpp_compiler() is None:
        print(
            "labkit doctor: NOTE: no C++ compiler found. torch.compile on a CPU needs one, so notebook `optimisation`'s compile "
            "section will fail; everything else runs. Fix: Debian/Ubuntu `apt install g++`, macOS "
            "`xcode-select --install`, conda `conda install cxx-compiler`, or set CXX.",
            file=out,
        )
    print(f"labkit doctor: OK, ready to run the notebooks on {device}", file=out)
    return 0
