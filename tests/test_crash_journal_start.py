"""A run killed in its first seconds is no dead end: the journal's spec line is written atomically first, and a
journal without a complete spec line is no run (``spottune run`` may reuse the folder, ``spottune resume`` says
there is nothing to resume)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spottune.errors import ConfigError
from spottune.experiment import ExperimentSpec
from spottune.journal import JOURNAL_FILE, Journal, holds_run, open_run, read_journal
from tests.test_crash_resume import SPEC

BIN = Path(sys.executable).parent


def test_the_spec_line_is_on_disk_before_anything_else(tmp_path):
    path = tmp_path / JOURNAL_FILE
    journal = Journal(path, spec={"seed": 7}, trials=[["t00", {"lr": 0.1}, 3]])
    try:
        raw = path.read_bytes()  # read while the journal is still open: nothing is waiting in a buffer
        assert raw.endswith(b"\n") and raw.count(b"\n") == 1
        assert json.loads(raw) == {"n": 0, "k": "spec", "spec": {"seed": 7}, "trials": [["t00", {"lr": 0.1}, 3]],
                                   "version": 1}
        assert [p.name for p in tmp_path.iterdir()] == [JOURNAL_FILE]  # no temporary file left
    finally:
        journal.close()
    with pytest.raises(FileExistsError):
        Journal(path, spec={"seed": 8})  # an existing journal is never replaced
    assert read_journal(path)[0]["spec"] == {"seed": 7}


@pytest.mark.parametrize("content", [b"", b'{"n": 0, "k": "spec", "spec": {"workl'])
def test_a_journal_without_a_complete_spec_line_is_no_run(tmp_path, content):
    (tmp_path / JOURNAL_FILE).write_bytes(content)
    assert not holds_run(tmp_path / JOURNAL_FILE)
    with pytest.raises(ConfigError, match=r"holds no run to resume: journal\.jsonl has no complete experiment spec "
                                          r"line .*start it again with `spottune run --output "):
        open_run(tmp_path)
    assert (tmp_path / JOURNAL_FILE).read_bytes() == content  # a refused resume changes nothing
    spec, journal, records = open_run(tmp_path, ExperimentSpec(**SPEC))  # a new run takes the folder
    journal.close()
    assert records is None and holds_run(tmp_path / JOURNAL_FILE)
    assert [r["k"] for r in read_journal(tmp_path / JOURNAL_FILE)] == ["spec"]
    with pytest.raises(ConfigError, match="already holds a run"):  # now it is one
        open_run(tmp_path, ExperimentSpec(**SPEC))


@pytest.mark.slow
def test_tune_reuses_a_folder_whose_run_was_killed_before_it_began(tmp_path):
    import spottune

    out = tmp_path / "res"
    out.mkdir()
    (out / JOURNAL_FILE).write_bytes(b"")  # what a run killed in its first seconds left
    grid = spottune.tune(ExperimentSpec(**SPEC), output=out)
    assert grid.summary["total_cost_usd"] > 0
    assert (out / "summary.json").exists() and read_journal(out / JOURNAL_FILE)[-1]["k"] != "spec"


def test_a_refused_run_removes_the_journal_it_wrote_over_an_empty_one(tmp_path):
    import spottune

    out = tmp_path / "res"
    out.mkdir()
    (out / JOURNAL_FILE).write_bytes(b"")
    with pytest.raises(Exception):
        spottune.tune(ExperimentSpec(**{**SPEC, "start_utc": "1999-01-01T00:00:00Z"}), output=out)  # no prices then
    assert not holds_run(out / JOURNAL_FILE)  # the folder still holds no run: no dead end either way


@pytest.mark.process
@pytest.mark.slow
def test_cli_resume_of_an_empty_journal_is_one_line_and_run_takes_the_folder(tmp_path):
    import yaml

    cfg = tmp_path / "spec.yaml"
    cfg.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    out = tmp_path / "res"
    out.mkdir()
    (out / JOURNAL_FILE).write_bytes(b"")
    resumed = subprocess.run([str(BIN / "spottune"), "resume", str(out), "--no-progress"], capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 2
    assert resumed.stderr.strip().count("\n") == 0 and "holds no run to resume" in resumed.stderr
    ran = subprocess.run([str(BIN / "spottune"), "run", "--config", str(cfg), "--no-progress", "--output", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert (out / "summary.json").exists()
