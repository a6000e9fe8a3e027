"""ease.ml's GREEDY team pick with the HYBRID fall-back (SV5) and cost-aware GP-UCB (SV6)."""

from __future__ import annotations

import numpy as np
import pytest

from spottune.errors import ConfigError
from spottune.scheduling import FREEZE_ROUNDS, CostAwareGPUCB, HybridTeamPicker, TeamBound, beta_t, cost_aware_ucb


def test_teams_without_a_result_are_served_first_in_name_order():
    picker = HybridTeamPicker()
    bounds = {"b": TeamBound(ucb=1.0), "a": TeamBound(ucb=1.0), "c": TeamBound(ucb=0.9, best=0.5)}
    assert picker.pick(bounds).team == "a" and picker.pick(bounds).rule == "first-visit"


def test_greedy_picks_the_largest_gap_among_the_candidates():
    picker = HybridTeamPicker()
    pick = picker.pick({"a": TeamBound(ucb=0.9, best=0.8), "b": TeamBound(ucb=0.95, best=0.6),
                        "c": TeamBound(ucb=0.7, best=0.5)})
    # gaps 0.1, 0.35, 0.2; mean 0.2167: candidates b (and not c, 0.2 < mean)
    assert (pick.team, pick.rule, pick.candidates) == ("b", "greedy", ("b",))


def test_the_gap_never_rises_above_an_earlier_bound():
    picker = HybridTeamPicker()
    picker.pick({"a": TeamBound(ucb=0.9, best=0.5), "b": TeamBound(ucb=0.8, best=0.7)})  # a's cap: 0.9
    pick = picker.pick({"a": TeamBound(ucb=2.0, best=0.6), "b": TeamBound(ucb=0.8, best=0.7)})
    assert pick.team == "a" and pick.stagnant_rounds == 0  # gap a = min(2.0, 0.9) - 0.6 = 0.3, total fell 0.5 -> 0.4


def test_the_freeze_detector_switches_to_round_robin_after_exactly_s_stagnant_rounds():
    frozen = {"a": TeamBound(ucb=0.9, best=0.5), "b": TeamBound(ucb=0.7, best=0.6), "c": TeamBound(ucb=0.65, best=0.6)}
    picker = HybridTeamPicker()
    picks = [picker.pick(frozen) for _ in range(FREEZE_ROUNDS + 4)]
    assert [p.rule for p in picks] == ["greedy"] * (FREEZE_ROUNDS + 1) + ["round-robin"] * 3
    assert [p.stagnant_rounds for p in picks[:FREEZE_ROUNDS + 1]] == list(range(FREEZE_ROUNDS + 1))
    assert [p.team for p in picks] == ["a"] * (FREEZE_ROUNDS + 1) + ["b", "c", "a"]


def test_a_drop_of_the_total_gap_resets_the_freeze_count():
    picker = HybridTeamPicker()
    picks = []
    for r in range(30):
        best = 0.5 + (0.01 if r == 6 else 0.0) + (0.02 if r >= 7 else 0.0)
        picks.append(picker.pick({"a": TeamBound(ucb=0.9, best=best), "b": TeamBound(ucb=0.7, best=0.6)}))
    rules = [p.rule for p in picks]
    assert rules.index("round-robin") == 7 + FREEZE_ROUNDS + 1  # round 7 is the last drop; 10 stagnant rounds follow


def test_empty_bounds_are_refused():
    with pytest.raises(ConfigError, match="no team has work"):
        HybridTeamPicker().pick({})


def test_cost_aware_ucb_by_hand():
    score = cost_aware_ucb([0.5, 0.5], [0.2, 0.2], [1.0, 4.0], beta=4.0)
    assert score == pytest.approx([0.5 + 2 * 0.2, 0.5 + 1 * 0.2])
    assert beta_t(1, 6, c_max=2.0, delta=0.1) == pytest.approx(4.0 * np.log(np.pi ** 2 * 6 / 0.6))


def test_with_equal_mean_and_sigma_the_cheaper_arm_wins_and_a_much_larger_sigma_beats_the_price():
    assert int(np.argmax(cost_aware_ucb([0.5, 0.5], [0.1, 0.1], [3.0, 1.0], beta=2.0))) == 1
    assert int(np.argmax(cost_aware_ucb([0.5, 0.5], [0.3, 0.01], [3.0, 1.0], beta=2.0))) == 0


def test_gp_ucb_suggests_an_untried_arm_and_the_cheap_one_first():
    arms = np.linspace(0, 1, 11)[:, None]
    cost = np.where(arms[:, 0] < 0.5, 1.0, 5.0)
    gp = CostAwareGPUCB()
    assert gp.suggest(arms, cost, [], []) == 0  # the prior is flat: the cheapest arm, first in order
    values = -(arms[:, 0] - 0.3) ** 2
    tried = [0, 5, 10]
    nxt = gp.suggest(arms, cost, tried, list(values[tried]))
    assert nxt not in tried and nxt < 5
    with pytest.raises(ConfigError, match="every configuration has been tried"):
        gp.suggest(arms, cost, list(range(11)), list(values))


@pytest.mark.slow  # six maximum-likelihood GP fits: about 2 s on a loaded 2-core machine
def test_gp_ucb_finds_the_best_arm_of_a_smooth_function_in_few_rounds():
    arms = np.linspace(0, 1, 30)[:, None]
    values = -(arms[:, 0] - 0.72) ** 2
    gp = CostAwareGPUCB(mode="max")
    tried: list[int] = []
    for _ in range(6):
        tried.append(gp.suggest(arms, np.ones(30), tried, [values[i] for i in tried]))
    assert int(np.argmax(values)) in tried
