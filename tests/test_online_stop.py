"""earlycurve.RankConfidenceStopping: the rank-confidence rule on a live study (hand-computed cases)."""

from __future__ import annotations

import pytest

from earlycurve import InvalidCurveError, RankConfidenceStopping, rungs_for


def test_rungs_for_rounds_deduplicates_and_stays_below_max_steps():
    assert rungs_for(50) == (5, 10, 20, 35)
    assert rungs_for(10, (0.01, 0.04, 0.5, 0.99)) == (1, 5)  # 0.01·10 and 0.04·10 -> 1; 0.99·10 -> 10 dropped
    with pytest.raises(InvalidCurveError):
        rungs_for(1)
    with pytest.raises(InvalidCurveError):
        rungs_for(10, (0.0, 0.5))


def test_cohort_mode_stops_a_trial_with_k_better_trials_at_the_rung():
    rule = RankConfidenceStopping((2,), k=2)
    for t, loss in enumerate([0.5, 0.4, 0.6]):
        assert rule.report(t, 1, loss + 1.0) is False  # below the first rung: never judged
    assert rule.report(0, 2, 0.5) is False   # alone at the rung
    assert rule.report(1, 2, 0.4) is False   # 2 trials <= k
    assert rule.report(2, 2, 0.6) is True    # 0.5 and 0.4 are lower: 2 >= k
    assert rule.stopped == {2: 2}
    assert rule.report(2, 3, 0.1) is True    # a stopped trial stays stopped
    assert rule.report(0, 3, 0.45) is False  # judged once per rung


def test_cohort_keep_share_stops_like_asha_from_the_second_trial():
    rule = RankConfidenceStopping((2,), k=3, cohort_keep=0.25)
    assert rule.report("a", 2, 0.5) is False   # alone: ceil(0.25 · 1) = 1 lower needed, 0 are
    assert rule.report("b", 2, 0.6) is True    # ceil(0.25 · 2) = 1: a is lower (k = 3 does not protect it)
    assert rule.report("c", 2, 0.4) is False   # nobody lower
    assert rule.report("d", 2, 0.45) is True   # cohort a, c (b is stopped) and d: ceil(0.75) = 1; c is lower
    assert rule.stopped == {"b": 2, "d": 2}
    with pytest.raises(InvalidCurveError):
        RankConfidenceStopping((2,), cohort_keep=1.0)


def test_calibrated_mode_uses_the_median_improvement_of_finished_trials():
    # three finished trials, each 0.2 lower at the end than at rung 2: median d = -0.2, MAD = 0 -> σ = 0
    rule = RankConfidenceStopping((2,), k=3, min_completed=3)
    for t, (at2, final) in enumerate([(0.7, 0.5), (0.8, 0.6), (0.9, 0.7)]):
        assert rule.report(t, 2, at2) is False  # cohort of <= k
        rule.complete(t, final)
    # μ = 0.88 - 0.2 = 0.68: lower are 0.5 and 0.6 only: P(top-3) = 1 -> continue
    assert rule.report(3, 2, 0.88) is False
    # μ = 0.95 - 0.2 = 0.75 > 0.5, 0.6, 0.7 and trial 3's 0.68: P(top-3) = 0 -> stop
    assert rule.report(4, 2, 0.95) is True
    assert rule.stopped == {4: 2}
    # a snapshot without finished trials falls back to the cohort; alone, nothing is stopped
    d = rule.decide(4, {4: {2: 0.75}}, {}, set())
    assert (d.stop, d.mode, d.rung) == (False, "cohort", 2)


def test_prior_curves_calibrate_from_the_first_rung_without_competing():
    # two recorded curves, each 0.3 lower at the end than at step 2: μ = y − 0.3, σ = 0
    prior = [{1: 1.0, 2: 0.8, 4: 0.5}, {1: 1.2, 2: 0.9, 4: 0.6}]
    rule = RankConfidenceStopping((2,), k=1, prior=prior, min_completed=2)
    assert rule.report("a", 2, 0.7) is False          # μ 0.4; the prior's finals 0.5, 0.6 do not compete
    d = rule.decide("b", {"a": {2: 0.7}, "b": {2: 0.75}}, {}, set())
    assert (d.mode, d.stop) == ("calibrated", True)    # μ 0.45 > a's 0.4: P(top-1) = 0
    with pytest.raises(InvalidCurveError):
        RankConfidenceStopping((2,), prior=[{}])


def test_decide_on_a_snapshot_is_stateless_and_seeded():
    rule = RankConfidenceStopping((1,), k=1, sigma_scale=1.0, min_completed=2, seed=3)
    curves = {0: {1: 1.0, 5: 0.8}, 1: {1: 1.2, 5: 0.9}, 2: {1: 1.1}}
    finals = {0: 0.8, 1: 0.9}
    a = rule.decide(2, curves, finals, set())
    b = rule.decide(2, curves, finals, set())
    # d = (-0.2, -0.3): median -0.25, MAD 0.05 -> μ = 0.85, σ = 0.074; against finals 0.8 and 0.9
    assert a == b and a.mode == "calibrated" and a.rung == 1
    # top-1 needs final < 0.8 (0.9 is then beaten too): Φ((0.8 − 0.85) / (1.4826 · 0.05)) = Φ(−0.6745) = 0.25
    assert a.p_top_k == pytest.approx(0.25, abs=0.03) and a.stop is True  # 0.25 < ε = 0.5


def test_bad_parameters_are_refused():
    for kwargs in ({"rungs": ()}, {"rungs": (3, 2)}, {"rungs": (0,)}, {"rungs": (1,), "epsilon": 1.0},
                   {"rungs": (1,), "k": 0}, {"rungs": (1,), "sigma_scale": -1.0}, {"rungs": (1,), "min_completed": 0}):
        with pytest.raises(InvalidCurveError):
            RankConfidenceStopping(**kwargs)
