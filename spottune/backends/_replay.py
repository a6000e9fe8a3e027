"""What the two market-replay drivers (sim, local) share: the instance record, delivery, launch and billing.

Both drivers replay a spot market (:mod:`spotmarket`) around the orchestrator; they differ only in
where time and training come from (a virtual clock and cached curves, or the wall clock and real
worker processes). :class:`ReplayDriver` holds the common part of the contract of
:mod:`spottune.backends._base`:

- **delivery**: every event is logged, handed to the orchestrator, and each action it returns is
  logged and carried out (:meth:`ReplayDriver._deliver`, :meth:`ReplayDriver._apply`); the driver
  never decides and never touches the orchestrator's models: what they learn is a model event
  (:meth:`ReplayDriver._inform`);
- **launch**: the injected revocation model says whether a ``Launch`` is fulfilled and when the notice
  and the termination come (:meth:`ReplayDriver._new_instance`); a refusal is a ``LaunchFailed``, and a
  capacity refusal is first a ``CapacityRefused``, so the chooser leaves its market out for a while, as
  with EC2's refusals in the aws backend (decision AWS3);
  the notice, the termination and the hourly tick are then put on the driver's clock
  (:meth:`ReplayDriver._schedule_timers`);
- **billing**: when an instance is gone it is billed once (``spotmarket.Billing``), the steps it
  ran and lost (run but never checkpointed) go to the ledger, and an ``InstanceEnded`` tells the
  orchestrator (an online revocation model learns from it) (:meth:`ReplayDriver._end`);
- **journal** (:mod:`spottune.journal`): the driver writes every record, the final-metric predictor's
  answers included (taken from the orchestrator after each ``handle``).

A subclass supplies the effects: ``_launch``, ``_checkpoint``, ``_terminate``, ``_wake_at``, and the
clock hooks ``_timer`` (call back at an engine time), ``_post`` (deliver an event after the current
one) and ``_event_time`` (the time an event is logged at).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from spottune.backends._base import Driver, Progress, RunRecord, log_record
from spottune.errors import BackendError, CheckpointError
from spottune import orchestrator as ev  # events and actions: ev.TrialLaunched, ev.Launch, ...
from spottune.orchestrator import Orchestrator
from spottune.speed import seconds_per_step
from spotmarket import HOUR_S, Cause

__all__ = ["Instance", "ReplayDriver"]



@dataclass(slots=True, kw_only=True)
class Instance:
    """One instance run of a trial: from the fulfilled launch until the instance is gone.

    Attributes
    ----------
    instance_id, trial_id : str
    market : spotmarket.prices.Market
    max_price : float
        The launch's max price, USD per instance-hour.
    started_s, notice_s, termination_s : float
        Launch (the hourly tick's origin), revocation notice and termination (engine seconds; inf: never).
    billing_start_s : float or None
        Billing start when it is not ``started_s`` (engine seconds; inf: not yet, e.g. a ray segment whose
        actor waits for a node, decision RY7); None: ``started_s``. See :attr:`bill_start_s`.
    seconds_per_step : float
        Simulated seconds per step on this instance type (:func:`spottune.speed.seconds_per_step`).
    vcpus : int
    reason : str
        What the market will end it for (``spotmarket.Cause``), for the ledger.
    step : int
        The trial's step count on this instance (starts at the restored step).
    saved_step : int
        The trial's last good checkpoint when this instance started, then its own last save.
    executed : int
        Steps run on this instance.
    alive : bool
        False once it has been billed.
    hours_committed : int
        Instance-hours the budget cap has counted (DB5): the first at the launch, one more at each hour boundary
        (:meth:`ReplayDriver._budget_tick`).
    """

    instance_id: str
    trial_id: str
    market: Any
    max_price: float
    started_s: float
    notice_s: float
    termination_s: float
    seconds_per_step: float
    vcpus: int
    reason: str = ""
    step: int = 0
    saved_step: int = 0
    executed: int = 0
    alive: bool = True
    hours_committed: int = 1
    billing_start_s: float | None = None

    @property
    def bill_start_s(self) -> float:
        """Engine seconds from which the instance is billed: :attr:`billing_start_s`, else :attr:`started_s`."""
        return self.started_s if self.billing_start_s is None else self.billing_start_s

    # -- the events about this instance, at engine time t -----------------------------------------------
    def trial_launched(self, t: float) -> ev.TrialLaunched:
        """The event of this instance ready to train (billing from :attr:`started_s`).

        Parameters
        ----------
        t : float
            Engine seconds of the event.

        Returns
        -------
        TrialLaunched
        """
        return ev.TrialLaunched(time_s=t, trial_id=self.trial_id, instance_id=self.instance_id, market=self.market,
                             started_s=self.started_s)

    def metric_reported(self, t: float, metrics: dict[str, float]) -> ev.MetricReported:
        """The metrics of step ``self.step``.

        Parameters
        ----------
        t : float
            Engine seconds of the event.
        metrics : dict of str to float
            What the step returned.

        Returns
        -------
        MetricReported
        """
        return ev.MetricReported(time_s=t, trial_id=self.trial_id, instance_id=self.instance_id, step=self.step,
                              metrics=metrics)

    def checkpoint_saved(self, t: float, reason: ev.CheckpointReason, step: int) -> ev.CheckpointSaved:
        """The event of a checkpoint of this instance that is complete at ``step``.

        Parameters
        ----------
        t : float
            Engine seconds of the event.
        reason : CheckpointReason
            The checkpoint's reason.
        step : int
            The step saved.

        Returns
        -------
        CheckpointSaved
        """
        return ev.CheckpointSaved(time_s=t, trial_id=self.trial_id, instance_id=self.instance_id, reason=reason,
                               step=step)

    def revocation_notice(self, t: float) -> ev.RevocationNotice:
        """The event of the provider's notice; the termination is at :attr:`termination_s`.

        Parameters
        ----------
        t : float
            Engine seconds of the event.

        Returns
        -------
        RevocationNotice
        """
        return ev.RevocationNotice(time_s=t, trial_id=self.trial_id, instance_id=self.instance_id,
                                deadline_s=self.termination_s)

    def hour_elapsed(self, t: float) -> ev.HourElapsed:
        """The event of this instance's full hour without revocation.

        Parameters
        ----------
        t : float
            Engine seconds of the event.

        Returns
        -------
        HourElapsed
        """
        return ev.HourElapsed(time_s=t, trial_id=self.trial_id, instance_id=self.instance_id)

    def segment_failed(self, t: float, error: str) -> ev.SegmentFailed:
        """The event of the trainable raising on this instance.

        Parameters
        ----------
        t : float
            Engine seconds of the event.
        error : str
            The exception, as text.

        Returns
        -------
        SegmentFailed
        """
        return ev.SegmentFailed(time_s=t, trial_id=self.trial_id, instance_id=self.instance_id, error=error)

    def segment_ended(self, t: float, reason: ev.EndReason) -> ev.SegmentEnded:
        """The event of this instance's end, at the trial's step count :attr:`step`.

        Parameters
        ----------
        t : float
            Engine seconds of the event.
        reason : EndReason
            ``provider`` or ``user``.

        Returns
        -------
        SegmentEnded
        """
        return ev.SegmentEnded(time_s=t, trial_id=self.trial_id, instance_id=self.instance_id, steps_done=self.step,
                            reason=reason)

    def died_booting(self, t: float) -> ev.LaunchFailed:
        """The provider ended it before the trial could start: reported as a failed launch.

        Parameters
        ----------
        t : float
            Engine seconds of the event.

        Returns
        -------
        LaunchFailed
        """
        return ev.LaunchFailed(time_s=t, trial_id=self.trial_id, error="terminated while booting")


InstanceT = TypeVar("InstanceT", bound=Instance)


class ReplayDriver(Driver):
    """Base of the drivers that replay a spot market around the orchestrator (see the module doc).

    Parameters
    ----------
    orchestrator : Orchestrator
    history : spotmarket.prices.PriceHistory
        Prices (USD per instance-hour) of every market the provisioner may choose.
    revocation_model : spotmarket.RevocationModel
        ``revocation(market, launch_s, instance_id=..., max_price_usd_per_hour=...) -> Revocation``.
    billing : spotmarket.Billing
    instance_facts : callable instance_type -> (vcpus, ecu or None)
        E.g. from ``provisioner.InstanceCatalog``.
    start_s : float
        Experiment start, engine seconds since the epoch (UTC).
    progress : callable (now_s, orchestrator, usd) -> None, optional
        Called after every delivered event (for a progress bar).

    Notes
    -----
    A launch the revocation model refuses for capacity (modern mode's outages, ``REFUSED_CAPACITY``) is
    delivered at once as :class:`~spottune.orchestrator.CapacityRefused`; a chooser built with
    :class:`provisioner.MarketExclusions` (the composition root does, design E12) then skips that market like one
    without a price, so every trial relaunches elsewhere instead of asking the market that refused, as SkyPilot
    fails over to another zone. A refusal for price excludes nothing (the chooser sees the price).
    """

    #: Backend name for ``meta["backend"]`` and error messages.
    name = "replay"
    #: ``spottune.checkpoint.StoreMonitor`` of the checkpoint store, if the driver has one: while the
    #: store is unreachable a ``Launch`` is answered ``LaunchFailed`` (the orchestrator retries after
    #: ``launch_retry_s``); a persistent outage raises ``BackendError`` from the launch.
    store_monitor: Any = None
    #: Spending caps checked before every launch (:func:`spottune.backends._caps.check_caps`; None: none).
    #: When the budget runs short the driver stops: no further launch, the live instances are ended and
    #: the run keeps the best trials so far; ``record.meta["budget_exhausted"]`` says why.
    budget_usd: float | None = None
    max_usd_per_hour: float | None = None
    stopped: bool = False

    def __init__(self, orchestrator: Orchestrator, history: Any, revocation_model: Any, billing: Any,
                 instance_facts: Callable[[str], tuple[int, float | None]], start_s: float,
                 progress: Progress | None = None):
        self.orchestrator = orchestrator
        self.history = history
        self.revocation_model = revocation_model
        self.billing = billing
        self.instance_facts = instance_facts
        self.progress = progress
        self.record = RunRecord(start_s=float(start_s))
        self.record.meta["backend"] = self.name
        self.usd = 0.0
        self._instances: dict[str, Any] = {}
        self._checkpoint_step: dict[str, int] = {t: 0 for t in orchestrator.trials}
        self._log_s = float(start_s)  # time of the event being (or last) delivered

    # -- the orchestrator side ------------------------------------------------------------------------
    def _start(self) -> None:
        """Deliver ``ExperimentStarted`` at the start time."""
        self._deliver(ev.ExperimentStarted(time_s=self.record.start_s))

    def _wake(self, trial_id: str, t: float) -> None:
        """Deliver ``WakeUp`` (for a ``ScheduleWakeUp``) at engine time ``t``."""
        self._deliver(ev.WakeUp(time_s=t, trial_id=trial_id))

    def _deliver(self, event: Any) -> None:
        """Log ``event``, hand it to the orchestrator, log and carry out every action it returns."""
        now = self._log_s = self._event_time(event)
        self.record.log.append(log_record("event", event, now))
        actions = self._handle_event(event)
        for action in actions:
            self.record.log.append(log_record("action", action, now))
            self._apply(action)
        if self.progress is not None:
            self.progress(now, self.orchestrator, self.usd)

    def _handle_event(self, event: Any) -> list[ev.Action]:
        """``orchestrator.handle(event)``, journaled when there is a journal: the event, then the final-metric
        predictor's answers (``memo`` records; a replay recalls them instead of fitting again), then the actions."""
        journal = self.journal
        if journal is None:
            return self.orchestrator.handle(event)
        journal.event(event)
        actions = self.orchestrator.handle(event, recall=journal.recall)
        journal.memos(self.orchestrator.take_predictions())
        journal.actions(actions)
        return actions

    def _inform(self, event: Any) -> None:
        """Hand a model event (:data:`spottune.orchestrator.MODEL_EVENTS`) to the orchestrator now, as the fact
        arises (it returns no action). Its journal record is the driver's own record of the same fact (the
        launch outcome, ``billed``, the ``signal`` outcome), from which a resume delivers it again; it is not
        logged (the ledger, the launch's ``LaunchFailed`` and ``meta["signals"]`` hold its data)."""
        actions = self.orchestrator.handle(event)
        if actions:  # pragma: no cover - an orchestrator bug
            raise BackendError(f"{self.name} backend: a {type(event).__name__} must not produce actions")

    def _apply(self, action: ev.Action) -> None:
        journal = self.journal
        match action:
            case ev.Launch():
                if self._refused_by_caps(action):
                    return
                if journal is not None:
                    journal.intent("launch", action.trial_id, instance_id=self._next_instance_id(),
                                   market=action.market, resume_step=action.resume_step)
                self._launch(action)
            case ev.Checkpoint():
                if journal is not None:
                    journal.intent("checkpoint", action.instance_id, reason=action.reason)
                self._checkpoint(action)
            case ev.Terminate():
                if journal is not None:
                    journal.intent("terminate", action.instance_id)
                self._terminate(action)
                if journal is not None:
                    journal.outcome("terminate", action.instance_id)
            case ev.ScheduleWakeUp():
                self._wake_at(action.trial_id, action.at_s)
            case ev.Stop():
                pass  # nothing runs: the record is in the log
            case ev.ExperimentFinished():
                self.record.end_s = self._log_s
            case _:
                raise BackendError(f"{self.name} backend cannot carry out {type(action).__name__}")

    def _refused_by_caps(self, action: ev.Launch) -> bool:
        """Check the spending caps before ``action``: True if it must not go ahead (a ``LaunchFailed`` is
        posted for a wait; the driver stops when the budget runs short)."""
        if self.stopped:
            return True
        if self.budget_usd is None and self.max_usd_per_hour is None:
            return False
        from spottune.backends._caps import CapExceeded, check_caps

        now = self._cap_time()
        alive = [i for i in self._instances.values() if i.alive]
        live = [(i.max_price, i.started_s) for i in alive if i.notice_s > now]
        accrued = self._accrued_usd(alive, now)
        try:
            wait = check_caps(max_price=action.max_price_usd_per_hour, live=live, now_s=now, spent_usd=self.usd,
                              max_usd_per_hour=self.max_usd_per_hour, budget_usd=self.budget_usd,
                              whole_hours=True, accrued_usd=accrued)
        except CapExceeded as exc:
            self._stop_for_budget(str(exc))
            return True
        if wait is not None:
            self._post(ev.LaunchFailed(time_s=now, trial_id=action.trial_id, error=wait))
            return True
        return False

    def _cap_time(self) -> float:
        """Engine time of a cap check: the event being delivered (a driver whose clock runs on overrides it)."""
        return self._log_s

    def _accrued_usd(self, alive: list[Instance], now: float) -> float:
        """USD the ``alive`` instances have accrued by ``now`` at the replayed prices, plus, for a noticed one, the
        rest until its announced termination at its max price (it ends there whatever we do)."""
        usd = sum(float(self._price_series(i, now).cost_usd(i.bill_start_s, now)) for i in alive if now > i.bill_start_s)
        return usd + sum(i.max_price * max(0.0, i.termination_s - now) / HOUR_S for i in alive if i.notice_s <= now)

    def _stop_for_budget(self, why: str) -> None:
        """The budget runs short: launch nothing more, end every live instance now (billed to now)."""
        self.stopped = True
        self.record.meta["budget_exhausted"] = why
        now = self._cap_time()
        for inst in list(self._instances.values()):
            if inst.alive:
                self._release(inst)
                self._end(inst, now, "user", "budget")
        self.record.end_s = now
        self.record.meta["usd"] = self.usd

    # -- shared effects -------------------------------------------------------------------------------
    def _new_instance(self, action: ev.Launch, t: float, reference_seconds_per_step: float, cls: type[InstanceT],
                      **extra: Any) -> InstanceT | None:
        """Ask the market for an instance at ``t``; returns it, or None after posting ``LaunchFailed``."""
        if self.store_monitor is not None:  # launches pause while the checkpoint store is unreachable
            try:
                up = self.store_monitor.reachable()
            except CheckpointError as exc:  # StoreUnavailable: a persistent outage ends the run
                raise BackendError(f"{self.name} backend: {exc}") from None
            if not up:
                self._post(ev.LaunchFailed(time_s=t, trial_id=action.trial_id, error=self.store_monitor.last.error))
                return None
        iid = self._next_instance_id()
        rev = self.revocation_model.revocation(action.market, t, instance_id=iid,
                                               max_price_usd_per_hour=action.max_price_usd_per_hour)
        if self.journal is not None:
            self.journal.outcome("launch", action.trial_id, instance_id=iid, fulfilled=bool(rev.fulfilled),
                                 time_s=float(t), notice_s=float(rev.notice_s),
                                 termination_s=float(rev.termination_s), cause=str(rev.cause))
        if not rev.fulfilled:
            if rev.cause == Cause.REFUSED_CAPACITY:
                self._inform(ev.CapacityRefused(time_s=t, market=action.market, reason=str(rev.cause)))
            self._post(ev.LaunchFailed(time_s=t, trial_id=action.trial_id, error=str(rev.cause)))
            return None
        vcpus, ecu = self.instance_facts(action.market.instance_type)
        inst = cls(instance_id=iid, trial_id=action.trial_id, market=action.market,
                   max_price=action.max_price_usd_per_hour, started_s=t, notice_s=float(rev.notice_s),
                   termination_s=float(rev.termination_s),
                   seconds_per_step=seconds_per_step(reference_seconds_per_step, vcpus, ecu), vcpus=vcpus,
                   reason=str(rev.cause), step=action.resume_step, saved_step=action.resume_step, **extra)
        self._instances[iid] = inst
        return inst

    def _next_instance_id(self) -> str:
        """The id the next fulfilled or refused launch gets: ``i-00001``, ``i-00002``, ..."""
        return f"i-{len(self._instances) + 1:05d}"

    def _schedule_timers(self, inst: Instance, ready_s: float) -> None:
        """Put the notice (not before ``ready_s``), the termination and the hourly tick on the clock."""
        if math.isfinite(inst.notice_s):
            self._timer(max(inst.notice_s, ready_s), "notice", inst)
        if math.isfinite(inst.termination_s):
            self._timer(inst.termination_s, "terminate", inst)
        if inst.started_s + HOUR_S < inst.termination_s:
            self._timer(max(inst.started_s + HOUR_S, ready_s), "hour", inst)
            if self.budget_usd is not None:  # after the hourly tick: a hop at the boundary needs no new hour
                self._timer(inst.started_s + HOUR_S, "budget", inst)

    def _budget_tick(self, inst: Instance) -> None:
        """An hour boundary of a live instance under a budget (DB5): its next hour is committed at its max price.

        The launch check counts each live instance through the end of its current hour; an instance that runs
        on past it (a wall-clock round, a held instance) commits one more hour here. When the billed USD, the
        accrued cost of the live instances and every live instance's commitment through the end of its current
        hour (the next one for an instance at its boundary) exceed the budget, the run stops for the budget
        (:meth:`_stop_for_budget`), so no instance-hour is ever begun that the budget cannot pay for.
        """
        t = inst.started_s + inst.hours_committed * HOUR_S
        if self.stopped or not inst.alive or self.budget_usd is None or inst.notice_s <= t:
            return  # ended, or noticed: its end is already counted to its termination
        self._log_s = max(self._log_s, t)
        alive = [i for i in self._instances.values() if i.alive]
        usd = self.usd + self._accrued_usd(alive, t)
        for i in alive:
            if i.notice_s > t:  # to the end of its current hour; at a boundary (age k h) the next hour
                age = max(0.0, t - i.started_s)
                usd += i.max_price * (math.ceil(age / HOUR_S + 1e-9) * HOUR_S - age) / HOUR_S
        if usd > self.budget_usd + 1e-9:
            self._stop_for_budget(f"budget: {usd:.4f} USD billed, accrued and committed through the live instances' "
                                  f"current hours at {(t - self.record.start_s) / HOUR_S:.2f} h would exceed "
                                  f"--budget-usd {self.budget_usd:g}")
            return
        inst.hours_committed += 1
        if t + HOUR_S < inst.termination_s:
            self._timer(t + HOUR_S, "budget", inst)

    def _end(self, inst: Instance, t: float, ended_by: str, reason: str) -> None:
        """The instance is gone: bill it once, count its steps (lost = run but never checkpointed)."""
        if not inst.alive:
            return
        inst.alive = False
        start = min(inst.bill_start_s, t)  # never placed (ray): nothing billed
        row = self.billing.bill(self._price_series(inst, t), start, t, ended_by, instance_id=inst.instance_id,
                                reason=reason, trial_id=inst.trial_id, max_price_usd_per_hour=inst.max_price)
        self.record.ledger.append(row)
        self.usd += row.charged_usd
        lost = max(0, inst.step - self._checkpoint_step[inst.trial_id]) if inst.step > inst.saved_step else 0
        self.record.instance_steps[inst.instance_id] = (inst.executed, lost)
        observed = self.orchestrator.observes_instances
        interrupted = (ended_by == "provider" and t >= inst.termination_s
                       and reason in (Cause.CAPACITY, Cause.CAPACITY_EVENT))
        if self.journal is not None:  # the billed record is also the journal of the InstanceEnded below
            self.journal.append("billed", id=inst.instance_id, trial_id=inst.trial_id, market=str(inst.market),
                                started_s=float(start), end_s=float(t), ended_by=ended_by, reason=str(reason),
                                max_price=inst.max_price, executed=inst.executed, lost=lost,
                                charged_usd=float(row.charged_usd), observed=observed,
                                interrupted=bool(interrupted))
        if observed:  # an online revocation model learns from what has happened by t
            self._inform(self._instance_ended(inst, float(t), bool(interrupted)))

    @staticmethod
    def _instance_ended(inst: Instance, end_s: float, interrupted: bool) -> ev.InstanceEnded:
        return ev.InstanceEnded(time_s=end_s, trial_id=inst.trial_id, instance_id=inst.instance_id,
                                market=inst.market, started_s=inst.started_s, interrupted=interrupted)

    def _price_series(self, inst: Instance, end_s: float) -> Any:
        """The prices ``inst`` is billed at (the replayed history; the aws backend asks the EC2 API)."""
        return self.history[inst.market]

    def _close_leftovers(self, end_s: float) -> None:
        """After ``ExperimentFinished``: the provider ends the instances still alive (revoked and saved ones)."""
        for inst in list(self._instances.values()):
            if inst.alive:
                self._release(inst)
                self._end(inst, min(inst.termination_s, end_s), "provider", inst.reason or "price")
        self.record.meta["usd"] = self.usd

    def _release(self, inst: Any) -> None:
        """Free what runs the instance before it is billed (the local backend kills its worker)."""

    def note_resume(self, entry: dict[str, Any], *, journal: bool = True) -> dict[str, Any]:
        """This run continues a killed one: ``record.meta["resumes"]`` lists the journal's earlier resumes (its
        ``resume`` lines), then ``entry``, which goes to the journal too (``journal=False``: the caller writes it
        later, with :meth:`spottune.journal.Journal.resumed`, once it is complete). Returns ``entry``."""
        earlier = [dict(r) for r in getattr(self.journal, "resumes", ())]
        self.record.meta.setdefault("resumes", earlier).append(entry)
        if journal and self.journal is not None:
            self.journal.resumed(entry)
        return entry

    # -- what a subclass supplies ---------------------------------------------------------------------
    @abc.abstractmethod
    def _event_time(self, event: Any) -> float:
        """Engine time at which ``event`` is logged (and the progress callback is told)."""

    @abc.abstractmethod
    def _post(self, event: Any) -> None:
        """Deliver ``event`` now, after the event being delivered."""

    @abc.abstractmethod
    def _timer(self, t_s: float, kind: str, inst: Any) -> None:
        """At engine time ``t_s``, handle ``kind`` (``notice``, ``terminate``, ``hour``) for ``inst``."""

    @abc.abstractmethod
    def _launch(self, action: ev.Launch) -> None: ...

    @abc.abstractmethod
    def _checkpoint(self, action: ev.Checkpoint) -> None: ...

    @abc.abstractmethod
    def _terminate(self, action: ev.Terminate) -> None: ...

    @abc.abstractmethod
    def _wake_at(self, trial_id: str, at_s: float) -> None:
        """Deliver ``WakeUp(trial_id)`` at engine time ``at_s``."""
