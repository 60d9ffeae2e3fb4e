"""Every notebook keeps the skeleton: parameters cell, prediction, takeaways, exercises with checkers."""

import ast
import re

import nbformat
import pytest
from conftest import NOTEBOOKS

from labkit.profiles import SIZES


def _load(path):
    return nbformat.read(path, as_version=4)


def test_notebooks_exist_in_teaching_order(root):
    names = [p.name for p in NOTEBOOKS]
    assert names[:2] == ["00_start_here.ipynb", "01_inference_vs_training.ipynb"]
    for name in names:
        assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", name)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_holds_plain_constants(path):
    nb = _load(path)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    assert first_code is tagged[0], "the parameters cell comes before any other code"
    names = set()
    for node in ast.parse(tagged[0].source).body:
        assert isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant), ast.dump(node)
        names |= {t.id for t in node.targets}
    assert {"PROFILE", "DEVICE"} <= names
    assert path.stem in SIZES, "its quick and full sizes live in labkit.profiles.SIZES"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_skeleton_sections(path):
    nb = _load(path)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert nb.cells[0].cell_type == "markdown" and "**The question.**" in nb.cells[0].source
    for needed in ("**Time:**", "**Hardware:**", "Predict", "On a real GPU", "## Takeaways", "## Exercises"):
        assert needed in text, f"{path.name} lacks {needed!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_at_least_three_exercises_with_checkers_and_folded_solutions(path):
    nb = _load(path)
    cells = nb.cells
    checkers = [i for i, c in enumerate(cells) if c.cell_type == "code" and "labkit.check(" in c.source]
    assert len(checkers) >= 3
    for i in checkers:
        answer_cells = [
            c for c in cells[max(0, i - 2) : i] if c.cell_type == "code" and re.search(r"answer_\w+ = None", c.source)
        ]
        assert answer_cells, f"checker cell {i} has no unsolved answer stub before it"
        solution = next((c for c in cells[i + 1 :] if c.cell_type == "markdown"), None)
        assert solution is not None and "<details>" in solution.source, f"checker cell {i} has no folded solution"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_only_checked_cells_store_outputs(path):
    for cell in _load(path).cells:
        if cell.cell_type != "code":
            continue
        checked = cell.source.lstrip().startswith("# NBVAL_CHECK_OUTPUT")
        assert bool(cell.outputs) == checked, cell.source[:60]
        assert all(o.output_type != "error" for o in cell.outputs)
