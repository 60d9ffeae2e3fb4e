"""Experiment sizes: the quick and full sizes of every notebook, in one place (the profile picks which).

Taught in notebook `start_here`. A notebook's ``parameters`` cell holds ``PROFILE = "auto"``; papermill may
override it, and nbval (which cannot inject parameters) sets ``LABKIT_PROFILE`` instead.

- ``quick``: fits each notebook into its CI budget on 2 CPU cores.
- ``full``: the real lesson, on a GPU or a patient laptop.
- ``auto``: ``LABKIT_PROFILE`` if set, else ``full`` on a CUDA GPU with the memory and speed the full sizes
  need (:func:`choose_profile`) and ``quick`` elsewhere.
"""

from __future__ import annotations

import dataclasses

import torch

from ..core import environment
from . import manifest
from .notebook_sizes import SIZES, Sizes

PROFILE_ENV = "LABKIT_PROFILE"
PROFILES = ("quick", "full", "auto")


# What the full profile is sized for: it ran on datacenter GPUs (results/reference), where the largest notebook
# needs a few GiB at once (notebook `memory`'s 8 GiB ballast beside its models; `input_size`'s naive attention
# scores at 8,192 tokens, 4.3 GB, beside their softmax) and `estimating_a_job` searches up to a 16 GiB budget.
# Below these, "auto" keeps the quick sizes: a 16 GB T4 or an 8 GB laptop GPU would run out of memory, and at
# 8 TFLOP/s of float32 (a T4) the full sizes would take many times as long as on the GPUs they were sized on.
FULL_MIN_GIB = 20.0
FULL_MIN_FP32_TFLOPS = 20.0


def full_profile_shortfall(memory_gib: float, fp32_tflops: float, gpu: str) -> str | None:
    """Why the full profile does not fit a GPU with ``memory_gib`` (as it reports it) and ``fp32_tflops``.

    None when it fits; :func:`choose_profile` reads the figures from the device (the profiles: notebook `start_here`).
    """
    short = []
    if memory_gib < FULL_MIN_GIB:
        short.append(f"{memory_gib:.1f} GiB of memory (the full sizes want {FULL_MIN_GIB:.0f})")
    if fp32_tflops < FULL_MIN_FP32_TFLOPS:
        short.append(f"{fp32_tflops:.1f} TFLOP/s of float32 (the full sizes want {FULL_MIN_FP32_TFLOPS:.0f})")
    return f"this {gpu} has " + " and ".join(short) if short else None


def _device_shortfall(device: torch.device) -> str | None:
    from ..instruments import ceilings

    if not torch.cuda.is_available():  # a CUDA device named on a machine without one: nothing to read
        return None
    name = torch.cuda.get_device_name(device)
    memory_gib = torch.cuda.get_device_properties(device).total_memory / 2**30
    sheet = ceilings.datasheet_for(name)
    if sheet is not None:
        fp32 = sheet.fp32_tflops
    else:  # a GPU without a datasheet row: a quarter of a second of matmuls says how fast it is
        fp32 = ceilings.measure_matmul_ceiling(device, torch.float32, n=2048, min_run_s=0.05).value / 1e12
    return full_profile_shortfall(memory_gib, fp32, name)


def choose_profile(value: str | None = "auto", device: torch.device | str | None = None) -> tuple[str, str | None]:
    """Turn a ``PROFILE`` parameter into ``"quick"`` or ``"full"``, with the reason when the device decided.

    Called by ``labkit.start`` (the profiles: notebook `start_here`). An unknown value raises ``ValueError`` listing the allowed ones, so a typo in
    a parameters cell or in ``LABKIT_PROFILE`` stops the notebook at its first cell rather than running the wrong
    sizes for minutes. "auto" picks "full" on a CUDA GPU that has what the full sizes need (:data:`FULL_MIN_GIB`,
    :data:`FULL_MIN_FP32_TFLOPS`) and "quick" elsewhere; the reason says what fell short. An explicit "full" is
    obeyed, and the reason is then a warning of what may happen.
    """
    requested = (value or "auto").strip().lower()
    if requested not in PROFILES:
        raise ValueError(f"unknown profile {value!r}; allowed: {', '.join(PROFILES)}")
    if requested == "auto":
        requested = environment.get(PROFILE_ENV) or "auto"
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if requested == "quick" or dev.type != "cuda":
        return ("full" if requested == "full" else "quick"), None
    shortfall = _device_shortfall(dev)
    if requested == "full":
        return "full", None if shortfall is None else f"{shortfall}: the full sizes may run out of memory or for long"
    if shortfall is None:
        return "full", None
    return "quick", f'{shortfall}: quick sizes (PROFILE = "full" runs the full ones anyway)'


def resolve_profile(value: str | None = "auto", device: torch.device | str | None = None) -> str:
    """The profile :func:`choose_profile` picks, without its reason (notebook `start_here`)."""
    return choose_profile(value, device)[0]


def settings(notebook: str, profile: str) -> Sizes:
    """The sizes of ``notebook``'s experiments for a resolved ``profile`` ("quick" or "full").

    ``notebook`` is a slug of :data:`labkit.lab.manifest.NOTEBOOKS` (an unknown one is an error listing them); a
    notebook without experiments to size has no entry in :data:`SIZES` and gets only its name and profile.
    """
    manifest.entry(notebook)
    if profile not in ("quick", "full"):
        raise ValueError(f"profile must be resolved to 'quick' or 'full' first, got {profile!r}")
    sized = SIZES.get(notebook, {}).get(profile, Sizes())
    return dataclasses.replace(sized, notebook=notebook, profile=profile)
