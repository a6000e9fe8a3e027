"""Spot price data: readers for every common layout, the canonical table, step-function queries.

Canonical table (pandas): ``timestamp`` (tz-aware UTC), ``region``, ``availability_zone``,
``instance_type``, ``product_description``, ``price`` (USD per instance-hour). A market is
(availability zone, instance type, product description).

Read a file with :func:`read_prices` (any supported layout, see ``LAYOUTS``), find one with
:func:`locate_prices`, or do both and index it with :func:`load_history`.
"""

from spotmarket.prices._history import (
    CANONICAL_COLUMNS,
    COLLECTION_GAP_S,
    GAP_MEDIAN_RATIO,
    PriceHistory,
    PriceSeries,
    to_seconds,
    to_timestamp,
)
from spotmarket.prices._layouts import LAYOUTS
from spotmarket.prices._locate import DATA_ENV, DEFAULT_PRICE_FILE, load_history, locate_prices, price_dirs, project_root
from spotmarket.prices._market import DEFAULT_PRODUCT, Market
from spotmarket.prices._readers import (
    ALL_PRODUCTS,
    LoadReport,
    load_report,
    read_prices,
    records_to_table,
    write_prices,
)

__all__ = [
    "ALL_PRODUCTS",
    "CANONICAL_COLUMNS",
    "COLLECTION_GAP_S",
    "DATA_ENV",
    "DEFAULT_PRICE_FILE",
    "DEFAULT_PRODUCT",
    "GAP_MEDIAN_RATIO",
    "LAYOUTS",
    "LoadReport",
    "Market",
    "PriceHistory",
    "PriceSeries",
    "load_history",
    "load_report",
    "locate_prices",
    "price_dirs",
    "project_root",
    "read_prices",
    "records_to_table",
    "to_seconds",
    "to_timestamp",
    "write_prices",
]
