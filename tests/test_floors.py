"""labkit is built in floors: each subpackage imports only the floors below it, nothing runs back up, no module
imports itself round a loop, and no private name crosses from one floor to another."""

import ast
import re
from pathlib import Path

import pytest
import render_layout

import labkit

ROOT = Path(__file__).resolve().parents[1] / "labkit"
# The rule: a floor imports only floors of a lower level. It is exactly the code's order (each floor one above the
# highest it imports; test below), so the order the docs state is neither stricter nor looser than the code.
LEVEL = {"core": 0, "predict": 1, "claims": 1, "instruments": 2, "workloads": 3, "parallel": 4, "serving": 4, "lab": 4}
MODULES = sorted(p for p in ROOT.rglob("*.py") if p.parent != ROOT)


def _name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")


def _imports(path: Path):
    """(imported module, names imported from it) for every import in the file, at any depth."""
    package = _name(path) if path.name == "__init__.py" else _name(path).rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target.startswith("labkit"):
                for alias in node.names:  # `from ..core import device` imports a module
                    yield (
                        (f"{target}.{alias.name}" if not node.module or target.count(".") == 1 else target),
                        alias.name,
                    )
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("labkit"):
                    yield alias.name, None


def _floor(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LEVEL else None


def test_the_floors_are_the_subpackages():
    assert set(LEVEL) == {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert tuple(LEVEL) == labkit.FLOORS
    assert [p.name for p in ROOT.glob("*.py")] and {p.name for p in ROOT.glob("*.py")} == {"__init__.py", "__main__.py"}


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_a_module_imports_only_its_own_floor_and_the_floors_below(path):
    here = _floor(_name(path))
    for target, name in _imports(path):
        there = _floor(target)
        assert there is not None, f"{_name(path)} imports {target}, which is in no floor"
        if there == here:
            continue
        assert LEVEL[there] < LEVEL[here], f"{_name(path)} ({here}) imports {target} ({there}): imports go down only"
        assert not (name or "").startswith("_"), f"{_name(path)} takes the private {name} from {target}, another floor"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_private_name_of_another_floor_is_reached_through_a_module(path):
    here, text = _floor(_name(path)), path.read_text()
    for target, name in _imports(path):
        if _floor(target) != here and name and not name.startswith("_"):
            alias = re.search(rf"\b{name} as (\w+)", text)
            used = re.findall(rf"\b{alias.group(1) if alias else name}\._(?!_)\w+", text)
            assert not used, f"{_name(path)} reaches private names of {target}: {used}"


def test_no_module_imports_round_a_loop():
    graph = {_name(p): {t for t, _ in _imports(p)} for p in MODULES}
    modules = set(graph)
    graph = {m: {t for t in targets if t in modules and t != m} for m, targets in graph.items()}
    done, path = set(), []

    def visit(m):
        if m in path:
            raise AssertionError(f"an import loop: {' -> '.join(path[path.index(m) :] + [m])}")
        if m in done:
            return
        path.append(m)
        for t in sorted(graph[m]):
            visit(t)
        path.pop()
        done.add(m)

    for m in sorted(graph):
        visit(m)
    assert len(done) > 40  # the walk saw the package's modules


def test_the_rule_is_the_codes_order_and_the_docs_state_it(root):
    assert render_layout.levels(ROOT) == LEVEL
    order = render_layout.order_text(ROOT).replace("`", "")
    assert order == "core ← claims, predict ← instruments ← workloads ← lab, parallel, serving"
    for stated in ("CONTRIBUTING.md", "labkit/__init__.py"):
        assert order in (root / stated).read_text().replace("`", "").replace("\n", " "), (
            f"{stated} states another order"
        )
