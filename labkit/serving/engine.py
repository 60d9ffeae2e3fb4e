r"""A generation server on one model: requests over time, a scheduler that batches per step, every request's record.

Taught in notebook `serving_llms`. :class:`Engine` serves :class:`Request`\ s arriving over time (an open loop):
the ``"continuous"`` policy admits waiting requests and retires finished ones at every decode step (iteration-level
scheduling, Orca: Yu et al., OSDI 2022); the ``"static"`` policy admits a new batch only when the whole previous
batch has finished. Its scheduler loop is :meth:`Engine.schedule`, short enough to read in one sitting.

Where the loop's requests come from is a small source object: :class:`ReplaySource` releases a trace known in
advance at its arrival times (:meth:`Engine.serve`); :class:`labkit.serving.live.LiveSource` takes requests as
other threads submit them and streams each token as it is made (notebook `serving_endpoint`). The loop is the same.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from ..core.device import sync
from ..core.result import Result
from ..workloads.models import TinyGPT
from .kv_cache import CacheFull, PagedKVCache


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
    recomputed: int = 0  # its tokens prefilled again after pre-emptions

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

    @classmethod
    def of(
        cls, policy: str, records: list[RequestRecord], duration_s: float, steps: Sequence[tuple[int, dict]]
    ) -> ServingRun:
        """A run from its records and its trace of decode steps, each (batch size, cache usage)."""
        preemptions = sum(r.preempted for r in records)
        recomputed = sum(r.recomputed for r in records)
        return cls(policy, list(records), duration_s, len(steps), [b for b, _ in steps], [u for _, u in steps],
                   preemptions, recomputed)  # fmt: skip


def _whole(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def check_request(req: Request, max_len: int, vocab: int, horizon_s: float = math.inf) -> None:
    """Raise ValueError saying what is wrong with a request, and what is allowed.

    Called by :meth:`Engine.serve` (notebook `serving_llms`). A prompt must be a list of whole-number token ids in ``0..vocab-1`` (not a
    tensor, not None, not floats or strings); ``max_tokens`` a whole number of at least 1 (``True`` is not 1);
    prompt plus output within the context of ``max_len`` tokens; the arrival a finite time from 0 to ``horizon_s``.
    """
    if not isinstance(req, Request):
        raise ValueError(f"a request must be a labkit.serving.engine.Request, got {type(req).__name__}")
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


class RequestSource(Protocol):
    """Where the scheduler loop's requests come from and where their tokens go (notebook `serving_llms`).

    :meth:`Engine.schedule` reads only this: ``requests`` and ``records`` (by request id, every request that has
    arrived), ``steps`` (one ``(batch size, cache usage)`` per decode step, appended by the loop), ``now()`` (seconds
    on the run's clock), ``more()`` (whether more requests may still come), ``arrived()`` (the requests whose
    arrival time has come, taken once), ``wait()`` (called when the engine has nothing to do: block until there may
    be more) and ``emit(record)`` (called after each token appended to a record).
    """

    requests: dict[int, Request]
    records: dict[int, RequestRecord]
    steps: list[tuple[int, dict]]

    def now(self) -> float: ...
    def more(self) -> bool: ...
    def arrived(self) -> list[Request]: ...
    def wait(self) -> None: ...
    def emit(self, record: RequestRecord) -> None: ...


class ReplaySource:
    """Requests known in advance, each released when the run's clock reaches its ``arrival_s`` (notebook `serving_llms`).

    Taught in notebook `serving_endpoint`, which prints :meth:`arrived` beside the live source's.

    What :meth:`Engine.serve` feeds its scheduler loop: ``requests`` must be valid (:meth:`Engine.check`), with
    unique ids, and ``records`` holds one record per request id. The run's clock starts when the source is made.
    """

    def __init__(
        self, requests: Sequence[Request], records: dict[int, RequestRecord], clock: Callable[[], float]
    ) -> None:
        self.requests = {r.rid: r for r in requests}
        self.records = records
        self.steps: list[tuple[int, dict]] = []
        self.clock = clock
        self.pending = deque(sorted(requests, key=lambda r: r.arrival_s))
        self.start = clock()

    def now(self) -> float:
        return self.clock() - self.start

    def more(self) -> bool:
        return bool(self.pending)

    def arrived(self) -> list[Request]:
        now, out = self.now(), []
        while self.pending and self.pending[0].arrival_s <= now:
            out.append(self.pending.popleft())
        return out

    def wait(self) -> None:
        if self.pending:
            time.sleep(max(0.0, self.pending[0].arrival_s - self.now()))

    def emit(self, record: RequestRecord) -> None:
        pass  # the records are the run's result, read when it ends


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

    def check(self, req: Request, horizon_s: float = math.inf) -> None:
        """Raise ValueError if ``req`` fails :func:`check_request` or needs more blocks than the whole cache has."""
        check_request(req, self.model.max_len, self.model.lm_head.out_features, horizon_s)
        need = self.cache.blocks_for(len(req.prompt) + req.max_tokens)
        if need > self.cache.num_blocks:
            raise ValueError(f"request {req.rid}: needs {need} blocks of KV cache; the whole cache has "
                             f"{self.cache.num_blocks}")  # fmt: skip

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
                self.check(req, horizon_s)
                if req.rid in records:
                    raise ValueError(f"request {rid!r}: its id repeats an earlier request's (ids must be unique)")
            except ValueError as exc:
                record.error = str(exc)
                continue
            records[req.rid] = record
            valid.append(req)
        held_before = set(self.cache.tables)
        source = ReplaySource(valid, records, clock)
        try:
            self.schedule(source)
        finally:  # an error mid-run (the model, a cache bug, an interrupt) must not leave sequences in the cache
            for seq in set(self.cache.tables) - held_before:
                self.cache.release(seq)
        return ServingRun.of(self.policy, order, source.now(), source.steps)

    def schedule(self, source: RequestSource) -> None:
        """The scheduler loop: each pass admits, pre-empts, prefills and runs one decode step for every running request.

        Taught in notebook `serving_llms`, which prints it. ``source`` is where requests come from and where their
        tokens go: a :class:`ReplaySource` (:meth:`serve`) or live traffic (:class:`labkit.serving.live.LiveEngine`).
        """
        records = source.records  # rid -> its RequestRecord, for every request that has arrived
        waiting: deque[Request] = deque()
        running: dict[int, int] = {}  # rid -> last token, in the order admitted
        on_demand = self.cache.admission == "on-demand"
        prefilling: dict[int, list[int]] = {}  # rid -> the prompt tokens it still has to prefill, admitted order
        while source.more() or waiting or running or prefilling:
            waiting.extend(source.arrived())  # the requests whose arrival time has come
            keep = self.cache.blocks_needed(running) if on_demand else 0
            while on_demand and keep > self.cache.free_blocks:  # pre-empt the newest until the others fit
                victim = next(reversed(running))
                running.pop(victim)
                self.cache.release(victim)
                records[victim].preempted += 1
                waiting.appendleft(source.requests[victim])
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
                    records[req.rid].recomputed += max(0, done - max(0, cached - len(req.prompt)))
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
                    self._emit(source, records[rid], first, source.now(), running)
            if running:
                rids = list(running)
                last = torch.tensor([[running[r]] for r in rids], device=self.device)
                nxt = self.cache.forward(self.model, rids, last)[:, -1].argmax(-1).tolist()
                sync(self.device)
                now = source.now()
                source.steps.append((len(rids), self.cache.usage()))  # the run's trace: batch size, cache usage
                for rid, token in zip(rids, nxt, strict=True):
                    self._emit(source, records[rid], token, now, running)
            elif not admit and not prefilling and waiting:
                raise CacheFull(f"request {waiting[0].rid} can never be admitted: the cache is empty and too small")
            elif not admit and not prefilling:
                source.wait()  # idle: until the next arrival (a replayed trace) or submission (live traffic)

    def _emit(self, source: RequestSource, record: RequestRecord, token: int, at: float, running: dict) -> None:
        record.tokens.append(token)
        record.token_times.append(at)
        if len(record.tokens) == record.max_tokens:
            running.pop(record.rid, None)
            self.cache.release(record.rid)
        else:
            running[record.rid] = token
        source.emit(record)


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
