"""Test harness of the aws backend: a moto server seeded with spot prices, and the EC2 hosts it lacks.

:func:`moto_server` starts ``ThreadedMotoServer`` on 127.0.0.1 (EC2, S3, SQS, IAM in one server) with
``describe_spot_price_history`` answering from a seeded :class:`spotmarket.prices.PriceHistory` (moto's own
answer is a constant fake; the handler is replaced in-process before the server serves, as in
``tests/test_prices_cli.py``), like EC2: the changes in the window plus the price in force at its start. Its
SQS FIFO queues hand back a message group's messages in order once their visibility timeout has passed, as SQS
does (moto counts a group as in flight while any of its expired messages is not yet received again, so it
returned the last one first: ``pending_message_groups`` is replaced in-process the same way).

:class:`Ec2Hosts` plays the hosts of one experiment: it watches ``describe_instances`` for new instances
tagged with the experiment, reads their user data, and runs the agent and its worker as local processes
each with its own path on an IMDS emulator. With ``user_data=True`` a host **runs its user-data script** with
bash, as cloud-init would: ``docker run ... IMAGE --segment URL`` starts the image's entry point
(``python -m spottune.backends.aws.agent --segment URL``; :data:`DOCKER_SHIM` stands in for Docker, with the
host's environment standing in for the instance profile and the metadata service), ``aws ecr`` and
``shutdown`` are no-ops, and the script's end powers the host off. Otherwise (the default, for the scenarios
whose timing rides on a fast clock) a host is pre-warmed (``agent --standby``: a host booted from a baked image)
and handed the segment URL and the user data's environment on its stdin. With a
revocation model and the backend's clock it replays the market: a launch the market refuses gets
``SpotMaxPriceTooLow`` (a botocore ``before-call`` hook on the backend's EC2 client); at a revocation's
notice time the emulator shows ``spot/instance-action``; at its termination time (but never less than
:data:`MIN_NOTICE_WALL_S` wall seconds after the notice) the host's processes are killed and the instance is terminated in moto with ``Server.SpotInstanceTermination``. An agent that exits
powers its host off: the instance is terminated with ``Client.InstanceInitiatedShutdown``. An instance
terminated by the API gets its processes killed. Failure injection: :meth:`Ec2Hosts.refuse` (capacity)
and :meth:`Ec2Hosts.throttle`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timezone
from pathlib import Path
from typing import Any

import boto3

from spottune.backends.aws import find_instances, parse_user_data
from spottune.backends.aws._launch import user_data_trust
from spottune.backends.local.imds import ImdsEmulator

ROOT = Path(__file__).resolve().parents[1]
ACCOUNT = "123456789012"
#: Wall seconds a worker gets between the notice and the provider's termination, at least: 120 s at 500x
#: is 0.24 s, less than a loaded 2-core machine needs to schedule the save and relay the notice (the engine
#: time of the termination is then later than the replay's; the ledger bills the observed end). An agent's
#: linger must be longer, or it powers the host off first (tests/test_aws_backend.py LINGER_S).
MIN_NOTICE_WALL_S = 2.0
REGION = "us-east-1"


#: The ``docker`` of a host that runs its user data: ``login`` succeeds; ``run [--rm] [--network N] [-e NAME[=V]]...
#: IMAGE ARGS...`` runs the image's entry point (``python -m spottune.backends.aws.agent ARGS...``) with the host's
#: environment (moto's endpoint and credentials stand for the instance profile, ``$SPOTTUNE_IMDS_URL`` for the
#: metadata service) plus the ``-e`` variables, as the container would see them.
DOCKER_SHIM = """import os, sys
args = sys.argv[1:]
if args[:1] == ["login"]:
    sys.stdin.read()
    sys.exit(0)
if args[:1] != ["run"]:
    sys.exit(f"docker shim: only login and run, not {args!r}")
env, i = dict(os.environ), 1
while args[i].startswith("-"):
    if args[i] == "-e":
        name, eq, value = args[i + 1].partition("=")
        if eq:
            env[name] = value
        i += 2
    elif args[i] == "--network":
        i += 2
    else:
        i += 1
os.execve(sys.executable, [sys.executable, "-m", "spottune.backends.aws.agent", *args[i + 1:]], env)
"""


def _shims(folder: Path) -> Path:
    """A folder of ``docker`` (:data:`DOCKER_SHIM`), ``aws`` and ``shutdown`` for hosts that run their user data."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in (("docker", f"#!{sys.executable}\n{DOCKER_SHIM}"), ("aws", "#!/bin/sh\necho password\n"),
                       ("shutdown", "#!/bin/sh\nexit 0\n")):
        path = folder / name
        path.write_text(body)
        path.chmod(0o755)
    return folder


def _price_rows(history: Any) -> list[tuple[float, str, str, str, float]]:
    rows = []
    for m in history.markets:
        s = history[m]
        for t, p in zip(s.times_s.tolist(), s.prices.tolist()):
            rows.append((t, m.availability_zone, m.instance_type, m.product_description, p))
    return sorted(rows)


@contextlib.contextmanager
def moto_server(history: Any) -> Iterator[str]:
    """A moto server whose spot price history is ``history``; yields its URL. Sets dummy credentials."""
    from datetime import datetime

    from moto.core.responses import ActionResult
    from moto.ec2.responses.spot_instances import SpotInstances
    from moto.server import ThreadedMotoServer
    from moto.sqs.models import Queue

    rows = _price_rows(history)

    def describe_spot_price_history(self):  # noqa: ANN001 - moto's handler signature
        types = self._get_param("InstanceTypes") or []
        products = self._get_param("ProductDescriptions") or []
        zone = self._get_param("AvailabilityZone")
        start = self._get_param("StartTime").replace(tzinfo=timezone.utc).timestamp()
        end = self._get_param("EndTime").replace(tzinfo=timezone.utc).timestamp()
        out, last = [], {}
        for r in rows:
            t, az, it, pd_, price = r
            if (types and it not in types) or (products and pd_ not in products) or (zone and az != zone):
                continue
            if t <= start:
                last[(az, it, pd_)] = r
            elif t <= end:
                out.append(r)
        out = sorted(last.values()) + out
        items = [{"AvailabilityZone": az, "InstanceType": it, "ProductDescription": pd_, "SpotPrice": f"{p:.6f}",
                  "Timestamp": datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")}
                 for t, az, it, pd_, p in out]
        return ActionResult({"SpotPriceHistory": items})

    def pending_message_groups(self):  # noqa: ANN001 - moto's Queue
        return {m.group_id for m in self._pending_messages if m.group_id is not None and not m.visible}

    saved = SpotInstances.describe_spot_price_history
    saved_groups = Queue.pending_message_groups
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    SpotInstances.describe_spot_price_history = describe_spot_price_history
    Queue.pending_message_groups = property(pending_message_groups)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    url = f"http://127.0.0.1:{port}"
    import urllib.request

    def reset() -> None:  # moto's state is per process, shared by every server in it: start and end clean
        urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=10).read()

    try:
        reset()
        boto3.client("iam", endpoint_url=url).create_instance_profile(InstanceProfileName="spottune-worker")
        yield url
    finally:
        reset()
        server.stop()
        SpotInstances.describe_spot_price_history = saved
        Queue.pending_message_groups = saved_groups
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _kill_host(proc: subprocess.Popen) -> None:
    """SIGKILL the agent and its worker (the host is gone)."""
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def moto_instance(instance_id: str) -> Any:
    from moto.ec2.models import ec2_backends

    return ec2_backends[ACCOUNT][REGION].get_instance(instance_id)


def end_in_moto(instance_id: str, code: str) -> None:
    """Terminate an instance in moto's state with state reason ``code`` (as EC2 would)."""
    from moto.ec2.models.instances import StateReason

    inst = moto_instance(instance_id)
    if inst.state != "terminated":
        inst.terminate()
        inst.state_reason = StateReason(f"{code}: ended by the test host", code)


class Ec2Hosts:
    """The EC2 hosts of one experiment (see the module docstring).

    Parameters
    ----------
    endpoint : str
        The moto server.
    experiment : str
    workload : str
        What the pre-warmed workers import (their store is opened by the segment, with its options).
    store : str
        Unused (kept for the callers).
    log_dir : pathlib.Path
    revocation : spotmarket.RevocationModel, optional
        The replayed market's revocations; needs ``clock``.
    clock : ScaledClock, optional
        The backend's clock (engine time).
    warm : int
        Pre-warmed hosts kept ready (none with ``user_data``).
    user_data : bool
        Each host runs its user-data script (the image's real entry point, ``agent --segment URL``); slower to
        boot than a pre-warmed host.
    """

    def __init__(self, endpoint: str, experiment: str, *, workload: str, store: str, log_dir: Path,
                 revocation: Any = None, clock: Any = None, warm: int = 4, storage_options: str = "{}",
                 user_data: bool = False):
        self.endpoint, self.experiment = endpoint, experiment
        self.workload, self.store, self.log_dir = workload, store, log_dir
        self.revocation, self.clock, self.warm = revocation, clock, 0 if user_data else warm
        self.user_data = user_data
        self.ec2 = boto3.client("ec2", endpoint_url=endpoint, region_name=REGION)
        self.imds = ImdsEmulator(require_token=True).start()
        self.env = {**os.environ, "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
                    "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION,
                    "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        if user_data:
            self.env["PATH"] = os.pathsep.join([str(_shims(log_dir / "host-bin")), os.environ.get("PATH", "")])
        self._pool: list[tuple[subprocess.Popen, str]] = []
        self._n = 0
        self._warm: set[str] = set()
        self.hosts: dict[str, tuple[subprocess.Popen, str]] = {}  # instance id -> (agent, imds host)
        self.booted: list[str] = []
        self.revoked: list[str] = []
        self.shutdowns: list[str] = []
        self.run_calls: list[dict[str, Any]] = []
        self._refuse: dict[tuple[str, str], tuple[int, str]] = {}
        self._throttle = 0
        self._refused: dict[str, tuple[str, int | None]] = {}  # launch id -> (code, HTTP status) of its refusal
        self._revs: dict[str, Any] = {}
        self._rearm = False
        self._armed: dict[str, tuple[str, Any]] = {}  # instance id -> (host, revocation) with timers on the clock
        # held while a host dies: the provider's termination (clock thread) kills the host and marks the
        # instance in moto as one step, so the hosts thread never sees the dead agent first and calls it a
        # shutdown (Client.InstanceInitiatedShutdown) in between
        self._ending = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="ec2-hosts")
        self.errors: list[str] = []
        self.passes = 0  # passes of the hosts' thread over describe_instances, done

    # -- pre-warmed hosts --------------------------------------------------------------------------------
    def _spawn(self) -> None:
        self._n += 1
        name = f"h{self._n:04d}"
        url = self.imds.register(name)
        log = open(self.log_dir / f"{name}.log", "wb")
        proc = subprocess.Popen([sys.executable, "-m", "spottune.backends.aws.agent", "--standby", self.workload,
                                 "", "--imds-url", url], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=log, env=self.env, text=True, bufsize=1, cwd=str(ROOT), start_new_session=True)
        self._pool.append((proc, name))

    def warm_up(self, timeout_s: float = 60.0) -> None:
        """Start the pre-warmed hosts and wait until they are ready."""
        while len(self._pool) < self.warm:
            self._spawn()
        deadline = time.monotonic() + timeout_s
        for proc, name in self._pool:
            line = proc.stdout.readline()
            if '"standby"' not in line or time.monotonic() > deadline:
                raise RuntimeError(f"host {name} did not warm up: {line!r}, see {self.log_dir / (name + '.log')}")
            self._warm.add(name)

    # -- failure injection (botocore event hooks on the backend's client) ---------------------------------
    def attach(self, ec2_client: Any) -> None:
        """Hook the backend's EC2 client: market refusals, injected capacity errors and throttling."""
        ec2_client.meta.events.register("before-parameter-build.ec2.RunInstances", self._remember)
        ec2_client.meta.events.register("before-send.ec2.RunInstances", self._before_run)

    def refuse(self, zone: str, instance_type: str, times: int = 1, code: str = "InsufficientInstanceCapacity",
               status: int | None = None) -> None:
        """The next ``times`` launches in that market fail with ``code``, every botocore attempt of them
        (HTTP ``status``; default 500 for ``InsufficientInstanceCapacity``, as EC2 answers it, 400 otherwise)."""
        self._refuse[(zone, instance_type)] = (times, code, status)

    def throttle(self, times: int = 1) -> None:
        """The next ``times`` RunInstances attempts answer RequestLimitExceeded (botocore retries them)."""
        self._throttle = times

    def _remember(self, params: dict, **_: Any) -> None:
        self._params = params

    @staticmethod
    def _error(status: int, code: str, message: str) -> Any:
        """An HTTP answer of EC2 with an error document: botocore parses it and retries it as it would EC2's."""
        from botocore.awsrequest import AWSResponse

        body = (f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors>"
                f"<RequestID>spottune-test</RequestID></Response>").encode()

        class _Raw:
            def stream(self, **_: Any) -> Iterator[bytes]:
                yield body

        return AWSResponse("http://ec2", status, {}, _Raw())

    def _before_run(self, **_: Any) -> Any:
        p = self._params
        zone, itype = p["Placement"]["AvailabilityZone"], p["InstanceType"]
        tags = {t["Key"]: t["Value"] for t in p["TagSpecifications"][0]["Tags"]}
        self.run_calls.append({"zone": zone, "type": itype, "launch": tags["spottune:launch"],
                               "trial": tags["spottune:trial"], "max_price": p["InstanceMarketOptions"]["SpotOptions"]["MaxPrice"]})
        if self._throttle > 0:
            self._throttle -= 1
            self.run_calls[-1]["answer"] = "RequestLimitExceeded"
            return self._error(503, "RequestLimitExceeded", "Request limit exceeded.")
        launch_id = tags["spottune:launch"]
        left, code, status = self._refuse.get((zone, itype), (0, "", None))
        if left > 0 or launch_id in self._refused:
            if launch_id not in self._refused:
                self._refuse[(zone, itype)] = (left - 1, code, status)
                self._refused[launch_id] = (code, status)
            code, status = self._refused[launch_id]
            self.run_calls[-1]["answer"] = code
            return self._error(status or (500 if code == "InsufficientInstanceCapacity" else 400), code,
                               f"There is no Spot capacity available that matches your request ({zone}).")
        if self.revocation is not None:
            from spotmarket.prices import Market

            rev = self.revocation.revocation(Market(zone, itype), self.clock.engine_s(), instance_id=tags["spottune:launch"],
                                             max_price_usd_per_hour=float(p["InstanceMarketOptions"]["SpotOptions"]["MaxPrice"]))
            if not rev.fulfilled:
                self.run_calls[-1]["answer"] = "SpotMaxPriceTooLow"
                return self._error(400, "SpotMaxPriceTooLow", "Your Spot request price is lower than the minimum.")
            self._revs[tags["spottune:launch"]] = rev
        self.run_calls[-1]["answer"] = "ok"
        return None

    # -- the hosts -----------------------------------------------------------------------------------------
    def start(self) -> "Ec2Hosts":
        self.warm_up()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        for proc, _ in [*self._pool, *self.hosts.values()]:
            _kill_host(proc)
        self.imds.stop()

    def settle(self, timeout_s: float = 30.0) -> None:
        """Wait until the hosts' thread has made a whole pass begun after this call: every instance ended
        before it has had its processes killed (or its shutdown recorded), and any error is in :attr:`errors`."""
        from tests._wait import wait_until

        begun = self.passes + 1  # the pass under way may have read describe_instances before the call
        wait_until(lambda: self.passes > begun or not self._thread.is_alive(), timeout_s, what="a pass of the hosts' thread")

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception as exc:  # noqa: BLE001 - recorded for the test to see
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self.passes += 1
            self._stop.wait(0.05)

    def _tick(self) -> None:
        self._follow()
        for tagged in find_instances(self.ec2, self.experiment):
            iid = tagged.instance_id
            if tagged.state in ("pending", "running") and iid not in self.hosts:
                self._boot(tagged)
            elif tagged.state not in ("pending", "running") and iid in self.hosts:
                proc, _ = self.hosts[iid]
                if proc.poll() is None:  # terminated through the API: the host is gone
                    _kill_host(proc)
        for iid, (proc, _) in list(self.hosts.items()):
            with self._ending:
                if proc.poll() is not None and iid not in self.shutdowns and moto_instance(iid).state != "terminated":
                    self.shutdowns.append(iid)  # the agent exited: user data powers the host off
                    end_in_moto(iid, "Client.InstanceInitiatedShutdown")

    def _boot(self, tagged: Any) -> None:
        attr = self.ec2.describe_instance_attribute(InstanceId=tagged.instance_id, Attribute="userData")
        script = base64.b64decode(attr["UserData"]["Value"]).decode()
        if self.user_data:
            self._n += 1
            host = f"h{self._n:04d}"
            path = self.log_dir / f"{host}.user-data.sh"
            path.write_text(script)
            log = open(self.log_dir / f"{host}.log", "wb")
            proc = subprocess.Popen(["bash", str(path)], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    env={**self.env, "SPOTTUNE_IMDS_URL": self.imds.register(host)}, cwd=str(ROOT),
                                    start_new_session=True)
            self._booted(tagged, proc, host)
            return
        segment = json.dumps({"segment": parse_user_data(script), "env": user_data_trust(script)})
        if not self._pool:
            self._spawn()
        proc, host = self._pool.pop(0)
        if host not in self._warm:
            proc.stdout.readline()  # wait until it is warm
        self._spawn()  # boot a replacement in the background
        proc.stdin.write(segment + "\n")
        proc.stdin.flush()
        self._booted(tagged, proc, host)

    def _booted(self, tagged: Any, proc: subprocess.Popen, host: str) -> None:
        """The host of ``tagged`` runs: remember it and put the market's revocation of it on the clock."""
        self.hosts[tagged.instance_id] = (proc, host)
        self.booted.append(tagged.instance_id)
        rev = self._revs.get(tagged.launch_id)
        if rev is not None and self.clock is not None:
            self._armed[tagged.instance_id] = (host, rev)
            self._arm(tagged.instance_id, host, rev)

    def _arm(self, instance_id: str, host: str, rev: Any) -> None:
        """Put the market's rebalance hint, notice and termination of one instance on :attr:`clock`."""
        import math

        if math.isfinite(rev.notice_s):  # a rebalance recommendation (the early hint) 5 min before the notice
            self.clock.call_at(rev.notice_s - 300.0, lambda: self.imds.rebalance(host, time_s=rev.notice_s - 300.0))
            self.clock.call_at(rev.notice_s, lambda: self.imds.notify(host, time_s=rev.termination_s))
        if math.isfinite(rev.termination_s):  # at least MIN_NOTICE_WALL_S after the notice (see the module doc)
            end_s = max(rev.termination_s, rev.notice_s + MIN_NOTICE_WALL_S * self.clock.time_scale)
            self.clock.call_at(end_s, self._provider_ends, instance_id)

    def follow(self, clock: Any) -> None:
        """Replay the market on ``clock`` from now on (a resumed orchestrator's): the notices and terminations
        of the instances still running are put on it again (EC2 does not stop when the orchestrator does)."""
        self.clock, self._rearm = clock, True  # armed by the hosts' thread once the clock has started

    def _follow(self) -> None:
        if not self._rearm or getattr(self.clock, "_sched", None) is None:
            return
        self._rearm = False
        for iid, (host, rev) in self._armed.items():
            if moto_instance(iid).state != "terminated":
                self._arm(iid, host, rev)

    def _provider_ends(self, instance_id: str) -> None:
        proc, _ = self.hosts[instance_id]
        with self._ending:
            if moto_instance(instance_id).state == "terminated":
                return
            self.revoked.append(instance_id)
            end_in_moto(instance_id, "Server.SpotInstanceTermination")
            _kill_host(proc)

    def running(self) -> list[str]:
        """Instances of the experiment that are not terminated, per describe_instances."""
        return [i.instance_id for i in find_instances(self.ec2, self.experiment) if i.state != "terminated"]
