"""Serving a language model: the KV cache in paged blocks, an engine that batches per step, speculative decoding.

Taught in notebook `serving_llms`. Everything runs on :class:`labkit.workloads.models.TinyGPT`, whose weights are used as they are: the
engine's forward pass is the model's own layers, with keys and values stored in a :class:`PagedKVCache` instead of
the model's per-sequence tensors, so a decode step can batch sequences of different lengths.

- :class:`DecoderSpec`, :data:`LLAMA2_7B`, :data:`LLAMA2_70B`: real models' shapes, their exact parameter counts and
  KV-cache bytes, and :func:`max_concurrent_sequences` in a GPU's memory.
- :class:`PagedKVCache`: fixed-size blocks and a block table per sequence (vLLM's PagedAttention, Kwon et al.,
  SOSP 2023). A block as long as the whole context is the older scheme: reserve the maximum length per sequence.
- :class:`Engine`: requests arrive over time (an open loop); the ``"continuous"`` policy admits waiting requests
  and retires finished ones at every decode step (iteration-level scheduling, Orca: Yu et al., OSDI 2022); the
  ``"static"`` policy admits a new batch only when the whole previous batch has finished.
- :func:`serving_metrics`: TTFT, TPOT, ITL, E2E latency and goodput as vLLM's serving benchmark defines them
  (``vllm/benchmarks/serve.py``).
- :func:`speculative_generate`: a draft model proposes ``k`` tokens, the target checks them in one pass (Leviathan
  et al., ICML 2023; greedy acceptance), and :func:`expected_tokens_per_pass`, their formula.

Why hand-rolled: no package that a learner's laptop has installed serves a model this way (vLLM and its peers need
a GPU and download weights); the engine is small enough to read in one sitting.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from ..core.device import sync
from ..core.result import Result
from ..predict.memory_model import kv_cache_bytes
from ..workloads.models import TinyGPT

__all__ = [
    "LLAMA2_70B",
    "LLAMA2_7B",
    "SLO",
    "CacheFull",
    "DecoderSpec",
    "Engine",
    "PagedKVCache",
    "Request",
    "RequestRecord",
    "ServingRun",
    "SpeculativeResult",
    "early_stopping_queries",
    "expected_tokens_per_pass",
    "layer_skip_draft",
    "max_concurrent_sequences",
    "poisson_requests",
    "ServingMetrics",
    "serving_metrics",
    "speculative_generate",
]


# --------------------------------------------------------------------------------------------- real models' shapes
@dataclass(frozen=True)
class DecoderSpec:
    """A Llama-style decoder's shape: untied embeddings, SwiGLU MLP (three matrices), RMSNorm, no biases.

    Notebook `serving_llms` sizes real models with it. ``kv_heads < n_heads`` is grouped-query attention (GQA).
    """

    name: str
    n_layers: int
    d_model: int
    n_heads: int
    kv_heads: int
    ffn: int
    vocab: int

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def parameters(self) -> int:
        """The exact parameter count: embeddings, per layer attention + MLP + two norms, final norm, output head."""
        d, kv = self.d_model, self.kv_heads * self.head_dim
        attention = d * d + 2 * d * kv + d * d  # q, k, v, o
        per_layer = attention + 3 * d * self.ffn + 2 * d
        return 2 * self.vocab * d + self.n_layers * per_layer + d

    def kv_bytes_per_token(self, bytes_per_value: int = 2, kv_heads: int | None = None) -> int:
        """KV-cache bytes one token adds: a key and a value per layer and key/value head."""
        return kv_cache_bytes(self.n_layers, kv_heads or self.kv_heads, self.head_dim, 1, 1, bytes_per_value)

    def matmul_parameters(self) -> int:
        """The parameters a token multiplies by: all but the input embedding (a lookup) and the norms' gains."""
        return self.parameters() - self.vocab * self.d_model - (2 * self.n_layers + 1) * self.d_model

    def decode_flops_per_token(self, context: int) -> int:
        """FLOPs of one decoded token attending to ``context`` cached ones: 2 per matmul weight, and per layer
        q·kᵀ and the weighted sum of v over the cache, 2·d_model·context each (every query head reads its
        group's keys, so grouped-query attention saves bytes, not FLOPs)."""
        return 2 * self.matmul_parameters() + 4 * self.n_layers * self.d_model * context

    def _step_bytes(self, context: int, bytes_per_value: int) -> tuple[int, int]:
        """A decode step's bytes: the weights, read once, and one sequence's cache of ``context`` tokens."""
        return bytes_per_value * self.parameters(), self.kv_bytes_per_token(bytes_per_value) * context

    def decode_intensity(self, batch: int, context: int, bytes_per_value: int = 2) -> float:
        """FLOP per byte of a decode step at ``batch`` sequences of ``context`` tokens: the weights read once, each
        sequence's cache read once (an engine that writes the cache in place). Taught in notebook `serving_llms`."""
        weights, cache = self._step_bytes(context, bytes_per_value)
        return batch * self.decode_flops_per_token(context) / (weights + batch * cache)

    def batch_to_reach(self, intensity: float, context: int, bytes_per_value: int = 2) -> float:
        """The smallest batch whose decode step reaches ``intensity`` FLOP per byte (a GPU's ridge point), or
        infinity when even an endless batch stays below it (the cache alone sets the limit)."""
        weights, cache = self._step_bytes(context, bytes_per_value)
        surplus = self.decode_flops_per_token(context) - intensity * cache
        return math.inf if surplus <= 0 else math.ceil(intensity * weights / surplus)


# Touvron et al., "Llama 2: Open Foundation and Fine-Tuned Chat Models" (2023), Table 1 (GQA for 34B and 70B), and
# the configurations published with the weights (hidden size, layers, heads, key/value heads, MLP width, vocabulary).
LLAMA2_7B = DecoderSpec("Llama 2 7B", n_layers=32, d_model=4096, n_heads=32, kv_heads=32, ffn=11008, vocab=32000)
LLAMA2_70B = DecoderSpec("Llama 2 70B", n_layers=80, d_model=8192, n_heads=64, kv_heads=8, ffn=28672, vocab=32000)


def max_concurrent_sequences(
    spec: DecoderSpec, gpu_bytes: float, context: int, bytes_per_value: int = 2, kv_heads: int | None = None
) -> int:
    """How many sequences of ``context`` tokens fit beside the weights in ``gpu_bytes``. Taught in notebook `serving_llms`.

    Counts weights and KV cache only (no activations, no framework reserve): an upper bound. 0 when the weights
    alone do not fit. ``kv_heads`` overrides the model's (``n_heads`` shows the model without GQA).
    """
    if gpu_bytes <= 0 or not isinstance(context, int) or context < 1:
        raise ValueError(f"gpu_bytes must be positive and context a positive integer; got {gpu_bytes}, {context!r}")
    free = gpu_bytes - spec.parameters() * bytes_per_value
    per_sequence = spec.kv_bytes_per_token(bytes_per_value, kv_heads) * context
    return max(0, int(free // per_sequence))


# ------------------------------------------------------------------------------------------------- paged KV cache
class CacheFull(RuntimeError):
    """The KV cache has no free block for a sequence that needs one."""


class PagedKVCache:
    """Keys and values of many sequences in fixed-size blocks, each sequence's blocks listed in its block table.

    Taught in notebook `serving_llms`. Blocks are *allocated* only as tokens arrive; what differs is what admission promises:

    - ``admission="reserve"``: a sequence is admitted with the most tokens it may reach (prompt + output limit) and
      promised that many blocks, so it never runs out mid-generation (TensorRT-LLM's ``GUARANTEED_NO_EVICT``).
      With ``block_size`` equal to the context this is the older scheme: one region of the whole context each;
    - ``admission="on-demand"``: nothing is promised; a sequence is admitted when its prompt's blocks are free
      and takes a block whenever it fills one; when none is free the engine pre-empts a sequence (vLLM: allocate
      as tokens arrive, pre-empt by recomputation when blocks run out).

    With ``prefix_caching=True`` every full block is also filed under a hash of its tokens and of all the tokens
    before it (vLLM's automatic prefix caching). A new sequence whose prompt begins with blocks already filed shares
    them (counted references, never written again) and starts its prefill after them; a block no sequence uses
    any more keeps its contents and is reused by a later prompt, or evicted, least recently used first, when a
    free block is needed.
    """

    def __init__(
        self, model: TinyGPT, num_blocks: int, block_size: int, admission: str = "reserve", prefix_caching: bool = False
    ):
        if not isinstance(num_blocks, int) or num_blocks < 1 or not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"num_blocks and block_size must be positive integers; got {num_blocks!r}, {block_size!r}")
        if admission not in ("reserve", "on-demand"):
            raise ValueError(f"admission must be 'reserve' or 'on-demand', got {admission!r}")
        self.admission = admission
        first = model.layers()[0]
        self.n_layers, self.n_heads = len(model.blocks), first.n_heads
        self.head_dim = first.qkv.in_features // first.n_heads
        self.num_blocks, self.block_size, self.max_len = num_blocks, block_size, model.max_len
        weight = first.qkv.weight
        shape = (self.n_layers, num_blocks * block_size, self.n_heads, self.head_dim)
        self.k = torch.zeros(shape, dtype=weight.dtype, device=weight.device)
        self.v = torch.zeros(shape, dtype=weight.dtype, device=weight.device)
        self.free: list[int] = list(range(num_blocks - 1, -1, -1))
        self.tables: dict[int, list[int]] = {}
        self.lengths: dict[int, int] = {}
        self.promised: dict[int, int] = {}
        self.prefix_caching = bool(prefix_caching)
        self.block_of_hash: dict[int, int] = {}  # a full block's chained hash -> the block holding it
        self.hash_of_block: dict[int, int] = {}
        self.refs: dict[int, int] = {}  # filed block -> sequences using it
        self.evictable: OrderedDict[int, None] = OrderedDict()  # filed blocks no sequence uses, oldest first
        self.history: dict[int, list[int]] = {}  # the tokens each sequence has written (with prefix caching)

    @property
    def free_blocks(self) -> int:
        """Blocks a sequence can take: the free ones, and the cached ones no sequence uses (evicted on demand)."""
        return len(self.free) + len(self.evictable)

    def _hashes(self, tokens: Sequence[int]) -> list[int]:
        """The chained hash of each full block of ``tokens``: a block's hash covers every token up to its end."""
        out, h, bs = [], 0, self.block_size
        for i in range(len(tokens) // bs):
            h = hash((h, tuple(tokens[i * bs : (i + 1) * bs])))
            out.append(h)
        return out

    @property
    def bytes(self) -> int:
        """Bytes of the whole pool (keys and values)."""
        return self.k.nbytes + self.v.nbytes

    @property
    def bytes_per_token(self) -> int:
        return 2 * self.n_layers * self.n_heads * self.head_dim * self.k.element_size()

    def blocks_for(self, tokens: int) -> int:
        return math.ceil(tokens / self.block_size)

    def can_admit(self, max_tokens: int, now_tokens: int | None = None, keep_free: int = 0) -> bool:
        """Whether a sequence that may grow to ``max_tokens`` tokens can be admitted now.

        Reserving: its ``max_tokens`` blocks can be promised beside every earlier promise. On demand: the blocks
        of its first ``now_tokens`` tokens are free, beyond ``keep_free`` blocks the running sequences need.
        """
        if self.admission == "on-demand":
            return self.blocks_for(max_tokens if now_tokens is None else now_tokens) <= self.free_blocks - keep_free
        outstanding = sum(self.promised[s] - len(self.tables[s]) for s in self.tables)
        return self.blocks_for(max_tokens) <= self.free_blocks - outstanding

    def admit(
        self,
        seq: int,
        max_tokens: int,
        now_tokens: int | None = None,
        keep_free: int = 0,
        prompt: Sequence[int] | None = None,
    ) -> int:
        """Admit ``seq``; with prefix caching and its ``prompt``, share the prompt's cached leading blocks.

        Returns the tokens found cached (0 without prefix caching): the prefill starts after them. The prompt's
        last token is never taken from the cache, so that its prefill has a token whose logits give the next one.
        """
        if seq in self.tables:
            raise ValueError(f"sequence {seq} is already in the cache")
        if max_tokens > self.max_len:
            raise ValueError(f"a sequence of {max_tokens} tokens exceeds the model's context of {self.max_len}")
        if not self.can_admit(max_tokens, now_tokens, keep_free):
            raise CacheFull(f"no room for {self.blocks_for(max_tokens)} blocks for sequence {seq}")
        promise = self.blocks_for(max_tokens) if self.admission == "reserve" else self.blocks_for(self.max_len)
        self.tables[seq], self.lengths[seq], self.promised[seq] = [], 0, promise
        if not self.prefix_caching:
            return 0
        for h in self._hashes(list(prompt or [])[:-1]):
            block = self.block_of_hash.get(h)
            if block is None:
                break
            self.evictable.pop(block, None)
            self.refs[block] += 1
            self.tables[seq].append(block)
        cached = len(self.tables[seq]) * self.block_size
        self.lengths[seq] = cached
        self.history[seq] = list(prompt or [])[:cached]
        return cached

    def blocks_needed(self, seqs: Iterable[int], tokens: int = 1) -> int:
        """New blocks that appending ``tokens`` to each of ``seqs`` takes."""
        return sum(self.blocks_for(self.lengths[s] + tokens) - len(self.tables[s]) for s in seqs)

    def release(self, seq: int) -> None:
        """Give a finished sequence's blocks back (a filed block stays cached until it is needed for another)."""
        unfiled = []
        for block in self.tables.pop(seq):
            if block in self.hash_of_block:
                self.refs[block] -= 1
                if self.refs[block] == 0:
                    self.evictable[block] = None
            else:
                unfiled.append(block)
        self.free.extend(reversed(unfiled))
        del self.lengths[seq], self.promised[seq]
        self.history.pop(seq, None)

    def _take_block(self) -> int:
        if self.free:
            return self.free.pop()
        block, _ = self.evictable.popitem(last=False)  # the least recently used cached block
        del self.block_of_hash[self.hash_of_block.pop(block)], self.refs[block]
        return block

    def _file(self, seq: int, written: Sequence[int]) -> None:
        """File the blocks of ``seq`` that ``written`` tokens have just filled, under their chained hashes."""
        history = self.history[seq]
        before = len(history) // self.block_size
        history.extend(written)
        hashes = self._hashes(history)
        for i in range(before, len(hashes)):
            block = self.tables[seq][i]
            if hashes[i] not in self.block_of_hash and block not in self.hash_of_block:
                self.block_of_hash[hashes[i]], self.hash_of_block[block], self.refs[block] = block, hashes[i], 1

    def _grow(self, seq: int, length: int) -> None:
        table = self.tables[seq]
        while len(table) * self.block_size < length:
            if len(table) >= self.promised[seq] or not self.free_blocks:
                raise CacheFull(f"sequence {seq} needs a block beyond its {self.promised[seq]} promised")
            table.append(self._take_block())

    def _slots(self, seq: int, positions: torch.Tensor) -> torch.Tensor:
        table = torch.tensor(self.tables[seq], device=positions.device)
        return table[positions // self.block_size] * self.block_size + positions % self.block_size

    def usage(self) -> dict[str, int]:
        """Tokens held, and the bytes they need against the bytes allocated and reserved for them (promised blocks;
        on demand, nothing beyond the allocated ones)."""
        tokens = sum(self.lengths.values())
        allocated = sum(len(t) for t in self.tables.values()) * self.block_size
        if self.admission == "reserve":
            promised = sum(self.promised.values()) * self.block_size
        else:
            promised = allocated
        per = self.bytes_per_token
        return dict(sequences=len(self.tables), tokens=tokens, token_bytes=tokens * per,
                    allocated_bytes=allocated * per, promised_bytes=promised * per)  # fmt: skip

    @torch.no_grad()
    def forward(self, model: TinyGPT, seqs: Sequence[int], tokens: torch.Tensor) -> torch.Tensor:
        """Append ``tokens`` (B, T) to sequences ``seqs`` through the model's own layers; return logits (B, T, vocab).

        Each sequence attends to its own cached keys and values (found through its block table) and, causally, to
        the new ones.
        """
        B, T = tokens.shape
        dev = tokens.device
        starts = torch.tensor([self.lengths[s] for s in seqs], device=dev)
        positions = starts[:, None] + torch.arange(T, device=dev)  # (B, T)
        for s in seqs:
            self._grow(s, self.lengths[s] + T)
        new_slots = torch.stack([self._slots(s, positions[i]) for i, s in enumerate(seqs)])  # (B, T)
        longest = int(starts.max()) + T
        key_pos = torch.arange(longest, device=dev)
        key_slots = torch.stack([self._slots(s, key_pos.clamp(max=self.lengths[s] + T - 1)) for s in seqs])
        mask = (key_pos[None, None, :] <= positions[:, :, None])[:, None]  # (B, 1, T, keys): causal and own length
        x = model.tok(tokens) + model.pos(positions)
        C = x.shape[-1]
        for layer, block in enumerate(model.layers()):
            q, k, v = block.qkv(block.ln1(x)).split(C, dim=2)
            shape = (B, T, self.n_heads, self.head_dim)
            self.k[layer][new_slots] = k.reshape(shape)
            self.v[layer][new_slots] = v.reshape(shape)
            keys = self.k[layer][key_slots].transpose(1, 2)  # (B, heads, keys, head_dim)
            values = self.v[layer][key_slots].transpose(1, 2)
            y = F.scaled_dot_product_attention(q.reshape(shape).transpose(1, 2), keys, values, attn_mask=mask)
            x = x + block.proj(y.transpose(1, 2).reshape(B, T, C))
            x = x + block.mlp(block.ln2(x))
        for i, s in enumerate(seqs):
            self.lengths[s] += T
            if self.prefix_caching:
                self._file(s, tokens[i].tolist())
        return model.lm_head(model.ln_f(x))


# ---------------------------------------------------------------------------------------------- requests, engine
@dataclass
class Request:
    """One generation request: a prompt (token ids), how many tokens to generate, and when it arrives (s).

    Taught in notebook `serving_llms`.
    """

    rid: int
    prompt: list[int]
    max_tokens: int
    arrival_s: float = 0.0


@dataclass
class RequestRecord(Result):
    """What happened to one request: the time of every output token, or the error that rejected it.

    Notebook `serving_llms` reads them through :func:`serving_metrics`. Times are seconds from the start of the run.
    """

    rid: int
    arrival_s: float
    prompt_len: int
    max_tokens: int
    token_times: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    error: str | None = None
    preempted: int = 0  # times its blocks were taken back and its tokens recomputed later
    cached_tokens: int = 0  # prompt tokens found in the prefix cache at its (last) admission

    @property
    def ok(self) -> bool:
        return self.error is None and len(self.tokens) == self.max_tokens

    @property
    def ttft_s(self) -> float:
        return self.token_times[0] - self.arrival_s

    @property
    def e2e_s(self) -> float:
        return self.token_times[-1] - self.arrival_s

    @property
    def tpot_s(self) -> float:
        """vLLM's time per output token: (E2E − TTFT) / (output tokens − 1); 0 for a single token."""
        n = len(self.token_times)
        return (self.e2e_s - self.ttft_s) / (n - 1) if n > 1 else 0.0

    @property
    def itl_s(self) -> list[float]:
        return list(np.diff(self.token_times))


@dataclass
class ServingRun(Result):
    """One engine run: every request's record, the run's duration and its scheduling trace (notebook `serving_llms`)."""

    policy: str
    records: list[RequestRecord]
    duration_s: float
    steps: int
    batch_sizes: list[int]
    usage: list[dict]
    preemptions: int = 0
    recomputed_tokens: int = 0  # tokens prefilled again after a pre-emption

    @property
    def prefix_hit_rate(self) -> float:
        """The share of the completed requests' prompt tokens that the prefix cache supplied (0 without one)."""
        done = [r for r in self.records if r.ok]
        prompt = sum(r.prompt_len for r in done)
        return sum(r.cached_tokens for r in done) / prompt if prompt else 0.0

    @property
    def peak_usage(self) -> dict[str, int]:
        """The step that held the most sequences' tokens (the busiest moment of the cache)."""
        return max(self.usage, key=lambda u: u["tokens"])


def _whole(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def check_request(req: Request, max_len: int, vocab: int, horizon_s: float = math.inf) -> None:
    """Raise ValueError saying what is wrong with a request, and what is allowed.

    Called by :meth:`Engine.serve` (notebook `serving_llms`). A prompt must be a list of whole-number token ids in ``0..vocab-1`` (not a
    tensor, not None, not floats or strings); ``max_tokens`` a whole number of at least 1 (``True`` is not 1);
    prompt plus output within the context of ``max_len`` tokens; the arrival a finite time from 0 to ``horizon_s``.
    """
    if not isinstance(req, Request):
        raise ValueError(f"a request must be a labkit.serving.llm.Request, got {type(req).__name__}")
    rid = req.rid
    if not isinstance(req.prompt, (list, tuple)):
        hint = " (a tensor: pass tensor.tolist())" if isinstance(req.prompt, torch.Tensor) else ""
        raise ValueError(
            f"request {rid}: the prompt must be a list of token ids, got {type(req.prompt).__name__}{hint}"
        )
    if len(req.prompt) == 0:
        raise ValueError(f"request {rid}: the prompt is empty; send at least one token")
    if not _whole(rid):
        raise ValueError(f"a request's id must be a whole number, got {rid!r}")
    wrong = [t for t in req.prompt if not _whole(t)]
    if wrong:
        raise ValueError(
            f"request {rid}: token ids must be whole numbers, got {wrong[0]!r} ({type(wrong[0]).__name__})"
        )
    if not _whole(req.max_tokens) or req.max_tokens < 1:
        raise ValueError(f"request {rid}: max_tokens must be a whole number of at least 1, got {req.max_tokens!r}")
    if len(req.prompt) + req.max_tokens > max_len:
        raise ValueError(f"request {rid}: prompt ({len(req.prompt)}) + max_tokens ({req.max_tokens}) exceeds "
                         f"the context of {max_len} tokens")  # fmt: skip
    if any(not 0 <= t < vocab for t in req.prompt):
        raise ValueError(f"request {rid}: token ids must lie in 0..{vocab - 1}")
    arrival = req.arrival_s
    if not isinstance(arrival, (int, float, np.floating, np.integer)) or isinstance(arrival, bool):
        raise ValueError(f"request {rid}: arrival_s must be a number of seconds, got {arrival!r}")
    if not (math.isfinite(arrival) and 0 <= arrival <= horizon_s):
        raise ValueError(f"request {rid}: arrival_s must be a finite time from 0 to the run's horizon of "
                         f"{horizon_s:g} s, got {arrival!r}")  # fmt: skip


class Engine:
    """A generation server on one model: prefill each admitted request, then decode every running one per step.

    Taught in notebook `serving_llms`. ``policy="continuous"`` admits waiting requests whenever a slot and cache blocks are
    free, at every step, and retires each request when it has its tokens. ``policy="static"`` admits a batch only
    when the previous batch has finished entirely (request-level batching). A request that fails
    :func:`check_request` is recorded with its error and the engine goes on serving the others.

    With an ``admission="on-demand"`` cache, each step first finds the blocks the running sequences' next tokens
    need; while they exceed the free blocks, the most recently admitted sequence is pre-empted: its blocks are
    freed and it goes back to the front of the queue, to be prefilled again (its prompt and the tokens it has
    already produced) when there is room, as vLLM's scheduler does by default (pre-emption by recomputation).

    With a ``prefix_caching`` cache, an admitted prompt's cached leading blocks are not prefilled again. With
    ``prefill_chunk=n`` (chunked prefill, as vLLM and Sarathi-Serve schedule it) a step prefills at most n prompt
    tokens, of the admitted requests in turn, and then decodes the running ones: a long prompt is spread over
    several steps instead of stalling every running request's next token for its whole prefill.
    """

    def __init__(
        self,
        model: TinyGPT,
        cache: PagedKVCache,
        policy: str = "continuous",
        max_batch: int = 8,
        prefill_chunk: int | None = None,
    ):
        if policy not in ("continuous", "static"):
            raise ValueError(f"policy must be 'continuous' or 'static', got {policy!r}")
        if not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"max_batch must be a positive integer, got {max_batch!r}")
        if prefill_chunk is not None and (not _whole(prefill_chunk) or prefill_chunk < 1):
            raise ValueError(
                f"prefill_chunk must be None (whole prompts) or a whole number of tokens, got {prefill_chunk!r}"
            )
        if prefill_chunk is not None and cache.admission != "reserve":
            raise ValueError("chunked prefill needs a cache with admission='reserve' (each prompt's blocks promised)")
        self.model, self.cache, self.policy, self.max_batch = model.eval(), cache, policy, max_batch
        self.prefill_chunk = prefill_chunk
        self.device = next(model.parameters()).device

    def serve(
        self, requests: Sequence[Request], clock: Callable[[], float] = time.perf_counter, horizon_s: float = 600.0
    ) -> ServingRun:
        """Serve ``requests`` as they arrive (each at its ``arrival_s`` after the start); return every record.

        A request that fails :func:`check_request` (arrivals later than ``horizon_s`` included) or repeats an
        earlier request's id gets a record with its error, and the others are served. Whatever happens, even an
        error in the model, the cache is left holding no sequence of this run.
        """
        if not isinstance(horizon_s, (int, float)) or not math.isfinite(horizon_s) or horizon_s <= 0:
            raise ValueError(f"horizon_s must be a finite positive number of seconds, got {horizon_s!r}")
        vocab = self.model.lm_head.out_features
        order: list[RequestRecord] = []  # one record per request, in the order given
        records: dict[int, RequestRecord] = {}
        valid: list[Request] = []
        for req in requests:
            rid = getattr(req, "rid", None)
            prompt = getattr(req, "prompt", None)
            record = RequestRecord(rid, getattr(req, "arrival_s", math.nan),  # type: ignore[arg-type]
                                   len(prompt) if isinstance(prompt, (list, tuple)) else 0,
                                   getattr(req, "max_tokens", 0))  # fmt: skip
            order.append(record)
            try:
                check_request(req, self.model.max_len, vocab, horizon_s)
                if req.rid in records:
                    raise ValueError(f"request {rid!r}: its id repeats an earlier request's (ids must be unique)")
                need = self.cache.blocks_for(len(req.prompt) + req.max_tokens)
                if need > self.cache.num_blocks:
                    raise ValueError(f"request {rid}: needs {need} blocks of KV cache; the whole cache has "
                                     f"{self.cache.num_blocks}")  # fmt: skip
            except ValueError as exc:
                record.error = str(exc)
                continue
            records[req.rid] = record
            valid.append(req)
        held_before = set(self.cache.tables)
        try:
            return self.schedule(valid, records, order, clock)
        finally:  # an error mid-run (the model, a cache bug, an interrupt) must not leave sequences in the cache
            for seq in set(self.cache.tables) - held_before:
                self.cache.release(seq)

    def schedule(self, requests: list[Request], records: dict, order: list[RequestRecord], clock) -> ServingRun:
        """The scheduler loop: each pass admits, pre-empts, prefills and runs one decode step for every running request.

        Taught in notebook `serving_llms`, which prints it. Called by :meth:`serve` with the requests it checked.
        """
        by_id = {r.rid: r for r in requests}
        pending = deque(sorted(requests, key=lambda r: r.arrival_s))
        waiting: deque[Request] = deque()
        running: dict[int, int] = {}  # rid -> last token, in the order admitted
        steps, batch_sizes, usage, recomputed = 0, [], [], 0
        on_demand = self.cache.admission == "on-demand"
        prefilling: dict[int, list[int]] = {}  # rid -> the prompt tokens it still has to prefill, admitted order
        start = clock()
        while pending or waiting or running or prefilling:
            now = clock() - start
            while pending and pending[0].arrival_s <= now:
                waiting.append(pending.popleft())
            keep = self.cache.blocks_needed(running) if on_demand else 0
            while on_demand and keep > self.cache.free_blocks:  # pre-empt the newest until the others fit
                victim = next(reversed(running))
                running.pop(victim)
                self.cache.release(victim)
                records[victim].preempted += 1
                waiting.appendleft(by_id[victim])
                keep = self.cache.blocks_needed(running)
            admit: list[Request] = []
            if self.policy == "continuous" or not (running or prefilling):
                while waiting and len(running) + len(prefilling) + len(admit) < self.max_batch:
                    req, done = waiting[0], len(records[waiting[0].rid].tokens)
                    # on demand: the blocks of its prompt (and tokens so far) and of its first decoded token
                    now_tokens = len(req.prompt) + done + 1
                    if not self.cache.can_admit(len(req.prompt) + req.max_tokens, now_tokens, keep):
                        break
                    tokens = req.prompt + records[req.rid].tokens  # a pre-empted one's output too
                    cached = self.cache.admit(req.rid, len(req.prompt) + req.max_tokens, now_tokens, keep, tokens)
                    keep += self.cache.blocks_for(now_tokens) if on_demand else 0
                    records[req.rid].cached_tokens = min(cached, len(req.prompt))
                    recomputed += max(0, len(records[req.rid].tokens) - max(0, cached - len(req.prompt)))
                    prefilling[req.rid] = tokens[cached:]
                    admit.append(waiting.popleft())
            budget = math.inf if self.prefill_chunk is None else self.prefill_chunk
            for rid in list(prefilling):  # prefill: the rest of each prompt, in chunks of at most `budget` tokens
                if budget <= 0:
                    break
                rest, n = prefilling[rid], int(min(budget, len(prefilling[rid])))
                chunk, prefilling[rid] = rest[:n], rest[n:]
                budget -= n
                logits = self.cache.forward(self.model, [rid], torch.tensor([chunk], device=self.device))
                if not prefilling[rid]:  # its last prompt token's logits give the first output token
                    del prefilling[rid]
                    first = int(logits[0, -1].argmax())
                    sync(self.device)
                    self._emit(records[rid], first, clock() - start, running)
            if running:
                rids = list(running)
                last = torch.tensor([[running[r]] for r in rids], device=self.device)
                nxt = self.cache.forward(self.model, rids, last)[:, -1].argmax(-1).tolist()
                sync(self.device)
                now = clock() - start
                usage.append(self.cache.usage())
                steps += 1
                batch_sizes.append(len(rids))
                for rid, token in zip(rids, nxt, strict=True):
                    self._emit(records[rid], token, now, running)
            elif not admit and not prefilling and pending:
                time.sleep(max(0.0, pending[0].arrival_s - (clock() - start)))
            elif not admit and not prefilling and waiting:
                raise CacheFull(f"request {waiting[0].rid} can never be admitted: the cache is empty and too small")
        preemptions = sum(r.preempted for r in order)
        return ServingRun(self.policy, order, clock() - start, steps, batch_sizes, usage, preemptions,
                          recomputed)  # fmt: skip

    def _emit(self, record: RequestRecord, token: int, at: float, running: dict[int, int]) -> None:
        record.tokens.append(token)
        record.token_times.append(at)
        if len(record.tokens) == record.max_tokens:
            running.pop(record.rid, None)
            self.cache.release(record.rid)
        else:
            running[record.rid] = token


def poisson_requests(
    n: int, rate: float, prompt_lens: tuple[int, int], output_lens: tuple[int, int], vocab: int = 256, seed: int = 0
) -> list[Request]:
    """``n`` requests arriving as a Poisson process of ``rate`` per second, lengths uniform in the given ranges.

    Taught in notebook `serving_llms`.
    """
    if n < 1 or rate <= 0:
        raise ValueError(f"n must be at least 1 and rate positive; got {n}, {rate}")
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate, n))
    out = []
    for i in range(n):
        plen = int(rng.integers(prompt_lens[0], prompt_lens[1] + 1))
        out.append(Request(i, rng.integers(0, vocab, plen).tolist(), int(rng.integers(output_lens[0], output_lens[1] + 1)),
                           float(arrivals[i])))  # fmt: skip
    return out


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


# -------------------------------------------------------------------------------------------- speculative decoding
def layer_skip_draft(target: TinyGPT, n_layers: int) -> TinyGPT:
    """A draft model made of the target's first ``n_layers`` blocks, its embeddings and output head (shared, not
    copied): a cheaper model that often agrees with the target. Taught in notebook `serving_llms`."""
    if not 1 <= n_layers < len(target.blocks):
        raise ValueError(f"n_layers must be between 1 and {len(target.blocks) - 1}, got {n_layers}")
    draft = TinyGPT.__new__(TinyGPT)
    torch.nn.Module.__init__(draft)
    draft.max_len, draft.tok, draft.pos = target.max_len, target.tok, target.pos
    draft.blocks = torch.nn.ModuleList(target.blocks[:n_layers])
    draft.ln_f, draft.lm_head = target.ln_f, target.lm_head
    return draft.eval()


@dataclass
class SpeculativeResult(Result):
    """Speculative decoding's output and its bookkeeping (notebook `serving_llms`)."""

    tokens: torch.Tensor  # (1, prompt + new_tokens)
    prompt_len: int
    k: int
    target_passes: int
    draft_passes: int
    accepted: int
    rejected: int

    @property
    def acceptance(self) -> float:
        """Per-token acceptance rate α: accepted over examined draft tokens (each pass stops at the first miss)."""
        return self.accepted / max(1, self.accepted + self.rejected)

    @property
    def tokens_per_pass(self) -> float:
        return (self.tokens.shape[1] - self.prompt_len) / self.target_passes


def _truncate(caches: list[dict], length: int) -> None:
    for c in caches:
        c["k"], c["v"] = c["k"][:, :, :length], c["v"][:, :, :length]


@torch.no_grad()
def speculative_generate(target: TinyGPT, draft: TinyGPT, prompt: torch.Tensor, new_tokens: int, k: int):
    """Greedy speculative decoding: ``draft`` proposes ``k`` tokens, ``target`` checks them in one pass.

    Taught in notebook `serving_llms`. The target keeps the draft's tokens up to its first disagreement and adds its own
    token there (or one more after all ``k``), so the output is exactly the target's greedy output.
    """
    if prompt.ndim != 2 or prompt.shape[0] != 1 or prompt.shape[1] < 1:
        raise ValueError(f"prompt must be one non-empty sequence of shape (1, T), got {tuple(prompt.shape)}")
    if not isinstance(k, int) or k < 1 or not isinstance(new_tokens, int) or new_tokens < 1:
        raise ValueError(f"k and new_tokens must be positive integers, got {k!r}, {new_tokens!r}")
    if prompt.shape[1] + new_tokens + k > target.max_len:
        raise ValueError(
            f"prompt + new_tokens + k = {prompt.shape[1] + new_tokens + k} exceeds max_len {target.max_len}"
        )
    t_caches: list[dict] = [{} for _ in target.blocks]
    d_caches: list[dict] = [{} for _ in draft.blocks]
    seq = prompt
    nxt = target(seq, t_caches)[:, -1].argmax(-1, keepdim=True)  # prefill: the first token is the target's
    seq = torch.cat([seq, nxt], dim=1)
    passes, draft_passes, accepted, rejected = 1, 0, 0, 0
    d_len = 0
    while seq.shape[1] - prompt.shape[1] < new_tokens:
        # the draft catches up on the tokens it has not seen, then proposes k, one at a time
        guesses = []
        feed = seq[:, d_len:]
        for _ in range(k):
            guess = draft(feed, d_caches)[:, -1].argmax(-1, keepdim=True)
            draft_passes += 1
            guesses.append(guess)
            feed = guess
        d_len = seq.shape[1] + k - 1
        proposal = torch.cat(guesses, dim=1)  # (1, k)
        # one target pass over the last accepted token and the k proposals
        logits = target(torch.cat([seq[:, -1:], proposal], dim=1), t_caches)
        passes += 1
        choice = logits[0].argmax(-1)  # (k + 1,): the target's token after each position
        agree = (proposal[0] == choice[:k]).int()
        n = int(agree.cumprod(0).sum())  # proposals kept: up to the first disagreement
        accepted += n
        rejected += int(n < k)
        seq = torch.cat([seq, proposal[:, :n], choice[n].view(1, 1)], dim=1)
        _truncate(t_caches, seq.shape[1] - 1)  # the target has seen every token but the newest
        d_len = min(d_len, seq.shape[1] - 1)
        _truncate(d_caches, d_len)
    seq = seq[:, : prompt.shape[1] + new_tokens]
    return SpeculativeResult(seq, prompt.shape[1], k, passes, draft_passes, accepted, rejected)


def expected_tokens_per_pass(alpha: float, k: int) -> float:
    """Leviathan et al. (2023), eq. 1: tokens per target pass, (1 − α^(k+1)) / (1 − α), for acceptance rate α.

    Taught in notebook `serving_llms`.
    """
    if not 0 <= alpha <= 1 or not isinstance(k, int) or k < 1:
        raise ValueError(f"alpha must lie in [0, 1] and k be a positive integer; got {alpha}, {k!r}")
    return float(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)
