"""The timing claims a notebook makes, read from its source: each ``Claim(statement, ...)`` as a pattern.

A statement is written in the notebook as a string, an f-string (its ``{...}`` parts are sizes that differ by
profile, so they match any text), a ``+`` of those, or a ``... if device.type == "cpu" else ...`` choice. A claim
made under ``if device.type == "cpu":`` (or its ``else``) is made only on those devices, so a record from a GPU is
matched against what the notebook claims on a GPU. tests/test_records.py uses this to keep stale reference records
from shipping; tests/test_notebooks.py checks that every claim a run recorded matches one of these patterns, so the
reading cannot fall behind the notebooks.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

WILDCARD = ".+?"
MIN_LITERAL_CHARS = 12  # a pattern must say something: an f-string of only sizes would match any statement


@dataclass(frozen=True)
class Template:
    """One statement a notebook can make, and on which devices (``device.type == value`` is ``equal``, ANDed)."""

    pattern: str
    conditions: tuple[tuple[str, bool], ...]
    line: str  # where: cell index and line, for messages

    def made_on(self, device_type: str) -> bool:
        return all((device_type == value) == equal for value, equal in self.conditions)

    def matches(self, statement: str, device_type: str) -> bool:
        return self.made_on(device_type) and re.fullmatch(self.pattern, statement, re.S) is not None


def _device_test(test: ast.expr) -> tuple[str, bool] | None:
    """``device.type == "cpu"`` (or ``lab.device.type != "cuda"``) as ("cpu", True); None for any other test."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq | ast.NotEq)):
        return None
    left, right = test.left, test.comparators[0]
    is_device_type = (
        isinstance(left, ast.Attribute)
        and left.attr == "type"
        and (
            (isinstance(left.value, ast.Name) and left.value.id == "device")
            or (isinstance(left.value, ast.Attribute) and left.value.attr == "device")
        )
    )
    if is_device_type and isinstance(right, ast.Constant) and isinstance(right.value, str):
        return right.value, isinstance(test.ops[0], ast.Eq)
    return None


def _patterns(node: ast.expr, conditions: tuple, where: str) -> list[tuple[str, tuple]]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [(re.escape(node.value), conditions)]
    if isinstance(node, ast.JoinedStr):
        parts = [
            re.escape(part.value) if isinstance(part, ast.Constant) else WILDCARD
            for part in node.values  # Constant pieces and FormattedValue ({...}) pieces
        ]
        return [("".join(parts), conditions)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [
            (left + right, right_conditions)
            for left, left_conditions in _patterns(node.left, conditions, where)
            for right, right_conditions in _patterns(node.right, left_conditions, where)
        ]
    if isinstance(node, ast.IfExp):
        test = _device_test(node.test)
        if test is None:
            return _patterns(node.body, conditions, where) + _patterns(node.orelse, conditions, where)
        value, equal = test
        return _patterns(node.body, (*conditions, (value, equal)), where) + _patterns(
            node.orelse, (*conditions, (value, not equal)), where
        )
    raise ValueError(
        f"{where}: a Claim's statement must be written in the call (a string, an f-string, a + of those or a "
        f"device choice), not {ast.dump(node)[:60]}, so the tests can tell which claims the notebook makes"
    )


class _Reader(ast.NodeVisitor):
    def __init__(self, cell_index: int):
        self.cell_index = cell_index
        self.conditions: tuple[tuple[str, bool], ...] = ()
        self.found: list[Template] = []

    def visit_If(self, node: ast.If) -> None:
        test = _device_test(node.test)
        if test is None:
            self.generic_visit(node)
            return
        outer, (value, equal) = self.conditions, test
        self.conditions = (*outer, (value, equal))
        for child in node.body:
            self.visit(child)
        self.conditions = (*outer, (value, not equal))
        for child in node.orelse:
            self.visit(child)
        self.conditions = outer

    def visit_Call(self, node: ast.Call) -> None:
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if name == "Claim":
            where = f"cell {self.cell_index}, line {node.lineno}"
            statement = node.args[0] if node.args else next(k.value for k in node.keywords if k.arg == "statement")
            for pattern, conditions in _patterns(statement, self.conditions, where):
                literal = len(re.sub(re.escape(WILDCARD), "", pattern).replace("\\", ""))
                if literal < MIN_LITERAL_CHARS:
                    raise ValueError(f"{where}: the statement {pattern!r} says too little to identify the claim")
                self.found.append(Template(pattern, conditions, where))
        self.generic_visit(node)


def claim_templates(notebook: str | Path) -> list[Template]:
    """Every statement the notebook's ``Claim(...)`` calls can produce, with the devices it is made on."""
    nb = nbformat.read(notebook, as_version=4)
    found: list[Template] = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        reader = _Reader(index)
        reader.visit(ast.parse(cell.source))
        found.extend(reader.found)
    return found


def unmade_claims(notebook: str | Path, claims: list[dict], device_type: str) -> list[str]:
    """The statements in ``claims`` (a result record's) that the notebook does not make on ``device_type``."""
    templates = claim_templates(notebook)
    return [c["statement"] for c in claims if not any(t.matches(c["statement"], device_type) for t in templates)]
