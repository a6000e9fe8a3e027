"""Results table (plain text) and PNG plots of a results folder (matplotlib, Agg backend).

Plots: ``learning_curves.png`` (observed curves, EarlyCurve's fit on the points up to the θ cut and its
extrapolation to ``max_steps``, the θ cut), ``timeline.png`` (instances per trial, coloured by market,
revocations marked ×), ``cost.png`` (cumulative USD charged over simulated time).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from spottune.results import read_results


def _fmt(x: Any, spec: str = ".4f") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return format(x, spec)


def results_table(res: dict[str, Any]) -> str:
    """The per-trial table plus the experiment summary, as plain text.

    Parameters
    ----------
    res : dict
        A results folder as :func:`spottune.results.read_results` returns it.

    Returns
    -------
    str
        One line per trial (state, steps, metric, USD charged and refunded, revocations, hops, markets), then the
        totals: cost and refunds (USD), JCT (hours), the share of steps on refunded time, events and instances,
        and the top-k.
    """
    t, s = res["trials"], res["summary"]
    head = f"{'trial':6} {'state':16} {'steps':>5} {'metric':>9} {'kind':10} {'USD':>8} {'refund':>8} {'rev':>3} {'hop':>3}  markets"
    lines = [head, "-" * len(head)]
    order = t.assign(_r=t["rank"].fillna(1e9)).sort_values(["_r", "metric"])
    for _, r in order.iterrows():
        markets = sorted({m.split("/")[1] + "@" + m.split("/")[0][-1] for m in str(r["markets_used"]).split(";") if m.count("/") >= 2})
        lines.append(f"{r['trial_id']:6} {r['state']:16} {int(r['steps']):5d} {_fmt(r['metric']):>9} {r['metric_kind']:10} "
                     f"{r['usd']:8.4f} {r['refunded_usd']:8.4f} {int(r['revocations']):3d} {int(r['hops']):3d}  "
                     f"{','.join(markets)}")
    top = ", ".join(f"{d['trial_id']} ({_fmt(d['metric'])})" for d in s["top_k"])
    lines += [
        "",
        f"total cost   {s['total_cost_usd']:.4f} USD  (refunded {s['refunded_usd']:.4f} USD)",
        f"JCT          {_fmt(s['jct_h'], '.2f')} h",
        f"refunded     {100 * s['share_steps_refunded']:.1f} % of {s['steps_executed']} executed steps "
        f"({s['steps_lost']} lost)",
        f"events       {s['events']} events, {s['actions']} actions; {s['instances']} instances, "
        f"{s['revocations']} revocations, {s['hops']} hops",
        f"top-{len(s['top_k'])}        {top}",
    ]
    if s.get("budget_exhausted"):
        lines.append(f"budget       ran short, the run stopped and kept the best trials so far ({s['budget_exhausted']})")
    return "\n".join(lines)


def plot_learning_curves(res: dict[str, Any], path: Path) -> None:
    """Plot every trial's learning curve (metric against steps), the top-k continued in bold, EarlyCurve's fit at θ
    dashed and the θ barrier dotted, to a PNG.

    Parameters
    ----------
    res : dict
        A results folder as :func:`spottune.results.read_results` returns it (``summary``, ``trials``, ``curves``).
    path : pathlib.Path
        The PNG file to write (overwritten).
    """
    import matplotlib.pyplot as plt

    from earlycurve import EarlyCurve

    settings = res["summary"]["settings"]
    smax, theta, mode = int(settings["max_steps"]), float(settings["theta"]), settings.get("mode", "min")
    cut = math.ceil(theta * smax)
    fig, ax = plt.subplots(figsize=(9, 5.5))
    trials = res["trials"].set_index("trial_id")
    for i, (tid, g) in enumerate(res["curves"].groupby("trial_id")):
        color = plt.cm.tab20(i % 20)
        sel = bool(trials.loc[tid, "selected"]) if tid in trials.index else False
        ax.plot(g["step"], g["value"], color=color, lw=1.6 if sel else 0.8, alpha=1.0 if sel else 0.5,
                label=tid if sel else None)
        part = g[g["step"] <= cut]
        if theta < 1 and len(part) >= 8:
            loss = part["value"].to_numpy() if mode == "min" else 1.0 - part["value"].to_numpy()
            try:
                model = EarlyCurve(smax).fit(part["step"].to_numpy(float), loss)
                grid = np.linspace(max(model.stages_[-1].start_step, 1), smax, 60)
                yhat = np.asarray(model.predict(grid), dtype=float)
                ax.plot(grid, yhat if mode == "min" else 1.0 - yhat, color=color, ls="--", lw=0.8)
            except Exception as exc:  # a fit that fails is not drawn  # noqa: BLE001
                logging.getLogger(__name__).warning("EarlyCurve fit of trial %s not drawn (%s: %s)", tid,
                                                    type(exc).__name__, exc)
    if theta < 1:
        ax.axvline(cut, color="k", ls=":", lw=1)
        ax.text(cut, ax.get_ylim()[1], f" θ·S_max = {cut}", va="top", fontsize=8)
    ax.set_xlabel("step")
    ax.set_ylabel(settings.get("metric", "metric"))
    ax.set_yscale("log" if mode == "min" and (res["curves"]["value"] > 0).all() else "linear")
    ax.set_title("Learning curves (bold: top-k continued; dashed: EarlyCurve fit at θ)")
    if ax.get_legend_handles_labels()[0]:  # no trial selected (e.g. all FAILED): no legend, no warning
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_timeline(res: dict[str, Any], path: Path) -> None:
    """Plot each trial's instance runs against hours since the start, coloured by market, a cross where the provider
    revoked one, to a PNG.

    Parameters
    ----------
    res : dict
        A results folder as :func:`spottune.results.read_results` returns it (``ledger``, ``trials``).
    path : pathlib.Path
        The PNG file to write (overwritten).
    """
    import matplotlib.pyplot as plt

    led = res["ledger"]
    t0 = float(res["summary"]["settings"].get("start_s", led["start_s"].min() if len(led) else 0.0))
    markets = sorted(led["market"].unique())
    colors = {m: plt.cm.tab20(i % 20) for i, m in enumerate(markets)}
    trials = sorted(res["trials"]["trial_id"])
    ypos = {t: i for i, t in enumerate(trials)}
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(trials) + 2))
    for _, r in led.iterrows():
        y = ypos.get(r["trial_id"], -1)
        s, e = (r["start_s"] - t0) / 3600, (r["end_s"] - t0) / 3600
        ax.barh(y, e - s, left=s, color=colors[r["market"]], edgecolor="k", lw=0.3, height=0.7)
        if r["ended_by"] == "provider":
            ax.plot(e, y, "x", color="red", ms=5)
    ax.set_yticks(range(len(trials)), trials, fontsize=7)
    ax.set_xlabel("hours since start")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[m]) for m in markets]
    ax.legend(handles, [m.split("/")[0][-1] + ":" + m.split("/")[1] for m in markets], fontsize=6, ncol=5,
              loc="upper center", bbox_to_anchor=(0.5, -0.12))
    ax.set_title("Instances per trial, coloured by market (× = revoked by the provider)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_cost(res: dict[str, Any], path: Path) -> None:
    """Plot the cumulative USD charged against hours since the start (each instance run billed when it ends), and
    what it would be without first-hour refunds, to a PNG.

    Parameters
    ----------
    res : dict
        A results folder as :func:`spottune.results.read_results` returns it (``ledger``).
    path : pathlib.Path
        The PNG file to write (overwritten).
    """
    import matplotlib.pyplot as plt

    led = res["ledger"].sort_values("end_s")
    t0 = float(led["start_s"].min()) if len(led) else 0.0
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.step((led["end_s"] - t0) / 3600, led["charged_usd"].cumsum(), where="post", label="charged")
    ax.step((led["end_s"] - t0) / 3600, (led["charged_usd"] + led["refunded_usd"]).cumsum(), where="post",
            ls="--", label="without first-hour refunds")
    ax.set_xlabel("hours since start")
    ax.set_ylabel("cumulative USD")
    ax.legend()
    ax.set_title("Cumulative cost (billed when an instance ends)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render_report(out: Path, plots: bool = True) -> str:
    """Read a results folder, (re)write its PNG plots, and return the results table as text.

    Parameters
    ----------
    out : pathlib.Path
        The results folder (written by ``spottune run`` or :func:`spottune.tune`).
    plots : bool, default True
        Write ``learning_curves.png``, ``timeline.png`` and ``cost.png`` into it.

    Returns
    -------
    str
        :func:`results_table` of the folder.

    Raises
    ------
    ConfigError
        If a results file is missing or unreadable (:func:`spottune.results.read_results`).
    """
    res = read_results(out)
    if plots:
        import matplotlib

        matplotlib.use("Agg")
        plot_learning_curves(res, Path(out) / "learning_curves.png")
        plot_timeline(res, Path(out) / "timeline.png")
        plot_cost(res, Path(out) / "cost.png")
    return results_table(res)


__all__ = ["render_report", "results_table", "plot_learning_curves", "plot_timeline", "plot_cost"]
