"""Exercise checkers: every exercise cell runs, solved or not.

Used by every notebook's Exercises section (in the style of srush's GPU-Puzzles: a spec, a stub, a checker). The
expected answers live in :mod:`labkit.answers`, computed, not typed into the cell below the question. A checker
never raises on an answer, so Restart & Run All works with the exercises unsolved.
"""

from __future__ import annotations

import math

from .answers import KEY, NotYet


def _label(exercise: str) -> str:
    return f"Exercise {exercise.split('.', 1)[1]}"


def matches(answer, expected) -> bool:
    """True if ``answer`` is ``expected``: numbers to 3 significant figures (as a person rounds them), True/False
    exactly, words ignoring case and surrounding spaces."""
    if isinstance(expected, bool) or isinstance(answer, bool):
        return isinstance(answer, bool) and answer is expected
    if isinstance(expected, str):
        return isinstance(answer, str) and answer.strip().lower() == expected.strip().lower()
    try:
        a, e = float(answer), float(expected)
    except (TypeError, ValueError):
        return False
    if e == 0:
        return abs(a) < 1e-12
    half_unit = 0.5 * 10 ** (math.floor(math.log10(abs(e))) - 2)  # half a unit in the third significant figure
    return abs(a - e) <= half_unit * (1 + 1e-9)


def check(exercise: str, answer, **context) -> bool | None:
    """Judge a learner's ``answer`` to ``exercise`` (e.g. ``"01.3"``) against the answer key; print the verdict.

    Taught in notebook 00. ``context`` passes what the answer depends on from the notebook (a measured step time,
    this machine's roofline). Returns ``None`` while the answer is still ``None`` (unsolved), else ``True`` or
    ``False``; a wrong answer gets the exercise's hint.
    """
    if exercise not in KEY:
        raise ValueError(f"no exercise {exercise!r} in the answer key; known: {', '.join(KEY)}")
    key = KEY[exercise]
    missing = [name for name in key.needs if name not in context]
    if missing:
        raise TypeError(f"{exercise} needs {', '.join(missing)} from the notebook, passed by name to labkit.check")
    if answer is None:
        print(f"{_label(exercise)}: not attempted yet — replace None with your answer.")
        return None
    try:
        expected = key.expected(**context)
    except NotYet as why:
        print(f"{_label(exercise)}: not yet — {why}.")
        return False
    if matches(answer, expected):
        print(f"{_label(exercise)}: correct ({answer!r}).")
        return True
    print(f"{_label(exercise)}: not yet — you have {answer!r}. Hint: {key.hint}")
    return False
