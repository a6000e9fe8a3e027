"""The simulator backend: a discrete-event loop (heapq) on a virtual clock over a spot price replay.

Effects and their timing ([I] decisions, spec §1.9; documented in ``docs/design.md``, "Orchestrator"):

- **Launch** at t in market m with max price b: the injected revocation model (legacy bid rule or
  modern hazard model, ``spottune.market``) says whether it is fulfilled and when the notice and the
  termination come. Training starts at ``t + boot_s + restore`` (restore = checkpoint size /
  bandwidth, only when resuming); ``HourElapsed`` fires 3600 s after t (the billing hour).
- **Progress**: one step takes ``speed.seconds_per_step(workload, vCPUs, ECU)`` seconds, times an
  optional log-normal factor with coefficient of variation ``step_time_cov`` (paper: COV < 0.1).
  Metrics come from :mod:`spottune.backends._curves` (a real trainable or a recorded curve).
- **Checkpoint**: takes ``checkpoint_overhead_s + size / bandwidth(vCPUs)`` seconds (134.22 MB/s on 16
  cores, 62.83 MB/s on 1, :mod:`spottune.speed`). If the instance is terminated first, the checkpoint
  is lost: the trial resumes from its last good checkpoint and the lost steps go to the ledger.
- **Billing**: ``spottune.market.Billing`` per run at the market price; provider ends within the first
  hour are refunded.
- **Determinism**: the only randomness is one ``numpy.random.Generator(seed)`` drawn in event order
  (step-time noise); the revocation model keys its own draws on instance ids. Same seed, same run.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from spottune.backends._base import Driver, Progress, RunRecord, log_record
from spottune.backends._curves import TrialFailure
from spottune.errors import BackendError
from spottune.orchestrator import (
    Action,
    Checkpoint,
    CheckpointSaved,
    EndReason,
    ExperimentFinished,
    ExperimentStarted,
    HourElapsed,
    Launch,
    LaunchFailed,
    MetricReported,
    Orchestrator,
    RevocationNotice,
    ScheduleWakeUp,
    SegmentEnded,
    SegmentFailed,
    Stop,
    Terminate,
    TrialLaunched,
    WakeUp,
)
from spottune.speed import seconds_per_step, transfer_seconds

HOUR_S = 3600.0


@dataclass(slots=True)
class _Instance:
    instance_id: str
    trial_id: str
    market: Any
    max_price: float
    started_s: float
    notice_s: float
    termination_s: float
    seconds_per_step: float
    vcpus: int
    step: int = 0  # the trial's step count on this instance
    saved_step: int = 0  # last good checkpoint of the trial when this instance started / saved
    executed: int = 0
    alive: bool = True
    training: bool = False
    token: int = 0  # bumped to cancel a scheduled step
    checkpoint: Any = None  # the pending Checkpoint action
    reason: str = ""


@dataclass(slots=True)
class SimSettings:
    """Knobs of the simulator (all times in seconds).

    Parameters
    ----------
    boot_s : float, default=0.0
        Boot latency before restore (D11: 0 in the faithful mode; 60–120 s is realistic).
    checkpoint_overhead_s : float, default=1.0
        Fixed cost of one checkpoint or restore (request latency, serialisation) [I].
    step_time_cov : float, default=0.05
        Coefficient of variation of the step time (paper: < 0.1); 0 = exact.
    checkpoint_size_mb : float or None
        Overrides the workload's ``checkpoint_size_mb``.
    seed : int, default=0
    """

    boot_s: float = 0.0
    checkpoint_overhead_s: float = 1.0
    step_time_cov: float = 0.05
    checkpoint_size_mb: float | None = None
    seed: int = 0


class SimBackend(Driver):
    """Replay a spot market on a virtual clock and drive the orchestrator through it.

    Parameters
    ----------
    orchestrator : Orchestrator
    history : revpred.prices.PriceHistory
        Prices (USD per instance-hour) of every market the provisioner may choose.
    revocation_model : spottune.market.RevocationModel
        ``revocation(market, launch_s, instance_id=..., max_price_usd_per_hour=...) -> Revocation``.
    billing : spottune.market.Billing
    curves : TrainableCurves or RecordedCurves
    instance_facts : callable instance_type -> (vcpus, ecu or None)
        E.g. from ``provisioner.InstanceCatalog``.
    start_s : float
        Experiment start, seconds since the epoch (UTC).
    settings : SimSettings, optional
    progress : callable (now_s, orchestrator, usd) -> None, optional
        Called after every delivered event (for a progress bar).
    """

    def __init__(self, orchestrator: Orchestrator, history: Any, revocation_model: Any, billing: Any, curves: Any,
                 instance_facts: Callable[[str], tuple[int, float | None]], start_s: float,
                 settings: SimSettings | None = None, progress: Progress | None = None):
        self.orchestrator = orchestrator
        self.history = history
        self.revocation_model = revocation_model
        self.billing = billing
        self.curves = curves
        self.instance_facts = instance_facts
        self.settings = settings or SimSettings()
        self.progress = progress
        self.now_s = float(start_s)
        self.record = RunRecord(start_s=float(start_s))
        self.ref_sps = curves.attribute("reference_seconds_per_step", 10.0)
        # optional per-trial speed (recorded studies: each configuration's own recorded seconds per step)
        self._ref_of: Callable[[str], float] | None = getattr(curves, "reference_seconds_per_step_of", None)
        size = self.settings.checkpoint_size_mb
        self.size_mb = curves.attribute("checkpoint_size_mb", 1.0) if size is None else float(size)
        self.usd = 0.0
        self._rng = np.random.default_rng(self.settings.seed)
        self._heap: list[tuple[float, int, Callable[..., None], tuple]] = []
        self._seq = 0
        self._instances: dict[str, _Instance] = {}
        self._checkpoint_step: dict[str, int] = {t: 0 for t in orchestrator.trials}
        self.record.meta.update(backend="sim", boot_s=self.settings.boot_s, seed=self.settings.seed,
                                checkpoint_size_mb=self.size_mb, reference_seconds_per_step=self.ref_sps,
                                step_time_cov=self.settings.step_time_cov)

    # -- the loop -----------------------------------------------------------------------------------
    def _at(self, t: float, fn: Callable[..., None], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (max(t, self.now_s), self._seq, fn, args))

    def run(self) -> RunRecord:
        self._deliver(ExperimentStarted(time_s=self.now_s))
        end_s = float(self.history.end_s)
        while self._heap:
            t, _, fn, args = heapq.heappop(self._heap)
            if t > end_s and not self.orchestrator.done:
                raise BackendError(f"the price history ends at {end_s:.0f} s before the experiment finished "
                                   f"(simulated {(end_s - self.record.start_s) / 3600:.1f} h); start earlier or use fewer steps")
            if t > end_s:
                break
            self.now_s = t
            fn(*args)
        if not self.orchestrator.done:
            raise BackendError("the simulation ran out of events before the experiment finished (a driver bug)")
        for inst in list(self._instances.values()):  # only revoked-and-saved instances can be left
            if inst.alive:
                self._end(inst, min(inst.termination_s, end_s), "provider", inst.reason or "price")
        self.record.meta["usd"] = self.usd
        return self.record

    def _deliver(self, event: Any) -> None:
        self.record.log.append(log_record("event", event, self.now_s))
        for action in self.orchestrator.handle(event):
            self.record.log.append(log_record("action", action, self.now_s))
            self._apply(action)
        if self.progress is not None:
            self.progress(self.now_s, self.orchestrator, self.usd)

    def _apply(self, action: Action) -> None:
        match action:
            case Launch():
                self._launch(action)
            case Checkpoint():
                self._checkpoint(action)
            case Terminate():
                inst = self._instances[action.instance_id]
                self._end(inst, self.now_s, "user", str(action.reason))
                self._at(self.now_s, self._deliver, SegmentEnded(time_s=self.now_s, trial_id=inst.trial_id,
                                                                 instance_id=inst.instance_id, steps_done=inst.step,
                                                                 reason=EndReason.USER))
            case ScheduleWakeUp():
                self._at(action.at_s, self._wake, action.trial_id, action.at_s)
            case Stop():
                pass  # nothing runs: the record is in the log
            case ExperimentFinished():
                self.record.end_s = self.now_s
            case _:
                raise BackendError(f"sim backend cannot carry out {type(action).__name__}")

    # -- effects ------------------------------------------------------------------------------------
    def _launch(self, action: Launch) -> None:
        t = self.now_s
        iid = f"i-{len(self._instances) + 1:05d}"
        if action.resume_step != self._checkpoint_step[action.trial_id]:
            raise BackendError(f"trial {action.trial_id}: Launch resumes at step {action.resume_step}, but the "
                               f"store's last checkpoint is step {self._checkpoint_step[action.trial_id]}")
        rev = self.revocation_model.revocation(action.market, t, instance_id=iid,
                                               max_price_usd_per_hour=action.max_price_usd_per_hour)
        if not rev.fulfilled:
            self._at(t, self._deliver, LaunchFailed(time_s=t, trial_id=action.trial_id, error=str(rev.cause)))
            return
        vcpus, ecu = self.instance_facts(action.market.instance_type)
        inst = _Instance(iid, action.trial_id, action.market, action.max_price_usd_per_hour, t, float(rev.notice_s),
                         float(rev.termination_s),
                         seconds_per_step(self._ref_of(action.trial_id) if self._ref_of else self.ref_sps, vcpus, ecu),
                         vcpus,
                         step=action.resume_step, saved_step=action.resume_step, reason=str(rev.cause))
        self._instances[iid] = inst
        ready = t + self.settings.boot_s
        if action.resume_step > 0:
            ready += transfer_seconds(self.size_mb, vcpus, self.settings.checkpoint_overhead_s)
        if inst.termination_s <= ready:  # died while booting: no trial ever ran on it
            self._at(inst.termination_s, self._died_booting, inst)
            return
        self._at(ready, self._ready, inst)
        if math.isfinite(inst.notice_s):
            self._at(max(inst.notice_s, ready), self._notice, inst)
        if math.isfinite(inst.termination_s):
            self._at(inst.termination_s, self._terminated, inst)
        if t + HOUR_S < inst.termination_s:
            self._at(max(t + HOUR_S, ready), self._hour, inst)

    def _died_booting(self, inst: _Instance) -> None:
        self._end(inst, self.now_s, "provider", inst.reason)
        self._deliver(LaunchFailed(time_s=self.now_s, trial_id=inst.trial_id, error="terminated while booting"))

    def _ready(self, inst: _Instance) -> None:
        inst.training = True
        self._deliver(TrialLaunched(time_s=self.now_s, trial_id=inst.trial_id, instance_id=inst.instance_id,
                                    market=inst.market, started_s=inst.started_s))
        self._schedule_step(inst)

    def _schedule_step(self, inst: _Instance) -> None:
        if not (inst.alive and inst.training):
            return
        dt = inst.seconds_per_step
        cov = self.settings.step_time_cov
        if cov > 0:
            sigma = math.sqrt(math.log1p(cov * cov))
            dt *= float(self._rng.lognormal(-sigma * sigma / 2, sigma))
        inst.token += 1
        self._at(self.now_s + dt, self._step_done, inst, inst.token)

    def _step_done(self, inst: _Instance, token: int) -> None:
        if not (inst.alive and inst.training and token == inst.token):
            return  # cancelled by a checkpoint, a failure or the end of the instance
        try:
            metrics = self.curves.metrics(inst.trial_id, inst.step + 1)
        except TrialFailure as exc:
            inst.training = False
            self._deliver(SegmentFailed(time_s=self.now_s, trial_id=inst.trial_id, instance_id=inst.instance_id,
                                        error=str(exc)))
            return
        inst.step += 1
        inst.executed += 1
        self._deliver(MetricReported(time_s=self.now_s, trial_id=inst.trial_id, instance_id=inst.instance_id,
                                     step=inst.step, metrics=metrics))
        self._schedule_step(inst)

    def _checkpoint(self, action: Checkpoint) -> None:
        inst = self._instances[action.instance_id]
        inst.training = False
        inst.token += 1
        inst.checkpoint = action
        done = self.now_s + transfer_seconds(self.size_mb, inst.vcpus, self.settings.checkpoint_overhead_s)
        if done < inst.termination_s:
            self._at(done, self._saved, inst, action, inst.step)
        # else: the termination comes first and reports SegmentEnded(provider); the checkpoint is lost

    def _saved(self, inst: _Instance, action: Checkpoint, step: int) -> None:
        if not inst.alive:
            return
        inst.saved_step = step
        inst.checkpoint = None
        self._checkpoint_step[inst.trial_id] = step
        self._deliver(CheckpointSaved(time_s=self.now_s, trial_id=inst.trial_id, instance_id=inst.instance_id,
                                      reason=action.reason, step=step))

    def _notice(self, inst: _Instance) -> None:
        if inst.alive:
            self._deliver(RevocationNotice(time_s=self.now_s, trial_id=inst.trial_id, instance_id=inst.instance_id,
                                           deadline_s=inst.termination_s))

    def _hour(self, inst: _Instance) -> None:
        if inst.alive:
            self._deliver(HourElapsed(time_s=self.now_s, trial_id=inst.trial_id, instance_id=inst.instance_id))

    def _terminated(self, inst: _Instance) -> None:
        if not inst.alive:
            return
        self._end(inst, self.now_s, "provider", inst.reason)
        self._deliver(SegmentEnded(time_s=self.now_s, trial_id=inst.trial_id, instance_id=inst.instance_id,
                                   steps_done=inst.step, reason=EndReason.PROVIDER))

    def _wake(self, trial_id: str, at_s: float) -> None:
        self._deliver(WakeUp(time_s=at_s, trial_id=trial_id))

    def _end(self, inst: _Instance, t: float, ended_by: str, reason: str) -> None:
        """The instance is gone: bill it, count its steps (lost = run but never checkpointed)."""
        inst.alive = inst.training = False
        inst.token += 1
        row = self.billing.bill(self.history[inst.market], inst.started_s, t, ended_by, instance_id=inst.instance_id,
                                reason=reason, trial_id=inst.trial_id, max_price_usd_per_hour=inst.max_price)
        self.record.ledger.append(row)
        self.usd += row.charged_usd
        lost = max(0, inst.step - self._checkpoint_step[inst.trial_id]) if inst.step > inst.saved_step else 0
        self.record.instance_steps[inst.instance_id] = (inst.executed, lost)
