"""labkit.serving.web: the batching policy, the load scenarios, and the HTTP front end with its load generator."""

import contextlib
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch

from labkit.core import procs
from labkit.serving import batcher, loads
from labkit.serving import web as serving

FEATURES = 8


def doubler(x):  # (B, F) -> (B, F)
    return 2 * x


def make_input(i):
    return torch.full((FEATURES,), float(i))


def test_answers_go_to_the_right_requests_and_batches_respect_max_batch():
    server = batcher.DynamicBatcher(doubler, max_batch=4, max_wait_ms=50)
    futures = [server.submit(make_input(i)) for i in range(10)]  # all queued before serving starts
    server.serve(until=lambda: True)
    for i, f in enumerate(futures):
        assert torch.equal(f.result(timeout=1), torch.full((FEATURES,), 2.0 * i))
    assert sorted(t.batch_size for t in server.timings) == [2] * 2 + [4] * 8  # batches of 4, 4, then 2
    assert all(t.batch_size <= 4 for t in server.timings)


def test_warmup_runs_every_batch_size_once_per_repeat_and_records_no_timings():
    seen = []

    def model(x):
        seen.append(x.shape[0])
        return 2 * x

    server = batcher.DynamicBatcher(model, max_batch=5, max_wait_ms=1)
    assert server.warmup(make_input(3), repeats=2) == [1, 2, 3, 4, 5]
    assert seen == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert server.timings == []
    with pytest.raises(ValueError, match="repeats must be a positive integer"):
        server.warmup(make_input(0), repeats=0)
    seen.clear()
    big = batcher.DynamicBatcher(model, max_batch=100, max_wait_ms=1)
    assert big.warmup(make_input(0), repeats=1, every_size_up_to=3) == [1, 2, 3, 4, 8, 16, 32, 64, 100]
    assert seen == [1, 2, 3, 4, 8, 16, 32, 64, 100]


def test_a_lone_request_waits_at_most_max_wait():
    server = batcher.DynamicBatcher(doubler, max_batch=64, max_wait_ms=30)
    result = loads.single_stream(server, make_input, 5)
    assert (result.batch_sizes == 1).all()
    assert 30 <= result.p50_ms < 30 + 40  # it waited the full 30 ms for company that never came


def test_a_failing_model_fails_its_batch_and_the_server_keeps_serving():
    calls = []

    def flaky(x):
        calls.append(len(x))
        if len(calls) == 1:
            raise RuntimeError("bad batch")
        return x

    server = batcher.DynamicBatcher(flaky, max_batch=1, max_wait_ms=0)
    first, second = server.submit(make_input(0)), server.submit(make_input(1))
    server.serve(until=lambda: True)
    with pytest.raises(RuntimeError, match="bad batch"):
        first.result(timeout=1)
    assert torch.equal(second.result(timeout=1), make_input(1))


def test_interrupted_serving_fails_the_queued_requests_instead_of_leaving_them_waiting():
    def interrupt(x):
        raise KeyboardInterrupt

    server = batcher.DynamicBatcher(interrupt, max_batch=1)
    futures = [server.submit(make_input(i)) for i in range(3)]
    with pytest.raises(KeyboardInterrupt):
        server.serve(until=lambda: True)
    assert all(f.done() for f in futures[1:])
    with pytest.raises(RuntimeError, match="stopped before this request was served"):
        futures[2].result(timeout=0)


def test_offline_batches_fill_up_and_latencies_are_counted_from_arrival():
    server = batcher.DynamicBatcher(doubler, max_batch=16, max_wait_ms=1)
    result = loads.offline(server, make_input, 64)
    assert len(result.latencies_s) == 64 and result.mean_batch == 16
    assert result.p99_ms >= result.p90_ms >= result.p50_ms > 0


def test_poisson_load_is_served_at_the_offered_rate():
    server = batcher.DynamicBatcher(doubler, max_batch=8, max_wait_ms=1)
    result = loads.poisson(server, make_input, rate=500, n=200, seed=1)
    assert len(result.latencies_s) == 200
    assert 0.7 * 500 < result.throughput < 1.4 * 500  # 200 exponential gaps: the mean rate within noise
    assert result.offered_rate == 500


@pytest.mark.processes
def test_find_max_rate_brackets_a_server_with_a_known_capacity():
    # A model that takes 2 ms per call whatever the batch: with max_batch 1 the capacity is 500/s.
    def slow(x):
        time.sleep(0.002)
        return x

    server = batcher.DynamicBatcher(slow, max_batch=1, max_wait_ms=0)
    search = loads.find_max_rate(
        server, make_input, p99_bound_ms=30, low=150, high=5000, n=80, steps=3, min_duration_s=0.3, percentile=0.9
    )  # a p90 needs fewer requests than a p99
    assert search.best_rate is not None and search.best.percentile_ms(90) <= 30
    # a rate passes while the server answers 90% of the arrivals: no bound gets it further past its capacity
    assert search.best_rate < 500 / 0.9, "no bound lets one-at-a-time service exceed its capacity"


def _fake_run(rate, latencies_ms, served_per_s):
    n = len(latencies_ms)
    return loads.LoadResult("server", np.array(latencies_ms) / 1e3, n / min(rate, served_per_s), offered_rate=rate,
                            batch_sizes=np.ones(n), arrivals_s=n / rate)  # fmt: skip


def test_find_max_rate_climbs_past_a_slow_start_at_low_load(monkeypatch):
    # A server whose tail is bad at low load (idle threads wake slowly), meets the bound from 300/s,
    # and cannot keep up beyond 1000/s; trials are faked so the search's logic is checked exactly.
    def fake_poisson(server, make_input, rate, n, seed=0):
        return _fake_run(rate, [25.0 if rate < 300 else 5.0] * n, 1000.0)

    monkeypatch.setattr(loads, "poisson", fake_poisson)  # the scenarios live in labkit.serving.loads
    server = batcher.DynamicBatcher(doubler)
    search = loads.find_max_rate(server, make_input, 10, low=100, high=10_000, n=10, steps=8, min_duration_s=0.1)
    rates = [t.offered_rate for t in search.trials]
    assert rates[:2] == pytest.approx([100, 316.23], rel=1e-4)  # 100/s failed (one trial decides); the next met
    assert search.outcomes[:2] == ["fails", "meets"]
    assert 950 < search.best_rate <= 1000 / 0.9 and search.best.p99_ms <= 10
    assert search.queries == 459 and search.overlatency == 0  # a clean trial: LoadGen's early-stopping count
    never = loads.find_max_rate(server, make_input, p99_bound_ms=1, low=100, high=10_000, n=10)
    assert never.best_rate is None and len(never.trials) == 4 and never.queries == 0


def test_trials_last_their_minimum_duration_and_the_early_stopping_count():
    assert loads.trial_size(1000, 0.1, 100) == 459  # 100 requests' worth of time, but a clean p99 needs 459
    assert loads.trial_size(10_000, 0.1, 100) == 1000  # the minimum duration is the larger
    assert loads.trial_size(1000, 0.1, 100, overlatency=5) == 1307
    assert loads.trial_size(10, 0.0, 500, percentile=0.9) == 500


def test_a_trial_too_short_for_its_count_is_run_again_whole_at_the_count(monkeypatch):
    asked = []

    def fake_poisson(server, make_input, rate, n, seed=0):  # 3 slow requests in the first 459, none after
        asked.append(n)
        return _fake_run(rate, [20.0] * 3 + [1.0] * (n - 3) if len(asked) == 1 else [1.0] * n, 1e9)

    monkeypatch.setattr(loads, "poisson", fake_poisson)
    search = loads.find_max_rate(batcher.DynamicBatcher(doubler), make_input, 10, low=100, high=200, steps=0)
    assert asked == [459, 1001]  # 3 over the bound need 1,001: one continuous run of 1,001, not 542 more
    assert search.outcomes == ["meets"] and search.queries == 1001 and search.overlatency == 0
    assert len(search.trials) == 1  # only the run that decided the rate is kept
    asked.clear()
    capped = loads.find_max_rate(batcher.DynamicBatcher(doubler), make_input, 10, low=100, high=200, steps=0,
                                 max_n=800)  # fmt: skip
    assert capped.outcomes == ["unconfirmed", "meets"] and asked[0] == 459  # 1,001 is over the cap: not confirmed
    assert capped.best_rate == pytest.approx(100 * 2**0.25)  # so the search went on to the next rate


def test_bad_settings_are_refused_with_what_is_allowed():
    with pytest.raises(ValueError, match="max_batch must be a positive integer"):
        batcher.DynamicBatcher(doubler, max_batch=0)
    with pytest.raises(ValueError, match="max_wait_ms must be zero or a positive"):
        batcher.DynamicBatcher(doubler, max_wait_ms=-1)
    server = batcher.DynamicBatcher(doubler)
    with pytest.raises(ValueError, match="rate must be a positive number"):
        loads.poisson(server, make_input, rate=0, n=10)
    with pytest.raises(ValueError, match="positive integer"):
        loads.offline(server, make_input, 0)
    with pytest.raises(ValueError, match="need 0 < low < high"):
        loads.find_max_rate(server, make_input, 10, low=100, high=10)


def _post(url, body: bytes, method="POST"):
    req = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@contextlib.contextmanager
def serve_loop(server):
    """``server``'s serve loop in a thread for the block, stopped and joined after it."""
    stop = threading.Event()
    thread = threading.Thread(target=server.serve, args=(stop.is_set,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        thread.join(timeout=5)


@pytest.mark.processes
def test_http_front_end_answers_and_rejects_malformed_requests_with_a_4xx():
    server = batcher.DynamicBatcher(doubler, max_batch=4, max_wait_ms=1)
    with serve_loop(server):
        with serving.serve_http(server, FEATURES) as url:
            status, body = _post(url + "/predict", json.dumps({"inputs": [1.0] * FEATURES}).encode())
            assert status == 200 and body["outputs"] == [2.0] * FEATURES and body["server_ms"] >= 0
            cases = {
                b"{not json": (400, "not valid JSON"),
                b"[1, 2]": (400, "expected a JSON object"),
                json.dumps({"inputs": [1.0]}).encode(): (400, f"list of {FEATURES} numbers"),
                json.dumps({"inputs": ["x"] * FEATURES}).encode(): (400, "numbers only"),
                json.dumps({"inputs": [True] * FEATURES}).encode(): (400, "numbers only"),
            }
            for payload, (code, message) in cases.items():
                status, body = _post(url + "/predict", payload)
                assert status == code and message in body["error"], (payload, status, body)
            assert _post(url + "/elsewhere", b"{}")[0] == 404
            assert _post(url + "/predict", b"{}", method="PUT")[0] == 405
            with urllib.request.urlopen(url + "/health", timeout=5) as resp:
                assert json.loads(resp.read()) == {"status": "ok", "serving": True}
            # still healthy after all of that
            assert _post(url + "/predict", json.dumps({"inputs": [0.5] * FEATURES}).encode())[0] == 200
        port = int(url.rsplit(":", 1)[1])
        assert not procs.port_in_use(port), "leaving the block closes the listening socket"


@pytest.mark.processes
def test_http_load_from_a_second_process_leaves_nothing_behind():
    server = batcher.DynamicBatcher(doubler, max_batch=8, max_wait_ms=1)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with serving.serve_http(server, FEATURES) as url:
        result = serving.http_load(server, url, FEATURES, rate=200, n=50, max_s=10)
    assert result["sent"] == result["answered"] == 50 and result["error_count"] == 0
    assert len(result["latencies_ms"]) == 50
    assert np.median(result["latencies_ms"]) >= np.median(result["server_ms"])
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before and p.is_running()]
    assert not [p for p in left if p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.processes
def test_the_load_generator_is_bounded_in_time_and_refuses_bad_arguments(tmp_path):
    script = Path(serving.__file__).with_name("loadgen.py")
    bad = subprocess.run([sys.executable, str(script), "http://127.0.0.1:9", "--features", "4", "--rate", "0",
                          "--requests", "5", "--out", str(tmp_path / "x.json")], capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and "must be positive" in bad.stderr
    # Nothing listens on the port: every request errors, and the run still ends within its bound.
    port = 9  # the discard port; nothing listens on it here
    start = time.monotonic()
    run = subprocess.run([sys.executable, str(script), f"http://127.0.0.1:{port}", "--features", "4", "--rate", "50",
                          "--requests", "1000", "--max-seconds", "1", "--out", str(tmp_path / "r.json")],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert run.returncode == 0 and time.monotonic() - start < 15
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["answered"] == 0 and result["error_count"] == result["sent"] > 0
    assert result["sent"] < 1000, "it stopped at --max-seconds, not after all the requests"


@pytest.fixture
def served():
    """A doubling model behind the HTTP front end, with its serve loop running; yields (batcher, url)."""
    server = batcher.DynamicBatcher(doubler, max_batch=4, max_wait_ms=1)
    with serve_loop(server), serving.serve_http(server, FEATURES) as url:
        yield server, url


@pytest.mark.processes
def test_http_front_end_refuses_what_is_not_strict_json_and_wrong_methods(served):
    server, url = served
    cases = {
        b"[" * 100_000 + b"]" * 100_000: (400, "nested too deeply"),
        b'{"inputs": [NaN' + b", 1" * (FEATURES - 1) + b"]}": (400, "NaN is not a number JSON allows"),
        b'{"inputs": [Infinity' + b", 1" * (FEATURES - 1) + b"]}": (400, "Infinity is not a number JSON allows"),
        b'{"inputs": [1e999' + b", 1" * (FEATURES - 1) + b"]}": (400, "must be finite numbers"),
    }
    for payload, (code, message) in cases.items():
        status, body = _post(url + "/predict", payload)
        assert status == code and message in body["error"], (payload[:40], status, body)
    assert _post(url + "/predict", b"", method="GET")[0] == 405
    assert _post(url + "/health", b"{}")[0] == 405
    assert _post(url + "/predict", b"{}", method="OPTIONS")[0] == 405
    request = urllib.request.Request(url + "/predict", method="HEAD")
    with pytest.raises(urllib.error.HTTPError, match="405"):
        urllib.request.urlopen(request, timeout=5)
    assert _post(url + "/predict", json.dumps({"inputs": [1.0] * FEATURES}).encode())[0] == 200


@pytest.mark.processes
def test_a_model_with_non_finite_outputs_gets_a_500_in_strict_json(served, monkeypatch):
    server, url = served
    monkeypatch.setattr(server, "model_fn", lambda x: x * float("inf"))
    req = urllib.request.Request(url + "/predict", data=json.dumps({"inputs": [1.0] * FEATURES}).encode())
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=5)
    body = err.value.read()
    assert err.value.code == 500 and b"not finite" in body
    json.loads(body, parse_constant=lambda name: pytest.fail(f"{name} in a reply"))


@pytest.mark.processes
def test_without_a_serve_loop_a_request_is_answered_503_at_once():
    server = batcher.DynamicBatcher(doubler, max_batch=4, max_wait_ms=1)
    with serving.serve_http(server, FEATURES) as url:
        start = time.monotonic()
        status, body = _post(url + "/predict", json.dumps({"inputs": [1.0] * FEATURES}).encode())
        assert status == 503 and "no serve loop runs" in body["error"]
        assert time.monotonic() - start < 2  # not the 30 s a queued request would wait
        with urllib.request.urlopen(url + "/health", timeout=5) as resp:
            assert json.loads(resp.read()) == {"status": "ok", "serving": False}


@pytest.mark.processes
def test_a_slow_client_is_disconnected_and_a_vanished_one_is_one_line(served, monkeypatch, capfd):
    import socket

    server, url = served
    monkeypatch.setattr(serving._Handler, "timeout", 0.5)
    host, port = url.removeprefix("http://").split(":")
    slow = socket.create_connection((host, int(port)), timeout=10)
    slow.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\n")  # and then nothing: the headers never end
    start = time.monotonic()
    assert slow.recv(1024) == b"" and time.monotonic() - start < 5  # the server closed it after its timeout
    slow.close()
    for _ in range(5):  # clients that send a request and vanish before the answer: reset, not closed politely
        gone = socket.create_connection((host, int(port)), timeout=10)
        body = json.dumps({"inputs": [1.0] * FEATURES}).encode()
        gone.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        gone.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        gone.close()
    time.sleep(0.5)
    assert _post(url + "/predict", json.dumps({"inputs": [1.0] * FEATURES}).encode())[0] == 200  # still serving
    err = capfd.readouterr().err
    assert "Traceback" not in err, err
    assert all(line.startswith("labkit-serving: 127.0.0.1:") for line in err.splitlines()), err


def test_the_batcher_refuses_a_model_that_returns_the_wrong_number_of_rows():
    server = batcher.DynamicBatcher(lambda x: x[:1], max_batch=4, max_wait_ms=50)
    futures = [server.submit(make_input(i)) for i in range(3)]
    server.serve(until=lambda: True)
    for f in futures:
        with pytest.raises(ValueError, match="the model returned 1 rows for a batch of 3 requests"):
            f.result(timeout=1)
    ok = batcher.DynamicBatcher(doubler, max_batch=4)
    fut = ok.submit(make_input(1))
    ok.serve(until=lambda: True)
    assert fut.result(timeout=1).tolist() == [2.0] * FEATURES


@pytest.mark.processes
def test_http_load_keeps_the_servers_own_error_message_and_refuses_bad_arguments():
    server = batcher.DynamicBatcher(doubler, max_batch=8, max_wait_ms=1)
    with serving.serve_http(server, FEATURES + 1) as url:  # the server wants one more feature than is sent
        result = serving.http_load(server, url, FEATURES, rate=200, n=5, max_s=10)
    assert result["error_count"] == 5
    assert result["errors"][0] == f"HTTP 400: 'inputs' must be a list of {FEATURES + 1} numbers"
    for bad, message in (
        (dict(rate=float("nan")), "rate must be a positive finite number"),
        (dict(rate=float("inf")), "rate must be a positive finite number"),
        (dict(max_s=0), "max_s must be a positive finite number"),
        (dict(concurrency=0), "concurrency must be a whole number"),
        (dict(features=2.0), "features must be a whole number"),
    ):
        args = dict(features=FEATURES, rate=10.0, n=5) | bad
        with pytest.raises(ValueError, match=message):
            serving.http_load(server, "http://127.0.0.1:9", **args)
