"""Live traffic for the generation engine: requests submitted from any thread as they come, each token streamed.

Taught in notebook `serving_endpoint`. :class:`LiveEngine` runs the scheduler loop of notebook `serving_llms`
(:meth:`labkit.serving.engine.Engine.schedule`) unchanged, fed by a :class:`LiveSource` instead of a replayed
trace: :meth:`LiveEngine.submit` stamps a request with its arrival on the engine's clock and queues it, the loop
takes it at its next pass, and every token it makes goes straight to that request's :class:`TokenStream`.
:meth:`LiveEngine.take_run` hands back the finished requests as a :class:`~labkit.serving.engine.ServingRun`, so
:func:`labkit.serving.metrics.serving_metrics` reads live traffic as it reads a replayed trace.

Why hand-rolled: a live engine is what vLLM's ``AsyncLLM`` is, and it needs a GPU; this one is the same loop as the
replayed engine, so that what a learner reads is what serves the requests.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence

from .engine import Engine, Request, RequestRecord, ServingRun

POLL_S = 0.05  # how often an idle loop wakes to ask whether to stop: it blocks on the queue, never spins
JOIN_S = 30.0  # how long stop() waits for the loop's thread (a model step is far shorter)


class EngineStopped(RuntimeError):
    """The live engine stopped before this request finished (notebook `serving_endpoint`)."""


class TokenStream:
    """One submitted request's output tokens, each available as soon as the engine makes it.

    Part of notebook `serving_endpoint`'s live engine. ``for token in stream`` blocks for each token (any thread);
    ``async for token in stream`` waits without blocking an event loop (the HTTP server's); both raise
    :class:`EngineStopped` or ``RuntimeError`` if the request failed; each iteration starts from the first token.
    ``record`` is the request's :class:`~labkit.serving.engine.RequestRecord` once it has finished, ``None`` before.
    """

    def __init__(self, rid: int, prompt_len: int, max_tokens: int) -> None:
        self.rid, self.prompt_len, self.max_tokens = rid, prompt_len, max_tokens
        self.record: RequestRecord | None = None
        self._tokens: list[int] = []
        self._error: BaseException | None = None
        self._done = False
        self._cond = threading.Condition()
        self._wakers: list[Callable[[], None]] = []

    def __repr__(self) -> str:
        state = "failed" if self._error else "done" if self._done else "running"
        return f"TokenStream(rid={self.rid}, tokens={len(self._tokens)}/{self.max_tokens}, {state})"

    @property
    def done(self) -> bool:
        """Whether the request has finished, with all its tokens or with an error."""
        return self._done

    def _update(self, token: int | None = None, record: RequestRecord | None = None, error=None) -> None:
        with self._cond:
            if self._done:
                return
            if token is not None:
                self._tokens.append(token)
            if record is not None or error is not None:
                self.record, self._error, self._done = record, error, True
            self._cond.notify_all()
            wakers = list(self._wakers)
        for wake in wakers:
            wake()

    def _next(self, i: int, block: bool) -> int | None:
        """Token ``i``; -1 when there is none and will be none (raising the error if it failed); None when it is
        not made yet (only when not blocking)."""
        with self._cond:
            if block:
                self._cond.wait_for(lambda: i < len(self._tokens) or self._done)
            if i < len(self._tokens):
                return self._tokens[i]
            if self._error is not None:
                raise self._error
            return -1 if self._done else None

    def __iter__(self) -> Iterator[int]:
        i = 0
        while (token := self._next(i, block=True)) != -1:
            assert token is not None
            yield token
            i += 1

    async def _aiter(self) -> AsyncIterator[int]:
        loop, ready = asyncio.get_running_loop(), asyncio.Event()

        def wake() -> None:  # called from the engine's thread
            try:
                loop.call_soon_threadsafe(ready.set)
            except RuntimeError:  # the event loop has closed: nobody listens any more
                pass

        with self._cond:
            self._wakers.append(wake)
        try:
            i = 0
            while True:
                ready.clear()
                token = self._next(i, block=False)
                if token == -1:
                    return
                if token is None:
                    await ready.wait()
                    continue
                yield token
                i += 1
        finally:
            with self._cond:
                self._wakers.remove(wake)

    def __aiter__(self) -> AsyncIterator[int]:
        return self._aiter()

    def result(self, timeout: float | None = None) -> RequestRecord:
        """Wait until the request has finished and return its record; raise its error if it failed."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._done, timeout):
                raise TimeoutError(f"request {self.rid} did not finish within {timeout} s")
            if self._error is not None:
                raise self._error
            assert self.record is not None
            return self.record


class LiveSource:
    """The scheduler loop's requests from live traffic: a thread-safe queue in, a stream per request out.

    Part of notebook `serving_endpoint`'s live engine (:class:`LiveEngine` makes and drives it). Implements
    :class:`labkit.serving.engine.RequestSource`: ``arrived()`` releases the queued requests whose arrival stamp
    the clock has reached (as a replayed trace does), ``wait()`` blocks on the queue, ``emit`` streams each token.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.start = clock()
        self.requests: dict[int, Request] = {}  # arrived and not finished
        self.records: dict[int, RequestRecord] = {}
        self.steps: list[tuple[int, dict]] = []
        self.streams: dict[int, TokenStream] = {}
        self.finished: list[RequestRecord] = []  # since the last take_run
        self.until: Callable[[], bool] = lambda: True
        self.stopping = threading.Event()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._held: deque[tuple[Request, TokenStream]] = deque()  # taken from the queue, not yet arrived
        self._lock = threading.Lock()
        self._next_rid = 0

    def now(self) -> float:
        return self.clock() - self.start

    def put(self, engine: Engine, prompt: list[int], max_tokens: int) -> TokenStream:
        """Check a request for ``engine`` (ValueError if bad), stamp its arrival, queue it; return its stream."""
        with self._lock:  # stamps and queue order agree, whichever threads submit
            if self.stopping.is_set():
                raise RuntimeError("this LiveEngine has been stopped and takes no more requests; make a new one")
            req = Request(self._next_rid, prompt, max_tokens, self.now())
            engine.check(req)
            stream = TokenStream(req.rid, len(prompt), max_tokens)
            self._next_rid += 1
            self._queue.put((req, stream))
        return stream

    def more(self) -> bool:
        return not self.until() or bool(self._held) or not self._queue.empty()

    def arrived(self) -> list[Request]:
        if self.stopping.is_set():
            raise EngineStopped("the engine was stopped before this request finished")
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:  # None only wakes a waiting loop
                self._held.append(item)
        now, out = self.now(), []
        while self._held and self._held[0][0].arrival_s <= now:
            req, stream = self._held.popleft()
            self.requests[req.rid], self.streams[req.rid] = req, stream
            self.records[req.rid] = RequestRecord(req.rid, req.arrival_s, len(req.prompt), req.max_tokens)
            out.append(req)
        return out

    def wait(self) -> None:
        try:
            item = self._queue.get(timeout=POLL_S)
        except queue.Empty:
            return
        if item is not None:
            self._held.append(item)

    def emit(self, record: RequestRecord) -> None:
        stream = self.streams[record.rid]
        if len(record.tokens) < record.max_tokens:
            stream._update(token=record.tokens[-1])
            return
        del self.streams[record.rid], self.requests[record.rid], self.records[record.rid]
        with self._lock:
            self.finished.append(record)
        stream._update(token=record.tokens[-1])
        stream._update(record=record)

    def fail(self, error: BaseException, queued: bool) -> None:
        """Fail every request the loop holds (and, if ``queued``, every one still queued) with ``error``."""
        failed = [(self.records[rid], self.streams[rid]) for rid in list(self.records)]
        if queued:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    self._held.append(item)
            while self._held:
                req, stream = self._held.popleft()
                failed.append((RequestRecord(req.rid, req.arrival_s, len(req.prompt), req.max_tokens), stream))
        self.requests.clear()
        self.records.clear()
        self.streams.clear()
        for record, stream in failed:
            record.error = str(error)
            with self._lock:
                self.finished.append(record)
            stream._update(record=record, error=error)

    def stop(self) -> None:
        """Refuse new requests from now on, and wake a waiting loop so that it sees the stop at once."""
        with self._lock:  # a submit in progress either queues before this (and is failed) or sees the stop
            self.stopping.set()
        self._queue.put(None)


class LiveEngine:
    """An :class:`~labkit.serving.engine.Engine` serving live traffic: submit from any thread, stream every token.

    Taught in notebook `serving_endpoint`. :meth:`submit` (thread-safe) checks a request, stamps its arrival on
    ``clock`` (seconds from this object's creation) and returns its :class:`TokenStream`. The scheduler loop,
    :meth:`labkit.serving.engine.Engine.schedule`, runs either

    - in a background thread: :meth:`start` / :meth:`stop`, or ``with LiveEngine(engine) as live:``; or
    - in the calling thread: :meth:`serve_until`, until ``until()`` is true and no request is left. PyTorch's CPU
      kernels run slower from a secondary thread on a small machine (see
      :class:`~labkit.serving.batcher.DynamicBatcher`), so a measurement may prefer the main thread.

    Requests submitted while no loop runs wait for the next one. When idle, the loop blocks on the queue (it wakes
    every 50 ms to check whether to stop), never spinning a core. :meth:`stop` fails every queued and running
    request with :class:`EngineStopped`, leaves the cache holding none of them and joins the thread (a
    :meth:`serve_until` loop in another thread does the same at its next pass); a stopped engine takes no more
    requests. If the model raises, the requests the loop holds fail with that error and
    their sequences leave the cache; :meth:`serve_until` then raises it, a background loop goes on serving the
    requests that come next (``last_error`` keeps it). :meth:`take_run` returns the requests finished since the
    last take, as a :class:`~labkit.serving.engine.ServingRun` for :func:`labkit.serving.metrics.serving_metrics`.
    """

    def __init__(self, engine: Engine, clock: Callable[[], float] = time.perf_counter) -> None:
        if not isinstance(engine, Engine):
            raise ValueError(f"engine must be a labkit.serving.engine.Engine, got {type(engine).__name__}")
        if not callable(clock):
            raise ValueError(f"clock must be a function returning seconds, got {type(clock).__name__}")
        self.engine = engine
        self.last_error: BaseException | None = None
        self._source = LiveSource(clock)
        self._thread: threading.Thread | None = None
        self._serving = threading.Lock()  # held while a loop runs: one loop at a time

    def __repr__(self) -> str:
        state = "stopped" if self._source.stopping.is_set() else "serving" if self.serving else "idle"
        return f"LiveEngine({self.engine.policy}, max_batch={self.engine.max_batch}, {state})"

    @property
    def serving(self) -> bool:
        """Whether a scheduler loop is running now (in the background or in :meth:`serve_until`)."""
        return self._serving.locked()

    @property
    def vocab(self) -> int:
        """How many token ids the model knows (ids ``0..vocab-1``)."""
        return self.engine.model.lm_head.out_features

    @property
    def context(self) -> int:
        """The model's context: prompt plus output tokens of one request."""
        return self.engine.model.max_len

    def now(self) -> float:
        """Seconds on the engine's clock (0 when this object was made): the time base of every record."""
        return self._source.now()

    def submit(self, prompt: Sequence[int], max_tokens: int) -> TokenStream:
        """Queue a request for ``max_tokens`` tokens after ``prompt`` (token ids); return its stream at once.

        Thread-safe. A bad request raises ValueError here, saying what is allowed; a stopped engine raises
        RuntimeError. Decoding is greedy and never stops early: the stream yields exactly ``max_tokens`` tokens.
        """
        tokens = list(prompt) if isinstance(prompt, (list, tuple)) else prompt  # anything else: check says why
        return self._source.put(self.engine, tokens, max_tokens)  # type: ignore[arg-type]

    def serve_until(self, until: Callable[[], bool]) -> None:
        """Run the scheduler loop in this thread until ``until()`` is true and every request has finished.

        ``until`` is called at every pass of the loop, so keep it cheap. An interrupt (Ctrl-C) fails every request
        and raises; an error in the model fails the requests in flight and raises.
        """
        if not callable(until):
            raise ValueError(f"until must be a function returning True when to stop, got {type(until).__name__}")
        if self._thread is not None:
            raise RuntimeError("the loop already runs in a background thread (start()); stop() it first")
        if self._source.stopping.is_set():
            raise RuntimeError("this LiveEngine has been stopped; make a new one")
        self._run(until, reraise=True)

    def _run(self, until: Callable[[], bool], reraise: bool) -> None:
        if not self._serving.acquire(blocking=False):
            raise RuntimeError("a scheduler loop is already running for this LiveEngine")
        cache, source = self.engine.cache, self._source
        held_before = set(cache.tables)
        source.until = until
        try:
            self.engine.schedule(source)
        except EngineStopped as stopped:
            source.fail(stopped, queued=True)
        except Exception as exc:
            self.last_error = exc
            source.fail(RuntimeError(f"the engine failed: {type(exc).__name__}: {exc}"), queued=False)
            if reraise:
                raise
        except BaseException:  # an interrupt: nobody may be left waiting
            source.fail(EngineStopped("the engine was interrupted before this request finished"), queued=True)
            raise
        finally:  # whatever happened, the cache holds none of this engine's sequences
            for seq in set(cache.tables) - held_before:
                cache.release(seq)
            source.until = lambda: True
            self._serving.release()

    def start(self) -> LiveEngine:
        """Run the scheduler loop in a background thread until :meth:`stop`; return self."""
        if self._thread is not None:
            raise RuntimeError("this LiveEngine is already started")
        if self.serving:
            raise RuntimeError("a scheduler loop already runs (serve_until); start() only when none does")
        if self._source.stopping.is_set():
            raise RuntimeError("this LiveEngine has been stopped; make a new one")

        def loop() -> None:
            while not self._source.stopping.is_set():
                self._run(lambda: False, reraise=False)

        self._thread = threading.Thread(target=loop, name="labkit-live-engine", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: fail every queued and running request, release their cache blocks, join the thread."""
        self._source.stop()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(JOIN_S)
            if thread.is_alive():
                raise RuntimeError(f"the engine's thread did not stop within {JOIN_S:g} s")
        if self._serving.acquire(blocking=False):  # no loop runs to see the stop (and none can start now)
            try:
                self._source.fail(EngineStopped("the engine was stopped before this request finished"), queued=True)
            finally:
                self._serving.release()

    def __enter__(self) -> LiveEngine:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def take_run(self) -> ServingRun:
        """The requests finished (or failed) since the last take, in order of arrival, as a run.

        Times are seconds on the engine's clock. The run's duration spans the first taken arrival to the last
        taken token; its steps are the decode steps since the last take (a step in progress goes to the next).
        """
        source = self._source
        with source._lock:
            records, source.finished = sorted(source.finished, key=lambda r: r.rid), []
        n = len(source.steps)
        steps = source.steps[:n]
        del source.steps[:n]  # the loop only appends: what it adds meanwhile stays for the next take
        if records:
            begin = min(r.arrival_s for r in records)
            end = max(r.token_times[-1] if r.token_times else r.arrival_s for r in records)
        else:
            begin = end = source.now()
        return ServingRun.of(self.engine.policy, records, max(end - begin, 0.0), steps)
