"""Serving metrics as vLLM's benchmark defines them: TTFT, TPOT, ITL, end-to-end latency and goodput under SLOs.

Taught in notebook `serving_llms`. :func:`serving_metrics` reads an engine run's records
(``vllm/benchmarks/serve.py`` defines the same metrics); :func:`early_stopping_queries` is MLPerf's early-stopping
rule for a percentile bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core.result import Result
from .engine import ServingRun


@dataclass(frozen=True)
class SLO:
    """Service-level objectives, per request: time to first token and time per output token (seconds).

    Taught in notebook `serving_llms`.
    """

    ttft_s: float
    tpot_s: float


def early_stopping_queries(overlatency: int, percentile: float = 0.99, confidence: float = 0.99) -> int:
    """The fewest queries a run must have for MLPerf LoadGen's early-stopping test to pass with ``overlatency`` of
    them over the latency bound. Taught in notebook `serving_llms`.

    LoadGen (``loadgen/early_stopping.cc``, used by ``results.cc`` for the Server scenario, confidence 0.99,
    tolerance 0) asks for the least h under-latency queries such that, were the true fraction under the bound
    only ``percentile``, seeing ``overlatency`` or fewer over it among h + ``overlatency`` queries would have a
    probability below 1 − ``confidence``: then the percentile is met with that confidence. This replaced the
    fixed minimum query counts of MLPerf's early rounds (270,336 for a 99th percentile) in 2023; ``mlperf.conf``
    now sets a 600 s minimum duration for Server, and LoadGen's own minimum of 100 queries.
    """
    if not isinstance(overlatency, int) or overlatency < 0:
        raise ValueError(f"overlatency must be a whole number of queries, 0 or more; got {overlatency!r}")
    if not 0 < percentile < 1 or not 0 < confidence < 1:
        raise ValueError(f"percentile and confidence must lie strictly between 0 and 1; got {percentile}, {confidence}")
    t, log_p, log_q = overlatency, math.log(percentile), math.log1p(-percentile)

    def tail(h: int) -> float:  # P(at most t over the bound among h + t queries), each over it with 1 - percentile
        n = h + t
        terms = [math.lgamma(n + 1) - math.lgamma(x + 1) - math.lgamma(n - x + 1) + (n - x) * log_p + x * log_q
                 for x in range(t + 1)]  # fmt: skip
        top = max(terms)
        return math.exp(top) * sum(math.exp(v - top) for v in terms)

    lo, hi = 1, 1
    while tail(hi) >= 1 - confidence:  # the tail shrinks as h grows: bracket, then bisect
        lo, hi = hi + 1, 2 * hi
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if tail(mid) < 1 - confidence else (mid + 1, hi)
    return lo + t


@dataclass
class ServingMetrics(Result):
    """vLLM's serving-benchmark metrics of one run (the names of its ``benchmark_serving`` report).

    ``ttft``, ``tpot``, ``itl`` and ``e2e`` map a percentile (50, 90, 99, ...) to seconds; ``tpot`` and ``itl`` are
    empty when no request produced a second token. Rates are per second of the run.
    """

    completed: int  # requests answered in full
    rejected: int  # requests refused (a prompt longer than the cache, ...)
    good: int  # completed requests that met every SLO
    request_throughput: float  # completed requests per second
    goodput: float  # good requests per second
    output_tokens_per_s: float
    ttft: dict[float, float]  # time to first token
    tpot: dict[float, float]  # time per output token after the first, per request
    itl: dict[float, float]  # inter-token latency, every gap of every request pooled
    e2e: dict[float, float]  # end-to-end latency
    prefix_hit_rate: float = 0.0  # the share of the completed requests' prompt tokens found in the prefix cache


def serving_metrics(run: ServingRun, slo: SLO, percentiles: Sequence[float] = (50, 90, 99)) -> ServingMetrics:
    """vLLM's serving-benchmark metrics for one run. Taught in notebook `serving_llms`.

    TTFT, TPOT (per request, (E2E − TTFT)/(tokens − 1)) and E2E are one number per completed request; ITL pools
    every gap between consecutive tokens of every request. Goodput is the completed requests that meet every SLO
    (``slo >= value``, as vLLM compares) per second of the run; throughput counts them all.
    """
    done = [r for r in run.records if r.ok]
    if not done:
        raise ValueError("no request completed, so there is nothing to measure")

    def pct(values):
        return {p: float(np.percentile(values, p)) for p in percentiles}

    good = [r for r in done if r.ttft_s <= slo.ttft_s and r.tpot_s <= slo.tpot_s]
    itl = [g for r in done for g in r.itl_s]
    tpot = [r.tpot_s for r in done if len(r.tokens) > 1]
    return ServingMetrics(
        completed=len(done), rejected=sum(r.error is not None for r in run.records), good=len(good),
        request_throughput=len(done) / run.duration_s, goodput=len(good) / run.duration_s,
        output_tokens_per_s=sum(len(r.tokens) for r in done) / run.duration_s,
        ttft=pct([r.ttft_s for r in done]), tpot=pct(tpot) if tpot else {},
        itl=pct(itl) if itl else {}, e2e=pct([r.e2e_s for r in done]), prefix_hit_rate=run.prefix_hit_rate,
    )  # fmt: skip
