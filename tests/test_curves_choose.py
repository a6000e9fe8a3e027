"""``spottune curves choose``: the θ barrier's (θ, keep) chosen on a family's own curves (docs/design/earlycurve.md §8.10)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from earlycurve import InvalidCurveError
from earlycurve.evaluation import load_curves
from earlycurve.evaluation._barrier import barrier_metrics, choose_barrier, rungs_metrics
from earlycurve.evaluation._stopping import Study
from spottune.cli import cli as main


def _write(path, curves, n=10):
    rows = ["config_id,step,value,max_steps"]
    for cid, vals in curves.items():
        rows += [f"{cid},{s},{v},{n}" for s, v in enumerate(vals, start=1)]
    path.write_text("\n".join(rows) + "\n")
    return path


def _crossing(path, n_curves=16):
    # curve i: loss i + 1 for steps 1-5, then 100 - i: the order reverses at step 6 (the early leader ends worst)
    return _write(path, {f"c{i:02d}": [i + 1.0] * 5 + [100.0 - i] * 5 for i in range(n_curves)})


def test_the_cheapest_setting_that_keeps_the_best_is_chosen_and_reported_on_test_studies(tmp_path):
    cs = load_curves(_crossing(tmp_path / "x.csv"))
    r = choose_barrier(cs, thetas=(0.3, 0.5, 0.6), keeps=(1,), n_tuning=6, n_test=4, study_size=4, target_top3=1.0,
                       n_steps=10)
    # θ 0.3 and 0.5 look at steps 3 and 5, before the crossing: the kept trial is the worst of its study (top-3 0);
    # θ 0.6 (step 6) is after it: always right. Cost (4 x 6 + 1 x 4) / 40 steps
    assert (r["theta"], r["keep"], r["met"]) == (0.6, 1, True)
    assert r["tuning"]["top3"] == 1.0 and r["tuning"]["top3_se"] == 0.0
    assert r["test"]["cost"] == pytest.approx(28 / 40) and r["test"]["regret"] == 0.0


def test_no_setting_reaching_the_target_falls_back_to_the_most_accurate(tmp_path):
    cs = load_curves(_crossing(tmp_path / "x.csv"))
    r = choose_barrier(cs, thetas=(0.3, 0.5), keeps=(1, 3), n_tuning=6, n_test=4, study_size=4, target_top3=1.0,
                       n_steps=10)
    # before the crossing, keep 3 of 4 drops only the true best: the pick is the second best (top-3 1, top-1 0)
    assert r["met"] is True and (r["theta"], r["keep"]) == (0.3, 3)
    assert r["test"]["top1"] == 0.0 and r["test"]["cost"] == pytest.approx((4 * 3 + 3 * 7) / 40)
    r = choose_barrier(cs, thetas=(0.3, 0.5), keeps=(1,), n_tuning=6, n_test=4, study_size=4, n_steps=10)
    assert r["met"] is False and r["tuning"]["top3"] == 0.0 and (r["theta"], r["keep"]) == (0.3, 1)  # cheaper tie


def test_the_ranking_at_theta_is_chosen_too_and_a_tie_keeps_the_last_value(tmp_path):
    # flat curves at distinct levels: both rankings keep the best from the first step, at the same cost
    cs = load_curves(_write(tmp_path / "flat.csv", {f"c{i:02d}": [1.0 + i] * 10 for i in range(16)}))
    kw = dict(thetas=(0.3, 0.5), keeps=(1, 2), n_tuning=6, n_test=4, study_size=4, target_top3=1.0, n_steps=10)
    both = choose_barrier(cs, rankings=("last-value", "paper"), **kw)
    assert (both["ranking"], both["stopper"], both["theta"], both["keep"]) == ("last-value", "barrier", 0.3, 1)
    assert both["test"]["top1"] == 1.0 and both["test"]["cost"] == pytest.approx((4 * 3 + 7) / 40)
    paper = choose_barrier(cs, rankings=("paper",), **kw)
    assert (paper["stopper"], paper["theta"], paper["keep"], paper["test"]["top1"]) == ("paper", 0.3, 1, 1.0)
    with pytest.raises(InvalidCurveError):
        choose_barrier(cs, rankings=("asha",), **kw)


def _four():
    # step-2 losses 2, 3, 1, 2 (trial 1 looks worst, trial 3 ties trial 0); step-5 losses of trials 0 and 2 tie at 4;
    # finals 0.5, 0.1, 0.3, 0.2: the true order is 1, 3, 2, 0
    curves = np.array([[2.0] * 4 + [4.0] * 5 + [0.5], [3.0] * 9 + [0.1], [1.0] * 4 + [4.0] * 5 + [0.3],
                       [2.0] * 9 + [0.2]])
    return Study(index=0, split="test", ids=np.arange(4), curves=curves)


def test_two_rungs_keep_the_lowest_last_values_with_ties_to_the_earlier_trial():
    st = _four()
    # rung 1 (step 2, keep 2): trial 2 (1.0), then trial 0 ahead of trial 3 (tie at 2.0, launched first);
    # rung 2 (step 5, keep 1): trials 0 and 2 tie at 4.0, trial 0 (launched first) finishes and is the pick (rank 3).
    # Steps 10 + 2 + 5 + 2 = (4 x 2 + 2 x 3 + 1 x 5) / 40
    m = rungs_metrics(st, [(2, 2), (5, 1)])
    assert m == {"cost": 19 / 40, "steps": 19.0, "top1": 0.0, "top3": 0.0, "regret": pytest.approx(0.4)}
    # a score per rung replaces the last value there: trial 2 now finishes (rank 2), at the same cost
    m = rungs_metrics(st, [(2, 2), (5, 1)], [None, np.array([9.0, 9.0, 0.0, 9.0])])
    assert (m["cost"], m["top3"], m["regret"]) == (19 / 40, 1.0, pytest.approx(0.2))
    # the single barrier is the one-rung case: trials 2 and 0 finish, the pick is trial 2, (4 x 2 + 2 x 8) / 40
    one = {"cost": 24 / 40, "steps": 24.0, "top1": 0.0, "top3": 1.0, "regret": pytest.approx(0.2)}
    assert rungs_metrics(st, [(2, 2)]) == one and barrier_metrics(st, 2, 2) == one


def test_bad_rungs_are_refused():
    st = _four()
    for rungs in ([], [(5, 1), (2, 2)], [(2, 2), (2, 1)], [(2, 2), (5, 2)], [(0, 2)], [(11, 1)], [(2, 0)]):
        with pytest.raises(InvalidCurveError):
            rungs_metrics(st, rungs)
    for scores in ([None], [None, np.zeros(3)]):
        with pytest.raises(InvalidCurveError):
            rungs_metrics(st, [(2, 2), (5, 1)], scores)


def test_two_rung_candidates_are_chosen_when_cheaper(tmp_path):
    cs = load_curves(_crossing(tmp_path / "x.csv"))
    kw = dict(thetas=(0.6,), keeps=(1,), n_tuning=6, n_test=4, study_size=4, target_top3=1.0, n_steps=10)
    single = choose_barrier(cs, **kw)
    assert (single["theta"], single["keep"], single["rungs"], single["test"]["cost"]) == (0.6, 1, [], pytest.approx(28 / 40))
    # keep 3 of 4 at step 1 or 3 (before the crossing) drops only the true best; keep 1 at step 6 (after it) then
    # finishes the second best: top-3 1, top-1 0. (0.3, 3, 0.32, 1) is skipped (both rungs at step 3).
    two = choose_barrier(cs, two_rung=True, two_rung_grid=[(0.3, 3, 0.6, 1), (0.1, 3, 0.6, 1), (0.3, 3, 0.32, 1)], **kw)
    assert (two["stopper"], two["theta"], two["keep"], two["rungs"], two["met"]) == ("barrier", 0.6, 1, [(0.1, 3)], True)
    assert two["test"]["cost"] == pytest.approx((4 * 1 + 3 * 5 + 1 * 4) / 40)
    assert (two["test"]["top3"], two["test"]["top1"], two["tuning"]["top3_se"]) == (1.0, 0.0, 0.0)
    for grid in ([(0.3, 4, 0.6, 1)], [(0.3, 2, 0.6, 2)], [(0.6, 3, 0.3, 1)], [(0.3, 3, 1.0, 1)]):
        with pytest.raises(InvalidCurveError):
            choose_barrier(cs, two_rung=True, two_rung_grid=grid, **kw)


def test_bad_grids_and_too_few_curves_are_refused(tmp_path):
    cs = load_curves(_crossing(tmp_path / "x.csv"))
    for kw in ({"thetas": (1.0,)}, {"keeps": (16,)}, {"thetas": ()}, {"target_top3": 0.0}, {"n_tuning": 0}):
        with pytest.raises(InvalidCurveError):
            choose_barrier(cs, **kw)
    with pytest.raises(InvalidCurveError):
        choose_barrier(cs, study_size=12, keeps=(2,))  # 16 curves: two halves of 8 cannot hold studies of 12


def test_cli_prints_the_flags_and_writes_json(tmp_path):
    path = _crossing(tmp_path / "x.csv")
    res = CliRunner().invoke(main, ["curves", "choose", str(path), "--study-size", "4", "--tuning-studies", "6",
                                    "--test-studies", "4", "--json", str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    # keeps 2-6 below 4 trials: 2 and 3. At θ 0.04 (step 1, before the crossing) keep 2 drops the two best, and the
    # pick is the third best: top-3 all the same, at (4 x 1 + 2 x 9) / 40 steps
    assert "--stopper barrier --theta 0.04 --top-k 2" in res.output and "cost 0.550" in res.output
    assert json.loads((tmp_path / "c.json").read_text())["x"]["keep"] == 2
    bad = CliRunner().invoke(main, ["curves", "choose", str(path), "--target-top3", "1.5"])
    assert bad.exit_code == 2 and "target_top3" in bad.output


def test_cli_two_rung_prints_the_rungs_flag(tmp_path):
    # curve i: loss i + 1 for steps 1-4, then 100 - i: the early leader ends worst, the order is true from step 5 (θ 0.5)
    path = _write(tmp_path / "y.csv", {f"c{i:02d}": [i + 1.0] * 4 + [100.0 - i] * 6 for i in range(16)})
    args = ["curves", "choose", str(path), "--study-size", "5", "--tuning-studies", "6", "--test-studies", "4"]
    # single barrier (keeps 2-4): before step 5 keep k finishes the k worst, the pick has rank 5 - k, so keep 3 at
    # step 1 is the cheapest with top-3 1: (5 x 1 + 3 x 9) / 50
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0 and "--stopper barrier --theta 0.04 --top-k 3" in res.output and "cost 0.640" in res.output
    # two rungs (keep1 4 of 5, the only keep1 below 5): step 1 drops the true best, step 5 finishes the two best of the
    # other four: top-3 1 at (5 x 1 + 4 x 4 + 2 x 5) / 50, the cheapest (θ1 0.04, 0.06 and 0.1 are all step 1: the first)
    res = CliRunner().invoke(main, [*args, "--two-rung", "--json", str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    assert "--stopper barrier --rungs 0.04:4 --theta 0.5 --top-k 2" in res.output and "cost 0.620" in res.output
    r = json.loads((tmp_path / "c.json").read_text())["y"]
    assert (r["rungs"], r["theta"], r["keep"], r["test"]["top1"]) == ([[0.04, 4]], 0.5, 2, 0.0)
