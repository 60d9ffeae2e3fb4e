"""What the notebook tier's run left behind: every notebook ran to its end, solved, with the quick parameters.

``make notebooks`` (the README's test step 4) prepares each notebook (tests/prepare_notebooks.py: the notebook as
the learner gets it, then its exercises solved with their checkers asserting, papermill's quick parameters
injected) and runs them under nbval with ``LABKIT_RESULTS_DIR`` set to a fresh folder, then these tests in the same
pytest session. A cell that raises (a wrong solution, a plainly wrong answer accepted, a contradicted timing
claim, a changed checked output) has already failed its nbval item; these check what each run recorded: its
last cell ran, in this session, with the injected profile and no cell raising, its result record saved with a
summary, its wall time within reach of its budget, and the run's timing claims as a whole.
"""

import json
import os

import nbformat
import pytest
from claim_statements import unmade_claims
from conftest import NOTEBOOKS, ROOT
from output_noise import noise
from prepare_notebooks import RUN_SUFFIX

from labkit import claims
from labkit.lab import manifest, records
from labkit.lab.report import run_notebook


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_ran_to_its_end_with_the_quick_parameters(path, session_started, wall_times, run_claims):
    where = records.results_dir()
    run_file = where / f"{path.stem}{RUN_SUFFIX}"
    assert run_file.exists() and run_file.stat().st_mtime >= session_started, (
        f"{path.name} left no run record in {where} in this session: `make notebooks` runs the notebooks under "
        f"nbval (with LABKIT_RESULTS_DIR set) and then these tests"
    )
    run = json.loads(run_file.read_text())
    wall_times[path.stem] = (run["learner_wall_s"], run["wall_s"])
    assert run["error_shown"] is None, f"{path.name}: a cell raised {run['error_shown']}"
    # A server, a worker pool or a load generator the lesson started is gone by its last cell.
    assert run["left_behind"] == dict(listening=[], children=[]), f"{path.name} left running: {run['left_behind']}"
    assert run["profile_parameter"] == "quick", "papermill's injected parameters did not take effect"

    saved = json.loads((where / f"{path.stem}.json").read_text())
    assert saved["card"]["profile"] == "quick"
    assert saved["summary"], "each notebook records headline results for the report"
    run_claims.extend(dict(c, notebook=path.stem) for c in saved["claims"])
    unread = unmade_claims(path, saved["claims"], saved["card"]["device_type"])
    assert not unread, f"tests/claim_statements.py cannot find these claims in {path.name}'s source: {unread}"
    # What the learner saw in "On a real GPU": every reference record shipped for this notebook, none missing.
    shipped = sorted(str(p.relative_to(ROOT)) for p in (ROOT / records.REFERENCE_DIRNAME).glob(f"*/{path.stem}.json"))
    assert run["references_shown"] == shipped, (
        f"{path.name} showed the reference records {run['references_shown']}; shipped are {shipped}"
    )
    # A runaway guard, not a timing claim: three times the budget means something is wrong (in the learner's
    # notebook, or in its solved exercises after it).
    # notebook, or in its solved exercises after it). The budget is the manifest's: the quick profile on 2 CPU cores,
    # from the kernel's start to the learner's last cell.
    budget_s = manifest.entry(path.stem).budget_s
    assert run["learner_wall_s"] < 3 * budget_s and run["wall_s"] - run["learner_wall_s"] < 3 * budget_s, run


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_outputs_read_clean(path, request):
    """What the learner reads is the lesson: no raw warning, deprecation or stray stderr, no path of the machine it
    ran on, no NaN cell, no unnamed 0, 1, 2, ... index column (tests/output_noise.py says what counts). nbval
    keeps each cell's outputs on its test item (``test_outputs``) and saves no executed copy, so this reads the
    items of this session's run of the notebook."""
    cells = [item for item in request.session.items if getattr(item, "cell", None) is not None]
    cells = [item for item in cells if item.path.name == path.name]
    lesson = [item for item in cells if not item.cell.source.startswith("# Added by the test suite")]
    if not cells:
        pytest.fail(f"{path.name} was not run under nbval in this session: `make notebooks` runs it, then this test")
    assert any(getattr(item, "test_outputs", None) for item in lesson), "nbval kept no cell's outputs: check it"
    found = []
    for item in lesson:
        problems = noise(item.test_outputs or [])
        first_line = item.cell.source.strip().splitlines()[0][:80] if item.cell.source.strip() else ""
        found += [f"cell {item.cell_num} ({first_line!r}): {p}" for p in problems]
    assert not found, f"{path.name} shows what a learner should not have to read:\n" + "\n".join(found)


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
    """The check can fail: notebook `inference_vs_training` with one claim made false (a training step costing over 1,000 forward
    passes) stops with ClaimContradicted under make test's strict mode, as a real regression would; run by
    papermill, as ``make report`` runs the notebooks."""
    nb = nbformat.read(root / "notebooks" / "inference_vs_training.ipynb", as_version=4)
    right = 'ratio("training step", "inference") > 1.5,'
    cells = [c for c in nb.cells if right in c.source]
    assert len(cells) == 1, "the claim this test falsifies has moved: update the test"
    cells[0].source = cells[0].source.replace(right, right.replace("1.5", "1000.0"))
    wrong = tmp_path / "wrong_claim.ipynb"
    nbformat.write(nb, wrong)
    env = os.environ.copy()
    run = run_notebook(wrong, tmp_path / "out.ipynb", profile="quick", results_dir=tmp_path / "results")
    assert os.environ == env, "run_notebook restores the environment it changed"
    assert run["status"] == "failed"
    assert "ClaimContradicted" in run["error"] and "training step costs well over one forward pass" in run["error"]
