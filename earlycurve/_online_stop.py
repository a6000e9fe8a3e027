"""The rank-confidence rule for a live study: beliefs learned from the study's own finished trials.

:class:`earlycurve.RankConfidenceRule` needs a belief ``Normal(μ, σ)`` about each trial's final loss.
The benchmark (``docs/design/earlycurve.md`` §6) measures it on tuning curves recorded beforehand; a live
Optuna study, Ray Tune run or SpotTune experiment has no such curves. Here the belief comes from the
study itself (ours, [I]; the ``last`` belief of §6 calibrated online):

- A trial is judged once per **rung** (a step count), at the first step it reports that is ≥ the
  rung (as Optuna's SHA reads a rung), with ``y`` = its loss there.
- **Calibrated** (at least ``min_completed`` trials of the study have finished): for every finished
  trial ``j``, ``d_j = final_j − y_j(rung)``; the belief is ``μ = y + median(d)``,
  ``σ = sigma_scale · 1.4826 · MAD(d)``. Every other trial that is not stopped and has reached a
  rung contributes its belief at its latest rung (finished: its final, σ = 0), and the trial is
  stopped when ``P(it ends among the k lowest) < ε`` (:func:`earlycurve.prob_top_k`).
- **Cohort** (fewer finished trials, e.g. every trial of a fully parallel run before any ends): no
  bias can be measured, so the trial is compared with the trials not stopped that reached the same
  rung, on their losses at that rung. With ``cohort_keep=None`` (default) it is stopped when at least
  ``k`` of them are strictly lower; with a share ``q`` it is stopped when at least ``ceil(q · n)`` are
  (``n`` = the cohort with the trial), i.e. only the best share ``q`` continue, as in ASHA with
  reduction factor ``1/q``.

Finished trials are never stopped; with ``cohort_keep=None`` a study with ≤ k trials seen stops nothing. Each decision's
Monte Carlo draws come from ``numpy.random.default_rng([seed, trial_index, rung])`` with
``trial_index`` the order in which the trial was first seen (deterministic replays). No I/O.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from earlycurve._rank_stop import prob_top_k
from earlycurve.errors import InvalidCurveError

__all__ = ["RUNG_FRACTIONS", "Decision", "RankConfidenceStopping", "rungs_for"]

#: Default rungs as fractions of a trial's full length. With ``epsilon=0.5, sigma_scale=0.25,
#: min_completed=1``, the cheapest setting whose mean top-3 accuracy reached 0.95 on the TUNING studies of
#: every recorded set (opda AlexNet, ConvNeXt, cakelab; ``docs/design/earlycurve.md`` §7.1). θ = 0.7 is the last rung.
RUNG_FRACTIONS = (0.1, 0.2, 0.4, 0.7)


def rungs_for(max_steps: int, fractions: Sequence[float] = RUNG_FRACTIONS) -> tuple[int, ...]:
    """Rung steps ``max(1, round(f · max_steps))`` below ``max_steps``, deduplicated, ascending.

    Parameters
    ----------
    max_steps : int
        Steps of a full trial (≥ 2).
    fractions : sequence of float, default RUNG_FRACTIONS
        Each in (0, 1).

    Returns
    -------
    tuple of int
        Rung steps (at least ``(1,)``).

    Raises
    ------
    InvalidCurveError
        ``max_steps < 2`` or a fraction outside (0, 1).
    """
    if int(max_steps) < 2:
        raise InvalidCurveError(f"max_steps is {max_steps!r}, but must be >= 2")
    if not fractions or any(not 0 < f < 1 for f in fractions):
        raise InvalidCurveError(f"rung fractions {list(fractions)!r} must be non-empty and in (0, 1)")
    steps = sorted({max(1, int(round(f * max_steps))) for f in fractions})
    return tuple(s for s in steps if s < max_steps) or (1,)


@dataclass(frozen=True, slots=True)
class Decision:
    """One judgement at a rung.

    Attributes
    ----------
    stop : bool
    rung : int or None
        The rung judged (None: the step is not the first at or after a new rung; nothing judged).
    p_top_k : float
        ``P(top-k)`` (calibrated mode) or 1/0 (cohort mode); 1.0 when nothing was judged.
    mode : {"none", "cohort", "calibrated"}
    """

    stop: bool
    rung: int | None
    p_top_k: float
    mode: str


class RankConfidenceStopping:
    """Asynchronous top-k rank-confidence stopping for a live study (module docstring).

    Parameters
    ----------
    rungs : sequence of int
        Steps at which a trial may be stopped, strictly increasing, each ≥ 1 (:func:`rungs_for`).
    epsilon : float, default=0.5
        Stop when ``P(top-k) < epsilon``; in (0, 1).
    k : int, default=3
    sigma_scale : float, default=0.25
        Multiplies the measured spread (0: deterministic "stop unless in the predicted top-k").
    min_completed : int, default=1
        Finished trials needed before beliefs are calibrated (cohort mode before).
    prior : sequence of mapping of step (int) -> loss, optional
        Complete curves recorded earlier (e.g. a previous study of the same model, on the same step
        scale, each run to the same full length): they calibrate the beliefs as if they were finished
        trials of this study, but are never compared with its trials. With ``min_completed`` of them
        the rule is calibrated from the first rung on.
    cohort_keep : float or None, default=None
        Cohort mode keeps the best share ``cohort_keep`` of a rung's cohort, in (0, 1); None keeps the
        best ``k``.
    seed : int, default=0
    n_samples : int, default=2000

    Two ways to use it: :meth:`decide` on a snapshot of the whole study (stateless; what the Optuna
    pruner does, reading the study's storage), or :meth:`report` / :meth:`complete` as results
    arrive (stateful; the Ray Tune scheduler and SpotTune's orchestrator).

    Raises
    ------
    InvalidCurveError
        Bad rungs, ``epsilon``, ``k``, ``sigma_scale < 0``, ``min_completed < 1``, ``cohort_keep`` or
        an empty or non-finite prior curve.
    """

    def __init__(self, rungs: Sequence[int], *, epsilon: float = 0.5, k: int = 3, sigma_scale: float = 0.25,
                 min_completed: int = 1, cohort_keep: float | None = None,
                 prior: Sequence[Mapping[int, float]] | None = None, seed: int = 0, n_samples: int = 2000) -> None:
        rungs = [int(r) for r in rungs]
        if not rungs or rungs[0] < 1 or any(b <= a for a, b in zip(rungs, rungs[1:])):
            raise InvalidCurveError(f"rungs {rungs!r} must be non-empty, >= 1 and strictly increasing")
        if not 0 < epsilon < 1:
            raise InvalidCurveError(f"epsilon is {epsilon!r}, but must be 0 < epsilon < 1")
        if int(k) < 1 or int(min_completed) < 1 or not sigma_scale >= 0:
            raise InvalidCurveError(f"k ({k!r}) and min_completed ({min_completed!r}) must be >= 1, "
                                    f"sigma_scale ({sigma_scale!r}) >= 0")
        if cohort_keep is not None and not 0 < cohort_keep < 1:
            raise InvalidCurveError(f"cohort_keep is {cohort_keep!r}, but must be None or 0 < cohort_keep < 1")
        self.cohort_keep = None if cohort_keep is None else float(cohort_keep)
        self._prior = []
        for c in prior or ():
            c = {int(k): float(v) for k, v in dict(c).items()}
            if not c or not all(np.isfinite(list(c.values()))):
                raise InvalidCurveError("a prior curve must be a non-empty mapping of step -> finite loss")
            self._prior.append((c, c[max(c)]))
        self.rungs = tuple(rungs)
        self.epsilon = float(epsilon)
        self.k = int(k)
        self.sigma_scale = float(sigma_scale)
        self.min_completed = int(min_completed)
        self.seed = int(seed)
        self.n_samples = int(n_samples)
        self.reset()

    # -- stateful use -------------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget every trial (a new study)."""
        self._curves: dict[Hashable, dict[int, float]] = {}
        self._finals: dict[Hashable, float] = {}
        self._order: dict[Hashable, int] = {}
        self.stopped: dict[Hashable, int] = {}  #: trial -> step at which it was stopped

    def report(self, trial: Hashable, step: int, loss: float) -> bool:
        """Record ``loss`` (lower is better) after ``step`` steps of ``trial``; True = stop it now.

        A trial already stopped or finished is not judged again (returns its state: True if stopped), nor
        is a step at or before its last reported one (a replay after a rollback).

        Parameters
        ----------
        trial : hashable
            The trial's id.
        step : int
            Training steps done (any unit that matches the rungs).
        loss : float
            The trial's loss there (lower is better).

        Returns
        -------
        bool
            True: stop the trial now.
        """
        self._order.setdefault(trial, len(self._order))
        if trial in self.stopped or trial in self._finals:
            return trial in self.stopped
        curve = self._curves.setdefault(trial, {})
        if curve and int(step) <= max(curve):  # a step replayed after a rollback: recorded, not judged again
            curve[int(step)] = float(loss)
            return False
        curve[int(step)] = float(loss)
        d = self.decide(trial, self._curves, self._finals, set(self.stopped), order=self._order)
        if d.stop:
            self.stopped[trial] = int(step)
        return d.stop

    def complete(self, trial: Hashable, final: float) -> None:
        """``trial`` finished with final loss ``final``.

        Parameters
        ----------
        trial : hashable
        final : float
            Final loss (lower is better).
        """
        self._order.setdefault(trial, len(self._order))
        self._finals[trial] = float(final)

    def drop(self, trial: Hashable) -> None:
        """Leave ``trial`` out of every later comparison (it failed or was removed); a finished trial stays.

        Parameters
        ----------
        trial : hashable
        """
        if trial not in self._finals and trial not in self.stopped:
            self.stopped[trial] = max(self._curves.get(trial, {0: 0.0}))

    # -- stateless ----------------------------------------------------------------------------------------
    def decide(self, trial: Hashable, curves: Mapping[Hashable, Mapping[int, float]], finals: Mapping[Hashable, float],
               stopped: set, *, order: Mapping[Hashable, int] | None = None) -> Decision:
        """Judge ``trial`` from a snapshot of the study.

        Parameters
        ----------
        trial : hashable
            Its curve is ``curves[trial]``; its last reported step is the largest key.
        curves : mapping of trial -> mapping of step (int) -> loss (float)
            Every trial seen, reported losses (lower is better).
        finals : mapping of trial -> float
            Final losses of finished trials.
        stopped : set
            Trials stopped (pruned) so far.
        order : mapping of trial -> int, optional
            Stable index of each trial for the seed (default: position in ``curves``).

        Returns
        -------
        Decision
        """
        curve = curves.get(trial, {})
        if trial in finals or trial in stopped or not curve:
            return Decision(False, None, 1.0, "none")
        rung = self.rung_to_judge(curve)
        if rung is None:
            return Decision(False, None, 1.0, "none")  # not the first report at or after a rung
        y = curve[max(curve)]
        calib = [(curves[t], finals[t]) for t in finals if t != trial and curves.get(t)] + self._prior
        if len(calib) >= self.min_completed:
            spread: dict[int, tuple[float, float]] = {}  # rung -> (median d, σ), computed once per call

            def belief(value: float, r: int) -> tuple[float, float]:
                if r not in spread:
                    spread[r] = self._spread(r, calib)
                return value + spread[r][0], spread[r][1]

            mu, sd = [], []
            me = belief(y, rung)
            for t, c in curves.items():
                if t == trial or t in stopped or not c:
                    continue
                if t in finals:
                    mu.append(finals[t]); sd.append(0.0)
                    continue
                r_t = self._rung_of(max(c))
                if r_t is None:
                    continue
                b = belief(_at(c, r_t), r_t)
                mu.append(b[0]); sd.append(b[1])
            mu_all, sd_all = np.array([me[0], *mu]), np.array([me[1], *sd])
            idx = (order or {t: i for i, t in enumerate(curves)}).get(trial, 0)
            rng = np.random.default_rng([self.seed, int(idx), int(rung)])
            p = prob_top_k(mu_all, sd_all, 0, self.k, rng, self.n_samples)
            return Decision(p < self.epsilon, rung, p, "calibrated")
        cohort = [_at(c, rung) for t, c in curves.items()
                  if t != trial and t not in stopped and c and max(c) >= rung]
        better = sum(v < y for v in cohort)
        if self.cohort_keep is None:
            stop = len(cohort) + 1 > self.k and better >= self.k
        else:
            stop = better >= max(1, math.ceil(self.cohort_keep * (len(cohort) + 1)))
        return Decision(stop, rung, 0.0 if stop else 1.0, "cohort")

    # -- helpers ------------------------------------------------------------------------------------------
    def _rung_of(self, step: int) -> int | None:
        """The largest rung ≤ ``step`` (None below the first)."""
        i = int(np.searchsorted(self.rungs, step, side="right"))
        return self.rungs[i - 1] if i else None

    def rung_to_judge(self, curve: Mapping[int, float]) -> int | None:
        """The rung a trial with reported losses ``curve`` (step -> loss) is judged at now, or None.

        A trial is judged at its first reported step at or after a rung (and never below the first rung).

        Parameters
        ----------
        curve : mapping of int to float
            Reported steps -> losses.

        Returns
        -------
        int or None
        """
        if not curve:
            return None
        steps = sorted(curve)
        rung = self._rung_of(steps[-1])
        if rung is None or (len(steps) > 1 and self._rung_of(steps[-2]) == rung):
            return None
        return rung

    def _spread(self, rung: int, calib: list) -> tuple[float, float]:
        """``(median d, σ)`` of ``d = final − loss at rung`` over ``calib``: (curve, final) of finished trials."""
        d = np.array([final - _at(c, rung) for c, final in calib])
        med = float(np.median(d))
        return med, self.sigma_scale * 1.4826 * float(np.median(np.abs(d - med)))


def _at(curve: Mapping[int, float], rung: int) -> float:
    """Loss at the first reported step ≥ ``rung`` (the last one if none is)."""
    later = [s for s in curve if s >= rung]
    return float(curve[min(later)] if later else curve[max(curve)])
