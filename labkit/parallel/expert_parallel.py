"""Expert parallelism: each rank holds some of an MoE layer's experts, and tokens travel to them (notebook
`mixture_of_experts`).

:func:`expert_parallel_check` is a worker for :func:`labkit.parallel.distributed.launch`. Every rank routes its own
tokens with the (replicated) router, sends each (token, expert) assignment to the rank that holds the expert with
``torch.distributed.all_to_all_single`` (the dispatch), runs its local experts on what it received, sends the results
back the same way (the combine) and adds them up with the router's weights: GShard's layout (Lepikhin et al., 2021).
It returns its output's largest difference from the same layer run whole in one process, and the bytes that crossed
between ranks, counted from the tensors each all-to-all delivered: the activation rows of the dispatch and of the
combine, and apart from them the routing metadata, each row's expert id (an int64) and the counts per rank that go
before each of the three all-to-alls of rows (``n`` int64s from every rank).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..workloads.experts import MoE
from .ddp_workers import WorkerContext


def _exchange(ctx: WorkerContext, rows: torch.Tensor, send_counts: list[int]) -> tuple[torch.Tensor, list[int]]:
    """All-to-all of ``rows`` (grouped by destination rank, ``send_counts`` each); returns the rows received and
    how many came from each rank (the counts travel first, so every rank can size its buffer)."""
    counts = torch.tensor(send_counts, dtype=torch.int64, device=ctx.device)
    received_counts = torch.empty_like(counts)
    dist.all_to_all_single(received_counts, counts)
    recv = received_counts.tolist()
    out = rows.new_empty((sum(recv), *rows.shape[1:]))
    dist.all_to_all_single(out, rows.contiguous(), output_split_sizes=recv, input_split_sizes=send_counts)
    return out, recv


def expert_parallel_check(
    ctx: WorkerContext, width: int, hidden: int, experts: int, top_k: int, tokens: int, seed: int = 0
) -> dict:
    """One expert-parallel MoE forward pass on ``tokens`` tokens per rank, checked against the whole layer.

    Taught in notebook `mixture_of_experts`. Rank r holds experts r·E/n to (r+1)·E/n − 1 (E divisible by n).
    """
    n = ctx.world_size
    if experts % n:
        raise ValueError(f"experts ({experts}) must divide evenly between {n} ranks")
    torch.manual_seed(seed)  # the same layer on every rank; each uses only its own experts' weights
    layer = MoE(width, hidden, experts, top_k).to(ctx.device)
    local = experts // n
    mine = range(ctx.rank * local, (ctx.rank + 1) * local)
    gen = torch.Generator().manual_seed(seed * 1000 + ctx.rank)
    x = torch.randn(tokens, width, generator=gen).to(ctx.device)
    with torch.no_grad():
        chosen, weights = layer.route(x)
        flat = chosen.reshape(-1)
        owner = flat // local
        order = owner.argsort(stable=True)  # assignments grouped by the rank that holds their expert
        send_counts = torch.bincount(owner, minlength=n).tolist()
        token = order // top_k
        rows, _ = _exchange(ctx, x[token], send_counts)  # dispatch: the tokens themselves
        expert_of, recv_counts = _exchange(ctx, flat[order, None], send_counts)  # and which expert each is for
        expert_of = expert_of[:, 0]
        results = torch.empty_like(rows)
        for e in mine:
            here = (expert_of == e).nonzero()[:, 0]
            if len(here):
                results[here] = layer.expert(e, rows[here])
        back, _ = _exchange(ctx, results, recv_counts)  # combine: results return in the order they were sent
        out = torch.zeros_like(x)
        out.index_add_(0, token, back * weights.reshape(-1)[order, None])
        whole = layer(x)
    row_bytes = width * x.element_size()
    return dict(
        rank=ctx.rank,
        backend=ctx.backend,
        max_error=float((out - whole).abs().max()),
        assignments=int(flat.numel()),
        sent_remote=sum(c for r, c in enumerate(send_counts) if r != ctx.rank),
        # counted from what the all-to-alls delivered: rows from other ranks, in the dispatch and in the combine
        dispatch_bytes_received=(rows.shape[0] - recv_counts[ctx.rank]) * row_bytes,
        combine_bytes_received=(back.shape[0] - send_counts[ctx.rank]) * row_bytes,
        row_bytes=row_bytes,
        # the routing metadata from other ranks: an expert id per dispatched row, and n counts before each exchange
        ids_bytes_received=(expert_of.shape[0] - recv_counts[ctx.rank]) * flat.element_size(),
        counts_bytes_received=3 * (n - 1) * torch.int64.itemsize,
    )
