"""labkit.serving.mlperf: LoadGen's summary parsed, its settings checked, and LoadGen driving the batcher."""

import tempfile
import threading
from pathlib import Path

import pytest
import torch

from labkit.serving import mlperf

# Fixtures: the summaries of two real LoadGen 6.0.17 runs on the quick model of notebook `latency_throughput`
# (their "Test Parameters Used" sections cut short).
SINGLE_STREAM_SUMMARY = """\
================================================
MLPerf Results Summary
================================================
SUT name : PySUT
Scenario : SingleStream
Mode     : PerformanceOnly
90.0th percentile latency (ns) : 507765
Result is : VALID
  Min duration satisfied : Yes
  Min queries satisfied : Yes
  Early stopping satisfied: Yes
Early Stopping Result:
 * Processed at least 64 queries (2474).
 * Would discard 211 highest latency queries.
 * Early stopping 90.0th percentile estimate: 533804
 * Early stopping 99.0th percentile estimate: 1662146

================================================
Additional Stats
================================================
QPS w/ loadgen overhead         : 2469.68
QPS w/o loadgen overhead        : 2649.05

Min latency (ns)                : 176923
Max latency (ns)                : 4493852
Mean latency (ns)               : 377494
50.00 percentile latency (ns)   : 328078
90.00 percentile latency (ns)   : 507765
95.00 percentile latency (ns)   : 670557
97.00 percentile latency (ns)   : 825873
99.00 percentile latency (ns)   : 1455214
99.90 percentile latency (ns)   : 2662999

================================================
Test Parameters Used
================================================
samples_per_query : 1
min_duration (ms): 1000
"""

OFFLINE_INVALID_SUMMARY = """\
================================================
MLPerf Results Summary
================================================
SUT name : PySUT
Scenario : Offline
Mode     : PerformanceOnly
Samples per second: 11767
Result is : INVALID
  Min duration satisfied : NO
  Min queries satisfied : Yes
  Early stopping satisfied: Yes
Recommendations:
 * Increase expected QPS so the loadgen pre-generates a larger (coalesced) query.

================================================
Additional Stats
================================================
Min latency (ns)                : 16259917
Max latency (ns)                : 467408438
Mean latency (ns)               : 318305773
50.00 percentile latency (ns)   : 320982124
90.00 percentile latency (ns)   : 437672125
95.00 percentile latency (ns)   : 454220079
97.00 percentile latency (ns)   : 459510135
99.00 percentile latency (ns)   : 465745275
99.90 percentile latency (ns)   : 467387217

================================================
Test Parameters Used
================================================
samples_per_query : 5500
"""

DETAIL_LINES = """\
:::MLLOG {"key": "result_validity", "value": "VALID", "time_ms": 1011.6}
:::MLLOG {"key": "result_query_count", "value": 985, "time_ms": 1011.6}
:::MLLOG {"key": "result_overlatency_query_count", "value": 2, "time_ms": 1011.6}
"""


def test_a_single_stream_summary_is_parsed_to_the_numbers_it_prints():
    s = mlperf.parse_summary(SINGLE_STREAM_SUMMARY, DETAIL_LINES)
    assert (s.scenario, s.mode, s.result, s.valid, s.unmet) == ("SingleStream", "PerformanceOnly", "VALID", True, [])
    assert s.metric == "90.0th percentile latency (ms)" and s.value == pytest.approx(0.507765)
    assert s.samples_per_s == 2469.68
    assert s.latency_ms == pytest.approx(
        {50.0: 0.328078, 90.0: 0.507765, 95.0: 0.670557, 97.0: 0.825873, 99.0: 1.455214, 99.9: 2.662999}
    )
    assert s.mean_latency_ms == pytest.approx(0.377494)
    assert s.early_stopping[0] == "Processed at least 64 queries (2474)." and len(s.early_stopping) == 4
    assert s.early_stopping_ms == pytest.approx({90.0: 0.533804, 99.0: 1.662146})
    assert (s.queries, s.overlatency) == (985, 2)


def test_an_invalid_offline_summary_keeps_loadgens_reasons():
    s = mlperf.parse_summary(OFFLINE_INVALID_SUMMARY)
    assert (s.scenario, s.result, s.valid) == ("Offline", "INVALID", False)
    assert s.unmet == ["Min duration"]
    assert s.recommendations == ["Increase expected QPS so the loadgen pre-generates a larger (coalesced) query."]
    assert s.samples_per_s == 11767 and s.early_stopping == [] and s.queries is None
    assert "Min duration not satisfied" in str(s)


SERVER_INVALID_SUMMARY = """\
================================================
MLPerf Results Summary
================================================
SUT name : PySUT
Scenario : Server
Mode     : PerformanceOnly
Completed samples per second    : 1500.12
Result is : INVALID
  Performance constraints satisfied : NO
  Min duration satisfied : Yes
  Min queries satisfied : Yes
  Early stopping satisfied: NO
Recommendations:
 * Reduce target QPS to improve latency.
Early Stopping Result:
 * Run unsuccessful.
 * Processed 1503 queries.
 * Would need to run at least 237807 more queries,
 with the run being successful if every additional
 query were under latency.

================================================
Additional Stats
================================================
Completed samples per second    : 1500.12

Min latency (ns)                : 300000
Max latency (ns)                : 60000000
Mean latency (ns)               : 9000000
50.00 percentile latency (ns)   : 2000000
90.00 percentile latency (ns)   : 20000000
95.00 percentile latency (ns)   : 30000000
97.00 percentile latency (ns)   : 40000000
99.00 percentile latency (ns)   : 49000000
99.90 percentile latency (ns)   : 58000000
"""


def test_a_bullet_loadgen_wraps_onto_several_lines_is_kept_whole():
    s = mlperf.parse_summary(SERVER_INVALID_SUMMARY)
    assert (s.scenario, s.result, s.unmet) == ("Server", "INVALID", ["Performance constraints", "Early stopping"])
    assert s.early_stopping == [
        "Run unsuccessful.",
        "Processed 1503 queries.",
        "Would need to run at least 237807 more queries, with the run being successful if every additional "
        "query were under latency.",
    ]
    assert s.recommendations == ["Reduce target QPS to improve latency."]
    assert s.early_stopping_ms == {} and s.samples_per_s == 1500.12  # Server: pass or fail, no estimate


def test_bad_input_is_refused_with_what_is_allowed():
    with pytest.raises(ValueError, match="not a LoadGen summary: it has no 'Scenario', 'Mode', 'Result is' line"):
        mlperf.parse_summary("hello")
    with pytest.raises(ValueError, match="scenario must be one of SingleStream, Offline, Server; got 'server'"):
        mlperf.scenario_settings("server", min_duration_ms=100)
    with pytest.raises(ValueError, match="the Server scenario needs target_qps"):
        mlperf.scenario_settings("Server", min_duration_ms=100, target_latency_ms=10)
    with pytest.raises(ValueError, match="the Server scenario needs target_latency_ms"):
        mlperf.scenario_settings("Server", min_duration_ms=100, target_qps=10)
    with pytest.raises(TypeError, match="LoadGenBatcher"):
        mlperf.run_scenario(
            object(), lambda i: torch.ones(2), mlperf.scenario_settings("SingleStream", min_duration_ms=10)
        )


def _leftovers() -> list[str]:
    threads = [t.name for t in threading.enumerate() if t.name == "labkit-mlperf-loadgen"]
    folders = [p.name for p in Path(tempfile.gettempdir()).glob("labkit-loadgen-*")]
    return threads + folders


def doubler(x):
    return 2 * x


def test_loadgen_drives_the_batcher_and_completes_each_batch_in_one_call():
    server = mlperf.LoadGenBatcher(doubler, max_batch=8, max_wait_ms=2)
    settings = mlperf.scenario_settings("Server", min_duration_ms=100, target_qps=2000, target_latency_ms=50)
    run = mlperf.run_scenario(server, lambda i: torch.full((4,), float(i)), settings, samples=64)
    s = run.summary
    assert s.scenario == "Server" and s.queries == run.served.latencies_s.size > 100
    assert run.completions == round(sum(1 / b for b in run.served.batch_sizes))  # one call per batch
    assert s.latency_ms[50] >= run.served.p50_ms * 0.5
    assert _leftovers() == []


def test_a_failing_model_fails_the_run_and_leaves_nothing_behind():
    def broken(x):
        raise RuntimeError("the model broke")

    server = mlperf.LoadGenBatcher(broken, max_batch=1, max_wait_ms=0)
    with pytest.raises(RuntimeError, match="the model broke"):
        mlperf.run_scenario(
            server, lambda i: torch.ones(2), mlperf.scenario_settings("SingleStream", min_duration_ms=20), samples=8
        )
    assert _leftovers() == []
