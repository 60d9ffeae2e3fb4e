import numpy as np
import pytest

from labkit.predict import scaling


@pytest.mark.parametrize("exponent", [0.5, 1.0, 2.0])
def test_exact_power_laws_are_recovered(exponent):
    xs = [1, 2, 4, 8, 16]
    fit = scaling.fit_power_law(xs, [3.0 * x**exponent for x in xs])
    assert fit.exponent == pytest.approx(exponent)
    assert fit.coefficient == pytest.approx(3.0)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.predict(32) == pytest.approx(3.0 * 32**exponent)


def test_fixed_overhead_bends_the_exponent_down_at_small_sizes():
    xs = np.array([1, 2, 4, 8, 16, 1024, 2048, 4096])
    ys = 100.0 + xs  # a fixed cost of 100 plus a linear part
    small, large = scaling.fit_power_law(xs[:5], ys[:5]), scaling.fit_power_law(xs[5:], ys[5:])
    assert small.exponent < 0.2 < 0.9 < large.exponent <= 1.0


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="at least two different sizes"):
        scaling.fit_power_law([4], [1.0])
    with pytest.raises(ValueError, match="positive, finite sizes and values"):
        scaling.fit_power_law([1, -2], [1.0, 2.0])
    with pytest.raises(ValueError, match="same length"):
        scaling.fit_power_law([1, 2, 3], [1.0, 2.0])


def test_linear_fit_separates_fixed_and_per_unit_cost():
    fit = scaling.fit_linear([10, 20, 40], [1.5 + 0.25 * x for x in [10, 20, 40]])
    assert fit.fixed == pytest.approx(1.5) and fit.per_unit == pytest.approx(0.25) and fit.r2 == pytest.approx(1.0)
    assert fit.predict(100) == pytest.approx(26.5)
    with pytest.raises(ValueError, match="two different sizes"):
        scaling.fit_linear([5, 5], [1.0, 2.0])
