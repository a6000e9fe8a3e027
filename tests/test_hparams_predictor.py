"""earlycurve.HyperparameterCurvePredictor and ConfigEncoder (decision ES21, docs/design/earlycurve.md §8.19): hand-made
curves whose end a hyperparameter decides, the cross-validated guard, and the errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from earlycurve import ConfigEncoder, HyperparameterCurvePredictor, InvalidCurveError, LastValue, NotFittedError

STEPS = np.arange(1, 21, dtype=float)


def _hidden_rate_pool(n=128, seed=0):
    """``exp(b − a·t/20)``: at t = 2 the level ``b`` (spread 0.3) hides the rate ``a`` (spread 2.5) that decides the end."""
    ab = np.random.default_rng(seed).uniform([0.5, 0.0], [3.0, 0.3], (n, 2))
    return [(STEPS, np.exp(b - a * STEPS / 20), 20) for a, b in ab], [{"a": float(a)} for a, _ in ab]


def test_config_encoder_columns_scales_and_missing_values():
    enc = ConfigEncoder(ignore=("run",)).fit([
        {"lr": 1e-4, "momentum": 0.9, "opt": "adam", "epochs": 10, "run": 0, "fixed": 3, "nesterov": True},
        {"lr": 1e-1, "momentum": 0.5, "opt": "sgd", "epochs": 20, "run": 1, "fixed": 3, "nesterov": False},
    ])
    # lr spans 1000x: log; momentum and epochs (2x): linear; the constant and the ignored key are left out
    assert enc.columns_ == [("epochs", "linear"), ("lr", "log"), ("momentum", "linear"), ("nesterov", "linear"),
                            ("opt", "category")]
    x = enc.transform([{"lr": 1e-2, "momentum": 0.7, "opt": "sgd", "epochs": 15, "nesterov": True},
                       {"lr": -1.0, "opt": "rmsprop", "epochs": "ten"}])
    assert x[0].tolist() == [15.0, -2.0, 0.7, 1.0, 1.0]
    assert np.isnan(x[1]).all()  # a negative log-scale value, a missing key, an unseen category, a non-number
    with pytest.raises(NotFittedError):
        ConfigEncoder().transform([{}])


def test_the_model_learns_what_the_hyperparameter_decides_and_ranks_far_better_than_the_last_value():
    pool, configs = _hidden_rate_pool()
    model = HyperparameterCurvePredictor(thetas=(0.1, 0.9), n_studies=100).fit(pool, configs)
    assert model.use_model_ == {0.1: True, 0.9: False}  # at 90 % the last value already ranks as well
    last, trees = model.cv_recall_[0.1]
    assert last == 0.75 and trees >= 0.95  # cross-validated top-3 recall at 10 % of the run
    test, test_configs = _hidden_rate_pool(n=32, seed=1)
    pred = np.array([model.predict_final(s[:2], v[:2], 20, config=c).value for (s, v, _), c in zip(test, test_configs)])
    final = np.array([v[-1] for _, v, _ in test])
    assert np.median(np.abs(np.log(pred / final))) < 0.1
    assert np.corrcoef(pred, final)[0, 1] > 0.95
    assert np.corrcoef([v[1] for _, v, _ in test], final)[0, 1] < 0.75  # the last value at t = 2 knows much less
    p = model.predict_final(STEPS[:2], test[0][1][:2], 20, config=test_configs[0])
    assert p.method == "hyperparameters" and p.low == p.value == p.high


def test_the_guard_keeps_the_last_value_where_the_hyperparameter_says_nothing():
    # parallel curves: the last value ranks them exactly, and the hyperparameter is noise
    rng = np.random.default_rng(2)
    levels = rng.uniform(0.0, 1.0, 96)
    pool = [(STEPS, np.exp(b - STEPS / 20), 20) for b in levels]
    configs = [{"noise": float(x)} for x in rng.uniform(0, 1, 96)]
    model = HyperparameterCurvePredictor(thetas=(0.2,), n_studies=100).fit(pool, configs)
    assert model.use_model_ == {0.2: False}
    s, v, _ = pool[0]
    p = model.predict_final(s[:4], v[:4], 20, config=configs[0])
    assert p.method == "last_value" and p.value == LastValue().predict_final(s[:4], v[:4], 20).value


def test_without_a_config_a_finished_curve_or_a_nonpositive_loss_the_answer_is_the_last_value():
    pool, configs = _hidden_rate_pool(n=64)
    model = HyperparameterCurvePredictor(thetas=(0.1,), n_studies=50).fit(pool, configs)
    s, v, _ = pool[0]
    for steps, values, kw in [(s[:2], v[:2], {}), (s, v, {"config": configs[0]}),
                              (s[:2], np.array([0.5, 0.0]), {"config": configs[0]})]:
        p = model.predict_final(steps, values, 20, **kw)
        assert p.method == "last_value" and p.value == float(values[-1])


def test_the_model_does_not_depend_on_the_order_of_the_runs_nor_on_the_other_thetas():
    pool, configs = _hidden_rate_pool(n=64)
    order = np.random.default_rng(9).permutation(64)
    a = HyperparameterCurvePredictor(thetas=(0.1, 0.5), n_studies=50).fit(pool, configs)
    b = HyperparameterCurvePredictor(thetas=(0.1,), n_studies=50).fit([pool[i] for i in order],
                                                                      [configs[i] for i in order])
    assert a.cv_recall_[0.1] == b.cv_recall_[0.1] and a.cv_gain_se_[0.1] == b.cv_gain_se_[0.1]
    s, v, _ = pool[7]
    assert a.predict_final(s[:2], v[:2], 20, config=configs[7]) == b.predict_final(s[:2], v[:2], 20, config=configs[7])


def test_fewer_runs_than_two_studies_keep_the_last_value():
    # 20 runs: every pseudo-study of 16 overlaps every other, so a gain has no standard error to be judged by; even at
    # n_se 0 the model is refused, and with studies of 8 (two fit in 20 runs) the same gain lets it rank
    pool, configs = _hidden_rate_pool(n=20)
    kw = dict(thetas=(0.1,), n_studies=50, n_se=0.0, min_samples_leaf=3)
    model = HyperparameterCurvePredictor(study_size=16, **kw).fit(pool, configs)
    assert model.cv_recall_[0.1][1] > model.cv_recall_[0.1][0] and model.use_model_ == {0.1: False}
    assert HyperparameterCurvePredictor(study_size=8, **kw).fit(pool, configs).use_model_ == {0.1: True}


def test_missing_and_non_finite_values_do_not_make_a_numeric_column_categorical():
    enc = ConfigEncoder().fit([{"lr": 0.1}, {"lr": None}, {"lr": float("nan")}, {"lr": 0.001}])
    assert enc.columns_ == [("lr", "log")]
    assert enc.transform([{"lr": 0.01}, {"lr": None}])[:, 0].tolist()[0] == -2.0
    assert np.isnan(enc.transform([{"lr": None}])[0, 0])


def test_same_data_and_seed_same_model():
    pool, configs = _hidden_rate_pool(n=64)
    a = HyperparameterCurvePredictor(thetas=(0.1,), n_studies=50, random_state=3).fit(pool, configs)
    b = HyperparameterCurvePredictor(thetas=(0.1,), n_studies=50, random_state=3).fit(pool, configs)
    s, v, _ = pool[5]
    assert a.cv_recall_ == b.cv_recall_
    assert a.predict_final(s[:2], v[:2], 20, config=configs[5]) == b.predict_final(s[:2], v[:2], 20, config=configs[5])


@pytest.mark.parametrize("kw, match", [({"thetas": ()}, "thetas"), ({"thetas": (0.5, 0.2)}, "thetas"),
                                       ({"thetas": (1.0,)}, "thetas"), ({"max_iter": 0}, "max_iter"),
                                       ({"learning_rate": 0.0}, "learning_rate"), ({"n_folds": 1}, "n_folds"),
                                       ({"n_se": -1.0}, "n_se")])
def test_bad_parameters_are_refused(kw, match):
    with pytest.raises(InvalidCurveError, match=match):
        HyperparameterCurvePredictor(**kw)


def test_bad_training_data_is_refused_and_an_unfitted_model_says_so():
    pool, configs = _hidden_rate_pool(n=16)
    with pytest.raises(InvalidCurveError, match="counts must match"):
        HyperparameterCurvePredictor().fit(pool, configs[:-1])
    with pytest.raises(InvalidCurveError, match="before its max_steps"):
        HyperparameterCurvePredictor().fit([(STEPS[:10], pool[0][1][:10], 20)], configs[:1])
    with pytest.raises(InvalidCurveError, match="fewer than n_folds"):
        HyperparameterCurvePredictor(thetas=(0.5,)).fit(pool[:3], configs[:3])
    with pytest.raises(NotFittedError):
        HyperparameterCurvePredictor().predict_final(STEPS[:2], pool[0][1][:2], 20, config=configs[0])
    assert math.isclose(HyperparameterCurvePredictor().theta_model(0.045), 0.04)
