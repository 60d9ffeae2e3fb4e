"""Deciding claims on measurements: the variants timed in interleaved rounds, then judged (every notebook).

A claim such as "a training step costs more than 1.5 forward passes" is a statement about two
distributions of times on a machine that is never quiet. :func:`decide` decides it the way careful
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
   spread over rounds and the load average, and what to do: which of ``budget_s`` and ``max_rounds`` ran out,
   the value used, and a larger one to pass to the call).

A learner sees one verdict line and the lesson goes on. With ``LABKIT_CLAIMS=strict`` (set by ``make test``
and ``make report``) a contradicted claim raises :class:`ClaimContradicted`, which fails the notebook.
Deterministic facts (parameter counts, FLOPs, bytes) are not claims: notebooks check them with ``assert``.
"""

from __future__ import annotations

import math
import time
import timeit
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict, Unpack, overload

import numpy as np
import torch

from ..core import device as _device
from ..core.device import sync
from ..core.errors import MeasurementError
from .statements import UNDECIDED, Claim
from .verdicts import ClaimLog, Verdict, _better, _verdict, judge, report


def block_timer(
    fn: Callable, device: torch.device | str | None = None, block_s: float = 0.02, warmup: int = 1
) -> Callable[[], float]:
    """Warm ``fn`` up, choose how many calls make one block of about ``block_s``, return a block timer.

    Taught in notebook `start_here`.

    The returned function times one block (syncing ``device`` before and after) and returns seconds per call.
    :func:`decide` uses it for timed variants; a notebook uses it for a variant that must set something up
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


def rotated(names: Sequence, round_index: int) -> list:
    """The order of round ``round_index``: A B C, then B C A, then C A B, ... (no variant keeps one position)."""
    shift = round_index % len(names)
    return list(names[shift:]) + list(names[:shift])


_MEASURING = ("timed", "device", "threads", "warmup", "block_s", "min_rounds", "max_rounds", "budget_s")
_DEFAULTS: dict[str, Any] = dict(
    timed=True, device=None, threads=None, warmup=1, block_s=0.02, min_rounds=5, max_rounds=60, budget_s=5.0
)


class DecideOptions(TypedDict, total=False):
    """The keyword options of :func:`decide` (its docstring says what each does), for the overloads' signatures."""

    better: str | Mapping[str, str] | None
    quantile: float
    confidence: float | None
    log: ClaimLog | None
    show: bool
    timed: bool | None
    device: torch.device | str | None
    threads: int | None
    warmup: int | None
    block_s: float | None
    min_rounds: int | None
    max_rounds: int | None
    budget_s: float | None


Measured = Mapping[str, Callable[[], object]] | Mapping[str, Sequence[float]] | Verdict


@overload
def decide(claims: Claim, measured: Measured, **options: Unpack[DecideOptions]) -> Verdict: ...


@overload
def decide(claims: Sequence[Claim], measured: Measured, **options: Unpack[DecideOptions]) -> list[Verdict]: ...


def decide(
    claims: Claim | Sequence[Claim],
    measured: Mapping[str, Callable[[], object]] | Mapping[str, Sequence[float]] | Verdict,
    *,
    better: str | Mapping[str, str] | None = None,
    quantile: float = 0.25,
    confidence: float | None = None,
    log: ClaimLog | None = None,
    show: bool = True,
    timed: bool | None = None,
    device: torch.device | str | None = None,
    threads: int | None = None,
    warmup: int | None = None,
    block_s: float | None = None,
    min_rounds: int | None = None,
    max_rounds: int | None = None,
    budget_s: float | None = None,
) -> Verdict | list[Verdict]:
    """Decide ``claims`` (one :class:`Claim` or a list) on ``measured``; return the :class:`Verdict` (or list).

    Taught in notebook `start_here`.

    ``measured`` is one of three things:

    - **the variants**, a mapping name -> callable, measured here in interleaved rounds until every claim is
      decided (or ``max_rounds`` / ``budget_s`` run out). With ``timed=True`` (the default) labkit times each
      call (warm-up, ``device`` sync, blocks of about ``block_s``) and a sample is seconds per call. With
      ``timed=False`` a call returns its own sample once per round: a number (a p99 latency, a rate), or a
      mapping of numbers, each a series named ``"variant.key"``; what each call returned, numbers or not, is
      kept in the verdict's ``returned``. ``threads`` pins torch's thread count while measuring.
    - **rounds already measured**, a mapping name -> list of samples, one per round (worker processes that
      timed their variants in interleaved rounds).
    - **a Verdict** from an earlier call: its rounds, decided again for other claims (nothing is measured).

    ``better`` says which end of a series is its undisturbed value: ``"lower"`` for times (the default),
    ``"higher"`` for rates, or a mapping per variant or series; a Verdict's rounds keep the one they were
    taken with. Each verdict is printed (``show``), added to ``log`` (a :class:`~labkit.lab.records.ResultLog`)
    and, in strict mode, a contradicted claim raises :class:`ClaimContradicted` once all are shown.
    """
    many = not isinstance(claims, Claim)
    listed = [claims] if isinstance(claims, Claim) else list(claims) if isinstance(claims, list | tuple) else []
    if not listed or not all(isinstance(c, Claim) for c in listed):
        raise TypeError(f"decide takes a Claim or a list of Claims, got {claims!r}")
    options: dict[str, Any] = dict(
        timed=timed, device=device, threads=threads, warmup=warmup, block_s=block_s,
        min_rounds=min_rounds, max_rounds=max_rounds, budget_s=budget_s,
    )  # fmt: skip
    variants = _variants(measured)
    if variants is None:
        given = [k for k in _MEASURING if options[k] is not None]
        if given:
            raise TypeError(f"{', '.join(given)} say how to measure, but these rounds are already measured")
    if isinstance(measured, Verdict):
        better = measured.better if better is None else better
        confidence = measured.confidence if confidence is None else confidence
    better = "lower" if better is None else better
    confidence = 0.95 if confidence is None else confidence
    if not 0 < quantile < 0.5:
        raise ValueError(f"quantile must be between 0 and 0.5 (a low quantile of the rounds), got {quantile}")
    if not 0.5 < confidence < 1:
        raise ValueError(f"confidence must be between 0.5 and 1, got {confidence}")
    used_threads: int | None
    # The limits the rounds were measured under, kept in each verdict so an undecided one can say which to raise.
    limits: dict[str, Any] = dict(budget_s=None, max_rounds=None, reused=False, limits_given=())
    if variants is not None:
        settings: dict[str, Any] = {k: _DEFAULTS[k] if v is None else v for k, v in options.items()}
        samples, seconds, used_threads, returned, better = _measure(
            listed, variants, better, quantile, confidence, **settings
        )
        limits.update(
            budget_s=float(settings["budget_s"]),
            max_rounds=int(settings["max_rounds"]),
            limits_given=tuple(k for k in ("budget_s", "max_rounds") if options[k] is not None),
        )
    elif isinstance(measured, Verdict):
        samples, seconds, used_threads, returned = (
            measured.samples,
            measured.seconds,
            measured.threads,
            measured.returned,
        )
        limits.update(
            budget_s=measured.budget_s, max_rounds=measured.max_rounds, reused=True, limits_given=measured.limits_given
        )
        better = _check(listed, samples, better, list(samples))
    else:
        samples = {n: [float(v) for v in values] for n, values in measured.items()}  # type: ignore[union-attr]
        seconds, used_threads, returned = 0.0, None, {}
        better = _check(listed, samples, better, list(samples))
    results = [
        _verdict(
            c,
            judge(samples, c.quantity, c.expect, better=better, quantile=quantile, confidence=confidence),
            samples,
            confidence,
            seconds=seconds,
            threads=used_threads,
            better=better,
            returned=returned,
            **limits,
        )
        for c in listed
    ]
    report(results, log=log, show=show)
    return results if many else results[0]


def measures(measured: object) -> bool:
    """Whether :func:`decide` would time ``measured`` (variants to call) rather than read rounds measured before.

    Used by ``Lab.decide`` (notebook `start_here`) to pass the device and threads only where they apply; a bad
    ``measured`` raises the error :func:`decide` would.
    """
    return _variants(measured) is not None


def _variants(measured) -> Mapping[str, Callable[[], object]] | None:
    """The variants to measure, or None if ``measured`` is rounds already measured (checked here)."""
    if isinstance(measured, Verdict):
        return None
    allowed = (
        "the variants to measure (a mapping name -> callable), rounds already measured (a mapping name -> list of "
        "samples) or a Verdict whose rounds to decide again"
    )
    if not isinstance(measured, Mapping) or not measured:
        raise TypeError(f"measured must be {allowed}, got {measured!r}")
    if all(callable(v) for v in measured.values()):
        return measured
    if all(isinstance(v, Sequence) and not isinstance(v, str) for v in measured.values()):
        return None
    raise TypeError(
        f"measured must be {allowed}, got a mapping of {sorted({type(v).__name__ for v in measured.values()})}"
    )


def _measure(
    claims: Sequence[Claim],
    variants: Mapping[str, Callable[[], object]],
    better: str | Mapping[str, str],
    quantile: float,
    confidence: float,
    *,
    timed: bool,
    device: torch.device | str | None,
    threads: int | None,
    warmup: int,
    block_s: float,
    min_rounds: int,
    max_rounds: int,
    budget_s: float,
) -> tuple[dict[str, list[float]], float, int, dict[str, list], str | Mapping[str, str]]:
    """Interleaved rounds of ``variants`` until every claim is decided or the budget is spent."""
    if min_rounds < 3 or max_rounds < min_rounds:
        raise ValueError(f"need 3 <= min_rounds <= max_rounds, got {min_rounds} and {max_rounds}")
    device = torch.device(device) if device is not None else None
    names = list(variants)
    used_threads = threads if threads is not None else torch.get_num_threads()
    start = time.perf_counter()
    samples: dict[str, list[float]] = {}
    returned: dict[str, list] = {n: [] for n in names} if not timed else {}
    with _device.threads(used_threads):  # restored afterwards, whatever happens
        samplers = {n: block_timer(variants[n], device, block_s, warmup) for n in names} if timed else variants
        rounds = 0
        while True:
            for name in rotated(names, rounds):
                value = samplers[name]()
                if not timed:
                    returned[name].append(value)
                for series, sample in _series(name, value):
                    samples.setdefault(series, []).append(sample)
            rounds += 1
            uneven = {s: len(v) for s, v in samples.items() if len(v) != rounds}
            if uneven:
                raise MeasurementError(f"every series needs one sample per round; after {rounds} rounds: {uneven}")
            if rounds == 1:
                better = _check(claims, samples, better, names)
            if rounds < min_rounds:
                continue
            pending = any(
                judge(samples, c.quantity, c.expect, better=better, quantile=quantile, confidence=confidence)[0]
                == UNDECIDED
                for c in claims
            )
            if not pending or rounds >= max_rounds or time.perf_counter() - start >= budget_s:
                break
    return samples, round(time.perf_counter() - start, 3), used_threads, returned, better


def _series(name: str, value: object) -> list[tuple[str, float]]:
    """The samples one call of an untimed variant gave: its number, or the numbers of the mapping it returned."""
    if isinstance(value, Mapping):
        numbers = [(f"{name}.{k}", float(v)) for k, v in value.items() if _number(v)]
        if not numbers:
            raise MeasurementError(f"variant {name!r} returned a mapping with no numbers: {sorted(value)}")
        return numbers
    if not _number(value):
        raise MeasurementError(
            f"variant {name!r} returned {value!r}: an untimed variant returns its sample (a number, or a mapping of "
            "numbers)"
        )
    return [(name, float(value))]  # type: ignore[arg-type]  # a number, checked just above


def _number(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, torch.Tensor):
        return value.numel() == 1
    return isinstance(value, int | float | np.integer | np.floating)


def _check(claims, samples: Mapping, better, variants: Sequence[str]) -> str | Mapping[str, str]:
    """Every claim reads series that were measured; ``better`` names only them. Returns ``better`` per series."""
    for c in claims:
        missing = sorted(c.quantity.reads - set(samples)) if c.quantity.reads is not None else []
        if missing:
            raise ValueError(f"the claim {c.statement!r} reads {missing}, but the measurement has {sorted(samples)}")
    if not isinstance(better, Mapping):
        _better(better, "every variant")
        return better
    unknown = sorted(set(better) - set(samples) - set(variants))
    if unknown:
        raise ValueError(f"better= names {unknown}, which were not measured; measured: {sorted(samples)}")

    def of(series: str) -> str:
        if series in better:
            return better[series]
        owner = next((v for v in variants if series.startswith(f"{v}.")), None)
        return better.get(owner, "lower") if owner is not None else "lower"

    per_series = {s: of(s) for s in samples}
    for s, value in per_series.items():
        _better(value, s)
    return per_series
