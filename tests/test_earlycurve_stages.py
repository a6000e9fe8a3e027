"""Eq 7 stage split ([I] D7) and the plateau rule ([I] D8)."""

from __future__ import annotations

import numpy as np
import pytest

from earlycurve import CurveParams, InvalidCurveError, PlateauRule, StageRule, curve, is_plateau, split_stages
from earlycurve._stages import relative_changes

STAGE0 = CurveParams(a=0.0, b=0.05, c=1.0, d=0.5)  # ~0.753 at g = 59, changing < 0.4 % per step
STAGE1 = CurveParams(a=0.0, b=0.1, c=5.0, d=0.1)  # 0.3 at g = 0: a 60 % drop


def two_stage(n0=60, n1=40, spacing=10.0):
    """Loss of a two-stage run observed every ``spacing`` steps; the drop is at index ``n0``."""
    g0, g1 = np.arange(n0) * spacing, np.arange(n1) * spacing
    steps = np.concatenate([g0, n0 * spacing + g1])
    values = np.concatenate([curve(g0 / spacing, STAGE0), curve(g1 / spacing, STAGE1)])
    return steps, values


def test_two_stage_curve_split_at_the_drop():
    steps, values = two_stage()
    stages = split_stages(steps, values)
    assert [s.start for s in stages] == [0, 60]
    assert stages[1].start_step == 600.0 and stages[1].n_points == 40
    assert stages[0].last_step == 590.0


def test_single_stage_curve_not_split():
    steps = np.arange(100.0)
    assert len(split_stages(steps, curve(steps, STAGE0))) == 1


def test_jump_without_steady_period_not_split():
    # Early fast descent: relative changes are large right before the jump, so no new stage.
    values = np.array([2.3, 1.5, 0.9, 0.5, 0.3, 0.2, 0.09, 0.05])
    assert len(split_stages(np.arange(8.0), values)) == 1


def test_direction_decrease_only_by_default():
    steps = np.arange(20.0)
    values = np.full(20, 0.5)
    values[12:] = 0.9  # a jump *up* after a steady stretch
    assert len(split_stages(steps, values)) == 1
    assert [s.start for s in split_stages(steps, values, StageRule(direction="both"))] == [0, 12]


def test_mean_aggregate_tolerates_one_noisy_step():
    values = np.array([1.0, 1.0, 1.0, 1.0, 1.03, 1.03, 0.4, 0.4])  # one 3 % step in the window
    assert len(split_stages(np.arange(8.0), values)) == 1
    assert len(split_stages(np.arange(8.0), values, StageRule(aggregate="mean"))) == 2


def test_relative_changes_handles_zero():
    np.testing.assert_array_equal(relative_changes(np.array([0.0, 0.0, 1.0, 0.5])), [0.0, np.inf, 0.5])


def test_stage_rule_validated():
    with pytest.raises(InvalidCurveError, match="alpha is -1"):
        StageRule(alpha=-1)
    with pytest.raises(InvalidCurveError, match="aggregate"):
        StageRule(aggregate="median")


def test_plateau_detected():
    steps = np.arange(0.0, 201.0)
    values = 0.3 + 0.5 * np.exp(-steps / 5.0)
    assert is_plateau(steps, values, max_steps=300)


def test_pre_drop_steady_stretch_is_not_a_plateau():
    steps, values = two_stage()
    head_steps, head_values = steps[:60], values[:60]
    deltas = relative_changes(head_values)[-5:]
    assert deltas.max() < 0.01  # Eq 7 calls this stretch steady ...
    assert not is_plateau(head_steps, head_values, max_steps=1000)  # ... but D8 does not stop it


def test_plateau_needs_a_full_window_and_can_be_disabled():
    steps = np.arange(0.0, 8.0)
    flat = np.full(8, 0.25)
    assert not is_plateau(steps, flat, max_steps=100)  # window is 10 steps; only 7 observed
    assert is_plateau(np.arange(0.0, 12.0), np.full(12, 0.25), max_steps=100)
    assert not is_plateau(np.arange(0.0, 12.0), np.full(12, 0.25), 100, PlateauRule(tol=None))
    assert PlateauRule().window_for(1000) == 50.0


def test_plateau_rule_validated():
    with pytest.raises(InvalidCurveError, match="tol"):
        PlateauRule(tol=0.0)
