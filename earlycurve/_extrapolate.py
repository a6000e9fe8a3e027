"""An ensemble of parametric learning-curve families (Domhan et al. 2015), fitted with ``curve_fit``.

Domhan, Springenberg, Hutter, "Speeding up automatic hyperparameter optimization of deep neural
networks by extrapolation of learning curves", IJCAI 2015, Table 1
(https://ml.informatik.uni-freiburg.de/wp-content/uploads/papers/15-IJCAI-Extrapolation_of_Learning_Curves.pdf).
Their families describe an accuracy rising to an asymptote; here they are written for a **loss**
falling to one (``y = c + ...`` with ``c`` the asymptote), on ``x`` = steps since the first point + 1:

- ``pow3``: ``c + a·x^(−α)``;
- ``exp3``: ``c + a·exp(−b·x)``;
- ``ilog2``: ``c + a / log(x + 1)``;
- ``janoschek``: ``c + (y0 − c)·exp(−κ·x^δ)``;
- ``mmf``: ``c + (y0 − c) / (1 + (κ·x)^δ)``.

[I] Instead of Domhan's MCMC over a weighted combination, each family is fitted by bounded least
squares (``scipy.optimize.curve_fit``) and the prediction is the **median** of the families that
converged, clipped to ``[0, last observed]`` (a loss does not grow back in these models); the
interval is the ensemble's range widened by the residual noise. Fewer than ``min_points`` points,
or no family converging: the last value (``method="last_value"``).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import OptimizeWarning, curve_fit

from earlycurve._protocol import FinalMetricPredictor, Prediction, check_curve

__all__ = ["ParametricEnsemble", "FAMILIES"]


def _pow3(x, c, a, alpha):
    return c + a * np.power(x, -alpha)


def _exp3(x, c, a, b):
    return c + a * np.exp(-b * x)


def _ilog2(x, c, a):
    return c + a / np.log(x + 1.0)


def _janoschek(x, c, y0, kappa, delta):
    return c + (y0 - c) * np.exp(-kappa * np.power(x, delta))


def _mmf(x, c, y0, kappa, delta):
    return c + (y0 - c) / (1.0 + np.power(kappa * x, delta))


#: name -> (function of (x, *params), start(y) -> p0, bounds(y) -> (lower, upper)); y scaled to max 1.
FAMILIES = {
    "pow3": (_pow3, lambda y: (y[-1] * 0.9, y[0] - y[-1] + 1e-3, 0.5), lambda y: ([0, 0, 1e-3], [y[-1], 10, 5])),
    "exp3": (_exp3, lambda y: (y[-1] * 0.9, y[0] - y[-1] + 1e-3, 0.1), lambda y: ([0, 0, 1e-6], [y[-1], 10, 10])),
    "ilog2": (_ilog2, lambda y: (y[-1] * 0.5, 0.1), lambda y: ([0, 0], [y[-1], 10])),
    "janoschek": (_janoschek, lambda y: (y[-1] * 0.9, y[0], 0.1, 1.0), lambda y: ([0, 0, 1e-6, 0.1], [y[-1], 2, 10, 5])),
    "mmf": (_mmf, lambda y: (y[-1] * 0.9, y[0], 0.1, 1.0), lambda y: ([0, 0, 1e-6, 0.1], [y[-1], 2, 10, 5])),
}


class ParametricEnsemble(FinalMetricPredictor):
    """Final loss from a median of parametric curve families (Domhan et al. 2015; module docstring).

    Parameters
    ----------
    families : sequence of str, default=all of :data:`FAMILIES`
    min_points : int, default=5
        Fewest observations for a fit; below, the last value.
    maxfev : int, default=2000
        Function evaluations per ``curve_fit``.

    Notes
    -----
    Works on a loss (lower is better, ≥ 0). ``predict_final`` returns ``Prediction`` with
    ``method="ensemble"`` (``n_stages=1``) or ``"last_value"``; ``low``/``high`` are the smallest and
    largest family predictions ± 2 × the residual standard deviation.

    Raises
    ------
    InvalidCurveError
        If ``families`` is empty or names a family not in :data:`FAMILIES`.
    """

    def __init__(self, families=tuple(FAMILIES), *, min_points: int = 5, maxfev: int = 2000) -> None:
        unknown = [f for f in families if f not in FAMILIES]
        if unknown or not families:
            from earlycurve.errors import InvalidCurveError

            raise InvalidCurveError(f"families {list(families)!r} must be a non-empty subset of {sorted(FAMILIES)}")
        self.families = tuple(families)
        self.min_points = int(min_points)
        self.maxfev = int(maxfev)

    def family_predictions(self, steps: np.ndarray, values: np.ndarray, max_steps: float) -> tuple[dict, float]:
        """Each converged family's prediction of the loss at ``max_steps`` and the median residual std.

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
        preds : dict of str to float
            Family name -> predicted loss (metric units); families that failed are absent.
        resid : float
            Median over families of the residual standard deviation, metric units (0 if none).

        Raises
        ------
        TooFewPointsError, InvalidCurveError
            No observation, or malformed input (:func:`earlycurve.check_curve`).
        """
        steps, values = check_curve(steps, values, max_steps)
        scale = float(np.max(np.abs(values))) or 1.0
        y = values / scale
        x = steps - steps[0] + 1.0
        x_end = float(max_steps) - steps[0] + 1.0
        preds, resids = {}, []
        for name in self.families:
            fn, start, bounds = FAMILIES[name]
            lo, hi = bounds(y)
            hi = [max(h, lo_ + 1e-9) for lo_, h in zip(lo, hi, strict=True)]
            p0 = np.clip(start(y), lo, hi)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    params, _ = curve_fit(fn, x, y, p0=p0, bounds=(lo, hi), maxfev=self.maxfev)
            except (RuntimeError, ValueError, OptimizeWarning):
                continue
            at_end = float(fn(x_end, *params))
            if not np.isfinite(at_end):
                continue
            preds[name] = at_end * scale
            resids.append(float(np.std(y - fn(x, *params))) * scale)
        return preds, (float(np.median(resids)) if resids else 0.0)

    def predict_final(self, steps: np.ndarray, values: np.ndarray, max_steps: int) -> Prediction:
        """Median family prediction of the final loss (see :class:`FinalMetricPredictor`).

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
            ``method`` ``"ensemble"``, or ``"last_value"`` with too few points or no converged family.

        Raises
        ------
        TooFewPointsError, InvalidCurveError
            No observation, or malformed input (:func:`earlycurve.check_curve`).
        """
        steps, values = check_curve(steps, values, max_steps)
        y_last = float(values[-1])
        if steps.size >= self.min_points:
            preds, resid = self.family_predictions(steps, values, max_steps)
            if preds:
                p = np.clip(np.array(list(preds.values())), 0.0, max(y_last, 0.0))
                value = float(np.median(p))
                return Prediction(value=value, low=min(float(p.min()) - 2 * resid, value),
                                  high=max(float(p.max()) + 2 * resid, value), n_stages=1, method="ensemble")
        return Prediction(value=y_last, low=y_last, high=y_last, n_stages=0, method="last_value")
