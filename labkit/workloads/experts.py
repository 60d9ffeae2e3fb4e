"""Mixture-of-experts: a top-k routed layer, with the counts that decide its time, memory and traffic.

Taught in notebook `mixture_of_experts`.

- :class:`MoE` is a sparsely gated feed-forward layer (Shazeer et al., "Outrageously Large Neural Networks", ICLR
  2017): a linear router scores every expert for each token, the ``top_k`` best are kept and their scores
  softmaxed into weights (as in Mixtral, Jiang et al., "Mixtral of Experts", 2024), and each expert is run only on
  the tokens routed to it. Each expert is Mixtral's SwiGLU feed-forward block, (SiLU(x·W1) ⊙ (x·W3))·W2: a gate W1
  and an up projection W3 of width × hidden and a down projection W2 of hidden × width, so 3·width·hidden
  parameters and 6·width·hidden FLOPs per token: ``w1``, ``w3`` and ``w2`` of transformers 4.x's
  ``MixtralBlockSparseTop2MLP`` (in transformers v5 the experts are one ``MixtralExperts`` module, its
  ``gate_up_proj`` (E, 2·hidden, width) the gates and up projections stacked, its ``down_proj`` (E, width, hidden)),
  and of ``FeedForward`` in Mistral's reference code, mistral_inference/transformer_layers.py. With
  ``capacity_factor`` set, an expert takes at most :func:`expert_capacity` tokens per batch and the rest of its
  assignments are dropped (the token keeps its other experts, or passes through the residual connection): Switch
  Transformer's rule (Fedus et al., JMLR 2022), generalised to top-k as GShard does (Lepikhin et al., 2021).
- The router is initialised with orthonormal rows, so for tokens drawn from a standard normal the experts' scores
  are independent and identically distributed: every set of ``top_k`` experts is equally likely. That makes the
  uniform-routing formulas below (:func:`expected_distinct_experts`, :func:`expected_dropped`) exact in
  expectation, which a trained router (deliberately balanced by an auxiliary loss) only approaches.
- :func:`moe_flops` is the layer's FLOPs from first principles; the tests check it against PyTorch's FLOP counter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..core import checks


@dataclass(frozen=True)
class Routing:
    """What one forward pass routed: assignments per expert, how many each kept, and how many were dropped.

    :class:`MoE` keeps the last one in ``last_routing``; notebook `mixture_of_experts` reads it there.
    """

    assigned: tuple[int, ...]  # (token, expert) assignments each expert received
    kept: tuple[int, ...]  # of those, the ones it computed (all of them without a capacity)
    capacity: int | None

    @property
    def dropped(self) -> int:
        """Assignments beyond an expert's capacity, not computed."""
        return sum(self.assigned) - sum(self.kept)

    @property
    def experts_used(self) -> int:
        """Experts that computed at least one token: the ones whose weights this pass had to read."""
        return sum(1 for n in self.kept if n)


def expert_capacity(tokens: int, experts: int, top_k: int, capacity_factor: float) -> int:
    """Assignments one expert takes per batch: ceil(capacity_factor × tokens × top_k / experts).

    Taught in notebook `mixture_of_experts`. Switch Transformer's expert capacity is (tokens per batch / experts) ×
    capacity factor, for top-1 routing, one expert per token (Fedus et al., JMLR 2022, eq. 3). The factor ``top_k``
    is the top-k generalisation: a token makes ``top_k`` assignments, so an expert's even share is
    tokens × top_k / experts, as in GShard's top-2 routing, whose capacity is 2N/E for N tokens (Lepikhin et al.,
    ICLR 2021). ``top_k=1`` is Switch Transformer's formula exactly.
    """
    for name, value in dict(tokens=tokens, experts=experts, top_k=top_k).items():
        checks.whole(name, value)
    checks.positive("capacity_factor", capacity_factor)
    return math.ceil(capacity_factor * tokens * top_k / experts)


class MoE(nn.Module):
    """A top-``top_k`` mixture of ``experts`` SwiGLU MLPs (width → hidden → width), routed per token as in Mixtral.

    Taught in notebook `mixture_of_experts`. Input (tokens, width); output the same. After each call
    :attr:`last_routing` says what was routed, kept and dropped. ``capacity_factor=None`` drops nothing.
    """

    def __init__(
        self, width: int, hidden: int, experts: int, top_k: int = 2, capacity_factor: float | None = None
    ) -> None:
        super().__init__()
        for name, value in dict(width=width, hidden=hidden, experts=experts, top_k=top_k).items():
            checks.whole(name, value)
        if top_k > experts:
            raise ValueError(f"top_k ({top_k}) cannot exceed the number of experts ({experts})")
        if capacity_factor is not None:
            checks.positive("capacity_factor", capacity_factor)
        self.width, self.hidden, self.experts, self.top_k = width, hidden, experts, top_k
        self.capacity_factor = capacity_factor
        self.router = nn.Linear(width, experts, bias=False)
        nn.init.orthogonal_(self.router.weight)  # orthonormal rows (experts <= width): i.i.d. scores, see above
        # Mixtral's names (transformers 4.x's MixtralBlockSparseTop2MLP, mistral_inference's FeedForward): w1 the
        # gate, w3 the up projection, w2 the down projection; transformers v5 stacks w1 and w3 as gate_up_proj
        self.w1 = nn.Parameter(torch.randn(experts, width, hidden) / math.sqrt(width))
        self.w3 = nn.Parameter(torch.randn(experts, width, hidden) / math.sqrt(width))
        self.w2 = nn.Parameter(torch.randn(experts, hidden, width) / math.sqrt(hidden))
        self.last_routing: Routing | None = None

    def expert(self, e: int, x: torch.Tensor) -> torch.Tensor:
        """Expert ``e``'s SwiGLU block on the tokens ``x`` (n, width): (silu(x · W1[e]) ⊙ (x · W3[e])) · W2[e]."""
        return (F.silu(x @ self.w1[e]) * (x @ self.w3[e])) @ self.w2[e]  # three matmuls: 6·width·hidden per token

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each token's ``top_k`` experts (tokens, top_k) and their weights, the softmax of their scores."""
        scores, chosen = self.router(x).topk(self.top_k, dim=-1)
        return chosen, torch.softmax(scores, dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.shape[1] != self.width:
            raise ValueError(f"MoE takes (tokens, {self.width}), got {tuple(x.shape)}")
        chosen, weights = self.route(x)
        tokens = x.shape[0]
        capacity = (
            None
            if self.capacity_factor is None
            else expert_capacity(tokens, self.experts, self.top_k, self.capacity_factor)
        )
        flat = chosen.reshape(-1)  # assignment i is token i // top_k's (i % top_k)-th choice
        order = flat.argsort(stable=True)  # grouped by expert, in token order within each expert
        assigned = torch.bincount(flat, minlength=self.experts).tolist()
        out = torch.zeros_like(x)
        kept, start = [], 0
        for e, n in enumerate(assigned):
            mine = order[start : start + n][: capacity if capacity is not None else n]  # the first come are kept
            start += n
            kept.append(len(mine))
            if len(mine) == 0:
                continue  # an expert with no tokens is not run, and its weights are not read
            token = mine // self.top_k
            out.index_add_(0, token, self.expert(e, x[token]) * weights.reshape(-1)[mine, None])
        self.last_routing = Routing(tuple(assigned), tuple(kept), capacity)
        return out


def moe_flops(tokens: int, width: int, hidden: int, experts: int, computed: int) -> int:
    """FLOPs of one :class:`MoE` pass: the router (2·T·width·E) and, per computed assignment, 6·width·hidden.

    Taught in notebook `mixture_of_experts`. ``computed`` is the assignments the experts ran: tokens × top_k without
    a capacity, less :attr:`Routing.dropped` with one. Per token this is flat in the number of experts but for the
    router's 2·width·E; the parameters (:func:`moe_parameters`) grow with E. An assignment's 6·width·hidden are the
    SwiGLU expert's three matmuls (gate, up, down) of 2·width·hidden each; the SiLU, the gating product and the
    scaling by the router's weights are elementwise, and the FLOP counter (like this count) leaves them out.
    """
    for name, value in dict(tokens=tokens, width=width, hidden=hidden, experts=experts).items():
        checks.whole(name, value)
    checks.whole("computed", computed, minimum=0)
    return 2 * tokens * width * experts + 6 * width * hidden * computed


def moe_parameters(width: int, hidden: int, experts: int) -> int:
    """Parameters of :class:`MoE`: the router (width·E) and E SwiGLU experts of 3·width·hidden each.

    Taught in notebook `mixture_of_experts`. An expert holds Mixtral's three matrices: the gate W1 and the up
    projection W3 (width × hidden each) and the down projection W2 (hidden × width), as in transformers 4.x's
    ``MixtralBlockSparseTop2MLP`` (``w1``, ``w3``, ``w2``; in v5 ``MixtralExperts.gate_up_proj`` (E, 2·hidden, width)
    and ``down_proj`` (E, width, hidden), the same numbers) and mistral_inference/transformer_layers.py's
    ``FeedForward`` (Jiang et al., "Mixtral of Experts", 2024).
    """
    for name, value in dict(width=width, hidden=hidden, experts=experts).items():
        checks.whole(name, value)
    return width * experts + 3 * width * hidden * experts


def expected_distinct_experts(batch: int, experts: int, top_k: int) -> float:
    """Experts a decode step at ``batch`` tokens touches on average, routing uniform: E·(1 − (1 − k/E)^B).

    Taught in notebook `mixture_of_experts`. A token picks a given expert with probability k/E, independently of
    the other tokens, so the expert is left untouched by all B with probability (1 − k/E)^B. The step must read
    every touched expert's weights: at batch 1 it reads k experts, at large batch nearly all E.
    """
    for name, value in dict(batch=batch, experts=experts, top_k=top_k).items():
        checks.whole(name, value)
    return experts * (1 - (1 - top_k / experts) ** batch)


def expected_dropped(tokens: int, experts: int, top_k: int, capacity_factor: float) -> float:
    """Assignments dropped per batch on average, routing uniform: E · E[max(0, n − C)], n ~ Binomial(T, k/E).

    Taught in notebook `mixture_of_experts`. Each of the T tokens sends one of its k assignments to a given expert
    with probability k/E, so the expert receives a binomial count and drops what exceeds its capacity C
    (:func:`expert_capacity`). The binomial's terms are computed as logarithms: C(T, n) itself is too large for a
    float from about a thousand tokens on.
    """
    capacity = expert_capacity(tokens, experts, top_k, capacity_factor)
    p = top_k / experts
    if p == 1:  # every token sends one assignment to every expert
        return float(experts * max(0, tokens - capacity))

    def pmf(n: int) -> float:
        log_comb = math.lgamma(tokens + 1) - math.lgamma(n + 1) - math.lgamma(tokens - n + 1)
        return math.exp(log_comb + n * math.log(p) + (tokens - n) * math.log1p(-p))

    return experts * sum((n - capacity) * pmf(n) for n in range(capacity + 1, tokens + 1))
