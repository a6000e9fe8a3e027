"""The allowed pool of spot markets: instance types × availability zones, with hardware filters.

Decision D2 ([I]): Linux/UNIX by default; the pool is every (type, zone) market of the price history that
passes the filters, or an explicit list of markets.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from spotmarket.prices import DEFAULT_PRODUCT, Market, PriceHistory

from provisioner._catalog import InstanceCatalog
from provisioner.errors import NoMarketAvailable, ProvisionerConfigError

_log = logging.getLogger("provisioner")
_NOTED: set[str] = set()


def _tuple(values: Iterable | None, what: str) -> tuple | None:
    if values is None:
        return None
    if isinstance(values, (str, Market)):
        raise ProvisionerConfigError(f"{what} is {values!r}, but must be a list, not a single value")
    return tuple(values)


@dataclass(frozen=True, slots=True, kw_only=True)
class Pool:
    """Which markets a trial may run on.

    Parameters
    ----------
    instance_types : iterable of str, optional
        Allowed types (each must be in the catalog); None = every type in the price history that the
        catalog knows with an on-demand price in the market's region (the others are left out and named
        in one logged warning).
    availability_zones : iterable of str, optional
        Allowed zones; None = all.
    product_description : str
        Product of the markets, default ``Linux/UNIX`` (when the history has none, as in post-2017 traces,
        ``Linux/UNIX (Amazon VPC)``).
    min_vcpus : int
        Keep types with at least this many vCPUs.
    min_memory_gib : float
        Keep types with at least this much memory, GiB.
    min_gpus : float
        Keep types with at least this many GPUs (a trainable's ``resources["gpu"]``; decisions.md IC2).
    markets : iterable of Market, optional
        An explicit market list instead of types × zones. The type, zone, vCPU and memory filters
        still apply; ``product_description`` does not (each market names its own).

    Examples
    --------
    >>> pool = Pool(instance_types=["r3.large", "c3.xlarge"], availability_zones=["us-east-1a"], min_vcpus=4)
    >>> pool.instance_types, pool.min_vcpus
    (('r3.large', 'c3.xlarge'), 4)
    """

    instance_types: tuple[str, ...] | None = None
    availability_zones: tuple[str, ...] | None = None
    product_description: str = DEFAULT_PRODUCT
    min_vcpus: int = 0
    min_memory_gib: float = 0.0
    min_gpus: float = 0.0
    markets: tuple[Market, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "instance_types", _tuple(self.instance_types, "instance_types"))
        object.__setattr__(self, "availability_zones", _tuple(self.availability_zones, "availability_zones"))
        object.__setattr__(self, "markets", _tuple(self.markets, "markets"))
        if self.min_vcpus < 0:
            raise ProvisionerConfigError(f"min_vcpus is {self.min_vcpus}, but must be >= 0")
        if self.min_memory_gib < 0:
            raise ProvisionerConfigError(f"min_memory_gib is {self.min_memory_gib}, but must be >= 0")
        if self.min_gpus < 0:
            raise ProvisionerConfigError(f"min_gpus is {self.min_gpus}, but must be >= 0")

    def resolve(self, history: PriceHistory, catalog: InstanceCatalog) -> list[Market]:
        """The pool's markets, sorted by (zone, type, product).

        Parameters
        ----------
        history : PriceHistory
            The markets that have prices.
        catalog : InstanceCatalog
            Hardware of every instance type (for the filters).

        Returns
        -------
        list of Market

        Raises
        ------
        UnknownInstanceType
            If a type of the pool (or of the history, when ``instance_types`` is None) is not in the
            catalog: hardware is never defaulted.
        ProvisionerConfigError
            If a listed type, zone or market has no series in the price history.
        NoMarketAvailable
            If no market passes the filters.
        """
        if self.markets is not None:
            missing = [str(m) for m in self.markets if m not in history]
            if missing:
                raise ProvisionerConfigError(f"markets {missing} are not in the price history")
            candidates = sorted(set(self.markets))
            if self.instance_types is not None:
                candidates = [m for m in candidates if m.instance_type in self.instance_types]
            if self.availability_zones is not None:
                candidates = [m for m in candidates if m.availability_zone in self.availability_zones]
        else:
            product = self.product_description
            if product == DEFAULT_PRODUCT and not history.select(product_description=product):
                product = DEFAULT_PRODUCT + " (Amazon VPC)"  # post-2017 traces label Linux this way only
            candidates = history.select(
                instance_types=self.instance_types,
                availability_zones=self.availability_zones,
                product_description=product,
            )
            for what, wanted, seen in (
                ("instance type", self.instance_types, {m.instance_type for m in candidates}),
                ("availability zone", self.availability_zones, {m.availability_zone for m in candidates}),
            ):
                absent = sorted(set(wanted or ()) - seen)
                if absent:
                    raise ProvisionerConfigError(
                        f"{what}s {absent} have no {product} market in the price history"
                    )
        if self.instance_types is None and self.markets is None:
            # the default pool is the history's types that the catalog knows; the others are named once
            def known(m: Market) -> bool:
                return m.instance_type in catalog and m.region in catalog[m.instance_type].on_demand_usd_per_hour

            unknown = sorted({m.instance_type for m in candidates if not known(m)})
            if unknown:
                candidates = [m for m in candidates if known(m)]
                note = (f"pool: {len(unknown)} instance type(s) of the price data are not in the instance catalog (or "
                        f"have no on-demand price there) and are left out: "
                        + ", ".join(unknown[:12]) + (" ..." if len(unknown) > 12 else ""))
                if note not in _NOTED:  # once per process: a run resolves its pool more than once
                    _NOTED.add(note)
                    _log.warning(note)
        for it in sorted({m.instance_type for m in candidates}):
            catalog[it]  # UnknownInstanceType if missing: never a default
        def fits(it: str) -> bool:
            spec = catalog[it]
            return spec.vcpus >= self.min_vcpus and spec.memory_gib >= self.min_memory_gib and spec.gpus >= self.min_gpus

        kept = [m for m in candidates if fits(m.instance_type)]
        too_small = sorted({m.instance_type for m in candidates} - {m.instance_type for m in kept})
        if not kept:
            raise NoMarketAvailable(
                f"no market passes the pool filters (types={self.instance_types}, zones={self.availability_zones}, "
                f"product={self.product_description!r}, min_vcpus={self.min_vcpus}, min_memory_gib={self.min_memory_gib}, "
                f"min_gpus={self.min_gpus:g}); {len(candidates)} market(s) before the vCPU/memory/GPU filters"
                + (f", of the types {', '.join(too_small[:8])}" if too_small else "")
            )
        if too_small and self.instance_types is not None:
            note = (f"pool: {len(too_small)} listed instance type(s) have fewer vCPUs, GiB or GPUs than a trial needs "
                    f"(vCPUs >= {self.min_vcpus}, memory >= {self.min_memory_gib:g} GiB, GPUs >= {self.min_gpus:g}) and "
                    "are left out: " + ", ".join(too_small))
            if note not in _NOTED:
                _NOTED.add(note)
                _log.warning(note)
        return kept
