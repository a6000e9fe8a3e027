"""Spending caps checked before every launch, in every backend (``--max-usd-per-hour``, ``--budget-usd``).

- **hourly**: the max prices of the live instances plus the new one's, USD/hour, never above the cap. One
  instance whose max price alone exceeds it can never launch: ``CapExceeded``; otherwise the launch is
  refused (``LaunchFailed``, retried by the orchestrator when others have ended).
- **budget**: USD billed so far plus an upper bound of what the live instances have accrued (max price x
  time alive) plus one hour of the new instance at its max price (what the launch commits before its next
  hourly decision), never above the budget: else ``CapExceeded``. Every backend (sim, local, aws, ray) then
  stops launching, ends the live instances and keeps the best trials so far
  (:class:`spottune.backends._replay.ReplayDriver`, decision DB5), and checks again at every hour boundary of a
  live instance.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from spottune.errors import BackendError

__all__ = ["CapExceeded", "check_caps"]


class CapExceeded(BackendError):
    """A spending cap makes every further launch impossible."""


def check_caps(*, max_price: float, live: Iterable[tuple[float, float]], now_s: float, spent_usd: float,
               max_usd_per_hour: float | None, budget_usd: float | None, whole_hours: bool = False,
               accrued_usd: float | None = None) -> str | None:
    """None if the launch may go ahead, or why it must wait (a refusal the orchestrator retries).

    Parameters
    ----------
    max_price : float
        The new instance's max price, USD/hour.
    live : iterable of (max_price USD/hour, started_s)
        The live instances.
    now_s : float
    spent_usd : float
        USD billed so far (ledger).
    max_usd_per_hour, budget_usd : float or None
        The caps (None: none).
    whole_hours : bool, default False
        Also count each live instance as committed through the end of its current hour, at its max price
        (``max_price * (ceil(age / 1 h) h - age)``, its first hour at least): no launch may push
        committed plus expected spend above the budget while the live instances run to their next hourly
        decision (the drivers of every backend pass True; False is the launch rule alone).
    accrued_usd : float, optional
        What the live instances have accrued so far, USD (the sim and local backends know it from the
        replayed prices); default: the upper bound ``max_price * age``.

    Returns
    -------
    str or None
        None, or one line naming the cap that holds the launch back.

    Raises
    ------
    CapExceeded
        If the launch could never go ahead (see the module docstring).
    """
    live = list(live)
    if max_usd_per_hour is not None:
        if max_price > max_usd_per_hour:
            raise CapExceeded(f"one instance at max price {max_price:.4f} USD/h exceeds --max-usd-per-hour "
                              f"{max_usd_per_hour:g}")
        running = sum(p for p, _ in live)
        if running + max_price > max_usd_per_hour + 1e-12:
            return (f"max-usd-per-hour cap: {running:.4f} USD/h of live instances + {max_price:.4f} "
                    f"> {max_usd_per_hour:g}")
    if budget_usd is not None:
        ages = [(p, max(0.0, now_s - t0)) for p, t0 in live]
        accrued = sum(p * a / 3600.0 for p, a in ages) if accrued_usd is None else float(accrued_usd)
        if whole_hours:
            accrued += sum(p * (max(1, math.ceil(a / 3600.0 - 1e-9)) * 3600.0 - a) / 3600.0 for p, a in ages)
        if spent_usd + accrued + max_price > budget_usd:
            raise CapExceeded(f"budget: {spent_usd:.4f} USD billed + {accrued:.4f} {'committed' if whole_hours else 'accrued'} + one hour at "
                              f"{max_price:.4f} USD/h would exceed --budget-usd {budget_usd:g}")
    return None
