"""Results on disk: ``trials.csv``, ``ledger.csv``, ``curves.csv``, ``events.jsonl``, ``summary.json``.

Definitions (spec §1.11):

- **cost** ``total_cost_usd``: USD charged over every instance run (the ledger);
  ``refunded_usd``: USD the provider waived (first-hour revocations);
- **JCT** ``jct_s``: from the experiment start to ``ExperimentFinished`` (the best models selected);
- **refunded share** ``share_steps_refunded``: steps executed on instance runs that ended up free,
  over all executed steps (Fig 9's "contribution of refunded resources"), lost steps included;
- per trial ``metric``: the final observed value for FINISHED trials (``metric_kind`` = ``final``
  or ``plateau``), EarlyCurve's prediction at ``max_steps`` for trials stopped at θ
  (``predicted``), else the last observed value (``last``); all in the user's metric direction.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

import pandas as pd

from spottune.orchestrator import TrialState

TRIAL_COLUMNS = [
    "trial_id", "state", "steps", "metric", "metric_kind", "predicted", "predicted_low", "predicted_high", "selected",
    "rank", "usd", "refunded_usd", "revocations", "hops", "failures", "lost_steps", "instances", "markets_used",
    "config",
]


def _ledger_frame(record: Any) -> pd.DataFrame:
    from spotmarket import LEDGER_COLUMNS, ledger_frame

    frame = ledger_frame(record.ledger) if record.ledger else pd.DataFrame(columns=list(LEDGER_COLUMNS))
    steps = record.instance_steps
    frame["steps"] = [steps.get(i, (0, 0))[0] for i in frame["instance_id"]]
    frame["lost_steps"] = [steps.get(i, (0, 0))[1] for i in frame["instance_id"]]
    frame["refunded"] = (frame["ended_by"] == "provider") & (frame["billed_s"] == 0)
    return frame.sort_values(["start_s", "instance_id"], kind="stable").reset_index(drop=True)


def trials_frame(orch: Any, ledger: pd.DataFrame, configs: dict[str, Any]) -> pd.DataFrame:
    """One row per trial (columns :data:`TRIAL_COLUMNS`)."""
    ranks = {t: i + 1 for i, t in enumerate(orch.top_k)}
    rows = []
    for tid, tr in orch.trials.items():
        mine = ledger[ledger["trial_id"] == tid]
        pred = tr.prediction
        if tr.state is TrialState.FINISHED:
            kind, value = ("plateau" if tr.plateaued else "final"), orch.to_user(tr.last_loss())
        elif tr.state is TrialState.STOPPED_EARLY and tr.predicted_loss is not None:
            kind, value = "predicted", orch.to_user(tr.predicted_loss)
        else:
            kind, value = "last", orch.to_user(tr.last_loss())
        lo = hi = None
        if pred is not None and hasattr(pred, "low"):
            lo, hi = sorted((orch.to_user(pred.low), orch.to_user(pred.high)))
        rows.append({
            "trial_id": tid, "state": str(tr.state), "steps": tr.step, "metric": value, "metric_kind": kind,
            "predicted": orch.to_user(tr.predicted_loss), "predicted_low": lo, "predicted_high": hi,
            "selected": tid in orch.selected, "rank": ranks.get(tid), "usd": float(mine["charged_usd"].sum()),
            "refunded_usd": float(mine["refunded_usd"].sum()), "revocations": tr.revocations, "hops": tr.hops,
            "failures": tr.failures, "lost_steps": tr.lost_steps, "instances": len(tr.instance_ids),
            "markets_used": ";".join(str(m) for m in tr.markets_used),
            "config": json.dumps(configs.get(tid, {}), sort_keys=True, default=str),
        })
    return pd.DataFrame(rows, columns=TRIAL_COLUMNS)


def summary_dict(orch: Any, record: Any, ledger: pd.DataFrame) -> dict[str, Any]:
    """``summary.json``: cost, JCT, refunded share, top-k and the run's settings."""
    steps = float(ledger["steps"].sum())
    refunded_steps = float(ledger.loc[ledger["refunded"], "steps"].sum())
    jct = (record.end_s - record.start_s) if record.end_s is not None else None
    return {
        "total_cost_usd": float(ledger["charged_usd"].sum()),
        "refunded_usd": float(ledger["refunded_usd"].sum()),
        "jct_s": jct,
        "jct_h": None if jct is None else jct / 3600.0,
        "share_steps_refunded": refunded_steps / steps if steps else 0.0,
        "steps_executed": int(steps),
        "steps_lost": int(ledger["lost_steps"].sum()),
        "instances": int(len(ledger)),
        "revocations": int(sum(tr.revocations for tr in orch.trials.values())),
        "hops": int(sum(tr.hops for tr in orch.trials.values())),
        "failures": int(sum(tr.failures for tr in orch.trials.values())),
        "top_k": [{"trial_id": t, "metric": orch.to_user(orch.trials[t].last_loss())} for t in orch.top_k],
        "selected_at_theta": list(orch.selected),
        "events": sum(1 for r in record.log if r["kind"] == "event"),
        "actions": sum(1 for r in record.log if r["kind"] == "action"),
        "settings": record.meta,
    }


def curves_frame(orch: Any) -> pd.DataFrame:
    """Each trial's observed curve on its final timeline (user direction): trial_id, step, value."""
    rows = [(tid, s, orch.to_user(v)) for tid, tr in orch.trials.items() for s, v in zip(tr.steps, tr.losses)]
    return pd.DataFrame(rows, columns=["trial_id", "step", "value"])


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a killed process leaves the old file or the new one, never half.

    The text goes to a uniquely named temporary file in the same folder, is flushed to disk, then
    replaces ``path`` with ``os.replace`` (atomic on POSIX and Windows).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def redact(value: Any) -> Any:
    """``value`` with credentials (storage ``key``/``secret``/``token`` ..., URL passwords) replaced by
    ``"***"``; everything written to a results folder goes through it (issue 11)."""
    from spottune.checkpoint._secrets import redact as _redact

    return _redact(value)


def write_results(out: Path, result: dict[str, Any]) -> dict[str, Any]:
    """Write every results file into ``out`` (created), each atomically; returns the summary dict.

    Credentials are redacted (:func:`redact`).

    Parameters
    ----------
    out : pathlib.Path
    result : dict
        What :func:`spottune.cli._run.run_experiment` returns (``orchestrator``, ``record``, ``configs``).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    orch, record = result["orchestrator"], result["record"]
    ledger = _ledger_frame(record)
    _write_atomic(out / "ledger.csv", ledger.to_csv(index=False))
    _write_atomic(out / "trials.csv", trials_frame(orch, ledger, result.get("configs", {})).to_csv(index=False))
    _write_atomic(out / "curves.csv", curves_frame(orch).to_csv(index=False))
    _write_atomic(out / "events.jsonl", "".join(json.dumps(redact(rec), sort_keys=True) + "\n" for rec in record.log))
    summary = redact(summary_dict(orch, record, ledger))
    # written last: read_results needs it, so a run killed midway is not mistaken for a finished one
    _write_atomic(out / "summary.json", json.dumps(summary, indent=2, default=str) + "\n")
    return summary


def read_results(out: Path) -> dict[str, Any]:
    """Read back ``trials``, ``ledger``, ``curves`` (DataFrames) and ``summary`` (dict).

    Raises
    ------
    ConfigError
        If a file is missing, unreadable or not valid CSV/JSON (not a spottune results folder).
    """
    from spottune.errors import ConfigError

    out = Path(out)
    need = ["trials.csv", "ledger.csv", "curves.csv", "summary.json"]
    missing = [n for n in need if not (out / n).exists()]
    if missing:
        raise ConfigError(f"{out} is not a spottune results folder (missing {', '.join(missing)})")
    try:  # pandas' EmptyDataError/ParserError and JSONDecodeError are ValueErrors
        return {"trials": pd.read_csv(out / "trials.csv"), "ledger": pd.read_csv(out / "ledger.csv"),
                "curves": pd.read_csv(out / "curves.csv"), "summary": json.loads((out / "summary.json").read_text())}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{out} holds an unreadable results file ({type(exc).__name__}: {exc})") from None
