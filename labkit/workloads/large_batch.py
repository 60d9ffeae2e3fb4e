"""The optimisation half of "why not a huge batch?": steps to a target against batch size (notebook `batch_size`).

A larger batch averages more samples into each gradient, so it needs fewer steps to reach a given loss, but
only up to a point: once the gradient's noise is small beside its signal, doubling the batch no longer halves
the steps. McCandlish et al. (2018, "An Empirical Model of Large-Batch Training", arXiv:1812.06162, eq. 2.11)
model the steps S to a target at batch B as

    S = S_min · (1 + B_noise / B)

so S falls like 1/B while B ≪ B_noise and levels off at S_min beyond it; B_noise (their "critical batch size"
is the measured version of it) is where the batch stops buying steps. Training is measured here, not timed:
each run is seeded, so the step counts are facts of the run, not statistics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..core.result import Result


def steps_to_target(
    make_model: Callable[[], torch.nn.Module],
    train: tuple[torch.Tensor, torch.Tensor],
    test: tuple[torch.Tensor, torch.Tensor],
    *,
    batch: int,
    lr: float,
    target: float,
    max_steps: int,
    warmup_steps: int = 0,
    seed: int = 0,
) -> int | None:
    """Train ``make_model()`` with plain SGD on batches of ``batch`` drawn from ``train`` until its accuracy on
    ``test`` reaches ``target``; return the number of steps, or ``None`` if it does not within ``max_steps`` (or
    the loss stops being finite: the learning rate was too high). Taught in notebook `batch_size`.

    ``warmup_steps`` ramps the learning rate linearly from ``lr / warmup_steps`` to ``lr`` over the first steps
    (Goyal et al., 2017, "Accurate, Large Minibatch SGD", arXiv:1706.02677, section 2.2).
    """
    if batch < 1 or max_steps < 1 or not 0 < target <= 1 or lr <= 0 or warmup_steps < 0:
        raise ValueError(
            f"need batch >= 1, max_steps >= 1, 0 < target <= 1, lr > 0 and warmup_steps >= 0; got batch={batch}, "
            f"max_steps={max_steps}, target={target}, lr={lr}, warmup_steps={warmup_steps}"
        )
    (x, y), (x_test, y_test) = train, test
    torch.manual_seed(seed)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    picks = torch.Generator().manual_seed(seed)
    for step in range(1, max_steps + 1):
        if warmup_steps:
            for group in opt.param_groups:
                group["lr"] = lr * min(1.0, step / warmup_steps)
        idx = torch.randint(len(x), (batch,), generator=picks)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        if not math.isfinite(loss.item()):
            return None
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():
            if (model(x_test).argmax(1) == y_test).float().mean().item() >= target:
                return step
    return None


def fewest_steps(
    make_model: Callable[[], torch.nn.Module],
    train: tuple[torch.Tensor, torch.Tensor],
    test: tuple[torch.Tensor, torch.Tensor],
    *,
    batch: int,
    lrs: Sequence[float],
    **kwargs,
) -> tuple[int | None, float | None]:
    """The fewest steps to the target at ``batch`` over the learning rates ``lrs``, and the rate that gave them
    (``(None, None)`` if none reached it). Taught in notebook `batch_size`. A batch size is only judged fairly at its own
    best learning rate: a larger batch tolerates a larger one."""
    results = {lr: steps_to_target(make_model, train, test, batch=batch, lr=lr, **kwargs) for lr in lrs}
    reached = {lr: s for lr, s in results.items() if s is not None}
    if not reached:
        return None, None
    best = min(reached, key=lambda lr: (reached[lr], lr))
    return reached[best], best


@dataclass
class CriticalBatchFit(Result):
    """``S = s_min · (1 + b_noise / B)`` fitted to steps against batch (McCandlish et al., 2018)."""

    s_min: float
    b_noise: float

    def steps(self, batch: float) -> float:
        """The fitted steps to the target at ``batch``."""
        return self.s_min * (1 + self.b_noise / batch)

    def __str__(self) -> str:
        return f"S = {self.s_min:.1f} x (1 + {self.b_noise:.0f} / B)"


def fit_critical_batch(batches: Sequence[float], steps: Sequence[float]) -> CriticalBatchFit:
    """Fit ``S = S_min + (S_min · B_noise) · (1/B)``, a straight line in 1/B, by least squares on relative errors.

    Taught in notebook `batch_size`.
    """
    if len(batches) != len(steps) or len(batches) < 3:
        raise ValueError(f"need at least 3 (batch, steps) pairs of equal length, got {len(batches)} and {len(steps)}")
    if any(b <= 0 for b in batches) or any(s is None or s <= 0 for s in steps):
        raise ValueError(f"batches and steps must be positive numbers, got {list(batches)} and {list(steps)}")
    s = np.asarray(steps, dtype=float)
    # weighted by 1/S, so each point counts by its relative error: the many steps of a small batch do not swamp
    # the few of a large one, where S_min is decided
    slope, intercept = np.polyfit(1.0 / np.asarray(batches, dtype=float), s, 1, w=1.0 / s)
    if intercept <= 0:
        raise ValueError("the fit gives no positive S_min: the steps do not level off over these batches")
    return CriticalBatchFit(s_min=float(intercept), b_noise=float(slope / intercept))
