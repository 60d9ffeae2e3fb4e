"""Every public labkit helper a notebook uses says, in its docstring, which notebook teaches it; no dead helpers.

"Uses" means the notebook's code names it as an attribute (``labkit.measure``, ``memory_model.fits_on``) or imports it.
"""

import ast
import re
from pathlib import Path

import nbformat
import pytest

from labkit.lab import manifest

ROOT = Path(__file__).resolve().parents[1]
NAMED = re.compile(
    r"[Nn]otebooks? ((?:`[a-z0-9_]+`(?:, | and | or |, and )?)+)"
)  # notebook `slug`, notebooks `a` and `b`


def _notebook_code() -> dict[str, str]:
    code = {}
    for path in manifest.paths(ROOT / "notebooks"):
        cells = nbformat.read(path, as_version=4).cells
        code[path.stem] = "\n".join(c.source for c in cells if c.cell_type == "code")
    return code


def _uses(code: str, name: str) -> bool:
    return bool(
        re.search(rf"\.{name}\b", code) or re.search(rf"^\s*from labkit[\w.]* import [^\n]*\b{name}\b", code, re.M)
    )


def _module(path: Path) -> str:
    """labkit/instruments/flops.py -> instruments.flops (labkit/claims/__init__.py -> claims)."""
    return ".".join(path.relative_to(ROOT / "labkit").with_suffix("").parts).removesuffix("__init__").strip(".")


def _public_helpers():
    for path in sorted((ROOT / "labkit").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.FunctionDef | ast.ClassDef) or node.name.startswith("_"):
                continue
            if not any(getattr(d, "id", getattr(d, "attr", "")) == "overload" for d in node.decorator_list):
                yield _module(path), node  # an @overload stub is documented by the function it declares


NOTEBOOKS = _notebook_code()
HELPERS = list(_public_helpers())


@pytest.mark.parametrize(("module", "node"), HELPERS, ids=[f"{m}.{n.name}" for m, n in HELPERS])
def test_a_helper_names_a_notebook_that_uses_it(module, node):
    users = sorted(nb for nb, code in NOTEBOOKS.items() if _uses(code, node.name))
    doc = ast.get_docstring(node) or ""
    assert doc, f"labkit.{module}.{node.name} has no docstring"
    named = {n for group in NAMED.findall(doc) for n in re.findall(r"`([a-z0-9_]+)`", group)}
    taught = re.findall(r"Taught in notebooks? `([a-z0-9_]+)`", doc)
    for nb in taught:
        assert nb in users, f"labkit.{module}.{node.name} says it is taught in notebook `{nb}`, which does not use it"
    if users:
        assert named & set(users), (
            f"labkit.{module}.{node.name} is used by notebook(s) {users}; its docstring must name one "
            f"(e.g. 'Taught in notebook `{users[0]}`.'); it names {sorted(named) or 'none'}"
        )


def test_every_public_helper_is_used_outside_the_tests():
    library = {_module(p): p.read_text() for p in (ROOT / "labkit").rglob("*.py")}
    tools = "\n".join(p.read_text() for p in (ROOT / "tools").glob("*.py"))
    unused = []
    for module, node in HELPERS:
        word = re.compile(rf"\b{node.name}\b")
        in_library = any(word.search(text) for m, text in library.items() if m != module)
        in_own_module = len(word.findall(library[module])) > 1
        in_notebooks = any(_uses(code, node.name) for code in NOTEBOOKS.values())
        if not (in_library or in_own_module or in_notebooks or word.search(tools)):
            unused.append(f"{module}.{node.name}")
    assert not unused, f"public helpers nothing but the tests use (remove them, or use them): {unused}"


def test_the_checks_see_the_notebooks():
    """Guards the two tests above against passing vacuously (no notebooks found, no helper matched)."""
    assert len(NOTEBOOKS) >= 12 and len(HELPERS) > 100
    assert _uses(NOTEBOOKS["start_here"], "measure") and not _uses(NOTEBOOKS["start_here"], "no_such_helper")
