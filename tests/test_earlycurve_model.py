"""EarlyCurve (online and batch), the predictor contract, baselines, ranking and modes."""

from __future__ import annotations

import numpy as np
import pytest

from earlycurve import (
    SLAQ,
    BestValue,
    CurveParams,
    EarlyCurve,
    FinalMetricPredictor,
    InvalidCurveError,
    LastValue,
    NotFittedError,
    Prediction,
    TooFewPointsError,
    curve,
    from_loss,
    rank_trials,
    to_loss,
)

STAGE0 = CurveParams(a=1e-4, b=0.05, c=1.0, d=0.5)
STAGE1 = CurveParams(a=2e-4, b=0.1, c=5.0, d=0.1)  # interior truth: no bound active


def two_stage(n0=60, n1=40):
    """Two-stage loss observed at every step; stage 1 starts at step 60 with a 60 % drop."""
    g0, g1 = np.arange(float(n0)), np.arange(float(n1))
    return np.concatenate([g0, n0 + g1]), np.concatenate([curve(g0, STAGE0), curve(g1, STAGE1)])


def test_batch_recovers_one_stage_params_and_prediction():
    steps = np.arange(70.0)
    ec = EarlyCurve(100).fit(steps, curve(steps, STAGE0))
    np.testing.assert_allclose(ec.params_.as_array(), STAGE0.as_array(), rtol=1e-6)
    pred = ec.prediction()
    assert pred.value == pytest.approx(curve(100.0, STAGE0)[0], rel=1e-9)
    assert (pred.method, pred.n_stages, pred.plateau) == ("fit", 1, False)
    assert pred.low <= pred.value <= pred.high


def test_second_stage_fitted_on_local_steps():
    steps, values = two_stage()
    ec = EarlyCurve(200).fit(steps, values)
    assert [s.start_step for s in ec.stages_] == [0.0, 60.0]
    assert ec.method_ == "fit"
    np.testing.assert_allclose(ec.params_.as_array(), STAGE1.as_array(), rtol=1e-5, atol=1e-9)
    assert ec.predict(200.0) == pytest.approx(curve(140.0, STAGE1)[0], rel=1e-7)


def test_online_equals_batch():
    steps, values = two_stage(60, 10)
    online = EarlyCurve(200)
    for s, v in zip(steps, values, strict=True):
        online.observe(s, v)
    batch = EarlyCurve(200).fit(steps, values)
    assert online.stages == batch.stages_
    assert online.prediction() == batch.prediction()
    assert online.params_ == batch.params_


def test_fallback_shifted_when_last_stage_too_short():
    steps, values = two_stage(60, 2)  # only 2 points in stage 1 (< 4 parameters)
    ec = EarlyCurve(200).fit(steps, values)
    assert len(ec.stages_) == 2 and ec.method_ == "shifted"
    np.testing.assert_allclose(ec.params_.as_array(), STAGE0.as_array(), rtol=1e-5)  # previous stage's fit
    expected = curve(200.0, STAGE0)[0] - curve(61.0, STAGE0)[0] + values[-1]
    assert ec.prediction().value == pytest.approx(expected, rel=1e-6)
    assert ec.prediction().method == "shifted"


def test_fallback_scaled_and_last_value_options():
    steps, values = two_stage(60, 2)
    scaled = EarlyCurve(200, fallback="scaled").fit(steps, values)
    expected = values[-1] * curve(200.0, STAGE0)[0] / curve(61.0, STAGE0)[0]
    assert scaled.method_ == "scaled" and scaled.prediction().value == pytest.approx(expected, rel=1e-6)
    last = EarlyCurve(200, fallback="last_value").fit(steps, values)
    assert last.method_ == "last_value" and last.prediction().value == values[-1]


def test_fallback_last_value_without_previous_stage():
    ec = EarlyCurve(50).fit([0, 1, 2], [1.0, 0.8, 0.7])
    assert ec.method_ == "last_value" and ec.params_ is None
    assert ec.prediction().value == 0.7


def test_four_points_in_the_new_stage_are_fitted():
    ec = EarlyCurve(200).fit(*two_stage(60, 4))
    assert ec.method_ == "fit" and len(ec.stages_) == 2


def test_plateau_prediction_is_the_last_value():
    steps = np.arange(0.0, 150.0)
    values = 0.3 + 0.5 * np.exp(-steps / 4.0)
    ec = EarlyCurve(200).fit(steps, values)
    assert ec.is_plateau()
    pred = ec.prediction()
    assert pred.plateau and pred.method == "plateau"
    assert pred.value == pred.low == pred.high == values[-1]
    assert not EarlyCurve(200, plateau_tol=None).fit(steps, values).prediction().plateau


def test_fit_window_uses_recent_points_only():
    steps = np.arange(40.0)
    values = curve(steps, STAGE0)
    values[:10] += 0.3  # a warm-up bump the family cannot follow
    ec = EarlyCurve(100, fit_window=0.5).fit(steps, values)
    np.testing.assert_allclose(ec.params_.as_array(), STAGE0.as_array(), rtol=1e-5)


def test_observe_rejects_bad_points_and_keeps_state():
    ec = EarlyCurve(100).observe(1, 0.9).observe(2, 0.8)
    for step, value in [(2, 0.7), (1.5, 0.7), (3, float("nan")), (101, 0.5)]:
        with pytest.raises(InvalidCurveError):
            ec.observe(step, value)
    assert [s.n_points for s in ec.stages] == [2]


def test_predict_before_any_observation():
    with pytest.raises(NotFittedError):
        EarlyCurve(10).prediction()


def test_predict_before_last_stage_rejected():
    ec = EarlyCurve(200).fit(*two_stage(60, 10))
    with pytest.raises(InvalidCurveError, match="before the last stage"):
        ec.predict(30.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_steps": 0}, "max_steps"),
        ({"alpha": 0.0}, "alpha"),
        ({"min_points": 3}, "min_points"),
        ({"fallback": "zero"}, "fallback"),
        ({"fit_window": 0.0}, "fit_window"),
        ({"level": 1.0}, "level"),
        ({"loss": "l3"}, "loss"),
    ],
)
def test_options_checked_at_construction(kwargs, match):
    args = {"max_steps": 10} | kwargs
    with pytest.raises(InvalidCurveError, match=match):
        EarlyCurve(**args)


PREDICTORS = [EarlyCurve(1), SLAQ(), LastValue(), BestValue()]


@pytest.mark.parametrize("predictor", PREDICTORS, ids=lambda p: type(p).__name__)
def test_contract(predictor):
    assert isinstance(predictor, FinalMetricPredictor)
    steps, values = two_stage(60, 10)
    pred = predictor.predict_final(steps, values, 100)
    assert isinstance(pred, Prediction)
    assert pred.low <= pred.value <= pred.high and pred.n_stages >= 0
    assert predictor.predict_final(steps, values, 100) == pred  # pure: same input, same output
    with pytest.raises(TooFewPointsError):
        predictor.predict_final([], [], 100)
    with pytest.raises(InvalidCurveError, match="max_steps"):
        predictor.predict_final(steps, values, 50)


def test_baselines_values():
    steps, values = np.arange(5.0), np.array([1.0, 0.5, 0.6, 0.4, 0.45])
    assert LastValue().predict_final(steps, values, 10).value == 0.45
    assert BestValue().predict_final(steps, values, 10).value == 0.4
    slaq = SLAQ().predict_final(*two_stage(60, 10), 100)
    assert slaq.n_stages == 1 and slaq.method == "fit"


def test_prediction_is_frozen_and_validated():
    pred = Prediction(value=0.5, low=0.4, high=0.6)
    with pytest.raises(AttributeError):
        pred.value = 0.1  # type: ignore[misc]
    with pytest.raises(InvalidCurveError):
        Prediction(value=0.7, low=0.4, high=0.6)


def test_rank_trials_point_and_overlap():
    curves = [
        (np.arange(3.0), np.array([1.0, 0.8, 0.60])),
        (np.arange(3.0), np.array([1.0, 0.7, 0.50])),
        (np.arange(3.0), np.array([1.0, 0.9, 0.70])),
        (np.arange(3.0), np.array([1.0, 0.8, 0.55])),
    ]
    ranking = rank_trials(curves, LastValue(), 10, top_k=2)
    assert ranking.order == (1, 3, 0, 2) and ranking.top_k == (1, 3) and ranking.kept == (1, 3)
    np.testing.assert_array_equal(ranking.values, [0.6, 0.5, 0.7, 0.55])

    class Wide(LastValue):
        def predict_final(self, steps, values, max_steps):
            p = super().predict_final(steps, values, max_steps)
            return Prediction(value=p.value, low=p.value - 0.06, high=p.value + 0.06, n_stages=0)

    assert rank_trials(curves, Wide(), 10, top_k=2, keep_overlapping=True).kept == (1, 3, 0)
    with pytest.raises(InvalidCurveError, match="top_k"):
        rank_trials(curves, LastValue(), 10, top_k=0)


def test_to_loss_round_trip():
    acc = np.array([0.1, 0.9])
    np.testing.assert_allclose(to_loss(acc, "max"), [0.9, 0.1])
    np.testing.assert_allclose(from_loss(to_loss(acc, "max"), "max"), acc)
    np.testing.assert_allclose(to_loss(acc, "min"), acc)
    with pytest.raises(InvalidCurveError, match="mode"):
        to_loss(acc, "maximize")


@pytest.mark.parametrize("module", ["earlycurve._curve", "earlycurve._model", "earlycurve._mode", "earlycurve._ranking"])
def test_docstring_examples(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
