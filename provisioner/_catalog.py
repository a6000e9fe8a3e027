"""Instance catalog: instance type -> vCPUs, memory, ECU, GPUs and on-demand price per region.

Sources, merged by :meth:`InstanceCatalog.load` ([I] catalog sources, see ``docs/design/provisioner.md``):

1. ``on_demand_2017_noahgift.csv`` (GitHub ``noahgift/spot_price_machine_learning``, MIT): 53 types
   with memory, ECU, vCPUs, GPUs and a Linux on-demand price in USD/hour. The file names no region;
   its prices match the 2017 us-east-1 Linux list prices (``data/spot_prices/README.md`` §4),
   so they are filed under ``us-east-1`` (configurable).
2. ``on_demand_us-east-1_2015.csv`` (GitHub ``prateek-s/spot-price-model``): the on-demand price of the
   five types of the 2015 us-east-1 spot trace, with an explicit region.
3. :data:`PUBLIC_FACTS`: a small table of published AWS facts for types the files above lack.
4. ``data/instance_types/instance_types.csv``: EC2's own ``DescribeInstanceTypes`` answer for 1,395 types
   (vCPUs, memory, GPUs and GPU memory, architectures, network; the snapshot moto 5.2.5 ships, Apache-2.0,
   ``data/instance_types/README.md``), so that every current type (c5 ... c7i, m5 ... m7i, r5, r6i, g4dn, g5,
   g6, p4d, p5) is known. Where the 2017 file also has a type, its vCPUs, memory, ECU and GPUs are kept (the
   replayed 2015/2017 experiments stay as they were) and the snapshot adds the rest.
5. ``on_demand_us-east-1_current.csv``: us-east-1 Linux on-demand list prices of current types (its
   ``basis`` column says how each was checked), then the ``on_demand_prices`` given to
   :meth:`InstanceCatalog.load` (the AWS Price List API in a live aws run), then its ``on_demand_files``
   (``--on-demand-prices FILE``).

When both files price a type in the same region, the **regional file wins** (source 2 over source 1):
it names its region, keeps three decimals where the other rounds to two (m3.medium 0.067 vs 0.07,
r3.large 0.175 vs 0.17), and is from the same era as the only spot trace those types appear in. Later
price sources win over earlier ones in the order above (decisions.md IC1).
"""

from __future__ import annotations

import csv
import difflib
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from spotmarket.data import data_dirs
from spotmarket.prices import price_dirs

from provisioner._instance_types import COLUMNS as _SNAPSHOT_COLUMNS
from provisioner.errors import CatalogError, UnknownInstanceType

#: File names of the two bundled on-demand sources.
SPECS_FILE = "on_demand_2017_noahgift.csv"
REGIONAL_PRICES_FILE = "on_demand_us-east-1_2015.csv"
#: More regional on-demand files in the same layout, read when found (one per region of a shipped trace).
#: ``on_demand_eu-west-1.csv`` holds *derived* prices (us-east-1 list price x 1.11, the documented
#: regional rule; its ``basis`` column and ``data/spot_prices/README.md`` §5 say so).
EXTRA_REGIONAL_PRICES_FILES = ("on_demand_eu-west-1.csv", "on_demand_us-east-1_current.csv")
#: The compact ``DescribeInstanceTypes`` table (``data/instance_types/``, :mod:`provisioner._instance_types`).
INSTANCE_TYPES_FILE = "instance_types.csv"

@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceFacts:
    """Published hardware facts for one instance type (no price).

    Parameters
    ----------
    vcpus : int
        Virtual CPUs.
    memory_gib : float
        Memory, GiB.
    ecu : float or None
        EC2 Compute Units; None where AWS publishes none (burstable types).
    gpus : int
        GPUs.
    gpu_memory_gib : float
        Memory of all the GPUs together, GiB (0 without GPUs).
    gpu_model : str
        E.g. ``"T4"``; empty without GPUs or where unpublished.
    architectures : tuple of str
        E.g. ``("x86_64",)``, ``("arm64",)``; empty where unknown.
    network : str
        EC2's network performance label, e.g. ``"Up to 10 Gigabit"``; empty where unknown.
    """

    vcpus: int
    memory_gib: float
    ecu: float | None
    gpus: int
    gpu_memory_gib: float = 0.0
    gpu_model: str = ""
    architectures: tuple[str, ...] = ()
    network: str = ""


#: Public AWS facts for instance types that the bundled CSVs lack. Of the 2015 trace's five types
#: (c3.xlarge, d2.8xlarge, g2.2xlarge, m3.medium, r3.large) only g2.2xlarge has no row with specs in
#: ``on_demand_2017_noahgift.csv``; its on-demand price comes from ``on_demand_us-east-1_2015.csv``.
#: Source: https://aws.amazon.com/ec2/previous-generation/ (G2 family: g2.2xlarge has 8 vCPUs,
#: 26 ECU, 15 GiB memory and 1 NVIDIA GRID K520 GPU).
#: The P3 types are not in the ``DescribeInstanceTypes`` snapshot (it lists no p3); their facts are AWS's
#: published P3 table (https://aws.amazon.com/ec2/instance-types/p3/: p3.2xlarge 1 V100 with 16 GiB, 8 vCPUs,
#: 61 GiB; p3.8xlarge 4 / 64 GiB, 32 vCPUs, 244 GiB; p3.16xlarge 8 / 128 GiB, 64 vCPUs, 488 GiB).
PUBLIC_FACTS: Mapping[str, InstanceFacts] = MappingProxyType({
    "g2.2xlarge": InstanceFacts(vcpus=8, memory_gib=15.0, ecu=26.0, gpus=1, gpu_memory_gib=4.0, gpu_model="K520",
                                architectures=("x86_64",)),
    "p3.2xlarge": InstanceFacts(vcpus=8, memory_gib=61.0, ecu=None, gpus=1, gpu_memory_gib=16.0, gpu_model="V100",
                                architectures=("x86_64",), network="Up to 10 Gigabit"),
    "p3.8xlarge": InstanceFacts(vcpus=32, memory_gib=244.0, ecu=None, gpus=4, gpu_memory_gib=64.0, gpu_model="V100",
                                architectures=("x86_64",), network="10 Gigabit"),
    "p3.16xlarge": InstanceFacts(vcpus=64, memory_gib=488.0, ecu=None, gpus=8, gpu_memory_gib=128.0, gpu_model="V100",
                                 architectures=("x86_64",), network="25 Gigabit"),
})


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceSpec:
    """One instance type's hardware and on-demand prices.

    Parameters
    ----------
    instance_type : str
        E.g. ``"r4.large"``.
    vcpus : int
        Virtual CPUs ("cores" in the paper's initialisation of T).
    memory_gib : float
        Memory, GiB.
    ecu : float or None
        EC2 Compute Units, None where unpublished.
    gpus : int
        GPUs.
    on_demand_usd_per_hour : mapping region -> float
        Linux on-demand price, USD per instance-hour, per region (may be empty: no price known).
    source : str
        Where the facts and each price come from.
    gpu_memory_gib : float
        Memory of all the GPUs together, GiB.
    gpu_model : str
        E.g. ``"T4"``, ``"A10G"``; empty without GPUs.
    architectures : tuple of str
        E.g. ``("x86_64",)``; empty where unknown.
    network : str
        EC2's network performance label, e.g. ``"Up to 25 Gigabit"``.
    """

    instance_type: str
    vcpus: int
    memory_gib: float
    ecu: float | None
    gpus: int
    on_demand_usd_per_hour: Mapping[str, float] = field(default_factory=dict, hash=False)
    source: str = ""
    gpu_memory_gib: float = 0.0
    gpu_model: str = ""
    architectures: tuple[str, ...] = ()
    network: str = ""

    def __post_init__(self) -> None:
        # read-only view, so a frozen spec cannot be changed through its price mapping
        object.__setattr__(self, "on_demand_usd_per_hour", MappingProxyType(dict(self.on_demand_usd_per_hour)))

    def on_demand(self, region: str) -> float:
        """On-demand price in ``region``, USD per instance-hour.

        Parameters
        ----------
        region : str
            E.g. ``"us-east-1"``.

        Returns
        -------
        float
            USD per instance-hour.

        Raises
        ------
        UnknownInstanceType
            If no on-demand price of this type is known in that region (never defaulted).
        """
        try:
            return self.on_demand_usd_per_hour[region]
        except KeyError:
            known = ", ".join(sorted(self.on_demand_usd_per_hour)) or "none"
            raise UnknownInstanceType(
                f"instance type {self.instance_type}: no on-demand price in region {region} (known regions: {known})"
            ) from None


def find_data_file(name: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Locate a bundled price file.

    Search order: ``data_dir`` if given (only there), else the price-data folders of
    :func:`spotmarket.prices.price_dirs` (``$SPOTTUNE_DATA``, the project's ``data/spot_prices/``, a
    wheel's ``share/spottune/data/spot_prices/``), the same order as price files.

    Parameters
    ----------
    name : str
        Bare file name, e.g. ``"on_demand_2017_noahgift.csv"``.
    data_dir : path, optional
        The only folder to look in.

    Returns
    -------
    pathlib.Path
        The first match.

    Raises
    ------
    CatalogError
        If no candidate folder holds the file; the message lists the folders searched.
    """
    folders = [Path(data_dir)] if data_dir is not None else price_dirs()
    for folder in folders:
        if (folder / name).is_file():
            return folder / name
    raise CatalogError(f"{name} not found in any of: {', '.join(str(f) for f in folders)}")


def _float(value: str, path: Path, line: int, column: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise CatalogError(f"{path}:{line}: column {column} is {value!r}, but must be a number") from None


def _read_rows(path: Path, required: Iterable[str]) -> Iterator[tuple[int, dict[str, str]]]:
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in required if c not in (reader.fieldnames or [])]
            if missing:
                raise CatalogError(f"{path}: missing columns {missing}")
            for i, row in enumerate(reader, start=2):
                yield i, {k: (v or "").strip() for k, v in row.items() if k is not None}
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _snapshot_path(path: str | os.PathLike[str] | None) -> Path | None:
    if path is not None:
        return Path(path)
    for folder in data_dirs("instance_types"):
        if (folder / INSTANCE_TYPES_FILE).is_file():
            return folder / INSTANCE_TYPES_FILE
    return None


def _read_snapshot_table(path: Path) -> dict[str, InstanceFacts]:
    out = {}
    for line, row in _read_rows(path, _SNAPSHOT_COLUMNS[:8]):
        out[row["instance_type"]] = InstanceFacts(
            vcpus=int(_float(row["vcpus"], path, line, "vcpus")),
            memory_gib=_float(row["memory_mib"], path, line, "memory_mib") / 1024.0,
            ecu=None,
            gpus=int(_float(row["gpus"], path, line, "gpus")),
            gpu_memory_gib=_float(row["gpu_memory_mib"] or "0", path, line, "gpu_memory_mib") / 1024.0,
            gpu_model=row["gpu_model"],
            architectures=tuple(row["architectures"].split()),
            network=row.get("network_performance", ""),
        )
    return out


class InstanceCatalog:
    """Instance type -> :class:`InstanceSpec`. A missing type raises :class:`UnknownInstanceType`.

    Parameters
    ----------
    specs : iterable of InstanceSpec
        One per instance type.

    Raises
    ------
    CatalogError
        If a type is listed twice.

    Examples
    --------
    >>> cat = InstanceCatalog.load()
    >>> cat["g2.2xlarge"].vcpus, cat["r3.large"].on_demand("us-east-1")
    (8, 0.175)
    """

    def __init__(self, specs: Iterable[InstanceSpec]):
        self._specs: dict[str, InstanceSpec] = {}
        for spec in specs:
            if spec.instance_type in self._specs:
                raise CatalogError(f"instance type {spec.instance_type} is listed twice")
            self._specs[spec.instance_type] = spec

    @classmethod
    def load(
        cls,
        *,
        specs_path: str | os.PathLike[str] | None = None,
        regional_prices_path: str | os.PathLike[str] | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        specs_region: str = "us-east-1",
        public_facts: Mapping[str, InstanceFacts] = PUBLIC_FACTS,
        instance_types_path: str | os.PathLike[str] | None = None,
        on_demand_files: Iterable[str | os.PathLike[str]] = (),
        on_demand_prices: Mapping[str, Mapping[str, float]] | None = None,
        on_demand_label: str = "AWS Price List API",
    ) -> "InstanceCatalog":
        """Build the catalog from the bundled files (module docstring, sources 1-5) and the prices given.

        Parameters
        ----------
        specs_path : path, optional
            File in the ``on_demand_2017_noahgift.csv`` layout (hardware facts and a Linux on-demand
            price in USD/hour; ``N/A`` = no price). Default: found with :func:`find_data_file`.
        regional_prices_path : path, optional
            File in the ``on_demand_us-east-1_2015.csv`` layout (``instance_type, region, os,
            on_demand_price_usd_per_hour``). Default: found with :func:`find_data_file`, and then the
            :data:`EXTRA_REGIONAL_PRICES_FILES` found there too (given: only this file).
        data_dir : path, optional
            Folder to look in for the default price files (instead of the search order).
        specs_region : str
            Region the specs file's prices are filed under (the file names none), default us-east-1.
        public_facts : mapping type -> InstanceFacts
            Hardware facts for types the specs file lacks; the specs file wins where both have a type.
        instance_types_path : path, optional
            The compact ``DescribeInstanceTypes`` table (:mod:`provisioner._instance_types` columns). Default:
            ``instance_types.csv`` of the ``instance_types`` data folder (:func:`spotmarket.data.data_dirs`),
            left out when not found.
        on_demand_files : iterable of path
            More files in the regional layout (``--on-demand-prices FILE``); they win over every other price.
        on_demand_prices : mapping region -> mapping type -> float, optional
            Prices in USD per instance-hour (the AWS Price List API's answer); they win over the bundled files.
        on_demand_label : str
            How :attr:`InstanceSpec.source` names ``on_demand_prices``.

        Returns
        -------
        InstanceCatalog

        Raises
        ------
        CatalogError
            If a file is missing or malformed, or a priced type has no hardware facts anywhere.
        """
        spath = Path(specs_path) if specs_path is not None else find_data_file(SPECS_FILE, data_dir)
        rpath = Path(regional_prices_path) if regional_prices_path is not None else find_data_file(REGIONAL_PRICES_FILE, data_dir)

        facts: dict[str, tuple[InstanceFacts, str]] = {}
        snap = _snapshot_path(instance_types_path)
        if snap is not None:
            for it, f in _read_snapshot_table(snap).items():
                facts[it] = (f, f"{snap.name} (EC2 DescribeInstanceTypes, moto 5.2.5 snapshot)")
        for it, f in public_facts.items():
            facts[it] = (f, "public AWS facts (aws.amazon.com/ec2/previous-generation, /instance-types/p3)")
        prices: dict[str, dict[str, tuple[float, str]]] = {}
        required = ("InstanceType", "memory_gb", "compute_units_ecu", "vcpu", "gpus", "linux_on_demand_cost_hourly")
        for line, row in _read_rows(spath, required):
            it = row["InstanceType"]
            ecu = row["compute_units_ecu"]
            old = facts.get(it)
            extra = {}
            if old is not None:  # the snapshot adds what the 2017 file lacks; its own columns win
                o = old[0]
                extra = dict(gpu_memory_gib=o.gpu_memory_gib, gpu_model=o.gpu_model, architectures=o.architectures,
                             network=o.network)
            facts[it] = (
                InstanceFacts(
                    vcpus=int(_float(row["vcpu"], spath, line, "vcpu")),
                    memory_gib=_float(row["memory_gb"], spath, line, "memory_gb"),
                    ecu=None if ecu.upper() in ("", "N/A", "VARIABLE") else _float(ecu, spath, line, "compute_units_ecu"),
                    gpus=int(_float(row["gpus"], spath, line, "gpus")),
                    **extra,
                ),
                spath.name + (f" + {old[1].split(' ')[0]}" if old is not None and extra else ""),
            )
            price = row["linux_on_demand_cost_hourly"]
            if price.upper() not in ("", "N/A"):
                prices.setdefault(it, {})[specs_region] = (_float(price, spath, line, "linux_on_demand_cost_hourly"), spath.name)
        rpaths = [rpath]
        if regional_prices_path is None:
            for name in EXTRA_REGIONAL_PRICES_FILES:
                try:
                    rpaths.append(find_data_file(name, data_dir))
                except CatalogError:  # optional: a region without it has no on-demand prices
                    pass
        def read_file(rp: Path) -> None:
            for line, row in _read_rows(rp, ("instance_type", "region", "on_demand_price_usd_per_hour")):
                value = _float(row["on_demand_price_usd_per_hour"], rp, line, "on_demand_price_usd_per_hour")
                if not value > 0:
                    raise CatalogError(f"{rp}:{line}: column on_demand_price_usd_per_hour is {value!r}, but must be > 0")
                basis = row.get("basis") or ""
                label = rp.name + (f" ({basis})" if basis else "")
                prices.setdefault(row["instance_type"], {})[row["region"]] = (value, label)  # later file wins

        for rp in rpaths:
            read_file(rp)
        for region, by_type in (on_demand_prices or {}).items():  # the API: over the bundled files
            for it, value in by_type.items():
                prices.setdefault(it, {})[region] = (float(value), on_demand_label)
        for rp in on_demand_files:  # the user's own files: over everything
            read_file(Path(rp))

        orphans = sorted(set(prices) - set(facts))
        if orphans:
            raise CatalogError(
                f"instance types {orphans} have an on-demand price but no vCPU/memory facts; "
                "add them to provisioner.PUBLIC_FACTS with a source"
            )
        specs = []
        for it in sorted(facts):
            f, fsource = facts[it]
            by_region = prices.get(it, {})
            psource = "; ".join(f"{r} price: {s}" for r, (_, s) in sorted(by_region.items()))
            specs.append(InstanceSpec(
                instance_type=it, vcpus=f.vcpus, memory_gib=f.memory_gib, ecu=f.ecu, gpus=f.gpus,
                gpu_memory_gib=f.gpu_memory_gib, gpu_model=f.gpu_model, architectures=f.architectures,
                network=f.network,
                on_demand_usd_per_hour={r: v for r, (v, _) in by_region.items()},
                source=f"specs: {fsource}" + (f"; {psource}" if psource else "; no on-demand price"),
            ))
        return cls(specs)

    def __getitem__(self, instance_type: str) -> InstanceSpec:
        try:
            return self._specs[instance_type]
        except KeyError:
            close = difflib.get_close_matches(str(instance_type), list(self._specs), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UnknownInstanceType(f"instance type {instance_type!r} is not in the catalog{hint}") from None

    def __contains__(self, instance_type: object) -> bool:
        return instance_type in self._specs

    def __iter__(self) -> Iterator[InstanceSpec]:
        return iter(self._specs[it] for it in sorted(self._specs))

    def __len__(self) -> int:
        return len(self._specs)

    @property
    def instance_types(self) -> list[str]:
        """Instance types, sorted."""
        return sorted(self._specs)

    def check_on_demand(self, markets: Iterable[object]) -> None:
        """Every market's type has an on-demand price in its region (the baselines and bid caps need one).

        Parameters
        ----------
        markets : iterable of spotmarket.prices.Market

        Raises
        ------
        UnknownInstanceType
            One message naming every (region, type) without a price and the regions that have prices.
        """
        missing = sorted({(m.region, m.instance_type) for m in markets  # type: ignore[attr-defined]
                          if m.region not in self[m.instance_type].on_demand_usd_per_hour})  # type: ignore[attr-defined]
        if missing:
            regions = sorted({r for spec in self for r in spec.on_demand_usd_per_hour})
            shown = ", ".join(f"{t} ({r})" for r, t in missing[:8]) + (" ..." if len(missing) > 8 else "")
            raise UnknownInstanceType(
                f"no on-demand price for {len(missing)} instance type(s) of the pool: {shown}; the catalog has "
                f"on-demand prices for {', '.join(regions)} (data/spot_prices/on_demand_*.csv); narrow the pool "
                "with --instance-types or add the prices")

    def on_demand_usd_per_hour(self, instance_type: str, region: str) -> float:
        """On-demand price of a type in a region, USD per instance-hour.

        Parameters
        ----------
        instance_type : str
            E.g. ``"r4.large"``.
        region : str
            E.g. ``"us-east-1"``.

        Returns
        -------
        float
            USD per instance-hour.

        Raises
        ------
        UnknownInstanceType
            If the type, or its price in that region, is not in the catalog.
        """
        return self[instance_type].on_demand(region)
