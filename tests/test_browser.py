"""The learner's view: JupyterLab in a real (headless) Chromium, driven by Playwright.

The test starts its own JupyterLab on 127.0.0.1 and a free port, with every Jupyter, IPython and
matplotlib directory inside a temporary folder, opens notebook `start_here`, runs all cells the way a learner
does, and checks what a learner would see: no cell failed, the roofline plot is drawn, and the
slider under "Try it" answers when it is moved. A second test shows that the harness fails on a
notebook with a failing cell. Screenshots are kept in build/test-artifacts/browser/.

Chromium is Debian's package (``apt-get install chromium``); Playwright drives it through
``executable_path``, so no browser is downloaded. Without Chromium the tests are skipped, unless
``LABKIT_REQUIRE_BROWSER=1`` (set by CI), which makes a missing browser a failure.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "build" / "test-artifacts" / "browser"
NOTEBOOK = "start_here.ipynb"
CHROMIUM_FLAGS = [  # no sandbox as root in a container; no calls home on a closed network
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]
# JupyterLab settings for a test: no news or update checks (the machine has no network, and the
# notification would cover the notebook), no autosave, and every cell rendered (JupyterLab 4 renders
# only the cells in view by default, so a check of a cell further down would find nothing).
LAB_OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
}


def _chromium() -> str | None:
    for candidate in (os.environ.get("LABKIT_CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """A JupyterLab server for one test session, stopped by process group whatever happens."""

    def __init__(self, base: Path):
        self.base = base
        self.root = base / "work"
        self.token = secrets.token_hex(16)
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.log_path = ARTIFACTS / "jupyterlab.log"

    def env(self) -> dict[str, str]:
        home = self.base / "home"
        dirs = {
            "HOME": home,
            "JUPYTER_CONFIG_DIR": home / "jupyter-config",
            "JUPYTER_DATA_DIR": home / "jupyter-data",
            "JUPYTER_RUNTIME_DIR": home / "jupyter-runtime",
            "JUPYTERLAB_SETTINGS_DIR": home / "lab-user-settings",
            "JUPYTERLAB_WORKSPACES_DIR": home / "lab-workspaces",
            "IPYTHONDIR": home / "ipython",
            "MPLCONFIGDIR": home / "matplotlib",
            "XDG_CACHE_HOME": home / "cache",
            "XDG_CONFIG_HOME": home / "config",
            "LABKIT_RESULTS_DIR": self.base / "results",
        }
        for d in dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_HEADLESS", "JUPYTER_PATH")}
        env.update({k: str(v) for k, v in dirs.items()})
        env["LABKIT_PROFILE"] = "quick"  # widgets are drawn: LABKIT_HEADLESS is not set
        return env

    def start(self) -> None:
        (self.root / "notebooks").mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "notebooks" / NOTEBOOK, self.root / "notebooks" / NOTEBOOK)
        settings = self.base / "lab-app-settings"
        settings.mkdir(exist_ok=True)
        (settings / "overrides.json").write_text(json.dumps(LAB_OVERRIDES))
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for _attempt in range(3):  # a port picked free can be taken before the server binds it; pick again
            self.port = _free_port()
            cmd = [
                sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
                f"--LabApp.app_settings_dir={settings}", "--LabApp.news_url=", "--LabApp.expose_app_in_browser=True",
                "--ServerApp.allow_root=True",
            ]  # fmt: skip
            with open(self.log_path, "w") as log:
                self.proc = subprocess.Popen(
                    cmd, env=self.env(), cwd=self.root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
            if self._wait_ready(deadline_s=90):
                return
            self.stop()
        raise RuntimeError(f"JupyterLab did not start; see {self.log_path}")

    def _wait_ready(self, deadline_s: float) -> bool:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=2) as r:
                    if r.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.3)
        return False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        """Stop the server and its kernels: the whole process group, by its id."""
        if self.proc is None:
            return
        try:
            group = [p for p in psutil.process_iter() if _pgid(p.pid) == self.proc.pid]
            os.killpg(self.proc.pid, signal.SIGTERM)
            _, alive = psutil.wait_procs(group, timeout=10)
            for p in alive:
                p.kill()
            psutil.wait_procs(alive, timeout=5)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=5)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


@pytest.fixture(scope="module")
def lab(browser, tmp_path_factory):
    home_before = set(os.listdir(Path.home()))
    server = LabServer(tmp_path_factory.mktemp("lab"))
    try:
        server.start()
        yield server, browser
    finally:
        server.stop()
        leftover = [p.pid for p in psutil.process_iter() if _pgid(p.pid) == server.proc.pid] if server.proc else []
        assert not leftover, f"processes of the JupyterLab server survived its stop: {leftover}"
        new_in_home = set(os.listdir(Path.home())) - home_before
        assert not new_in_home, f"the browser test left files in the home directory: {sorted(new_in_home)}"


# -- driving a notebook -----------------------------------------------------------------------------

_PANEL = "window.jupyterapp.shell.currentWidget"
_KERNEL_READY = f"""() => {{
    const panel = {_PANEL};
    const kernel = panel && panel.sessionContext && panel.sessionContext.session
        && panel.sessionContext.session.kernel;
    return !!kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
}}"""
_STATE = f"""() => {{
    const panel = {_PANEL};
    const cells = panel.content.widgets.filter(c => c.model.type === 'code');
    const errors = [];
    cells.forEach((c, i) => c.model.outputs.toJSON().forEach(o => {{
        if (o.output_type === 'error') errors.push({{cell: i, ename: o.ename, evalue: o.evalue}});
    }}));
    const prompts = Array.from(panel.node.querySelectorAll('.jp-InputPrompt')).map(p => p.textContent);
    return {{
        kernel: panel.sessionContext.session.kernel.status,
        executed: cells.filter(c => c.model.executionCount !== null).length,
        code_cells: cells.length,
        pending: prompts.filter(t => t.includes('*')).length,
        errors: errors,
    }};
}}"""


def open_notebook(page, server: LabServer, name: str) -> None:
    page.goto(f"{server.url}/lab/tree/notebooks/{name}?token={server.token}")
    page.wait_for_function(
        f"() => window.jupyterapp && {_PANEL} && {_PANEL}.content && {_PANEL}.context.path.endsWith('{name}')",
        timeout=90_000,
    )
    # A fresh server's "Run All" does nothing until the kernel has started and reported idle.
    page.wait_for_function(_KERNEL_READY, timeout=90_000, polling=250)


def run_all(page, timeout_s: float = 240) -> dict:
    """Run all cells as the Run menu does, and wait until the kernel is idle with nothing pending."""
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    end, settled = time.monotonic() + timeout_s, 0
    state = page.evaluate(_STATE)
    while time.monotonic() < end:
        time.sleep(0.5)
        state = page.evaluate(_STATE)
        done = state["pending"] == 0 and state["kernel"] == "idle"
        finished = state["executed"] == state["code_cells"] or state["errors"]
        settled = settled + 1 if done and finished else 0
        if settled >= 3:  # the same for 1.5 s: not a gap between two cells
            return state
    raise AssertionError(f"the notebook did not finish within {timeout_s:.0f} s: {state}")


def cell_with(page, text: str, tag: str) -> object:
    """The cell whose source contains ``text``, marked with a data attribute so Playwright can find it."""
    found = page.evaluate(
        f"""([text, tag]) => {{
        const cell = {_PANEL}.content.widgets.find(c => c.model.sharedModel.getSource().includes(text));
        if (!cell) return false;
        cell.node.setAttribute('data-labkit-test', tag);
        return true;
    }}""",
        [text, tag],
    )
    assert found, f"no cell contains {text!r}"
    return page.locator(f'[data-labkit-test="{tag}"]')


# -- the tests --------------------------------------------------------------------------------------


def test_notebook_00_runs_in_jupyterlab_with_its_plot_and_a_working_slider(lab):
    server, browser = lab
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        open_notebook(page, server, NOTEBOOK)
        page.screenshot(path=ARTIFACTS / "00-opened.png")
        state = run_all(page)
        page.screenshot(path=ARTIFACTS / "00-after-run-all.png", full_page=True)
        assert state["errors"] == [], f"cells failed in the browser: {state['errors']}"
        assert state["executed"] == state["code_cells"], state

        roofline = cell_with(page, "labkit.plot_roofline(", "roofline")
        roofline.scroll_into_view_if_needed()
        image = roofline.locator(".jp-OutputArea-output img").first
        image.wait_for(state="visible", timeout=10_000)
        width = image.evaluate("img => img.complete ? img.naturalWidth : 0")
        assert width > 300, f"the roofline image did not render (width {width}px)"
        roofline.screenshot(path=ARTIFACTS / "00-roofline.png")

        control = cell_with(page, "labkit.interact(where_does_it_land", "slider")
        control.scroll_into_view_if_needed()
        control.locator(".widget-slider").first.wait_for(state="visible", timeout=20_000)
        output = control.locator(".jupyter-widgets .jp-OutputArea-output").last
        output.wait_for(timeout=20_000)
        assert "256x256 matmul" in output.inner_text(), output.inner_text()
        control.screenshot(path=ARTIFACTS / "00-slider-before.png")
        readout = control.locator(".widget-readout").first
        readout.click()
        page.keyboard.press("Control+A")
        page.keyboard.type("4096")
        page.keyboard.press("Enter")
        page.wait_for_function(
            "() => document.querySelector('[data-labkit-test=\"slider\"]').innerText.includes('4096x4096 matmul')",
            timeout=20_000,
        )
        assert "compute-bound" in control.inner_text()
        control.screenshot(path=ARTIFACTS / "00-slider-after.png")
    finally:
        page.close()


def test_the_browser_check_fails_when_a_cell_raises(lab):
    server, browser = lab
    broken = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": "a", "metadata": {}, "outputs": [],
             "source": "print('before')"},
            {"cell_type": "code", "execution_count": None, "id": "b", "metadata": {}, "outputs": [],
             "source": "raise RuntimeError('a deliberate failure')"},
            {"cell_type": "code", "execution_count": None, "id": "c", "metadata": {}, "outputs": [],
             "source": "print('after')"},
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }  # fmt: skip
    (server.root / "notebooks" / "broken.ipynb").write_text(json.dumps(broken))
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        open_notebook(page, server, "broken.ipynb")
        state = run_all(page, timeout_s=60)
        page.screenshot(path=ARTIFACTS / "broken-after-run-all.png")
    finally:
        page.close()
    assert [(e["cell"], e["ename"]) for e in state["errors"]] == [(1, "RuntimeError")]
    assert state["executed"] == 2, "execution should stop at the failing cell"


def test_the_report_renders_offline_with_its_plots(browser, tmp_path):
    from test_report import make_report

    make_report(tmp_path)
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    try:
        page.goto((tmp_path / "build" / "report.html").as_uri())
        page.wait_for_load_state("load")
        images = page.evaluate("() => Array.from(document.images).map(i => i.complete ? i.naturalWidth : 0)")
        page.screenshot(path=ARTIFACTS / "report.png", full_page=True)
        text = page.inner_text("body")
    finally:
        page.close()
    assert images and all(w > 100 for w in images), f"report images did not render: widths {images}"
    fetched = [u for u in requests if not u.startswith("data:")]
    assert fetched == [(tmp_path / "build" / "report.html").as_uri()], f"the report fetched more: {fetched}"
    assert "00 · Good" in text and "01 · Bad" in text and "RuntimeError: deliberate failure" in text


def test_the_book_opens_offline_with_its_plots_verdicts_and_folded_solutions(browser, tmp_path):
    from test_book import make_book

    code, site = make_book(tmp_path)
    assert code == 0
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    try:
        page.goto((site / "index.html").as_uri())
        page.wait_for_load_state("load")
        index_text = page.inner_text("body")
        page.screenshot(path=ARTIFACTS / "book-index.png", full_page=True)
        page.click("text=00 · Good")
        page.wait_for_load_state("load")
        page.wait_for_function("() => document.querySelector('.MathJax_CHTML, .MathJax') !== null", timeout=15000)
        images = page.evaluate(
            "() => Array.from(document.querySelectorAll('article img')).map(i => i.complete ? i.naturalWidth : 0)"
        )
        folded = page.evaluate("() => Array.from(document.querySelectorAll('details')).map(d => d.open)")
        text = page.inner_text("article")
        page.screenshot(path=ARTIFACTS / "book-page.png", full_page=True)
    finally:
        page.close()
    assert "00 · Good" in index_text and "01 · Other" in index_text and "Why is x so slow?" in index_text
    assert images and all(w > 100 for w in images), f"the plot did not render: widths {images}"
    assert folded == [False], "the solution is folded until the reader opens it"
    assert "x is above 1" in text and "holds" in text and "1 timing claims: 1 hold" in text
    fetched = [u for u in requests if not u.startswith(("file://", "data:", "about:"))]
    assert not fetched, f"the book fetched from the network: {fetched}"
