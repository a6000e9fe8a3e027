"""earlycurve.ResidualCurvePredictor: last value + a ridge residual learned from previous curves."""

from __future__ import annotations

import math

import numpy as np
import pytest

from earlycurve import InvalidCurveError, NotFittedError, ResidualCurvePredictor, rank_trials

S = 20
STEPS = np.arange(1, S + 1)


def _pool(n=48, seed=0, same_slope=False):
    """Curves ``loss(t) = exp(b − a·t/S)``: in log space a line, so ``z(S) − z(s) = −a(1 − s/S)`` and every
    feature ``z(f·s) − z(s) = a(1 − f)·s/S``: the residual is exactly linear in the features. Random ``b``
    makes the curves cross (the last value at θ is not the final ranking)."""
    rng = np.random.default_rng(seed)
    a = np.full(n, 1.5) if same_slope else rng.uniform(0.5, 3.0, n)
    b = rng.uniform(0.0, 1.5, n)
    return [(STEPS, np.exp(bi - ai * STEPS / S), S) for ai, bi in zip(a, b)]


def test_no_feature_no_intercept_is_the_last_value_exactly():
    pool = _pool()
    m = ResidualCurvePredictor(fractions=(), fit_intercept=False, n_studies=20).fit(pool)
    assert all(a == math.inf for a in m.alpha_.values())
    for steps, values, smax in _pool(n=5, seed=3):
        for r in (1, 4, 10, 17):
            p = m.predict_final(steps[:r], values[:r], smax)
            assert p.value == values[r - 1]
            assert p.method == "last_value"


def test_no_feature_with_intercept_adds_the_median_log_residual():
    # every curve has the same slope: log residual at step 10 is exactly −1.5 · (1 − 10/20) = −0.75
    pool = _pool(same_slope=True)
    m = ResidualCurvePredictor(fractions=(), n_studies=20, clip=0.0).fit(pool)
    steps, values, _ = pool[0]
    p = m.predict_final(steps[:10], values[:10], S)
    assert p.value == pytest.approx(values[9] * math.exp(-0.75), rel=1e-12)


def test_no_gain_over_the_last_value_falls_back_to_it():
    # same slope: the last value at θ already ranks every study perfectly, so no finite alpha can beat it;
    # a little noise before the end gives the features variance, so a ridge fit alone would not be zero
    rng = np.random.default_rng(1)
    pool = [(s, v * np.exp(np.r_[rng.normal(0, 1e-3, S - 1), 0.0]), smax) for s, v, smax in _pool(same_slope=True)]
    m = ResidualCurvePredictor(n_studies=50).fit(pool)
    assert all(m.cv_recall_[t][math.inf] == 1.0 for t in m.thetas)
    assert all(a == math.inf for a in m.alpha_.values())
    assert all(np.all(c == 0) for c in m.coef_.values())
    curves = [(s[:8], v[:8]) for s, v, _ in pool[:16]]
    ranked = rank_trials(curves, m, S, top_k=3)
    assert ranked.order == tuple(int(i) for i in np.argsort([v[-1] for _, v in curves], kind="stable"))


def test_learnable_family_is_predicted_near_exactly():
    # top_k=1: the cross-validated recall separates the model from the last value at every θ
    m = ResidualCurvePredictor(alphas=(1e-8,), clip=0.0, n_studies=50, top_k=1, n_se=0.0).fit(_pool(n=64))
    assert all(a == 1e-8 for a in m.alpha_.values())  # chosen by the cross-validated recall over inf
    for steps, values, smax in _pool(n=10, seed=7):
        for r in (2, 6, 10, 14, 18):  # θ = 0.1, 0.3, 0.5, 0.7, 0.9: the grid's own models
            p = m.predict_final(steps[:r], values[:r], smax)
            assert p.value == pytest.approx(values[-1], rel=1e-6)
            assert p.low <= p.value <= p.high


def test_learned_residual_ranks_crossing_curves_better_than_the_last_value():
    m = ResidualCurvePredictor(n_studies=50, n_se=0.0).fit(_pool(n=64))
    test = _pool(n=16, seed=8)
    finals = np.array([v[-1] for _, v, _ in test])
    curves = [(s[:6], v[:6]) for s, v, _ in test]
    assert rank_trials(curves, m, S, top_k=1).top_k == (int(np.argmin(finals)),)
    last = np.array([v[-1] for _, v in curves])
    assert int(np.argmin(finals)) == 1 and int(np.argmin(last)) == 9  # the last value misses the best here


def test_one_standard_error_guard():
    # n_se=1: a finite alpha needs a recall gain over the last value > 1 SE of that gain
    m = ResidualCurvePredictor(alphas=(1e-8,), clip=0.0, n_studies=50, top_k=1, n_se=1.0).fit(_pool(n=64))
    # θ 0.7: the model hits all 50 pseudo-studies, the last value 49 -> paired differences one 1 and 49 zeros,
    # sd (ddof 1) sqrt(0.02); 64 curves hold 4 disjoint studies of 16 -> SE = sqrt(0.02) / 2 > gain 0.02
    assert m.cv_recall_[0.7] == {1e-8: 1.0, math.inf: 0.98}
    assert m.cv_gain_se_[0.7][1e-8] == pytest.approx(math.sqrt(0.02) / 2, rel=1e-12)
    assert m.alpha_[0.7] == math.inf
    assert [t for t, a in m.alpha_.items() if a != math.inf] == [0.1, 0.2, 0.3]  # gains 0.62, 0.46, 0.24 > SE
    # the default n_se=1.5 also drops θ 0.3, whose gain is 1.11 SE (0.24 / 0.2157); θ 0.1 and 0.2 are 2.53 and 1.83 SE
    d = ResidualCurvePredictor(alphas=(1e-8,), clip=0.0, n_studies=50, top_k=1).fit(_pool(n=64))
    assert d.n_se == 1.5 and d.cv_gain_se_[0.3] == m.cv_gain_se_[0.3]
    assert [t for t, a in d.alpha_.items() if a != math.inf] == [0.1, 0.2]


def test_deterministic_for_a_seed():
    pool = _pool(n=40)
    m1 = ResidualCurvePredictor(n_studies=30, random_state=5).fit(pool)
    m2 = ResidualCurvePredictor(n_studies=30, random_state=5).fit(pool)
    assert m1.alpha_ == m2.alpha_ and m1.cv_recall_ == m2.cv_recall_
    for t in m1.thetas:
        np.testing.assert_array_equal(m1.coef_[t], m2.coef_[t])
        assert m1.intercept_[t] == m2.intercept_[t]


def test_theta_model_is_the_nearest_lower_on_ties():
    m = ResidualCurvePredictor(thetas=(0.2, 0.3, 0.7))
    assert m.theta_model(0.25) == 0.2
    assert m.theta_model(0.26) == 0.3
    assert m.theta_model(0.05) == 0.2
    assert m.theta_model(0.99) == 0.7


def test_features_are_log_drops_over_the_prefix():
    m = ResidualCurvePredictor(fractions=(0.5,), level=True)
    x = m.features(np.array([1.0, 2.0, 3.0, 4.0]), np.array([8.0, 4.0, 2.0, 1.0]))
    # z(2) − z(4) = log 4 − log 1; level z(4) = 0
    np.testing.assert_allclose(x, [math.log(4.0), 0.0], rtol=0, atol=1e-15)


def test_non_positive_loss_gets_its_last_value_and_is_skipped_in_training():
    pool = _pool(n=30)
    m = ResidualCurvePredictor(n_studies=10).fit(pool + [(STEPS, np.linspace(1.0, -1.0, S), S)])
    p = m.predict_final(STEPS[:5], np.array([0.5, 0.2, 0.0, -0.1, -0.2]), S)
    assert p.value == -0.2 and p.method == "last_value"


def test_finished_curve_is_its_final_value():
    m = ResidualCurvePredictor(n_studies=10).fit(_pool(n=30))
    _, v, _ = _pool(n=1, seed=4)[0]
    assert m.predict_final(STEPS, v, S).value == v[-1]


def test_errors():
    with pytest.raises(NotFittedError):
        ResidualCurvePredictor().predict_final(STEPS[:3], np.ones(3), S)
    with pytest.raises(InvalidCurveError, match="before its max_steps"):
        ResidualCurvePredictor().fit([(STEPS[:10], np.ones(10), S)] * 10)
    with pytest.raises(InvalidCurveError, match="groups"):
        ResidualCurvePredictor().fit(_pool(n=10), groups=[0] * 3)
    with pytest.raises(InvalidCurveError, match="fewer than n_folds"):
        ResidualCurvePredictor().fit(_pool(n=3))
    for kw in ({"fractions": (1.0,)}, {"thetas": (0.5, 0.3)}, {"thetas": ()}, {"alphas": (0.0,)}, {"transform": "sqrt"},
               {"clip": 0.5}, {"margin": -1}, {"n_folds": 1}, {"top_k": 0}):
        with pytest.raises(InvalidCurveError):
            ResidualCurvePredictor(**kw)
