"""labkit.serving.live: the scheduler loop fed by live traffic serves exactly as it serves a replayed trace, from any
thread, streaming each token; stopping or failing leaves no request waiting, no sequence in the cache, no thread."""

import asyncio
import threading
import time
from collections import deque

import numpy as np
import pytest
import torch
from conftest import greedy_continuation

from labkit.serving import engine, kv_cache, live, metrics


def _no_engine_thread():
    return not any(t.name == "labkit-live-engine" for t in threading.enumerate())


class StepClock:
    """A clock that moves only when the model runs, by a fixed amount per pass and per token: deterministic."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _ticking(cache, clock, after=lambda: None):
    real = cache.forward

    def forward(model, seqs, tokens):
        out = real(model, seqs, tokens)
        clock.t += 0.25 + 0.0625 * tokens.numel()  # binary fractions: the sums are exact
        after()
        return out

    return forward


@pytest.mark.parametrize("admission", ["reserve", "on-demand"])
def test_live_traffic_is_served_exactly_as_its_replayed_arrivals(gpt, admission, monkeypatch):
    rng = np.random.default_rng(4)
    arrivals = np.cumsum([0.0, *rng.choice([0.0, 0.5, 1.0], 8)])  # staggered, some together; never idle
    trace = deque(
        (float(at), rng.integers(0, 64, int(rng.integers(2, 9))).tolist(), int(rng.integers(6, 11))) for at in arrivals
    )
    clock = StepClock()
    cache = kv_cache.PagedKVCache(gpt, num_blocks=8, block_size=4, admission=admission)
    server = live.LiveEngine(engine.Engine(gpt, cache, max_batch=4), clock=clock)
    streams, prompts = [], []

    def submit_due():  # the clients: each request is submitted when the clock reaches its time
        while trace and trace[0][0] <= clock.t:
            _, prompt, n = trace.popleft()
            streams.append(server.submit(prompt, n))
            prompts.append(prompt)

    monkeypatch.setattr(cache, "forward", _ticking(cache, clock, submit_due))
    submit_due()
    deadline = time.monotonic() + 3  # were the engine ever idle, the stopped clock would never bring the rest
    server.serve_until(lambda: not trace or time.monotonic() > deadline)
    assert not trace and all(s.done for s in streams)
    run = server.take_run()
    assert len({r.arrival_s for r in run.records}) >= 5  # arrivals spread over the run, not one burst

    replay_clock = StepClock()
    replay_cache = kv_cache.PagedKVCache(gpt, num_blocks=8, block_size=4, admission=admission)
    monkeypatch.setattr(replay_cache, "forward", _ticking(replay_cache, replay_clock))
    requests = [engine.Request(r.rid, p, r.max_tokens, r.arrival_s) for r, p in zip(run.records, prompts, strict=True)]
    replayed = engine.Engine(gpt, replay_cache, max_batch=4).serve(requests, clock=replay_clock)
    for a, b, stream in zip(run.records, replayed.records, streams, strict=True):
        assert a.ok and b.ok and list(stream) == a.tokens == b.tokens  # greedy: tests/test_llm_serving.py
        assert a.token_times == b.token_times and a.arrival_s == b.arrival_s and stream.record is a
        assert (a.preempted, a.cached_tokens, a.recomputed) == (b.preempted, b.cached_tokens, b.recomputed)
    assert (run.steps, run.batch_sizes, run.usage) == (replayed.steps, replayed.batch_sizes, replayed.usage)
    assert run.duration_s == replayed.duration_s and run.preemptions == replayed.preemptions
    assert max(run.batch_sizes) > 1 and (admission == "reserve" or run.preemptions > 0)
    assert len(cache.tables) == 0 and cache.free_blocks == 8


def test_concurrent_submits_from_many_threads_each_get_their_tokens_in_the_background(gpt):
    cache = kv_cache.PagedKVCache(gpt, num_blocks=40, block_size=4)
    results, errors = {}, []
    with live.LiveEngine(engine.Engine(gpt, cache, max_batch=4)) as server:

        def client(k):
            try:
                for i in range(3):
                    prompt, n = [k + 1, i + 1, 7], 3 + (k + i) % 5
                    results[(k, i)] = (prompt, n, list(server.submit(prompt, n)))
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        run = server.take_run()
        assert server.serving and repr(server).endswith("serving)")
    assert not errors and len(results) == 12
    for prompt, n, tokens in results.values():
        assert tokens == greedy_continuation(gpt, prompt, n)
    assert len(run.records) == 12 and all(r.ok for r in run.records)
    assert [r.rid for r in run.records] == sorted(r.rid for r in run.records)
    assert sum(run.batch_sizes) + 12 == sum(r.max_tokens for r in run.records)  # the first token comes from prefill
    measured = metrics.serving_metrics(run, metrics.SLO(ttft_s=10.0, tpot_s=10.0))
    assert measured.completed == 12 and measured.good == 12
    assert not cache.tables and _no_engine_thread()
    with pytest.raises(RuntimeError, match="stopped"):
        server.submit([1], 1)


def test_an_idle_engine_waits_on_its_queue_without_spinning_a_core(gpt):
    with live.LiveEngine(engine.Engine(gpt, kv_cache.PagedKVCache(gpt, 8, 4))) as server:
        list(server.submit([1, 2], 2))  # the loop has run
        time.sleep(0.1)  # PyTorch's worker threads may spin a moment after work
        cpu = time.process_time()
        time.sleep(0.3)
        assert time.process_time() - cpu < 0.05  # a spinning loop would use the whole 0.3 s of a core
        assert server.serving


def test_stop_while_requests_run_fails_them_and_leaves_no_sequence_and_no_thread(gpt):
    cache = kv_cache.PagedKVCache(gpt, num_blocks=40, block_size=4)
    server = live.LiveEngine(engine.Engine(gpt, cache, max_batch=2)).start()
    streams = [server.submit([i + 1, 2, 3], 80) for i in range(4)]  # two run, two wait
    first = next(iter(streams[0]))
    assert isinstance(first, int) and cache.tables
    server.stop()
    assert not cache.tables and cache.free_blocks == 40 and _no_engine_thread()
    for stream in streams:
        assert stream.done
        with pytest.raises(live.EngineStopped, match="stopped before this request finished"):
            list(stream)
        with pytest.raises(live.EngineStopped):
            stream.result(timeout=1)
    run = server.take_run()
    assert len(run.records) == 4 and all("stopped" in r.error for r in run.records)
    with pytest.raises(RuntimeError, match="stopped"):
        server.submit([1], 1)
    with pytest.raises(RuntimeError, match="stopped"):
        server.serve_until(lambda: True)
    server.stop()  # stopping twice is harmless


def test_requests_queued_before_the_loop_runs_are_served_by_serve_until_in_this_thread(gpt):
    server = live.LiveEngine(engine.Engine(gpt, kv_cache.PagedKVCache(gpt, 40, 4), max_batch=3))
    streams = [server.submit([5, 6, i], 4) for i in range(3)]
    late = []
    sender = threading.Thread(target=lambda: late.append(server.submit([9], 5)))
    sender.start()
    sender.join()
    server.serve_until(lambda: True)  # stops once nothing is left
    assert [len(s.result(timeout=0).tokens) for s in streams] == [4, 4, 4] and late[0].result(timeout=0).ok
    assert not server.serving and "idle" in repr(server)

    async def collect(stream):
        return [token async for token in stream]

    with server:  # the async iterator, as the HTTP server reads a stream
        stream = server.submit([1, 2, 3], 6)
        assert asyncio.run(collect(stream)) == greedy_continuation(gpt, [1, 2, 3], 6) == stream.result().tokens


def test_a_model_error_fails_the_requests_in_flight_and_the_engine_serves_on(gpt, monkeypatch):
    cache = kv_cache.PagedKVCache(gpt, num_blocks=40, block_size=4)
    real, broken = cache.forward, [True]

    def forward(model, seqs, tokens):
        if broken[0]:
            raise RuntimeError("out of memory (simulated)")
        return real(model, seqs, tokens)

    monkeypatch.setattr(cache, "forward", forward)
    server = live.LiveEngine(engine.Engine(gpt, cache))
    stream = server.submit([1, 2], 4)
    with pytest.raises(RuntimeError, match="simulated"):
        server.serve_until(lambda: True)
    with pytest.raises(RuntimeError, match="the engine failed: RuntimeError: out of memory"):
        list(stream)
    assert not cache.tables and "simulated" in str(server.last_error)
    with server:
        failing = server.submit([3], 4)
        with pytest.raises(RuntimeError, match="simulated"):
            failing.result(timeout=5)
        broken[0] = False
        assert server.submit([3], 4).result(timeout=5).tokens == greedy_continuation(gpt, [3], 4)
    assert not cache.tables and _no_engine_thread()


BAD = {
    "empty prompt": (([], 3), "the prompt is empty"),
    "string prompt": (("hello", 3), "the prompt must be a list of token ids, got str"),
    "tensor prompt": ((torch.tensor([1, 2]), 3), "pass tensor.tolist()"),
    "token out of the vocabulary": (([64], 3), "token ids must lie in 0..63"),
    "float token": (([1.0], 3), "token ids must be whole numbers"),
    "no tokens asked": (([1], 0), "max_tokens must be a whole number of at least 1, got 0"),
    "beyond the context": (([1] * 90, 7), "exceeds the context of 96 tokens"),
    "larger than the cache": (([1] * 10, 30), "needs 5 blocks of KV cache; the whole cache has 4"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_request_is_refused_at_submit_with_its_reason(gpt, case):
    (prompt, n), message = BAD[case]
    server = live.LiveEngine(engine.Engine(gpt, kv_cache.PagedKVCache(gpt, num_blocks=4, block_size=8)))
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        server.submit(prompt, n)
    assert server.submit((1, 2), 2).rid == 0  # a tuple is a prompt too; the refused request took no id


def test_bad_arguments_say_what_is_allowed(gpt):
    with pytest.raises(ValueError, match="engine must be a labkit.serving.engine.Engine"):
        live.LiveEngine(gpt)
    server = live.LiveEngine(engine.Engine(gpt, kv_cache.PagedKVCache(gpt, 4, 4)))
    with pytest.raises(ValueError, match="until must be a function"):
        server.serve_until(True)
    with server, pytest.raises(RuntimeError, match="already started"):
        server.start()
