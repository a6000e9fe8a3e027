"""Figures of the evaluation (analogues of the paper's Figures 7–10), drawn from a simulate table.

Each function takes the tidy table (``table.csv`` of ``spottune simulate``), draws mean ± sd over starts
and returns the matplotlib Figure; ``path`` (optional) saves it as PNG.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

PREDICTOR_POLICIES = ("spottune-0.7", "spottune-0.7-tributary", "spottune-0.7-constant", "spottune-0.7-hindsight")


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _ok(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["error"].fillna("") == ""]


def _save(fig: Any, path: str | Path | None) -> Any:
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110, bbox_inches="tight")
    return fig


def _bars(ax: Any, stats: pd.DataFrame, metric: str, label: str) -> None:
    x = np.arange(len(stats))
    ax.bar(x, stats[(metric, "mean")], yerr=stats[(metric, "std")].fillna(0.0), capsize=3, color="#4c72b0")
    ax.set_xticks(x, stats.index, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel(label)
    ax.grid(axis="y", alpha=0.3)


def policy_stats(table: pd.DataFrame, policies: list[str] | None = None) -> pd.DataFrame:
    """Mean and std per policy (in table order, or ``policies``), over starts."""
    t = _ok(table)
    order = policies or [p for p in dict.fromkeys(t["policy"]) if not _is_sweep_only(p, t)]
    t = t[t["policy"].isin(order)]
    stats = t.groupby("policy")[["cost_usd", "jct_h", "pcr_norm", "top3", "refunded_share", "revocations"]].agg(
        ["mean", "std"])
    return stats.reindex([p for p in order if p in stats.index])


def _is_sweep_only(policy: str, table: pd.DataFrame) -> bool:
    """θ-sweep points other than the paper's two settings (kept out of the per-policy figures)."""
    import re

    return bool(re.fullmatch(r"spottune-[01]\.\d", policy)) and policy not in ("spottune-0.7", "spottune-1.0")


def plot_policies(table: pd.DataFrame, path: str | Path | None = None, title: str = "") -> Any:
    """Fig 7 analogue: cost (USD), JCT (h) and PCR normalised to spottune-0.7, per policy."""
    plt = _plt()
    stats = policy_stats(table)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    _bars(axes[0], stats, "cost_usd", "cost (USD)")
    _bars(axes[1], stats, "jct_h", "JCT (hours)")
    _bars(axes[2], stats, "pcr_norm", "PCR / PCR(spottune-0.7)")
    axes[2].set_yscale("log")
    fig.suptitle(title or "cost, JCT and PCR per policy (mean ± sd over starts)")
    fig.tight_layout()
    return _save(fig, path)


def plot_theta(table: pd.DataFrame, path: str | Path | None = None, title: str = "") -> Any:
    """Fig 8 analogue: cost, JCT and top-3 accuracy of SpotTune (RevPred) against θ."""
    plt = _plt()
    t = _ok(table)
    t = t[t["policy"].str.fullmatch(r"spottune-[01]\.\d")]
    g = t.groupby("theta")[["cost_usd", "jct_h", "top3"]].agg(["mean", "std"]).sort_index()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, (m, label) in zip(axes, [("cost_usd", "cost (USD)"), ("jct_h", "JCT (hours)"), ("top3", "top-3 accuracy")]):
        ax.errorbar(g.index, g[(m, "mean")], yerr=g[(m, "std")].fillna(0.0), marker="o", capsize=3)
        ax.set_xlabel("θ")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[2].set_ylim(-0.05, 1.05)
    fig.suptitle(title or "θ sensitivity of SpotTune (RevPred), mean ± sd over starts")
    fig.tight_layout()
    return _save(fig, path)


def plot_refunded(table: pd.DataFrame, path: str | Path | None = None, title: str = "") -> Any:
    """Fig 9 analogue: share of executed steps that ran on refunded (free) instance time, per policy."""
    plt = _plt()
    stats = policy_stats(table)
    fig, ax = plt.subplots(figsize=(7, 3.8))
    _bars(ax, stats, "refunded_share", "share of steps on refunded time")
    ax.set_ylim(0, 1)
    ax.set_title(title or "refund contribution (mean ± sd over starts)")
    fig.tight_layout()
    return _save(fig, path)


def plot_predictors(table: pd.DataFrame, path: str | Path | None = None, title: str = "") -> Any:
    """Fig 10 analogue: SpotTune θ = 0.7 with RevPred, Tributary, constant hazard and the hindsight p."""
    plt = _plt()
    present = [p for p in PREDICTOR_POLICIES if p in set(table["policy"])]
    stats = policy_stats(table, present)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    _bars(axes[0], stats, "cost_usd", "cost (USD)")
    _bars(axes[1], stats, "pcr_norm", "PCR / PCR(spottune-0.7)")
    _bars(axes[2], stats, "refunded_share", "share of steps refunded")
    fig.suptitle(title or "effect of the revocation predictor (θ = 0.7)")
    fig.tight_layout()
    return _save(fig, path)
