"""The benchmarks' top-3 rates come with an exact interval over the test studies (benchmarks/_common.py,
benchmarks/bench_rungs_usd.py)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _module(name):
    sys.path.insert(0, str(BENCH))  # the benchmark scripts import their sibling _common
    try:
        spec = importlib.util.spec_from_file_location(f"_t_{name}", BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_rate_interval_is_clopper_pearson():
    common = _module("_common")
    # 20 of 20: the lower bound solves p^20 = 0.025; 0 of 20: the upper bound solves (1 - p)^20 = 0.025
    assert common.rate_interval(20, 20) == pytest.approx((0.025 ** (1 / 20), 1.0))
    assert common.rate_interval(0, 20) == pytest.approx((0.0, 1 - 0.025 ** (1 / 20)))
    lo, hi = common.rate_interval(19, 20)  # "top-3 0.95" on 20 studies
    assert lo == pytest.approx(0.75127, abs=1e-5) and hi == pytest.approx(0.99873, abs=1e-5)
    assert all(math.isnan(x) for x in common.rate_interval(0, 0))
    with pytest.raises(ValueError):
        common.rate_interval(3, 2)


def test_the_usd_target_reports_the_top3_interval_of_ours_and_the_bar():
    bench = _module("bench_rungs_usd")
    rows = ([{"policy": "ours-p", "seed": s, "cost_usd": 1.0, "pick_top3": float(s != 0)} for s in range(20)]
            + [{"policy": "peer-p", "seed": s, "cost_usd": 2.0, "pick_top3": 1.0} for s in range(20)])
    summary = {"ours-p": {"role": "ours", "cost_usd": 1.0, "pick_top3": 0.95},
               "peer-p": {"role": "tuned here", "cost_usd": 2.0, "pick_top3": 1.0}}
    t = bench.target(summary, rows)["ours"]
    assert (t["top3_hits"], t["top3_n"], t["peer"], t["ratio"]) == (19, 20, "peer-p", 0.5)
    assert t["top3_ci95"] == pytest.approx([0.75127, 0.99873], abs=1e-5)
    assert t["peer_top3_ci95"] == pytest.approx([0.025 ** (1 / 20), 1.0])
    assert bench._top3_cell(rows, "ours-p") == "0.95 (19/20; 0.75-1.00)"


def test_the_wider_peer_grid_takes_the_cheapest_setting_at_the_top3_bar():
    grid = _module("bench_peer_grid")
    stored = ([{"policy": "optuna-sha-r1-rf4", "cost_usd": 2.0, "pick_top3": 1.0}] * 20
              + [{"policy": "spottune-0.2 --top-k 2", "cost_usd": 1.5, "pick_top3": 1.0}] * 20)
    new = ([{"policy": "optuna-sha-r1-rf5", "cost_usd": 1.8, "pick_top3": float(i > 0)} for i in range(20)]  # 19/20
           + [{"policy": "optuna-sha-r1-rf8", "cost_usd": 1.0, "pick_top3": float(i > 1)} for i in range(20)])  # 18/20
    target = {"policy": "spottune-0.2 --top-k 2", "cost_usd": 1.5, "peer": "optuna-sha-r1-rf4", "ratio": 0.75}
    s = grid.summarise("w", stored, new, target)
    assert s["bar"] == "optuna-sha-r1-rf5" and (s["bar_cost_usd"], s["ratio"]) == pytest.approx((1.8, 1.5 / 1.8))
    assert s["settings"]["optuna-sha-r1-rf8"]["top3_hits"] == 18 and "spottune-0.2 --top-k 2" not in s["settings"]
    assert s["settings"]["optuna-sha-r1-rf5"]["top3_ci95"] == pytest.approx([0.75127, 0.99873], abs=1e-5)


def test_keep_picks_tests_an_earlier_runs_picks_on_another_provisioning_only_if_every_tuning_row_is_stored(tmp_path):
    bench = _module("bench_rungs_usd")
    tune = [(100, "2015-05-27T12:00Z"), (101, "2015-07-12T12:00Z")]
    reuse = {("w", seed, start, name): {} for seed, start in tune for name in ("optuna-sha-r1-rf2", "ours")}
    bench.require_tuning_rows(reuse, "w", tune, ["optuna-sha-r1-rf2", "ours"])  # all stored: nothing replayed
    del reuse[("w", 101, "2015-07-12T12:00Z", "ours")]
    with pytest.raises(SystemExit, match=r"1 tuning rows of w .*first: 'ours', seed 101"):
        bench.require_tuning_rows(reuse, "w", tune, ["optuna-sha-r1-rf2", "ours"])
    old = tmp_path / "old.json"
    old.write_text('{"config": {"provisioning": "spottune"}, "rows": [], "tuning_rows": []}')
    argv = ["--retest", str(old), "--provisioning", "restart", "--workloads", "opda-alexnet", "--out", str(tmp_path / "o")]
    with pytest.raises(SystemExit, match="another provisioning than restart .*--keep-picks"):
        bench.main(argv)
    with pytest.raises(SystemExit) as exc:  # --keep-picks needs the run whose picks it keeps
        bench.main(["--keep-picks", "--provisioning", "restart", "--out", str(tmp_path / "o")])
    assert exc.value.code == 2 and not (tmp_path / "o").exists()


def test_halves_draw_the_tuning_studies_from_one_half_and_refuse_rows_of_the_whole_files(tmp_path, monkeypatch):
    bench = _module("bench_rungs_usd")
    asked = []

    # simulate_all is replaced by a recorder: a real replay takes about 8 s per study, and what is checked here is only
    # which study the bench asks for; the halves themselves are tested on the real curve files
    # (tests/test_evaluation_studies.py)
    def simulate_all(workload, *args, **kwargs):
        asked.append(workload)
        raise StopIteration

    import spottune.cli._simulate as sim

    monkeypatch.setattr(sim, "simulate_all", simulate_all)
    for seed in (100, 19):
        with pytest.raises(StopIteration):
            bench._rows("builtin-logreg", seed, "2015-05-05T00:00Z", ["optuna-sha"], 1, halves=True)
    assert asked == ["builtin-logreg@tuning", "builtin-logreg@test"]
    old = tmp_path / "old.json"
    old.write_text('{"config": {"provisioning": "spottune"}, "rows": [], "tuning_rows": []}')
    with pytest.raises(SystemExit, match="drew its studies from the curve files, this run from their halves"):
        bench.main(["--halves", "--reuse", str(old), "--workloads", "builtin-logreg", "--out", str(tmp_path / "o")])
    assert not (tmp_path / "o").exists()
