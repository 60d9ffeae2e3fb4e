import sys
import time

import pytest
import torch
import torch.utils.benchmark as benchmark

from labkit import claims
from labkit.instruments import timing


def test_record_fields_are_consistent():
    a = torch.randn(128, 128)
    rec = timing.measure(torch.matmul, a, a, min_run_s=0.05, items=128)
    assert rec.min_s <= rec.median_s <= rec.max_s
    assert rec.blocks == len(rec.times_s) >= 1 and rec.calls_per_block >= 1  # how many depends on the machine
    assert rec.threads == torch.get_num_threads()
    assert rec.device == "cpu"
    assert rec.items_per_s == pytest.approx(128 / rec.median_s)
    d = rec.to_dict()
    assert d["median_ms"] == pytest.approx(rec.median_s * 1e3)
    assert "median" in str(rec)


def test_warmup_is_not_timed():
    calls = []

    def slow_first_call():
        calls.append(1)
        if len(calls) == 1:
            time.sleep(0.3)  # a one-off cost, like lazy initialisation

    rec = timing.measure(slow_first_call, warmup=1, min_run_s=0.05)
    assert rec.max_s < 0.05
    assert len(calls) > 1 + rec.blocks


def test_durations_scale_as_expected():
    short = timing.measure(time.sleep, 0.002, min_run_s=0.1)
    long = timing.measure(time.sleep, 0.008, min_run_s=0.1)
    # sleep overshoots by a roughly constant amount, so the ratio is a little under 4
    assert 2.5 < long.median_s / short.median_s < 4.5


def test_matches_torch_benchmark_within_10_percent():
    a = torch.randn(512, 512)

    def theirs() -> float:
        timer = benchmark.Timer(
            "torch.matmul(a, a)", globals={"a": a, "torch": torch}, num_threads=torch.get_num_threads()
        )
        return timer.blocked_autorange(min_run_time=0.05).median

    # A timing claim, decided as one (labkit.claims): interleaved rounds, so drifts in machine load hit both alike.
    agree = claims.Claim(
        "labkit.measure agrees with torch.utils.benchmark to 10%",
        claims.ratio("labkit.measure", "benchmark").between(0.9, 1.1),
    )
    result = claims.decide(
        agree,
        {"labkit.measure": lambda: timing.measure(torch.matmul, a, a, min_run_s=0.05).median_s, "benchmark": theirs},
        timed=False, budget_s=8, show=False,
    )  # fmt: skip
    assert result.verdict != claims.CONTRADICTED, str(result)


def test_raising_callable_is_a_clear_error():
    def broken():
        raise ZeroDivisionError("no data")

    with pytest.raises(timing.MeasurementError, match=r"'broken' raised ZeroDivisionError during warm-up") as err:
        timing.measure(broken)
    assert isinstance(err.value.__cause__, ZeroDivisionError)


def test_bad_arguments():
    with pytest.raises(TypeError, match="needs a callable"):
        timing.measure(42)
    with pytest.raises(ValueError, match="min_run_s must be a positive finite number"):
        timing.measure(lambda: None, min_run_s=0)


def test_noisy_measurement_warns():
    # Calls alternate between 50 ms and 150 ms. Each call is long enough that the timer puts one call
    # in each block (a 10-call block would average the alternation away), so the blocks' spread is
    # about 100% of the median however busy the machine is.
    state = {"k": 0}

    def alternating():
        state["k"] += 1
        time.sleep(0.05 if state["k"] % 2 else 0.15)

    with pytest.warns(timing.NoisyMeasurementWarning, match="IQR is"):
        rec = timing.measure(alternating, min_run_s=0.05, max_run_s=0.6, warmup=0)
    assert rec.calls_per_block == 1
    assert rec.noisy and rec.warning


def test_quiet_record_has_no_warning():
    rec = timing.TimingRecord("x", 1.0, 0.05, 1.0, 0.9, 1.1, [1.0], blocks=5)
    assert not rec.noisy and rec.warning is None
    noisy = timing.TimingRecord("x", 1.0, 0.5, 1.0, 0.5, 2.0, [1.0], blocks=5)
    assert noisy.noisy and "50%" in noisy.warning


def test_helpers():
    assert timing.throughput(100, 2.0) == 50.0
    with pytest.raises(ValueError, match="positive"):
        timing.throughput(1, 0)
    assert timing.format_seconds(0.0123) == "12.3 ms"
    assert timing.format_seconds(2.5) == "2.5 s"
    assert timing.format_seconds(3e-6) == "3 µs"
    assert timing.format_seconds(4e-9) == "4 ns"
    assert timing.time_once(time.sleep, 0.001) >= 0.001
    s = timing.summarize([3.0, 1.0, 2.0, 4.0])
    assert s["median_s"] == 2.5 and s["min_s"] == 1.0 and s["max_s"] == 4.0 and s["n"] == 4


def test_competing_load_really_competes_and_stops_its_thread():
    import threading

    # Whether it slows a given piece of work depends on the machine's state (notebook `start_here` decides that as a claim;
    # beside a busy neighbour a 2-thread matmul stalls erratically either way), so this checks what is certain:
    # the thread does real work while the block runs, and none after it.
    with timing.competing_load("cpu", n=128) as load:
        assert any(t.name == "labkit-competing-load" for t in threading.enumerate())
        deadline = time.monotonic() + 10
        while load.iterations < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert load.iterations >= 5
    assert not any(t.name == "labkit-competing-load" for t in threading.enumerate())
    done = load.iterations
    time.sleep(0.05)
    assert load.iterations == done


@pytest.mark.processes
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="read from Linux's /proc/stat")
def test_idle_cores_sees_a_busy_core(monkeypatch):
    """A process spinning on one core takes one core's worth of idle time away. The machine may have neighbours
    that come and go (another test run, a browser), so the spinner is switched on and off in adjacent windows,
    three times, and the claim is checked on each pair: a pair can straddle a neighbour's change, not all three."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    go, stop = ctx.Event(), ctx.Event()
    spinner = ctx.Process(target=_spin_when, args=(go, stop), daemon=True)
    spinner.start()
    pairs = []
    try:
        for _ in range(3):
            go.clear()
            quiet = timing.idle_cores(0.3, settle_s=0.1)  # settle: PyTorch's threads spin a moment after work
            go.set()
            busy = timing.idle_cores(0.3, settle_s=0.05)
            pairs.append((quiet, busy))
    finally:
        stop.set()
        spinner.join(timeout=5)
    cpus = timing._cpu_jiffies()[2]
    # the spinner holds a core whatever else runs: counting its time as idle would give about `cpus`
    assert all(busy <= cpus - 0.5 for _, busy in pairs), pairs
    if max(quiet for quiet, _ in pairs) < 0.9:  # other programs held every core: no idle core for it to take
        pytest.skip(f"no idle core to observe: {pairs}")
    assert max(quiet - busy for quiet, busy in pairs) >= 0.5, pairs  # it took about one core, at least once
    with pytest.raises(ValueError, match="positive"):
        timing.idle_cores(0)
    monkeypatch.setattr(timing, "_cpu_jiffies", lambda: None)  # no kernel counters: the caller's assumption
    assert timing.idle_cores(assume=4.0) == 4.0 and timing.idle_cores() is None


def _spin_when(go, stop) -> None:
    while not stop.is_set():
        if not go.is_set():
            time.sleep(0.001)


def test_a_labkit_warning_is_shown_as_one_plain_line():
    import warnings

    from labkit.core import errors

    shown = errors.plain_lab_warnings(warnings.formatwarning)
    assert errors.plain_lab_warnings(shown) is shown  # installed twice, wrapped once
    line = shown("spread 40%", timing.NoisyMeasurementWarning, "/somewhere/labkit/instruments/ceilings.py", 125)
    assert line == "labkit: spread 40%\n"
    other = shown("deprecated", DeprecationWarning, "lib.py", 3, "x = 1")
    assert "lib.py:3" in other and "DeprecationWarning" in other
