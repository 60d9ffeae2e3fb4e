"""MLPerf-style load scenarios for :class:`~labkit.serving.batcher.DynamicBatcher` (notebooks `latency_throughput` and `sharing_a_gpu`).

:func:`single_stream`, :func:`offline` and :func:`poisson` drive the server like MLPerf Inference's LoadGen
scenarios: one request at a time (latency percentiles), everything at once (samples/s), and requests arriving at
random at a target rate. Latency counts from each request's *scheduled* arrival, so a slow server cannot hide its
backlog by delaying the generator (coordinated omission). :func:`find_max_rate` asks the server scenario's
question: the highest arrival rate whose p99 latency stays under a bound. :mod:`labkit.serving.web` re-exports them.
"""

from __future__ import annotations

import contextlib
import gc
import math
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np
import torch

from ..core import checks
from ..core.result import Result
from .batcher import DynamicBatcher


@dataclass
class LoadResult(Result):
    """Latencies of one load run, and what it achieved."""

    scenario: str
    latencies_s: np.ndarray = field(repr=False)
    duration_s: float
    offered_rate: float | None = None  # requests/s asked for (server scenario)
    batch_sizes: np.ndarray = field(default_factory=lambda: np.array([]), repr=False)

    def percentile_ms(self, q: float) -> float:
        return float(np.percentile(self.latencies_s, q) * 1e3)

    @property
    def p50_ms(self) -> float:
        return self.percentile_ms(50)

    @property
    def p90_ms(self) -> float:
        return self.percentile_ms(90)

    @property
    def p99_ms(self) -> float:
        return self.percentile_ms(99)

    @property
    def throughput(self) -> float:
        """Requests answered per second over the run."""
        return len(self.latencies_s) / self.duration_s

    @property
    def mean_batch(self) -> float:
        return float(self.batch_sizes.mean()) if len(self.batch_sizes) else float("nan")

    def to_dict(self) -> dict:
        return dict(
            scenario=self.scenario,
            requests=len(self.latencies_s),
            p50_ms=self.p50_ms,
            p90_ms=self.p90_ms,
            p99_ms=self.p99_ms,
            throughput=self.throughput,
            offered_rate=self.offered_rate,
            mean_batch=self.mean_batch,
            duration_s=self.duration_s,
        )

    def __str__(self) -> str:
        rate = f" at {self.offered_rate:,.0f}/s offered" if self.offered_rate else ""
        return (
            f"{self.scenario}{rate}: {len(self.latencies_s)} requests, p50 {self.p50_ms:.2f} ms, "
            f"p90 {self.p90_ms:.2f} ms, p99 {self.p99_ms:.2f} ms, {self.throughput:,.0f} requests/s, "
            f"mean batch {self.mean_batch:.1f}"
        )


def _check_n(n: int) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"the number of requests must be a positive integer, got {n!r}")


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Like ``timeit``, pause the garbage collector for a run: a full collection in the middle of one
    (thousands of futures make it likely) stalls every request by tens of milliseconds and says nothing
    about the model. Collected once before, re-enabled after."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _drive(server: DynamicBatcher, generate: Callable[[threading.Event], list[Future]], timeout_s: float) -> None:
    """Run ``generate`` in a helper thread while ``server`` serves in this one; wait for every answer."""
    stop = threading.Event()
    futures: list[Future] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            futures.extend(generate(stop))
        except BaseException as exc:  # reported below, in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=run, name="labkit-load", daemon=True)
    deadline = time.perf_counter() + timeout_s
    thread.start()
    try:
        server.serve(until=lambda: not thread.is_alive() or time.perf_counter() > deadline)
    finally:
        stop.set()
        thread.join(timeout=5)
    if errors:
        raise errors[0]
    for f in futures:
        f.result(timeout=max(0.001, deadline - time.perf_counter()))


def _result(server: DynamicBatcher, scenario: str, start: float | None = None, rate: float | None = None) -> LoadResult:
    timings = list(server.timings)
    begin = min(t.arrival_s for t in timings) if start is None else start
    return LoadResult(
        scenario,
        np.array([t.latency_s for t in timings]),
        max(t.done_s for t in timings) - begin,
        offered_rate=rate,
        batch_sizes=np.array([t.batch_size for t in timings]),
    )


def single_stream(
    server: DynamicBatcher, make_input: Callable[[int], torch.Tensor], n: int, timeout_s: float = 120
) -> LoadResult:
    """MLPerf's single stream: one request at a time; the next is sent when the previous answer arrives.

    Taught in notebook `latency_throughput`.
    """
    _check_n(n)
    inputs = [make_input(i) for i in range(n)]
    server.reset_timings()

    def generate(stop: threading.Event) -> list[Future]:
        done = []
        for x in inputs:
            if stop.is_set():
                break
            f = server.submit(x)
            f.result(timeout=timeout_s)
            done.append(f)
        return done

    with _gc_paused():
        _drive(server, generate, timeout_s)
    return _result(server, "single stream")


def offline(
    server: DynamicBatcher, make_input: Callable[[int], torch.Tensor], n: int, timeout_s: float = 120
) -> LoadResult:
    """MLPerf's offline: all ``n`` requests at once; what matters is how soon the last one is done.

    Taught in notebook `latency_throughput`.
    """
    _check_n(n)
    inputs = [make_input(i) for i in range(n)]
    server.reset_timings()
    with _gc_paused():
        start = time.perf_counter()
        futures = [server.submit(x, arrival_s=start) for x in inputs]  # queued before serving starts
        _drive(server, lambda stop: futures, timeout_s)
    return _result(server, "offline", start=start)


def poisson(
    server: DynamicBatcher,
    make_input: Callable[[int], torch.Tensor],
    rate: float,
    n: int,
    seed: int = 0,
    max_s: float = 30.0,
) -> LoadResult:
    """MLPerf's server scenario: requests arriving at random (a Poisson process) at ``rate`` per second.

    Taught in notebook `latency_throughput`.

    Arrival times are drawn up front; a request is submitted as soon as its time has come and
    its latency counts from that scheduled time. Stops submitting after ``max_s`` seconds.
    """
    _check_n(n)
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not 0 < rate < math.inf:
        raise ValueError(f"rate must be a positive number of requests per second, got {rate!r}")
    checks.positive("max_s", max_s)
    rng = random.Random(seed)
    gaps = [rng.expovariate(rate) for _ in range(n)]
    inputs = [make_input(i) for i in range(n)]
    server.reset_timings()

    def generate(stop: threading.Event) -> list[Future]:
        futures = []
        start = time.perf_counter()
        due = start
        for x, gap in zip(inputs, gaps, strict=True):
            due += gap
            if stop.is_set() or due - start > max_s:
                break
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            futures.append(server.submit(x, arrival_s=due))
        return futures

    with _gc_paused():
        _drive(server, generate, max_s + 60)
    return _result(server, "server", rate=rate)


@dataclass
class RateSearch(Result):
    """The server scenario's answer: the highest rate that met the p99 bound, and every trial."""

    best_rate: float | None
    best: LoadResult | None
    p99_bound_ms: float
    trials: list[LoadResult]


def find_max_rate(
    server: DynamicBatcher,
    make_input: Callable[[int], torch.Tensor],
    p99_bound_ms: float,
    low: float,
    high: float,
    n: int = 400,
    steps: int = 6,
    seed: int = 0,
) -> RateSearch:
    """Bisect on the arrival rate (geometrically) for the highest one whose p99 latency meets the bound.

    Taught in notebook `latency_throughput`.

    A trial meets the bound when its p99 is within ``p99_bound_ms`` *and* the server kept up
    (achieved at least 90% of the offered rate); a rate counts as failed only if a second trial at it
    fails too, so one stall of a shared machine does not end the search. That rule leans the answer
    upwards (a rate that fails half its trials passes three times in four), where MLPerf accepts a rate
    on one valid run: read the result as an upper estimate, with its trials. MLPerf runs each trial for
    at least 10 minutes; here each is ``n`` requests, so a p99 rests on a handful of requests: a quick
    estimate, not a certified one.

    Latency is not always lowest at the lowest load: between sparse requests a machine's threads and
    cores go to sleep and take a while to wake, and a batching server makes a lone request wait for
    company. So if ``low`` fails, three higher rates on the way to ``high`` are tried before giving up,
    and the bisection starts from the first that meets the bound.
    """
    checks.positive("p99_bound_ms", p99_bound_ms)
    checks.positive("low", low)
    checks.positive("high", high)
    checks.whole("steps", steps, minimum=0)
    _check_n(n)
    if not 0 < low < high:
        raise ValueError(f"need 0 < low < high, got low={low}, high={high}")
    trials: list[LoadResult] = []

    def one_trial(rate: float) -> bool:
        result = poisson(server, make_input, rate, n, seed=seed + len(trials))
        trials.append(result)
        return result.p99_ms <= p99_bound_ms and result.throughput >= 0.9 * rate

    def meets(rate: float) -> bool:
        return one_trial(rate) or one_trial(rate)  # a failure must repeat: one stall of the machine is not a verdict

    for lo in (low * (high / low) ** (k / 4) for k in range(4)):  # low, then three rates on the way to high
        if meets(lo):
            break
    else:
        return RateSearch(None, None, p99_bound_ms, trials)
    best, hi = trials[-1], high  # the trial that met the bound
    for _ in range(steps):
        mid = (lo * hi) ** 0.5
        if meets(mid):
            lo, best = mid, trials[-1]  # the trial that met the bound
        else:
            hi = mid
    return RateSearch(lo, best, p99_bound_ms, trials)


# -- HTTP ------------------------------------------------------------------------------------
