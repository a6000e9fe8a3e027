"""Actions the orchestrator returns for a driver to carry out: small frozen values, no behaviour.

A driver turns each action into an effect (launch or stop an instance, start a checkpoint, set a
timer, record a result) and never decides anything itself. The trial-level actions
(``Launch``, ``Checkpoint``, ``Terminate``, ``Stop``) pass through the transition table like events.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from spotmarket.prices import Market

from spottune.orchestrator._events import CheckpointReason

_ACTION = dict(frozen=True, slots=True, kw_only=True)


class TerminateReason(enum.StrEnum):
    """Why we (the user) terminate an instance; part of the transition key."""

    HOP = "hop"  #: hourly re-provisioning after the HOP checkpoint
    THETA = "theta"  #: paused at θ·max_steps; the instance is released while waiting for the barrier
    END = "end"  #: the trial finished (target reached or plateau)
    FAILURE = "failure"  #: the trainable raised; the instance is released before a retry
    PRUNE = "prune"  #: an external stop rule (e.g. an Optuna pruner) stopped the running trial


class StopReason(enum.StrEnum):
    """Why a paused trial is stopped for good."""

    NOT_TOP_K = "not_top_k"  #: ranked outside the trials kept at a barrier (θ's top-k, or a rung's keep)


@dataclass(**_ACTION)
class Launch:
    """Request a spot instance in ``market`` with max price ``max_price_usd_per_hour`` and resume the
    trial from its checkpoint at ``resume_step`` (0: fresh start). The driver answers with
    :class:`TrialLaunched` or :class:`LaunchFailed`.

    Parameters
    ----------
    trial_id : str
        The trial.
    market : spotmarket.prices.Market
        Instance type, region and availability zone.
    max_price_usd_per_hour : float
        The max price of the spot request, USD per instance-hour.
    resume_step : int
        The checkpoint's step to restore (0: fresh start).
    target_steps : int
        The step of the trial's next planned stop (a barrier or S_max).
    explanation : dict or str, default ""
        The chooser's reasons, for the log.
    """

    trial_id: str
    market: Market
    max_price_usd_per_hour: float
    resume_step: int
    target_steps: int
    explanation: Any = ""  #: the chooser's explanation as plain data (dict from ``to_dict()``), or text


@dataclass(**_ACTION)
class Checkpoint:
    """Stop training on ``instance_id`` and save the trial's state; answered by :class:`CheckpointSaved`
    (with the same reason) or, if the instance dies first, :class:`SegmentEnded`.

    Parameters
    ----------
    trial_id : str
        The trial.
    instance_id : str
        The instance (driver-assigned, unique in the experiment).
    reason : CheckpointReason
        ``hop``, ``revocation``, ``theta``, ``end`` or ``plateau``.
    """

    trial_id: str
    instance_id: str
    reason: CheckpointReason


@dataclass(**_ACTION)
class Terminate:
    """Terminate (user-initiated, billed per second) an instance the trial has left.

    Parameters
    ----------
    trial_id : str
        The trial.
    instance_id : str
        The instance (driver-assigned, unique in the experiment).
    reason : TerminateReason
        Why the instance is released.
    """

    trial_id: str
    instance_id: str
    reason: TerminateReason


@dataclass(**_ACTION)
class Stop:
    """Stop a paused trial for good (no instance is involved).

    Parameters
    ----------
    trial_id : str
        The trial.
    reason : StopReason
        Why the trial stops.
    """

    trial_id: str
    reason: StopReason


@dataclass(**_ACTION)
class ScheduleWakeUp:
    """Deliver :class:`WakeUp` for ``trial_id`` at engine time ``at_s`` (launch retry back-off).

    Parameters
    ----------
    trial_id : str
        The trial.
    at_s : float
        Engine seconds of the wake-up.
    """

    trial_id: str
    at_s: float


@dataclass(**_ACTION)
class ExperimentFinished:
    """Every trial is terminal: JCT ends at ``time_s``. ``top_k`` lists trial ids best first and
    ``metrics`` their final (or, for plateaued trials, last observed) metric in the user's direction.

    Parameters
    ----------
    time_s : float
        Engine seconds when every trial is terminal (the driver's clock).
    top_k : tuple of str
        Trial ids, best first.
    metrics : mapping of str to float
        Trial id -> its final (or last observed) metric value, in the user's direction.
    """

    time_s: float
    top_k: tuple[str, ...]
    metrics: Mapping[str, float] = field(default_factory=dict)


Action: TypeAlias = Launch | Checkpoint | Terminate | Stop | ScheduleWakeUp | ExperimentFinished

#: Actions that pass through the trial transition table.
TRIAL_ACTIONS: tuple[type, ...] = (Launch, Checkpoint, Terminate, Stop)
