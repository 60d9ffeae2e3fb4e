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
import time
import timeit
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from ..core import device as _device
from ..core.device import sync
from ..core.errors import MeasurementError
from .verdicts import (
    UNDECIDED,
    Claim,
    Expectation,
    Quantity,
    _better,
    _claim,
    _raise_if_contradicted,
    decide,
    report,
)


def ratio(numerator: str, denominator: str) -> Quantity:
    """The quantity ``stat[numerator] / stat[denominator]`` (e.g. how many times slower A is than B).

    Taught in notebook `start_here`.
    """
    return lambda s: s[numerator] / s[denominator]


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

    def fit(s: Mapping) -> object:
        ly = np.log(np.stack([np.asarray(s[n], dtype=float) for n in names], axis=-1))  # (..., sizes)
        return (ly * centred).sum(axis=-1) / (centred**2).sum()

    return fit


def predicted(sizes: Mapping[str, float], at: float, law: str = "linear") -> Quantity:
    """The statistic that a fit over ``sizes`` predicts at size ``at`` (notebooks `input_size` and `estimating_a_job`: extrapolation).

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

    Taught in notebook `start_here`.

    The returned function times one block (syncing ``device`` before and after) and returns seconds per call.
    :func:`compare` uses it for timed variants; a notebook uses it for a variant that must set something up
    around the timed calls (notebook `memory` holds a block of memory while the same step is timed).
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
    calls = calls_per_block(timeit.default_timer() - start, block_s)

    def block() -> float:
        sync(device)
        start = timeit.default_timer()
        for _ in range(calls):
            fn()
        sync(device)
        return (timeit.default_timer() - start) / calls

    return block


def calls_per_block(one_call_s: float, block_s: float, most: int = 10_000) -> int:
    """How many calls of a function that took ``one_call_s`` make a timed block of about ``block_s`` (at least one):
    a call much shorter than the clock's resolution and the timer's own cost is timed only in a block of many."""
    return max(1, min(most, math.ceil(block_s / max(one_call_s, 1e-7))))


def _untimed(fn: Callable[[], Any]) -> Callable[[], float]:
    """A variant whose call returns the measured value itself (a rate, a count): one sample per call."""
    return lambda: float(fn())


def rotated(names: Sequence, round_index: int) -> list:
    """The order of round ``round_index``: A B C, then B C A, then C A B, ... (no variant keeps one position)."""
    shift = round_index % len(names)
    return list(names[shift:]) + list(names[:shift])


def compare(
    variants: Mapping[str, Callable[[], object]],
    *,
    claim: str,
    expect: Sequence,
    quantity: Quantity | None = None,
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
    raises: bool = True,
) -> Claim:
    """Measure ``variants`` in interleaved rounds and decide ``claim`` about them (every notebook).

    Taught in notebook `start_here`.

    ``variants`` maps a name to a callable. With ``timed=True`` labkit times it (warm-up, device sync,
    blocks of about ``block_s``) and a sample is seconds per call; with ``timed=False`` the callable
    returns its own sample (a p99 latency, a throughput, a prediction error) once per round.
    ``quantity`` turns the per-variant statistics into the number the claim is about, e.g.
    ``claims.ratio("training step", "inference")`` or ``claims.exponent({"xs": 1e5, "s": 1e6})``; with a
    single variant it defaults to that variant's statistic. ``expect`` is ``(">", margin)``,
    ``("<", margin)`` or ``("between", low, high)``. ``threads`` pins torch's thread count for the
    measurement (restored afterwards). The verdict is printed (``show``), added to ``log`` (a
    :class:`~labkit.lab.records.ResultLog`) and, in strict mode, a contradicted claim raises
    :class:`ClaimContradicted`.

    ``also`` lists more claims about the same rounds, each a dict with ``claim``, ``quantity``, ``expect`` and
    optionally ``prediction`` and ``unit``: rounds continue while any of them is undecided, and each is shown
    and logged like the first (they are in the result's ``others``). ``raises=False`` never raises on a
    contradicted verdict, even in strict mode: for a learner's own prediction (:func:`labkit.check_prediction`),
    which is judged, not a claim of the lesson.
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
    with _device.threads(used_threads):  # restored afterwards, whatever happens
        samplers: dict[str, Callable[[], float]]
        if timed:
            samplers = {n: block_timer(variants[n], device, block_s, warmup) for n in names}
        else:
            samplers = {n: _untimed(variants[n]) for n in names}
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
    report(result, log=log, show=show and not extra, raise_now=raises and not extra)
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
        for c in [result, *result.others] if raises else []:
            _raise_if_contradicted(c)
    return result


def restate(
    measured: Claim,
    *,
    claim: str,
    expect: Sequence,
    quantity: Quantity,
    prediction: str | None = None,
    better: str | Mapping[str, str] = "lower",
    quantile: float = 0.25,
    unit: str = "",
    log=None,
    show: bool = True,
    raise_now: bool = True,
) -> Claim:
    """Decide a second claim on the rounds already measured for ``measured`` (no new measurement).

    Taught in notebook `input_size`.

    For a sweep that supports two claims (notebook `model_size`: the time exponent, and the FLOP/s of the largest
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
    quantity: Quantity,
    prediction: str | None = None,
    better: str | Mapping[str, str] = "lower",
    quantile: float = 0.25,
    confidence: float = 0.95,
    unit: str = "",
    log=None,
    show: bool = True,
    raises: bool = True,
) -> Claim:
    """Decide a claim on rounds measured elsewhere: in worker processes (notebook `multiple_gpus`'s DDP ranks time their
    variants in interleaved rounds and return them), where labkit cannot add rounds on demand.
    """
    expectation = Expectation.parse(expect)
    verdict, estimate, low, high, stats = decide(
        samples, quantity, expectation, better=better, quantile=quantile, confidence=confidence
    )
    result = _claim(claim, expectation, verdict, estimate, low, high, confidence, samples, stats, prediction, unit)
    return report(result, log=log, show=show, raise_now=raises)
