"""What the dashboard shows, read from a results folder with pandas (no HTTP here).

:func:`snapshot` reads the files of docs/guide/results.md as they stand, while a run writes them or after it ended,
and returns one JSON-ready dict: the trials, their learning curves and the θ barrier, each instance run (a segment)
with who ended it, the revocation notices, and the cumulative USD charged and refunded. While a run goes on only
``events.jsonl``, ``ledger.csv``, ``trials.csv`` and ``journal.jsonl`` exist (:class:`spottune.results.ResultsJournal`):
the curves then come from the ``MetricReported`` events, the open segments from ``TrialLaunched`` events without
their ``SegmentEnded``, the settings from the journal's ``spec`` line. The rungs, the deadline, the pool's prices
and the cost per useful step (:func:`rungs`, :func:`deadline_h`, :func:`prices`, :func:`step_cost`) come from the
recorded spec, the spec's price dataset and ``ledger.csv``. Decisions DS1, DS2, DS4 (docs/design/decisions.md).
"""

from __future__ import annotations

import functools
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from spottune.errors import ConfigError
from spottune.orchestrator import check_rungs
from spottune.orchestrator._config import steps_at
from spottune.planning import parse_duration

#: Who ended a segment, the order of the timeline's legend (decision DS2).
ENDED_BY = ("provider", "hop", "our stop", "failure", "running")

#: Okabe & Ito's colour-blind-safe palette (https://jfly.uni-koeln.de/color/), one colour per :data:`ENDED_BY`.
ENDED_BY_COLOURS = {"provider": "#0072B2", "hop": "#E69F00", "our stop": "#009E73", "failure": "#D55E00",
                    "running": "#999999"}


def ended_by(by: str, reason: str) -> str:
    """The timeline's category of a segment, from the ledger's ``ended_by`` and ``reason``.

    Parameters
    ----------
    by : str
        ``provider`` or ``user`` (ledger.csv's ``ended_by``).
    reason : str
        The ledger's ``reason`` (``price``, ``capacity``, ``hop``, ``hourly-hop``, ``theta``, ``end``, ``failure``, ...).

    Returns
    -------
    str
        One of :data:`ENDED_BY`: ``provider`` (a revocation; refunded or not is in the segment's row), ``hop`` (we
        moved the trial to another market), ``failure`` (the trainable failed), else ``our stop``.
    """
    if str(by) == "provider":
        return "provider"
    reason = str(reason)
    if reason in ("hop", "hourly-hop"):
        return "hop"
    if reason == "failure":
        return "failure"
    return "our stop"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every complete JSON line of ``path`` (a line being written, without its newline, is left for the next read)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    rows = []
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def _read_csv(path: Path) -> pd.DataFrame | None:
    if not path.exists() or path.stat().st_size == 0:
        return None
    try:
        return pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError):
        return None


def _num(x: Any) -> float | None:
    """A JSON-safe number: None for NaN, None or a non-number."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) or math.isinf(v) else v


def _settings(folder: Path, summary: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(settings, spec): theta, max_steps, metric, mode, budget_usd, start_s, markets from summary.json, else the
    journal's spec line; the spec as recorded."""
    spec: dict[str, Any] = {}
    out: dict[str, Any] = {}
    if summary is not None:
        s = summary.get("settings", {})
        spec = s.get("spec", {}) or {}
        out = {k: s.get(k) for k in ("theta", "max_steps", "metric", "mode", "start_s", "workload", "backend",
                                     "top_k", "markets")}
    else:
        journal = folder / "journal.jsonl"
        if journal.exists():
            with open(journal, encoding="utf-8") as f:
                first = f.readline()
            try:
                rec = json.loads(first)
            except json.JSONDecodeError:
                rec = {}
            if rec.get("k") == "spec":
                spec = rec.get("spec", {}) or {}
        out = {k: spec.get(k) for k in ("theta", "max_steps", "metric", "mode", "workload", "backend", "top_k")}
        out["start_s"] = out["markets"] = None
    out["budget_usd"] = spec.get("budget_usd")
    return out, spec


def rungs(spec: dict[str, Any], theta: float | None, max_steps: int | None, top_k: int | None) -> list[dict[str, Any]]:
    """The rungs before the θ barrier, as the run's stopper places them.

    Parameters
    ----------
    spec : dict
        The experiment spec as recorded (``stopper``, ``rungs``, ``predictive_options``).
    theta : float or None
        θ, a fraction of ``max_steps``.
    max_steps : int or None
        S_max, steps.
    top_k : int or None
        Trials kept at θ.

    Returns
    -------
    list of dict
        One per rung, in order: ``step`` (steps), ``keep`` (trials that go on; None where a rule decides each trial,
        not a count) and ``rule``: ``barrier`` (stoppers ``barrier`` and ``hparams``: the spec's ``rungs``,
        ``ceil(fraction · max_steps)``, :func:`spottune.orchestrator.check_rungs`), ``rank`` (``round(f · max_steps)``
        for f in :data:`earlycurve.RUNG_FRACTIONS`) or ``predictive`` (the ``predictive_options`` fractions), those
        below θ's step only (``spottune._early_stop``). Empty for θ = 1, stopper ``paper`` or unknown settings.
    """
    if theta is None or max_steps is None or int(max_steps) < 2:
        return []
    max_steps = int(max_steps)
    theta_steps = steps_at(float(theta), max_steps)
    if theta_steps >= max_steps:
        return []
    stopper = spec.get("stopper", "barrier")
    try:
        if stopper in ("barrier", "hparams"):
            pairs = check_rungs(spec.get("rungs") or (), float(theta), int(top_k or 1), max_steps)
            return [{"step": steps_at(f, max_steps), "keep": int(k), "rule": "barrier"} for f, k in pairs]
        from earlycurve import RUNG_FRACTIONS, predictive_settings, rungs_for

        if stopper == "rank":
            fractions = RUNG_FRACTIONS
        elif stopper == "predictive":
            fractions = predictive_settings(spec.get("predictive_options"))[0]
        else:
            return []
        return [{"step": int(r), "keep": None, "rule": stopper} for r in rungs_for(max_steps, fractions)
                if r < theta_steps]
    except (ConfigError, ValueError, TypeError):
        return []


def deadline_h(spec: dict[str, Any]) -> float | None:
    """The spec's ``deadline`` in hours from the run's start, or None when unset or unreadable.

    Parameters
    ----------
    spec : dict
        The experiment spec as recorded; ``deadline`` is seconds or a duration such as ``"6h"``
        (:func:`spottune.planning.parse_duration`).

    Returns
    -------
    float or None
        Hours.
    """
    value = spec.get("deadline")
    if value is None:
        return None
    try:
        return parse_duration(value) / 3600.0
    except ConfigError:
        return None


@functools.lru_cache(maxsize=4)
def _history(path: str, mtime_ns: int, size: int) -> Any:
    """The price file at ``path``, read once per version of the file (the page polls every second)."""
    from spotmarket.prices import load_history

    return load_history(path)


def _replayed(name: str) -> Any:
    from spotmarket.prices import locate_prices

    path = locate_prices(name)
    st = path.stat()
    return _history(str(path), st.st_mtime_ns, st.st_size)


def _live_prices(spec: dict[str, Any]) -> bool:
    """Whether the run priced its markets from the EC2 API (an ``aws`` run unless ``aws.live_prices`` is false)."""
    return spec.get("backend") == "aws" and (spec.get("aws") or {}).get("live_prices", True) is not False


def prices(spec: dict[str, Any], pool: list[str], events: list[dict[str, Any]], start_s: float,
           end_s: float) -> dict[str, Any]:
    """The spot prices of the pool over the run's window, as step functions.

    Parameters
    ----------
    spec : dict
        The experiment spec as recorded (``prices``, ``backend``, ``aws.live_prices``).
    pool : list of str
        Markets ``zone/type/product``.
    events : list of dict
        ``events.jsonl``'s records; each ``Launch`` action's explanation lists the candidates' current prices.
    start_s, end_s : float
        The window, seconds since the epoch (UTC).

    Returns
    -------
    dict
        ``source``: ``replayed`` (the spec's price dataset, read by :func:`spotmarket.prices.load_history`: the
        price in force at the start, every change in the window, the last price again at the end) or
        ``decisions`` (an ``aws`` run with live prices, or a dataset that cannot be read: the price each market had
        at each launch decision, from the ``Launch`` actions' explanations); ``dataset`` (the spec's ``prices``);
        ``series``: market -> ``{"t_s": [...], "usd_per_hour": [...]}`` (seconds since the epoch; USD/hour).
    """
    series: dict[str, dict[str, list[float]]] = {}
    dataset = spec.get("prices")
    if dataset and not _live_prices(spec):
        from spotmarket.errors import SpotMarketError

        try:
            history = _replayed(str(dataset))
        except (SpotMarketError, OSError):
            history = None
        for market in pool if history is not None else []:
            try:
                ps = history[market]
            except (SpotMarketError, ValueError):
                continue
            t, p = ps.times_s, ps.prices
            i0 = max(0, int(np.searchsorted(t, start_s, side="right")) - 1)
            i1 = int(np.searchsorted(t, end_s, side="right"))
            if i1 <= i0:
                continue
            times = [max(start_s, float(t[i0]))] + [float(x) for x in t[i0 + 1:i1]]
            values = [float(x) for x in p[i0:i1]]
            if end_s > times[-1]:
                times.append(float(end_s))
                values.append(values[-1])
            series[market] = {"t_s": times, "usd_per_hour": values}
        if series:
            return {"source": "replayed", "dataset": dataset, "series": series}
    for e in events:
        if e.get("kind") != "action" or e.get("type") != "Launch":
            continue
        for c in (e.get("explanation") or {}).get("candidates") or []:
            v = _num(c.get("current_price_usd_per_hour"))
            if v is None or c.get("market") is None:
                continue
            one = series.setdefault(str(c["market"]), {"t_s": [], "usd_per_hour": []})
            if not one["t_s"] or float(e["t"]) > one["t_s"][-1]:
                one["t_s"].append(float(e["t"]))
                one["usd_per_hour"].append(v)
    return {"source": "decisions", "dataset": dataset, "series": dict(sorted(series.items()))}


def step_cost(ledger: pd.DataFrame | None) -> list[dict[str, Any]]:
    """USD per useful step by market (zone x instance type), from the ledger's ended instance runs.

    Parameters
    ----------
    ledger : pandas.DataFrame or None
        ``ledger.csv`` (``market``, ``charged_usd``, ``steps``, ``lost_steps``).

    Returns
    -------
    list of dict
        One per market, cheapest first (markets without a useful step last): ``market`` (``zone/type``), ``runs``,
        ``usd`` (charged, USD), ``steps`` (run), ``lost_steps`` (redone after a revocation), ``useful_steps``
        (``steps - lost_steps``) and ``usd_per_useful_step`` (``usd / useful_steps``, USD/step; None without a
        useful step).
    """
    if ledger is None or not len(ledger) or "steps" not in ledger.columns:
        return []
    frame = pd.DataFrame({
        "market": ["/".join(str(m).split("/")[:2]) for m in ledger["market"]],
        "usd": pd.to_numeric(ledger["charged_usd"], errors="coerce").fillna(0.0),
        "steps": pd.to_numeric(ledger["steps"], errors="coerce").fillna(0).astype(int),
        "lost_steps": pd.to_numeric(ledger.get("lost_steps", 0), errors="coerce").fillna(0).astype(int)})
    g = frame.groupby("market", sort=True).agg(runs=("usd", "size"), usd=("usd", "sum"), steps=("steps", "sum"),
                                               lost_steps=("lost_steps", "sum"))
    out = []
    for market, r in g.iterrows():
        useful = int(r["steps"] - r["lost_steps"])
        out.append({"market": str(market), "runs": int(r["runs"]), "usd": float(r["usd"]), "steps": int(r["steps"]),
                    "lost_steps": int(r["lost_steps"]), "useful_steps": useful,
                    "usd_per_useful_step": float(r["usd"]) / useful if useful > 0 else None})
    return sorted(out, key=lambda x: (x["usd_per_useful_step"] is None, x["usd_per_useful_step"] or 0.0, x["market"]))


def snapshot(folder: str | os.PathLike[str] | None, *, missing_ok: bool = False) -> dict[str, Any]:
    """The dashboard's data for one results folder, as it stands now.

    Parameters
    ----------
    folder : path
        A results folder of ``spottune run`` (docs/guide/results.md), finished or still being written.
    missing_ok : bool, default False
        Treat a folder that does not exist yet, or None (a study of ``spottune serve`` not started yet), as an empty
        one (status ``waiting``) instead of an error.

    Returns
    -------
    dict
        JSON-ready: ``status`` (``waiting``, ``running`` or ``finished``), ``settings`` (``theta``, ``max_steps``,
        ``barrier_step`` = ceil(θ · max_steps), ``metric``, ``mode``, ``budget_usd``), ``now_h`` (hours since the
        start), ``trials`` (one dict per trial: ``trial_id``, ``state``, ``config``, ``steps``, ``usd``,
        ``refunded_usd``, ``metric``), ``curves`` (trial id -> ``{"step": [...], "value": [...]}``), ``segments``
        (one per instance run: ``trial_id``, ``market``, ``start_h``, ``end_h``, ``ended_by`` of :data:`ENDED_BY`,
        ``reason``, ``refunded``, ``charged_usd``, ``refunded_usd``), ``notices`` (``trial_id``, ``t_h``,
        ``deadline_h``), ``dollars`` (``t_h``, cumulative ``charged_usd`` and ``refunded_usd``, USD, one point
        per ended instance run), ``total_usd`` and ``refunded_usd`` (sums of the ledger, USD; equal to
        summary.json's ``total_cost_usd`` once the run finished) and ``summary_total_usd`` (summary.json's, or
        None while running). Times are hours since the run's start (its first event).

    Raises
    ------
    ConfigError
        If ``folder`` is not a directory.
    """
    if folder is None:
        if not missing_ok:
            raise ConfigError("no results folder given")
        with tempfile.TemporaryDirectory() as empty:  # nothing to read: what an empty folder shows
            return {**snapshot(empty), "folder": None}
    folder = Path(folder)
    if not folder.is_dir() and not (missing_ok and not folder.exists()):
        raise ConfigError(f"{str(folder)!r} is not a results folder (no such directory)")
    summary = None
    if (folder / "summary.json").exists():
        try:
            summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            summary = None
    settings, spec = _settings(folder, summary)
    theta, max_steps = settings.get("theta"), settings.get("max_steps")
    settings["barrier_step"] = (math.ceil(float(theta) * int(max_steps) - 1e-9)
                                if theta is not None and max_steps is not None else None)
    settings["rungs"] = rungs(spec, theta, max_steps, settings.get("top_k"))
    settings["deadline_h"] = deadline_h(spec)
    settings["stopper"] = spec.get("stopper")
    metric = settings.get("metric")
    events = _read_jsonl(folder / "events.jsonl")
    start_s = settings.get("start_s")
    if start_s is None and events:
        start_s = float(events[0].get("t", 0.0))
    start_s = float(start_s or 0.0)
    last_t = max((float(e.get("t", start_s)) for e in events), default=start_s)

    def hours(t: Any) -> float | None:
        v = _num(t)
        return None if v is None else (v - start_s) / 3600.0

    # trials
    trials_df = _read_csv(folder / "trials.csv")
    trials = []
    if trials_df is not None:
        for r in trials_df.to_dict("records"):
            trials.append({"trial_id": str(r["trial_id"]), "state": str(r.get("state")),
                           "config": str(r.get("config", "")), "steps": int(r.get("steps") or 0),
                           "usd": _num(r.get("usd")) or 0.0, "refunded_usd": _num(r.get("refunded_usd")) or 0.0,
                           "metric": _num(r.get("metric"))})

    # curves: curves.csv once written, else the reported metrics
    curves: dict[str, dict[str, list]] = {}
    curves_df = _read_csv(folder / "curves.csv")
    if curves_df is not None:
        for tid, g in curves_df.sort_values(["trial_id", "step"]).groupby("trial_id", sort=True):
            curves[str(tid)] = {"step": [int(s) for s in g["step"]], "value": [_num(v) for v in g["value"]]}
    else:
        seen: dict[str, dict[int, float | None]] = {}
        for e in events:
            if e.get("type") == "MetricReported" and metric:
                v = (e.get("metrics") or {}).get(metric)
                seen.setdefault(str(e["trial_id"]), {})[int(e["step"])] = _num(v)
        for tid in sorted(seen):
            steps = sorted(seen[tid])
            curves[tid] = {"step": steps, "value": [seen[tid][s] for s in steps]}

    # segments: the ledger's ended runs, then the launched runs not yet in it
    segments = []
    ledger = _read_csv(folder / "ledger.csv")
    done: set[str] = set()
    launch_max: dict[str, float | None] = {}  # trial -> the max price of its latest Launch action
    max_at: dict[str, float | None] = {}  # instance -> its max price (USD/hour), for runs not yet in the ledger
    for e in events:
        if e.get("kind") == "action" and e.get("type") == "Launch":
            launch_max[str(e.get("trial_id"))] = _num(e.get("max_price_usd_per_hour"))
        elif e.get("type") == "TrialLaunched":
            max_at[str(e.get("instance_id"))] = launch_max.get(str(e.get("trial_id")))
    if ledger is not None and len(ledger):
        ledger = ledger.sort_values("end_s", kind="stable")
        for r in ledger.to_dict("records"):
            done.add(str(r["instance_id"]))
            segments.append({"trial_id": str(r["trial_id"]), "instance_id": str(r["instance_id"]),
                             "market": str(r["market"]), "start_h": hours(r["start_s"]), "end_h": hours(r["end_s"]),
                             "ended_by": ended_by(r["ended_by"], r["reason"]), "reason": str(r["reason"]),
                             "refunded": bool(r.get("refunded")), "charged_usd": _num(r["charged_usd"]) or 0.0,
                             "refunded_usd": _num(r["refunded_usd"]) or 0.0,
                             "max_price_usd_per_hour": _num(r.get("max_price_usd_per_hour"))})
    ended = {str(e.get("instance_id")) for e in events if e.get("type") == "SegmentEnded"}
    for e in events:
        if e.get("type") == "TrialLaunched" and str(e.get("instance_id")) not in done | ended:
            segments.append({"trial_id": str(e["trial_id"]), "instance_id": str(e["instance_id"]),
                             "market": str(e.get("market")), "start_h": hours(e.get("started_s", e.get("t"))),
                             "end_h": hours(last_t), "ended_by": "running", "reason": "", "refunded": False,
                             "charged_usd": 0.0, "refunded_usd": 0.0,
                             "max_price_usd_per_hour": max_at.get(str(e["instance_id"]))})
    notices = [{"trial_id": str(e.get("trial_id")), "instance_id": str(e.get("instance_id")), "t_h": hours(e["t"]),
                "deadline_h": hours(e.get("deadline_s"))}
               for e in events if e.get("type") == "RevocationNotice"]

    # dollars: cumulative at each ended run
    dollars: dict[str, list] = {"t_h": [0.0], "charged_usd": [0.0], "refunded_usd": [0.0]}
    charged = refunded = 0.0
    for s in sorted((s for s in segments if s["ended_by"] != "running"), key=lambda s: s["end_h"] or 0.0):
        charged += s["charged_usd"]
        refunded += s["refunded_usd"]
        dollars["t_h"].append(s["end_h"])
        dollars["charged_usd"].append(charged)
        dollars["refunded_usd"].append(refunded)
    # the pool's prices over the run's window (the summary's markets, else those the run priced or ran on)
    pool = set(settings.get("markets") or [])
    pool |= {str(c.get("market")) for e in events if e.get("kind") == "action" and e.get("type") == "Launch"
             for c in (e.get("explanation") or {}).get("candidates") or [] if c.get("market")}
    pool |= {s["market"] for s in segments}
    end_s = max([last_t] + [start_s + 3600.0 * (s["end_h"] or 0.0) for s in segments])
    price = prices(spec, sorted(pool), events, start_s, end_s) if events or segments else {
        "source": None, "dataset": spec.get("prices"), "series": {}}
    price["series"] = {m: {"t_h": [hours(t) for t in v["t_s"]], "usd_per_hour": v["usd_per_hour"]}
                       for m, v in price["series"].items()}
    status = "finished" if summary is not None else ("running" if events else "waiting")
    return {"status": status, "folder": str(folder), "settings": settings, "now_h": hours(last_t),
            "trials": trials, "curves": curves, "segments": segments, "notices": notices, "dollars": dollars,
            "total_usd": charged, "refunded_usd": refunded,
            "summary_total_usd": _num(summary.get("total_cost_usd")) if summary else None,
            "prices": price, "step_cost": step_cost(ledger), "colours": ENDED_BY_COLOURS}
