"""The next configuration within a study: cost-aware GP-UCB (ease.ml, Section 3 [T]; decision SV6).

``a_t = argmax_k mu(k) + sqrt(beta_t / c_k) * sigma(k)`` over the untried configurations, with the posterior of
scikit-learn's :class:`~sklearn.gaussian_process.GaussianProcessRegressor` (a dependency already; BoTorch would
add torch-side model code for a one-dimensional posterior over at most a few thousand arms). ``c_k`` is the
configuration's expected cost (USD); ``beta_t = 2 c* log(pi^2 K t^2 / (6 delta))`` with ``c* = max c_k``
(ease.ml's Theorem 1), so ``beta_t / c_k`` does not depend on the currency unit. Pure: the caller passes the
observations; the GP is seeded.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

from spottune.errors import ConfigError

__all__ = ["CostAwareGPUCB", "beta_t", "cost_aware_ucb"]


def beta_t(t: int, n_arms: int, c_max: float = 1.0, delta: float = 0.1) -> float:
    """ease.ml's exploration weight ``2 c* log(pi^2 K t^2 / (6 delta))`` (Theorem 1 [T]).

    Parameters
    ----------
    t : int
        Round, >= 1.
    n_arms : int
        K, configurations in the study, >= 1.
    c_max : float, default 1.0
        c*, the largest configuration cost (USD).
    delta : float, default 0.1
        Confidence parameter in (0, 1).

    Returns
    -------
    float
    """
    if t < 1 or n_arms < 1 or not (0 < delta < 1) or not c_max > 0:
        raise ConfigError(f"beta_t(t={t!r}, n_arms={n_arms!r}, c_max={c_max!r}, delta={delta!r}) needs t >= 1, "
                          "n_arms >= 1, c_max > 0 and 0 < delta < 1")
    return 2.0 * c_max * math.log(math.pi ** 2 * n_arms * t ** 2 / (6.0 * delta))


def cost_aware_ucb(mu: Sequence[float], sigma: Sequence[float], cost_usd: Sequence[float], beta: float) -> np.ndarray:
    """``mu + sqrt(beta / cost) * sigma`` per configuration.

    Parameters
    ----------
    mu, sigma : sequence of float, shape (n_arms,)
        Posterior mean and standard deviation of the metric (larger is better).
    cost_usd : sequence of float, shape (n_arms,)
        Expected cost of each configuration, USD, > 0.
    beta : float
        Exploration weight, >= 0.

    Returns
    -------
    ndarray of shape (n_arms,)
    """
    c = np.asarray(cost_usd, dtype=float)
    if (c <= 0).any() or not np.isfinite(c).all():
        raise ConfigError("cost_usd must hold finite costs > 0 (USD)")
    return np.asarray(mu, dtype=float) + np.sqrt(beta / c) * np.asarray(sigma, dtype=float)


class CostAwareGPUCB:
    """Suggest the next configuration of a study by cost-aware GP-UCB.

    Parameters
    ----------
    mode : {"max", "min"}, default "max"
        Direction of the metric.
    delta : float, default 0.1
        Confidence parameter of :func:`beta_t`.
    cost_aware : bool, default True
        False divides by ``c = 1`` (plain GP-UCB), for the lesion comparison.
    random_state : int, default 0
        Seeds the GP (its hyperparameters are fitted by maximum marginal likelihood, one optimiser start).
    """

    def __init__(self, *, mode: str = "max", delta: float = 0.1, cost_aware: bool = True, random_state: int = 0):
        if mode not in ("max", "min"):
            raise ConfigError(f"mode is {mode!r}, but must be max or min")
        self.mode, self.delta, self.cost_aware, self.random_state = mode, delta, cost_aware, random_state

    def posterior(self, arms: np.ndarray, tried: Sequence[int], values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation at every arm (metric flipped to larger-is-better).

        Parameters
        ----------
        arms : ndarray of shape (n_arms, n_features)
            Numeric encoding of the configurations (scaled to [0, 1] per column here).
        tried : sequence of int
            Indices of the configurations with a result.
        values : sequence of float
            Their results, in ``tried``'s order.

        Returns
        -------
        mu, sigma : ndarray of shape (n_arms,)
        """
        x = np.asarray(arms, dtype=float)
        span = np.ptp(x, axis=0)
        x = (x - x.min(axis=0)) / np.where(span > 0, span, 1.0)
        if len(tried) == 0:
            return np.zeros(len(x)), np.ones(len(x))
        y = np.asarray(values, dtype=float) * (1.0 if self.mode == "max" else -1.0)
        kernel = ConstantKernel(1.0) * RBF(length_scale=np.ones(x.shape[1])) + WhiteKernel(1e-3)
        gp = GaussianProcessRegressor(kernel=kernel, normalize_y=True, random_state=self.random_state)
        with warnings.catch_warnings():  # a few points often put a length scale on its bound: expected, not news
            warnings.simplefilter("ignore", ConvergenceWarning)
            gp.fit(x[list(tried)], y)
        mu, sigma = gp.predict(x, return_std=True)
        return mu, sigma

    def suggest(self, arms: np.ndarray, cost_usd: Sequence[float], tried: Sequence[int],
                values: Sequence[float]) -> int:
        """Index of the next configuration to run: the untried arm with the largest cost-aware bound.

        Parameters
        ----------
        arms : ndarray of shape (n_arms, n_features)
        cost_usd : sequence of float, shape (n_arms,)
            Expected USD of each configuration's trial (the provisioner's Eq 2 times its steps).
        tried : sequence of int
        values : sequence of float

        Returns
        -------
        int

        Raises
        ------
        ConfigError
            When every arm is tried, or on a shape mismatch.
        """
        arms = np.asarray(arms, dtype=float)
        if arms.ndim != 2 or len(cost_usd) != len(arms) or len(tried) != len(values):
            raise ConfigError("arms must be (n_arms, n_features) with one cost per arm and one value per tried arm")
        left = np.setdiff1d(np.arange(len(arms)), np.asarray(tried, dtype=int))
        if len(left) == 0:
            raise ConfigError("every configuration has been tried")
        c = np.asarray(cost_usd, dtype=float) if self.cost_aware else np.ones(len(arms))
        mu, sigma = self.posterior(arms, tried, values)
        beta = beta_t(len(tried) + 1, len(arms), float(c.max()), self.delta)
        score = cost_aware_ucb(mu, sigma, c, beta)
        return int(left[np.argmax(score[left])])
