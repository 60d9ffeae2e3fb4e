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


def _finite(value) -> bool:
    real = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    return real and math.isfinite(float(value))


def number(name: str, value) -> float:
    """``value`` as a float, if it is a finite real number (bools are not numbers here)."""
    if not _finite(value):
        raise ValueError(f"{name} must be a finite number; got {value!r}")
    return float(value)


def positive(name: str, value) -> float:
    """A finite number above zero (seconds, rates, bandwidths, peaks)."""
    if not (_finite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number; got {value!r}")
    return float(value)


def amount(name: str, value) -> float:
    """A finite number, zero or more (bytes, FLOPs, items)."""
    if not (_finite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number, zero or more; got {value!r}")
    return float(value)


def fraction(name: str, value) -> float:
    """A finite number above 0 and at most 1 (a share, a utilisation)."""
    if not (_finite(value) and 0 < value <= 1):
        raise ValueError(f"{name} must be a number from above 0 to 1; got {value!r}")
    return float(value)


def finite_values(name: str, values: Iterable, *, above_zero: bool = False) -> list[float]:
    """Every value a finite number (above zero with ``above_zero``); the list of them as floats."""
    out = []
    for i, v in enumerate(values):
        if not (_finite(v) and (v > 0 or not above_zero)):
            what = "finite numbers above zero" if above_zero else "finite numbers"
            raise ValueError(f"{name} must hold {what}; {name}[{i}] is {v!r}")
        out.append(float(v))
    return out


def function(name: str, fn) -> None:
    """``fn`` must be callable (a function, a model)."""
    if not callable(fn):
        raise TypeError(f"{name} must be a function or a model to call, got {type(fn).__name__} {fn!r:.60}")


def module(name: str, model) -> None:
    """``model`` must be a ``torch.nn.Module``."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{name} must be a torch.nn.Module, got {type(model).__name__}")
