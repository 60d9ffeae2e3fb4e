"""Fill a notebook's exercises with their folded solutions, and make its checkers assert (tests only).

Each exercise is a stub cell (``answer_N = None``, or ``prediction_N = None`` for a predict-then-measure exercise), a
checker cell (``labkit.check("<slug>.k", answer_N, ...)`` or ``labkit.check_prediction("<slug>.k", prediction_N, ...)``) and
a folded ``<details>`` solution: a fenced code block, or backticked ``answer_N = ...`` snippets.
"""

from __future__ import annotations

import ast
import copy
import inspect
import re

import nbformat

STUB = re.compile(r"^((?:answer|prediction)_\w+) = None\b.*$", re.M)
SNIPPET = re.compile(r"`((?:answer|prediction)_\w+) = ([^`]+)`")
CHECKERS = ("labkit.check(", "labkit.check_prediction(")
FENCED = re.compile(r"```python\n(.*?)```", re.S)


def exercises(nb) -> list[tuple[int, int, int]]:
    """(stub, checker, solution) cell indices of every checked exercise, in order."""
    cells, found = nb.cells, []
    for i, cell in enumerate(cells):
        if cell.cell_type == "code" and any(name in cell.source for name in CHECKERS):
            stub = max(j for j in range(i) if cells[j].cell_type == "code" and STUB.search(cells[j].source))
            solution = next(j for j in range(i + 1, len(cells)) if cells[j].cell_type == "markdown")
            found.append((stub, i, solution))
    return found


def solution_code(stub_source: str, solution_markdown: str) -> str:
    """The stub cell with its answers filled in from the solution; raises ValueError if an answer has none."""
    fenced = FENCED.search(solution_markdown)
    if fenced:
        return fenced.group(1).strip()
    given = {name: expr.strip() for name, expr in SNIPPET.findall(solution_markdown)}

    def fill(match: re.Match) -> str:
        name = match.group(1)
        if name not in given:
            raise ValueError(f"the solution gives no `{name} = ...`")
        return f"{name} = {given[name]}"

    return STUB.sub(fill, stub_source)


def asserting_checker(source: str) -> str:
    """Each ``labkit.check(...)`` becomes: assert it judges the answer right, and a plainly wrong one wrong."""
    tree = ast.parse(source)
    body = []
    for stmt in tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(call, ast.Call) and ast.unparse(call.func) == "labkit.check_prediction":
            # the folded prediction is measured: it must not be contradicted, and a plainly wrong one must not hold
            wrong = f"plainly_wrong({ast.unparse(call.args[1])}, prediction=True)"
            body.append(ast.parse(f"_p = {ast.unparse(call)}"))
            body.append(
                ast.parse(
                    "assert _p.verdict in ('holds', 'undecided'), f'the folded prediction of {_p.exercise}: {_p}'"
                )
            )
            body.append(
                ast.parse(f"assert _p.judge({wrong}) != 'holds', _p.exercise + ' lets a plainly wrong prediction hold'")
            )
        elif isinstance(call, ast.Call) and ast.unparse(call.func) == "labkit.check":
            name = ast.unparse(call.args[0])
            expected = ast.Call(
                func=ast.parse(f"labkit.lab.answers.KEY[{name}].expected", mode="eval").body,
                args=[],
                keywords=copy.deepcopy(call.keywords),
            )
            rejects = ast.parse(f"not labkit.lab.exercises.matches(plainly_wrong(_e := {ast.unparse(expected)}), _e)")
            body.append(
                ast.parse(
                    f"assert {ast.unparse(call)} is True, 'the folded solution of ' + {name} + ' is judged wrong'"
                )
            )
            body.append(ast.parse(f"assert {ast.unparse(rejects)}, {name} + ' accepts a plainly wrong answer'"))
        else:
            body.append(ast.Module(body=[stmt], type_ignores=[]))
    return "\n".join(ast.unparse(m) for m in body)


def plainly_wrong(expected, prediction=False):
    """An answer that is plainly wrong for ``expected``: the other truth value, another word, half again as much
    (for a measured ``prediction``, three times as much: beyond any factor a prediction is allowed)."""
    if prediction:
        return 3 * expected + 1
    if isinstance(expected, bool):
        return not expected
    if isinstance(expected, str):
        return expected + " (not)"
    return expected * 1.5 + 1


def with_solutions_appended(nb):
    """A copy of ``nb`` as the learner gets it, followed by its exercises solved: for each exercise, its cells
    from the stub to the checker again, the stub filled in from the folded solution and the checker asserting.

    One kernel then runs the notebook as given (the exercises unsolved, as a learner first meets them) and its
    solutions, which the exercises' checkers must judge right, after it: the exercises close every notebook, so
    the solutions find the state they were written for.
    """
    nb = copy.deepcopy(nb)
    found = exercises(nb)
    if not found:
        return nb
    tail = [nbformat.v4.new_markdown_cell("## The exercises, solved (added by the test suite)")]
    tail.append(nbformat.v4.new_code_cell(inspect.getsource(plainly_wrong)))  # the wrong-answer maker
    for stub, checker, solution in found:
        tail.append(nbformat.v4.new_code_cell(solution_code(nb.cells[stub].source, nb.cells[solution].source)))
        tail += [_fresh(nb.cells[i]) for i in range(stub + 1, checker)]  # a set-up cell between the two
        tail.append(nbformat.v4.new_code_cell(asserting_checker(nb.cells[checker].source)))
    nb.cells += tail
    return nb


def _fresh(cell):
    """A copy of ``cell`` as a new cell (outputs and ids not carried over)."""
    if cell.cell_type == "code":
        return nbformat.v4.new_code_cell(cell.source)
    return nbformat.v4.new_markdown_cell(cell.source)
