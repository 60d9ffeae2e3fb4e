"""Verdicts on timing claims: the statistics behind :mod:`labkit.claims` (every notebook).

A claim is decided on interleaved rounds of timings (:func:`labkit.claims.decide` takes them): a bootstrap
interval over rounds on the claimed quantity, then **holds** (the 95% interval wholly on the claimed side),
**contradicted** (the 99% interval wholly on the wrong side, over at least 5 rounds) or **undecided**.
This module holds that decision (:func:`judge`), the :class:`Verdict` it gives, how a verdict is shown and
recorded (:func:`report`), strict mode, and the whole-run rule for undecided claims (:func:`noisy_run`).
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

from ..core import environment
from ..core.errors import ClaimContradicted
from ..core.result import Result
from .statements import CONTRADICTED, HOLDS, UNDECIDED, Claim, Expectation, Outcome, Quantity
from .statements import quantity as _quantity

CLAIMS_ENV = "LABKIT_CLAIMS"  # "strict": a contradicted claim raises (make test, make report)
RESAMPLES = 2000  # bootstrap resamples per decision: enough for a 95% interval's ends to settle to ~1%
# A contradicted claim fails a test run, so it needs stronger evidence than "holds": its 99% interval must lie
# wholly on the wrong side, over at least this many rounds (a bootstrap over 3 or 4 rounds is overconfident).
CONTRADICTION_CONFIDENCE = 0.99
MIN_ROUNDS_TO_CONTRADICT = 5


class ClaimLog(Protocol):
    """Where decided claims are recorded: one method (:class:`labkit.lab.records.ResultLog` is one)."""

    def add_claim(self, claim: Verdict) -> None: ...


def strict() -> bool:
    """True under ``make test`` / ``make report`` (``LABKIT_CLAIMS=strict``): contradicted claims raise."""
    return environment.get(CLAIMS_ENV) == "strict"


@dataclass
class Verdict(Result):
    """A decided claim: what was claimed, the measured quantity with its interval, and the verdict.

    ``stats`` holds each variant's statistic, ``samples`` its rounds, and
    ``returned`` what each untimed variant returned round by round (a serving run's metrics, a profile).
    ``predicted`` is the claim's numeric prediction of the quantity (None if it has none); ``budget_s`` and
    ``max_rounds`` are the limits the rounds were measured under (None for rounds measured elsewhere), and
    ``limits_given`` those of them the call passed (the others were the defaults), so that an undecided verdict
    can say which to raise, or to add.
    """

    statement: str
    expect: str
    verdict: Outcome
    estimate: float
    low: float
    high: float
    confidence: float
    rounds: int
    seconds: float
    stats: dict[str, float]  # the robust statistic of each variant (seconds per call when timed)
    spread: dict[str, float]  # IQR / median of each variant over the rounds
    samples: dict[str, list[float]] = field(repr=False)
    prediction: str | None = None
    unit: str = ""
    threads: int | None = None
    load_average: float | None = None
    cpus: int | None = None
    predicted: float | None = None
    budget_s: float | None = None
    max_rounds: int | None = None
    limits_given: tuple[str, ...] = field(default=(), repr=False)  # of budget_s, max_rounds: those the call passed
    better: str | dict[str, str] = field(default="lower", repr=False)  # how the statistics were taken
    strict: bool = field(default=True, repr=False)  # False: never raises (a learner's prediction)
    returned: dict[str, list] = field(default_factory=dict, repr=False)
    reused: bool = field(default=False, repr=False)  # True: its rounds are an earlier verdict's (decided again)

    @property
    def decided(self) -> bool:
        return self.verdict != UNDECIDED

    def to_dict(self) -> dict:
        out = asdict(self)
        for name in ("better", "strict", "returned", "reused", "limits_given"):
            out.pop(name)
        return out

    def table(
        self,
        columns: Mapping[str, Callable[[Any, float], object] | Mapping[Any, object]],
        rows: Sequence | None = None,
        index: str = "variant",
        digits: int | None = 3,
    ) -> Any:
        """The variants' statistics as a table (a pandas DataFrame): one row per variant, one column per entry.

        A column is a function of (variant, its statistic), e.g.
        ``{"measured ms": lambda name, s: 1e3 * s}``, or a mapping variant -> value (a prediction made before).
        ``rows`` picks and orders the variants (default: every one measured); ``digits`` rounds the numbers.
        """
        import pandas as pd

        names = list(self.stats) if rows is None else list(rows)
        unknown = [name for name in names if name not in self.stats]
        if unknown:
            raise KeyError(f"rows {unknown} were not measured; the variants are {list(self.stats)}")
        data = {
            title: [column(name, self.stats[name]) if callable(column) else column[name] for name in names]
            for title, column in columns.items()
        }
        frame = pd.DataFrame(data, index=pd.Index(names, name=index))
        return frame.round(digits) if digits is not None else frame

    def _value(self, x: float) -> str:
        return f"{x:.3g}{self.unit}"

    def __str__(self) -> str:
        mark = {HOLDS: "holds ✓", CONTRADICTED: "CONTRADICTED ✗", UNDECIDED: "undecided ?"}[self.verdict]
        # wrapped to the book's column like the lines below, the statement's continuation indented under it
        lines = [textwrap.fill(f"Claim: {self.statement}", LINE_CHARS, subsequent_indent="    ")]
        if self.prediction or self.predicted is not None:
            lines.append(f"  predicted: {self.prediction or self._value(self.predicted or 0.0)}")
        lines.append(
            f"  measured:  {self._value(self.estimate)} ({self.confidence:.0%} interval "
            f"{self._value(self.low)} to {self._value(self.high)}; {self.rounds} interleaved rounds"
            + (f", {self.seconds:.1f} s)" if self.seconds > 0 else ", timed by the workers)")
        )
        claimed = f"  claimed:   {self.expect}  ->  {mark}"
        off, predicted = self.prediction_error(), self.predicted
        if off is not None and predicted is not None:
            joined = (", but " if self.verdict == HOLDS and not off.startswith("within") else "; ") + (
                f"the prediction ({self._value(predicted)}) was {off} the measurement ({self._value(self.estimate)})"
            )
            if len(claimed) + len(joined) <= LINE_CHARS:
                claimed += joined
            else:  # the book's column: the comparison goes on a line of its own, right under the verdict
                lines.append(claimed)
                claimed = " " * 13 + joined.removeprefix(", ").removeprefix("; ")
        lines.append(claimed)
        if self.verdict == UNDECIDED:
            spread = ", ".join(f"{name} {s:.0%}" for name, s in self.spread.items())
            load = (
                f"load average {self.load_average:.2f} on{NO_BREAK}{self.cpus}{NO_BREAK}CPUs"
                if self.load_average is not None
                else ""
            )
            for text in (
                f"too noisy to tell: spread over rounds (IQR/median) {spread}; {load}.",
                f"What to do: close other programs and {self._more_rounds()}.",
            ):  # wrapped to the book's column; a no-break space keeps a number with its unit
                wrapped = textwrap.fill(text, LINE_CHARS, initial_indent="  ", subsequent_indent="    ")
                lines.append(wrapped.replace(NO_BREAK, " "))
        elif self.verdict == CONTRADICTED:
            lines.append(
                "  on this machine the measurement is confidently on the wrong side of the claim (even its 99% "
                "interval): read the explanation below, and tell us (with your machine card) if it surprises you."
            )
        return "\n".join(lines)

    def prediction_error(self) -> str | None:
        """How far the numeric prediction was from the measurement, in words ("4.7× below", "within 10% of");
        None if the claim has no numeric prediction."""
        if self.predicted is None:
            return None
        return _prediction_error(self.predicted, self.estimate, self.unit)

    def _more_rounds(self) -> str:
        """The advice of an undecided verdict: which argument of which call gives it more rounds, and to what."""
        if self.budget_s is None or self.max_rounds is None:
            return (
                "run the cell that measured these rounds again (they were measured before the claim was decided, "
                "e.g. by worker processes), with more rounds if it takes a number of them"
            )
        ran_out = []  # (argument, what it was, what to try)
        if self.rounds >= self.max_rounds:
            ran_out.append(("max_rounds", f"{self.max_rounds}", f"{2 * self.max_rounds}"))
        if self.rounds < self.max_rounds or self.seconds >= self.budget_s:
            # rounds may outrun the budget (the first min_rounds are always taken): double what they took
            spent = f", spent:{NO_BREAK}{self.seconds:.1f}{NO_BREAK}s" if self.seconds > 1.2 * self.budget_s else ""
            more = float(f"{2 * max(self.budget_s, self.seconds):.2g}")
            ran_out.append(("budget_s", f"{self.budget_s:g}{NO_BREAK}s{spent}", f"{more:g}"))
        given = [r for r in ran_out if r[0] in self.limits_given]
        defaulted = [r for r in ran_out if r[0] not in self.limits_given]
        cell = "that cell" if self.reused else "this cell"
        call = "the earlier cell's call that measured these rounds" if self.reused else "this cell's call"
        steps = []
        if given:  # the call passed them: raise them there
            used = " and ".join(f"`{name}` (used:{NO_BREAK}{value})" for name, value, _ in given)
            example = ", ".join(f"{name}={more}" for name, _, more in given)
            steps.append(f"raise {used} in {call}{' that measured them' if not self.reused else ''}, e.g. {example}")
        if defaulted:  # the call left them at their defaults: there is nothing to raise, only to add
            add = ", ".join(f"{name}={more}" for name, _, more in defaulted)
            defaults = " and ".join(f"`{name}` of {value}" for name, value, _ in defaulted)
            where = "the earlier cell's `lab.decide(...)` call" if self.reused else "this cell's `lab.decide(...)` call"
            steps.append(f"add `{add}` to {where} (the default {defaults} ran out)")
        again = " (this verdict decided its rounds again)" if self.reused else ""
        return f"run {cell} again{again}, or {' and '.join(steps)}"


LINE_CHARS = 92  # what the book's column shows of a line of output
NO_BREAK = "\u00a0"  # textwrap breaks only at ASCII whitespace


def _prediction_error(predicted: float, measured: float, unit: str = "") -> str:
    """A prediction beside a measurement, in words: ``"within 10% of"``, ``"30% above"``, ``"4.7× below"`` (a share of
    the measurement, or a factor from 1.5 on, where both have the same sign), else the difference (``"0.2 below"``)."""
    if abs(predicted - measured) <= 0.1 * abs(measured):
        return "within 10% of"
    direction = "below" if predicted < measured else "above"
    if predicted * measured > 0:
        factor = max(predicted / measured, measured / predicted)
        if factor < 1.5:
            return f"{abs(predicted / measured - 1):.0%} {direction}"
        return f"{factor:.2g}× {direction}" if factor < 10 else f"{factor:.0f}× {direction}"
    return f"{abs(measured - predicted):.2g}{unit} {direction}"


def _statistic(samples: np.ndarray, quantile: float, higher: np.ndarray, axis: int) -> np.ndarray:
    """Per variant: the ``quantile`` of lower-is-better samples, the 1 − ``quantile`` of higher-is-better."""
    low = np.quantile(samples, quantile, axis=axis)
    high = np.quantile(samples, 1.0 - quantile, axis=axis)
    return np.where(higher, high, low)


def judge(
    samples: Mapping[str, Sequence[float]],
    quantity: Quantity | Callable[[Mapping[str, float]], float],
    expect: Sequence | Expectation,
    *,
    better: str | Mapping[str, str] = "lower",
    quantile: float = 0.25,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[str, float, float, float, dict[str, float]]:
    """Decide a claim from per-round samples (one value per variant per round, rounds aligned).

    Returns ``(verdict, estimate, low, high, stats)``. Used by :func:`labkit.claims.decide` after every round, and
    directly by tests on synthetic timings. ``quantity`` is a :class:`Quantity` or a function of plain floats.
    """
    names = list(samples)
    lengths = {len(samples[n]) for n in names}
    if len(lengths) != 1:
        raise ValueError(f"every variant needs the same number of rounds, got {[len(samples[n]) for n in names]}")
    table = np.asarray([samples[n] for n in names], dtype=float).T  # (rounds, variants)
    if table.shape[0] < 2:
        raise ValueError("a claim needs at least two rounds to put an interval on it")
    if not np.isfinite(table).all():
        raise ValueError("a sample is not a finite number; a variant failed or returned nothing")
    higher = np.asarray([_better(better, n) == "higher" for n in names])
    point = _statistic(table, quantile, higher, axis=0)
    stats = {n: float(v) for n, v in zip(names, point, strict=True)}
    of = quantity if isinstance(quantity, Quantity) else _quantity(quantity)
    estimate = of(stats)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, table.shape[0], size=(RESAMPLES, table.shape[0]))
    resampled = _statistic(table[picks], quantile, higher, axis=1)  # (resamples, variants)
    values = of.resampled(names, resampled)
    values = values[np.isfinite(values)]
    if values.size == 0 or not math.isfinite(estimate):
        raise ValueError("the claim's quantity is not a finite number for these measurements")
    tail = (1.0 - confidence) / 2
    wide_tail = (1.0 - max(confidence, CONTRADICTION_CONFIDENCE)) / 2
    low, high, wide_low, wide_high = (
        float(v) for v in np.quantile(values, [tail, 1.0 - tail, wide_tail, 1.0 - wide_tail])
    )
    verdict = Expectation.parse(expect).verdict(low, high, wide=(wide_low, wide_high))
    if verdict == CONTRADICTED and table.shape[0] < MIN_ROUNDS_TO_CONTRADICT:
        verdict = UNDECIDED  # too few rounds to fail anything on
    return verdict, estimate, low, high, stats


def _verdict(
    claim: Claim, decided: tuple, samples: Mapping[str, Sequence[float]], confidence: float, seconds: float, **extra
) -> Verdict:
    """A :class:`Verdict` on ``claim`` from :func:`judge`'s answer, with the spread and the machine's load now."""
    verdict, estimate, low, high, stats = decided
    return Verdict(
        statement=claim.statement,
        expect=str(claim.expect),
        verdict=verdict,
        estimate=estimate,
        low=low,
        high=high,
        confidence=confidence,
        rounds=len(next(iter(samples.values()))),
        seconds=seconds,
        stats=stats,
        spread=_spread(samples),
        samples={n: list(v) for n, v in samples.items()},
        prediction=claim.prediction,
        predicted=claim.predicted,
        unit=claim.unit,
        strict=claim.strict,
        load_average=os.getloadavg()[0] if hasattr(os, "getloadavg") else None,  # elsewhere (Windows): None
        cpus=os.cpu_count(),
        **extra,
    )


def _raise_if_contradicted(result: Verdict) -> None:
    if result.verdict == CONTRADICTED and result.strict and strict():
        raise ClaimContradicted(
            f"{result.statement}: measured {result.estimate:.3g} [{result.low:.3g}, {result.high:.3g}], "
            f"claimed {result.expect}"
        )


def table(verdicts: Verdict | Sequence[Verdict] | Sequence[Mapping]) -> Any:
    """Decided claims as a table (a pandas DataFrame): claim, prediction, measured with its interval, verdict, and
    how far a numeric prediction was from the measurement.

    Taught in notebook `start_here`. Takes verdicts, or the claims a result log recorded (``log.claims``: the same
    fields as dictionaries; records written before claims carried a numeric prediction read as having none).
    """
    import pandas as pd

    listed: list[Verdict | Mapping] = [verdicts] if isinstance(verdicts, Verdict) else list(verdicts)

    def row(v: Verdict | Mapping) -> dict:
        get = v.get if isinstance(v, Mapping) else lambda key, default=None: getattr(v, key, default)
        unit = get("unit", "") or ""
        confidence = get("confidence")
        predicted = get("predicted")
        return {
            "claim": get("statement"),
            "predicted": get("prediction") or (f"{predicted:.3g}{unit}" if predicted is not None else ""),
            "measured": f"{get('estimate'):.3g}{unit}",
            "interval": f"{get('low'):.3g}{unit} to {get('high'):.3g}{unit}"
            + (f" ({confidence:.0%})" if confidence is not None else ""),
            "claimed": get("expect"),
            "verdict": str(get("verdict")),
            "prediction vs measured": (
                _prediction_error(predicted, get("estimate", math.nan), unit).removesuffix(" of")
                if predicted is not None
                else ""
            ),
        }

    return pd.DataFrame(
        [row(v) for v in listed],
        columns=["claim", "predicted", "measured", "interval", "claimed", "verdict", "prediction vs measured"],
    )


def report(results: Sequence[Verdict], log: ClaimLog | None = None, show: bool = True) -> None:
    """Show decided claims, record them in ``log``; then, in strict mode, raise on the first contradicted one
    (after all are shown, so a failing run shows every verdict)."""
    for result in results:
        if show:
            print(result)
        if log is not None:
            log.add_claim(result)
    for result in results:
        _raise_if_contradicted(result)


def noisy_run(decided: Sequence[Mapping]) -> str | None:
    """The whole-run rule of ``make test`` and ``make report``: ``None`` if the run was quiet enough, else why not.

    A contradicted claim fails its own notebook. Undecided claims (too noisy to tell) are listed but fail nothing,
    unless the whole run was unusually noisy: more than a quarter of its timing claims, and more than two,
    undecided. Then the machine was too busy for the run to test anything, and a pass would mean nothing.
    """
    undecided = [c for c in decided if c["verdict"] == UNDECIDED]
    limit = max(2, len(decided) // 4)
    if len(undecided) <= limit:
        return None
    return (
        f"{len(undecided)} of {len(decided)} timing claims were undecided (the limit is {limit}): the machine was too "
        "busy for this run to test them; run it again when the machine is quieter"
    )


def _spread(samples: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """IQR / median of each variant's rounds: how noisy the measurement was (shown when undecided)."""
    spread = {}
    for name, values in samples.items():
        q1, median, q3 = np.quantile(values, [0.25, 0.5, 0.75])
        spread[name] = float((q3 - q1) / median) if median else float("inf")
    return spread


def _better(better: str | Mapping[str, str], name: str) -> str:
    value = better.get(name, "lower") if isinstance(better, Mapping) else better
    if value not in ("lower", "higher"):
        raise ValueError(f"better must be 'lower' (times) or 'higher' (rates), got {value!r} for {name!r}")
    return value
