"""Crash safety of ``spottune serve``: kill -9 the server while a study runs, start it again on the same store, and
the study continues from its journal to the same end (decision SV8)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from spottune.journal import JOURNAL_FILE
from spottune.service import ServiceClient, ServiceError
from tests._wait import wait_until

pytestmark = [pytest.mark.server, pytest.mark.process, pytest.mark.slow]

ADMIN = "crash-admin"
#: About 2 s of events on the simulator: long enough to be killed in the middle.
STUDY = {"workload": "linreg", "search_space": {"lr": {"grid_search": [0.01, 0.05]}}, "max_steps": 30, "theta": 1,
         "top_k": 1, "predictor": "none"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(data_dir: Path, port: int) -> subprocess.Popen:
    cmd = [sys.executable, "-c", "from spottune.cli import main; main()", "serve", "--data-dir", str(data_dir),
           "--port", str(port), "--admin-token", ADMIN]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(data_dir / "server.log", "ab"),
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)})

    def up():
        assert proc.poll() is None, (data_dir / "server.log").read_text()[-2000:]
        try:
            with ServiceClient(f"http://127.0.0.1:{port}", ADMIN, timeout_s=2) as c:
                return c.health()["ok"]
        except ServiceError:
            return False

    wait_until(up, 60, interval_s=0.1, what="the server answers")
    return proc


def test_a_study_killed_with_its_server_continues_from_its_journal(tmp_path):
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = _start(tmp_path, port)
    try:
        with ServiceClient(url, ADMIN) as admin:
            token = admin.create_team("vision")["token"]
        with ServiceClient(url, token) as vision:
            study = vision.submit(STUDY, team="vision", name="crash")
            out = tmp_path / "studies" / str(study["id"])
            journal = out / JOURNAL_FILE
            wait_until(lambda: journal.exists() and len(journal.read_text().splitlines()) > 10, 60,
                       what="the study is well under way")
            os.kill(server.pid, signal.SIGKILL)
            server.wait(10)
        assert not (out / "summary.json").exists()  # killed mid-run
        server = _start(tmp_path, port)
        with ServiceClient(url, token) as vision:
            done = vision.wait("crash", timeout_s=120)
        assert done["state"] == "finished", done["error"]
        summary = json.loads((out / "summary.json").read_text())
        assert done["summary"]["steps_executed"] == summary["steps_executed"] == 60  # no step lost, none twice
        trials = (out / "trials.csv").read_text().splitlines()
        assert len(trials) == 3 and all(",finished," in line for line in trials[1:])
    finally:
        server.kill()
        server.wait(10)
