"""The revocation-model contract: when does the provider take an instance back, and when is it told.

A model answers one question for one launch: was it fulfilled, and if so when does EC2 terminate the
instance and when does the interruption notice arrive. The simulator asks at launch, schedules a
``RevocationNotice`` at ``notice_s`` and a provider termination at ``termination_s``, and bills the run
with :class:`~spotmarket.Billing` once it ends (by the provider, or earlier by the user).

Implementations: :class:`~spotmarket.LegacyBidRevocation` (the paper's 2017 price > max-price rule)
and :class:`~spotmarket.ModernHazardRevocation` (capacity interruptions, decision M8).
"""

from __future__ import annotations

import abc
import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from spotmarket.prices import Market
from spotmarket.errors import MarketError

NOTICE_LEAD_S = 120.0
"""EC2's two-minute interruption notice, seconds
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html)."""


class Cause(enum.StrEnum):
    """Outcome of a launch, one line per member.

    NONE: fulfilled and not revoked within the model's horizon (``termination_s`` is inf).
    PRICE: revoked because the market price rose above the max price (2017 rule; today only if a max
    price is set).
    CAPACITY: revoked by this instance's own capacity interruption (modern mode).
    CAPACITY_EVENT: revoked by a market-wide capacity loss that ends every instance of the market
    running at that moment (modern mode, correlated).
    REFUSED_PRICE: launch not fulfilled, the market price is above the max price at launch.
    REFUSED_CAPACITY: launch not fulfilled, the market has no spare capacity (modern mode, outage after a
    capacity loss).
    """

    NONE = "none"
    PRICE = "price"
    CAPACITY = "capacity"
    CAPACITY_EVENT = "capacity-event"
    REFUSED_PRICE = "refused-price"
    REFUSED_CAPACITY = "refused-capacity"

    def is_refusal(self) -> bool:
        """True for the two launch-refused outcomes."""
        return self in (Cause.REFUSED_PRICE, Cause.REFUSED_CAPACITY)


@dataclass(frozen=True, slots=True, kw_only=True)
class Revocation:
    """What the provider will do to one launch.

    Attributes
    ----------
    market : Market
    instance_id : str
    launch_s : float
        Requested launch time, seconds since the epoch (UTC).
    cause : Cause
        Why it will end (or why it was refused).
    notice_s : float
        When the interruption notice arrives (seconds since the epoch); ``inf`` if never revoked,
        NaN if refused.
    termination_s : float
        When EC2 terminates it; ``inf`` if never within the horizon, NaN if refused.
    """

    market: Market
    instance_id: str
    launch_s: float
    cause: Cause
    notice_s: float
    termination_s: float

    @property
    def fulfilled(self) -> bool:
        """False if the launch was refused."""
        return not self.cause.is_refusal()

    @property
    def revoked(self) -> bool:
        """True if the provider terminates the instance at a finite time."""
        return self.fulfilled and math.isfinite(self.termination_s)


@dataclass(frozen=True, slots=True)
class RevocationBatch:
    """Revocations of many launches, as arrays of shape (m,).

    Attributes
    ----------
    fulfilled : ndarray of bool
    notice_s, termination_s : ndarray of float
        Seconds since the epoch; ``inf`` = never revoked; NaN where not fulfilled.
    cause : ndarray of str (numpy unicode)
        :class:`Cause` values.
    """

    fulfilled: np.ndarray
    notice_s: np.ndarray
    termination_s: np.ndarray
    cause: np.ndarray

    def __len__(self) -> int:
        return int(self.fulfilled.size)


def check_notice_lead(notice_lead_s: float) -> float:
    """Validate the notice lead time (seconds, ``0 <= lead``); 0 models a notice that never came."""
    lead = float(notice_lead_s)
    if not (math.isfinite(lead) and lead >= 0):
        raise MarketError(f"notice_lead_s is {notice_lead_s}, but must be a finite number >= 0 (AWS: 120)")
    return lead


class RevocationModel(abc.ABC):
    """Base class of revocation models: one abstract method, :meth:`revocation`.

    Contract for implementations:

    * pure and deterministic: the answer depends only on the constructor arguments and the call's
      arguments, never on earlier calls or on a global RNG (replaying a launch script twice gives the
      same answers, in any order);
    * ``termination_s > launch_s`` for a fulfilled launch (``inf`` if never within the horizon), and
      ``launch_s <= notice_s <= termination_s``;
    * a refused launch has NaN times and a ``REFUSED_*`` cause.

    Callers: the simulator backend (at each launch) and :class:`~spotmarket.MarketReplay`.

    Parameters
    ----------
    notice_lead_s : float, default 120
        Seconds between the interruption notice and the termination (EC2: two minutes,
        best-effort; use 0 for "no notice").
    """

    def __init__(self, *, notice_lead_s: float = NOTICE_LEAD_S):
        self.notice_lead_s = check_notice_lead(notice_lead_s)

    @abc.abstractmethod
    def revocation(self, market: Market, launch_s: float, *, instance_id: str,
                   max_price_usd_per_hour: float | None = None) -> Revocation:
        """When EC2 will revoke an instance launched in ``market`` at ``launch_s``.

        Parameters
        ----------
        market : Market
        launch_s : float
            Launch time, seconds since the epoch (UTC).
        instance_id : str
            Unique per launch; models with per-instance randomness key their draws on it.
        max_price_usd_per_hour : float, optional
            Max price ("bid"), USD per instance-hour. Required by the legacy model.

        Returns
        -------
        Revocation
        """

    def termination_time(self, market: Market, launch_s: float, max_price_usd_per_hour: float | None = None,
                         instance_id: str = "") -> float:
        """Termination time (seconds since the epoch; ``inf`` = never within the horizon).

        Parameters
        ----------
        market : Market
        launch_s : float
            Launch time, seconds since the epoch (UTC).
        max_price_usd_per_hour : float, optional
            Max price, USD per instance-hour (required by the legacy model).
        instance_id : str, default ""
            Unique per launch for models with per-instance randomness.

        Returns
        -------
        float
            Seconds since the epoch.

        Raises
        ------
        MarketError
            If the launch is refused; ask :meth:`revocation` first when refusals are possible.
        """
        r = self.revocation(market, launch_s, instance_id=instance_id, max_price_usd_per_hour=max_price_usd_per_hour)
        if not r.fulfilled:
            raise MarketError(f"market {market}: launch {instance_id!r} at {launch_s} was refused ({r.cause})")
        return r.termination_s

    def batch(self, market: Market, launch_s: ArrayLike, max_price_usd_per_hour: ArrayLike | None = None,
              instance_ids: Sequence[str] | None = None) -> RevocationBatch:
        """:meth:`revocation` for many launches in one market.

        The base version loops; models that can do better (the legacy one) override it.

        Parameters
        ----------
        market : Market
        launch_s : array of shape (m,)
            Seconds since the epoch (UTC).
        max_price_usd_per_hour : float or array of shape (m,), optional
            USD per instance-hour; None (or NaN entries) = no max price.
        instance_ids : sequence of str of length m, optional
            Default ``"i-0"``, ``"i-1"``, …; give unique ids for models with per-instance randomness.

        Returns
        -------
        RevocationBatch

        Raises
        ------
        MarketError
            If ``instance_ids`` does not have one id per launch, or a single query fails.
        """
        t = np.atleast_1d(np.asarray(launch_s, dtype=float))
        b = np.broadcast_to(np.nan if max_price_usd_per_hour is None else np.asarray(max_price_usd_per_hour, float),
                            t.shape)
        ids = [f"i-{i}" for i in range(t.size)] if instance_ids is None else list(instance_ids)
        if len(ids) != t.size:
            raise MarketError(f"got {len(ids)} instance ids for {t.size} launches")
        out = [self.revocation(market, float(ti), instance_id=iid,
                               max_price_usd_per_hour=None if np.isnan(bi) else float(bi))
               for ti, bi, iid in zip(t, b, ids)]
        return RevocationBatch(
            fulfilled=np.array([r.fulfilled for r in out], dtype=bool),
            notice_s=np.array([r.notice_s for r in out], dtype=float),
            termination_s=np.array([r.termination_s for r in out], dtype=float),
            cause=np.array([str(r.cause) for r in out], dtype=str),
        )
