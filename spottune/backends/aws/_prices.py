"""Spot prices from the EC2 API: ``describe_spot_price_history``, paginated, as a ``PriceSeries`` to bill.

The ledger of the AWS backend bills every instance run at the prices EC2 reports for its market over the
run (:meth:`ApiPrices.series`) with :class:`spotmarket.Billing`, the simulator's rules (per second, the
first-hour refund when the provider ended it). EC2 answers a window with every price change in it plus
the last change before its start (the price in force at the start).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

__all__ = ["ApiPrices", "fetch_records"]


def fetch_records(client: Any, *, instance_types: list[str], product_descriptions: list[str], start_utc: datetime,
                  end_utc: datetime, page_size: int = 1000,
                  availability_zone: str | None = None) -> tuple[list[dict], int]:
    """All ``describe_spot_price_history`` records in [start, end], following ``NextToken``.

    Parameters
    ----------
    client : botocore EC2 client
    instance_types, product_descriptions : list of str
    start_utc, end_utc : datetime
        tz-aware; the API also returns the last price change before the start (the price in force).
    page_size : int
        ``MaxResults`` per request (the API allows up to 1000).
    availability_zone : str, optional
        Only this zone.

    Returns
    -------
    records : list of dict
        The API's ``SpotPriceHistory`` items, all pages.
    pages : int
        Number of requests made.
    """
    paginator = client.get_paginator("describe_spot_price_history")
    records: list[dict] = []
    pages = 0
    extra = {"AvailabilityZone": availability_zone} if availability_zone else {}
    for page in paginator.paginate(InstanceTypes=instance_types, ProductDescriptions=product_descriptions,
                                   StartTime=start_utc, EndTime=end_utc, PaginationConfig={"PageSize": page_size},
                                   **extra):
        pages += 1
        records.extend(page.get("SpotPriceHistory", []))
    return records, pages


class ApiPrices:
    """Price series of single markets over single runs, read from the EC2 API.

    Parameters
    ----------
    ec2 : botocore.client.BaseClient
        An EC2 client (``describe_spot_price_history``).
    """

    def __init__(self, ec2: Any):
        self.ec2 = ec2
        self.calls = 0

    def series(self, market: Any, start_s: float, end_s: float) -> Any:
        """The market's prices (USD per instance-hour) over ``[start_s, end_s]`` as a ``PriceSeries``.

        Parameters
        ----------
        market : spotmarket.prices.Market
            The market.
        start_s, end_s : float
            The run, seconds since the epoch (UTC).

        Returns
        -------
        spotmarket.prices.PriceSeries
            From the price in force at ``start_s`` to ``end_s``.

        Raises
        ------
        spottune.errors.BackendError
            If EC2 reports no price in force at ``start_s`` (the run cannot be billed).
        """
        import numpy as np

        from spotmarket.prices import PriceSeries
        from spottune.errors import BackendError

        def utc(t: float) -> datetime:
            return datetime.fromtimestamp(t, tz=timezone.utc)

        recs, _ = fetch_records(self.ec2, instance_types=[market.instance_type],
                                product_descriptions=[market.product_description], start_utc=utc(start_s),
                                end_utc=utc(end_s), availability_zone=market.availability_zone)
        self.calls += 1
        rows = sorted({(r["Timestamp"].timestamp(), float(r["SpotPrice"])) for r in recs
                       if r.get("AvailabilityZone") == market.availability_zone})
        if not rows or rows[0][0] > start_s:
            raise BackendError(f"describe_spot_price_history has no price of {market} in force at {utc(start_s)}")
        times = np.array([t for t, _ in rows])
        prices = np.array([p for _, p in rows])
        return PriceSeries(market, times, prices, end_s=max(float(end_s), float(times[-1])))
