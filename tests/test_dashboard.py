"""spottune.dashboard: what the page shows, read from hand-written results folders (finished and mid-run), and the
HTTP layer in process (FastAPI's TestClient: no server, no browser; tests/test_dashboard_browser.py has those)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from spottune.dashboard import ENDED_BY, create_app, deadline_h, ended_by, rungs, snapshot
from spottune.errors import ConfigError

T0 = 1430784000.0
LEDGER = ("market,instance_id,trial_id,start_s,end_s,ended_by,reason,billed_s,charged_usd,refunded_usd,"
          "max_price_usd_per_hour,steps,lost_steps,refunded\n"
          f"az/r3.large/Linux,i-1,t00,{T0},{T0 + 1800},provider,price,0.0,0.0,0.25,0.175,7,2,True\n"
          f"az/r3.large/Linux,i-2,t01,{T0},{T0 + 3600},user,hourly-hop,3600,0.5,0.0,0.175,9,0,False\n"
          f"az/m3.medium/Linux,i-3,t00,{T0 + 1800},{T0 + 5400},user,theta,3600,0.75,0.0,0.3,3,0,False\n")
TRIALS = ("trial_id,state,steps,metric,usd,refunded_usd,config\n"
          't00,stopped_early,10,0.3,0.75,0.25,"{""lr"": 0.02}"\n'
          't01,finished,20,0.1,0.5,0.0,"{""lr"": 0.1}"\n')


def _events(*records: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


@pytest.fixture
def finished(tmp_path: Path) -> Path:
    (tmp_path / "ledger.csv").write_text(LEDGER)
    (tmp_path / "trials.csv").write_text(TRIALS)
    (tmp_path / "curves.csv").write_text("trial_id,step,value\nt01,2,0.2\nt01,1,0.5\nt00,1,0.6\n")
    (tmp_path / "events.jsonl").write_text(_events(
        {"kind": "event", "t": T0, "type": "ExperimentStarted"},
        {"kind": "event", "t": T0 + 1680, "type": "RevocationNotice", "trial_id": "t00", "instance_id": "i-1",
         "deadline_s": T0 + 1800}))
    (tmp_path / "summary.json").write_text(json.dumps({"total_cost_usd": 1.25, "settings": {
        "theta": 0.7, "max_steps": 15, "metric": "loss", "mode": "min", "start_s": T0,
        "spec": {"budget_usd": 2.0}}}))
    return tmp_path


def test_who_ended_a_segment():
    assert [ended_by("provider", r) for r in ("price", "capacity", "capacity-event")] == ["provider"] * 3
    assert [ended_by("user", r) for r in ("hop", "hourly-hop", "failure", "theta", "end", "prune", "stopped")] == [
        "hop", "hop", "failure", "our stop", "our stop", "our stop", "our stop"]
    assert ENDED_BY == ("provider", "hop", "our stop", "failure", "running")


def test_a_finished_folder(finished):
    s = snapshot(finished)
    assert s["status"] == "finished"
    assert s["settings"]["barrier_step"] == 11  # ceil(0.7 * 15)
    assert (s["settings"]["budget_usd"], s["settings"]["metric"]) == (2.0, "loss")
    assert [(t["trial_id"], t["state"], t["steps"], t["usd"], t["config"]) for t in s["trials"]] == [
        ("t00", "stopped_early", 10, 0.75, '{"lr": 0.02}'), ("t01", "finished", 20, 0.5, '{"lr": 0.1}')]
    assert s["curves"] == {"t00": {"step": [1], "value": [0.6]}, "t01": {"step": [1, 2], "value": [0.5, 0.2]}}
    assert [(g["instance_id"], g["start_h"], g["end_h"], g["ended_by"], g["refunded"]) for g in s["segments"]] == [
        ("i-1", 0.0, 0.5, "provider", True), ("i-2", 0.0, 1.0, "hop", False), ("i-3", 0.5, 1.5, "our stop", False)]
    assert s["notices"] == [{"trial_id": "t00", "instance_id": "i-1", "t_h": pytest.approx(1680 / 3600),
                             "deadline_h": 0.5}]
    # cumulative USD at each ended run; the last charged point is summary.json's total
    assert s["dollars"] == {"t_h": [0.0, 0.5, 1.0, 1.5], "charged_usd": [0.0, 0.0, 0.5, 1.25],
                            "refunded_usd": [0.0, 0.25, 0.25, 0.25]}
    assert (s["total_usd"], s["refunded_usd"], s["summary_total_usd"]) == (1.25, 0.25, 1.25)


def test_a_folder_mid_run(tmp_path):
    """Only what a run writes as it goes: the journal's spec, events.jsonl (its last line half written), the ledger."""
    (tmp_path / "journal.jsonl").write_text(json.dumps({"n": 0, "k": "spec", "spec": {
        "theta": 0.5, "max_steps": 20, "metric": "loss", "mode": "min", "budget_usd": None}}) + "\n")
    (tmp_path / "ledger.csv").write_text(LEDGER.splitlines(keepends=True)[0] + LEDGER.splitlines(keepends=True)[1])
    (tmp_path / "events.jsonl").write_text(_events(
        {"kind": "event", "t": T0, "type": "ExperimentStarted"},
        {"kind": "event", "t": T0 + 120, "type": "TrialLaunched", "trial_id": "t00", "instance_id": "i-1",
         "started_s": T0},
        {"kind": "event", "t": T0 + 120, "type": "TrialLaunched", "trial_id": "t01", "instance_id": "i-2",
         "started_s": T0},
        {"kind": "event", "t": T0 + 130, "type": "MetricReported", "trial_id": "t01", "step": 2,
         "metrics": {"loss": 0.4, "step": 2}},
        {"kind": "event", "t": T0 + 125, "type": "MetricReported", "trial_id": "t01", "step": 1,
         "metrics": {"loss": 0.7, "step": 1}},
        {"kind": "event", "t": T0 + 1800, "type": "SegmentEnded", "trial_id": "t00", "instance_id": "i-1"},
    ) + '{"kind": "event", "t": 1430790000.0, "type": "Metr')
    s = snapshot(tmp_path)
    assert s["status"] == "running" and s["summary_total_usd"] is None
    assert (s["settings"]["theta"], s["settings"]["barrier_step"], s["settings"]["budget_usd"]) == (0.5, 10, None)
    assert s["curves"] == {"t01": {"step": [1, 2], "value": [0.7, 0.4]}}
    # i-1 is in the ledger; i-2 is still running, up to the last complete event
    assert [(g["instance_id"], g["ended_by"], g["end_h"]) for g in s["segments"]] == [
        ("i-1", "provider", 0.5), ("i-2", "running", 0.5)]
    assert s["now_h"] == 0.5 and s["trials"] == []


def test_an_empty_folder_waits_and_a_missing_one_is_an_error(tmp_path):
    s = snapshot(tmp_path)
    assert (s["status"], s["trials"], s["segments"], s["total_usd"]) == ("waiting", [], [], 0.0)
    with pytest.raises(ConfigError, match="no such directory"):
        snapshot(tmp_path / "nope")


def test_the_app_serves_the_page_plotly_and_the_snapshot_offline(finished):
    client = TestClient(create_app(finished))
    page = client.get("/")
    # relative URLs: the same page serves under a prefix in spottune serve
    assert page.status_code == 200 and '<script src="plotly.min.js"></script>' in page.text
    assert 'poll("api/snapshot"' in page.text and '<link rel="stylesheet" href="style.css">' in page.text
    assert "http://" not in page.text and "https://" not in page.text  # nothing from the internet (no CDN)
    js = client.get("/plotly.min.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert b"plotly.js" in js.content[:500] and len(js.content) > 1_000_000
    assert client.get("/style.css").headers["content-type"].startswith("text/css")
    assert "function poll(" in client.get("/common.js").text
    assert client.get("/page.html").status_code == 404  # only the listed files
    snap = client.get("/api/snapshot")
    assert snap.status_code == 200 and snap.json()["total_usd"] == 1.25


def test_dashboard_on_a_file_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from spottune.cli import main

    f = tmp_path / "summary.json"
    f.write_text("{}")
    monkeypatch.setattr("sys.argv", ["spottune", "dashboard", str(f)])
    with pytest.raises(SystemExit) as info:
        main()
    err = capsys.readouterr().err
    assert info.value.code == 2 and "is a file" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("spec", "theta", "max_steps", "top_k", "expected"), [
    # the spec's rungs, ceil(fraction · max_steps), with the trials each keeps
    ({"stopper": "barrier", "rungs": [[0.06, 6], [0.1, 4]]}, 0.5, 100, 2,
     [{"step": 6, "keep": 6, "rule": "barrier"}, {"step": 10, "keep": 4, "rule": "barrier"}]),
    ({"stopper": "hparams", "rungs": "0.25:3"}, 0.7, 15, 1, [{"step": 4, "keep": 3, "rule": "barrier"}]),
    ({"stopper": "barrier", "rungs": []}, 0.5, 100, 2, []),
    # rank: round(f · max_steps) for f in 0.1, 0.2, 0.4, 0.7, those before θ's step 50
    ({"stopper": "rank"}, 0.5, 100, 2, [{"step": s, "keep": None, "rule": "rank"} for s in (10, 20, 40)]),
    # predictive: the shipped fractions 0.04, 0.2, or the spec's own
    ({"stopper": "predictive"}, 0.5, 100, 2, [{"step": s, "keep": None, "rule": "predictive"} for s in (4, 20)]),
    ({"stopper": "predictive", "predictive_options": {"fractions": [0.3, 0.6]}}, 0.5, 100, 2,
     [{"step": 30, "keep": None, "rule": "predictive"}]),
    ({"stopper": "paper"}, 0.5, 100, 2, []),
    ({"stopper": "rank"}, 1.0, 100, 2, []),  # θ = 1: no barrier, no rung
    ({"stopper": "barrier", "rungs": [[0.6, 6]]}, 0.5, 100, 2, []),  # not a valid rung: none drawn
])
def test_the_rungs_each_stopper_places(spec, theta, max_steps, top_k, expected):
    assert rungs(spec, theta, max_steps, top_k) == expected


def test_the_deadline_in_hours():
    assert [deadline_h({"deadline": d}) for d in ("90min", 7200, "2h", None, "soon")] == [1.5, 2.0, 2.0, None, None]
    assert deadline_h({}) is None


def test_usd_per_useful_step_by_market(finished):
    # r3.large: 0.0 + 0.5 USD for 7 + 9 steps, 2 of them lost to the revocation; m3.medium: 0.75 USD for 3 steps
    assert snapshot(finished)["step_cost"] == [
        {"market": "az/r3.large", "runs": 2, "usd": 0.5, "steps": 16, "lost_steps": 2, "useful_steps": 14,
         "usd_per_useful_step": pytest.approx(0.5 / 14)},
        {"market": "az/m3.medium", "runs": 1, "usd": 0.75, "steps": 3, "lost_steps": 0, "useful_steps": 3,
         "usd_per_useful_step": 0.25}]


def test_the_replayed_prices_of_the_pool_and_each_runs_max_price(finished, tmp_path_factory):
    prices_csv = tmp_path_factory.mktemp("prices") / "tiny.csv"
    iso = lambda dt: pd.Timestamp(T0 + dt, unit="s", tz="UTC").isoformat()  # noqa: E731
    prices_csv.write_text("timestamp,availability_zone,instance_type,product_description,price\n"
                          f"{iso(-600)},az,r3.large,Linux,0.1\n{iso(1200)},az,r3.large,Linux,0.2\n"
                          f"{iso(7200)},az,r3.large,Linux,0.3\n{iso(-100)},az,m3.medium,Linux,0.05\n"
                          f"{iso(-100)},az,c4.large,Linux,0.07\n")  # c4.large is not in the pool
    summary = json.loads((finished / "summary.json").read_text())
    summary["settings"]["spec"].update(prices=str(prices_csv), deadline="2h")
    (finished / "summary.json").write_text(json.dumps(summary))
    s = snapshot(finished)
    # the window is the run's: from its start to the last instance run's end (1.5 h); the price in force at the
    # start, each change inside, the last price again at the end; 0.3 comes after the window
    assert s["prices"] == {"source": "replayed", "dataset": str(prices_csv), "series": {
        "az/m3.medium/Linux": {"t_h": [0.0, 1.5], "usd_per_hour": [0.05, 0.05]},
        "az/r3.large/Linux": {"t_h": [0.0, pytest.approx(1 / 3), 1.5], "usd_per_hour": [0.1, 0.2, 0.2]}}}
    assert [g["max_price_usd_per_hour"] for g in s["segments"]] == [0.175, 0.175, 0.3]
    assert s["settings"]["deadline_h"] == 2.0 and s["settings"]["budget_usd"] == 2.0


def test_live_prices_are_those_seen_at_each_launch_decision(tmp_path):
    """An aws run priced from the EC2 API: the folder has no price file, only what each launch decision saw."""
    (tmp_path / "journal.jsonl").write_text(json.dumps({"n": 0, "k": "spec", "spec": {
        "theta": 0.5, "max_steps": 20, "backend": "aws", "aws": {}, "prices": "us-east-1_2015.csv.gz",
        "deadline": 5400}}) + "\n")

    def launch(t, trial, prices):
        return {"kind": "action", "type": "Launch", "t": t, "trial_id": trial, "market": "az/a/L",
                "max_price_usd_per_hour": 0.5, "explanation": {"candidates": [
                    {"market": m, "current_price_usd_per_hour": p} for m, p in prices.items()]}}

    (tmp_path / "events.jsonl").write_text(_events(
        {"kind": "event", "t": T0, "type": "ExperimentStarted"},
        launch(T0, "t00", {"az/a/L": 0.1, "az/b/L": 0.2}),
        {"kind": "event", "t": T0 + 60, "type": "TrialLaunched", "trial_id": "t00", "instance_id": "i-1",
         "market": "az/a/L", "started_s": T0},
        launch(T0 + 1800, "t01", {"az/a/L": 0.15}),
        {"kind": "event", "t": T0 + 1860, "type": "TrialLaunched", "trial_id": "t01", "instance_id": "i-2",
         "market": "az/a/L", "started_s": T0 + 1800}))
    s = snapshot(tmp_path)
    assert s["prices"] == {"source": "decisions", "dataset": "us-east-1_2015.csv.gz", "series": {
        "az/a/L": {"t_h": [0.0, 0.5], "usd_per_hour": [0.1, 0.15]}, "az/b/L": {"t_h": [0.0], "usd_per_hour": [0.2]}}}
    assert [(g["instance_id"], g["ended_by"], g["max_price_usd_per_hour"]) for g in s["segments"]] == [
        ("i-1", "running", 0.5), ("i-2", "running", 0.5)]
    assert s["settings"]["deadline_h"] == 1.5 and s["step_cost"] == []


def test_a_study_not_started_yet_is_waiting(tmp_path):
    for folder in (None, tmp_path / "not-yet"):
        s = snapshot(folder, missing_ok=True)
        assert (s["status"], s["trials"], s["prices"]["series"], s["step_cost"]) == ("waiting", [], {}, [])
    with pytest.raises(ConfigError, match="no results folder"):
        snapshot(None)
