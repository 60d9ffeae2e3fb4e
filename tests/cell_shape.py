"""How long a notebook's code cells are and how many jobs each does: the measure of "one idea per cell".

A cell's jobs are the kinds of step it takes among: define claims, decide them, show a table, record results, plot.
``python tests/cell_shape.py`` prints the statistics over every notebook (the share of cells over 15 lines, the
median and longest cell, the cells doing three jobs or more) and the offenders; tests/test_notebook_structure.py
holds every notebook to the limits below. Cells tagged ``mechanism`` (code shown to be read) or ``calculator`` (a
widget a learner plays with) are exempt from the limits but counted in the statistics.
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

import nbformat

MAX_LINES = 20
MAX_JOBS = 3
EXEMPT_TAGS = {"mechanism", "calculator"}
JOBS = {
    "define claims": re.compile(r"\bClaim\("),
    "decide": re.compile(r"\bdecide\("),
    "table": re.compile(r"\bdisplay\(|\bpd\.DataFrame\(|\.table\(|^pd\.|^\w+\.round\(\d*\)$", re.M),
    "record": re.compile(r"\blab\.(?:record|headline)\(|\blog\.(?:add|headline)\("),
    "plot": re.compile(r"\bplt\.|\bax\w*\.(?:plot|set|semilog|loglog|hist|bar|scatter|axvline|axhline)|plot_\w+\("),
}


def lines(source: str) -> int:
    return sum(1 for line in source.splitlines() if line.strip())


def jobs(source: str) -> list[str]:
    return [job for job, pattern in JOBS.items() if pattern.search(source)]


def cells(path: Path) -> list[tuple[int, object]]:
    nb = nbformat.read(path, as_version=4)
    return [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]


def exempt(cell) -> bool:
    return bool(EXEMPT_TAGS & set(cell.metadata.get("tags", [])))


def offences(path: Path) -> list[str]:
    """``slug[index]: why`` for each code cell over the limits (exempt cells excepted)."""
    found = []
    for i, cell in cells(path):
        if exempt(cell) or "parameters" in cell.metadata.get("tags", []):
            continue
        n, done = lines(cell.source), jobs(cell.source)
        if n > MAX_LINES or len(done) > MAX_JOBS:
            found.append(f"{path.stem}[{i}]: {n} lines, jobs {done}")
    return found


def statistics_over(paths: list[Path]) -> dict[str, float]:
    sizes, busy3, busy4 = [], 0, 0
    for path in paths:
        for _, cell in cells(path):
            sizes.append(lines(cell.source))
            busy3 += len(jobs(cell.source)) >= 3
            busy4 += len(jobs(cell.source)) >= 4
    return {
        "code cells": len(sizes),
        "share over 15 lines": sum(n > 15 for n in sizes) / len(sizes),
        "share over 20 lines": sum(n > 20 for n in sizes) / len(sizes),
        "median lines": statistics.median(sizes),
        "longest": max(sizes),
        "cells doing 3 jobs or more": busy3,
        "cells doing 4 jobs or more": busy4,
    }


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    from labkit.lab import manifest

    notebooks = manifest.paths(root / "notebooks")
    for key, value in statistics_over(notebooks).items():
        print(f"{key}: {value:.1%}" if isinstance(value, float) and value < 1 else f"{key}: {value}")
    found = [o for p in notebooks for o in offences(p)]
    print(f"{len(found)} cells over the limits ({MAX_LINES} lines, {MAX_JOBS} jobs):")
    print("\n".join(found))
