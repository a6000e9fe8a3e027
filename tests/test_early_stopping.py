"""Early-stopping evaluation (decisions ES1-ES7): ASHA's rule, the study sampler, the rank-confidence rule,
and that a setting is chosen on tuning studies only. Hand-computed expectations; fast."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from earlycurve import ParametricEnsemble, RankConfidenceRule, prob_top_k
from earlycurve.errors import InvalidCurveError
from earlycurve.evaluation._stoppers import (
    ASHAStopper,
    BeliefTable,
    NeighbourBeliefs,
    OptunaStopper,
    RankConfidenceStopper,
    asha_rungs,
    one_shot_steps,
)
from earlycurve.evaluation._stopping import (
    Stopper,
    Study,
    StudyPool,
    choose_best,
    replay,
    sample_studies,
    study_metrics,
    tune_and_report,
)
from earlycurve.evaluation import RecordedCurve


def _study(curves, index=0, split="test", ids=None) -> Study:
    curves = np.asarray(curves, dtype=float)
    return Study(index=index, split=split, ids=np.arange(len(curves)) if ids is None else np.asarray(ids), curves=curves)


# ---------------------------------------------------------------- ASHA (Ray's rule)

def test_asha_rungs_follow_ray():
    assert asha_rungs(1, 8, 2) == [1, 2, 4, 8]
    assert asha_rungs(1, 100, 4) == [1, 4, 16, 64]  # Ray's defaults with max_t=100
    assert asha_rungs(5, 50, 3) == [5, 15, 45]
    with pytest.raises(InvalidCurveError):
        asha_rungs(0, 8, 2)


def test_asha_stops_hand_made_curves():
    # One worker: trials run one after the other. rf = 2, rungs 1, 2, 4 (8 = max_t).
    curves = [
        [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2],  # T0: first everywhere, never stopped
        [0.8, 0.7, 0.65, 0.55, 0.5, 0.4, 0.3, 0.1],  # T1: cutoffs at 1, 2, 4 are T0's values; better -> on
        [0.95, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9],  # T2: step 1: median(-0.9, -0.8) = -0.85 > -0.95 -> stop
        [0.85, 0.75, 0.7, 0.62, 0.6, 0.6, 0.6, 0.6],  # T3: 1: -0.85 >= median(-.9,-.8,-.95) = -.9 -> on;
        # 2: -0.75 is not < median(-0.8, -0.7) = -0.75 -> on; 4: -0.62 < median(-0.6, -0.55) = -0.575 -> stop
    ]
    steps = replay(_study(curves), ASHAStopper(8, grace_period=1, reduction_factor=2), workers=1)
    assert steps.tolist() == [8, 8, 1, 4]


def test_asha_uses_the_percentile_of_earlier_trials_only():
    # rf = 4: cutoff = 75th percentile of rewards; 4 earlier trials at rung 1 with losses .1 .2 .3 .4
    # -> rewards -.4 -.3 -.2 -.1, 75th percentile (linear) = -0.175; loss 0.18 (reward -0.18) stops.
    s = ASHAStopper(16, grace_period=1, reduction_factor=4)
    s.reset()
    for t, loss in enumerate([0.1, 0.2, 0.3, 0.4]):
        s.report(t, 1, loss)
    assert s.report(4, 1, 0.18) is True
    assert s.report(5, 1, 0.17) is False


# ---------------------------------------------------------------- the study sampler

def _pool(n=40, n_steps=5) -> StudyPool:
    rng = np.random.default_rng(1)
    curves = [RecordedCurve(curve_id=f"c{i}", group="g", steps=np.arange(1.0, 11.0),
                            values=np.sort(rng.uniform(0.1, 1.0, 10))[::-1], max_steps=10.0) for i in range(n)]
    return StudyPool.from_curves(curves, n_steps, name="toy")


def test_pool_grid_interpolates_progress():
    c = RecordedCurve(curve_id="a", group="g", steps=np.array([1.0, 2.0, 4.0]), values=np.array([0.9, 0.5, 0.1]), max_steps=4.0)
    pool = StudyPool.from_curves([c], 4)
    assert pool.grid.tolist() == [[0.9, 0.5, 0.3, 0.1]]


def test_sampler_is_deterministic_and_splits_disjoint():
    pool = _pool()
    a_tun, a_test = sample_studies(pool, n_tuning=5, n_test=5, size=8, seed=3)
    b_tun, b_test = sample_studies(pool, n_tuning=5, n_test=5, size=8, seed=3)
    c_tun, _ = sample_studies(pool, n_tuning=5, n_test=5, size=8, seed=4)
    assert all(np.array_equal(x.ids, y.ids) for x, y in zip(a_tun + a_test, b_tun + b_test))
    assert not all(np.array_equal(x.ids, y.ids) for x, y in zip(a_tun, c_tun))
    tuning_rows = set(np.concatenate([s.ids for s in a_tun]))
    test_rows = set(np.concatenate([s.ids for s in a_test]))
    assert not tuning_rows & test_rows
    assert all(len(set(s.ids)) == 8 for s in a_tun + a_test)
    assert len({tuple(s.ids) for s in a_tun}) == 5  # studies differ
    with pytest.raises(InvalidCurveError):
        sample_studies(pool, n_tuning=1, n_test=1, size=21)


def test_study_metrics_pick_is_best_completed():
    study = _study([[0.5, 0.4], [0.6, 0.1], [0.3, 0.2], [0.9, 0.8]])  # finals .4 .1 .2 .8, best = 1
    m = study_metrics(study, np.array([2, 1, 2, 1]))  # trained to the end: 0 and 2 -> pick 2 (rank 1)
    assert m == {"cost": 6 / 8, "steps": 6.0, "top1": 0.0, "top3": 1.0, "regret": pytest.approx(0.1)}
    with pytest.warns(UserWarning, match="no pick"):
        m = study_metrics(study, np.array([1, 1, 1, 1]))
    assert m["top1"] == 0.0 and np.isnan(m["regret"])


def test_one_shot_keeps_lowest_scores():
    study = _study(np.zeros((4, 10)))
    assert one_shot_steps(study, np.array([0.3, 0.1, 0.2, 0.4]), 7, 2).tolist() == [7, 10, 10, 7]


# ---------------------------------------------------------------- rank confidence

def test_prob_top_k_exact_and_monte_carlo():
    rng = np.random.default_rng(0)
    assert prob_top_k(np.array([0.3, 0.1, 0.2]), np.zeros(3), 0, 2, rng) == 0.0
    assert prob_top_k(np.array([0.3, 0.1, 0.2]), np.zeros(3), 2, 2, rng) == 1.0
    assert prob_top_k(np.array([0.3, 0.1]), np.zeros(2), 0, 2, rng) == 1.0  # n <= k
    # two trials, k = 1: P = Phi((mu_j - mu_i) / sqrt(s_i^2 + s_j^2)) = Phi(0.1 / 0.1) = 0.8413
    p = prob_top_k(np.array([0.2, 0.3]), np.array([0.06, 0.08]), 0, 1, rng, n_samples=40000)
    assert p == pytest.approx(norm.cdf(1.0), abs=0.01)


def _crossing_table(point):
    # rows 0-1: linear calibration curves (linear extrapolation exact there); rows 2-4: the study.
    grid = np.array([
        [0.8, 0.6, 0.4, 0.2],
        [0.6, 0.5, 0.4, 0.3],
        [0.9, 0.5, 0.3, 0.15],  # T0: ahead at step 2, ends at 0.15
        [1.0, 0.7, 0.3, 0.1],  # T1: behind at step 2, crosses, ends best at 0.1
        [0.95, 0.9, 0.85, 0.8],  # T2: bad
    ])
    return grid, BeliefTable(grid, point, [2], calibration_rows=[0, 1])


def test_rank_confidence_on_crossing_curves():
    linear = lambda head, R: float(head[-1] + (head[-1] - head[-2]) * (R - head.size))  # noqa: E731
    last = lambda head, R: float(head[-1])  # noqa: E731
    grid, lin_table = _crossing_table(linear)
    assert lin_table.bias_[2] == pytest.approx(0.0) and lin_table.sigma_[2] == pytest.approx(0.0)
    study = Study(index=0, split="test", ids=np.array([2, 3, 4]), curves=grid[[2, 3, 4]])
    # linear: T0 first (alone) -> on, completes 0.15; T1 mu = 0.7 - 0.2*2... = 0.1 < 0.15 -> on; T2 mu 0.8 -> stop
    steps = replay(study, RankConfidenceStopper(lin_table, [2], 0.5, k=1), workers=1)
    assert steps.tolist() == [4, 4, 2]
    assert study_metrics(study, steps)["top1"] == 1.0
    # last value: bias = median(0.2-0.6, 0.3-0.5) = -0.3; T1 mu = 0.4 > 0.15 -> stop; T2 mu 0.6 -> stop
    _, last_table = _crossing_table(last)
    assert last_table.bias_[2] == pytest.approx(-0.3)
    steps = replay(study, RankConfidenceStopper(last_table, [2], 0.5, k=1, sigma_scale=0.0), workers=1)
    assert steps.tolist() == [4, 2, 2]
    assert study_metrics(study, steps)["top1"] == 0.0


def test_rank_confidence_rule_validates():
    with pytest.raises(InvalidCurveError):
        RankConfidenceRule([3, 2], 0.1)
    with pytest.raises(InvalidCurveError):
        RankConfidenceRule([2], 1.5)


def test_parametric_ensemble_extrapolates_a_power_law():
    x = np.arange(1.0, 31.0)
    y = 0.2 + 0.8 * x**-0.7
    truth = 0.2 + 0.8 * 100**-0.7
    pred = ParametricEnsemble().predict_final(x, y, 100)
    assert pred.method == "ensemble" and pred.low <= truth <= pred.high
    assert abs(pred.value - truth) < abs(y[-1] - truth) / 2  # median of the families: half last value's error
    preds, _ = ParametricEnsemble().family_predictions(x, y, 100)
    assert preds["pow3"] == pytest.approx(truth, abs=1e-4)  # the true family is recovered


# ---------------------------------------------------------------- choosing on tuning studies only

class _StopAt(Stopper):
    """Stops trial 1 at step 1 (cheap) or never."""

    def __init__(self, cut: bool):
        self.cut = cut

    def report(self, trial, step, loss):
        return self.cut and trial == 1


def test_best_setting_is_chosen_on_tuning_studies_only():
    # tuning: trial 1 is bad, so cutting it is free (top-3 holds) -> "cut" is cheapest and chosen.
    # test: trial 1 is the best; cutting it loses top-1 and top-3 on test, but the choice must not change.
    tuning = [_study([[0.5, 0.1], [0.9, 0.8]], i, "tuning") for i in range(3)]
    test = [_study([[0.5, 0.4], [0.9, 0.05]], i, "test") for i in range(3)]
    grid = {"default never": lambda: _StopAt(False), "cut": lambda: _StopAt(True)}
    res = tune_and_report(grid, tuning, test, workers=2, target_top3=0.95)
    assert res["best"]["setting"] == "cut"
    assert res["best"]["tuning"]["cost"]["mean"] == pytest.approx(3 / 4)
    assert res["best"]["test"]["top1"]["mean"] == 0.0  # reported on test as it is
    assert res["default"]["setting"] == "default never" and res["default"]["test"]["top1"]["mean"] == 1.0


def test_choose_best_falls_back_to_accuracy():
    s = lambda top3, cost: {"top3": {"mean": top3}, "cost": {"mean": cost}}  # noqa: E731
    assert choose_best({"a": s(0.96, 0.5), "b": s(1.0, 0.4), "c": s(0.9, 0.1)}) == "b"
    assert choose_best({"a": s(0.8, 0.5), "b": s(0.9, 0.7), "c": s(0.9, 0.6)}) == "c"


def test_optuna_sha_replay_prunes_and_keeps_first():
    optuna = pytest.importorskip("optuna")
    curves = [[0.9, 0.8, 0.7, 0.6], [0.95, 0.9, 0.85, 0.8], [0.5, 0.4, 0.3, 0.2]]
    stopper = OptunaStopper(lambda: optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=2))
    steps = replay(_study(curves), stopper, workers=1)
    # T0 first at rung 1 -> promoted; T1 0.95 vs {0.9, 0.95}: 2 // 2 - 1 = 0 -> must be <= 0.9 -> pruned at 1
    assert steps.tolist()[:2] == [4, 1]


def test_neighbour_beliefs_leave_one_out():
    grid = np.array([
        [0.9, 0.8, 0.5],  # features at rung 2 (y, y - y_prev): (0.8, -0.1), final change -0.3
        [0.9, 0.8, 0.6],  # (0.8, -0.1), -0.2
        [0.5, 0.5, 0.5],  # (0.5, 0.0), 0.0
        [0.6, 0.5, 0.45],  # (0.5, -0.1), -0.05
        [0.95, 0.8, 0.7],  # query, not a calibration row: (0.8, -0.15)
    ])
    nb = NeighbourBeliefs(grid, [2], calibration_rows=[0, 1, 2, 3], n_neighbours=2)
    mu, sd = nb.belief(4, 2)  # nearest: rows 0 and 1
    assert mu == pytest.approx(0.8 - 0.25) and sd == pytest.approx(np.std([-0.3, -0.2], ddof=1))
    mu, sd = nb.belief(0, 2)  # itself excluded: rows 1 and 3
    assert mu == pytest.approx(0.8 - 0.125) and sd == pytest.approx(np.std([-0.2, -0.05], ddof=1))
    with pytest.raises(InvalidCurveError):
        NeighbourBeliefs(grid, [2], calibration_rows=[0, 1], n_neighbours=2)


def test_rank_confidence_forgets_stopped_trials():
    rule = RankConfidenceRule([1, 2], 0.5, k=1)
    assert rule.judge(0, 1, 0.5, 0.0) is False  # alone
    assert rule.judge(1, 1, 0.6, 0.0) is True  # 0 is better -> stop, and 1 is forgotten
    assert rule.judge(2, 1, 0.55, 0.0) is True  # only 0 (0.5) is better; 1 (0.6) no longer counts
    assert rule.judge(0, 2, 0.7, 0.0) is False  # 0 got worse but is the only trial left
