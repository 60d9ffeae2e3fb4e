"""Argument checks shared by every helper a learner calls: one message shape, naming the argument and what is allowed.

A helper that is given a negative size, a NaN rate or a string where a model belongs should say so at once, in
words a learner can act on ("batch must be a whole number, 1 or more; got 0"), not return a negative byte count
or fail three calls deeper with an ``AttributeError``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import torch


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def whole(name: str, value, minimum: int = 1) -> int:
    """``value`` as an int, if it is a whole number of at least ``minimum`` (bools are not numbers here)."""
    if not _is_int(value) or int(value) < minimum:
        allowed = "1 or more" if minimum == 1 else f"{minimum} or more"
        raise ValueError(f"{name} must be a whole number, {allowed}; got {value!r}")
    return int(value)


def number(name: str, value, *, positive: bool = False, allow_zero: bool = True, at_most: float | None = None):
    """``value`` if it is a finite real number (``positive``: above zero, or zero too with ``allow_zero``)."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if ok and not math.isfinite(float(value)):
        ok = False
    if ok and positive and not (float(value) > 0 or (allow_zero and float(value) == 0)):
        ok = False
    if ok and at_most is not None and float(value) > at_most:
        ok = False
    if not ok:
        what = (
            ("a finite number, zero or more" if allow_zero else "a positive finite number")
            if positive
            else ("a finite number")
        )
        bound = f", at most {at_most:g}" if at_most is not None else ""
        raise ValueError(f"{name} must be {what}{bound}; got {value!r}")
    return value


def positive(name: str, value) -> float:
    """A finite number above zero (seconds, rates, bandwidths, peaks)."""
    return float(number(name, value, positive=True, allow_zero=False))


def amount(name: str, value) -> float:
    """A finite number, zero or more (bytes, FLOPs, items)."""
    return float(number(name, value, positive=True, allow_zero=True))


def fraction(name: str, value, *, zero_ok: bool = False) -> float:
    """A finite number in (0, 1] (or [0, 1] with ``zero_ok``)."""
    if (
        not isinstance(value, (int, float, np.integer, np.floating))
        or isinstance(value, bool)
        or not math.isfinite(value)
    ):
        ok = False
    else:
        ok = bool((0 <= value <= 1) if zero_ok else (0 < value <= 1))
    if not ok:
        raise ValueError(f"{name} must be a number from {'0' if zero_ok else 'above 0'} to 1; got {value!r}")
    return float(value)


_positive = positive


def finite_values(name: str, values: Iterable, *, positive: bool = False) -> list[float]:
    """Every value a finite number (above zero with ``positive``); the list of them as floats."""
    out = []
    for i, v in enumerate(values):
        try:
            out.append(_positive(f"{name}[{i}]", v) if positive else float(number(f"{name}[{i}]", v)))
        except ValueError:
            what = "finite numbers above zero" if positive else "finite numbers"
            raise ValueError(f"{name} must hold {what}; {name}[{i}] is {v!r}") from None
    return out


def function(name: str, fn) -> None:
    """``fn`` must be callable (a function, a model)."""
    if not callable(fn):
        raise TypeError(f"{name} must be a function or a model to call, got {type(fn).__name__} {fn!r:.60}")


def module(name: str, model) -> None:
    """``model`` must be a ``torch.nn.Module``."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{name} must be a torch.nn.Module, got {type(model).__name__}")
