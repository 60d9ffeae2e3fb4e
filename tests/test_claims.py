"""labkit.claims on synthetic timings: a true claim survives heavy noise, a false one is caught, and noise
that swamps the effect is reported as undecided rather than guessed."""

import time

import numpy as np
import pytest

from labkit import claims
from labkit.claims import Claim, decide, exponent, fitted, quantity, ratio, stat
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
        result = decide(
            Claim(f"training costs more than {margin:g} inferences", ratio("training", "inference") > margin),
            {"training": noisy_machine(2.0, rng), "inference": noisy_machine(1.0, rng)},
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

    result = decide(
        Claim("a is slower than b", ratio("a", "b") > 1.0),
        {"a": swamped(1.1), "b": swamped(1.0)},
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
    result = decide(
        Claim("slow is slower", ratio("slow", "fast") > 1.5),
        {"slow": noisy_machine(3.0, rng, busy=0.0), "fast": noisy_machine(1.0, rng, busy=0.0)},
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
    result = decide(
        Claim("a is slower than b", ratio("a", "b") > 1.0),
        {"a": alternating("a", 1.0), "b": alternating("b", 3.0)},
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
    decide(
        Claim("b costs more than a", ratio("b", "a") > 1.2),
        {name: (lambda name=name: calls.append(name) or 1.0 + 0.5 * (name == "b")) for name in "abc"},
        timed=False,
        min_rounds=3,
        show=False,
    )
    assert calls[:9] == list("abcbcacab")


def test_timed_variants_are_timed_per_call():
    result = decide(
        Claim("sleeping 4 ms takes longer than sleeping 1 ms", ratio("4 ms", "1 ms") > 1.5),
        {"4 ms": lambda: time.sleep(0.004), "1 ms": lambda: time.sleep(0.001)},
        block_s=0.01,
        show=False,
    )
    assert result.verdict == claims.HOLDS
    assert 0.004 <= result.stats["4 ms"] < 0.02


def test_exponent_recovers_a_power_law_exactly():
    sizes = {"s": 10.0, "m": 100.0, "l": 1000.0}
    fit = exponent(sizes)
    assert fit({"s": 1.0, "m": 100.0, "l": 10_000.0}) == pytest.approx(2.0)
    batch = fit.resampled(list(sizes), np.array([[1.0, 10.0, 100.0], [1.0, 100.0, 10_000.0]]))
    assert batch == pytest.approx([1.0, 2.0])
    with pytest.raises(ValueError, match="two different positive sizes"):
        exponent({"a": 1.0, "b": 1.0})


def test_higher_is_better_uses_the_high_end_of_the_rounds():
    verdict, estimate, *_ = claims.judge({"rate": [100.0] * 9 + [40.0]}, stat("rate"), (">", 90), better="higher")
    assert verdict == claims.HOLDS and estimate == pytest.approx(100.0)


def test_strict_mode_raises_on_a_contradicted_claim(monkeypatch):
    monkeypatch.setenv(claims.CLAIMS_ENV, "strict")
    log = ResultLog("test", card={})
    above_5 = Claim("x is above 5", stat("x") > 5)
    with pytest.raises(claims.ClaimContradicted, match="claimed > 5"):
        decide(above_5, {"x": lambda: 2.0 + 0.01 * np.random.rand()}, timed=False, log=log, show=False)
    assert log.to_dict()["claims"][0]["verdict"] == claims.CONTRADICTED
    judged = Claim("your guess: x is above 5", stat("x") > 5, strict=False)  # a learner's prediction never raises
    assert decide(judged, {"x": [2.0, 2.1, 2.0, 2.05, 2.02]}, show=False).verdict == claims.CONTRADICTED
    monkeypatch.setenv(claims.CLAIMS_ENV, "")
    result = decide(above_5, {"x": lambda: 2.0 + 0.01 * np.random.rand()}, timed=False, show=False)
    assert result.verdict == claims.CONTRADICTED  # a learner sees the verdict; the lesson goes on


@pytest.mark.parametrize(
    "expect",
    [(">",), ("=", 1), "> 1", ("between", 2, 1), ("<", "1")],
)
def test_bad_expectations_say_what_is_allowed(expect):
    with pytest.raises(ValueError, match="expect"):
        claims.Expectation.parse(expect)


def test_bad_arguments_say_what_is_wrong():
    one = Claim("c", stat("a") > 1)
    with pytest.raises(ValueError, match="reads \\['a'\\], but the measurement has \\['b'\\]"):
        decide(one, {"b": lambda: 1.0}, timed=False)
    with pytest.raises(ValueError, match="better"):
        decide(one, {"a": lambda: 1.0}, timed=False, better="faster")
    with pytest.raises(ValueError, match="better= names \\['z'\\]"):
        decide(one, {"a": lambda: 1.0}, timed=False, better={"z": "higher"})
    with pytest.raises(ValueError, match="finite"):
        decide(one, {"a": lambda: float("nan")}, timed=False, show=False)
    with pytest.raises(TypeError, match="the variants to measure"):
        decide(one, {"a": 3})
    with pytest.raises(TypeError, match="a Claim or a list of Claims"):
        decide({"a": lambda: 1.0}, one)
    with pytest.raises(TypeError, match="budget_s say how to measure"):
        decide(one, {"a": [1.0, 2.0, 3.0]}, budget_s=3)
    with pytest.raises(MeasurementError, match="a number, or a mapping of numbers"):
        decide(one, {"a": lambda: "fast"}, timed=False)


@pytest.mark.parametrize(
    ("condition", "error"),
    [
        (True, "already True"),
        (lambda: ratio("a", "b") >= 1, "not >= or <="),
        (lambda: stat("a") > "1", "margin is a number"),
        (lambda: "a > 1", "must be q > margin"),
        (lambda: bool(stat("a")), "no truth value"),
        (lambda: stat("a") + "b", "combines with numbers"),
    ],
)
def test_a_claim_is_written_on_a_quantity(condition, error):
    with pytest.raises(TypeError, match=error):
        Claim("c", condition() if callable(condition) else condition)


def test_quantities_combine_with_numbers_and_each_other():
    stats = {"a": 6.0, "b": 2.0, "c": 4.0}
    assert ratio("a", "b")(stats) == 3.0
    assert ratio("a", "c", per={"a": 3, "c": 1})(stats) == 0.5  # 2 per item against 4 per item
    assert (stat("a") / stat("b") - 1)(stats) == 2.0
    assert (1 - ratio("b", "a"))(stats) == pytest.approx(2 / 3)
    assert (2 * stat("c") + stat("b") / 4)(stats) == 8.5
    assert (-stat("a"))(stats) == -6.0
    assert quantity(lambda s: max(s["a"], s["c"]))(stats) == 6.0
    assert ratio("a", "b").reads == {"a", "b"} and quantity(lambda s: 1.0).reads is None
    assert ratio("a", "zero")({"a": 1.0, "zero": 0.0}) != ratio("a", "zero")({"a": 1.0, "zero": 0.0})  # nan
    with pytest.raises(ValueError, match="positive count"):
        ratio("a", "b", per={"a": 3})


def test_a_float_quantity_and_the_vectorised_built_in_give_the_same_interval():
    rng = np.random.default_rng(2)
    rounds = {"a": list(2 + rng.random(9)), "b": list(1 + rng.random(9))}
    built_in = claims.judge(rounds, ratio("a", "b"), (">", 1.5))
    by_hand = claims.judge(rounds, quantity(lambda s: s["a"] / s["b"]), (">", 1.5))
    assert built_in == by_hand
    sizes = {"a": 1.0, "b": 2.0}
    assert claims.judge(rounds, exponent(sizes), (">", -5)) == claims.judge(
        rounds, quantity(lambda s: exponent(sizes)(s)), (">", -5)
    )


def test_fitted_extrapolates_linear_and_power_laws_exactly():
    line = fitted({"a": 1.0, "b": 2.0, "c": 4.0}, at=10.0)
    assert line({"a": 3.0, "b": 5.0, "c": 9.0}) == pytest.approx(21.0)  # 1 + 2x
    power = fitted({"a": 1.0, "b": 2.0}, at=8.0, law="power")
    assert power({"a": 3.0, "b": 12.0}) == pytest.approx(192.0)  # 3x^2
    with pytest.raises(ValueError, match="law"):
        fitted({"a": 1.0, "b": 2.0}, at=3.0, law="cubic")


def test_claims_on_the_same_rounds_keep_measuring_until_all_are_decided(monkeypatch):
    rng = np.random.default_rng(11)
    # a is exactly 2x c (up to 3% jitter): "over 2x" can never be decided, so the rounds go on to the cap
    results = decide(
        [Claim("a is slower than b", ratio("a", "b") > 1.5), Claim("a is over 2x c", ratio("a", "c") > 2.0)],
        {"a": noisy_machine(2.0, rng, busy=0.0), "b": noisy_machine(1.0, rng, busy=0.0), "c": noisy_machine(1, rng)},
        timed=False,
        min_rounds=5,
        max_rounds=12,
        show=False,
    )
    assert [r.verdict for r in results] == [claims.HOLDS, claims.UNDECIDED]
    assert [r.rounds for r in results] == [12, 12], "an undecided claim on the same rounds keeps the rounds going"
    monkeypatch.setenv(claims.CLAIMS_ENV, "strict")
    shown = []
    monkeypatch.setattr("builtins.print", lambda *a, **k: shown.append(str(a[0])))
    with pytest.raises(claims.ClaimContradicted, match="a is over 3x c"):
        decide(
            [Claim("a is over 3x c", ratio("a", "c") > 3.0), Claim("a is slower than c", ratio("a", "c") > 1.1)],
            {"a": noisy_machine(2.0, rng, busy=0.0), "c": noisy_machine(1, rng, busy=0.0)},
            timed=False,
        )
    assert len(shown) == 2, "every verdict is shown before a contradicted one raises"


def test_a_verdict_is_decided_again_on_its_own_rounds():
    rng = np.random.default_rng(4)
    first = decide(
        Claim("a is slower than b", ratio("a", "b") > 1.5),
        {"a": noisy_machine(2.0, rng, busy=0.0), "b": noisy_machine(1.0, rng, busy=0.0)},
        timed=False,
        better="higher",
        show=False,
    )
    again = decide(Claim("b is faster than a", ratio("b", "a") < 0.7), first, show=False)
    assert again.samples == first.samples and again.rounds == first.rounds and again.better == "higher"
    assert again.estimate == pytest.approx(1 / first.estimate)
    on_rounds = decide(Claim("same", ratio("a", "b") > 1.5), first.samples, better="higher", show=False)
    assert (on_rounds.verdict, on_rounds.estimate, on_rounds.low) == (first.verdict, first.estimate, first.low)


def test_an_untimed_variant_may_return_several_samples_and_keeps_what_it_returned():
    rng = np.random.default_rng(6)

    def serve(rate):
        def run():
            return {"throughput": rate * rng.uniform(0.97, 1.0), "p99": 1 / rate * rng.uniform(1.0, 1.03), "log": "x"}

        return run

    batched, single = decide(
        [Claim("batching raises throughput", ratio("batched.throughput", "single.throughput") > 2),
         Claim("batching cuts the p99 latency", ratio("batched.p99", "single.p99") < 0.5)],
        {"batched": serve(40.0), "single": serve(10.0)},
        timed=False,
        better={"batched.throughput": "higher", "single.throughput": "higher"},
        show=False,
    )  # fmt: skip
    assert batched.verdict == single.verdict == claims.HOLDS
    assert set(batched.stats) == {"batched.throughput", "batched.p99", "single.throughput", "single.p99"}
    assert batched.stats["batched.throughput"] >= np.quantile(batched.samples["batched.throughput"], 0.5)
    assert [r["log"] for r in batched.returned["batched"]] == ["x"] * batched.rounds


def test_a_failing_variant_is_a_clear_error_before_any_round():
    def broken():
        raise ZeroDivisionError("no data")

    with pytest.raises(MeasurementError, match="ZeroDivisionError while warming up: no data"):
        decide(Claim("c", ratio("ok", "broken") > 1), {"ok": lambda: None, "broken": broken})


def test_contradiction_needs_five_rounds_and_the_99_percent_interval():
    rng = np.random.default_rng(5)
    rounds = {"a": list(1.0 + 0.01 * rng.random(8)), "b": list(1.0 + 0.01 * rng.random(8))}
    false_claim = dict(quantity=ratio("a", "b"), expect=(">", 1.5))  # a / b is 1.0
    assert claims.judge({k: v[:4] for k, v in rounds.items()}, **false_claim)[0] == claims.UNDECIDED
    assert claims.judge({k: v[:5] for k, v in rounds.items()}, **false_claim)[0] == claims.CONTRADICTED
    # A margin between the 95% and the 99% upper ends: the 95% interval is wholly below it, the 99% one is not,
    # so the claim is undecided (a contradiction, which fails a test, needs the 99% interval).
    noisy = {"x": list(1.0 + 0.2 * rng.random(12))}
    _, _, _, high95, _ = claims.judge(noisy, stat("x"), (">", 0.0), confidence=0.95)
    _, _, _, high99, _ = claims.judge(noisy, stat("x"), (">", 0.0), confidence=0.99)
    assert high95 < high99
    margin = (high95 + high99) / 2
    assert claims.judge(noisy, stat("x"), (">", margin))[0] == claims.UNDECIDED
    assert claims.judge(noisy, stat("x"), (">", high99 * 1.01))[0] == claims.CONTRADICTED


def test_verdicts_render_as_tables():
    import json

    from labkit.lab.records import ResultLog

    fast, slow = [1.0, 1.1, 0.9, 1.0, 1.05, 0.95], [3.0, 3.1, 2.9, 3.0, 3.05, 2.95]
    claim = claims.Claim("slow is slower (slow / fast)", claims.ratio("slow", "fast") > 2, prediction="3")
    log = ResultLog("t", {})
    verdict = claims.decide(claim, {"fast": fast, "slow": slow}, log=log, show=False)
    assert verdict.verdict is claims.Outcome.HOLDS and verdict.verdict == "holds"
    shown = verdict.table({"ms": lambda name, s: 1e3 * s, "predicted": {"fast": 1, "slow": 3}}, rows=["slow", "fast"])
    assert list(shown.index) == ["slow", "fast"] and shown.index.name == "variant"
    assert shown.loc["fast", "predicted"] == 1 and shown.loc["slow", "ms"] == round(1e3 * verdict.stats["slow"], 3)
    with pytest.raises(KeyError, match="were not measured"):
        verdict.table({"ms": lambda name, s: s}, rows=["medium"])
    recorded = json.loads(json.dumps(log.claims))  # as the record file holds them
    for frame in (claims.table([verdict]), claims.table(recorded)):
        assert frame.loc[0, "claim"] == "slow is slower (slow / fast)" and frame.loc[0, "verdict"] == "holds"
        assert frame.loc[0, "measured"] == f"{verdict.estimate:.3g}" and frame.loc[0, "predicted"] == "3"


# A verdict says how far a numeric prediction was from the measurement, so a loose margin cannot flatter it.
WITH, WITHOUT = [0.38, 0.38, 0.38, 0.39, 0.4, 0.385], [1.0, 1.0, 1.0, 1.01, 1.02, 1.0]  # low quantiles 0.38, 1


def _prefix_claim(predicted):
    return Claim(
        "prefix caching cuts the time to first token (with / without)",
        ratio("with", "without") < 0.75,
        prediction="the FLOPs of the uncached part of the prompt",
        predicted=predicted,
    )


def test_a_claim_that_holds_with_a_prediction_far_off_says_so():
    verdict = decide(_prefix_claim(0.08), {"with": WITH, "without": WITHOUT}, show=False)
    assert verdict.verdict == claims.HOLDS and verdict.predicted == 0.08
    assert verdict.estimate == pytest.approx(0.38, abs=0.005)
    text = str(verdict)
    assert "holds ✓" in text and "but the prediction (0.08) was 4.8× below the measurement (0.38)" in text
    assert verdict.prediction_error() == "4.8× below"
    assert max(len(line) for line in text.splitlines()) <= claims.verdicts.LINE_CHARS
    high = decide(_prefix_claim(1.0), {"with": WITH, "without": WITHOUT}, show=False)
    assert "the prediction (1) was 2.6× above the measurement (0.38)" in str(high)
    row = claims.table([verdict, high])
    assert list(row["prediction vs measured"]) == ["4.8× below", "2.6× above"]


def test_a_prediction_close_to_the_measurement_reads_within_ten_percent():
    close = decide(_prefix_claim(0.36), {"with": WITH, "without": WITHOUT}, show=False)
    assert "holds ✓" in str(close) and "the prediction (0.36) was within 10% of the measurement (0.38)" in str(close)
    assert "but" not in str(close)
    assert claims.table(close).loc[0, "prediction vs measured"] == "within 10%"
    signs = decide(Claim("x above -1", stat("x") > -1, predicted=-0.5), {"x": [0.5, 0.5, 0.5, 0.5]}, show=False)
    assert "the prediction (-0.5) was 1 below the measurement (0.5)" in str(signs)  # no ratio across zero
    near = decide(_prefix_claim(0.3), {"with": WITH, "without": WITHOUT}, show=False)
    assert "the prediction (0.3) was 21% below the measurement (0.38)" in str(near)  # a share, under 1.5x
    plain = decide(Claim("no number predicted", ratio("with", "without") < 0.75), {"with": WITH, "without": WITHOUT})
    assert "the prediction" not in str(plain) and claims.table(plain).loc[0, "prediction vs measured"] == ""


@pytest.mark.parametrize(
    ("predicted", "error", "kind"),
    [("0.08", "a number", TypeError), (True, "a number", TypeError), (float("nan"), "finite", ValueError),
     (np.array([0.1, 0.2]), "a number", TypeError)],
)  # fmt: skip
def test_predicted_must_be_a_finite_number(predicted, error, kind):
    with pytest.raises(kind, match=error):
        _prefix_claim(predicted)
    assert _prefix_claim(np.float32(0.25)).predicted == 0.25 and isinstance(_prefix_claim(1).predicted, float)


def test_records_without_a_numeric_prediction_still_load():
    import json

    log = ResultLog("t", {})
    decide(_prefix_claim(0.08), {"with": WITH, "without": WITHOUT}, log=log, show=False)
    recorded = json.loads(json.dumps(log.claims))
    assert recorded[0]["predicted"] == 0.08 and recorded[0]["budget_s"] is None  # rounds measured elsewhere
    older = [{k: v for k, v in recorded[0].items() if k not in ("predicted", "budget_s", "max_rounds")}]
    frame = claims.table(older)
    assert frame.loc[0, "verdict"] == "holds" and frame.loc[0, "prediction vs measured"] == ""
    assert frame.loc[0, "predicted"] == "the FLOPs of the uncached part of the prompt"
    assert claims.table(recorded).loc[0, "prediction vs measured"] == "4.8× below"


def _undecided(**options):
    counter = {"a": 0, "b": 0}

    def alternating(name, first):  # a and b take turns being slow: no side is ever shown to be faster
        def sample():
            time.sleep(0.02)
            counter[name] += 1
            return first if counter[name] % 2 else 4.0 - first

        return sample

    return decide(
        Claim("a is slower than b", ratio("a", "b") > 1.0),
        {"a": alternating("a", 1.0), "b": alternating("b", 3.0)},
        timed=False,
        min_rounds=3,
        show=False,
        **options,
    )


def test_undecided_advice_names_the_argument_that_ran_out_and_its_value():
    by_budget = _undecided(budget_s=0.3, max_rounds=1000)
    assert by_budget.verdict == claims.UNDECIDED and by_budget.budget_s == 0.3
    advice = " ".join(str(by_budget).split())  # the advice is wrapped to the book's column
    assert "raise `budget_s` (used: 0.3 s) in this cell's call that measured them, e.g. budget_s=0.6" in advice
    assert all(len(line) <= claims.verdicts.LINE_CHARS for line in str(by_budget).splitlines()[-4:])
    assert "max_rounds" not in advice
    outrun = _undecided(budget_s=0.01, max_rounds=1000)  # the first 3 rounds alone take over 0.1 s
    advice = " ".join(str(outrun).split())
    spent = f"{outrun.seconds:.1f}"
    assert f"raise `budget_s` (used: 0.01 s, spent: {spent} s)" in advice, advice
    assert f"e.g. budget_s={float(f'{2 * outrun.seconds:.2g}'):g}" in advice, "the example doubles what was spent"
    by_rounds = _undecided(max_rounds=6)
    assert by_rounds.rounds == 6 and by_rounds.budget_s == 5.0, "the default budget is recorded too"
    advice = " ".join(str(by_rounds).split())
    assert "raise `max_rounds` (used: 6)" in advice and "e.g. max_rounds=12" in advice and "budget_s" not in advice
    again = decide(Claim("b is slower than a", ratio("b", "a") > 1.0), by_budget, show=False)
    assert again.budget_s == 0.3 and "the earlier cell's call that measured these rounds" in " ".join(
        str(again).split()
    )
    given = decide(Claim("b is slower than a", ratio("b", "a") > 1.0), by_budget.samples, show=False)
    assert given.budget_s is None and "run the cell that measured these rounds again" in " ".join(str(given).split())


def test_undecided_advice_says_add_when_the_call_left_the_default(monkeypatch):
    from labkit.claims import rounds

    monkeypatch.setitem(rounds._DEFAULTS, "budget_s", 0.3)  # the default, shortened so the test is quick
    defaulted = _undecided(max_rounds=1000)
    assert defaulted.verdict == claims.UNDECIDED and defaulted.budget_s == 0.3
    assert defaulted.limits_given == ("max_rounds",) and "limits_given" not in defaulted.to_dict()
    advice = " ".join(str(defaulted).split())
    more = f"{float(f'{2 * max(0.3, defaulted.seconds):.2g}'):g}"  # twice what the rounds took
    assert f"add `budget_s={more}` to this cell's `lab.decide(...)` call (the default `budget_s` of 0.3 s ran out)" in (
        advice
    ), advice
    assert "raise" not in advice and "max_rounds" not in advice
    given = _undecided(budget_s=0.3, max_rounds=1000)
    advice = " ".join(str(given).split())
    assert "raise `budget_s` (used: 0.3 s)" in advice and "add `" not in advice
    again = decide(Claim("b is slower than a", ratio("b", "a") > 1.0), defaulted, show=False)
    assert f"add `budget_s={more}` to the earlier cell's `lab.decide(...)` call" in " ".join(str(again).split())


def test_a_long_claim_statement_is_wrapped_to_the_book_column():
    statement = "the first variant takes longer than the second one on this machine, " * 3
    verdict = decide(
        Claim(statement.strip(), ratio("a", "b") > 1.0), {"a": [2.0, 2.1, 2.2], "b": [1.0] * 3}, show=False
    )
    lines = str(verdict).splitlines()
    assert len(f"Claim: {verdict.statement}") > claims.verdicts.LINE_CHARS, "the statement must need wrapping"
    assert max(len(line) for line in lines) <= claims.verdicts.LINE_CHARS
    assert lines[0].startswith("Claim: the first") and lines[1].startswith("    ") and lines[1][4] != " "
    claim_lines = lines[: next(i for i, line in enumerate(lines) if line.startswith("  measured:"))]
    assert " ".join(line.strip() for line in claim_lines) == f"Claim: {verdict.statement}", "no word lost"
