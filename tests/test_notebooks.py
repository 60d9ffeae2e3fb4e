"""Every notebook, executed top to bottom by papermill with the quick parameters, its exercises solved.

nbval (make test's notebook tier) runs the notebooks as a learner gets them, exercises unsolved; this tier runs
each with its folded solutions filled in and its checkers asserting (tests/solutions.py): every solution must
be judged right, and a plainly wrong answer wrong.
"""

import json

import nbformat
import pytest
from conftest import NOTEBOOKS
from solutions import with_solutions

from labkit import claims
from labkit.report import run_notebook

BUDGET_S = 30  # each notebook's quick-profile budget on 2 CPU cores (kernel start included)


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_with_quick_parameters(path, tmp_path, wall_times, run_claims):
    solved = tmp_path / "solved" / path.name
    solved.parent.mkdir()
    nbformat.write(with_solutions(nbformat.read(path, as_version=4)), solved)
    run = run_notebook(solved, tmp_path / path.name, profile="quick", results_dir=tmp_path / "results")
    wall_times[path.stem] = run["wall_s"]
    assert run["status"] == "ok", f"{path.name}: {run['error']} (executed copy: {tmp_path / path.name})"

    executed = nbformat.read(tmp_path / path.name, as_version=4)
    errors = [o for c in executed.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    assert any(c.metadata.get("tags") == ["injected-parameters"] for c in executed.cells)

    saved = json.loads((tmp_path / "results" / f"{path.stem}.json").read_text())
    assert saved["card"]["profile"] == "quick"
    assert saved["summary"], "each notebook records headline results for the report"
    run_claims.extend(dict(c, notebook=path.stem) for c in saved["claims"])
    # A runaway guard, not a timing claim: three times the budget means something is wrong.
    assert run["wall_s"] < 3 * BUDGET_S


@pytest.mark.notebooks
def test_the_run_was_quiet_enough_to_decide_the_timing_claims(run_claims):
    """A contradicted claim already failed its notebook; undecided ones are listed here, and the run fails only
    when it was unusually noisy as a whole (the rule is labkit.claims.noisy_run's)."""
    if not run_claims:
        pytest.skip("no notebook ran in this session")
    for c in run_claims:
        if c["verdict"] == "undecided":
            print(f"undecided: {c['notebook']}: {c['statement']} ({c['estimate']:.3g}, interval {c['low']:.3g} to "
                  f"{c['high']:.3g}; claimed {c['expect']})")  # fmt: skip
    problem = claims.noisy_run(run_claims)
    assert problem is None, problem


@pytest.mark.notebooks
def test_a_wrong_timing_claim_is_contradicted_and_fails_the_notebook(tmp_path, root):
    """The check can fail: notebook 01 with one claim made false (a training step costing over 1,000 forward
    passes) stops with ClaimContradicted under make test's strict mode, as a real regression would."""
    nb = nbformat.read(root / "notebooks" / "01_inference_vs_training.ipynb", as_version=4)
    right = 'quantity=labkit.claims.ratio("training step", "inference"), expect=(">", 1.5),'
    cells = [c for c in nb.cells if right in c.source]
    assert len(cells) == 1, "the claim this test falsifies has moved: update the test"
    cells[0].source = cells[0].source.replace(right, right.replace("1.5", "1000.0"))
    wrong = tmp_path / "01_wrong_claim.ipynb"
    nbformat.write(nb, wrong)
    run = run_notebook(wrong, tmp_path / "out.ipynb", profile="quick", results_dir=tmp_path / "results")
    assert run["status"] == "failed"
    assert "ClaimContradicted" in run["error"] and "training step costs well over one forward pass" in run["error"]
