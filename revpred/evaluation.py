"""Evaluate revocation predictors on a test window (the paper's RevPred evaluation against Tributary).

Test queries per market: decision times every ``stride_min`` minutes in ``[test_start, test_end - 1 h]``
(so labels stay inside the test window; inputs may use the 118 minutes before ``test_start``), with
max prices generated **both** ways [I, the paper's test rule is lost]: ``random`` (``price + U[0.00001,
0.2]``, seeded per market) and ``alg2`` (Algorithm 2). Every predictor answers the same queries through
the :class:`~revpred.protocol.RevocationPredictor` interface.

Metrics (positive = revoked within the hour, threshold 0.5 [I]): accuracy, F1 (``nan``, undefined, when there
is no positive label), ROC AUC (``nan`` when the labels hold one class), Brier score, and a 10-bin reliability
table; per market and pooled over markets, each with its count ``n`` and positive count ``n_pos``.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from sklearn.metrics import f1_score, roc_auc_score

from revpred.errors import RevPredError
from revpred.labels import alg2_max_prices, random_max_prices, revocation_labels, sample_times
from spotmarket.prices import Market, PriceHistory, to_timestamp

RULES = ("random", "alg2")


def reliability_table(y: np.ndarray, p: np.ndarray, n_bins: int = 10) -> list[dict]:
    """Equal-width probability bins: count, mean predicted p and observed positive share per bin.

    Returns
    -------
    list of dict with keys ``lo``, ``hi``, ``n``, ``mean_p``, ``frac_pos`` (``None`` for empty bins).
    """
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    which = np.clip(np.digitize(p, edges[1:-1], right=False), 0, n_bins - 1)
    out = []
    for k in range(n_bins):
        sel = which == k
        n = int(sel.sum())
        out.append({"lo": float(edges[k]), "hi": float(edges[k + 1]), "n": n,
                    "mean_p": float(p[sel].mean()) if n else None, "frac_pos": float(y[sel].mean()) if n else None})
    return out


def binary_metrics(y: np.ndarray, p: np.ndarray, threshold: float = 0.5, n_bins: int = 10) -> dict:
    """Accuracy, F1 (positive = 1), ROC AUC, Brier, base rate and reliability of probabilities ``p`` (n,)."""
    y = np.asarray(y).astype(np.int64)
    p = np.asarray(p, dtype=np.float64)
    if y.shape != p.shape:
        raise RevPredError(f"labels {y.shape} and probabilities {p.shape} differ in shape")
    if y.size == 0:
        return {"n": 0}
    pred = (p >= threshold).astype(np.int64)
    n_pos = int(y.sum())
    both = 0 < n_pos < y.size
    return {
        "n": int(y.size),
        "n_pos": n_pos,
        "base_rate": float(y.mean()),
        "accuracy": float(np.mean(pred == y)),
        # F1 needs positives: with none, recall is 0/0 and F1 is undefined (NaN), not 0
        "f1": float(f1_score(y, pred, zero_division=0.0)) if n_pos else float("nan"),
        "roc_auc": float(roc_auc_score(y, p)) if both else float("nan"),
        "brier": float(np.mean((p - y) ** 2)),
        "mean_p": float(p.mean()),
        "reliability": reliability_table(y, p, n_bins),
    }


def make_test_queries(history: PriceHistory, markets: Sequence[Market], start_s: float, end_s: float, *,
                 stride_min: int = 5, seed: int = 0, variations: str = "events",
                 grid_method: str = "ffill",
                 on_market: Callable[[], None] | None = None) -> dict[str, dict[Market, dict[str, np.ndarray]]]:
    """Queries and labels per rule and market: ``{rule: {market: {"t", "b", "y"}}}`` (arrays of shape (n,))."""
    out: dict[str, dict[Market, dict[str, np.ndarray]]] = {r: {} for r in RULES}
    for m in markets:
        s = history[m]
        t = sample_times(s, start_s, end_s, stride_min)
        rng = np.random.default_rng([int(seed), zlib.crc32(str(m).encode()), 7])
        bs = {"random": random_max_prices(s, t, rng),
              "alg2": alg2_max_prices(s, t, variations=variations, method=grid_method)}
        for rule, b in bs.items():
            out[rule][m] = {"t": t, "b": b, "y": revocation_labels(s, t, b)}
        if on_market is not None:
            on_market()
    return out


def undefined_metrics(result: dict) -> list[str]:
    """``rule/name`` of every pooled score whose F1 or ROC AUC is undefined (no positive, or one class only)."""
    out = []
    for rule, per in result["rules"].items():
        for name, res in per.items():
            pooled = res["pooled"]
            if pooled.get("n", 0) and any(isinstance(pooled.get(k), float) and math.isnan(pooled[k])
                                          for k in ("f1", "roc_auc")):
                out.append(f"{rule}/{name}")
    return out


def evaluate(history: PriceHistory, predictors: Mapping[str, object | Mapping[str, object]], markets: Sequence[Market],
             start_s: float, end_s: float, *, stride_min: int = 5, seed: int = 0, variations: str = "events",
             grid_method: str = "ffill", train_end_s: float | None = None,
             on_step: Callable[[str, str], None] | None = None,
             on_market: Callable[[], None] | None = None) -> dict:
    """Score every predictor on the test window ``[start_s, end_s]`` with both max-price rules.

    Parameters
    ----------
    history : PriceHistory
    predictors : mapping name -> RevocationPredictor, or name -> {rule: RevocationPredictor}
        A per-rule mapping lets a baseline differ by rule (the constant hazard).
    markets : sequence of Market
    start_s, end_s : float
        Test window, seconds since the epoch (UTC).
    stride_min, seed : int
        Query spacing and the seed of the random max prices.
    train_end_s : float, optional
        End of the training window; a test window starting before it is refused.
    on_step : callable (rule, name) -> None, optional
        Called after each predictor is scored under each rule.
    on_market : callable () -> None, optional
        Called after each market's queries are built and after each (rule, predictor, market) score
        (``len(markets) * (1 + len(RULES) * len(predictors))`` calls in all; a progress bar).

    Returns
    -------
    dict
        ``{"window": {...}, "rules": {rule: {name: {"pooled": metrics, "markets": {market: metrics}}}}}``.
    """
    if end_s <= start_s:
        raise RevPredError("the test window ends before it starts")
    if train_end_s is not None and start_s < train_end_s:
        raise RevPredError(f"test window starts at {to_timestamp(start_s)}, inside the training window "
                           f"(which ends at {to_timestamp(train_end_s)}); never evaluate on training data")
    queries = make_test_queries(history, markets, start_s, end_s, stride_min=stride_min, seed=seed,
                                variations=variations, grid_method=grid_method, on_market=on_market)
    if not any(len(q["t"]) for per in queries.values() for q in per.values()):
        first = max(history[m].start_s for m in markets)
        last = min(history[m].end_s for m in markets)
        raise RevPredError(f"the test window [{to_timestamp(start_s)}, {to_timestamp(end_s)}) holds no test query: the "
                           f"markets have prices from {to_timestamp(first)} to {to_timestamp(last)}, and each query needs "
                           "the hour after it inside the window; choose a window inside the data, longer than an hour")
    result: dict = {"window": {"test_start": to_timestamp(start_s).isoformat(), "test_end": to_timestamp(end_s).isoformat(),
                               "stride_min": stride_min, "seed": seed, "markets": [str(m) for m in markets]},
                    "rules": {}}
    for rule in RULES:
        per_rule: dict = {}
        for name, pred in predictors.items():
            p_obj = pred[rule] if isinstance(pred, Mapping) else pred
            ys, ps, per_market = [], [], {}
            for m in markets:
                q = queries[rule][m]
                if q["t"].size == 0:
                    continue
                p = np.asarray(p_obj.predict_proba([m] * q["t"].size, q["t"], q["b"]), dtype=np.float64)
                per_market[str(m)] = binary_metrics(q["y"], p)
                if on_market is not None:
                    on_market()
                ys.append(q["y"])
                ps.append(p)
            pooled = binary_metrics(np.concatenate(ys), np.concatenate(ps)) if ys else {"n": 0}
            per_rule[name] = {"pooled": pooled, "markets": per_market}
            if on_step is not None:
                on_step(rule, name)
        result["rules"][rule] = per_rule
    return result


def summary_rows(result: dict, metrics: Sequence[str] = ("accuracy", "f1", "roc_auc", "brier")) -> list[list[str]]:
    """Pooled metrics as text rows: rule, model, n, positives, then ``metrics``."""
    rows = []
    for rule, per in result["rules"].items():
        for name, res in per.items():
            pooled = res["pooled"]
            vals = [_fmt(pooled.get(k)) for k in metrics]
            rows.append([rule, name, str(pooled.get("n", 0)), str(pooled.get("n_pos", 0)), *vals])
    return rows


def _fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and math.isnan(v):
        return "undefined"
    return f"{v:.3f}" if isinstance(v, float) else str(v)
