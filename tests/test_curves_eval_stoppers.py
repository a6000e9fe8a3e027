"""``spottune curves eval`` reports the early stoppers for any curve file."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from earlycurve.evaluation import load_curves
from earlycurve.evaluation._compare import STOPPER_METHODS, barrier_rows, compare_stoppers
from spottune.cli import cli as main


def _flat_curves(path, levels=(0.9, 0.5, 0.7, 0.3), n=10):
    rows = ["config_id,step,value,max_steps"]
    for i, level in enumerate(levels):
        rows += [f"c{i},{s},{level},{n}" for s in range(1, n + 1)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_compare_stoppers_on_flat_curves_is_hand_computable(tmp_path):
    cs = load_curves(_flat_curves(tmp_path / "flat.csv"))
    r = compare_stoppers(cs, theta=0.5, top_k=1, n_studies=3, study_size=4, workers=4,
                         methods=("last-value", "full", "rank", "paper"))
    m = {k: v["summary"] for k, v in r["methods"].items()}
    assert r["n_steps"] == 10 and r["study_size"] == 4
    # last value at 5 of 10 steps, keep 1: 3 trials x 5 + 1 x 10 = 25 of 40 steps; always the best
    assert m["last-value"]["cost"]["mean"] == pytest.approx(25 / 40) and m["last-value"]["top1"]["mean"] == 1.0
    assert m["full"]["cost"]["mean"] == 1.0 and m["full"]["regret"]["mean"] == 0.0
    # no trial is ever lower than the best, so the rank rule never stops it; EarlyCurve sees a plateau
    assert m["rank"]["top1"]["mean"] == 1.0 and m["paper"]["top1"]["mean"] == 1.0
    assert m["rank"]["cost"]["mean"] < 1.0


def test_barrier_rows_pair_the_same_studies_and_rank_crossing_curves_differently(tmp_path):
    # a: 0.9 until step 5, then 0.1 (ends best); b: flat 0.5; c: flat 0.6; d: flat 0.7. At θ 0.5 (step 5 of 10)
    # the last value keeps b (drops the true best a); both methods train 4 x 5 + 1 x 5 = 25 of 40 steps
    rows = ["config_id,step,value,max_steps"]
    for cid, vals in {"a": [0.9] * 5 + [0.1] * 5, "b": [0.5] * 10, "c": [0.6] * 10, "d": [0.7] * 10}.items():
        rows += [f"{cid},{s},{v},10" for s, v in enumerate(vals, start=1)]
    (tmp_path / "x.csv").write_text("\n".join(rows) + "\n")
    cs = load_curves(tmp_path / "x.csv")
    last = barrier_rows(cs, "last-value", theta=0.5, top_k=1, n_studies=2, study_size=4)
    assert [(r["top1"], r["cost"]) for r in last] == [(0.0, 25 / 40)] * 2
    assert [r["regret"] for r in last] == pytest.approx([0.4, 0.4])  # kept b (0.5) instead of a (0.1)
    paper = barrier_rows(cs, "paper", theta=0.5, top_k=1, n_studies=2, study_size=4)
    assert [r["cost"] for r in paper] == [25 / 40] * 2  # same barrier, same steps
    from earlycurve import InvalidCurveError

    with pytest.raises(InvalidCurveError):
        barrier_rows(cs, "asha")
    with pytest.raises(InvalidCurveError):
        barrier_rows(cs, "paper", theta=0.0)


def test_predictive_keeps_the_flat_best_and_stops_the_others_by_the_second_rung(tmp_path):
    cs = load_curves(_flat_curves(tmp_path / "flat.csv"))
    r = compare_stoppers(cs, theta=0.5, top_k=1, n_studies=3, study_size=4, workers=4, methods=("predictive",))
    m = r["methods"]["predictive"]["summary"]
    # defaults: rungs 1 and 2 of 10 (4 %, 20 %), keep 3/4 then 1/2. At rung 1 of 4 trials 3 must be lower: only
    # 0.9 stops (step 1 or 2); at rung 2 half must be lower: 0.7 stops (step 2 or 3); 0.5 and 0.3 run to the end.
    # Launch orders of the 3 studies: (0.5 0.9 0.7 0.3) -> 10+2+3+10, (0.7 0.9 0.5 0.3) -> 3+2+10+10,
    # (0.3 0.7 0.5 0.9) -> 10+2+10+1 steps of 40
    assert m["top1"]["mean"] == 1.0
    assert m["cost"]["mean"] == pytest.approx((25 + 25 + 23) / 120)


def test_unknown_method_and_too_few_curves_are_refused(tmp_path):
    from earlycurve import InvalidCurveError

    cs = load_curves(_flat_curves(tmp_path / "flat.csv"))
    with pytest.raises(InvalidCurveError):
        compare_stoppers(cs, methods=("nope",))
    with pytest.raises(InvalidCurveError):
        compare_stoppers(cs, top_k=4)


def test_cli_prints_and_writes_the_stopper_table(tmp_path):
    f = _flat_curves(tmp_path / "my_curves.csv", levels=(0.9, 0.5, 0.7, 0.3, 0.8, 0.6))
    out = tmp_path / "o.json"
    res = CliRunner().invoke(main, ["curves", "eval", str(f), "--top-k", "2", "--studies", "5", "--no-sweep",
                                    "--stopper-studies", "3", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "early stopping (3 studies of 6, 4 workers, grid of 10 steps" in res.output
    for m in STOPPER_METHODS:
        assert f"\n  {m.ljust(12)}" in res.output
    data = json.loads(out.read_text())["datasets"]["my"]["stoppers"]
    assert list(data["methods"]) == list(STOPPER_METHODS)
    assert np.isclose(data["methods"]["full"]["summary"]["cost"]["mean"], 1.0)
    res = CliRunner().invoke(main, ["curves", "eval", str(f), "--top-k", "2", "--studies", "5", "--no-sweep",
                                    "--no-stoppers"])
    assert res.exit_code == 0 and "early stopping" not in res.output
