"""Exercise checkers: every exercise cell runs, solved or not.

Used by every notebook's Exercises section (in the style of srush's GPU-Puzzles: a spec, a stub, a checker). The
expected answers live in :mod:`labkit.lab.answers`, computed, not typed into the cell below the question. A checker
never raises on an answer, so Restart & Run All works with the exercises unsolved.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..claims import CONTRADICTED, HOLDS, Claim, Quantity, Verdict, decide, judge, stat
from ..core.result import Result
from .answers import KEY, PREDICTIONS, NotYet


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
    """Judge a learner's ``answer`` to ``exercise`` (e.g. ``"inference_vs_training.3"``) against the answer key; print the verdict.

    Taught in notebook `start_here`. ``context`` passes what the answer depends on from the notebook (a measured step time,
    this machine's roofline). Returns ``None`` while the answer is still ``None`` (unsolved), else ``True`` or
    ``False``; a wrong answer gets the exercise's hint.
    """
    if exercise not in KEY:
        raise ValueError(f"no exercise {exercise!r} in the answer key; known: {', '.join(KEY)}")
    key = KEY[exercise]
    missing = [name for name in key.needs if name not in context]
    if missing:
        raise TypeError(f"{exercise} needs {', '.join(missing)} from the notebook, passed by name to labkit.check")
    extra = sorted(set(context) - set(key.needs))
    if extra:
        takes = ", ".join(key.needs) or "nothing"
        raise TypeError(f"{exercise} takes {takes} from the notebook; {', '.join(extra)} is not one of them")
    for name in key.needs:
        value = context[name]
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isfinite(value):
            raise ValueError(f"{exercise}: {name} is {value!r}, not a finite number (did the measurement above fail?)")
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


@dataclass
class PredictionCheck(Result):
    """A learner's prediction beside this machine's measurement (:func:`check_prediction`).

    ``verdict`` is ``"holds"`` (the measurement's 95% interval lies within a factor ``within`` of the prediction),
    ``"contradicted"`` (its 99% interval lies wholly outside), ``"undecided"`` (too noisy to tell), or ``None``
    while there is no prediction (nothing was measured).
    """

    exercise: str
    prediction: float | None
    within: float
    verdict: str | None = None
    measured: float | None = None
    low: float | None = None
    high: float | None = None
    rounds: int = 0
    claim: Verdict | None = field(default=None, repr=False)
    _quantity: Quantity | None = field(default=None, repr=False)

    def judge(self, prediction: float) -> str:
        """The verdict another ``prediction`` would get on the same rounds (nothing is measured again)."""
        if self.claim is None or self._quantity is None:
            raise ValueError("nothing was measured: this check had no prediction")
        band = _band(prediction, self.within)
        return judge(self.claim.samples, self._quantity, band, better=self.claim.better)[0]

    def to_dict(self) -> dict:
        return {k: v for k, v in super().to_dict().items() if not k.startswith("_") and k != "claim"}


def _band(prediction: float, within: float) -> tuple[str, float, float]:
    if not (isinstance(prediction, int | float) and not isinstance(prediction, bool)) or not prediction > 0:
        raise ValueError(f"a prediction is a positive number (a ratio, a size), got {prediction!r}")
    return ("between", prediction / within, prediction * within)


def check_prediction(
    exercise: str,
    prediction,
    measured: Mapping | Verdict | None = None,
    of: Quantity | None = None,
    *,
    unit: str = "",
    **options,
) -> PredictionCheck:
    """Measure (as :func:`labkit.claims.decide` does) only once the learner has written a ``prediction``, and
    judge it against this machine's measurement of the quantity ``of`` (by default, the only series measured).

    Taught in notebook `start_here`. ``measured`` is what :func:`~labkit.claims.decide` takes: the variants, or
    rounds measured elsewhere (worker processes); ``options`` are decide's (``device=``, ``better=``, ...). A
    prediction holds if the measured interval lies within a factor of the exercise's ``within`` (in
    :data:`labkit.lab.answers.PREDICTIONS`) of it; a contradicted prediction prints the hint and never raises,
    even under ``make test``: it is the learner's guess that is judged, not the lesson.
    """
    if exercise not in PREDICTIONS:
        raise ValueError(f"no prediction exercise {exercise!r}; known: {', '.join(PREDICTIONS)}")
    spec = PREDICTIONS[exercise]
    label = _label(exercise)
    if prediction is None:
        print(f"{label}: not attempted yet: write your prediction first (nothing is measured until you do).")
        return PredictionCheck(exercise, None, spec.within)
    if measured is None:
        raise TypeError(f"{label}: give what to measure (the variants, or rounds measured elsewhere)")
    band = _band(prediction, spec.within)
    if of is None:
        if not isinstance(measured, Mapping) or len(measured) != 1:
            raise ValueError("with more than one variant, say which quantity the prediction is about (of=...)")
        of = stat(next(iter(measured)))
    claim = Claim(f"{label}: your prediction {prediction:.3g}{unit}, within a factor {spec.within:g}",
                  of.between(*band[1:]), unit=unit, strict=False, predicted=float(prediction))  # fmt: skip
    verdict = decide(claim, measured, **options)
    if verdict.verdict == HOLDS:
        print(f"{label}: your prediction holds on this machine.")
    elif verdict.verdict == CONTRADICTED:
        print(f"{label}: this machine measured {verdict.estimate:.3g}{unit}, not {prediction:.3g}. Hint: {spec.hint}")
    else:
        print(f"{label}: too noisy to tell on this run; compare your number with the interval above.")
    return PredictionCheck(exercise, prediction, spec.within, verdict.verdict, verdict.estimate, verdict.low,
                           verdict.high, verdict.rounds, verdict, of)  # fmt: skip
