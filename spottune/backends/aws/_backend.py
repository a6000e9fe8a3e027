"""The AWS backend: every trial segment on its own EC2 spot instance, driven through boto3.

The driver contract is :mod:`spottune.backends._base`'s, and the instance lifecycle, the report handlers
and the delivery loop are the local backend's (:class:`spottune.backends.local.LocalBackend`, subclassed):
only the effects differ ([I] decisions, docs/design/decisions.md AWS1-AWS8):

- **Launch** (:mod:`._launch`): the segment description goes to S3, then one ``run_instances`` (spot,
  max price, zone, IMDSv2 hop limit 2, shutdown = terminate, instance profile, tags, user data). A refusal
  is ``LaunchFailed`` with the AWS error code; a capacity refusal is first a ``CapacityRefused``, so the
  chooser excludes the market for ``exclusion_s`` (its :class:`provisioner.MarketExclusions`). Throttling is retried by
  botocore (``standard`` mode). Spending caps are checked first (:mod:`._safety`).
- **Reports** come from the experiment's SQS FIFO queue (:mod:`._channel`): the worker's own report lines,
  relayed by the agent (:mod:`spottune.backends.aws.agent`); the worker's ``notice`` report (it saw
  ``spot/instance-action`` on IMDS) becomes ``RevocationNotice`` with the deadline IMDS gave.
- **Commands** (``Checkpoint``) go to the segment's command object in S3; ``Terminate`` is
  ``terminate_instances``.
- **Endings** (:mod:`._discovery`): ``describe_instances`` by tag every ``describe_every_s``; a state
  reason ``Server.SpotInstanceTermination`` ends the segment as ``provider``; an instance that ended on
  its own otherwise (its agent gave up) fails the segment and is billed as ``user``.
- **Billing**: :class:`spotmarket.Billing` at the market's prices from ``describe_spot_price_history``
  over the run (:mod:`._prices`), with the first-hour refund when the provider ended it.
- **Lease**: renewed in S3 every ``lease_s / 4``; agents power their instances off when it goes stale.
- **End**: revoked-and-saved instances are left to the provider for up to ``linger_s`` (refundable), then
  every live instance tagged with the experiment is terminated: a run ends with none running.
- **Signals** (:mod:`._signals`): Spot placement scores (read at the start of a live run) and rebalance
  recommendations are ``MarketSignal`` events for the revocation predictor, journaled (AWS15).
- **Resume** (:meth:`AwsBackend.resume`, AWS14): the journal is replayed, then the experiment's instances
  are reconciled by tag: running ones terminated and their trials relaunched from the last confirmed
  checkpoint, revoked ones adopted, those that ended while the orchestrator was down billed by state reason.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from spotmarket import HOUR_S
from spottune.backends._base import Progress, RunRecord
from spottune.backends._replay import ReplayDriver
from spottune.backends.aws._channel import Control, Envelope, Inbox, queue_name
from spottune.backends.aws._discovery import ALIVE_STATES, cleanup, ended_by, find_instances
from spottune.backends.aws._launch import (CAPACITY_CODES, TAG_EXPERIMENT, TAG_LAUNCH, TAG_TRIAL, LaunchRefused,
                                           launch, launch_request, user_data)
from spottune.backends.aws._prices import ApiPrices
from spottune.backends.aws._safety import check_caps
from spottune.backends.aws._settings import AwsSettings
from spottune.backends.aws._signals import PLACEMENT_SCORE, REBALANCE
from spottune.speed import seconds_per_step
from spottune.backends.local._backend import LocalBackend, Phase, _Instance
from spottune.backends.local._clock import ScaledClock
from spottune.backends.local._messages import CheckpointCommand, Notice, decode_report, encode
from spottune.backends.local._pool import segment_argv
from spottune.checkpoint._secrets import CHECKPOINT_KEY_ENV, split_secrets, worker_env
from spottune.errors import BackendError
from spottune.orchestrator import (CapacityRefused, EndReason, Launch, LaunchFailed, MarketSignal, Orchestrator,
                                   Terminate)

__all__ = ["AwsBackend", "AwsClients"]

log = logging.getLogger(__name__)
_MIN_POLL_WALL_S = 0.05
_AGENT_POLL_WALL_S = 0.1
_DESCRIBE_WALL_S = 0.1  # describe_instances at most 10 times a second  # an agent reads its command object at most 10 times a second


@dataclass(slots=True, kw_only=True)
class _AwsInstance(_Instance):
    launch_id: str = ""
    notified: bool = False  # RevocationNotice sent
    terminated_seen: bool = False  # describe_instances showed it gone
    cmd_seq: int = 0
    resumed: bool = False  # rebuilt from the journal after a restart: its reports are no longer read


@dataclass(slots=True)
class AwsClients:
    """The boto3 clients of one run (tests pass clients with failure-injection hooks)."""

    ec2: Any
    s3: Any
    sqs: Any

    @classmethod
    def create(cls, settings: AwsSettings) -> "AwsClients":
        from spottune.backends.aws._session import client

        kw = dict(region=settings.region, endpoint_url=settings.endpoint_url, max_attempts=settings.max_attempts)
        return cls(client("ec2", **kw), client("s3", **kw), client("sqs", **kw))


class AwsBackend(LocalBackend):
    """Run every trial segment on an EC2 spot instance (see the module docstring).

    Parameters
    ----------
    orchestrator : Orchestrator
    billing : spotmarket.Billing
    workload : str
        Built-in workload name or ``"module:Class"`` importable in the worker image.
    trials : mapping trial_id -> (config, seed)
    instance_facts : callable instance_type -> (vcpus, ecu or None)
    start_s : float
        Engine time at the start (now on AWS; the replay's start in tests), seconds since the epoch.
    settings : AwsSettings
    clients : AwsClients, optional
        Default: :meth:`AwsClients.create`.
    progress : callable, optional
    """

    name = "aws"

    def __init__(self, orchestrator: Orchestrator, billing: Any, workload: str,
                 trials: Mapping[str, tuple[Mapping[str, Any], int]],
                 instance_facts: Callable[[str], tuple[int, float | None]], start_s: float, settings: AwsSettings,
                 *, clients: AwsClients | None = None, progress: Progress | None = None):
        from spottune.workloads import get_workload

        missing = set(orchestrator.trials) - set(trials)
        if missing:
            raise BackendError(f"aws backend: no configuration for trials {sorted(missing)}")
        if settings.store_url.startswith("memory://"):
            raise BackendError("aws backend: the workers run on other machines: use an s3:// checkpoint store")
        ReplayDriver.__init__(self, orchestrator, None, None, billing, instance_facts, start_s, progress)
        self.clock = ScaledClock(start_s, settings.time_scale)
        self.workload = workload
        self.trials = {t: (dict(c), int(s)) for t, (c, s) in trials.items()}
        self.start_s = float(start_s)
        self.settings = settings
        #: The experiment's checkpoint key (hex), handed to every instance in its user data.
        self.checkpoint_key = settings.checkpoint_key or worker_env({})[1][CHECKPOINT_KEY_ENV]
        self.ref_sps = float(settings.reference_seconds_per_step or get_workload(workload).reference_seconds_per_step)
        self._q: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self.clients = clients or AwsClients.create(settings)
        self.ec2 = self.clients.ec2
        self.control = Control(self.clients.s3, settings.bucket, settings.key_root)
        self.prices = ApiPrices(self.ec2)
        self._by_launch: dict[str, _AwsInstance] = {}
        self._launches = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.queue_url = ""
        #: Spot placement score (1..10) per market, handed to the predictor at the start (:mod:`._signals`).
        self.placement_scores: dict[Any, int] = {}
        self._resumed: list[Any] | None = None  # pending wake-ups after resume(); None: a fresh run
        self._unresolved: list[tuple[str, dict[str, Any]]] = []  # launch intents without an outcome
        self.record.meta.update(experiment=settings.experiment, region=settings.region, time_scale=settings.time_scale,
                                store=settings.store_url, reference_seconds_per_step=self.ref_sps,
                                poll_s=settings.poll_s, lease_s=settings.lease_s, exclusion_s=settings.exclusion_s,
                                max_usd_per_hour=settings.max_usd_per_hour, budget_usd=settings.budget_usd)

    # -- the run --------------------------------------------------------------------------------------
    def run(self) -> RunRecord:
        """Drive the orchestrator to the end on EC2 (see the module docstring).

        Raises
        ------
        BackendError
            On an AWS error the run cannot go on with (a missing bucket, no credentials, a refused
            permission: one line naming the call), a spending cap (``CapExceeded``), or a run longer than
            ``max_wall_s``. Every instance of the experiment is terminated on the way out.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self._run()
        except (BotoCoreError, ClientError) as exc:
            raise BackendError(f"aws backend: {type(exc).__name__}: {exc}") from None

    def _run(self) -> RunRecord:
        s = self.settings
        sqs = self.clients.sqs
        self.queue_url = sqs.create_queue(QueueName=queue_name(s.experiment), Attributes={
            "FifoQueue": "true", "ContentBasedDeduplication": "false"})["QueueUrl"]
        self.record.meta["queue"] = queue_name(s.experiment)
        self.control.renew_lease(s.wall(s.lease_s))
        try:
            self.clock.start()
            for target in (self._read_queue, self._watch_instances, self._renew_lease):
                th = threading.Thread(target=self._forever, args=(target,), daemon=True, name=target.__name__)
                th.start()
                self._threads.append(th)
            give_up = time.monotonic() + s.max_wall_s
            if self._resumed is None:
                for market, score in sorted(self.placement_scores.items(), key=lambda kv: str(kv[0])):
                    self._signal(market, PLACEMENT_SCORE, score, self.start_s)
                self._start()
            else:
                self._reconcile()
            self._serve(give_up, None)
            self._close_leftovers(self.now_s())
        finally:
            self._stop.set()
            for th in self._threads:
                th.join(timeout=10)
            self.clock.stop()
            self._sweep()
        self.record.meta["worker"] = {iid: inst.stats for iid, inst in self._instances.items()}
        self.record.meta["queue_duplicates"] = self._inbox.duplicates if hasattr(self, "_inbox") else 0
        return self.record

    def _forever(self, body: Callable[[], None]) -> None:
        """Run ``body`` until the run stops; an AWS error is logged and retried (never a dead thread)."""
        while not self._stop.is_set():
            try:
                body()
            except Exception as exc:  # noqa: BLE001 - a transient API error: log, go on
                log.warning("aws backend %s: %s: %s", body.__name__, type(exc).__name__, exc)
                self._stop.wait(0.5)

    def _read_queue(self) -> None:
        if not hasattr(self, "_inbox"):
            self._inbox = Inbox(self.clients.sqs, self.queue_url)
        for env in self._inbox.receive(wait_s=1):  # long polling: returns as soon as a message is there
            self._q.put(("msg", env))

    def _watch_instances(self) -> None:
        for inst in find_instances(self.ec2, self.settings.experiment):
            ours = self._instances.get(inst.instance_id)
            if inst.state not in ("pending", "running") and ours is not None and ours.alive:
                self._q.put(("gone", inst.instance_id, inst.reason_code))
        self._stop.wait(max(_DESCRIBE_WALL_S, self.settings.wall(self.settings.describe_every_s)))

    def _renew_lease(self) -> None:
        s = self.settings
        self.control.renew_lease(s.wall(s.lease_s))
        self._stop.wait(s.wall(s.lease_s) / 4)

    def _sweep(self) -> None:
        """Terminate every live instance tagged with the experiment; ours still unbilled are billed (user)."""
        try:
            gone = cleanup(self.ec2, self.settings.experiment)
        except Exception as exc:  # noqa: BLE001 - reported, the run's own error (if any) goes on
            log.error("aws backend: cleanup of experiment %s failed: %s", self.settings.experiment, exc)
            self.record.meta["cleanup_error"] = str(exc)
            return
        now = self.now_s()
        for tagged in gone:
            inst = self._instances.get(tagged.instance_id)
            if inst is not None and inst.alive:
                self._end(inst, now, "user", "cleanup")
        self.record.meta["cleanup_terminated"] = [t.instance_id for t in gone]
        try:
            self.control.s3.delete_object(Bucket=self.control.bucket, Key=self.control.key("lease.json"))
        except Exception:  # noqa: BLE001 - a missing lease is stale anyway
            pass

    def _handle(self, item: tuple[Any, ...]) -> None:
        kind, *args = item
        if kind == "msg":
            self._on_message(*args)
        elif kind == "gone":
            self._on_gone(*args)
        else:
            super()._handle(item)

    # -- effects ----------------------------------------------------------------------------------------
    def _launch(self, action: Launch) -> None:
        s, t = self.settings, self.now_s()
        live = [(i.max_price, i.started_s) for i in self._instances.values() if i.alive]
        wait = check_caps(max_price=action.max_price_usd_per_hour, live=live, now_s=t, spent_usd=self.usd,
                          max_usd_per_hour=s.max_usd_per_hour, budget_usd=s.budget_usd)
        if wait is not None:
            self._launch_outcome(action.trial_id, launch="", instance_id="", fulfilled=False, time_s=t, error=wait)
            self._post(LaunchFailed(time_s=t, trial_id=action.trial_id, error=wait))
            return
        market = action.market
        self._launches += 1
        lid = f"l{self._launches:05d}"  # refused launches are numbered too: a launch id is never reused
        vcpus, ecu = self.instance_facts(market.instance_type)
        sps = seconds_per_step(self.ref_sps, vcpus, ecu)
        config, seed = self.trials[action.trial_id]
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
                self._inform(CapacityRefused(time_s=t, market=market, reason=exc.code))
            self._launch_outcome(action.trial_id, launch=lid, instance_id="", fulfilled=False, time_s=t,
                                 error=str(exc), code=exc.code)
            self._post(LaunchFailed(time_s=t, trial_id=action.trial_id, error=str(exc)))
            return
        self._launch_outcome(action.trial_id, launch=lid, instance_id=iid, fulfilled=True, time_s=t)
        inst = _AwsInstance(instance_id=iid, trial_id=action.trial_id, market=market,
                            max_price=action.max_price_usd_per_hour, started_s=t, notice_s=math.inf,
                            termination_s=math.inf, seconds_per_step=sps, vcpus=vcpus, step=action.resume_step,
                            saved_step=action.resume_step, resume_step=action.resume_step, launch_id=lid)
        inst.stats.update(launch=lid, launch_wall_s=self.clock.wall_s())
        self._instances[iid] = inst
        self._by_launch[lid] = inst
        self._timer(t + HOUR_S, "hour", inst)

    def _launch_outcome(self, trial_id: str, **details: Any) -> None:
        if self.journal is not None:
            self.journal.outcome("launch", trial_id, **details)

    def _next_instance_id(self) -> str:
        """The launch id the next ``run_instances`` will tag (``spottune:launch``): the ``launch`` intent
        records it, so that a resume finds the instance of an intent without an outcome by its tag."""
        return f"l{self._launches + 1:05d}"

    def _command(self, inst: _AwsInstance, cmd: CheckpointCommand) -> None:
        inst.cmd_seq += 1
        self.control.put_command(inst.launch_id, inst.cmd_seq, encode(cmd))

    def _kill(self, inst: _AwsInstance) -> None:
        if inst.phase is not Phase.KILLED:
            inst.to("kill")
        if not inst.terminated_seen:
            inst.terminated_seen = True
            self.ec2.terminate_instances(InstanceIds=[inst.instance_id])

    _release = _kill

    def _terminate(self, action: Terminate) -> None:
        inst = self._instances[action.instance_id]
        self._kill(inst)
        self._end(inst, self.now_s(), "user", str(action.reason))
        self._q.put(("ended", inst, EndReason.USER))

    def _price_series(self, inst: Any, end_s: float) -> Any:
        return self.prices.series(inst.market, inst.started_s, end_s)

    # -- AWS's capacity signals (docs/design/decisions.md AWS15) ---------------------------------------------------------
    def _signal(self, market: Any, kind: str, value: float, t: float) -> None:
        """Journal one signal (:mod:`._signals`) and deliver it as a ``MarketSignal`` (a resume delivers it again from
        the journal)."""
        if self.journal is not None:
            self.journal.outcome("signal", str(market), signal=kind, value=float(value), time_s=float(t))
        self._apply_signal(market, kind, float(value), float(t))

    def _apply_signal(self, market: Any, kind: str, value: float, t: float) -> None:
        self.record.meta.setdefault("signals", []).append({"market": str(market), "kind": kind, "value": value,
                                                           "t": t})
        self._inform(MarketSignal(time_s=t, market=market, kind=kind, value=value))

    def _replay_record(self, rec: dict[str, Any]) -> None:
        if rec["k"] == "outcome" and rec["op"] == "signal":
            from spotmarket.prices import Market

            self._apply_signal(Market.parse(rec["id"]), rec["signal"], float(rec["value"]), float(rec["time_s"]))

    # -- crash safety (issue 15) --------------------------------------------------------------------------
    def resume(self, records: list[dict[str, Any]]) -> None:
        """Continue a killed run from its journal (decision AWS14, docs/guide/aws.md "Resume after a crash").

        1. The journal is replayed into the fresh orchestrator with the local backend's replay
           (:meth:`LocalBackend._replay_journal`: every action checked, ledger rows re-billed at the API's
           prices and compared); each journaled launch becomes an instance again (its AWS id and
           ``spottune:launch`` tag), a ``RevocationNotice`` gives it its deadline.
        2. :meth:`run` then reconciles with EC2 (:meth:`_reconcile`): the experiment's instances are listed by
           tag (:func:`find_instances`); a launch intent without an outcome is looked up by its launch tag;
           every instance the journal knows and that still runs is terminated (billed as ``user``, reason
           ``restart``) and its trial relaunches from its last confirmed checkpoint, except an instance
           already revoked and left by its trial, which is adopted (the provider ends it, refundable); one
           that ended while the orchestrator was down is billed as its state reason says
           (``Server.SpotInstanceTermination``: provider, first hour refunded); a tagged instance the journal
           does not know is terminated.
        3. The engine clock restarts at the last journaled time (a replayed market stands still, as in the
           local backend); at ``time_scale`` 1 (a real run: engine time is wall time) it restarts at now.
        """
        pending: dict[str, dict[str, Any]] = {}
        numbers = [0]
        for rec in records:
            if rec.get("op") != "launch":
                continue
            if rec["k"] == "intent":
                pending[rec["id"]] = rec
                lid = str(rec.get("instance_id", ""))
                if lid.startswith("l") and lid[1:].isdigit():
                    numbers.append(int(lid[1:]))
            elif rec["k"] == "outcome":
                pending.pop(rec["id"], None)
        self._replay_journal()
        self._launches = max(numbers)  # a launch id is never reused, not even one whose intent was cut
        self._unresolved = list(pending.items())
        # an effect may be later than the event that caused it (the clock runs while actions are carried out)
        last = max([self._log_s, *(float(r["time_s"]) for r in records if r["k"] == "outcome" and "time_s" in r),
                    *(float(r["end_s"]) for r in records if r["k"] == "billed")])
        self._log_s = last
        start = last if self.settings.time_scale != 1.0 else max(last, time.time())
        self.clock = ScaledClock(start, self.settings.time_scale)
        self.record.meta.setdefault("resumes", []).append({"at_s": start, "records": self.journal.n})

    def _replay_launch(self, rec: dict[str, Any], action: Any) -> None:
        vcpus, ecu = self.instance_facts(action.market.instance_type)
        inst = _AwsInstance(instance_id=str(rec["instance_id"]), trial_id=action.trial_id, market=action.market,
                            max_price=action.max_price_usd_per_hour, started_s=float(rec["time_s"]), notice_s=math.inf,
                            termination_s=math.inf, seconds_per_step=seconds_per_step(self.ref_sps, vcpus, ecu),
                            vcpus=vcpus, step=action.resume_step, saved_step=action.resume_step,
                            resume_step=action.resume_step, launch_id=str(rec["launch"]), resumed=True)
        self._instances[inst.instance_id] = inst
        self._by_launch[inst.launch_id] = inst

    def _replay_refused(self, rec: dict[str, Any], action: Any) -> None:
        """A journaled capacity refusal (its launch outcome) is delivered again as ``CapacityRefused``."""
        if rec.get("code") in CAPACITY_CODES:
            self._inform(CapacityRefused(time_s=float(rec["time_s"]), market=action.market, reason=rec["code"]))

    def _replay_event(self, event: Any, launches: dict[str, Any], wakes: list[tuple[str, float]]) -> None:
        from spottune.orchestrator import RevocationNotice

        super()._replay_event(event, launches, wakes)
        inst = self._instances.get(getattr(event, "instance_id", None))
        if isinstance(event, RevocationNotice) and inst is not None:
            inst.notified, inst.notice_s, inst.termination_s = True, float(event.time_s), float(event.deadline_s)

    def _reconcile(self) -> None:
        """After a resume, on the driver thread with the clock running: :meth:`resume` step 2."""
        for trial_id, at_s in self._resumed or ():
            self._wake_at(trial_id, at_s)
        now = self.now_s()
        tagged = {t.instance_id: t for t in find_instances(self.ec2, self.settings.experiment)}
        by_launch = {t.launch_id: t for t in tagged.values()}
        done: dict[str, list[str]] = {"terminated": [], "ended_while_down": [], "adopted": [], "unknown": [],
                                      "intents_launched": [], "intents_not_launched": []}
        for trial_id, intent in self._unresolved:  # launch intents without an outcome: look them up by tag
            lid = str(intent.get("instance_id", ""))
            found = by_launch.get(lid)
            action = self._replayed_launches[trial_id]
            if found is None:
                self._launch_outcome(trial_id, launch=lid, instance_id="", fulfilled=False, time_s=self._log_s,
                                     error="not launched before the restart")  # LaunchFailed below
                done["intents_not_launched"].append(lid)
                continue
            rec = {"instance_id": found.instance_id, "launch": lid, "time_s": self._log_s}
            self._launch_outcome(trial_id, launch=lid, instance_id=found.instance_id, fulfilled=True,
                                 time_s=self._log_s)
            self._replay_launch(rec, action)
            done["intents_launched"].append(found.instance_id)
        self._post_lost_events(now)
        for inst in list(self._instances.values()):
            if not inst.alive:
                continue
            t = tagged.get(inst.instance_id)
            left = inst.launched and self.orchestrator.trials[inst.trial_id].instance_id != inst.instance_id
            if t is not None and t.alive and left and inst.notified:
                inst.phase = Phase.SAVED  # revoked and saved: the provider ends it (describe_instances)
                done["adopted"].append(inst.instance_id)
                continue
            if t is not None and t.alive:
                self._kill(inst)  # terminate_instances
                self._end(inst, now, "user", "restart")
                done["terminated"].append(inst.instance_id)
            else:  # it ended while we were down: who ended it is in its state reason
                code = t.reason_code if t is not None else ""
                by = ended_by(code)
                inst.terminated_seen = True
                self._kill(inst)
                self._end(inst, min(inst.termination_s, now) if by == "provider" else now, by,
                          code or "ended while the orchestrator was down")
                done["ended_while_down"].append(inst.instance_id)
            if inst.launched:  # the trial rolls back to its last confirmed checkpoint
                self._post(inst.segment_ended(now, EndReason.PROVIDER))
            else:
                self._post(LaunchFailed(time_s=now, trial_id=inst.trial_id, error="orchestrator restarted"))
        unknown = [i for i in tagged.values() if i.alive and i.instance_id not in self._instances]
        if unknown:  # tagged with the experiment, but no journaled launch of ours: not wanted
            self.ec2.terminate_instances(InstanceIds=[i.instance_id for i in unknown])
            done["unknown"] = [i.instance_id for i in unknown]
        self.record.meta["resumes"][-1].update(done)

    # -- what the cloud says ------------------------------------------------------------------------------
    def _on_message(self, env: Envelope) -> None:
        inst = self._by_launch.get(env.launch)
        if inst is None or inst.resumed:
            return  # another run's launch, or one from before a restart (ended or left to the provider)
        if env.kind == "report":
            try:
                report = decode_report(str(env.body))
            except ValueError:
                return
            self._on_line(inst, report)
        elif env.kind == "exit":
            self._on_eof(inst, int(env.body))
        elif env.kind == "rebalance":
            inst.stats["rebalance"] = env.body
            self._signal(inst.market, REBALANCE, 1.0, self.now_s())

    def _on_seen(self, inst: _AwsInstance, report: Notice) -> None:
        """The worker saw the interruption notice on IMDS: ``RevocationNotice`` with IMDS's deadline."""
        self._notice_from_worker(inst, report)

    def _on_gone(self, instance_id: str, reason_code: str) -> None:
        inst = self._instances.get(instance_id)
        if inst is None or not inst.alive or inst.gone:
            return
        inst.terminated_seen = True
        now = self.now_s()
        inst.reason = reason_code
        if ended_by(reason_code) == "provider":
            inst.termination_s = min(inst.termination_s, now)
            self._on_termination(inst)
            return
        # it ended on its own (its agent gave up or the host failed): a failed segment, paid by us
        if inst.phase in (Phase.BOOTING, Phase.RUNNING, Phase.CHECKPOINTING):
            self._failed(inst, f"instance {instance_id} ended on its own ({reason_code or 'no reason given'})")
        self._kill(inst)
        self._end(inst, now, "user", reason_code or "shutdown")
        self._q.put(("ended", inst, EndReason.USER))

    def _on_ended(self, inst: _AwsInstance, reason: EndReason) -> None:
        self._segment_gone(inst, reason)

    def _close_leftovers(self, end_s: float) -> None:
        """After ``ExperimentFinished``: leave revoked instances to the provider for up to ``linger_s``, then
        terminate what is left (billed as ``user``)."""
        s = self.settings
        deadline = time.monotonic() + s.wall(s.linger_s)
        while any(i.alive for i in self._instances.values()) and time.monotonic() < deadline:
            for tagged in find_instances(self.ec2, s.experiment):
                inst = self._instances.get(tagged.instance_id)
                if inst is not None and inst.alive and tagged.state not in ("pending", "running"):
                    by = ended_by(tagged.reason_code)
                    self._end(inst, min(inst.termination_s, self.now_s()) if by == "provider" else self.now_s(),
                              by, tagged.reason_code)
            time.sleep(max(_MIN_POLL_WALL_S, s.wall(s.describe_every_s)))
        for inst in self._instances.values():
            if inst.alive:
                self._kill(inst)
                self._end(inst, self.now_s(), "user", "finished")
        self.record.meta["usd"] = self.usd
