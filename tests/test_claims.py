"""labkit.claims on synthetic timings: a true claim survives heavy noise, a false one is caught, and noise
that swamps the effect is reported as undecided rather than guessed."""

import time

import numpy as np
import pytest

from labkit import claims
from labkit.instruments.timing import MeasurementError
from labkit.lab.records import ResultLog


def noisy_machine(true_s: float, rng: np.random.Generator, busy: float = 0.4, worst: float = 4.0):
    """A sampler of one variant on a shared machine: in a ``busy`` fraction of rounds, a neighbour slows
    it by a random factor up to ``worst``; otherwise a little jitter. Interference only adds time."""

    def sample() -> float:
        slowdown = rng.uniform(1.0, worst) if rng.random() < busy else 1.0
        return true_s * slowdown * rng.uniform(1.0, 1.03)

    return sample


def _verdicts_on_a_noisy_machine(seeds, margin: float) -> list[str]:
    """The verdict of "training costs more than ``margin`` inferences" on a machine where training truly costs 2
    inferences and 40% of rounds are slowed up to 4x, once per seed."""
    verdicts = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        result = claims.compare(
            {"training": noisy_machine(2.0, rng), "inference": noisy_machine(1.0, rng)},
            claim=f"training costs more than {margin:g} inferences",
            quantity=claims.ratio("training", "inference"),
            expect=(">", margin),
            timed=False,
            max_rounds=30,
            budget_s=60,
            show=False,
        )
        verdicts.append(result.verdict)
    return verdicts


def test_a_true_claim_under_heavy_noise_is_never_contradicted():
    verdicts = _verdicts_on_a_noisy_machine(range(40), margin=1.5)  # true: it costs 2
    assert claims.CONTRADICTED not in verdicts
    assert verdicts.count(claims.HOLDS) >= 36, verdicts  # and it is decided, not left undecided


def test_a_false_claim_is_contradicted():
    verdicts = _verdicts_on_a_noisy_machine(range(100, 120), margin=3.0)  # false: it costs 2
    assert verdicts.count(claims.CONTRADICTED) >= 19, verdicts
    assert claims.HOLDS not in verdicts


def test_noise_that_swamps_the_effect_is_undecided():
    rng = np.random.default_rng(7)

    def swamped(true_s):  # symmetric noise of a factor ~3 either way: the 10% effect is invisible in 12 rounds
        return lambda: true_s * float(np.exp(rng.normal(0, 1.0)))

    result = claims.compare(
        {"a": swamped(1.1), "b": swamped(1.0)},
        claim="a is slower than b",
        quantity=claims.ratio("a", "b"),
        expect=(">", 1.0),
        timed=False,
        max_rounds=12,
        budget_s=60,
        show=False,
    )
    assert result.verdict == claims.UNDECIDED
    assert result.rounds == 12, "undecided claims take more rounds, up to the cap"
    text = str(result)
    assert "too noisy to tell" in text and "load average" in text and "IQR/median" in text


def test_a_clear_claim_stops_after_the_minimum_rounds():
    rng = np.random.default_rng(3)
    result = claims.compare(
        {"slow": noisy_machine(3.0, rng, busy=0.0), "fast": noisy_machine(1.0, rng, busy=0.0)},
        claim="slow is slower",
        quantity=claims.ratio("slow", "fast"),
        expect=(">", 1.5),
        timed=False,
        min_rounds=5,
        show=False,
    )
    assert result.verdict == claims.HOLDS and result.rounds == 5
    assert result.low <= result.estimate <= result.high
    assert result.estimate == pytest.approx(3.0, rel=0.05)


def test_the_budget_stops_an_undecided_claim():
    counter = {"a": 0, "b": 0}

    def alternating(name, first):  # a and b take turns being slow: no side is ever shown to be faster
        def sample():
            time.sleep(0.05)
            counter[name] += 1
            return first if counter[name] % 2 else 4.0 - first

        return sample

    start = time.perf_counter()
    result = claims.compare(
        {"a": alternating("a", 1.0), "b": alternating("b", 3.0)},
        claim="a is slower than b",
        quantity=claims.ratio("a", "b"),
        expect=(">", 1.0),
        timed=False,
        min_rounds=3,
        max_rounds=1000,
        budget_s=0.6,
        show=False,
    )
    assert result.verdict == claims.UNDECIDED
    assert time.perf_counter() - start < 1.5 and result.rounds < 10


def test_rounds_are_interleaved_in_a_rotating_order():
    calls = []
    claims.compare(
        {name: (lambda name=name: calls.append(name) or 1.0 + 0.5 * (name == "b")) for name in "abc"},
        claim="b costs more than a",
        quantity=claims.ratio("b", "a"),
        expect=(">", 1.2),
        timed=False,
        min_rounds=3,
        show=False,
    )
    assert calls[:9] == list("abcbcacab")


def test_timed_variants_are_timed_per_call():
    result = claims.compare(
        {"4 ms": lambda: time.sleep(0.004), "1 ms": lambda: time.sleep(0.001)},
        claim="sleeping 4 ms takes longer than sleeping 1 ms",
        quantity=claims.ratio("4 ms", "1 ms"),
        expect=(">", 1.5),
        block_s=0.01,
        show=False,
    )
    assert result.verdict == claims.HOLDS
    assert 0.004 <= result.stats["4 ms"] < 0.02


def test_exponent_recovers_a_power_law_exactly():
    sizes = {"s": 10.0, "m": 100.0, "l": 1000.0}
    fit = claims.exponent(sizes)
    assert fit({"s": 1.0, "m": 100.0, "l": 10_000.0}) == pytest.approx(2.0)
    batch = fit({"s": np.array([1.0, 1.0]), "m": np.array([10.0, 100.0]), "l": np.array([100.0, 10_000.0])})
    assert batch == pytest.approx([1.0, 2.0])
    with pytest.raises(ValueError, match="two different positive sizes"):
        claims.exponent({"a": 1.0, "b": 1.0})


def test_higher_is_better_uses_the_high_end_of_the_rounds():
    verdict, estimate, *_ = claims.decide(
        {"rate": [100.0] * 9 + [40.0]}, lambda s: s["rate"], (">", 90), better="higher"
    )
    assert verdict == claims.HOLDS and estimate == pytest.approx(100.0)


def test_strict_mode_raises_on_a_contradicted_claim(monkeypatch):
    monkeypatch.setenv(claims.CLAIMS_ENV, "strict")
    log = ResultLog("test", card={})
    with pytest.raises(claims.ClaimContradicted, match="claimed > 5"):
        claims.compare(
            {"x": lambda: 2.0 + 0.01 * np.random.rand()},
            claim="x is above 5",
            expect=(">", 5),
            timed=False,
            log=log,
            show=False,
        )
    assert log.to_dict()["claims"][0]["verdict"] == claims.CONTRADICTED
    monkeypatch.setenv(claims.CLAIMS_ENV, "")
    result = claims.compare(
        {"x": lambda: 2.0 + 0.01 * np.random.rand()}, claim="x is above 5", expect=(">", 5), timed=False, show=False
    )
    assert result.verdict == claims.CONTRADICTED  # a learner sees the verdict; the lesson goes on


@pytest.mark.parametrize(
    "expect",
    [(">",), ("=", 1), "> 1", ("between", 2, 1), ("<", "1")],
)
def test_bad_expectations_say_what_is_allowed(expect):
    with pytest.raises(ValueError, match="expect"):
        claims.Expectation.parse(expect)


def test_bad_arguments_say_what_is_wrong():
    with pytest.raises(ValueError, match="quantity"):
        claims.compare({"a": lambda: 1.0, "b": lambda: 1.0}, claim="c", expect=(">", 1), timed=False)
    with pytest.raises(ValueError, match="better"):
        claims.compare({"a": lambda: 1.0}, claim="c", expect=(">", 1), timed=False, better="faster")
    with pytest.raises(ValueError, match="finite"):
        claims.compare({"a": lambda: float("nan")}, claim="c", expect=(">", 1), timed=False, show=False)
    with pytest.raises(TypeError, match="callable"):
        claims.compare({"a": 3}, claim="c", expect=(">", 1))


def test_predicted_extrapolates_linear_and_power_laws_exactly():
    line = claims.predicted({"a": 1.0, "b": 2.0, "c": 4.0}, at=10.0)
    assert line({"a": 3.0, "b": 5.0, "c": 9.0}) == pytest.approx(21.0)  # 1 + 2x
    power = claims.predicted({"a": 1.0, "b": 2.0}, at=8.0, law="power")
    assert power({"a": np.array([3.0]), "b": np.array([12.0])}) == pytest.approx([192.0])  # 3x^2
    with pytest.raises(ValueError, match="law"):
        claims.predicted({"a": 1.0, "b": 2.0}, at=3.0, law="cubic")


def test_claims_on_the_same_rounds_keep_measuring_until_all_are_decided(monkeypatch):
    rng = np.random.default_rng(11)
    # a is exactly 2x c (up to 3% jitter): "over 2x" can never be decided, so the rounds go on to the cap
    spec = dict(claim="a is over 2x c", quantity=claims.ratio("a", "c"), expect=(">", 2.0))
    result = claims.compare(
        {"a": noisy_machine(2.0, rng, busy=0.0), "b": noisy_machine(1.0, rng, busy=0.0), "c": noisy_machine(1, rng)},
        claim="a is slower than b",
        quantity=claims.ratio("a", "b"),
        expect=(">", 1.5),
        also=[spec],
        timed=False,
        min_rounds=5,
        max_rounds=12,
        show=False,
    )
    assert [c.statement for c in result.others] == ["a is over 2x c"]
    assert result.verdict == claims.HOLDS and result.others[0].verdict == claims.UNDECIDED
    assert result.rounds == 12, "an undecided claim on the same rounds keeps the rounds going"
    monkeypatch.setenv(claims.CLAIMS_ENV, "strict")
    with pytest.raises(claims.ClaimContradicted, match="a is over 3x c"):
        claims.compare(
            {"a": noisy_machine(2.0, rng, busy=0.0), "c": noisy_machine(1, rng, busy=0.0)},
            claim="a is slower than c",
            quantity=claims.ratio("a", "c"),
            expect=(">", 1.1),
            also=[dict(spec, claim="a is over 3x c", expect=(">", 3.0))],
            timed=False,
            show=False,
        )
    with pytest.raises(ValueError, match="also"):
        claims.compare({"a": lambda: 1.0}, claim="c", expect=(">", 0), timed=False, also=[{"claim": "x"}])


def test_a_failing_variant_is_a_clear_error_before_any_round():
    def broken():
        raise ZeroDivisionError("no data")

    with pytest.raises(MeasurementError, match="ZeroDivisionError while warming up: no data"):
        claims.compare({"ok": lambda: None, "broken": broken}, claim="c", quantity=claims.ratio("ok", "broken"),
                       expect=(">", 1))  # fmt: skip


def test_contradiction_needs_five_rounds_and_the_99_percent_interval():
    rng = np.random.default_rng(5)
    rounds = {"a": list(1.0 + 0.01 * rng.random(8)), "b": list(1.0 + 0.01 * rng.random(8))}
    false_claim = dict(quantity=claims.ratio("a", "b"), expect=(">", 1.5))  # a / b is 1.0
    assert claims.decide({k: v[:4] for k, v in rounds.items()}, **false_claim)[0] == claims.UNDECIDED
    assert claims.decide({k: v[:5] for k, v in rounds.items()}, **false_claim)[0] == claims.CONTRADICTED
    # A margin between the 95% and the 99% upper ends: the 95% interval is wholly below it, the 99% one is not,
    # so the claim is undecided (a contradiction, which fails a test, needs the 99% interval).
    noisy = {"x": list(1.0 + 0.2 * rng.random(12))}
    _, _, _, high95, _ = claims.decide(noisy, lambda s: s["x"], (">", 0.0), confidence=0.95)
    _, _, _, high99, _ = claims.decide(noisy, lambda s: s["x"], (">", 0.0), confidence=0.99)
    assert high95 < high99
    margin = (high95 + high99) / 2
    assert claims.decide(noisy, lambda s: s["x"], (">", margin))[0] == claims.UNDECIDED
    assert claims.decide(noisy, lambda s: s["x"], (">", high99 * 1.01))[0] == claims.CONTRADICTED
