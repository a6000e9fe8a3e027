"""Tiny end-to-end RevPred on a few hours of the real 2015 trace: train, predict, persist, evaluate (seconds)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from revpred.baselines import ConstantHazard, EmpiricalRate
from revpred.errors import RevPredError
from revpred.evaluation import binary_metrics, evaluate
from revpred.features import make_inputs, record_features
from spotmarket.prices import Market, PriceHistory, to_seconds
from revpred.protocol import RevocationPredictor
from revpred.store import load_market_fit, load_model_set, market_slug, save_model_set
from revpred.training import TrainConfig, train_markets

ROOT = Path(__file__).resolve().parents[1]
MARKETS = [Market("us-east-1a", "r3.large"), Market("us-east-1b", "c3.xlarge")]
START, END = to_seconds("2015-05-01T00:00Z"), to_seconds("2015-05-01T14:00Z")
TEST_END = to_seconds("2015-05-01T18:00Z")
CONFIG = TrainConfig(stride_min=10, epochs=1, validation_days=0.1, seed=3, n_threads=1)


def trace_path() -> Path:
    return ROOT / "data" / "spot_prices" / "us-east-1_2015.csv.gz"


def small_table(markets=MARKETS, lo="2015-04-30T00:00Z", hi="2015-05-02T00:00Z") -> pd.DataFrame:
    raw = pd.read_csv(trace_path())
    ts = pd.to_datetime(raw["datetime"], utc=True)
    keep = (ts >= pd.Timestamp(lo)) & (ts < pd.Timestamp(hi))
    keep &= pd.Series(list(zip(raw["availability_zone"], raw["instance_type"]))).isin(
        [(m.availability_zone, m.instance_type) for m in markets]).to_numpy()
    raw = raw[keep]
    return pd.DataFrame({"timestamp": ts[keep], "region": raw["region"], "availability_zone": raw["availability_zone"],
                         "instance_type": raw["instance_type"], "product_description": "Linux/UNIX",
                         "price": raw["price"].astype(float)})


@pytest.fixture(scope="module")
def history() -> PriceHistory:
    return PriceHistory(small_table())


@pytest.fixture(scope="module")
def model_set(history):
    return train_markets(history, MARKETS, START, END, CONFIG)


def test_train_predict_evaluate(history, model_set):
    rp = model_set.predictor("revpred")
    assert isinstance(rp, RevocationPredictor)
    t = END + 600.0
    p = rp.predict_proba(MARKETS, t, [0.05, 0.05])
    assert p.shape == (2,) and np.all((p >= 0) & (p <= 1))
    preds = {k: model_set.predictor(k) for k in ("revpred", "tributary", "logreg", "empirical")}
    preds["constant"] = {r: model_set.predictor("constant", rule=r) for r in ("random", "alg2")}
    res = evaluate(history, preds, MARKETS, END, TEST_END, stride_min=10, train_end_s=END)
    for rule in ("random", "alg2"):
        for name in preds:
            pooled = res["rules"][rule][name]["pooled"]
            assert pooled["n"] == 2 * 19  # 14:00 .. 17:00 every 10 min, two markets
            assert 0.0 <= pooled["brier"] <= 1.0 and len(pooled["reliability"]) == 10
    json.dumps(res, default=float)


def test_never_evaluates_inside_the_training_window(history, model_set):
    with pytest.raises(RevPredError, match="inside the training window"):
        evaluate(history, {"revpred": model_set.predictor("revpred")}, MARKETS, END - 3600, TEST_END, train_end_s=END)


def test_vectorised_queries_equal_single_queries_and_are_deterministic(history, model_set):
    rp = model_set.predictor("revpred")
    rng = np.random.default_rng(0)
    markets = [MARKETS[i] for i in rng.integers(0, 2, 12)]
    times = END + 60.0 * rng.integers(0, 200, 12)
    prices = np.array([history[m].price_at(t) for m, t in zip(markets, times)]) + rng.uniform(1e-5, 0.2, 12)
    batch = rp.predict_proba(markets, times, prices)
    single = np.array([rp.predict_proba([m], t, b)[0] for m, t, b in zip(markets, times, prices)])
    np.testing.assert_allclose(batch, single, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(batch, rp.predict_proba(markets, times, prices))
    again = train_markets(history, MARKETS[:1], START, END, CONFIG, kinds=["revpred"]).predictor("revpred")
    np.testing.assert_array_equal(again.predict_proba(MARKETS[:1] * 3, times[:3], prices[:3]),
                                  rp.predict_proba(MARKETS[:1] * 3, times[:3], prices[:3]))


def test_predictor_uses_no_future_prices(history, model_set):
    rp = model_set.predictor("revpred")
    t = END + 1800.0
    future_cut = history.table[history.table["timestamp"] <= pd.Timestamp(t, unit="s", tz="UTC")]
    past_only = PriceHistory(future_cut, end=t)
    np.testing.assert_array_equal(rp.predict_proba(MARKETS, t, [0.03, 0.06]),
                                  rp.with_history(past_only).predict_proba(MARKETS, t, [0.03, 0.06]))


def test_max_price_below_current_price_is_certain_revocation(history, model_set):
    rp = model_set.predictor("revpred")
    t = END + 600.0
    price = history[MARKETS[0]].price_at(t)
    assert rp.predict_proba([MARKETS[0]], t, price - 0.001)[0] == 1.0
    with pytest.raises(RevPredError, match="no RevPred model"):
        rp.predict_proba([Market("us-east-1e", "m3.medium")], t, 0.1)


def test_baselines_behave(history, model_set):
    t = END + 600.0
    emp = model_set.predictor("empirical")
    assert isinstance(emp, EmpiricalRate)
    p_small, p_big = emp.predict_proba([MARKETS[1]] * 2, t, history[MARKETS[1]].price_at(t) + np.array([1e-4, 5.0]))
    assert p_small >= p_big  # a higher max price is never more likely to be exceeded
    const = ConstantHazard.from_rates({MARKETS[0]: 0.25})
    assert const.predict_proba([MARKETS[0]], t, 1.0)[0] == pytest.approx(0.25)


def test_persistence_round_trip_and_wrong_market_refusal(tmp_path, history, model_set):
    root = save_model_set(tmp_path / "models", model_set)
    loaded = load_model_set(root, history)
    t = END + 60.0 * np.arange(0, 30, 7)
    for kind in ("revpred", "tributary", "logreg", "empirical"):
        for m in MARKETS:
            b = np.asarray(history[m].price_at(t)) + 0.01
            np.testing.assert_array_equal(loaded.predictor(kind).predict_proba([m] * t.size, t, b),
                                          model_set.predictor(kind).predict_proba([m] * t.size, t, b))
    assert loaded.fits[MARKETS[0]].rates == model_set.fits[MARKETS[0]].rates
    np.testing.assert_array_equal(load_model_set(root, history).predictor("revpred").predict_proba(MARKETS, t[0], 0.05),
                                  model_set.predictor("revpred").predict_proba(MARKETS, t[0], 0.05))
    # a model directory of one market used for another is refused
    with pytest.raises(RevPredError, match="trained for market us-east-1a/r3.large"):
        load_market_fit(root / market_slug(MARKETS[0]), MARKETS[1])
    # swapping subdirectories in the index is caught too
    index = json.loads((root / "revpred.json").read_text())
    index["markets"][str(MARKETS[1])] = market_slug(MARKETS[0])
    (root / "revpred.json").write_text(json.dumps(index))
    with pytest.raises(RevPredError, match="refusing"):
        load_model_set(root, history)
    with pytest.raises(RevPredError, match="no model for market"):
        load_model_set(root, history, [Market("us-east-1e", "m3.medium")])


def test_persistence_refuses_damaged_directories(tmp_path, history, model_set):
    root = save_model_set(tmp_path / "m", model_set)
    sub = root / market_slug(MARKETS[0])
    meta = json.loads((sub / "meta.json").read_text())
    (sub / "meta.json").write_text(json.dumps({**meta, "format_version": 99}))
    with pytest.raises(RevPredError, match="format version 99"):
        load_market_fit(sub, MARKETS[0])
    (sub / "meta.json").write_text(json.dumps({**meta, "train_end_s": meta["train_start_s"] - 1}))
    with pytest.raises(RevPredError, match="training window"):
        load_market_fit(sub, MARKETS[0])
    (sub / "meta.json").write_text(json.dumps({k: v for k, v in meta.items() if k != "config"}))
    with pytest.raises(RevPredError, match="lacks the field 'config'"):
        load_market_fit(sub, MARKETS[0])
    (sub / "meta.json").write_text(json.dumps(meta))
    (sub / "revpred.pt").write_bytes(b"not a torch file")
    with pytest.raises(RevPredError, match="unreadable"):
        load_market_fit(sub, MARKETS[0])
    shutil.rmtree(root)
    with pytest.raises(RevPredError, match="does not exist"):
        load_model_set(root, history)


def test_offline_features_match_online_queries(history, model_set):
    # the training path (one batch over a grid of times) and single online queries build the same inputs
    mm = model_set.fits[MARKETS[1]].models["revpred"]
    s = history[MARKETS[1]]
    t = END + 60.0 * np.arange(0, 120, 5)
    b = np.asarray(s.price_at(t)) + 0.02
    X_batch = mm.scaler.transform(make_inputs(record_features(s, t), b))
    X_one = np.vstack([mm.inputs(history, np.array([ti]), np.array([bi])) for ti, bi in zip(t, b)])
    np.testing.assert_array_equal(X_batch, X_one)


def test_metrics_on_known_values():
    y = np.array([0, 0, 1, 1])
    p = np.array([0.1, 0.6, 0.4, 0.9])
    m = binary_metrics(y, p)
    assert m["accuracy"] == 0.5 and m["f1"] == pytest.approx(0.5) and m["roc_auc"] == pytest.approx(0.75)
    assert m["brier"] == pytest.approx((0.01 + 0.36 + 0.36 + 0.01) / 4)
    assert np.isnan(binary_metrics(np.zeros(3), np.array([0.1, 0.2, 0.3]))["roc_auc"])


def test_training_is_fast_enough(history):
    t0 = time.perf_counter()
    train_markets(history, MARKETS[:1], START, END, CONFIG, kinds=["revpred"])
    assert time.perf_counter() - t0 < 30.0
