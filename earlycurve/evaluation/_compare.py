"""Early stoppers side by side on any curve set, at fixed settings (``spottune curves eval``).

Unlike ``benchmarks/bench_early_stopping.py`` nothing is tuned here: every method runs at one fixed
setting (the library defaults of the peers, our shipped defaults), so no tuning/test split is needed
and every curve can be used. Studies of ``size`` configurations are drawn from the whole set with
``numpy.random.default_rng([seed, 3, i])`` and replayed with ``workers`` parallel workers
(:func:`earlycurve.evaluation.replay`); metrics as :func:`earlycurve.evaluation.study_metrics`
(top-1, top-3, regret, cost = steps trained ÷ training everything), mean ± sd over studies.

Methods (``STOPPER_METHODS``):

- ``predictive``: ours, predictive ASHA (:class:`earlycurve.PredictiveStopping`, ``PREDICTIVE_DEFAULTS``);
- ``rank``: ours as shipped (:class:`earlycurve.RankConfidenceStopping`, defaults, ``k = top_k``);
- ``paper``: EarlyCurve (paper settings) at θ, its predicted top-``top_k`` trained to the end;
- ``last-value``: the same with the last observed value;
- ``asha``: Ray Tune's ASHA at its defaults (grace period 1, reduction factor 4);
- ``sha``, ``hyperband``, ``median``: Optuna's pruners at their defaults (real ``optuna``);
- ``full``: train every trial to the end.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from earlycurve.errors import InvalidCurveError
from earlycurve.evaluation._barrier import RANKINGS, barrier_metrics, barrier_step, ranking_scores
from earlycurve.evaluation._datasets import CurveSet
from earlycurve.evaluation._stoppers import ASHAStopper, OnlineRankStopper, OptunaStopper, PredictiveStopper
from earlycurve.evaluation._stopping import Stopper, Study, StudyPool, evaluate_stopper, grid_steps, summarize

__all__ = ["BARRIER_METHODS", "STOPPER_METHODS", "barrier_rows", "compare_stoppers", "grid_steps"]

STOPPER_METHODS = ("predictive", "rank", "paper", "last-value", "asha", "sha", "hyperband", "median", "full")
#: The one-shot θ-barrier methods (no rungs): EarlyCurve's prediction or the last value at θ.
BARRIER_METHODS = tuple(RANKINGS)


def compare_stoppers(curve_set: CurveSet, *, theta: float = 0.7, top_k: int = 3, n_studies: int = 40,
                     study_size: int = 16, workers: int = 4, n_steps: int | None = None, seed: int = 0,
                     methods: Sequence[str] = STOPPER_METHODS) -> dict:
    """Replay each method on the same seeded studies of ``curve_set`` (module docstring).

    Parameters
    ----------
    curve_set : CurveSet
    theta : float, default=0.7
        θ of ``paper`` and ``last-value`` (fraction of the grid, 0 < θ ≤ 1).
    top_k : int, default=3
        Trials kept by ``paper`` / ``last-value``; ``k`` of ``rank``.
    n_studies, study_size, workers : int
        Studies (each of ``min(study_size, n_curves)`` configurations) and parallel workers.
    n_steps : int, optional
        Grid steps (default :func:`grid_steps`).
    seed : int, default=0
    methods : sequence of str, default=STOPPER_METHODS

    Returns
    -------
    result : dict
        ``n_curves``, ``n_steps``, ``study_size``, ``n_studies``, ``workers`` and ``methods``: name ->
        ``{"setting": str, "summary": summarize(...)}``.

    Raises
    ------
    InvalidCurveError
        Fewer curves than ``top_k + 1``, an unknown method, or a bad ``theta`` / count.
    """
    import optuna

    unknown = [m for m in methods if m not in STOPPER_METHODS]
    if unknown:
        raise InvalidCurveError(f"unknown stopper method(s) {unknown}; known: {', '.join(STOPPER_METHODS)}")
    if not 0 < theta <= 1 or min(top_k, n_studies, study_size, workers) < 1:
        raise InvalidCurveError("theta must be in (0, 1]; top_k, n_studies, study_size and workers >= 1")
    n_curves = len(curve_set.curves)
    if n_curves <= top_k:
        raise InvalidCurveError(f"{curve_set.name}: {n_curves} curves, but top_k {top_k} needs more")
    steps = int(n_steps or grid_steps(curve_set))
    pool, studies = _studies(curve_set, steps, n_studies, study_size, seed)
    P = optuna.pruners
    factories = {
        "predictive": ("defaults (PREDICTIVE_DEFAULTS)", PredictiveStopper),
        "rank": ("defaults, k=%d" % top_k, lambda: OnlineRankStopper(k=top_k, seed=seed)),
        "asha": ("grace_period=1 rf=4 (Ray defaults)", lambda: ASHAStopper(steps)),
        "sha": ("Optuna defaults", lambda: OptunaStopper(lambda: P.SuccessiveHalvingPruner())),
        "hyperband": ("Optuna defaults", lambda: OptunaStopper(lambda: P.HyperbandPruner())),
        "median": ("Optuna defaults", lambda: OptunaStopper(lambda: P.MedianPruner())),
        "full": ("train everything", Stopper),
    }
    out = {"name": curve_set.name, "n_curves": n_curves, "n_steps": steps, "study_size": min(study_size, n_curves),
           "n_studies": n_studies, "workers": workers, "theta": theta, "top_k": top_k, "methods": {}}
    for m in methods:
        if m in BARRIER_METHODS:
            rows = _barrier_rows(pool, studies, m, theta, top_k)
            setting = f"theta={theta:g} keep={top_k}" + (" (EarlyCurve paper settings)" if m == "paper" else "")
        else:
            setting, make = factories[m]
            rows = evaluate_stopper(studies, make, workers)
        out["methods"][m] = {"setting": setting, "summary": summarize(rows)}
    return out


def barrier_rows(curve_set: CurveSet, method: str, *, theta: float = 0.7, top_k: int = 3, n_studies: int = 40,
                 study_size: int = 16, n_steps: int | None = None, seed: int = 0) -> list[dict[str, float]]:
    """Per-study metrics of one θ-barrier method on :func:`compare_stoppers`' studies (same seeds, same grid).

    Every trial trains to θ (a fraction of the grid); the ``top_k`` ranked by ``method`` train to the end.

    Parameters
    ----------
    curve_set : CurveSet
    method : {"paper", "last-value"}
        ``paper``: EarlyCurve's predicted final value (paper settings, Eq 4-7); ``last-value``: the value at θ
        (``spottune run --stopper barrier``).
    theta, top_k, n_studies, study_size, n_steps, seed
        As :func:`compare_stoppers`.

    Returns
    -------
    rows : list of dict
        One :func:`earlycurve.evaluation.study_metrics` dict per study (top1, top3, regret, cost), in study order,
        so two methods' rows pair study by study.

    Raises
    ------
    InvalidCurveError
        An unknown ``method``, a bad ``theta`` or count, or fewer curves than ``top_k + 1``.
    """
    if method not in BARRIER_METHODS:
        raise InvalidCurveError(f"method is {method!r}, but must be one of {', '.join(BARRIER_METHODS)}")
    if not 0 < theta <= 1 or min(top_k, n_studies, study_size) < 1 or len(curve_set.curves) <= top_k:
        raise InvalidCurveError("theta must be in (0, 1]; top_k, n_studies and study_size >= 1; more curves than top_k")
    steps = int(n_steps or grid_steps(curve_set))
    pool, studies = _studies(curve_set, steps, n_studies, study_size, seed)
    return _barrier_rows(pool, studies, method, theta, top_k)


def _studies(curve_set: CurveSet, steps: int, n_studies: int, study_size: int, seed: int) -> tuple[StudyPool, list[Study]]:
    pool = StudyPool.from_curves(curve_set, steps)
    n, size = len(curve_set.curves), min(study_size, len(curve_set.curves))
    return pool, [Study(index=i, split="all", ids=(ids := np.random.default_rng([seed, 3, i]).choice(n, size, replace=False)),
                        curves=pool.grid[ids]) for i in range(n_studies)]


def _barrier_rows(pool: StudyPool, studies: list[Study], method: str, theta: float, top_k: int) -> list[dict[str, float]]:
    at, scores = barrier_step(theta, pool.grid.shape[1]), ranking_scores(pool, method, theta)
    return [barrier_metrics(s, at, top_k, scores[s.ids]) for s in studies]
