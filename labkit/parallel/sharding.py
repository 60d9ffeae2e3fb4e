"""Beyond data parallelism, measured on real torch.distributed (notebook `sharding`): ZeRO and FSDP shard the training
state, tensor parallelism splits each layer, pipeline parallelism splits the stack of layers.

The functions here are workers: each takes a :class:`~labkit.parallel.ddp_workers.WorkerContext` and runs on every rank
under :func:`labkit.parallel.distributed.launch` (gloo on CPU processes, NCCL on GPUs). They use PyTorch's own
implementations: ``torch.distributed.optim.ZeroRedundancyOptimizer`` (ZeRO-1's optimizer sharding under DDP), FSDP2's
``fully_shard`` (without and with resharding after the forward pass; the second is ZeRO-3), ``torch.distributed.tensor.parallel`` (Megatron-style tensor parallelism) and
``torch.distributed.pipelining`` (GPipe and 1F1B schedules). Collectives are counted with DTensor's
``CommDebugMode`` (and their buffers' bytes, :func:`_comm_mode`), memory by category with :func:`labkit.peak_memory`, and times are interleaved rounds that the
notebook decides claims on (:func:`labkit.claims.decide`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from .ddp_workers import WorkerContext, _rounds, _sync

# "FSDP no-reshard" is FSDP2 with reshard_after_forward=False: ZeRO-2's traffic (one all-gather, one reduce-scatter),
# but weights sharded between steps like ZeRO-3, whole only from each layer's forward to its backward. It is not the
# ZeRO paper's stage 2, which keeps the weights whole on every rank (labkit.instruments.memory.sharded_state_bytes, zero=2).
LAYOUTS = ("DDP", "ZeRO-1", "FSDP no-reshard", "ZeRO-3")


def _grad(t: torch.Tensor) -> torch.Tensor:
    """``t.grad``, which backward has filled in."""
    if t.grad is None:
        raise RuntimeError("backward left no gradient on the input")
    return t.grad


def sharding_mlp(width: int, depth: int, classes: int) -> nn.Sequential:
    """``depth`` equal Linear(width, width) + ReLU layers and a classifier, seeded: the same model on every rank
    and in every layout. Taught in notebook `sharding`. Equal layers let ZeRO-1, which hands out whole tensors, balance."""
    torch.manual_seed(0)
    layers = [m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())]
    return nn.Sequential(*layers, nn.Linear(width, classes))


_SHORT = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "broadcast": "broadcast",
}


def _short(op) -> str:
    """A collective's short name (``all_reduce``, ``all_gather``, ``reduce_scatter``, ``broadcast``)."""
    text = str(op).lower().replace("_base", "").replace("_", "")  # c10d._allgather_base_, c10d_functional.all_reduce
    return next((short for long, short in _SHORT.items() if long in text), str(op))


def _counts(mode) -> dict[str, int]:
    """Collectives counted by CommDebugMode, by short name."""
    out: dict[str, int] = {}
    for op, n in mode.get_comm_counts().items():
        out[_short(op)] = out.get(_short(op), 0) + int(n)
    return out


def _comm_mode():
    """DTensor's ``CommDebugMode``, which counts collectives, also adding up each collective's buffer in bytes
    (``.buffer_bytes`` by short name): the largest tensor it is given, which is the whole buffer for an all-reduce
    and a broadcast, the gathered output of an all-gather and the input of a reduce-scatter. Taught in notebook `sharding`,
    which turns buffers into bytes sent per rank with the ring model. Hand-rolled on top of ``CommDebugMode``
    because it counts calls, not bytes."""
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.utils._pytree import tree_leaves

    class CommBytes(CommDebugMode):
        def __init__(self):
            super().__init__()
            self.buffer_bytes: dict[str, int] = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            before = sum(self.comm_counts.values())
            out = super().__torch_dispatch__(func, types, args, kwargs)
            if out is not NotImplemented and sum(self.comm_counts.values()) > before:
                sizes = [
                    t.numel() * t.element_size() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)
                ]
                self.buffer_bytes[_short(func)] = self.buffer_bytes.get(_short(func), 0) + max(sizes, default=0)
            return out

    return CommBytes()


# Bytes each rank sends (and receives) per byte of a collective's buffer on N ranks, in the ring algorithms: an
# all-reduce is a reduce-scatter then an all-gather, each (N-1)/N; a broadcast's receivers each take the buffer
# once, (N-1)/N of it per rank on average (Thakur et al., 2005; NCCL's "bus bandwidth" factors).
RING_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
               "reduce_scatter": lambda n: (n - 1) / n, "broadcast": lambda n: (n - 1) / n}  # fmt: skip


def bytes_on_the_wire(buffer_bytes: dict[str, float], world: int) -> float:
    """Bytes per rank that collectives with these buffers move (:data:`RING_FACTOR`). Taught in notebook `sharding`."""
    unknown = set(buffer_bytes) - set(RING_FACTOR)
    if unknown or world < 2:
        raise ValueError(
            f"collectives must be among {sorted(RING_FACTOR)} on at least 2 ranks; got {sorted(unknown)}, {world}"
        )
    return sum(RING_FACTOR[op](world) * b for op, b in buffer_bytes.items())


def _layout(kind: str, model: nn.Module, ctx: WorkerContext, lr: float):
    """``model`` wrapped for ``kind`` and its Adam optimizer (and the optimizer that holds the state)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel

    if kind in ("DDP", "ZeRO-1"):
        # one gradient bucket, whatever the model's size, so one all-reduce per step (notebook `multiple_gpus` shows buckets)
        cap_mb = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20 + 1
        model = DistributedDataParallel(model.to(ctx.device), bucket_cap_mb=cap_mb)
        if kind == "DDP":
            opt = torch.optim.Adam(model.parameters(), lr=lr)
            return model, opt, opt
        zero = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=lr)
        return model, zero, zero.optim
    mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))
    model = model.to(ctx.device)
    for layer in model.children():  # one FSDP unit per linear layer, then the root (as FSDP2's examples do per block)
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh, reshard_after_forward=kind == "ZeRO-3")
    fully_shard(model, mesh=mesh, reshard_after_forward=kind == "ZeRO-3")  # "FSDP no-reshard" keeps them gathered
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    return model, opt, opt


def sharding_benchmark(
    ctx: WorkerContext,
    width: int,
    depth: int,
    classes: int,
    global_batch: int,
    steps: int = 3,
    rounds: int = 5,
    lr: float = 1e-3,
) -> dict:
    """Train the same model for ``steps`` steps in each layout (:data:`LAYOUTS`) on the same data, and report per
    rank: the losses, the state held between steps by category and the peak of a step (both from
    :func:`labkit.peak_memory`), the collectives of one step (counted, with their buffers' bytes:
    :func:`_comm_mode`), and each layout's step time in interleaved rounds, together with the three collectives on
    a buffer the size of the model. Taught in notebook `sharding`.

    ZeRO-1 is ``ZeroRedundancyOptimizer`` under DDP: the optimizer state sharded, the gradients all-reduced whole
    by DDP, then each owner broadcasts the parameters it updated. "FSDP no-reshard" and ZeRO-3 are FSDP2's
    ``fully_shard`` with ``reshard_after_forward`` off and on: both keep parameters, gradients and optimizer
    state sharded between steps; without resharding each layer's parameters are gathered once per step and kept
    through the backward pass, ZeRO-3 frees them after the forward and gathers them again for the backward.
    """
    from ..instruments.memory import peak_memory

    g = torch.Generator().manual_seed(1)
    x = torch.randn(global_batch, width, generator=g)
    y = torch.randint(0, classes, (global_batch,), generator=g)
    xs, ys = (t.chunk(ctx.world_size)[ctx.rank].to(ctx.device) for t in (x, y))
    out: dict = {"n_params": sum(p.numel() for p in sharding_mlp(width, depth, classes).parameters()), "layouts": {}}
    steps_fn = {}
    for kind in LAYOUTS:
        model, opt, holder = _layout(kind, sharding_mlp(width, depth, classes), ctx, lr)

        def step(model=model, opt=opt) -> torch.Tensor:
            loss = F.cross_entropy(model(xs), ys)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.detach()

        losses = []
        for _ in range(steps):
            loss = step()
            dist.all_reduce(loss)  # every rank's half of the batch: the mean loss of the whole batch
            losses.append(float(loss) / ctx.world_size)
        record = peak_memory(step, track=(model, holder), device=ctx.device, label=kind)
        with _comm_mode() as mode:
            step()
        out["layouts"][kind] = dict(
            collective_bytes=dict(mode.buffer_bytes),
            losses=losses,
            resident=dict(record.resident_by_category),
            peak=dict(record.by_category),
            peak_bytes=record.peak_bytes,
            collectives=_counts(mode),
        )
        steps_fn[kind] = step
    numel = out["n_params"] // ctx.world_size * ctx.world_size
    flat, full, shard = (torch.zeros(n, device=ctx.device) for n in (numel, numel, numel // ctx.world_size))
    collectives = {
        "all-reduce": lambda: dist.all_reduce(flat),
        "all-gather": lambda: dist.all_gather_into_tensor(full, shard),
        "reduce-scatter": lambda: dist.reduce_scatter_tensor(shard, full),
    }
    fns: dict[str, Callable[[], object]] = {**steps_fn, **collectives}
    out["samples"] = _rounds(fns, ctx, rounds=rounds)  # blocks of about 20 ms: many calls of a collective
    return out


class TPAttention(nn.Module):
    """Self-attention with separate q, k, v and output projections, so that tensor parallelism can split it by
    heads: q, k, v column-parallel (each rank computes its heads), the output row-parallel. Taught in notebook `sharding`.
    The number of heads is read from the (possibly sharded) weight, so the same code runs whole or split."""

    def __init__(self, d_model: int, head_dim: int):
        super().__init__()
        if d_model % head_dim:
            raise ValueError(f"d_model ({d_model}) must be a multiple of head_dim ({head_dim})")
        self.head_dim = head_dim
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        q, k, v = (p(x).view(B, T, -1, self.head_dim).transpose(1, 2) for p in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, local heads, T, head_dim)
        return self.o(y.transpose(1, 2).reshape(B, T, -1))


def tensor_parallel_check(ctx: WorkerContext, d_model: int, head_dim: int, batch: int, tokens: int) -> dict:
    """Split a transformer MLP (d → 4d → d) and an attention block Megatron-style over the ranks with
    ``torch.distributed.tensor.parallel``: the first layer column-parallel, the last row-parallel. Report the
    largest difference from the unsplit layer (outputs and input gradients), each rank's share of the weights, and
    the collectives of one forward and one backward, counted. Taught in notebook `sharding`.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))
    g = torch.Generator().manual_seed(2)
    x = torch.randn(batch, tokens, d_model, generator=g).to(ctx.device)  # the same input on every rank
    blocks = {
        "MLP": (
            lambda: nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)),
            {"0": ColwiseParallel(), "2": RowwiseParallel()},
        ),
        "attention": (
            lambda: TPAttention(d_model, head_dim),
            {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(), "o": RowwiseParallel()},
        ),
    }
    out = {}
    for name, (build, plan) in blocks.items():
        torch.manual_seed(0)
        whole = build().to(ctx.device)
        torch.manual_seed(0)
        split = parallelize_module(build().to(ctx.device), mesh, plan)
        x_whole, x_split = x.clone().requires_grad_(), x.clone().requires_grad_()
        ref = whole(x_whole)
        ref.square().mean().backward()
        with CommDebugMode() as fwd:
            got = split(x_split)
        with CommDebugMode() as bwd:
            got.square().mean().backward()
        local = sum(p.to_local().numel() if hasattr(p, "to_local") else p.numel() for p in split.parameters())
        out[name] = dict(
            max_error=float((got.detach() - ref.detach()).abs().max()),
            max_grad_error=float((_grad(x_split) - _grad(x_whole)).abs().max()),
            params=sum(p.numel() for p in whole.parameters()),
            local_params=local,
            forward=_counts(fwd),
            backward=_counts(bwd),
        )
    return out


def pipeline_benchmark(
    ctx: WorkerContext,
    width: int,
    layers_per_stage: int,
    micro_batch: int,
    microbatches: list[int],
    rounds: int = 5,
) -> dict:
    """A stack of ``2 · layers_per_stage`` wide layers split into one stage per rank with
    ``torch.distributed.pipelining``, trained with the GPipe and the 1F1B schedule at each number of micro-batches
    (each of ``micro_batch`` samples). Reports, in interleaved rounds, the step time of every (schedule, m) and the
    time of one stage's forward and backward on one micro-batch alone (no pipeline): from it the bubble. Also the
    peak activation memory of each stage under each schedule at the largest m (:func:`labkit.peak_memory`).
    Taught in notebook `sharding`.
    """
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    from ..instruments.memory import peak_memory

    if ctx.world_size < 2:
        raise ValueError("a pipeline needs at least 2 ranks, one stage each")
    torch.manual_seed(0)
    layers = [m for _ in range(layers_per_stage * ctx.world_size) for m in (nn.Linear(width, width), nn.ReLU())]
    per = 2 * layers_per_stage
    stage_mod = nn.Sequential(*layers[ctx.rank * per : (ctx.rank + 1) * per]).to(ctx.device)
    last = ctx.rank == ctx.world_size - 1
    g = torch.Generator().manual_seed(3)
    data = {m: torch.randn(m * micro_batch, width, generator=g).to(ctx.device) for m in microbatches}
    targets = {m: torch.randn(m * micro_batch, width, generator=g).to(ctx.device) for m in microbatches}
    schedules = {"GPipe": ScheduleGPipe, "1F1B": Schedule1F1B}

    def runner(name: str, m: int):
        stage = PipelineStage(stage_mod, ctx.rank, ctx.world_size, ctx.device)
        sched = schedules[name](stage, n_microbatches=m, loss_fn=F.mse_loss)

        def run() -> None:
            if ctx.rank == 0:
                sched.step(data[m])
            elif last:
                sched.step(target=targets[m])
            else:
                sched.step()
            stage_mod.zero_grad(set_to_none=True)

        return run

    alone_x = torch.randn(micro_batch, width, generator=g).to(ctx.device)

    def stage_alone() -> None:  # this stage's forward and backward on one micro-batch, no neighbours
        stage_mod(alone_x).square().mean().backward()
        stage_mod.zero_grad(set_to_none=True)

    fns = {f"{name} m={m}": runner(name, m) for name in schedules for m in microbatches}
    fns["stage alone"] = stage_alone
    samples = _rounds(fns, ctx, rounds=rounds, warmup=1)  # blocks of about 20 ms
    top = max(microbatches)
    memory = {}
    for name in schedules:
        run = runner(name, top)
        run()
        _sync(ctx)
        dist.barrier()
        memory[name] = peak_memory(run, track=(stage_mod,), device=ctx.device, label=name).by_category["activations"]
    return dict(samples=samples, activation_peak=memory)


def parallelism_tour(ctx: WorkerContext, sharding: dict, tensor: dict, pipeline: dict) -> dict:
    """All three experiments in one launch (worker processes start once): :func:`sharding_benchmark`,
    :func:`tensor_parallel_check` and :func:`pipeline_benchmark` with their keyword arguments, and how long each
    took on this rank. Taught in notebook `sharding`."""
    out, took = {}, {}
    for name, fn, kwargs in (("sharding", sharding_benchmark, sharding), ("tensor", tensor_parallel_check, tensor),
                             ("pipeline", pipeline_benchmark, pipeline)):  # fmt: skip
        start = time.perf_counter()
        out[name] = fn(ctx, **kwargs)
        took[name] = time.perf_counter() - start
    out["seconds"] = took
    return out
