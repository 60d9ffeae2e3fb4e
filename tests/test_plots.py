"""labkit.lab.plots: the suite's plotting rules, and the audit that enforces them in every notebook."""

import subprocess
import sys

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from labkit.instruments.ceilings import Roofline
from labkit.lab import plot_rules, plots


@pytest.fixture(autouse=True)
def _style_and_close_figures():
    with matplotlib.rc_context():
        plots.use_style()  # what labkit.start applies: the Okabe–Ito colour cycle, so "C0" is in the palette
        yield
    plt.close("all")


def good_figure():
    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3), sharey=True)
    a.plot([1, 2, 3], [1, 4, 9], color="C0")
    a.set(xlabel="batch size (samples)", ylabel="time (ms)")
    b.barh(["alone", "together"], [3.0, 40.0], color="C1")  # a categorical axis needs no unit
    b.set_xlabel("latency [ms]")
    b.axhline(0.5, color="grey")
    return fig


def test_a_figure_that_follows_the_rules_passes():
    assert plot_rules.audit_figure(good_figure()) == []


def test_a_shared_axis_is_labelled_once():
    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3), sharey=True)
    for ax in (a, b):
        ax.plot([1, 2], [3, 4])
        ax.set_xlabel("hour of the day (h)")
    a.set_ylabel("devices in use (GPUs)")
    assert plot_rules.audit_figure(fig) == []


def test_each_breach_is_named():
    fig, ax = plt.subplots(figsize=(12, 3))
    ax.plot([1, 2, 3], [1, 4, 9], color="red")
    ax.set_xlabel("batch size")  # no unit
    ax.text(1, 1, "tiny", fontsize=5)
    problems = "\n".join(plot_rules.audit_figure(fig))
    assert "12.0 in wide" in problems
    assert "'batch size' names no unit" in problems
    assert "the y axis has no label" in problems
    assert "'tiny' is 5 pt" in problems
    assert "colour #ff0000 is not in the Okabe–Ito palette" in problems


def test_a_rainbow_colormap_is_refused():
    fig, ax = plt.subplots()
    ax.scatter([1, 2], [1, 2], c=[0.0, 1.0], cmap="jet")
    ax.set(xlabel="x (m)", ylabel="y (m)")
    assert any("colormap 'jet'" in p for p in plot_rules.audit_figure(fig))


@pytest.mark.processes
def test_the_audit_makes_show_fail_in_a_notebook_process():
    code = (
        "import matplotlib; matplotlib.use('Agg'); import labkit, matplotlib.pyplot as plt\n"
        "labkit.start('start_here', 'quick', 'cpu', show=False)\n"
        "fig, ax = plt.subplots(); ax.plot([1, 2], [1, 2]); ax.set(xlabel='x (m)', ylabel='y (m)'); plt.show()\n"
        "fig, ax = plt.subplots(); ax.plot([1, 2], [1, 2]); plt.show()\n"
    )
    env = {"LABKIT_AUDIT_PLOTS": "1", "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode != 0 and "PlotStyleError" in run.stderr and "has no label" in run.stderr
    env["LABKIT_AUDIT_PLOTS"] = "warn"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0 and "has no label" in run.stderr


def problems_of(fig) -> str:
    return "\n".join(plot_rules.audit_figure(fig))


def labelled_axes(**kwargs):
    fig, ax = plt.subplots(**kwargs)
    ax.set(xlabel="batch size (samples)", ylabel="time (ms)")
    return fig, ax


def test_labels_that_overlap_fail_and_name_both_texts():
    fig, ax = labelled_axes()
    ax.plot([1, 2, 3], [1, 4, 9])
    ax.annotate("vector add (new output)", (2, 4))
    ax.annotate("vector add (out=)", (2, 4.3))
    assert "'vector add (new output)' overlaps or touches 'vector add (out=)'" in problems_of(fig)


def test_labels_apart_and_a_legend_beside_the_data_pass():
    fig, ax = labelled_axes()
    ax.plot([1, 2, 3], [1, 4, 9], label="measured")
    ax.annotate("small batch", (1, 1), xytext=(5, 3), textcoords="offset points")
    ax.annotate("large batch", (3, 9), xytext=(-5, -3), textcoords="offset points", ha="right", va="top")
    ax.legend(loc="upper left")  # the line rises from the lower left to the upper right: that corner is empty
    assert plot_rules.audit_figure(fig) == []


def test_a_legend_over_a_line_or_over_points_fails():
    fig, ax = labelled_axes()
    ax.plot([1, 2, 3], [1, 4, 9], label="measured")
    ax.axhline(5, color="grey", ls="--", label="bfloat16 peak")  # the ceiling start_here's legend once hid
    ax.legend(loc="center left")
    problems = problems_of(fig)
    assert "the legend covers the line 'bfloat16 peak'" in problems
    fig, ax = labelled_axes()
    ax.scatter([1, 2, 3], [1, 2, 3], label="runs")
    ax.legend(loc="center", markerscale=0.1)
    assert "the legend covers the points 'runs'" in problems_of(fig)
    fig, ax = labelled_axes()
    ax.barh(["0 workers", "1 worker"], [250.0, 270.0], label="waiting for data")  # where_time_goes' bars
    ax.legend(loc="upper right")
    assert "the legend covers the bars 'waiting for data'" in problems_of(fig)


def shown_labels(ax) -> list[str]:
    ax.figure.draw_without_rendering()
    lo, hi = ax.get_xlim()
    return [t.get_text() for t, x in zip(ax.get_xticklabels(), ax.get_xticks(), strict=True) if lo <= x <= hi]


def test_crowded_minor_labels_on_a_log_axis_fail_until_only_major_ticks_are_labelled():
    fig, ax = labelled_axes(figsize=(4, 2.5))
    ax.plot([12, 90], [1, 2])  # under a decade: matplotlib labels the minor ticks 2×10^1, 3×10^1, ...
    ax.set_xscale("log")
    problems = problems_of(fig)
    assert "the x axis tick labels '2×10^1' and '3×10^1' crowd" in problems, problems
    assert "labkit.log_ticks(ax)" in problems
    plots.log_ticks(ax)
    assert plot_rules.audit_figure(fig) == []
    assert shown_labels(ax) == ["20", "50"]  # 1, 2 and 5 × 10^k, as plain numbers
    assert [t.get_text() for t in ax.xaxis.get_minorticklabels() if t.get_text()] == []


def test_minor_labels_beside_two_major_labels_fail():
    fig, ax = labelled_axes()
    ax.plot([1, 1000], [1, 2])
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.LogFormatter(labelOnlyBase=False, minor_thresholds=(9, 9)))
    problems = problems_of(fig)
    assert "the log x axis labels its minor ticks" in problems and "label the major ticks only" in problems


def test_log_ticks_label_whole_decades_on_a_long_axis():
    fig, ax = labelled_axes()
    ax.plot([1e-2, 1e6], [1, 2])
    ax.set_xscale("log")
    plots.log_ticks(ax)
    shown = shown_labels(ax)
    assert shown[:3] == ["0.01", "0.1", "1"] and shown[-2:] == ["$10^{5}$", "$10^{6}$"], shown  # whole decades
    assert plot_rules.audit_figure(fig) == []


def test_tick_labels_that_overlap_fail():
    fig, ax = labelled_axes(figsize=(3, 2.5))
    ax.plot([0, 10], [0, 1])
    ax.set_xticks(range(0, 11), [f"{k} samples" for k in range(0, 11)])
    assert "the x axis tick labels '0 samples' and '1 samples' crowd; use fewer ticks" in problems_of(fig)


ROOFLINE = Roofline(peak_flops=92e9, bandwidth=27e9, label="float32 roofline")
POINTS = [  # start_here's operations as one run measured them: two labels fell on each other
    {"label": "vector add (new output)", "intensity": 0.083, "flops_per_s": 2.7e9},
    {"label": "vector add (out=)", "intensity": 0.083, "flops_per_s": 2.3e9},
    {"label": "matrix-vector", "intensity": 0.5, "flops_per_s": 11e9},
    {"label": "tall-skinny matmul", "intensity": 32, "flops_per_s": 64e9},
    {"label": "matmul 1024 (the ceiling)", "intensity": 170, "flops_per_s": 92e9},
]


def test_labels_placed_at_one_offset_collide_on_the_roofline():
    """The audit catches what plot_roofline used to draw: every label up and to the right of its point."""
    fig, ax = labelled_axes()
    for p in POINTS:
        ax.scatter(p["intensity"], p["flops_per_s"] / 1e9)
        ax.annotate(p["label"], (p["intensity"], p["flops_per_s"] / 1e9), xytext=(5, 4), textcoords="offset points")
    ax.set(xscale="log", yscale="log")
    assert "'vector add (new output)' overlaps or touches 'vector add (out=)'" in problems_of(fig)


def test_the_roofline_places_its_labels_apart_and_its_legend_under_the_axes():
    ax = plots.plot_roofline(ROOFLINE, POINTS, title="roofline", ceilings={"bfloat16 peak": 200e9})
    assert plot_rules.audit_figure(ax.figure) == []
    texts = {t.get_text(): t.get_window_extent() for t in ax.texts}
    assert set(texts) == {p["label"] for p in POINTS} | {"ridge 3.4 FLOP/B"}
    legend = ax.get_legend().get_window_extent()
    assert legend.y1 < ax.xaxis.label.get_window_extent().y0  # under the x label, clear of the data
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["float32 roofline", "bfloat16 peak"]
    again = plots.plot_roofline(ROOFLINE, POINTS, title="roofline", ceilings={"bfloat16 peak": 200e9})
    assert [t.get_position() for t in again.texts] == [t.get_position() for t in ax.texts]  # deterministic


def test_place_labels_needs_one_label_per_point():
    _, ax = labelled_axes()
    with pytest.raises(ValueError, match="one label per point; got 2 points and 1 labels"):
        plots.place_labels(ax, [(1, 1), (2, 2)], ["only one"])


def test_a_legend_that_sticks_out_of_the_figure_counts_in_its_width():
    fig, ax = labelled_axes()
    for k in range(6):
        ax.plot([1, 2], [k, k + 1], label=f"a long description of curve number {k} and its settings")
    fig.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), ncols=3)
    assert "in wide with what sticks out of it" in problems_of(fig)


def test_the_style_sizes_figures_for_the_book_column():
    fig, ax = labelled_axes()
    ax.plot([1, 2], [1, 2])
    width_px = fig.get_size_inches()[0] * fig.dpi
    assert 800 <= width_px <= 900 and fig.get_size_inches()[0] <= plot_rules.MAX_WIDTH_IN
    assert plot_rules.audit_figure(fig) == []
