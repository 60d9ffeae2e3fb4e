"""Every notebook keeps the skeleton: parameters cell, prediction, takeaways, exercises with checkers."""

import ast
import re

import nbformat
import pytest
from conftest import NOTEBOOKS
from solutions import exercises, solution_code

from labkit import answers
from labkit.sizes import SIZES


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
    assert path.stem in SIZES, "its quick and full sizes live in labkit.sizes.SIZES"


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
        for call in ast.walk(ast.parse(cells[i].source)):  # the expected answer is not printed beside the stub
            if isinstance(call, ast.Call) and ast.unparse(call.func) == "labkit.check":
                key = call.args[0].value if isinstance(call.args[0], ast.Constant) else None
                assert key in answers.KEY and key.startswith(path.stem[:2]) and len(call.args) == 2, (
                    f"checker cell {i}: labkit.check(key, answer, **context) with the key of labkit/answers.py"
                )
    for stub, _, solution in exercises(nb):  # every folded solution gives code the solutions run can execute
        compile(solution_code(cells[stub].source, cells[solution].source), f"{path.stem} solution", "exec")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_predict_then_measure_exercise_with_a_folded_solution(path):
    """At least one exercise per notebook asks for a prediction first and measures it on the learner's machine."""
    nb = _load(path)
    cells = nb.cells
    asked = []
    for i, cell in enumerate(cells):
        if cell.cell_type != "code" or "labkit.check_prediction(" not in cell.source:
            continue
        for call in ast.walk(ast.parse(cell.source)):
            if isinstance(call, ast.Call) and ast.unparse(call.func) == "labkit.check_prediction":
                key = call.args[0].value
                assert key in answers.PREDICTIONS and key.startswith(path.stem[:2]), f"cell {i}: unknown key {key!r}"
                stub = ast.unparse(call.args[1])
                assert re.search(rf"^{stub} = None\b", cells[i - 1].source, re.M), f"cell {i}: no stub before it"
                asked.append(key)
        solution = next(c for c in cells[i + 1 :] if c.cell_type == "markdown")
        assert "<details>" in solution.source and "(predict, then measure)" in cells[i - 2].source + cells[i - 3].source
    assert asked, f"{path.name}: no exercise asks for a prediction and measures it (labkit.check_prediction)"


def test_every_prediction_in_the_answer_key_is_asked_by_its_notebook():
    asked = {
        call.args[0].value
        for path in NOTEBOOKS
        for cell in _load(path).cells
        if cell.cell_type == "code" and "labkit.check_prediction(" in cell.source
        for call in ast.walk(ast.parse(cell.source))
        if isinstance(call, ast.Call) and ast.unparse(call.func) == "labkit.check_prediction"
    }
    assert asked == set(answers.PREDICTIONS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_only_checked_cells_store_outputs(path):
    for cell in _load(path).cells:
        if cell.cell_type != "code":
            continue
        checked = cell.source.lstrip().startswith("# NBVAL_CHECK_OUTPUT")
        assert bool(cell.outputs) == checked, cell.source[:60]
        # nbval takes a checked cell without an execution count for one that never ran, and fails it
        assert cell.execution_count is not None or not checked, (
            f"checked cell without execution count: {cell.source[:60]}"
        )
        assert all(o.output_type != "error" for o in cell.outputs)


def _goals(nb) -> list[str]:
    """The bullets under **You will be able to** in the opening cell, whitespace normalised."""
    found = re.search(r"\*\*You will be able to\*\*\n((?:- .*\n?(?:  .*\n?)*)+)", nb.cells[0].source)
    return [" ".join(item.split()) for item in re.split(r"\n- ", "\n" + found.group(1).strip())[1:]] if found else []


def test_the_readme_map_and_the_instructor_guide_cover_every_notebook(root):
    readme = (root / "README.md").read_text()
    guide = (root / "docs" / "instructor.md").read_text()
    flat_guide = " ".join(guide.split())
    assert "docs/instructor.md" in readme
    for path in NOTEBOOKS:
        goals = _goals(_load(path))
        assert len(goals) >= 3, f"{path.name}: the opening cell needs a 'You will be able to' list"
        for goal in goals:  # the guide repeats the goals word for word, so it cannot drift from the notebooks
            assert goal in flat_guide, f"docs/instructor.md lacks {path.stem}'s goal: {goal!r}"
        number = path.stem[:2]
        assert re.search(rf"^\| {number} \| `{path.stem}` \|", readme, re.MULTILINE), (
            f"README map: no row for {path.stem}"
        )
        assert re.search(rf"^\| {number} \| `{path.stem}` \| \d", guide, re.MULTILINE), (
            f"guide: no times for {path.stem}"
        )


def test_the_readme_has_a_binder_badge_opening_notebook_00(root):
    readme = (root / "README.md").read_text()
    badge = re.search(
        r"\[!\[[^\]]*\]\((https://mybinder\.org/badge_logo\.svg)\)\]\((https://mybinder\.org/v2/[^)]+)\)", readme
    )
    assert badge, (
        "README: no Binder badge ([![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/...))"
    )
    assert badge.group(2).endswith("?labpath=notebooks%2F00_start_here.ipynb")
    assert (root / "binder" / "environment.yml").exists() and (root / "binder" / "postBuild").exists()
