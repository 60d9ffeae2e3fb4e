"""Data parallelism on a real distributed engine: a launcher, all-reduce, DDP, and a scaling model.

Taught in notebook `multiple_gpus`.

**Launching.** :func:`launch` starts ``world_size`` worker processes the way ``torchrun`` does: the
launcher hosts the rendezvous store itself and exports ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR``, ``MASTER_PORT`` and ``TORCHELASTIC_USE_AGENT_STORE=True``, so each worker calls
plain ``torch.distributed.init_process_group(backend)`` (the ``env://`` rendezvous), exactly as it
would under ``torchrun --standalone --nproc_per_node=N``. The same worker module runs under torchrun
unchanged (``python -m labkit.parallel.distributed --help``). Why not call torchrun from the notebook? It cannot
be told to give up on a hung worker after a deadline, and the port it picks is chosen before it is
bound. Here the store is opened on port 0 and *held* by the launcher for the whole run, so the port
the workers are told is the one the operating system handed out, and no other program can take it
in between (a collision avoided, not hoped away); closing the store releases it.

**Failing cleanly.** If a worker raises or is killed, every other worker is terminated, then killed,
and :class:`DistributedRunError` says which rank failed first, how, and the last line it wrote. A hang
(one rank never reaches a collective the others wait in) is caught by the collective's own timeout,
``collective_timeout_s`` (20 s by default): the waiting rank raises, and the run ends as above. A run
that outlives ``timeout_s`` altogether is stopped too. Workers also
ask the kernel to kill them if the launcher itself dies (Linux), so no orphan is left behind.

**The backend** is ``gloo`` on CPU processes and ``nccl`` on GPUs (one GPU per rank); the worker code
is the same.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import inspect
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ..core import environment
from ..core.allocator import keep_freed_memory
from ..core.errors import DistributedRunError
from ..core.procs import (
    HOST,
    child_env,
    die_with_parent,
    owned_tempdir,
    stop,
)
from .ddp_workers import WorkerContext

BACKENDS = ("auto", "gloo", "nccl")
DEFAULT_TIMEOUT_S = 600.0  # the whole run
DEFAULT_COLLECTIVE_TIMEOUT_S = 20.0  # one collective (and the start-up rendezvous)
_GRACE_S = 2.0  # between SIGTERM and SIGKILL when stopping workers


_LAUNCHED: list[subprocess.Popen] = []  # every worker this process started, for running_workers()


def running_workers() -> list[int]:
    """PIDs of workers started by :func:`launch` in this process that are still running (should be none).

    Taught in notebook `multiple_gpus`.
    """
    return [p.pid for p in _LAUNCHED if p.poll() is None]


def resolve_backend(backend: str, world_size: int) -> str:
    """``auto`` → ``nccl`` when there is one CUDA GPU per rank, else ``gloo``; anything else is checked.

    Taught in notebook `multiple_gpus`.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if backend == "auto":
        return "nccl" if gpus >= world_size and dist.is_nccl_available() else "gloo"
    if backend == "nccl" and gpus < world_size:
        raise ValueError(
            f"backend 'nccl' needs one CUDA GPU per rank: {world_size} ranks asked, {gpus} GPU(s) here; "
            "use backend='gloo' (CPU processes) or fewer ranks"
        )
    return backend


def _loopback_interface() -> str:
    return "lo0" if sys.platform == "darwin" else "lo"


def loopback_store(timeout_s: float) -> dist.TCPStore:
    """The rendezvous store, listening on 127.0.0.1 only: nothing on the network can reach it.

    ``TCPStore(host, ...)`` as the server listens on every interface whatever ``host`` says (the ``host`` is
    where clients connect), and the store has no authentication: in a classroom network any machine could read
    and write a running job's keys. A socket bound to 127.0.0.1 and handed over as the store's listening socket
    (``master_listen_fd``, as torchelastic's agent does) keeps it on this machine; the store owns it from then on.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((HOST, 0))
        sock.listen(128)
        port = sock.getsockname()[1]
    except BaseException:
        sock.close()
        raise
    return dist.TCPStore(
        HOST, port, None, True, timeout=datetime.timedelta(seconds=timeout_s), wait_for_workers=False,
        master_listen_fd=sock.detach(),
    )  # fmt: skip


def _function_path(fn: Callable) -> str:
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in name:
        raise ValueError(
            f"{fn!r} cannot be run in a worker process: workers import their function by name, so it must be "
            "defined at the top level of an importable module (labkit.parallel.distributed has the notebook's workers), "
            "not in a notebook cell or inside another function"
        )
    return f"{module}:{name}"


def _load_function(path: str) -> Callable:
    module, _, name = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _tail(path: Path, lines: int = 6) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _failure_message(failed: dict[int, int], running: list[int], out: Path, world_size: int, elapsed: float) -> str:
    """Name the rank that failed first: when one rank dies, its peers soon fail too ("connection reset")."""

    def when(rank: int) -> float:
        if failed[rank] < 0:  # killed by a signal: a cause, never a peer's consequence
            return float("-inf")
        try:
            return float(_tail(out / f"rank{rank}.err", 99).splitlines()[0])
        except (IndexError, ValueError):
            return float("inf")

    first = min(failed, key=when)
    detail = _tail(out / f"rank{first}.err", 1) if failed[first] >= 0 else ""
    text = f"rank {first} of {world_size} {_describe_exit(failed[first])} after {elapsed:.1f} s"
    text += f": {detail}" if detail and not detail[0].isdigit() else ""
    others = sorted(set(failed) - {first})
    if others:
        text += f"; rank(s) {others} failed after it (they lost their peer)"
    if running and "timed out" in detail.lower():
        text += f"; rank(s) {running} never joined that collective (hung, or far slower than the others)"
    return text + "; every other worker was stopped"


def launch(
    fn: Callable,
    world_size: int = 2,
    *,
    backend: str = "auto",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    collective_timeout_s: float = DEFAULT_COLLECTIVE_TIMEOUT_S,
    threads_per_worker: int | None = None,
    **kwargs,
) -> list:
    """Run ``fn(ctx, **kwargs)`` in ``world_size`` processes and return each rank's result, in rank order.

    Taught in notebook `multiple_gpus`. Worker arguments are given by name, e.g.
    ``launch(ddp_benchmark, 2, d_in=256, hidden=512, ...)``, and checked against ``fn``'s signature before
    any process starts. ``fn`` must live in an importable module (workers import it by name); its arguments
    and result must pickle. CPU workers get ``threads_per_worker`` threads each (default: the usable cores shared
    out), so two processes on a 2-core machine split its cores rather than fight over them.
    Raises :class:`DistributedRunError` if a worker fails (within a second or two), hangs (within
    about ``collective_timeout_s``: a collective nobody else joins times out) or the whole run passes
    ``timeout_s``; by then every worker has been stopped.
    """
    from ..core.device import usable_cores

    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise ValueError(f"world_size must be a positive integer, got {world_size!r}")
    for name, value in dict(timeout_s=timeout_s, collective_timeout_s=collective_timeout_s).items():
        if not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    backend = resolve_backend(backend, world_size)
    target = _function_path(fn)
    try:
        inspect.signature(fn).bind(None, **kwargs)  # None stands for the WorkerContext each rank gets
    except TypeError as exc:
        raise TypeError(
            f"{target} cannot take the worker arguments {sorted(kwargs)}: {exc}. Pass them by name; "
            f"launch's own options are backend, timeout_s, collective_timeout_s and threads_per_worker"
        ) from None
    threads = threads_per_worker or max(1, usable_cores() // world_size)

    store = loopback_store(timeout_s)
    procs: list[subprocess.Popen] = []
    logs = []
    with owned_tempdir("ddp") as tmp:
        out = Path(tmp)
        (out / "args.pkl").write_bytes(pickle.dumps(kwargs))
        env = child_env(
            MASTER_ADDR=HOST,
            MASTER_PORT=str(store.port),
            WORLD_SIZE=str(world_size),
            LOCAL_WORLD_SIZE=str(world_size),
            TORCHELASTIC_USE_AGENT_STORE="True",
            LABKIT_DIST_BACKEND=backend,
            LABKIT_DIST_TIMEOUT_S=str(min(collective_timeout_s, timeout_s)),
            OMP_NUM_THREADS=str(threads),
        )
        # every rank is on this machine: gloo's and NCCL's own sockets stay on the loopback interface too
        env.setdefault("GLOO_SOCKET_IFNAME", _loopback_interface())
        env.setdefault("NCCL_SOCKET_IFNAME", _loopback_interface())
        started = time.monotonic()
        try:
            for rank in range(world_size):
                log = open(out / f"rank{rank}.log", "wb")  # closed in finally
                logs.append(log)
                procs.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "labkit.parallel.distributed",
                            target,
                            "--out",
                            tmp,
                            "--threads",
                            str(threads),
                        ],
                        env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                    )
                )
                _LAUNCHED.append(procs[-1])
            pending = set(range(world_size))
            while pending:
                failed = {r: code for r in pending if (code := procs[r].poll()) is not None and code != 0}
                if failed:
                    running = sorted(r for r in range(world_size) if procs[r].poll() is None)
                    raise DistributedRunError(
                        _failure_message(failed, running, out, world_size, time.monotonic() - started),
                        port=store.port,
                    )
                pending = {r for r in pending if procs[r].poll() is None}
                if pending and time.monotonic() - started > timeout_s:
                    raise DistributedRunError(
                        f"ranks {sorted(pending)} of {world_size} were still running after timeout_s={timeout_s:g} s "
                        "(a hang: usually one rank waiting in a collective another never reached, or a worker "
                        "far slower than expected); every worker was stopped. Raise timeout_s if the work is "
                        "simply long.",
                        port=store.port,
                    )
                time.sleep(0.05)
            missing = [rank for rank in range(world_size) if not (out / f"rank{rank}.result").exists()]
            if missing:
                raise DistributedRunError(
                    f"ranks {missing} of {world_size} exited with code 0 but returned no result (a worker function "
                    "that calls sys.exit or os._exit instead of returning?); their logs:\n"
                    + "\n".join(f"rank {r}: {_tail(out / f'rank{r}.log') or '(nothing)'}" for r in missing),
                    port=store.port,
                )
            return [pickle.loads((out / f"rank{rank}.result").read_bytes()) for rank in range(world_size)]
        finally:
            try:  # terminate, then kill, and reap: no zombies, no orphans, even through a second Ctrl-C
                stop(procs, grace_s=_GRACE_S)
            finally:
                for log in logs:
                    log.close()
                _LAUNCHED[:] = [p for p in _LAUNCHED if p.poll() is None]
                del store  # closes the listening socket: the port is free again


# ---------------------------------------------------------------------------------------------
# The worker side: what runs in each process (also under torchrun).


def _worker_main(target: str, out_dir: str | None, threads: int) -> None:
    die_with_parent()  # $LABKIT_PARENT, set by launch (under torchrun: the agent, its parent)
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    backend = environment.get("LABKIT_DIST_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    timeout = datetime.timedelta(seconds=environment.get("LABKIT_DIST_TIMEOUT_S"))
    out = Path(out_dir) if out_dir else None
    try:
        torch.set_num_threads(threads)
        keep_freed_memory()  # the same allocator setting as the notebook that launched it (labkit.start)
        if backend == "nccl":
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
            torch.cuda.set_device(device)
            dist.init_process_group("nccl", timeout=timeout, device_id=device)
        else:
            device = torch.device("cpu")
            dist.init_process_group("gloo", timeout=timeout)
        kwargs = pickle.loads((out / "args.pkl").read_bytes()) if out else {}
        result = _load_function(target)(WorkerContext(rank, world_size, backend, device, threads), **kwargs)
        if out:
            partial = out / f"rank{rank}.result.partial"
            partial.write_bytes(pickle.dumps(result))
            partial.replace(out / f"rank{rank}.result")
        else:
            print(f"rank {rank}: {result}")
        dist.destroy_process_group()
    except BaseException as exc:  # the launcher reads the last line; the full traceback is in the log
        traceback.print_exc()
        sys.stderr.flush()
        if out:
            (out / f"rank{rank}.err").write_text(f"{time.time()}\n{type(exc).__name__}: {exc}\n")
        os._exit(1)  # skip clean-up that could block on peers that are still waiting for us


def main(argv: list[str] | None = None) -> None:
    """``python -m labkit.parallel.distributed module:function``: one rank of a launch (or of torchrun)."""
    parser = argparse.ArgumentParser(
        prog="python -m labkit.parallel.distributed",
        description="Run a labkit worker function in this process as one rank. Used by labkit.parallel.distributed.launch; "
        "also runs under torchrun, e.g. torchrun --standalone --nproc_per_node=2 -m labkit.parallel.distributed "
        "labkit.parallel.ddp_workers:allreduce_check",
    )
    parser.add_argument("target", help="module:function, e.g. labkit.parallel.ddp_workers:allreduce_check")
    parser.add_argument("--out", default=None, help="the launcher's exchange directory (arguments in, results out)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads for this rank")
    ns = parser.parse_args(argv)
    threads = ns.threads or int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or torch.get_num_threads()
    _worker_main(ns.target, ns.out, threads)


if __name__ == "__main__":
    main()
