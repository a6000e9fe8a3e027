"""Storage options never on a worker's command line, URL user information redacted on every write, a
resume never reuses a redacted endpoint, and the AWS agent imports only the experiment's workload."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from spottune.errors import ConfigError
from tests._wait import wait_until

USERINFO = "alice:pa55w0rd"
ENDPOINT = f"http://{USERINFO}@127.0.0.1:9/"


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.process
@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs Linux /proc")
def test_a_real_worker_process_has_no_storage_option_on_its_command_line(tmp_path):
    from spottune.backends.local._pool import WorkerPool

    pool = WorkerPool(python=sys.executable, workload="logreg", store_url=str(tmp_path / "store"),
                      storage_options={"endpoint_url": ENDPOINT, "auto_mkdir": True}, spares=1,
                      on_line=lambda *a: None, on_eof=lambda *a: None, log_dir=tmp_path)
    try:
        worker = pool.spawn_standby()
        # /proc/PID/cmdline is empty (or the parent's) until the child has exec'd: wait for the worker's own
        def exec_done() -> str:
            c = _cmdline(worker.proc.pid)
            return c if "spottune.backends.local.worker" in c else ""

        cmd = wait_until(exec_done, 10, what="the worker's command line")
        assert "spottune.backends.local.worker" in cmd and "--storage-options-file" in cmd
        assert "pa55w0rd" not in cmd and "alice" not in cmd and "endpoint_url" not in cmd
        path = Path(cmd.split("--storage-options-file ", 1)[1].split()[0])
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert json.loads(path.read_text()) == {"endpoint_url": ENDPOINT, "auto_mkdir": True}
        assert "pa55w0rd" not in Path(f"/proc/{worker.proc.pid}/environ").read_bytes().decode(errors="replace")
    finally:
        pool.stop_all()
    assert not path.exists() and not path.parent.exists()


def test_events_written_during_a_run_are_redacted(tmp_path):
    """What a killed run leaves: events.jsonl as appended, never rewritten at the end."""
    from spottune.results import ResultsJournal

    journal = ResultsJournal(tmp_path)
    record = SimpleNamespace(log=[], ledger=[], instance_steps={})
    journal.attach(record)
    record.log.append({"k": "event", "type": "LaunchFailed", "trial_id": "t00",
                       "error": f"checkpoint store is unreachable: Could not connect to the endpoint URL: {ENDPOINT}"})
    record.log.append({"k": "meta", "storage_options": {"endpoint_url": ENDPOINT, "secret": "s3cr3t"}})
    journal.flush()
    text = (tmp_path / "events.jsonl").read_text()  # not closed: as a kill -9 leaves it
    assert "pa55w0rd" not in text and "alice" not in text and "s3cr3t" not in text
    rows = [json.loads(line) for line in text.splitlines()]
    assert rows[0]["error"].endswith("endpoint URL: http://***@127.0.0.1:9/")
    assert rows[1]["storage_options"] == {"endpoint_url": "http://***@127.0.0.1:9/", "secret": "***"}
    journal.close()


def _journaled_run(folder: Path, options: dict) -> None:
    from spottune.experiment import ExperimentSpec
    from spottune.journal import open_run

    spec = ExperimentSpec.from_dict({"storage_options": options})
    _, journal, _ = open_run(folder, spec)
    journal.close()
    assert "pa55w0rd" not in (folder / "journal.jsonl").read_text()


def test_a_resume_refuses_a_redacted_endpoint(tmp_path, monkeypatch):
    from spottune.checkpoint._secrets import STORAGE_SECRETS_ENV
    from spottune.journal import open_run

    monkeypatch.delenv(STORAGE_SECRETS_ENV, raising=False)
    _journaled_run(tmp_path, {"endpoint_url": ENDPOINT, "key": "AKIA", "client_kwargs": {"region_name": "r"}})
    with pytest.raises(ConfigError) as err:
        open_run(tmp_path)
    assert str(err.value) == (f"{tmp_path}: storage_options.endpoint_url held credentials and was redacted in the "
                              f"journal; give it again in ${STORAGE_SECRETS_ENV} (storage options as JSON, merged "
                              "over the journaled ones) to resume")


def test_a_resume_takes_the_endpoint_given_again(tmp_path, monkeypatch):
    from spottune.checkpoint._secrets import STORAGE_SECRETS_ENV
    from spottune.journal import open_run

    _journaled_run(tmp_path, {"endpoint_url": ENDPOINT, "key": "AKIA", "client_kwargs": {"region_name": "r"}})
    monkeypatch.setenv(STORAGE_SECRETS_ENV, json.dumps({"endpoint_url": ENDPOINT}))
    spec, journal, _ = open_run(tmp_path)
    journal.close()
    # the redacted key is left to the credential chain; the endpoint is the one given again
    assert spec.storage_options == {"endpoint_url": ENDPOINT, "client_kwargs": {"region_name": "r"}}


class _Outbox:
    def __init__(self) -> None:
        self.sent: list[tuple[str, object]] = []

    def send(self, kind: str, body: object) -> None:
        self.sent.append((kind, body))


def _segment(workload: str) -> dict:
    from spottune.backends.local._pool import segment_argv

    argv = ["--workload", workload, "--store", "s3://b/p",
            *segment_argv(trial_id="t00", instance_id="l00001", config={}, seed=0, resume_step=0, until_step=3,
                          step_wall_s=0.0, imds_url="none", poll_wall_s=1.0, max_steps=3, keep=2)]
    return {"launch": "l00001", "trial": "t00", "worker_argv": argv, "storage_options": {}}


@pytest.mark.parametrize("argv_tail", [[], ["--workload", "evil_module:Evil"], ["--workl", "evil_module:Evil"],
                                       ["--workload=evil_module:Evil"]])
def test_the_agent_refuses_a_workload_the_user_data_does_not_name(argv_tail, capsys):
    from spottune.backends.aws.agent import REFUSED_EXIT_CODE, Agent

    seg = _segment("logreg" if argv_tail else "evil_module:Evil")
    seg["worker_argv"] += argv_tail
    outbox = _Outbox()
    agent = Agent(seg, control=None, outbox=outbox, imds_url="none", workload="logreg")
    assert agent.run() == REFUSED_EXIT_CODE == 2
    assert agent.proc is None and outbox.sent == [("exit", 2)]
    assert "evil_module:Evil" in capsys.readouterr().err
    assert "evil_module" not in sys.modules


def test_the_agent_without_a_named_workload_refuses_every_segment(monkeypatch):
    from spottune.backends.aws.agent import Agent

    monkeypatch.delenv("SPOTTUNE_WORKLOAD", raising=False)
    outbox = _Outbox()
    assert Agent(_segment("logreg"), control=None, outbox=outbox, imds_url="none").run() == 2
    assert outbox.sent == [("exit", 2)]


def test_user_data_names_the_workload_and_hands_the_key_without_a_command_line():
    from spottune.backends.aws._launch import parse_user_data, user_data, user_data_trust

    key = "ab" * 32
    script = user_data(image="123.dkr.ecr.us-east-1.amazonaws.com/w:1", segment_url="s3://b/p/segments/l1.json",
                       region="us-east-1", workload="digits-mlp", checkpoint_key=key)
    assert parse_user_data(script) == "s3://b/p/segments/l1.json"
    assert user_data_trust(script) == {"SPOTTUNE_WORKLOAD": "digits-mlp", "SPOTTUNE_CHECKPOINT_KEY": key}
    docker = next(line for line in script.splitlines() if line.startswith("docker run"))
    assert key not in docker
    assert " -e SPOTTUNE_WORKLOAD -e SPOTTUNE_CHECKPOINT_KEY " in docker
    with pytest.raises(ValueError, match="hex"):
        user_data(image="i", segment_url="s3://b/k", region="r", checkpoint_key="not hex")


def test_the_experiment_key_is_kept_private_in_the_results_folder(tmp_path, monkeypatch):
    from spottune.checkpoint._secrets import CHECKPOINT_KEY_ENV, KEY_FILE, experiment_key

    monkeypatch.delenv(CHECKPOINT_KEY_ENV, raising=False)
    key = experiment_key(tmp_path)
    assert len(bytes.fromhex(key)) == 32 and experiment_key(tmp_path) == key  # a resume gets the same key
    assert stat.S_IMODE((tmp_path / KEY_FILE).stat().st_mode) == 0o600
    monkeypatch.setenv(CHECKPOINT_KEY_ENV, "cd" * 32)
    assert experiment_key(tmp_path / "other") == "cd" * 32 and not (tmp_path / "other").exists()


def test_the_agent_refuses_a_segment_the_worker_would_not_parse(capsys):
    from spottune.backends.aws.agent import Agent

    seg = _segment("logreg")
    seg["worker_argv"] += ["--standby"]
    outbox = _Outbox()
    assert Agent(seg, control=None, outbox=outbox, imds_url="none", workload="logreg").run() == 2
    assert outbox.sent == [("exit", 2)]
    err = capsys.readouterr().err
    assert err.startswith("spottune agent: the segment's worker arguments are invalid (") and err.count("\n") == 1
