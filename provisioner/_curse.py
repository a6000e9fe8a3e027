"""Corrections for the optimizer's curse of the refund-aware choice (decisions R5-R6).

:class:`~provisioner.RefundProvisioner` takes an argmin over every (market, max price) candidate of the
pool, so the candidate it picks is the one whose revocation probability p is most over-estimated (the
optimizer's curse: the maximum of noisy estimates is biased up; Smith & Winkler, "The Optimizer's
Curse", Management Science 52(3), 2006, doi:10.1287/mnsc.1050.0451). And every trial deciding at about
the same time bets on the same candidate, whose revocations are perfectly correlated (one price rise
above the max price revokes them all, or none).

Two corrections, both off by default:

* **Shrinkage** (:func:`shrink_p`): ``p' = (1 − w) · p + w · p₀``, the estimate pulled towards a prior
  p₀ (Smith & Winkler §4: the Bayesian cure), where p₀ is either a fixed base rate or the mean p of the
  round's launchable markets at the same max-price rung (the pool's base rate for that question).
* **Diversification** (:class:`LaunchLedger`): at most ``cap`` trials on one (market, max-price rung)
  among the launches of the last ``window_s`` seconds; a trial whose best candidate is full takes its
  next best.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from provisioner.errors import ProvisionerConfigError


def check_correction(p_shrink: float, p_prior, max_trials_per_candidate: int | None,
                     cap_window_s: float, p_cap: float) -> None:
    """Validate the correction settings of :class:`~provisioner.RefundProvisioner`.

    Raises
    ------
    ProvisionerConfigError
        ``p_shrink`` outside [0, 1], ``p_prior`` neither None, a probability nor an object with
        ``predict_proba``, a cap below 1 or not an integer, or a
        negative / non-finite window, or ``p_cap`` outside (0, 1).
    """
    if not (isinstance(p_shrink, (int, float)) and 0.0 <= p_shrink <= 1.0):
        raise ProvisionerConfigError(f"p_shrink is {p_shrink!r}, but must be a weight in [0, 1]")
    if p_prior is not None and not callable(getattr(p_prior, "predict_proba", None)) and not (
            isinstance(p_prior, (int, float)) and not isinstance(p_prior, bool) and 0.0 <= p_prior <= 1.0):
        raise ProvisionerConfigError(f"p_prior is {p_prior!r}, but must be a probability in [0, 1], a revocation "
                                     "predictor, or None (the pool's)")
    if max_trials_per_candidate is not None and not (
            isinstance(max_trials_per_candidate, int) and not isinstance(max_trials_per_candidate, bool)
            and max_trials_per_candidate >= 1):
        raise ProvisionerConfigError(
            f"max_trials_per_candidate is {max_trials_per_candidate!r}, but must be an integer >= 1 or None (no cap)")
    if not (isinstance(cap_window_s, (int, float)) and math.isfinite(cap_window_s) and cap_window_s >= 0):
        raise ProvisionerConfigError(f"cap_window_s is {cap_window_s!r}, but must be a finite number of seconds >= 0")
    if not (isinstance(p_cap, (int, float)) and not isinstance(p_cap, bool) and 0.0 < p_cap < 1.0):
        raise ProvisionerConfigError(f"p_cap is {p_cap!r}, but must be a probability in (0, 1)")


def shrink_p(p: np.ndarray, ok: np.ndarray, weight: float, prior: float | np.ndarray | None = None) -> np.ndarray:
    """The revocation probabilities shrunk towards a prior: ``p' = (1 − w) · p + w · p₀``.

    Parameters
    ----------
    p : ndarray of shape (n, L)
        Predicted one-hour revocation probability of each (market, max-price rung), in [0, 1]; NaN
        where the candidate cannot launch.
    ok : ndarray of bool, shape (n, L)
        Launchable candidates (their p is finite).
    weight : float in [0, 1]
        w; 0 returns ``p`` unchanged, 1 replaces every p by the prior.
    prior : float in [0, 1] or ndarray of shape (n, L), optional
        A fixed p₀, or one per candidate (e.g. another predictor's). None: per rung, the mean p of the
        launchable markets at that rung (the pool's base rate for that max-price question; a rung with
        one launchable market keeps its p).

    Returns
    -------
    ndarray of shape (n, L)
        p', NaN where not ``ok``.

    Examples
    --------
    >>> p = np.array([[0.8, 0.1], [0.2, 0.0]]); ok = np.ones((2, 2), bool)
    >>> shrink_p(p, ok, 0.5).round(3).tolist()        # rung means 0.5 and 0.05
    [[0.65, 0.075], [0.35, 0.025]]
    >>> shrink_p(p, ok, 0.5, prior=0.0).tolist()
    [[0.4, 0.05], [0.1, 0.0]]
    """
    p = np.where(ok, p, np.nan)
    if weight == 0.0:
        return p
    if prior is None:
        count = ok.sum(axis=0)
        p0 = np.where(count > 0, np.where(ok, p, 0.0).sum(axis=0) / np.maximum(count, 1), np.nan)[None, :]
    else:
        p0 = np.asarray(prior, dtype=float)
    return np.where(ok, (1.0 - weight) * p + weight * p0, np.nan)


class LaunchLedger:
    """Recent choices per (market, max-price rung), for the diversification cap.

    Parameters
    ----------
    cap : int
        At most this many trials on one (market, rung) within the window.
    window_s : float
        Seconds: a choice made at t counts for decisions at ``now`` with ``now − window_s < t ≤ now``
        (0 = the same decision time only).
    """

    def __init__(self, cap: int, window_s: float):
        self.cap = int(cap)
        self.window_s = float(window_s)
        self._recent: deque[tuple[float, int, int]] = deque()

    def counts(self, now_s: float, shape: tuple[int, int]) -> np.ndarray:
        """Choices within the window per (market, rung), shape ``shape`` (int); older ones are dropped.

        Decision times come in order (a replay, or the wall clock); a choice counts for decisions at
        ``now`` if it was made at ``now`` or within ``(now − window_s, now]``.

        Parameters
        ----------
        now_s : float
            Decision time, seconds since the epoch (UTC).
        shape : tuple of (int, int)
            (n_markets, n_rungs) of the round.

        Returns
        -------
        ndarray of int, shape ``shape``
        """
        while self._recent and self._recent[0][0] < now_s and self._recent[0][0] <= now_s - self.window_s:
            self._recent.popleft()
        out = np.zeros(shape, dtype=int)
        for _, j, r in self._recent:
            out[j, r] += 1
        return out

    def add(self, now_s: float, market: int, rung: int) -> None:
        """Record a choice of (market index, rung index) at ``now_s``.

        Parameters
        ----------
        now_s : float
            Seconds since the epoch (UTC).
        market, rung : int
            Indices into the round's markets and max-price rungs.
        """
        self._recent.append((float(now_s), int(market), int(rung)))

    def clear(self) -> None:
        """Forget every choice (a new run)."""
        self._recent.clear()
