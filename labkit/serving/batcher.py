"""The dynamic-batching model server (notebooks `latency_throughput` and `sharing_a_gpu`): requests queue up; one worker thread takes the first,
waits at most ``max_wait_ms`` (from that request's arrival) for more, up to ``max_batch``, runs the model once on
the batch and answers each request. The policy of production servers (Triton's ``max_queue_delay``, TorchServe's
``maxBatchDelay``), small enough to read. :mod:`labkit.serving.web` puts it behind HTTP.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

import torch

from ..core.device import sync
from ..core.result import Result


@dataclass
class _Request:
    inputs: torch.Tensor
    arrival_s: float  # scheduled arrival (perf_counter clock)
    future: Future
    enqueued_s: float = 0.0


@dataclass
class RequestTiming(Result):
    """One answered request: when it arrived, when its batch started and ended, and the batch's size."""

    arrival_s: float
    start_s: float
    done_s: float
    batch_size: int

    @property
    def latency_s(self) -> float:
        return self.done_s - self.arrival_s


class DynamicBatcher:
    """A model server with dynamic batching (notebook `latency_throughput`).

    ``model_fn`` takes a batch ``(B, *shape)`` and returns ``(B, ...)``; it runs under
    ``torch.inference_mode``. Anyone may ``submit`` a request (a single sample, no batch
    dimension) from any thread; it returns a ``concurrent.futures.Future`` for that request's
    output row. :meth:`serve` runs the batching loop *in the calling thread* until told to stop:
    the load functions below run it in the notebook's main thread while their generators submit
    from a helper thread. (PyTorch's CPU kernels run measurably slower when called from a
    secondary Python thread on a small machine, whose OpenMP workers then compete with the main
    thread's; serving from the main thread keeps the model's speed what notebook `batch_size` measured.)
    """

    def __init__(
        self,
        model_fn: Callable[[torch.Tensor], torch.Tensor],
        max_batch: int = 32,
        max_wait_ms: float = 2.0,
        device: torch.device | str | None = None,
    ):
        if not isinstance(max_batch, int) or isinstance(max_batch, bool) or max_batch < 1:
            raise ValueError(f"max_batch must be a positive integer, got {max_batch!r}")
        if not callable(model_fn):
            raise TypeError(f"model_fn must be a model or a function to call, got {type(model_fn).__name__}")
        if (
            not isinstance(max_wait_ms, (int, float))
            or isinstance(max_wait_ms, bool)
            or not 0 <= max_wait_ms < math.inf
        ):
            raise ValueError(f"max_wait_ms must be zero or a positive number of milliseconds, got {max_wait_ms!r}")
        self.model_fn = model_fn
        self.max_batch = max_batch
        self.max_wait_s = max_wait_ms / 1e3
        self.device = torch.device(device) if device is not None else None
        self._queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._serving = threading.Event()  # set while a serve loop runs (the HTTP front end answers 503 otherwise)
        self.timings: list[RequestTiming] = []

    @property
    def serving(self) -> bool:
        """Whether a :meth:`serve` loop is running now, so that a submitted request will be answered."""
        return self._serving.is_set()

    def __repr__(self) -> str:
        return f"DynamicBatcher(max_batch={self.max_batch}, max_wait_ms={self.max_wait_s * 1e3:g})"

    def submit(self, inputs: torch.Tensor, arrival_s: float | None = None) -> Future:
        """Queue one request. ``arrival_s`` (``time.perf_counter`` clock) is when it was due to arrive."""
        now = time.perf_counter()
        req = _Request(inputs, now if arrival_s is None else arrival_s, Future(), now)
        self._queue.put(req)
        return req.future

    def reset_timings(self) -> None:
        with self._lock:
            self.timings = []

    def warmup(self, example: torch.Tensor, repeats: int = 2, every_size_up_to: int = 64) -> list[int]:
        """Run the model ``repeats`` times at each batch size the server will meet; return the sizes.

        A dynamic batcher meets every batch size sooner or later, and the first call at a new shape
        pays one-off costs (kernel selection, buffer allocation) that would otherwise land in the
        first measurement's tail. Serving systems warm up the same way before taking traffic.
        Every size up to ``every_size_up_to`` is run; above it only powers of two and ``max_batch``
        (there the one-off cost is small beside the batch's own work, and warming hundreds of large
        batches would take minutes).
        """
        if not isinstance(repeats, int) or repeats < 1:
            raise ValueError(f"repeats must be a positive integer, got {repeats!r}")
        if not isinstance(every_size_up_to, int) or every_size_up_to < 1:
            raise ValueError(f"every_size_up_to must be a positive integer, got {every_size_up_to!r}")
        dense = range(1, min(self.max_batch, every_size_up_to) + 1)
        powers = (2**k for k in range(self.max_batch.bit_length()))  # 1, 2, 4, ... up to max_batch
        sizes = sorted({*dense, *powers, self.max_batch})
        for size in sizes:
            x = torch.stack([example] * size)
            if self.device is not None:
                x = x.to(self.device)
            with torch.inference_mode():
                for _ in range(repeats):
                    self.model_fn(x)
            sync(self.device)
        return sizes

    def serve(self, until: Callable[[], bool], poll_s: float = 0.005) -> None:
        """Serve requests in this thread until ``until()`` is true and nothing is queued.

        If serving is interrupted (an exception, Ctrl-C), every request still queued is failed,
        so no caller waits forever.
        """
        self._serving.set()
        try:
            while True:
                try:
                    first = self._queue.get(timeout=poll_s)
                except queue.Empty:
                    if until():
                        return
                    continue
                batch = [first]
                deadline = first.enqueued_s + self.max_wait_s  # counted from the first request's arrival
                while len(batch) < self.max_batch:
                    left = deadline - time.perf_counter()
                    try:
                        batch.append(self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait())
                    except queue.Empty:
                        break
                self._run(batch)
        except BaseException:
            self._fail_queued("the server stopped before this request was served")
            raise
        finally:
            self._serving.clear()

    def _fail_queued(self, why: str) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if not item.future.done():
                item.future.set_exception(RuntimeError(why))

    def _run(self, batch: list[_Request]) -> None:
        start = time.perf_counter()
        try:
            x = torch.stack([r.inputs for r in batch])
            if self.device is not None:
                x = x.to(self.device)
            with torch.inference_mode():
                out = self.model_fn(x)
            sync(self.device)
            out = out.cpu()
            if not isinstance(out, torch.Tensor) or out.ndim < 1 or out.shape[0] != len(batch):
                rows = out.shape[0] if isinstance(out, torch.Tensor) and out.ndim else type(out).__name__
                raise ValueError(f"the model returned {rows} rows for a batch of {len(batch)} requests; it must "
                                 "return a tensor with one row per input row")  # fmt: skip
        except Exception as exc:  # a bad batch fails its own requests, never the server
            for r in batch:
                r.future.set_exception(exc)
            return
        done = time.perf_counter()
        with self._lock:
            self.timings.extend(RequestTiming(r.arrival_s, start, done, len(batch)) for r in batch)
        for r, row in zip(batch, out, strict=True):
            r.future.set_result(row)


# -- load generators (MLPerf LoadGen's scenarios) ---------------------------------------------
