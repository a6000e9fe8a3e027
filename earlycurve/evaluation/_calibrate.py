"""Choose Eq 7 thresholds on one half of a data set's groups and check them on the other half.

Used for the ``NOISY_STAGE_RULE`` preset (cakelab): the groups (cluster settings) are split in two
by a seeded permutation, every grid point is scored by the median relative error at θ on the
calibration half, and the best one is reported on the held-out half next to the paper's thresholds.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from earlycurve._model import EarlyCurve
from earlycurve.errors import InvalidCurveError
from earlycurve.evaluation._datasets import CurveSet, RecordedCurve

__all__ = ["calibrate_stage_rule", "median_rel_err"]

ALPHAS = (0.5, 0.3, 0.2, 0.15, 0.1)
BETAS = (0.01, 0.05, 0.1, 0.2, 0.3, 0.5)
AGGREGATES = ("max", "mean")


def median_rel_err(curves: Sequence[RecordedCurve], predictor: EarlyCurve, theta: float) -> float:
    """Median of ``|ŷ − y| / y`` over curves cut at ``theta · max_steps``.

    Parameters
    ----------
    curves : sequence of RecordedCurve
    predictor : EarlyCurve
    theta : float
        Observed fraction of each curve's ``max_steps``, in (0, 1].

    Returns
    -------
    float
        Median relative error of the predicted final loss.
    """
    errs = []
    for rec in curves:
        steps, values = rec.head(theta)
        errs.append(abs(predictor.predict_final(steps, values, rec.max_steps).value - rec.final) / abs(rec.final))
    return float(np.median(errs))


def calibrate_stage_rule(
    curve_set: CurveSet,
    *,
    theta: float = 0.7,
    seed: int = 0,
    alphas: Sequence[float] = ALPHAS,
    betas: Sequence[float] = BETAS,
    aggregates: Sequence[str] = AGGREGATES,
) -> dict:
    """Grid-search (alpha, beta, aggregate) on half of the groups; score the winner on the rest.

    Parameters
    ----------
    curve_set : CurveSet
        Curves with at least two distinct ``group`` values.
    theta : float, default=0.7
    seed : int, default=0
        Seed of the group split.
    alphas, betas, aggregates : sequences
        The grid.

    Returns
    -------
    result : dict
        ``calibration_groups``, ``test_groups`` (counts of curves), ``best`` (the chosen
        thresholds and their calibration error), ``test`` (held-out median relative error of the
        chosen and of the paper's thresholds) and ``grid`` (every calibration score).

    Raises
    ------
    InvalidCurveError
        If the set has fewer than two groups.
    """
    groups = sorted({c.group for c in curve_set.curves})
    if len(groups) < 2:
        raise InvalidCurveError(f"data set {curve_set.name!r} has {len(groups)} group(s); calibration needs >= 2")
    perm = np.random.default_rng(seed).permutation(len(groups))
    cal_groups = {groups[i] for i in perm[: len(groups) // 2]}
    cal = [c for c in curve_set.curves if c.group in cal_groups]
    test = [c for c in curve_set.curves if c.group not in cal_groups]
    grid = []
    for alpha, beta, agg in itertools.product(alphas, betas, aggregates):
        ec = EarlyCurve(1, alpha=alpha, beta=beta, aggregate=agg)
        grid.append({"alpha": alpha, "beta": beta, "aggregate": agg, "median_rel_err": median_rel_err(cal, ec, theta)})
    best = min(grid, key=lambda row: row["median_rel_err"])
    chosen = {k: best[k] for k in ("alpha", "beta", "aggregate")}
    return {
        "theta": theta,
        "calibration_curves": len(cal),
        "test_curves": len(test),
        "best": best,
        "test": {
            "chosen": median_rel_err(test, EarlyCurve(1, **chosen), theta),
            "paper": median_rel_err(test, EarlyCurve(1), theta),
        },
        "grid": grid,
    }
