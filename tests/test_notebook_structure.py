"""Every notebook keeps the skeleton: parameters cell, prediction, takeaways, exercises with checkers."""

import ast
import dataclasses
import re

import cell_shape
import nbformat
import pytest
import render_docs
from conftest import NOTEBOOKS
from solutions import exercises, solution_code

from labkit.lab import answers, manifest, sizes
from labkit.lab.sizes import SIZES


def _load(path):
    return nbformat.read(path, as_version=4)


def test_the_manifest_names_every_notebook_and_each_notebook_its_manifest_entry(root):
    """The manifest (labkit/lab/manifest.py) is the one list of notebooks: no file outside it, no entry without a file."""
    on_disk = {p.stem for p in (root / "notebooks").glob("*.ipynb")}
    assert on_disk == set(manifest.slugs()), (
        f"notebooks/ and labkit/lab/manifest.py disagree: {on_disk ^ set(manifest.slugs())}"
    )
    assert manifest.slugs()[0] == "start_here" and len(set(manifest.slugs())) == len(manifest.NOTEBOOKS)
    for entry in manifest.NOTEBOOKS:
        heading = _load(root / "notebooks" / entry.file).cells[0].source.splitlines()[0]
        assert heading == f"# {entry.title}", f"{entry.file}: its heading is not the manifest's title {entry.title!r}"


def test_sizes_and_answer_keys_name_notebooks_of_the_manifest():
    assert set(SIZES) <= set(manifest.slugs()), (
        f"labkit.lab.sizes.SIZES names unknown notebooks: {set(SIZES) - set(manifest.slugs())}"
    )
    keys = set(answers.KEY) | set(answers.PREDICTIONS)
    assert {k.split()[0].rsplit(".", 1)[0] for k in keys} <= set(manifest.slugs()), (
        "answer keys are '<slug>.<exercise>' (then words, if any)"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_holds_plain_constants(path):
    nb = _load(path)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    # the hosted-install cell (tools/hosted.py) alone comes before it: it installs labkit where it is missing
    first_code = next(
        c for c in nb.cells if c.cell_type == "code" and "hosted-install" not in c.metadata.get("tags", [])
    )
    assert first_code is tagged[0], "the parameters cell comes before any other code but the hosted-install cell"
    names = set()
    for node in ast.parse(tagged[0].source).body:
        assert isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant), ast.dump(node)
        names |= {t.id for t in node.targets}
    assert {"PROFILE", "DEVICE"} <= names
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert re.search(rf"labkit\.start\(\"{path.stem}\",", code), (
        f"{path.name} must call labkit.start({path.stem!r}, ...)"
    )


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
                assert key in answers.KEY and key.rsplit(".", 1)[0] == path.stem and len(call.args) == 2, (
                    f"checker cell {i}: labkit.check(key, answer, **context) with the key of labkit/lab/answers.py"
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
                assert key in answers.PREDICTIONS and key.rsplit(".", 1)[0] == path.stem, (
                    f"cell {i}: unknown key {key!r}"
                )
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


def test_the_readme_map_and_the_instructor_guide_are_rendered_from_the_manifest(root):
    """The README's map and the guide's tables and goals are written from the manifest and the notebooks' openings
    (tools/render_docs.py), so they cannot drift from them: a stale one fails here."""
    assert "docs/instructor.md" in (root / "README.md").read_text()
    for path in NOTEBOOKS:
        assert len(_goals(_load(path))) >= 3, f"{path.name}: the opening cell needs a 'You will be able to' list"
    assert render_docs.main(["--check"], root=root) == 0, "run: python tools/render_docs.py"


def test_the_readme_has_a_binder_badge_opening_notebook_00(root):
    readme = (root / "README.md").read_text()
    badge = re.search(
        r"\[!\[[^\]]*\]\((https://mybinder\.org/badge_logo\.svg)\)\]\((https://mybinder\.org/v2/[^)]+)\)", readme
    )
    assert badge, (
        "README: no Binder badge ([![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/...))"
    )
    assert badge.group(2).endswith("?labpath=notebooks%2Fstart_here.ipynb")
    assert (root / "binder" / "environment.yml").exists() and (root / "binder" / "postBuild").exists()


def _bound_at_module_level(tree: ast.Module) -> set[str]:
    """Names a cell binds at the notebook's top level (assignments, loops, with, defs; not inside functions)."""
    bound: set[str] = set()

    def targets(node):
        for name in ast.walk(node):
            if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store):
                bound.add(name.id)

    def visit(stmts):
        for stmt in stmts:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bound.add(stmt.name)
            elif isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign):
                for t in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                    targets(t)
            elif isinstance(stmt, ast.For | ast.AsyncFor):
                targets(stmt.target)
                visit(stmt.body + stmt.orelse)
            elif isinstance(stmt, ast.With | ast.AsyncWith):
                for item in stmt.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars)
                visit(stmt.body)
            elif isinstance(stmt, ast.If | ast.While):
                visit(stmt.body + stmt.orelse)
            elif isinstance(stmt, ast.Try):
                visit(stmt.body + stmt.orelse + stmt.finalbody + [s for h in stmt.handlers for s in h.body])

    visit(tree.body)
    for node in ast.walk(tree):  # walrus at any depth outside functions is rare; count it anywhere
        if isinstance(node, ast.NamedExpr):
            bound.add(node.target.id)
    return bound


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_never_rebinds_a_name_it_imports_from_labkit(path):
    """``from labkit.claims import ratio`` then ``ratio = a / b`` breaks every claim below it, silently until it
    runs: a notebook keeps the names it imports from labkit."""
    imported: set[str] = set()
    rebound: list[str] = []
    for cell in _load(path).cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        tree = ast.parse(source)
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("labkit"):
                imported |= {alias.asname or alias.name for alias in node.names}
        rebound += sorted(_bound_at_module_level(tree) & imported)
    assert not rebound, f"{path.stem} binds again names it imports from labkit: {rebound}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_source_a_lesson_shows_holds_the_lines_its_text_quotes(path):
    """A cell that prints a mechanism's code (``labkit.show_source(fn, "quoted line", ...)``) names the lines the
    text points at; each must be quoted in the markdown just before the cell (show_source itself fails the run when
    the printed code lacks them), so text, quote and printed code cannot drift apart."""
    cells = _load(path).cells
    for i, cell in enumerate(cells):
        if cell.cell_type != "code" or "show_source(" not in cell.source:
            continue
        call = next(
            node
            for node in ast.walk(ast.parse(cell.source))
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "show_source"
        )
        quoted = [arg.value for arg in call.args[1:] if isinstance(arg, ast.Constant)]
        assert quoted and len(quoted) == len(call.args) - 1, f"{path.stem}[{i}]: quote the lines as plain strings"
        text = next(cells[j].source for j in range(i - 1, -1, -1) if cells[j].cell_type == "markdown")
        for line in quoted:
            assert f"`{line}`" in text, f"{path.stem}[{i}]: the text before the cell does not quote `{line}`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_size_a_notebook_reads_is_a_field_of_its_sizes(path):
    """``cfg.<name>`` (and ``lab.cfg.<name>``) in a notebook's code, its solutions included, names a field of its
    sizes class, so a misspelt size fails here rather than as an AttributeError in the middle of a lesson."""
    fields = {f.name for f in dataclasses.fields(sizes.settings(path.stem, "quick"))}
    nb = _load(path)
    code = (
        "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        + "\n"
        + "\n".join(solution_code(nb.cells[stub].source, nb.cells[k].source) for stub, _, k in exercises(nb))
    )
    read = {m.group(1) for m in re.finditer(r"\bcfg\.([A-Za-z_]\w*)", code)}
    assert read <= fields, f"{path.stem} reads sizes its class lacks: {sorted(read - fields)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_code_cell_shows_one_idea(path):
    """At most 20 non-blank lines and three of {define claims, decide, table, record, plot} a code cell, outside the
    cells tagged ``mechanism`` or ``calculator`` (tests/cell_shape.py; ``python tests/cell_shape.py`` prints the
    statistics over all notebooks)."""
    assert not cell_shape.offences(path), "split these cells where a new step begins: " + "; ".join(
        cell_shape.offences(path)
    )


def test_the_cell_shape_rule_catches_a_long_busy_cell(tmp_path):
    nb = nbformat.v4.new_notebook()
    busy = "c = Claim('x', ratio('a', 'b') > 1)\nv = lab.decide(c, runs)\nlab.record('x', s=1)\nplt.show()\n"
    tagged = nbformat.v4.new_code_cell("\n".join(f"x{i} = {i}" for i in range(25)))
    tagged.metadata["tags"] = ["mechanism"]
    nb.cells = [nbformat.v4.new_code_cell("\n".join(f"x{i} = {i}" for i in range(21))), nbformat.v4.new_code_cell(busy),
                tagged, nbformat.v4.new_code_cell("x = 1\n\n\n" * 20)]  # fmt: skip
    path = tmp_path / "toy.ipynb"
    nbformat.write(nb, path)
    assert cell_shape.offences(path) == [
        "toy[0]: 21 lines, jobs []",
        "toy[1]: 4 lines, jobs ['define claims', 'decide', 'record', 'plot']",
    ]
