"""Rank trials at θ·S_max by predicted final loss and keep the top-k (the paper's EarlyCurve at θ, Algorithm 1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from earlycurve._protocol import FinalMetricPredictor, Prediction
from earlycurve.errors import InvalidCurveError

__all__ = ["Ranking", "rank_trials"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Ranking:
    """Predicted final losses of a study and the trials kept.

    Attributes
    ----------
    predictions : tuple of Prediction
        One per trial, in input order.
    order : tuple of int
        Trial positions sorted by predicted final loss, best (lowest) first; ties keep input order.
    top_k : tuple of int
        The first ``k`` of ``order`` (the paper's rule).
    kept : tuple of int
        ``top_k`` plus, with ``keep_overlapping``, every other trial whose interval reaches the
        k-th trial's interval (``low_j ≤ high_k``); in ``order``.
    """

    predictions: tuple[Prediction, ...]
    order: tuple[int, ...]
    top_k: tuple[int, ...]
    kept: tuple[int, ...]

    @property
    def values(self) -> np.ndarray:
        """Predicted final losses, ndarray of shape (n_trials,), in input order."""
        return np.array([p.value for p in self.predictions])


def rank_trials(
    curves: Sequence[tuple[np.ndarray, np.ndarray]],
    predictor: FinalMetricPredictor,
    max_steps: int | Sequence[int],
    *,
    top_k: int = 3,
    keep_overlapping: bool = False,
) -> Ranking:
    """Predict every trial's final loss and select the top-k.

    Parameters
    ----------
    curves : sequence of (steps, values)
        Per trial, the observations so far: ``steps`` and ``values`` are arrays of shape
        (n_points_i,), values a loss (lower is better).
    predictor : FinalMetricPredictor
        EarlyCurve or a baseline.
    max_steps : int or sequence of int
        ``S_max`` in steps, one for all trials or one per trial.
    top_k : int, default=3
        Trials to keep (clipped to the number of trials).
    keep_overlapping : bool, default=False
        Also keep trials whose uncertainty interval overlaps the k-th trial's (a cautious caller);
        the default is the paper's point-prediction ranking.

    Returns
    -------
    ranking : Ranking

    Raises
    ------
    InvalidCurveError
        If there is no trial, ``top_k`` is not an integer ≥ 1, ``max_steps`` has the wrong length, or a curve is
        malformed.

    Examples
    --------
    >>> import numpy as np
    >>> from earlycurve import LastValue
    >>> curves = [(np.arange(3), np.array([3.0, 2.0, 1.5])), (np.arange(3), np.array([3.0, 2.0, 1.0]))]
    >>> rank_trials(curves, LastValue(), 10, top_k=1).top_k
    (1,)
    """
    n = len(curves)
    if n == 0:
        raise InvalidCurveError("rank_trials got no trial; at least 1 is needed")
    if int(top_k) != top_k or top_k < 1:
        raise InvalidCurveError(f"top_k is {top_k!r}, but must be an integer >= 1")
    limits = [max_steps] * n if np.ndim(max_steps) == 0 else list(max_steps)
    if len(limits) != n:
        raise InvalidCurveError(f"max_steps has {len(limits)} entries for {n} trials")
    predictions = tuple(predictor.predict_final(s, v, m) for (s, v), m in zip(curves, limits, strict=True))
    values = np.array([p.value for p in predictions])
    order = tuple(int(i) for i in np.argsort(values, kind="stable"))
    k = min(int(top_k), n)
    top = order[:k]
    kept = top
    if keep_overlapping:
        boundary = predictions[top[-1]].high
        kept = top + tuple(i for i in order[k:] if predictions[i].low <= boundary)
    return Ranking(predictions=predictions, order=order, top_k=top, kept=kept)
