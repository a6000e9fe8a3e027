"""``spottune run`` / ``spottune report`` end to end on a tiny setting (real digits-mlp training)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from spottune.cli import cli


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


@pytest.mark.parametrize(("args", "words"), [(["--theta", "1.5"], "theta"), (["--top-k", "0"], "top_k"),
                                             (["--workload", "nope"], "nope")])
def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, args, words):
    from spottune.cli import main

    monkeypatch.setattr("sys.argv", ["spottune", "run", *args, "--no-progress", "--output", str(tmp_path / "x")])
    with pytest.raises(SystemExit) as info:
        main()
    err = capsys.readouterr().err
    assert info.value.code == 2 and words in err and len(err.strip().splitlines()) == 1


def test_config_file_then_flags_override(tmp_path):
    import click

    from spottune.cli._run import _options, run
    from spottune.errors import ConfigError

    cfg = tmp_path / "exp.yaml"
    cfg.write_text("theta: 0.6\ntop-k: 2\nzones: us-east-1a, us-east-1b\n")
    ctx = run.make_context("run", ["--config", str(cfg), "--top-k", "1"])
    opts = _options(ctx, str(cfg))
    assert (opts["theta"], opts["top_k"], opts["zones"]) == (0.6, 1, ["us-east-1a", "us-east-1b"])
    cfg.write_text("tehta: 0.6\n")
    with pytest.raises(ConfigError, match="unknown option 'tehta'"):
        _options(run.make_context("run", ["--config", str(cfg)]), str(cfg))
    assert click is not None
