"""Crash safety on the local backend (decision CS4): a real ``kill -9`` of ``spottune run``, then ``spottune resume``.

The orchestrator process is SIGKILLed while its workers train; each worker then saves its steps and
exits by itself (none may survive), and the resume replays the journal, continues every running trial
from the checkpoint its worker saved (no step the dead orchestrator journaled is trained again), and
finishes with the final metrics and top-k of an uninterrupted run (the trainable API's resume guarantee
makes them exact; the uninterrupted reference is the simulator on the same spec).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from spottune.checkpoint import open_store
from spottune.checkpoint._secrets import CHECKPOINT_KEY_ENV, experiment_key, store_key
from spottune.compose import run
from spottune.experiment import ExperimentSpec
from spottune.journal import JOURNAL_FILE, read_journal
from spottune.results import _ledger_frame, trials_frame
from tests._wait import wait_until

BIN = Path(sys.executable).parent
TINY = ("workload: logreg\nsearch_space: {lr: {grid_search: [0.05, 0.8]}}\nmax_steps: 30\ntheta: 0.5\n"
        "top_k: 1\ninstance_types: [r3.large]\nzones: [us-east-1a]\npredictor: none\n")


def _workers_of(store: str) -> list[int]:
    """PIDs of running spottune workers whose command line names ``store``."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if "spottune.backends.local.worker" in cmd and store in cmd and state != "Z":
            pids.append(int(proc.name))
    return pids


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds processes through /proc (Linux)")
def test_kill_9_of_a_local_run_then_resume(tmp_path):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY)
    out = tmp_path / "res"
    store = str((out / "checkpoints").resolve())
    proc = subprocess.Popen([str(BIN / "spottune"), "run", "--config", str(cfg), "--backend", "local",
                             "--time-scale", "900", "--no-progress", "--output", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    journal = out / JOURNAL_FILE
    deadline = time.monotonic() + 120
    # the crash point: after 12 reported steps (of 2 x 15 before the θ barrier), while both trials train
    while time.monotonic() < deadline:
        text = journal.read_text() if journal.exists() else ""
        if text.count('"type":"MetricReported"') >= 12:
            break
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)  # the orchestrator only: its workers are left behind
    proc.wait()
    proc.stderr.close()
    crashed = read_journal(journal)
    assert not (out / "summary.json").exists()
    # its workers notice that the orchestrator is gone, save the steps it may not have seen, and exit
    wait_until(lambda: not _workers_of(store), 60, what="the orphaned workers to save and exit")
    # where each trial stood in the journal at the crash: its instance, last reported step and last confirmed save
    on: dict[str, str] = {}
    reported: dict[str, int] = {}
    saved: dict[str, int] = {}
    for rec in crashed:
        e = rec.get("e") if rec["k"] == "event" else None
        if e is not None and e["type"] == "TrialLaunched":
            on[e["trial_id"]] = e["instance_id"]
        if e is not None and e["type"] == "MetricReported":
            reported[e["trial_id"]] = e["step"]
        if e is not None and e["type"] == "CheckpointSaved":
            saved[e["trial_id"]] = e["step"]
    # the saves the workers made on their own, never confirmed: at the notice or when the orchestrator died
    own = {}
    for trial_id, instance_id in on.items():
        newest = open_store(store, key=store_key({CHECKPOINT_KEY_ENV: experiment_key(out)})).latest_good(trial_id)
        if newest is not None and newest.metadata["instance_id"] == instance_id and newest.step > saved.get(trial_id, 0):
            own[trial_id] = newest.step
            assert newest.step >= reported[trial_id]
            assert [s for s, _ in newest.metadata["metrics"]] == list(range(newest.metadata["restored_step"] + 1,
                                                                           newest.step + 1))
    assert own, "no worker saved its steps: the test would prove nothing"

    result = subprocess.run([str(BIN / "spottune"), "resume", str(out), "--no-progress"], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert _workers_of(store) == []  # no orphan

    records = read_journal(journal)
    assert records[:len(crashed)] == crashed  # the journal continued, it was not rewritten
    # each trial its worker saved relaunches from that save, past every step journaled before the crash: no
    # journaled step is trained again (a relaunch from the last confirmed checkpoint redid them all)
    after = records[len(crashed):]
    for trial_id, step in own.items():  # confirmed (it may have reached θ), then relaunched from it, if at all
        confirmed = next(r["e"]["step"] for r in after if r["k"] == "event" and r["e"]["type"] == "CheckpointSaved"
                         and r["e"]["trial_id"] == trial_id)
        relaunch = next((r["a"]["resume_step"] for r in after if r["k"] == "action" and r["a"]["type"] == "Launch"
                         and r["a"]["trial_id"] == trial_id), step)
        assert confirmed == relaunch == step
    assert sum(reported[t] - saved.get(t, 0) for t in own) > 0  # what a relaunch from the confirmed one redid
    for trial_id in own:
        steps = [r["e"]["step"] for r in after
                 if r["k"] == "event" and r["e"]["type"] == "MetricReported" and r["e"]["trial_id"] == trial_id]
        assert steps == sorted(set(steps)) and all(s > reported[trial_id] for s in steps)  # no step trained twice
        assert steps[:own[trial_id] - reported[trial_id]] == list(range(reported[trial_id] + 1, own[trial_id] + 1))
    # the ledger keeps every run billed before the crash; the runs killed by the crash end at the restart
    ledger = pd.read_csv(out / "ledger.csv")
    billed_before = {r["id"] for r in crashed if r["k"] == "billed"}
    assert billed_before <= set(ledger["instance_id"])
    launched = {r["e"]["instance_id"] for r in crashed if r["k"] == "event" and r["e"]["type"] == "TrialLaunched"}
    assert sorted(ledger["instance_id"][ledger["instance_id"].isin(launched)]) == sorted(launched)  # billed once
    restarted = ledger[ledger["reason"] == "restart"]
    assert set(restarted["ended_by"]) <= {"user"}

    # the uninterrupted result (the simulator on the same spec: the same trainables, seeds and selection)
    spec = ExperimentSpec.from_yaml(cfg)
    ref = run(spec)
    theirs = trials_frame(ref["orchestrator"], _ledger_frame(ref["record"]), ref["configs"]).set_index("trial_id")
    mine = pd.read_csv(out / "trials.csv").set_index("trial_id")
    assert list(mine["state"]) == list(theirs["state"])
    finished = mine["state"] == "finished"
    assert finished.sum() == 1
    assert list(mine["metric"]) == list(theirs["metric"])  # bit for bit, the predicted ones of stopped trials too
    summary = json.loads((out / "summary.json").read_text())
    assert [t["trial_id"] for t in summary["top_k"]] == list(ref["orchestrator"].top_k)
    (resume,) = summary["settings"]["resumes"]
    assert resume["worker_saves"] == own and resume["killed_workers"] == []
