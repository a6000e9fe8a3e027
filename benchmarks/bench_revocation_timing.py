"""When within the hour a legacy revocation comes: ``benchmarks/results/revocation_timing.json``.

The refund objective (``provisioner._refund``) spreads the one-hour probability p over the hour with a Weibull
hazard of shape k (``RefundStepCost.hazard_shape``; k = 1, a constant hazard, is the default). This measures
on the 2015 us-east-1 trace, for the provisioner's own queries (every market, a decision every 10 minutes, each
rung of the max-price ladder ``b = price + δ``), when the first price record above b falls, given that it falls
within the hour:

- the quantiles of that time, in minutes, against the median the constant hazard implies for the same p;
- k fitted by maximum likelihood to those times (each δ's p held at its observed rate, the markets pooled), on
  the window before the first evaluation start only (``--fit-start`` .. ``--fit-end``; no price after it is read),
  so the value is not chosen on any start. The on-demand rung is not measured.

Run: ``.venv/bin/python benchmarks/bench_revocation_timing.py`` (about 2 s). docs/design/provisioner.md and
docs/design/evaluation.md ("Optimizer's curse") use its figures.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, TRACE, write_json  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "revocation_timing.json"
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def revoked_times(history, t0: float, t1: float, delta: float, stride_s: float) -> tuple[np.ndarray, int]:
    """Hours from each query to the first record above ``price + delta``, for the queries revoked within the
    hour, and the number of queries (every market, decision times ``t0, t0 + stride, ...`` whose hour ends by
    ``t1``, so no price after ``t1`` is read)."""
    taus, n = [], 0
    for s in history:
        ts = np.arange(max(t0, s.start_s), min(t1, s.end_s) - 3600.0, stride_s)
        if ts.size == 0:
            continue
        first = np.asarray(s.next_above(ts, np.asarray(s.price_at(ts)) + delta)) - ts
        n += ts.size
        taus.append(first[first <= 3600.0] / 3600.0)
    return (np.concatenate(taus) if taus else np.empty(0)), n


def fit_shape(groups: list[tuple[float, np.ndarray]]) -> float:
    """Maximum-likelihood Weibull shape k of revocation times within the hour (hours), each group's one-hour
    probability p fixed: density ``c k x^(k−1) e^(−c x^k) / p`` on (0, 1], ``c = −ln(1 − p)``."""
    from scipy.optimize import minimize_scalar

    def nll(k: float) -> float:
        out = 0.0
        for p, tau in groups:
            c, x = -np.log1p(-p), np.maximum(tau, 1e-6)
            out -= np.sum(np.log(c * k) + (k - 1) * np.log(x) - c * x ** k - np.log(p))
        return out

    return float(minimize_scalar(nll, bounds=(0.05, 3.0), method="bounded").x)


def constant_hazard_median_min(p: float) -> float:
    """Median revocation time (minutes) given revoked within the hour, under a constant hazard: F(t) = p / 2."""
    return 60.0 * np.log1p(-p / 2) / np.log1p(-p)


def main(argv=None) -> int:
    from provisioner import DELTA_LADDER_USD_PER_HOUR
    from spotmarket.prices import load_history, to_seconds

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit-start", default="2015-03-08T07:00Z", help="the fit's window (the 28 days before the first evaluation start)")
    ap.add_argument("--fit-end", default="2015-04-05T07:00Z")
    ap.add_argument("--stride-s", type=float, default=600.0)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    history = load_history(str(TRACE))
    out = {"trace": TRACE.name, "stride_s": args.stride_s, "windows": {}}
    windows = {"fit": (args.fit_start, args.fit_end), "whole trace": ("2015-01-01T00:00Z", "2016-01-01T00:00Z")}
    for name, (a, b) in windows.items():
        rows, groups = [], []
        for delta in DELTA_LADDER_USD_PER_HOUR:
            tau, n = revoked_times(history, to_seconds(a), to_seconds(b), delta, args.stride_s)
            p = tau.size / n
            rows.append({"delta_usd_per_hour": delta, "queries": n, "p": p,
                         "quantiles_min": dict(zip(map(str, QUANTILES), np.quantile(tau * 60, QUANTILES).tolist())),
                         "constant_hazard_median_min": constant_hazard_median_min(p)})
            groups.append((p, tau))
        out["windows"][name] = {"start": a, "end": b, "hazard_shape_mle": fit_shape(groups), "by_delta": rows}
        print(f"{name}: k = {out['windows'][name]['hazard_shape_mle']:.3f}")
        for r in rows:
            print(f"  δ {r['delta_usd_per_hour']:<7g} p {r['p']:.3f}  median {r['quantiles_min']['0.5']:5.1f} min "
                  f"(constant hazard {r['constant_hazard_median_min']:.1f})")
    write_json(args.out, out, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
