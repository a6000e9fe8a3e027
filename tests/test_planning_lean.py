"""The cost-lean plan (decision DB15): the cheapest candidate that meets the deadline with the noise
reserve within the budget, by hand and as a property over random deadlines, budgets and study sizes."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spottune.errors import ConfigError
from spottune.planning import (Bracket, ElasticSchedule, InstanceClass, lean_plan, reserve_steps, schedule_cost_usd,
                               seer_plan, seer_schedule)

#: 1 vCPU, 10 s/step, 0.36 USD/h (0.0001 USD/s); 2 vCPUs, 5 s/step, 1.08 USD/h (0.0003 USD/s); no high price
#: given, so the commitment counts the expected one.
A = InstanceClass("a.small", 1, 10.0, 0.36)
B2 = InstanceClass("b.large", 2, 5.0, 1.08)
HAND = dict(n_trials=4, max_steps=10, top_k=1, theta=0.5, classes=[A, B2], overhead_s=0.0, step_time_cov=0.0,
            delta_usd_per_hour=0.0)


def test_the_cheapest_theta_top_k_by_hand():
    # theta-top-k: 4 trials x 5 steps, then 1 x 5 more. A round of d steps needs (d + 1) x s/step (the floor's
    # step), so on a.small twice 60 s = 120 s; it costs 4 x 50 s x 0.0001 + 50 s x 0.0001 = 0.025 USD; its peak
    # commitment is 4 instance-hours at 0.36 = 1.44 USD. one-round (4 x 10 steps) costs 0.04 on a.small.
    plan = lean_plan(deadline_s=120.0, budget_usd=2.0, **HAND)
    assert plan.name == "theta-top-k" and plan.target_steps == 10
    assert plan.cost_usd == pytest.approx(0.025)
    assert plan.finish_s == pytest.approx(120.0) and plan.commitment_usd == pytest.approx(1.44)
    (b,) = plan.schedule.brackets
    assert b.live == (4, 1) and b.rungs == (5, 10) and b.resources == (1.0, 1.0)
    assert b.durations == pytest.approx((60.0, 60.0)) and plan.type_map == {1.0: "a.small"}
    assert plan.schedule.name == "seer-lean" and not plan.schedule.migrate


def test_a_tighter_deadline_moves_the_last_round_to_faster_capacity():
    # 120 s no longer fits: a.small then b.large needs 60 + 30 = 90 s for 0.02 + 5 x 5 s x 0.0003 = 0.0275 USD
    # (b.large first: 0.035; both b.large: 0.0375); the needed 90 s are stretched to the deadline, 100 s.
    plan = lean_plan(deadline_s=100.0, budget_usd=2.0, **HAND)
    (b,) = plan.schedule.brackets
    assert plan.name == "theta-top-k" and plan.cost_usd == pytest.approx(0.0275)
    assert b.resources == (1.0, 2.0) and b.rungs == (5, 10)
    assert plan.finish_s == pytest.approx(90.0) and b.durations == pytest.approx((600.0 / 9, 300.0 / 9))
    assert plan.type_map == {1.0: "a.small", 2.0: "b.large"}


def test_seers_schedule_is_a_candidate_when_it_meets_the_quality_floor():
    # SEER: rounds of 50 s and 50 s on a.small, 4 trials then 1: 5 steps each (= ceil(theta S_max), the floor),
    # then 5 more to S_max: 0.02 + 0.005 = 0.025 USD, theta-top-k's cost, but done in 100 s < 120 s: it wins the tie
    seer = ElasticSchedule("seer", (Bracket((50.0, 50.0), (4, 1), (1.0, 1.0)),), migrate=True)
    assert schedule_cost_usd(seer, {1.0: A}, max_steps=10, overhead_s=0.0, step_time_cov=0.0,
                             delta_usd_per_hour=0.0) == pytest.approx((0.025, 1.44, 10, 5))
    plan = lean_plan(deadline_s=120.0, budget_usd=2.0, seer=(seer, {1.0: A}), **HAND)
    assert plan.name == "seer" and plan.cost_usd == pytest.approx(0.025) and plan.finish_s == 100.0
    assert plan.schedule.brackets == seer.brackets and plan.rungs is None


@pytest.mark.parametrize("durations, live, expected", [
    ((40.0, 70.0), (4, 1), (0.022, 1.44, 10, 4)),  # cheaper, but eliminates at 4 steps < ceil(0.5 x 10)
    ((40.0,), (4,), (0.016, 1.44, 4, 10)),  # cheaper, but no trial reaches S_max = 10
])
def test_a_cheaper_seer_schedule_below_the_quality_floor_is_no_candidate(durations, live, expected):
    seer = ElasticSchedule("seer", (Bracket(durations, live, (1.0,) * len(live)),), migrate=True)
    cost, peak, reached, cut = schedule_cost_usd(seer, {1.0: A}, max_steps=10, overhead_s=0.0, step_time_cov=0.0,
                                                 delta_usd_per_hour=0.0)
    assert (cost, peak, reached, cut) == pytest.approx(expected)
    plan = lean_plan(deadline_s=120.0, budget_usd=2.0, seer=(seer, {1.0: A}), **HAND)
    assert plan.name == "theta-top-k" and plan.cost_usd == pytest.approx(0.025)
    assert ("seer", pytest.approx(cost), sum(durations), False) in plan.considered


def test_the_commitment_counts_every_hour_of_a_long_round():
    # 1 trial x 700 steps at 10 s on 0.36 USD/h: 7000 s billed = 2 instance-hours, the cap sees 0.36 + 0.36 + 0.01
    c = InstanceClass("a.small", 1, 10.0, 0.36)
    kw = dict(n_trials=1, max_steps=700, top_k=1, theta=1.0, deadline_s=1e5, classes=[c], overhead_s=0.0,
              step_time_cov=0.0)
    assert lean_plan(budget_usd=1.0, **kw).commitment_usd == pytest.approx(0.73)
    # 0.72 USD: 700 steps do not fit, nor 630..420 (over 1 h: 2 hours committed); 350 steps do (3500 s, one hour:
    # 0.36 + 0.01 committed)
    short = lean_plan(budget_usd=0.72, **kw)
    assert short.target_steps == 350 and short.commitment_usd == pytest.approx(0.37)


def test_hourly_hops_cost_one_overhead_per_instance_hour():
    # 700 steps at 10 s = 7000 s of training with 200 s of overhead per launch: ceil(7000 / 3400) = 3 launches
    c = InstanceClass("a.small", 1, 10.0, 0.36)
    plan = lean_plan(n_trials=1, max_steps=700, top_k=1, theta=1.0, deadline_s=1e5, budget_usd=10.0, classes=[c],
                     overhead_s=200.0, step_time_cov=0.0, hourly_hop=True)
    assert plan.name == "one-round"
    assert plan.finish_s == pytest.approx(3 * 200.0 + 701 * 10.0)
    assert plan.cost_usd == pytest.approx((3 * 200.0 + 7000.0) * 0.0001)


def test_when_s_max_does_not_fit_the_largest_tenth_that_fits():
    # 50 s: to 10 steps the fastest fitting plan needs 60 s, and b.large for all 4 trials commits 4 x 1.08 > 2 USD;
    # the tenths 9..5 do not fit either (by hand: 55, 50 with b.large first, ...); to 4 steps, theta-top-k with
    # rungs (2, 4) on a.small then b.large needs 30 + 15 = 45 s for 4 x 20 s x 0.0001 + 10 s x 0.0003 = 0.011 USD
    plan = lean_plan(deadline_s=50.0, budget_usd=2.0, **HAND)
    (b,) = plan.schedule.brackets
    assert plan.name == "theta-top-k" and plan.target_steps == 4 and b.rungs == (2, 4) and b.resources == (1.0, 2.0)
    assert plan.cost_usd == pytest.approx(0.011) and plan.finish_s == pytest.approx(45.0)
    assert b.durations == pytest.approx((100.0 / 3, 50.0 / 3))


@pytest.mark.parametrize("deadline_s, budget_usd", [(15.0, 2.0), (120.0, 1.2)])
def test_nothing_fits_is_one_line(deadline_s, budget_usd):
    # 15 s: not one step on a.small (20 s) and b.large for 4 trials commits 4.32 USD; 1.2 USD: every plan commits
    # 4 x 0.36 = 1.44 USD or more
    with pytest.raises(ConfigError, match="no plan of 4 trials") as exc:
        lean_plan(deadline_s=deadline_s, budget_usd=budget_usd, **HAND)
    assert "\n" not in str(exc.value)


def test_bad_parameters():
    with pytest.raises(ConfigError):
        lean_plan(**{**HAND, "theta": 0.0}, deadline_s=100.0, budget_usd=1.0)


# -- property ---------------------------------------------------------------------------------------------
def _brute_force(n, S, k, theta, T, B, classes, overhead, cov, delta):
    """Every candidate of DB15 by its own formulas: (cost, finish) of each feasible one."""
    r1 = math.ceil(theta * S - 1e-9)
    shapes = [((S,), (n,))] + ([((r1, S), (n, k))] if 1 <= r1 < S and k < n else [])
    out = []
    for rungs, live in shapes:
        deltas = [rungs[0]] + [b - a for a, b in zip(rungs, rungs[1:])]
        for combo in itertools.product(classes, repeat=len(rungs)):
            need = sum(overhead + (d + reserve_steps(d, cov) + 1) * c.seconds_per_step for d, c in zip(deltas, combo))
            costs = [m * (overhead + d * c.seconds_per_step) * c.usd_per_hour / 3600 for m, d, c in
                     zip(live, deltas, combo)]
            hours = [max(1, math.ceil((overhead + d * c.seconds_per_step) / 3600 - 1e-9)) for d, c in zip(deltas, combo)]
            peak = max(sum(costs[:j]) + live[j] * (hours[j] * combo[j].usd_per_hour + delta) for j in range(len(live)))
            if need <= T and sum(costs) <= B and peak <= B:
                out.append((sum(costs), need))
    return out


@settings(max_examples=120, deadline=None)
@given(T=st.floats(600.0, 2e5), B=st.floats(0.05, 50.0), n=st.integers(1, 40), S=st.integers(5, 400),
       k=st.integers(1, 4), theta=st.sampled_from([0.5, 0.7, 1.0]), p1=st.floats(0.005, 0.2),
       p2=st.floats(0.01, 1.0), s1=st.floats(5.0, 120.0), speedup=st.floats(1.1, 3.0))
def test_lean_meets_the_deadline_and_the_budget_and_costs_no_more_than_seer(T, B, n, S, k, theta, p1, p2, s1,
                                                                             speedup):
    """Finish (with the reserve) <= T, spend and commitment <= B, the cheapest of its candidates, and no dearer than
    SEER's plan for the same T and B whenever SEER's plan fits the same model and meets the same quality floor
    (no elimination before ceil(theta S_max) steps, a trial trained to S_max)."""
    classes = [InstanceClass("one", 1, s1, p1), InstanceClass("two", 2, s1 / speedup, p2)]
    overhead, cov = 180.0, 0.05
    t_min = overhead + s1
    B_vcpu_s = B / (min(p1, p2 / 2) / 3600)  # the budget at the cheapest price per vCPU (DB2)
    try:
        sp = seer_plan(T, B_vcpu_s, eta=4.0, nu=2.0, p_min=1, p_max=2, t_min=t_min)
        seer = (seer_schedule(sp), {1.0: classes[0], 2.0: classes[1]})
    except ConfigError:
        seer = None
    try:
        plan = lean_plan(n_trials=n, max_steps=S, top_k=k, theta=theta, deadline_s=T, budget_usd=B, classes=classes,
                         overhead_s=overhead, step_time_cov=cov, seer=seer)
    except ConfigError:
        assert not _brute_force(n, S, k, theta, T, B, classes, overhead, cov, 0.01)
        assert not _brute_force(n, math.ceil(S / 10 - 1e-9), k, theta, T, B, classes, overhead, cov, 0.01)
        return
    assert plan.finish_s <= T * (1 + 1e-9)
    assert plan.cost_usd <= B * (1 + 1e-9) and plan.commitment_usd <= B * (1 + 1e-9)
    assert plan.schedule.finish <= T * (1 + 1e-9)
    others = _brute_force(n, S, k, theta, T, B, classes, overhead, cov, 0.01)
    assert all(plan.cost_usd <= c * (1 + 1e-9) for c, _ in others)
    if seer is not None:
        cost, peak, reached, cut = schedule_cost_usd(seer[0], seer[1], max_steps=S, overhead_s=overhead,
                                                     step_time_cov=cov)
        if (seer[0].finish <= T * (1 + 1e-9) and cost <= B and peak <= B and reached >= S
                and cut >= math.ceil(theta * S - 1e-9)):
            assert plan.cost_usd <= cost * (1 + 1e-9)
    if plan.name != "seer":
        (b,) = plan.schedule.brackets
        assert b.live[0] == n and b.rungs[-1] == plan.target_steps
        assert plan.target_steps == S or not others  # S_max is given up only when nothing to S_max fits


def test_the_commitment_counts_the_high_price():
    # the same 2-hour round with a 90th percentile of 0.5 USD/h: 0.5 + 0.5 + 0.01 = 1.01 USD committed
    c = InstanceClass("a.small", 1, 10.0, 0.36, usd_per_hour_high=0.5)
    plan = lean_plan(n_trials=1, max_steps=700, top_k=1, theta=1.0, deadline_s=1e5, budget_usd=1.1, classes=[c],
                     overhead_s=0.0, step_time_cov=0.0)
    assert plan.commitment_usd == pytest.approx(1.01) and plan.cost_usd == pytest.approx(0.7)
