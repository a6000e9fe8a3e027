"""The online gamma-Poisson interruption model: exact posterior updates, combination with a price p, the replay hook."""

from __future__ import annotations

import math

import numpy as np
import pytest

from revpred.errors import RevPredError
from revpred.online_hazard import OnlineHazard
from revpred.protocol import ConstantRevocation
from spotmarket import Billing, Cause, Revocation
from spotmarket.prices import Market
from spottune.backends import SimBackend, SimSettings, TrainableCurves
from spottune.orchestrator import Orchestrator, OrchestratorConfig
from tests.test_sim_backend import FACTS, T0, A, Quadratic, history

M = Market("us-east-1a", "r3.large")


def test_posterior_counts_first_hour_exposure_and_first_hour_interruptions_only():
    model = OnlineHazard(1.0, prior_hours=3.0)  # alpha0 = 1/h x 3 h = 3, beta0 = 10800 s
    assert model.posterior(M) == (3.0, 10800.0)
    assert model.capacity_proba(M) == pytest.approx(1 - (10800 / 14400) ** 3)
    model.observe(M, 0.0, 1800.0, True)  # interrupted after 30 min: one event, 1800 s
    model.observe(M, 0.0, 7200.0, False)  # survived its first hour: 3600 s
    model.observe(M, 0.0, 9000.0, True)  # interrupted after its first hour: 3600 s, no first-hour event
    assert model.posterior(M) == (4.0, 10800.0 + 1800 + 3600 + 3600)
    assert model.capacity_proba(M) == pytest.approx(1 - (19800 / 23400) ** 4)
    assert model.fresh().posterior(M) == (3.0, 10800.0)


def test_price_and_capacity_combine_as_independent_causes():
    model = OnlineHazard({M: 0.5}, ConstantRevocation(0.2), prior_hours=1.0)
    pc = 1 - (3600 / 7200) ** 0.5
    assert model.predict_proba([M, M], 0.0, [0.1, 0.2]) == pytest.approx([1 - 0.8 * (1 - pc)] * 2)


def test_prior_from_the_interruption_traces():
    model = OnlineHazard.from_calibration(None)
    # (*, *) lifetime of the SkyPilot traces: P(lifetime <= 1 h) = 0.661215, the prior predictive exactly
    assert model.capacity_proba(M) == pytest.approx(0.661215, abs=1e-12)
    assert OnlineHazard.from_calibration(None, prior_hours=10.0).capacity_proba(M) == pytest.approx(0.661215, abs=1e-12)


def test_prior_for_a_fulfilled_launch_is_the_models_conditional_share():
    from spotmarket import HazardCalibration, fulfilled_p_le_1h

    cal = HazardCalibration.default()
    q_f = fulfilled_p_le_1h(cal, M)
    assert 0.55 < q_f < 0.661215 - 0.03  # a fulfilled launch is safer than one at a random time
    model = OnlineHazard.from_calibration(None, given_capacity=True)
    assert model.capacity_proba(M) == pytest.approx(q_f, abs=1e-12)  # the prior predictive, exactly
    assert fulfilled_p_le_1h(cal, M) == q_f and fulfilled_p_le_1h(cal, M, seed=1) == pytest.approx(q_f, abs=0.02)


def test_bad_observation_and_prior_are_refused():
    with pytest.raises(RevPredError, match="finite interval"):
        OnlineHazard(1.0).observe(M, 10.0, 5.0, False)
    with pytest.raises(RevPredError, match="no prior"):
        OnlineHazard({}).capacity_proba(M)
    with pytest.raises(RevPredError, match="prior_hours"):
        OnlineHazard(1.0, prior_hours=0.0)


class FirstLaunchInterrupted:
    """Capacity interruption 1800 s after the first launch; later launches live for ever."""

    def __init__(self):
        self.n = 0

    def revocation(self, market, launch_s, *, instance_id, max_price_usd_per_hour=None):
        self.n += 1
        if self.n == 1:
            return Revocation(market=market, instance_id=instance_id, launch_s=launch_s, cause=Cause.CAPACITY,
                              notice_s=launch_s + 1680.0, termination_s=launch_s + 1800.0)
        return Revocation(market=market, instance_id=instance_id, launch_s=launch_s, cause=Cause.NONE,
                          notice_s=math.inf, termination_s=math.inf)


class Recorder:
    """An online revocation predictor (p = 0) that records every ended run it is told of."""

    def __init__(self):
        self.calls = []

    def predict_proba(self, markets, times_s, max_prices_usd_per_hour):
        return np.zeros(len(markets))

    def observe(self, market, launch_s, end_s, revoked):
        self.calls.append((market, launch_s - T0, end_s - T0, revoked))


def test_replay_driver_tells_the_predictor_each_ended_run_when_it_ends():
    """Through the orchestrator: the driver delivers an InstanceEnded, the chooser hands it to its predictor."""
    from provisioner import CheapestMarketChooser, InstanceCatalog, Pool

    hist = history()
    chooser = CheapestMarketChooser(hist, InstanceCatalog.load(), Pool(), np.random.default_rng(0),
                                    predictor=Recorder())
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=60), chooser)
    curves = TrainableCurves({"t0": lambda: Quadratic({"lr": 0.05}, seed=0)})
    SimBackend(orch, hist, FirstLaunchInterrupted(), Billing(), curves, FACTS.__getitem__, T0, SimSettings()).run()
    calls = chooser.predictor.calls
    assert calls[0][:3] == (A, 0.0, 1800.0) and calls[0][3] is True
    assert len(calls) >= 2 and all(c[3] is False for c in calls[1:])  # user-ended runs are not interruptions


def test_composition_root_builds_both_kinds_trained_before_the_start():
    from spottune.compose import build_market, make_predictor
    from spottune.compose import get_policy
    from spotmarket.prices import to_seconds

    market = build_market(None, market_mode="modern", seed=0, instance_types=["r3.large"])
    start = to_seconds("2015-05-05")
    cal, note = make_predictor("calibrated", market, start - 4 * 86400, start, 0)
    assert "calibrated" in note and cal.periods_["calibration"][1] == start
    online, _ = make_predictor("online-hazard", market, start - 4 * 86400, start, 0)
    m = market.markets[0]
    price = float(market.history[m].price_at(start))
    p_cal, p_on = cal.predict_proba([m], start, price + 0.001)[0], online.predict_proba([m], start, price + 0.001)[0]
    assert p_on == pytest.approx(1 - (1 - p_cal) * (1 - online.capacity_proba(m)))
    # the composition root's prior is for a fulfilled launch
    from spotmarket import fulfilled_p_le_1h

    assert online.capacity_proba(m) == pytest.approx(fulfilled_p_le_1h(market.revocation_model.calibration, m), abs=1e-12)
    assert get_policy("spottune-0.7-online-hazard").predictor == "online-hazard"
