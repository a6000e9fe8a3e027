"""Markets left out of the choice for a while after the cloud refused a launch there (decisions AWS3, E12).

The AWS backend records every capacity refusal (``InsufficientInstanceCapacity`` and kin) here; a chooser
given the same object (:attr:`provisioner.BaseChooser.exclusions`) treats an excluded market like one
without a known price until the exclusion expires. Facts in, decisions out: the driver only records
what the cloud said, the chooser decides (the driver never chooses a market).
"""

from __future__ import annotations

import math
from collections.abc import Hashable

__all__ = ["DEFAULT_EXCLUSION_S", "MarketExclusions"]

#: How long a market that refused a launch for capacity is left out, seconds (30 min). SkyPilot's
#: EAGER_NEXT_REGION blocks a failed region for the rest of a recovery attempt; capacity shortages in a
#: zone typically clear in tens of minutes (AWS "InsufficientInstanceCapacity": "try again later").
DEFAULT_EXCLUSION_S = 1800.0


class MarketExclusions:
    """Markets excluded until a time (engine seconds since the epoch, UTC).

    Parameters
    ----------
    duration_s : float, default :data:`DEFAULT_EXCLUSION_S`
        Seconds a market stays excluded after :meth:`exclude` (> 0).

    Raises
    ------
    ValueError
        If ``duration_s`` is not a positive finite number.

    Examples
    --------
    >>> ex = MarketExclusions(600.0)
    >>> ex.exclude("us-east-1a/r3.large", 0.0, "InsufficientInstanceCapacity")
    >>> sorted(ex.active(599.0)), ex.active(600.0)
    (['us-east-1a/r3.large'], {})
    """

    def __init__(self, duration_s: float = DEFAULT_EXCLUSION_S):
        if not (math.isfinite(duration_s) and duration_s > 0):
            raise ValueError(f"duration_s is {duration_s!r}, but must be a positive number of seconds")
        self.duration_s = float(duration_s)
        self._until: dict[Hashable, tuple[float, str]] = {}

    def exclude(self, market: Hashable, now_s: float, reason: str) -> None:
        """Leave ``market`` out from ``now_s`` for :attr:`duration_s` seconds (``reason``: the cloud's error code).

        Parameters
        ----------
        market : hashable
        now_s : float
            Time of the refusal, seconds since the epoch (UTC).
        reason : str
            E.g. ``"InsufficientInstanceCapacity"``.
        """
        self._until[market] = (float(now_s) + self.duration_s, str(reason))

    def active(self, now_s: float) -> dict[Hashable, str]:
        """Markets excluded at ``now_s`` -> reason.

        Parameters
        ----------
        now_s : float
            Seconds since the epoch (UTC).

        Returns
        -------
        dict of market -> str
            ``"excluded after <reason> until <time> s"`` for each market still excluded.
        """
        return {m: f"excluded after {r} until {u:.0f} s" for m, (u, r) in self._until.items() if now_s < u}
