"""Timing done right: warm-up, device sync, adaptive repeats, a record with its spread.

Taught in notebook `start_here`, which first shows the classic mistakes (no warm-up, no sync, one repeat)
and then this. Built on ``torch.utils.benchmark.Timer``; labkit adds the explicit warm-up with a
clear error when the callable fails, a timer that syncs the *chosen* device (MPS included), the
torch thread count (``Timer`` defaults to one thread), and a JSON-ready record.
"""

from __future__ import annotations

import statistics
import threading
import time
import timeit
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch

from ..core import checks
from ..core.device import sync
from ..core.errors import LabWarning, MeasurementError
from ..core.result import Result

NOISE_THRESHOLD = 0.10  # IQR / median above this is reported as noisy (torch.utils.benchmark uses 10% too)


class NoisyMeasurementWarning(LabWarning):
    """The spread of a measurement is large compared with its median."""


@dataclass
class TimingRecord(Result):
    """One measured callable: median seconds per call and the spread around it."""

    label: str
    median_s: float
    iqr_s: float
    mean_s: float
    min_s: float
    max_s: float
    times_s: list[float] = field(repr=False)  # seconds per call, one value per timed block
    calls_per_block: int = 1
    blocks: int = 0
    warmup_calls: int = 0
    device: str = "cpu"
    threads: int = 1
    items: int | None = None  # items processed per call, for throughput

    @property
    def median_ms(self) -> float:
        return self.median_s * 1e3

    @property
    def relative_spread(self) -> float:
        """IQR / median: 0.02 means the middle half of the runs lie within ±1% of the median."""
        return self.iqr_s / self.median_s if self.median_s > 0 else float("inf")

    @property
    def noisy(self) -> bool:
        return self.relative_spread > NOISE_THRESHOLD

    @property
    def warning(self) -> str | None:
        if not self.noisy:
            return None
        return (
            f"{self.label}: IQR is {self.relative_spread:.0%} of the median over {self.blocks} blocks; "
            "something else is competing for the machine or the work itself varies; "
            "close other programs, measure longer, or report the spread with the number"
        )

    @property
    def items_per_s(self) -> float | None:
        return throughput(self.items, self.median_s) if self.items else None

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(median_ms=self.median_ms, relative_spread=self.relative_spread, noisy=self.noisy)
        if self.items:
            out["items_per_s"] = self.items_per_s
        return out

    def __str__(self) -> str:
        text = (
            f"{self.label}: median {format_seconds(self.median_s)} per call "
            f"(IQR {format_seconds(self.iqr_s)}, {self.relative_spread:.1%}; "
            f"{self.blocks} blocks of {self.calls_per_block} on {self.device}, {self.threads} threads)"
        )
        if self.items:
            text += f", {self.items_per_s:,.0f} items/s"
        return text + (" [noisy]" if self.noisy else "")


def format_seconds(seconds: float) -> str:
    """Seconds in the unit that reads best: ns, µs, ms, s. Taught in notebook `start_here`."""
    checks.amount("seconds", seconds)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def throughput(items: float, seconds: float) -> float:
    """Items per second. ``seconds`` must be positive. Taught in notebook `latency_throughput`."""
    checks.amount("items", items)
    checks.positive("seconds", seconds)
    return items / seconds


def measure(
    fn: Callable,
    *args,
    label: str | None = None,
    device: torch.device | str | None = None,
    warmup: int = 2,
    min_run_s: float = 0.2,
    max_run_s: float | None = None,
    threshold: float = NOISE_THRESHOLD,
    items: int | None = None,
    **kwargs,
) -> TimingRecord:
    """Time ``fn(*args, **kwargs)`` properly and return a :class:`TimingRecord` (notebook `start_here`).

    1. ``warmup`` calls first, untimed: lazy initialisation, allocator growth and kernel selection
       happen here. If ``fn`` raises, :class:`MeasurementError` says so and nothing is timed.
    2. ``torch.utils.benchmark.Timer.adaptive_autorange`` then times blocks of calls, reading the
       clock only after syncing ``device``, until the IQR falls under ``threshold`` × median
       (after at least ``min_run_s``) or ``max_run_s`` (default 5 × ``min_run_s``) has passed.
    3. A spread still above :data:`NOISE_THRESHOLD` is flagged on the record and warned about.
    """
    if not callable(fn):
        raise TypeError(f"measure() needs a callable as its first argument, got {type(fn).__name__}")
    checks.positive("min_run_s", min_run_s)
    checks.whole("warmup", warmup, minimum=0)
    device = torch.device(device) if device is not None else _device_of(args)
    label = label or str(getattr(fn, "__name__", "fn"))
    max_run_s = max_run_s if max_run_s is not None else 5 * min_run_s
    if checks.positive("max_run_s", max_run_s) < min_run_s:
        raise ValueError(f"max_run_s ({max_run_s:g} s) must be at least min_run_s ({min_run_s:g} s)")

    def call() -> None:
        fn(*args, **kwargs)

    try:
        for _ in range(warmup):
            call()
        sync(device)
    except Exception as exc:  # the callable's own failure, reported with its name
        raise MeasurementError(
            f"{label!r} raised {type(exc).__name__} during warm-up, so nothing was measured: {exc}"
        ) from exc

    def synced_clock() -> float:
        sync(device)
        return timeit.default_timer()

    # Imported here, not with labkit: it imports torch.utils.cpp_extension, which warns on every machine without
    # CUDA ("No CUDA runtime is found") unless labkit.start has quietened that logger first.
    from torch.utils import benchmark

    threads = torch.get_num_threads()
    timer = benchmark.Timer(
        stmt="call()",
        globals={"call": call},
        timer=synced_clock,
        num_threads=threads,
        label=label,
    )
    m = timer.adaptive_autorange(threshold=threshold, min_run_time=min_run_s, max_run_time=max_run_s)
    times = list(m.times)
    record = TimingRecord(
        label=label,
        median_s=m.median,
        iqr_s=m.iqr,
        mean_s=m.mean,
        min_s=min(times),
        max_s=max(times),
        times_s=times,
        calls_per_block=m.number_per_run,
        blocks=len(times),
        warmup_calls=warmup,
        device=str(device) if device is not None else "all (synced)",
        threads=threads,
        items=items,
    )
    if record.noisy:
        warnings.warn(str(record.warning), NoisyMeasurementWarning, stacklevel=2)
    return record


def time_once(fn: Callable, *args, device: torch.device | str | None = None, synchronize: bool = True) -> float:
    """Seconds for a single call, the naive way (notebook `start_here` uses it to show the mistakes).

    With ``synchronize=False`` the clock is read as soon as ``fn`` returns, which on a GPU is
    when the work was *queued*, not finished.
    """
    checks.function("fn", fn)
    device = torch.device(device) if device is not None else _device_of(args)
    if synchronize:
        sync(device)
    start = timeit.default_timer()
    fn(*args)
    if synchronize:
        sync(device)
    return timeit.default_timer() - start


def summarize(times_s: list[float]) -> dict:
    """Median, quartiles and extremes of a list of timings, in seconds. Taught in notebook `start_here`."""
    if len(times_s) == 0:
        raise ValueError("times_s is empty; summarize needs one timing or more")
    ordered = sorted(checks.finite_values("times_s", times_s))
    if ordered[0] < 0:
        raise ValueError(f"times_s must hold durations, zero or more; the smallest is {ordered[0]!r}")
    q1, _, q3 = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else (ordered[0],) * 3
    return dict(
        n=len(ordered),
        median_s=statistics.median(ordered),
        iqr_s=q3 - q1,
        min_s=ordered[0],
        max_s=ordered[-1],
    )


def _device_of(args: tuple) -> torch.device | None:
    """The device of the first tensor or module argument; None (sync every device) if there is none."""
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.device
        if isinstance(a, torch.nn.Module):
            p = next(a.parameters(), None)
            if p is not None:
                return p.device
    return None


class competing_load:  # lower case: used like a function, ``with competing_load(): ...``
    """Keep the machine busy with matmuls in a background thread (notebook `start_here`: reading the spread).

    Torch releases the GIL inside its kernels, so the thread really competes for cores, as a
    browser tab or another notebook would. The thread is stopped and joined on exit, always.
    """

    def __init__(self, device: torch.device | str = "cpu", n: int = 512):
        self.device = torch.device(device)
        self.n = n
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self.iterations = 0  # matmuls the competing thread has done: proof that it really ran

    def __enter__(self) -> competing_load:
        stop = self._stop = threading.Event()
        a = torch.randn(self.n, self.n, device=self.device)

        def burn() -> None:
            while not stop.is_set():
                a @ a
                sync(self.device)
                self.iterations += 1

        thread = self._thread = threading.Thread(target=burn, name="labkit-competing-load", daemon=True)
        thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._stop is not None and self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=10)


def _cpu_jiffies() -> tuple[int, int, int] | None:
    """(idle, total, CPUs) from Linux's /proc/stat: the whole machine's CPU time so far; None elsewhere."""
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
        fields = [int(v) for v in lines[0].split()[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError, IndexError):  # elsewhere (no /proc/stat): None
        return None
    cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    return fields[3] + fields[4], sum(fields), cpus


def idle_cores(seconds: float = 0.2, settle_s: float = 0.2, assume: float | None = None) -> float | None:
    """Cores' worth of CPU that no process on the machine used during ``seconds`` (notebooks `sharding`, `optimisation`, `where_time_goes` and `sharing_a_gpu`).

    The calling process sleeps meanwhile, so on an idle 4-core machine this is about 4.0; a browser tab or a
    second job that keeps one core busy brings it to about 3.0. Data-loader workers can only run in parallel
    on such free cores: with none free they add work instead of overlapping it. It first waits ``settle_s``,
    so that work this program has just handed off (a data loader's prefetched batches, PyTorch's threads that
    spin a moment after an operation) is not counted as another program's. Read from Linux's ``/proc/stat``
    (the kernel's CPU-time counters); where that file does not exist, returns ``assume`` (None by default).
    """
    if seconds <= 0 or settle_s < 0:
        raise ValueError(f"seconds must be positive and settle_s not negative, got {seconds} and {settle_s}")
    if assume is not None:
        checks.amount("assume", assume)
    if _cpu_jiffies() is None:
        return assume
    time.sleep(settle_s)
    start = _cpu_jiffies()
    time.sleep(seconds)
    end = _cpu_jiffies()
    if start is None or end is None:
        return assume
    total = end[1] - start[1]
    return end[2] * (end[0] - start[0]) / total if total > 0 else assume
