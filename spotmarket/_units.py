"""Units shared by every package: one definition each."""

from __future__ import annotations

#: Seconds in one hour: the billing hour, the free window of a refund, the horizon of a revocation
#: prediction (Eq 1), the hourly re-provisioning hop and the ``/hour`` of every USD-per-hour price.
HOUR_S = 3600.0
