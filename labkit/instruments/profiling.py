"""Where the time goes: the profiler, a loop split into waiting for data and computing, Amdahl's law.

Taught in notebook `where_time_goes`. ``torch.profiler`` does the operator-level work (its table and its trace);
labkit adds the two numbers a profile is usually read for: how much of each step the loop spent
waiting for its next batch, and how much computing, and what that means for the next move.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from ..core.device import sync
from ..core.result import Result


def profile_steps(
    step: Callable[[], object],
    steps: int = 5,
    warmup: int = 2,
    device: torch.device | str | None = None,
    record_shapes: bool = False,
) -> profile:
    """Run ``step`` ``warmup + steps`` times under ``torch.profiler`` and return the profiler (notebook `where_time_goes`).

    The warm-up steps run with the profiler on but are not recorded (``torch.profiler.schedule``),
    so one-off costs do not crowd the table. On CUDA, device time is recorded too.
    """
    if steps < 1 or warmup < 0:
        raise ValueError(f"need steps >= 1 and warmup >= 0, got steps={steps}, warmup={warmup}")
    device = torch.device(device) if device is not None else torch.device("cpu")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(
        activities=activities,
        schedule=schedule(wait=0, warmup=warmup, active=steps, repeat=1),
        record_shapes=record_shapes,
    ) as prof:
        for _ in range(warmup + steps):
            with record_function("training step"):
                step()
            sync(device)
            prof.step()
    return prof


def top_operators(prof: profile, n: int = 10, device: torch.device | str | None = None) -> str:
    """The profiler's own table of the ``n`` operators with the most self time (CPU, or CUDA on a GPU).

    Taught in notebook `where_time_goes`.
    """
    on_cuda = device is not None and torch.device(device).type == "cuda"
    key = "self_cuda_time_total" if on_cuda else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=n, max_name_column_width=40)


def export_trace(prof: profile, path: str | Path) -> Path:
    """Write a Chrome-trace JSON for Perfetto (ui.perfetto.dev) or chrome://tracing; returns the path.

    Taught in notebook `where_time_goes`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(path))
    return path


@dataclass
class LoopTiming(Result):
    """Per step of a training loop: seconds waiting for the next batch, and seconds computing on it."""

    data_s: list[float] = field(default_factory=list)
    compute_s: list[float] = field(default_factory=list)

    @property
    def step_s(self) -> float:
        """Median seconds per step (waiting plus computing)."""
        return float(np.median(np.add(self.data_s, self.compute_s)))

    @property
    def data_fraction(self) -> float:
        """Share of the loop's time spent waiting for input."""
        total = sum(self.data_s) + sum(self.compute_s)
        return sum(self.data_s) / total if total > 0 else 0.0

    def to_dict(self) -> dict:
        return dict(step_s=self.step_s, data_fraction=self.data_fraction, steps=len(self.data_s))


def time_loop(
    batches: Iterable,
    step: Callable[[object], object],
    steps: int,
    device: torch.device | str | None = None,
    skip: int = 2,
) -> LoopTiming:
    """Run ``step(batch)`` over ``batches``, timing the wait for each batch apart from the compute (notebook `where_time_goes`).

    The first ``skip`` steps (worker start-up, warm-up) are run but not recorded. The device is synced
    after each step, so compute time is the device's, not just the time to queue the work.
    """
    timing = LoopTiming()
    it = iter(batches)
    for i in range(skip + steps):
        start = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            break
        got = time.perf_counter()
        step(batch)
        sync(device)
        done = time.perf_counter()
        if i >= skip:
            timing.data_s.append(got - start)
            timing.compute_s.append(done - got)
    if not timing.data_s:
        raise ValueError(f"the loop ended before step {skip + 1}: give more batches than skip={skip}")
    return timing


def amdahl(fraction_sped_up, speedup: float):
    """Overall speed-up when ``fraction_sped_up`` of the time becomes ``speedup`` times faster (Amdahl's law).

    ``fraction_sped_up`` may be an array (bootstrap resamples of a measured share, notebook `where_time_goes`'s claim).
    """
    p = np.asarray(fraction_sped_up, dtype=float)
    if ((p < 0.0) | (p > 1.0)).any():
        raise ValueError(f"fraction_sped_up must be between 0 and 1, got {fraction_sped_up}")
    if speedup <= 0:
        raise ValueError(f"speedup must be positive, got {speedup}")
    result = 1.0 / ((1.0 - p) + p / speedup)
    return float(result) if result.ndim == 0 else result


def loader_speedup(waiting_share, workers: int, idle_cores):
    """The most DataLoader workers can speed up an input-bound loop, from first principles (notebooks `optimisation`, `where_time_goes`).

    With ``num_workers=0`` a fraction ``waiting_share`` of each step decodes data and the rest computes, one after
    the other in the main process. With workers, the main process only computes while ``workers`` processes
    decode; they run in parallel only on cores no other program uses: ``idle_cores`` (measured with
    :func:`labkit.instruments.timing.idle_cores`) less the one the main process needs. A step then takes the longer of
    computing and decoding spread over those cores; with no core free, nothing overlaps (1.0). Array inputs
    (bootstrap resamples) give an array.
    """
    d = np.asarray(waiting_share, dtype=float)
    if ((d < 0.0) | (d > 1.0)).any():
        raise ValueError(f"waiting_share must be between 0 and 1, got {waiting_share}")
    if workers < 0:
        raise ValueError(f"workers must be 0 or more, got {workers}")
    parallel = np.minimum(workers, np.maximum(np.asarray(idle_cores, dtype=float) - 1.0, 0.0))
    with np.errstate(divide="ignore"):
        step = np.maximum(1.0 - d, np.where(parallel > 0, d / np.maximum(parallel, 1e-12), np.inf))
    result = np.where(parallel > 0, np.maximum(1.0, 1.0 / step), 1.0)
    return float(result) if result.ndim == 0 else result


def diagnose(timing: LoopTiming, sync_share: float = 0.0) -> list[str]:
    """Turn a loop's measured split into the next action (notebook `where_time_goes`'s checklist)."""
    advice = []
    if timing.data_fraction > 0.3:
        advice.append(
            f"input-bound: {timing.data_fraction:.0%} of the time waits for data. Decode in DataLoader workers, "
            "prefetch, cache decoded data or move augmentation to the GPU. A faster accelerator would change at "
            f"most the other {1 - timing.data_fraction:.0%} (at most {1 / timing.data_fraction:.1f}x overall)."
        )
    else:
        advice.append(
            f"compute-bound: {1 - timing.data_fraction:.0%} of the time computes. Check the roofline: if it is near "
            "the compute ceiling, a faster device or lower precision helps; if far below it, look for small "
            "kernels, synchronisation and Python overhead in the profiler's trace."
        )
    if sync_share > 0.10:
        advice.append(
            f"{sync_share:.0%} of the step goes to forced synchronisation (.item(), printing, host copies): "
            "read values every N steps, keep metrics on the device."
        )
    return advice
