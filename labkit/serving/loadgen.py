"""A load generator for labkit's HTTP model server, run as its own process (notebook `latency_throughput`).

Standard library only, and run as a script (``python labkit/serving/loadgen.py URL ...``) rather than as
``-m labkit.serving.loadgen``, so it starts in a fraction of a second without importing PyTorch. Requests
arrive as a Poisson process at ``--rate``; each is sent by a pool thread at its scheduled time and
its latency counts from that time (no coordinated omission). The run is bounded: at most
``--requests`` requests and ``--max-seconds`` seconds, after which unsent requests are dropped.
On Linux the process also asks to be killed if its parent dies, so it can never outlive a notebook.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """``python -m labkit.serving.loadgen URL``: send a load to a server from a process of its own; write the timings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the server, e.g. http://127.0.0.1:8123")
    parser.add_argument("--features", type=int, required=True, help="numbers per request")
    parser.add_argument("--rate", type=float, required=True, help="mean requests per second (Poisson arrivals)")
    parser.add_argument("--requests", type=int, required=True, help="how many requests at most")
    parser.add_argument("--max-seconds", type=float, default=20.0, help="stop sending after this long")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="where to write the JSON results")
    ns = parser.parse_args(argv)
    finite = all(math.isfinite(v) and v > 0 for v in (ns.rate, ns.max_seconds))
    if not finite or ns.requests < 1 or ns.concurrency < 1 or ns.features < 1:
        parser.error("--rate and --max-seconds must be positive finite numbers, and --requests, --concurrency and "
                     "--features positive")  # fmt: skip
    # It runs as a script, so that it starts without importing labkit's package (and PyTorch with it): it takes
    # labkit/core/procs.py (standard library only) from its file, with the core folder put on sys.path.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
    from procs import die_with_parent

    die_with_parent(os.getppid())  # never outlive the notebook that started it

    rng = random.Random(ns.seed)
    payloads = [
        json.dumps({"inputs": [rng.gauss(0.0, 1.0) for _ in range(ns.features)]}).encode() for _ in range(ns.requests)
    ]
    endpoint = ns.url.rstrip("/") + "/predict"
    lock = threading.Lock()
    latencies_ms: list[float] = []
    server_ms: list[float] = []
    errors: list[str] = []

    def send(body: bytes, due: float) -> None:
        req = urllib.request.Request(endpoint, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                reply = json.loads(resp.read())
            took = (time.perf_counter() - due) * 1e3
            with lock:
                latencies_ms.append(took)
                server_ms.append(reply["server_ms"])
        except urllib.error.HTTPError as err:  # the server's own message says what was wrong
            try:
                message = json.loads(err.read()).get("error", "")
            except Exception:  # a reply that is not the server's JSON: its status alone
                message = ""
            with lock:
                errors.append(f"HTTP {err.code}: {message or err.reason}")
        except Exception as err:  # every failure is counted and reported, none is lost in the pool
            with lock:
                errors.append(f"{type(err).__name__}: {err}")

    start = time.perf_counter()
    due = start
    sent = 0
    with ThreadPoolExecutor(max_workers=ns.concurrency) as pool:
        for body in payloads:
            due += rng.expovariate(ns.rate)
            now = time.perf_counter()
            if due - start > ns.max_seconds:
                break
            if due > now:
                time.sleep(due - now)
            pool.submit(send, body, due)
            sent += 1
    duration = time.perf_counter() - start
    result = dict(
        url=ns.url,
        offered_rate=ns.rate,
        sent=sent,
        answered=len(latencies_ms),
        errors=errors[:20],
        error_count=len(errors),
        duration_s=duration,
        latencies_ms=latencies_ms,
        server_ms=server_ms,
    )
    partial = ns.out + ".partial"
    with open(partial, "w") as f:
        json.dump(result, f)
    os.replace(partial, ns.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
