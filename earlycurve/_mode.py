"""Convert a metric to the loss every earlycurve model works on, and back.

EarlyCurve's curve family (Eq 4) is non-increasing and non-negative, so it models a **loss**. A
metric to maximise (accuracy, F1, ...) is the caller's job: ``loss = upper − value``, e.g.
``1 − accuracy`` with the default ``upper = 1``.
"""

from __future__ import annotations

import numpy as np

from earlycurve.errors import InvalidCurveError

__all__ = ["to_loss", "from_loss"]

_MODES = ("min", "max")


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise InvalidCurveError(f"mode is {mode!r}, but must be one of {_MODES}")


def to_loss(values: np.ndarray, mode: str = "min", *, upper: float = 1.0) -> np.ndarray:
    """Turn metric values into a loss (lower is better).

    Parameters
    ----------
    values : array-like of shape (n_points,)
        Metric values.
    mode : {"min", "max"}, default="min"
        ``"min"``: the metric is already a loss and is returned as is. ``"max"``: the metric is
        maximised and ``upper − values`` is returned.
    upper : float, default=1.0
        Best possible value of a maximised metric (1 for accuracy in [0, 1]).

    Returns
    -------
    loss : ndarray of shape (n_points,)

    Examples
    --------
    >>> to_loss([0.25, 0.75], "max").tolist()
    [0.75, 0.25]
    """
    _check_mode(mode)
    values = np.asarray(values, dtype=float)
    return values.copy() if mode == "min" else upper - values


def from_loss(loss: np.ndarray | float, mode: str = "min", *, upper: float = 1.0) -> np.ndarray:
    """Inverse of :func:`to_loss`.

    Parameters
    ----------
    loss : array-like of shape (n_points,) or float
        Loss values (for example a predicted final loss).
    mode : {"min", "max"}, default="min"
        As for :func:`to_loss`.
    upper : float, default=1.0
        As for :func:`to_loss`.

    Returns
    -------
    values : ndarray of shape (n_points,)
        Metric values. Note that an interval ``[low, high]`` on the loss maps to
        ``[upper − high, upper − low]`` for ``mode="max"``.
    """
    _check_mode(mode)
    loss = np.asarray(loss, dtype=float)
    return loss.copy() if mode == "min" else upper - loss
