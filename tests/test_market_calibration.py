"""Calibration of the modern hazard model from the real interruption traces (data/interruption_traces)."""

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import special

from spotmarket.prices import Market
from spotmarket.errors import MarketError
from spotmarket import (
    HazardCalibration,
    WeibullLifetime,
    calibrate_from_traces,
    fit_weibull,
    kaplan_meier_cdf,
    split_hazard,
)

TRACES = Path(__file__).resolve().parents[1] / "data" / "interruption_traces"


@pytest.fixture(scope="module")
def fitted():
    return calibrate_from_traces(TRACES)


def test_frozen_default_equals_a_fresh_fit(fitted):
    default = HazardCalibration.default()
    assert set(default.lifetimes) == set(fitted.lifetimes)
    for key, w in fitted.lifetimes.items():
        d = default.lifetimes[key]
        assert (d.shape, d.scale_s, d.p_le_1h_observed) == pytest.approx((w.shape, w.scale_s, w.p_le_1h_observed),
                                                                         rel=1e-5)
        assert (d.n_events, d.n_censored) == (w.n_events, w.n_censored)
    assert default.correlated_share == pytest.approx(fitted.correlated_share, rel=1e-5)
    assert (default.outage_log_mean, default.outage_log_sd) == pytest.approx(
        (fitted.outage_log_mean, fitted.outage_log_sd), rel=1e-5)
    assert default.type_outages.keys() == fitted.type_outages.keys() == {"p3.2xlarge", "r5.16xlarge"}
    for it, v in fitted.type_outages.items():
        assert default.type_outages[it] == pytest.approx(v, rel=1e-5)


def test_numbers_agree_with_the_traces_readme(fitted):
    p3 = fitted.lifetimes[("p3.2xlarge", "*")]
    r5 = fitted.lifetimes[("r5.16xlarge", "*")]
    # README §1.8: events 202 / 221; KM P(<= 1 h) 0.623 / 0.696; rough uncensored Weibull 0.63/1.35 h, 0.59/0.96 h
    assert (p3.n_events, r5.n_events) == (202, 221)
    assert p3.p_le_1h_observed == pytest.approx(0.623, abs=0.001)
    assert r5.p_le_1h_observed == pytest.approx(0.696, abs=0.001)
    assert 0.55 <= p3.shape <= 0.70 and 0.55 <= r5.shape <= 0.70  # decreasing hazard, k ~ 0.6-0.7
    assert p3.scale_s / 3600 == pytest.approx(1.35, abs=0.15) and r5.scale_s / 3600 == pytest.approx(0.96, abs=0.15)
    assert 0.5 <= p3.p_le_1h <= 0.8 and 0.5 <= r5.p_le_1h <= 0.8
    # README §1.7 per zone (KM P(<= 1 h)): zone matters more than type
    assert fitted.lifetimes[("p3.2xlarge", "us-east-1c")].p_le_1h_observed == pytest.approx(0.707, abs=0.001)
    assert fitted.lifetimes[("r5.16xlarge", "us-east-1d")].p_le_1h_observed == pytest.approx(0.250, abs=0.001)
    # correlation: 4-node traces, most losses come in bursts (README §1.5: all-or-none 0.92-0.96 of ticks)
    assert 0.7 <= fitted.correlated_share <= 0.95
    # outages: README down medians 0.12-0.48 h per zone; 0.396 h (p3.2xlarge) and 0.151 h (r5.16xlarge) pooled
    assert 0.1 * 3600 <= fitted.outage_median_s <= 0.5 * 3600
    p3_out = math.exp(fitted.outage(Market("us-east-1c", "p3.2xlarge"))[0])
    r5_out = math.exp(fitted.outage(Market("us-east-1c", "r5.16xlarge"))[0])
    assert r5_out < fitted.outage_median_s < p3_out


def test_lookup_falls_back_from_type_and_zone_to_pooled():
    cal = HazardCalibration.default()
    assert cal.lifetime(Market("us-east-1c", "p3.2xlarge")) is cal.lifetimes[("p3.2xlarge", "us-east-1c")]
    assert cal.lifetime(Market("us-east-1a", "p3.2xlarge")) is cal.lifetimes[("p3.2xlarge", "*")]
    assert cal.lifetime(Market("us-east-1c", "r3.large")) is cal.lifetimes[("*", "us-east-1c")]
    assert cal.lifetime(Market("eu-west-1a", "m4.large")) is cal.lifetimes[("*", "*")]


@pytest.mark.parametrize("rho", [0.0, 0.3, 0.8333, 1.0])
def test_split_keeps_the_first_hour_revocation_probability(rho):
    life = HazardCalibration.default().lifetimes[("p3.2xlarge", "*")]
    s = split_hazard(life, rho)
    own = math.exp(-((3600 / s.instance_scale_s) ** s.shape)) if math.isfinite(s.instance_scale_s) else 1.0
    event = float(special.gammaincc(1 / s.shape, (3600 / s.event_scale_s) ** s.shape)) \
        if math.isfinite(s.event_scale_s) else 1.0
    assert 1 - own * event == pytest.approx(life.p_le_1h_target, abs=1e-12)
    assert math.isinf(s.event_scale_s) == (rho == 0.0) and math.isinf(s.instance_scale_s) == (rho == 1.0)


def test_fit_weibull_recovers_parameters_with_censoring():
    rng = np.random.default_rng(0)
    life = 5000.0 * rng.weibull(0.6, 4000)
    cut = rng.uniform(0, 40_000, 4000)  # independent censoring
    w = fit_weibull(np.minimum(life, cut), life > cut)
    assert w.shape == pytest.approx(0.6, rel=0.05) and w.scale_s == pytest.approx(5000, rel=0.08)
    assert w.p_le_1h_observed == pytest.approx(1 - math.exp(-(3600 / 5000) ** 0.6), abs=0.02)


def test_kaplan_meier_by_hand():
    # times 1, 2(censored), 3, 4: S(1) = 3/4, S(3) = 3/4 * (1 - 1/2) = 3/8
    t, c = np.array([1.0, 2.0, 3.0, 4.0]), np.array([False, True, False, False])
    assert kaplan_meier_cdf(t, c, 2.5) == pytest.approx(0.25)
    assert kaplan_meier_cdf(t, c, 3.0) == pytest.approx(1 - 3 / 8)


def test_bad_inputs():
    with pytest.raises(MarketError):
        WeibullLifetime(shape=0.0, scale_s=1.0)
    with pytest.raises(MarketError, match="pooled"):
        HazardCalibration(lifetimes={}, correlated_share=0.5, outage_log_mean=0.0, outage_log_sd=0.0)
    with pytest.raises(MarketError, match="correlated_share"):
        split_hazard(WeibullLifetime(shape=0.6, scale_s=1.0), 1.5)
    with pytest.raises(MarketError, match="not found"):
        calibrate_from_traces("/nonexistent")
    with pytest.raises(MarketError, match="events"):
        fit_weibull(np.array([1.0, 2.0]), np.array([True, True]))


def test_fulfilled_first_hour_share_matches_the_modern_models_launches():
    # Launch 6,000 instances at random times of one market under the modern model: the share of the fulfilled
    # ones that end within their first hour is what fulfilled_p_le_1h computes from the calibration alone,
    # and below the share for a launch at a random time (the traces' q), since launches are refused in outages
    import numpy as np

    from spotmarket import HazardCalibration, ModernHazardRevocation, fulfilled_p_le_1h
    from spotmarket.prices import Market

    cal, m = HazardCalibration.default(), Market("us-east-1a", "r3.large")
    model = ModernHazardRevocation(cal, seed=7)
    times = np.random.default_rng(0).uniform(1.4e9, 1.4e9 + 2 * 365 * 86400, size=6000)
    runs = [model.revocation(m, float(t), instance_id=f"i{i}") for i, t in enumerate(times)]
    ended = np.array([r.termination_s - t <= 3600 for r, t in zip(runs, times) if r.fulfilled])
    assert 0.45 < ended.size / times.size < 0.7  # outages refuse a large share
    share, q = float(ended.mean()), cal.lifetime(m).p_le_1h_target
    assert abs(share - fulfilled_p_le_1h(cal, m)) < 0.03  # 3.5 standard errors of the share
    assert share < q - 0.025
    # with no correlated events there is nothing to condition on
    solo = HazardCalibration(lifetimes=cal.lifetimes, correlated_share=0.0, outage_log_mean=cal.outage_log_mean,
                             outage_log_sd=cal.outage_log_sd)
    assert fulfilled_p_le_1h(solo, m) == solo.lifetime(m).p_le_1h_target
