"""Spot price data: readers for every common layout, the canonical table, step-function queries.

Canonical table (pandas): ``timestamp`` (tz-aware UTC), ``region``, ``availability_zone``,
``instance_type``, ``product_description``, ``price`` (USD per instance-hour). A market is
(availability zone, instance type, product description).
"""

from revpred.prices._history import CANONICAL_COLUMNS, PriceHistory, PriceSeries, to_seconds, to_timestamp
from revpred.prices._market import DEFAULT_PRODUCT, Market

__all__ = [
    "CANONICAL_COLUMNS",
    "DEFAULT_PRODUCT",
    "Market",
    "PriceHistory",
    "PriceSeries",
    "to_seconds",
    "to_timestamp",
]
