"""Price lookups shared by the market replay: history -> one market's series, errors as MarketError."""

from __future__ import annotations

from collections.abc import Mapping

from spotmarket.errors import PriceDataError
from spotmarket.prices import Market, PriceHistory, PriceSeries
from spotmarket.errors import MarketError

Prices = PriceHistory | Mapping[Market, PriceSeries]
"""A :class:`PriceHistory`, or a plain mapping of markets to hand-made series (tests, fixtures)."""


def series_of(prices: Prices, market: Market | str) -> PriceSeries:
    """The price series of ``market`` (USD per instance-hour); an unknown market raises MarketError."""
    key = Market.parse(market) if isinstance(market, str) else market
    try:
        return prices[key]
    except PriceDataError as err:
        raise MarketError(str(err)) from err
    except KeyError:
        known = ", ".join(str(m) for m in list(prices)[:5]) if not isinstance(prices, PriceHistory) else ""
        raise MarketError(f"market {key} is not in the price data (known: {known}, ...)") from None


def as_prices(series: PriceSeries | list[PriceSeries] | Prices) -> Prices:
    """Accept one series, a list of series, a mapping or a PriceHistory; return something indexable."""
    if isinstance(series, PriceSeries):
        return {series.market: series}
    if isinstance(series, list | tuple):
        return {s.market: s for s in series}
    return series
