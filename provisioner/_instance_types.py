"""Instance-type facts from EC2's own ``DescribeInstanceTypes`` answer, as one compact table.

The bundled table ``data/instance_types/instance_types.csv`` is derived from the snapshot
``data/instance_types/instance_types.json.gz`` (AWS's answer for 1,395 types, as shipped by moto 5.2.5,
Apache-2.0; ``data/instance_types/README.md``) by :func:`facts_from_describe`, the same function that reads a live
``ec2.describe_instance_types`` page (``spottune.backends.aws``). Regenerate it with::

    python -m provisioner._instance_types data/instance_types/instance_types.json.gz data/instance_types/instance_types.csv

Pure: no network, no boto3.
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

#: Columns of the compact table, in order (``data/instance_types/README.md`` says what each means).
COLUMNS = ("instance_type", "vcpus", "memory_mib", "gpus", "gpu_manufacturer", "gpu_model", "gpu_memory_mib",
           "architectures", "network_performance", "current_generation", "burstable", "bare_metal", "spot",
           "sustained_clock_ghz")


def facts_from_describe(item: Mapping[str, Any]) -> dict[str, Any]:
    """One row of the compact table from one ``InstanceTypes`` item of ``DescribeInstanceTypes``.

    Parameters
    ----------
    item : mapping
        An item as boto3 returns it (``VCpuInfo``, ``MemoryInfo``, ``GpuInfo``, ``ProcessorInfo``,
        ``NetworkInfo``, ...; https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceTypeInfo.html).

    Returns
    -------
    dict
        The :data:`COLUMNS`: ``vcpus`` (default vCPUs), ``memory_mib`` (MiB), ``gpus`` (count over every GPU
        entry), ``gpu_memory_mib`` (total over the GPUs, MiB), ``architectures`` (space-separated),
        ``network_performance`` (EC2's label, e.g. ``Up to 25 Gigabit``), the booleans as 0/1, ``spot`` = 1 when
        ``spot`` is a supported usage class, ``sustained_clock_ghz`` (empty when AWS gives none).

    Raises
    ------
    KeyError
        If the item lacks ``InstanceType``, ``VCpuInfo.DefaultVCpus`` or ``MemoryInfo.SizeInMiB``.
    """
    gpus = (item.get("GpuInfo") or {}).get("Gpus") or []
    proc = item.get("ProcessorInfo") or {}
    clock = proc.get("SustainedClockSpeedInGhz")
    return {
        "instance_type": item["InstanceType"],
        "vcpus": int(item["VCpuInfo"]["DefaultVCpus"]),
        "memory_mib": int(item["MemoryInfo"]["SizeInMiB"]),
        "gpus": sum(int(g.get("Count", 0)) for g in gpus),
        "gpu_manufacturer": " ".join(sorted({str(g.get("Manufacturer", "")) for g in gpus} - {""})),
        "gpu_model": " ".join(sorted({str(g.get("Name", "")) for g in gpus} - {""})),
        "gpu_memory_mib": int((item.get("GpuInfo") or {}).get("TotalGpuMemoryInMiB")
                              or sum(int(g.get("Count", 0)) * int((g.get("MemoryInfo") or {}).get("SizeInMiB", 0))
                                     for g in gpus)),
        "architectures": " ".join(proc.get("SupportedArchitectures") or []),
        "network_performance": (item.get("NetworkInfo") or {}).get("NetworkPerformance", ""),
        "current_generation": int(bool(item.get("CurrentGeneration"))),
        "burstable": int(bool(item.get("BurstablePerformanceSupported"))),
        "bare_metal": int(bool(item.get("BareMetal"))),
        "spot": int("spot" in (item.get("SupportedUsageClasses") or [])),
        "sustained_clock_ghz": "" if clock is None else float(clock),
    }


def read_snapshot(path: str | Path) -> list[dict[str, Any]]:
    """The ``DescribeInstanceTypes`` items of a snapshot file.

    Parameters
    ----------
    path : path
        A JSON file (``.gz`` is decompressed): an object type -> item (moto's layout), a list of items, or a
        ``{"InstanceTypes": [...]}`` page as boto3 returns it.

    Returns
    -------
    list of dict
        The items, sorted by instance type.
    """
    p = Path(path)
    with (gzip.open(p, "rt", encoding="utf-8") if p.suffix == ".gz" else open(p, encoding="utf-8")) as fh:
        data = json.load(fh)
    if isinstance(data, Mapping) and "InstanceTypes" in data:
        items = list(data["InstanceTypes"])
    elif isinstance(data, Mapping):
        items = list(data.values())
    else:
        items = list(data)
    return sorted(items, key=lambda i: i["InstanceType"])


def write_table(rows: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Write compact rows (:data:`COLUMNS`) as CSV, sorted by instance type.

    Parameters
    ----------
    rows : iterable of mapping
        Rows of :func:`facts_from_describe`.
    path : path
        Output CSV.

    Returns
    -------
    int
        Rows written.
    """
    rows = sorted(rows, key=lambda r: r["instance_type"])
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    """``python -m provisioner._instance_types SNAPSHOT OUT.csv``: derive the compact table.

    Parameters
    ----------
    argv : list of str, optional
        ``[snapshot, out]``; default ``sys.argv[1:]``.

    Returns
    -------
    int
        Exit code (0).
    """
    snapshot, out = argv if argv is not None else sys.argv[1:]
    n = write_table((facts_from_describe(i) for i in read_snapshot(snapshot)), out)
    print(f"{n} instance types -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
