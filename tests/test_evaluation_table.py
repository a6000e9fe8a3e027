"""The simulate table: columns, PCR normalisation (hand-made rows), determinism, and the CLI."""

from __future__ import annotations

import math
import sys

import pandas as pd
import pytest
from click.testing import CliRunner

from spottune.evaluation import COLUMNS, make_table, ratio_table, summarise
from spottune.evaluation._table import empty_row


def _row(policy, start, cost, jct, **kw):
    return empty_row(policy=policy, workload="w", market_mode="legacy", start_index=start, start=f"s{start}",
                     seed=0, theta=1.0, cost_usd=cost, jct_h=jct, pcr=1.0 / (cost * jct), top1=1.0, top3=1.0,
                     regret=0.0, refunded_share=0.0, revocations=0, hops=0, lost_steps=0, ckpt_overhead_share=0.0,
                     **kw)


def test_columns_and_pcr_normalisation_are_exact():
    rows = [_row("single-cheapest", 0, 4.0, 10.0), _row("spottune-0.7", 0, 1.0, 5.0), _row("spottune-0.7", 1, 2.0, 2.0),
            _row("single-cheapest", 1, 8.0, 1.0)]
    t = make_table(rows)
    assert list(t.columns) == COLUMNS
    # spottune-0.7 first within each start only if listed first; order follows first appearance
    assert t["policy"].tolist() == ["single-cheapest", "spottune-0.7", "single-cheapest", "spottune-0.7"]
    norm = dict(zip(zip(t["policy"], t["start_index"]), t["pcr_norm"]))
    assert norm[("spottune-0.7", 0)] == 1.0 and norm[("spottune-0.7", 1)] == 1.0
    assert norm[("single-cheapest", 0)] == pytest.approx((1 / 40) / (1 / 5))  # 0.125
    assert norm[("single-cheapest", 1)] == pytest.approx((1 / 8) / (1 / 4))  # 0.5
    s = summarise(t)
    sc = s[s["policy"] == "single-cheapest"].iloc[0]
    assert sc["pcr_norm_mean"] == pytest.approx(0.3125) and sc["cost_usd_mean"] == 6.0 and sc["n"] == 2
    assert sc["cost_usd_sd"] == pytest.approx(math.sqrt(8.0))
    r = ratio_table(s)
    row = r[r["vs"] == "single-cheapest"].iloc[0]
    assert row["saving"] == pytest.approx(1 - 1.5 / 6.0) and row["jct_ratio"] == pytest.approx(5.5 / 3.5)


def test_missing_reference_gives_nan_and_failed_runs_are_left_out_of_summaries():
    rows = [_row("single-cheapest", 0, 4.0, 10.0), empty_row(policy="single-cheapest", workload="w",
            market_mode="legacy", start_index=1, start="s1", seed=0, theta=1.0, error="BackendError: x")]
    t = make_table(rows)
    assert t["pcr_norm"].isna().all()
    assert summarise(t)["n"].tolist() == [1]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A real `spottune simulate` on the 2015 trace: recorded AlexNet study cut to 8 steps, 1 start."""
    from spottune.cli import cli

    out = []
    for k in range(2):
        d = tmp_path_factory.mktemp(f"sim{k}")
        res = CliRunner().invoke(cli, ["simulate", "--workload", "opda-alexnet", "--max-steps", "8", "--policies",
                                       "spottune-0.7-hindsight,spottune-0.7-none,single-cheapest,on-demand,spot-restart,"
                                       "optuna-sha", "--start-times", "2015-05-05T00:00Z", "--output", str(d),
                                       "--no-progress"])
        assert res.exit_code == 0, res.output
        out.append(d)
    return out


def test_same_seed_gives_an_identical_table(tiny):
    a, b = (p / "table.csv" for p in tiny)
    assert a.read_text() == b.read_text()
    t = pd.read_csv(a)
    assert (t["error"].isna()).all() and len(t) == 6
    assert set(t["policy"]) >= {"spottune-0.7-hindsight", "on-demand"}
    assert (tiny[0] / "table.json").exists() and (tiny[0] / "summary.csv").exists()


def test_cli_rejects_an_unknown_workload_in_one_line(tmp_path, monkeypatch, capsys):
    from spottune.cli import main

    out_dir = tmp_path / "x"
    monkeypatch.setattr(sys, "argv", ["spottune", "simulate", "--workload", "nope", "--output", str(out_dir)])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("error: --workload is 'nope', but must be one of digits-mlp, gbt, linear-svm, linreg, logreg, "
                   "builtin-digits-mlp, builtin-linear-svm, builtin-logreg, cakelab-resnet32, opda-alexnet, opda-convnext "
                   "(a recorded study may name its size, opda-alexnet:64, and a half of its curves, opda-alexnet@test)\n")
    assert not out_dir.exists()
