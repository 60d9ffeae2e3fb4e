"""MLPerf Inference's own LoadGen driving the dynamic batcher (notebook `latency_throughput`).

LoadGen (``mlperf_loadgen``, the C++ library behind every MLPerf Inference result) generates the queries, times
them and judges the run; the system under test (SUT) only answers. :class:`LoadGenBatcher` is a
:class:`~labkit.serving.batcher.DynamicBatcher` that LoadGen can drive: LoadGen's issue callback hands each query
sample to the batcher's queue, and when a batch is done its samples are completed with one
``QuerySamplesComplete`` call. :func:`run_scenario` runs one scenario (SingleStream, Offline or Server) with the
batcher serving in the caller's thread and LoadGen in a helper thread, logs to a temporary folder with tracing off,
and returns LoadGen's summary parsed (:func:`parse_summary`) beside the batcher's own timings of the same requests.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import mlperf_loadgen as lg
import torch

from ..core import checks, procs
from ..core.result import Result
from . import loads
from .batcher import DynamicBatcher, _Request

SCENARIOS = ("SingleStream", "Offline", "Server")


class LoadGenBatcher(DynamicBatcher):
    """A dynamic batcher that MLPerf's LoadGen can drive as its system under test (notebook `latency_throughput`).

    It serves labkit's loads (:mod:`labkit.serving.loads`) like any :class:`DynamicBatcher`; :meth:`issue` is
    what LoadGen's issue callback calls for each query sample. When a batch holding LoadGen's samples is done,
    they are completed together with one ``lg.QuerySamplesComplete`` call (``completions`` counts the calls): one
    handoff to LoadGen per batch rather than per request.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._ids_lock = threading.Lock()
        self._query_ids: dict[Future, int] = {}
        self._draining = False  # set when serving has stopped: LoadGen's samples are completed unanswered
        self.completions = 0
        self.errors: list[BaseException] = []

    def issue(self, inputs: torch.Tensor, query_id: int) -> None:
        """Queue one LoadGen query sample (called from LoadGen's issue thread)."""
        with self._ids_lock:  # the id is stored before the batch holding it can finish
            if not self._draining:
                self._query_ids[self.submit(inputs)] = query_id
                return
        lg.QuerySamplesComplete([lg.QuerySampleResponse(query_id, 0, 0)])

    def _run(self, batch: list[_Request]) -> None:
        super()._run(batch)  # every future of the batch is done now, with its row or its error
        with self._ids_lock:
            mine = [(r.future, self._query_ids.pop(r.future)) for r in batch if r.future in self._query_ids]
        if mine:
            self.errors.extend(e for f, _ in mine if (e := f.exception()) is not None)
            lg.QuerySamplesComplete([lg.QuerySampleResponse(query_id, 0, 0) for _, query_id in mine])
            self.completions += 1

    def _drain(self) -> None:
        """Serving has stopped: complete every sample LoadGen still waits for, and any it issues from now on."""
        with self._ids_lock:
            self._draining = True
            left = list(self._query_ids.values())
            self._query_ids.clear()
        self._fail_queued("the server stopped before this request was served")
        if left:
            lg.QuerySamplesComplete([lg.QuerySampleResponse(query_id, 0, 0) for query_id in left])


@dataclass
class LoadGenSummary(Result):
    """LoadGen's ``mlperf_log_summary.txt``, parsed: the verdict, why, and the numbers (latencies in ms)."""

    scenario: str
    mode: str
    result: str  # "VALID" or "INVALID"
    metric: str  # the scenario's reported figure, as LoadGen names it
    value: float  # its value (nanoseconds become milliseconds)
    unmet: list[str]  # the constraints LoadGen reports as not satisfied
    recommendations: list[str]
    early_stopping: list[str]  # the lines of its early-stopping result
    early_stopping_ms: dict[float, float]  # percentile -> its early-stopping estimate
    samples_per_s: float
    latency_ms: dict[float, float] = field(repr=False)  # percentile -> latency
    mean_latency_ms: float = math.nan
    queries: int | None = None  # from the detail log, when read
    overlatency: int | None = None  # queries over the Server scenario's latency bound

    @property
    def valid(self) -> bool:
        return self.result == "VALID"

    def __str__(self) -> str:
        why = f" ({'; '.join(f'{u} not satisfied' for u in self.unmet)})" if self.unmet else ""
        tail = ", ".join(f"p{p:g} {ms:.3f} ms" for p, ms in self.latency_ms.items() if p in (50, 90, 99))
        return (
            f"LoadGen {self.scenario}: {self.result}{why}; {self.metric} {self.value:,.4g}; "
            f"{self.samples_per_s:,.0f} samples/s; {tail}"
        )


_PERCENTILE = re.compile(r"^([\d.]+) percentile latency \(ns\)\s*:\s*(\d+)")
_SATISFIED = re.compile(r"^\s+(.+?) satisfied\s*:\s*(\w+)")
_ESTIMATE = re.compile(r"Early stopping ([\d.]+)th percentile estimate\s*:\s*(\d+)")


def parse_summary(text: str, detail: str | None = None) -> LoadGenSummary:
    """Parse LoadGen's summary log (and, if given, the ``result_*`` lines of its detail log).

    :func:`run_scenario` calls it on every run (notebook `latency_throughput` shows what it returns). A text that is not a
    summary is refused with the lines it lacks.
    """
    lines = text.splitlines()
    fields: dict[str, str] = {}
    for line in lines:
        if ":" in line:
            key, value = line.split(":", 1)
            fields.setdefault(key.strip(), value.strip())
    missing = [k for k in ("Scenario", "Mode", "Result is") if k not in fields]
    if missing:
        raise ValueError(f"not a LoadGen summary: it has no {', '.join(repr(k) for k in missing)} line; pass the "
                         "text of mlperf_log_summary.txt")  # fmt: skip
    at = next(i for i, line in enumerate(lines) if line.startswith("Result is"))
    metric, value = (s.strip() for s in lines[at - 1].rsplit(":", 1))
    number = float(value) / 1e6 if "(ns)" in metric else float(value)

    def bullets(heading: str) -> list[str]:
        start = next((i for i, line in enumerate(lines) if line.strip() == heading), None)
        out: list[str] = []
        for line in lines[start + 1 :] if start is not None else []:
            if line.strip().startswith("*"):
                out.append(line.strip().lstrip("* ").strip())
            elif out and line[:1].isspace() and line.strip():  # a bullet LoadGen wrapped onto the next line
                out[-1] = f"{out[-1]} {line.strip()}"
            else:
                break
        return out

    early = bullets("Early Stopping Result:")
    per_s = {"Server": "Completed samples per second", "Offline": "Samples per second"}.get(fields["Scenario"])
    latency = {float(m[1]): int(m[2]) / 1e6 for line in lines if (m := _PERCENTILE.match(line))}
    summary = LoadGenSummary(
        scenario=fields["Scenario"], mode=fields["Mode"], result=fields["Result is"],
        metric=metric.replace("(ns)", "(ms)"), value=number,
        unmet=[m[1] for line in lines if (m := _SATISFIED.match(line)) and m[2].lower() != "yes"],
        recommendations=bullets("Recommendations:"), early_stopping=early,
        early_stopping_ms={float(m[1]): int(m[2]) / 1e6 for line in early if (m := _ESTIMATE.search(line))},
        samples_per_s=float(fields[per_s] if per_s else fields["QPS w/ loadgen overhead"]),
        latency_ms=latency, mean_latency_ms=int(fields["Mean latency (ns)"]) / 1e6,
    )  # fmt: skip
    if detail is not None:
        results = {}
        for line in detail.splitlines():
            if line.startswith(":::MLLOG "):
                entry = json.loads(line[len(":::MLLOG ") :])
                results[entry["key"]] = entry["value"]
        summary.queries = results.get("result_query_count")
        summary.overlatency = results.get("result_overlatency_query_count")
    return summary


@dataclass
class LoadGenRun(Result):
    """One LoadGen run: its parsed summary, and the batcher's own timings of the same requests."""

    summary: LoadGenSummary
    served: loads.LoadResult  # from the batcher's submit to its answer: what LoadGen's latency adds to is the handoff
    completions: int  # QuerySamplesComplete calls (one per batch)
    wall_s: float

    def __str__(self) -> str:
        return f"{self.summary}\n  the batcher's own view of the same requests: {self.served}"


def scenario_settings(
    scenario: str,
    *,
    min_duration_ms: float,
    min_query_count: int = 100,
    target_qps: float | None = None,
    target_latency_ms: float | None = None,
    percentile: float | None = None,
    expected_latency_ms: float | None = None,
    seed: int = 0,
    max_duration_ms: float = 0,
) -> lg.TestSettings:
    """LoadGen's ``TestSettings`` for a performance run, every knob this lesson needs set explicitly.

    Taught in notebook `latency_throughput`. ``target_qps`` is the Server scenario's arrival rate and the
    Offline scenario's expected rate (LoadGen sizes its one query to last ``min_duration_ms`` at 1.1 times
    it); ``target_latency_ms`` is the Server scenario's bound on its ``percentile`` (default 0.99; 0.90
    for SingleStream, as in ``mlperf.conf``); ``expected_latency_ms`` is what SingleStream expects a query to
    take (LoadGen generates min_duration / expected latency queries up front: too high, and it runs out of
    queries before the minimum duration, an INVALID run).
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {', '.join(SCENARIOS)}; got {scenario!r}")
    checks.positive("min_duration_ms", min_duration_ms)
    checks.whole("min_query_count", min_query_count)
    if scenario in ("Server", "Offline") and target_qps is None:
        raise ValueError(f"the {scenario} scenario needs target_qps (its rate in queries per second); got None")
    if scenario == "Server" and target_latency_ms is None:
        raise ValueError("the Server scenario needs target_latency_ms (its latency bound); got None")
    ts = lg.TestSettings()
    ts.scenario = getattr(lg.TestScenario, scenario)
    ts.mode = lg.TestMode.PerformanceOnly
    ts.min_duration_ms = int(min_duration_ms)
    ts.max_duration_ms = int(max_duration_ms)
    ts.min_query_count = min_query_count
    ts.schedule_rng_seed = ts.sample_index_rng_seed = ts.qsl_rng_seed = seed
    if scenario == "SingleStream":
        ts.single_stream_target_latency_percentile = checks.fraction("percentile", percentile or 0.90)
        if expected_latency_ms is not None:
            ts.single_stream_expected_latency_ns = max(
                1, int(checks.positive("expected_latency_ms", expected_latency_ms) * 1e6)
            )
    elif scenario == "Offline":
        ts.offline_expected_qps = checks.positive("target_qps", target_qps)
    else:
        ts.server_target_qps = checks.positive("target_qps", target_qps)
        ts.server_target_latency_ns = int(checks.positive("target_latency_ms", target_latency_ms) * 1e6)
        ts.server_target_latency_percentile = checks.fraction("percentile", percentile or 0.99)
    return ts


def run_scenario(
    server: LoadGenBatcher,
    make_input: Callable[[int], torch.Tensor],
    test_settings: lg.TestSettings,
    samples: int = 1024,
    timeout_s: float = 120,
) -> LoadGenRun:
    """Run LoadGen on ``server``: LoadGen in a helper thread, the batcher serving in this one.

    Taught in notebook `latency_throughput`.

    The query sample library (QSL) holds ``samples`` inputs (``make_input(i)``) in memory. LoadGen logs to a
    temporary folder (tracing off), which is parsed and removed. However the run ends, LoadGen's thread is done
    and its SUT and QSL destroyed before this returns: if serving stops early, every sample LoadGen still waits
    for is completed unanswered, so its test can end, and the error is raised.
    """
    if not isinstance(server, LoadGenBatcher):
        raise TypeError(f"server must be a labkit.serving.mlperf.LoadGenBatcher; got {type(server).__name__}")
    checks.whole("samples", samples)
    checks.positive("timeout_s", timeout_s)
    inputs: dict[int, torch.Tensor] = {}

    def load(indices: list[int]) -> None:
        inputs.update((i, make_input(i)) for i in indices)

    def unload(indices: list[int]) -> None:
        for i in indices:
            inputs.pop(i, None)

    def issue(query_samples) -> None:  # runs in LoadGen's thread: an error must not escape into its C++
        for s in query_samples:
            try:
                server.issue(inputs[s.index], s.id)
            except Exception as exc:  # answered unanswered, and raised once the test is over
                server.errors.append(exc)
                lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, 0, 0)])

    server._draining, server.completions, server.errors = False, 0, []
    server.reset_timings()
    sut = lg.ConstructSUT(issue, lambda: None)  # flush_queries: nothing is held back, so nothing to flush
    qsl = lg.ConstructQSL(samples, samples, load, unload)
    failure: list[BaseException] = []
    thread: threading.Thread | None = None
    try:
        with procs.owned_tempdir("loadgen") as folder:
            log = lg.LogSettings()
            log.log_output.outdir = folder
            log.log_output.copy_summary_to_stdout = False
            log.enable_trace = False

            def start() -> None:
                try:
                    lg.StartTestWithLogSettings(sut, qsl, test_settings, log)
                except BaseException as exc:  # reported in the caller's thread
                    failure.append(exc)

            thread = threading.Thread(target=start, name="labkit-mlperf-loadgen", daemon=True)
            began = time.perf_counter()
            deadline = began + timeout_s
            thread.start()
            try:
                server.serve(until=lambda: not thread.is_alive() or time.perf_counter() > deadline)
            finally:
                if thread.is_alive():
                    server._drain()
                thread.join(timeout=60)
            wall_s = time.perf_counter() - began
            if thread.is_alive():
                raise RuntimeError("LoadGen's test did not end within 60 s of serving stopping")
            if failure:
                raise failure[0]
            if wall_s > timeout_s:
                raise TimeoutError(f"the LoadGen run took over timeout_s={timeout_s:g} s; raise it or run shorter")
            if server.errors:
                raise server.errors[0]
            summary = parse_summary(
                (Path(folder) / "mlperf_log_summary.txt").read_text(),
                (Path(folder) / "mlperf_log_detail.txt").read_text(),
            )
    finally:
        if thread is None or not thread.is_alive():  # never pull the SUT from under a test still running
            lg.DestroySUT(sut)
            lg.DestroyQSL(qsl)
    served = loads._result(server, summary.scenario)
    return LoadGenRun(summary, served, server.completions, wall_s)
