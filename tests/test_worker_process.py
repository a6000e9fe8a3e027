"""The worker as a real OS process: IMDS notice -> checkpoint -> exit; a resumed worker repeats the curve."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spottune.checkpoint import open_store
from spottune.backends.local.imds import ImdsClient, ImdsEmulator
from spottune.trainable import Trainable


class Walk(Trainable):
    """Pure NumPy (fast to import in a worker): noisy gradient descent on x**2."""

    reference_seconds_per_step = 60.0
    checkpoint_size_mb = 1.0

    def setup(self, config):
        self.x = 5.0

    def step(self):
        if self.iteration + 1 == self.config.get("fail_at"):
            raise RuntimeError("boom")
        self.x -= self.config["lr"] * 2 * self.x + float(self.rng.normal(0, 0.05))
        return {"loss": self.x**2 + 0.1}

    def save_checkpoint(self, d):
        Path(d, "x.json").write_text(json.dumps(self.x))
        time.sleep(self.config.get("save_sleep_s", 0.0))  # a slow upload (the local backend's lost-checkpoint test)

    def load_checkpoint(self, d):
        self.x = json.loads(Path(d, "x.json").read_text())


WORKLOAD = "tests.test_worker_process:Walk"
CONFIG = {"lr": 0.02}


def reference(n, seed=3):
    t = Walk(CONFIG, seed=seed)
    return [t.train() for _ in range(n)]


class Worker:
    """A worker subprocess with line-by-line access to its JSON output."""

    def __init__(self, store, imds_url, *, until, resume=-1, step_wall_s=0.004, storage_options=None, extra=()):
        args = [sys.executable, "-m", "spottune.backends.local.worker", "--trial", "t0", "--workload", WORKLOAD,
                "--config", json.dumps(CONFIG), "--seed", "3", "--store", store,
                "--storage-options", json.dumps(storage_options or {}), "--until-step", str(until),
                "--resume-step", str(resume), "--step-wall-s", str(step_wall_s), "--imds-url", imds_url,
                "--poll-s", "0.02", *extra]
        env = {**os.environ, "PYTHONPATH": os.getcwd()}
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.lines = []

    def next(self):
        line = self.proc.stdout.readline()
        assert line, f"worker ended early (code {self.proc.wait()})"
        msg = json.loads(line)
        self.lines.append(msg)
        return msg

    def until(self, event):
        while (msg := self.next())["event"] != event:
            pass
        return msg

    def send(self, **cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def finish(self):
        """Read up to the worker's ``exit`` line (stdin stays open: EOF would make it exit)."""
        if not self.lines or self.lines[-1]["event"] != "exit":
            self.until("exit")
        assert self.proc.stdout.read() == ""
        return self.proc.wait(timeout=30)

    def metrics(self):
        return [m["metrics"] for m in self.lines if m["event"] == "metric"]


@pytest.fixture
def imds():
    with ImdsEmulator(require_token=True) as emu:
        yield emu


def run_with_notices(store, imds, cuts, storage_options=None):
    """Revoke a worker through IMDS after each cut; resume a new worker each time."""
    curve = []
    for i, cut in enumerate(cuts):
        url = imds.register(f"i-{i}", instance_type="r3.large", availability_zone="us-east-1a")
        w = Worker(store, url, until=cuts[-1], storage_options=storage_options)
        ready = w.until("ready")
        assert ready["step"] == (cuts[i - 1] if i else 0)
        if cut != cuts[-1]:
            while w.next()["event"] != "metric" or w.lines[-1]["step"] < cut:
                pass
            imds.notify(f"i-{i}", time_s=1431000000.0 + 120)
            notice = w.until("notice")
            assert notice == {"event": "notice", "action": "terminate", "time": "2015-05-07T12:02:00Z"}
            saved = w.until("checkpoint")
            assert saved["reason"] == "revocation" and saved["step"] >= cut
            cuts[i] = saved["step"]  # steps done before the poll saw the notice are kept, not lost
            assert w.finish() == 0 and w.lines[-1] == {"event": "exit", "code": 0}
        else:
            w.until("idle")
            w.send(cmd="checkpoint", reason="end")
            assert w.until("checkpoint")["step"] == cut and w.finish() == 0
        curve += w.metrics()
    return curve


@pytest.mark.process
def test_notice_checkpoint_and_resume_give_the_uninterrupted_curve(tmp_path, imds):
    cuts = [5, 12, 13, 30]
    curve = run_with_notices(str(tmp_path / "store"), imds, cuts)
    assert [m["step"] for m in curve] == list(range(1, 31))
    assert curve == reference(30)
    assert imds.requests > 5  # the workers really polled (with IMDSv2 tokens: require_token=True)


@pytest.mark.server
def test_notice_resume_on_s3(seaweedfs, s3_store_url, imds):
    curve = run_with_notices(s3_store_url, imds, [8, 20], storage_options=seaweedfs["storage_options"])
    assert curve == reference(20)
    assert open_store(s3_store_url, seaweedfs["storage_options"]).latest_good("t0").step == 20


@pytest.mark.process
def test_checkpoint_command_discards_the_step_in_flight(tmp_path):
    w = Worker(str(tmp_path / "s"), "none", until=1000, step_wall_s=0.5)  # slow steps: a command lands mid-step
    w.until("ready")
    w.until("metric")
    w.send(cmd="checkpoint", reason="hop")
    saved = w.until("checkpoint")
    assert w.finish() == 0
    assert saved["step"] == w.metrics()[-1]["step"] and saved["reason"] == "hop"


@pytest.mark.process
def test_sigterm_checkpoints_and_eof_exits(tmp_path):
    w = Worker(str(tmp_path / "s"), "none", until=1000)
    w.until("metric")
    w.proc.terminate()
    saved = w.until("checkpoint")
    assert saved["reason"] == "sigterm" and w.finish() == 0
    w2 = Worker(str(tmp_path / "s"), "none", until=1000, resume=saved["step"], step_wall_s=60.0)
    assert w2.until("ready")["step"] == saved["step"]
    w2.proc.stdin.close()  # the driver is gone before a step: nothing new to save
    assert w2.finish() == 0 and not any(m["event"] == "checkpoint" for m in w2.lines)


@pytest.mark.process
def test_a_worker_whose_driver_is_gone_saves_its_steps_then_exits(tmp_path):
    """EOF on stdin (the driver died): a lease checkpoint at the current step, holding the segment's metrics."""
    store = str(tmp_path / "s")
    w = Worker(store, "none", until=1000)
    w.until("ready")
    while len(w.metrics()) < 5:
        w.next()
    w.proc.stdin.close()
    saved = w.until("checkpoint")
    assert w.finish() == 0
    reported = [m for m in w.lines if m["event"] == "metric"]
    assert saved["reason"] == "lease" and saved["step"] == reported[-1]["step"] >= 5
    info = open_store(store).latest_good("t0")
    assert info.step == saved["step"] and info.metadata["reason"] == "lease"
    assert info.metadata["restored_step"] == 0
    assert info.metadata["metrics"] == [[m["step"], m["metrics"]] for m in reported]
    w2 = Worker(store, "none", until=saved["step"] + 3, resume=saved["step"])  # resumes there, bit for bit
    assert w2.until("ready")["step"] == saved["step"]
    w2.until("idle")
    w2.send(cmd="exit")
    assert w2.finish() == 0
    assert [m["metrics"] for m in reported] + w2.metrics() == reference(saved["step"] + 3)


@pytest.mark.process
def test_a_worker_whose_driver_stopped_reading_saves_then_exits(tmp_path):
    """The driver's end of stdout closed (a broken pipe), stdin still open: the same lease checkpoint."""
    store = str(tmp_path / "s")
    w = Worker(store, "none", until=1000)
    w.until("ready")
    while len(w.metrics()) < 3:
        w.next()
    w.proc.stdout.close()
    assert w.proc.wait(timeout=30) == 0
    info = open_store(store).latest_good("t0")
    assert info.metadata["reason"] == "lease" and info.step >= 3
    assert [s for s, _ in info.metadata["metrics"]] == list(range(1, info.step + 1))
    assert [m for _, m in info.metadata["metrics"]] == reference(info.step)


@pytest.mark.process
def test_trainable_failure_is_reported(tmp_path):
    w = Worker(str(tmp_path / "s"), "none", until=100, extra=("--config", json.dumps({"lr": 0.1, "fail_at": 3})))
    assert w.finish() == 1
    failed = [m for m in w.lines if m["event"] == "failed"]
    assert failed == [{"event": "failed", "during": "step", "error": "RuntimeError: boom"}]
    assert len(w.metrics()) == 2


@pytest.mark.process
def test_bad_arguments_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "spottune.backends.local.worker", "--trial", "t", "--workload", "x",
                           "--store", str(tmp_path), "--until-step", "3", "--config", "[1]"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "--config must be a JSON object" in proc.stderr


def test_imds_client_against_the_emulator(imds):
    url = imds.register("i-9", instance_type="c3.xlarge", availability_zone="us-east-1b")
    client = ImdsClient(url)
    assert client.instance_action() is None
    assert client.get("/latest/meta-data/instance-type") == "c3.xlarge"
    assert client.get("/latest/meta-data/placement/availability-zone") == "us-east-1b"
    imds.notify("i-9", time_s=0.0, action="stop")
    action = client.instance_action()
    assert (action.action, action.time_utc) == ("stop", "1970-01-01T00:00:00Z")
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as err:  # IMDSv2 required: no token, no answer
        urllib.request.urlopen(url + "/latest/meta-data/spot/instance-action")
    assert err.value.code == 401
    imds.unregister("i-9")
    assert ImdsClient(url).instance_action() is None  # unknown instance: 404 on the token route -> v1 -> 404


@pytest.mark.process
def test_standby_worker_runs_several_segments(tmp_path):
    store = str(tmp_path / "s")
    proc = subprocess.Popen([sys.executable, "-m", "spottune.backends.local.worker", "--standby", "--workload", WORKLOAD,
                             "--store", store], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    lines = []

    def until(event):
        while True:
            msg = json.loads(proc.stdout.readline())
            lines.append(msg)
            if msg["event"] == event:
                return msg

    def send(obj):
        proc.stdin.write(json.dumps(obj) + "\n")
        proc.stdin.flush()

    base = ["--trial", "t0", "--workload", WORKLOAD, "--config", json.dumps(CONFIG), "--seed", "3",
            "--store", store, "--imds-url", "none"]
    assert until("standby")["warm_up_s"] >= 0
    for resume, until_step in ((0, 6), (6, 15)):
        send({"argv": base + ["--resume-step", str(resume), "--until-step", str(until_step)]})
        assert until("ready")["step"] == resume
        until("idle")
        send({"cmd": "checkpoint", "reason": "hop"})
        assert until("checkpoint")["step"] == until_step
        until("standby")  # the same process is ready for the next segment
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    assert [m["metrics"] for m in lines if m["event"] == "metric"] == reference(15)
