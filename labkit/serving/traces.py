"""Published LLM-serving traces, sampled: real arrivals, lengths and shared prefixes as the engine's load.

Taught in notebook `serving_endpoint`. Two public traces ship as small contiguous samples in the folder
``labkit/serving/traces/`` (its README says which rows of which file at which commit, and the licences):

- the Azure LLM inference trace 2023 (Patel et al., "Splitwise", ISCA 2024; CC BY 4.0): each request's arrival
  time and its context and generated token counts, for a conversation service (``"conv"``) and a coding one
  (``"code"``);
- the Mooncake traces (Qin et al., "Mooncake", FAST 2025; Apache-2.0): arrival, input and output lengths, and
  ``hash_ids``, one id per 512-token block of the prompt, equal ids meaning an equal prefix up to that block.

:func:`burstiness` measures how far arrivals are from a Poisson process (both of its statistics are 1 for one);
:func:`to_requests` turns a window of a trace into :class:`~labkit.serving.engine.Request` objects a small model
can serve, keeping the shape of the gaps and, for Mooncake, the real prefix sharing; :func:`prefix_hits` predicts,
from the hash ids alone, the share of prompt tokens a prefix cache finds, counted as
:class:`~labkit.serving.kv_cache.PagedKVCache` counts them.
"""

from __future__ import annotations

import gzip
import json
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

import numpy as np
import pandas as pd
import torch

from ..core.checks import positive, whole
from ..core.result import Result
from ..workloads.models import TinyGPT
from .engine import Request
from .kv_cache import PagedKVCache

DATA = Path(__file__).with_name("traces")  # the samples, their README and their licences
MOONCAKE_BLOCK_TOKENS = 512  # tokens per hash id in the Mooncake traces (their README)
AZURE_FILES = {"conv": "azure_llm_2023_conv.csv", "code": "azure_llm_2023_code.csv"}
MOONCAKE_FILES = {"conversation": "mooncake_conversation.jsonl.gz", "synthetic": "mooncake_synthetic.jsonl.gz"}
Times: TypeAlias = "Sequence[float] | np.ndarray | pd.Series"  # arrival times (s): a list, an array or a trace's column


def azure(kind: str = "conv") -> pd.DataFrame:
    """The Azure LLM inference trace 2023 sample: one row per request, in arrival order.

    Taught in notebook `serving_endpoint`. ``kind`` is ``"conv"`` (a conversation service, 3,000 requests over
    629 s) or ``"code"`` (a coding service, 3,000 requests over 1,089 s): the first 3,000 rows of each published
    file. Columns: ``arrival_s`` (seconds after the sample's first request, from the trace's TIMESTAMP),
    ``context_tokens`` and ``generated_tokens``. Licence CC BY 4.0; cite Patel et al., "Splitwise", ISCA 2024.
    """
    if kind not in AZURE_FILES:
        raise ValueError(f"kind must be one of {sorted(AZURE_FILES)} (the two services of the trace); got {kind!r}")
    raw = pd.read_csv(DATA / AZURE_FILES[kind])
    stamps = pd.to_datetime(raw["TIMESTAMP"])
    return pd.DataFrame(
        {
            "arrival_s": (stamps - stamps.iloc[0]).dt.total_seconds().to_numpy(),
            "context_tokens": raw["ContextTokens"].to_numpy(),
            "generated_tokens": raw["GeneratedTokens"].to_numpy(),
        }
    )


def mooncake(name: str = "conversation") -> pd.DataFrame:
    """A Mooncake trace sample: one row per request, in arrival order, with its prompt's block hash ids.

    Taught in notebook `serving_endpoint`. ``name`` is ``"conversation"`` (the first 2,000 requests of the
    FAST'25 conversation trace, 669 s; its timestamps come in steps of about 3 s, so requests arrive in groups) or
    ``"synthetic"`` (the first 1,000 of the synthetic trace, whose arrivals were drawn from a Poisson process).
    Columns: ``arrival_s`` (the trace's millisecond timestamp in seconds), ``input_length``, ``output_length``
    and ``hash_ids`` (a list per request, one id per 512-token block, the last block partial). Licence
    Apache-2.0; cite Qin et al., "Mooncake", FAST 2025.
    """
    if name not in MOONCAKE_FILES:
        raise ValueError(f"name must be one of {sorted(MOONCAKE_FILES)}; got {name!r}")
    with gzip.open(DATA / MOONCAKE_FILES[name], "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return pd.DataFrame(
        {
            "arrival_s": np.array([r["timestamp"] for r in rows], dtype=float) / 1e3,
            "input_length": np.array([r["input_length"] for r in rows]),
            "output_length": np.array([r["output_length"] for r in rows]),
            "hash_ids": [list(r["hash_ids"]) for r in rows],
        }
    )


# ---------------------------------------------------------------------------------------------------------------
# Burstiness: how far arrivals are from a Poisson process


@dataclass
class Burstiness(Result):
    """Two measures of burstiness of one arrival sequence; a Poisson process has 1 for both.

    Part of notebook `serving_endpoint`'s traces (:func:`burstiness_vs_poisson` tabulates it). ``gap_cv`` is the coefficient of variation (standard deviation / mean)
    of the gaps between arrivals: exponential gaps have 1, evenly spaced ones 0, bursts separated by lulls more
    than 1. ``dispersion`` maps a window length (s) to the index of dispersion (variance / mean) of the number of
    arrivals in consecutive windows of that length: Poisson counts have 1 at every length, and bursty traffic
    grows above 1 as the windows reach the length of its bursts and lulls.
    """

    source: str
    requests: int
    duration_s: float
    rate_per_s: float
    gap_cv: float
    dispersion: dict[float, float] = field(default_factory=dict)


def _arrivals(arrival_s) -> np.ndarray:
    t = np.asarray(arrival_s, dtype=float) if not isinstance(arrival_s, str) else np.array([])
    if t.ndim != 1 or t.size < 3:
        raise ValueError(f"arrival_s must be a sequence of at least 3 arrival times (s); got {arrival_s!r:.80}")
    if not np.all(np.isfinite(t)) or np.any(np.diff(t) < 0):
        raise ValueError("arrival_s must hold finite times in non-decreasing order (a trace's arrival column)")
    if t[-1] == t[0]:
        raise ValueError("arrival_s spans no time (every request at the same instant): no rate to measure")
    return t


def burstiness(arrival_s: Times, windows_s: Sequence[float] = (1.0, 10.0, 60.0), source: str = "trace") -> Burstiness:
    """The coefficient of variation of the gaps and the index of dispersion of counts per window of ``arrival_s``.

    Part of notebook `serving_endpoint`'s traces, through :func:`burstiness_vs_poisson`. The rate is (requests − 1) / (last arrival − first). Counts are taken
    in consecutive windows from the first arrival; a last, incomplete window is left out, and each window length
    must fit at least twice into the span. For a Poisson process of n arrivals the gaps' CV has a sampling
    standard deviation of about 1/√n, and the dispersion over k windows one of about √(2/(k−1)).
    """
    t = _arrivals(arrival_s)
    if isinstance(windows_s, (str, bytes)) or not isinstance(windows_s, (Sequence, np.ndarray)):
        raise ValueError(f"windows_s must be a list of window lengths (s), e.g. (1.0, 10.0); got {windows_s!r}")
    span = float(t[-1] - t[0])
    gaps = np.diff(t)
    dispersion = {}
    for w in windows_s:
        width = positive("each window length (s)", w)
        k = int(span // width)
        if k < 2:
            raise ValueError(f"window {w!r} s does not fit twice into the arrivals' span of {span:.4g} s; "
                             f"allowed: up to {span / 2:.4g} s")  # fmt: skip
        counts = np.bincount(((t - t[0]) // width).astype(int), minlength=k)[:k]
        mean = counts.mean()
        dispersion[float(w)] = float(counts.var(ddof=1) / mean) if mean > 0 else math.nan
    return Burstiness(source, int(t.size), span, (t.size - 1) / span, float(gaps.std() / gaps.mean()), dispersion)


def poisson_arrivals(n: int, rate_per_s: float, seed: int = 0) -> np.ndarray:
    """``n`` arrival times (s) of a Poisson process of ``rate_per_s``, the first at 0: exponential gaps, seeded.

    Taught in notebook `serving_endpoint`, where it stands beside a trace of the same rate and length.
    """
    n, rate = whole("n", n), positive("rate_per_s", rate_per_s)
    gaps = np.random.default_rng(whole("seed", seed, 0)).exponential(1 / rate, n - 1)
    return np.concatenate([[0.0], np.cumsum(gaps)])


def burstiness_vs_poisson(
    arrival_s: Times, windows_s: Sequence[float] = (1.0, 10.0, 60.0), seed: int = 0, source: str = "trace"
) -> pd.DataFrame:
    """:func:`burstiness` of ``arrival_s`` and of a seeded Poisson process of the same length and mean rate.

    Taught in notebook `serving_endpoint`: one row each, columns ``requests``, ``rate_per_s``, ``gap_cv`` and one
    ``dispersion <w> s`` per window.
    """
    measured = burstiness(arrival_s, windows_s, source)
    poisson = poisson_arrivals(measured.requests, measured.rate_per_s, seed)
    if poisson[-1] < 2 * max(windows_s, default=0.0):  # a short draw: the windows must fit the Poisson span as well
        raise ValueError(f"the Poisson draw of seed {seed} spans {poisson[-1]:.4g} s, too short for a window of "
                         f"{max(windows_s)} s; allowed: windows up to a quarter of the span")  # fmt: skip
    rows = []
    for b in (measured, burstiness(poisson, windows_s, f"Poisson, seed {seed}")):
        row = dict(source=b.source, requests=b.requests, rate_per_s=b.rate_per_s, gap_cv=b.gap_cv)
        row.update({f"dispersion {w:g} s": d for w, d in b.dispersion.items()})
        rows.append(row)
    return pd.DataFrame(rows).set_index("source")


# ---------------------------------------------------------------------------------------------------------------
# A trace window as engine requests


def _kind(trace) -> str:
    if not isinstance(trace, pd.DataFrame) or trace.empty:
        raise ValueError(f"trace must be a non-empty DataFrame from traces.azure() or traces.mooncake() (a slice "
                         f"of one is fine); got {type(trace).__name__}")  # fmt: skip
    if {"arrival_s", "input_length", "output_length", "hash_ids"} <= set(trace.columns):
        return "mooncake"
    if {"arrival_s", "context_tokens", "generated_tokens"} <= set(trace.columns):
        return "azure"
    raise ValueError(f"trace must have the columns of traces.azure() (arrival_s, context_tokens, generated_tokens) "
                     f"or of traces.mooncake() (arrival_s, input_length, output_length, hash_ids); "
                     f"got {list(trace.columns)}")  # fmt: skip


def _scaled_arrivals(t: np.ndarray, rate_per_s: float | None) -> np.ndarray:
    if not np.all(np.isfinite(t)) or np.any(np.diff(t) < 0):
        raise ValueError("the trace's arrival_s must be finite and non-decreasing (keep the rows in arrival order)")
    t = t - t[0]
    if rate_per_s is None or t.size == 1:
        return t
    rate = positive("rate_per_s", rate_per_s)
    if t[-1] == 0:
        raise ValueError("every request of this window arrives at once: there is no rate to scale; "
                         "pass rate_per_s=None or a longer window")  # fmt: skip
    return t * ((t.size - 1) / t[-1]) / rate  # gaps divided by one factor: their shape (CV, bursts) is kept


def _lengths(name: str, values) -> np.ndarray:
    v = np.asarray(values)
    if v.dtype.kind not in "iu" or np.any(v < 0):
        raise ValueError(f"the trace's {name} must be whole numbers, 0 or more")
    return v.astype(np.int64)


def to_requests(
    trace: pd.DataFrame,
    max_len: int,
    rate_per_s: float | None = None,
    vocab: int = 256,
    length_scale: float | None = None,
    block_tokens: int = 16,
    truncate: bool = False,
    seed: int = 0,
) -> list[Request]:
    """A window of a trace as engine requests that a model with a context of ``max_len`` tokens can serve.

    Taught in notebook `serving_endpoint`. Times: each request arrives ``arrival_s`` after the window's first;
    with ``rate_per_s`` every gap is divided by one factor so that the mean rate is ``rate_per_s`` (the gaps'
    shape, hence their CV and bursts, is kept). Lengths: every token count is multiplied by one scale and rounded
    up (a request keeps at least one token of each):

    - Azure rows: ``length_scale``, by default the largest with which every request of the window fits
      ``max_len`` (prompt + output); prompts are seeded random token ids in ``0..vocab-1``, none shared.
    - Mooncake rows: the scale is ``block_tokens / 512``, so each 512-token block of the trace becomes
      ``block_tokens`` tokens; the prompt is the blocks of its hash ids in order, each hash id always the same
      ``block_tokens`` token ids (seeded by ``seed`` and the id), so equal hash-id prefixes give equal token
      prefixes, which a prefix cache finds. Make ``block_tokens`` a multiple of the cache's ``block_size`` so that
      a trace block is whole cache blocks.

    A request that does not fit raises ValueError, unless ``truncate=True``: then its output is cut to at most
    ``max_len - 1`` tokens and its prompt to what is left, keeping the prompt's beginning (its shared prefix).
    The requests' ids are 0, 1, ... in the window's order.
    """
    kind = _kind(trace)
    max_len, vocab, bt = whole("max_len", max_len, 2), whole("vocab", vocab), whole("block_tokens", block_tokens)
    seed = whole("seed", seed, 0)
    if not isinstance(truncate, bool):
        raise ValueError(f"truncate must be True or False; got {truncate!r}")
    arrivals = _scaled_arrivals(trace["arrival_s"].to_numpy(dtype=float), rate_per_s)
    if kind == "mooncake":
        if length_scale is not None:
            raise ValueError("length_scale is set by block_tokens for a Mooncake trace (block_tokens / 512); "
                             "pass length_scale=None")  # fmt: skip
        scale = bt / MOONCAKE_BLOCK_TOKENS
        inputs, outputs = (
            _lengths("input_length", trace["input_length"]),
            _lengths("output_length", trace["output_length"]),
        )
    else:
        inputs = _lengths("context_tokens", trace["context_tokens"])
        outputs = _lengths("generated_tokens", trace["generated_tokens"])
        if length_scale is None:  # ceil(c·s) + ceil(g·s) < (c + g)·s + 2 <= max_len
            scale = (max_len - 2) / max(1, int((inputs + outputs).max()))
        else:
            scale = positive("length_scale", length_scale)
    prompt_lens = np.maximum(1, np.ceil(inputs * scale)).astype(int)
    output_lens = np.maximum(1, np.ceil(outputs * scale)).astype(int)
    over = np.flatnonzero(prompt_lens + output_lens > max_len)
    if over.size and not truncate:
        i = int(over[0])
        fix = ("a smaller block_tokens, or truncate=True" if kind == "mooncake" else
               f"length_scale up to {(max_len - 2) / int((inputs + outputs).max()):.4g}, or truncate=True")  # fmt: skip
        raise ValueError(f"{over.size} of {len(trace)} requests do not fit the context of {max_len} tokens (the "
                         f"first, row {i}: prompt {prompt_lens[i]} + output {output_lens[i]} tokens); allowed: "
                         f"{fix}")  # fmt: skip
    output_lens = np.minimum(output_lens, max_len - 1)
    prompt_lens = np.minimum(prompt_lens, max_len - output_lens)
    rng = np.random.default_rng(seed)
    blocks: dict[int, list[int]] = {}
    requests = []
    for i in range(len(trace)):
        if kind == "mooncake":
            ids = trace["hash_ids"].iloc[i]
            need = math.ceil(prompt_lens[i] / bt)
            if not isinstance(ids, (list, tuple)) or len(ids) < need:
                raise ValueError(
                    f"row {i}: hash_ids must be a list of at least ceil(input_length / 512) ids; got {ids!r:.80}"
                )
            prompt = [tok for h in ids[:need] for tok in _block(blocks, h, bt, vocab, seed)][: prompt_lens[i]]
        else:
            prompt = rng.integers(0, vocab, prompt_lens[i]).tolist()
        requests.append(Request(i, prompt, int(output_lens[i]), float(arrivals[i])))
    return requests


def _block(blocks: dict[int, list[int]], h, block_tokens: int, vocab: int, seed: int) -> list[int]:
    """The token ids of hash id ``h``: always the same for the same id, seed, block length and vocabulary."""
    if not isinstance(h, (int, np.integer)) or isinstance(h, bool) or h < 0:
        raise ValueError(f"hash ids must be whole numbers, 0 or more; got {h!r}")
    key = int(h)
    if key not in blocks:
        blocks[key] = np.random.default_rng([seed, key]).integers(0, vocab, block_tokens).tolist()
    return blocks[key]


# ---------------------------------------------------------------------------------------------------------------
# The prefix cache's hits, predicted from the hash ids


@dataclass
class PrefixHits(Result):
    """Prompt tokens each request brings and those a prefix cache would supply, predicted by :func:`prefix_hits`.

    Part of notebook `serving_endpoint`'s traces, returned by :func:`prefix_hits`. ``hit_rate`` is defined as
    :attr:`~labkit.serving.engine.ServingRun.prefix_hit_rate` is: cached prompt tokens / prompt tokens.
    """

    prompt_tokens: list[int]
    cached_tokens: list[int]
    cache_block: int
    capacity_blocks: int | None = None
    evicted_blocks: int = 0

    @property
    def hit_rate(self) -> float:
        """The share of all prompt tokens found cached."""
        return sum(self.cached_tokens) / sum(self.prompt_tokens)

    def after(self, first: int) -> PrefixHits:
        """The requests from index ``first`` on: those served after the first ``first`` warmed the cache."""
        first = whole("first", first, 0)
        if first >= len(self.prompt_tokens):
            raise ValueError(f"first must be below the {len(self.prompt_tokens)} requests predicted; got {first}")
        return PrefixHits(self.prompt_tokens[first:], self.cached_tokens[first:], self.cache_block,
                          self.capacity_blocks, self.evicted_blocks)  # fmt: skip


def prefix_hits(
    hash_ids: Sequence[Sequence[int]],
    prompt_lens: Sequence[int],
    block_tokens: int,
    cache_block: int,
    capacity_blocks: int | None = None,
) -> PrefixHits:
    """Predict, from hash ids alone, the prompt tokens a prefix cache supplies to each request, served in order.

    Taught in notebook `serving_endpoint`. Request i's prompt has ``prompt_lens[i]`` tokens, whose k-th block of
    ``block_tokens`` tokens is identified by ``hash_ids[i][k]`` (equal id chains, equal tokens: what
    :func:`to_requests` builds; for the raw Mooncake trace, ``block_tokens=512`` and ``input_length``). The count
    follows :class:`~labkit.serving.kv_cache.PagedKVCache` with ``prefix_caching=True``: the cache holds whole
    blocks of ``cache_block`` tokens, each known by everything before its end, so a cache block is identified by
    the chain of hash ids up to the trace block holding its last token, and its position; a request finds the
    leading cache blocks that an earlier request wrote (stopping at the first it does not find), and never the
    block holding its prompt's last token (that token's logits give the first output token); once prefilled,
    every whole cache block of its prompt is filed.

    With ``capacity_blocks=None`` the cache never evicts. With a number, it keeps that many filed blocks and
    evicts the least recently used: an idealisation that counts prompt blocks only (the engine's cache also holds
    output tokens and the blocks of running sequences). The engine measures the same hit rate when each request's
    prefill is done before the next sharing one is admitted (requests admitted in the same scheduler step do not
    see each other's blocks) and nothing is evicted.
    """
    bt, cb = whole("block_tokens", block_tokens), whole("cache_block", cache_block)
    if capacity_blocks is not None:
        capacity_blocks = whole("capacity_blocks", capacity_blocks)
    if isinstance(hash_ids, (str, bytes)) or isinstance(prompt_lens, (str, bytes)):
        raise ValueError("hash_ids must be a list of id lists and prompt_lens a list of token counts")
    hash_ids, prompt_lens = list(hash_ids), list(prompt_lens)
    if not hash_ids or len(hash_ids) != len(prompt_lens):
        raise ValueError(f"hash_ids and prompt_lens must be non-empty and of one length (one per request); got "
                         f"{len(hash_ids)} and {len(prompt_lens)}")  # fmt: skip
    filed: OrderedDict[tuple, None] = OrderedDict()  # a cache block's identity -> None, least recently used first
    cached, lengths, evicted = [], [], 0
    for i, (ids, n) in enumerate(zip(hash_ids, prompt_lens, strict=True)):
        n = whole(f"prompt_lens[{i}]", n)
        if not isinstance(ids, (list, tuple, np.ndarray)) or len(ids) < math.ceil(n / bt):
            raise ValueError(f"request {i}: a prompt of {n} tokens needs at least {math.ceil(n / bt)} hash ids "
                             f"of {bt} tokens each; got {ids!r:.80}")  # fmt: skip
        ids = [int(h) for h in ids]
        keys = [(tuple(ids[: ((q + 1) * cb - 1) // bt + 1]), q) for q in range(n // cb)]
        hit = 0
        for key in keys[: (n - 1) // cb]:  # never the block holding the last prompt token
            if key not in filed:
                break
            hit += 1
        for key in keys:  # the blocks it used and wrote, most recently used last (in block order, as released)
            filed[key] = None
            filed.move_to_end(key)
        while capacity_blocks is not None and len(filed) > capacity_blocks:
            filed.popitem(last=False)
            evicted += 1
        cached.append(hit * cb)
        lengths.append(n)
    return PrefixHits(lengths, cached, cb, capacity_blocks, evicted)


@torch.inference_mode()
def warm_cache(cache: PagedKVCache, model: TinyGPT, requests: Sequence[Request]) -> int:
    """Prefill the prompts of ``requests`` into a prefix cache one after another, and release each: their blocks stay
    filed, as if the server had already answered them.

    Taught in notebook `serving_endpoint`: a short window of a trace finds little of its prefixes in a cold cache;
    warmed with the requests that came before it, it finds what a server that had been running would. Each prompt
    finds what the earlier ones filed (the same count :func:`prefix_hits` predicts) and is prefilled from there;
    nothing is decoded. Returns the prompt tokens found cached while warming.
    """
    if not isinstance(cache, PagedKVCache) or not cache.prefix_caching:
        raise ValueError("cache must be a kv_cache.PagedKVCache with prefix_caching=True (a cache that files blocks)")
    if not isinstance(model, TinyGPT):
        raise ValueError(f"model must be the TinyGPT the cache was built for; got {type(model).__name__}")
    device = cache.k.device
    found = 0
    for req in requests:
        if not isinstance(req, Request) or not req.prompt or len(req.prompt) > cache.max_len:
            raise ValueError(f"requests must be engine.Request objects with prompts of 1 to {cache.max_len} "
                             f"tokens; got {req!r:.80}")  # fmt: skip
        seq = -1 - len(cache.tables)  # an id no served request uses (they are 0 or more)
        hit = cache.admit(seq, len(req.prompt), len(req.prompt), 0, req.prompt)
        try:
            cache.forward(model, [seq], torch.tensor([req.prompt[hit:]], device=device))
        finally:
            cache.release(seq)
        found += hit
    return found
