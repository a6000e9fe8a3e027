"""What the benchmarks share: paths to the bundled traces, a wall-clock timer, the 2015 price history, and the
writer of results JSONs (:func:`write_json`, which records each file's :func:`provenance`).

Benchmarks are scripts (``python benchmarks/bench_x.py``), so this module sits beside them and each
script puts the project root on ``sys.path`` before importing the project.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SPOT_PRICES = ROOT / "data" / "spot_prices"
TRACE = SPOT_PRICES / "us-east-1_2015.csv.gz"
TRACE_2021 = SPOT_PRICES / "eu-west-1_2021-08.csv.gz"
#: The built-in workloads' random-search curves (``builtin_curves.py``; also ``spottune simulate --workload builtin-*``)
BUILTIN_CURVES = ROOT / "data" / "learning_curves" / "builtin"


def run_times(fn: Callable[[], Any], repeats: int) -> tuple[list[float], Any]:
    """Wall time of each of ``repeats`` calls, seconds, and the last call's result."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, float, Any]:
    """Median and minimum wall time over ``repeats`` calls, seconds, and the last call's result."""
    times, out = run_times(fn, repeats)
    return statistics.median(times), min(times), out


def load_2015() -> tuple[Any, str]:
    """The us-east-1 2015 trace as a ``PriceHistory``, and how it was read."""
    from spotmarket.prices import PriceHistory, read_prices

    return PriceHistory(read_prices(TRACE)), "spotmarket.prices.read_prices"


#: The distributions whose versions every results JSON records (``provenance()["packages"]``).
PROVENANCE_PACKAGES = ("spottune", "torch", "numpy", "pandas", "scipy", "scikit-learn", "optuna", "boto3", "click")


def _git(*args: str) -> str | None:
    import subprocess

    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def provenance(argv: list[str] | None = None) -> dict:
    """How a results JSON was made: the command line (``argv``, default ``sys.argv`` with the interpreter first), the
    git commit of the tree, whether the tree had uncommitted changes (``dirty``), the versions of
    ``PROVENANCE_PACKAGES`` and of Python, and the UTC date and time. ``commit`` and ``dirty`` are None outside a git
    checkout; a package that is not installed has version None."""
    import datetime
    import platform
    from importlib import metadata

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "argv": [Path(sys.executable).name, *(sys.argv if argv is None else argv)],
        "commit": _git("rev-parse", "HEAD"),
        "dirty": None if status is None else bool(status),
        "packages": {"python": platform.python_version(), **{n: version(n) for n in PROVENANCE_PACKAGES}},
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def write_json(path: Path | str, data: dict, *, argv: list[str] | None = None, **dumps: Any) -> None:
    """Write a benchmark's results ``data`` to ``path`` as JSON with a ``provenance`` block (:func:`provenance`), which
    replaces one ``data`` may hold. ``dumps`` go to ``json.dumps`` (default ``indent=1``); ends with a newline."""
    import json

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    out = {**{k: v for k, v in data.items() if k != "provenance"}, "provenance": provenance(argv)}
    path.write_text(json.dumps(out, **{"indent": 1, **dumps}) + "\n")


def run_or_print(args: Any, run: Callable[[Any], dict], markdown: Callable[[dict], str]) -> int:
    """The tail of a JSON benchmark's ``main``: with ``args.markdown`` print the tables of the stored
    ``args.out``; otherwise ``run(args)``, write its JSON to ``args.out`` and print its tables. Returns 0."""
    import json

    if args.markdown:
        print(markdown(json.loads(args.out.read_text())))
        return 0
    r = run(args)
    write_json(args.out, r, default=float)
    print(markdown(r))
    return 0


def repeats_main(argv: list[str] | None, doc: str, out: Path, run: Callable[[Any], dict],
                 markdown: Callable[[dict], str], repeats: int) -> int:
    """``main`` of a benchmark whose only setting is ``--repeats`` (default ``repeats``): its ``--out`` (default
    ``out``) and ``--markdown`` as :func:`run_or_print` reads them; ``--repeats`` below 1 is a usage error (exit 2)."""
    import argparse

    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=repeats)
    ap.add_argument("--out", type=Path, default=out)
    ap.add_argument("--markdown", action="store_true", help="print the table from the JSON and exit")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error(f"--repeats {args.repeats}: must be an integer >= 1")
    return run_or_print(args, run, markdown)


def bootstrap_interval(values: Any, stat: Callable[[Any], Any], n: int = 10_000, level: float = 0.95,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat`` over paired units (studies, starts).

    ``values`` has shape (m, k): one row per unit, one column per policy, so a resample keeps each unit's policies
    together. ``stat`` maps the resampled column means, shape (n, k), to shape (n,) (e.g. a ratio of two columns).
    Units with a NaN in any column are left out. Draws from ``numpy.random.default_rng(seed)``; (nan, nan) with
    fewer than 2 units.
    """
    import numpy as np

    v = np.asarray(values, dtype=float)
    if v.ndim == 2:
        v = v[~np.isnan(v).any(axis=1)]
    if v.ndim != 2 or len(v) < 2:
        return float("nan"), float("nan")
    means = v[np.random.default_rng(seed).integers(0, len(v), size=(n, len(v)))].mean(axis=1)
    lo, hi = np.percentile(stat(means), [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def rate_interval(hits: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval of a rate from ``hits`` successes in ``n`` independent units, e.g. the top-3
    rate over test studies ("19 of 20 studies returned a true top-3 trial": 0.751-0.999).

    Parameters
    ----------
    hits : int
        Units that succeeded (0 <= hits <= n).
    n : int
        Units (studies).
    level : float, default 0.95
        Confidence level.

    Returns
    -------
    (float, float)
        Lower and upper bound, (nan, nan) when ``n`` is 0.

    Raises
    ------
    ValueError
        If ``hits`` is outside 0..n.

    Notes
    -----
    ``scipy.stats.binomtest(hits, n).proportion_ci(level, method="exact")``
    (https://docs.scipy.org/doc/scipy/reference/generated/scipy.stats.binomtest.html).
    """
    from scipy.stats import binomtest

    if n == 0:
        return float("nan"), float("nan")
    ci = binomtest(int(hits), int(n)).proportion_ci(confidence_level=level, method="exact")
    return float(ci.low), float(ci.high)
