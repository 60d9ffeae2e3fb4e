"""The machine's two ceilings (peak matmul FLOP/s and memory bandwidth) and the roofline.

Taught in notebook `start_here`; later notebooks place their operations on this roofline.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from ..core import checks, compat
from ..core.result import Result
from ..predict.specs import datasheet_for
from .flops import matmul_flops
from .timing import TimingRecord, measure


def _device(device: torch.device | str) -> torch.device:
    try:
        return torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be a device such as 'cpu', 'cuda:0' or 'mps', got {device!r}") from None


def tf32_allowed() -> bool:
    """Whether float32 matmuls on an NVIDIA GPU may use TF32 tensor cores right now (see :func:`tf32_matmuls`)."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):  # PyTorch 2.9 and later
        return matmul.fp32_precision == "tf32"
    return torch.get_float32_matmul_precision() != "highest"


def datasheet_peak_flops(
    device: torch.device | str, dtype: torch.dtype = torch.float32, *, device_name: str | None = None
) -> float | None:
    """The datasheet's dense peak FLOP/s for ``dtype`` on ``device``, or ``None`` where there is none (a CPU, a GPU
    not in :data:`labkit.predict.specs.DATASHEETS`, a format it has no units for). Taught in notebook `inference_vs_training`.

    MFU as practitioners quote it (Chowdhery et al., 2022, appendix B) divides achieved FLOP/s by this figure. For
    float32 it is the TF32 tensor-core figure when TF32 is allowed (:func:`tf32_allowed`), else plain fp32.
    ``device_name`` overrides the name read from the device (for tests and reference results).
    """
    device = torch.device(device)
    if device_name is None:
        if device.type != "cuda":
            return None
        device_name = torch.cuda.get_device_name(device)
    sheet = datasheet_for(device_name)
    if sheet is None:
        return None
    peak = {torch.bfloat16: sheet.bf16_tflops, torch.float16: sheet.fp16_tflops}.get(dtype)
    if dtype == torch.float32:
        peak = sheet.tf32_tflops if tf32_allowed() and sheet.tf32_tflops is not None else sheet.fp32_tflops
    elif dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"no datasheet peak for {dtype}; allowed: torch.float32, torch.bfloat16, torch.float16")
    return None if peak is None else peak * 1e12


@contextlib.contextmanager
def tf32_matmuls() -> Iterator[None]:
    """Inside the block, float32 matmuls on an NVIDIA GPU may use TF32 tensor cores. Taught in notebook `start_here`.

    TF32 keeps float32's range but rounds the inputs to 10 mantissa bits (float32 has 23), and runs several times
    faster on Ampere and later GPUs. PyTorch leaves it off for matmuls by default, so plain float32 code gets the
    datasheet's fp32 figure, not its TF32 one. CPU matmuls are unaffected.
    """
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):  # PyTorch 2.9 and later
        before = matmul.fp32_precision
        matmul.fp32_precision = "tf32"
        try:
            yield
        finally:
            matmul.fp32_precision = before
    else:
        before = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("high")
        try:
            yield
        finally:
            torch.set_float32_matmul_precision(before)


def low_precision_dtype(device: torch.device | str) -> torch.dtype:
    """The 16-bit type worth using on ``device``: bf16 on CPUs and on GPUs with bf16 units, else fp16.

    Taught in notebook `start_here`. A GPU without bf16 units (a T4, compute capability 7.5) runs bf16 emulated,
    slower than fp16, so it gets fp16 (and fp16 training needs ``torch.amp.GradScaler``); Apple's MPS gets fp16.
    """
    device = torch.device(device)
    if device.type == "cuda" and not compat.native_bf16(device):
        return torch.float16
    if device.type == "mps":
        return torch.float16
    return torch.bfloat16


@dataclass
class Ceiling(Result):
    """One measured ceiling: a rate and how it was measured."""

    name: str
    value: float  # FLOP/s or bytes/s
    unit: str
    timing: TimingRecord
    size: str

    def to_dict(self) -> dict:
        return dict(name=self.name, value=self.value, unit=self.unit, size=self.size, timing=self.timing.to_dict())


def measure_matmul_ceiling(
    device: torch.device | str, dtype: torch.dtype = torch.float32, n: int = 1024, min_run_s: float = 0.2
) -> Ceiling:
    """Peak matmul rate: an n×n by n×n product, 2·n³ FLOPs, timed with :func:`labkit.measure`. Taught in notebook `start_here`."""
    device = _device(device)
    checks.whole("n", n)
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    name = f"matmul {str(dtype).removeprefix('torch.')}"
    record = measure(torch.matmul, a, b, label=f"{name} {n}x{n}", device=device, min_run_s=min_run_s)
    return Ceiling(name, matmul_flops(n, n, n) / record.median_s, "FLOP/s", record, f"{n}x{n}")


def measure_copy_bandwidth(device: torch.device | str, mib: int = 128, min_run_s: float = 0.2) -> Ceiling:
    """Memory bandwidth from a large copy: bytes read plus bytes written, per second.

    Taught in notebook `start_here`.

    ``mib`` should be several times the last-level cache, or the copy runs from cache.
    """
    device = _device(device)
    checks.whole("mib", mib)
    n = mib * 2**20 // 4
    src = torch.ones(n, device=device, dtype=torch.float32)
    dst = torch.empty_like(src)
    record = measure(dst.copy_, src, label=f"copy {mib} MiB", device=device, min_run_s=min_run_s)
    return Ceiling("copy bandwidth", 2 * src.nbytes / record.median_s, "B/s", record, f"{mib} MiB")


def measure_roofline(
    device: torch.device | str,
    min_run_s: float = 0.2,
    n: int = 1024,
    mib: int = 128,
    dtype: torch.dtype = torch.float32,
) -> Roofline:
    """Both ceilings in one call, as a :class:`Roofline` (notebooks `inference_vs_training`, `model_size`, `memory` predict times from it).

    Notebook `start_here` measures the two ceilings one by one and explains them; later notebooks only need
    the result.
    """
    device = _device(device)
    peak = measure_matmul_ceiling(device, dtype, n=n, min_run_s=min_run_s)
    bandwidth = measure_copy_bandwidth(device, mib=mib, min_run_s=min_run_s)
    return Roofline(peak.value, bandwidth.value, label=f"{str(dtype).removeprefix('torch.')} roofline")


CEILING_MATMUL, CEILING_COPY = "matmul (ceiling)", "copy (ceiling)"


@dataclass
class CeilingCalls:
    """The two ceilings' calls, to be timed in the *same* interleaved rounds as the operations a timing claim
    compares with them (:mod:`labkit.claims`; notebooks `start_here`, `inference_vs_training` and `latency_throughput`).

    A roofline measured once, seconds before or after, can land in a busy moment of the machine and make every
    prediction from it wrong by that moment's factor; timed round by round beside the operations, the ceilings
    and the operations see the machine in the same state. ``peak``, ``bandwidth`` and ``predict_seconds`` take
    the per-variant statistics (floats or arrays of bootstrap resamples).
    """

    n: int
    mib: int
    variants: dict[str, Callable[[], object]]

    def peak(self, stats):
        """FLOP/s of the n×n matmul: 2·n³ FLOPs per call."""
        return matmul_flops(self.n, self.n, self.n) / stats[CEILING_MATMUL]

    def bandwidth(self, stats):
        """Bytes per second of the copy, bytes read plus bytes written (as :func:`measure_copy_bandwidth`)."""
        return 2 * self.mib * 2**20 / stats[CEILING_COPY]

    def predict_seconds(self, stats, flops: float, bytes_moved: float):
        """The roofline's time: max(FLOPs ÷ peak, bytes ÷ bandwidth), from the ceilings in ``stats``."""
        return np.maximum(flops / self.peak(stats), bytes_moved / self.bandwidth(stats))


def ceiling_calls(device: torch.device | str, n: int = 1024, mib: int = 128) -> CeilingCalls:
    """The float32 matmul and copy of :func:`measure_roofline`, as calls for :func:`labkit.claims.decide`.

    Taught in notebook `start_here`.
    """
    device = _device(device)
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    src = torch.ones(mib * 2**20 // 4, device=device)
    dst = torch.empty_like(src)
    return CeilingCalls(n, mib, {CEILING_MATMUL: lambda: torch.matmul(a, b), CEILING_COPY: lambda: dst.copy_(src)})


@dataclass
class Roofline(Result):
    """Attainable FLOP/s = min(peak FLOP/s, intensity × bandwidth). Taught in notebook `start_here`."""

    peak_flops: float
    bandwidth: float
    label: str = ""

    @property
    def ridge_intensity(self) -> float:
        """FLOPs per byte where an operation stops being memory-bound."""
        return self.peak_flops / self.bandwidth

    def attainable(self, intensity: float) -> float:
        return min(self.peak_flops, intensity * self.bandwidth)

    def bound(self, intensity: float) -> str:
        return "compute-bound" if intensity >= self.ridge_intensity else "memory-bound"

    def predict_seconds(self, flops: float, bytes_moved: float) -> float:
        """The roofline's time for an operation: the slower of doing its maths and moving its bytes."""
        return max(flops / self.peak_flops, bytes_moved / self.bandwidth)
