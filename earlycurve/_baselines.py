"""Baselines for EarlyCurve, each a :class:`FinalMetricPredictor` (the paper's EarlyCurve evaluation).

- :class:`SLAQ`: one-stage fit of the same family (Eq 4) over the whole curve, ``g = k − k_0``;
- :class:`LastValue`: the last observed loss;
- :class:`BestValue`: the lowest loss observed so far.

They work on a loss, like EarlyCurve. None of them has a plateau rule (``plateau=False``).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from earlycurve._curve import N_PARAMS, CurveFitter
from earlycurve._model import noise_std
from earlycurve._protocol import FinalMetricPredictor, Prediction, check_curve
from earlycurve.errors import CurveFitError, InvalidCurveError

__all__ = ["SLAQ", "LastValue", "BestValue"]


class SLAQ(FinalMetricPredictor):
    """SLAQ's one-stage extrapolation: Eq 4 fitted to the whole curve so far.

    Parameters
    ----------
    loss : str, default="linear"
        Residual loss of ``least_squares``.
    interval : {"jacobian", "bootstrap", "none"}, default="jacobian"
        Uncertainty estimate (see :class:`earlycurve.CurveFitter`).
    level : float, default=0.9
        Nominal coverage of the interval.
    random_state : int or None, default=None
        Seed of the bootstrap.

    Notes
    -----
    [I] With fewer than 4 points, or when the solver fails, it returns the last value (SLAQ itself
    does not say); ``method`` then reads ``"last_value"``.

    Raises
    ------
    InvalidCurveError
        If ``level`` is outside (0, 1), or ``loss`` or ``interval`` is unknown.
    """

    def __init__(self, *, loss: str = "linear", interval: str = "jacobian", level: float = 0.9, random_state: int | None = None) -> None:
        self.loss = loss
        self.interval = interval
        self.level = level
        self.random_state = random_state
        if not 0 < level < 1:
            raise InvalidCurveError(f"SLAQ.level is {level!r}, but must be 0 < level < 1")
        CurveFitter(loss=loss, interval=interval)._check_params()

    def predict_final(self, steps: np.ndarray, values: np.ndarray, max_steps: int) -> Prediction:
        """Predict the loss at ``max_steps`` from a one-stage fit (see :class:`FinalMetricPredictor`).

        Parameters
        ----------
        steps : array-like of shape (n_points,)
            Training steps of the observations, strictly increasing, ``≤ max_steps``.
        values : array-like of shape (n_points,)
            Loss at those steps (lower is better), finite.
        max_steps : int
            ``S_max`` of the trial, in training steps.

        Returns
        -------
        prediction : Prediction
            Eq 4's value at ``max_steps`` with its interval; ``n_stages`` 1.

        Raises
        ------
        TooFewPointsError, InvalidCurveError
            No observation, or malformed input (:func:`earlycurve.check_curve`).
        """
        steps, values = check_curve(steps, values, max_steps)
        if steps.size >= N_PARAMS:
            fitter = CurveFitter(loss=self.loss, interval=self.interval, random_state=self.random_state)
            try:
                fitter.fit(steps - steps[0], values)
            except CurveFitError:
                pass
            else:
                value, low, high = (float(v[0]) for v in fitter.predict_interval(max_steps - steps[0], level=self.level))
                return Prediction(value=value, low=min(low, value), high=max(high, value), n_stages=1, method="fit")
        y_last = float(values[-1])
        half = 0.0 if self.interval == "none" else norm.ppf(0.5 + self.level / 2) * noise_std(values)
        return Prediction(value=y_last, low=y_last - half, high=y_last + half, n_stages=1, method="last_value")


class LastValue(FinalMetricPredictor):
    """The last observed loss is the prediction (interval: none)."""

    def predict_final(self, steps: np.ndarray, values: np.ndarray, max_steps: int) -> Prediction:
        """Return the last observed loss (see :class:`FinalMetricPredictor`).

        Parameters
        ----------
        steps : array-like of shape (n_points,)
            Training steps of the observations, strictly increasing, ``≤ max_steps``.
        values : array-like of shape (n_points,)
            Loss at those steps (lower is better), finite.
        max_steps : int
            ``S_max`` of the trial, in training steps.

        Returns
        -------
        prediction : Prediction
            ``value = low = high`` = the last value; ``n_stages`` 0.

        Raises
        ------
        TooFewPointsError, InvalidCurveError
            No observation, or malformed input (:func:`earlycurve.check_curve`).
        """
        _, values = check_curve(steps, values, max_steps)
        y = float(values[-1])
        return Prediction(value=y, low=y, high=y, n_stages=0, method="last_value")


class BestValue(FinalMetricPredictor):
    """The lowest loss observed so far is the prediction (interval: none)."""

    def predict_final(self, steps: np.ndarray, values: np.ndarray, max_steps: int) -> Prediction:
        """Return the best (lowest) loss so far (see :class:`FinalMetricPredictor`).

        Parameters
        ----------
        steps : array-like of shape (n_points,)
            Training steps of the observations, strictly increasing, ``≤ max_steps``.
        values : array-like of shape (n_points,)
            Loss at those steps (lower is better), finite.
        max_steps : int
            ``S_max`` of the trial, in training steps.

        Returns
        -------
        prediction : Prediction
            ``value = low = high`` = the lowest loss so far; ``n_stages`` 0.

        Raises
        ------
        TooFewPointsError, InvalidCurveError
            No observation, or malformed input (:func:`earlycurve.check_curve`).
        """
        _, values = check_curve(steps, values, max_steps)
        y = float(np.min(values))
        return Prediction(value=y, low=y, high=y, n_stages=0, method="best_value")
