"""Scores of revocation probabilities on the provisioner's queries: ECE, Brier, log loss, reliability (decision P8).

Binning [I]: ``ece`` uses 10 equal-width bins of p on [0, 1] (the edge 1 falls in the last bin),
``ECE = sum_k (n_k / n) |mean p_k - share of positives_k|`` over non-empty bins (Guo et al., ICML 2017,
"On Calibration of Modern Neural Networks", Eq 3). ``ece_quantile`` uses 10 equal-count bins instead.
Log loss clips p to ``[1e-6, 1 - 1e-6]`` (a p of exactly 0 or 1 would otherwise make one wrong query
infinitely costly). A score with nothing to measure (no query; ROC AUC or Brier skill with one class
only) is ``nan`` ("undefined") and logs a warning.

Baselines, fitted on a training frame of :func:`revpred.ladder.ladder_queries` and applied to another:

- **constant**: the training share of revoked queries per market;
- **empirical**: the training share per market and rung (ladder delta or on-demand).
"""

from __future__ import annotations

import logging
import math
import warnings

import numpy as np
import pandas as pd

from revpred.errors import RevPredError
from revpred.evaluation import reliability_table

__all__ = ["LOG_LOSS_EPS", "N_BINS", "constant_baseline", "ece", "empirical_baseline", "score"]

log = logging.getLogger(__name__)
N_BINS = 10
LOG_LOSS_EPS = 1e-6


def _check(y, p) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(y, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    if y.shape != p.shape or y.ndim != 1:
        raise RevPredError(f"labels {y.shape} and probabilities {p.shape} must be 1-d of one shape")
    if p.size and (np.nanmin(p) < 0 or np.nanmax(p) > 1 or np.isnan(p).any()):
        raise RevPredError("probabilities must lie in [0, 1]")
    return y, p


def ece(y, p, n_bins: int = N_BINS, strategy: str = "uniform") -> float:
    """Expected calibration error of probabilities ``p`` (n,) for 0/1 labels ``y`` (n,).

    ``strategy``: ``uniform`` (equal-width bins on [0, 1]) or ``quantile`` (equal-count bins of p).
    ``nan`` (undefined, with a warning) for no query.

    Parameters
    ----------
    y : array of shape (n,)
        0/1 labels.
    p : array of shape (n,)
        Probabilities in [0, 1].
    n_bins : int, default 10
    strategy : {"uniform", "quantile"}, default "uniform"

    Returns
    -------
    float
        ``sum_k (n_k / n) |mean p_k - share of positives_k|`` over non-empty bins (Guo et al., ICML 2017).

    Raises
    ------
    RevPredError
        If the shapes differ or are not 1-d, a probability is outside [0, 1] or NaN, or the strategy is unknown.
    """
    y, p = _check(y, p)
    if y.size == 0:
        warnings.warn("ECE is undefined: no query", RuntimeWarning, stacklevel=2)
        return math.nan
    if strategy == "uniform":
        edges = np.linspace(0.0, 1.0, n_bins + 1)
    elif strategy == "quantile":
        edges = np.quantile(p, np.linspace(0.0, 1.0, n_bins + 1))
    else:
        raise RevPredError(f"ECE strategy {strategy!r} is unknown; use 'uniform' or 'quantile'")
    which = np.clip(np.searchsorted(edges[1:-1], p, side="right"), 0, n_bins - 1)
    n = np.bincount(which, minlength=n_bins).astype(np.float64)
    sp = np.bincount(which, weights=p, minlength=n_bins)
    sy = np.bincount(which, weights=y, minlength=n_bins)
    return float(np.abs(sp - sy).sum() / y.size)


def score(y, p, name: str = "") -> dict:
    """Brier, log loss, ECE (both binnings), ROC AUC, Brier skill vs the sample base rate, reliability.

    Parameters
    ----------
    y : array of shape (n,)
        0/1 labels.
    p : array of shape (n,)
        Probabilities in [0, 1].
    name : str, optional
        Prefix of the warnings logged for undefined scores.

    Returns
    -------
    dict
        ``n``, ``n_pos``, ``base_rate``, ``mean_p``, ``brier``, ``log_loss``, ``ece``, ``ece_quantile``,
        ``roc_auc``, ``reliability`` (list of bins, :func:`revpred.evaluation.reliability_table`);
        undefined values are ``nan``.
    """
    y, p = _check(y, p)
    if y.size == 0:
        log.warning("%sno query: every score is undefined", f"{name}: " if name else "")
        return {"n": 0}
    n_pos = int(y.sum())
    pc = np.clip(p, LOG_LOSS_EPS, 1.0 - LOG_LOSS_EPS)
    auc = math.nan
    if 0 < n_pos < y.size:
        from sklearn.metrics import roc_auc_score

        auc = float(roc_auc_score(y, p))
    else:
        log.warning("%sROC AUC is undefined: the labels hold one class only (%d of %d revoked)",
                    f"{name}: " if name else "", n_pos, y.size)
    return {
        "n": int(y.size), "n_pos": n_pos, "base_rate": float(y.mean()), "mean_p": float(p.mean()),
        "brier": float(np.mean((p - y) ** 2)),
        "log_loss": float(-np.mean(y * np.log(pc) + (1.0 - y) * np.log1p(-pc))),
        "ece": ece(y, p), "ece_quantile": ece(y, p, strategy="quantile"), "roc_auc": auc,
        "reliability": reliability_table(y.astype(np.int64), p, N_BINS),
    }


def constant_baseline(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    """Per market, the training share of revoked queries, for each row of ``test``; shape (len(test),).

    Parameters
    ----------
    train, test : pandas.DataFrame
        Queries of :func:`revpred.ladder.ladder_queries` (columns ``market`` and ``y``).

    Returns
    -------
    ndarray of shape (len(test),)

    Raises
    ------
    RevPredError
        A test market without training queries.
    """
    rate = train.groupby(train["market"].astype(str))["y"].mean()
    keys = test["market"].astype(str)
    missing = set(keys) - set(rate.index)
    if missing:
        raise RevPredError(f"no training queries for market(s) {sorted(missing)}")
    return rate.reindex(keys).to_numpy(dtype=np.float64)


def empirical_baseline(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    """Per market and rung, the training share of revoked queries, for each row of ``test``; shape (len(test),).

    A (market, rung) pair without training queries (e.g. an on-demand query never launchable in
    training) falls back to the market's constant rate.

    Parameters
    ----------
    train, test : pandas.DataFrame
        Queries of :func:`revpred.ladder.ladder_queries` (columns ``market``, ``rung`` and ``y``).

    Returns
    -------
    ndarray of shape (len(test),)

    Raises
    ------
    RevPredError
        A test market without training queries.
    """
    keys = ["market_s", "rung"]
    tr = train.assign(market_s=train["market"].astype(str))
    te = test.assign(market_s=test["market"].astype(str))
    rate = tr.groupby(keys)["y"].mean().rename("p").reset_index()
    out = te[keys].merge(rate, on=keys, how="left")["p"].to_numpy(dtype=np.float64)
    fallback = constant_baseline(train, test)
    return np.where(np.isnan(out), fallback, out)
