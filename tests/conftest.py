import os
import time

os.environ.setdefault("KINETO_LOG_LEVEL", "6")

from pathlib import Path

import pytest

from labkit.lab import manifest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = manifest.paths(ROOT / "notebooks")  # in teaching order
_WALL_TIMES: dict[str, tuple[float, float]] = {}
_CLAIMS: list[dict] = []
_SESSION_STARTED = time.time()  # conftest is imported as the session starts, before any test runs


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def session_started() -> float:
    """When this pytest session started (time.time()): records older than it are left from an earlier run."""
    return _SESSION_STARTED


@pytest.fixture
def wall_times() -> dict[str, tuple[float, float]]:
    """Notebook wall times, to the learner's last cell and to the end of the solved exercises, printed at the end
    of the run (the budgets are in the manifest)."""
    return _WALL_TIMES


@pytest.fixture
def run_claims() -> list[dict]:
    """Every timing claim decided by the notebooks run in this session (labkit.claims verdicts)."""
    return _CLAIMS


def pytest_terminal_summary(terminalreporter):
    if _WALL_TIMES:
        terminalreporter.section("notebook wall times (quick profile, from the kernel's start)")
        for name, (learner, solved) in _WALL_TIMES.items():
            terminalreporter.write_line(f"{name}: {learner:.1f} s to the learner's last cell, {solved:.1f} s solved")
    if _CLAIMS:
        terminalreporter.section("timing claims (labkit.claims)")
        for verdict in ("holds", "undecided", "contradicted"):
            count = sum(c["verdict"] == verdict for c in _CLAIMS)
            terminalreporter.write_line(f"{verdict}: {count}")


@pytest.fixture(scope="module")
def gpt():
    """A tiny seeded TinyGPT (vocab 64, context 96) for the serving tests: the engine, the paged cache, live traffic."""
    import torch

    from labkit.workloads import models

    torch.manual_seed(0)
    return models.TinyGPT(vocab=64, max_len=96, d_model=32, n_layers=2, n_heads=2).eval()


def greedy_continuation(model, prompt: list[int], n: int) -> list[int]:
    """The ``n`` tokens ``model`` generates greedily after ``prompt``: what a served request must receive."""
    import torch

    return model.generate(torch.tensor([prompt]), n)[0, len(prompt) :].tolist()


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium driven by Playwright, for the browser tier (tests/test_browser.py, tests/test_book_layout.py).

    Skipped where Chromium is missing, unless LABKIT_REQUIRE_BROWSER is set (CI): then that is a failure."""
    from test_browser import ARTIFACTS, CHROMIUM_FLAGS, _chromium

    chromium = _chromium()
    if chromium is None:
        message = "Chromium not found (Debian: apt-get install chromium; or set LABKIT_CHROMIUM)"
        if os.environ.get("LABKIT_REQUIRE_BROWSER", "") not in ("", "0"):
            pytest.fail(message + ", and LABKIT_REQUIRE_BROWSER is set")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        chrome = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
        try:
            yield chrome
        finally:
            chrome.close()
