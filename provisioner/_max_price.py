"""The max price b placed with a spot request, and fed to the revocation predictor.

Source: the SpotTune paper and decision D1 ([I]): ``b = current price + δ``, ``δ ~ U[0.00001, 0.2]`` USD/hour,
Tributary's rule, which the paper says RevPred uses at inference. One δ is drawn per (trial, market)
candidate from an injected, seeded ``numpy.random.Generator``; the **same** b is used to predict p and
to place the request, so the predicted p matches the replayed revocation rule. δ is not optimised
inside Eq 1: a smaller δ always raises p and so lowers ``(1 − p) · P̄``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from provisioner.errors import ProvisionerConfigError


@runtime_checkable
class MaxPriceSource(Protocol):
    """Gives the max price of every (trial, market) candidate of one provisioning round."""

    #: Whether :meth:`max_prices` needs each market's on-demand price (the chooser then looks them up).
    needs_on_demand: bool

    def max_prices(
        self,
        rng: np.random.Generator,
        current_usd_per_hour: np.ndarray,
        on_demand_usd_per_hour: np.ndarray | None,
        n_trials: int,
    ) -> np.ndarray:
        """Max prices b, ndarray of shape (n_trials, n_markets), USD per instance-hour.

        Parameters
        ----------
        rng : numpy.random.Generator
            Seeded generator owned by the caller (sources that draw nothing ignore it).
        current_usd_per_hour : ndarray of shape (n_markets,)
            Spot price in force now (NaN where unknown), USD per instance-hour.
        on_demand_usd_per_hour : ndarray of shape (n_markets,) or None
            On-demand prices, USD per instance-hour; given when :attr:`needs_on_demand` is True.
        n_trials : int

        Returns
        -------
        ndarray of shape (n_trials, n_markets)
            USD per instance-hour.
        """
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class MaxPriceRule:
    """D1: ``b = current price + δ``, δ ~ U[low, high] USD/hour, optionally capped at on-demand.

    Parameters
    ----------
    delta_low_usd_per_hour, delta_high_usd_per_hour : float
        Bounds of δ, USD per instance-hour (Tributary: 0.00001 and 0.2). ``low == high`` fixes δ.
    cap_at_on_demand : bool
        Cap b at the market's on-demand price. A market whose current price is above its on-demand
        price then gets b < current price, which cannot launch, and is skipped for that round.

    Notes
    -----
    Draws consume ``n_trials × n_markets`` uniforms in row-major (trial, market) order for every pool
    market, available or not, so a market's δ never depends on which other markets have a price.
    """

    delta_low_usd_per_hour: float = 0.00001
    delta_high_usd_per_hour: float = 0.2
    cap_at_on_demand: bool = False

    def __post_init__(self) -> None:
        lo, hi = self.delta_low_usd_per_hour, self.delta_high_usd_per_hour
        if not (math.isfinite(lo) and math.isfinite(hi) and 0.0 <= lo <= hi):
            raise ProvisionerConfigError(
                f"delta bounds are [{lo}, {hi}] USD/hour, but must satisfy 0 <= low <= high < inf"
            )

    @property
    def needs_on_demand(self) -> bool:
        """True when capping at on-demand."""
        return self.cap_at_on_demand

    def deltas(self, rng: np.random.Generator, n_trials: int, n_markets: int) -> np.ndarray:
        """δ, ndarray of shape (n_trials, n_markets), USD per instance-hour.

        Parameters
        ----------
        rng : numpy.random.Generator
            Seeded generator owned by the caller; ``n_trials × n_markets`` uniforms are drawn, row-major.
        n_trials, n_markets : int

        Returns
        -------
        ndarray of shape (n_trials, n_markets)
            δ ~ U[low, high], USD per instance-hour.

        Raises
        ------
        ProvisionerConfigError
            If ``rng`` is not a ``numpy.random.Generator``.
        """
        if not isinstance(rng, np.random.Generator):
            raise ProvisionerConfigError(f"rng is {type(rng).__name__}, but must be a numpy.random.Generator")
        return rng.uniform(self.delta_low_usd_per_hour, self.delta_high_usd_per_hour, size=(n_trials, n_markets))

    def max_prices(self, rng, current_usd_per_hour, on_demand_usd_per_hour, n_trials):
        """``current + δ`` (capped at on-demand if asked), ndarray (n_trials, n_markets), USD/hour.

        Parameters
        ----------
        rng : numpy.random.Generator
            Seeded generator owned by the caller.
        current_usd_per_hour : ndarray of shape (n_markets,)
            Spot price in force now (NaN where unknown), USD per instance-hour.
        on_demand_usd_per_hour : ndarray of shape (n_markets,) or None
            Needed only with ``cap_at_on_demand``.
        n_trials : int

        Returns
        -------
        ndarray of shape (n_trials, n_markets)
            b, USD per instance-hour (NaN where the current price is unknown).

        Raises
        ------
        ProvisionerConfigError
            If ``rng`` is not a ``numpy.random.Generator``, or the on-demand prices are missing with
            ``cap_at_on_demand``.
        """
        current = np.asarray(current_usd_per_hour, dtype=float)
        b = current[None, :] + self.deltas(rng, n_trials, current.size)
        if self.cap_at_on_demand:
            if on_demand_usd_per_hour is None:
                raise ProvisionerConfigError("cap_at_on_demand needs the on-demand prices of the markets")
            b = np.minimum(b, np.asarray(on_demand_usd_per_hour, dtype=float)[None, :])
        return b


@dataclass(frozen=True, slots=True)
class FixedMaxPrice:
    """The same max price for every candidate, drawing nothing (e.g. a Single-Spot baseline's "never
    revoked" bid, decision E4).

    Parameters
    ----------
    max_price_usd_per_hour : float
        b, USD per instance-hour (> 0).
    """

    max_price_usd_per_hour: float

    def __post_init__(self) -> None:
        if not (self.max_price_usd_per_hour > 0):
            raise ProvisionerConfigError(f"max price is {self.max_price_usd_per_hour} USD/hour, but must be > 0")

    @property
    def needs_on_demand(self) -> bool:
        """Always False."""
        return False

    def max_prices(self, rng, current_usd_per_hour, on_demand_usd_per_hour, n_trials):
        """``b`` everywhere, ndarray (n_trials, n_markets), USD/hour.

        Parameters
        ----------
        rng : numpy.random.Generator
            Ignored (nothing is drawn).
        current_usd_per_hour : ndarray of shape (n_markets,)
            Only its size is used.
        on_demand_usd_per_hour : ndarray or None
            Ignored.
        n_trials : int

        Returns
        -------
        ndarray of shape (n_trials, n_markets)
            USD per instance-hour.
        """
        return np.full((n_trials, np.asarray(current_usd_per_hour).size), float(self.max_price_usd_per_hour))
