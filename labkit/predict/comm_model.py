"""The data-parallel scaling model of notebook `multiple_gpus`: compute divides across GPUs, a ring all-reduce does not.

Pure arithmetic (no processes, no torch.distributed): :class:`Link` (the latency-bandwidth model of an interconnect),
:data:`LINKS` (vendors' figures), :class:`NodeLinks` (servers: a fast link inside, a slower one between),
:func:`fit_link` (a link fitted to measured all-reduces) and :func:`predict_data_parallel`. :mod:`labkit.parallel.distributed` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import checks
from ..core.result import Result
from .specs import LINK_SPECS


@dataclass(frozen=True)
class Link(Result):
    """An interconnect in the latency–bandwidth model: a ring all-reduce of S bytes over n ranks takes
    2(n−1)·latency + 2(n−1)/n · S / bandwidth (each rank sends and receives 2(n−1)/n · S).

    Notebook `multiple_gpus` fits one to its measured all-reduces and reads the datasheet links as Links.
    """

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


LINKS = {name: Link(name, bandwidth, latency, source) for name, (bandwidth, latency, source) in LINK_SPECS.items()}


@dataclass(frozen=True)
class NodeLinks(Result):
    """Servers of ``per_node`` GPUs: a fast link inside each server, a slower one between servers.

    Taught in notebook `multiple_gpus`. Up to ``per_node`` GPUs the all-reduce is the fast link's ring. Beyond, the hierarchical
    all-reduce (as NCCL and Horovod do it): a reduce-scatter inside each server, an all-reduce across servers of
    each GPU's 1/per_node share (every GPU with its own network port, as in NVIDIA's DGX H100 and H200), then an
    all-gather inside each server. The reduce-scatter and all-gather move what one all-reduce inside the server
    moves, so a step costs ``intra.allreduce_s(per_node, S) + inter.allreduce_s(servers, S / per_node)``.
    """

    name: str
    intra: Link
    inter: Link
    per_node: int = 8

    def allreduce_s(self, n_ranks: int, nbytes: float) -> float:
        if n_ranks <= self.per_node:
            return self.intra.allreduce_s(n_ranks, nbytes)
        if n_ranks % self.per_node:
            raise ValueError(
                f"{n_ranks} GPUs do not fill servers of {self.per_node}; use a multiple of {self.per_node}"
            )
        servers = n_ranks // self.per_node
        return self.intra.allreduce_s(self.per_node, nbytes) + self.inter.allreduce_s(servers, nbytes / self.per_node)


def fit_link(sizes_bytes: list[float], seconds: list[float], n_ranks: int, name: str = "measured") -> Link:
    """Calibrate a :class:`Link` from an all-reduce sweep at ``n_ranks``: time = a + b · bytes.

    Taught in notebook `multiple_gpus`.
    """
    from .scaling import fit_linear

    if n_ranks < 2:
        raise ValueError("a link can only be calibrated from an all-reduce over at least 2 ranks")
    checks.finite_values("sizes_bytes", sizes_bytes, above_zero=True)
    checks.finite_values("seconds", seconds, above_zero=True)
    line = fit_linear(sizes_bytes, seconds)
    if line.per_unit <= 0:
        raise ValueError("all-reduce time did not grow with message size; measure larger messages")
    steps = 2 * (n_ranks - 1)
    return Link(name, bandwidth=steps / n_ranks / line.per_unit, latency_s=max(line.fixed, 0.0) / steps, source="fit")


def predict_data_parallel(
    n_gpus: int,
    compute_s: float,
    grad_bytes: float,
    link: Link | NodeLinks,
    overlap: float = 0.0,
    serial_s: float = 0.0,
    scaling: str = "strong",
) -> dict:
    """Predict one data-parallel training step on ``n_gpus`` (notebook `multiple_gpus`).

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
    checks.whole("n_gpus", n_gpus)
    checks.positive("compute_s", compute_s)
    checks.amount("grad_bytes", grad_bytes)
    checks.amount("serial_s", serial_s)
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
