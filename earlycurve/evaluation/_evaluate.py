"""Evaluate final-metric predictors on recorded curves: prediction error and top-k selection.

For each data set, predictor and θ every complete curve is cut at ``θ · max_steps`` and its final
loss predicted once (predictions do not depend on the study, so they are computed once per curve
and reused). Then:

- **error** over all curves: median and 90th percentile of ``|ŷ − y| / y`` (the paper's EarlyCurve evaluation
  [I], on the loss scale), and how often the true final loss lies in the predictor's interval (``coverage``);
- **selection** over ``n_studies`` seeded studies of ``study_size`` curves drawn without
  replacement: ``top1`` (the predicted best is the true best), ``topk_recall`` (the true best is in
  the predicted top-k), ``regret1`` (true final loss of the predicted best minus the best's) and
  ``regretk`` (the same for the best of the predicted top-k, which the orchestrator trains to the
  end), plus ``overlap_recall`` / ``overlap_kept`` when trials whose interval reaches the k-th
  trial's are kept too.

:func:`evaluate_learned` does the same for a predictor learned from previous runs
(:class:`earlycurve.ResidualCurvePredictor`): fitted on a seeded half of the set, evaluated on the other half
against the last value (docs/design/earlycurve.md §8.7, "in-set").

All randomness comes from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from earlycurve._baselines import SLAQ, BestValue, LastValue
from earlycurve._model import EarlyCurve
from earlycurve._protocol import FinalMetricPredictor
from earlycurve._residual import ResidualCurvePredictor
from earlycurve._stages import NOISY_STAGE_RULE
from earlycurve.errors import InvalidCurveError
from earlycurve.evaluation._datasets import CurveSet, RecordedCurve
from earlycurve.evaluation._stopping import StudyPool, grid_steps

__all__ = [
    "THETAS",
    "PredictionTable",
    "default_predictors",
    "predict_table",
    "error_rows",
    "selection_rows",
    "evaluate_set",
    "evaluate_learned",
    "subsample",
]

THETAS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def default_predictors(seed: int = 0) -> dict[str, FinalMetricPredictor]:
    """The predictors compared in ``docs/design/earlycurve.md``, by name.

    ``earlycurve`` is the paper's setting (Eq 7 with α = 0.5, β = 0.01; fit on the whole last
    stage); ``earlycurve-noisy`` swaps in :data:`earlycurve.NOISY_STAGE_RULE`;
    ``earlycurve-rec`` is :meth:`earlycurve.EarlyCurve.recommended` (noisy rule plus a fit on the
    most recent half of the stage). ``max_steps`` comes from each ``predict_final`` call.

    Parameters
    ----------
    seed : int, default 0
        ``random_state`` of the predictors that bootstrap their intervals.

    Returns
    -------
    dict of str -> FinalMetricPredictor
    """
    return {
        "earlycurve": EarlyCurve(1, random_state=seed),
        "earlycurve-noisy": EarlyCurve(1, random_state=seed, **NOISY_STAGE_RULE),
        "earlycurve-rec": EarlyCurve.recommended(1, random_state=seed),
        "slaq": SLAQ(random_state=seed),
        "last_value": LastValue(),
        "best_value": BestValue(),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictionTable:
    """Predictions of one predictor on every curve of a set, for every θ.

    Attributes
    ----------
    thetas : tuple of float
    value, low, high : ndarray of shape (n_thetas, n_curves)
        Predicted final loss and interval bounds.
    n_stages : ndarray of shape (n_thetas, n_curves)
        Stages found (Eq 7).
    method : ndarray of shape (n_thetas, n_curves), dtype object
        How each prediction was made (``"fit"``, ``"shifted"``, ...).
    """

    thetas: tuple[float, ...]
    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_stages: np.ndarray
    method: np.ndarray


def predict_table(curves: Sequence[RecordedCurve], predictor: FinalMetricPredictor, thetas: Sequence[float] = THETAS) -> PredictionTable:
    """Predict the final loss of every curve at every θ.

    Parameters
    ----------
    curves : sequence of RecordedCurve
    predictor : FinalMetricPredictor
    thetas : sequence of float, default=THETAS
        Observed fractions of ``max_steps``, each in (0, 1].

    Returns
    -------
    table : PredictionTable

    Raises
    ------
    InvalidCurveError
        If a θ is outside (0, 1], or a curve is invalid for the predictor.
    """
    for theta in thetas:
        if not 0 < theta <= 1:
            raise InvalidCurveError(f"theta is {theta!r}, but must be 0 < theta <= 1")
    shape = (len(thetas), len(curves))
    value, low, high = np.empty(shape), np.empty(shape), np.empty(shape)
    n_stages = np.zeros(shape, dtype=int)
    method = np.empty(shape, dtype=object)
    for i, theta in enumerate(thetas):
        for j, rec in enumerate(curves):
            steps, values = rec.head(theta)
            pred = predictor.predict_final(steps, values, rec.max_steps)
            value[i, j], low[i, j], high[i, j] = pred.value, pred.low, pred.high
            n_stages[i, j], method[i, j] = pred.n_stages, pred.method
    return PredictionTable(thetas=tuple(thetas), value=value, low=low, high=high, n_stages=n_stages, method=method)


def error_rows(curves: Sequence[RecordedCurve], tables: Mapping[str, PredictionTable]) -> list[dict]:
    """Per predictor and θ: median / p90 relative error, interval coverage, how predictions were made.

    Parameters
    ----------
    curves : sequence of RecordedCurve
    tables : mapping of str to PredictionTable
        From :func:`predict_table`, same curve order.

    Returns
    -------
    rows : list of dict
        Keys ``predictor, theta, median_rel_err, p90_rel_err, coverage, multi_stage`` (share of
        curves with ≥ 2 stages) and ``methods`` (count per method).
    """
    finals = np.array([c.final for c in curves])
    denom = np.where(finals == 0, np.nan, np.abs(finals))
    rows = []
    for name, table in tables.items():
        for i, theta in enumerate(table.thetas):
            rel = np.abs(table.value[i] - finals) / denom
            covered = (table.low[i] <= finals) & (finals <= table.high[i])
            methods, counts = np.unique(table.method[i].astype(str), return_counts=True)
            rows.append(
                {
                    "predictor": name,
                    "theta": theta,
                    "median_rel_err": float(np.nanmedian(rel)),
                    "p90_rel_err": float(np.nanpercentile(rel, 90)),
                    "coverage": float(np.mean(covered)),
                    "multi_stage": float(np.mean(table.n_stages[i] >= 2)),
                    "methods": {str(m): int(c) for m, c in zip(methods, counts, strict=True)},
                }
            )
    return rows


def selection_rows(
    curves: Sequence[RecordedCurve],
    tables: Mapping[str, PredictionTable],
    *,
    n_studies: int,
    study_size: int = 16,
    top_k: int = 3,
    seed: int = 0,
) -> list[dict]:
    """Top-k selection quality over seeded random studies.

    Parameters
    ----------
    curves : sequence of RecordedCurve
    tables : mapping of str to PredictionTable
        From :func:`predict_table`, same curve order.
    n_studies : int
        Studies to draw.
    study_size : int, default=16
        Configurations per study (clipped to the number of curves).
    top_k : int, default=3
    seed : int, default=0

    Returns
    -------
    rows : list of dict
        Keys ``predictor, theta, top1, topk_recall, regret1, regretk, overlap_recall,
        overlap_kept`` (means over studies; regrets in loss units).

    Raises
    ------
    InvalidCurveError
        If ``n_studies < 1`` or ``top_k < 1``.
    """
    if n_studies < 1:
        raise InvalidCurveError(f"n_studies is {n_studies!r}, but must be >= 1")
    if top_k < 1:
        raise InvalidCurveError(f"top_k is {top_k!r}, but must be >= 1")
    finals = np.array([c.final for c in curves])
    size = min(study_size, len(curves))
    rng = np.random.default_rng(seed)
    studies = np.array([rng.choice(len(curves), size=size, replace=False) for _ in range(n_studies)])
    k = min(top_k, size)
    true_f = finals[studies]  # (n_studies, size)
    best = np.argmin(true_f, axis=1)
    best_f = true_f[np.arange(n_studies), best]
    rows = []
    for name, table in tables.items():
        for i, theta in enumerate(table.thetas):
            pred = table.value[i][studies]
            order = np.argsort(pred, axis=1, kind="stable")
            topk = order[:, :k]
            top1 = order[:, 0] == best
            recall = np.any(topk == best[:, None], axis=1)
            regret1 = true_f[np.arange(n_studies), order[:, 0]] - best_f
            regretk = np.min(np.take_along_axis(true_f, topk, axis=1), axis=1) - best_f
            boundary = table.high[i][studies][np.arange(n_studies), order[:, k - 1]]
            kept = table.low[i][studies] <= boundary[:, None]
            kept[np.arange(n_studies)[:, None], topk] = True
            rows.append(
                {
                    "predictor": name,
                    "theta": theta,
                    "top1": float(np.mean(top1)),
                    "topk_recall": float(np.mean(recall)),
                    "regret1": float(np.mean(regret1)),
                    "regretk": float(np.mean(regretk)),
                    "overlap_recall": float(np.mean(kept[np.arange(n_studies), best])),
                    "overlap_kept": float(np.mean(kept.sum(axis=1))),
                }
            )
    return rows


def subsample(curve_set: CurveSet, max_curves: int | None, seed: int = 0) -> tuple[RecordedCurve, ...]:
    """At most ``max_curves`` curves of a set, drawn without replacement (seeded), in file order.

    Parameters
    ----------
    curve_set : CurveSet
    max_curves : int or None
        None: every curve.
    seed : int, default 0

    Returns
    -------
    tuple of RecordedCurve

    Raises
    ------
    InvalidCurveError
        If ``max_curves < 1``.
    """
    curves = curve_set.curves
    if max_curves is None or max_curves >= len(curves):
        return curves
    if max_curves < 1:
        raise InvalidCurveError(f"max_curves is {max_curves!r}, but must be >= 1")
    idx = np.sort(np.random.default_rng(seed).choice(len(curves), size=max_curves, replace=False))
    return tuple(curves[i] for i in idx)


def evaluate_set(
    curve_set: CurveSet,
    predictors: Mapping[str, FinalMetricPredictor],
    *,
    thetas: Sequence[float] = THETAS,
    n_studies: int = 200,
    study_size: int = 16,
    top_k: int = 3,
    seed: int = 0,
    max_curves: int | None = None,
) -> dict:
    """Error and selection rows for one data set (see the module docstring).

    Parameters
    ----------
    curve_set : CurveSet
    predictors : mapping of str to FinalMetricPredictor
    thetas : sequence of float, default THETAS
        Observed fractions of ``max_steps``, each in (0, 1].
    n_studies, study_size, top_k, seed : int
        As :func:`selection_rows`.
    max_curves : int, optional
        Evaluate a seeded subsample of at most this many curves (:func:`subsample`).

    Returns
    -------
    result : dict
        ``name``, ``counts`` (loader counts plus ``evaluated``), ``errors`` (:func:`error_rows`),
        ``selection`` (:func:`selection_rows`).

    Raises
    ------
    InvalidCurveError
        If the set has no complete curve, or as :func:`predict_table`.
    """
    curves = subsample(curve_set, max_curves, seed)
    if not curves:
        raise InvalidCurveError(f"data set {curve_set.name!r} has no complete curve to evaluate")
    tables = {name: predict_table(curves, p, thetas) for name, p in predictors.items()}
    return {
        "name": curve_set.name,
        "counts": dict(curve_set.counts) | {"evaluated": len(curves)},
        "errors": error_rows(curves, tables),
        "selection": selection_rows(curves, tables, n_studies=n_studies, study_size=study_size, top_k=top_k, seed=seed),
    }


def evaluate_learned(
    curve_set: CurveSet,
    *,
    thetas: Sequence[float] = THETAS,
    n_studies: int = 200,
    study_size: int = 16,
    top_k: int = 3,
    seed: int = 0,
    max_curves: int | None = None,
) -> dict | None:
    """A predictor learned from previous runs against the last value, on curves it was not fitted on.

    The set's curves are put on the early stoppers' progress grid (:func:`grid_steps` points,
    :meth:`StudyPool.from_curves`), so every curve of a study is cut at the same step, as the orchestrator ranks
    trials at one θ step (on raw curves recorded at uneven steps the curves of one study would be cut at different
    fractions and answered by different θ models). The curves are split in two seeded halves
    (``default_rng([seed, 1])``). The first half plays the previous runs: :class:`earlycurve.ResidualCurvePredictor`
    (constructor defaults, ``top_k`` and ``study_size`` of the evaluation, the whole set one group of pseudo-studies,
    as in §8.7) is fitted on it. The second half is evaluated as :func:`evaluate_set` does, for ``last_value`` and
    ``learned``: the curve predictor's recall target is ``learned``'s ``topk_recall`` >= ``last_value``'s at every θ
    (docs/design/earlycurve.md §8.7, "in-set").

    Parameters
    ----------
    curve_set : CurveSet
        Complete recorded curves (losses).
    thetas, n_studies, study_size, top_k, seed, max_curves
        As in :func:`evaluate_set` (θ: observed fractions of ``max_steps``; ``max_curves`` subsamples the set
        first). ``top_k`` and ``study_size`` are also the model's cross-validation target.

    Returns
    -------
    result : dict or None
        :func:`evaluate_set`'s result for the held-out half (``name`` gets the suffix ``" (held-out half)"``) plus
        ``learned``: ``grid_steps``, ``train_curves`` / ``test_curves`` (counts), ``train_ids`` / ``test_ids`` (the
        curve ids of each half) and the chosen ridge ``alpha`` per θ of the model (None: no coefficient, the last
        value's ranking; JSON-safe). None when a half would hold fewer than ``max(study_size, 5)`` curves (5: the
        model's cross-validation folds).

    Raises
    ------
    InvalidCurveError
        The fit's (e.g. fewer than 5 usable training curves at a θ, as when losses are <= 0 under the log
        transform) or :func:`evaluate_set`'s.
    """
    curves = subsample(curve_set, max_curves, seed)
    half = len(curves) // 2
    if half < max(study_size, 5):
        return None
    n = grid_steps(CurveSet(name=curve_set.name, curves=curves))
    pool = StudyPool.from_curves(curves, n)
    steps = np.arange(1, n + 1, dtype=float)
    gridded = [RecordedCurve(curve_id=c.curve_id, group=c.group, steps=steps, values=row, max_steps=float(n))
               for c, row in zip(curves, pool.grid)]
    order = np.random.default_rng([seed, 1]).permutation(len(curves))
    train = [gridded[i] for i in np.sort(order[:half])]
    test = tuple(gridded[i] for i in np.sort(order[half:]))
    model = ResidualCurvePredictor(top_k=top_k, study_size=study_size, random_state=seed).fit(
        [(c.steps, c.values, c.max_steps) for c in train])
    held_out = CurveSet(name=f"{curve_set.name} (held-out half)", curves=test,
                        counts={"grid_steps": n, "train": len(train), "test": len(test)})
    result = evaluate_set(held_out, {"last_value": LastValue(), "learned": model}, thetas=thetas,
                          n_studies=n_studies, study_size=study_size, top_k=top_k, seed=seed)
    result["learned"] = {"grid_steps": n, "train_curves": len(train), "test_curves": len(test),
                         "train_ids": [c.curve_id for c in train], "test_ids": [c.curve_id for c in test],
                         "alpha": {f"{t:g}": a if math.isfinite(a) else None for t, a in model.alpha_.items()}}
    return result
