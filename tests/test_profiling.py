"""labkit.instruments.profiling: the loop split, Amdahl's law, the checklist, and the profiler wrappers."""

import json
import time

import numpy as np
import pytest
import torch

from labkit.instruments import profiling


def test_amdahl_is_exact():
    assert profiling.amdahl(0.5, 2) == pytest.approx(1 / 0.75)
    assert profiling.amdahl(1.0, 10) == pytest.approx(10)
    assert profiling.amdahl(0.0, 1000) == pytest.approx(1)
    assert profiling.amdahl(0.9, 1e12) == pytest.approx(10, rel=1e-6)  # the limit 1 / (1 - p)
    with pytest.raises(ValueError, match="between 0 and 1"):
        profiling.amdahl(1.5, 2)
    with pytest.raises(ValueError, match="speedup must be positive"):
        profiling.amdahl(0.5, 0)


def _slow_batches(delay_s):
    while True:
        time.sleep(delay_s)
        yield None


def test_time_loop_separates_waiting_from_computing():
    timing = profiling.time_loop(_slow_batches(0.03), lambda batch: time.sleep(0.01), steps=5, skip=1)
    assert len(timing.data_s) == 5
    assert 0.6 < timing.data_fraction < 0.85  # 30 ms waiting, 10 ms computing
    assert 0.035 < timing.step_s < 0.08
    assert "input-bound" in profiling.diagnose(timing)[0]
    fast = profiling.time_loop(_slow_batches(0.0), lambda batch: time.sleep(0.02), steps=5)
    assert fast.data_fraction < 0.1 and "compute-bound" in profiling.diagnose(fast)[0]
    assert any("synchronisation" in line for line in profiling.diagnose(fast, sync_share=0.3))


def test_time_loop_needs_enough_batches():
    with pytest.raises(ValueError, match="ended before step 3"):
        profiling.time_loop([1, 2], lambda b: None, steps=4, skip=2)


def test_profiler_table_and_trace(tmp_path):
    a = torch.randn(128, 128)
    prof = profiling.profile_steps(lambda: a @ a, steps=3, warmup=1)
    table = profiling.top_operators(prof, n=5)
    assert "aten::mm" in table
    path = profiling.export_trace(prof, tmp_path / "sub" / "trace.json")
    events = json.loads(path.read_text())["traceEvents"]
    assert sum(1 for e in events if e.get("name") == "aten::mm") == 3  # only the recorded steps, not the warm-up
    with pytest.raises(ValueError):
        profiling.profile_steps(lambda: None, steps=0)


def test_loader_speedup_is_the_slower_of_computing_and_decoding_on_the_free_cores():
    # 60% of a step decodes, 40% computes: one free core for one worker leaves the decoding (0.6) as the step.
    assert profiling.loader_speedup(0.6, 1, idle_cores=2.0) == pytest.approx(1 / 0.6)
    # two workers on two free cores: decoding 0.3 each, so computing (0.4) is the step
    assert profiling.loader_speedup(0.6, 2, idle_cores=3.0) == pytest.approx(1 / 0.4)
    # more workers than free cores: only the free ones count; none free, nothing overlaps
    assert profiling.loader_speedup(0.6, 4, idle_cores=2.0) == pytest.approx(1 / 0.6)
    assert profiling.loader_speedup(0.6, 2, idle_cores=1.0) == 1.0
    assert profiling.loader_speedup(0.6, 0, idle_cores=8.0) == 1.0
    both = profiling.loader_speedup(np.array([0.6, 0.8]), 1, np.array([2.0, 2.0]))
    assert both == pytest.approx([1 / 0.6, 1 / 0.8])
    with pytest.raises(ValueError, match="waiting_share"):
        profiling.loader_speedup(1.5, 1, 2.0)
