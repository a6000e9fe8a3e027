"""The early-stopping methods compared by ``benchmarks/bench_early_stopping.py`` (decisions ES5-ES6).

- :class:`ASHAStopper`: Ray Tune's ``ASHAScheduler`` (``AsyncHyperBandScheduler``) rule, reimplemented
  (Ray is not a dependency). From ``ray/tune/schedulers/async_hyperband.py`` (``_Bracket``): one
  bracket, rungs (milestones) at ``grace_period · rf^k`` for ``k = 0 .. int(log(max_t / grace_period)
  / log(rf))`` (``MAX_RUNGS = int(log(max_t/min_t)/log(rf) − s + 1)`` with ``s = 0``); when a trial
  first reaches a milestone, the cutoff is ``np.nanpercentile(rewards recorded at that milestone,
  (1 − 1/rf)·100)`` over the trials recorded *before* it (linear interpolation), the trial is
  stopped if its reward is below the cutoff, and its reward is then recorded. Reward = −loss (Ray's
  ``mode="min"``). Ray's defaults: ``grace_period=1, reduction_factor=4, brackets=1``
  (``max_t`` here is the study's ``n_steps``). Multiple brackets are not reproduced.
- :class:`OptunaStopper`: a real Optuna pruner (``optuna.pruners.*``) over an in-memory study, one
  ``study.ask()`` per launched trial, ``trial.report(loss, step)`` + ``trial.should_prune()`` per step,
  ``PRUNED``/``COMPLETE`` told like ``spottune._pruning.OptunaStopRule`` (which this does not
  import: earlycurve may not import spottune). The last step is reported before ``COMPLETE`` (what
  ``SuccessiveHalvingPruner(min_resource="auto")`` reads).
- :class:`RankConfidenceStopper`: ours, :class:`earlycurve.RankConfidenceRule` with a belief
  ``(μ, σ)`` per (curve, rung) from a :class:`BeliefTable`.
- :class:`OnlineRankStopper`: ours as shipped (:class:`earlycurve.RankConfidenceStopping`): beliefs
  calibrated on the study's own finished trials, no tuning curves.
- :class:`PredictiveStopper`: ours, predictive ASHA (:class:`earlycurve.PredictiveStopping`), rungs at
  fractions of the study's steps.
- :func:`one_shot_steps`: the synchronous rule of the paper (train all to ``m`` steps, keep the
  ``keep`` lowest scores to the end): EarlyCurve (paper) and last value; :func:`rung_steps`: the same with
  several synchronous rungs (docs/design/earlycurve.md §8.12).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np

from earlycurve._online_stop import RankConfidenceStopping
from earlycurve._rank_stop import RankConfidenceRule
from earlycurve.errors import InvalidCurveError
from earlycurve.evaluation._stopping import Stopper, Study

__all__ = ["ASHAStopper", "asha_rungs", "OptunaStopper", "RankConfidenceStopper", "BeliefTable", "NeighbourBeliefs", "OnlineRankStopper",
           "PredictiveStopper", "one_shot_steps", "rung_steps"]


def asha_rungs(grace_period: float, max_t: float, reduction_factor: float) -> list[float]:
    """Ray ASHA milestones ``grace_period · rf^k``, ascending (module docstring).

    Parameters
    ----------
    grace_period : float
        First milestone, steps (> 0).
    max_t : float
        Steps of a full trial (≥ ``grace_period``).
    reduction_factor : float
        rf (> 1).

    Returns
    -------
    list of float
        Milestones, steps.

    Raises
    ------
    InvalidCurveError
        ``grace_period <= 0``, ``max_t < grace_period`` or ``reduction_factor <= 1`` (Ray asserts the same).
    """
    if grace_period <= 0 or max_t < grace_period or reduction_factor <= 1:
        raise InvalidCurveError(f"ASHA needs 0 < grace_period <= max_t and reduction_factor > 1, not "
                                f"{grace_period!r}, {max_t!r}, {reduction_factor!r}")
    n_rungs = int(np.log(max_t / grace_period) / np.log(reduction_factor) + 1)
    return [grace_period * reduction_factor**k for k in range(n_rungs)]


class ASHAStopper(Stopper):
    """Ray Tune's ASHA rule with one bracket (module docstring).

    Parameters
    ----------
    max_t : int
        Steps of a full trial (the study's ``n_steps``).
    grace_period : float, default=1
    reduction_factor : float, default=4

    Attributes
    ----------
    rungs : list of float
        Milestones, ascending.
    recorded : dict of float to dict of int to float
        Milestone -> trial -> reward (−loss) recorded there.
    """

    def __init__(self, max_t: int, grace_period: float = 1, reduction_factor: float = 4) -> None:
        self.max_t = max_t
        self.rf = reduction_factor
        self.rungs = asha_rungs(grace_period, max_t, reduction_factor)
        self.recorded: dict[float, dict[int, float]] = {}

    def reset(self, study: Study | None = None) -> None:
        self.recorded = {m: {} for m in self.rungs}

    def report(self, trial: int, step: int, loss: float) -> bool:
        reward = -float(loss)
        for milestone in reversed(self.rungs):  # Ray keeps the rungs in reversed order
            rec = self.recorded.setdefault(milestone, {})
            if step < milestone or trial in rec:
                continue
            stop = bool(rec) and reward < float(np.nanpercentile(list(rec.values()), (1 - 1 / self.rf) * 100))
            rec[trial] = reward
            return stop
        return False

    def complete(self, trial: int, loss: float) -> None:  # Ray's on_trial_complete: bracket.on_result
        self.report(trial, self.max_t, loss)


class OptunaStopper(Stopper):
    """A real Optuna pruner replayed over a study (module docstring).

    Parameters
    ----------
    make_pruner : callable returning an ``optuna.pruners.BasePruner``
        Called once per study (pruners keep state, e.g. Hyperband's brackets).
    report_every : callable (step) -> bool, optional
        Steps to report; default every step. [I] SHA and Hyperband only read the value at the first
        reported step ≥ a rung, so reporting at their rung steps (and the last) gives identical stops.
    """

    def __init__(self, make_pruner: Callable[[], object], report_every: Callable[[int], bool] | None = None) -> None:
        self.make_pruner = make_pruner
        self.report_every = report_every

    def reset(self, study: Study) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.n_steps = study.curves.shape[1]
        self.study = optuna.create_study(study_name="spottune-es", direction="minimize", pruner=self.make_pruner(),
                                         sampler=optuna.samplers.RandomSampler(seed=0))
        self.trials: dict[int, object] = {}

    def launch(self, trial: int) -> None:
        self.trials[trial] = self.study.ask()

    def report(self, trial: int, step: int, loss: float) -> bool:
        import optuna

        if self.report_every is not None and not self.report_every(step):
            return False
        t = self.trials[trial]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t.report(float(loss), int(step))
            prune = bool(t.should_prune())
        if prune:
            self.study.tell(t, state=optuna.trial.TrialState.PRUNED)
        return prune

    def complete(self, trial: int, loss: float) -> None:
        t = self.trials[trial]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t.report(float(loss), int(self.n_steps))
        self.study.tell(t, float(loss))


class BeliefTable:
    """Beliefs ``(μ, σ)`` about each pool curve's final loss at each rung, computed once.

    Parameters
    ----------
    grid : ndarray of shape (n_curves, n_steps)
        The pool's grid (:class:`earlycurve.evaluation.StudyPool`).
    point : callable (head: ndarray of shape (r,), n_steps: int) -> float
        Point prediction of the final loss from the first ``r`` grid values.
    rungs : sequence of int
    calibration_rows : sequence of int
        Pool rows (TUNING configurations only) on which the bias and spread are measured.

    Raises
    ------
    InvalidCurveError
        If there are fewer than 2 calibration rows.

    Attributes
    ----------
    point_ : dict of int to ndarray of shape (n_curves,)
        Raw point predictions per rung (computed lazily for the rows asked).
    bias_, sigma_ : dict of int to float
        Per rung: median of ``final − point`` and ``1.4826 · MAD`` of it over ``calibration_rows``.
        μ = point + bias; σ = sigma.
    """

    def __init__(self, grid: np.ndarray, point: Callable[[np.ndarray, int], float], rungs: Sequence[int],
                 calibration_rows: Sequence[int]) -> None:
        self.grid = np.asarray(grid, dtype=float)
        self.point = point
        self.n_steps = self.grid.shape[1]
        self.point_: dict[int, np.ndarray] = {}
        self.bias_: dict[int, float] = {}
        self.sigma_: dict[int, float] = {}
        rows = np.asarray(calibration_rows, dtype=int)
        if rows.size < 2:
            raise InvalidCurveError("BeliefTable needs >= 2 calibration rows")
        for r in rungs:
            self.point_[int(r)] = np.full(self.grid.shape[0], np.nan)
            err = self.grid[rows, -1] - self._points(int(r), rows)
            self.bias_[int(r)] = float(np.median(err))
            self.sigma_[int(r)] = float(1.4826 * np.median(np.abs(err - np.median(err))))

    def _points(self, rung: int, rows: np.ndarray) -> np.ndarray:
        cache = self.point_[rung]
        for i in rows:
            if np.isnan(cache[i]):
                cache[i] = self.point(self.grid[i, :rung], self.n_steps)
        return cache[rows]

    def belief(self, row: int, rung: int) -> tuple[float, float]:
        """``(μ, σ)`` of pool row ``row`` at ``rung``.

        Parameters
        ----------
        row : int
            Row of the pool's grid.
        rung : int
            Grid step, one of the table's rungs.

        Returns
        -------
        mu, sigma : float
            Mean and spread of the belief about the final loss.
        """
        p = self._points(rung, np.array([row]))[0]
        return float(p + self.bias_[rung]), self.sigma_[rung]


class NeighbourBeliefs:
    """Beliefs from similar TUNING curves: the final-loss change of the ``k`` nearest calibration curves.

    At rung ``r`` each curve is described by its current loss ``y_r`` and its recent change
    ``y_r − y_(r−w)`` with ``w = max(1, r // 4)`` (both divided by their standard deviation over the
    calibration rows). For a curve, the ``n_neighbours`` nearest calibration curves (Euclidean, itself
    excluded: leave-one-out on tuning studies) give ``d = final − y_r``; the belief is
    ``μ = y_r + mean(d)``, ``σ = std(d)`` (ddof 1). So a run still descending steeply gets the
    larger improvement and spread of runs that were descending like it: an empirical, heteroscedastic
    extrapolation (ours, [I]; in the spirit of learning-curve priors from earlier studies).

    Parameters
    ----------
    grid : ndarray of shape (n_curves, n_steps)
    rungs : sequence of int
    calibration_rows : sequence of int
        TUNING configurations only; at least ``n_neighbours + 1``.
    n_neighbours : int, default=15

    Raises
    ------
    InvalidCurveError
        Unless ``2 <= n_neighbours <`` the number of calibration rows.
    """

    def __init__(self, grid: np.ndarray, rungs: Sequence[int], calibration_rows: Sequence[int], n_neighbours: int = 15) -> None:
        self.grid = np.asarray(grid, dtype=float)
        self.rows = np.asarray(calibration_rows, dtype=int)
        self.n_neighbours = int(n_neighbours)
        if self.rows.size <= self.n_neighbours or self.n_neighbours < 2:
            raise InvalidCurveError(f"NeighbourBeliefs needs 2 <= n_neighbours < {self.rows.size} calibration rows")
        self.features_: dict[int, np.ndarray] = {}
        for r in rungs:
            r = int(r)
            w = max(1, r // 4)
            f = np.column_stack([self.grid[:, r - 1], self.grid[:, r - 1] - self.grid[:, max(0, r - 1 - w)]])
            sd = f[self.rows].std(axis=0)
            self.features_[r] = f / np.where(sd > 0, sd, 1.0)

    def belief(self, row: int, rung: int) -> tuple[float, float]:
        """``(μ, σ)`` of pool row ``row`` at ``rung``.

        Parameters
        ----------
        row : int
            Row of the pool's grid.
        rung : int
            Grid step, one of the rungs given at construction.

        Returns
        -------
        mu, sigma : float
            ``y_r + mean(d)`` and ``std(d)`` over the nearest calibration curves.
        """
        f = self.features_[rung]
        cand = self.rows[self.rows != row]
        dist = np.sum((f[cand] - f[row]) ** 2, axis=1)
        nb = cand[np.argsort(dist, kind="stable")[: self.n_neighbours]]
        d = self.grid[nb, -1] - self.grid[nb, rung - 1]
        return float(self.grid[row, rung - 1] + d.mean()), float(d.std(ddof=1))


class RankConfidenceStopper(Stopper):
    """Ours: :class:`earlycurve.RankConfidenceRule` driven by a :class:`BeliefTable`.

    Parameters
    ----------
    beliefs : BeliefTable or NeighbourBeliefs
        Anything with ``belief(pool_row, rung) -> (μ, σ)``.
    rungs : sequence of int
        Subset of the table's rungs.
    epsilon : float
    k : int, default=3
    sigma_scale : float, default=1.0
        Multiplies every σ (1 = the tuning spread as measured).
    """

    def __init__(self, beliefs: BeliefTable, rungs: Sequence[int], epsilon: float, k: int = 3, sigma_scale: float = 1.0,
                 seed: int = 0) -> None:
        self.beliefs = beliefs
        self.rule = RankConfidenceRule(rungs, epsilon, k=k, seed=seed)
        self.rung_set = set(self.rule.rungs)
        self.sigma_scale = sigma_scale

    def reset(self, study: Study) -> None:
        self.ids = study.ids
        self.rule.reset()

    def report(self, trial: int, step: int, loss: float) -> bool:
        if step not in self.rung_set:
            return False
        mu, sd = self.beliefs.belief(int(self.ids[trial]), step)
        return self.rule.judge(trial, step, mu, sd * self.sigma_scale)

    def complete(self, trial: int, loss: float) -> None:
        self.rule.complete(trial, loss)


class OnlineRankStopper(Stopper):
    """Ours as shipped: :class:`earlycurve.RankConfidenceStopping` with rungs at ``fractions`` of the study's steps.

    Parameters
    ----------
    fractions : sequence of float, optional
        Rung fractions (default :data:`earlycurve.RUNG_FRACTIONS`).
    **kwargs
        ``epsilon``, ``k``, ``sigma_scale``, ``min_completed``, ``seed`` of the rule.
    """

    def __init__(self, fractions: Sequence[float] | None = None, **kwargs) -> None:
        from earlycurve._online_stop import RUNG_FRACTIONS

        self.fractions = tuple(fractions or RUNG_FRACTIONS)
        self.kwargs = kwargs

    def reset(self, study: Study) -> None:
        from earlycurve._online_stop import rungs_for

        self.rule = RankConfidenceStopping(rungs_for(study.curves.shape[1], self.fractions), **self.kwargs)

    def report(self, trial: int, step: int, loss: float) -> bool:
        return self.rule.report(trial, step, loss)

    def complete(self, trial: int, loss: float) -> None:
        self.rule.complete(trial, loss)


class PredictiveStopper(Stopper):
    """Predictive ASHA (:class:`earlycurve.PredictiveStopping`) with rungs at ``fractions`` of the study's steps.

    Parameters
    ----------
    fractions : sequence of float, optional
        Rung fractions (default ``PREDICTIVE_DEFAULTS["fractions"]``).
    **kwargs
        ``keep_first``, ``keep``, ``slope``, ``bound_k``, ``bound_quantile``, ``guard``, ``retro``, ``score``,
        ``predictor``, ``max_steps`` of the rule; with ``score="learned"``, ``max_steps`` defaults to the
        study's number of steps.
    """

    def __init__(self, fractions: Sequence[float] | None = None, **kwargs) -> None:
        from earlycurve._predictive_stop import PREDICTIVE_DEFAULTS

        self.fractions = tuple(fractions or PREDICTIVE_DEFAULTS["fractions"])
        self.kwargs = kwargs

    def reset(self, study: Study) -> None:
        from earlycurve._online_stop import rungs_for
        from earlycurve._predictive_stop import PredictiveStopping

        kw = self.kwargs
        if kw.get("score") == "learned" and kw.get("max_steps") is None:
            kw = kw | {"max_steps": study.curves.shape[1]}
        self.rule = PredictiveStopping(rungs_for(study.curves.shape[1], self.fractions), **kw)

    def report(self, trial: int, step: int, loss: float) -> bool:
        return self.rule.report(trial, step, loss)

    def complete(self, trial: int, loss: float) -> None:
        self.rule.complete(trial, loss)


def one_shot_steps(study: Study, scores: np.ndarray, at_step: int, keep: int) -> np.ndarray:
    """Steps trained by the paper's synchronous rule: all trials to ``at_step``, the ``keep`` lowest
    ``scores`` (predicted final losses, shape (size,)) to the end (stable ties: launch order); the one-rung
    case of :func:`rung_steps`.

    Parameters
    ----------
    study : Study
    scores : ndarray of shape (size,)
        Predicted final losses; lower continues.
    at_step : int
        The rung's grid step (1-based).
    keep : int
        Trials trained to the end.

    Returns
    -------
    steps : ndarray of shape (size,), int
    """
    return rung_steps(study, [(at_step, keep)], [scores])


def rung_steps(study: Study, rungs: Sequence[tuple[int, int]],
               scores: Sequence[np.ndarray | None] | None = None) -> np.ndarray:
    """Steps trained under synchronous rungs: every trial trains to the first rung's step; at each rung
    ``(step, keep)`` the ``keep`` surviving trials with the lowest score train on to the next rung's step, and
    the last rung's survivors to the end (SpotTune's θ barrier is one rung; docs/design/earlycurve.md §8.12).

    Parameters
    ----------
    study : Study
    rungs : sequence of (int, int)
        ``(grid step, keep)`` pairs (steps 1-based): steps strictly increasing in [1, n_steps], keeps ≥ 1 and
        strictly decreasing.
    scores : sequence of (ndarray of shape (size,) or None), optional
        One per rung, lower continues; None (or an entry None): the last observed loss at that rung's step.
        Ties go to the earlier-launched trial.

    Returns
    -------
    steps : ndarray of shape (size,), int

    Raises
    ------
    InvalidCurveError
        No rung, a step outside [1, n_steps], a keep below 1, steps not strictly increasing, keeps not strictly
        decreasing, or scores of the wrong length or shape.
    """
    n, n_steps = study.curves.shape
    rungs = [(int(s), int(k)) for s, k in rungs]
    at, keeps = [s for s, _ in rungs], [k for _, k in rungs]
    if (not rungs or any(not 1 <= s <= n_steps for s in at) or min(keeps) < 1
            or any(b <= a for a, b in zip(at, at[1:])) or any(b >= a for a, b in zip(keeps, keeps[1:]))):
        raise InvalidCurveError(f"rungs must be (step, keep) pairs with steps strictly increasing in [1, {n_steps}] "
                                f"and keeps >= 1 strictly decreasing; got {rungs}")
    scores = [None] * len(rungs) if scores is None else list(scores)
    if len(scores) != len(rungs) or any(x is not None and np.shape(x) != (n,) for x in scores):
        raise InvalidCurveError(f"scores must hold one array of shape ({n},) (or None) per rung; got {len(scores)} "
                                f"for {len(rungs)} rungs")
    steps = np.full(n, at[0], dtype=int)
    alive = np.arange(n)  # launch order
    for i, ((step, keep), x) in enumerate(zip(rungs, scores)):
        x = study.curves[:, step - 1] if x is None else np.asarray(x, dtype=float)
        alive = np.sort(alive[np.argsort(x[alive], kind="stable")[:keep]])
        steps[alive] = at[i + 1] if i + 1 < len(rungs) else n_steps
    return steps

