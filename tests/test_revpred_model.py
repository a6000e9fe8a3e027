"""RevPredClassifier: sklearn conventions, both architectures, determinism, thread handling."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from revpred.calibration import PriorShift
from revpred.errors import RevPredError
from revpred.features import N_HISTORY, N_INPUTS, N_SEQ
from revpred.model import RevPredClassifier, RevPredNet, TributaryNet

SMALL = dict(hidden_size=8, num_layers=3, fc_sizes=(8, 8, 4), head_size=4, epochs=2, batch_size=100, n_threads=1)


def data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, N_INPUTS)).astype(np.float32)
    y = (X[:, -1] + 0.3 * rng.normal(size=n) > 0.8).astype(int)  # depends on the present delta column
    return X, y


def test_paper_sizes():
    net = RevPredNet()
    assert net.lstm.num_layers == 3 and net.lstm.hidden_size == 64 and net.lstm.input_size == 6
    assert [m.out_features for m in net.fc if isinstance(m, torch.nn.Linear)] == [64, 64, 32]
    assert net.fc[0].in_features == 8 and net.head[0].in_features == 96
    trib = TributaryNet()
    assert trib.lstm.input_size == 8 and trib.lstm.num_layers == 3
    hist, present = torch.zeros(2, N_HISTORY, N_SEQ), torch.zeros(2, 8)
    assert net(hist, present).shape == (2,) and trib(hist, present).shape == (2,)


@pytest.mark.parametrize("arch", ["revpred", "tributary"])
def test_fit_returns_self_and_sets_attributes(arch):
    X, y = data()
    est = RevPredClassifier(architecture=arch, random_state=0, **SMALL)
    assert est.fit(X, y) is est
    # 300 rows, validation_fraction 0.1: the first 270 train, the last 30 validate
    assert isinstance(est.module_, {"revpred": RevPredNet, "tributary": TributaryNet}[arch])
    assert not est.module_.training  # left in eval mode
    assert est.classes_.tolist() == [0, 1] and est.n_features_in_ == N_INPUTS == 362
    assert est.r_p_ == np.mean(y[:270] == 1)
    assert isinstance(est.calibrator_, PriorShift) and est.calibrator_.r_p_ == est.r_p_
    assert len(est.loss_curve_) == 2 and len(est.validation_scores_) == 2
    assert all(np.isfinite(est.loss_curve_)) and all(np.isfinite(est.validation_scores_))
    assert est.best_epoch_ == 1 + int(np.argmin(est.validation_scores_))
    proba = est.predict_proba(X)
    assert proba.shape == (300, 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert set(np.unique(est.predict(X))) <= {0, 1}
    assert clone(est).get_params()["architecture"] == arch


def test_same_seed_same_model_and_global_rng_untouched():
    X, y = data()
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = RevPredClassifier(random_state=7, **SMALL).fit(X, y).predict_proba(X)
    after = torch.rand(1)
    b = RevPredClassifier(random_state=7, **SMALL).fit(X, y).predict_proba(X)
    c = RevPredClassifier(random_state=8, **SMALL).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert torch.equal(before, after)


def test_thread_count_is_respected_and_restored():
    X, y = data(100)
    old = torch.get_num_threads()
    seen = []
    try:
        torch.set_num_threads(2)
        RevPredClassifier(random_state=0, **SMALL).fit(X, y, on_epoch=lambda e, loss: seen.append(torch.get_num_threads()))
        assert seen == [1, 1] and torch.get_num_threads() == 2  # n_threads=1 inside, restored after
        seen.clear()
        RevPredClassifier(random_state=0, **{**SMALL, "n_threads": None}).fit(
            X, y, on_epoch=lambda e, loss: seen.append(torch.get_num_threads()))
        assert seen == [2, 2]  # None: the global setting is respected
    finally:
        torch.set_num_threads(old)


def test_not_fitted_and_bad_input():
    est = RevPredClassifier()
    with pytest.raises(NotFittedError):
        est.predict_proba(np.zeros((1, N_INPUTS)))
    with pytest.raises(RevPredError, match="shape"):
        RevPredClassifier(**SMALL).fit(np.zeros((30, 5)), np.zeros(30))
    with pytest.raises(RevPredError, match="architecture"):
        RevPredClassifier(architecture="gru").fit(*data(30))
    X, y = data(30)
    with pytest.raises(RevPredError, match="labels"):
        RevPredClassifier(**SMALL).fit(X, y + 2)


def test_learns_an_easy_signal():
    X, y = data(800, seed=4)
    est = RevPredClassifier(random_state=0, **{**SMALL, "epochs": 10, "batch_size": 200}, lr=2e-2).fit(X, y)
    from sklearn.metrics import roc_auc_score

    Xt, yt = data(400, seed=5)
    assert roc_auc_score(yt, est.predict_proba(Xt)[:, 1]) > 0.9


def test_state_round_trip():
    X, y = data()
    est = RevPredClassifier(random_state=0, **SMALL).fit(X, y)
    meta, state = est.export_state()
    again = RevPredClassifier.from_state(meta, state)
    np.testing.assert_array_equal(again.predict_proba(X), est.predict_proba(X))
    state = dict(state)
    state.pop("head.0.weight")
    with pytest.raises(RevPredError, match="do not match"):
        RevPredClassifier.from_state(meta, state)
