"""How cost grows with size: power laws and straight lines fitted to measured sizes.

Taught in notebook `input_size` (input size) and notebook `model_size` (model size), where the sizes are timed in interleaved
rounds by labkit.claims; notebook `estimating_a_job` builds its job estimates on the same fits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core.result import Result


@dataclass(frozen=True)
class PowerLawFit(Result):
    """y ≈ coefficient · x^exponent, fitted by least squares on log y against log x."""

    exponent: float
    coefficient: float
    r2: float  # of the fit in log–log space
    n_points: int

    def predict(self, x: float | Sequence[float] | np.ndarray) -> float | np.ndarray:
        return self.coefficient * np.asarray(x, dtype=float) ** self.exponent

    def __str__(self) -> str:
        return f"y ≈ {self.coefficient:.3g} · x^{self.exponent:.2f} (R² {self.r2:.3f}, {self.n_points} points)"


def fit_power_law(xs: Sequence[float], ys: Sequence[float]) -> PowerLawFit:
    """Fit y = c·x^k on log–log axes; the exponent k is how cost grows with size (notebook `input_size`).

    k ≈ 1: linear (twice the items, twice the time); k ≈ 2: quadratic (attention over a sequence);
    k well below 1 at small sizes: fixed overhead dominates, and extrapolating from there is wrong.
    """
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"xs and ys must be 1-D and the same length, got {x.shape} and {y.shape}")
    if len(x) < 2 or len(np.unique(x)) < 2:
        raise ValueError("a power-law fit needs at least two different sizes")
    if not (np.isfinite(x).all() and np.isfinite(y).all()) or (x <= 0).any() or (y <= 0).any():
        raise ValueError("a power-law fit needs positive, finite sizes and values (it works on their logarithms)")
    lx, ly = np.log(x), np.log(y)
    k, log_c = np.polyfit(lx, ly, 1)
    residual = ly - (k * lx + log_c)
    total = ((ly - ly.mean()) ** 2).sum()
    r2 = 1.0 - (residual**2).sum() / total if total > 0 else 1.0
    return PowerLawFit(float(k), float(math.exp(log_c)), float(r2), len(x))


@dataclass(frozen=True)
class LinearFit(Result):
    """y ≈ fixed + per_unit · x: a one-off cost plus a cost per unit of input."""

    fixed: float
    per_unit: float
    r2: float
    n_points: int

    def predict(self, x: float | Sequence[float] | np.ndarray) -> float | np.ndarray:
        return self.fixed + self.per_unit * np.asarray(x, dtype=float)

    def __str__(self) -> str:
        return f"y ≈ {self.fixed:.3g} + {self.per_unit:.3g} · x (R² {self.r2:.3f}, {self.n_points} points)"


def fit_linear(xs: Sequence[float] | np.ndarray, ys: Sequence[float] | np.ndarray) -> LinearFit:
    """Fit y = fixed + per_unit·x by least squares (notebook `input_size`: predicting a long recording's time)."""
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"xs and ys must be 1-D and the same length, got {x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("xs and ys must hold finite numbers (a NaN or an infinity spoils the whole fit)")
    if len(np.unique(x)) < 2:
        raise ValueError("a linear fit needs at least two different sizes")
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    total = ((y - y.mean()) ** 2).sum()
    r2 = 1.0 - (residual**2).sum() / total if total > 0 else 1.0
    return LinearFit(float(intercept), float(slope), float(r2), len(x))
