"""One worker driver, three transports: the local, aws and ray backends share ``WorkerDriver`` by composition.

No backend subclasses another (or the driver); each holds a ``WorkerDriver`` and its own transport, and each
transport has every member of the ``WorkerTransport`` protocol with the protocol's parameters. A scripted
in-memory transport drives a whole experiment through the driver, so the driver needs nothing of a backend.
"""

from __future__ import annotations

import inspect
import itertools
import math
import pytest

from spotmarket import Billing
from spottune.backends._base import Driver
from spottune.backends._replay import ReplayDriver
from spottune.backends._transport import WorkerTransport
from spottune.backends._worker_driver import WorkerDriver, WorkerInstance
from spottune.backends.aws._backend import AwsBackend, AwsClients
from spottune.backends.aws._settings import AwsSettings
from spottune.backends.aws._transport import Ec2Transport
from spottune.backends.local._backend import LocalBackend, LocalSettings
from spottune.backends.local._messages import Exited, Metric, Ready, Saved
from spottune.backends.local._transport import ProcessTransport
from spottune.backends.ray._backend import RayBackend
from spottune.backends.ray._transport import RayActorTransport
from spottune.orchestrator import Orchestrator, OrchestratorConfig, TrialState
from tests.test_sim_backend import FACTS, T0, Fixed, history
from tests.test_worker_process import WORKLOAD

BACKENDS = (LocalBackend, AwsBackend, RayBackend)
TRANSPORTS = (ProcessTransport, Ec2Transport, RayActorTransport)


def _members(protocol: type) -> list[str]:
    """The protocol's declared methods and attributes."""
    names = [n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")]
    return sorted({*names, *protocol.__annotations__})


def test_no_backend_subclasses_another_or_the_driver():
    for a, b in itertools.permutations(BACKENDS, 2):
        assert not issubclass(a, b), f"{a.__name__} subclasses {b.__name__}"
    for backend in BACKENDS:
        assert backend.__mro__ == (backend, Driver, *Driver.__mro__[1:])
        assert not issubclass(backend, ReplayDriver)


def test_the_local_and_aws_backends_hold_one_worker_driver_with_their_transport(tmp_path):
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=5, theta=1.0, top_k=1), Fixed())
    hist = history()
    local = LocalBackend(orch, hist, None, Billing(), WORKLOAD, {"t0": ({}, 0)}, FACTS.__getitem__, T0,
                         LocalSettings(store_url=str(tmp_path / "store")))
    aws = AwsBackend(orch, Billing(), WORKLOAD, {"t0": ({}, 0)}, FACTS.__getitem__, T0,
                     AwsSettings(experiment="e", bucket="b", store_url="s3://b/ckpt", image="i", ami="ami-1",
                                 instance_profile="p"),
                     clients=AwsClients(ec2=object(), s3=object(), sqs=object()))
    for backend, transport in ((local, ProcessTransport), (aws, Ec2Transport)):
        assert type(backend.driver) is WorkerDriver
        assert type(backend.transport) is transport and backend.driver.transport is backend.transport
        assert backend.transport.driver is backend.driver
        assert backend.record is backend.driver.record and backend.record.meta["backend"] == backend.name
    local.journal = "j"  # what a caller sets on the backend is the driver's
    assert local.driver.journal == "j"
    assert aws.ec2 is aws.transport.ec2


def test_the_ray_backend_holds_one_worker_driver_with_its_transport(tmp_path):
    pytest.importorskip("ray")
    from spottune.backends.ray._cluster import OfferedMarket
    from spottune.backends.ray._settings import RaySettings

    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=5, theta=1.0, top_k=1), Fixed())
    ray = RayBackend(orch, history(), Billing(), WORKLOAD, {"t0": ({}, 0)}, FACTS.__getitem__, T0,
                     RaySettings(store_url=str(tmp_path)), markets=[OfferedMarket("r3.large", "us-east-1a",
                                                                                  "resource", 1)])
    assert type(ray.driver) is WorkerDriver and type(ray.transport) is RayActorTransport
    assert ray.driver.transport is ray.transport and ray.transport.driver is ray.driver
    assert list(ray.markets) == ["r3.large/us-east-1a"]


def test_the_protocol_declares_launch_command_kill_and_watch():
    assert {"launch", "command", "kill", "watch"} <= set(_members(WorkerTransport))
    for name in _members(WorkerTransport):
        member = getattr(WorkerTransport, name, None)
        assert member is None or inspect.getdoc(member), f"WorkerTransport.{name} has no docstring"


@pytest.mark.parametrize("transport", TRANSPORTS, ids=lambda t: t.__name__)
def test_each_transport_has_every_member_of_the_protocol_with_its_parameters(transport):
    for name in _members(WorkerTransport):
        assert hasattr(transport, name) or name in transport.__init__.__code__.co_names, \
            f"{transport.__name__} lacks {name}"
        declared = getattr(WorkerTransport, name, None)
        if callable(declared):
            want = list(inspect.signature(declared).parameters)
            assert list(inspect.signature(getattr(transport, name)).parameters) == want, f"{transport.__name__}.{name}"
    assert not issubclass(transport, (ReplayDriver, Driver))


def test_a_class_without_watch_is_not_a_transport():
    class NoWatch:
        pass

    for name in _members(WorkerTransport):
        if name != "watch":
            setattr(NoWatch, name, lambda *a: None)
    assert isinstance(NoWatch(), WorkerTransport) is False
    NoWatch.watch = lambda self: None
    assert isinstance(NoWatch(), WorkerTransport) is True


class ScriptedTransport:
    """A transport in memory: a launched segment's worker is ready at once and reports every step; a command is
    answered by a save of the step reached; a killed worker exits."""

    name = "scripted"

    def __init__(self):
        self.driver = None
        self.end_s = None
        self.calls = []

    def bind(self, driver):
        self.driver = driver
        self.end_s = float(driver.history.end_s)

    def open(self):
        self.calls.append("open")

    def watch(self):
        self.calls.append("watch")

    def launch(self, action):
        d = self.driver
        inst = WorkerInstance(instance_id=d.sequential_id(), trial_id=action.trial_id, market=action.market,
                              max_price=action.max_price_usd_per_hour, started_s=d.now_s(), notice_s=math.inf,
                              termination_s=math.inf, seconds_per_step=60.0, vcpus=2, step=action.resume_step,
                              saved_step=action.resume_step, resume_step=action.resume_step)
        d.add_instance(inst)
        self.calls.append(f"launch {action.trial_id} {inst.instance_id}")
        d.enqueue(("line", inst, Ready(step=action.resume_step)))
        for step in range(action.resume_step + 1, action.target_steps + 1):
            d.enqueue(("line", inst, Metric(step=step, metrics={"loss": 1.0 / step})))

    def command(self, inst, cmd):
        self.calls.append(f"command {inst.instance_id} {cmd.reason}")
        self.driver.enqueue(("line", inst, Saved(step=inst.step, version=1, reason=cmd.reason, save_s=0.0)))

    def kill(self, inst):
        self.calls.append(f"kill {inst.instance_id}")
        self.driver.enqueue(("line", inst, Exited(code=-9)))
        self.driver.enqueue(("eof", inst, -9))

    def handle(self, kind, args):
        return False

    def recycle(self, inst):
        return False

    def seen_notice(self, inst, report):
        pass

    def ended(self, inst):
        self.calls.append(f"ended {inst.instance_id}")

    def next_instance_id(self):
        return self.driver.sequential_id()

    def price_series(self, inst, end_s):
        return self.driver.history[inst.market]

    def close_leftovers(self):
        self.calls.append("close_leftovers")

    def stop(self):
        self.calls.append("stop")

    def close(self):
        self.calls.append("close")

    def resume(self, records):
        raise AssertionError("not resumed")

    reconcile = replay_launch = replay_refused = replay_event = resume


def test_the_driver_runs_an_experiment_through_any_transport():
    transport = ScriptedTransport()
    assert isinstance(transport, WorkerTransport)
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=3, theta=1.0, top_k=1, metric="loss"), Fixed())
    driver = WorkerDriver(orch, history(), None, Billing(), FACTS.__getitem__, T0, transport=transport,
                          trials={"t0": ({}, 0)}, time_scale=1.0, reference_seconds_per_step=60.0, max_wall_s=10.0)
    record = driver.run()
    assert transport.calls == ["open", "watch", "launch t0 i-00001", "command i-00001 end", "kill i-00001",
                               "close_leftovers", "stop", "close"]
    flow = [(r["kind"], r["type"], r.get("step")) for r in record.log]
    assert flow == [("event", "ExperimentStarted", None), ("action", "Launch", None), ("event", "TrialLaunched", None),
                    ("event", "MetricReported", 1), ("event", "MetricReported", 2), ("event", "MetricReported", 3),
                    ("action", "Checkpoint", None), ("event", "CheckpointSaved", 3), ("action", "Terminate", None),
                    ("action", "ExperimentFinished", None)]
    assert [(row.instance_id, str(row.ended_by), row.reason) for row in record.ledger] == [("i-00001", "user", "end")]
    assert record.instance_steps == {"i-00001": (3, 0)}  # three steps run, none lost (saved at 3)
    assert orch.trials["t0"].state is TrialState.FINISHED and record.meta["backend"] == "scripted"


def _crashed_mid_segment(max_steps=10, reported=2):
    """A driver whose trial t0 runs on i-00001 and has reported ``reported`` steps when the orchestrator dies; the
    queue of what came after is lost (a fresh one, as in a resumed process)."""
    import queue

    from spottune.orchestrator import ExperimentStarted

    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=max_steps, theta=1.0, top_k=1, metric="loss"), Fixed())
    driver = WorkerDriver(orch, history(), None, Billing(), FACTS.__getitem__, T0, transport=ScriptedTransport(),
                          trials={"t0": ({}, 0)}, time_scale=1.0, reference_seconds_per_step=60.0, max_wall_s=10.0)
    driver.clock.start()
    driver._deliver(ExperimentStarted(time_s=T0))
    while orch.trials["t0"].step < reported:
        driver._handle(driver._q.get_nowait())
    driver._q = queue.Queue()
    return orch, driver, driver.instances["i-00001"]


def test_a_resume_continues_from_the_save_a_worker_made_when_its_driver_died():
    orch, driver, inst = _crashed_mid_segment()
    try:
        n = len(driver.record.log)
        assert driver.adopt_orphan_save(inst, 6, [[s, {"loss": 1.0 / s}] for s in range(1, 7)])
        while not any(r["type"] == "Launch" for r in driver.record.log[n:]):  # the save answers the Checkpoint
            driver._handle(driver._q.get_nowait())
    finally:
        driver.clock.stop()
    flow = [(r["kind"], r["type"], r.get("step"), r.get("reason"), r.get("resume_step")) for r in driver.record.log[n:]]
    assert flow == [*[("event", "MetricReported", s, None, None) for s in (3, 4, 5, 6)],
                    ("event", "RevocationNotice", None, None, None), ("action", "Checkpoint", None, "revocation", None),
                    ("event", "CheckpointSaved", 6, "revocation", None),
                    ("action", "Launch", None, None, 6)]  # relaunched from the worker's save, not from step 0
    tr = orch.trials["t0"]
    assert tr.checkpoint_step == 6 and tr.lost_steps == 0 and tr.revocations == 1
    assert tr.steps == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("step, metrics", [(6, [[s, {"loss": 1.0 / s}] for s in (1, 2, 3, 4, 6)]),  # step 5 missing
                                           (6, None),  # no metrics
                                           (1, [[1, {"loss": 1.0}]])])  # older than the last reported step
def test_a_worker_save_without_the_missing_steps_is_not_taken(step, metrics):
    orch, driver, inst = _crashed_mid_segment()
    driver.clock.stop()
    n = len(driver.record.log)
    assert not driver.adopt_orphan_save(inst, step, metrics)
    assert driver.record.log[n:] == [] and orch.trials["t0"].state is TrialState.RUNNING and driver._q.empty()


class SilentWorkerTransport(ScriptedTransport):
    """A worker that gets ready and then trains nothing (a segment held past its hours)."""

    def launch(self, action):
        d = self.driver
        inst = WorkerInstance(instance_id=d.sequential_id(), trial_id=action.trial_id, market=action.market,
                              max_price=action.max_price_usd_per_hour, started_s=d.now_s(), notice_s=math.inf,
                              termination_s=math.inf, seconds_per_step=60.0, vcpus=2, step=action.resume_step,
                              saved_step=action.resume_step, resume_step=action.resume_step)
        d.add_instance(inst)
        d.enqueue(("line", inst, Ready(step=action.resume_step)))


def test_an_instance_a_transport_adds_is_checked_by_the_budget_every_hour():
    """The hourly budget check (DB5) of the instances the aws and ray transports add (``add_instance``): max price
    0.1 USD/h at a flat 0.02; at 3 h, 0.06 USD accrued + the next hour at 0.1 > 0.15, so the run stops there."""
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=3, theta=1.0, top_k=1, metric="loss", hourly_hop=False),
                        Fixed())
    driver = WorkerDriver(orch, history(), None, Billing(), FACTS.__getitem__, T0, transport=SilentWorkerTransport(),
                          trials={"t0": ({}, 0)}, time_scale=7200.0, reference_seconds_per_step=60.0, max_wall_s=20.0)
    driver.budget_usd = 0.15
    record = driver.run()
    assert "at 3.00 h would exceed --budget-usd 0.15" in record.meta["budget_exhausted"]
    (row,) = record.ledger
    assert (row.reason, row.max_price_usd_per_hour) == ("budget", 0.1)
    assert T0 + 3 * 3600 <= row.end_s < T0 + 4 * 3600  # at the 3 h check (a wall millisecond is 7.2 engine s)
    assert row.charged_usd <= 0.15
