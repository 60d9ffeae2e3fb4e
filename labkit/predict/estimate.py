"""Estimating a job before running it: probe a small portion, fit, extrapolate, with an uncertainty band.

Taught in notebook `estimating_a_job`. The method: run the job on a few small portions of the data; split what is
paid once (start-up, the first step's warm-up, compilation, data caching) from what is paid per
sample; fit time = one-off + per-unit × size by least squares; predict the full job with a
prediction interval; and write the result on an *estimate card* with its assumptions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..core import checks
from ..core.result import Result


@dataclass(frozen=True)
class JobFit(Result):
    """time ≈ one_off_s + per_unit_s × size, fitted on probe runs, with the scatter of the fit."""

    one_off_s: float
    per_unit_s: float
    residual_s: float  # standard deviation of the points around the line
    sizes: tuple[float, ...]
    seconds: tuple[float, ...]

    def predict(self, size: float, z: float = 2.0) -> tuple[float, float, float]:
        """(estimate, low, high) seconds at ``size``: the standard prediction interval of a linear fit.

        The band widens the further ``size`` lies from the probed sizes: extrapolating ten times past
        them multiplies any error in the per-unit cost by ten.
        """
        x = np.asarray(self.sizes)
        n = len(x)
        estimate = self.one_off_s + self.per_unit_s * size
        spread = ((x - x.mean()) ** 2).sum()
        half = z * self.residual_s * math.sqrt(1 + 1 / n + (size - x.mean()) ** 2 / spread) if spread > 0 else 0.0
        return estimate, max(0.0, estimate - half), estimate + half


def fit_job(sizes: Sequence[float], seconds: Sequence[float]) -> JobFit:
    """Fit time = one-off + per-unit × size to probe runs (at least three sizes, all different).

    Taught in notebook `estimating_a_job`.
    """
    from .scaling import fit_linear

    x = np.asarray(sizes, dtype=float)
    y = np.asarray(seconds, dtype=float)
    if x.ndim == 1 and x.shape == y.shape and len(np.unique(x)) < 3:
        raise ValueError("probe at least three different sizes: two always fit a line exactly, hiding the noise")
    if x.shape == y.shape and (not (np.isfinite(x).all() and np.isfinite(y).all()) or (x <= 0).any() or (y <= 0).any()):
        raise ValueError("sizes and seconds must be positive finite numbers")
    line = fit_linear(x, y)  # checks the shapes too
    residual = y - line.predict(x)
    dof = max(1, len(x) - 2)
    return JobFit(line.fixed, line.per_unit, float(math.sqrt((residual**2).sum() / dof)), tuple(x), tuple(y))


def split_one_off(step_seconds: Sequence[float], warm: int = 3) -> tuple[float, float]:
    """(one-off seconds, steady seconds per step) from the per-step times of one run.

    Taught in notebook `estimating_a_job`.

    The steady cost is the median of the steps after the first ``warm``; what the first steps took
    beyond it is the one-off cost (allocation, kernel selection, compilation, cold caches).
    """
    if not isinstance(warm, int) or isinstance(warm, bool) or warm < 0:
        raise ValueError(f"warm must be a whole number of steps, 0 or more; got {warm!r}")
    t = np.asarray(step_seconds, dtype=float)
    if t.ndim != 1 or not np.isfinite(t).all() or (t < 0).any():
        raise ValueError("step_seconds must be a list of durations, finite and zero or more")
    if len(t) <= warm:
        raise ValueError(f"need more than warm={warm} steps to separate the one-off cost, got {len(t)}")
    steady = float(np.median(t[warm:]))
    return float(max(0.0, (t[:warm] - steady).sum())), steady


@dataclass
class EstimateCard(Result):
    """A prediction for a job, with what it rests on (notebook `estimating_a_job`)."""

    job: str
    seconds: float
    low_s: float
    high_s: float
    peak_bytes: int | None = None
    memory_budget_bytes: int | None = None
    bottleneck: str = ""
    assumptions: list[str] = field(default_factory=list)
    configuration: str = ""
    devices: int = 1  # the processors the job runs on, each drawing ``watts`` and billed ``price_per_hour``
    watts: float | None = None  # average power of one device over the job
    power_source: str = ""  # where ``watts`` comes from: a counter's measurement, or a stated assumption
    price_per_hour: float | None = None  # dollars per device-hour
    price_source: str = ""

    def __post_init__(self) -> None:
        checks.whole("devices", self.devices)
        for name in ("watts", "price_per_hour"):
            if getattr(self, name) is not None:
                checks.positive(name, getattr(self, name))

    @property
    def energy_kwh(self) -> float | None:
        """Energy of the whole job: devices × watts × seconds, in kWh (3.6 MJ each)."""
        return None if self.watts is None else self.devices * self.watts * self.seconds / 3.6e6

    @property
    def cost(self) -> float | None:
        """Dollars for the whole job: devices × hours × the price per device-hour."""
        return None if self.price_per_hour is None else self.devices * self.seconds / 3600 * self.price_per_hour

    @property
    def fits(self) -> bool | None:
        if self.peak_bytes is None or self.memory_budget_bytes is None:
            return None
        return self.peak_bytes <= self.memory_budget_bytes

    def __str__(self) -> str:
        lines = [
            f"ESTIMATE: {self.job}",
            f"  time      {_human(self.seconds)} (likely {_human(self.low_s)} to {_human(self.high_s)})",
        ]
        if self.peak_bytes is not None:
            verdict = "" if self.fits is None else ("  fits" if self.fits else "  DOES NOT FIT")
            budget = f" of {self.memory_budget_bytes / 2**30:,.1f} GiB" if self.memory_budget_bytes else ""
            lines.append(f"  memory    {self.peak_bytes / 2**30:,.2f} GiB at the peak{budget}{verdict}")
        if self.energy_kwh is not None:
            lines.append(
                f"  energy    {self.energy_kwh:,.3g} kWh ({self.devices} x {self.watts:,.3g} W; {self.power_source})"
            )
        if self.cost is not None:
            money = f"{self.cost:,.2f}" if self.cost >= 1 else f"{self.cost:.2g}"
            lines.append(f"  cost      ${money} at ${self.price_per_hour:g} per device-hour ({self.price_source})")
        if self.bottleneck:
            lines.append(f"  bound by  {self.bottleneck}")
        lines += [f"  assumes   {a}" for a in self.assumptions]
        if self.configuration:
            lines.append(f"  measured  on {self.configuration}")
        return "\n".join(lines)


def _human(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def training_time_from_flops(
    flops_per_step: float, steps: int, peak_flops: float, utilisation: float = 0.4, devices: int = 1
) -> float:
    """First-principles seconds for ``steps`` of ``flops_per_step`` at ``utilisation`` of the peak (notebook `estimating_a_job`).

    For a dense transformer, flops_per_step ≈ 6 × parameters × tokens per step (forward 2, backward 4 FLOPs
    per weight per token; Kaplan et al. 2020), plus attention's share, which grows with the context length.
    Not for conv nets: their filters are reused at every position (notebook `inference_vs_training` counts both).
    """
    for name, value in dict(flops_per_step=flops_per_step, steps=steps, peak_flops=peak_flops, devices=devices).items():
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    if not 0 < utilisation <= 1:
        raise ValueError(f"utilisation must be in (0, 1], got {utilisation}")
    return flops_per_step * steps / (peak_flops * utilisation * devices)
