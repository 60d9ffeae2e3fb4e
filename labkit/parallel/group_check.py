"""The doctor's process-group check, run as a process of its own: can two ranks form a gloo group on 127.0.0.1?

``python -m labkit.parallel.group_check`` starts two ranks with :func:`labkit.parallel.distributed.launch`, the
launcher notebooks `multiple_gpus`, `sharding`, `checkpoints` and `mixture_of_experts` use, on gloo over 127.0.0.1,
all-reduces a tensor, and prints one JSON line: ``ok``, ``seconds``, and on failure ``kind`` (``bind``: no port
could be opened on 127.0.0.1; ``group``: the workers failed or timed out; ``sum``: the all-reduce gave a wrong
answer) and ``error``. ``python -m labkit doctor`` runs it in a process of its own because the doctor lives on the
``lab`` floor, which does not import this one; the launcher stops its workers and frees its port on every path.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from ..core.errors import DistributedRunError
from ..core.procs import die_with_parent
from . import distributed
from .ddp_workers import allreduce_check

DEFAULT_TIMEOUT_S = 60.0  # the whole two-rank run, worker start-up included
COLLECTIVE_TIMEOUT_S = 20.0  # the rendezvous and the all-reduce, each


def loopback_group(timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    """Two gloo ranks on 127.0.0.1 all-reduce ``rank + 1``; the result as the JSON line :func:`main` prints."""
    started = time.monotonic()
    try:
        ranks = distributed.launch(
            allreduce_check, 2, backend="gloo", timeout_s=timeout_s, threads_per_worker=1,
            collective_timeout_s=min(COLLECTIVE_TIMEOUT_S, timeout_s), numel=1024,
        )  # fmt: skip
    except DistributedRunError as exc:
        return dict(ok=False, kind="group", error=str(exc), seconds=time.monotonic() - started)
    except OSError as exc:  # the rendezvous store's socket could not be opened
        return dict(ok=False, kind="bind", error=f"{type(exc).__name__}: {exc}", seconds=time.monotonic() - started)
    correct = all(rank["correct"] for rank in ranks)
    return dict(
        ok=correct, kind=None if correct else "sum", error=None if correct else "the all-reduce gave a wrong sum",
        seconds=time.monotonic() - started,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Run :func:`loopback_group` and print its result as one JSON line; exit 0 when the group formed."""
    parser = argparse.ArgumentParser(prog="python -m labkit.parallel.group_check", description=__doc__.split("\n")[0])
    parser.add_argument("--timeout-s", type=float, default=DEFAULT_TIMEOUT_S, help="the whole run's deadline")
    args = parser.parse_args(argv)
    if not args.timeout_s > 0:
        parser.error(f"--timeout-s must be a positive number of seconds, got {args.timeout_s}")
    die_with_parent()  # the doctor that started it (Linux; elsewhere the doctor stops it at its deadline)
    result = loopback_group(args.timeout_s)
    print(json.dumps(result), flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
