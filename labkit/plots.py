"""One plotting style for the whole suite, and the progress bar used by every sweep.

Small figures, log axes for sweeps, every axis labelled with its unit, and the Okabe–Ito palette
(distinguishable with the common forms of colour blindness).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
from matplotlib.ticker import NullFormatter
from tqdm.auto import tqdm

from .ceilings import Roofline

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]


def use_style() -> None:
    """Apply the suite's matplotlib style (called on ``import labkit``)."""
    mpl.rcParams.update(
        {
            "figure.figsize": (6.4, 3.8),
            "figure.dpi": 100,
            "axes.prop_cycle": mpl.cycler(color=OKABE_ITO),
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "font.size": 10,
            "legend.frameon": False,
        }
    )


def progress(iterable: Iterable | None = None, desc: str = "", total: int | None = None, **kwargs):
    """A ``tqdm.auto`` progress bar: a widget in Jupyter, text in a terminal."""
    return tqdm(iterable, desc=desc, total=total, **kwargs)


def plot_roofline(
    roofline: Roofline,
    points: Sequence[dict] = (),
    ax: plt.Axes | None = None,
    title: str | None = None,
    label: str | None = None,
) -> plt.Axes:
    """Draw the roofline (log–log) and place operations on it (notebook 00).

    Each point is a dict with ``label``, ``intensity`` (FLOP/byte) and ``flops_per_s`` (achieved).
    """
    if ax is None:
        _, ax = plt.subplots()
    lo = min([p["intensity"] for p in points] + [roofline.ridge_intensity / 100]) / 2
    hi = max([p["intensity"] for p in points] + [roofline.ridge_intensity * 100]) * 2
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(xs, [roofline.attainable(x) / 1e9 for x in xs], color="black", lw=2, label=label or roofline.label)
    ax.axvline(roofline.ridge_intensity, color="grey", ls=":", lw=1)
    ax.annotate(
        f"ridge {roofline.ridge_intensity:.1f} FLOP/B",
        (roofline.ridge_intensity, roofline.peak_flops / 1e9),
        textcoords="offset points",
        xytext=(5, -24),
        fontsize=8,
        color="grey",
    )
    in_legend = len(points) > 5  # many points crowd each other's labels: name them in the legend instead
    markers = "osD^vPX"  # 7 markers against 8 colours: no two of the first 56 points look alike
    for i, p in enumerate(points):
        xy = (p["intensity"], p["flops_per_s"] / 1e9)
        colour = OKABE_ITO[(i + 1) % len(OKABE_ITO)]
        ax.scatter(
            *xy, color=colour, marker=markers[i % len(markers)], zorder=3, label=p["label"] if in_legend else None
        )
        if not in_legend:
            ax.annotate(p["label"], xy, textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("performance (GFLOP/s)")
    if title:
        ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8 if in_legend else None)
    return ax


def plot_power_law(
    xs: Sequence[float],
    ys: Sequence[float],
    fit=None,
    label: str = "",
    xlabel: str = "",
    ylabel: str = "",
    ax: plt.Axes | None = None,
    **kwargs,
) -> plt.Axes:
    """Measured points on log–log axes, with a fitted power law drawn through them (notebooks 02, 03).

    ``fit`` is a :class:`labkit.scaling.PowerLawFit`; its exponent goes into the legend.
    """
    if ax is None:
        _, ax = plt.subplots()
    points = ax.scatter(xs, ys, zorder=3, **kwargs)
    if fit is not None:
        lo, hi = min(xs), max(xs)
        grid = [lo * (hi / lo) ** (i / 50) for i in range(51)]
        ax.plot(
            grid,
            fit.predict(grid),
            color=points.get_facecolor()[0],
            lw=1.5,
            label=f"{label}: exponent {fit.exponent:.2f}",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels on a short log axis overlap
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend()
    return ax
