"""What the dashboard shows, read from a results folder with pandas (no HTTP here).

:func:`snapshot` reads the files of docs/guide/results.md as they stand, while a run writes them or after it ended,
and returns one JSON-ready dict: the trials, their learning curves and the θ barrier, each instance run (a segment)
with who ended it, the revocation notices, and the cumulative USD charged and refunded. While a run goes on only
``events.jsonl``, ``ledger.csv``, ``trials.csv`` and ``journal.jsonl`` exist (:class:`spottune.results.ResultsJournal`):
the curves then come from the ``MetricReported`` events, the open segments from ``TrialLaunched`` events without
their ``SegmentEnded``, the settings from the journal's ``spec`` line. Decision DS1 (docs/design/decisions.md).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd

from spottune.errors import ConfigError

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


def _settings(folder: Path, summary: dict[str, Any] | None) -> dict[str, Any]:
    """theta, max_steps, metric, mode, budget_usd, start_s: from summary.json, else the journal's spec line."""
    spec: dict[str, Any] = {}
    out: dict[str, Any] = {}
    if summary is not None:
        s = summary.get("settings", {})
        spec = s.get("spec", {}) or {}
        out = {k: s.get(k) for k in ("theta", "max_steps", "metric", "mode", "start_s", "workload", "backend")}
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
        out = {k: spec.get(k) for k in ("theta", "max_steps", "metric", "mode", "workload", "backend")}
        out["start_s"] = None
    out["budget_usd"] = spec.get("budget_usd")
    return out


def snapshot(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The dashboard's data for one results folder, as it stands now.

    Parameters
    ----------
    folder : path
        A results folder of ``spottune run`` (docs/guide/results.md), finished or still being written.

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
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{str(folder)!r} is not a results folder (no such directory)")
    summary = None
    if (folder / "summary.json").exists():
        try:
            summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            summary = None
    settings = _settings(folder, summary)
    theta, max_steps = settings.get("theta"), settings.get("max_steps")
    settings["barrier_step"] = (math.ceil(float(theta) * int(max_steps) - 1e-9)
                                if theta is not None and max_steps is not None else None)
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
    if ledger is not None and len(ledger):
        ledger = ledger.sort_values("end_s", kind="stable")
        for r in ledger.to_dict("records"):
            done.add(str(r["instance_id"]))
            segments.append({"trial_id": str(r["trial_id"]), "instance_id": str(r["instance_id"]),
                             "market": str(r["market"]), "start_h": hours(r["start_s"]), "end_h": hours(r["end_s"]),
                             "ended_by": ended_by(r["ended_by"], r["reason"]), "reason": str(r["reason"]),
                             "refunded": bool(r.get("refunded")), "charged_usd": _num(r["charged_usd"]) or 0.0,
                             "refunded_usd": _num(r["refunded_usd"]) or 0.0})
    ended = {str(e.get("instance_id")) for e in events if e.get("type") == "SegmentEnded"}
    for e in events:
        if e.get("type") == "TrialLaunched" and str(e.get("instance_id")) not in done | ended:
            segments.append({"trial_id": str(e["trial_id"]), "instance_id": str(e["instance_id"]),
                             "market": str(e.get("market")), "start_h": hours(e.get("started_s", e.get("t"))),
                             "end_h": hours(last_t), "ended_by": "running", "reason": "", "refunded": False,
                             "charged_usd": 0.0, "refunded_usd": 0.0})
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
    status = "finished" if summary is not None else ("running" if events else "waiting")
    return {"status": status, "folder": str(folder), "settings": settings, "now_h": hours(last_t),
            "trials": trials, "curves": curves, "segments": segments, "notices": notices, "dollars": dollars,
            "total_usd": charged, "refunded_usd": refunded,
            "summary_total_usd": _num(summary.get("total_cost_usd")) if summary else None,
            "colours": ENDED_BY_COLOURS}
