"""Benchmark: market replay queries on the real 2015 us-east-1 trace (15 markets, 274,099 records).

Target: 10^5 next-revocation queries and 10^5 run-cost queries, each under 1 s on 2 cores.
Each vectorised query type is compared, in the same run, with a naive per-query Python loop on a
random sample (extrapolated to 10^5 per query), and the sample's answers must agree exactly.

Queries: market uniform over the 15 markets; launch time uniform over the part of each market's history
with an hour before and two hours after; max price = price(t) + U[0.00001, 0.2] (Tributary's rule, as in the paper); run length
U[0, 7200] s, ended by the user or the provider with probability 1/2.

Usage::

    .venv/bin/python benchmarks/bench_market.py [--n 100000] [--out benchmarks/results/market.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from _common import ROOT, TRACE, load_2015, timed, write_json  # puts the project on sys.path

from spotmarket import Billing, LegacyBidRevocation, MarketReplay, ModernHazardRevocation  # noqa: E402

TARGET_S = 1.0


def naive_next_above(series, t: float, b: float) -> float:
    """Per-query baseline: bisect to the launch, then walk the records until the price exceeds b."""
    i = int(np.searchsorted(series.times_s, t, side="right"))
    times, prices = series.times_s, series.prices
    while i < len(times) and prices[i] <= b:
        i += 1
    return float(times[i]) if i < len(times) else float("inf")


def naive_cost(series, start: float, end: float, who: str) -> float:
    """Per-query baseline: walk the price records over the run, then apply the refund rule."""
    times, prices = series.times_s, series.prices
    i = int(np.searchsorted(times, start, side="right")) - 1
    total, t = 0.0, start
    while t < end:
        nxt = times[i + 1] if i + 1 < len(times) else float("inf")
        seg_end = min(nxt, end)
        total += prices[i] * (seg_end - t)
        t, i = seg_end, i + 1
    total /= 3600.0
    return 0.0 if (who == "provider" and end - start < 3600.0) else total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--sample", type=int, default=2000, help="queries timed with the naive loops")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "market.json"))
    args = ap.parse_args()

    t0 = time.perf_counter()
    history, loader = load_2015()
    load_s = time.perf_counter() - t0
    markets = history.markets
    rng = np.random.default_rng(args.seed)
    n = args.n
    which = rng.integers(0, len(markets), n)
    lo = np.array([history[m].start_s + 3600.0 for m in markets])[which]
    hi = np.full(n, history.end_s - 7200.0)
    t = np.floor(lo + rng.uniform(0, 1, n) * (hi - lo))
    ms = [markets[i] for i in which]
    price = np.empty(n)
    for j, m in enumerate(markets):
        idx = which == j
        price[idx] = history[m].price_at(t[idx])
    b = price + rng.uniform(0.00001, 0.2, n)
    length = rng.uniform(0, 7200.0, n)
    who = np.where(rng.uniform(size=n) < 0.5, "provider", "user")
    groups = [(markets[j], np.flatnonzero(which == j)) for j in range(len(markets))]

    legacy = LegacyBidRevocation(history)
    replay = MarketReplay(history, legacy, Billing("second"))
    replay_hour = MarketReplay(history, legacy, Billing("hour"))
    results: dict[str, object] = {}

    # -- next revocation (legacy rule), vectorised ------------------------------------------------------
    first_s, _, _ = timed(lambda: replay.next_revocation(ms, t, b), 1)  # includes building the range-max tables
    med, best, rev = timed(lambda: replay.next_revocation(ms, t, b), args.repeats)
    med_g, best_g, _ = timed(lambda: [legacy.batch(m, t[i], b[i]) for m, i in groups], args.repeats)
    sample = rng.choice(n, size=min(args.sample, n), replace=False)
    naive_s, _, naive = timed(lambda: [naive_next_above(history[ms[i]], t[i], b[i]) for i in sample], 1)
    scalar_s, _, _ = timed(lambda: [legacy.revocation(ms[i], t[i], instance_id="x", max_price_usd_per_hour=b[i])
                                    for i in sample], 1)
    agree = bool(np.array_equal(np.array(naive), rev.notice_s[sample]))
    per_naive = naive_s / sample.size
    results["next_revocation_legacy"] = {
        "queries": n,
        "vectorised_s_median": med, "vectorised_s_min": best,
        "vectorised_first_call_s": first_s,
        "vectorised_pregrouped_s_median": med_g, "vectorised_pregrouped_s_min": best_g,
        "naive_loop_s_per_query": per_naive, "naive_loop_s_extrapolated": per_naive * n,
        "scalar_api_loop_s_per_query": scalar_s / sample.size,
        "speedup_vs_naive": per_naive * n / med,
        "naive_sample": int(sample.size), "naive_agrees": agree,
        "revoked_share": float(np.isfinite(rev.termination_s).mean()),
        "median_time_to_revocation_h": float(np.nanmedian(np.where(np.isfinite(rev.notice_s), rev.notice_s - t, np.nan))
                                             / 3600),
        "target_s": TARGET_S, "target_met": bool(med < TARGET_S),
    }

    # -- run cost, vectorised --------------------------------------------------------------------------
    end = t + length
    med_c, best_c, cost = timed(lambda: replay.run_cost(ms, t, end, who), args.repeats)
    med_h, best_h, _ = timed(lambda: replay_hour.run_cost(ms, t, end, who), args.repeats)
    billing = Billing("second")
    med_cg, best_cg, _ = timed(lambda: [billing.charge(history[m], t[i], end[i], who[i]) for m, i in groups],
                               args.repeats)
    naive_c_s, _, naive_c = timed(lambda: [naive_cost(history[ms[i]], t[i], end[i], who[i]) for i in sample], 1)
    scalar_c_s, _, _ = timed(lambda: [billing.charge(history[ms[i]], t[i], end[i], str(who[i])) for i in sample], 1)
    err = np.max(np.abs(np.array(naive_c) - cost.charged_usd[sample]))
    per_naive_c = naive_c_s / sample.size
    results["run_cost"] = {
        "queries": n,
        "per_second_vectorised_s_median": med_c, "per_second_vectorised_s_min": best_c,
        "per_second_pregrouped_s_median": med_cg, "per_second_pregrouped_s_min": best_cg,
        "hourly_vectorised_s_median": med_h, "hourly_vectorised_s_min": best_h,
        "naive_loop_s_per_query": per_naive_c, "naive_loop_s_extrapolated": per_naive_c * n,
        "scalar_api_loop_s_per_query": scalar_c_s / sample.size,
        "speedup_vs_naive": per_naive_c * n / med_c,
        "naive_sample": int(sample.size), "naive_max_abs_diff_usd": float(err),
        "naive_agrees": bool(err < 1e-9),
        "total_charged_usd": float(cost.charged_usd.sum()), "total_refunded_usd": float(cost.refunded_usd.sum()),
        "target_s": TARGET_S, "target_met": bool(med_c < TARGET_S),
    }

    # -- mean price over the last hour (Eq 1's P̄), vectorised -------------------------------------------
    med_m, best_m, _ = timed(lambda: replay.mean_price_last_hour(ms, t), args.repeats)
    results["mean_price_last_hour"] = {"queries": n, "vectorised_s_median": med_m, "vectorised_s_min": best_m}

    # -- modern hazard model: scalar calls (one per launch, as the simulator makes them) ---------------------
    modern = ModernHazardRevocation(None, args.seed)
    k = min(10_000, n)
    t_mod = 1_682_000_000.0 + np.sort(rng.uniform(0, 60 * 86400.0, k))
    mod_s, _, out = timed(lambda: [modern.revocation(ms[i], t_mod[i], instance_id=f"i-{i}") for i in range(k)], 1)
    results["revocation_modern"] = {
        "queries": k, "loop_s": mod_s, "s_per_query": mod_s / k,
        "fulfilled_share": float(np.mean([r.fulfilled for r in out])),
        "p_revoked_within_1h": float(np.mean([r.termination_s - r.launch_s <= 3600 for r in out if r.fulfilled])),
    }

    doc = {
        "benchmark": "market replay queries",
        "trace": str(TRACE.relative_to(ROOT.parent)), "loader": loader, "load_s": load_s,
        "markets": len(markets), "records": int(sum(len(s) for s in history)),
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "cpus": os.cpu_count(),
                    "platform": platform.platform()},
        "seed": args.seed, "repeats": args.repeats,
        "results": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_json(Path(args.out), doc, indent=2)
    nr, rc = results["next_revocation_legacy"], results["run_cost"]
    print(f"next revocation: {n} in {nr['vectorised_s_median'] * 1e3:.1f} ms (naive ~{nr['naive_loop_s_extrapolated']:.2f} s, "
          f"{nr['speedup_vs_naive']:.0f}x, agree={nr['naive_agrees']})")
    print(f"run cost:        {n} in {rc['per_second_vectorised_s_median'] * 1e3:.1f} ms (naive ~{rc['naive_loop_s_extrapolated']:.2f} s, "
          f"{rc['speedup_vs_naive']:.0f}x, agree={rc['naive_agrees']}); hourly {rc['hourly_vectorised_s_median'] * 1e3:.1f} ms")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
