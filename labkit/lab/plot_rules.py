"""The suite's plotting rules, and the audit that enforces them under ``LABKIT_AUDIT_PLOTS``.

Every axis labelled with its unit, the Okabe–Ito palette (distinguishable with the common forms of colour
blindness), figures that fit the book's column, and text that reads: no label on another label, no legend on
the data, tick labels apart. :func:`audit_figure` checks a figure against these rules; with
``LABKIT_AUDIT_PLOTS=1`` (set by ``make test``) every ``plt.show()`` checks the figures it shows and raises
:class:`PlotStyleError` on a breach, so a notebook that draws an unlabelled axis or two colliding labels fails
its test. The style and the helpers that follow the rules are in :mod:`labkit.lab.plots`.
"""

from __future__ import annotations

import re
import sys

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.category import StrCategoryConverter
from matplotlib.colors import to_rgba
from matplotlib.transforms import Bbox

from ..core import environment
from ..core.errors import PlotStyleError

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
AUDIT_ENV = "LABKIT_AUDIT_PLOTS"
MAX_WIDTH_IN = 9.0  # the book's column is about 850-900 px wide (JupyterLab's ~1100): wider figures shrink, text too
MIN_FONT_PT = 7.0
MIN_GAP_PT = 2.0  # two texts, or two tick labels, closer than this read as one
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
    perceptually uniform (viridis, cividis, ...). The figure is at most 9 inches wide and no text is
    smaller than 7 points, so it reads at the book's column width.

    Text must not collide as drawn (boxes measured with the renderer after laying the figure out): annotations,
    texts, the title and the legend keep 2 points apart, a legend covers no plotted line, bar or point, and
    neighbouring tick labels keep 2 points apart (half a letter where a log axis labels its minor ticks).
    """
    problems = []
    width = fig.get_size_inches()[0]
    name = (fig.get_suptitle() if hasattr(fig, "get_suptitle") else "") or f"figure {fig.number}"
    if width > MAX_WIDTH_IN:
        problems.append(f"{name}: {width:.1f} in wide; at most {MAX_WIDTH_IN:g} in reads at the book's width")
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
    if fig.axes:
        problems += _layout_problems(fig, name)
    return list(dict.fromkeys(problems))


def _inside(ax: plt.Axes, text: mpl.text.Text) -> bool:
    """False for an annotation of a data point outside the axes, which matplotlib does not draw."""
    if not isinstance(text, mpl.text.Annotation) or text.get_annotation_clip() is False or text.xycoords != "data":
        return True
    x, y = ax.transData.transform(text.xy)
    return bool(ax.bbox.contains(x, y))


def _gap(a: Bbox, b: Bbox) -> float:
    """How far apart two boxes are (pixels; negative when they overlap, by the lesser of the two overlaps)."""
    dx = max(a.x0, b.x0) - min(a.x1, b.x1)
    dy = max(a.y0, b.y0) - min(a.y1, b.y1)
    return max(dx, dy)


def _covered_data(ax: plt.Axes, box: Bbox) -> list[str]:
    """The lines, bars and points of ``ax`` that ``box`` (pixels) lies over."""
    inner = box.padded(-2)  # a line that only grazes the legend's padding leaves its text readable
    covered = []
    for line in ax.get_lines():
        if not line.get_visible() or len(np.asarray(line.get_xydata())) == 0:
            continue
        path = line.get_transform().transform_path(line.get_path())
        drawn = line.get_linestyle() not in ("None", "", " ") and line.get_linewidth() > 0
        vertices = np.asarray(path.vertices)
        vertices = vertices[np.isfinite(vertices).all(axis=1)]
        hit = path.intersects_bbox(inner, filled=False) if drawn else bool(inner.count_contains(vertices))
        if hit:
            name = str(line.get_label())
            covered.append(f"the line {name!r}" if not name.startswith("_") else "a plotted line")
    for container in ax.containers:
        if isinstance(container, mpl.container.BarContainer):
            bars = [bar.get_window_extent() for bar in container.patches if bar.get_visible()]
            if any(_gap(inner, bar) < 0 for bar in bars if bar.width > 0 and bar.height > 0):
                name = str(container.get_label())
                covered.append(f"the bars {name!r}" if not name.startswith("_") else "plotted bars")
    for collection in ax.collections:
        if isinstance(collection, mpl.collections.PathCollection) and collection.get_visible():
            xy = np.asarray(collection.get_offset_transform().transform(collection.get_offsets()))
            if inner.count_contains(xy[np.isfinite(xy).all(axis=1)]):
                name = str(collection.get_label())
                covered.append(f"the points {name!r}" if not name.startswith("_") else "plotted points")
    return covered


def _plain(label: str) -> str:
    """A tick label as it reads, without its mathtext markup ("2×10^1", not "$\\mathdefault{2\\times10^{1}}$")."""
    label = re.sub(r"\\mathdefault\{(.*)\}", r"\1", label.strip("$"))
    return re.sub(r"\^\{([^{}]*)\}", r"^\1", label.replace("\\times", "×").replace("\\minus", "-"))


def _tick_labels(axis: mpl.axis.Axis) -> list[tuple[str, Bbox, bool, float]]:
    """The tick labels ``axis`` draws: (text, box in pixels, is minor, font size in points)."""
    lo, hi = sorted(axis.get_view_interval())
    slack = 1e-9 * max(abs(lo), abs(hi), 1e-300)
    labels = []
    for minor in (False, True):
        locs = axis.get_ticklocs(minor=minor)
        ticks = axis.get_minor_ticks(len(locs)) if minor else axis.get_major_ticks(len(locs))
        for loc, tick in zip(locs, ticks, strict=True):
            for text in (tick.label1, tick.label2):
                if lo - slack <= loc <= hi + slack and text.get_visible() and text.get_text().strip():
                    labels.append(
                        (_plain(text.get_text()), text.get_window_extent(), minor, float(text.get_fontsize()))
                    )
    return labels


def _layout_problems(fig: mpl.figure.Figure, name: str) -> list[str]:
    """Text that collides as drawn: labels over labels or a legend over data, and tick labels that do not read."""
    fig.draw_without_rendering()  # lay the figure out as show() will, so every box is where it is drawn
    px_per_pt = fig.dpi / 72
    problems = []
    shown_in = fig.get_tightbbox().width  # what the notebook shows: a legend or title outside the figure widens it
    if shown_in > MAX_WIDTH_IN:
        problems.append(
            f"{name}: drawn {shown_in:.1f} in wide with what sticks out of it (a legend, a title); "
            f"at most {MAX_WIDTH_IN:g} in reads at the book's width: fewer legend columns, shorter text"
        )
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        where = f"{name}, axes {ax.get_title() or fig.axes.index(ax)!r}"
        boxes = [
            (repr(t.get_text()), mpl.text.Text.get_window_extent(t))  # the text alone, without an arrow
            for t in ax.texts
            if t.get_visible() and t.get_text().strip() and _inside(ax, t)
        ]
        if ax.get_title():
            boxes.append((f"the title {ax.get_title()!r}", ax.title.get_window_extent()))
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            boxes.append(("the legend", legend.get_window_extent()))
            for what in _covered_data(ax, legend.get_window_extent()):
                problems.append(
                    f"{where}: the legend covers {what}; move it off the data (loc=, or labkit.legend_below)"
                )
        for i, (a, box_a) in enumerate(boxes):
            for b, box_b in boxes[i + 1 :]:
                if _gap(box_a, box_b) < MIN_GAP_PT * px_per_pt:
                    problems.append(f"{where}: {a} overlaps or touches {b}; move one of them (labkit.place_labels)")
        for axis in (ax.xaxis, ax.yaxis):
            labels = sorted(_tick_labels(axis), key=lambda label: label[1].x0 + label[1].y0)
            minor = [text for text, _, is_minor, _ in labels if is_minor]
            majors = len(labels) - len(minor)
            if axis.get_scale() == "log" and minor and majors >= 2:
                problems.append(
                    f"{where}: the log {axis.axis_name} axis labels its minor ticks {minor} beside {majors} major "
                    "labels; label the major ticks only (labkit.log_ticks)"
                )
            for (a, box_a, minor_a, size), (b, box_b, minor_b, _) in zip(labels, labels[1:], strict=False):
                # "3×10¹" beside "4×10¹" reads as two numbers only with half a letter's height between them
                log_minor = axis.get_scale() == "log" and (minor_a or minor_b)
                need_pt = size / 2 if log_minor else MIN_GAP_PT
                if _gap(box_a, box_b) < need_pt * px_per_pt:
                    fix = "label major ticks only: labkit.log_ticks(ax)" if log_minor else "use fewer ticks (a Locator)"
                    problems.append(f"{where}: the {axis.axis_name} axis tick labels {a!r} and {b!r} crowd; {fix}")
    return problems


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
