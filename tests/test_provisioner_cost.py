"""Eq 1–2 and the opt-in useful-step objective, against hand-computed values (SpotTune paper, Eq 1–2)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provisioner import (
    PaperStepCost,
    ProvisionerConfigError,
    UsefulStepCost,
    expected_hour_cost_usd,
    expected_useful_seconds,
    step_cost_usd,
    useful_step_cost_usd,
)


def test_eq1_paper_example():
    # Eq 1: E[C] = (1 - p) * P̄
    assert expected_hour_cost_usd(0.6, 0.030) == pytest.approx(0.012, rel=1e-12)
    assert expected_hour_cost_usd(0.1, 0.150) == pytest.approx(0.135, rel=1e-12)


def test_eq2_paper_example_r4_large_beats_m4_4xlarge():
    r4 = step_cost_usd(0.6, 0.030, 2.0)
    m4 = step_cost_usd(0.1, 0.150, 0.4)
    assert r4 == pytest.approx(0.012 * 2.0 / 3600, rel=1e-12)  # 6.667e-6 USD/step
    assert m4 == pytest.approx(0.135 * 0.4 / 3600, rel=1e-12)  # 1.5e-5 USD/step
    assert f"{r4:.4g}" == "6.667e-06" and f"{m4:.4g}" == "1.5e-05"
    assert r4 < m4


def test_eq2_is_vectorised_and_scalar_in_gives_float():
    out = step_cost_usd(np.array([0.6, 0.1]), np.array([0.030, 0.150]), np.array([2.0, 0.4]))
    assert isinstance(out, np.ndarray) and out.shape == (2,)
    np.testing.assert_allclose(out, [0.012 * 2.0 / 3600, 0.135 * 0.4 / 3600], rtol=1e-12)
    assert isinstance(step_cost_usd(0.5, 0.1, 1.0), float)
    grid = step_cost_usd(np.array([[0.0], [0.5]]), 0.1, np.array([1.0, 2.0]))  # broadcasting
    assert grid.shape == (2, 2) and grid[1, 1] == pytest.approx(0.5 * 0.1 * 2.0 / 3600)


@pytest.mark.parametrize("p", [-0.1, 1.1, float("nan")])
def test_probability_out_of_range_is_rejected(p):
    with pytest.raises(ProvisionerConfigError, match="must be in \\[0, 1\\]"):
        step_cost_usd(p, 0.1, 1.0)


def test_useful_step_cost_without_overheads_and_revocation_is_eq2():
    assert useful_step_cost_usd(0.0, 0.03, 2.0) == pytest.approx(step_cost_usd(0.0, 0.03, 2.0), rel=1e-12)


def test_useful_seconds_by_hand():
    # no overheads: revoked hour yields E[τ] = 1800 s
    assert expected_useful_seconds(0.5) == pytest.approx(0.5 * 3600 + 0.5 * 1800)
    # restart 300, checkpoint 300, lost 600: kept 3000; revoked (3600 - 1200)^2 / 7200 = 800
    assert expected_useful_seconds(0.1, restart_s=300, checkpoint_s=300, lost_s=600) == pytest.approx(0.9 * 3000 + 0.1 * 800)


def test_useful_objective_can_flip_the_choice():
    # Eq 2 prefers the likely-revoked r4.large; with realistic overheads the stable m4.4xlarge wins.
    kw = dict(restart_s=300.0, checkpoint_s=300.0, lost_s=600.0)
    r4_eq2, m4_eq2 = step_cost_usd(0.9, 0.030, 2.0), step_cost_usd(0.1, 0.150, 0.1)
    assert r4_eq2 == pytest.approx(0.1 * 0.030 * 2.0 / 3600) and m4_eq2 == pytest.approx(0.9 * 0.150 * 0.1 / 3600)
    assert r4_eq2 < m4_eq2
    r4_u = useful_step_cost_usd(0.9, 0.030, 2.0, **kw)
    m4_u = useful_step_cost_usd(0.1, 0.150, 0.1, **kw)
    assert r4_u == pytest.approx(0.1 * 0.030 * 2.0 / (0.1 * 3000 + 0.9 * 800))  # 5.882e-6
    assert m4_u == pytest.approx(0.9 * 0.150 * 0.1 / (0.9 * 3000 + 0.1 * 800))  # 4.856e-6
    assert m4_u < r4_u


def test_objective_objects_match_functions():
    p, price, t = np.array([0.2, 0.7]), np.array([0.1, 0.05]), np.array([1.0, 3.0])
    np.testing.assert_array_equal(PaperStepCost()(p, price, t), step_cost_usd(p, price, t))
    obj = UsefulStepCost(restart_s=60, checkpoint_s=30, lost_s=10)
    np.testing.assert_array_equal(obj(p, price, t), useful_step_cost_usd(p, price, t, restart_s=60, checkpoint_s=30, lost_s=10))
    assert PaperStepCost().name == "eq2" and obj.name == "useful-step"


@pytest.mark.parametrize("kw", [dict(restart_s=-1.0), dict(checkpoint_s=float("inf")), dict(restart_s=2000, lost_s=1600)])
def test_useful_objective_rejects_bad_overheads(kw):
    with pytest.raises(ProvisionerConfigError):
        UsefulStepCost(**kw)


@settings(max_examples=60, deadline=None)
@given(
    p=st.floats(0, 1), price=st.floats(1e-4, 10), t=st.floats(1e-3, 100),
    restart=st.floats(0, 1000), ckpt=st.floats(0, 1000), lost=st.floats(0, 1000),
)
def test_useful_cost_never_below_eq2(p, price, t, restart, ckpt, lost):
    # E[useful seconds] <= 3600, so cost per useful step >= Eq 2's cost per step
    eq2 = step_cost_usd(p, price, t)
    refined = useful_step_cost_usd(p, price, t, restart_s=restart, checkpoint_s=ckpt, lost_s=lost)
    assert refined >= eq2 * (1 - 1e-12)
    assert 0.0 <= eq2 <= price * t / 3600 * (1 + 1e-12)
