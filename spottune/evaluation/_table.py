"""The evaluation table: one tidy row per (policy, workload, market mode, start), and its summaries.

Columns (units in the names): ``cost_usd`` (USD charged), ``jct_h`` (hours from the start to the best
models selected), ``pcr`` = 1 / (JCT_h · cost_USD) and ``pcr_norm`` = pcr / pcr of ``spottune-0.7`` on
the same workload, market mode and start (the paper fixes SpotTune θ = 0.7 at 1 per benchmark,
§IV-B1; NaN where that run is missing), ``top1`` / ``top3`` (1.0 if the truly best configuration, by its
metric at S_max, is the chosen best / among the chosen top 3), ``regret`` (true final metric of the
chosen best minus the best's, in the metric's units, >= 0), ``refunded_share`` (share of executed steps
run on refunded instance time), ``revocations``, ``hops``, ``lost_steps``, ``ckpt_overhead_share``
((checkpoint + restore/boot seconds) / training seconds, Fig 12), ``steps_executed``, ``instances``,
``refunded_usd``, ``stopped_early`` (trials stopped at θ or pruned), ``chosen_best``, ``true_best``,
``note`` (e.g. the fixed instance type), ``error`` (empty unless the run failed), ``lower_bound_usd`` (the
least USD any schedule pays for the run's own per-trial steps by its own JCT, legacy mode only; NaN in
modern mode, :mod:`spottune.evaluation._lower_bound`) and ``cost_vs_lower_bound`` = cost_usd / lower_bound_usd
(>= 1 by construction).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

COLUMNS = [
    "policy", "workload", "market_mode", "start_index", "start", "seed", "theta", "predictor", "cost_usd", "jct_h",
    "pcr", "pcr_norm", "top1", "top3", "regret", "refunded_share", "revocations", "hops", "lost_steps",
    "ckpt_overhead_share", "steps_executed", "instances", "refunded_usd", "stopped_early", "chosen_best",
    "true_best", "note", "error", "lower_bound_usd", "cost_vs_lower_bound", "deadline_met", "budget_stopped",
]
REFERENCE_POLICY = "spottune-0.7"
#: Columns summarised as mean ± sd over starts.
METRICS = ["cost_usd", "jct_h", "pcr_norm", "top1", "top3", "regret", "refunded_share", "revocations", "hops",
           "lost_steps", "ckpt_overhead_share", "lower_bound_usd", "cost_vs_lower_bound"]


def empty_row(**fields: Any) -> dict[str, Any]:
    """A row with every column NaN/empty except ``fields`` (a failed run)."""
    row = {c: math.nan for c in COLUMNS}
    row.update(predictor="", chosen_best="", true_best="", note="", error="")
    row.update(fields)
    return row


def make_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows -> the tidy table, sorted (workload, market mode, start, policy order), with ``pcr_norm``.

    Parameters
    ----------
    rows : list of dict
        One per run (keys :data:`COLUMNS`; ``pcr_norm`` is recomputed here).

    Returns
    -------
    pandas.DataFrame
        Shape (n_runs, len(COLUMNS)); units in the column names (``cost_usd``, ``jct_h``).
    """
    df = pd.DataFrame(rows, columns=COLUMNS)
    order = {p: i for i, p in enumerate(dict.fromkeys(r["policy"] for r in rows))}
    df = df.assign(_o=df["policy"].map(order)).sort_values(["workload", "market_mode", "start_index", "_o"],
                                                            kind="stable").drop(columns="_o")
    return normalise_pcr(df.reset_index(drop=True))


def normalise_pcr(df: pd.DataFrame, reference: str = REFERENCE_POLICY) -> pd.DataFrame:
    """Set ``pcr_norm`` = pcr / pcr(``reference``) within each (workload, market mode, start).

    Parameters
    ----------
    df : pandas.DataFrame
        The tidy table (columns ``workload``, ``market_mode``, ``start_index``, ``policy``, ``pcr``).
    reference : str, default :data:`REFERENCE_POLICY`
        The policy whose PCR is 1 (the paper fixes SpotTune θ = 0.7 at 1, §IV-B1).

    Returns
    -------
    pandas.DataFrame
        A copy; NaN where the reference's run is missing.
    """
    df = df.copy()
    keys = ["workload", "market_mode", "start_index"]
    ref = df[df["policy"] == reference].set_index(keys)["pcr"]
    idx = pd.MultiIndex.from_frame(df[keys])
    base = ref.reindex(idx).to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        df["pcr_norm"] = df["pcr"].to_numpy(dtype=float) / base
    return df


def summarise(df: pd.DataFrame, metrics: list[str] | None = None) -> pd.DataFrame:
    """Mean and sd over starts per (workload, market mode, policy); columns ``<metric>_mean``/``_sd``, ``n``.

    Parameters
    ----------
    df : pandas.DataFrame
        The tidy table; rows with an ``error`` are left out.
    metrics : list of str, optional
        Columns to summarise; default :data:`METRICS`.

    Returns
    -------
    pandas.DataFrame
        One row per (workload, market mode, policy), in the table's policy order.
    """
    metrics = metrics or METRICS
    ok = df[df["error"].fillna("") == ""]
    order = list(dict.fromkeys(df["policy"]))
    g = ok.groupby(["workload", "market_mode", "policy"], sort=False)
    out = g[metrics].agg(["mean", "std"])
    out.columns = [f"{m}_{'sd' if s == 'std' else s}" for m, s in out.columns]
    out["n"] = g.size()
    out = out.reset_index()
    out["_o"] = out["policy"].map({p: i for i, p in enumerate(order)})
    return out.sort_values(["workload", "market_mode", "_o"]).drop(columns="_o").reset_index(drop=True)


def ratio_table(summary: pd.DataFrame, reference: str = REFERENCE_POLICY) -> pd.DataFrame:
    """Headline ratios per (workload, market mode): cost saving and JCT ratio of ``reference`` vs others.

    ``saving`` = 1 − cost(reference) / cost(other) (the paper's "cost saving", §IV-B1); ``jct_ratio`` =
    JCT(other) / JCT(reference) (> 1: the reference is faster); ``pcr_ratio`` = mean pcr_norm of the
    reference (1) over the other's. Means over starts.

    Parameters
    ----------
    summary : pandas.DataFrame
        :func:`summarise`'s output.
    reference : str, default :data:`REFERENCE_POLICY`
        The policy compared with every other.

    Returns
    -------
    pandas.DataFrame
        Columns ``workload``, ``market_mode``, ``vs``, ``saving``, ``jct_ratio``, ``pcr_ratio``.
    """
    rows = []
    for (wl, mode), grp in summary.groupby(["workload", "market_mode"], sort=False):
        ref = grp[grp["policy"] == reference]
        if ref.empty:
            continue
        r = ref.iloc[0]
        for _, o in grp.iterrows():
            if o["policy"] == reference:
                continue
            rows.append({"workload": wl, "market_mode": mode, "vs": o["policy"],
                         "saving": 1.0 - r["cost_usd_mean"] / o["cost_usd_mean"],
                         "jct_ratio": o["jct_h_mean"] / r["jct_h_mean"],
                         "pcr_ratio": r["pcr_norm_mean"] / o["pcr_norm_mean"]})
    return pd.DataFrame(rows)


def to_markdown(df: pd.DataFrame, floatfmt: str = ".3g") -> str:
    """A plain GitHub markdown table (no extra dependency).

    Parameters
    ----------
    df : pandas.DataFrame
        Any table.
    floatfmt : str, default ".3g"
        Format of float cells; NaN is an empty cell.

    Returns
    -------
    str
        Header, separator and one line per row.
    """
    cols = list(df.columns)

    def fmt(v: Any) -> str:
        if isinstance(v, (float, np.floating)):
            return "" if math.isnan(v) else format(float(v), floatfmt)
        return str(v)

    lines = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)
