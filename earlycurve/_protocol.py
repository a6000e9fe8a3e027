"""What the orchestrator asks of a learning-curve predictor: ``predict_final`` -> ``Prediction``.

The orchestrator (Algorithm 1, at θ·S_max) calls ``predict_final`` once per trial and keeps the
predicted top-k. EarlyCurve and every baseline (SLAQ, last value, best value so far) implement the
same one-method base, so an ablation swaps the injected object and needs no flag.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from earlycurve.errors import InvalidCurveError, TooFewPointsError

__all__ = ["FinalMetricPredictor", "Prediction", "check_curve"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    """Predicted final loss of one trial, with an uncertainty interval.

    Attributes
    ----------
    value : float
        Point prediction of the loss at ``max_steps`` (metric units, lower is better).
    low, high : float
        Interval bounds, ``low ≤ value ≤ high`` (equal to ``value`` when the predictor has none).
    plateau : bool
        The curve has converged (the paper's plateau rule, decision D8); the orchestrator may treat the trial as
        finished, and ``value`` is then the last observed loss.
    n_stages : int
        Stages found so far (Eq 7); 1 for one-stage predictors, 0 for those without a model.
    method : str
        How the value was obtained: ``"fit"``, ``"shifted"``, ``"last_value"``, ``"plateau"``,
        ``"best_value"`` (for reports; not part of the contract).
    """

    value: float
    low: float
    high: float
    plateau: bool = False
    n_stages: int = 1
    method: str = "fit"

    def __post_init__(self) -> None:
        for name in ("value", "low", "high"):
            if not math.isfinite(getattr(self, name)):
                raise InvalidCurveError(f"Prediction.{name} is {getattr(self, name)!r}, but must be finite")
        if not self.low <= self.value <= self.high:
            raise InvalidCurveError(
                f"Prediction interval [{self.low!r}, {self.high!r}] does not contain value {self.value!r}"
            )
        if self.n_stages < 0:
            raise InvalidCurveError(f"Prediction.n_stages is {self.n_stages!r}, but must be >= 0")


class FinalMetricPredictor(abc.ABC):
    """Predicts the loss a trial will reach at ``max_steps`` from its curve so far.

    Contract: ``predict_final`` is a pure function of its arguments (no I/O, no clock, no global
    RNG; a seeded predictor gives the same answer for the same input). Values are a **loss**
    (lower is better); convert a metric to maximise first, e.g. with :func:`earlycurve.to_loss`.
    Caller: the orchestrator at θ·S_max, and :func:`earlycurve.rank_trials`.
    """

    @abc.abstractmethod
    def predict_final(self, steps: np.ndarray, values: np.ndarray, max_steps: int) -> Prediction:
        """Predict the loss at ``max_steps``.

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
            Predicted final loss with interval, plateau flag and stage count.

        Raises
        ------
        TooFewPointsError
            No observation at all.
        InvalidCurveError
            Malformed input (see :func:`check_curve`).
        """


@runtime_checkable
class ConfigAwarePredictor(Protocol):
    """A final-metric predictor that also uses the trial's hyperparameters
    (:class:`earlycurve.HyperparameterCurvePredictor`): when :attr:`uses_config` is True the orchestrator passes
    each trial's configuration to :meth:`predict_final` as ``config=``."""

    #: Whether :meth:`predict_final` takes ``config``.
    uses_config: bool

    def predict_final(self, steps: np.ndarray, values: np.ndarray, max_steps: int, *,
                      config: Mapping[str, Any] | None = None) -> Prediction:
        """As :meth:`FinalMetricPredictor.predict_final`, given the trial's configuration.

        Parameters
        ----------
        steps : array-like of shape (n_points,)
            Training steps of the observations, strictly increasing, ``≤ max_steps``.
        values : array-like of shape (n_points,)
            Loss at those steps (lower is better), finite.
        max_steps : int
            ``S_max`` of the trial, in training steps.
        config : mapping of str to value, optional
            The trial's hyperparameters (None: rank by the curve alone).

        Returns
        -------
        prediction : Prediction
        """
        ...


def check_curve(steps: np.ndarray, values: np.ndarray, max_steps: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Validate one curve and return it as float arrays.

    Parameters
    ----------
    steps : array-like of shape (n_points,)
        Training steps, strictly increasing and ``≥ 0``.
    values : array-like of shape (n_points,)
        Loss at those steps, finite.
    max_steps : float or None, default=None
        When given, ``steps[-1] ≤ max_steps`` is required.

    Returns
    -------
    steps, values : ndarray of shape (n_points,) each

    Raises
    ------
    TooFewPointsError
        Empty curve.
    InvalidCurveError
        Shapes differ, non-finite entries, steps negative or not increasing, or past ``max_steps``.
    """
    steps = np.asarray(steps, dtype=float).ravel()
    values = np.asarray(values, dtype=float).ravel()
    if steps.shape != values.shape:
        raise InvalidCurveError(f"steps has {steps.size} points and values has {values.size}; they must match")
    if steps.size == 0:
        raise TooFewPointsError("the curve has no observation; at least 1 is needed")
    if not (np.all(np.isfinite(steps)) and np.all(np.isfinite(values))):
        raise InvalidCurveError("steps and values must be finite (a diverged trial has no final metric)")
    if steps[0] < 0 or np.any(np.diff(steps) <= 0):
        raise InvalidCurveError("steps must be >= 0 and strictly increasing")
    if max_steps is not None:
        if not max_steps > 0:
            raise InvalidCurveError(f"max_steps is {max_steps!r}, but must be > 0")
        if steps[-1] > max_steps:
            raise InvalidCurveError(f"last step is {steps[-1]:g}, but must be <= max_steps = {max_steps:g}")
    return steps, values
