"""The revocation-predictor protocol the provisioner consumes, and the trivial constant predictor.

Every predictor (RevPred, the Tributary-style baseline, logistic regression, empirical rate, constant
hazard, the simulator's oracle) implements :class:`RevocationPredictor`, so an ablation swaps one object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike

from revpred.errors import RevPredError
from spotmarket.prices._market import Market


@runtime_checkable
class RevocationPredictor(Protocol):
    """P(spot price > max price within the next hour), per (market, decision time, max price).

    Source: the SpotTune paper's RevPred; p feeds Eq 1.
    """

    def predict_proba(
        self,
        markets: Sequence[Market],
        times_s: ArrayLike,
        max_prices_usd_per_hour: ArrayLike,
    ) -> np.ndarray:
        """Revocation probability for each query.

        Parameters
        ----------
        markets : sequence of Market, length n
        times_s : float or array of shape (n,)
            Decision times, seconds since the Unix epoch (UTC). A scalar applies to every query.
        max_prices_usd_per_hour : float or array of shape (n,)
            Max price b of each query, USD per instance-hour.

        Returns
        -------
        p : ndarray of shape (n,), float64 in [0, 1]
            P(price > b at some time in (t, t + 3600 s]).
        """
        ...


@runtime_checkable
class OnlineRevocationPredictor(Protocol):
    """A revocation predictor that also learns from the run's own instance runs (e.g.
    :class:`revpred.online_hazard.OnlineHazard`); the chooser hands it every ended run."""

    def observe(self, market: Market, launch_s: float, end_s: float, revoked: bool) -> None:
        """Add one ended instance run: launched at ``launch_s``, gone at ``end_s`` (seconds since the epoch);
        ``revoked``: the provider ended it for capacity.

        Parameters
        ----------
        market : Market
        launch_s, end_s : float
            Seconds since the epoch (UTC).
        revoked : bool
            Whether the provider ended the run for capacity.
        """
        ...


@runtime_checkable
class SignalledRevocationPredictor(Protocol):
    """A revocation predictor that takes the cloud's capacity signals (Spot placement scores, rebalance
    recommendations; ``spottune.backends.aws._signals``)."""

    def signal(self, market: Market, time_s: float, kind: str, value: float) -> None:
        """One signal about ``market`` at ``time_s`` (seconds since the epoch): ``kind`` and its ``value``.

        Parameters
        ----------
        market : Market
        time_s : float
            Seconds since the epoch (UTC).
        kind : str
            ``"placement_score"`` or ``"rebalance"``.
        value : float
            The Spot placement score, 1..10, or 1.0 for a rebalance recommendation.
        """
        ...


class ConstantRevocation:
    """A fixed revocation probability per market (or one for all): the do-nothing predictor.

    Parameters
    ----------
    p : float or mapping Market -> float
        Probability of revocation within the next hour, in [0, 1]. With a mapping, a market that is not
        in it raises :class:`~revpred.errors.RevPredError`.

    Raises
    ------
    RevPredError
        If a probability is outside [0, 1].
    """

    def __init__(self, p: float | Mapping[Market, float]):
        values = p.values() if isinstance(p, Mapping) else [p]
        for v in values:
            if not 0.0 <= float(v) <= 1.0:
                raise RevPredError(f"revocation probability is {v}, but must be in [0, 1]")
        self.p = p

    def predict_proba(
        self,
        markets: Sequence[Market],
        times_s: ArrayLike,
        max_prices_usd_per_hour: ArrayLike,
    ) -> np.ndarray:
        """The fixed p of each query's market, ndarray of shape (n,); times and max prices are ignored.

        Parameters
        ----------
        markets : sequence of Market, length n
        times_s : float or array of shape (n,)
            Decision times, seconds since the Unix epoch (UTC). A scalar applies to every query.
        max_prices_usd_per_hour : float or array of shape (n,)
            Max price b of each query, USD per instance-hour.

        Returns
        -------
        p : ndarray of shape (n,), float64 in [0, 1]
            P(revoked within the hour after t at max price b).

        Raises
        ------
        RevPredError
            A market is not in the mapping.
        """
        if not isinstance(self.p, Mapping):
            return np.full(len(markets), float(self.p))
        try:
            return np.array([float(self.p[m]) for m in markets], dtype=float)
        except KeyError as exc:
            raise RevPredError(f"no revocation probability for market {exc.args[0]}") from None
