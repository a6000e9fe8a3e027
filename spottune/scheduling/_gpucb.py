"""The next configuration within a study: cost-aware GP-UCB (ease.ml, Section 3 [T]; decision SV6).

``a_t = argmax_k mu(k) + sqrt(beta_t / c_k) * sigma(k)`` over the untried configurations, with the posterior of
scikit-learn's :class:`~sklearn.gaussian_process.GaussianProcessRegressor` (a dependency already; BoTorch would
add torch-side model code for a one-dimensional posterior over at most a few thousand arms). ``c_k`` is the
configuration's expected cost (USD); ``beta_t = 2 c* log(pi^2 K t^2 / (6 delta))`` with ``c* = max c_k``
(ease.ml's Theorem 1), so ``beta_t / c_k`` does not depend on the currency unit. Pure: the caller passes the
observations; the GP is seeded.

:func:`search_sequentially` is the whole single-study loop (ease.ml's single-tenant protocol): encode the candidate
configurations (:func:`encode_configs`), pick, run, observe, up to a trial budget; the caller says how a configuration
runs (``spottune.tune(search="gp-ucb")`` and the service's trial budget run it as a one-trial experiment,
``benchmarks/bench_search.py`` looks its recorded result up). Decisions SV6, SV10, SV13.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

from spottune.errors import ConfigError

__all__ = ["CostAwareGPUCB", "beta_t", "check_flat", "cost_aware_ucb", "encode_configs", "search_sequentially"]


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


def check_flat(configs: Sequence[Mapping[str, Any]]) -> None:
    """Refuse configurations GP-UCB cannot place: every value must be a number, a string or a bool (no nesting).

    Parameters
    ----------
    configs : sequence of mapping
        The candidate configurations.

    Raises
    ------
    ConfigError
        Naming the first nested (or None) value.
    """
    for config in configs:
        for key, value in config.items():
            if not isinstance(value, (int, float, str, bool)) or value is None:
                raise ConfigError(f"trial_budget needs a flat search space, but {key!r} takes {value!r}")


def encode_configs(configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Numeric features of the configurations, shape (n_configs, n_features) (decision SV10).

    A numeric hyperparameter is one column, on a log scale when all its values are > 0 and span more than a factor
    of 10; any other hyperparameter is one-hot (one column per value, in order of appearance).

    Parameters
    ----------
    configs : sequence of mapping
        Flat configurations (:func:`check_flat`).

    Returns
    -------
    ndarray of shape (n_configs, n_features)
        One column of zeros when no configuration has a key.
    """
    columns: list[np.ndarray] = []
    for key in sorted({k for c in configs for k in c}):
        values = [c.get(key) for c in configs]
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        if numeric:
            x = np.asarray(values, dtype=float)
            if (x > 0).all() and x.max() / x.min() > 10:
                x = np.log(x)
            columns.append(x)
        else:
            for level in dict.fromkeys(map(repr, values)):
                columns.append(np.asarray([repr(v) == level for v in values], dtype=float))
    return np.column_stack(columns) if columns else np.zeros((len(configs), 1))


def search_sequentially(configs: Sequence[Mapping[str, Any]], run: Callable[[int, int], float | None], *,
                        trial_budget: int, mode: str = "max", cost_usd: Sequence[float] | None = None,
                        cost_aware: bool = True, random_state: int = 0) -> list[tuple[int, float]]:
    """Run up to ``trial_budget`` of ``configs``, one after another, each picked by :class:`CostAwareGPUCB`.

    A configuration whose run gives no finite value (a failed trial, NaN) counts as the worst value seen so far (0
    before any), so the GP does not pick its neighbours for it again.

    Parameters
    ----------
    configs : sequence of mapping
        The candidate configurations, flat (:func:`check_flat`).
    run : callable (round, index) -> float or None
        Runs ``configs[index]`` as round ``round`` (0, 1, ...) and returns its final metric (user direction; NaN
        for a failed trial), or None to end the search there (e.g. a USD budget spent; that round is not counted).
    trial_budget : int
        Rounds at most, >= 1 (capped at ``len(configs)``).
    mode : {"max", "min"}, default "max"
        Direction of the metric.
    cost_usd : sequence of float, optional
        The predicted USD of each configuration's trial (> 0; only ratios matter, SV6). None: the same for every
        configuration, which is what a spottune run predicts (one workload, one ``max_steps``; decision SV13).
    cost_aware : bool, default True
        False divides by ``c = 1`` (plain GP-UCB).
    random_state : int, default 0
        Seeds the GP.

    Returns
    -------
    list of (int, float)
        ``(index, value)`` per round run, in order.

    Raises
    ------
    ConfigError
        On a nested configuration, ``trial_budget`` < 1, or costs of the wrong length or not > 0.
    """
    check_flat(configs)
    if not (isinstance(trial_budget, int) and trial_budget >= 1):
        raise ConfigError(f"trial_budget is {trial_budget!r}, but must be an integer >= 1")
    arms = encode_configs(configs)
    cost = np.ones(len(configs)) if cost_usd is None else np.asarray(cost_usd, dtype=float)
    picker = CostAwareGPUCB(mode=mode, cost_aware=cost_aware, random_state=random_state)
    done: list[tuple[int, float]] = []
    for r in range(min(trial_budget, len(configs))):
        finite = [v for _, v in done if math.isfinite(v)]
        worst = (max(finite) if mode == "min" else min(finite)) if finite else 0.0
        k = picker.suggest(arms, cost, [i for i, _ in done], [v if math.isfinite(v) else worst for _, v in done])
        value = run(r, k)
        if value is None:
            break
        done.append((k, float(value)))
    return done
