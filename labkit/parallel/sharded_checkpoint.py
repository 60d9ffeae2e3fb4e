"""A sharded checkpoint with ``torch.distributed.checkpoint``: each rank writes its own shard (notebook `checkpoints`).

The model is sharded with FSDP2 (``fully_shard``, ZeRO-3: notebook `sharding`), so each rank holds a slice of every
weight and of Adam's state. ``torch.distributed.checkpoint.save`` writes one file per rank with the slices that
rank holds, plus a small ``.metadata`` file that says where every slice went; ``load`` reads them back into a model
sharded the same way (or, through the metadata, another way).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
import torch.distributed as dist

from .ddp_workers import WorkerContext
from .sharding import sharding_mlp


def _sharded(ctx: WorkerContext, width: int, depth: int, classes: int):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = sharding_mlp(width, depth, classes).to(ctx.device)
    mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))
    for layer in model.children():
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.Adam(model.parameters(), lr=1e-3)


def sharded_checkpoint(ctx: WorkerContext, folder: str, width: int, depth: int, classes: int, steps: int = 2) -> dict:
    """Train an FSDP2-sharded MLP for ``steps``, save it with DCP into ``folder``, load it into a fresh sharded model
    and compare. Returns this rank's bytes held, the seconds the save took, and whether the load matched.

    Taught in notebook `checkpoints`.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model, opt = _sharded(ctx, width, depth, classes)
    x = torch.randn(32, width, device=ctx.device)
    for _ in range(steps):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    model_sd, opt_sd = get_state_dict(model, opt)
    local = sum(t.to_local().numel() * t.element_size() for t in model.parameters())  # this rank's slice
    local += sum(
        v.to_local().numel() * v.element_size()
        for s in opt.state.values()
        for v in s.values()
        if hasattr(v, "to_local")
    )
    dist.barrier()
    t0 = time.perf_counter()
    dcp.save({"model": model_sd, "optim": opt_sd}, checkpoint_id=folder)
    dist.barrier()
    save_s = time.perf_counter() - t0

    fresh, fresh_opt = _sharded(ctx, width, depth, classes)
    with torch.no_grad():
        for p in fresh.parameters():
            p.zero_()  # so a load that did nothing would show
    fresh_sd, fresh_opt_sd = get_state_dict(fresh, fresh_opt)
    dcp.load({"model": fresh_sd, "optim": fresh_opt_sd}, checkpoint_id=folder)  # fills them in place
    set_state_dict(fresh, fresh_opt, model_state_dict=fresh_sd, optim_state_dict=fresh_opt_sd)
    same = all(
        torch.equal(a.to_local(), b.to_local()) for a, b in zip(model.parameters(), fresh.parameters(), strict=True)
    )
    files = {p.name: p.stat().st_size for p in Path(folder).iterdir()} if ctx.rank == 0 else {}
    return {"rank": ctx.rank, "local_bytes": local, "save_s": save_s, "loaded_equal": same, "files": files,
            "pid": os.getpid()}  # fmt: skip
