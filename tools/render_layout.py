"""labkit's layout, written from the code: the floors in their true order, what each imports, and its modules.

tools/render_docs.py writes it into CONTRIBUTING.md's Layout section and into each floor's ``__init__`` docstring (the
part after its first paragraph), so that a module added, moved or renamed shows up where the layout is described,
and a floor that starts importing another moves in the drawing. Each module is listed with the first sentence of
its own docstring.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

WIDTH = 116
GENERATED_LEAD = "Imports"  # the generated part of a floor's docstring starts with this word


def first_line(path: Path) -> str:
    """The first sentence of a module's docstring (which may wrap over several lines), on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text()))
    if not doc:
        raise SystemExit(f"{path}: a labkit module needs a docstring whose first sentence says what it is")
    paragraph = " ".join(doc.split("\n\n")[0].split())
    found = re.match(r"(.+?[.!?])(?=\s|$)", paragraph)
    return found.group(1) if found else paragraph


def floors(package: Path) -> list[str]:
    return sorted(p.name for p in package.iterdir() if (p / "__init__.py").is_file())


def modules(package: Path, floor: str) -> list[Path]:
    return sorted(p for p in (package / floor).glob("*.py") if p.name != "__init__.py")


def floor_imports(package: Path, floor: str) -> set[str]:
    """The other floors that ``floor``'s modules import (relative ``from ..x`` or absolute ``labkit.x``)."""
    known, found = set(floors(package)), set()
    for path in (package / floor).glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 2:
                head = (node.module or "").split(".")[0]
                found |= {head} if head else {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("labkit."):
                found.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("labkit.")}
    return (found & known) - {floor}


def levels(package: Path) -> dict[str, int]:
    """Each floor's height: 0 for a floor that imports none, else one above the highest floor it imports."""
    graph = {f: floor_imports(package, f) for f in floors(package)}
    height: dict[str, int] = {}

    def of(floor: str, seen: tuple[str, ...] = ()) -> int:
        if floor in seen:
            raise SystemExit(f"labkit's floors import each other round a loop: {' -> '.join((*seen, floor))}")
        if floor not in height:
            height[floor] = 1 + max((of(f, (*seen, floor)) for f in graph[floor]), default=-1)
        return height[floor]

    for floor in graph:
        of(floor)
    return height


def order_text(package: Path, height: dict[str, int] | None = None) -> str:
    """The floors lowest first, those of one height together: ``core`` ← ``predict``, ``claims`` ← ..."""
    height = levels(package) if height is None else height
    tiers = [sorted(f for f in height if height[f] == h) for h in range(max(height.values()) + 1)]
    return " ← ".join(", ".join(f"`{f}`" for f in tier) for tier in tiers)


def _module_lines(package: Path, floor: str, indent: str) -> list[str]:
    lines = []
    for path in modules(package, floor):
        lines += textwrap.wrap(
            f"{path.stem}: {first_line(path)}", WIDTH, initial_indent=indent, subsequent_indent=indent + "    "
        )
    return lines


def _imports_line(package: Path, floor: str, height: dict[str, int]) -> str:
    below = sorted(floor_imports(package, floor), key=lambda f: (height[f], f))
    return f"{GENERATED_LEAD} {', '.join(below)}." if below else f"{GENERATED_LEAD} no other floor."


def readme_block(package: Path, height: dict[str, int]) -> str:
    """CONTRIBUTING.md's drawing: floors top to bottom, each with what it imports and its modules."""
    lines = [
        f"Floors, lowest first: {order_text(package, height).replace('`', '')}",
        "",
        "notebooks/*.ipynb  (import any floor)",
    ]
    for floor in sorted(height, key=lambda f: (-height[f], f)):
        lines += [
            "",
            f"{floor}/  {first_line(package / floor / '__init__.py')} {_imports_line(package, floor, height)}",
        ]
        lines += _module_lines(package, floor, "  ")
    return "```\n" + "\n".join(lines) + "\n```"


def floor_docstring(package: Path, floor: str, height: dict[str, int]) -> str:
    """A floor's ``__init__`` docstring: its first paragraph as written, then the generated part (``height``: the
    floors' :func:`levels`, computed once by the caller)."""
    path = package / floor / "__init__.py"
    doc = ast.get_docstring(ast.parse(path.read_text()), clean=False) or ""
    lead = doc.split(f"\n\n{GENERATED_LEAD} ")[0].rstrip()
    generated = [
        _imports_line(package, floor, height) + " Its modules (this part is written by tools/render_docs.py):",
        "",
        *_module_lines(package, floor, ""),
    ]
    return lead + "\n\n" + "\n".join(generated) + "\n"


def with_docstring(path: Path, docstring: str) -> str:
    """``path``'s text with its module docstring replaced by ``docstring``."""
    text = path.read_text()
    node = ast.parse(text).body[0]
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
        raise SystemExit(f"{path}: a floor's __init__ starts with its docstring")
    lines = text.splitlines(keepends=True)
    if '"""' in docstring or "\\" in docstring:
        raise SystemExit(f"{path}: a module's first line may not hold triple quotes or backslashes")
    return "".join(lines[: node.lineno - 1]) + f'"""{docstring}"""\n' + "".join(lines[node.end_lineno :])
