"""The worker protocol as types: one frozen dataclass per message, one encoder, two decoders.

A worker (:mod:`spottune.backends.local.worker`) reads commands as JSON lines on stdin and writes
reports as JSON lines on stdout. On the wire a report is ``{"event": <kind>, <fields>...}`` and a
command ``{"cmd": <kind>, ...}`` (or ``{"argv": [...]}`` for a standby worker's segment); in the code
both sides only ever see the dataclasses below.

Reports (worker -> backend)
    :class:`Ready` (``ready``), :class:`Metric` (``metric``), :class:`Notice` (``notice``),
    :class:`Saved` (``checkpoint``), :class:`Idle` (``idle``), :class:`Failed` (``failed``),
    :class:`Exited` (``exit``), :class:`Standby` (``standby``), :class:`Beat` (``beat``).
Commands (backend -> worker)
    :class:`CheckpointCommand` (``{"cmd": "checkpoint", "reason": ...}``), :class:`ExitCommand`
    (``{"cmd": "exit"}``), :class:`SegmentCommand` (``{"argv": [...]}``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "Beat", "CheckpointCommand", "Command", "ExitCommand", "Exited", "Failed", "Idle", "Metric", "Notice", "Ready",
    "Report", "Saved", "SegmentCommand", "Standby", "decode_command", "decode_report", "encode",
]


# -- reports -----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Ready:
    """The segment is set up and restored.

    ``step``: the restored step (0: fresh start); ``version``: the checkpoint version or None;
    ``restore_s``: wall seconds of set-up and restore. ``requested_step`` and ``lost_steps`` are set when
    the checkpoint at the requested step was missing or corrupt and an earlier one was restored.

    Parameters
    ----------
    step : int
        The restored step.
    version : int or None, default None
        The restored checkpoint version.
    restore_s : float or None, default None
        Wall seconds of set-up and restore.
    pid : int or None, default None
        The worker's process id (journaled, to find leftovers after a crash).
    requested_step, lost_steps : int or None, default None
        The step asked for and the steps lost by the fallback.
    """

    kind: ClassVar[str] = "ready"
    step: int
    version: int | None = None
    restore_s: float | None = None
    pid: int | None = None
    requested_step: int | None = None
    lost_steps: int | None = None


@dataclass(frozen=True, slots=True)
class Metric:
    """Step ``step`` (1-based, across segments) finished with ``metrics`` (name -> float).

    Parameters
    ----------
    step : int
        Steps done in total.
    metrics : dict of str to float
        What ``Trainable.step`` returned.
    """

    kind: ClassVar[str] = "metric"
    step: int
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Notice:
    """The worker saw an interruption notice on IMDS (``action``, ``time`` as IMDS gives them).

    Parameters
    ----------
    action : str or None
        ``terminate``, ``stop`` or ``hibernate``.
    time : str or None
        The interruption's time, ISO-8601 UTC.
    """

    kind: ClassVar[str] = "notice"
    action: str | None = None
    time: str | None = None


@dataclass(frozen=True, slots=True)
class Saved:
    """A checkpoint of ``step`` was published and verified (``save_s`` wall seconds); the worker then exits.

    Parameters
    ----------
    step : int
        The step saved.
    version : int or None
        The checkpoint version published.
    reason : str or None
        The command's reason.
    save_s : float or None
        Wall seconds of the save.
    """

    kind: ClassVar[str] = "checkpoint"
    step: int
    version: int | None = None
    reason: str | None = None
    save_s: float | None = None


@dataclass(frozen=True, slots=True)
class Idle:
    """Training reached ``--until-step`` (``step``); the worker waits for a command.

    Parameters
    ----------
    step : int
        The step reached.
    """

    kind: ClassVar[str] = "idle"
    step: int


@dataclass(frozen=True, slots=True)
class Failed:
    """The trainable or the store failed ``during`` setup, restore, step or checkpoint (``error``: one line).

    Parameters
    ----------
    during : str
        ``setup``, ``restore``, ``step`` or ``checkpoint``.
    error : str, default ""
        The exception, on one line.
    """

    kind: ClassVar[str] = "failed"
    during: str
    error: str = ""


@dataclass(frozen=True, slots=True)
class Exited:
    """The segment ends with exit code ``code``.

    Parameters
    ----------
    code : int
        The process's exit code.
    """

    kind: ClassVar[str] = "exit"
    code: int


@dataclass(frozen=True, slots=True)
class Beat:
    """The worker is alive: sent every ``--heartbeat-s`` wall seconds while a segment runs (decision SV4).

    Parameters
    ----------
    step : int or None, default None
        The trainable's step then (None before it is built).
    """

    kind: ClassVar[str] = "beat"
    step: int | None = None


@dataclass(frozen=True, slots=True)
class Standby:
    """A ``--standby`` worker is warm (``warm_up_s`` wall seconds) and waits for a :class:`SegmentCommand`.

    Parameters
    ----------
    pid : int or None
        The worker's process id.
    warm_up_s : float or None
        Wall seconds of the warm-up.
    """

    kind: ClassVar[str] = "standby"
    pid: int | None = None
    warm_up_s: float | None = None


Report = Ready | Metric | Notice | Saved | Idle | Failed | Exited | Standby | Beat
_REPORTS: dict[str, type] = {cls.kind: cls for cls in (Ready, Metric, Notice, Saved, Idle, Failed, Exited, Standby,
                                                       Beat)}


# -- commands ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CheckpointCommand:
    """Save a checkpoint now (``reason``: revocation, hop, theta, end, plateau, ...), then exit.

    Parameters
    ----------
    reason : str, default "requested"
        Why (a :class:`~spottune.orchestrator.CheckpointReason` value).
    """

    kind: ClassVar[str] = "checkpoint"
    reason: str = "requested"


@dataclass(frozen=True, slots=True)
class ExitCommand:
    """Exit without saving."""

    kind: ClassVar[str] = "exit"


@dataclass(frozen=True, slots=True)
class SegmentCommand:
    """A standby worker's segment: the worker's command-line arguments (:func:`~._pool.segment_argv`).

    Parameters
    ----------
    argv : list of str
        The segment's arguments.
    """

    kind: ClassVar[str] = "argv"
    argv: list[str] = field(default_factory=list)


Command = CheckpointCommand | ExitCommand | SegmentCommand
_COMMANDS: dict[str, type] = {CheckpointCommand.kind: CheckpointCommand, ExitCommand.kind: ExitCommand}


# -- the wire ----------------------------------------------------------------------------------------------
def encode(message: Report | Command) -> str:
    """One JSON line (without the newline) for ``message``; None fields are left out.

    Parameters
    ----------
    message : Report or Command
        A report or a command.

    Returns
    -------
    str
        JSON, NaN allowed.
    """
    fields = {f.name: getattr(message, f.name) for f in dataclasses.fields(message)}
    fields = {k: v for k, v in fields.items() if v is not None}
    if isinstance(message, SegmentCommand):
        return json.dumps({"argv": list(message.argv)})
    key = "cmd" if isinstance(message, (CheckpointCommand, ExitCommand)) else "event"
    return json.dumps({key: message.kind, **fields}, allow_nan=True)


def _build(cls: type, payload: dict[str, Any], line: str) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    try:
        return cls(**{k: v for k, v in payload.items() if k in names})
    except TypeError as exc:  # a required field is missing
        raise ValueError(f"malformed {cls.kind!r} message {line.strip()[:200]!r}: {exc}") from None


def _load(line: str) -> dict[str, Any]:
    try:
        payload = json.loads(line)
    except ValueError:
        raise ValueError(f"not a JSON message: {line.strip()[:200]!r}") from None
    if not isinstance(payload, dict):
        raise ValueError(f"not a JSON object: {line.strip()[:200]!r}")
    return payload


def decode_report(line: str) -> Report:
    """The report on one stdout line of a worker.

    Parameters
    ----------
    line : str
        One line of the worker's stdout.

    Returns
    -------
    Report

    Raises
    ------
    ValueError
        If the line is not a JSON object with a known ``event`` and its required fields (a stray
        ``print`` of user code is one; the reader skips it).
    """
    payload = _load(line)
    cls = _REPORTS.get(payload.pop("event", None))
    if cls is None:
        raise ValueError(f"not a worker report: {line.strip()[:200]!r}")
    return _build(cls, payload, line)


def decode_command(line: str) -> Command:
    """The command on one stdin line of a worker.

    Parameters
    ----------
    line : str
        One line of the worker's stdin.

    Returns
    -------
    Command

    Raises
    ------
    ValueError
        If the line is not a JSON object holding a known ``cmd`` or an ``argv`` list.
    """
    payload = _load(line)
    if "argv" in payload:
        if not isinstance(payload["argv"], list):
            raise ValueError(f"malformed segment command {line.strip()[:200]!r}: argv must be a list")
        return SegmentCommand([str(a) for a in payload["argv"]])
    cls = _COMMANDS.get(payload.pop("cmd", None))
    if cls is None:
        raise ValueError(f"not a worker command: {line.strip()[:200]!r}")
    return _build(cls, payload, line)
