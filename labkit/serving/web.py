"""The HTTP front end of the dynamic-batching server, and a load generator that drives it from a second process.

Taught in notebook `latency_throughput` (and reused by notebook `sharing_a_gpu`, where training shares the machine
with it). The server itself is :class:`labkit.serving.batcher.DynamicBatcher`; the MLPerf-style load scenarios
(single stream, offline, Poisson arrivals, the highest rate under a p99 bound) are in :mod:`labkit.serving.loads`.

- :func:`serve_http` puts the batcher behind a real HTTP endpoint on 127.0.0.1 (the standard
  library's ``ThreadingHTTPServer``), and :func:`http_load` drives it from a second process
  (``labkit/serving/loadgen.py``, standard library only), bounded in requests and seconds.
"""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import torch

from ..core.procs import owned_tempdir
from .batcher import DynamicBatcher
from .loads import _check_n, _gc_paused

MAX_BODY_BYTES = 1 << 20


CONNECTION_TIMEOUT_S = 10.0  # a client that sends nothing for this long is disconnected


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "labkit-serving/1"
    protocol_version = "HTTP/1.1"
    timeout = CONNECTION_TIMEOUT_S  # socketserver sets it on the connection: a slow client cannot hold a handler

    def log_message(self, format, *args) -> None:  # the base class names its argument format
        pass  # one line per request on stderr would drown the notebook

    def _reply(self, status: int, payload: dict) -> None:
        body = json.dumps(payload, allow_nan=False).encode()  # strict JSON: NaN and Infinity are not JSON
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # http.server's naming
        if self.path == "/health":
            self._reply(200, {"status": "ok", "serving": self.server.batcher.serving})
        elif self.path == "/predict":
            self._not_allowed()
        else:
            self._reply(404, {"error": f"no such path {self.path!r}; use POST /predict or GET /health"})

    def do_POST(self) -> None:
        if self.path == "/health":
            self._not_allowed()
            return
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
            body = json.loads(raw, parse_constant=_no_constant)
            values = body["inputs"]
            if not isinstance(values, list) or len(values) != features:
                raise ValueError(f"'inputs' must be a list of {features} numbers")
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                raise ValueError("'inputs' must hold numbers only")
            if not all(math.isfinite(v) for v in values):
                raise ValueError("'inputs' must be finite numbers (1e999 overflows to infinity)")
        except (json.JSONDecodeError, UnicodeDecodeError):
            self._reply(400, {"error": "the body is not valid JSON"})
            return
        except RecursionError:
            self._reply(400, {"error": "the body is nested too deeply to parse"})
            return
        except (KeyError, TypeError):
            self._reply(400, {"error": 'expected a JSON object like {"inputs": [...]}'})
            return
        except ValueError as err:
            self._reply(400, {"error": str(err)})
            return
        if not self.server.batcher.serving:
            self._reply(503, {"error": "the model is not being served right now (no serve loop runs); try later"})
            return
        arrived = time.perf_counter()
        try:
            out = self.server.batcher.submit(torch.tensor(values, dtype=torch.float32)).result(timeout=30)
        except Exception as err:  # the model failed on this batch: the server itself stays up
            self._reply(500, {"error": f"the model failed: {type(err).__name__}: {err}"})
            return
        if not torch.isfinite(out).all():
            self._reply(500, {"error": "the model's outputs are not finite numbers (NaN or infinity)"})
            return
        self._reply(200, {"outputs": out.tolist(), "server_ms": (time.perf_counter() - arrived) * 1e3})

    def _not_allowed(self) -> None:
        self._reply(405, {"error": f"{self.command} is not allowed; use POST /predict or GET /health"})

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed

    def do_HEAD(self) -> None:  # a reply without a body: the status line says it all
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    batcher: DynamicBatcher  # set by serve_http before it serves
    features: int
    allow_reuse_address = False
    request_queue_size = 256  # the listen backlog; socketserver's default of 5 resets connections in a burst

    def handle_error(self, request, client_address) -> None:
        """A client that hangs up or times out is one line on stderr, not a traceback; anything else, the traceback."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            sys.stderr.write(f"labkit-serving: {client_address[0]}:{client_address[1]}: {type(error).__name__}\n")
        else:
            super().handle_error(request, client_address)


@contextlib.contextmanager
def serve_http(batcher: DynamicBatcher, features: int, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve ``batcher`` at ``http://host:<port>`` (a port the OS picks) for the ``with`` block; yields the URL.

    Taught in notebook `latency_throughput`.

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

    Taught in notebook `latency_throughput`.

    While the load generator (``labkit/serving/loadgen.py``) runs, ``batcher`` serves in this thread. Returns
    the generator's measurements: end-to-end latencies in ms, the server's own time per request, errors.
    The generator is killed if it outlives ``max_s`` + 15 s, or if this call is interrupted.
    """
    _check_n(n)
    for name, value in dict(rate=rate, max_s=max_s).items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    for name, value in dict(features=features, concurrency=concurrency).items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a whole number, 1 or more; got {value!r}")
    script = Path(__file__).with_name("loadgen.py")  # run as a script: standard library only, no torch import
    with owned_tempdir("load") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, str(script), url, "--features", str(features), "--rate", str(rate),
               "--requests", str(n), "--max-seconds", str(max_s), "--concurrency", str(concurrency),
               "--seed", str(seed), "--out", str(out)]  # fmt: skip
        deadline = time.perf_counter() + max_s + 15
        with open(Path(tmp) / "stderr.txt", "w+") as err, _gc_paused():
            # started after the collection: its first request must find the serve loop running (else 503)
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
            try:
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
