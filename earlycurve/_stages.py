"""Stage split (Eq 7, [I] D7) and the plateau rule ([I] D8), as pure functions of a recorded curve.

Eq 7 (the paper's stage split): with ``δ_k = |y_k − y_{k−1}| / |y_{k−1}|`` (relative change between consecutive
*observations*), a new stage starts at observation ``k`` when ``δ_k > α`` after a steady period,
``agg(δ_{k−w}, …, δ_{k−1}) < β``. Paper thresholds: α = 0.5, β = 0.01, w = 5.

[I] D7 choices, all configurable: relative change (scale-free thresholds); ``agg = max`` (``"mean"``
offered); splits on **decreases only** by default, since a learning-rate drop lowers the loss
(``direction="both"`` also splits on jumps up). No smoothing.

Plateau (the paper's EarlyCurve): the model "comes to convergence" and is treated as finished. [I] D8: the
curve is a plateau when every observation in the last ``w_p = max(10, 0.05 · max_steps)`` *steps*
differs from the value at the window's start by less than ``tol = 1e-4`` relative. That is 100×
stricter than β, so the steady stretch before a learning-rate drop (δ < 0.01 per observation) is not
taken for a plateau and the trial is not killed while it waits for its next stage.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from earlycurve.errors import InvalidCurveError

__all__ = ["Stage", "StageRule", "PlateauRule", "split_stages", "is_plateau", "relative_changes", "NOISY_STAGE_RULE"]

_AGGREGATES = ("max", "mean")
_DIRECTIONS = ("decrease", "both")


@dataclass(frozen=True, slots=True, kw_only=True)
class Stage:
    """One learning-rate stage of an observed curve (Eq 6: ``l_s ≤ k < r_s``).

    Attributes
    ----------
    index : int
        Stage number ``s``, from 0.
    start : int
        Position of the stage's first observation in the curve's arrays.
    stop : int
        One past the position of its last observation.
    start_step : float
        ``l_s``, the step at which the stage began (training steps).
    last_step : float
        Step of the stage's last observation so far (training steps).
    """

    index: int
    start: int
    stop: int
    start_step: float
    last_step: float

    @property
    def n_points(self) -> int:
        """Number of observations in the stage."""
        return self.stop - self.start


@dataclass(frozen=True, slots=True, kw_only=True)
class StageRule:
    """Thresholds of Eq 7 ([I] D7).

    Parameters
    ----------
    alpha : float, default=0.5
        A new stage needs a relative change ``δ_k > alpha`` (paper: 0.5).
    beta : float, default=0.01
        ... after a steady period with ``agg(δ over the previous window) < beta`` (paper: 0.01).
    window : int, default=5
        Observations in the steady period (paper: five).
    aggregate : {"max", "mean"}, default="max"
        How the steady period's changes are combined.
    direction : {"decrease", "both"}, default="decrease"
        Split only when the loss drops, or on any jump.
    """

    alpha: float = 0.5
    beta: float = 0.01
    window: int = 5
    aggregate: str = "max"
    direction: str = "decrease"

    def __post_init__(self) -> None:
        if not self.alpha > 0:
            raise InvalidCurveError(f"StageRule.alpha is {self.alpha!r}, but must be > 0")
        if not self.beta > 0:
            raise InvalidCurveError(f"StageRule.beta is {self.beta!r}, but must be > 0")
        if int(self.window) != self.window or self.window < 1:
            raise InvalidCurveError(f"StageRule.window is {self.window!r}, but must be an integer >= 1")
        if self.aggregate not in _AGGREGATES:
            raise InvalidCurveError(f"StageRule.aggregate is {self.aggregate!r}, but must be one of {_AGGREGATES}")
        if self.direction not in _DIRECTIONS:
            raise InvalidCurveError(f"StageRule.direction is {self.direction!r}, but must be one of {_DIRECTIONS}")


@dataclass(frozen=True, slots=True, kw_only=True)
class PlateauRule:
    """The plateau rule of the paper's EarlyCurve ([I] D8).

    Parameters
    ----------
    tol : float or None, default=1e-4
        Largest relative change over the window that still counts as a plateau. ``None`` disables
        the rule (for models with a known step schedule).
    window_steps : float or None, default=None
        Window length in training steps; ``None`` means ``max(10, 0.05 · max_steps)``.
    """

    tol: float | None = 1e-4
    window_steps: float | None = None

    def __post_init__(self) -> None:
        if self.tol is not None and not self.tol > 0:
            raise InvalidCurveError(f"PlateauRule.tol is {self.tol!r}, but must be > 0 or None")
        if self.window_steps is not None and not self.window_steps > 0:
            raise InvalidCurveError(f"PlateauRule.window_steps is {self.window_steps!r}, but must be > 0 or None")

    def window_for(self, max_steps: float) -> float:
        """Window length in steps for a trial of ``max_steps`` steps.

        Parameters
        ----------
        max_steps : float
            ``S_max`` of the trial, steps.

        Returns
        -------
        float
            ``window_steps`` if set, else ``max(10, 0.05 · max_steps)``.
        """
        if self.window_steps is not None:
            return float(self.window_steps)
        return max(10.0, 0.05 * float(max_steps))


def relative_changes(values: np.ndarray) -> np.ndarray:
    """``δ_k = |y_k − y_{k−1}| / |y_{k−1}|`` for k = 1 … n−1.

    Parameters
    ----------
    values : ndarray of shape (n_points,)
        Loss values.

    Returns
    -------
    delta : ndarray of shape (n_points − 1,)
        Relative changes (dimensionless); ``inf`` where the previous value is 0 and the value
        changed, 0 where both are 0.
    """
    prev, cur = values[:-1], values[1:]
    diff = np.abs(cur - prev)
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = diff / np.abs(prev)
    delta[(prev == 0) & (diff == 0)] = 0.0
    return delta


def split_stages(steps: np.ndarray, values: np.ndarray, rule: StageRule = StageRule()) -> tuple[Stage, ...]:
    """Split a curve into stages with Eq 7.

    Parameters
    ----------
    steps : ndarray of shape (n_points,)
        Training steps of the observations, strictly increasing.
    values : ndarray of shape (n_points,)
        Loss at those steps.
    rule : StageRule
        Thresholds.

    Returns
    -------
    stages : tuple of Stage
        At least one stage (empty curve: none), in order, covering every observation.
    """
    n = len(values)
    if n == 0:
        return ()
    delta = relative_changes(values)  # delta[k-1] is δ_k
    agg = np.max if rule.aggregate == "max" else np.mean
    w = int(rule.window)
    starts = [0]
    for k in range(w + 1, n):
        if delta[k - 1] <= rule.alpha:
            continue
        if rule.direction == "decrease" and not values[k] < values[k - 1]:
            continue
        if agg(delta[k - 1 - w : k - 1]) < rule.beta:
            starts.append(k)
    bounds = starts + [n]
    return tuple(
        Stage(
            index=i,
            start=bounds[i],
            stop=bounds[i + 1],
            start_step=float(steps[bounds[i]]),
            last_step=float(steps[bounds[i + 1] - 1]),
        )
        for i in range(len(starts))
    )


def is_plateau(steps: np.ndarray, values: np.ndarray, max_steps: float, rule: PlateauRule = PlateauRule()) -> bool:
    """Whether the curve has converged (the paper's EarlyCurve, [I] D8).

    Parameters
    ----------
    steps : ndarray of shape (n_points,)
        Training steps of the observations, strictly increasing.
    values : ndarray of shape (n_points,)
        Loss at those steps.
    max_steps : float
        ``S_max`` of the trial, in steps (sets the default window).
    rule : PlateauRule
        Threshold and window.

    Returns
    -------
    plateau : bool
        True when the window is fully observed (an observation at or before
        ``steps[-1] − window``) and every value since then is within ``tol`` (relative) of the value
        at the window's start. Always False when ``rule.tol`` is None.
    """
    if rule.tol is None or len(values) < 2:
        return False
    window = rule.window_for(max_steps)
    first = int(np.searchsorted(steps, steps[-1] - window, side="right")) - 1
    if first < 0:
        return False
    ref = float(values[first])
    span = np.abs(values[first:] - ref)
    if ref == 0:
        return bool(np.all(span == 0))
    return bool(np.max(span) / abs(ref) < rule.tol)


#: [I] Eq 7 thresholds for coarse, noisy curves (few evaluations, each with sampling noise of
#: several percent), where the paper's α = 0.5, β = 0.01 never fire: a drop of more than 15 % after
#: five observations whose *mean* relative change is below 30 %. Chosen by grid search on a seeded
#: calibration half of the cakelab cluster settings and checked on the other half
#: (``earlycurve.evaluation.calibrate_stage_rule``; figures in ``docs/design/earlycurve.md``).
NOISY_STAGE_RULE = {"alpha": 0.15, "beta": 0.3, "aggregate": "mean"}
