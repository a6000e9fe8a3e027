"""An elastic schedule executed with the orchestrator's trial life cycle: the SEER-family policies of ``spottune
simulate`` (F-S5) and the plan ``spottune run --deadline-mode plan|seer`` executes (DB14, DB15).

:class:`BracketOrchestrator` runs an :class:`spottune.planning.ElasticSchedule` (SEER, E-Hyperband, E-Grid)
with the orchestrator's trial life cycle, so it is replayed by the same sim backend as every policy: the
same prices, revocations, billing, boot latency and budget cap. A round of ``d`` seconds on an instance
type becomes a step target: the trial trains ``max(1, floor((d - overhead_s) / seconds_per_step))`` steps
in it (each round is one launch: boot, restore, train, checkpoint; DB7). A bracket's round ends when all
its trials have reached their target (a synchronous barrier: a revocation delays the round, as on a
cluster that re-acquires the lost node); then each bracket keeps its best ``live[k+1]`` trials, ranked by
the final-metric predictor (:class:`earlycurve.LastValue`, the current value, for the published
algorithms; :class:`earlycurve.EarlyCurve`, the predicted final value, for ``seer-predictive``, F-S2).
With ``migrate`` (SEER) all brackets share the barrier and the survivors are re-sorted by descending loss
and dealt to the brackets in order. The answer is the best trial of the last rounds by its last observed
value (SEER's Algorithm 1, line 13).

:class:`TypeChooser` places every trial on the instance type of its current bracket, in that type's
cheapest zone at launch (:class:`provisioner.FixedTypeChooser`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from spottune.errors import ConfigError
from spottune.orchestrator import Orchestrator, OrchestratorConfig, Stop, StopReason, TrialState
from spottune.orchestrator._policy import _rank_key
from spottune.planning._elastic import RESERVE_Z, reserve_steps  # noqa: F401  (re-exported: DB13)

__all__ = ["BracketOrchestrator", "TypeChooser", "bracket_orchestrator"]

#: The SEER family's max price: current price + this, USD/hour (DB9). The budget cap commits one hour of
#: every live instance at its max price, so the AWS default (on-demand) or D1's delta (up to 0.2 USD/h)
#: stops a schedule that launches all its trials at once at its first launches.
ELASTIC_DELTA_USD_PER_HOUR = 0.01
#: Seconds of a launch not spent training, besides the boot: restore and checkpoint (upper bound) [I].
RESTORE_CHECKPOINT_S = 60.0
#: [I] Back-off after a refused launch, seconds. The orchestrator's default (60 s) makes modern-mode runs,
#: whose capacity outages refuse launches for tens of minutes, spend most of their CPU on retries that
#: ask the predictor again; 300 s changes JCT by at most 5 minutes per refusal.
LAUNCH_RETRY_S = 300.0


class TypeChooser:
    """A market chooser that puts each trial on the instance type assigned to it (cheapest zone now).

    Parameters
    ----------
    instance_types : iterable of str
        The types brackets use.
    history, catalog, pool, rng, max_price_rule
        As :class:`provisioner.FixedTypeChooser` (one per type, sharing ``rng``).
    """

    plans_horizon = False
    policy = "bracket-type"

    def __init__(self, instance_types: Any, history: Any, catalog: Any, pool: Any, rng: Any, max_price_rule: Any):
        from provisioner import FixedTypeChooser

        self._by_type = {t: FixedTypeChooser(t, history, catalog, pool, rng, max_price_rule=max_price_rule)
                         for t in sorted(set(instance_types))}
        self.assigned: dict[Hashable, str] = {}

    def assign(self, trial_id: Hashable, instance_type: str) -> None:
        """Run ``trial_id`` on ``instance_type`` from its next launch on.

        Parameters
        ----------
        trial_id : hashable
            The trial.
        instance_type : str
            One of the schedule's types.

        Raises
        ------
        ConfigError
            If ``instance_type`` is not one of the schedule's.
        """
        if instance_type not in self._by_type:
            raise ConfigError(f"instance type {instance_type} is not one of the schedule's {sorted(self._by_type)}")
        self.assigned[trial_id] = instance_type

    def choose(self, trial_id: Hashable, now_s: float, **kw: Any) -> Any:
        """The cheapest zone of the trial's type now (``NoMarketAvailable`` if none can launch).

        Parameters
        ----------
        trial_id : hashable
            An assigned trial (:meth:`assign`).
        now_s : float
            Decision time, seconds since the epoch (UTC).
        **kw
            Ignored (the orchestrator's plan keywords).

        Returns
        -------
        provisioner.Choice
            The market and its max price, USD/hour.
        """
        return self._by_type[self.assigned[trial_id]].choose(trial_id, now_s)

    def choose_many(self, trial_ids: Sequence[Hashable], now_s: float, *args: Any, **kw: Any) -> list[Any]:
        """:meth:`choose` for several trials at one time.

        Parameters
        ----------
        trial_ids : sequence of hashable
            Assigned trials.
        now_s : float
            Decision time, seconds since the epoch (UTC).
        *args, **kw
            Ignored.

        Returns
        -------
        list of provisioner.Choice
            In the order of ``trial_ids``.
        """
        return [self.choose(t, now_s) for t in trial_ids]

    def record_segment(self, trial_id: Hashable, instance_type: str, seconds: float, steps: int) -> float:
        """Fold a measured segment into the speed model of the type's chooser.

        Parameters
        ----------
        trial_id : hashable
            The trial.
        instance_type : str
            The type it ran on; a type outside the schedule is ignored.
        seconds : float
            Training seconds of the segment.
        steps : int
            Steps done in it.

        Returns
        -------
        float
            The type's new seconds per step, or 0.0 for a type outside the schedule.
        """
        chooser = self._by_type.get(instance_type)
        return chooser.record_segment(trial_id, instance_type, seconds, steps) if chooser is not None else 0.0


class BracketOrchestrator(Orchestrator):
    """An elastic schedule (SEER, E-Hyperband, E-Grid) on the orchestrator's trial life cycle (module doc).

    Parameters
    ----------
    trial_ids : sequence of str
        The trials, in sampling order; the first ``schedule.n_trials`` run (all: ValueError if fewer).
    config : OrchestratorConfig
        ``max_steps`` caps every target; θ is ignored (``theta=1``); ``hourly_hop`` as the policy says.
    chooser : TypeChooser
    schedule : spottune.planning.ElasticSchedule
        Durations in seconds, resources in vCPUs.
    instance_type : callable (resources) -> str
        The instance type of a round with that many resources per trial.
    seconds_per_step : callable (trial_id, instance_type) -> float
        Training speed, seconds per step.
    overhead_s : float
        Seconds of a round not spent training (boot, restore, checkpoint).
    predictor : FinalMetricPredictor, optional
        Ranks the trials at each round's end (default :class:`earlycurve.LastValue`: the current value).
    wall_clock : bool, default False
        Rounds end at their planned wall-clock time (SEER's stages, "in wall-clock time, not epochs"): a
        launch in round k gets the steps that fit before the round's planned end (start + the sum of the
        durations so far) minus ``overhead_s``; a trial that cannot train at least one step before it (a
        revoked or refused trial waiting to relaunch) sits the round out and is ranked by what it has.
        False: every round of a trial trains the round's duration worth of steps, whenever it starts.
        Either way a bracket's ``rungs`` (the lean plan's, DB15), when set, cap the cumulative steps of each round.
    step_time_cov : float, default 0
        Coefficient of variation of a step's time (the replay's ``SimSettings.step_time_cov``): a wall-clock
        round holds back :func:`reserve_steps` steps so that it ends on time.

    Raises
    ------
    ConfigError
        If the schedule needs more trials than given, or ``config.max_concurrent_trials`` is set (a schedule plans its
        own parallelism).
    """

    def __init__(self, trial_ids: Sequence[str], config: OrchestratorConfig, chooser: TypeChooser, schedule: Any, *,
                 instance_type: Callable[[float], str], seconds_per_step: Callable[[str, str], float],
                 overhead_s: float, predictor: Any = None, wall_clock: bool = False, step_time_cov: float = 0.0):
        n = schedule.n_trials
        if config.max_concurrent_trials is not None:  # a schedule plans its own parallelism (its rounds' trials)
            raise ConfigError(f"{schedule.name}: max_concurrent_trials is for Algorithm 1's orchestrator; an elastic "
                              "schedule runs the trials its plan sets")
        if n > len(trial_ids):
            raise ConfigError(f"{schedule.name}: the schedule samples {n} trials, the study has {len(trial_ids)}")
        super().__init__(list(trial_ids)[:n], config, chooser, predictor=predictor)
        self.selection_done = True
        self.schedule, self.overhead_s, self.step_time_cov = schedule, float(overhead_s), float(step_time_cov)
        self._type, self._sps = instance_type, seconds_per_step
        b = schedule.brackets
        # barrier groups: SEER's brackets share one; otherwise each bracket is its own
        self.groups: list[list[int]] = [list(range(len(b)))] if schedule.migrate else [[i] for i in range(len(b))]
        self.round = [0] * len(self.groups)  #: current round of each group (0-based)
        self.members: list[list[list[str]]] = [[] for _ in b]  #: per bracket, per round, the trials trained
        self.eliminated: dict[str, int] = {}  #: trial -> round after which it was removed
        self.final_set: list[str] = []  #: trials of the last round of every group
        self.wall_clock = bool(wall_clock)
        self.where: dict[str, tuple[int, int]] = {}  #: trial -> (bracket, round) it is in
        self.sat_out: set[tuple[str, int]] = set()  #: (trial, round) a wall-clock round ended without it
        self.retired: set[str] = set()  #: out of the run without a terminal state (eliminated or last round missed)
        self._dealing = False  #: inside a barrier, launching the next round
        it = iter(self.trials)
        for i, br in enumerate(b):
            self._enter(i, 0, [next(it) for _ in range(br.live[0])])

    def handle(self, event: Any, *, recall: Any = None) -> list:
        """As :meth:`Orchestrator.handle`; a retry timer that fires after the barrier already relaunched its trial
        for the next round (a trial that sat a wall-clock round out while waiting) is stale and ignored.

        Parameters
        ----------
        event : spottune.orchestrator.Event
            The delivered event.
        recall : optional
            As in :meth:`Orchestrator.handle` (a journaled answer replayed on resume).

        Returns
        -------
        list of spottune.orchestrator.Action
            The actions for the driver to carry out, in order (empty for a stale timer).
        """
        from spottune.orchestrator import WakeUp

        if isinstance(event, WakeUp) and event.trial_id in self.trials and self.trials[event.trial_id].state in (
                TrialState.LAUNCHING, TrialState.RUNNING, TrialState.CHECKPOINTING):
            return []
        return super().handle(event, recall=recall)

    # -- rounds -------------------------------------------------------------------------------------
    def _enter(self, bracket: int, k: int, trial_ids: list[str]) -> None:
        """Put ``trial_ids`` in round ``k`` of ``bracket``: their type and their step target."""
        br = self.schedule.brackets[bracket]
        itype = self._type(br.resources[k])
        self.members[bracket].append(list(trial_ids))
        for tid in trial_ids:
            tr = self.trials[tid]
            self.chooser.assign(tid, itype)
            self.where[tid] = (bracket, k)
            steps = max(1, int(math.floor((br.durations[k] - self.overhead_s) / self._sps(tid, itype))))
            tr.target_steps = min(self.config.max_steps, tr.checkpoint_step + steps, self._rung(bracket, k))

    def _rung(self, bracket: int, k: int) -> int:
        """The step cap of round ``k`` of ``bracket`` (its rung; S_max without rungs)."""
        rungs = self.schedule.brackets[bracket].rungs
        return self.config.max_steps if rungs is None else int(rungs[k])

    def _round_end_s(self, tid: str) -> float:
        """Planned end of the trial's current round, seconds since the epoch."""
        i, k = self.where[tid]
        return float(self.started_s) + float(sum(self.schedule.brackets[i].durations[: k + 1]))

    def _launch(self, tr: Any, t: float, out: list) -> None:
        """Launch for the current round; with ``wall_clock`` the target is what fits before the round's end."""
        tid = tr.trial_id
        if tid in self.retired or self.done:
            return
        if self.wall_clock and tid in self.where:
            i, k = self.where[tid]
            itype = self._type(self.schedule.brackets[i].resources[k])
            steps = int(math.floor((self._round_end_s(tid) - t - self.overhead_s) / self._sps(tid, itype)))
            steps -= reserve_steps(steps, self.step_time_cov)
            steps = min(steps, self._rung(i, k) - tr.checkpoint_step)  # the lean plan's rung (DB15)
            if steps < 1:  # too late for this round: sit it out (ranked by what it has at the barrier)
                self.sat_out.add((tid, k))
                if not self._dealing:
                    self._progress(t, out)
                return
            tr.target_steps = min(self.config.max_steps, tr.checkpoint_step + steps)
        super()._launch(tr, t, out)

    def _last_round(self, group: int) -> bool:
        return self.round[group] >= max(self.schedule.brackets[i].rounds for i in self.groups[group]) - 1

    def _group_of(self, trial_id: str) -> int:
        for g, brackets in enumerate(self.groups):
            for i in brackets:
                if len(self.members[i]) > self.round[g] and trial_id in self.members[i][self.round[g]]:
                    return g
        return -1

    def _final_target(self, tr: Any) -> bool:
        g = self._group_of(tr.trial_id)
        return tr.target_steps >= self.config.max_steps or (g >= 0 and self._last_round(g))

    def _progress(self, t: float, out: list) -> None:
        if self.done:
            return
        for g in range(len(self.groups)):
            self._barrier(g, t, out)
        if all(tr.state.is_terminal() or tid in self.retired for tid, tr in self.trials.items()) and not self.done:
            self._finish(t, out)

    def _barrier(self, g: int, t: float, out: list) -> None:
        """End group ``g``'s round when all its trials paused or ended: eliminate, deal, launch."""
        k = self.round[g]
        if k < 0:  # the group is done
            return
        current = [tid for i in self.groups[g] if len(self.members[i]) > k for tid in self.members[i][k]]
        if self.wall_clock:  # a trial waiting to relaunch after its round's end sits the round out
            idle = (TrialState.PENDING, TrialState.PREEMPTED, TrialState.HOPPING)
            for tid in current:
                if self.trials[tid].state in idle and t + self.overhead_s >= self._round_end_s(tid):
                    self.sat_out.add((tid, k))
        if any(not (self._reached(tid) or self.trials[tid].state.is_terminal() or (tid, k) in self.sat_out)
               for tid in current):
            return
        if self._last_round(g):
            self.final_set.extend(tid for tid in current if tid not in self.final_set)
            self.retired.update(tid for tid in current if not self.trials[tid].state.is_terminal())
            self.round[g] = -1
            return
        brackets = self.schedule.brackets
        keep: dict[int, list[tuple[float, str]]] = {}
        for i in self.groups[g]:
            if len(self.members[i]) <= k:
                continue
            ranked = sorted(((self._rank(tid), tid) for tid in self.members[i][k]), key=_rank_key)
            n_next = brackets[i].live[k + 1] if brackets[i].rounds > k + 1 else 0
            keep[i] = ranked[:n_next]
            for _, tid in ranked[n_next:]:
                self._eliminate(tid, k, out)
        self.round[g] = k + 1
        if self.schedule.migrate:  # re-sort all survivors by descending loss, deal them in bracket order
            order = [tid for _, tid in sorted((x for xs in keep.values() for x in xs), key=_rank_key, reverse=True)]
            for i in self.groups[g]:
                n_next = brackets[i].live[k + 1] if brackets[i].rounds > k + 1 else 0
                keep[i] = [(0.0, tid) for tid in order[:n_next]]
                order = order[n_next:]
        for i in self.groups[g]:
            if brackets[i].rounds > k + 1:
                self._enter(i, k + 1, [tid for _, tid in keep.get(i, [])])
        self._dealing = True
        for i in self.groups[g]:
            for tid in self.members[i][k + 1] if len(self.members[i]) > k + 1 else []:
                tr = self.trials[tid]
                if tr.state in (TrialState.PAUSED_AT_THETA, TrialState.KEPT, TrialState.PENDING,
                                TrialState.PREEMPTED, TrialState.HOPPING):
                    if tr.state is TrialState.PAUSED_AT_THETA:
                        self._keep(tr)
                    self._launch(tr, t, out)
        self._dealing = False
        self._barrier(g, t, out)  # a round whose trials had all finished already

    def _reached(self, tid: str) -> bool:
        """Paused at this round's target (a survivor still paused before its relaunch has a higher target)."""
        tr = self.trials[tid]
        return tr.state in (TrialState.PAUSED_AT_THETA, TrialState.KEPT) and tr.step >= tr.target_steps

    def _rank(self, tid: str) -> float:
        tr = self.trials[tid]
        if not tr.losses:
            return math.inf
        return self._ranking_loss(tr)

    def _eliminate(self, tid: str, k: int, out: list) -> None:
        tr = self.trials[tid]
        self.eliminated[tid] = k
        if tr.state in (TrialState.PAUSED_AT_THETA, TrialState.KEPT):
            self._act(tr, Stop(trial_id=tid, reason=StopReason.NOT_TOP_K), StopReason.NOT_TOP_K, out)
        elif not tr.state.is_terminal():  # sat out a wall-clock round while waiting to relaunch
            self.retired.add(tid)

    def _finish(self, t: float, out: list) -> None:
        """SEER's line 13: the best of the last rounds' trials by last observed value (all trials if none)."""
        from spottune.orchestrator import ExperimentFinished

        pool = self.final_set or list(self.trials)
        finals = sorted(((self.trials[tid].losses[-1], tid) for tid in pool if self.trials[tid].losses), key=_rank_key)
        self.top_k = tuple(tid for _, tid in finals[: self.config.top_k])
        self.selected = tuple(self.final_set)
        self.finished_s = t
        out.append(ExperimentFinished(time_s=t, top_k=self.top_k,
                                      metrics={tid: self.to_user(loss) for loss, tid in finals[: self.config.top_k]}))


def bracket_orchestrator(schedule: Any, types: Mapping[float, str], trial_ids: Sequence[str], *, history: Any,
                         catalog: Any, pool: Any, rng: Any, max_steps: int, metric: str, mode: str, top_k: int,
                         reference_seconds_per_step: Callable[[str], float], boot_s: float, predictive: bool,
                         step_time_cov: float, hourly_hop: bool = False) -> tuple[BracketOrchestrator, TypeChooser, str]:
    """A SEER-family schedule executed with wall-clock rounds: the one builder of ``spottune simulate``'s
    ``seer`` / ``seer-predictive`` / ``e-hyperband`` / ``e-grid`` and of ``spottune run --deadline
    --budget-usd`` (``deadline_mode="plan"``, decision DB14).

    Parameters
    ----------
    schedule : spottune.planning.ElasticSchedule
        Durations in seconds, resources in vCPUs.
    types : mapping vCPUs -> instance type
        The instance type of every resource count of the schedule.
    trial_ids : sequence of str
        The trials, in sampling order (the first ``schedule.n_trials`` run).
    history, catalog, pool : the market (prices in USD per instance-hour)
    rng : numpy.random.Generator
        Shared by the per-type choosers (ties of zones).
    max_steps, metric, mode, top_k
        S_max, the reported metric, ``"min"`` / ``"max"``, the models kept.
    reference_seconds_per_step : callable (trial_id) -> float
        Seconds per step on the 2-vCPU reference instance (:func:`spottune.speed.seconds_per_step`).
    boot_s : float
        Launch-to-training latency, seconds; a round's overhead is ``boot_s`` + :data:`RESTORE_CHECKPOINT_S`.
    predictive : bool
        Rank each round by EarlyCurve's predicted final value (``seer-predictive``, F-S2) instead of the
        current value (SEER as published).
    step_time_cov : float
        The replay's step-time noise: the noise reserve of each round (DB13).
    hourly_hop : bool, default False
        The SEER family does not hop (DB9).

    Returns
    -------
    (BracketOrchestrator, TypeChooser, str)
        The orchestrator, its chooser (max price = current + :data:`ELASTIC_DELTA_USD_PER_HOUR`), and a
        one-line note (trials, planned finish, bracket sizes and types).

    Raises
    ------
    ConfigError
        If the schedule samples more trials than given.
    """
    from provisioner import MaxPriceRule
    from spottune.speed import seconds_per_step

    delta = ELASTIC_DELTA_USD_PER_HOUR
    chooser = TypeChooser(types.values(), history, catalog, pool, rng,
                          MaxPriceRule(delta_low_usd_per_hour=delta, delta_high_usd_per_hour=delta))
    if predictive:
        from earlycurve import EarlyCurve

        fmp = EarlyCurve(max_steps)
    else:
        fmp = None  # LastValue: the current value
    config = OrchestratorConfig(max_steps=max_steps, theta=1.0, top_k=top_k, metric=metric, mode=mode,
                                hourly_hop=hourly_hop, launch_retry_s=LAUNCH_RETRY_S)
    orch = BracketOrchestrator(
        trial_ids, config, chooser, schedule, instance_type=types.__getitem__,
        seconds_per_step=lambda tid, t: seconds_per_step(reference_seconds_per_step(tid), catalog[t].vcpus,
                                                         catalog[t].ecu),
        overhead_s=boot_s + RESTORE_CHECKPOINT_S, predictor=fmp, wall_clock=True, step_time_cov=step_time_cov)
    sizes = "; ".join(f"{b.live}x{types[b.resources[0]]}" for b in schedule.brackets)
    return orch, chooser, f"{schedule.name}: {schedule.n_trials} trials, finish {schedule.finish / 3600:.2f} h; {sizes}"
