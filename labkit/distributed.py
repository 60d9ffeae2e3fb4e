"""Data parallelism on a real distributed engine: a launcher, all-reduce, DDP, and a scaling model.

Taught in notebook 06.

**Launching.** :func:`launch` starts ``world_size`` worker processes the way ``torchrun`` does: the
launcher hosts the rendezvous store itself and exports ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR``, ``MASTER_PORT`` and ``TORCHELASTIC_USE_AGENT_STORE=True``, so each worker calls
plain ``torch.distributed.init_process_group(backend)`` (the ``env://`` rendezvous), exactly as it
would under ``torchrun --standalone --nproc_per_node=N``. The same worker module runs under torchrun
unchanged (``python -m labkit.distributed --help``). Why not call torchrun from the notebook? It cannot
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
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from . import environment
from .allocator import keep_freed_memory
from .procs import (
    HOST,
    child_env,
    die_with_parent,
    port_in_use,  # noqa: F401 (notebooks 06 and 07 check ports with distributed.port_in_use)
    stop,
)

BACKENDS = ("auto", "gloo", "nccl")
DEFAULT_TIMEOUT_S = 600.0  # the whole run
DEFAULT_COLLECTIVE_TIMEOUT_S = 20.0  # one collective (and the start-up rendezvous)
_GRACE_S = 2.0  # between SIGTERM and SIGKILL when stopping workers


class DistributedRunError(RuntimeError):
    """A worker failed, was killed, or the run passed its deadline. Every worker has been stopped.

    ``port`` is the rendezvous port the run used (released by the time this is raised).
    """

    def __init__(self, message: str, port: int | None = None):
        super().__init__(message)
        self.port = port


_LAUNCHED: list[subprocess.Popen] = []  # every worker this process started, for running_workers()


def running_workers() -> list[int]:
    """PIDs of workers started by :func:`launch` in this process that are still running (should be none)."""
    return [p.pid for p in _LAUNCHED if p.poll() is None]


@dataclass(frozen=True)
class WorkerContext:
    """What a worker function is given: who it is and where it runs."""

    rank: int
    world_size: int
    backend: str
    device: torch.device
    threads: int


def resolve_backend(backend: str, world_size: int) -> str:
    """``auto`` → ``nccl`` when there is one CUDA GPU per rank, else ``gloo``; anything else is checked."""
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


def _function_path(fn: Callable) -> str:
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in name:
        raise ValueError(
            f"{fn!r} cannot be run in a worker process: workers import their function by name, so it must be "
            "defined at the top level of an importable module (labkit.distributed has the notebook's workers), "
            "not in a notebook cell or inside another function"
        )
    return f"{module}:{name}"


def _load_function(path: str) -> Callable:
    module, _, name = path.partition(":")
    obj = importlib.import_module(module)
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
    *args,
    backend: str = "auto",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    collective_timeout_s: float = DEFAULT_COLLECTIVE_TIMEOUT_S,
    threads_per_worker: int | None = None,
) -> list:
    """Run ``fn(ctx, *args)`` in ``world_size`` processes and return each rank's result, in rank order.

    ``fn`` must live in an importable module (workers import it by name); its arguments and result
    must pickle. CPU workers get ``threads_per_worker`` threads each (default: the usable cores shared
    out), so two processes on a 2-core machine split its cores rather than fight over them.
    Raises :class:`DistributedRunError` if a worker fails (within a second or two), hangs (within
    about ``collective_timeout_s``: a collective nobody else joins times out) or the whole run passes
    ``timeout_s``; by then every worker has been stopped.
    """
    from .device import usable_cores

    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise ValueError(f"world_size must be a positive integer, got {world_size!r}")
    for name, value in dict(timeout_s=timeout_s, collective_timeout_s=collective_timeout_s).items():
        if not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    backend = resolve_backend(backend, world_size)
    target = _function_path(fn)
    threads = threads_per_worker or max(1, usable_cores() // world_size)

    store = dist.TCPStore(HOST, 0, None, True, timeout=datetime.timedelta(seconds=timeout_s), wait_for_workers=False)
    procs: list[subprocess.Popen] = []
    logs = []
    with tempfile.TemporaryDirectory(prefix="labkit-ddp-") as tmp:
        out = Path(tmp)
        (out / "args.pkl").write_bytes(pickle.dumps(args))
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
        env.setdefault("GLOO_SOCKET_IFNAME", _loopback_interface())
        started = time.monotonic()
        try:
            for rank in range(world_size):
                log = open(out / f"rank{rank}.log", "wb")  # noqa: SIM115 (closed in finally)
                logs.append(log)
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "labkit.distributed", target, "--out", tmp, "--threads", str(threads)],
                        env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                    )
                )
                _LAUNCHED.append(procs[-1])
            pending = set(range(world_size))
            while pending:
                failed = {r: procs[r].poll() for r in pending if procs[r].poll() not in (None, 0)}
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
            return [pickle.loads((out / f"rank{rank}.result").read_bytes()) for rank in range(world_size)]
        finally:
            stop(procs, grace_s=_GRACE_S)  # terminate, then kill, and reap: no zombies, no orphans
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
        args = pickle.loads((out / "args.pkl").read_bytes()) if out else ()
        result = _load_function(target)(WorkerContext(rank, world_size, backend, device, threads), *args)
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
    parser = argparse.ArgumentParser(
        prog="python -m labkit.distributed",
        description="Run a labkit worker function in this process as one rank. Used by labkit.distributed.launch; "
        "also runs under torchrun, e.g. torchrun --standalone --nproc_per_node=2 -m labkit.distributed "
        "labkit.distributed:allreduce_check",
    )
    parser.add_argument("target", help="module:function, e.g. labkit.distributed:allreduce_check")
    parser.add_argument("--out", default=None, help="the launcher's exchange directory (arguments in, results out)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads for this rank")
    ns = parser.parse_args(argv)
    threads = ns.threads or int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or torch.get_num_threads()
    _worker_main(ns.target, ns.out, threads)


# ---------------------------------------------------------------------------------------------
# Workers used by notebook 06 and the tests. Every rank must call the same collectives the same
# number of times, so timing here uses fixed step counts, not labkit.measure's adaptive repeats.


def _rounds(
    fns: dict[str, Callable], ctx: WorkerContext, steps: dict[str, int], rounds: int = 5, warmup: int = 2
) -> dict[str, list[float]]:
    """Time every function in interleaved rounds (rotating order): ``{name: [seconds per call, one per round]}``.

    Each block is ``steps[name]`` calls between barriers, and each value is the slowest rank's (all ranks agree),
    so the parent can decide claims on the rounds with :func:`labkit.claims.from_rounds`.
    """
    from .claims import rotated

    names = list(fns)
    for name in names:
        for _ in range(warmup):
            fns[name]()
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in rotated(names, r):
            _sync(ctx)
            dist.barrier()
            start = time.perf_counter()
            for _ in range(steps[name]):
                fns[name]()
            _sync(ctx)
            per_call = torch.tensor([(time.perf_counter() - start) / steps[name]], dtype=torch.float64)
            slowest = per_call.to(ctx.device)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            samples[name].append(float(slowest.item()))
    return samples


def _sync(ctx: WorkerContext) -> None:
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)


def allreduce_check(ctx: WorkerContext, numel: int = 1 << 20) -> dict:
    """Each rank contributes ``rank + 1``; after a sum every element must be n(n+1)/2, exactly."""
    t = torch.full((numel,), float(ctx.rank + 1), device=ctx.device)
    dist.all_reduce(t)
    expected = ctx.world_size * (ctx.world_size + 1) / 2
    return dict(rank=ctx.rank, expected=expected, correct=bool((t == expected).all()), backend=ctx.backend)


def allreduce_benchmark(
    ctx: WorkerContext, sizes_bytes: list[int], min_bytes_per_block: int = 64 << 20, rounds: int = 5
) -> list[dict]:
    """Time a float32 sum all-reduce per message size; report time, algbw and busbw as nccl-tests does.

    algbw = bytes / time; busbw = algbw · 2(n−1)/n, the traffic each rank's link carries in a ring,
    so busbw is comparable with the link's bandwidth whatever the number of ranks.
    Each size is first checked: every rank contributes ``rank + 1`` and every element must sum exactly; then
    the sizes are timed in ``rounds`` interleaved rounds (``samples``: seconds per call, one per round).
    """
    n = ctx.world_size
    correct, buffers, steps = {}, {}, {}
    for size in sizes_bytes:
        numel = max(1, size // 4)
        check = torch.full((numel,), float(ctx.rank + 1), device=ctx.device)
        dist.all_reduce(check)
        correct[numel * 4] = bool((check == n * (n + 1) / 2).all())
        del check
        buffers[numel * 4] = torch.zeros(numel, device=ctx.device)
        steps[numel * 4] = max(2, min(50, min_bytes_per_block // (numel * 4)))
    fns = {size: (lambda b=buf: dist.all_reduce(b)) for size, buf in buffers.items()}
    samples = _rounds(fns, ctx, steps, rounds=rounds)  # the sizes round-robin: a busy spell hits them all alike
    rows = []
    for size, times in samples.items():
        seconds = float(np.quantile(times, 0.25))  # the least disturbed rounds (labkit.claims' statistic)
        algbw = size / seconds
        rows.append(
            dict(
                bytes=size,
                seconds=seconds,
                samples=times,
                algbw=algbw,
                busbw=algbw * 2 * (n - 1) / n,  # 0 on one rank, as in nccl-tests: nothing crosses a link
                correct=correct[size],
                world_size=n,
                backend=ctx.backend,
            )
        )
    return rows


def ddp_benchmark(
    ctx: WorkerContext,
    d_in: int,
    hidden: int,
    depth: int,
    classes: int,
    global_batch: int,
    bucket_caps_mb: dict[str, float],
    steps: int = 5,
    rounds: int = 5,
) -> dict:
    """One data-parallel training step, timed three ways, and checked against a single-process step.

    - ``compute``: the local model alone on this rank's share of the batch, no communication;
    - one DDP variant per entry of ``bucket_caps_mb``: small buckets let the gradient all-reduce
      start while backward is still running (overlap); one bucket as big as all gradients cannot
      start until backward has finished (no overlap);
    - ``allreduce``: all-reduce of one buffer the size of all gradients, alone.
    The check: after one DDP step on shards of a batch, every rank's gradients equal those of one
    model on the whole batch (DDP averages them), to float32 rounding. All variants are timed in ``rounds``
    interleaved rounds of ``steps`` steps: ``samples`` holds seconds per step, one per round; ``seconds`` the
    25th percentile of each (the least disturbed rounds, as in :mod:`labkit.claims`).
    """
    from torch.nn.parallel import DistributedDataParallel as DDP

    from .models import MLP

    if global_batch % ctx.world_size:
        raise ValueError(f"global_batch {global_batch} must divide by world_size {ctx.world_size}")
    local = global_batch // ctx.world_size
    gen = torch.Generator().manual_seed(1234)
    x_all = torch.randn(global_batch, d_in, generator=gen).to(ctx.device)
    y_all = torch.randint(0, classes, (global_batch,), generator=gen).to(ctx.device)
    x, y = x_all[ctx.rank * local : (ctx.rank + 1) * local], y_all[ctx.rank * local : (ctx.rank + 1) * local]

    def fresh_model() -> torch.nn.Module:
        torch.manual_seed(0)
        return MLP(d_in, hidden, depth, classes).to(ctx.device)

    def make_step(model: torch.nn.Module) -> Callable[[], None]:
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            opt.step()

        return step

    plain = fresh_model()
    grad_bytes = sum(p.numel() * p.element_size() for p in plain.parameters())

    # Correctness first: DDP's averaged gradients equal the whole batch's gradients on one model.
    reference = fresh_model()
    F.cross_entropy(reference(x_all), y_all).backward()
    ddp = DDP(fresh_model(), device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)
    F.cross_entropy(ddp(x), y).backward()
    max_grad_error = max(
        float((p.grad - q.grad).abs().max())
        for p, q in zip(ddp.module.parameters(), reference.parameters(), strict=True)
    )
    del ddp, reference

    fns = {"compute": make_step(plain)}
    for name, cap_mb in bucket_caps_mb.items():
        ddp = DDP(
            fresh_model(),
            device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None,
            bucket_cap_mb=cap_mb,
        )
        fns[name] = make_step(ddp)
    flat = torch.zeros(grad_bytes // 4, device=ctx.device)
    fns["allreduce"] = lambda: dist.all_reduce(flat)
    samples = _rounds(fns, ctx, dict.fromkeys(fns, steps), rounds=rounds)
    timings = {name: float(np.quantile(times, 0.25)) for name, times in samples.items()}
    return dict(
        rank=ctx.rank,
        world_size=ctx.world_size,
        backend=ctx.backend,
        threads=ctx.threads,
        local_batch=local,
        grad_bytes=grad_bytes,
        max_grad_error=max_grad_error,
        seconds=timings,
        samples=samples,
    )


def faulty_worker(ctx: WorkerContext, fail_rank: int = 1, mode: str = "raise", at_step: int = 3, steps: int = 40):
    """All-reduce in a loop; ``fail_rank`` fails at ``at_step`` by raising, being killed, or hanging.

    Notebook 06 and the tests use it to show that one bad worker ends the whole run cleanly.
    ``mode="none"`` runs to the end and returns the number of steps.
    """
    modes = ("raise", "kill", "hang", "none")
    if mode not in modes:
        raise ValueError(f"unknown mode {mode!r}; allowed: {', '.join(modes)}")
    t = torch.ones(1024, device=ctx.device)
    for step in range(steps):
        if ctx.rank == fail_rank and step == at_step:
            if mode == "raise":
                raise RuntimeError(f"rank {ctx.rank} failed on purpose at step {step}")
            if mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if mode == "hang":
                time.sleep(3600)
        dist.all_reduce(t)
        time.sleep(0.02)
    return steps


# ---------------------------------------------------------------------------------------------
# The scaling model: compute that divides across GPUs, plus a ring all-reduce that does not.


@dataclass(frozen=True)
class Link:
    """An interconnect in the latency–bandwidth model: a ring all-reduce of S bytes over n ranks takes
    2(n−1)·latency + 2(n−1)/n · S / bandwidth (each rank sends and receives 2(n−1)/n · S)."""

    name: str
    bandwidth: float  # bytes/s each rank can send (and receive) at once
    latency_s: float  # per ring step
    source: str = ""

    def allreduce_s(self, n_ranks: int, nbytes: float) -> float:
        if n_ranks < 1:
            raise ValueError(f"n_ranks must be at least 1, got {n_ranks}")
        if n_ranks == 1:
            return 0.0
        return 2 * (n_ranks - 1) * self.latency_s + 2 * (n_ranks - 1) / n_ranks * nbytes / self.bandwidth


# Vendors' per-direction figures; the latencies are typical orders of magnitude, not datasheet values.
LINKS = {
    "NVLink 4 (H100/H200 SXM)": Link("NVLink 4 (H100/H200 SXM)", 450e9, 5e-6, "NVIDIA: 900 GB/s total per GPU"),
    "PCIe 5.0 x16": Link("PCIe 5.0 x16", 64e9, 10e-6, "PCI-SIG: 64 GB/s per direction"),
    "InfiniBand NDR 400G": Link("InfiniBand NDR 400G", 50e9, 10e-6, "NVIDIA: 400 Gb/s per port"),
    "Ethernet 10G": Link("Ethernet 10G", 1.25e9, 50e-6, "10 Gb/s"),
}


def fit_link(sizes_bytes: list[float], seconds: list[float], n_ranks: int, name: str = "measured") -> Link:
    """Calibrate a :class:`Link` from an all-reduce sweep at ``n_ranks``: time = a + b · bytes."""
    from .scaling import fit_linear

    if n_ranks < 2:
        raise ValueError("a link can only be calibrated from an all-reduce over at least 2 ranks")
    line = fit_linear(sizes_bytes, seconds)
    if line.per_unit <= 0:
        raise ValueError("all-reduce time did not grow with message size; measure larger messages")
    steps = 2 * (n_ranks - 1)
    return Link(name, bandwidth=steps / n_ranks / line.per_unit, latency_s=max(line.fixed, 0.0) / steps, source="fit")


def predict_data_parallel(
    n_gpus: int,
    compute_s: float,
    grad_bytes: float,
    link: Link,
    overlap: float = 0.0,
    serial_s: float = 0.0,
    scaling: str = "strong",
) -> dict:
    """Predict one data-parallel training step on ``n_gpus`` (notebook 06).

    ``compute_s`` is the step's compute on one GPU for the whole batch (``strong`` scaling: the
    global batch is split, so each GPU does 1/n of it) or for one GPU's batch (``weak``: each GPU
    keeps its batch). ``serial_s`` is work every GPU repeats whatever n (the optimizer step, Python
    overhead). The all-reduce of ``grad_bytes`` can hide behind up to ``overlap`` × the backward pass
    (two thirds of the compute). Efficiency is the speed-up over one GPU divided by n.
    """
    if scaling not in ("strong", "weak"):
        raise ValueError(f"scaling must be 'strong' or 'weak', got {scaling!r}")
    if not 0.0 <= overlap <= 1.0:
        raise ValueError(f"overlap must be between 0 and 1, got {overlap}")
    if n_gpus < 1 or compute_s <= 0 or grad_bytes < 0:
        raise ValueError("n_gpus must be >= 1, compute_s > 0 and grad_bytes >= 0")
    per_gpu = compute_s / n_gpus if scaling == "strong" else compute_s
    comm = link.allreduce_s(n_gpus, grad_bytes)
    exposed = max(0.0, comm - overlap * (2 / 3) * per_gpu)
    step = per_gpu + serial_s + exposed
    one_gpu = compute_s + serial_s
    if scaling == "strong":
        speedup = one_gpu / step
    else:
        speedup = n_gpus * one_gpu / step
    return dict(
        n_gpus=n_gpus,
        compute_s=per_gpu,
        serial_s=serial_s,
        comm_s=comm,
        exposed_comm_s=exposed,
        step_s=step,
        comm_share=exposed / step,
        speedup=speedup,
        efficiency=speedup / n_gpus,
    )


if __name__ == "__main__":
    main()
