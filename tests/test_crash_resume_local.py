"""Crash safety on the local backend (decision CS4): a real ``kill -9`` of ``spottune run``, then ``spottune resume``.

The orchestrator process is SIGKILLed while its workers train; the resume must kill the leftover
workers (none may survive), replay the journal, relaunch every running trial from its last confirmed
checkpoint, and finish with the final metrics and top-k of an uninterrupted run (the trainable API's
resume guarantee makes them exact; the uninterrupted reference is the simulator on the same spec).
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

from spottune.compose import run
from spottune.experiment import ExperimentSpec
from spottune.journal import JOURNAL_FILE, read_journal
from spottune.results import _ledger_frame, trials_frame

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
    assert _workers_of(store), "the killed run left no worker behind: the test would prove nothing"
    assert not (out / "summary.json").exists()

    result = subprocess.run([str(BIN / "spottune"), "resume", str(out), "--no-progress"], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert _workers_of(store) == []  # no orphan

    records = read_journal(journal)
    assert records[:len(crashed)] == crashed  # the journal continued, it was not rewritten
    # no step lost beyond the last confirmed checkpoint: each relaunch resumes from it
    saved: dict[str, int] = {}
    for rec in crashed:
        if rec["k"] == "event" and rec["e"]["type"] == "CheckpointSaved":
            saved[rec["e"]["trial_id"]] = rec["e"]["step"]
    first_launch = {}
    for rec in records[len(crashed):]:
        if rec["k"] == "action" and rec["a"]["type"] == "Launch":
            first_launch.setdefault(rec["a"]["trial_id"], rec["a"]["resume_step"])
    for trial_id, step in first_launch.items():
        assert step == saved.get(trial_id, 0)
    # the ledger keeps every run billed before the crash; the runs killed by the crash end at the restart
    ledger = pd.read_csv(out / "ledger.csv")
    billed_before = {r["id"] for r in crashed if r["k"] == "billed"}
    assert billed_before <= set(ledger["instance_id"])
    restarted = ledger[ledger["reason"] == "restart"]
    assert len(restarted) >= 1 and set(restarted["ended_by"]) == {"user"}

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
    assert len(summary["settings"]["resumes"]) == 1
