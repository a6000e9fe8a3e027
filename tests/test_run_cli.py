"""``spottune run`` / ``spottune report`` end to end on a tiny setting (real digits-mlp training)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from spottune.cli import cli
from spottune.experiment import ExperimentSpec

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "digits_mlp.yaml"


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "res"
    args = ["run", "--max-steps", "12", "--theta", "0.5", "--top-k", "2", "--predictor", "none",
            "--instance-types", "r3.large,m3.medium", "--zones", "us-east-1a", "--no-progress", "--output", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return out, result.output


def test_run_writes_every_result_file(small_run):
    out, output = small_run
    for name in ("trials.csv", "ledger.csv", "curves.csv", "events.jsonl", "summary.json",
                 "learning_curves.png", "timeline.png", "cost.png"):
        assert (out / name).exists(), name
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == 16
    assert (trials["state"] == "finished").sum() == 2 and (trials["state"] == "stopped_early").sum() == 14
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["top_k"]) == 2 and summary["total_cost_usd"] > 0 and summary["jct_s"] > 0
    assert summary["settings"]["theta"] == 0.5
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert events[0]["type"] == "ExperimentStarted" and events[-1]["type"] in ("ExperimentFinished", "SegmentEnded")
    assert "total cost" in output and "top-2" in output


def test_report_rerenders(small_run):
    out, _ = small_run
    (out / "timeline.png").unlink()
    result = CliRunner().invoke(cli, ["report", str(out)])
    assert result.exit_code == 0 and (out / "timeline.png").exists()
    assert "JCT" in result.output


def test_results_are_written_without_temp_leftovers(small_run):
    out, _ = small_run
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


def test_report_on_a_corrupt_results_file_is_a_config_error(small_run, tmp_path):
    import shutil

    from spottune.errors import ConfigError
    from spottune.results import read_results

    broken = tmp_path / "broken"
    shutil.copytree(small_run[0], broken)
    (broken / "summary.json").write_text('{"total_cost_usd": 1.')  # a truncated file
    with pytest.raises(ConfigError, match="unreadable results file"):
        read_results(broken)


@pytest.mark.parametrize(("args", "words"), [(["--theta", "1.5"], "theta"), (["--top-k", "0"], "top_k"),
                                             (["--workload", "nope"], "nope"),
                                             (["--start", "2030-01-01T00:00Z"], "2015-08-31 23:59:13"),
                                             (["--start", "2015-03-12T00:00Z"], "2015-04-04 06:35:56"),
                                             (["--instance-types", "zz.large"], "zz.large")])
def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, args, words):
    from spottune.cli import main

    monkeypatch.setattr("sys.argv", ["spottune", "run", *args, "--no-progress", "--output", str(tmp_path / "x")])
    with pytest.raises(SystemExit) as info:
        main()
    err = capsys.readouterr().err
    assert info.value.code == 2 and words in err and len(err.strip().splitlines()) == 1


def test_config_file_then_flags_override(tmp_path):
    """Spec defaults < the --config file < flags given on the command line."""
    from spottune.cli._run import _spec, run
    from spottune.errors import ConfigError

    cfg = tmp_path / "exp.yaml"
    cfg.write_text("theta: 0.6\ntop-k: 2\nzones: us-east-1a, us-east-1b\n")
    spec = _spec(run.make_context("run", ["--config", str(cfg), "--top-k", "1"]), str(cfg))
    assert (spec.theta, spec.top_k, spec.availability_zones) == (0.6, 1, ("us-east-1a", "us-east-1b"))
    assert (spec.workload, spec.backend, spec.seed) == ("digits-mlp", "sim", 0)  # the spec's defaults
    assert _spec(run.make_context("run", []), None) == ExperimentSpec()
    cfg.write_text("tehta: 0.6\n")
    with pytest.raises(ConfigError, match="option 'tehta' is unknown; did you mean 'theta'"):
        _spec(run.make_context("run", ["--config", str(cfg)]), str(cfg))


def test_a_dict_of_run_options_still_makes_a_spec():
    from spottune.cli._run import spec_from_options

    spec = spec_from_options({"theta": 0.6, "zones": "us-east-1a", "start": "2015-06-01T00:00Z", "max_steps": None,
                              "output": "x", "progress": False})
    assert spec == ExperimentSpec(theta=0.6, availability_zones=["us-east-1a"], start_utc="2015-06-01T00:00Z")


def test_bad_config_file_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from spottune.cli import main

    cfg = tmp_path / "exp.yaml"
    cfg.write_text("theta: 0.6\noutput: somewhere\n")  # output is a CLI option, not a spec key
    monkeypatch.setattr("sys.argv", ["spottune", "run", "--config", str(cfg), "--no-progress"])
    with pytest.raises(SystemExit) as info:
        main()
    err = capsys.readouterr().err
    assert info.value.code == 2 and "'output' is unknown" in err and len(err.strip().splitlines()) == 1


def test_example_spec_drives_the_trials(tmp_path):
    """examples/digits_mlp.yaml: its own search space (6 trials, not the workload's 16), flags on top."""
    spec = ExperimentSpec.from_yaml(EXAMPLE)
    out = tmp_path / "res"
    args = ["run", "--config", str(EXAMPLE), "--max-steps", "6", "--predictor", "none", "--zones", "us-east-1a",
            "--no-progress", "--output", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    trials = pd.read_csv(out / "trials.csv").set_index("trial_id")
    assert len(trials) == spec.n_trials == 6 and (trials["state"] == "finished").sum() == spec.top_k == 2
    configs = {t.trial_id: t.config for t in spec.trials()}
    assert {t: json.loads(c) for t, c in trials["config"].items()} == configs
    assert all(c["momentum"] == 0.5 for c in configs.values())
    settings = json.loads((out / "summary.json").read_text())["settings"]
    assert (settings["max_steps"], settings["theta"], settings["n_trials"]) == (6, 0.7, 6)
    assert settings["spec"]["availability_zones"] == ["us-east-1a"] and settings["spec"]["num_samples"] == 3


def test_max_steps_reaches_the_trainable_so_the_lr_schedule_scales():
    from spottune.cli._run import run_experiment

    spec = ExperimentSpec(search_space={"lr": 0.1, "hidden": 32, "batch_size": 8}, max_steps=10, theta=1.0, top_k=1,
                          predictor="none", instance_types=["r3.large"], availability_zones=["us-east-1a"])
    result = run_experiment(spec)
    lrs = [m["lr"] for m in result["curves"].curve("t00")]
    assert len(lrs) == 10 and lrs[0] == pytest.approx(0.1)
    assert len(set(lrs)) == 3  # digits-mlp decays at 30 % and 60 % of max_steps: 10 here, not 300


def test_run_on_the_local_backend_end_to_end(tmp_path):
    """Real worker processes, real checkpoints in OUTPUT/checkpoints, the market on a 1,200x clock."""
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text("workload: logreg\nsearch_space: {lr: {grid_search: [0.05, 0.2]}}\nmax_steps: 20\n"
                   "theta: 0.5\ntop_k: 1\ninstance_types: [r3.large]\nzones: [us-east-1a]\npredictor: none\n")
    out = tmp_path / "res"
    result = CliRunner().invoke(cli, ["run", "--config", str(cfg), "--backend", "local", "--time-scale", "1200",
                                      "--no-progress", "--output", str(out)])
    assert result.exit_code == 0, result.output
    trials = pd.read_csv(out / "trials.csv")
    assert sorted(trials["state"]) == ["finished", "stopped_early"] and trials["steps"].max() == 20
    summary = json.loads((out / "summary.json").read_text())
    assert summary["settings"]["backend"] == "local" and summary["settings"]["time_scale"] == 1200.0
    assert summary["settings"]["store"] == str((out / "checkpoints").resolve())
    from spottune.checkpoint import open_store

    best = summary["top_k"][0]["trial_id"]
    assert open_store(str(out / "checkpoints")).latest_good(best).step == 20
    assert len(list((out / "workers").glob("w*.log"))) >= 2


@pytest.mark.process
def test_python_dash_m_spottune_is_the_spottune_command():
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "spottune", "run", "--max-steps", "0"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines() == ["error: max_steps is 0, but must be an integer >= 1 and <= 1,000,000"]
