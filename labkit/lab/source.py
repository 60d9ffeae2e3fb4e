"""Showing a mechanism's code in a lesson, checked against what the lesson's text says about it.

Taught in notebook `serving_llms`, which prints its engine's scheduler loop. A lesson that quotes a line of the
code it prints must print the code that holds that line: when the code moves or is rewritten, the notebook fails
here instead of showing a learner the wrong function.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable


def show_source(fn: Callable, *quoted: str) -> None:
    """Print ``fn``'s source; raise, before printing anything, if a line the lesson quotes is not in it.

    Taught in notebook `serving_llms`. ``quoted`` are the pieces of code the text around the cell points at
    (compared after stripping each line's indentation, so a quote need not copy it).
    """
    if not callable(fn):
        raise TypeError(f"show_source takes a function or method, got {type(fn).__name__}")
    if not quoted:
        raise ValueError("show_source needs at least one quoted line: the code the lesson's text points at")
    source = inspect.getsource(fn)
    lines = [line.strip() for line in source.splitlines()]
    missing = [q for q in quoted if not any(q.strip() in line for line in lines)]
    if missing:
        raise ValueError(
            f"{fn.__qualname__}'s source does not hold the quoted line(s) {missing}: the lesson's text describes "
            "code that has moved or changed"
        )
    print(source)
