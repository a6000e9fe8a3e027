"""AWS's own capacity signals, for the revocation predictor: Spot placement scores and rebalance recommendations.

- **Spot placement score** (``GetSpotPlacementScores``): for one instance type and a target capacity, a score
  from 1 to 10 per availability zone ("how likely a Spot request is to succeed"; 10: very likely). EC2 answers
  per zone *ID* (``use1-az1``), mapped to zone names with ``describe_availability_zones``. One call per
  instance type (the score of a list of types is for the list as a whole). AWS limits an account to a few
  distinct configurations per 24 hours, so the scores are read once, at the start of a run.
  Source: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-placement-score.html
- **Rebalance recommendation** (IMDS ``events/recommendations/rebalance``): the instance is at elevated risk
  of interruption; relayed by the agent (``spottune.backends.aws.agent``) as an early hint.
- **Interruption frequency** (the Spot Instance Advisor's bands, <5 % ... >20 %) is not an EC2 API: it is a
  public JSON file of the advisor web page, not read here.

**Fallback** when the API does not answer (an account or region without the permission
``ec2:GetSpotPlacementScores``, or an endpoint without the call: moto 5.2.5 does not implement it):
:func:`read_placement_scores` warns once and returns no score; the predictor then has no AWS signal and
works from prices and observed interruptions alone, as in every other mode.

How a signal reaches the predictor: the aws backend journals it and delivers it to the orchestrator as a
``spottune.orchestrator.MarketSignal`` (``kind``: :data:`PLACEMENT_SCORE` with the score, :data:`REBALANCE` with
1.0), which hands it to the chooser and so to a revocation predictor that takes signals
(:class:`revpred.protocol.SignalledRevocationPredictor`); a resumed run delivers it again from the journal.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

__all__ = ["PLACEMENT_SCORE", "REBALANCE", "placement_scores", "read_placement_scores"]

#: ``kind`` of a Spot placement score signal (value: 1..10).
PLACEMENT_SCORE = "placement_score"
#: ``kind`` of a rebalance recommendation signal (value: 1.0).
REBALANCE = "rebalance"


def placement_scores(ec2: Any, instance_types: Sequence[str], zones: Sequence[str], *, region: str,
                     target_capacity: int = 1) -> dict[Any, int]:
    """Spot placement score (1..10) of each market ``(zone, instance type)`` of the pool.

    Parameters
    ----------
    ec2 : botocore EC2 client
    instance_types, zones : sequence of str
        The pool; a zone EC2 gives no score for is left out.
    region : str
    target_capacity : int, default 1
        Instances asked for (one per trial segment).

    Returns
    -------
    dict spotmarket.prices.Market -> int

    Raises
    ------
    botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError, botocore.parsers.ResponseParserError
        If EC2 refuses or does not implement the call.
    """
    from spotmarket.prices import Market

    names = {z["ZoneId"]: z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    wanted = set(zones)
    out: dict[Any, int] = {}
    for itype in instance_types:
        pages = ec2.get_paginator("get_spot_placement_scores").paginate(
            InstanceTypes=[itype], TargetCapacity=int(target_capacity), SingleAvailabilityZone=True,
            RegionNames=[region])
        for page in pages:
            for s in page.get("SpotPlacementScores", []):
                zone = names.get(s.get("AvailabilityZoneId", ""))
                if zone in wanted:
                    out[Market(zone, itype)] = int(s["Score"])
    return out


def read_placement_scores(ec2: Any, instance_types: Sequence[str], zones: Sequence[str], *,
                          region: str) -> dict[Any, int]:
    """:func:`placement_scores`, or ``{}`` with a ``RuntimeWarning`` when the API does not answer (module doc).

    Parameters
    ----------
    ec2 : botocore.client.BaseClient
        An EC2 client.
    instance_types : sequence of str
        The pool's types.
    zones : sequence of str
        The pool's availability zones.
    region : str
        Their region.

    Returns
    -------
    dict of Market to int
        Spot placement score (1..10) per market; empty when unavailable.
    """
    from botocore.exceptions import BotoCoreError, ClientError
    from botocore.parsers import ResponseParserError  # moto's "not implemented" is an HTML page

    try:
        return placement_scores(ec2, instance_types, zones, region=region)
    except (ClientError, BotoCoreError, ResponseParserError) as exc:
        warnings.warn(f"Spot placement scores are unavailable ({type(exc).__name__}: {exc}); the predictor "
                      "works without them", RuntimeWarning, stacklevel=2)
        return {}
