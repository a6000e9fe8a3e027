"""The simulator backend: a discrete-event loop (heapq) on a virtual clock over a spot price replay.

Effects and their timing ([I] decisions on the paper's simulation, §IV; documented in ``docs/design/decisions.md``,
"Orchestrator"):

- **Launch** at t in market m with max price b: the injected revocation model (legacy bid rule or
  modern hazard model, ``spotmarket``) says whether it is fulfilled and when the notice and the
  termination come. Training starts at ``t + boot_s + restore`` (restore = checkpoint size /
  bandwidth, only when resuming); ``HourElapsed`` fires 3600 s after t (the billing hour).
- **Progress**: one step takes ``speed.seconds_per_step(workload, vCPUs, ECU)`` seconds, times an
  optional log-normal factor with coefficient of variation ``step_time_cov`` (paper: COV < 0.1).
  Metrics come from :mod:`spottune.backends.sim._curves` (a real trainable or a recorded curve).
- **Checkpoint**: takes ``checkpoint_overhead_s + size / bandwidth(vCPUs)`` seconds (134.22 MB/s on 16
  cores, 62.83 MB/s on 1, :mod:`spottune.speed`). If the instance is terminated first, the checkpoint
  is lost: the trial resumes from its last good checkpoint and the lost steps go to the ledger.
- **Billing**: ``spotmarket.Billing`` per run at the market price; provider ends within the first
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

from spottune.backends._base import Progress, RunRecord
from spottune.backends._replay import Instance, ReplayDriver
from spottune.backends.sim._curves import TrialFailure
from spottune.errors import BackendError
from spottune.orchestrator import Checkpoint, EndReason, Launch, Orchestrator, Terminate
from spottune.speed import DEFAULT_BOOT_S, transfer_seconds


@dataclass(slots=True, kw_only=True)
class _Instance(Instance):
    training: bool = False
    token: int = 0  # bumped to cancel a scheduled step
    checkpoint: Any = None  # the pending Checkpoint action


@dataclass(slots=True)
class SimSettings:
    """Knobs of the simulator (all times in seconds).

    Parameters
    ----------
    boot_s : float, default=DEFAULT_BOOT_S (120.0)
        Launch-to-training latency before restore, paid at every launch by every policy (D11, revised:
        :data:`spottune.speed.DEFAULT_BOOT_S`, sourced there); 0 only in the faithful mode.
    checkpoint_overhead_s : float, default=1.0
        Fixed cost of one checkpoint or restore (request latency, serialisation) [I].
    step_time_cov : float, default=0.05
        Coefficient of variation of the step time (paper: < 0.1); 0 = exact.
    checkpoint_size_mb : float or None
        Overrides the workload's ``checkpoint_size_mb``.
    seed : int, default=0
    """

    boot_s: float = DEFAULT_BOOT_S
    checkpoint_overhead_s: float = 1.0
    step_time_cov: float = 0.05
    checkpoint_size_mb: float | None = None
    seed: int = 0


class SimBackend(ReplayDriver):
    """Replay a spot market on a virtual clock and drive the orchestrator through it.

    Parameters
    ----------
    orchestrator, history, revocation_model, billing, instance_facts, start_s, progress
        As :class:`~spottune.backends._replay.ReplayDriver`.
    curves : TrainableCurves or RecordedCurves
        Where each step's metrics come from.
    settings : SimSettings, optional
    """

    name = "sim"

    def __init__(self, orchestrator: Orchestrator, history: Any, revocation_model: Any, billing: Any, curves: Any,
                 instance_facts: Callable[[str], tuple[int, float | None]], start_s: float,
                 settings: SimSettings | None = None, progress: Progress | None = None):
        super().__init__(orchestrator, history, revocation_model, billing, instance_facts, start_s, progress)
        self.curves = curves
        self.settings = settings or SimSettings()
        self.now_s = float(start_s)
        self.ref_sps = curves.attribute("reference_seconds_per_step", 10.0)
        # optional per-trial speed (recorded studies: each configuration's own recorded seconds per step)
        self._ref_of: Callable[[str], float] | None = getattr(curves, "reference_seconds_per_step_of", None)
        size = self.settings.checkpoint_size_mb
        self.size_mb = curves.attribute("checkpoint_size_mb", 1.0) if size is None else float(size)
        self._rng = np.random.default_rng(self.settings.seed)
        self._heap: list[tuple[float, int, Callable[..., None], tuple]] = []
        self._seq = 0
        self.record.meta.update(boot_s=self.settings.boot_s, seed=self.settings.seed,
                                checkpoint_size_mb=self.size_mb, reference_seconds_per_step=self.ref_sps,
                                step_time_cov=self.settings.step_time_cov)

    # -- the loop -----------------------------------------------------------------------------------
    def _at(self, t: float, fn: Callable[..., None], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (max(t, self.now_s), self._seq, fn, args))

    def run(self) -> RunRecord:
        self._start()
        end_s = float(self.history.end_s)
        while self._heap and not self.stopped:
            t, _, fn, args = heapq.heappop(self._heap)
            if t > end_s and not self.orchestrator.done:
                raise BackendError(f"the price history ends at {end_s:.0f} s before the experiment finished "
                                   f"(simulated {(end_s - self.record.start_s) / 3600:.1f} h); start earlier or use fewer steps")
            if t > end_s:
                break
            self.now_s = t
            fn(*args)
        if self.stopped:  # the budget ran short (record.meta["budget_exhausted"])
            return self.record
        if not self.orchestrator.done:
            raise BackendError("the simulation ran out of events before the experiment finished (a driver bug)")
        self._close_leftovers(end_s)  # only revoked-and-saved instances can be left
        return self.record

    def resume(self, records: list[dict[str, Any]]) -> None:
        """Continue a killed run: re-execute it from its start against its journal (decision CS3).

        The simulator has no side effects outside this process and is deterministic for a seed, so the
        exact way back is to run it again from ``ExperimentStarted`` while :attr:`journal` (opened with
        ``replay=records``) checks every event, action, intent and billed run against the journaled one,
        then to go on appending. Training is not repeated: the journaled ``MetricReported`` metrics are
        preloaded into the curves (:meth:`TrainableCurves.preload`); missed events need no delivery (the
        virtual clock stood still while the process was down). The resume is journaled (a ``resume`` line,
        written once the journaled records are used up) and listed in ``record.meta["resumes"]`` after the
        journal's earlier ones.

        Parameters
        ----------
        records : list of dict
            The killed run's journal (:func:`spottune.journal.read_journal`); the driver's :attr:`journal`
            replays it.
        """
        times = [float(r["e"]["time_s"]) for r in records if r.get("k") == "event"]
        self.note_resume({"at_s": max(times, default=self.record.start_s), "records": len(records)})
        preload = getattr(self.curves, "preload", None)
        if preload is None:
            return
        curves: dict[str, dict[int, dict[str, float]]] = {}
        for rec in records:
            e = rec.get("e") if rec.get("k") == "event" else None
            if e is not None and e.get("type") == "MetricReported":
                curves.setdefault(e["trial_id"], {})[int(e["step"])] = e["metrics"]
        for trial_id, by_step in curves.items():
            n = 0
            while n + 1 in by_step:
                n += 1
            preload(trial_id, [by_step[k] for k in range(1, n + 1)])

    def _event_time(self, event: Any) -> float:
        return self.now_s

    def _post(self, event: Any) -> None:
        self._at(self.now_s, self._deliver, event)

    def _timer(self, t_s: float, kind: str, inst: _Instance) -> None:
        self._at(t_s, {"notice": self._notice, "terminate": self._terminated, "hour": self._hour,
                              "budget": self._budget_tick}[kind], inst)

    def _wake_at(self, trial_id: str, at_s: float) -> None:
        self._at(at_s, self._wake, trial_id, at_s)

    # -- effects ------------------------------------------------------------------------------------
    def _launch(self, action: Launch) -> None:
        t = self.now_s
        if action.resume_step != self._checkpoint_step[action.trial_id]:
            raise BackendError(f"trial {action.trial_id}: Launch resumes at step {action.resume_step}, but the "
                               f"store's last checkpoint is step {self._checkpoint_step[action.trial_id]}")
        ref_sps = self._ref_of(action.trial_id) if self._ref_of else self.ref_sps
        inst = self._new_instance(action, t, ref_sps, _Instance)
        if inst is None:
            return
        ready = t + self.settings.boot_s
        if action.resume_step > 0:
            ready += transfer_seconds(self.size_mb, inst.vcpus, self.settings.checkpoint_overhead_s)
        if inst.termination_s <= ready:  # died while booting: no trial ever ran on it
            self._at(inst.termination_s, self._died_booting, inst)
            return
        self._at(ready, self._ready, inst)
        self._schedule_timers(inst, ready)

    def _terminate(self, action: Terminate) -> None:
        inst = self._instances[action.instance_id]
        self._end(inst, self.now_s, "user", str(action.reason))
        self._post(inst.segment_ended(self.now_s, EndReason.USER))

    def _died_booting(self, inst: _Instance) -> None:
        self._end(inst, self.now_s, "provider", inst.reason)
        self._deliver(inst.died_booting(self.now_s))

    def _ready(self, inst: _Instance) -> None:
        inst.training = True
        self._deliver(inst.trial_launched(self.now_s))
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
            self._deliver(inst.segment_failed(self.now_s, str(exc)))
            return
        inst.step += 1
        inst.executed += 1
        self._deliver(inst.metric_reported(self.now_s, metrics))
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
        self._deliver(inst.checkpoint_saved(self.now_s, action.reason, step))

    def _notice(self, inst: _Instance) -> None:
        if inst.alive:
            self._deliver(inst.revocation_notice(self.now_s))

    def _hour(self, inst: _Instance) -> None:
        if inst.alive:
            self._deliver(inst.hour_elapsed(self.now_s))

    def _terminated(self, inst: _Instance) -> None:
        if not inst.alive:
            return
        self._end(inst, self.now_s, "provider", inst.reason)
        self._deliver(inst.segment_ended(self.now_s, EndReason.PROVIDER))
