"""Exercise checkers: every exercise cell runs, solved or not.

Used by every notebook's Exercises section (in the style of srush's GPU-Puzzles: a spec, a stub,
a checker). A checker never raises, so Restart & Run All works with the exercises unsolved.
"""

from __future__ import annotations

import math


def check(name: str, answer, expected, rel_tol: float = 1e-9, hint: str = "") -> bool | None:
    """Compare a learner's ``answer`` with ``expected`` and print a verdict.

    Taught in notebook 00.

    Returns ``None`` while the answer is still ``None`` (unsolved), else ``True``/``False``.
    Numbers match within ``rel_tol``; anything else must be equal.
    """
    if answer is None:
        print(f"{name}: not attempted yet — replace None with your answer.")
        return None
    try:
        if isinstance(expected, (int, float)) and not isinstance(expected, bool):
            ok = math.isclose(float(answer), float(expected), rel_tol=rel_tol, abs_tol=1e-12)
        else:
            ok = answer == expected
    except (TypeError, ValueError):
        ok = False
    if ok:
        print(f"{name}: correct ({answer!r}).")
    else:
        print(f"{name}: not yet — you have {answer!r}." + (f" Hint: {hint}" if hint else ""))
    return ok
