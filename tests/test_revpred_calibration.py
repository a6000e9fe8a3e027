"""Eq 3 calibration (decision D5): undoing the class weights recovers the base rate."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from revpred.calibration import CALIBRATIONS, PriorShift, calibrator_from_dict, make_calibrator
from revpred.errors import RevPredError
from revpred.features import N_INPUTS
from revpred.labels import class_weights
from revpred.model import RevPredClassifier


def test_prior_shift_formula():
    cal = PriorShift().fit([], [], r_p=0.1)
    o = np.array([0.5, 0.9, 0.1])
    expected = 0.1 * o / (0.1 * o + 0.9 * (1 - o))
    np.testing.assert_allclose(cal.transform(o), expected, rtol=1e-6)
    assert cal.transform([0.5])[0] == pytest.approx(0.1)  # an uninformed weighted output -> base rate


def test_prior_shift_recovers_probabilities_of_a_class_weighted_model():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40_000, 1))
    p_true = 1 / (1 + np.exp(-(2.0 * x[:, 0] - 3.0)))  # base rate about 0.1
    y = (rng.uniform(size=p_true.size) < p_true).astype(int)
    w_neg, w_pos = class_weights(y)
    lr = LogisticRegression(C=1e6).fit(x, y, sample_weight=np.where(y == 1, w_pos, w_neg))
    o = lr.predict_proba(x)[:, 1]
    p = PriorShift().fit([], [], r_p=y.mean()).transform(o)
    assert o.mean() > 0.3  # the weighted output is far from the base rate ...
    assert p.mean() == pytest.approx(y.mean(), abs=0.01)  # ... Eq 3 maps it back
    assert np.mean(np.abs(p - p_true)) < 0.02
    assert np.mean((p - y) ** 2) < np.mean((o - y) ** 2)  # Brier improves


def test_uninformed_lstm_output_is_mapped_back_to_the_base_rate():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, N_INPUTS)).astype(np.float32)
    y = (rng.uniform(size=600) < 0.15).astype(int)
    est = RevPredClassifier(hidden_size=8, num_layers=1, fc_sizes=(8,), head_size=8, epochs=3, batch_size=200,
                            validation_fraction=0.0, random_state=0, lr=1e-2, n_threads=1).fit(X, y)
    o = est.predict_raw(X)
    p = est.predict_proba(X)[:, 1]
    assert abs(o.mean() - 0.5) < 0.1  # balanced by the class weights
    assert p.mean() == pytest.approx(y.mean(), abs=0.06)


@pytest.mark.parametrize("kind", CALIBRATIONS)
def test_calibrators_round_trip(kind):
    rng = np.random.default_rng(2)
    o = rng.uniform(0.01, 0.99, 500)
    y = (rng.uniform(size=500) < 0.3 * o).astype(int)
    cal = make_calibrator(kind).fit(o, y, r_p=0.15)
    again = calibrator_from_dict(cal.to_dict())
    np.testing.assert_allclose(again.transform(o), cal.transform(o))
    p = cal.transform(o)
    assert np.all((p >= 0) & (p <= 1))


def test_platt_and_temperature_beat_raw_output_on_their_validation_data():
    rng = np.random.default_rng(3)
    o = rng.uniform(0.01, 0.99, 4000)
    y = (rng.uniform(size=4000) < 0.2 * o).astype(int)
    for kind in ("platt", "temperature"):
        p = make_calibrator(kind).fit(o, y, r_p=y.mean()).transform(o)
        assert np.mean((p - y) ** 2) < np.mean((o - y) ** 2)


def test_unknown_calibration_is_refused():
    with pytest.raises(RevPredError, match="unknown"):
        make_calibrator("isotonic")


def test_damaged_stored_calibration_is_refused():
    with pytest.raises(RevPredError, match="lacks"):
        calibrator_from_dict({"kind": "platt", "a": 1.0})
    with pytest.raises(RevPredError, match="non-numeric"):
        calibrator_from_dict({"kind": "temperature", "T": None, "r_p": 0.1})
