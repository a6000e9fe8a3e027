"""Benchmark: the price data layer on the real 2015 us-east-1 trace (15 markets, 274,099 records).

Targets: load + validate + one-minute grid for the 15 markets under 3 s on 2 cores; 10^5
``price_at`` / ``next_above`` queries under 1 s. Each step is compared, in the same run, with the obvious
pandas/Python way of doing it:

- load: ``pd.read_csv`` + ``pd.to_datetime(utc=True)`` (format inferred) + ``drop_duplicates`` +
  ``sort_values``, without any of the validation or line numbers of ``read_prices``;
- grid: per market, a ``pd.Series`` indexed by time, ``reindex(minutes, method="ffill")``;
- ``price_at``: ``pd.Series.asof`` per query, on a random sample of 2,000 queries, extrapolated to 10^5;
- ``next_above``: per query, ``np.argmax(prices[i + 1:] > b)`` (a forward scan), same sample size.

The sampled baseline answers must equal the vectorised ones (checked, recorded in the JSON).

Queries: market uniform over the 15 markets; time uniform over the market's history; max price
b = price(t) + U[0.00001, 0.2] USD/h (Tributary's rule, as in the paper).

Usage::

    .venv/bin/python benchmarks/bench_prices.py [--n 100000] [--repeats 5] [--out benchmarks/results/prices.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd

from _common import ROOT, TRACE, TRACE_2021, timed, write_json  # puts the project on sys.path

from spotmarket.prices import PriceHistory, load_report, read_prices  # noqa: E402

SAMPLE = 2_000


def naive_load(path: Path) -> pd.DataFrame:
    df = pd.read_csv(path)
    df["timestamp"] = pd.to_datetime(df["datetime"], utc=True)
    return df.drop_duplicates().sort_values("timestamp", kind="stable").reset_index(drop=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="queries per query type")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "prices.json")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    r = args.repeats

    load_med, load_min, table = timed(lambda: read_prices(TRACE), r)
    hist_med, hist_min, history = timed(lambda: PriceHistory(table), r)
    grid_med, grid_min, grids = timed(lambda: [s.minute_grid() for s in history], r)
    shared_med, shared_min, shared = timed(lambda: history.minute_grid(), r)
    report = load_report(table)
    series = list(history)
    l21_med, _, table21 = timed(lambda: read_prices(TRACE_2021, product_description="all"), max(1, r // 2))
    h21_med, _, history21 = timed(lambda: PriceHistory(table21), max(1, r // 2))

    # -- queries: market uniform, t uniform over the market's history, b = price(t) + U[0.00001, 0.2]
    which = rng.integers(0, len(series), args.n)
    t_q = np.empty(args.n)
    for j, s in enumerate(series):
        k = which == j
        t_q[k] = rng.uniform(s.start_s, s.end_s, k.sum())
    groups = [(s, np.flatnonzero(which == j)) for j, s in enumerate(series)]
    b_q = np.empty(args.n)
    for s, idx in groups:
        b_q[idx] = s.price_at(t_q[idx])
    b_q += rng.uniform(0.00001, 0.2, args.n)

    def all_price_at() -> np.ndarray:
        out = np.empty(args.n)
        for s, idx in groups:
            out[idx] = s.price_at(t_q[idx])
        return out

    def all_next_above() -> np.ndarray:
        out = np.empty(args.n)
        for s, idx in groups:
            out[idx] = s.next_above(t_q[idx], b_q[idx])
        return out

    for s in series:  # the range-maximum table is built once per series, on first use
        s._sparse = None
    t0 = time.perf_counter()
    all_next_above()
    first_next_above = time.perf_counter() - t0
    pa_med, pa_min, pa = timed(all_price_at, r)
    na_med, na_min, na = timed(all_next_above, r)
    s0, t0_s, b0 = series[0], float(t_q[groups[0][1][0]]), float(b_q[groups[0][1][0]])
    one_med, _, _ = timed(lambda: s0.price_at(t0_s), 500)
    one_na_med, _, _ = timed(lambda: s0.next_above(t0_s, b0), 500)

    # -- baselines, same run
    nl_med, nl_min, naive_table = timed(lambda: naive_load(TRACE), max(1, r // 2))
    pd_series = {}
    for s in series:
        idx = pd.DatetimeIndex(pd.to_datetime((s.times_s * 1e9).astype("int64"), utc=True))
        pd_series[s.market] = pd.Series(s.prices, index=idx)

    def naive_grid() -> list[pd.Series]:
        out = []
        for s in series:
            ps = pd_series[s.market]
            minutes = pd.date_range(ps.index[0].ceil("min"), pd.Timestamp(s.end_s, unit="s", tz="UTC").floor("min"),
                                    freq="1min")
            out.append(ps.reindex(minutes, method="ffill"))
        return out

    ng_med, ng_min, ngrid = timed(naive_grid, max(1, r // 2))
    grids_agree = all(np.array_equal(a.to_numpy(), b.to_numpy()) for a, b in zip(grids, ngrid))
    sample = rng.choice(args.n, size=min(SAMPLE, args.n), replace=False)

    def naive_price_at() -> np.ndarray:
        return np.array([pd_series[series[which[i]].market].asof(pd.Timestamp(t_q[i], unit="s", tz="UTC"))
                         for i in sample])

    def naive_next_above() -> np.ndarray:
        out = np.empty(sample.size)
        for k, i in enumerate(sample):
            s = series[which[i]]
            start = np.searchsorted(s.times_s, t_q[i], side="right")
            above = s.prices[start:] > b_q[i]
            out[k] = s.times_s[start + int(np.argmax(above))] if above.any() else np.inf
        return out

    npa_s, _, npa = timed(naive_price_at, 1)
    nna_s, _, nna = timed(naive_next_above, 1)
    scale = args.n / sample.size

    res = {
        "trace": str(TRACE.relative_to(ROOT.parent)),
        "records": report.records_read,
        "markets": len(history),
        "minutes_in_grids": int(sum(len(g) for g in grids)),
        "shared_grid_shape": list(shared.shape),
        "trace_2021": {"records": len(table21), "markets": len(history21)},
        "n_queries": args.n,
        "repeats": r,
        "seed": args.seed,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
                    "pandas": pd.__version__, "platform": platform.platform()},
        "seconds": {
            "load_validate_median": load_med, "load_validate_min": load_min,
            "price_history_median": hist_med, "price_history_min": hist_min,
            "minute_grid_15_markets_median": grid_med, "minute_grid_15_markets_min": grid_min,
            "shared_minute_grid_median": shared_med, "shared_minute_grid_min": shared_min,
            "load_plus_grid_median": load_med + hist_med + grid_med,
            "price_at_1e5_median": pa_med, "price_at_1e5_min": pa_min,
            "next_above_1e5_median": na_med, "next_above_1e5_min": na_min,
            "next_above_1e5_first_call": first_next_above,
            "price_at_single_call_median": one_med,
            "next_above_single_call_median": one_na_med,
            "load_validate_2021_all_products_median": l21_med,
            "price_history_2021_all_products_median": h21_med,
        },
        "baseline_seconds": {
            "naive_load_median": nl_med,
            "naive_grid_15_markets_median": ng_med,
            "asof_price_at_1e5_extrapolated": npa_s * scale,
            "scan_next_above_1e5_extrapolated": nna_s * scale,
            "sample_size": int(sample.size),
        },
        "agreement": {
            "grids_equal": bool(grids_agree),
            "price_at_sample_equal": bool(np.array_equal(npa, pa[sample])),
            "next_above_sample_equal": bool(np.array_equal(nna, na[sample])),
            "naive_load_rows": len(naive_table),
        },
        "targets": {"load_plus_grid_s": 3.0, "queries_1e5_s": 1.0},
    }
    sec, base = res["seconds"], res["baseline_seconds"]
    res["speedup"] = {
        "load_vs_naive": base["naive_load_median"] / sec["load_validate_median"],
        "grid_vs_naive": base["naive_grid_15_markets_median"] / sec["minute_grid_15_markets_median"],
        "price_at_vs_asof": base["asof_price_at_1e5_extrapolated"] / sec["price_at_1e5_median"],
        "next_above_vs_scan": base["scan_next_above_1e5_extrapolated"] / sec["next_above_1e5_median"],
    }
    res["targets_met"] = {
        "load_plus_grid": sec["load_plus_grid_median"] < 3.0,
        "price_at": sec["price_at_1e5_median"] < 1.0,
        "next_above": sec["next_above_1e5_median"] < 1.0,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, res, indent=2)
    ms = lambda x: f"{1e3 * x:.0f} ms"  # noqa: E731
    print(f"load+validate {ms(load_med)} (naive {ms(nl_med)}); PriceHistory {ms(hist_med)}; "
          f"grid {ms(grid_med)} (naive {ms(ng_med)}); load+grid {ms(sec['load_plus_grid_median'])}")
    print(f"price_at 1e5 {ms(pa_med)} (asof {base['asof_price_at_1e5_extrapolated']:.1f} s); next_above 1e5 "
          f"{ms(na_med)} (first call {ms(first_next_above)}; scan {base['scan_next_above_1e5_extrapolated']:.1f} s)")
    print(f"single calls: price_at {1e6 * one_med:.0f} us, next_above {1e6 * one_na_med:.0f} us")
    print(f"2021 trace, all products: load+validate {ms(l21_med)}, PriceHistory of {len(history21)} markets {ms(h21_med)}")
    print(f"agreement {res['agreement']}; targets met {res['targets_met']}; wrote {args.out}")


if __name__ == "__main__":
    main()
