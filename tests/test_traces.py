"""The published trace samples, their licences, and the requests and predictions built from them (labkit.serving.traces)."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from labkit.serving import engine, kv_cache, traces
from labkit.workloads import models


@pytest.mark.parametrize(("kind", "rows", "span_s"), [("conv", 3000, 628.703398), ("code", 3000, 1088.955361)])
def test_the_azure_samples_load_with_their_documented_rows(kind, rows, span_s):
    trace = traces.azure(kind)
    assert list(trace.columns) == ["arrival_s", "context_tokens", "generated_tokens"]
    assert len(trace) == rows
    assert trace.arrival_s.iloc[0] == 0 and trace.arrival_s.is_monotonic_increasing
    assert trace.arrival_s.iloc[-1] == pytest.approx(span_s, abs=1e-6)
    assert trace.context_tokens.dtype.kind == "i" and (trace[["context_tokens", "generated_tokens"]] > 0).all().all()


@pytest.mark.parametrize(("name", "rows", "span_s"), [("conversation", 2000, 669.0), ("synthetic", 1000, 272.653)])
def test_the_mooncake_samples_load_with_their_documented_rows(name, rows, span_s):
    trace = traces.mooncake(name)
    assert list(trace.columns) == ["arrival_s", "input_length", "output_length", "hash_ids"]
    assert len(trace) == rows and trace.arrival_s.is_monotonic_increasing
    assert trace.arrival_s.iloc[-1] == pytest.approx(span_s)
    # one hash id per 512-token block, the last one partial (the trace's README)
    blocks = trace.input_length.map(lambda n: math.ceil(n / 512))
    assert (trace.hash_ids.map(len) == blocks).all()


def test_the_licences_and_the_readme_are_shipped_and_name_the_licences():
    folder = traces.DATA
    readme = (folder / "README.md").read_text(encoding="utf-8")
    for words in ("CC BY 4.0", "Apache-2.0", "Splitwise", "Mooncake", "Patel", "Qin"):
        assert words in readme, words
    for sample in [*traces.AZURE_FILES.values(), *traces.MOONCAKE_FILES.values()]:
        assert sample in readme, sample
    assert "Attribution 4.0 International" in (folder / "LICENSE-CC-BY-4.0-azure.txt").read_text(encoding="utf-8-sig")
    apache = (folder / "LICENSE-Apache-2.0-mooncake.txt").read_text(encoding="utf-8")
    assert "Apache License" in apache and "Version 2.0, January 2004" in apache
    notice = (folder / "NOTICE").read_text(encoding="utf-8")
    assert "Mooncake" in notice and "Apache License, Version 2.0" in notice and "Azure" in notice


def test_the_prefix_hit_prediction_on_a_hand_made_trace_is_exact():
    # blocks of 4 tokens per hash id, cache blocks of 2 tokens: a cache block is known by its chain and position
    hash_ids = [[1, 2], [1, 2, 3], [1, 5], [1, 2], [9, 2]]
    prompt_lens = [8, 10, 7, 8, 8]
    hits = traces.prefix_hits(hash_ids, prompt_lens, block_tokens=4, cache_block=2)
    # first: nothing filed; second: A's 4 blocks; third: the 2 blocks of chain (1,) and not (1, 5)'s;
    # fourth: 3 of A's 4 (never the block holding the last prompt token); fifth: same id 2, another chain: none
    assert hits.cached_tokens == [0, 8, 4, 6, 0]
    assert hits.hit_rate == 18 / 41
    assert hits.evicted_blocks == 0


def test_the_lru_prediction_evicts_the_least_recently_used_block():
    ids = [[1, 2, 3], [1, 2, 4], [1, 2, 3]]
    unbounded = traces.prefix_hits(ids, [3, 3, 3], block_tokens=1, cache_block=1)
    assert unbounded.cached_tokens == [0, 2, 2]
    three = traces.prefix_hits(ids, [3, 3, 3], block_tokens=1, cache_block=1, capacity_blocks=3)
    # the second request files (1, 2, 4), evicting (1, 2, 3); the third still finds (1,) and (1, 2)
    assert three.cached_tokens == [0, 2, 2] and three.evicted_blocks == 2
    two = traces.prefix_hits(ids, [3, 3, 3], block_tokens=1, cache_block=1, capacity_blocks=2)
    # A's root (1,) is the least recently used of its blocks: evicted first, so nothing is found after
    assert two.cached_tokens == [0, 0, 0]


def test_requests_from_mooncake_hash_ids_share_exactly_their_common_prefix_blocks():
    trace = pd.DataFrame(
        dict(
            arrival_s=[0.0, 1.0, 2.0],
            input_length=[1536, 1400, 1000],
            output_length=[512, 100, 1],
            hash_ids=[[1, 2, 3], [1, 2, 4], [7, 2]],
        )
    )
    a, b, c = traces.to_requests(trace, max_len=64, block_tokens=8, seed=3)
    assert (len(a.prompt), len(b.prompt), len(c.prompt)) == (24, 22, 16)  # ceil(tokens · 8 / 512)
    assert (a.max_tokens, b.max_tokens, c.max_tokens) == (8, 2, 1)
    assert a.prompt[:16] == b.prompt[:16] and a.prompt[16] != b.prompt[16]  # ids 1, 2 shared; 3 and 4 differ
    assert c.prompt[8:16] == a.prompt[8:16] and c.prompt[:8] != a.prompt[:8]  # the same id, the same tokens
    assert all(0 <= t < 256 for r in (a, b, c) for t in r.prompt)
    assert traces.to_requests(trace, max_len=64, block_tokens=8, seed=3)[0].prompt == a.prompt  # deterministic


@pytest.mark.parametrize(("block_tokens", "cache_block", "warm"), [(4, 4, 0), (8, 4, 4)])
def test_the_predicted_hit_rate_is_what_the_engine_measures(block_tokens, cache_block, warm):
    torch.manual_seed(0)
    gpt = models.TinyGPT(vocab=256, max_len=128, d_model=32, n_layers=1, n_heads=2).eval()
    window = traces.mooncake("conversation").iloc[1320:1332]
    requests = traces.to_requests(window, max_len=128, rate_per_s=1000.0, block_tokens=block_tokens, truncate=True)
    predicted = traces.prefix_hits(window.hash_ids, [len(r.prompt) for r in requests], block_tokens, cache_block)
    assert predicted.hit_rate > 0.05
    # one request at a time (max_batch=1), and a cache far larger than the window: nothing is evicted
    cache = kv_cache.PagedKVCache(gpt, 1024, cache_block, prefix_caching=True)
    assert traces.warm_cache(cache, gpt, requests[:warm]) == sum(predicted.cached_tokens[:warm])
    run = engine.Engine(gpt, cache, max_batch=1).serve(requests[warm:])
    assert all(r.ok for r in run.records)
    assert [r.cached_tokens for r in run.records] == predicted.after(warm).cached_tokens
    assert run.prefix_hit_rate == predicted.after(warm).hit_rate
    assert not cache.tables  # warming and serving leave no sequence behind


def test_to_requests_fits_the_context_and_keeps_the_shape_of_the_gaps():
    trace = traces.azure("code")
    requests = traces.to_requests(trace, max_len=256, rate_per_s=50.0)
    assert all(len(r.prompt) + r.max_tokens <= 256 and r.max_tokens >= 1 for r in requests)
    arrivals = np.array([r.arrival_s for r in requests])
    assert arrivals[0] == 0 and (len(arrivals) - 1) / arrivals[-1] == pytest.approx(50.0, rel=1e-12)
    assert traces.burstiness(arrivals, (1.0,)).gap_cv == pytest.approx(
        traces.burstiness(trace.arrival_s).gap_cv, rel=1e-9
    )
    for r in requests[:50]:
        engine.check_request(r, 256, 256, horizon_s=600.0)
    mooncake = traces.mooncake("conversation").iloc[:200]
    with pytest.raises(ValueError, match="do not fit the context of 512 tokens.*truncate=True"):
        traces.to_requests(mooncake, max_len=512)
    cut = traces.to_requests(mooncake, max_len=512, truncate=True)
    assert max(len(r.prompt) + r.max_tokens for r in cut) == 512


def test_evenly_spaced_arrivals_have_no_burstiness():
    even = traces.burstiness(np.arange(100.0), windows_s=(10.0,))
    assert (even.requests, even.duration_s, even.rate_per_s) == (100, 99.0, 1.0)
    assert even.gap_cv == 0.0 and even.dispersion == {10.0: 0.0}  # 9 whole windows of 10 arrivals each


def test_a_long_poisson_process_has_burstiness_near_one():
    # 20,000 exponential gaps: the CV's sampling standard deviation is about 1/sqrt(n) = 0.007; counts in k windows
    # have an index of dispersion with standard deviation sqrt(2/(k-1)): 0.032 for 1 s (k ~ 2000), 0.063 for 4 s
    # (k ~ 500). The tolerances are 5 standard deviations.
    arrivals = traces.poisson_arrivals(20_001, rate_per_s=10.0, seed=1)
    b = traces.burstiness(arrivals, windows_s=(1.0, 4.0))
    assert abs(b.gap_cv - 1) < 5 / math.sqrt(20_000)
    assert abs(b.dispersion[1.0] - 1) < 5 * math.sqrt(2 / 1999)
    assert abs(b.dispersion[4.0] - 1) < 5 * math.sqrt(2 / 499)
    table = traces.burstiness_vs_poisson(traces.azure("code").arrival_s, windows_s=(10.0,))
    assert list(table.index) == ["trace", "Poisson, seed 0"] and list(table.columns)[-1] == "dispersion 10 s"
    assert table.loc["trace", "gap_cv"] > 5 * table.loc["Poisson, seed 0", "gap_cv"]  # the coding service's bursts


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: traces.azure("chat"), r"kind must be one of \['code', 'conv'\]"),
        (lambda: traces.mooncake("toolagent"), "name must be one of"),
        (lambda: traces.to_requests([1, 2], max_len=64), "trace must be a non-empty DataFrame"),
        (lambda: traces.to_requests(pd.DataFrame(dict(arrival_s=[0.0])), max_len=64), "must have the columns"),
        (lambda: traces.to_requests(traces.azure().iloc[:5], max_len=1), "max_len must be a whole number, 2 or more"),
        (lambda: traces.to_requests(traces.azure().iloc[:5], max_len=64, rate_per_s=0), "rate_per_s must be a posit"),
        (lambda: traces.to_requests(traces.azure().iloc[:5], max_len=64, length_scale=1.0), "length_scale up to"),
        (lambda: traces.to_requests(traces.mooncake().iloc[:5], 64, length_scale=0.1), "set by block_tokens"),
        (lambda: traces.to_requests(traces.mooncake().iloc[:3], 64, rate_per_s=1.0), "arrives at once"),
        (lambda: traces.to_requests(traces.mooncake().iloc[:5], 64, block_tokens=0), "block_tokens must be a whole"),
        (lambda: traces.to_requests(traces.azure().iloc[:5], 64, truncate="yes"), "truncate must be True or False"),
        (lambda: traces.burstiness([0.0, 1.0]), "at least 3 arrival times"),
        (lambda: traces.burstiness([0.0, 2.0, 1.0]), "non-decreasing"),
        (lambda: traces.burstiness([0.0, 1.0, 2.0], windows_s=(5.0,)), r"allowed: up to 1 s"),
        (lambda: traces.burstiness([0.0, 1.0, 2.0], windows_s=(-1.0,)), "window length"),
        (lambda: traces.burstiness([0.0, 1.0, 2.0], windows_s=1.0), "windows_s must be a list"),
        (lambda: traces.poisson_arrivals(0, 1.0), "n must be a whole number"),
        (lambda: traces.prefix_hits([[1]], [1, 2], 4, 4), "one length"),
        (lambda: traces.prefix_hits([[1]], [9], 4, 4), "needs at least 3 hash ids"),
        (lambda: traces.prefix_hits([[1]], [4], 4, 4, capacity_blocks=0), "capacity_blocks must be a whole"),
        (lambda: traces.prefix_hits([[1]], [4], 4, 4).after(1), "first must be below the 1 requests"),
        (lambda: traces.warm_cache(None, None, []), "prefix_caching=True"),
    ],
)
def test_bad_input_says_what_is_allowed(call, match):
    with pytest.raises(ValueError, match=match):
        call()
