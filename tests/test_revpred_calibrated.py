"""The calibrated predictor: p never increases with the max price, is 0 past the highest price, 1 below the price."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from revpred.calibrated import CalibratedRevocation
from revpred.calibration_report import constant_baseline, ece, empirical_baseline, score
from revpred.errors import RevPredError
from revpred.ladder import ladder_queries
from spotmarket.prices import Market, load_history, to_seconds

LO, HI = to_seconds("2015-05-01"), to_seconds("2015-05-05")
TEST_LO, TEST_HI = to_seconds("2015-05-05"), to_seconds("2015-05-07")
MARKETS = [Market("us-east-1a", "r3.large"), Market("us-east-1b", "c3.xlarge")]


@pytest.fixture(scope="module", params=["base", "short+calendar"])
def fitted(request):
    history = load_history(None)
    model = CalibratedRevocation.train(history, MARKETS, LO, HI, on_demand={MARKETS[0]: 0.175, MARKETS[1]: 0.21},
                                       stride_min=30, max_iter=30, feature_set=request.param)
    return history, model


@given(which=st.integers(0, 1), frac=st.floats(0.0, 1.0), d1=st.floats(-0.01, 3.0), d2=st.floats(0.0, 3.0))
def test_p_never_increases_when_only_the_max_price_increases(fitted, which, frac, d1, d2):
    history, model = fitted
    m = MARKETS[which]
    t = TEST_LO + frac * (TEST_HI - TEST_LO)
    price = float(history[m].price_at(t))
    b = np.array([price + d1, price + d1 + d2])
    p = model.predict_proba([m, m], t, b)
    assert 0.0 <= p[1] <= p[0] <= 1.0


@given(which=st.integers(0, 1), frac=st.floats(0.0, 1.0), over=st.floats(1e-9, 100.0))
def test_p_is_zero_past_the_highest_price_of_the_trace(fitted, which, frac, over):
    history, model = fitted
    m = MARKETS[which]
    t = TEST_LO + frac * (TEST_HI - TEST_LO)
    assert model.predict_proba([m], t, float(history[m].prices.max()) + over)[0] == 0.0


def test_below_the_current_price_the_launch_is_refused_so_p_is_one(fitted):
    history, model = fitted
    m = MARKETS[0]
    assert model.predict_proba([m], TEST_LO, float(history[m].price_at(TEST_LO)) - 1e-4)[0] == 1.0


def test_unknown_market_and_unfitted_model_are_clear_errors(fitted):
    history, model = fitted
    with pytest.raises(RevPredError, match="not trained on market"):
        model.predict_proba([Market("us-east-1e", "m3.medium")], TEST_LO, 1.0)
    with pytest.raises(RevPredError, match="not fitted"):
        CalibratedRevocation(history, MARKETS).predict_proba(MARKETS, TEST_LO, 1.0)
    with pytest.raises(RevPredError, match="feature set is 'sharp'"):
        CalibratedRevocation(history, MARKETS, feature_set="sharp")
    with pytest.raises(RevPredError, match="calibration period must start after"):
        CalibratedRevocation(history, MARKETS).fit(LO, HI, HI - 3600, HI + 86400)


def test_held_out_scores_beat_the_constant_baseline(fitted):
    history, model = fitted
    train = ladder_queries(history, MARKETS, LO, HI, stride_min=30)
    test = ladder_queries(history, MARKETS, TEST_LO, TEST_HI, stride_min=30)
    y = test["y"].to_numpy()
    p = model.predict_proba(list(test["market"]), test["t"].to_numpy(), test["b"].to_numpy())
    assert score(y, p)["brier"] < score(y, constant_baseline(train, test))["brier"]
    assert empirical_baseline(train, test).shape == y.shape


def test_ece_by_hand():
    # bins [0, 0.1), ..., [0.9, 1]: p 0.05 x2 (labels 0, 1) -> |0.1 - 1| / 4; p 0.95 x2 (1, 1) -> |1.9 - 2| / 4
    assert ece([0, 1, 1, 1], [0.05, 0.05, 0.95, 0.95]) == pytest.approx((0.9 + 0.1) / 4)
    with pytest.warns(RuntimeWarning, match="undefined"):
        assert np.isnan(ece([], []))
    s = score(np.zeros(3), np.array([0.1, 0.2, 0.3]))
    assert np.isnan(s["roc_auc"]) and s["brier"] == pytest.approx((0.01 + 0.04 + 0.09) / 3)


def test_on_the_query_grid_the_model_answers_the_same_offset_above_the_price_at_the_grid_time(fitted):
    history, model = fitted
    gridded = CalibratedRevocation(history, MARKETS, on_demand=model.on_demand, stride_min=30, max_iter=30,
                                   query_grid_s=600.0, feature_set=model.features.feature_set)
    gridded.model_, gridded.calibrator_ = model.model_, model.calibrator_
    m = MARKETS[0]
    times = history[m].times_s
    # a grid time whose 10 minutes hold a price change
    change = next(float(c) for c in times[times > TEST_LO] if c % 600.0 > 0)
    grid = float(np.floor(change / 600.0) * 600.0)
    ts = np.array([grid, change - 1.0, change, grid + 599.0])
    delta = 0.003
    b = np.array([float(history[m].price_at(t)) for t in ts]) + delta  # as the provisioner asks: current + delta
    p = gridded.predict_proba([m] * 4, ts, b)
    at_grid = float(history[m].price_at(grid)) + delta  # the same question at the grid time
    expected = model.predict_proba([m], grid, at_grid)[0]
    for pi, t, bi in zip(p, ts, b):
        price, ceiling = float(history[m].price_at(t)), float(model.features.ceiling(m, np.array([t]))[0])
        assert pi == (1.0 if bi < price else 0.0 if bi > ceiling else expected)
    # the test tells the questions apart: the absolute max price at the grid time gives another p
    assert 0.0 < p[2] < 1.0 and p[2] != model.predict_proba([m], grid, b[2])[0]
    # a second query in the same grid period is answered from memory, identically
    assert gridded.predict_proba([m], grid + 300.0, float(history[m].price_at(grid + 300.0)) + delta)[0] == expected
    with pytest.raises(RevPredError, match="query_grid_s"):
        CalibratedRevocation(history, MARKETS, query_grid_s=0.0)


# -- the on-disk cache of spottune's calibrated predictor -------------------------------------------------


def test_a_saved_state_answers_exactly_as_the_trained_model(fitted, tmp_path):
    history, model = fitted
    model.save(tmp_path / "m.skops")
    again = CalibratedRevocation(history, MARKETS, on_demand={MARKETS[0]: 0.175, MARKETS[1]: 0.21}, stride_min=30,
                                 max_iter=30, feature_set=model.features.feature_set).load(tmp_path / "m.skops")
    q = ladder_queries(history, MARKETS, TEST_LO, TEST_HI, stride_min=60, ladder=model.ladder, on_demand=model.on_demand)
    args = (list(q["market"]), q["t"].to_numpy(), q["b"].to_numpy())
    assert np.array_equal(again.predict_proba(*args), model.predict_proba(*args))
    assert again.describe() == model.describe()


def test_a_state_holding_a_foreign_type_is_refused_not_loaded(tmp_path):
    import skops.io as sio

    # a class of ours: skops trusts no such type, so it is refused before anything of it is built
    sio.dump({"model": Market("us-east-1a", "r3.large"), "calibrator": None, "base_rate": 0.1, "periods": {}}, tmp_path / "m.skops")
    with pytest.raises(RevPredError, match="cannot load a calibrated predictor .*Untrusted"):
        CalibratedRevocation(load_history(None), MARKETS).load(tmp_path / "m.skops")


def test_spottune_trains_the_calibrated_predictor_once_per_window_and_retrains_a_damaged_entry(monkeypatch, tmp_path,
                                                                                               caplog):
    from spottune.compose import build_market, calibrated_predictor

    monkeypatch.setenv("SPOTTUNE_CACHE", str(tmp_path))
    market = build_market(None, market_mode="legacy", seed=0, instance_types=["r3.large"],
                          availability_zones=["us-east-1a", "us-east-1b"])
    lo, hi = LO, LO + 86400.0
    fits = []
    real_fit = CalibratedRevocation.fit
    monkeypatch.setattr(CalibratedRevocation, "fit", lambda self, *a: (fits.append(a), real_fit(self, *a))[1])
    first = calibrated_predictor(market, lo, hi, 0)
    second = calibrated_predictor(market, lo, hi, 0)
    assert len(fits) == 1  # the second call read the cache
    (entry,) = (tmp_path / "calibrated").rglob("state.skops")
    t, b = np.full(4, hi + 3600.0), np.array([0.0, 0.05, 0.2, 1.0])
    ms = [market.markets[0]] * 4
    b = b + market.history[ms[0]].price_at(t[0])
    assert np.array_equal(second.predict_proba(ms, t, b), first.predict_proba(ms, t, b))
    calibrated_predictor(market, lo, hi, 1)  # another seed is another entry
    assert len(fits) == 2
    entry.write_bytes(b"not a zip file")
    with caplog.at_level("WARNING"):
        third = calibrated_predictor(market, lo, hi, 0)
    assert len(fits) == 3 and "retraining" in caplog.text
    assert np.array_equal(third.predict_proba(ms, t, b), first.predict_proba(ms, t, b))
    assert calibrated_predictor(market, lo, hi, 0) is not None and len(fits) == 3  # the entry was rewritten


def test_the_cache_key_changes_when_any_record_of_a_series_changes(monkeypatch, tmp_path):
    from spotmarket.prices import PriceSeries
    from spottune.cache import model_set_dir

    monkeypatch.setenv("SPOTTUNE_CACHE", str(tmp_path))
    m = MARKETS[0]
    times, prices = np.arange(5) * 600.0, np.array([0.03, 0.031, 0.05, 0.031, 0.03])

    def key(p, t=times, end=3000.0):
        return model_set_dir("calibrated", {m: PriceSeries(m, t, p, end)}, [m], 0.0, 3000.0, {"a": 1})

    base = key(prices)
    assert key(prices.copy()) == base  # the same records: the same entry
    edited = prices.copy()
    edited[2] = 0.04  # a middle record: same first and last record, same count
    assert key(edited) != base
    assert key(prices, times + np.array([0, 0, 60.0, 0, 0])) != base  # a moved record
    assert key(prices, end=3600.0) != base  # a longer recorded history
