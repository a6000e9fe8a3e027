"""The run journal: an append-only JSONL file from which a killed run is rebuilt exactly (issue 15).

One file, ``<results>/journal.jsonl``, one JSON object per line, written as the run goes:

=========  ===============================================================================================
``k``      what the line records
=========  ===============================================================================================
``spec``   first line: the experiment spec (``ExperimentSpec.to_dict()``) and the journal format version
``event``  an event delivered to the orchestrator (``e``: :func:`encode`), before ``handle`` is called
``action`` an action ``handle`` returned (``a``), before the driver carries it out
``intent`` a driver's side effect, written *before* it is carried out (``op``, ``id``, details)
``outcome`` what that side effect produced (``op``, ``id``, details: instance fulfilled, worker PID, ...)
``billed`` an instance run billed by the driver (ledger row, steps run and lost, and whether the online
           revocation model was told), because that call feeds the predictor outside ``handle``
=========  ===============================================================================================

Every line carries ``n``, its 0-based position. Writes go to the OS at once (``flush``: a ``kill -9`` of
the process loses nothing already returned from :meth:`Journal.append`); ``os.fsync`` is called before
every intent of a driver with real side effects (``Journal.sync_intents``, the local and aws backends),
at most every ``fsync_interval_s`` seconds otherwise, and on close. A line cut by a crash is dropped
when the journal is reopened (:func:`read_journal`).

**Replay, not snapshots** (decision CS2, ``docs/design.md`` "Crash safety"). A resumed run rebuilds its
state by re-delivering the journaled events to a freshly built orchestrator (same spec, same seed), so
the provisioner's measured speeds and RNG state and the predictor's online state come back as they
were, with no pickled state to trust. While a :class:`Journal` opened with ``replay=`` records is
replaying, :meth:`Journal.append` *compares* each record with the journaled one instead of writing it
and raises :class:`~spottune.errors.JournalMismatch` on the first difference (never a silent
divergence); once the journaled records are used up it appends. ``benchmarks/bench_resume.py``
measures the replay of a 1,000-trial journal (well under the 5 s target, so no snapshot is needed).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from spottune.errors import ConfigError, JournalMismatch

__all__ = ["JOURNAL_FILE", "JOURNAL_VERSION", "Journal", "JournalRecords", "JournaledPredictor", "decode_event",
           "encode", "open_run", "read_journal"]

#: The journal's file name inside a results folder.
JOURNAL_FILE = "journal.jsonl"
#: Format version written in the ``spec`` line; a resume refuses another version.
JOURNAL_VERSION = 1


def _json_default(value: Any) -> Any:
    """What ``json.dumps`` cannot write by itself: enums by value, markets as text, numpy scalars, mappings."""
    if isinstance(value, enum.Enum):
        return value.value
    if hasattr(value, "instance_type") and hasattr(value, "availability_zone"):
        return str(value)  # a Market: "AZ/TYPE/PRODUCT"
    if hasattr(value, "item"):
        return value.item()  # a numpy scalar
    if isinstance(value, Mapping):
        return dict(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return str(value)


def _dumps(record: Mapping[str, Any]) -> str:
    """One journal line (without its newline): keys sorted, no spaces, floats exact (``Infinity``, ``NaN``)."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"), default=_json_default)


_NAMES: dict[type, tuple[str, ...]] = {}


def _fields(item: Any) -> dict[str, Any]:
    """An event or action as ``{"type": class name, field: value, ...}``, values as they are (fast path)."""
    cls = type(item)
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    out: dict[str, Any] = {"type": cls.__name__}
    for name in names:
        out[name] = getattr(item, name)
    return out


def encode(item: Any) -> dict[str, Any]:
    """An event or action (a dataclass) as the plain JSON data the journal holds for it.

    ``{"type": class name, field: value, ...}``: floats kept exactly (JSON's shortest round-trip repr;
    ``inf`` and ``nan`` as ``Infinity`` and ``NaN``), enums by value, markets as ``"AZ/TYPE/PRODUCT"``.
    """
    return json.loads(_dumps(_fields(item)))


def decode_event(data: Mapping[str, Any]) -> Any:
    """The event :func:`encode` wrote (``spottune.orchestrator`` event types only).

    Raises
    ------
    ConfigError
        On an unknown event type (the journal is not spottune's or is damaged).
    """
    from spotmarket.prices import Market
    from spottune import orchestrator as ev

    types = {t.__name__: t for t in ev.EVENT_TYPES}
    cls = types.get(str(data.get("type")))
    if cls is None:
        raise ConfigError(f"journal holds an unknown event type {data.get('type')!r}")
    kwargs = {k: v for k, v in data.items() if k != "type"}
    if "market" in kwargs:
        kwargs["market"] = Market.parse(kwargs["market"])
    if cls is ev.CheckpointSaved:
        kwargs["reason"] = ev.CheckpointReason(kwargs["reason"])
    elif cls is ev.SegmentEnded:
        kwargs["reason"] = ev.EndReason(kwargs["reason"])
    return cls(**kwargs)


def read_journal(path: str | os.PathLike[str], *, repair: bool = False) -> "JournalRecords":
    """Every complete record of a journal file, in order (a list of dict, with the raw ``lines``).

    A last line without its newline (the process died while writing it) is dropped, and with
    ``repair=True`` cut from the file so that appends continue after the last complete record.

    Raises
    ------
    ConfigError
        If the file is missing, a complete line is not JSON, the positions ``n`` are not 0, 1, 2, ...,
        or the first record is not the ``spec`` line of version :data:`JOURNAL_VERSION`.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path.parent} holds no journal ({path.name} is missing): it is not a resumable run")
    raw = path.read_bytes()
    end = raw.rfind(b"\n") + 1
    if repair and end < len(raw):
        with open(path, "r+b") as fh:
            fh.truncate(end)
            fh.flush()
            os.fsync(fh.fileno())
    records = JournalRecords()
    for i, line in enumerate(raw[:end].splitlines()):
        try:
            rec = json.loads(line)
        except ValueError:
            raise ConfigError(f"{path} line {i + 1} is not JSON: the journal is damaged") from None
        if rec.get("n") != i:
            raise ConfigError(f"{path} line {i + 1} has position {rec.get('n')!r}, expected {i}: the journal is damaged")
        records.append(rec)
        records.lines.append(line.decode())
    if not records or records[0].get("k") != "spec":
        raise ConfigError(f"{path} does not start with the experiment spec: not a spottune journal")
    if records[0].get("version") != JOURNAL_VERSION:
        raise ConfigError(f"{path} is journal version {records[0].get('version')!r}, this build reads "
                          f"version {JOURNAL_VERSION}")
    return records


class JournalRecords(list):
    """The records of a journal (a list of dict), with ``lines``: each record's line as written."""

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.lines: list[str] = []


class Journal:
    """Append-only JSONL journal of one run (see the module doc).

    Parameters
    ----------
    path : path
        The journal file; created (with the ``spec`` line) unless ``replay`` is given.
    spec : mapping, optional
        The experiment spec as plain data, written as the first line of a new journal.
    trials : list, optional
        ``[trial_id, config, seed]`` of every trial, written with it (a resume checks them).
    replay : list of dict, optional
        The records of an existing journal (:func:`read_journal` with ``repair=True``): appends are
        compared with them, in order, until they are used up, then written after them.
    flush_interval_s : float, default 0.05
        Longest time a record waits in the process's buffer before it is handed to the OS (a
        ``kill -9`` loses at most that much; with :attr:`sync_intents` every record is handed at once).
    fsync_interval_s : float, default 1.0
        Longest time between two ``os.fsync`` calls while appending (a power loss loses at most that much).
    fault : callable (n, record) -> None, optional
        Fault injection for tests: called before record ``n`` is written (or compared); raising
        there is a crash at that point.

    Attributes
    ----------
    sync_intents : bool
        Set for a driver with real side effects (local, aws): every record goes to the OS at once and
        every intent is fsync'd before the side effect it announces.
    """

    def __init__(self, path: str | os.PathLike[str], *, spec: Mapping[str, Any] | None = None,
                 trials: list | None = None, replay: list[dict[str, Any]] | None = None,
                 flush_interval_s: float = 0.05, fsync_interval_s: float = 1.0,
                 fault: Callable[[int, dict[str, Any]], None] | None = None):
        self.path = Path(path)
        self.flush_interval_s = float(flush_interval_s)
        self.fsync_interval_s = float(fsync_interval_s)
        self.fault = fault
        self.sync_intents = False
        self._expected = list(replay or [])
        lines = getattr(replay, "lines", None)  # the lines as written: no need to serialise them again
        self._lines = list(lines) if lines is not None and len(lines) == len(self._expected) else None
        self.n = 0
        self._fh: Any = None
        self._flushed = self._synced = time.monotonic()
        if replay is None:
            self._fh = open(self.path, "x", encoding="utf-8", newline="")
            self.append("spec", spec=dict(spec or {}), trials=list(trials or []), version=JOURNAL_VERSION)
        else:
            self.n = 1  # the spec line is not compared
            self._open_if_done()

    @property
    def replaying(self) -> bool:
        """True while appends are still compared with journaled records."""
        return self.n < len(self._expected)

    def _open_if_done(self) -> None:
        if self._fh is None and not self.replaying:
            self._fh = open(self.path, "a", encoding="utf-8", newline="")

    def append(self, kind: str, **fields: Any) -> None:
        """Record ``kind`` with ``fields``, or check it against the journal while replaying.

        Field values are JSON data, or enums, markets, numpy scalars and mappings (written as
        :func:`encode` says).

        Raises
        ------
        JournalMismatch
            While replaying, if the record differs from the journaled one at this position.
        """
        record = {"n": self.n, "k": kind, **fields}
        if self.fault is not None:
            self.fault(self.n, record)
        if self.n < len(self._expected):
            line, expected = _dumps(record), self._expected[self.n]
            if (self._lines[self.n] if self._lines is not None else _dumps(expected)) != line:
                raise JournalMismatch(self.n, expected, json.loads(line))
            self.n += 1
            self._open_if_done()
            return
        # the spec keeps its key order (a search space's grid order gives the trial ids); the rest is sorted
        fh = self._fh
        fh.write((json.dumps(record, default=_json_default) if kind == "spec" else _dumps(record)) + "\n")
        self.n += 1
        now = time.monotonic()
        if self.sync_intents or now - self._flushed >= self.flush_interval_s:
            fh.flush()
            self._flushed = now
            if (kind == "intent" and self.sync_intents) or now - self._synced >= self.fsync_interval_s:
                os.fsync(fh.fileno())
                self._synced = now

    def next_record(self) -> dict[str, Any]:
        """While replaying: the journaled record at the current position, which counts as replayed.

        For a driver that rebuilds its own state from the records (the local backend) rather than
        re-executing the run; it must still pass events and actions through :meth:`event` and
        :meth:`actions` so that they are compared.
        """
        if not self.replaying:
            raise IndexError("the journal has no record left to replay")
        record = self._expected[self.n]
        self.n += 1
        self._open_if_done()
        return record

    def peek(self) -> dict[str, Any] | None:
        """While replaying: the next journaled record (not consumed); None once replayed."""
        return self._expected[self.n] if self.replaying else None

    def event(self, event: Any) -> None:
        """Record an event before it is handed to the orchestrator."""
        self.append("event", e=_fields(event))

    def actions(self, actions: Iterable[Any]) -> None:
        """Record the actions ``handle`` returned, in order."""
        for action in actions:
            self.append("action", a=_fields(action))

    def intent(self, op: str, key: str, **details: Any) -> None:
        """Record a side effect ``op`` on ``key`` before it is carried out (fsync'd for real drivers)."""
        self.append("intent", op=op, id=key, **details)

    def outcome(self, op: str, key: str, **details: Any) -> None:
        """Record what side effect ``op`` on ``key`` produced."""
        self.append("outcome", op=op, id=key, **details)

    def close(self) -> None:
        """Flush, fsync and close (idempotent)."""
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None



def open_run(folder: str | os.PathLike[str], spec: Any = None) -> tuple[Any, Journal, list[dict[str, Any]] | None]:
    """The journal of a run in a results folder: a new run (``spec`` given) or a resumed one (``spec`` None).

    Parameters
    ----------
    folder : path
        The results folder (exists).
    spec : ExperimentSpec, optional
        A new run's spec; None: resume the run whose journal is in ``folder``.

    Returns
    -------
    (ExperimentSpec, Journal, records or None)
        ``records`` are the journaled records the new :class:`Journal` replays (None for a new run).

    Raises
    ------
    ConfigError
        A new run in a folder that already holds one (``journal.jsonl`` or ``summary.json``): one line
        that points to ``spottune resume``; a resume of a folder without a journal or with a damaged one.
    """
    from spottune.experiment import ExperimentSpec
    from spottune.results import redact

    folder = Path(folder)
    path = folder / JOURNAL_FILE
    if spec is not None:
        if path.exists() or (folder / "summary.json").exists():
            raise ConfigError(f"{folder} already holds a run; continue it with `spottune resume {folder}` "
                              f"(spottune.tune(resume=...)) or choose another output folder")
        journal = Journal(path, spec=redact(spec.to_dict()), trials=_trials(spec))
        return spec, journal, None
    records = read_journal(path, repair=True)
    stored = dict(records[0]["spec"])
    # credentials were redacted when the spec was written: they come from the environment again
    stored["storage_options"] = {k: v for k, v in dict(stored.get("storage_options") or {}).items() if v != "***"}
    spec = ExperimentSpec.from_dict(stored)
    trials = _trials(spec)
    if trials != records[0].get("trials"):
        raise JournalMismatch(0, {"trials": records[0].get("trials")}, {"trials": trials})
    return spec, Journal(path, replay=records), records


def _trials(spec: Any) -> list[list[Any]]:
    """``[trial_id, config, seed]`` of every trial: a resumed spec must give the same ones."""
    return json.loads(_dumps([[t.trial_id, t.config, int(t.seed)] for t in spec.trials()]))


class JournaledPredictor:
    """The orchestrator's final-metric predictor, its answers journaled (``memo`` records) and read back on replay.

    EarlyCurve's fits at the θ barrier are most of a replay's time (a 1,000-trial barrier fits 1,000
    curves). ``predict_final`` is a pure function of its input (the contract of
    :class:`earlycurve.FinalMetricPredictor`), so a replay may take the journaled answer for the same
    input instead of fitting again: each call writes ``{"k": "memo", "key": SHA-256 of (steps, values,
    max_steps), "p": the prediction}`` (or ``"error"``); while the journal replays and its next record
    is the memo of the same key, that answer is returned (and the record compared, so the key is
    checked). Any other input is computed, and then the comparison raises
    :class:`~spottune.errors.JournalMismatch` as for any divergence.

    Parameters
    ----------
    inner : FinalMetricPredictor
    journal : Journal
    """

    def __init__(self, inner: Any, journal: Journal):
        self.inner = inner
        self.journal = journal

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def predict_final(self, steps: Any, values: Any, max_steps: int) -> Any:
        import hashlib

        import numpy as np
        from earlycurve import Prediction

        digest = hashlib.sha256()
        digest.update(np.ascontiguousarray(steps, dtype=float).tobytes())
        digest.update(b"|")
        digest.update(np.ascontiguousarray(values, dtype=float).tobytes())
        digest.update(f"|{int(max_steps)}".encode())
        key = digest.hexdigest()[:32]
        rec = self.journal.peek()
        if rec is not None and rec.get("k") == "memo" and rec.get("key") == key:
            if "error" in rec:
                self.journal.append("memo", key=key, error=rec["error"])
                raise ValueError(rec["error"])  # the orchestrator treats every predictor error alike
            self.journal.append("memo", key=key, p=rec["p"])
            return Prediction(**{k: v for k, v in rec["p"].items() if k != "type"})
        from earlycurve.errors import EarlyCurveError

        try:
            prediction = self.inner.predict_final(steps, values, max_steps)
        except (EarlyCurveError, ValueError, FloatingPointError) as exc:  # what the orchestrator catches
            self.journal.append("memo", key=key, error=f"{type(exc).__name__}: {exc}")
            raise
        self.journal.append("memo", key=key, p=_fields(prediction))
        return prediction
