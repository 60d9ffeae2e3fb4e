"""labkit.lab.plots: the suite's plotting rules, and the audit that enforces them in every notebook."""

import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from labkit.lab import plots


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
    assert plots.audit_figure(good_figure()) == []


def test_a_shared_axis_is_labelled_once():
    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3), sharey=True)
    for ax in (a, b):
        ax.plot([1, 2], [3, 4])
        ax.set_xlabel("hour of the day (h)")
    a.set_ylabel("devices in use (GPUs)")
    assert plots.audit_figure(fig) == []


def test_each_breach_is_named():
    fig, ax = plt.subplots(figsize=(12, 3))
    ax.plot([1, 2, 3], [1, 4, 9], color="red")
    ax.set_xlabel("batch size")  # no unit
    ax.text(1, 1, "tiny", fontsize=5)
    problems = "\n".join(plots.audit_figure(fig))
    assert "12.0 in wide" in problems
    assert "'batch size' names no unit" in problems
    assert "the y axis has no label" in problems
    assert "'tiny' is 5 pt" in problems
    assert "colour #ff0000 is not in the Okabe–Ito palette" in problems


def test_a_rainbow_colormap_is_refused():
    fig, ax = plt.subplots()
    ax.scatter([1, 2], [1, 2], c=[0.0, 1.0], cmap="jet")
    ax.set(xlabel="x (m)", ylabel="y (m)")
    assert any("colormap 'jet'" in p for p in plots.audit_figure(fig))


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
