"""One stage of Eq 4: exact recovery, bounds, errors, intervals (earlycurve._curve)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from earlycurve import CurveFitError, CurveFitter, CurveParams, InvalidCurveError, NotFittedError, TooFewPointsError, curve

TRUE = CurveParams(a=2e-4, b=0.05, c=1.0, d=0.1)


def test_exact_recovery_noise_free():
    g = np.arange(100.0)
    fitter = CurveFitter().fit(g, curve(g, TRUE))
    np.testing.assert_allclose(fitter.params_.as_array(), TRUE.as_array(), rtol=1e-6)
    assert fitter.cost_ < 1e-20
    assert fitter.n_points_ == 100


def test_exact_recovery_large_step_counts():
    # 16 points 4,000 steps apart, as in the cakelab curves: scaling keeps the solver well posed.
    truth = CurveParams(a=3e-9, b=2e-4, c=1.2, d=0.07)
    g = np.arange(0, 64000, 4000.0)
    fitter = CurveFitter().fit(g, curve(g, truth))
    np.testing.assert_allclose(fitter.params_.as_array(), truth.as_array(), rtol=1e-6)
    np.testing.assert_allclose(fitter.predict(1e5), curve(1e5, truth), rtol=1e-9)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    values=st.lists(st.floats(min_value=0.0, max_value=10.0, allow_nan=False), min_size=4, max_size=30),
)
@example(values=[0.0, 0.0, 0.0, 1.1125369292536007e-308])  # subnormal scale: CurveFitError, not inf
def test_fits_respect_bounds_on_any_data(values):
    y = np.asarray(values)
    g = np.arange(y.size, dtype=float) * 7.0
    try:
        fitter = CurveFitter().fit(g, y)
    except CurveFitError:
        return  # allowed: no garbage parameters
    p = fitter.params_
    assert p.a >= 0 and p.b >= 0 and p.d >= 0 and p.c > 0
    assert np.all(np.diff(fitter.predict(np.linspace(0, 1000, 50))) <= 1e-12)  # never increases


def test_increasing_loss_gives_flat_fit_within_bounds():
    g = np.arange(10.0)
    fitter = CurveFitter().fit(g, 0.2 + 0.01 * g)
    p = fitter.params_
    assert min(p.a, p.b, p.d) >= 0 and p.c > 0
    pred = fitter.predict(g)
    assert np.ptp(pred) < 0.05  # the family cannot rise: best it can do is about flat


def test_too_few_points():
    with pytest.raises(TooFewPointsError, match="needs >= 4"):
        CurveFitter().fit([0, 1, 2], [1.0, 0.5, 0.4])


@pytest.mark.parametrize(
    ("g", "y", "match"),
    [
        ([0, 1, 2, 3], [1.0, np.nan, 0.4, 0.3], "finite"),
        ([0, 2, 1, 3], [1.0, 0.5, 0.4, 0.3], "increasing"),
        ([0, 1, 2], [1.0, 0.5, 0.4, 0.3], "match"),
    ],
)
def test_bad_input(g, y, match):
    with pytest.raises(InvalidCurveError, match=match):
        CurveFitter().fit(g, y)


def test_bad_option_names_value_and_rule():
    with pytest.raises(InvalidCurveError, match="loss is 'l3'"):
        CurveFitter(loss="l3").fit(np.arange(5.0), np.ones(5))


def test_predict_before_fit():
    with pytest.raises(NotFittedError, match="not fitted yet"):
        CurveFitter().predict(3.0)
    assert issubclass(NotFittedError, AttributeError)


def test_params_validated():
    with pytest.raises(InvalidCurveError):
        CurveParams(a=-1.0, b=0.0, c=1.0, d=0.0)
    with pytest.raises(InvalidCurveError):
        CurveParams(a=0.0, b=0.0, c=0.0, d=0.0)


def _noisy(seed=0):
    g = np.arange(60.0)
    rng = np.random.default_rng(seed)
    return g, curve(g, TRUE) * (1 + 0.02 * rng.standard_normal(g.size))


def test_jacobian_interval_contains_value_and_widens_with_horizon():
    g, y = _noisy()
    fitter = CurveFitter().fit(g, y)
    value, low, high = fitter.predict_interval([60.0, 200.0], level=0.9)
    assert np.all(low <= value) and np.all(value <= high)
    assert (high - low)[1] >= (high - low)[0]
    assert fitter.residual_std_ > 0


def test_bootstrap_interval_is_seeded():
    g, y = _noisy(1)
    a = CurveFitter(interval="bootstrap", n_boot=20, random_state=3).fit(g, y).predict_interval(150.0)
    b = CurveFitter(interval="bootstrap", n_boot=20, random_state=3).fit(g, y).predict_interval(150.0)
    np.testing.assert_array_equal(np.concatenate(a), np.concatenate(b))
    assert a[1][0] <= a[0][0] <= a[2][0]


def test_interval_none_is_degenerate():
    g, y = _noisy(2)
    value, low, high = CurveFitter(interval="none").fit(g, y).predict_interval(100.0)
    assert low[0] == value[0] == high[0]
