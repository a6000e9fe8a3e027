"""Crash safety (decisions CS1-CS3): the journal, resume, and fault injection at seeded points of a sim run.

A "crash" is an exception raised by the journal's fault hook just before record n is written (the
process state after it is lost: the test builds everything afresh from the files, as ``spottune
resume`` does). After the resume, the run must be the uninterrupted one: same trials (final metrics,
states, steps), same top-k, same ledger, the same journal byte for byte apart from its ``resume`` lines (one per
resume, outside the numbered records).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from spottune.compose import run
from spottune.errors import ConfigError, JournalMismatch
from spottune.experiment import ExperimentSpec
from spottune.journal import JOURNAL_FILE, decode_event, encode, open_run, read_journal
from spottune.results import _ledger_frame, trials_frame, write_results

SPEC = dict(workload="logreg", search_space={"lr": {"grid_search": [0.01, 0.05, 0.2, 0.8]},
                                             "l2": {"grid_search": [0.0, 0.01]}},
            max_steps=40, theta=0.5, top_k=2, predictor="constant",
            instance_types=["r3.large", "c3.xlarge", "m3.medium"], availability_zones=["us-east-1a", "us-east-1b"],
            seed=7, provisioning="refund-hop")  # the hourly hop and its revocations give every named moment


class Crash(Exception):
    """The injected crash."""


def _run(folder, fault=None):
    folder.mkdir(parents=True, exist_ok=True)
    spec, journal, _ = open_run(folder, ExperimentSpec(**SPEC))  # as spottune run opens it
    journal.fault = fault
    try:
        return run(spec, output=folder, journal=journal)
    finally:
        journal.close()


def _resume(folder):
    spec, journal, records = open_run(folder)
    try:
        return run(spec, output=folder, journal=journal, resume=records)
    finally:
        journal.close()


def _numbered(path):
    """The journal's bytes without its ``resume`` lines (the records of the run itself)."""
    return b"".join(line for line in path.read_bytes().splitlines(keepends=True) if not line.startswith(b'{"k":"resume"'))


def _resume_lines(path):
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.startswith(b'{"k":"resume"')]


def _frames(result):
    ledger = _ledger_frame(result["record"])
    return trials_frame(result["orchestrator"], ledger, result["configs"]), ledger


def _crash_at(n):
    def fault(pos, record):
        if pos == n:
            raise Crash(f"crash before record {n} ({record['k']})")
    return fault


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ref")
    result = _run(folder)
    return result, read_journal(folder / JOURNAL_FILE), (folder / JOURNAL_FILE).read_bytes()


def _points(records):
    """20+ crash positions: the named moments of the issue plus seeded random ones."""
    def first(pred):
        return next(i for i, r in enumerate(records) if pred(r))

    named = {
        "mid-launch": first(lambda r: r["k"] == "outcome" and r["op"] == "launch"),  # intent written, no outcome
        "mid-checkpoint": first(lambda r: r["k"] == "intent" and r["op"] == "checkpoint") + 1,
        "theta-barrier": first(lambda r: r["k"] == "action" and r["a"]["type"] == "Stop"),
        "mid-ranking": first(lambda r: r["k"] == "memo") + 1,  # EarlyCurve's fits at the barrier, half journaled
        "final-ranking": first(lambda r: r["k"] == "action" and r["a"]["type"] == "ExperimentFinished"),
        "revocation": first(lambda r: r["k"] == "event" and r["e"]["type"] == "RevocationNotice"),
        "billing": first(lambda r: r["k"] == "billed"),
        "first-event": 1,
        "last-record": len(records) - 1,
    }
    rng = np.random.default_rng(15)
    random = {f"random-{i}": int(n) for i, n in enumerate(sorted(rng.choice(np.arange(2, len(records) - 1), 13,
                                                                            replace=False)))}
    return {**named, **random}


def test_the_reference_run_has_every_named_moment(reference):
    _, records, _ = reference
    points = _points(records)
    assert len(points) >= 20 and len(set(points.values())) >= 20
    kinds = {r["k"] for r in records}
    assert kinds == {"spec", "event", "action", "intent", "outcome", "billed", "memo"}


@pytest.mark.slow
@pytest.mark.parametrize("name", [*["mid-launch", "mid-checkpoint", "theta-barrier", "mid-ranking", "final-ranking",
                                    "revocation", "billing", "first-event", "last-record"],
                                  *[f"random-{i}" for i in range(13)]])
def test_resume_after_a_crash_reaches_the_uninterrupted_result(reference, tmp_path, name):
    ref_result, records, ref_bytes = reference
    n = _points(records)[name]
    with pytest.raises(Crash):
        _run(tmp_path, fault=_crash_at(n))
    assert len(read_journal(tmp_path / JOURNAL_FILE)) == n  # nothing after the crash point was written
    result = _resume(tmp_path)
    trials, ledger = _frames(result)
    ref_trials, ref_ledger = _frames(ref_result)
    assert trials.equals(ref_trials)  # final metrics, states, steps, lost steps, USD
    assert ledger.equals(ref_ledger)
    assert result["orchestrator"].top_k == ref_result["orchestrator"].top_k
    assert _numbered(tmp_path / JOURNAL_FILE) == ref_bytes
    assert [r["records"] for r in _resume_lines(tmp_path / JOURNAL_FILE)] == [n]  # the resume, where it continued


def test_a_crash_then_a_second_crash_during_the_resume(reference, tmp_path):
    ref_result, records, ref_bytes = reference
    with pytest.raises(Crash):
        _run(tmp_path, fault=_crash_at(len(records) // 3))
    spec, journal, recs = open_run(tmp_path)
    journal.fault = _crash_at(2 * len(records) // 3)  # crashes again after the replay, while appending
    with pytest.raises(Crash):
        run(spec, output=tmp_path, journal=journal, resume=recs)
    journal.close()
    result = _resume(tmp_path)
    assert _frames(result)[0].equals(_frames(ref_result)[0])
    assert _numbered(tmp_path / JOURNAL_FILE) == ref_bytes


def test_every_resume_is_journaled_and_listed_after_three_crashes(reference, tmp_path):
    ref_result, records, ref_bytes = reference
    points = [len(records) // 4, len(records) // 2, 3 * len(records) // 4]
    with pytest.raises(Crash):
        _run(tmp_path, fault=_crash_at(points[0]))
    for n in points[1:]:  # each resume crashes again, after its replay, while appending
        spec, journal, recs = open_run(tmp_path)
        journal.fault = _crash_at(n)
        with pytest.raises(Crash):
            run(spec, output=tmp_path, journal=journal, resume=recs)
        journal.close()
    result = _resume(tmp_path)
    journaled = _resume_lines(tmp_path / JOURNAL_FILE)
    assert [r["records"] for r in journaled] == points  # one resume line per resume, where it continued
    assert read_journal(tmp_path / JOURNAL_FILE).resumes == [{k: v for k, v in r.items() if k != "k"}
                                                             for r in journaled]
    times = [r["e"]["time_s"] for r in records if r["k"] == "event"]
    assert [r["at_s"] for r in journaled] == [max(times[:sum(1 for r in records[:n] if r["k"] == "event")])
                                              for n in points]
    summary = write_results(tmp_path, result)
    assert summary["settings"]["resumes"] == [{k: v for k, v in r.items() if k != "k"} for r in journaled]
    assert json.loads((tmp_path / "summary.json").read_text())["settings"]["resumes"] == summary["settings"]["resumes"]
    assert _numbered(tmp_path / JOURNAL_FILE) == ref_bytes  # the run's own records are the uninterrupted ones
    assert _frames(result)[0].equals(_frames(ref_result)[0])


def test_a_line_cut_by_the_crash_is_dropped_and_the_run_continues(reference, tmp_path):
    ref_result, records, ref_bytes = reference
    with pytest.raises(Crash):
        _run(tmp_path, fault=_crash_at(100))
    with open(tmp_path / JOURNAL_FILE, "ab") as fh:
        fh.write(ref_bytes.splitlines(keepends=True)[100][:37])  # half of record 100, no newline
    assert len(read_journal(tmp_path / JOURNAL_FILE)) == 100
    result = _resume(tmp_path)
    assert _frames(result)[1].equals(_frames(ref_result)[1])
    assert _numbered(tmp_path / JOURNAL_FILE) == ref_bytes


def test_a_replayed_action_that_differs_is_a_journal_mismatch(reference, tmp_path):
    _, records, ref_bytes = reference
    lines = ref_bytes.decode().splitlines(keepends=True)[:120]
    i = next(i for i, line in enumerate(lines) if '"type":"Launch"' in line)
    rec = json.loads(lines[i])
    rec["a"]["max_price_usd_per_hour"] += 0.001  # the journaled run chose another max price
    lines[i] = json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n"
    (tmp_path / JOURNAL_FILE).write_text("".join(lines))
    with pytest.raises(JournalMismatch, match=f"journal record {i} differs on replay"):
        _resume(tmp_path)


def test_a_journaled_prediction_is_used_only_for_the_same_curve(reference, tmp_path):
    _, records, ref_bytes = reference
    lines = ref_bytes.decode().splitlines(keepends=True)
    i = next(i for i, line in enumerate(lines) if '"k":"memo"' in line)
    rec = json.loads(lines[i])
    rec["key"] = "0" * 32  # the journaled answer was for another curve: it is computed again, and differs
    lines[i] = json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n"
    (tmp_path / JOURNAL_FILE).write_text("".join(lines[:i + 5]))
    with pytest.raises(JournalMismatch, match=f"journal record {i} differs on replay"):
        _resume(tmp_path)


def test_a_spec_that_no_longer_gives_the_journaled_trials_is_refused(reference, tmp_path):
    _, _, ref_bytes = reference
    lines = ref_bytes.decode().splitlines(keepends=True)
    head = json.loads(lines[0])
    head["trials"][0][1]["lr"] = 0.5  # trial t00 ran another configuration
    (tmp_path / JOURNAL_FILE).write_text(json.dumps(head) + "\n" + "".join(lines[1:50]))
    with pytest.raises(JournalMismatch, match="journal record 0"):
        open_run(tmp_path)


def test_open_run_refuses_an_existing_run_and_a_folder_without_journal(tmp_path):
    spec = ExperimentSpec(**SPEC)
    open_run(tmp_path, spec)[1].close()
    with pytest.raises(ConfigError, match="already holds a run; continue it with `spottune resume"):
        open_run(tmp_path, spec)
    with pytest.raises(ConfigError, match="holds no journal"):
        open_run(tmp_path / "nothing")


def test_events_round_trip_exactly(reference):
    _, records, _ = reference
    events = [r["e"] for r in records if r["k"] == "event"]
    assert {e["type"] for e in events} >= {"ExperimentStarted", "TrialLaunched", "MetricReported", "CheckpointSaved",
                                          "SegmentEnded", "RevocationNotice"}
    for e in events:
        assert encode(decode_event(e)) == e


def test_write_results_of_a_resumed_run_match(reference, tmp_path):
    ref_result, records, _ = reference
    with pytest.raises(Crash):
        _run(tmp_path / "a", fault=_crash_at(len(records) // 2))
    summary = write_results(tmp_path / "a", _resume(tmp_path / "a"))
    ref = write_results(tmp_path / "ref", ref_result)
    assert [r["records"] for r in summary["settings"].pop("resumes")] == [len(records) // 2]
    assert "resumes" not in ref["settings"]
    assert summary == ref
    for name in ("trials.csv", "ledger.csv", "curves.csv", "events.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes()


@pytest.mark.slow
def test_kill_9_of_spottune_run_then_spottune_resume(reference, tmp_path):
    """A real SIGKILL of ``spottune run`` (sim) mid-run; ``spottune resume`` writes the uninterrupted results."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    import yaml

    ref_result, _, ref_bytes = reference
    cfg = tmp_path / "spec.yaml"
    cfg.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    out = tmp_path / "res"
    spottune = str(Path(sys.executable).parent / "spottune")
    proc = subprocess.Popen([spottune, "run", "--config", str(cfg), "--no-progress", "--output", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / JOURNAL_FILE).exists() and (out / JOURNAL_FILE).stat().st_size > len(ref_bytes) // 3:
            break
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "summary.json").exists(), "the run finished before it was killed: the test proves nothing"
    # a new run into the same folder is refused, one line, exit 2
    again = subprocess.run([spottune, "run", "--config", str(cfg), "--no-progress", "--output", str(out)],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and again.stderr.strip().count("\n") == 0
    assert f"spottune resume {out}" in again.stderr
    done = subprocess.run([spottune, "resume", str(out), "--no-progress"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert _numbered(out / JOURNAL_FILE) == ref_bytes
    trials = pd.read_csv(out / "trials.csv")
    ref_trials = trials_frame(ref_result["orchestrator"], _ledger_frame(ref_result["record"]), ref_result["configs"])
    assert list(trials["metric"]) == list(ref_trials["metric"]) and list(trials["state"]) == list(ref_trials["state"])
    summary = json.loads((out / "summary.json").read_text())
    assert [t["trial_id"] for t in summary["top_k"]] == list(ref_result["orchestrator"].top_k)


def test_a_journal_from_before_the_jobs_value_of_time_resumes_without_it(tmp_path):
    # a run journaled before design R11 has no job_time_value_usd_per_hour in its spec line: it ran with V = 0, and
    # its resume must too (the default 0.01 would choose other markets and the replay would not match)
    spec, journal, _ = open_run(tmp_path, ExperimentSpec(**SPEC, job_time_value_usd_per_hour=0.0))
    journal.fault = _crash_at(60)
    with pytest.raises(Crash):
        run(spec, output=tmp_path, journal=journal)
    journal.close()
    path = tmp_path / JOURNAL_FILE
    lines = path.read_text().splitlines(keepends=True)
    first = json.loads(lines[0])
    del first["spec"]["job_time_value_usd_per_hour"]
    path.write_text(json.dumps(first) + "\n" + "".join(lines[1:]))
    resumed = _resume(tmp_path)
    assert resumed["spec"].job_time_value_usd_per_hour == 0.0
    assert resumed["orchestrator"].done
