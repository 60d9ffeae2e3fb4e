"""Timing claims decided as statistics: **holds**, **contradicted** or **undecided** (every notebook).

A claim such as "a training step costs more than 1.5 forward passes" is a statement about two
distributions of times on a machine that is never quiet. :func:`compare` decides it the way careful
benchmark tools do (pyperf and asv compare distributions; timeit's documentation advises the least
disturbed repeat):

1. **Interleaved rounds.** Each round times every variant once, in a rotating order (A B C, B C A, ...),
   so a busy spell on the machine hits all variants alike instead of spoiling one.
2. **A robust statistic per variant**: a low quantile (default the 25th percentile) of its times over the
   rounds. Interference only ever adds time, so the low end is the undisturbed cost. For quantities where
   higher is better (requests per second), the high end is used instead (``better="higher"``).
3. **An interval on the quantity the claim is about** (a ratio, an exponent, a prediction error), by
   bootstrap over rounds: rounds are resampled whole, so each resample keeps the pairing of variants.
4. **Sequential**: after ``min_rounds`` the claim is decided after every round; more rounds are taken only
   while it is undecided, up to ``budget_s`` seconds (and ``max_rounds``).
5. **Three outcomes**: *holds* (the whole 95% interval is on the claimed side of the margin), *contradicted*
   (even the wider 99% interval is wholly on the wrong side, over at least 5 rounds: the verdict that fails a
   test needs the stronger evidence) or *undecided* (too noisy to tell; the verdict says how noisy, with the
   spread over rounds and the load average, and what to do).

A learner sees one verdict line and the lesson goes on. With ``LABKIT_CLAIMS=strict`` (set by ``make test``
and ``make report``) a contradicted claim raises :class:`ClaimContradicted`, which fails the notebook.
Deterministic facts (parameter counts, FLOPs, bytes) are not claims: notebooks check them with ``assert``.
"""

from __future__ import annotations

import math
import os
import time
import timeit
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch

from . import environment, session
from .device import sync
from .errors import ClaimContradicted, MeasurementError
from .result import Result

CLAIMS_ENV = "LABKIT_CLAIMS"  # "strict": a contradicted claim raises (make test, make report)
HOLDS, CONTRADICTED, UNDECIDED = "holds", "contradicted", "undecided"
RESAMPLES = 2000  # bootstrap resamples per decision: enough for a 95% interval's ends to settle to ~1%
# A contradicted claim fails a test run, so it needs stronger evidence than "holds": its 99% interval must lie
# wholly on the wrong side, over at least this many rounds (a bootstrap over 3 or 4 rounds is overconfident).
CONTRADICTION_CONFIDENCE = 0.99
MIN_ROUNDS_TO_CONTRADICT = 5
_OPS = (">", "<", "between")


def strict() -> bool:
    """True under ``make test`` / ``make report`` (``LABKIT_CLAIMS=strict``): contradicted claims raise."""
    return environment.get(CLAIMS_ENV) == "strict"


@dataclass(frozen=True)
class Expectation:
    """Where the claimed quantity must lie: ``(">", t)``, ``("<", t)`` or ``("between", lo, hi)``."""

    op: str
    low: float
    high: float

    @classmethod
    def parse(cls, spec: Sequence) -> Expectation:
        if isinstance(spec, Expectation):
            return spec
        allowed = "('>', margin), ('<', margin) or ('between', low, high)"
        if not isinstance(spec, Sequence) or isinstance(spec, str) or not spec or spec[0] not in _OPS:
            raise ValueError(f"expect must be {allowed}, got {spec!r}")
        op, *values = spec
        if len(values) != (2 if op == "between" else 1) or not all(isinstance(v, int | float) for v in values):
            raise ValueError(f"expect must be {allowed}, got {spec!r}")
        if op == ">":
            return cls(op, float(values[0]), math.inf)
        if op == "<":
            return cls(op, -math.inf, float(values[0]))
        if not values[0] < values[1]:
            raise ValueError(f"expect ('between', low, high) needs low < high, got {spec!r}")
        return cls(op, float(values[0]), float(values[1]))

    def verdict(self, low: float, high: float, wide: tuple[float, float] | None = None) -> str:
        """Holds if the interval [low, high] lies inside the claimed region; contradicted if the ``wide`` interval
        (the same one if not given) lies wholly outside it; undecided otherwise."""
        if self.low < low and high < self.high:
            return HOLDS
        wide_low, wide_high = wide if wide is not None else (low, high)
        if wide_high < self.low or wide_low > self.high:
            return CONTRADICTED
        return UNDECIDED

    def __str__(self) -> str:
        if self.op == ">":
            return f"> {self.low:.3g}"
        if self.op == "<":
            return f"< {self.high:.3g}"
        return f"between {self.low:.3g} and {self.high:.3g}"


@dataclass
class Claim(Result):
    """A decided claim: what was claimed, the measured quantity with its interval, and the verdict."""

    statement: str
    expect: str
    verdict: str
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
    others: list[Claim] = field(default_factory=list, repr=False)  # claims decided on the same rounds (``also``)

    @property
    def decided(self) -> bool:
        return self.verdict != UNDECIDED

    def to_dict(self) -> dict:
        out = asdict(self)
        out.pop("others")
        return out

    def _value(self, x: float) -> str:
        return f"{x:.3g}{self.unit}"

    def __str__(self) -> str:
        mark = {HOLDS: "holds ✓", CONTRADICTED: "CONTRADICTED ✗", UNDECIDED: "undecided ?"}[self.verdict]
        lines = [f"Claim: {self.statement}"]
        if self.prediction:
            lines.append(f"  predicted: {self.prediction}")
        lines.append(
            f"  measured:  {self._value(self.estimate)} ({self.confidence:.0%} interval "
            f"{self._value(self.low)} to {self._value(self.high)}; {self.rounds} interleaved rounds, "
            f"{self.seconds:.1f} s)"
        )
        lines.append(f"  claimed:   {self.expect}  ->  {mark}")
        if self.verdict == UNDECIDED:
            spread = ", ".join(f"{name} {s:.0%}" for name, s in self.spread.items())
            load = f"load average {self.load_average:.2f} on {self.cpus} CPUs" if self.load_average is not None else ""
            lines.append(
                f"  too noisy to tell: spread over rounds (IQR/median) {spread}; {load}. "
                "Close other programs and run this cell again, or give the claim a larger budget_s."
            )
        elif self.verdict == CONTRADICTED:
            lines.append(
                "  on this machine the measurement is confidently on the wrong side of the claim (even its 99% "
                "interval): read the explanation below, and tell us (with your machine card) if it surprises you."
            )
        return "\n".join(lines)


# Quantities a claim can be about. Each takes the per-variant statistics as a mapping of name -> value,
# where a value is a float or a NumPy array of bootstrap resamples, and works elementwise on both.


def ratio(numerator: str, denominator: str) -> Callable[[Mapping], object]:
    """The quantity ``stat[numerator] / stat[denominator]`` (e.g. how many times slower A is than B).

    Taught in notebook 00.
    """
    return lambda s: s[numerator] / s[denominator]


def exponent(sizes: Mapping[str, float]) -> Callable[[Mapping], object]:
    """The power-law exponent k of stat ≈ c · size^k, fitted by least squares on log–log axes.

    Taught in notebook 02.

    ``sizes`` maps each variant's name to its size (items, parameters, sequence length).
    """
    names = list(sizes)
    if len(set(sizes.values())) < 2 or any(v <= 0 for v in sizes.values()):
        raise ValueError(f"an exponent needs at least two different positive sizes, got {dict(sizes)}")
    lx = np.log(np.asarray([sizes[n] for n in names], dtype=float))
    centred = lx - lx.mean()

    def fit(s: Mapping) -> object:
        ly = np.log(np.stack([np.asarray(s[n], dtype=float) for n in names], axis=-1))  # (..., sizes)
        return (ly * centred).sum(axis=-1) / (centred**2).sum()

    return fit


def predicted(sizes: Mapping[str, float], at: float, law: str = "linear") -> Callable[[Mapping], object]:
    """The statistic that a fit over ``sizes`` predicts at size ``at`` (notebooks 02 and 11: extrapolation).

    ``law="linear"``: least squares y = fixed + per_unit · size; ``law="power"``: y = c · size^k on log–log axes.
    """
    if law not in ("linear", "power"):
        raise ValueError(f"law must be 'linear' or 'power', got {law!r}")
    names = list(sizes)
    if len(set(sizes.values())) < 2:
        raise ValueError(f"a fit needs at least two different sizes, got {dict(sizes)}")
    x = np.asarray([sizes[n] for n in names], dtype=float)
    if law == "power":
        x, at = np.log(x), math.log(at)
    centred = x - x.mean()

    def predict(s: Mapping) -> object:
        y = np.stack([np.asarray(s[n], dtype=float) for n in names], axis=-1)  # (..., sizes)
        y = np.log(y) if law == "power" else y
        slope = (y * centred).sum(axis=-1) / (centred**2).sum()
        value = y.mean(axis=-1) + slope * (at - x.mean())
        return np.exp(value) if law == "power" else value

    return predict


def block_timer(
    fn: Callable, device: torch.device | str | None = None, block_s: float = 0.02, warmup: int = 1
) -> Callable[[], float]:
    """Warm ``fn`` up, choose how many calls make one block of about ``block_s``, return a block timer.

    Taught in notebook 00.

    The returned function times one block (syncing ``device`` before and after) and returns seconds per call.
    :func:`compare` uses it for timed variants; a notebook uses it for a variant that must set something up
    around the timed calls (notebook 04 holds a block of memory while the same step is timed).
    """
    device = torch.device(device) if device is not None else None
    try:
        for _ in range(warmup):
            fn()
        sync(device)
        start = timeit.default_timer()
        fn()
        sync(device)
    except Exception as exc:  # the variant's own failure, reported before any round is timed
        name = getattr(fn, "__name__", "variant")
        raise MeasurementError(f"{name!r} raised {type(exc).__name__} while warming up: {exc}") from exc
    one = max(timeit.default_timer() - start, 1e-7)
    calls = max(1, min(10_000, math.ceil(block_s / one)))

    def block() -> float:
        sync(device)
        start = timeit.default_timer()
        for _ in range(calls):
            fn()
        sync(device)
        return (timeit.default_timer() - start) / calls

    return block


def _statistic(samples: np.ndarray, quantile: float, higher: np.ndarray, axis: int) -> np.ndarray:
    """Per variant: the ``quantile`` of lower-is-better samples, the 1 − ``quantile`` of higher-is-better."""
    low = np.quantile(samples, quantile, axis=axis)
    high = np.quantile(samples, 1.0 - quantile, axis=axis)
    return np.where(higher, high, low)


def decide(
    samples: Mapping[str, Sequence[float]],
    quantity: Callable[[Mapping], object],
    expect: Sequence,
    *,
    better: str | Mapping[str, str] = "lower",
    quantile: float = 0.25,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[str, float, float, float, dict[str, float]]:
    """Decide a claim from per-round samples (one value per variant per round, rounds aligned).

    Returns ``(verdict, estimate, low, high, stats)``. Used by :func:`compare` after every round, and
    directly by tests on synthetic timings.
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
    estimate = float(quantity(stats))
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, table.shape[0], size=(RESAMPLES, table.shape[0]))
    resampled = _statistic(table[picks], quantile, higher, axis=1)  # (resamples, variants)
    values = np.asarray(quantity({n: resampled[:, j] for j, n in enumerate(names)}), dtype=float)
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


def _claim(statement, expectation, verdict, estimate, low, high, confidence, samples, stats, prediction, unit):
    """A :class:`Claim` from decided rounds, with the spread and the machine's load at this moment."""
    return Claim(
        statement=statement,
        expect=str(expectation),
        verdict=verdict,
        estimate=estimate,
        low=low,
        high=high,
        confidence=confidence,
        rounds=len(next(iter(samples.values()))),
        seconds=0.0,
        stats=stats,
        spread=_spread(samples),
        samples={n: list(v) for n, v in samples.items()},
        prediction=prediction,
        unit=unit,
        load_average=os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        cpus=os.cpu_count(),
    )


def rotated(names: Sequence, round_index: int) -> list:
    """The order of round ``round_index``: A B C, then B C A, then C A B, ... (no variant keeps one position)."""
    shift = round_index % len(names)
    return list(names[shift:]) + list(names[:shift])


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


def compare(
    variants: Mapping[str, Callable[[], object]],
    *,
    claim: str,
    expect: Sequence,
    quantity: Callable[[Mapping], object] | None = None,
    prediction: str | None = None,
    timed: bool = True,
    better: str | Mapping[str, str] = "lower",
    device: torch.device | str | None = None,
    threads: int | None = None,
    warmup: int = 1,
    block_s: float = 0.02,
    min_rounds: int = 5,
    max_rounds: int = 60,
    budget_s: float = 5.0,
    quantile: float = 0.25,
    confidence: float = 0.95,
    unit: str = "",
    also: Sequence[Mapping] = (),
    log=None,
    show: bool = True,
) -> Claim:
    """Measure ``variants`` in interleaved rounds and decide ``claim`` about them (every notebook).

    Taught in notebook 00.

    ``variants`` maps a name to a callable. With ``timed=True`` labkit times it (warm-up, device sync,
    blocks of about ``block_s``) and a sample is seconds per call; with ``timed=False`` the callable
    returns its own sample (a p99 latency, a throughput, a prediction error) once per round.
    ``quantity`` turns the per-variant statistics into the number the claim is about, e.g.
    ``claims.ratio("training step", "inference")`` or ``claims.exponent({"xs": 1e5, "s": 1e6})``; with a
    single variant it defaults to that variant's statistic. ``expect`` is ``(">", margin)``,
    ``("<", margin)`` or ``("between", low, high)``. ``threads`` pins torch's thread count for the
    measurement (restored afterwards). The verdict is printed (``show``), added to ``log`` (a
    :class:`~labkit.records.ResultLog`) and, in strict mode, a contradicted claim raises
    :class:`ClaimContradicted`.

    ``also`` lists more claims about the same rounds, each a dict with ``claim``, ``quantity``, ``expect`` and
    optionally ``prediction`` and ``unit``: rounds continue while any of them is undecided, and each is shown
    and logged like the first (they are in the result's ``others``).
    """
    if not variants or not all(callable(fn) for fn in variants.values()):
        raise TypeError("variants must be a non-empty mapping of name -> callable")
    if quantity is None:
        if len(variants) != 1:
            raise ValueError("with more than one variant, say which quantity the claim is about (quantity=...)")
        only = next(iter(variants))
        quantity = lambda s: s[only]  # noqa: E731
    expectation = Expectation.parse(expect)
    if not 0 < quantile < 0.5:
        raise ValueError(f"quantile must be between 0 and 0.5 (a low quantile of the rounds), got {quantile}")
    if not 0.5 < confidence < 1:
        raise ValueError(f"confidence must be between 0.5 and 1, got {confidence}")
    if min_rounds < 3 or max_rounds < min_rounds:
        raise ValueError(f"need 3 <= min_rounds <= max_rounds, got {min_rounds} and {max_rounds}")
    for name in variants:
        _better(better, name)
    extra = []
    for spec in also:
        unknown = set(spec) - {"claim", "quantity", "expect", "prediction", "unit"}
        if unknown or not {"claim", "quantity", "expect"} <= set(spec):
            raise ValueError(f"each of also= needs claim, quantity and expect (prediction, unit optional), got {spec}")
        extra.append(dict(spec, expect=Expectation.parse(spec["expect"])))
    device = torch.device(device) if device is not None else None
    names = list(variants)
    used_threads = threads if threads is not None else torch.get_num_threads()
    start = time.perf_counter()
    with session.threads(used_threads):  # restored afterwards, whatever happens
        if timed:
            samplers = {n: block_timer(variants[n], device, block_s, warmup) for n in names}
        else:
            samplers = {n: (lambda fn=variants[n]: float(fn())) for n in names}
        samples: dict[str, list[float]] = {n: [] for n in names}
        rounds = 0
        while True:
            for n in rotated(names, rounds):
                samples[n].append(samplers[n]())
            rounds += 1
            if rounds < min_rounds:
                continue
            verdict, estimate, low, high, stats = decide(
                samples, quantity, expectation, better=better, quantile=quantile, confidence=confidence
            )
            pending = verdict == UNDECIDED or any(
                decide(samples, e["quantity"], e["expect"], better=better, quantile=quantile, confidence=confidence)[0]
                == UNDECIDED
                for e in extra
            )
            if not pending or rounds >= max_rounds or time.perf_counter() - start >= budget_s:
                break
    result = _claim(claim, expectation, verdict, estimate, low, high, confidence, samples, stats, prediction, unit)
    result.seconds = round(time.perf_counter() - start, 3)
    result.threads = used_threads
    report(result, log=log, show=show and not extra, raise_now=not extra)
    for e in extra:
        result.others.append(
            restate(
                result,
                claim=e["claim"],
                quantity=e["quantity"],
                expect=e["expect"],
                prediction=e.get("prediction"),
                better=better,
                quantile=quantile,
                unit=e.get("unit", ""),
                log=log,
                show=False,
                raise_now=False,
            )
        )
    if extra:
        if show:
            print("\n".join(str(c) for c in [result, *result.others]))
        for c in [result, *result.others]:
            _raise_if_contradicted(c)
    return result


def _raise_if_contradicted(result: Claim) -> None:
    if result.verdict == CONTRADICTED and strict():
        raise ClaimContradicted(
            f"{result.statement}: measured {result.estimate:.3g} [{result.low:.3g}, {result.high:.3g}], "
            f"claimed {result.expect}"
        )


def report(result: Claim, log=None, show: bool = True, raise_now: bool = True) -> Claim:
    """Show a decided claim, record it in ``log``, and raise in strict mode if it was contradicted."""
    if show:
        print(result)
    if log is not None:
        log.add_claim(result)
    if raise_now:
        _raise_if_contradicted(result)
    return result


def restate(
    measured: Claim,
    *,
    claim: str,
    expect: Sequence,
    quantity: Callable[[Mapping], object],
    prediction: str | None = None,
    better: str | Mapping[str, str] = "lower",
    quantile: float = 0.25,
    unit: str = "",
    log=None,
    show: bool = True,
    raise_now: bool = True,
) -> Claim:
    """Decide a second claim on the rounds already measured for ``measured`` (no new measurement).

    Taught in notebook 02.

    For a sweep that supports two claims (notebook 03: the time exponent, and the FLOP/s of the largest
    model against the smallest's).
    """
    expectation = Expectation.parse(expect)
    verdict, estimate, low, high, stats = decide(
        measured.samples, quantity, expectation, better=better, quantile=quantile, confidence=measured.confidence
    )
    result = replace(
        measured,
        statement=claim,
        expect=str(expectation),
        verdict=verdict,
        estimate=estimate,
        low=low,
        high=high,
        stats=stats,
        prediction=prediction,
        unit=unit,
        others=[],
    )
    return report(result, log=log, show=show, raise_now=raise_now)


def from_rounds(
    samples: Mapping[str, Sequence[float]],
    *,
    claim: str,
    expect: Sequence,
    quantity: Callable[[Mapping], object],
    prediction: str | None = None,
    better: str | Mapping[str, str] = "lower",
    quantile: float = 0.25,
    confidence: float = 0.95,
    unit: str = "",
    log=None,
    show: bool = True,
) -> Claim:
    """Decide a claim on rounds measured elsewhere: in worker processes (notebook 06's DDP ranks time their
    variants in interleaved rounds and return them), where labkit cannot add rounds on demand.
    """
    expectation = Expectation.parse(expect)
    verdict, estimate, low, high, stats = decide(
        samples, quantity, expectation, better=better, quantile=quantile, confidence=confidence
    )
    result = _claim(claim, expectation, verdict, estimate, low, high, confidence, samples, stats, prediction, unit)
    return report(result, log=log, show=show)


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
