"""Elastic schedules (decisions DB7-DB8, F-S5): E-Hyperband and E-Grid hand-computed, SEER's worked example as a
schedule, and Fact 1 (finish <= T, spend <= B) for all three over random deadlines and budgets."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spottune.errors import ConfigError
from spottune.planning import Bracket, ElasticSchedule, grid_schedule, hyperband_schedule, seer_plan, seer_schedule


def test_hyperband_eta2_by_hand():
    # s_max = 3 needs 8 + 6 + 4 + 4 = 22 trials > 10; s_max = 2 (R = 4 units): brackets
    # s=2: n 4, r 1, trained to 1, 2, 4 -> rounds 1, 1, 2, live 4, 2, 1;  s=1: n 3, r 2 -> rounds 2, 2, live 3, 1;
    # s=0: n 3, r 4 -> round 4, live 3. Spend 8 + 8 + 12 = 28 units; unit = min(8 / 4, 112 / 28) = 2.
    s = hyperband_schedule(8.0, 112.0, eta=2.0, p_min=1.0, t_min=1.0, max_trials=10)
    assert [b.durations for b in s.brackets] == [(2.0, 2.0, 4.0), (4.0, 4.0), (8.0,)]
    assert [b.live for b in s.brackets] == [(4, 2, 1), (3, 1), (3,)]
    assert s.n_trials == 10 and s.finish == 8.0 and s.spend == 56.0 and not s.migrate


def test_hyperband_eta2_no_trial_limit():
    # s_max = 3 (R = 8): spend 20 + 22 + 24 + 32 = 98 units, unit = min(8/8, 112/98) = 1; s_max = 4 needs 16 > 8
    s = hyperband_schedule(8.0, 112.0, eta=2.0)
    assert [b.live for b in s.brackets] == [(8, 4, 2, 1), (6, 3, 1), (4, 2), (4,)]
    assert [b.durations for b in s.brackets][0] == (1.0, 1.0, 2.0, 4.0)
    assert s.n_trials == 22 and s.spend == 98.0 and s.finish == 8.0


def test_grid_by_hand():
    s = grid_schedule(10.0, 80.0, p_min=1.0, p_max=4.0)  # n = floor((80 - 4*5) / (1*5)) = 12
    (b,) = s.brackets
    assert b.live == (12, 1) and b.durations == (5.0, 5.0) and b.resources == (1.0, 4.0)
    assert s.spend == 80.0 and s.finish == 10.0
    assert grid_schedule(10.0, 80.0, p_min=1.0, p_max=4.0, max_trials=5).n_trials == 5


def test_seer_worked_example_as_a_schedule():
    plan = seer_plan(10.0, 80.0, eta=2.0, nu=2.0)
    s = seer_schedule(plan)
    assert s.migrate and [b.live for b in s.brackets] == [(8, 4, 2), (4, 2, 1)]  # the P=4 bracket has 0 trials
    assert [b.resources for b in s.brackets] == [(1.0,) * 3, (2.0,) * 3]
    assert [round(d, 4) for d in s.brackets[0].durations] == [1.4286, 2.8571, 5.7143]
    assert s.spend == pytest.approx(plan.spend) == pytest.approx(68.5714, abs=1e-4)
    assert s.finish == pytest.approx(10.0)


@pytest.mark.parametrize("call", [
    lambda: hyperband_schedule(0.5, 100.0, t_min=1.0),  # no round of t_min fits the deadline
    lambda: hyperband_schedule(10.0, 0.5, t_min=1.0),  # nor the budget
    lambda: grid_schedule(10.0, 24.0, p_min=1.0, p_max=4.0),  # exploitation alone costs 20, + one trial 25
    lambda: grid_schedule(1.0, 100.0, t_min=1.0),  # T/2 < t_min
    lambda: ElasticSchedule("seer", (Bracket((1.0,), (1,), (1.0,)), Bracket((2.0,), (1,), (2.0,))), migrate=True),
    lambda: Bracket((1.0, 2.0), (1, 2), (1.0, 1.0)),  # live trials grow
])
def test_bad_input_is_a_config_error(call):
    with pytest.raises(ConfigError):
        call()


@settings(max_examples=150, deadline=None)
@given(T=st.floats(2.0, 1e4), B=st.floats(2.0, 1e6), eta=st.sampled_from([2.0, 3.0, 4.0]),
       p_max=st.sampled_from([1.0, 2.0, 4.0, 8.0]), n=st.one_of(st.none(), st.integers(1, 64)))
def test_fact1_for_every_schedule(T, B, eta, p_max, n):
    """Every schedule finishes by T and spends at most B (SEER's Fact 1, and the baselines' plans, F-S5)."""
    made = []
    for build in (lambda: hyperband_schedule(T, B, eta=eta, max_trials=n),
                  lambda: grid_schedule(T, B, p_max=p_max, max_trials=n),
                  lambda: seer_schedule(seer_plan(T, B, eta=eta, p_max=p_max))):
        try:
            made.append(build())
        except ConfigError:
            continue
    for s in made:
        assert s.finish <= T * (1 + 1e-9)
        assert s.spend <= B * (1 + 1e-9)
        assert n is None or s.name == "seer" or s.n_trials <= n
        assert all(math.isfinite(d) and d > 0 for b in s.brackets for d in b.durations)
