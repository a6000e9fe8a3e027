"""SEER's Algorithms 2-3 (spottune.planning._seer): the paper's worked example and Fact 1 as a property."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spottune.errors import ConfigError
from spottune.planning import bracket_budgets, seer_plan


def test_worked_example_t10_b80_eta2():
    """RELATED_SYSTEMS.md §2.2, recomputed (the paper prints B[1] 17.142 and round ends 1.42 / 4.26 / 9.94)."""
    p = seer_plan(10, 80, eta=2, nu=2)
    assert p.r_star == pytest.approx(40 / 7)  # 5.714: 1.75 R <= 10 on (4, 8]
    assert p.rounds == 3
    assert p.t1 == pytest.approx(10 / 7)
    assert p.b0 == pytest.approx(120 / 7)  # 17.142
    assert p.budgets == pytest.approx((240 / 7, 240 / 7, 80 / 7))  # [34.283, 34.283, 11.432]
    assert p.trials[:2] == (8, 4) and p.trials[2] == 0
    assert p.parallelism[:2] == (1, 2)
    assert [round(e, 2) for e in p.round_ends] == [1.43, 4.29, 10.0]
    assert p.spend == pytest.approx(480 / 7)  # 68.57 <= 80
    assert p.n_trials == 12
    assert [p.live(0, k) for k in (1, 2, 3)] == [8, 4, 2] and [p.live(1, k) for k in (1, 2, 3)] == [4, 2, 1]


def test_budget_binding_is_one_bracket_at_p_min():
    """B tight (Algorithm 2's second constraint binds): one bracket with P = p_min uses the budget."""
    p = seer_plan(1000, 18, eta=2, nu=2)  # K 3, R* 6 (3 R <= 18 on (4, 8])
    assert p.r_star == pytest.approx(6) and p.b0 == pytest.approx(18)
    assert p.trials[0] >= 1 and all(n == 0 for n in p.trials[1:])
    assert p.parallelism[0] == 1
    assert sum(p.round_durations) < 1000


def test_p_max_branch_splits_equally():
    budgets, P = bracket_budgets(1000, 10, 2, p_min=1, p_max=4)
    assert P == (1, 2, 4) and budgets == pytest.approx((1000 / 3,) * 3)


@pytest.mark.parametrize("kw", [dict(T=0, B=10), dict(T=-1, B=10), dict(T=10, B=0), dict(T=10, B=10, eta=1),
                                dict(T=0.5, B=10), dict(T=10, B=0.5)])
def test_bad_input_raises(kw):
    T, B = kw.pop("T"), kw.pop("B")
    with pytest.raises(ConfigError):
        seer_plan(T, B, **kw)


@settings(max_examples=300, deadline=None)
@given(T=st.floats(1.01, 1e5), B=st.floats(1.01, 1e6), eta=st.sampled_from([2, 3, 4, 1.5, 2.5]),
       nu=st.sampled_from([1, 1.5, 2, 3, 4]), p_max=st.sampled_from([math.inf, 4, 16, 2]))
def test_fact1_within_deadline_and_budget(T, B, eta, nu, p_max):
    """Fact 1: the stage durations sum to <= T and the plan spends <= B (and N, P are consistent)."""
    try:
        p = seer_plan(T, B, eta=eta, nu=nu, p_max=p_max)
    except ConfigError:
        assert T < eta or B < 2  # only when not one round of t_min beyond R = 1 fits
        return
    assert sum(p.round_durations) <= T * (1 + 1e-9)
    assert p.spend <= B * (1 + 1e-9)
    assert sum(p.rounds * p.t1 * n * q for n, q in zip(p.trials, p.parallelism)) <= B * (1 + 1e-9)
    assert sum(p.budgets) == pytest.approx(B)
    assert p.n_trials >= 1
    assert all(q <= p_max for q in p.parallelism)
