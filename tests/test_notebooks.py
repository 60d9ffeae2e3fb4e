"""Every notebook, executed top to bottom by papermill with the quick parameters."""

import json

import nbformat
import pytest
from conftest import NOTEBOOKS

from labkit.report import run_notebook

BUDGET_S = 45  # each notebook's quick-profile budget on 2 CPU cores (kernel start included)


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_with_quick_parameters(path, tmp_path, wall_times):
    run = run_notebook(path, tmp_path / path.name, profile="quick", results_dir=tmp_path / "results")
    if run["status"] != "ok" and "AssertionError" in (run["error"] or ""):
        # A timing claim can fail when a shared machine has a busy spell; the notebook runs once more and the
        # claim must hold then. Any other error, or the same claim failing twice, fails the test.
        print(f"{path.name}: first run failed ({run['error']}); running it once more")
        run = run_notebook(path, tmp_path / path.name, profile="quick", results_dir=tmp_path / "results")
    wall_times[path.stem] = run["wall_s"]
    assert run["status"] == "ok", f"{path.name}: {run['error']} (executed copy: {tmp_path / path.name})"

    executed = nbformat.read(tmp_path / path.name, as_version=4)
    errors = [o for c in executed.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    assert any(c.metadata.get("tags") == ["injected-parameters"] for c in executed.cells)

    saved = json.loads((tmp_path / "results" / f"{path.stem}.json").read_text())
    assert saved["card"]["profile"] == "quick"
    assert saved["summary"], "each notebook records headline results for the report"
    # A runaway guard, not a timing claim: three times the budget means something is wrong.
    assert run["wall_s"] < 3 * BUDGET_S
