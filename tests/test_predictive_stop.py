"""earlycurve.PredictiveStopping (predictive ASHA): hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from earlycurve import PREDICTIVE_DEFAULTS, InvalidCurveError, PredictiveStopping
from earlycurve.evaluation import PredictiveStopper, Study, replay


def _rule(rungs=(2,), **kw):
    return PredictiveStopping(rungs, **({"keep_first": 0.5, "keep": 0.5, "slope": 0.0, "bound_k": 0} | kw))


def test_rung_share_counts_every_arrival_and_rejudges_passed_rungs():
    rule = _rule()
    assert rule.report("a", 1, 0.9) is False  # below the first rung: never judged
    assert rule.report("a", 2, 0.5) is False  # alone: needs max(1, ceil(0.5 · 1)) = 1 lower, 0 are
    assert rule.report("b", 2, 0.6) is True   # n 2, needs 1: a is lower
    assert rule.report("c", 2, 0.4) is False  # n 3, needs 2: none lower
    assert rule.report("a", 3, 0.45) is False  # rung 2 re-judged: n 3 (b stopped but reached it), only c lower
    assert rule.report("d", 2, 0.3) is False  # n 4, needs 2: none lower
    d = rule.decide("a", rule._curves | {"a": {**rule._curves["a"], 4: 0.44}}, {}, set(rule.stopped))
    assert (d.stop, d.rung, d.mode) == (True, 2, "rung")  # the snapshot gives the same answer as report()
    assert rule.report("a", 4, 0.44) is True  # re-judged at step 4: c (0.4) and d (0.3) were lower at rung 2
    assert rule.report("e", 2, 0.7) is True   # n 5, needs 3: a, b, c, d lower (c and d not stopped)
    assert rule.stopped == {"b": 2, "a": 4, "e": 2}
    assert rule.report("a", 5, 0.1) is True   # a stopped trial stays stopped


def test_without_rejudging_a_rung_is_judged_once_as_asha():
    rule = _rule(retro=False)
    for t, v in (("a", 0.5), ("c", 0.4), ("d", 0.3)):
        rule.report(t, 2, v)
    assert rule.report("a", 3, 0.44) is False  # rung 2 is not judged again
    assert rule.stopped == {}


def test_guard_keeps_the_last_live_candidates():
    rule = _rule(keep_first=0.25)
    assert rule.report("a", 2, 0.5) is False
    assert rule.report("b", 2, 0.6) is True   # a lower and live
    rule.drop("a")                             # a failed: out of the comparison
    assert rule.report("c", 2, 0.7) is False  # a and b lower, but neither is live (guard 1)
    assert PredictiveStopping((2,), keep_first=0.25, guard=0, slope=0, bound_k=0).decide(
        "c", {"a": {2: 0.5}, "b": {2: 0.6}, "c": {2: 0.7}}, {}, {"a", "b"}).stop is True


def test_slope_credits_a_run_still_descending():
    # rung 4, w = 2: score = y(4) + slope · (y(4) − y(2)); a: 0.6 + (0.6 − 0.8) = 0.4, b: 0.55 + (0.55 − 0.6) = 0.5
    a = {1: 0.9, 2: 0.8, 3: 0.7, 4: 0.6}
    b = {1: 0.7, 2: 0.6, 3: 0.58, 4: 0.55}
    with_slope = _rule((4,), slope=1.0)
    assert with_slope.decide("b", {"a": a, "b": b}, {}, set()).stop is True
    assert with_slope.decide("a", {"a": a, "b": b}, {}, set()).stop is False
    last_value = _rule((4,))  # slope 0: b (0.55) is lower than a (0.6)
    assert last_value.decide("a", {"a": a, "b": b}, {}, set()).stop is True
    assert last_value.decide("b", {"a": a, "b": b}, {}, set()).stop is False


def test_optimistic_bound_against_the_best_finished_trials():
    rule = PredictiveStopping((10,), slope=0.0, bound_k=1, bound_quantile=0.0)  # rung never reached
    for step, values in ((1, (1.0, 1.0)), (2, (0.8, 0.9))):
        assert [rule.report(t, step, v) for t, v in enumerate(values)] == [False, False]  # nothing finished yet
    rule.complete(0, 0.5)
    rule.complete(1, 0.7)
    # gains at step 2: 0.5 − 0.8 = −0.3 and 0.7 − 0.9 = −0.2; optimistic (quantile 0) −0.3; best final 0.5
    # step 1: gains 0.5 − 1.0 = −0.5 and 0.7 − 1.0 = −0.3; optimistic −0.5
    assert rule.report("w", 1, 0.95) is False  # 0.45 < 0.5
    assert rule.report("x", 1, 1.1) is True    # 0.6 > 0.5
    assert rule.stopped == {"x": 1}
    d = rule.decide("y", {0: {1: 1.0, 2: 0.8}, 1: {1: 1.0, 2: 0.9}, "y": {2: 0.85}}, {0: 0.5, 1: 0.7}, set())
    assert (d.stop, d.mode, d.rung) == (True, "bound", 2)  # 0.85 − 0.3 = 0.55 > 0.5
    d = rule.decide("z", {0: {1: 1.0, 2: 0.8}, 1: {1: 1.0, 2: 0.9}, "z": {2: 0.79}}, {0: 0.5, 1: 0.7}, set())
    assert d.stop is False                                  # 0.49 < 0.5
    second = PredictiveStopping((10,), slope=0.0, bound_k=2, bound_quantile=0.0)
    assert second.decide("y", {0: {2: 0.8}, 1: {2: 0.9}, "y": {2: 0.85}}, {0: 0.5, 1: 0.7}, set()).stop is False  # 0.55 < 0.7


def test_replay_with_one_worker_is_hand_computable():
    curves = np.array([[0.5, 0.4, 0.3, 0.2],     # first: alone at rung 1, trained to the end
                       [0.6, 0.5, 0.4, 0.3],     # n 2, needs 1 lower: trial 0 -> stopped at step 1
                       [0.4, 0.35, 0.28, 0.25],  # n 3, needs 2: none lower -> end
                       [0.45, 0.41, 0.35, 0.3]])  # n 4, needs 2: only trial 2 lower -> end
    study = Study(index=0, split="test", ids=np.arange(4), curves=curves)
    steps = replay(study, PredictiveStopper((0.25,), keep_first=0.5, keep=0.5, slope=0.0, bound_k=0), workers=1)
    assert steps.tolist() == [4, 1, 4, 4]
    # with the bound (quantile 0, best final 0.2): trial 2 stays below it (0.1, 0.15, 0.18); trial 3 at step 1:
    # gains −0.3, −0.15 (trials 0, 2) -> 0.45 − 0.3 = 0.15 < 0.2 goes on; step 2: gains −0.2, −0.1 -> 0.21 > 0.2 stopped
    steps = replay(study, PredictiveStopper((0.25,), keep_first=0.5, keep=0.5, slope=0.0, bound_k=1, bound_quantile=0.0),
                   workers=1)
    assert steps.tolist() == [4, 1, 4, 2]


def test_defaults_and_bad_parameters():
    rule = PredictiveStopping((3, 15))
    assert (rule.keep_first, rule.keep, rule.slope, rule.bound_k) == (
        PREDICTIVE_DEFAULTS["keep_first"], PREDICTIVE_DEFAULTS["keep"], PREDICTIVE_DEFAULTS["slope"], PREDICTIVE_DEFAULTS["bound_k"])
    for kw in ({"keep": 0.0}, {"keep_first": 1.5}, {"slope": -1.0}, {"bound_k": -1}, {"bound_quantile": 2.0}, {"guard": -1}):
        with pytest.raises(InvalidCurveError):
            PredictiveStopping((2,), **kw)
    with pytest.raises(InvalidCurveError):
        PredictiveStopping((3, 3))
    assert rule.report("t", 20, 0.5) is False and rule.report("t", 20, 0.1) is False  # a replayed step is not judged
