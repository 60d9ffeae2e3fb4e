"""Serving: a dynamic-batching model server, the MLPerf load scenarios, and an HTTP front end.

Taught in notebook 07 (and reused by notebook 10, where training shares the machine with it).

- :class:`DynamicBatcher` is a real server: requests go into a queue; one worker thread takes the
  first waiting request, then waits at most ``max_wait_ms`` (counted from that request's arrival)
  for more, up to ``max_batch``; runs the model once on the batch; and answers each request.
  This is the policy of production servers (Triton's ``max_queue_delay``, TorchServe's
  ``maxBatchDelay``), small enough to read.
- :func:`single_stream`, :func:`offline` and :func:`poisson` drive it like MLPerf Inference's
  LoadGen scenarios: one request at a time (latency percentiles), everything at once (samples/s),
  and requests arriving at random at a target rate. Latency counts from each request's *scheduled*
  arrival, so a slow server cannot hide its backlog by delaying the generator (coordinated omission).
- :func:`find_max_rate` is the server scenario's question: the highest arrival rate whose p99 latency
  stays under a bound.
- :func:`serve_http` puts the batcher behind a real HTTP endpoint on 127.0.0.1 (the standard
  library's ``ThreadingHTTPServer``), and :func:`http_load` drives it from a second process
  (``labkit/loadgen.py``, standard library only), bounded in requests and seconds.
"""

from __future__ import annotations

import contextlib
import gc
import json
import queue
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import torch

from .device import sync

_STOP = object()


@dataclass
class _Request:
    inputs: torch.Tensor
    arrival_s: float  # scheduled arrival (perf_counter clock)
    future: Future
    enqueued_s: float = 0.0


@dataclass
class RequestTiming:
    """One answered request: when it arrived, when its batch started and ended, and the batch's size."""

    arrival_s: float
    start_s: float
    done_s: float
    batch_size: int

    @property
    def latency_s(self) -> float:
        return self.done_s - self.arrival_s

    @property
    def queue_s(self) -> float:
        return self.start_s - self.arrival_s


class DynamicBatcher:
    """A model server with dynamic batching (notebook 07).

    ``model_fn`` takes a batch ``(B, *shape)`` and returns ``(B, ...)``; it runs under
    ``torch.inference_mode``. Anyone may ``submit`` a request (a single sample, no batch
    dimension) from any thread; it returns a ``concurrent.futures.Future`` for that request's
    output row. :meth:`serve` runs the batching loop *in the calling thread* until told to stop:
    the load functions below run it in the notebook's main thread while their generators submit
    from a helper thread. (PyTorch's CPU kernels run measurably slower when called from a
    secondary Python thread on a small machine, whose OpenMP workers then compete with the main
    thread's; serving from the main thread keeps the model's speed what notebook 05 measured.)
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
        if not isinstance(max_wait_ms, (int, float)) or isinstance(max_wait_ms, bool) or max_wait_ms < 0:
            raise ValueError(f"max_wait_ms must be zero or a positive number of milliseconds, got {max_wait_ms!r}")
        self.model_fn = model_fn
        self.max_batch = max_batch
        self.max_wait_s = max_wait_ms / 1e3
        self.device = torch.device(device) if device is not None else None
        self._queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self.timings: list[RequestTiming] = []

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


@dataclass
class LoadResult:
    """Latencies of one load run, and what it achieved."""

    scenario: str
    latencies_s: np.ndarray = field(repr=False)
    duration_s: float
    offered_rate: float | None = None  # requests/s asked for (server scenario)
    batch_sizes: np.ndarray = field(default_factory=lambda: np.array([]), repr=False)

    def percentile_ms(self, q: float) -> float:
        return float(np.percentile(self.latencies_s, q) * 1e3)

    @property
    def p50_ms(self) -> float:
        return self.percentile_ms(50)

    @property
    def p90_ms(self) -> float:
        return self.percentile_ms(90)

    @property
    def p99_ms(self) -> float:
        return self.percentile_ms(99)

    @property
    def throughput(self) -> float:
        """Requests answered per second over the run."""
        return len(self.latencies_s) / self.duration_s

    @property
    def mean_batch(self) -> float:
        return float(self.batch_sizes.mean()) if len(self.batch_sizes) else float("nan")

    def to_dict(self) -> dict:
        return dict(
            scenario=self.scenario,
            requests=len(self.latencies_s),
            p50_ms=self.p50_ms,
            p90_ms=self.p90_ms,
            p99_ms=self.p99_ms,
            throughput=self.throughput,
            offered_rate=self.offered_rate,
            mean_batch=self.mean_batch,
            duration_s=self.duration_s,
        )

    def __str__(self) -> str:
        rate = f" at {self.offered_rate:,.0f}/s offered" if self.offered_rate else ""
        return (
            f"{self.scenario}{rate}: {len(self.latencies_s)} requests, p50 {self.p50_ms:.2f} ms, "
            f"p90 {self.p90_ms:.2f} ms, p99 {self.p99_ms:.2f} ms, {self.throughput:,.0f} requests/s, "
            f"mean batch {self.mean_batch:.1f}"
        )


def _check_n(n: int) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"the number of requests must be a positive integer, got {n!r}")


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Like ``timeit``, pause the garbage collector for a run: a full collection in the middle of one
    (thousands of futures make it likely) stalls every request by tens of milliseconds and says nothing
    about the model. Collected once before, re-enabled after."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _drive(server: DynamicBatcher, generate: Callable[[threading.Event], list[Future]], timeout_s: float) -> None:
    """Run ``generate`` in a helper thread while ``server`` serves in this one; wait for every answer."""
    stop = threading.Event()
    futures: list[Future] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            futures.extend(generate(stop))
        except BaseException as exc:  # reported below, in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=run, name="labkit-load", daemon=True)
    deadline = time.perf_counter() + timeout_s
    thread.start()
    try:
        server.serve(until=lambda: not thread.is_alive() or time.perf_counter() > deadline)
    finally:
        stop.set()
        thread.join(timeout=5)
    if errors:
        raise errors[0]
    for f in futures:
        f.result(timeout=max(0.001, deadline - time.perf_counter()))


def _result(server: DynamicBatcher, scenario: str, start: float | None = None, rate: float | None = None) -> LoadResult:
    timings = list(server.timings)
    begin = min(t.arrival_s for t in timings) if start is None else start
    return LoadResult(
        scenario,
        np.array([t.latency_s for t in timings]),
        max(t.done_s for t in timings) - begin,
        offered_rate=rate,
        batch_sizes=np.array([t.batch_size for t in timings]),
    )


def single_stream(
    server: DynamicBatcher, make_input: Callable[[int], torch.Tensor], n: int, timeout_s: float = 120
) -> LoadResult:
    """MLPerf's single stream: one request at a time; the next is sent when the previous answer arrives."""
    _check_n(n)
    inputs = [make_input(i) for i in range(n)]
    server.reset_timings()

    def generate(stop: threading.Event) -> list[Future]:
        done = []
        for x in inputs:
            if stop.is_set():
                break
            f = server.submit(x)
            f.result(timeout=timeout_s)
            done.append(f)
        return done

    with _gc_paused():
        _drive(server, generate, timeout_s)
    return _result(server, "single stream")


def offline(
    server: DynamicBatcher, make_input: Callable[[int], torch.Tensor], n: int, timeout_s: float = 120
) -> LoadResult:
    """MLPerf's offline: all ``n`` requests at once; what matters is how soon the last one is done."""
    _check_n(n)
    inputs = [make_input(i) for i in range(n)]
    server.reset_timings()
    with _gc_paused():
        start = time.perf_counter()
        futures = [server.submit(x, arrival_s=start) for x in inputs]  # queued before serving starts
        _drive(server, lambda stop: futures, timeout_s)
    return _result(server, "offline", start=start)


def poisson(
    server: DynamicBatcher,
    make_input: Callable[[int], torch.Tensor],
    rate: float,
    n: int,
    seed: int = 0,
    max_s: float = 30.0,
) -> LoadResult:
    """MLPerf's server scenario: requests arriving at random (a Poisson process) at ``rate`` per second.

    Arrival times are drawn up front; a request is submitted as soon as its time has come and
    its latency counts from that scheduled time. Stops submitting after ``max_s`` seconds.
    """
    _check_n(n)
    if not isinstance(rate, (int, float)) or rate <= 0:
        raise ValueError(f"rate must be a positive number of requests per second, got {rate!r}")
    rng = random.Random(seed)
    gaps = [rng.expovariate(rate) for _ in range(n)]
    inputs = [make_input(i) for i in range(n)]
    server.reset_timings()

    def generate(stop: threading.Event) -> list[Future]:
        futures = []
        start = time.perf_counter()
        due = start
        for x, gap in zip(inputs, gaps, strict=True):
            due += gap
            if stop.is_set() or due - start > max_s:
                break
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            futures.append(server.submit(x, arrival_s=due))
        return futures

    with _gc_paused():
        _drive(server, generate, max_s + 60)
    return _result(server, "server", rate=rate)


@dataclass
class RateSearch:
    """The server scenario's answer: the highest rate that met the p99 bound, and every trial."""

    best_rate: float | None
    best: LoadResult | None
    p99_bound_ms: float
    trials: list[LoadResult]


def find_max_rate(
    server: DynamicBatcher,
    make_input: Callable[[int], torch.Tensor],
    p99_bound_ms: float,
    low: float,
    high: float,
    n: int = 400,
    steps: int = 6,
    seed: int = 0,
) -> RateSearch:
    """Bisect on the arrival rate (geometrically) for the highest one whose p99 latency meets the bound.

    A trial meets the bound when its p99 is within ``p99_bound_ms`` *and* the server kept up
    (achieved at least 90% of the offered rate); a rate counts as failed only if a second trial at it
    fails too. MLPerf runs each trial for minutes; here each is ``n`` requests, so a p99 rests on a
    handful of requests: a quick estimate, not a certified one.

    Latency is not always lowest at the lowest load: between sparse requests a machine's threads and
    cores go to sleep and take a while to wake, and a batching server makes a lone request wait for
    company. So if ``low`` fails, three higher rates on the way to ``high`` are tried before giving up,
    and the bisection starts from the first that meets the bound.
    """
    if not 0 < low < high:
        raise ValueError(f"need 0 < low < high, got low={low}, high={high}")
    trials: list[LoadResult] = []

    def one_trial(rate: float) -> bool:
        result = poisson(server, make_input, rate, n, seed=seed + len(trials))
        trials.append(result)
        return result.p99_ms <= p99_bound_ms and result.throughput >= 0.9 * rate

    def meets(rate: float) -> bool:
        return one_trial(rate) or one_trial(rate)  # a failure must repeat: one stall of the machine is not a verdict

    for lo in (low * (high / low) ** (k / 4) for k in range(4)):  # low, then three rates on the way to high
        if meets(lo):
            break
    else:
        return RateSearch(None, None, p99_bound_ms, trials)
    best, hi = trials[-1], high  # the trial that met the bound
    for _ in range(steps):
        mid = (lo * hi) ** 0.5
        if meets(mid):
            lo, best = mid, trials[-1]  # the trial that met the bound
        else:
            hi = mid
    return RateSearch(lo, best, p99_bound_ms, trials)


# -- HTTP ------------------------------------------------------------------------------------

MAX_BODY_BYTES = 1 << 20


class _Handler(BaseHTTPRequestHandler):
    server_version = "labkit-serving/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args) -> None:  # noqa: A002 (the base class's name)
        pass  # one line per request on stderr would drown the notebook

    def _reply(self, status: int, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        if self.path == "/health":
            self._reply(200, {"status": "ok"})
        else:
            self._reply(404, {"error": f"no such path {self.path!r}; use POST /predict or GET /health"})

    def do_POST(self) -> None:  # noqa: N802
        if self.path != "/predict":
            self._reply(404, {"error": f"no such path {self.path!r}; use POST /predict"})
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._reply(411, {"error": "a Content-Length header is required"})
            return
        if not 0 < length <= MAX_BODY_BYTES:
            self._reply(413 if length > 0 else 400, {"error": f"body must be 1 to {MAX_BODY_BYTES} bytes"})
            return
        raw = self.rfile.read(length)
        features = self.server.features
        try:
            body = json.loads(raw)
            values = body["inputs"]
            if not isinstance(values, list) or len(values) != features:
                raise ValueError(f"'inputs' must be a list of {features} numbers")
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                raise ValueError("'inputs' must hold numbers only")
        except (json.JSONDecodeError, UnicodeDecodeError):
            self._reply(400, {"error": "the body is not valid JSON"})
            return
        except (KeyError, TypeError):
            self._reply(400, {"error": 'expected a JSON object like {"inputs": [...]}'})
            return
        except ValueError as err:
            self._reply(400, {"error": str(err)})
            return
        arrived = time.perf_counter()
        try:
            out = self.server.batcher.submit(torch.tensor(values, dtype=torch.float32)).result(timeout=30)
        except Exception as err:  # the model failed on this batch: the server itself stays up
            self._reply(500, {"error": f"the model failed: {type(err).__name__}: {err}"})
            return
        self._reply(200, {"outputs": out.tolist(), "server_ms": (time.perf_counter() - arrived) * 1e3})

    def _not_allowed(self) -> None:
        self._reply(405, {"error": f"{self.command} is not allowed; use POST /predict or GET /health"})

    do_PUT = do_DELETE = do_PATCH = _not_allowed  # noqa: N815


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False
    request_queue_size = 256  # the listen backlog; socketserver's default of 5 resets connections in a burst


@contextlib.contextmanager
def serve_http(batcher: DynamicBatcher, features: int, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve ``batcher`` at ``http://host:<port>`` (a port the OS picks) for the ``with`` block; yields the URL.

    ``POST /predict`` with ``{"inputs": [features numbers]}`` answers ``{"outputs": [...], "server_ms": ...}``;
    malformed requests get a 4xx with a message. Leaving the block (normally, by an exception or by an
    interrupt) shuts the server down and closes its socket.
    """
    httpd = _Server((host, 0), _Handler)
    httpd.batcher = batcher
    httpd.features = features
    thread = threading.Thread(target=httpd.serve_forever, kwargs=dict(poll_interval=0.05), daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def http_load(
    batcher: DynamicBatcher,
    url: str,
    features: int,
    rate: float,
    n: int,
    max_s: float = 20.0,
    concurrency: int = 32,
    seed: int = 0,
) -> dict:
    """Drive ``url`` from a second process: ``n`` requests at a Poisson ``rate``, for at most ``max_s`` seconds.

    While the load generator (``labkit/loadgen.py``) runs, ``batcher`` serves in this thread. Returns
    the generator's measurements: end-to-end latencies in ms, the server's own time per request, errors.
    The generator is killed if it outlives ``max_s`` + 15 s, or if this call is interrupted.
    """
    _check_n(n)
    script = Path(__file__).with_name("loadgen.py")  # run as a script: standard library only, no torch import
    with tempfile.TemporaryDirectory(prefix="labkit-load-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, str(script), url, "--features", str(features), "--rate", str(rate),
               "--requests", str(n), "--max-seconds", str(max_s), "--concurrency", str(concurrency),
               "--seed", str(seed), "--out", str(out)]  # fmt: skip
        deadline = time.perf_counter() + max_s + 15
        with open(Path(tmp) / "stderr.txt", "w+") as err:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
            try:
                with _gc_paused():
                    batcher.serve(until=lambda: proc.poll() is not None or time.perf_counter() > deadline)
            finally:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
            err.seek(0)
            stderr = err.read()
        if proc.returncode != 0:
            raise RuntimeError(f"the load generator failed (exit {proc.returncode}): {stderr.strip()[-500:]}")
        return json.loads(out.read_text())
