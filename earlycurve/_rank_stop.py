"""Rank-confidence early stopping: stop a trial when it is unlikely to end in the top-k.

At each rung (a step count), a trial reaching it gets a predictive distribution of its final loss,
``Normal(μ, σ)`` (μ from a curve extrapolation, σ from its error on tuning curves); every other trial
seen so far and not stopped contributes its latest distribution (a completed trial: its final loss,
σ = 0). The trial is stopped when ``P(its final loss ranks among the k lowest) < ε``. Stopped trials
drop out of the comparison: they can no longer be picked, and keeping their (early, optimistic)
beliefs could stop every trial of a study. Like ASHA it is asynchronous
(a trial is judged against whatever has been seen when it reaches a rung, and the first ``k`` trials
always continue); unlike ASHA it compares *extrapolated final* losses with their uncertainty instead
of the current values (decision ES6; Domhan et al. 2015 stop a trial on
``P(final better than the best so far) < ε``, this is the top-k version of that rule).

The probability is estimated by Monte Carlo with ``n_samples`` joint draws from a seeded
``numpy.random.Generator`` (deterministic replays). Pure computation, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from earlycurve.errors import InvalidCurveError

__all__ = ["prob_top_k", "RankConfidenceRule"]


def prob_top_k(mu: np.ndarray, sigma: np.ndarray, index: int, k: int, rng: np.random.Generator, n_samples: int = 2000) -> float:
    """Probability that trial ``index`` has one of the ``k`` lowest final losses.

    Parameters
    ----------
    mu, sigma : ndarray of shape (n_trials,)
        Mean and standard deviation (metric units, σ ≥ 0) of each trial's final loss, independent normals.
    index : int
        The trial asked about.
    k : int
        Top-k, ``k ≥ 1``.
    rng : numpy.random.Generator
    n_samples : int, default=2000
        Monte Carlo draws; with every σ = 0 the answer is exact (0 or 1, ties count as not better).

    Returns
    -------
    p : float
        In [0, 1]. ``n_trials ≤ k`` gives 1.

    Raises
    ------
    InvalidCurveError
        If ``k < 1``, the shapes or ``index`` do not match, or a μ or σ is not finite (or σ < 0).
    """
    mu, sigma = np.asarray(mu, dtype=float), np.asarray(sigma, dtype=float)
    if k < 1:
        raise InvalidCurveError(f"k is {k!r}, but must be >= 1")
    if mu.shape != sigma.shape or mu.ndim != 1 or not 0 <= index < mu.size:
        raise InvalidCurveError(f"mu {mu.shape}, sigma {sigma.shape} and index {index} do not match")
    if np.any(sigma < 0) or not np.all(np.isfinite(mu)) or not np.all(np.isfinite(sigma)):
        raise InvalidCurveError("mu must be finite and sigma finite and >= 0")
    if mu.size <= k:
        return 1.0
    if not np.any(sigma > 0):
        return float(np.sum(mu < mu[index]) < k)
    draws = mu + sigma * rng.standard_normal((n_samples, mu.size))
    better = np.sum(draws < draws[:, [index]], axis=1)
    return float(np.mean(better < k))


class RankConfidenceRule:
    """Asynchronous top-k rank-confidence stopping (module docstring).

    Parameters
    ----------
    rungs : sequence of int
        Steps at which a trial may be stopped, strictly increasing, each ≥ 1.
    epsilon : float
        Stop when ``P(top-k) < epsilon``; in (0, 1).
    k : int, default=3
    seed : int, default=0
        Seed of the Monte Carlo draws (each decision uses ``default_rng([seed, trial, rung])``).
    n_samples : int, default=2000

    Raises
    ------
    InvalidCurveError
        If the rungs are empty, below 1 or not strictly increasing, ``epsilon`` is outside (0, 1), or ``k < 1``.

    Notes
    -----
    The caller passes, at a rung, the trial's ``(μ, σ)``; :meth:`complete` records a final loss.
    """

    def __init__(self, rungs: Sequence[int], epsilon: float, *, k: int = 3, seed: int = 0, n_samples: int = 2000) -> None:
        rungs = [int(r) for r in rungs]
        if not rungs or rungs[0] < 1 or any(b <= a for a, b in zip(rungs, rungs[1:])):
            raise InvalidCurveError(f"rungs {rungs!r} must be non-empty, >= 1 and strictly increasing")
        if not 0 < epsilon < 1:
            raise InvalidCurveError(f"epsilon is {epsilon!r}, but must be 0 < epsilon < 1")
        if k < 1:
            raise InvalidCurveError(f"k is {k!r}, but must be >= 1")
        self.rungs = tuple(rungs)
        self.epsilon = float(epsilon)
        self.k = int(k)
        self.seed = int(seed)
        self.n_samples = int(n_samples)
        self.reset()

    def reset(self) -> None:
        """Forget every trial (a new study)."""
        self._belief: dict[int, tuple[float, float]] = {}

    def judge(self, trial: int, rung: int, mu: float, sigma: float) -> bool:
        """Record the trial's belief at ``rung`` and return True if it should stop.

        Parameters
        ----------
        trial : int
        rung : int
            The rung's step (seeds the draws).
        mu, sigma : float
            Belief about the trial's final loss: mean and standard deviation (metric units).

        Returns
        -------
        stop : bool
            ``P(top-k among every trial seen so far and not stopped) < epsilon``; a stopped trial is
            forgotten.
        """
        self._belief[trial] = (float(mu), float(sigma))
        ids = list(self._belief)
        mu_all = np.array([self._belief[t][0] for t in ids])
        sd_all = np.array([self._belief[t][1] for t in ids])
        rng = np.random.default_rng([self.seed, int(trial), int(rung)])
        p = prob_top_k(mu_all, sd_all, ids.index(trial), self.k, rng, self.n_samples)
        if p < self.epsilon:
            del self._belief[trial]
            return True
        return False

    def complete(self, trial: int, final: float) -> None:
        """A trial finished with final loss ``final`` (σ = 0 from now on).

        Parameters
        ----------
        trial : int
        final : float
            Final loss (lower is better).
        """
        self._belief[trial] = (float(final), 0.0)
