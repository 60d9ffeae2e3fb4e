"""One plotting style for the whole suite, and the progress bar used by every sweep.

Small figures, log axes for sweeps, every axis labelled with its unit, and the Okabe–Ito palette
(distinguishable with the common forms of colour blindness). :func:`audit_figure` checks a figure
against these rules; with ``LABKIT_AUDIT_PLOTS=1`` (set by ``make test``) every ``plt.show()``
checks the figures it shows and raises :class:`PlotStyleError` on a breach, so a notebook that
draws an unlabelled axis fails its test.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from cycler import cycler
from matplotlib.category import StrCategoryConverter
from matplotlib.colors import to_rgba
from matplotlib.ticker import NullFormatter
from tqdm.auto import tqdm

from ..core import environment
from ..core.errors import PlotStyleError
from ..instruments.ceilings import Roofline

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
AUDIT_ENV = "LABKIT_AUDIT_PLOTS"
MAX_WIDTH_IN = 11.0  # JupyterLab's notebook column is about 1100 px wide; wider figures are shrunk, text with them
MIN_FONT_PT = 7.0
_UNIT = re.compile(r"\([^()]*\S[^()]*\)|\[[^\[\]]*\S[^\[\]]*\]")  # "(ms)", "[GB/s]"


def _allowed_colour(rgba) -> bool:
    r, g, b, a = rgba
    if a == 0 or (abs(r - g) < 0.02 and abs(g - b) < 0.02):  # invisible, or a grey (black and white included)
        return True
    return any(max(abs(x - y) for x, y in zip(rgba[:3], to_rgba(c)[:3], strict=True)) < 0.02 for c in OKABE_ITO)


def _colours(artist) -> list:
    if isinstance(artist, mpl.lines.Line2D):
        return [to_rgba(artist.get_color())]
    if isinstance(artist, mpl.collections.Collection):
        if artist.get_array() is not None:  # coloured by a colormap: checked by name below
            return []
        faces, edges = np.atleast_2d(artist.get_facecolor()), np.atleast_2d(artist.get_edgecolor())
        return [tuple(c) for c in faces] + [tuple(c) for c in edges]
    if isinstance(artist, mpl.patches.Patch):
        return [artist.get_facecolor()]
    return []


def audit_figure(fig: mpl.figure.Figure) -> list[str]:
    """The ways ``fig`` breaks the suite's rules (an empty list if none).

    Every axis with numeric ticks has a label naming its unit, in parentheses or brackets ("time (ms)",
    "batch size (samples)"); an axis of category names, an axis without ticks and an axis sharing its
    neighbour's label are exempt. Colours come from the Okabe–Ito palette or are greys; colormaps are
    perceptually uniform (viridis, cividis, ...). The figure is at most 11 inches wide and no text is
    smaller than 7 points, so it reads at the notebook's default width.
    """
    problems = []
    width = fig.get_size_inches()[0]
    name = (fig.get_suptitle() if hasattr(fig, "get_suptitle") else "") or f"figure {fig.number}"
    if width > MAX_WIDTH_IN:
        problems.append(f"{name}: {width:.1f} in wide; at most {MAX_WIDTH_IN:g} in reads at the notebook's width")
    for text in fig.findobj(mpl.text.Text):
        if text.get_visible() and text.get_text().strip() and float(text.get_fontsize()) < MIN_FONT_PT:
            problems.append(f"{name}: text {text.get_text()!r} is {text.get_fontsize():g} pt, below {MIN_FONT_PT:g}")
    for ax in fig.axes:
        if not ax.get_visible() or not ax.has_data():
            continue
        where = f"{name}, axes {ax.get_title() or fig.axes.index(ax)!r}"
        for axis, shared in ((ax.xaxis, ax.get_shared_x_axes()), (ax.yaxis, ax.get_shared_y_axes())):
            if isinstance(axis.get_converter(), StrCategoryConverter) or len(axis.get_ticklocs()) == 0:
                continue
            label = axis.get_label_text()
            if not label.strip():
                siblings = [s for s in shared.get_siblings(ax) if s is not ax]
                if any((s.xaxis if axis is ax.xaxis else s.yaxis).get_label_text() for s in siblings):
                    continue
                problems.append(f"{where}: the {axis.axis_name} axis has no label")
            elif not _UNIT.search(label):
                problems.append(f"{where}: the {axis.axis_name} axis label {label!r} names no unit, e.g. 'time (ms)'")
        for artist in ax.get_children():
            if isinstance(artist, mpl.collections.Collection) and artist.get_array() is not None:
                cmap = artist.get_cmap().name
                if cmap not in ("viridis", "cividis", "magma", "inferno", "plasma", "Greys", "gray"):
                    problems.append(f"{where}: colormap {cmap!r} is not perceptually uniform; use viridis or cividis")
            for rgba in _colours(artist):
                if not _allowed_colour(rgba):
                    problems.append(f"{where}: colour {mpl.colors.to_hex(rgba)} is not in the Okabe–Ito palette")
                    break
    return list(dict.fromkeys(problems))


def _audited_show(original):
    def show(*args, **kwargs):
        problems = [p for num in plt.get_fignums() for p in audit_figure(plt.figure(num))]
        if problems:
            message = "this figure breaks the suite's plotting rules:\n  " + "\n  ".join(problems)
            if environment.get(AUDIT_ENV) == "warn":
                print(f"labkit: {message}", file=sys.stderr)
            else:
                raise PlotStyleError(message)
        return original(*args, **kwargs)

    show.labkit_audited = True  # type: ignore[attr-defined]  # marks a show() already wrapped
    return show


def audit_requested() -> bool:
    """True when ``LABKIT_AUDIT_PLOTS`` asks for the plot audit (``1`` raises on a breach, ``warn`` prints it)."""
    return environment.get(AUDIT_ENV) in ("1", "warn")


def install_audit() -> None:
    """Make ``plt.show()`` audit every open figure first (``labkit.start`` does it when ``LABKIT_AUDIT_PLOTS`` is set).

    ``LABKIT_AUDIT_PLOTS=1`` raises :class:`PlotStyleError` on a breach; ``=warn`` prints it instead.
    """
    if not getattr(plt.show, "labkit_audited", False):
        plt.show = _audited_show(plt.show)


def use_style() -> None:
    """Apply the suite's matplotlib style (``labkit.start`` does it)."""
    mpl.rcParams.update(
        {
            "figure.figsize": (6.4, 3.8),
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


def plot_roofline(
    roofline: Roofline,
    points: Sequence[dict] = (),
    ax: plt.Axes | None = None,
    title: str | None = None,
    label: str | None = None,
) -> plt.Axes:
    """Draw the roofline (log–log) and place operations on it (notebook `start_here`).

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
    ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels on a short log axis overlap
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend()
    return ax
