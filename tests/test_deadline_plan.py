"""``spottune run --deadline --budget-usd`` executes the printed plan (DB14-DB15): the cost-lean plan by default
(``--deadline-mode plan``, DB15), SEER's brackets with ``--deadline-mode seer`` (DB14); the rounds that run are
the printed ones, the run ends by the deadline within the budget; ``--deadline-mode guard`` keeps SpotTune's
Algorithm 1 under the budget cap and the deadline guard; bad modes and backends other than sim get one line and
exit 2."""

from __future__ import annotations

import json
from collections import defaultdict

import pandas as pd
import pytest

from spottune.errors import ConfigError
from spottune.experiment import ExperimentSpec
from tests.test_planning_run import _main

#: 16 digits-mlp trials, two cheap types.
ARGS = ["--deadline", "6h", "--budget-usd", "0.5", "--max-steps", "80", "--instance-types", "m3.medium,r3.large"]
SPEC = dict(deadline="6h", budget_usd=0.5, max_steps=80, instance_types=["m3.medium", "r3.large"])
#: SEER's plan at 0.7 USD: 2 rounds (1.2 h, 4.8 h) with elimination. (At 0.5 USD its 16 first-round instances,
#: live past their first hour, commit a second hour at the max price the budget cannot cover: the cap stops the
#: run at 1 h, DB5.)
SEER_ARGS = [*ARGS[:2], "--budget-usd", "0.7", *ARGS[4:], "--deadline-mode", "seer"]
START_S = pd.Timestamp("2015-05-05T00:00Z").timestamp()


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """One executed plan through the CLI: (stdout, summary, events)."""
    from click.testing import CliRunner

    from spottune.cli import cli

    out = tmp_path_factory.mktemp("plan") / "r"
    res = CliRunner().invoke(cli, ["run", *SEER_ARGS, "--no-progress", "--output", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    return res.output, summary, events


def test_the_plan_is_printed_with_what_runs(monkeypatch, capsys):
    code, out, err = _main(["run", *SEER_ARGS, "--dry-run"], monkeypatch, capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1] == "trials: 16 requested, 229 affordable; plan of 16: 2 rounds of 1.2 h, 4.8 h"
    assert lines[2].startswith("  bracket 1: 8 trials on m3.medium (1 vCPUs), live per round [8, 2]")
    assert lines[3].startswith("  bracket 2: 8 trials on r3.large (2 vCPUs), live per round [8, 2]")
    assert lines[-1].startswith("executed (deadline_mode seer): these brackets and trials, rounds ending 1.2 h, 6 h")


def test_the_printed_plan_is_the_executed_one(planned):
    """One source: the plan printed before the run is the one stored in the summary, and its brackets are the
    rounds that ran (the trials in sampling order, live per round [8, 2] and [8, 2], round ends T/5 and T)."""
    output, summary, _ = planned
    st = summary["settings"]
    assert output.startswith(st["plan"] + "\n")
    assert st["deadline_mode"] == "seer" and st["plan_executed"] is True and st["theta"] == 1.0
    assert st["plan_round_ends_s"] == pytest.approx([4320.0, 21600.0])
    rounds = st["plan_rounds"]
    assert [[len(r) for r in b] for b in rounds] == [[8, 2], [8, 2]]
    assert rounds[0][0] == [f"t{i:02d}" for i in range(8)] and rounds[1][0] == [f"t{i:02d}" for i in range(8, 16)]
    survivors = set(rounds[0][1]) | set(rounds[1][1])
    assert len(survivors) == 4 and {d["trial_id"] for d in summary["top_k"]} < survivors


def test_the_rounds_run_on_the_bracket_types_by_the_round_ends(planned):
    """Round 1: every trial launched once at the start on its bracket's type, training ends before 1.2 h; round 2:
    only the 4 survivors launched again (after the last round-1 segment, on their bracket's type), ended by 6 h."""
    _, summary, events = planned
    rounds = summary["settings"]["plan_rounds"]
    launches, ends = defaultdict(list), defaultdict(list)
    for e in events:
        if e.get("type") == "TrialLaunched":
            launches[e["trial_id"]].append((e["time_s"], e["market"].split("/")[1]))
        elif e.get("type") == "SegmentEnded":
            ends[e["trial_id"]].append(e["time_s"])
    assert summary["revocations"] == 0  # so launches are exactly one per round
    for b, itype in ((0, "m3.medium"), (1, "r3.large")):
        for tid in rounds[b][0]:
            assert launches[tid][0][1] == itype and ends[tid][0] <= START_S + 4320.0
    round1_end = max(ts[0] for ts in ends.values())
    second = {tid: ls[1] for tid, ls in launches.items() if len(ls) > 1}
    assert set(second) == set(rounds[0][1]) | set(rounds[1][1])
    assert all(len(ls) <= 2 for ls in launches.values())
    assert all(t >= round1_end for t, _ in second.values())
    assert [second[t][1] for t in rounds[1][1]] == ["r3.large"] * 2 and {second[t][1] for t in rounds[0][1]} == {"m3.medium"}


def test_the_run_ends_by_the_deadline_within_the_budget(planned):
    _, summary, events = planned
    finished = [e for e in events if e.get("type") == "ExperimentFinished"]
    assert len(finished) == 1 and finished[0]["time_s"] <= START_S + 6 * 3600
    assert summary["jct_s"] <= 6 * 3600 and summary["budget_exhausted"] is None
    assert 0 < summary["total_cost_usd"] <= 0.7


def test_guard_mode_keeps_algorithm_1(monkeypatch, capsys):
    """``--deadline-mode guard``: SpotTune's orchestrator (θ 0.7) inside the deadline guard, the plan only printed."""
    from spottune.compose import build
    from spottune.planning._brackets import BracketOrchestrator
    from spottune.orchestrator import Orchestrator
    from spottune.planning import DeadlineGuard

    exp = build(ExperimentSpec(**SPEC, deadline_mode="guard", predictor="constant"))
    assert type(exp.orchestrator) is Orchestrator and isinstance(exp.orchestrator.chooser, DeadlineGuard)
    assert exp.orchestrator.config.theta == 0.7 and len(exp.orchestrator.trials) == 16
    planned_exp = build(ExperimentSpec(**SPEC))
    assert isinstance(planned_exp.orchestrator, BracketOrchestrator)
    assert planned_exp.predictor_desc.startswith("none")
    code, out, err = _main(["run", *ARGS, "--deadline-mode", "guard", "--dry-run"], monkeypatch, capsys)
    assert code == 0, err
    assert out.splitlines()[-1].startswith("not executed (deadline_mode guard): the run is SpotTune's Algorithm 1")


def test_guard_mode_runs_algorithm_1(tmp_path):
    from spottune import tune

    # 1.5 USD: the 16 first launches commit their first hour at the max price (on-demand under the guarded
    # provisioning, 1.07 USD/h); at 0.5 USD the budget guard stops the run before it starts (DB5)
    tune(**{**SPEC, "max_steps": 40, "budget_usd": 1.5}, deadline_mode="guard", predictor="constant",
         output=tmp_path / "g")
    st = json.loads((tmp_path / "g" / "summary.json").read_text())
    assert st["settings"]["theta"] == 0.7 and st["settings"]["plan_executed"] is False
    assert "plan_rounds" not in st["settings"] and len(st["selected_at_theta"]) == 3


@pytest.mark.parametrize("argv, words", [
    (["--deadline-mode", "fast"], "deadline_mode is 'fast', but must be one of plan, seer, guard"),
    (["--backend", "local"], "--deadline with --budget-usd executes a plan on the sim backend only; use "
                             "--deadline-mode guard"),
    (["--backend", "local", "--deadline-mode", "seer"], "--deadline with --budget-usd executes a plan on the sim "
                                                        "backend only; use --deadline-mode guard"),
])
def test_cli_refuses_in_one_line(argv, words, monkeypatch, capsys, tmp_path):
    code, out, err = _main(["run", *ARGS, *argv, "--output", str(tmp_path / "o")], monkeypatch, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and lines == [f"error: {words}"], err
    assert out == ""


def test_spec_and_tune_validate_the_mode(tmp_path):
    with pytest.raises(ConfigError, match="deadline_mode is 'Plan', but must be one of plan, seer, guard"):
        ExperimentSpec(deadline_mode="Plan")
    s = ExperimentSpec(**SPEC, deadline_mode="guard")
    assert ExperimentSpec.from_dict(s.to_dict()) == s and not s.executes_plan and ExperimentSpec(**SPEC).executes_plan
    assert ExperimentSpec(**SPEC, deadline_mode="seer").executes_plan
    assert not ExperimentSpec(deadline="6h").executes_plan  # a deadline alone: Algorithm 1 and the guard
    from spottune import tune

    with pytest.raises(ConfigError, match="sim backend only"):
        tune(**SPEC, backend="local", output=tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_a_plan_the_budget_cap_would_stop_at_its_first_launches_is_refused(monkeypatch, capsys):
    """16 trials at once on the default pool commit 16 x (price + 0.01 USD/h) for their first hour (DB5): more
    than 0.2 USD, so the cap would stop the run before it trains; refused in one line (DB14)."""
    argv = ["run", "--max-steps", "60", "--deadline", "1h", "--budget-usd", "0.2", "--deadline-mode", "seer", "--dry-run"]
    code, out, err = _main(argv, monkeypatch, capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("error: the plan starts 16 trials at once, and the budget cap counts an hour of each")
    assert "more than the budget of 0.2 USD" in err and "--deadline-mode guard" in err
    code, out, err = _main([*argv, "--deadline-mode", "guard"], monkeypatch, capsys)
    assert code == 0, err  # guard mode: Algorithm 1 under the cap, the plan only printed


# -- the cost-lean plan (DB15), the default --------------------------------------------------------------------
def test_the_lean_plan_is_printed_and_executed_by_default(monkeypatch, capsys):
    """16 trials to ceil(0.7 x 80) = 56 steps on m3.medium, then the top 3 to 80: 0.25 USD expected, cheaper than
    SEER's 0.37; its needed 2.68 h are stretched to the deadline (rounds ending 4.13 h and 6 h)."""
    code, out, err = _main(["run", *ARGS, "--dry-run"], monkeypatch, capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[-2].startswith("lean plan (the cheapest that fits, DB15): theta-top-k: 16 trials to step 56 on "
                                "m3.medium, then 3 trials to step 80 on m3.medium; expected cost 0.25 USD, expected "
                                "finish 2.68 h")
    assert lines[-1].startswith("executed (deadline_mode plan): the lean plan (theta-top-k), rounds ending 4.13 h, 6 h")


def test_the_lean_plan_runs_its_rungs_within_the_deadline_and_the_budget(tmp_path):
    from spottune import tune

    tune(**SPEC, output=tmp_path / "lean")
    summary = json.loads((tmp_path / "lean" / "summary.json").read_text())
    st = summary["settings"]
    assert st["deadline_mode"] == "plan" and st["plan_executed"] is True and st["plan_executed_name"] == "seer-lean"
    (rounds,) = st["plan_rounds"]
    assert [len(r) for r in rounds] == [16, 3] and set(rounds[1]) == {d["trial_id"] for d in summary["top_k"]}
    assert st["plan_round_ends_s"][-1] == pytest.approx(6 * 3600.0)
    assert summary["jct_s"] <= 6 * 3600 and summary["budget_exhausted"] is None
    assert 0 < summary["total_cost_usd"] <= 0.7
    trials = pd.read_csv(tmp_path / "lean" / "trials.csv")
    assert sorted(trials["steps"]) == [56] * 13 + [80] * 3


def test_a_budget_stop_keeps_the_best_trials_so_far_and_is_not_an_error(tmp_path):
    """SEER's plan at 0.5 USD: at 1 h its 16 live instances would commit a second hour at the max price (0.19 USD
    billed + 0.35 committed > 0.5): the cap stops the run there (DB5). No trial finished, yet the run is a result
    (exit 0): the best trials so far, and the report says why."""
    from click.testing import CliRunner

    from spottune.cli import cli

    out = tmp_path / "r"
    res = CliRunner().invoke(cli, ["run", *ARGS, "--deadline-mode", "seer", "--no-progress", "--output", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert "current hours at 1.00 h would exceed --budget-usd 0.5" in summary["budget_exhausted"]
    assert summary["total_cost_usd"] <= 0.5 and len(summary["top_k"]) == 3
    assert "budget       ran short, the run stopped and kept the best trials so far" in res.output
