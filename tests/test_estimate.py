"""labkit.predict.estimate: recovering known laws from synthetic timings, and the estimate card."""

import random

import pytest

from labkit.predict import estimate


def test_fit_recovers_a_one_off_cost_and_a_per_unit_cost():
    rng = random.Random(0)
    sizes = [1000, 2000, 3000, 4000] * 3
    seconds = [2.0 + 0.001 * n + rng.gauss(0, 0.02) for n in sizes]  # 2 s start-up, 1 ms per sample, noise
    fit = estimate.fit_job(sizes, seconds)
    assert fit.one_off_s == pytest.approx(2.0, abs=0.06)
    assert fit.per_unit_s == pytest.approx(0.001, rel=0.03)
    assert 0.01 < fit.residual_s < 0.04
    value, low, high = fit.predict(40_000)
    assert low < 2.0 + 40.0 < high and value == pytest.approx(42.0, rel=0.03)
    near = fit.predict(2500)
    assert (near[2] - near[1]) < (high - low), "the band widens with the distance from the probes"


def test_an_exact_law_gives_an_exact_prediction():
    fit = estimate.fit_job([1, 2, 3], [5.0, 7.0, 9.0])
    assert (fit.one_off_s, fit.per_unit_s) == pytest.approx((3.0, 2.0))
    assert fit.predict(10) == pytest.approx((23.0, 23.0, 23.0))


def test_split_one_off_separates_warm_up_from_steady_steps():
    steps = [0.5, 0.2, 0.11] + [0.1] * 20
    one_off, steady = estimate.split_one_off(steps, warm=3)
    assert steady == pytest.approx(0.1) and one_off == pytest.approx(0.4 + 0.1 + 0.01)
    with pytest.raises(ValueError, match="need more than warm=3 steps"):
        estimate.split_one_off([1.0, 1.0, 1.0])


def test_bad_probes_are_refused():
    with pytest.raises(ValueError, match="at least three different sizes"):
        estimate.fit_job([1, 2, 2], [1.0, 2.0, 2.1])
    with pytest.raises(ValueError, match="positive"):
        estimate.fit_job([1, 2, 3], [1.0, -2.0, 3.0])


def test_training_time_from_flops_and_the_card():
    # 6 · 1e9 parameters · 1e9 tokens at 40% of 1 PFLOP/s on 10 devices = 1,500 s
    seconds = estimate.training_time_from_flops(6e9 * 1e3, 10**6, 1e15, 0.4, 10)
    assert seconds == pytest.approx(1500.0)
    with pytest.raises(ValueError, match="utilisation"):
        estimate.training_time_from_flops(1.0, 1, 1.0, utilisation=1.5)
    card = estimate.EstimateCard("a job", 5400, 4000, 8000, peak_bytes=3 * 2**30, memory_budget_bytes=2 * 2**30,
                                 assumptions=["nothing else runs"])  # fmt: skip
    text = str(card)
    assert card.fits is False and "DOES NOT FIT" in text
    assert "90.0 min" in text and "2.2 h" in text and "nothing else runs" in text
    assert estimate.EstimateCard("b", 1, 1, 1).fits is None
