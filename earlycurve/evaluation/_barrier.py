"""Choose the θ barrier's setting on a family's own curves (``spottune curves choose``; docs/design/earlycurve.md §8.10-§8.12).

The barrier (``spottune run --stopper barrier``): every trial trains to θ·S_max, then the ``keep`` trials with the
lowest last observed loss train to S_max. Its cost in steps is ``(n θ + keep (1 − θ)) / n`` of training all ``n``
trials of a study. Which (θ, keep) keeps the best trial depends on the family (§8.10: θ 0.1-0.2 and keep 2-3 on the
recorded AlexNet curves, θ 0.04 and keep 2 on cakelab), so it is chosen on curves of the same family, as the
benchmarks did: studies of ``study_size`` are drawn from one seeded half of the curves (tuning) and from the other
half (test); on the tuning studies the cheapest setting whose mean top-3 accuracy minus one standard error reaches
``target_top3`` is chosen (``bench_pool_splits``' ``se_all`` rule; else the most accurate, then the cheapest), and
its figures on the test studies are reported, never used to choose. With ``rankings=("last-value", "paper")`` the
ranking at θ is chosen too: the last value (``--stopper barrier``) or EarlyCurve's predicted final value (paper
settings, ``--stopper paper``), which ranks far better at small θ on curves that cross (SGD on the built-in
logreg and linear-svm, §8.11). With ``two_rung=True`` two synchronous last-value rungs are candidates too
(``spottune run --stopper barrier --rungs θ1:keep1 --theta θ2 --top-k keep2``; §8.12): every trial trains to
θ1·S_max, the keep1 lowest last values to θ2·S_max, the keep2 lowest there to S_max (:func:`rungs_metrics`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from earlycurve._model import EarlyCurve
from earlycurve.errors import InvalidCurveError
from earlycurve.evaluation._datasets import CurveSet
from earlycurve.evaluation._stoppers import rung_steps
from earlycurve.evaluation._stopping import Study, StudyPool, grid_steps, sample_studies, study_metrics

__all__ = ["BARRIER_KEEPS", "BARRIER_THETAS", "RANKINGS", "TWO_RUNG_GRID", "TWO_RUNG_KEEPS1", "TWO_RUNG_KEEPS2",
           "TWO_RUNG_THETAS1", "TWO_RUNG_THETAS2", "barrier_metrics", "barrier_step", "choose_barrier", "ranking_scores",
           "rungs_metrics"]

#: θ grid of :func:`choose_barrier` (benchmarks/bench_barrier.py's, fixed before its first run).
BARRIER_THETAS = (0.04, 0.06, 0.1, 0.15, 0.2, 0.3, 0.5)
#: keep grid of :func:`choose_barrier` (the same bench's).
BARRIER_KEEPS = (2, 3, 4, 5, 6)
_METRICS = ("top1", "top3", "regret", "cost")
#: Rankings at θ :func:`choose_barrier` can choose from, with the stopper that ranks that way.
RANKINGS = {"last-value": "barrier", "paper": "paper"}
#: Two-rung grid of :func:`choose_barrier` (``two_rung=True``) and benchmarks/bench_barrier.py, fixed before its
#: first run (docs/design/earlycurve.md §8.12): first rung θ1 and keep1, then θ2 (the barrier's θ) and keep2 (its top-k).
TWO_RUNG_THETAS1 = (0.04, 0.06, 0.1)
TWO_RUNG_KEEPS1 = (4, 6, 8)
TWO_RUNG_THETAS2 = (0.15, 0.2, 0.3, 0.5)
TWO_RUNG_KEEPS2 = (2, 3)
#: Their product, (θ1, keep1, θ2, keep2); settings whose θ2 step is not after the θ1 step are skipped where used.
TWO_RUNG_GRID = tuple((t1, k1, t2, k2) for t1 in TWO_RUNG_THETAS1 for k1 in TWO_RUNG_KEEPS1
                      for t2 in TWO_RUNG_THETAS2 for k2 in TWO_RUNG_KEEPS2)


def barrier_metrics(study: Study, step: int, keep: int, scores: np.ndarray | None = None) -> dict[str, float]:
    """:func:`study_metrics` of one study under the barrier at grid ``step`` (1-based) keeping the ``keep`` trials
    with the lowest ``scores`` (shape (size,); default the last values at ``step``; ties: the earlier trial): the
    one-rung case of :func:`rungs_metrics`."""
    return rungs_metrics(study, [(step, keep)], None if scores is None else [scores])


def rungs_metrics(study: Study, rungs: Sequence[tuple[int, int]],
                  scores: Sequence[np.ndarray | None] | None = None) -> dict[str, float]:
    """:func:`study_metrics` (top1, top3, regret in loss units, cost = steps ÷ training every trial, steps) of one
    study under synchronous rungs: every trial trains to the first rung's grid step, and at each rung ``(step,
    keep)`` the ``keep`` surviving trials with the lowest score continue, to the next rung or, after the last, to
    S_max (:func:`earlycurve.evaluation._stoppers.rung_steps`; docs/design/earlycurve.md §8.12).

    ``rungs``: (grid step 1-based, keep) pairs, steps strictly increasing in [1, n_steps], keeps ≥ 1 strictly
    decreasing. ``scores``: one array of shape (size,) per rung (lower continues), default (or None) the last
    observed loss at the rung's step; ties go to the earlier-launched trial. Two rungs ``[(s1, k1), (s2, k2)]``
    cost ``(size·s1 + k1 (s2 − s1) + k2 (n_steps − s2)) / (size·n_steps)``.

    Raises
    ------
    InvalidCurveError
        Rungs or scores outside those bounds.
    """
    return study_metrics(study, rung_steps(study, rungs, scores))


def barrier_step(theta: float, n_steps: int) -> int:
    """The grid step (1-based) of the barrier at θ on a grid of ``n_steps``: ``round(θ n_steps)``, at least 1."""
    return max(1, int(round(theta * n_steps)))


def ranking_scores(pool: StudyPool, ranking: str, theta: float) -> np.ndarray:
    """The score each curve of ``pool`` is ranked by at θ (lower continues), shape (n_curves,).

    ``last-value``: the loss at grid step ``max(1, round(θ n_steps))``; ``paper``: EarlyCurve's predicted final loss
    (paper settings, Eq 4-7) from the curve up to that step.

    Raises
    ------
    InvalidCurveError
        An unknown ``ranking`` or a θ outside (0, 1].
    """
    if ranking not in RANKINGS or not 0 < theta <= 1:
        raise InvalidCurveError(f"ranking must be one of {', '.join(RANKINGS)} and 0 < theta <= 1; "
                                f"got {ranking!r}, {theta}")
    steps = pool.grid.shape[1]
    at = barrier_step(theta, steps)
    if ranking == "last-value":
        return pool.grid[:, at - 1]
    ec, x = EarlyCurve(steps), np.arange(1, at + 1, dtype=float)
    return np.array([ec.predict_final(x, row[:at], steps).value for row in pool.grid])


def choose_barrier(curve_set: CurveSet, *, thetas: Sequence[float] = BARRIER_THETAS,
                   keeps: Sequence[int] = BARRIER_KEEPS, n_tuning: int = 120, n_test: int = 40,
                   study_size: int = 16, target_top3: float = 0.95, n_steps: int | None = None,
                   seed: int = 0, rankings: Sequence[str] = ("last-value",), two_rung: bool = False,
                   two_rung_grid: Sequence[tuple[float, int, float, int]] = TWO_RUNG_GRID) -> dict:
    """The barrier's (θ, keep) chosen on tuning studies of ``curve_set``, with its figures on test studies.

    Parameters
    ----------
    curve_set : CurveSet
        Finished curves of one family (values a loss); needs at least ``2 * study_size`` curves.
    thetas : sequence of float
        Candidate θ, each in (0, 1) (a fraction of S_max; mapped to the grid step ``round(θ n_steps)``, at least 1).
    keeps : sequence of int
        Candidate numbers of trials continued past θ, each in [1, study_size).
    n_tuning, n_test : int
        Studies drawn from the tuning half and from the test half of the curves.
    study_size : int, default=16
        Trials per study.
    target_top3 : float, default=0.95
        Mean top-3 accuracy minus one standard error that the tuning studies must show.
    n_steps : int, optional
        Grid steps (default: :func:`grid_steps`).
    seed : int, default=0
        Seed of the halves and the studies (:func:`sample_studies`).
    rankings : sequence of {"last-value", "paper"}, default ("last-value",)
        Rankings at θ to choose from (:data:`RANKINGS`); ``paper`` fits EarlyCurve once per curve and θ.
    two_rung : bool, default=False
        Also choose among two synchronous last-value rungs (:func:`rungs_metrics`), after the single barriers.
    two_rung_grid : sequence of (float, int, float, int), default :data:`TWO_RUNG_GRID`
        Their candidates ``(θ1, keep1, θ2, keep2)`` with ``0 < θ1 < θ2 < 1`` and ``1 <= keep2 < keep1 <
        study_size``; a candidate whose θ2 step is not after its θ1 step (:func:`barrier_step`) is skipped.

    Returns
    -------
    result : dict
        ``ranking``, ``stopper`` (its ``--stopper``), ``theta``, ``keep``, ``rungs`` (the rungs before θ as
        ``(θ1, keep1)`` pairs, ``spottune run --rungs θ1:keep1``; empty for the single barrier), ``met`` (the
        tuning score reached the target), ``tuning`` and ``test``: mean top-1, top-3, regret (loss units) and cost (steps ÷ training every
        trial), with ``top3_se`` on tuning; ``name``, ``n_curves``, ``n_steps``, ``n_tuning``, ``n_test``,
        ``study_size`` and ``target_top3``.

    Raises
    ------
    InvalidCurveError
        A θ outside (0, 1), a keep outside [1, study_size), no candidate, an unknown ranking, a two-rung candidate
        outside its bounds, too few curves for two halves, or a count below 1.
    """
    thetas, keeps = [float(t) for t in thetas], [int(k) for k in keeps]
    if not thetas or not keeps or any(not 0 < t < 1 for t in thetas) or any(not 1 <= k < study_size for k in keeps):
        raise InvalidCurveError(f"thetas must lie in (0, 1) and keeps in [1, {study_size}); got {thetas}, {keeps}")
    if not rankings or any(r not in RANKINGS for r in rankings):
        raise InvalidCurveError(f"rankings must be a non-empty subset of {', '.join(RANKINGS)}; got {list(rankings)}")
    if min(n_tuning, n_test, study_size) < 1 or not 0 < target_top3 <= 1:
        raise InvalidCurveError("n_tuning, n_test and study_size must be >= 1 and 0 < target_top3 <= 1")
    two = [(float(t1), int(k1), float(t2), int(k2)) for t1, k1, t2, k2 in two_rung_grid] if two_rung else []
    if any(not (0 < t1 < t2 < 1 and 1 <= k2 < k1 < study_size) for t1, k1, t2, k2 in two):
        raise InvalidCurveError(f"two-rung candidates (θ1, keep1, θ2, keep2) need 0 < θ1 < θ2 < 1 and "
                                f"1 <= keep2 < keep1 < {study_size}; got {two}")
    steps = int(n_steps or grid_steps(curve_set))
    pool = StudyPool.from_curves(curve_set, steps)
    tuning, test = sample_studies(pool, n_tuning=n_tuning, n_test=n_test, size=study_size, seed=seed)
    at = {t: barrier_step(t, steps) for t in thetas}
    score = {(r, t): ranking_scores(pool, r, t) for r in rankings for t in thetas}  # per pool row
    grid = [(r, t, k, ()) for r in rankings for t in thetas for k in keeps]
    grid += [("last-value", t2, k2, ((t1, k1),)) for t1, k1, t2, k2 in two
             if barrier_step(t2, steps) > barrier_step(t1, steps)]

    def table(studies: list[Study], ranking: str, theta: float, keep: int, before: tuple) -> np.ndarray:
        if before:  # (studies, metrics)
            rungs = [(barrier_step(t, steps), k) for t, k in (*before, (theta, keep))]
            return np.array([[rungs_metrics(st, rungs)[m] for m in _METRICS] for st in studies])
        s = score[(ranking, theta)]
        return np.array([[barrier_metrics(st, at[theta], keep, s[st.ids])[m] for m in _METRICS] for st in studies])

    tun = [table(tuning, *g) for g in grid]
    top3 = np.array([x[:, 1].mean() for x in tun])
    se = np.array([x[:, 1].std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else 0.0 for x in tun])
    cost = np.array([x[:, 3].mean() for x in tun])
    ok = np.flatnonzero(top3 - se >= target_top3 - 1e-12)
    i = int(ok[np.argmin(cost[ok])]) if ok.size else int(np.lexsort((cost, -(top3 - se)))[0])
    ranking, theta, keep, before = grid[i]
    mean = lambda x: dict(zip(_METRICS, np.nanmean(x, axis=0).tolist()))  # noqa: E731
    return {"name": curve_set.name, "n_curves": len(curve_set.curves), "n_steps": steps, "n_tuning": n_tuning,
            "n_test": n_test, "study_size": study_size, "target_top3": target_top3, "ranking": ranking,
            "stopper": RANKINGS[ranking], "theta": theta, "keep": keep, "rungs": list(before), "met": bool(ok.size),
            "tuning": mean(tun[i]) | {"top3_se": float(se[i])}, "test": mean(table(test, *grid[i]))}
