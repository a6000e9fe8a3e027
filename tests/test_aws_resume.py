"""Crash safety on the aws backend (decision CS6): the orchestrator dies mid-run, ``AwsBackend.resume`` continues it.

The scenario of ``tests/test_aws_backend.py`` (four ``Walk`` trials, A spikes at 1800 s and revokes its instances,
the relaunches go to B) on a moto server with the harness playing the hosts. The orchestrator crashes in-process
just before the journal records the outcome of the first relaunch after the spike made while a trial trains on B
(``CrashAtRelaunch``): that launch's intent has no outcome (the instance exists, tagged), the trials' other
instances are running or revoked. The crashed backend's own clean-up is disabled (a ``kill -9`` runs none); while
it is down, EC2 interrupts one running instance (``Server.SpotInstanceTermination``). The first resumed run crashes
too, between the journaled intent of its second launch and its ``run_instances``. The second resume must reach the
final metrics and top-k of the uninterrupted run (the local backend on the same market and seeds), bill every
instance ever launched exactly once, feed the predictor the signals it had, keep every instance still on its
trial's segment (adopted: no ledger row ``restart``, decision AWS14), and end with no tagged instance running. The
first launch of the run is refused for capacity (the market exclusion it causes, outside ``handle``, must come back
on replay).

A second scenario stays down past the lease: the agents save their workers' steps (``lease``) and power off;
the resumed run continues each trial from that save, so it redoes no step.
"""

from __future__ import annotations

import boto3
import pytest

from provisioner import MarketExclusions
from spotmarket import Billing, LegacyBidRevocation
from spottune.backends.aws import AwsBackend, AwsClients, find_instances
from spottune.backends.aws._channel import Inbox, Outbox
from spottune.journal import JOURNAL_FILE, Journal, read_journal
from spottune.orchestrator import Orchestrator, OrchestratorConfig
from tests._aws_host import REGION, Ec2Hosts, end_in_moto
from tests.test_aws_backend import (CONFIGS, FACTS, HIST, SEEDS, Cheapest, local, moto,  # noqa: F401 - fixtures
                                    orchestrator, settings)
from tests._wait import wait_until
from tests.test_sim_backend import T0
from tests.test_worker_process import WORKLOAD

pytestmark = [pytest.mark.server, pytest.mark.slow]


#: The experiment's checkpoint key: a resumed run reads its instances' saves with it (``spottune run`` keeps it in
#: the results folder).
KEY = "5eed" * 16


class Crash(Exception):
    """The injected crash of the orchestrator process."""


class Signals:
    """A revocation predictor that only records AWS's signals (``signal(market, time_s, kind, value)``)."""

    def __init__(self):
        self.got = []

    def signal(self, market, time_s, kind, value):
        self.got.append((str(market), time_s, kind, value))


def _backend(url, tmp_path, experiment, journal):
    exclusions = MarketExclusions(1800.0)
    orch = orchestrator(Cheapest(exclusions, predictor=Signals()))
    # linger_s: an agent whose worker saved and exited waits for the provider (the harness terminates a revoked
    # host >= MIN_NOTICE_WALL_S wall s after its notice, and not while the orchestrator is down) instead of
    # powering off first
    s = settings(url, experiment, store=str(tmp_path / "store"), lease_s=20000.0, linger_s=20000.0, max_wall_s=90.0,
                 checkpoint_key=KEY)
    backend = AwsBackend(orch, Billing(), WORKLOAD, {t: (CONFIGS[t], SEEDS[t]) for t in CONFIGS}, FACTS.__getitem__,
                         T0, s, clients=AwsClients.create(s))
    backend.journal = journal
    journal.sync_intents = True
    return orch, backend


class CrashAtRelaunch:
    """The journal's fault hook: the crash comes just before the outcome of the first relaunch after the spike
    (1800 s) while an instance on B trains (not billed), so that EC2 can interrupt one while the orchestrator is
    down. On a loaded machine the trial that started on B may already wait at θ's barrier by the first relaunch;
    the second one finds the first relaunched trial training on B."""

    def __init__(self):
        self.on_b = set()

    def __call__(self, n, record):
        e = record.get("e") or {}
        if record["k"] == "event" and e.get("type") == "TrialLaunched" and str(e["market"]).startswith("us-east-1b"):
            self.on_b.add(e["instance_id"])
        elif record["k"] == "billed":
            self.on_b.discard(record["id"])
        elif (record["k"] == "outcome" and record["op"] == "launch" and record["fulfilled"]
                and record["time_s"] > T0 + 1800.0 and self.on_b):
            raise Crash(f"crash before record {n}: the outcome of launch {record['launch']}")


def test_a_crashed_orchestrator_resumes_to_the_uninterrupted_result(moto, local, tmp_path):  # noqa: F811
    """Two crashes (mid-launch, then in the resumed run between a launch intent and its ``run_instances``) and
    two resumes reach the uninterrupted result (module doc)."""
    exp = "exp-resume"
    path = tmp_path / JOURNAL_FILE
    journal = Journal(path, spec={"test": exp}, fault=CrashAtRelaunch())
    orch, backend = _backend(moto, tmp_path, exp, journal)
    backend.transport.sweep = lambda: None  # a killed process cleans nothing up
    hosts = Ec2Hosts(moto, exp, workload=WORKLOAD, store=backend.settings.store_url, log_dir=tmp_path,
                     revocation=LegacyBidRevocation(HIST), clock=backend.clock, warm=6)
    hosts.attach(backend.ec2)
    hosts.refuse("us-east-1a", "r3.large", times=1)  # that trial starts on B, where no spike revokes it
    hosts.start()
    try:
        with pytest.raises(Crash):
            backend.run()
        journal.close()
        records = read_journal(path, repair=True)
        cut = records[-1]
        assert cut["k"] == "intent" and cut["op"] == "launch"  # the crash left an intent without its outcome
        cut_launch = cut["instance_id"]
        ec2 = boto3.client("ec2", endpoint_url=moto, region_name=REGION)
        before = {i.instance_id: i for i in find_instances(ec2, exp)}
        (cut_instance,) = [i.instance_id for i in before.values() if i.launch_id == cut_launch]
        launched = {r["e"]["instance_id"] for r in records if r["k"] == "event" and r["e"]["type"] == "TrialLaunched"}
        billed = {r["id"] for r in records if r["k"] == "billed"}
        running = sorted(i for i in launched - billed if before[i].state == "running")
        on_b = [i for i in running if before[i].availability_zone == "us-east-1b"]
        assert on_b, "no trial trained on B at the crash: the test would prove nothing"
        interrupted = on_b[0]
        end_in_moto(interrupted, "Server.SpotInstanceTermination")  # EC2 interrupts it while we are down

        journal2 = Journal(path, replay=records)
        _, resumed = _backend(moto, tmp_path, exp, journal2)
        resumed.resume(records)
        hosts.follow(resumed.clock)  # the replayed market goes on, on the new process's clock
        hosts.attach(resumed.ec2)
        # a second crash, in the resumed run: after the intent of its second launch, before run_instances
        resumed.transport.sweep = lambda: None
        put, calls = resumed.control.put_segment, []

        def put_segment(launch_id, doc):
            calls.append(launch_id)
            if len(calls) == 2:
                raise Crash(f"crash writing the segment of {launch_id}")
            return put(launch_id, doc)

        resumed.control.put_segment = put_segment
        with pytest.raises(Crash):
            resumed.run()
        journal2.close()
        first = resumed.record.meta["resumes"][-1]
        records2 = read_journal(path, repair=True)
        assert records2[:len(records)] == records and records2[-1]["k"] == "intent"
        assert records2[-1]["instance_id"] == calls[1]  # journaled, never launched

        journal3 = Journal(path, replay=records2)
        orch2, final = _backend(moto, tmp_path, exp, journal3)
        final.resume(records2)
        hosts.follow(final.clock)
        hosts.attach(final.ec2)
        record = final.run()
        journal3.close()
        hosts.settle()
        left = hosts.running()
    finally:
        hosts.stop()

    assert left == [] and hosts.errors == []
    # the predictor's state outside handle() comes back: the rebalance hints it had got before the crash
    before_crash = orch.chooser.predictor.got
    assert [g[2] for g in before_crash] and {g[2] for g in before_crash} == {"rebalance"}
    assert orch2.chooser.predictor.got[:len(before_crash)] == before_crash
    # the uninterrupted result: final metrics (bit for bit) and the top-k
    for t in CONFIGS:
        a, lo = orch2.trials[t], local.trials[t]
        assert (a.state, a.step, a.last_loss()) == (lo.state, lo.step, lo.last_loss()), t
    assert set(orch2.top_k) == set(local.top_k)
    # the ledger: every instance ever launched for the experiment, billed exactly once
    every = find_instances(boto3.client("ec2", endpoint_url=moto, region_name=REGION), exp)
    ids = [row.instance_id for row in record.ledger]
    assert sorted(ids) == sorted(i.instance_id for i in every) and len(set(ids)) == len(ids)
    rows = {row.instance_id: row for row in record.ledger}
    # interrupted while we were down, within its first hour: the provider ended it, nothing is charged
    assert (rows[interrupted].ended_by, rows[interrupted].reason) == ("provider", "Server.SpotInstanceTermination")
    assert rows[interrupted].charged_usd == 0.0 and rows[interrupted].refunded_usd > 0.0
    # the launch whose outcome was cut: found by its tag and kept (its worker's reports read from the queue)
    meta = first
    assert meta["intents_launched"] == [cut_instance]
    assert interrupted in meta["ended_while_down"]
    assert cut_instance in meta["kept"] and rows[cut_instance].reason != "restart"
    # every instance still on its trial's segment was kept, none terminated and billed for the restart
    assert set(running) - {interrupted} <= set(meta["kept"]) | set(meta["adopted"])
    assert meta["terminated"] == [] and [r.instance_id for r in record.ledger if r.reason == "restart"] == []
    assert record.meta["resumes"][-1]["terminated"] == []
    # the second resume: the intent whose run_instances never happened is not found by its tag
    second = record.meta["resumes"][-1]
    assert second["intents_not_launched"] == [calls[1]] and second["intents_launched"] == []
    assert not any(i.launch_id == calls[1] for i in every)
    for iid in meta["adopted"]:  # revoked and left by its trial before the crash: the provider ended it, refundable
        assert rows[iid].ended_by == "provider" and rows[iid].charged_usd == 0.0, rows[iid]
    # no step lost beyond the last confirmed checkpoint: each relaunch after the crash resumes from its trial's
    # newest one (the kept instances went on training and saving)
    saved, relaunched = {}, []
    for i, rec in enumerate(read_journal(path)):
        if rec["k"] == "event" and rec["e"]["type"] == "CheckpointSaved":
            saved[rec["e"]["trial_id"]] = rec["e"]["step"]
        elif rec["k"] == "action" and rec["a"]["type"] == "Launch" and i >= len(records):
            relaunched.append((rec["a"]["trial_id"], rec["a"]["resume_step"], saved.get(rec["a"]["trial_id"], 0)))
    assert relaunched and all(step == newest for _, step, newest in relaunched), relaunched


#: The lease scenario: two trials of 24 steps (no pruning) and a lease of 1,000 engine s (2 wall s at 500x).
LEASE_TRIALS, LEASE_STEPS, LEASE_S = ("t0", "t1"), 24, 1000.0


def test_a_resume_after_the_lease_continues_from_the_agents_saves(moto, tmp_path):  # noqa: F811
    """The orchestrator crashes once both trials have journaled 5 steps and stays down until every agent has
    found the lease stale, saved its worker's steps and powered off. The resume continues each trial from that
    save: no step is trained twice (at most one lease period, ``lease_s`` / seconds per step, would be), each step
    of each trial is journaled exactly once, and the instances are billed as they ended (powered off by their
    agents: ``Client.InstanceInitiatedShutdown``), none as ``restart``."""
    exp, path = "exp-lease", tmp_path / JOURNAL_FILE
    metrics = []

    def crash_after_five_each(n, record):
        if record["k"] == "event" and record["e"]["type"] == "MetricReported":
            metrics.append(record["e"]["trial_id"])
            if min(metrics.count(t) for t in LEASE_TRIALS) >= 5:
                raise Crash(f"crash before record {n}")

    def backend(journal):
        orch = Orchestrator(list(LEASE_TRIALS), OrchestratorConfig(max_steps=LEASE_STEPS, theta=1.0, top_k=2,
                                                                    metric="loss", hourly_hop=False), Cheapest())
        s = settings(moto, exp, store=str(tmp_path / "store"), lease_s=LEASE_S, linger_s=20000.0, max_wall_s=60.0,
                     max_steps=LEASE_STEPS, checkpoint_key=KEY)
        b = AwsBackend(orch, Billing(), WORKLOAD, {t: (CONFIGS[t], SEEDS[t]) for t in LEASE_TRIALS}, FACTS.__getitem__,
                       T0, s, clients=AwsClients.create(s))
        b.journal, journal.sync_intents = journal, True
        b.transport.sweep = lambda: None  # a killed process cleans nothing up
        return orch, b

    _, crashed = backend(Journal(path, spec={"test": exp}, fault=crash_after_five_each))
    hosts = Ec2Hosts(moto, exp, workload=WORKLOAD, store=crashed.settings.store_url, log_dir=tmp_path, warm=2)
    hosts.attach(crashed.ec2)
    hosts.start()
    try:
        with pytest.raises(Crash):
            crashed.run()
        crashed.journal.close()
        wait_until(lambda: len(hosts.booted) == 2 and hosts.running() == [], 30, interval_s=0.1,
                   what="both agents find the lease stale, save and power off")
        records = read_journal(path, repair=True)
        journal = Journal(path, replay=records)
        orch, resumed = backend(journal)
        resumed.resume(records)
        hosts.attach(resumed.ec2)
        record = resumed.run()
        journal.close()
        hosts.settle()
        left = hosts.running()
    finally:
        hosts.stop()

    assert left == [] and hosts.errors == [] and sorted(hosts.shutdowns) == sorted(hosts.booted[:2])
    steps = {t: [r["e"]["step"] for r in read_journal(path) if r["k"] == "event"
                 and r["e"]["type"] == "MetricReported" and r["e"]["trial_id"] == t] for t in LEASE_TRIALS}
    before = {t: max(r["e"]["step"] for r in records if r["k"] == "event" and r["e"]["type"] == "MetricReported"
                     and r["e"]["trial_id"] == t) for t in LEASE_TRIALS}
    entry = record.meta["resumes"][-1]
    saves = entry["worker_saves"]
    assert sorted(saves) == list(LEASE_TRIALS) and all(saves[t] >= before[t] for t in LEASE_TRIALS), (saves, before)
    for t in LEASE_TRIALS:
        assert steps[t] == list(range(1, LEASE_STEPS + 1)), (t, steps[t])  # every step once: none redone, no gap
        assert orch.trials[t].step == LEASE_STEPS
    relaunch = {}
    for rec in read_journal(path)[len(records):]:
        if rec["k"] == "action" and rec["a"]["type"] == "Launch":
            relaunch.setdefault(rec["a"]["trial_id"], rec["a"]["resume_step"])
    assert relaunch == saves  # each trial relaunched from its agent's save, not from step 0
    rows = {row.instance_id: row for row in record.ledger}
    for iid in hosts.booted[:2]:
        assert (rows[iid].ended_by, rows[iid].reason) == ("user", "Client.InstanceInitiatedShutdown"), rows[iid]
    assert sorted(entry["ended_while_down"]) == sorted(hosts.booted[:2]) and entry["kept"] == []
    assert not [r for r in record.ledger if r.reason == "restart"]


def test_a_report_leaves_the_queue_only_once_acknowledged(moto):  # noqa: F811
    """A batch received by a process that dies before acknowledging it (the orchestrator crashed before it had
    journaled the reports) comes back to the next process after the visibility timeout, in order; once
    acknowledged it is gone."""
    sqs = boto3.client("sqs", endpoint_url=moto, region_name=REGION)
    url = sqs.create_queue(QueueName="spottune-ack.fifo", Attributes={"FifoQueue": "true",
                                                                     "ContentBasedDeduplication": "false"})["QueueUrl"]
    out = Outbox(sqs, url, "l00001", "t0")
    for step in (1, 2, 3):
        out.send("report", f"step {step}")
    crashed = Inbox(sqs, url)
    assert [e.seq for e in crashed.receive(wait_s=0, visibility_s=1)] == [1, 2, 3]  # then the process dies
    resumed, got = Inbox(sqs, url), []

    def handled():  # each batch acknowledged once handled, as the backend's reader does
        got.extend(resumed.receive(wait_s=0, visibility_s=1))
        resumed.ack()
        return len(got) >= 3

    wait_until(handled, 10, interval_s=0.1, what="the unacknowledged reports come back")
    assert [(e.seq, e.body) for e in got] == [(1, "step 1"), (2, "step 2"), (3, "step 3")]
    out.send("report", "step 4")
    assert [e.seq for e in wait_until(lambda: Inbox(sqs, url).receive(wait_s=0, visibility_s=1), 10,
                                      interval_s=0.1, what="the next report")] == [4]
