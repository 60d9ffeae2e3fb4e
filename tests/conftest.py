import os

os.environ.setdefault("KINETO_LOG_LEVEL", "6")

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
_WALL_TIMES: dict[str, float] = {}
_CLAIMS: list[dict] = []


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def wall_times() -> dict[str, float]:
    """Notebook wall times, printed at the end of the run (the budgets are in the README)."""
    return _WALL_TIMES


@pytest.fixture
def run_claims() -> list[dict]:
    """Every timing claim decided by the notebooks run in this session (labkit.claims verdicts)."""
    return _CLAIMS


def pytest_terminal_summary(terminalreporter):
    if _WALL_TIMES:
        terminalreporter.section("notebook wall times (papermill, quick profile)")
        for name, seconds in _WALL_TIMES.items():
            terminalreporter.write_line(f"{name}: {seconds:.1f} s")
    if _CLAIMS:
        terminalreporter.section("timing claims (labkit.claims)")
        for verdict in ("holds", "undecided", "contradicted"):
            count = sum(c["verdict"] == verdict for c in _CLAIMS)
            terminalreporter.write_line(f"{verdict}: {count}")
