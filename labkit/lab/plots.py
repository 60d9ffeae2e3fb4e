"""One plotting style for the whole suite, the helpers that keep plots readable, and the progress bar.

Figures sized for the book's column, log axes for sweeps with tick labels that read, point labels placed where
they collide with nothing, legends off the data. The rules themselves and their audit are in
:mod:`labkit.lab.plot_rules`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from cycler import cycler
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
from matplotlib.transforms import Bbox
from tqdm.auto import tqdm

from ..instruments.ceilings import Roofline
from .plot_rules import MIN_GAP_PT, OKABE_ITO

BOOK_FIGSIZE_IN = (8.4, 4.2)  # at 100 dpi, 840 px: the book's column at full size (plot_rules.MAX_WIDTH_IN)


def use_style() -> None:
    """Apply the suite's matplotlib style (``labkit.start`` does it)."""
    mpl.rcParams.update(
        {
            "figure.figsize": BOOK_FIGSIZE_IN,
            "figure.dpi": 100,
            "axes.prop_cycle": cycler(color=OKABE_ITO),
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "font.size": 10,
            "legend.frameon": False,
        }
    )


def progress(iterable: Iterable | None = None, desc: str = "", total: int | None = None, **kwargs):
    """A ``tqdm.auto`` progress bar: a widget in Jupyter, text in a terminal. Taught in notebook `inference_vs_training`."""
    return tqdm(iterable, desc=desc, total=total, **kwargs)


def _number(value: float, _pos=None) -> str:
    """A log-axis tick as a plain number where one reads ("20", "0.5"), else as a power of ten ("2×10⁶")."""
    if value <= 0:
        return ""
    if 1e-3 <= value < 1e5:
        return f"{value:g}"
    exponent = int(np.floor(np.log10(value) + 1e-9))
    mantissa = round(value / 10**exponent, 6)
    return f"$10^{{{exponent}}}$" if mantissa == 1 else f"${mantissa:g}\\times10^{{{exponent}}}$"


class _ReadableLogLocator(LogLocator):
    """Major ticks at 1×10ᵏ where that gives two or more, else at 1, 2 and 5×10ᵏ, else at every integer × 10ᵏ."""

    def tick_values(self, vmin, vmax):
        lo, hi = sorted((vmin, vmax))
        ticks: Sequence[float] = []
        for subs in ((1.0,), (1.0, 2.0, 5.0), tuple(float(k) for k in range(1, 10))):
            self.set_params(subs=subs)
            ticks = super().tick_values(vmin, vmax)
            if sum(lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9) for t in ticks) >= 2:
                break
        return ticks


def log_ticks(ax: plt.Axes) -> plt.Axes:
    """Give each log axis of ``ax`` tick labels that read: major ticks only, as plain numbers where they fit.

    Matplotlib labels minor ticks ("2×10¹ 3×10¹ 4×10¹") on a log axis spanning under a decade, and they crowd
    at a panel's width; this labels 1×10ᵏ, or 1, 2 and 5×10ᵏ on a short axis, and leaves minor ticks bare.
    Call it after plotting. Taught in notebook `serving_llms`.
    """
    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log":
            axis.set_major_locator(_ReadableLogLocator(base=10))
            axis.set_major_formatter(FuncFormatter(_number))
            axis.set_minor_formatter(NullFormatter())
    return ax


# Where a point's label may go, tried in this order: (dx, dy) in points from the point, and the alignment that
# keeps the text on that side of it. The near spots first, then the diagonal ones farther out, with a leader line.
_NEAR_SPOTS = [
    (5, 3, "left", "bottom"),
    (5, -3, "left", "top"),
    (-5, 3, "right", "bottom"),
    (-5, -3, "right", "top"),
    (0, 7, "center", "bottom"),
    (0, -7, "center", "top"),
    (8, 0, "left", "center"),
    (-8, 0, "right", "center"),
]
_LABEL_SPOTS = _NEAR_SPOTS + [(dx * 3, dy * 4, ha, va) for dx, dy, ha, va in _NEAR_SPOTS[:4]]


def _figure(ax: plt.Axes) -> mpl.figure.Figure:
    """The figure ``ax`` is drawn in (the root one where ``ax`` sits in a subfigure)."""
    fig = ax.figure
    while not isinstance(fig, mpl.figure.Figure):
        fig = fig.figure
    return fig


def _overlap_area(a: Bbox, b: Bbox) -> float:
    return max(0.0, min(a.x1, b.x1) - max(a.x0, b.x0)) * max(0.0, min(a.y1, b.y1) - max(a.y0, b.y0))


def place_labels(ax: plt.Axes, xys: Sequence[tuple[float, float]], labels: Sequence[str], fontsize: float = 8) -> list:
    """Label data points so that no label covers another, a point, a drawn line or the axes' edge.

    Each label tries a fixed list of spots around its point (right and above first) and takes the first that
    collides with nothing, else the least colliding one; far spots get a leader line. Like matplotlib's
    ``legend(loc="best")``, it is a search over candidate places, so the same data always gives the same
    picture (adjustText's iterative repulsion would add a dependency and scipy to every learner's install).
    Call it after the axes' scales and limits are set. Returns the annotations. :func:`plot_roofline` uses it
    for its points (notebooks `start_here`, `batch_size` and `serving_llms`).
    """
    if len(xys) != len(labels):
        raise ValueError(f"place_labels needs one label per point; got {len(xys)} points and {len(labels)} labels")
    fig = _figure(ax)
    fig.draw_without_rendering()  # fixes the limits and the axes' place, which the boxes depend on
    px = fig.dpi / 72
    gap = MIN_GAP_PT * px  # around each box, so two boxes end up twice the audit's gap apart
    frame = ax.get_window_extent()
    taken = [mpl.text.Text.get_window_extent(t).padded(gap) for t in ax.texts if t.get_visible()]
    marks = [Bbox.from_bounds(x - 4 * px, y - 4 * px, 8 * px, 8 * px) for x, y in ax.transData.transform(xys)]
    lines = [
        line.get_transform().transform_path(line.get_path())
        for line in ax.get_lines()
        if line.get_visible() and line.get_linestyle() not in ("None", "", " ")
    ]
    placed = []
    for i, (xy, label) in enumerate(zip(xys, labels, strict=True)):
        best = None
        for dx, dy, ha, va in _LABEL_SPOTS:
            far = abs(dx) > 10 or abs(dy) > 10
            spot: dict[str, Any] = {
                "xytext": (dx, dy),
                "textcoords": "offset points",
                "ha": ha,
                "va": va,
                "fontsize": fontsize,
            }
            text = ax.annotate(label, xy, **spot)
            box = text.get_window_extent().padded(gap)  # no arrow yet: the text alone
            cost = sum(_overlap_area(box, other) for other in taken)
            cost += sum(_overlap_area(box, mark) for j, mark in enumerate(marks) if j != i)
            cost += 50 * sum(path.intersects_bbox(box, filled=False) for path in lines)
            cost += 10 * (box.width * box.height - _overlap_area(box, frame))  # outside the axes: clipped or lost
            cost += 5 * far  # a near spot wins a tie: the label sits by its point
            text.remove()
            if best is None or cost < best[0]:
                best = (cost, box, spot, far)
            if cost == 0:
                break
        assert best is not None
        _, box, spot, far = best
        leader: dict[str, Any] = {"arrowprops": {"arrowstyle": "-", "color": "grey", "lw": 0.6}} if far else {}
        placed.append(ax.annotate(label, xy, **spot, **leader))
        taken.append(box)
    return placed


def legend_below(ax: plt.Axes, ncols: int = 2, **kwargs) -> mpl.legend.Legend:
    """Put the legend of ``ax`` under its x axis label, where it covers no data.

    Use it where every corner of the axes holds data, as a roofline's does. Call it after the axis labels are
    set; ``kwargs`` go to ``ax.legend``. Taught in notebook `serving_llms`.
    """
    _figure(ax).draw_without_rendering()  # the x axis' tick labels and label are where they will be drawn
    under = ax.xaxis.get_tightbbox() or ax.get_window_extent()
    bottom = under.y0
    below = ax.transAxes.inverted().transform((0, bottom))[1]
    return ax.legend(loc="upper center", bbox_to_anchor=(0.5, below - 0.02), ncols=ncols, **kwargs)


def plot_roofline(
    roofline: Roofline,
    points: Sequence[dict] = (),
    ax: plt.Axes | None = None,
    title: str | None = None,
    label: str | None = None,
    ceilings: Mapping[str, float] | None = None,
) -> plt.Axes:
    """Draw the roofline (log–log) and place operations on it (notebook `start_here`).

    Each point is a dict with ``label``, ``intensity`` (FLOP/byte) and ``flops_per_s`` (achieved).
    ``ceilings`` maps a name to a further compute ceiling (FLOP/s, e.g. a lower precision's peak), drawn as a
    dashed line. Point labels are placed by :func:`place_labels`; the legend goes under the axes.
    """
    if ax is None:
        _, ax = plt.subplots()
    lo = min([p["intensity"] for p in points] + [roofline.ridge_intensity / 100]) / 2
    hi = max([p["intensity"] for p in points] + [roofline.ridge_intensity * 100]) * 2
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(xs, [roofline.attainable(x) / 1e9 for x in xs], color="black", lw=2, label=label or roofline.label)
    for (name, flops_per_s), dashes in zip((ceilings or {}).items(), ("--", "-.", ":") * 9, strict=False):
        ax.axhline(flops_per_s / 1e9, color="grey", ls=dashes, lw=1, label=name)
    ax.axvline(roofline.ridge_intensity, color="grey", ls=":", lw=1)
    in_legend = len(points) > 5  # many points crowd each other's labels: name them in the legend instead
    markers = "osD^vPX"  # 7 markers against 8 colours: no two of the first 56 points look alike
    xys = [(p["intensity"], p["flops_per_s"] / 1e9) for p in points]
    for i, (p, xy) in enumerate(zip(points, xys, strict=True)):
        colour = OKABE_ITO[(i + 1) % len(OKABE_ITO)]
        ax.scatter(
            *xy, color=colour, marker=markers[i % len(markers)], zorder=3, label=p["label"] if in_legend else None
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("performance (GFLOP/s)")
    if title:
        ax.set_title(title)
    legend_below(ax, ncols=3 if in_legend else 2, fontsize=8 if in_legend else None)
    ridge = (roofline.ridge_intensity, roofline.peak_flops / 1e9)
    place_labels(ax, [ridge], [f"ridge {roofline.ridge_intensity:.1f} FLOP/B"])[0].set_color("grey")
    if not in_legend:
        place_labels(ax, xys, [p["label"] for p in points])
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
    """Measured points on log–log axes, with a fitted power law drawn through them (notebooks `input_size`, `model_size`).

    ``fit`` is a :class:`labkit.predict.scaling.PowerLawFit`; its exponent goes into the legend.
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
    log_ticks(ax)  # minor labels on a short log axis crowd
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend()
    return ax
