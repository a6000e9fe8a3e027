"""The orchestrator's early stopping: ``stopper`` (spec field, ``--stopper``), the ``barrier`` default, ``paper``, ``rank``."""

from __future__ import annotations

import pytest

from earlycurve import EarlyCurve, LastValue
from spottune import ExperimentSpec
from spottune._early_stop import RankStopRule, early_stopping
from spottune.errors import ConfigError
from spottune.evaluation import get_policy, parse_policies


def test_rank_uses_the_rungs_below_theta_and_the_last_value_at_theta():
    fmp, plateau, rule = early_stopping("rank", max_steps=60, theta_steps=42, top_k=3)
    assert isinstance(fmp, LastValue) and plateau is not None
    assert isinstance(rule, RankStopRule) and rule.rule.rungs == (6, 12, 24)  # 10, 20, 40 % of 60; 70 % = θ


def test_paper_is_earlycurve_at_theta_without_rungs_and_theta_one_stops_nothing():
    fmp, plateau, rule = early_stopping("paper", max_steps=60, theta_steps=42, top_k=3)
    assert isinstance(fmp, EarlyCurve) and rule is None and plateau is not None
    assert early_stopping("rank", max_steps=60, theta_steps=60, top_k=3)[2] is None  # θ = 1: train everything
    with pytest.raises(ValueError):
        early_stopping("nope", 60, 42, 3)


def test_stop_rule_records_completions_and_stops_in_cohort_mode():
    rule = RankStopRule((2,), max_steps=4, top_k=1)
    assert rule.should_stop("a", 2, 0.5) is False
    assert rule.should_stop("b", 2, 0.9) is True       # a was lower at the rung
    assert rule.should_stop("a", 4, 0.4) is False      # the final step: recorded as finished, never stopped
    assert rule.rule.stopped == {"b": 2}


def test_spec_field_and_policy_option():
    assert ExperimentSpec().stopper == "barrier" and ExperimentSpec(stopper="rank").stopper == "rank"  # ES18
    with pytest.raises(ConfigError, match="stopper"):
        ExperimentSpec(stopper="asha")
    assert get_policy("spottune-0.7").stopper == "barrier"
    assert get_policy("spottune-0.7", "refund", "rank").stopper == "rank"
    assert get_policy("spottune-0.7-constant-paper", "paper", "paper").stopper == "paper"
    # a -paper name is the paper's design throughout (Eq 2, D1, EarlyCurve), whatever the stopper option says
    assert get_policy("spottune-0.7-revpred-paper").stopper == "paper"
    assert get_policy("spottune-0.7-paper", "refund", "rank").stopper == "paper"
    assert get_policy("spottune-0.7", "paper", "barrier").stopper == "barrier"  # the objective option is not the name
    assert {p.stopper for p in parse_policies("spottune-0.5,spottune-0.7", stopper="paper")} == {"paper"}
    with pytest.raises(ConfigError):
        get_policy("spottune-0.7", "refund", "asha")


def test_rank_stops_trials_at_its_rungs_in_the_default_experiment(tmp_path):
    import spottune

    df = spottune.tune(max_steps=60, predictor="constant", stopper="rank", output=tmp_path / "res").get_dataframe()
    # rungs 6, 12, 24 (10, 20, 40 % of 60) before θ = 0.7 of 60 = 42; of those reaching 42, the top 3 run to 60
    assert sorted(df["steps"]) == [6] * 8 + [12] * 2 + [24] + [42] * 2 + [60] * 3
    assert (df["state"] == "finished").sum() == 3


def test_predictive_uses_its_rungs_below_theta_and_the_last_value_at_theta():
    from earlycurve import PREDICTIVE_DEFAULTS, PredictiveStopping

    fmp, plateau, rule = early_stopping("predictive", max_steps=60, theta_steps=42, top_k=3)
    assert isinstance(fmp, LastValue) and plateau is not None
    assert isinstance(rule.rule, PredictiveStopping) and rule.rule.rungs == (2, 12)  # 4 %, 20 % of 60
    assert (rule.rule.keep_first, rule.rule.keep) == (PREDICTIVE_DEFAULTS["keep_first"], PREDICTIVE_DEFAULTS["keep"])
    assert early_stopping("predictive", max_steps=60, theta_steps=60, top_k=3)[2] is None  # θ = 1
    assert ExperimentSpec(stopper="predictive").stopper == "predictive"


def test_predictive_stops_trials_in_the_default_experiment(tmp_path):
    import spottune

    df = spottune.tune(max_steps=60, predictor="constant", stopper="predictive", output=tmp_path / "res").get_dataframe()
    # every trial runs in parallel: rung 2 stops the 4 with 12 of 16 lower (at step 2 or, re-judged, 3), rung 12
    # (half of the arrivals so far must be lower, re-judged at each step) 7 more at step 12 or 13; 5 reach θ = 42,
    # where the last value's top 3 run to 60
    assert sorted(df["steps"]) == [2, 2, 3, 3] + [12] * 5 + [13, 13] + [42, 42] + [60] * 3
    assert (df["state"] == "finished").sum() == 3


# -- stopper_curves: the top-k at θ ranked by a predictor learned from previous runs (docs/design/earlycurve.md §8.7) --

DIGITS_CURVES = "data/learning_curves/builtin/builtin_digits-mlp_curves.csv.gz"  # 128 random-search digits-mlp runs


def _curves_path():
    from pathlib import Path

    return str(Path(__file__).resolve().parents[1] / DIGITS_CURVES)


def test_stopper_curves_spec_field_is_checked():
    assert ExperimentSpec().stopper_curves is None
    assert ExperimentSpec(stopper="rank", stopper_curves="x.csv").stopper_curves == "x.csv"
    with pytest.raises(ConfigError, match="stopper_curves"):
        ExperimentSpec(stopper="paper", stopper_curves="x.csv")  # paper ranks by EarlyCurve
    with pytest.raises(ConfigError, match="stopper_curves"):
        ExperimentSpec(stopper="rank", stopper_curves="")


def test_learned_final_predictor_ranks_at_theta_and_bad_files_are_config_errors(tmp_path):
    import math

    from earlycurve import ResidualCurvePredictor
    from spottune._early_stop import learned_final_predictor

    model = learned_final_predictor(_curves_path(), seed=0)
    assert isinstance(model, ResidualCurvePredictor) and len(model.alpha_) == 9
    # digits-mlp: the largest cross-validated gain, alpha 1000 at θ 0.1 (0.825 against the last value's 0.63), is 1.39
    # standard errors, under the default guard's 1.5, so every θ keeps the last value's ranking
    assert model.cv_recall_[0.1][1000.0] == pytest.approx(0.825) and model.cv_recall_[0.1][math.inf] == pytest.approx(0.63)
    assert 1.0 < (0.825 - 0.63) / model.cv_gain_se_[0.1][1000.0] < 1.5
    assert all(a == math.inf for a in model.alpha_.values())
    for stopper in ("rank", "predictive"):
        fmp, _, _ = early_stopping(stopper, max_steps=60, theta_steps=42, top_k=3, final_predictor=model)
        assert fmp is model
    assert isinstance(early_stopping("paper", 60, 42, 3, final_predictor=model)[0], EarlyCurve)
    with pytest.raises(ConfigError, match="stopper_curves"):
        learned_final_predictor(str(tmp_path / "missing.csv"))
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ConfigError, match="stopper_curves"):
        learned_final_predictor(str(bad))


def test_stopper_curves_in_the_default_experiment_falls_back_to_the_last_values_ranking(tmp_path):
    import spottune
    from earlycurve import ResidualCurvePredictor
    from spottune.compose import build

    spec = ExperimentSpec(max_steps=60, predictor="constant", stopper="rank", stopper_curves=_curves_path())
    assert isinstance(build(spec, output=tmp_path / "built").orchestrator.predictor, ResidualCurvePredictor)
    plain = ExperimentSpec(max_steps=60, predictor="constant", stopper="rank")
    assert isinstance(build(plain, output=tmp_path / "b2").orchestrator.predictor, LastValue)
    df = spottune.tune(max_steps=60, predictor="constant", stopper="rank", stopper_curves=_curves_path(),
                       output=tmp_path / "res").get_dataframe()
    # at θ 0.7 the learned model has no coefficient on digits-mlp (alpha inf), so it keeps the same top 3 as
    # the last value: the same steps as test_rank_stops_trials_at_its_rungs_in_the_default_experiment
    assert sorted(df["steps"]) == [6] * 8 + [12] * 2 + [24] + [42] * 2 + [60] * 3
    assert (df["state"] == "finished").sum() == 3


def test_barrier_is_the_last_value_at_theta_without_rungs(tmp_path):
    import spottune

    fmp, plateau, rule = early_stopping("barrier", max_steps=60, theta_steps=9, top_k=3)
    assert isinstance(fmp, LastValue) and plateau is not None and rule is None
    assert ExperimentSpec(stopper="barrier", stopper_curves="x.csv").stopper_curves == "x.csv"
    df = spottune.tune(max_steps=60, theta=0.15, predictor="constant", stopper="barrier",
                       output=tmp_path / "res").get_dataframe()
    # θ = 0.15 of 60 = 9 steps for all 16 trials; the 3 lowest last values at step 9 run to 60 (docs/design/earlycurve.md §8.10)
    assert sorted(df["steps"]) == [9] * 13 + [60] * 3
    assert (df["state"] == "finished").sum() == 3


def test_rungs_run_as_synchronous_barriers_in_the_default_experiment(tmp_path):
    import spottune

    grid = spottune.tune(max_steps=60, predictor="constant", theta=0.15, top_k=2, rungs="0.05:6", output=tmp_path / "r")
    df, curves = grid.get_dataframe().set_index("trial_id"), grid.curves  # digits-mlp: metric a loss, mode min
    # 16 trials to the rung at step 3 (5 % of 60), its 6 lowest last values to θ = step 9, their top 2 to 60
    assert sorted(df["steps"]) == [3] * 10 + [9] * 4 + [60] * 2
    at = lambda step: curves[curves["step"] == step].set_index("trial_id")["value"]  # noqa: E731
    kept = set(at(3).nsmallest(6).index)
    assert kept == set(df.index[df["steps"] >= 9]) and set(at(9).nsmallest(2).index) == set(df.index[df["steps"] == 60])
    assert (df["state"] == "finished").sum() == 2


def test_rungs_in_the_spec_and_the_simulator_policies():
    spec = ExperimentSpec(max_steps=100, theta=0.15, top_k=2, rungs="0.06:6")
    assert spec.rungs == ((0.06, 6),) and spec.to_dict()["rungs"] == [[0.06, 6]]
    assert ExperimentSpec.from_dict(spec.to_dict()) == spec
    assert spec.planned_steps == 16 * 6 + 6 * (15 - 6) + 2 * (100 - 15)  # 16 trials of digits-mlp
    assert ExperimentSpec(max_steps=100, theta=0.15, top_k=2).planned_steps == 16 * 15 + 2 * 85
    with pytest.raises(ConfigError, match="rungs .* stopper 'paper'"):
        ExperimentSpec(rungs="0.06:6", stopper="paper")
    with pytest.raises(ConfigError, match="rungs"):
        ExperimentSpec(rungs="0.8:6")  # beyond θ 0.7
    assert get_policy("spottune-0.15", rungs="0.06:6").rungs == ((0.06, 6),)
    assert get_policy("spottune-0.15", stopper="rank", rungs="0.06:6").rungs == ()  # only the barrier has rungs
    assert get_policy("spottune-1.0", rungs="0.06:6").rungs == () and get_policy("single-cheapest").rungs == ()
    with pytest.raises(ConfigError, match="rungs"):
        get_policy("spottune-0.05", rungs="0.06:6")


def test_cli_refuses_bad_rungs_in_one_line(tmp_path, monkeypatch, capsys):
    import sys

    from spottune.cli import main

    for argv in (["run", "--rungs", "0.9:6", "--output", str(tmp_path / "r")],
                 ["simulate", "--rungs", "0.06:6", "--policies", "spottune-0.05", "--output", str(tmp_path / "s")],
                 ["run", "--rungs", "0.06:6", "--stopper", "rank", "--output", str(tmp_path / "r")],
                 ["simulate", "--rungs", "0.06:2", "--top-k", "3", "--output", str(tmp_path / "s")]):
        monkeypatch.setattr(sys, "argv", ["spottune", *argv])
        with pytest.raises(SystemExit) as exc:
            main()
        err = capsys.readouterr().err.strip().splitlines()
        assert exc.value.code == 2 and len(err) == 1 and err[0].startswith("error: rungs is"), err
    monkeypatch.setattr(sys, "argv", ["spottune", "simulate", "--top-k", "0", "--output", str(tmp_path / "s")])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 2 and capsys.readouterr().err.startswith("error: --top-k is 0")
    monkeypatch.setattr(sys, "argv", ["spottune", "simulate", "--workload", "opda-alexnet", "--policies",
                                      "optuna-sha-r50-rf3", "--output", str(tmp_path / "s")])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 2 and capsys.readouterr().err == (
        "error: policy optuna-sha-r50-rf3: min_resource 50 must be below the study's 50 steps (else nothing is pruned)\n")
    assert not (tmp_path / "r").exists() and not (tmp_path / "s").exists()


def test_simulate_runs_the_rungs_and_keeps_top_k(tmp_path):
    from spottune.cli._simulate import simulate_all

    table = simulate_all("opda-alexnet", "spottune-0.15-constant", 1, "legacy", tmp_path, start_times="2015-05-05T00:00Z",
                         rungs="0.06:6", top_k=2, progress=False)
    row = table.iloc[0]
    # 16 trials to step 3 (6 % of 50), 6 to θ's step 8, 2 to 50; nothing lost at this start
    assert row["steps_executed"] == 16 * 3 + 6 * (8 - 3) + 2 * (50 - 8) and row["stopped_early"] == 14
    assert not row["error"]


# -- predictive_options: a family's own settings of predictive ASHA (docs/design/earlycurve.md §8.15) ---------------------

OPTIONS = {"fractions": [0.1, 0.3], "keep_first": 0.5, "keep": 0.25, "slope": 0.0}


def test_predictive_options_set_the_rule_and_the_others_keep_their_defaults():
    from earlycurve import PREDICTIVE_DEFAULTS

    _, _, rule = early_stopping("predictive", max_steps=60, theta_steps=42, top_k=3, predictive=OPTIONS)
    assert rule.rule.rungs == (6, 18)  # 10 %, 30 % of 60, both before θ = 42
    assert (rule.rule.keep_first, rule.rule.keep, rule.rule.slope) == (0.5, 0.25, 0.0)
    assert (rule.rule.bound_k, rule.rule.guard) == (PREDICTIVE_DEFAULTS["bound_k"], PREDICTIVE_DEFAULTS["guard"])
    assert early_stopping("predictive", 60, 42, 3, predictive={"fractions": [0.8]})[2] is None  # no rung before θ
    assert early_stopping("barrier", 60, 42, 3, predictive=OPTIONS)[2] is None  # other stoppers ignore them


def test_predictive_options_in_the_spec_the_policies_and_the_built_run(tmp_path):
    import json

    from spottune.compose import build

    spec = ExperimentSpec(max_steps=60, predictor="constant", stopper="predictive",
                          predictive_options=json.dumps(OPTIONS))  # --predictive-options gives JSON text
    assert spec.predictive_options == OPTIONS and ExperimentSpec.from_dict(spec.to_dict()) == spec
    assert ExperimentSpec(stopper="predictive").predictive_options is None
    rule = build(spec, output=tmp_path / "built").orchestrator.stop_rule.rule
    assert rule.rungs == (6, 18) and rule.keep == 0.25
    assert get_policy("spottune-0.7", stopper="predictive", predictive_options=OPTIONS).predictive_options == OPTIONS
    # a -paper name keeps the paper's stopper, and other stoppers have no predictive settings
    assert get_policy("spottune-0.7-paper", stopper="predictive", predictive_options=OPTIONS).predictive_options is None
    assert get_policy("spottune-0.7", stopper="barrier", predictive_options=OPTIONS).predictive_options is None
    assert get_policy("spottune-1.0", stopper="predictive", predictive_options=OPTIONS).predictive_options is None  # as rungs
    with pytest.raises(ConfigError, match=r"policy spottune-0.25: predictive_options fractions \[0.3\] must lie before"):
        get_policy("spottune-0.25", stopper="predictive", predictive_options=OPTIONS)


@pytest.mark.parametrize("value, message", [
    ('{"kep": 0.25}', "unknown predictive option kep; the options are fractions, keep_first, keep"),
    ('{"keep": 2}', r"keep_first \(0.75\) and keep \(2.0\) must be in \(0, 1\]"),
    ('{"fractions": [0.5, 1.5]}', r"rung fractions \[0.5, 1.5\] must be non-empty and in \(0, 1\)"),
    ('{"slope": "steep"}', "predictive option slope is 'steep', but must be a number"),
    ('{"retro": "false"}', "predictive option retro is 'false', but must be true or false"),
    ('{"bound_k": 2.7}', "predictive option bound_k is 2.7, but must be an integer"),
    ('{"fractions": [0.1, 0.75]}', r"fractions \[0.75\] must lie before theta 0.7"),
    ("keep=0.25", "is not JSON"),
    ("[0.25]", "must be a mapping"),
])
def test_bad_predictive_options_are_config_errors(value, message):
    with pytest.raises(ConfigError, match=message):
        ExperimentSpec(stopper="predictive", predictive_options=value)


@pytest.mark.process
def test_predictive_options_need_the_predictive_stopper_in_run_and_simulate(tmp_path):
    import subprocess
    import sys

    with pytest.raises(ConfigError, match="predictive_options are settings of stopper 'predictive', not 'barrier'"):
        ExperimentSpec(predictive_options=OPTIONS)
    with pytest.raises(ConfigError, match="need theta < 1"):
        ExperimentSpec(stopper="predictive", theta=1.0, predictive_options=OPTIONS)
    for empty in ("", "{}", "null", {}):  # not given
        assert ExperimentSpec(predictive_options=empty).predictive_options is None
    # a rung that rounds onto θ's step stops nothing: 0.68 of 10 steps is step 7, θ 0.7's barrier
    with pytest.raises(ConfigError, match=r"fractions \[0.68\] must lie before theta 0.7"):
        ExperimentSpec(stopper="predictive", max_steps=10, predictive_options={"fractions": [0.3, 0.68]})
    from spottune.cli._simulate import simulate_all

    with pytest.raises(ConfigError, match="not 'rank'"):  # refused before anything is loaded
        simulate_all("digits-mlp", "spottune-0.7", 1, "legacy", tmp_path, stopper="rank", predictive_options=OPTIONS)
    cmd = [sys.executable, "-c", "from spottune.cli import main; main()", "simulate", "--workload", "digits-mlp",
           "--stopper", "predictive", "--predictive-options", '{"keep": 0}', "--output", str(tmp_path / "o")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "keep (0.0) must be in (0, 1]" in done.stderr
