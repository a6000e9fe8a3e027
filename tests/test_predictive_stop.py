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


# -- score="learned" (docs/design/earlycurve.md §8.8, design ES15) ---------------------------------------------------

def _exp_curve(a: float, b: float, upto: int) -> dict[int, float]:
    """``exp(b − a·t/20)`` at t = 1 .. upto: its log-residual is linear in ResidualCurvePredictor's features."""
    return {t: float(np.exp(b - a * t / 20)) for t in range(1, upto + 1)}


def _exact_predictor():
    # the ResidualCurvePredictor docstring's example: 64 curves exp(b − a·t/20) are learned exactly
    from earlycurve import ResidualCurvePredictor

    steps = np.arange(1, 21)
    ab = np.random.default_rng(0).uniform([0.5, 0.0], [3.0, 1.5], (64, 2))
    pool = [(steps, np.exp(b - a * steps / 20), 20) for a, b in ab]
    return ResidualCurvePredictor(alphas=(1e-8,), clip=0.0, top_k=1, n_se=0.0, n_studies=50).fit(pool)


def test_learned_score_stops_the_other_trial_than_the_slope_score():
    # rung 4 of 20. "a" = exp(−0.5·t/20): y(4) = 0.9048, y(2) = 0.9512, final exp(−0.5) = 0.6065.
    # "b" = exp(0.4 − 1.5·t/20): y(4) = 1.1052, y(2) = 1.2840, final exp(−1.1) = 0.3329.
    # slope 1: a 0.9048 − 0.0464 = 0.8584 < b 1.1052 − 0.1788 = 0.9264, so b stops (the last value agrees);
    # learned (exact on these curves): a's predicted final 0.6065 > b's 0.3329, so a stops.
    curves = {"a": _exp_curve(0.5, 0.0, 4), "b": _exp_curve(1.5, 0.4, 4)}
    slope = _rule((4,), slope=1.0)
    assert [slope.decide(t, curves, {}, set()).stop for t in "ab"] == [False, True]
    model = _exact_predictor()
    assert model.predict_final(np.arange(1, 5), np.array(list(curves["a"].values())), 20).value == pytest.approx(np.exp(-0.5), rel=1e-6)
    learned = _rule((4,), score="learned", predictor=model, max_steps=20, slope=1.0)  # slope is unused
    da, db = (learned.decide(t, curves, {}, set()) for t in "ab")
    assert (da.stop, da.rung, da.mode) == (True, 4, "rung")
    assert db.stop is False
    # the learned score uses the curve cut at the rung: later points of b do not change its score there
    later = {"a": curves["a"], "b": _exp_curve(1.5, 0.4, 7)}
    assert learned.decide("a", later, {}, set()).stop is True


class _CountingPredictor:
    """Predicted final = last value − (first value − last value) (a hand rule); counts its calls."""

    def __init__(self):
        self.calls = 0

    def predict_final(self, steps, values, max_steps):
        from earlycurve import Prediction

        self.calls += 1
        v = float(values[-1] - (values[0] - values[-1]))
        return Prediction(value=v, low=v, high=v, n_stages=0, method="hand")


def test_learned_score_replays_by_hand_and_predicts_each_rung_once():
    # one worker, rung 2 of 4, keep 0.5; hand-rule score at step 2: 2·y(2) − y(1)
    curves = np.array([[0.5, 0.4, 0.3, 0.2],     # 0.3: alone, to the end
                       [0.9, 0.5, 0.4, 0.3],     # 0.1 < 0.3: n 2, none lower -> end (last value 0.5 > 0.4 would stop it)
                       [0.45, 0.42, 0.4, 0.38],  # 0.39: n 3, needs 2 lower: 0 and 1 -> stopped at step 2
                       [0.6, 0.35, 0.3, 0.25]])  # 0.1: ties 1, needs 2 lower: none -> end
    study = Study(index=0, split="test", ids=np.arange(4), curves=curves)
    hand = _CountingPredictor()
    steps = replay(study, PredictiveStopper((0.5,), keep_first=0.5, keep=0.5, bound_k=0, score="learned", predictor=hand), workers=1)
    assert steps.tolist() == [4, 4, 2, 4]
    assert hand.calls == 4  # one prediction per trial at its rung, cached through every later re-judging
    slope0 = replay(study, PredictiveStopper((0.5,), keep_first=0.5, keep=0.5, slope=0.0, bound_k=0), workers=1)
    assert slope0.tolist() == [4, 2, 4, 4]  # the last value stops trial 1 instead of trial 2


def test_learned_score_bad_parameters():
    hand = _CountingPredictor()
    for kw in ({"score": "bogus"}, {"score": "learned"}, {"score": "learned", "predictor": hand},
               {"score": "learned", "predictor": hand, "max_steps": 2}, {"score": "learned", "predictor": object(), "max_steps": 9}):
        with pytest.raises(InvalidCurveError):
            PredictiveStopping((2,), **kw)
    assert PredictiveStopping((2,)).score == "slope"  # the default is unchanged


def test_check_predictive_options_returns_a_checked_copy():
    from earlycurve import PREDICTIVE_KEYS, check_predictive_options

    given = {"fractions": (0.1, 0.3), "keep": 0.25, "retro": False}
    assert check_predictive_options(given) == {"fractions": [0.1, 0.3], "keep": 0.25, "retro": False}
    assert given["fractions"] == (0.1, 0.3) and check_predictive_options(None) == {}
    assert PREDICTIVE_KEYS == ("fractions", "keep_first", "keep", "slope", "bound_k", "bound_quantile", "guard", "retro")
    for bad in ({"guard": -1}, {"fractions": []}, {"score": "learned"}, "keep=0.25"):
        with pytest.raises(InvalidCurveError):
            check_predictive_options(bad)
