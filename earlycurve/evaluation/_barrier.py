"""Choose the θ barrier's setting on a family's own curves (``spottune curves choose``; docs/earlycurve.md §8.10-§8.11).

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
logreg and linear-svm, §8.11).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from earlycurve._model import EarlyCurve
from earlycurve.errors import InvalidCurveError
from earlycurve.evaluation._datasets import CurveSet
from earlycurve.evaluation._stoppers import one_shot_steps
from earlycurve.evaluation._stopping import Study, StudyPool, grid_steps, sample_studies, study_metrics

__all__ = ["BARRIER_KEEPS", "BARRIER_THETAS", "RANKINGS", "barrier_metrics", "barrier_step", "choose_barrier",
           "ranking_scores"]

#: θ grid of :func:`choose_barrier` (benchmarks/bench_barrier.py's, fixed before its first run).
BARRIER_THETAS = (0.04, 0.06, 0.1, 0.15, 0.2, 0.3, 0.5)
#: keep grid of :func:`choose_barrier` (the same bench's).
BARRIER_KEEPS = (2, 3, 4, 5, 6)
_METRICS = ("top1", "top3", "regret", "cost")
#: Rankings at θ :func:`choose_barrier` can choose from, with the stopper that ranks that way.
RANKINGS = {"last-value": "barrier", "paper": "paper"}


def barrier_metrics(study: Study, step: int, keep: int, scores: np.ndarray | None = None) -> dict[str, float]:
    """:func:`study_metrics` of one study under the barrier at grid ``step`` (1-based) keeping the ``keep`` trials
    with the lowest ``scores`` (shape (size,); default the last values at ``step``; ties: the earlier trial)."""
    scores = study.curves[:, step - 1] if scores is None else scores
    return study_metrics(study, one_shot_steps(study, scores, step, keep))


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
                   seed: int = 0, rankings: Sequence[str] = ("last-value",)) -> dict:
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

    Returns
    -------
    result : dict
        ``ranking``, ``stopper`` (its ``--stopper``), ``theta``, ``keep``, ``met`` (the tuning score reached the
        target), ``tuning`` and ``test``: mean top-1, top-3, regret (loss units) and cost (steps ÷ training every
        trial), with ``top3_se`` on tuning; ``name``, ``n_curves``, ``n_steps``, ``n_tuning``, ``n_test``,
        ``study_size`` and ``target_top3``.

    Raises
    ------
    InvalidCurveError
        A θ outside (0, 1), a keep outside [1, study_size), no candidate, an unknown ranking, too few curves for
        two halves, or a count below 1.
    """
    thetas, keeps = [float(t) for t in thetas], [int(k) for k in keeps]
    if not thetas or not keeps or any(not 0 < t < 1 for t in thetas) or any(not 1 <= k < study_size for k in keeps):
        raise InvalidCurveError(f"thetas must lie in (0, 1) and keeps in [1, {study_size}); got {thetas}, {keeps}")
    if not rankings or any(r not in RANKINGS for r in rankings):
        raise InvalidCurveError(f"rankings must be a non-empty subset of {', '.join(RANKINGS)}; got {list(rankings)}")
    if min(n_tuning, n_test, study_size) < 1 or not 0 < target_top3 <= 1:
        raise InvalidCurveError("n_tuning, n_test and study_size must be >= 1 and 0 < target_top3 <= 1")
    steps = int(n_steps or grid_steps(curve_set))
    pool = StudyPool.from_curves(curve_set, steps)
    tuning, test = sample_studies(pool, n_tuning=n_tuning, n_test=n_test, size=study_size, seed=seed)
    at = {t: barrier_step(t, steps) for t in thetas}
    score = {(r, t): ranking_scores(pool, r, t) for r in rankings for t in thetas}  # per pool row
    grid = [(r, t, k) for r in rankings for t in thetas for k in keeps]

    def table(studies: list[Study], ranking: str, theta: float, keep: int) -> np.ndarray:  # (studies, metrics)
        s = score[(ranking, theta)]
        return np.array([[barrier_metrics(st, at[theta], keep, s[st.ids])[m] for m in _METRICS] for st in studies])

    tun = [table(tuning, *g) for g in grid]
    top3 = np.array([x[:, 1].mean() for x in tun])
    se = np.array([x[:, 1].std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else 0.0 for x in tun])
    cost = np.array([x[:, 3].mean() for x in tun])
    ok = np.flatnonzero(top3 - se >= target_top3 - 1e-12)
    i = int(ok[np.argmin(cost[ok])]) if ok.size else int(np.lexsort((cost, -(top3 - se)))[0])
    ranking, theta, keep = grid[i]
    mean = lambda x: dict(zip(_METRICS, np.nanmean(x, axis=0).tolist()))  # noqa: E731
    return {"name": curve_set.name, "n_curves": len(curve_set.curves), "n_steps": steps, "n_tuning": n_tuning,
            "n_test": n_test, "study_size": study_size, "target_top3": target_top3, "ranking": ranking,
            "stopper": RANKINGS[ranking], "theta": theta, "keep": keep, "met": bool(ok.size),
            "tuning": mean(tun[i]) | {"top3_se": float(se[i])}, "test": mean(table(test, ranking, theta, keep))}
