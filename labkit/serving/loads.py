"""MLPerf-style load scenarios for :class:`~labkit.serving.batcher.DynamicBatcher` (notebooks `latency_throughput` and `sharing_a_gpu`).

:func:`single_stream`, :func:`offline` and :func:`poisson` drive the server like MLPerf Inference's LoadGen
scenarios: one request at a time (latency percentiles), everything at once (samples/s), and requests arriving at
random at a target rate. Latency counts from each request's *scheduled* arrival, so a slow server cannot hide its
backlog by delaying the generator (coordinated omission). :func:`find_max_rate` asks the server scenario's
question: the highest arrival rate whose p99 latency stays under a bound, each rate judged on a trial sized as
LoadGen sizes a run (a minimum duration and its early-stopping count). :mod:`labkit.serving.web` re-exports them;
:mod:`labkit.serving.mlperf` runs MLPerf's own LoadGen on the same server.
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
from .metrics import early_stopping_queries


@dataclass
class LoadResult(Result):
    """Latencies of one load run, and what it achieved."""

    scenario: str
    latencies_s: np.ndarray = field(repr=False)
    duration_s: float
    offered_rate: float | None = None  # requests/s asked for (server scenario)
    batch_sizes: np.ndarray = field(default_factory=lambda: np.array([]), repr=False)
    arrivals_s: float | None = None  # from the first scheduled arrival to the last (server scenario)

    @property
    def arrived_rate(self) -> float | None:
        """Requests per second that actually arrived: a Poisson run's count over its arrivals' span."""
        n = len(self.latencies_s)
        return n / self.arrivals_s if self.arrivals_s and n > 1 else None

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
    arrivals = [t.arrival_s for t in timings]
    return LoadResult(
        scenario,
        np.array([t.latency_s for t in timings]),
        max(t.done_s for t in timings) - begin,
        offered_rate=rate,
        batch_sizes=np.array([t.batch_size for t in timings]),
        arrivals_s=max(arrivals) - min(arrivals) if rate is not None else None,
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
    """The server scenario's answer: the highest rate that met the p99 bound with confidence, and every trial.

    ``trials`` holds one pooled run per rate tried, in order, and ``outcomes`` its verdict: ``"meets"`` (the
    percentile is within the bound with ``confidence``, by LoadGen's early-stopping test), ``"fails"`` (the
    measured percentile is over the bound, or the server fell behind) or ``"unconfirmed"`` (under the bound,
    but too close to it to be confirmed within ``max_n`` requests: counted as a failure, as LoadGen would).
    """

    best_rate: float | None
    best: LoadResult | None
    p99_bound_ms: float
    trials: list[LoadResult]
    outcomes: list[str] = field(default_factory=list)
    percentile: float = 0.99
    confidence: float = 0.99

    @property
    def queries(self) -> int:
        """How many requests the best rate's verdict rests on (0 when no rate met the bound)."""
        return 0 if self.best is None else len(self.best.latencies_s)

    @property
    def overlatency(self) -> int:
        """How many of them were over the bound."""
        return 0 if self.best is None else int((self.best.latencies_s * 1e3 > self.p99_bound_ms).sum())

    def __str__(self) -> str:
        if self.best_rate is None:
            return (
                f"no rate tried met p{100 * self.percentile:g} <= {self.p99_bound_ms:g} ms ({len(self.trials)} trials)"
            )
        return (
            f"highest rate with p{100 * self.percentile:g} <= {self.p99_bound_ms:g} ms at "
            f"{self.confidence:.0%} confidence: {self.best_rate:,.0f} requests/s ({self.queries:,} requests, "
            f"{self.overlatency} over the bound; {len(self.trials)} rates tried)"
        )


def _kept_up(run: LoadResult) -> bool:
    """Whether the server answered at 90% or more of the rate at which requests actually arrived (a Poisson
    run's arrivals stray from the nominal rate by several percent in a few hundred requests)."""
    arrived = run.arrived_rate or run.offered_rate or 0.0
    return run.throughput >= 0.9 * arrived


def trial_size(rate: float, min_duration_s: float, n: int, overlatency: int = 0, percentile: float = 0.99,
               confidence: float = 0.99) -> int:  # fmt: skip
    """Requests a server-scenario trial at ``rate`` needs: at least ``n``, at least ``min_duration_s`` of arrivals,
    and at least LoadGen's early-stopping count for ``overlatency`` requests over the bound: what
    :func:`find_max_rate` runs at each rate (notebook `latency_throughput`).
    """
    checks.positive("rate", rate)
    checks.amount("min_duration_s", min_duration_s)
    _check_n(n)
    return max(n, math.ceil(rate * min_duration_s), early_stopping_queries(overlatency, percentile, confidence))


def find_max_rate(
    server: DynamicBatcher,
    make_input: Callable[[int], torch.Tensor],
    p99_bound_ms: float,
    low: float,
    high: float,
    n: int = 100,
    steps: int = 6,
    seed: int = 0,
    min_duration_s: float = 1.0,
    percentile: float = 0.99,
    confidence: float = 0.99,
    max_n: int | None = None,
) -> RateSearch:
    """Bisect on the arrival rate (geometrically) for the highest one whose p99 latency meets the bound,
    each rate judged on one continuous run, by the tests MLPerf's LoadGen applies to a Server run.

    Taught in notebook `latency_throughput`.

    A trial at a rate runs :func:`trial_size` requests: at least ``n``, at least ``min_duration_s`` of
    arrivals (LoadGen's minimum duration) and at least the early-stopping count for a clean run
    (:func:`~labkit.serving.metrics.early_stopping_queries`: 459 for a p99 at 99% confidence). It fails if
    its ``percentile`` latency is over ``p99_bound_ms`` or the server fell behind (served under 90% of the
    rate at which requests arrived). Otherwise it meets the bound if it holds at least the early-stopping count
    for the requests it saw over the bound. If it holds fewer, the trial is run again from an empty queue as one
    continuous run of that count (LoadGen's "would need to run at least N more queries" answered by a longer
    run, not by appending a second one), up to ``max_n`` requests (default four times its first size); past
    that it is unconfirmed and counts as a failure. Only the last run of a trial is kept and judged. Each run is
    judged as LoadGen judges one: its percentile against the bound, and early stopping on its own count. Unlike
    LoadGen, a run too short for its count is re-run here at once, so a rate can take more than one run; a
    failed run is never retried.

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
    if not 0 < percentile < 1 or not 0 < confidence < 1:
        raise ValueError(f"percentile and confidence must lie strictly between 0 and 1; got {percentile}, {confidence}")
    trials: list[LoadResult] = []
    outcomes: list[str] = []
    calls = 0

    def meets(rate: float) -> bool:
        nonlocal calls
        need = trial_size(rate, min_duration_s, n, 0, percentile, confidence)
        cap = max_n if max_n is not None else 4 * need
        while True:  # one continuous run of `need` requests, re-run whole at a larger size if that is too few
            run = poisson(server, make_input, rate, need, seed=seed + calls)
            calls += 1
            over = int((run.latencies_s * 1e3 > p99_bound_ms).sum())
            need = max(need, early_stopping_queries(over, percentile, confidence))
            if run.percentile_ms(100 * percentile) > p99_bound_ms or not _kept_up(run):
                outcome = "fails"
            elif len(run.latencies_s) >= need:
                outcome = "meets"
            elif need > cap:
                outcome = "unconfirmed"
            else:
                continue  # under the bound, but too few requests for the ones over it: run again, longer
            trials.append(run)
            outcomes.append(outcome)
            return outcome == "meets"

    def search(best_rate: float | None, best: LoadResult | None) -> RateSearch:
        return RateSearch(best_rate, best, p99_bound_ms, trials, outcomes, percentile, confidence)

    for lo in (low * (high / low) ** (k / 4) for k in range(4)):  # low, then three rates on the way to high
        if meets(lo):
            break
    else:
        return search(None, None)
    best, hi = trials[-1], high  # the trial that met the bound
    for _ in range(steps):
        mid = (lo * hi) ** 0.5
        if meets(mid):
            lo, best = mid, trials[-1]  # the trial that met the bound
        else:
            hi = mid
    return search(lo, best)


# -- HTTP ------------------------------------------------------------------------------------
