"""The public Python API (``spottune.tune`` -> ``ResultGrid``) and the one composition root behind it.

The runs use the simulator and the constant-hazard predictor (RevPred would train for minutes in the
test session's empty model cache); every draw is seeded by the spec's ``seed``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import spottune
from spottune import ExperimentSpec, ResultGrid
from spottune.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
T0 = "2015-05-05T00:00Z"
#: A small, cheap experiment: logreg, 4 configs, 40 steps, 2 kept at θ, two markets.
SMALL = dict(workload="logreg", search_space={"lr": {"grid_search": [0.01, 0.05, 0.2, 0.8]}}, max_steps=40,
             theta=0.5, top_k=2, predictor="constant", instance_types=["r3.large", "c3.xlarge"],
             availability_zones=["us-east-1a"], seed=7)


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """The default experiment (digits-mlp, 16 configs, 15 markets) at S_max = 60."""
    return spottune.tune(max_steps=60, predictor="constant", output=tmp_path_factory.mktemp("tune") / "res")


def test_default_tune_gives_one_row_per_trial_with_config_columns(grid):
    df = grid.get_dataframe()
    assert list(df.columns) == [
        "trial_id", "config/batch_size", "config/hidden", "config/lr", "state", "steps", "metric", "metric_kind",
        "predicted", "predicted_low", "predicted_high", "selected", "rank", "usd", "refunded_usd", "revocations",
        "hops", "failures", "lost_steps", "instances", "markets_used"]
    assert len(df) == len(grid) == 16 and list(df["trial_id"]) == [f"t{i:02d}" for i in range(16)]
    configs = {t.trial_id: t.config for t in ExperimentSpec(max_steps=60).trials()}
    for row in df.itertuples(index=False):
        assert {"batch_size": row[1], "hidden": row[2], "lr": row[3]} == configs[row.trial_id]
    # θ = 0.7 of 60 steps = 42 for every trial; the top 3 run on to 60
    assert sorted(df["steps"]) == [42] * 13 + [60] * 3
    assert (df["state"] == "finished").sum() == 3 and (df["state"] == "stopped_early").sum() == 13
    assert df["usd"].sum() == pytest.approx(grid.summary["total_cost_usd"], rel=1e-12)
    assert df["refunded_usd"].sum() == pytest.approx(grid.summary["refunded_usd"], abs=1e-12)
    assert grid.path.is_dir() and (grid.path / "summary.json").exists()
    assert grid.summary["settings"]["max_steps"] == 60 and grid.summary["settings"]["predictor"].startswith(
        "constant hazard per market fitted on 4 days")


def test_ledger_has_one_row_per_instance_run(grid):
    ledger = grid.ledger
    assert len(ledger) == grid.summary["instances"] == int(grid.get_dataframe()["instances"].sum())
    assert ledger["charged_usd"].sum() == pytest.approx(grid.summary["total_cost_usd"], rel=1e-12)
    assert set(ledger["trial_id"]) == {f"t{i:02d}" for i in range(16)}
    assert int(ledger["steps"].sum()) == grid.summary["steps_executed"]


def test_best_result_is_the_min_of_the_finished_trials(grid):
    df = grid.get_dataframe()
    done = df[df["state"] == "finished"]
    by_hand = done.loc[done["metric"].idxmin()]
    best = grid.get_best_result()
    assert (best.trial_id, best.value, best.state) == (by_hand["trial_id"], by_hand["metric"], "finished")
    assert best.trial_id == df.loc[df["rank"] == 1, "trial_id"].item()  # the orchestrator's top-1
    assert best.metric == "val_cross_entropy" and best.metrics == {"val_cross_entropy": by_hand["metric"]}
    assert best.config == json.loads(pd.read_csv(grid.path / "trials.csv").set_index("trial_id")
                                     .loc[best.trial_id, "config"])
    assert (best.usd, best.refunded_usd, best.steps) == (by_hand["usd"], by_hand["refunded_usd"], 60)
    assert best.path == grid.path
    assert grid.get_best_result(metric="val_cross_entropy", mode="min") == best


def test_mode_max_flips_the_choice(grid):
    df = grid.get_dataframe()
    done = df[df["state"] == "finished"]
    worst = grid.get_best_result(mode="max")
    assert worst.trial_id == done.loc[done["metric"].idxmax(), "trial_id"]
    assert worst.value == done["metric"].max() > grid.get_best_result().value


def test_bad_mode_metric_or_no_finished_trial_raise(grid, tmp_path):
    with pytest.raises(ValueError, match="mode is 'median', but must be 'min' or 'max'"):
        grid.get_best_result(mode="median")
    with pytest.raises(ValueError, match="metric is 'accuracy', but this run recorded only 'val_cross_entropy'"):
        grid.get_best_result(metric="accuracy")
    copy = tmp_path / "copy"
    shutil.copytree(grid.path, copy)
    trials = pd.read_csv(copy / "trials.csv")
    trials["state"] = trials["state"].replace("finished", "failed")
    trials.to_csv(copy / "trials.csv", index=False)
    with pytest.raises(ValueError, match="no finished trial with a 'val_cross_entropy' value"):
        ResultGrid.from_path(copy).get_best_result()


def test_from_path_round_trips(grid):
    back = ResultGrid.from_path(grid.path)
    pd.testing.assert_frame_equal(back.get_dataframe(), grid.get_dataframe())
    pd.testing.assert_frame_equal(back.ledger, grid.ledger)
    assert back.summary == grid.summary and back.path == grid.path and len(back) == 16
    assert back.get_best_result() == grid.get_best_result()
    assert [r.trial_id for r in back] == [r.trial_id for r in grid] == list(grid.get_dataframe()["trial_id"])
    assert back[0].config == grid[0].config == ExperimentSpec(max_steps=60).trials()[0].config
    with pytest.raises(ConfigError, match="not a spottune results folder"):
        ResultGrid.from_path(grid.path / "nope")


def test_spec_and_keywords_give_identical_results(tmp_path):
    calls = []
    a = spottune.tune(ExperimentSpec(**SMALL), output=tmp_path / "a",
                      progress=lambda now_s, orch, usd: calls.append(usd))
    b = spottune.tune(output=tmp_path / "b", **SMALL)
    fa = a.get_dataframe()
    assert len(fa) == 4 and list(fa["config/lr"]) == [0.01, 0.05, 0.2, 0.8] and fa["usd"].sum() > 0
    pd.testing.assert_frame_equal(fa, b.get_dataframe())
    pd.testing.assert_frame_equal(a.ledger, b.ledger)
    assert a.summary["total_cost_usd"] == b.summary["total_cost_usd"]
    # a callable progress hears every event, with the USD spent so far
    assert len(calls) == a.summary["events"] and calls[-1] == a.summary["total_cost_usd"]
    # options given beside a spec override it
    c = spottune.tune(ExperimentSpec(**{**SMALL, "top_k": 1}), output=tmp_path / "c", top_k=2)
    pd.testing.assert_frame_equal(c.get_dataframe(), fa)


def test_bad_options_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="option 'tehta' is unknown; did you mean 'theta'"):
        spottune.tune(tehta=0.5, output=tmp_path / "x")
    with pytest.raises(ConfigError, match="theta is 1.5, but must be 0 < theta <= 1"):
        spottune.tune(theta=1.5, output=tmp_path / "x")
    with pytest.raises(ConfigError, match="spec is a str, but must be an ExperimentSpec"):
        spottune.tune("digits-mlp", output=tmp_path / "x")
    with pytest.raises(ConfigError, match="backend aws needs aws.bucket"):
        spottune.tune(backend="aws", output=tmp_path / "x")
    assert not (tmp_path / "x").exists()  # refused before anything was run or written


@pytest.mark.process
def test_import_spottune_is_light_and_exports_the_api():
    code = "import sys, spottune; print('torch' in sys.modules, sorted(spottune.__all__))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split(" ", 1)
    assert out[0] == "False"
    assert eval(out[1]) == ["ConfigError", "ExperimentSpec", "Result", "ResultGrid", "SpottuneError", "Trainable",
                            "choice", "grid_search", "loguniform", "randint", "tune", "uniform"]


# -- the composition root -------------------------------------------------------------------------------------
def test_market_mode_maps_to_its_revocation_model():
    from spotmarket import LegacyBidRevocation, ModernHazardRevocation
    from spotmarket.prices import load_history
    from spottune.compose import revocation_model

    history = load_history(None)
    assert type(revocation_model("legacy", history, 0)) is LegacyBidRevocation
    assert type(revocation_model("modern", history, 0)) is ModernHazardRevocation
    with pytest.raises(ConfigError, match="market_mode is 'future', but must be one of legacy, modern"):
        revocation_model("future", history, 0)


def test_run_tune_and_simulate_take_the_revocation_model_from_the_one_switch(monkeypatch):
    """``spottune run`` / ``tune()`` (``spottune.compose.build``) and ``spottune simulate`` (``environment``) both call it."""
    import spottune.compose as compose
    import spottune.compose.market as market_module
    from spottune.evaluation._runner import environment

    seen = []
    real = market_module.revocation_model

    def spy(mode, history, seed):
        seen.append((mode, seed))
        return real(mode, history, seed)

    monkeypatch.setattr(market_module, "revocation_model", spy)
    exp = compose.build(ExperimentSpec(**{**SMALL, "market_mode": "modern"}))
    env = environment.__wrapped__("opda-alexnet", 3, "legacy", None, 8)  # not the process-wide cached one
    assert seen == [("modern", 7), ("legacy", 3)]
    assert exp.backend.revocation_model is exp.market.revocation_model
    assert env["revocations"] is env["market"].revocation_model


def test_no_other_module_builds_a_revocation_model():
    """The market-mode switch exists once: outside spotmarket, only the root calls the models' constructors."""
    hits = []
    for pkg in ("spottune", "provisioner", "earlycurve", "revpred"):
        for path in (ROOT / pkg).rglob("*.py"):
            if path.relative_to(ROOT).as_posix() == "spottune/compose/market.py" or path.relative_to(ROOT).as_posix() == "revpred/ladder.py":
                continue  # ladder.py labels queries by the legacy rule itself: a label definition, not a mode switch
            text = path.read_text()
            if "LegacyBidRevocation(" in text or "ModernHazardRevocation(" in text:
                hits.append(str(path.relative_to(ROOT)))
    assert hits == []


def test_one_constant_predictor_equals_the_model_sets_constant():
    """``constant`` for run, tune and simulate: the model set's D1 (random max price) hazard, without training."""
    from revpred.training import TrainConfig, train_markets
    from spotmarket.prices import to_seconds
    from spottune.compose import build_market, constant_hazard, make_predictor
    from spottune.cache import LIGHT_REVPRED
    from spottune.evaluation._predictors import evaluation_predictor

    market = build_market(None, market_mode="legacy", seed=0, instance_types=["r3.large", "m3.medium"],
                          availability_zones=["us-east-1a", "us-east-1b"])
    hi = float(to_seconds(T0))
    lo = hi - 4 * 86400.0
    model_set = train_markets(market.history, market.markets, lo, hi, TrainConfig(seed=5, **LIGHT_REVPRED),
                              kinds=("constant",))
    expected = model_set.predictor("constant", rule="random").hazards_per_hour
    assert constant_hazard(market.history, market.markets, lo, hi, 5).hazards_per_hour == expected
    run_pred, desc = make_predictor("constant", market, lo, hi, 5)
    assert run_pred.hazards_per_hour == expected
    assert desc == "constant hazard per market fitted on 4 days before the start"
    assert evaluation_predictor("constant", market, lo, hi, 5).hazards_per_hour == expected
    with pytest.raises(ConfigError, match="predictor is 'magic', but must be one of"):
        make_predictor("magic", market, lo, hi, 5)
