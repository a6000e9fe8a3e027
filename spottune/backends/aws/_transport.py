"""The EC2/SQS transport: each segment's worker runs on its own EC2 spot instance.

:class:`Ec2Transport` is the aws backend's :class:`~spottune.backends._transport.WorkerTransport` (decisions
AWS1-AWS16 in docs/design/decisions.md):

- **launch** (:mod:`._launch`): the driver checks the spending caps first (decision DB5), then the segment description goes to
  S3 and one ``run_instances`` (spot, max price, zone, tags, user data) starts the instance. A refusal is
  ``LaunchFailed`` with the AWS error code; a capacity refusal is first delivered as ``CapacityRefused``
  (:meth:`WorkerDriver.inform`), so the chooser excludes the market.
- **command**: the segment's next command object in S3 (the agent reads it and writes it to the worker's stdin).
- **kill**: ``terminate_instances``.
- **watch**: three threads, each only enqueuing: the experiment's SQS FIFO queue (:mod:`._channel`: the
  worker's report lines, its exit, rebalance recommendations; a batch is deleted from the queue only once
  the driver has handled, and journaled, every message of it), ``describe_instances`` by tag every
  ``describe_every_s`` (:mod:`._discovery`: endings and their state reasons), and the lease renewal.
- **ends**: a worker's ``notice`` report becomes ``RevocationNotice`` with IMDS's deadline; a state reason
  ``Server.SpotInstanceTermination`` ends the segment as ``provider``; an instance that ended on its own
  otherwise fails the segment and is billed as ``user``. At the end, revoked-and-saved instances are left to
  the provider for up to ``linger_s``, then every live instance tagged with the experiment is terminated.
- **resume** (decision AWS14): the instances still on their segment are kept and their reports read again;
  a trial whose agent saved when the lease went stale continues from that save.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spottune.speed import seconds_per_step
from spottune.backends._worker_driver import (LazyStore, Phase, WorkerDriver, WorkerInstance, journaled_report,
                                              orphan_save)
from spottune.backends.aws._channel import Control, Envelope, Inbox, queue_name
from spottune.backends.aws._discovery import cleanup, ended_by, find_instances
from spottune.backends.aws._launch import (CAPACITY_CODES, TAG_EXPERIMENT, TAG_LAUNCH, TAG_TRIAL, LaunchRefused,
                                           launch, launch_request, user_data)
from spottune.backends.aws._prices import ApiPrices
from spottune.backends.aws._signals import PLACEMENT_SCORE, REBALANCE
from spottune.backends.local._messages import CheckpointCommand, Notice, decode_report, encode
from spottune.backends.local._pool import segment_argv
from spottune.checkpoint._secrets import CHECKPOINT_KEY_ENV, split_secrets, worker_env
from spottune.orchestrator import CapacityRefused, EndReason, Launch, LaunchFailed

__all__ = ["Ec2Instance", "Ec2Transport"]

log = logging.getLogger(__name__)
_MIN_POLL_WALL_S = 0.05
_AGENT_POLL_WALL_S = 0.1  # an agent reads its command object at most 10 times a second
_DESCRIBE_WALL_S = 0.1  # describe_instances at most 10 times a second
#: Wall seconds a received report stays hidden from other receives (SQS visibility timeout). It is deleted once
#: handled (journaled); after a crash, the reports received but not handled come back to the resumed run after
#: this long (decision AWS14).
VISIBILITY_WALL_S = 3


@dataclass(slots=True, kw_only=True)
class Ec2Instance(WorkerInstance):
    """A :class:`WorkerInstance` on an EC2 instance (``instance_id`` is the AWS id).

    Attributes
    ----------
    launch_id : str
        The launch's own id (``l00001``, the ``spottune:launch`` tag), the key of its segment in S3 and SQS.
    terminated_seen : bool
        ``terminate_instances`` was sent, or ``describe_instances`` showed it gone.
    cmd_seq : int
        Commands sent so far (each is its own S3 object).
    resumed : bool
        Rebuilt from the journal after a restart: its reports are no longer read (unless it is adopted).
    adopted : bool
        Rebuilt from the journal and still running its segment: kept, its reports read again; the ones the
        journal already holds are dropped (decision AWS14).
    """

    launch_id: str = ""
    terminated_seen: bool = False
    cmd_seq: int = 0
    resumed: bool = False
    adopted: bool = False


class Ec2Transport:
    """Segments on EC2 spot instances, reports through SQS (see the module docstring).

    Parameters
    ----------
    settings : AwsSettings
    workload : str
        Built-in workload name or ``"module:Class"`` importable in the worker image.
    clients : AwsClients
        The run's boto3 clients (``ec2``, ``s3``, ``sqs``).
    """

    name = "aws"
    end_s = None  # prices come from the EC2 API: no end

    def __init__(self, settings: Any, workload: str, clients: Any):
        self.settings = settings
        self.workload = workload
        self.clients = clients
        self.ec2 = clients.ec2
        self.control = Control(clients.s3, settings.bucket, settings.key_root)
        self.prices = ApiPrices(self.ec2)
        #: The experiment's checkpoint key (hex), handed to every instance in its user data.
        self.checkpoint_key = settings.checkpoint_key or worker_env({})[1][CHECKPOINT_KEY_ENV]
        self.driver: WorkerDriver | None = None
        self.queue_url = ""
        #: Spot placement score (1..10) per market, handed to the predictor at the start (:mod:`._signals`).
        self.placement_scores: dict[Any, int] = {}
        self._by_launch: dict[str, Ec2Instance] = {}
        self._launches = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._inbox: Inbox | None = None
        self._unresolved: list[tuple[str, dict[str, Any]]] = []  # launch intents without an outcome
        self._saves: dict[str, Any] = {}  # resume: instance id -> the checkpoint its worker saved on its own
        self._hours: set[str] = set()  # resume: instances whose HourElapsed is journaled
        self._rebalanced: list[tuple[str, float]] = []  # resume: journaled rebalance signals (market, engine s)
        self._store: Any = None

    def bind(self, driver: WorkerDriver) -> None:
        """Keep the driver (its queue, clock and records).

        Parameters
        ----------
        driver : WorkerDriver
            The driver.
        """
        self.driver = driver

    # -- the run --------------------------------------------------------------------------------------
    def open(self) -> None:
        """Create the experiment's report queue and renew the lease; a fresh run hands the placement scores on."""
        s, d = self.settings, self.driver
        self.queue_url = self.clients.sqs.create_queue(QueueName=queue_name(s.experiment), Attributes={
            "FifoQueue": "true", "ContentBasedDeduplication": "false"})["QueueUrl"]
        d.record.meta["queue"] = queue_name(s.experiment)
        self.control.renew_lease(s.wall(s.lease_s))
        if not d.resuming:
            for market, score in sorted(self.placement_scores.items(), key=lambda kv: str(kv[0])):
                d.signal(market, PLACEMENT_SCORE, score, d.start_s)

    def watch(self) -> None:
        for target in (self._read_queue, self._watch_instances, self._renew_lease):
            th = threading.Thread(target=self._forever, args=(target,), daemon=True, name=target.__name__)
            th.start()
            self._threads.append(th)

    def stop(self) -> None:
        self._stop.set()
        for th in self._threads:
            th.join(timeout=10)

    def close(self) -> None:
        self.sweep()
        self.driver.record.meta["queue_duplicates"] = self._inbox.duplicates if self._inbox is not None else 0

    def _forever(self, body: Callable[[], None]) -> None:
        """Run ``body`` until the run stops; an AWS error is logged and retried (never a dead thread)."""
        while not self._stop.is_set():
            try:
                body()
            except Exception as exc:  # noqa: BLE001 - a transient API error: log, go on
                log.warning("aws backend %s: %s: %s", body.__name__, type(exc).__name__, exc)
                self._stop.wait(0.5)

    def _read_queue(self) -> None:
        if self._inbox is None:
            self._inbox = Inbox(self.clients.sqs, self.queue_url)
        envs = self._inbox.receive(wait_s=1, visibility_s=VISIBILITY_WALL_S)  # long polling: returns at a message
        if not envs:
            return
        handled = threading.Event()
        for env in envs:
            self.driver.enqueue(("msg", env))
        self.driver.enqueue(("handled", handled))  # after the batch: each envelope is handled, its event journaled
        while not handled.wait(0.05):
            if self._stop.is_set():
                return  # not deleted: a resumed run receives them again
        self._inbox.ack()  # only now are the messages deleted from the queue (decision AWS14)

    def _watch_instances(self) -> None:
        for inst in find_instances(self.ec2, self.settings.experiment):
            ours = self.driver.instances.get(inst.instance_id)
            if inst.state not in ("pending", "running") and ours is not None and ours.alive:
                self.driver.enqueue(("gone", inst.instance_id, inst.reason_code))
        self._stop.wait(max(_DESCRIBE_WALL_S, self.settings.wall(self.settings.describe_every_s)))

    def _renew_lease(self) -> None:
        s = self.settings
        self.control.renew_lease(s.wall(s.lease_s))
        self._stop.wait(s.wall(s.lease_s) / 4)

    def sweep(self) -> None:
        """Terminate every live instance tagged with the experiment; ours still unbilled are billed (user)."""
        d = self.driver
        try:
            gone = cleanup(self.ec2, self.settings.experiment)
        except Exception as exc:  # noqa: BLE001 - reported, the run's own error (if any) goes on
            log.error("aws backend: cleanup of experiment %s failed: %s", self.settings.experiment, exc)
            d.record.meta["cleanup_error"] = str(exc)
            return
        now = d.now_s()
        for tagged in gone:
            inst = d.instances.get(tagged.instance_id)
            if inst is not None and inst.alive:
                d.end(inst, now, "user", "cleanup")
        d.record.meta["cleanup_terminated"] = [t.instance_id for t in gone]
        try:
            self.control.s3.delete_object(Bucket=self.control.bucket, Key=self.control.key("lease.json"))
        except Exception:  # noqa: BLE001 - a missing lease is stale anyway
            pass

    def handle(self, kind: str, args: list[Any]) -> bool:
        """A report message (``msg``) from the queue, the end of a batch of them (``handled``: they may be deleted
        from the queue), an instance EC2 shows as gone (``gone``), or the report timeout of a launch (``silent``,
        :meth:`_on_silent`).

        Parameters
        ----------
        kind : str
            The queue item's kind.
        args : list
            Its arguments.

        Returns
        -------
        bool
            False for a kind this transport does not enqueue.
        """
        if kind == "msg":
            self._on_message(*args)
        elif kind == "handled":
            args[0].set()
        elif kind == "gone":
            self._on_gone(*args)
        elif kind == "silent":
            self._on_silent(*args)
        else:
            return False
        return True

    # -- effects ----------------------------------------------------------------------------------------
    def launch(self, action: Launch) -> None:
        """Write the segment to S3 and call ``run_instances`` for a one-time spot instance (the driver checked the
        spending caps before, as for every backend: decision DB5).

        Parameters
        ----------
        action : spottune.orchestrator.Launch
            The trial, market, max price (USD/hour), the step to resume and the target step.
        """
        s, d = self.settings, self.driver
        t = d.now_s()  # the spending caps were checked by the driver (ReplayDriver._refused_by_caps, DB5)
        market = action.market
        self._launches += 1
        lid = f"l{self._launches:05d}"  # refused launches are numbered too: a launch id is never reused
        vcpus, ecu = d.instance_facts(market.instance_type)
        sps = seconds_per_step(d.ref_sps, vcpus, ecu)
        config, seed = d.trials[action.trial_id]
        public, _ = split_secrets(dict(s.storage_options))  # credentials never leave this process
        argv = ["--workload", self.workload, "--store", s.store_url,
                *segment_argv(trial_id=action.trial_id, instance_id=lid, config=config, seed=seed,
                              resume_step=action.resume_step, until_step=action.target_steps,
                              step_wall_s=sps / s.time_scale if s.pace_steps else 0.0, imds_url="none",
                              poll_wall_s=max(_MIN_POLL_WALL_S, s.wall(s.poll_s)), max_steps=s.max_steps,
                              keep=s.checkpoint_keep)]
        url = self.control.put_segment(lid, {
            "experiment": s.experiment, "trial": action.trial_id, "launch": lid, "queue_url": self.queue_url,
            "bucket": s.bucket, "root": self.control.root, "worker_argv": argv, "storage_options": public,
            "poll_wall_s": max(_AGENT_POLL_WALL_S, s.wall(s.poll_s)), "linger_wall_s": s.wall(s.linger_s),
            "lease_check_wall_s": max(_AGENT_POLL_WALL_S, s.wall(s.lease_s) / 10),
            "lease_save_wall_s": s.wall(s.lease_save_s)})
        req = launch_request(instance_type=market.instance_type, availability_zone=market.availability_zone,
                             max_price_usd_per_hour=action.max_price_usd_per_hour, ami=s.ami,
                             instance_profile=s.instance_profile,
                             tags={TAG_EXPERIMENT: s.experiment, TAG_TRIAL: action.trial_id, TAG_LAUNCH: lid},
                             user_data_script=user_data(image=s.image, segment_url=url, region=s.region,
                                                        workload=self.workload, checkpoint_key=self.checkpoint_key),
                             subnet_id=dict(s.subnets).get(market.availability_zone),
                             security_groups=tuple(s.security_groups))
        try:
            iid = launch(self.ec2, req)
        except LaunchRefused as exc:
            if exc.code in CAPACITY_CODES:
                d.inform(CapacityRefused(time_s=t, market=market, reason=exc.code))
            self._launch_outcome(action.trial_id, launch=lid, instance_id="", fulfilled=False, time_s=t,
                                 error=str(exc), code=exc.code)
            d.post(LaunchFailed(time_s=t, trial_id=action.trial_id, error=str(exc)))
            return
        self._launch_outcome(action.trial_id, launch=lid, instance_id=iid, fulfilled=True, time_s=t)
        inst = Ec2Instance(instance_id=iid, trial_id=action.trial_id, market=market,
                           max_price=action.max_price_usd_per_hour, started_s=t, notice_s=math.inf,
                           termination_s=math.inf, seconds_per_step=sps, vcpus=vcpus, step=action.resume_step,
                           saved_step=action.resume_step, resume_step=action.resume_step, launch_id=lid)
        inst.stats.update(launch=lid, launch_wall_s=d.clock.wall_s())
        self._by_launch[lid] = inst
        d.add_instance(inst)
        # a host that never reports is named, not waited for; a boot takes wall time, whatever the engine's scale
        d.timer(t + s.report_timeout_s * s.time_scale, "silent", inst)

    def _launch_outcome(self, trial_id: str, **details: Any) -> None:
        if self.driver.journal is not None:
            self.driver.journal.outcome("launch", trial_id, **details)

    def next_instance_id(self) -> str:
        """The launch id the next ``run_instances`` will tag (``spottune:launch``): the ``launch`` intent
        records it, so that a resume finds the instance of an intent without an outcome by its tag.

        Returns
        -------
        str
        """
        return f"l{self._launches + 1:05d}"

    def command(self, inst: Ec2Instance, cmd: CheckpointCommand) -> None:
        """Post ``cmd`` as the launch's next S3 command for its agent to poll.

        Parameters
        ----------
        inst : Ec2Instance
            The instance.
        cmd : CheckpointCommand
            The checkpoint to take.
        """
        inst.cmd_seq += 1
        self.control.put_command(inst.launch_id, inst.cmd_seq, encode(cmd))

    def kill(self, inst: Ec2Instance) -> None:
        """``terminate_instances`` the instance (once).

        Parameters
        ----------
        inst : Ec2Instance
            The instance.
        """
        if not inst.terminated_seen:
            inst.terminated_seen = True
            self.ec2.terminate_instances(InstanceIds=[inst.instance_id])

    def recycle(self, inst: Ec2Instance) -> bool:
        """An instance is never reused for another segment.

        Parameters
        ----------
        inst : Ec2Instance
            The instance.

        Returns
        -------
        bool
            True if the worker was kept.
        """
        return False

    def ended(self, inst: Ec2Instance) -> None:
        """Nothing kept: the instance is terminated or ended by the provider.

        Parameters
        ----------
        inst : Ec2Instance
            The instance.
        """

    def price_series(self, inst: Ec2Instance, end_s: float) -> Any:
        """The market's prices from the EC2 API over the instance's run.

        Parameters
        ----------
        inst : Ec2Instance
            The instance.
        end_s : float
            Engine seconds of its end.

        Returns
        -------
        spotmarket.prices.PriceSeries
            USD per instance-hour.
        """
        return self.prices.series(inst.market, inst.started_s, end_s)

    # -- crash safety (docs/design/decisions.md AWS14) ----------------------------------------------------------
    def resume(self, records: list[dict[str, Any]]) -> None:
        """Continue a killed run from its journal (decision AWS14, docs/guide/aws.md "Resume after a crash").

        1. The journal is replayed into the fresh orchestrator (:meth:`WorkerDriver.replay_journal`: every
           action checked, ledger rows re-billed at the API's prices and compared); each journaled launch
           becomes an instance again (its AWS id and ``spottune:launch`` tag), a ``RevocationNotice`` gives it
           its deadline. For each trial's running instance, the trial's newest checkpoint in the store is read
           (manifest authenticated with the experiment's key): one its worker saved on its own after the
           crash (metadata ``instance_id`` = the launch) is that instance's save.
        2. The driver's run then reconciles with EC2 (:meth:`reconcile`): the experiment's instances are listed
           by tag (:func:`find_instances`); a launch intent without an outcome is looked up by its launch tag.
           An instance still running its trial's segment (booting, training or checkpointing) is **adopted**:
           kept, not billed, its reports read again from the queue (a report is deleted from the queue only
           once handled and journaled, so the ones that came while the orchestrator was down, or were
           received but not handled at the crash, are all there; those the journal holds are dropped by
           step), its hourly tick and a ``Checkpoint`` in flight re-armed. An instance whose agent found the
           lease stale and saved its steps (a ``lease`` save) continues from that save
           (:meth:`WorkerDriver.adopt_orphan_save`) and is billed as it ended (its state reason, e.g.
           ``Client.InstanceInitiatedShutdown``; one still powering off is terminated, reason ``lease``). An
           instance already revoked and left by its trial is adopted (the provider ends it, refundable); one
           that ended while the orchestrator was down without a save is billed as its state reason says
           (``Server.SpotInstanceTermination``: provider, first hour refunded) and its trial relaunches from
           its last confirmed checkpoint; any other (a ``Terminate`` in flight) is terminated (user,
           ``restart``); a tagged instance the journal does not know is terminated. Every instance is sorted
           (and listed in ``record.meta["resumes"]``) before any is billed or a save adopted: an adopted save
           delivers its steps at once, and the orchestrator may launch on them before the reconcile returns.
        3. The engine clock restarts at the last journaled time, or later by the steps a worker saved after its
           last journaled report (at its instance's speed: they took engine time); a replayed market stands
           still, as in the local backend; at ``time_scale`` 1 (a real run: engine time is wall time) it
           restarts at now.

        Parameters
        ----------
        records : list of dict
            The killed run's journal (:func:`spottune.journal.read_journal`).

        Raises
        ------
        BackendError
            If the driver has no journal, or the journal holds a record out of order.
        """
        d = self.driver
        pending: dict[str, dict[str, Any]] = {}
        numbers = [0]
        for rec in records:
            if rec.get("k") == "event":
                if rec["e"].get("type") == "HourElapsed":
                    self._hours.add(rec["e"]["instance_id"])
                continue
            if rec.get("op") == "signal" and rec.get("signal") == REBALANCE:
                self._rebalanced.append((str(rec["id"]), float(rec["time_s"])))
            if rec.get("op") != "launch":
                continue
            if rec["k"] == "intent":
                pending[rec["id"]] = rec
                lid = str(rec.get("instance_id", ""))
                if lid.startswith("l") and lid[1:].isdigit():
                    numbers.append(int(lid[1:]))
            elif rec["k"] == "outcome":
                pending.pop(rec["id"], None)
        d.replay_journal()
        self._launches = max(numbers)  # a launch id is never reused, not even one whose intent was cut
        self._unresolved = list(pending.items())
        # an effect may be later than the event that caused it (the clock runs while actions are carried out)
        last = max([d.log_s, *(float(r["time_s"]) for r in records if r["k"] == "outcome" and "time_s" in r),
                    *(float(r["end_s"]) for r in records if r["k"] == "billed")])
        # a kept instance's steps beyond the journal come as its reports; a lease save's were trained before it
        self._saves, stop_s = d.worker_saves(records, self._orphan_save, last,
                                             trained_after=lambda info: info.metadata.get("reason") == "lease")
        d.log_s = stop_s
        start = stop_s if self.settings.time_scale != 1.0 else max(stop_s, time.time())
        d.restart_clock(start)
        d.note_resume({"at_s": start, "records": d.journal.n}, journal=False)  # journaled by reconcile()

    def _orphan_save(self, inst: Ec2Instance) -> Any:
        """The checkpoint the worker of ``inst`` saved on its own (a ``lease`` save, or one at a notice), or None
        (:func:`orphan_save`; the worker's instance id is the launch id)."""
        if self._store is None:
            self._store = LazyStore(self.settings.store_url, self.settings.storage_options, self.checkpoint_key)
        return orphan_save(self._store, inst, self.driver.record.meta, worker_id=inst.launch_id)

    def replay_launch(self, rec: dict[str, Any], action: Launch) -> None:
        """Rebuild the instance of a journaled fulfilled launch (reconciled with EC2 after the replay).

        Parameters
        ----------
        rec : dict
            The journaled launch ``outcome``.
        action : spottune.orchestrator.Launch
            The launch it answered.
        """
        d = self.driver
        vcpus, ecu = d.instance_facts(action.market.instance_type)
        inst = Ec2Instance(instance_id=str(rec["instance_id"]), trial_id=action.trial_id, market=action.market,
                           max_price=action.max_price_usd_per_hour, started_s=float(rec["time_s"]), notice_s=math.inf,
                           termination_s=math.inf, seconds_per_step=seconds_per_step(d.ref_sps, vcpus, ecu),
                           vcpus=vcpus, step=action.resume_step, saved_step=action.resume_step,
                           resume_step=action.resume_step, launch_id=str(rec["launch"]), resumed=True)
        d.instances[inst.instance_id] = inst
        self._by_launch[inst.launch_id] = inst

    def replay_refused(self, rec: dict[str, Any], action: Launch) -> None:
        """A capacity refusal excluded its market (outside ``handle``): the replay excludes it again.

        Parameters
        ----------
        rec : dict
            The journaled launch ``outcome`` (not fulfilled).
        action : spottune.orchestrator.Launch
            The launch it answered.
        """
        if rec.get("code") in CAPACITY_CODES:
            self.driver.inform(CapacityRefused(time_s=float(rec["time_s"]), market=action.market, reason=rec["code"]))

    def replay_event(self, event: Any) -> None:
        """A replayed ``RevocationNotice`` gives its instance the notice and the deadline again.

        Parameters
        ----------
        event : spottune.orchestrator.Event
            The replayed event.
        """
        from spottune.orchestrator import RevocationNotice

        inst = self.driver.instances.get(getattr(event, "instance_id", None))
        if isinstance(event, RevocationNotice) and inst is not None:
            inst.notified, inst.notice_s, inst.termination_s = True, float(event.time_s), float(event.deadline_s)

    def reconcile(self) -> None:
        """After a resume, on the driver thread with the clock running: :meth:`resume` step 2."""
        d = self.driver
        d.rearm_wakeups()
        now = d.now_s()
        tagged = {t.instance_id: t for t in find_instances(self.ec2, self.settings.experiment)}
        by_launch = {t.launch_id: t for t in tagged.values()}
        done: dict[str, Any] = d.record.meta["resumes"][-1]  # filled as it goes
        done.update({"terminated": [], "ended_while_down": [], "adopted": [], "kept": [], "unknown": [],
                     "intents_launched": [], "intents_not_launched": [], "worker_saves": {}})
        for trial_id, intent in self._unresolved:  # launch intents without an outcome: look them up by tag
            lid = str(intent.get("instance_id", ""))
            found = by_launch.get(lid)
            action = d.replayed_launches[trial_id]
            if found is None:
                self._launch_outcome(trial_id, launch=lid, instance_id="", fulfilled=False, time_s=d.log_s,
                                     error="not launched before the restart")  # LaunchFailed below
                done["intents_not_launched"].append(lid)
                continue
            rec = {"instance_id": found.instance_id, "launch": lid, "time_s": d.log_s}
            self._launch_outcome(trial_id, launch=lid, instance_id=found.instance_id, fulfilled=True,
                                 time_s=d.log_s)
            self.replay_launch(rec, action)
            done["intents_launched"].append(found.instance_id)
        d.post_lost_events(now)
        ending: list[tuple[Ec2Instance, float, str, str, Any]] = []  # (instance, end, by, reason, its save or None)
        for inst in list(d.instances.values()):
            if not inst.alive:
                continue
            t = tagged.get(inst.instance_id)
            live = t is not None and t.alive
            current = d.orchestrator.trials[inst.trial_id].instance_id == inst.instance_id
            if live and inst.launched and not current and inst.notified:
                inst.phase = Phase.SAVED  # revoked and saved: the provider ends it (describe_instances)
                done["adopted"].append(inst.instance_id)
                continue
            save = self._saves.get(inst.instance_id)
            lease = save is not None and (not live or save.metadata.get("reason") == "lease")
            if live and not lease and (current or not inst.launched):
                self._adopt(inst)  # still on its segment: kept, its reports read again
                done["kept"].append(inst.instance_id)
                continue
            if live:
                d.kill(inst)  # terminate_instances
                by, code, end_s = "user", "lease" if lease else "restart", now
                done["terminated"].append(inst.instance_id)
            else:  # it ended while we were down: who ended it is in its state reason
                code = t.reason_code if t is not None else ""
                by = ended_by(code)
                code = code or "ended while the orchestrator was down"
                end_s = min(inst.termination_s, now) if by == "provider" else now
                inst.terminated_seen = True
                d.kill(inst)
                done["ended_while_down"].append(inst.instance_id)
            ending.append((inst, end_s, by, code, save if lease else None))
        unknown = [i for i in tagged.values() if i.alive and i.instance_id not in d.instances]
        if unknown:  # tagged with the experiment, but no journaled launch of ours: not wanted
            self.ec2.terminate_instances(InstanceIds=[i.instance_id for i in unknown])
            done["unknown"] = [i.instance_id for i in unknown]
        # last, once every instance is sorted: an adopted save delivers its steps at once, and the orchestrator
        # may act on them (a launch) before this returns
        for inst, end_s, by, code, save in ending:
            if save is not None and d.adopt_orphan_save(inst, save.step, save.metadata.get("metrics")):
                done["worker_saves"][inst.trial_id] = int(save.step)  # the trial continues from its worker's save
                d.end(inst, end_s, by, code)
                continue
            d.end(inst, end_s, by, code)
            if inst.launched:  # the trial rolls back to its last confirmed checkpoint
                d.post(inst.segment_ended(now, EndReason.PROVIDER))
            else:
                d.post(LaunchFailed(time_s=now, trial_id=inst.trial_id, error="orchestrator restarted"))
        d.journal.resumed(done)

    def _adopt(self, inst: Ec2Instance) -> None:
        """Keep a live instance still on its trial's segment: read its reports again, re-arm its hourly tick
        (unless its ``HourElapsed`` is journaled) and a ``Checkpoint`` in flight (sent again: a worker that
        already saved ignores it, its ``saved`` report answers), and go on numbering its commands."""
        from spotmarket import HOUR_S

        d = self.driver
        inst.resumed, inst.adopted = False, True
        got = self.control.get_command(inst.launch_id)
        inst.cmd_seq = got[0] if got is not None else 0
        if inst.instance_id not in self._hours:
            d.timer(inst.started_s + HOUR_S, "hour", inst)
        if any(m == str(inst.market) and t_s >= inst.started_s for m, t_s in self._rebalanced):
            inst.stats["rebalance"] = "journaled"  # its hint came before the crash: not signalled again
        if inst.pending is not None and inst.phase is Phase.RUNNING:
            inst.to("checkpoint")
            self.command(inst, CheckpointCommand(reason=str(inst.pending.reason)))

    @staticmethod
    def _journaled(inst: Ec2Instance, report: Any) -> bool:
        """A report of an adopted instance that the journal already holds (received, handled and journaled
        before the crash, not yet deleted from the queue): :func:`journaled_report`."""
        return journaled_report(inst, report)

    # -- what the cloud says ------------------------------------------------------------------------------
    def _on_message(self, env: Envelope) -> None:
        d = self.driver
        inst = self._by_launch.get(env.launch)
        if inst is None or inst.resumed:
            return  # another run's launch, or one from before a restart (ended or left to the provider)
        if env.kind == "report":
            try:
                report = decode_report(str(env.body))
            except ValueError:
                return
            if inst.adopted and self._journaled(inst, report):
                return  # handled before the crash (decision AWS14)
            d.on_report(inst, report)
        elif env.kind == "exit":
            d.on_exit(inst, int(env.body))
        elif env.kind == "rebalance":
            if inst.adopted and "rebalance" in inst.stats:
                return  # signalled before the crash
            inst.stats["rebalance"] = env.body
            d.signal(inst.market, REBALANCE, 1.0, d.now_s())

    def seen_notice(self, inst: Ec2Instance, report: Notice) -> None:
        """The worker saw the interruption notice on IMDS: ``RevocationNotice`` with IMDS's deadline.

        Parameters
        ----------
        inst : Ec2Instance
            The instance.
        report : Notice
            The worker's report (IMDS's action and time).
        """
        self.driver.notice_from_worker(inst, report)

    def _on_silent(self, inst: Ec2Instance) -> None:
        """``report_timeout_s`` after a launch: an instance whose worker has not reported (still booting) is
        named in a warning and its segment fails (the orchestrator terminates it and retries within
        ``max_failures``): a run never waits silently for hosts that do not run their user data."""
        import warnings

        d, s = self.driver, self.settings
        if not inst.alive or inst.gone or inst.phase is not Phase.BOOTING:
            return
        msg = (f"instance {inst.instance_id} ({inst.market}, launch {inst.launch_id}) has not reported within "
               f"{s.report_timeout_s:g} s of its launch: its user data did not start the agent (`docker run "
               f"{s.image} --segment ...`), or it cannot reach the SQS queue; failing the segment. A plain moto "
               "server runs no user data (docs/guide/aws.md, \"Trying it on a laptop\")")
        log.warning("aws backend: %s", msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=1)
        d.record.meta.setdefault("silent_instances", []).append(inst.instance_id)
        d.failed(inst, msg)

    def _on_gone(self, instance_id: str, reason_code: str) -> None:
        d = self.driver
        inst = d.instances.get(instance_id)
        if inst is None or not inst.alive or inst.gone:
            return
        inst.terminated_seen = True
        now = d.now_s()
        inst.reason = reason_code
        if ended_by(reason_code) == "provider":
            inst.termination_s = min(inst.termination_s, now)
            d.provider_ended(inst)
            return
        # it ended on its own (its agent gave up or the host failed): a failed segment, paid by us
        if inst.phase in (Phase.BOOTING, Phase.RUNNING, Phase.CHECKPOINTING):
            d.failed(inst, f"instance {instance_id} ended on its own ({reason_code or 'no reason given'})")
        d.kill(inst)
        d.end(inst, now, "user", reason_code or "shutdown")
        d.enqueue(("ended", inst, EndReason.USER))

    def close_leftovers(self) -> None:
        """After ``ExperimentFinished``: leave revoked instances to the provider for up to ``linger_s``, then
        terminate what is left (billed as ``user``)."""
        s, d = self.settings, self.driver
        deadline = time.monotonic() + s.wall(s.linger_s)
        while any(i.alive for i in d.instances.values()) and time.monotonic() < deadline:
            for tagged in find_instances(self.ec2, s.experiment):
                inst = d.instances.get(tagged.instance_id)
                if inst is not None and inst.alive and tagged.state not in ("pending", "running"):
                    by = ended_by(tagged.reason_code)
                    d.end(inst, min(inst.termination_s, d.now_s()) if by == "provider" else d.now_s(),
                          by, tagged.reason_code)
            time.sleep(max(_MIN_POLL_WALL_S, s.wall(s.describe_every_s)))
        for inst in d.instances.values():
            if inst.alive:
                d.kill(inst)
                d.end(inst, d.now_s(), "user", "finished")
        d.record.meta["usd"] = d.usd
