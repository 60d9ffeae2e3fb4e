"""The functions DDP workers run for notebook `multiple_gpus` and the tests: timed all-reduces, a DDP training step against one
process, a worker that fails on purpose. Each takes a :class:`WorkerContext` (which rank, how many, where) and runs
under :func:`labkit.parallel.distributed.launch` or ``torchrun``; :mod:`labkit.parallel.distributed` re-exports them.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F


@dataclass(frozen=True)
class WorkerContext:
    """What a worker function is given: who it is and where it runs."""

    rank: int
    world_size: int
    backend: str
    device: torch.device
    threads: int


K = TypeVar("K")  # what names a timed function: a label, or a message size in bytes


def _rounds(
    fns: Mapping[K, Callable[[], object]],
    ctx: WorkerContext,
    steps: Mapping[K, int] | None = None,
    rounds: int = 5,
    warmup: int = 2,
    block_s: float = 0.02,
) -> dict[K, list[float]]:
    """Time every function in interleaved rounds (rotating order): ``{name: [seconds per call, one per round]}``.

    Each block is ``steps[name]`` calls between barriers or, without ``steps``, as many calls as make about
    ``block_s`` seconds (sized from one warm call as :func:`labkit.claims.block_timer` sizes its blocks: a
    collective of a millisecond timed a call or two at a time is mostly noise). Every time is the slowest rank's,
    so all ranks agree on the samples and on the block sizes (a collective called more often on one rank than on
    another would hang), and the parent can decide claims on the rounds with :func:`labkit.claims.decide`.
    """
    from ..claims import calls_per_block, rotated

    names = list(fns)
    for name in names:
        for _ in range(warmup):
            fns[name]()
    if steps is None:
        steps = {name: calls_per_block(_slowest_per_call(fns[name], 1, ctx), block_s) for name in names}
    samples: dict[K, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in rotated(names, r):
            samples[name].append(_slowest_per_call(fns[name], steps[name], ctx))
    return samples


def _slowest_per_call(fn: Callable, calls: int, ctx: WorkerContext) -> float:
    """Seconds per call of ``calls`` calls of ``fn`` started together on every rank, on the slowest rank."""
    _sync(ctx)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    _sync(ctx)
    slowest = torch.tensor([(time.perf_counter() - start) / calls], dtype=torch.float64).to(ctx.device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return float(slowest.item())


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

    Taught in notebook `multiple_gpus`.

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
    num_classes: int,
    global_batch: int,
    bucket_caps_mb: dict[str, float],
    steps: int = 5,
    rounds: int = 5,
) -> dict:
    """One data-parallel training step, timed three ways, and checked against a single-process step.

    Taught in notebook `multiple_gpus`.

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

    from ..workloads.models import MLP

    if global_batch % ctx.world_size:
        raise ValueError(f"global_batch {global_batch} must divide by world_size {ctx.world_size}")
    local = global_batch // ctx.world_size
    gen = torch.Generator().manual_seed(1234)
    x_all = torch.randn(global_batch, d_in, generator=gen).to(ctx.device)
    y_all = torch.randint(0, num_classes, (global_batch,), generator=gen).to(ctx.device)
    x, y = x_all[ctx.rank * local : (ctx.rank + 1) * local], y_all[ctx.rank * local : (ctx.rank + 1) * local]

    def fresh_model() -> torch.nn.Module:
        torch.manual_seed(0)
        return MLP(d_in, hidden, depth, num_classes).to(ctx.device)

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

    fns: dict[str, Callable[[], object]] = {"compute": make_step(plain)}
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
    """All-reduce in a loop; ``fail_rank`` fails at ``at_step`` by raising, being killed, hanging or exiting.

    Taught in notebook `multiple_gpus`.

    Notebook `multiple_gpus` and the tests use it to show that one bad worker ends the whole run cleanly.
    ``mode="exit"`` ends the process with code 0 without returning (a worker that calls ``os._exit``);
    ``mode="none"`` runs to the end and returns the number of steps.
    """
    modes = ("raise", "kill", "hang", "exit", "none")
    if mode not in modes:
        raise ValueError(f"unknown mode {mode!r}; allowed: {', '.join(modes)}")
    t = torch.ones(1024, device=ctx.device)
    for step in range(steps):
        if ctx.rank == fail_rank and step == at_step:
            if mode == "raise":
                raise RuntimeError(f"rank {ctx.rank} failed on purpose at step {step}")
            if mode == "kill":
                if hasattr(signal, "SIGKILL"):  # elsewhere (Windows) os.kill ends a process at once whatever the signal
                    os.kill(os.getpid(), signal.SIGKILL)
                else:
                    os.kill(os.getpid(), signal.SIGTERM)
            if mode == "hang":
                time.sleep(3600)
            if mode == "exit":
                os._exit(0)
        dist.all_reduce(t)
        time.sleep(0.02)
    return steps
