"""What a timing claim says, written as a value before anything is measured (every notebook).

A claim is a sentence, a condition on a quantity, and optionally the prediction it came from::

    Claim("a training step costs well over one forward pass (training / inference time)",
          ratio("training step", "inference") > 1.5,
          prediction="3x from FLOPs")

A :class:`Quantity` says how the number the claim is about follows from each variant's statistic (its low
quantile of seconds, or its high quantile of a rate). It is written on plain floats: ``ratio("a", "b")`` is
``stats["a"] / stats["b"]``, and quantities combine with ``+ - * /`` and numbers
(``fitted(...) / stat("big") - 1``). :func:`quantity` turns any function of the statistics into one. The
bootstrap that puts an interval on the quantity (:mod:`.verdicts`) evaluates it once per resample; the
built-in quantities do that for all resamples at once, a function from :func:`quantity` once per resample.

A condition is ``q > margin``, ``q < margin`` or ``q.between(low, high)``. Nothing is measured here:
:func:`labkit.claims.decide` measures the variants and decides claims.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np


class Outcome(StrEnum):
    """A verdict's outcome. A ``str`` too, so ``verdict.verdict == "holds"`` and the JSON records read as before."""

    HOLDS = "holds"
    CONTRADICTED = "contradicted"
    UNDECIDED = "undecided"


HOLDS, CONTRADICTED, UNDECIDED = Outcome.HOLDS, Outcome.CONTRADICTED, Outcome.UNDECIDED
_OPS = (">", "<", "between")


@dataclass(frozen=True)
class Expectation:
    """Where the claimed quantity must lie: above a margin, below it, or between two."""

    op: str
    low: float
    high: float

    @classmethod
    def parse(cls, spec: Sequence | Expectation) -> Expectation:
        """``(">", t)``, ``("<", t)`` or ``("between", lo, hi)`` (or an Expectation) as an Expectation."""
        if isinstance(spec, Expectation):
            return spec
        allowed = "('>', margin), ('<', margin) or ('between', low, high)"
        if not isinstance(spec, Sequence) or isinstance(spec, str) or not spec or spec[0] not in _OPS:
            raise ValueError(f"expect must be {allowed}, got {spec!r}")
        op, *values = spec
        if len(values) != (2 if op == "between" else 1) or not all(_is_number(v) for v in values):
            raise ValueError(f"expect must be {allowed}, got {spec!r}")
        if op == ">":
            return cls(op, float(values[0]), math.inf)
        if op == "<":
            return cls(op, -math.inf, float(values[0]))
        if not values[0] < values[1]:
            raise ValueError(f"expect ('between', low, high) needs low < high, got {spec!r}")
        return cls(op, float(values[0]), float(values[1]))

    def contains(self, low: float, high: float) -> bool:
        """True if the whole interval [low, high] lies on the claimed side."""
        return self.low < low and high < self.high

    def excludes(self, low: float, high: float) -> bool:
        """True if the whole interval [low, high] lies on the wrong side."""
        return high < self.low or low > self.high

    def verdict(self, low: float, high: float, wide: tuple[float, float] | None = None) -> Outcome:
        """Holds if [low, high] lies inside the claimed region; contradicted if the ``wide`` interval (the same
        one if not given) lies wholly outside it; undecided otherwise."""
        if self.contains(low, high):
            return HOLDS
        if self.excludes(*(wide if wide is not None else (low, high))):
            return CONTRADICTED
        return UNDECIDED

    def __str__(self) -> str:
        if self.op == ">":
            return f"> {self.low:.3g}"
        if self.op == "<":
            return f"< {self.high:.3g}"
        return f"between {self.low:.3g} and {self.high:.3g}"


def _is_number(value: object) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)


class Quantity:
    """The number a claim is about, as a function of each variant's statistic (see the module's docstring).

    ``fn`` takes a mapping of name -> statistic and returns a number. With ``vectorised=True`` it also works
    elementwise when each statistic is an array of bootstrap resamples (the built-ins do), so the bootstrap
    calls it once. ``reads`` names the statistics it reads, so that a claim about a variant that was not
    measured is an error before the rounds are spent (``None``: not known).
    """

    __array_ufunc__ = None  # numpy scalars defer to these operators instead of broadcasting over a Quantity

    def __init__(
        self, fn: Callable[[Mapping], Any], describe: str, reads: Iterable[str] | None = None, vectorised: bool = False
    ):
        if not callable(fn):
            raise TypeError(f"a quantity needs a function of the statistics, got {fn!r}")
        self.fn, self.describe, self.vectorised = fn, describe, vectorised
        self.reads = frozenset(reads) if reads is not None else None

    def __call__(self, stats: Mapping[str, float]) -> float:
        """The quantity for one set of statistics (plain floats); nan where it divides by zero."""
        try:
            return float(self.fn(stats))
        except ZeroDivisionError:
            return math.nan

    def resampled(self, names: Sequence[str], table: np.ndarray) -> np.ndarray:
        """The quantity for each row of ``table`` (resamples x variants, columns in the order of ``names``)."""
        if self.vectorised:
            with np.errstate(divide="ignore", invalid="ignore"):
                values = self.fn({n: table[:, j] for j, n in enumerate(names)})
            return np.broadcast_to(np.asarray(values, dtype=float), (table.shape[0],))
        return np.asarray([self(dict(zip(names, row, strict=True))) for row in table.tolist()], dtype=float)

    # The condition: q > margin, q < margin, q.between(low, high).
    def __gt__(self, margin: float) -> Condition:
        return Condition(self, Expectation.parse((">", _margin(margin))))

    def __lt__(self, margin: float) -> Condition:
        return Condition(self, Expectation.parse(("<", _margin(margin))))

    def between(self, low: float, high: float) -> Condition:
        """The condition low < quantity < high."""
        return Condition(self, Expectation.parse(("between", _margin(low), _margin(high))))

    def __ge__(self, margin: float) -> Condition:
        raise TypeError("a claim's condition is q > margin, q < margin or q.between(low, high); not >= or <=")

    __le__ = __ge__

    def __bool__(self) -> bool:
        raise TypeError(
            "a quantity has no truth value before it is measured: write a condition (q > margin) inside a Claim"
        )

    # Arithmetic: with numbers and other quantities, elementwise.
    def _combine(self, other: object, op: Callable, symbol: str, swap: bool = False) -> Quantity:
        right = _as_quantity(other)
        left, right = (right, self) if swap else (self, right)
        lf, rf = left.fn, right.fn
        reads = None if left.reads is None or right.reads is None else left.reads | right.reads
        return Quantity(
            lambda s: op(lf(s), rf(s)),
            f"({left.describe} {symbol} {right.describe})",
            reads,
            left.vectorised and right.vectorised,
        )

    def __add__(self, other):
        return self._combine(other, operator.add, "+")

    def __radd__(self, other):
        return self._combine(other, operator.add, "+", swap=True)

    def __sub__(self, other):
        return self._combine(other, operator.sub, "-")

    def __rsub__(self, other):
        return self._combine(other, operator.sub, "-", swap=True)

    def __mul__(self, other):
        return self._combine(other, operator.mul, "*")

    def __rmul__(self, other):
        return self._combine(other, operator.mul, "*", swap=True)

    def __truediv__(self, other):
        return self._combine(other, operator.truediv, "/")

    def __rtruediv__(self, other):
        return self._combine(other, operator.truediv, "/", swap=True)

    def __neg__(self):
        return 0 - self

    def __repr__(self) -> str:
        return self.describe


def _margin(value: object) -> float:
    if not _is_number(value):
        raise TypeError(f"a claim's margin is a number, got {value!r}")
    return float(value)  # type: ignore[arg-type]  # checked just above


def _as_quantity(value: object) -> Quantity:
    if isinstance(value, Quantity):
        return value
    if _is_number(value):
        return constant(float(value))  # type: ignore[arg-type]  # checked just above
    raise TypeError(f"a quantity combines with numbers and other quantities, not {value!r}")


@dataclass(frozen=True)
class Condition:
    """Where a quantity must lie for a claim to hold (``ratio("a", "b") > 1.5`` makes one)."""

    quantity: Quantity
    expect: Expectation

    def __str__(self) -> str:
        return f"{self.quantity.describe} {self.expect}"


@dataclass(frozen=True)
class Claim:
    """A statement about measurements, before they are made: decided by :func:`labkit.claims.decide`.

    Taught in notebook `start_here`.

    ``statement`` is the sentence a learner reads; ``condition`` says where a quantity must lie
    (``ratio("training step", "inference") > 1.5``); ``prediction`` is what first principles predict (shown
    beside the measurement); ``unit`` is appended to the numbers shown. ``strict=False`` makes a claim that
    never fails a test run when contradicted (a learner's own prediction: it is judged, not the lesson).
    ``predicted`` is the prediction as a number of the claimed quantity, where first principles give one: the
    verdict then says how far it was from the measurement beside whether the condition held, so a loose margin
    cannot pass for a good prediction. A claim whose margin is not a prediction (an ordering) leaves it out.
    """

    statement: str
    condition: Condition
    prediction: str | None = None
    unit: str = ""
    strict: bool = True
    predicted: float | None = None

    def __post_init__(self):
        if not isinstance(self.statement, str) or not self.statement.strip():
            raise TypeError(f"a claim's statement is a sentence, got {self.statement!r}")
        if isinstance(self.condition, bool | np.bool_):
            raise TypeError(
                f"the condition of {self.statement!r} is already {self.condition}: it was computed from numbers "
                "before the measurement; write it on a quantity instead, e.g. ratio('a', 'b') > 1.5"
            )
        if not isinstance(self.condition, Condition):
            raise TypeError(
                f"the condition of {self.statement!r} must be q > margin, q < margin or q.between(low, high) on a "
                f"quantity (ratio, exponent, fitted, stat, quantity), got {self.condition!r}"
            )
        if self.prediction is not None and not isinstance(self.prediction, str):
            raise TypeError(f"a claim's prediction is a sentence (a str), got {self.prediction!r}")
        if self.predicted is not None:
            if not _is_number(self.predicted):
                raise TypeError(
                    f"predicted= of {self.statement!r} is the predicted value of the claimed quantity, a number "
                    f"(or None where the margin is not a prediction), got {self.predicted!r}"
                )
            if not math.isfinite(self.predicted):
                raise ValueError(f"predicted= of {self.statement!r} must be a finite number, got {self.predicted!r}")
            object.__setattr__(self, "predicted", float(self.predicted))

    @property
    def quantity(self) -> Quantity:
        return self.condition.quantity

    @property
    def expect(self) -> Expectation:
        return self.condition.expect


# The quantities.


def constant(value: float) -> Quantity:
    """A number, as a quantity (what ``2 * q`` turns the 2 into)."""
    return Quantity(lambda s: value, f"{value:g}", reads=(), vectorised=True)


def stat(name: str) -> Quantity:
    """The statistic of variant ``name`` itself (its low quantile of seconds, or high quantile of a rate).

    Taught in notebook `start_here`.
    """
    return Quantity(lambda s: s[name], repr(name), reads=(name,), vectorised=True)


def ratio(numerator: str, denominator: str, per: Mapping[str, float] | None = None) -> Quantity:
    """``stat[numerator] / stat[denominator]`` (how many times slower A is than B).

    Taught in notebook `start_here`.

    ``per`` divides each statistic by a count first (items, tokens), so the ratio compares costs per item:
    ``ratio("batch 16", "batch 1", per={"batch 16": 16, "batch 1": 1})``.
    """
    if per is None:
        return Quantity(
            lambda s: s[numerator] / s[denominator], f"{numerator!r}/{denominator!r}", (numerator, denominator), True
        )
    missing = [n for n in (numerator, denominator) if n not in per]
    if missing or not all(_is_number(per[n]) and per[n] > 0 for n in (numerator, denominator)):
        raise ValueError(f"per= needs a positive count for {numerator!r} and {denominator!r}, got {dict(per)}")
    a, b = float(per[numerator]), float(per[denominator])
    return Quantity(
        lambda s: (s[numerator] / a) / (s[denominator] / b),
        f"({numerator!r}/{a:g})/({denominator!r}/{b:g})",
        (numerator, denominator),
        True,
    )


def exponent(sizes: Mapping[str, float]) -> Quantity:
    """The power-law exponent k of stat ≈ c · size^k, fitted by least squares on log–log axes.

    Taught in notebook `input_size`.

    ``sizes`` maps each variant's name to its size (items, parameters, sequence length).
    """
    names = list(sizes)
    if len(set(sizes.values())) < 2 or any(v <= 0 for v in sizes.values()):
        raise ValueError(f"an exponent needs at least two different positive sizes, got {dict(sizes)}")
    lx = np.log(np.asarray([sizes[n] for n in names], dtype=float))
    centred = lx - lx.mean()

    def fit(s: Mapping) -> Any:
        ly = np.log(np.stack([np.asarray(s[n], dtype=float) for n in names], axis=-1))  # (..., sizes)
        return (ly * centred).sum(axis=-1) / (centred**2).sum()

    return Quantity(fit, f"exponent over {names}", names, vectorised=True)


def fitted(sizes: Mapping[str, float], at: float, law: str = "linear") -> Quantity:
    """The statistic that a fit over ``sizes`` predicts at size ``at`` (extrapolation).

    Taught in notebook `input_size`.

    ``law="linear"``: least squares y = fixed + per_unit · size; ``law="power"``: y = c · size^k on log–log axes.
    """
    if law not in ("linear", "power"):
        raise ValueError(f"law must be 'linear' or 'power', got {law!r}")
    names = list(sizes)
    if len(set(sizes.values())) < 2:
        raise ValueError(f"a fit needs at least two different sizes, got {dict(sizes)}")
    x = np.asarray([sizes[n] for n in names], dtype=float)
    where = float(at)
    if law == "power":
        x, where = np.log(x), math.log(where)
    centred = x - x.mean()

    def predict(s: Mapping) -> Any:
        y = np.stack([np.asarray(s[n], dtype=float) for n in names], axis=-1)  # (..., sizes)
        y = np.log(y) if law == "power" else y
        slope = (y * centred).sum(axis=-1) / (centred**2).sum()
        value = y.mean(axis=-1) + slope * (where - x.mean())
        return np.exp(value) if law == "power" else value

    return Quantity(predict, f"{law} fit over {names} at {at:g}", names, vectorised=True)


def quantity(fn: Callable[[Mapping[str, float]], float], describe: str = "", reads: Iterable[str] | None = None):
    """Any function of the statistics (a mapping name -> float) as a quantity.

    Taught in notebook `start_here`.

    For what the built-ins and their arithmetic do not say: ``quantity(lambda s: max(s["a"], s["b"]))``.
    The bootstrap calls it once per resample, with plain floats.
    """
    return Quantity(fn, describe or getattr(fn, "__name__", "quantity"), reads)
