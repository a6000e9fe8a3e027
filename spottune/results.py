"""Results on disk: ``trials.csv``, ``ledger.csv``, ``curves.csv``, ``events.jsonl``, ``summary.json``.

Definitions (the paper's metrics, §IV-B):

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
import math
import os
import secrets
import time
from collections.abc import Mapping
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


def _top_k(orch: Any, record: Any) -> tuple[str, ...]:
    """The run's top-k; when the budget ran short before the end (``record.meta["budget_exhausted"]``), the
    best k trials so far by their last observed metric."""
    if orch.top_k or not record.meta.get("budget_exhausted"):
        return tuple(orch.top_k)
    seen = sorted((tr.losses[-1], tid) for tid, tr in orch.trials.items() if tr.losses)
    return tuple(tid for _, tid in seen[: orch.config.top_k])


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
        "top_k": [{"trial_id": t, "metric": orch.to_user(orch.trials[t].last_loss())} for t in _top_k(orch, record)],
        "budget_exhausted": record.meta.get("budget_exhausted"),
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


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None (JSON has no such numbers)."""
    if isinstance(value, float):  # numpy's float64 too
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _json(value: Any, **kw: Any) -> str:
    """Strict JSON text (``allow_nan=False``): non-finite numbers are written as null."""
    return json.dumps(_finite(value), allow_nan=False, **kw)


def redact(value: Any) -> Any:
    """``value`` with credentials (storage ``key``/``secret``/``token`` ..., the user information of URLs)
    replaced by ``"***"``; everything written to a results folder goes through it, ``events.jsonl`` on
    every append."""
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
    journal = result.get("journal")
    if journal is not None:
        journal.close()
    ledger = _ledger_frame(record)
    _write_atomic(out / "ledger.csv", ledger.to_csv(index=False))
    _write_atomic(out / "trials.csv", trials_frame(orch, ledger, result.get("configs", {})).to_csv(index=False))
    _write_atomic(out / "curves.csv", curves_frame(orch).to_csv(index=False))
    _write_atomic(out / "events.jsonl", "".join(_json(redact(rec), sort_keys=True) + "\n" for rec in record.log))
    summary = redact(summary_dict(orch, record, ledger))
    # written last: read_results needs it, so a run killed midway is not mistaken for a finished one
    _write_atomic(out / "summary.json", _json(summary, indent=2, default=str) + "\n")
    return summary


def prepare_output(out: str | os.PathLike[str]) -> Path:
    """Make sure ``out`` can hold the results before a run starts: created if needed, a folder, writable.

    Returns
    -------
    pathlib.Path
        The folder (it exists afterwards).

    Raises
    ------
    ConfigError
        Naming the folder and the rule: it is a file, a parent is a file, it cannot be created, or it is
        not writable.
    """
    from spottune.errors import ConfigError

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--output {str(out)!r} is a file, but must be a folder (new or existing)")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(f"--output {str(out)!r} cannot be created: {str(parent)!r} is a file, not a folder")
            break
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--output {str(out)!r} cannot be created: {exc.strerror or exc}") from None
    probe = out / f".write-test-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"--output {str(out)!r} is not writable: {exc.strerror or exc}") from None
    return out


#: Wall seconds between two rewrites of ``trials.csv`` while only trials' step counts moved (:class:`ResultsJournal`).
TRIALS_EVERY_WALL_S = 1.0


class ResultsJournal:
    """Writes ``events.jsonl``, ``ledger.csv`` and ``trials.csv`` while a run goes on.

    Use it as the backend's progress callback (it forwards every call to ``progress``). After every
    delivered event it appends the new event and action records to ``events.jsonl`` and the newly
    billed instance runs to ``ledger.csv`` (flushed, so a killed run keeps them), and rewrites
    ``trials.csv`` atomically when a trial changes state, or, when only step counts moved, at most once every
    ``trials_every_wall_s`` wall seconds (a replay reports steps far faster than anyone reads them, and each
    rewrite prices every trial). :func:`write_results` then rewrites all three atomically (the ledger sorted by
    start time).

    Parameters
    ----------
    out : path
        The results folder (see :func:`prepare_output`).
    progress : callable (now_s, orchestrator, usd) -> None, optional
        Called after the journal has written (a progress bar).
    trials_every_wall_s : float, default :data:`TRIALS_EVERY_WALL_S`
        Wall seconds between two rewrites of ``trials.csv`` while only step counts move (0: at every change).

    Raises
    ------
    ConfigError
        If ``trials_every_wall_s`` is not a finite number >= 0.
    """

    def __init__(self, out: str | os.PathLike[str], progress: Any = None,
                 trials_every_wall_s: float = TRIALS_EVERY_WALL_S):
        from spottune.errors import ConfigError

        if not (isinstance(trials_every_wall_s, (int, float)) and 0 <= trials_every_wall_s < math.inf):
            raise ConfigError(f"trials_every_wall_s is {trials_every_wall_s!r}, but must be a finite number of "
                              "wall seconds >= 0")
        self.out = Path(out)
        self.progress = progress
        self.trials_every_wall_s = float(trials_every_wall_s)
        self.record: Any = None
        self.configs: dict[str, Any] = {}
        self._n_log = 0
        self._n_ledger = 0
        self._trial_key: tuple = ()
        self._trial_states: tuple = ()
        self._trials_wall_s = -math.inf
        self._events: Any = None
        self._ledger: Any = None

    def attach(self, record: Any, configs: dict[str, Any] | None = None) -> None:
        """Follow ``record`` (the backend's :class:`~spottune.backends.RunRecord`); start both files afresh."""
        from spotmarket import LEDGER_COLUMNS

        self.close()
        self.record, self.configs = record, dict(configs or {})
        self._n_log = self._n_ledger = 0
        self._trial_key, self._trial_states, self._trials_wall_s = (), (), -math.inf
        self._events = open(self.out / "events.jsonl", "w", encoding="utf-8", newline="")
        self._ledger = open(self.out / "ledger.csv", "w", encoding="utf-8", newline="")
        self._ledger.write(",".join([*LEDGER_COLUMNS, "steps", "lost_steps", "refunded"]) + "\n")
        self._ledger.flush()

    def bind_backend(self, backend: Any) -> None:
        """Hand the run's backend to ``progress`` if it takes one (its own ``bind_backend``): ``spottune serve``
        moves a running study's ``max_usd_per_hour`` through it (decision SV14)."""
        bind = getattr(self.progress, "bind_backend", None)
        if bind is not None:
            bind(backend)

    def __call__(self, now_s: float, orch: Any, usd: float) -> None:
        if self.record is not None:
            self.flush(orch)
        if self.progress is not None:
            self.progress(now_s, orch, usd)

    def flush(self, orch: Any = None) -> None:
        """Append what happened since the last call; rewrite ``trials.csv`` if a trial moved."""
        rec = self.record
        if rec is None or self._events is None:
            return
        log = rec.log
        if len(log) > self._n_log:
            self._events.write("".join(_json(redact(r), sort_keys=True) + "\n" for r in log[self._n_log:]))
            self._events.flush()
            self._n_log = len(log)
        if len(rec.ledger) > self._n_ledger:
            new = _ledger_frame(_Rows(rec, rec.ledger[self._n_ledger:]))
            self._ledger.write(new.to_csv(index=False, header=False))
            self._ledger.flush()
            self._n_ledger = len(rec.ledger)
        if orch is not None:
            key = tuple((t, str(tr.state), tr.step) for t, tr in orch.trials.items())
            states, now = tuple(k[:2] for k in key), time.monotonic()
            if key != self._trial_key and (states != self._trial_states
                                           or now - self._trials_wall_s >= self.trials_every_wall_s):
                self._trial_key, self._trial_states, self._trials_wall_s = key, states, now
                ledger = _ledger_frame(rec)
                _write_atomic(self.out / "trials.csv", trials_frame(orch, ledger, self.configs).to_csv(index=False))

    def close(self) -> None:
        """Close the open files (idempotent)."""
        for fh in (self._events, self._ledger):
            if fh is not None:
                fh.close()
        self._events = self._ledger = None


class _Rows:
    """A record-like view of some ledger rows (for :func:`_ledger_frame`)."""

    def __init__(self, record: Any, rows: list[Any]):
        self.ledger, self.instance_steps = rows, record.instance_steps


def no_trial_finished(trials: pd.DataFrame) -> str | None:
    """One line saying why the run produced nothing, if no trial FINISHED; else None.

    Parameters
    ----------
    trials : DataFrame
        One row per trial with a ``state`` column (:func:`trials_frame`).
    """
    states = trials["state"].astype(str)
    if (states == str(TrialState.FINISHED)).any():
        return None
    failed = int((states == str(TrialState.FAILED)).sum())
    return f"no trial finished: {failed} of {len(states)} trial(s) FAILED"


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
    res: dict[str, Any] = {}
    for key, name in (("trials", "trials.csv"), ("ledger", "ledger.csv"), ("curves", "curves.csv"),
                      ("summary", "summary.json")):
        try:  # pandas' EmptyDataError/ParserError and JSONDecodeError are ValueErrors
            res[key] = json.loads((out / name).read_text()) if key == "summary" else pd.read_csv(out / name)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{out} holds an unreadable results file {name} ({type(exc).__name__}: "
                              f"{' '.join(str(exc).split())})") from None
    _check_results(out, res)
    return res


#: What a results folder must hold for ``spottune report`` (beyond the trial columns).
_LEDGER_NEEDS = ("instance_id", "trial_id", "market", "start_s", "end_s", "ended_by", "charged_usd", "refunded_usd")
_CURVES_NEEDS = ("trial_id", "step", "value")
_SUMMARY_NEEDS = ("total_cost_usd", "refunded_usd", "jct_h", "share_steps_refunded", "steps_executed", "steps_lost",
                  "events", "actions", "instances", "revocations", "hops", "top_k", "settings")


def _check_results(out: Path, res: dict[str, Any]) -> None:
    """Columns, complete rows and summary keys of a results folder (a truncated file is refused)."""
    from spottune.errors import ConfigError

    needs = {"trials.csv": TRIAL_COLUMNS, "ledger.csv": _LEDGER_NEEDS, "curves.csv": _CURVES_NEEDS}
    for name, key in (("trials.csv", "trials"), ("ledger.csv", "ledger"), ("curves.csv", "curves")):
        missing = [c for c in needs[name] if c not in res[key].columns]
        if missing:
            raise ConfigError(f"{out / name} is not a spottune results file: it lacks the column(s) "
                              f"{', '.join(missing)}")
        _check_rows(out / name)
    t = res["trials"]
    bad = t[t[["trial_id", "state", "steps"]].isna().any(axis=1)]
    if len(bad):
        raise ConfigError(f"{out / 'trials.csv'} is truncated or damaged: row {int(bad.index[0]) + 2} lacks trial_id, "
                          "state or steps")
    summary = res["summary"]
    if not isinstance(summary, dict):
        raise ConfigError(f"{out / 'summary.json'} holds a {type(summary).__name__}, but must hold an object")
    missing = [k for k in _SUMMARY_NEEDS if k not in summary]
    if missing:
        raise ConfigError(f"{out / 'summary.json'} lacks the key(s) {', '.join(missing)}")


def _check_rows(path: Path) -> None:
    """Every line of a CSV has as many fields as its header (a file cut mid-line does not)."""
    import csv

    from spottune.errors import ConfigError

    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        for row in reader:
            if row and len(row) != len(header or ()):
                raise ConfigError(f"{path} is truncated or damaged: line {reader.line_num} has {len(row)} field(s), "
                                  f"the header {len(header or ())}")
