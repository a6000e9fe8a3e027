"""Algorithm 1 of SpotTune as a pure state machine: ``Orchestrator.handle(event) -> list[Action]``.

No I/O, no clock (time comes only from events), no global RNG. The market chooser (the provisioner,
Eq 1–2) and the final-metric predictor (EarlyCurve, Eq 4–7) are injected objects that compute and do
no I/O. Every state change goes through :func:`spottune.orchestrator._state.next_state`, for events we
receive and for actions we send, validating first and assigning after, so a rejected trigger leaves
the trial unchanged.

Decisions ([I]: what Algorithm 1 leaves open; decisions D1-D13 of ``docs/design/decisions.md``):
- launch every trial at ``ExperimentStarted`` (with ``config.max_concurrent_trials``, the first that many; the
  others wait in trial order for a trial to end, stop or pause at a barrier; design D14); relaunch at once after a
  revocation checkpoint (the
  revoked instance is left for the provider to terminate so its first hour stays refundable);
- after one hour on an instance: checkpoint (HOP), terminate, re-provision; if a notice arrived
  meanwhile, the instance is not terminated by us (refund); no hop when no step finished on the instance
  yet (a slow start would otherwise relaunch every hour without progress);
- phase 1 target ``ceil(θ·max_steps)``; barrier once every trial is paused or terminal (D12); rank by
  the predictor's final value in loss scale (``mode="max"`` metrics become ``1 − value``, as Eq 4's curve decreases);
  plateaued trials rank by their last observed value and are never continued; the top-k continue to
  ``max_steps``; the rest are stopped; with θ = 1 the ranking uses the actual final values;
- with ``config.rungs``, the same barrier first at each rung's step, ranked by the last observed
  value (or by ``rung_predictor``'s predicted final value), keeping the rung's ``keep`` trials; θ is the last
  barrier;
- a failing trainable is retried up to ``max_failures`` times (Ray's meaning), then FAILED; other
  trials go on. Preemptions never touch that budget.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, assert_never

import numpy as np

from earlycurve import ConfigAwarePredictor, Prediction
from earlycurve.errors import EarlyCurveError
from provisioner.errors import NoMarketAvailable
from spottune.errors import ConfigError, UnexpectedEvent
from spottune.orchestrator._actions import (
    Action,
    Checkpoint,
    ExperimentFinished,
    Launch,
    ScheduleWakeUp,
    Stop,
    StopReason,
    Terminate,
    TerminateReason,
)
from spottune.orchestrator._events import (
    INSTANCE_EVENTS,
    MODEL_EVENTS,
    CapacityRefused,
    CheckpointReason,
    CheckpointSaved,
    Event,
    ExperimentStarted,
    HourElapsed,
    InstanceEnded,
    LaunchFailed,
    MarketSignal,
    MetricReported,
    RevocationNotice,
    SegmentEnded,
    SegmentFailed,
    TrialLaunched,
    WakeUp,
)
from spottune.orchestrator._config import (
    FinalMetricPredictor,
    HorizonChooser,
    LastValue,
    LearningChooser,
    MarketChooser,
    OrchestratorConfig,
    PlateauRule,
    StopRule,
)
from spottune.orchestrator._record import TrialRecord
from spottune.orchestrator._state import Kept, Marker, TrialState, next_state


#: ``recall(index, key)``: the answer a final-metric predictor gave to the ``index``-th question of this
#: ``handle`` call in an earlier run of the same experiment (a journal being replayed), or None.
Recall = Callable[[int, str], Mapping[str, Any] | None]


@dataclass(frozen=True, slots=True)
class PredictorAnswer:
    """One answer of a final-metric predictor during :meth:`Orchestrator.handle` (for the driver's journal).

    Attributes
    ----------
    key : str
        :func:`prediction_key` of the question.
    prediction : earlycurve.Prediction or None
        The answer (computed or recalled); None when the predictor raised.
    error : str or None
        ``"<exception type>: <message>"`` when the predictor raised (the orchestrator then ranks by the last
        observed value).
    recalled : mapping or None
        The journaled answer it was read back from (``recall``), as journaled; None when computed.
    """

    key: str
    prediction: Prediction | None = None
    error: str | None = None
    recalled: Mapping[str, Any] | None = None


def prediction_key(steps: np.ndarray, values: np.ndarray, max_steps: int, kw: Mapping[str, Any]) -> str:
    """The question a final-metric predictor is asked, as 32 hex digits: SHA-256 of the steps and values (float64
    bytes), ``max_steps`` and, when given, the keyword arguments (a trial's configuration) as sorted JSON.

    Parameters
    ----------
    steps, values : ndarray of shape (n_points,)
        The trial's curve so far: steps, and the metric in loss scale.
    max_steps : int
        S_max, steps: where the final value is predicted.
    kw : mapping
        Keyword arguments of the question (a trial's configuration), or empty.

    Returns
    -------
    str
        32 lowercase hex digits.
    """
    digest = hashlib.sha256()
    digest.update(np.ascontiguousarray(steps, dtype=float).tobytes())
    digest.update(b"|")
    digest.update(np.ascontiguousarray(values, dtype=float).tobytes())
    digest.update(f"|{int(max_steps)}".encode())
    if kw:
        digest.update(b"|" + json.dumps(kw, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:32]


def _explain(explanation: object) -> object:
    """The chooser's explanation as plain data for the event log (``to_dict()`` if it has one)."""
    if explanation is None:
        return ""
    to_dict = getattr(explanation, "to_dict", None)
    return to_dict() if callable(to_dict) else str(explanation)


class Orchestrator:
    """SpotTune's Algorithm 1, sans-I/O: feed events to :meth:`handle`, carry out the returned actions.

    Parameters
    ----------
    trial_ids : sequence of str
        The HPT jobs (one per configuration), launched in this order.
    config : OrchestratorConfig
    chooser : MarketChooser
        The provisioner (Eq 1–2).
    predictor : FinalMetricPredictor, optional
        EarlyCurve; default :class:`earlycurve.LastValue` (the last observed loss).
    plateau_rule : callable (steps, losses, max_steps) -> bool, optional
        The paper's plateau rule (§III-C, decision D8; e.g. ``earlycurve``'s ``is_plateau``); default: never plateau.
    stop_rule : StopRule, optional
        External early stopping (e.g. an Optuna pruner, ``spottune.evaluation``): asked after every
        reported step; True stops the running trial at once (STOPPED_EARLY). Default: none.
    rung_predictor : FinalMetricPredictor, optional
        Ranks the trials at the rungs before θ (``config.rungs``) by its predicted final loss; default: the last
        observed value (e.g. :class:`earlycurve.HyperparameterCurvePredictor`, docs/design/earlycurve.md §8.19).
    configs : mapping of str to mapping, optional
        Each trial's hyperparameters, given to a predictor whose ``uses_config`` is true as ``config=``
        (:class:`earlycurve.ConfigAwarePredictor`).

    Raises
    ------
    ConfigError
        If ``trial_ids`` is empty or holds a duplicate.

    Notes
    -----
    Everything the orchestrator's models learn during the run comes through :meth:`handle`: trial events
    update the trials (and the chooser's measured speeds), model events (:data:`~spottune.orchestrator.MODEL_EVENTS`)
    go to a :class:`provisioner.LearningChooser`. A :class:`provisioner.HorizonChooser` whose ``plans_horizon`` is
    True is asked with the trial's plan. The final-metric predictors' answers of one :meth:`handle` call are
    :meth:`take_predictions` (for the driver's journal; a replay reads them back through ``recall``).

    Examples
    --------
    >>> orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=10), chooser)  # doctest: +SKIP
    >>> orch.handle(ExperimentStarted(time_s=0.0))  # doctest: +SKIP
    [Launch(trial_id='t0', market=..., ...)]
    """

    def __init__(
        self,
        trial_ids: Sequence[str],
        config: OrchestratorConfig,
        chooser: MarketChooser,
        predictor: FinalMetricPredictor | None = None,
        plateau_rule: PlateauRule | None = None,
        stop_rule: StopRule | None = None,
        rung_predictor: FinalMetricPredictor | None = None,
        configs: Mapping[str, Mapping[str, Any]] | None = None,
    ):
        if len(set(trial_ids)) != len(trial_ids) or not trial_ids:
            raise ConfigError(f"trial ids must be unique and non-empty, got {list(trial_ids)!r}")
        self.config = config
        self.chooser = chooser
        self.predictor = predictor if predictor is not None else LastValue()
        self.plateau_rule = plateau_rule
        self.stop_rule = stop_rule
        self.rung_predictor = rung_predictor
        self.configs = dict(configs or {})
        #: the chooser is asked with the trial's plan (a HorizonChooser that plans its horizon)
        self._plans_horizon = isinstance(chooser, HorizonChooser) and bool(chooser.plans_horizon)
        #: the chooser that model events go to (None: they change nothing)
        self._learner: LearningChooser | None = chooser if isinstance(chooser, LearningChooser) else None
        self._answers: list[PredictorAnswer] = []
        self._recall: Recall | None = None
        self._recall_base = 0
        first = config.barriers[0][0] if config.barriers else config.max_steps
        self.trials: dict[str, TrialRecord] = {t: TrialRecord(trial_id=t, target_steps=first) for t in trial_ids}
        self.started_s: float | None = None
        self.finished_s: float | None = None
        self.barrier = 0  #: index of the next barrier in ``config.barriers``
        self.selection_done = config.theta >= 1  #: the θ barrier has been passed (or there is none)
        self.selected: tuple[str, ...] = ()  #: the top-k chosen at the θ barrier
        self.top_k: tuple[str, ...] = ()  #: the final answer, best first
        #: trials waiting for a slot under ``config.max_concurrent_trials`` (PENDING or KEPT), in launch order
        self.waiting: list[str] = []

    # -- public -------------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """True once :class:`ExperimentFinished` has been emitted."""
        return self.finished_s is not None

    def counts(self) -> dict[TrialState, int]:
        """Number of trials per state.

        Returns
        -------
        dict of TrialState to int
            Every state, 0 for a state no trial is in.
        """
        out = {s: 0 for s in TrialState}
        for tr in self.trials.values():
            out[tr.state] += 1
        return out

    def to_user(self, loss: float | None) -> float | None:
        """Loss scale back to the user's metric direction.

        Parameters
        ----------
        loss : float or None
            A value in loss scale (lower is better).

        Returns
        -------
        float or None
            ``loss`` for ``mode="min"``, ``1 − loss`` for ``mode="max"``; None for None.
        """
        if loss is None:
            return None
        return loss if self.config.mode == "min" else 1.0 - loss

    @property
    def observes_instances(self) -> bool:
        """Whether an :class:`~spottune.orchestrator.InstanceEnded` teaches the chooser's revocation predictor
        anything (journaled by the driver with the billed run)."""
        return self._learner is not None and bool(self._learner.observes_instances)

    def take_predictions(self) -> tuple[PredictorAnswer, ...]:
        """The final-metric predictors' answers since the last call, in the order they were asked (and forget them).

        A driver with a journal takes them after every :meth:`handle` and journals them before its actions.

        Returns
        -------
        tuple of PredictorAnswer
            Empty when nothing was asked.
        """
        out = tuple(self._answers)
        self._answers.clear()
        return out

    def handle(self, event: Event, *, recall: Recall | None = None) -> list[Action]:
        """Process one event; return the actions the driver must carry out, in order.

        Parameters
        ----------
        event : Event
            A trial event, or a model event (:data:`~spottune.orchestrator.MODEL_EVENTS`), which goes to the
            chooser's models and returns no action.
        recall : callable (index, key) -> mapping or None, optional
            Answers of the final-metric predictor journaled by an earlier run of this experiment (see
            :class:`PredictorAnswer`): a question whose journaled answer is recalled is not computed again.

        Returns
        -------
        list of Action
            ``Launch``, ``Checkpoint``, ``Terminate``, ``Stop``, ``ScheduleWakeUp`` or ``ExperimentFinished``, in
            the order the driver must carry them out; empty for a model event.

        Raises
        ------
        UnexpectedEvent
            If the event is impossible for the trial's state (nothing changes).
        """
        self._recall, self._recall_base = recall, len(self._answers)
        if isinstance(event, MODEL_EVENTS):
            self._inform(event)
            return []
        if isinstance(event, ExperimentStarted):
            if self.started_s is not None:
                raise UnexpectedEvent("*", "started", "ExperimentStarted")
            self.started_s = event.time_s
            out: list[Action] = []
            self._admit(list(self.trials.values()), event.time_s, out)
            return out
        tr = self.trials.get(event.trial_id)
        if tr is None or self.started_s is None:
            raise UnexpectedEvent(event.trial_id, "unknown" if tr is None else str(tr.state), type(event).__name__)
        marker = self._marker(tr, event)
        new_state = next_state(tr.trial_id, tr.state, type(event), marker)  # validate first
        if isinstance(event, MetricReported) and marker is None and self.config.metric not in event.metrics:
            raise ConfigError(
                f"trial {tr.trial_id}: step() returned no metric {self.config.metric!r} (got {sorted(event.metrics)})"
            )
        old_state, tr.state = tr.state, new_state  # then assign
        out = []
        if marker is Marker.PREVIOUS_INSTANCE:
            return out
        self._react(tr, event, old_state, out)
        return out

    # -- internals ----------------------------------------------------------------------------------
    def _inform(self, event: CapacityRefused | InstanceEnded | MarketSignal) -> None:
        """Hand a model event to the chooser (a LearningChooser; others learn nothing from it)."""
        learner = self._learner
        if learner is None:
            return
        match event:
            case CapacityRefused():
                learner.exclude(event.market, event.time_s, event.reason)
            case InstanceEnded():
                learner.observe(event.market, event.started_s, event.time_s, event.interrupted)
            case MarketSignal():
                learner.signal(event.market, event.time_s, event.kind, event.value)
            case _:
                assert_never(event)

    def _marker(self, tr: TrialRecord, event: Event) -> object:
        if isinstance(event, INSTANCE_EVENTS):
            if event.instance_id != tr.instance_id:
                if event.instance_id not in tr.instance_ids:
                    raise UnexpectedEvent(tr.trial_id, str(tr.state), f"{type(event).__name__}(unknown instance {event.instance_id})")
                return Marker.PREVIOUS_INSTANCE
        match event:
            case CheckpointSaved():
                return self._saved_reason(tr, event)
            case SegmentEnded():
                return event.reason
            case SegmentFailed():
                return Marker.RETRY if tr.failures + 1 <= self.config.max_failures else Marker.GIVE_UP
        return None

    def _act(self, tr: TrialRecord, action: Action, marker: object, out: list[Action]) -> None:
        tr.state = next_state(tr.trial_id, tr.state, type(action), marker)  # raises InvalidAction
        out.append(action)

    def _react(self, tr: TrialRecord, event: Event, old_state: TrialState, out: list[Action]) -> None:
        t = event.time_s
        match event:
            case TrialLaunched():
                tr.instance_id = event.instance_id
                tr.instance_ids.append(event.instance_id)
                tr.market = event.market
                if event.market not in tr.markets_used:
                    tr.markets_used.append(event.market)
                tr.started_s, tr.train_end_s = t, None
                if event.restored_step is not None and 0 <= event.restored_step < tr.checkpoint_step:
                    # the confirmed checkpoint was missing or corrupt: the store fell back
                    tr.lost_steps += tr.checkpoint_step - event.restored_step
                    tr.checkpoint_step = event.restored_step
                    cut = int(np.searchsorted(tr.steps, tr.checkpoint_step, side="right"))
                    del tr.steps[cut:], tr.losses[cut:]
                tr.segment_start_step = tr.step = tr.checkpoint_step
            case LaunchFailed():
                excluded = self._excluded(t)
                if tr.launch_market in excluded:  # refused for capacity: fail over at once (E12)
                    self._launch(tr, t, out, avoid=excluded)
                else:
                    out.append(ScheduleWakeUp(trial_id=tr.trial_id, at_s=t + self.config.launch_retry_s))
            case WakeUp():
                if tr.state in (TrialState.PENDING, TrialState.PREEMPTED, TrialState.HOPPING, TrialState.KEPT) \
                        and tr.trial_id not in self.waiting:  # a waiting trial launches when a slot frees (D14)
                    self._launch(tr, t, out)
            case MetricReported():
                if old_state is TrialState.RUNNING:
                    self._on_metric(tr, event, out)
                elif old_state is TrialState.CHECKPOINTING:  # finished as the checkpoint began: it is saved,
                    self._record_point(tr, event)  # so keep its metric; the checkpoint in flight decides
            case RevocationNotice():
                tr.revocations += 1
                tr.noticed.add(event.instance_id)
                if old_state is TrialState.RUNNING:
                    self._checkpoint(tr, t, CheckpointReason.REVOCATION, out)
            case HourElapsed():
                # a hop before any step on this instance would only pay another boot and restore: when
                # start-up outlasts the hour it relaunched forever without progress, so keep the instance
                if old_state is TrialState.RUNNING and self.config.hourly_hop and tr.step > tr.segment_start_step:
                    self._checkpoint(tr, t, CheckpointReason.HOP, out)
            case CheckpointSaved():
                self._on_saved(tr, event, out)
            case SegmentEnded():
                if event.instance_id not in tr.noticed:
                    tr.revocations += 1  # interrupted without (or before) a notice
                self._rollback(tr, event.steps_done, t)
                self._launch(tr, t, out)
            case SegmentFailed():
                tr.failures += 1
                instance = tr.instance_id
                self._rollback(tr, tr.step, t)
                if instance not in tr.noticed:
                    self._act(tr, Terminate(trial_id=tr.trial_id, instance_id=instance, reason=TerminateReason.FAILURE),
                              TerminateReason.FAILURE, out)
                if tr.state is TrialState.PENDING:
                    self._launch(tr, t, out)
                else:
                    self._progress(t, out)
            case ExperimentStarted() | CapacityRefused() | InstanceEnded() | MarketSignal():  # handled in handle()
                raise AssertionError("unreachable")
            case _:
                assert_never(event)

    def _record_point(self, tr: TrialRecord, event: MetricReported) -> float:
        """Keep ``event``'s metric as the curve point of its step; returns the loss (smaller is better)."""
        value = float(event.metrics[self.config.metric])
        loss = value if self.config.mode == "min" else 1.0 - value
        tr.step, tr.reported_s, tr.reported_step = event.step, event.time_s, event.step
        if tr.steps and event.step <= tr.steps[-1]:  # replayed after a rollback: keep one point per step
            cut = int(np.searchsorted(tr.steps, event.step))
            del tr.steps[cut:], tr.losses[cut:]
        tr.steps.append(event.step)
        tr.losses.append(loss)
        return loss

    def _on_metric(self, tr: TrialRecord, event: MetricReported, out: list[Action]) -> None:
        loss = self._record_point(tr, event)
        if self.stop_rule is not None and self.stop_rule.should_stop(tr.trial_id, event.step, loss) \
                and event.step < tr.target_steps:
            self._prune(tr, event.time_s, out)
        elif event.step >= tr.target_steps:
            reason = CheckpointReason.END if self._final_target(tr) else CheckpointReason.THETA
            self._checkpoint(tr, event.time_s, reason, out)
        elif self.plateau_rule is not None and self.plateau_rule(
            np.asarray(tr.steps, dtype=float), np.asarray(tr.losses, dtype=float), self.config.max_steps
        ):
            self._checkpoint(tr, event.time_s, CheckpointReason.PLATEAU, out)

    def _prune(self, tr: TrialRecord, t: float, out: list[Action]) -> None:
        """The stop rule fired: terminate the instance now (nothing to save) and stop the trial."""
        tr.pruned_at = tr.step
        self._record_segment(tr, t, tr.step)
        instance = self._detach(tr)  # its SegmentEnded(user) is then a PREVIOUS_INSTANCE self-loop
        self._act(tr, Terminate(trial_id=tr.trial_id, instance_id=instance, reason=TerminateReason.PRUNE),
                  TerminateReason.PRUNE, out)
        self._progress(t, out)

    def _checkpoint(self, tr: TrialRecord, t: float, reason: CheckpointReason, out: list[Action]) -> None:
        tr.train_end_s = t
        self._act(tr, Checkpoint(trial_id=tr.trial_id, instance_id=tr.instance_id, reason=reason), reason, out)

    def _record_segment(self, tr: TrialRecord, end_s: float, steps_done: int) -> None:
        # Speed is measured up to the segment's last reported step: a segment ends mid-step (a notice, a hop, a
        # revocation, a prune), and counting the unfinished step's seconds made T up to one step per segment too
        # slow (1.7x on one-step segments), which sent trials off the markets they were revoked on.
        if tr.reported_s is not None and tr.reported_s >= tr.started_s \
                and tr.segment_start_step < tr.reported_step <= steps_done:
            end_s, steps_done = tr.reported_s, tr.reported_step
        steps = steps_done - tr.segment_start_step
        seconds = end_s - tr.started_s
        if steps > 0 and seconds > 0 and tr.market is not None:
            self.chooser.record_segment(tr.trial_id, tr.market.instance_type, seconds, steps)

    def _detach(self, tr: TrialRecord) -> str:
        instance, tr.instance_id = tr.instance_id, None
        return instance

    def _rollback(self, tr: TrialRecord, steps_done: int, t: float) -> None:
        """The instance is gone before a checkpoint: resume from the last good one, count lost steps."""
        self._record_segment(tr, tr.train_end_s if tr.train_end_s is not None else t, steps_done)
        self._detach(tr)
        tr.lost_steps += max(0, steps_done - tr.checkpoint_step)
        tr.step = tr.checkpoint_step
        cut = int(np.searchsorted(tr.steps, tr.checkpoint_step, side="right"))
        del tr.steps[cut:], tr.losses[cut:]

    def _saved_reason(self, tr: TrialRecord, event: CheckpointSaved) -> CheckpointReason:
        """What a saved checkpoint means for the trial: a hop or revocation checkpoint that already holds the
        target step (the last step finished as the checkpoint began) ends the segment like the θ or end
        checkpoint would; relaunching it would have nothing to do, and did so every hour."""
        if event.reason in (CheckpointReason.HOP, CheckpointReason.REVOCATION) and event.step >= tr.target_steps:
            return CheckpointReason.END if self._final_target(tr) else CheckpointReason.THETA
        return event.reason

    def _final_target(self, tr: TrialRecord) -> bool:
        """Whether reaching ``tr.target_steps`` finishes the trial (else it pauses for a barrier):
        here when the target is S_max; a bracket schedule also finishes the trials of its last round."""
        return tr.target_steps >= self.config.max_steps

    def _on_saved(self, tr: TrialRecord, event: CheckpointSaved, out: list[Action]) -> None:
        t = event.time_s
        reason = self._saved_reason(tr, event)
        tr.checkpoint_step = tr.step = event.step
        self._record_segment(tr, tr.train_end_s if tr.train_end_s is not None else t, event.step)
        instance = self._detach(tr)
        noticed = instance in tr.noticed  # the provider will end it: keep the first-hour refund
        match reason:
            case CheckpointReason.REVOCATION:
                self._launch(tr, t, out)
            case CheckpointReason.HOP:
                tr.hops += 1
                if not noticed:
                    self._act(tr, Terminate(trial_id=tr.trial_id, instance_id=instance, reason=TerminateReason.HOP),
                              TerminateReason.HOP, out)
                self._launch(tr, t, out)
            case CheckpointReason.THETA:
                if not noticed:
                    self._act(tr, Terminate(trial_id=tr.trial_id, instance_id=instance, reason=TerminateReason.THETA),
                              TerminateReason.THETA, out)
                self._progress(t, out)
            case CheckpointReason.END | CheckpointReason.PLATEAU:
                tr.plateaued = reason is CheckpointReason.PLATEAU
                if not noticed:
                    self._act(tr, Terminate(trial_id=tr.trial_id, instance_id=instance, reason=TerminateReason.END),
                              TerminateReason.END, out)
                self._progress(t, out)
            case _:
                assert_never(reason)

    def _launch(self, tr: TrialRecord, t: float, out: list[Action], avoid: Container[Any] = ()) -> None:
        """Launch ``tr`` where the chooser says, or back off ``launch_retry_s`` when no market is available or the
        choice is one of ``avoid`` (the markets excluded after capacity refusals, on a failover: a chooser that
        answers one of them again would otherwise be asked again at once, forever)."""
        try:
            if self._plans_horizon:  # the refund-aware objective prices the horizon
                choice = self.chooser.choose(tr.trial_id, t, steps_left=tr.target_steps - tr.checkpoint_step,
                                             resume_step=tr.checkpoint_step, heading=self._heading(tr))
            else:
                choice = self.chooser.choose(tr.trial_id, t)
        except NoMarketAvailable:
            choice = None
        if choice is None or choice.market in avoid:
            out.append(ScheduleWakeUp(trial_id=tr.trial_id, at_s=t + self.config.launch_retry_s))
            return
        tr.launch_market = choice.market
        launch = Launch(
            trial_id=tr.trial_id,
            market=choice.market,
            max_price_usd_per_hour=float(choice.max_price_usd_per_hour),
            resume_step=tr.checkpoint_step,
            target_steps=tr.target_steps,
            explanation=_explain(getattr(choice, "explanation", None)),
        )
        self._act(tr, launch, None, out)

    def _heading(self, tr: TrialRecord) -> int:
        """Trials, ``tr`` included, still on their way to ``tr``'s next stop (the same ``target_steps``): the job
        moves on when the last of them arrives, so each one's share of the job's value of time is 1 / this (design
        R11). A trial paused at the stop (and not yet kept) has arrived."""
        return sum(1 for o in self.trials.values()
                   if o.target_steps == tr.target_steps and not o.state.is_terminal()
                   and o.state is not TrialState.PAUSED_AT_THETA) or 1

    def _excluded(self, t: float) -> dict:
        """The markets the chooser's exclusions leave out at ``t`` (capacity refusals, :class:`CapacityRefused`, design
        AWS3, E12); empty for a chooser that is not a LearningChooser or keeps no exclusions. A refused trial whose market is among them fails over
        at once, as SkyPilot does to the next zone: its next choice is another market. Each immediate retry needs
        a market that is not excluded, and a capacity refusal excludes it, so the retries end (at worst in the
        back-off)."""
        return {} if self._learner is None else self._learner.excluded(t)

    # -- concurrency --------------------------------------------------------------------------------
    def _admit(self, trials: Sequence[TrialRecord], t: float, out: list[Action]) -> None:
        """Launch ``trials`` now, in order; under ``config.max_concurrent_trials`` queue them and launch as many as
        there are free slots (design D14)."""
        if self.config.max_concurrent_trials is None:
            for tr in trials:
                self._launch(tr, t, out)
            return
        self.waiting.extend(tr.trial_id for tr in trials)
        self._fill(t, out)

    def _fill(self, t: float, out: list[Action]) -> None:
        """Launch waiting trials, first queued first, while fewer than ``config.max_concurrent_trials`` trials hold
        a slot: a trial holds one from its admission until it ends, is stopped or pauses at a barrier (a paused trial
        has no instance), relaunches after a revocation or a hop included."""
        limit = self.config.max_concurrent_trials
        if limit is None or not self.waiting:
            return
        queued = set(self.waiting)
        holding = sum(1 for tid, tr in self.trials.items() if tid not in queued and not tr.state.is_terminal()
                      and tr.state is not TrialState.PAUSED_AT_THETA)
        while self.waiting and holding < limit:
            self._launch(self.trials[self.waiting.pop(0)], t, out)
            holding += 1

    # -- barrier and the end ------------------------------------------------------------------------
    def _progress(self, t: float, out: list[Action]) -> None:
        self._fill(t, out)  # a trial ended, stopped or paused: its slot goes to the next waiting trial
        while not self.selection_done:  # a barrier whose kept trials had all ended is passed at once
            if not all(tr.state is TrialState.PAUSED_AT_THETA or tr.state.is_terminal()
                       for tr in self.trials.values()):
                return
            self._select(t, out)
        if all(tr.state.is_terminal() for tr in self.trials.values()) and not self.done:
            self._finish(t, out)

    def _ranking_loss(self, tr: TrialRecord, at_theta: bool = True) -> float:
        """A trial's loss for a barrier's ranking: a paused trial's predicted final value, by the predictor at θ's
        barrier (``at_theta``) and by ``rung_predictor`` at a rung before it; else (or without a rung predictor)
        the last observed value. A predictor that fails or answers a non-finite value gives the last value."""
        predictor = self.predictor if at_theta else self.rung_predictor
        if predictor is None or tr.state not in (TrialState.PAUSED_AT_THETA, TrialState.KEPT):
            return float(tr.losses[-1])
        steps = np.asarray(tr.steps, dtype=float)
        losses = np.asarray(tr.losses, dtype=float)
        kw = ({"config": self.configs.get(tr.trial_id)}
              if isinstance(predictor, ConfigAwarePredictor) and predictor.uses_config else {})
        try:
            prediction = self._predict(predictor, steps, losses, kw)
            loss = float(prediction.value)
        except (EarlyCurveError, ValueError, FloatingPointError):
            prediction, loss = None, float(losses[-1])  # fall back: last observed
        if not np.isfinite(loss):
            loss = float(losses[-1])
        if at_theta:
            tr.prediction, tr.predicted_loss = prediction, loss
        return loss

    def _predict(self, predictor: Any, steps: np.ndarray, losses: np.ndarray, kw: Mapping[str, Any]) -> Prediction:
        """``predictor``'s final value for one curve, or its recalled answer; every answer is kept for
        :meth:`take_predictions`.

        Raises
        ------
        EarlyCurveError, ValueError, FloatingPointError
            What the predictor raised (a recalled error is a ValueError with the journaled message).
        """
        key = prediction_key(steps, losses, self.config.max_steps, kw)
        rec = None if self._recall is None else self._recall(len(self._answers) - self._recall_base, key)
        if rec is not None:
            if "error" in rec:
                self._answers.append(PredictorAnswer(key, error=str(rec["error"]), recalled=rec))
                raise ValueError(rec["error"])  # every predictor error is treated alike
            prediction = Prediction(**{k: v for k, v in rec["p"].items() if k != "type"})
            self._answers.append(PredictorAnswer(key, prediction=prediction, recalled=rec))
            return prediction
        try:
            prediction = predictor.predict_final(steps, losses, self.config.max_steps, **kw)
        except (EarlyCurveError, ValueError, FloatingPointError) as exc:  # what _ranking_loss catches
            self._answers.append(PredictorAnswer(key, error=f"{type(exc).__name__}: {exc}"))
            raise
        self._answers.append(PredictorAnswer(key, prediction=prediction))
        return prediction

    def _select(self, t: float, out: list[Action]) -> None:
        """Algorithm 1, lines 48–52: rank paused and plateau-finished trials, continue the top-k; at a rung
        before θ, the rung's ``keep`` by the last observed value continue to the next barrier."""
        barriers = self.config.barriers
        _, keep = barriers[self.barrier]
        self.barrier += 1
        at_theta = self.barrier == len(barriers)
        ranked = sorted(
            ((self._ranking_loss(tr, at_theta), tr.trial_id) for tr in self.trials.values()
             if tr.losses and tr.state in (TrialState.PAUSED_AT_THETA, TrialState.FINISHED)),
            key=_rank_key,
        )
        kept = tuple(tid for _, tid in ranked[:keep])
        if at_theta:
            self.selection_done, self.selected = True, kept
        target = self.config.max_steps if at_theta else barriers[self.barrier][0]
        paused = [tr for tr in self.trials.values() if tr.state is TrialState.PAUSED_AT_THETA]
        for tr in paused:  # every kept trial heads to the next stop before the first launches (_heading)
            if tr.trial_id in kept:
                tr.target_steps = target
                self._keep(tr)
        if self.config.max_concurrent_trials is not None:  # the kept trials wait for slots, in trial order (D14)
            for tr in paused:
                if tr.trial_id not in kept:
                    self._act(tr, Stop(trial_id=tr.trial_id, reason=StopReason.NOT_TOP_K), StopReason.NOT_TOP_K, out)
            self._admit([tr for tr in paused if tr.trial_id in kept], t, out)
            return
        for tr in paused:
            if tr.trial_id in kept:
                self._launch(tr, t, out)
            else:
                self._act(tr, Stop(trial_id=tr.trial_id, reason=StopReason.NOT_TOP_K), StopReason.NOT_TOP_K, out)

    def _keep(self, tr: TrialRecord) -> None:
        """The barrier keeps ``tr`` (paused): it waits, KEPT, for its launch to the next stop."""
        tr.state = next_state(tr.trial_id, tr.state, Kept)  # raises InvalidAction

    def _finish(self, t: float, out: list[Action]) -> None:
        """Algorithm 1, line 53: the best of the selected trials by final observed metric."""
        pool = self.selected if self.config.theta < 1 else tuple(self.trials)
        finals = sorted(
            ((self.trials[tid].losses[-1], tid) for tid in pool
             if self.trials[tid].state is TrialState.FINISHED and self.trials[tid].losses),
            key=_rank_key,
        )
        self.top_k = tuple(tid for _, tid in finals[: self.config.top_k])
        self.finished_s = t
        out.append(ExperimentFinished(
            time_s=t, top_k=self.top_k, metrics={tid: self.to_user(loss) for loss, tid in finals[: self.config.top_k]},
        ))


def _rank_key(item: tuple[float, str]) -> tuple[bool, float, str]:
    """Sort key of ``(loss, trial_id)``: lowest loss first, a NaN loss (a diverged trial) last.

    A bare tuple sort puts NaN anywhere (every comparison with NaN is False), so a diverged trial
    could be kept in the top-k.
    """
    loss, trial_id = item
    nan = math.isnan(loss)
    return (nan, 0.0 if nan else loss, trial_id)
