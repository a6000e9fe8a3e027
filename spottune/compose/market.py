"""The replayed spot market of one experiment: prices, catalog, pool, markets and the revocation rule.

:func:`build_market` loads the price history (USD per instance-hour) and resolves the pool on it;
:func:`revocation_model` is the project's only ``legacy | modern`` switch; :func:`check_start` and
:func:`gap_warnings` check a start against the data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from provisioner import InstanceCatalog, Pool
from spotmarket import LegacyBidRevocation, ModernHazardRevocation, RevocationModel
from spotmarket.prices import Market, PriceHistory, load_history, to_timestamp
from spottune.errors import ConfigError
from spottune.experiment import MARKET_MODES

__all__ = ["DAY_S", "GAP_WARNING_S", "MarketSetup", "build_market", "check_start", "gap_warnings", "revocation_model"]

#: Seconds per day.
DAY_S = 86400.0


def revocation_model(market_mode: str, history: PriceHistory, seed: int) -> RevocationModel:
    """The spot revocation rule of a market mode: the project's only ``legacy | modern`` switch.

    Parameters
    ----------
    market_mode : {"legacy", "modern"}
        ``legacy``: the 2017 bid rule, revoked when the price rises above the max price
        (:class:`spotmarket.LegacyBidRevocation`); ``modern``: today's capacity interruptions, a hazard
        model calibrated on recorded interruption traces (:class:`spotmarket.ModernHazardRevocation`),
        its draws seeded by ``seed``.
    history : spotmarket.prices.PriceHistory
        Spot prices, USD per instance-hour.
    seed : int

    Returns
    -------
    spotmarket.RevocationModel
        The rule the replay applies to every launch.

    Raises
    ------
    ConfigError
        If ``market_mode`` is not one of :data:`spottune.experiment.MARKET_MODES`.
    """
    if market_mode == "legacy":
        return LegacyBidRevocation(history)
    if market_mode == "modern":
        return ModernHazardRevocation(None, seed, history=history)
    raise ConfigError(f"market_mode is {market_mode!r}, but must be one of {', '.join(MARKET_MODES)}")


@dataclass(frozen=True, slots=True)
class MarketSetup:
    """The replayed spot market of one experiment.

    Attributes
    ----------
    history : spotmarket.prices.PriceHistory
        Spot prices, USD per instance-hour.
    catalog : provisioner.InstanceCatalog
        vCPUs, ECU and on-demand prices (USD/hour) per instance type.
    pool : provisioner.Pool
    markets : list of spotmarket.prices.Market
        The pool resolved on the history (sorted).
    market_mode : {"legacy", "modern"}
    revocation_model : spotmarket.RevocationModel
        :func:`revocation_model` of ``market_mode``.
    """

    history: PriceHistory
    catalog: InstanceCatalog
    pool: Pool
    markets: list[Market]
    market_mode: str
    revocation_model: RevocationModel

    def facts(self, instance_type: str) -> tuple[int, float | None]:
        """(vCPUs, ECU or None) of an instance type: what the backends' speed model reads.

        Parameters
        ----------
        instance_type : str
            A type of the catalog, e.g. ``m4.large``.

        Returns
        -------
        tuple of (int, float or None)
            Its vCPUs and ECU (None when the catalog has no ECU for it).
        """
        it = self.catalog[instance_type]
        return it.vcpus, it.ecu


def build_market(prices: str | None, *, market_mode: str, seed: int, instance_types: Sequence[str] | None = None,
                 availability_zones: Sequence[str] | None = None, history: PriceHistory | None = None,
                 markets: Sequence[Market] | None = None, resources: Mapping[str, float] | None = None,
                 on_demand_prices: str | None = None,
                 api_prices: Mapping[str, Mapping[str, float]] | None = None) -> MarketSetup:
    """Load the price history and build the market of one experiment.

    Parameters
    ----------
    prices : str or None
        Price file path or dataset name (``spotmarket.prices.load_history``; None: its default trace).
    market_mode : {"legacy", "modern"}
    seed : int
        Seeds the modern mode's interruption draws.
    instance_types, availability_zones : sequence of str, optional
        The pool (None: every type / zone of the price data).
    history : spotmarket.prices.PriceHistory, optional
        Given prices instead of loading ``prices`` (the aws backend's live prices).
    markets : sequence of Market, optional
        An explicit market list for the pool instead of types x zones (the ray backend: the markets the
        cluster offers); the type and zone filters still apply.
    resources : mapping, optional
        What one trial needs (``cpu``, ``gpu``, ``memory_gib``; :func:`spottune.trainable.parse_resources`): the pool
        keeps the types with at least that many vCPUs, GPUs and GiB (decisions.md IC2).
    on_demand_prices : str, optional
        A CSV of on-demand prices (USD per instance-hour) that wins over the bundled tables (``--on-demand-prices``).
    api_prices : mapping region -> mapping type -> float, optional
        On-demand prices from the AWS Price List API (USD per instance-hour); they win over every file.

    Returns
    -------
    MarketSetup
        The history, the catalog, the pool, its markets and the revocation model.

    Raises
    ------
    ConfigError
        On a bad market mode; price and pool errors (a missing file, a type the catalog lacks) come
        from ``spotmarket`` / ``provisioner``.
    """
    if market_mode not in MARKET_MODES:  # before minutes of loading
        raise ConfigError(f"market_mode is {market_mode!r}, but must be one of {', '.join(MARKET_MODES)}")
    history = load_history(prices) if history is None else history  # given: live prices (aws backend)
    catalog = InstanceCatalog.load(on_demand_files=[on_demand_prices] if on_demand_prices else (),
                                   on_demand_prices=api_prices)
    need = dict(resources or {})
    pool = Pool(instance_types=instance_types, availability_zones=availability_zones, markets=markets,
                min_vcpus=math.ceil(need.get("cpu", 0.0)), min_memory_gib=need.get("memory_gib", 0.0),
                min_gpus=need.get("gpu", 0.0))
    markets = pool.resolve(history, catalog)
    return MarketSetup(history=history, catalog=catalog, pool=pool, markets=markets, market_mode=market_mode,
                       revocation_model=revocation_model(market_mode, history, seed))


#: ``spottune run`` warns about the collection gaps of the replayed prices within this long after its start, seconds.
GAP_WARNING_S = 86400.0


def gap_warnings(market: MarketSetup, start_s: float) -> list[str]:
    """One warning line per collection gap of the replayed price data (no record in any of its markets for far longer
    than usual, :meth:`spotmarket.prices.PriceHistory.collection_gaps`) within :data:`GAP_WARNING_S` after
    ``start_s``: the replay reads the prices there as flat, so no price crossing can revoke or refund anything
    (data/spot_prices/README.md, "Quirks").

    Parameters
    ----------
    market : MarketSetup
        The replayed market.
    start_s : float
        Experiment start, seconds since the epoch (UTC).

    Returns
    -------
    list of str
        One line per gap; empty when there is none.
    """
    def utc(t: float) -> str:
        return f"{to_timestamp(t):%Y-%m-%d %H:%M} UTC"

    return [f"warning: {'the start lies in' if a < start_s else 'the first day of the run meets'} a {(b - a) / 3600:.1f} h "
            f"collection gap of the price data ({utc(a)} .. {utc(b)}: no record in any of its markets); the replay "
            "reads the prices there as flat"
            for a, b in market.history.collection_gaps() if a < start_s + GAP_WARNING_S and b > start_s]


def check_start(market: MarketSetup, start_s: float, train_days: float, *, live: bool = False) -> None:
    """The start must leave ``train_days`` of price history of every pool market before it, inside the history.

    A replay needs prices after its start (``start_s < history.end_s``); live prices (the aws backend) are read
    up to now, the run starts then, and ``start_s == history.end_s`` is allowed (decision AWS16; the last prices are
    held past now for the run, AWS17).

    Parameters
    ----------
    market : MarketSetup
    start_s : float
        Experiment start, seconds since the epoch (UTC).
    train_days : float
        Days of history the predictor is trained on before the start.
    live : bool, default False
        The history ends at now (live prices): the start may equal its end.

    Raises
    ------
    ConfigError
        Naming the start and the allowed range.
    """
    history = market.history
    first = max(history[m].start_s for m in market.markets)
    lo, hi = first + train_days * DAY_S, history.end_s
    if lo >= hi:  # no start fits: say what is short, not an empty interval
        raise ConfigError(f"train_days is {train_days:g}, but every pool market has prices only from {to_timestamp(first)} "
                          f"to {to_timestamp(hi)} ({(hi - first) / DAY_S:.3g} days), and a start needs train_days of "
                          "them before it; lower --train-days or give longer price data")
    if not (lo <= start_s <= hi if live else lo <= start_s < hi):
        raise ConfigError(
            f"start is {to_timestamp(start_s)}, but must lie in [{to_timestamp(lo)}, {to_timestamp(hi)}{']' if live else ')'}: every "
            f"pool market has prices from {to_timestamp(first)} to {to_timestamp(hi)}, and a start needs train_days "
            f"({train_days:g}) of them before it"
        )

