"""Deadline-aware provisioning (spottune.planning._deadline, decision DB6): the slack rule switches as late as
possible, the uniform-progress rule (Can't Be Late) earlier; the switch is the fastest type at on-demand."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from spotmarket.prices import Market
from spottune.errors import ConfigError
from spottune.planning import DeadlineGuard

SLOW, FAST = Market("us-east-1a", "m3.medium"), Market("us-east-1a", "c3.xlarge")
SPS = {"m3.medium": 100.0, "c3.xlarge": 25.0}
OD = {SLOW: 0.067, FAST: 0.21}


@dataclass(frozen=True)
class _Choice:
    market: Market
    max_price_usd_per_hour: float
    seconds_per_step: float = 100.0
    explanation: object = None
    expected_step_cost_usd: float | None = 0.001
    p_revocation: float | None = 0.1


class _Inner:
    plans_horizon = True

    def choose(self, trial_id, now_s, **kw):
        return _Choice(SLOW, 0.01)


def _guard(rule="slack", deadline_s=36_000.0):
    return DeadlineGuard(_Inner(), start_s=0.0, deadline_s=deadline_s, max_steps=400, markets=[SLOW, FAST],
                         on_demand_usd_per_hour=OD.__getitem__, seconds_per_step=lambda t: SPS[t], overhead_s=200.0,
                         rule=rule)


def test_slack_keeps_spot_until_the_last_safe_moment():
    """400 steps x 25 s + 200 s overhead = 10,200 s on the stable option; margin min(3,800, 10 % of 36,000) =
    3,600 s: at risk from t = 36,000 - 10,200 - 3,600 = 22,200 s for a fresh trial."""
    g = _guard()
    assert g.stable_market == FAST and g.stable_price == 0.21
    assert g.choose("t0", 22_199.0, resume_step=0).market == SLOW
    c = g.choose("t0", 22_201.0, resume_step=0)
    assert (c.market, c.max_price_usd_per_hour, c.seconds_per_step) == (FAST, 0.21, 25.0)
    assert g.choose("t0", 22_201.0, resume_step=200).market == SLOW  # half done: 5,200 s needed
    assert g.switches == [("t0", 22_201.0)]
    assert g.choose("t0", 30_000.0, resume_step=0).market == SLOW  # 10,200 s needed, 6,000 left: lost anyway
    assert g.plans_horizon is True  # passed on


def test_uniform_progress_switches_when_behind_the_line():
    g = _guard("uniform")
    assert g.choose("t0", 9_000.0, resume_step=100).market == SLOW  # 25 % of the time, 25 % of the work
    assert g.choose("t0", 9_000.0, resume_step=99).market == FAST
    # uniform switches earlier than slack for the same state
    assert _guard("slack").choose("t0", 9_000.0, resume_step=99).market == SLOW


@pytest.mark.parametrize("kw", [dict(rule="never"), dict(deadline_s=0.0)])
def test_bad_settings(kw):
    with pytest.raises(ConfigError):
        _guard(**kw)


def test_the_stable_option_must_be_affordable():
    """With a cap of 0.1 USD/h on demand only m3.medium (0.067) is stable: 400 x 100 s + 200 s = 40,200 s
    needed, more than the 36,000 s deadline, so a fresh trial is lost anyway and keeps the inner choice."""
    g = DeadlineGuard(_Inner(), start_s=0.0, deadline_s=36_000.0, max_steps=400, markets=[SLOW, FAST],
                      on_demand_usd_per_hour=OD.__getitem__, seconds_per_step=lambda t: SPS[t], overhead_s=200.0,
                      max_stable_usd_per_hour=0.1)
    assert (g.stable_market, g.stable_price, g.stable_seconds_per_step) == (SLOW, 0.067, 100.0)
    assert g.at_risk(0.0, 0) is False
    # 300 steps left: 30,200 s needed; at 3,000 s the slack is 2,800 s < the 3,600 s margin
    assert g.at_risk(2_000.0, 100) is False and g.at_risk(3_000.0, 100) is True
    with pytest.raises(ConfigError, match="costs at most"):
        DeadlineGuard(_Inner(), start_s=0.0, deadline_s=36_000.0, max_steps=400, markets=[SLOW, FAST],
                      on_demand_usd_per_hour=OD.__getitem__, seconds_per_step=lambda t: SPS[t], overhead_s=200.0,
                      max_stable_usd_per_hour=0.05)
