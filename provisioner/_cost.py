"""SpotTune's cost model: Eq 1 (expected hourly cost), Eq 2 (cost per step) and an opt-in refinement.

Source: SpotTune (ICDCS 2020) Eq 1–2, as reconstructed in docs/design/provisioner.md.
A revocation within an instance's first hour is fully refunded, so with probability p the next hour is
free: ``E[C_i] = p_i · 0 + (1 − p_i) · P̄_i``. All functions are vectorised (NumPy broadcasting) and
return a float for scalar input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike

from provisioner.errors import ProvisionerConfigError
from spotmarket import HOUR_S  # one instance-hour: the horizon of Eq 1 and of the hourly hop


def _out(x: np.ndarray) -> np.ndarray | float:
    return float(x) if np.ndim(x) == 0 else x


def _check_p(p: np.ndarray) -> None:
    if np.any((p < 0.0) | (p > 1.0)) or np.any(np.isnan(p)):
        bad = p[(p < 0.0) | (p > 1.0) | np.isnan(p)].flat[0]
        raise ProvisionerConfigError(f"revocation probability is {bad}, but must be in [0, 1]")


def expected_hour_cost_usd(p_revocation: ArrayLike, mean_price_usd_per_hour: ArrayLike) -> np.ndarray | float:
    """Eq 1: expected cost of the next instance-hour, ``E[C] = (1 − p) · P̄``.

    Parameters
    ----------
    p_revocation : float or ndarray
        P(revoked within the next hour), in [0, 1] (RevPred's output for the chosen max price).
    mean_price_usd_per_hour : float or ndarray
        P̄, the time-weighted mean spot price over the last hour, USD per instance-hour.

    Returns
    -------
    float or ndarray
        Expected USD paid for the next hour (broadcast shape of the inputs).

    Notes
    -----
    Source: SpotTune Eq 1. A revoked first hour is refunded, so it costs 0 with
    probability p; per-second billing at the market price (not the max price) otherwise.

    Examples
    --------
    >>> round(expected_hour_cost_usd(0.6, 0.030), 6)
    0.012
    """
    p = np.asarray(p_revocation, dtype=float)
    _check_p(p)
    return _out((1.0 - p) * np.asarray(mean_price_usd_per_hour, dtype=float))


def step_cost_usd(
    p_revocation: ArrayLike, mean_price_usd_per_hour: ArrayLike, seconds_per_step: ArrayLike
) -> np.ndarray | float:
    """Eq 2: expected cost of one training step, ``(1 − p) · P̄ · T / 3600``.

    Parameters
    ----------
    p_revocation : float or ndarray
        P(revoked within the next hour), in [0, 1].
    mean_price_usd_per_hour : float or ndarray
        P̄ over the last hour, USD per instance-hour.
    seconds_per_step : float or ndarray
        T[h][i], seconds per training step of trial h on instance type i.

    Returns
    -------
    float or ndarray
        Expected USD per step (Eq 1 divided by the 3600 / T steps an hour holds).

    Notes
    -----
    Source: SpotTune Eq 2; getBestInst is its argmin over the pool. It ignores revocation
    overheads (checkpoint, restart, the shorter revoked hour), so it is cost-optimal, not JCT-optimal;
    see :func:`useful_step_cost_usd` for the opt-in refinement.

    Examples
    --------
    >>> f"{step_cost_usd(0.6, 0.030, 2.0):.4g}", f"{step_cost_usd(0.1, 0.150, 0.4):.4g}"
    ('6.667e-06', '1.5e-05')
    """
    t = np.asarray(seconds_per_step, dtype=float)
    return _out(np.asarray(expected_hour_cost_usd(p_revocation, mean_price_usd_per_hour)) * t / HOUR_S)


def _check_overheads(restart_s: float, checkpoint_s: float, lost_s: float, hour_s: float) -> None:
    for name, v in (("restart_s", restart_s), ("checkpoint_s", checkpoint_s), ("lost_s", lost_s)):
        if not (np.isfinite(v) and v >= 0.0):
            raise ProvisionerConfigError(f"{name} is {v}, but must be a finite number >= 0 (seconds)")
    if not restart_s + checkpoint_s + lost_s < hour_s:
        raise ProvisionerConfigError(
            f"restart_s + checkpoint_s + lost_s is {restart_s + checkpoint_s + lost_s} s, "
            f"but must be < {hour_s} s (else an hour yields no useful step)"
        )


def expected_useful_seconds(
    p_revocation: ArrayLike,
    *,
    restart_s: float = 0.0,
    checkpoint_s: float = 0.0,
    lost_s: float = 0.0,
    hour_s: float = HOUR_S,
) -> np.ndarray | float:
    """Expected useful training seconds in the next instance-hour, given revocation overheads.

    Not revoked (probability 1 − p): ``hour_s − restart_s − checkpoint_s`` (boot and restore, then the
    checkpoint at the hourly hop). Revoked at τ ~ U(0, hour_s) (probability p): ``(τ − o)₊`` with
    ``o = restart_s + checkpoint_s + lost_s``, whose mean is ``(hour_s − o)² / (2 · hour_s)``.

    Parameters
    ----------
    p_revocation : float or ndarray
        P(revoked within the hour), in [0, 1].
    restart_s, checkpoint_s, lost_s : float
        Seconds per segment spent booting and restoring, checkpointing, and training work lost at a
        revocation (not saved by the notice-time checkpoint). Their sum must be < ``hour_s``.
    hour_s : float
        Horizon, seconds (3600).

    Returns
    -------
    float or ndarray
        Expected seconds of training that count, per instance-hour.
    """
    _check_overheads(restart_s, checkpoint_s, lost_s, hour_s)
    p = np.asarray(p_revocation, dtype=float)
    _check_p(p)
    kept = hour_s - restart_s - checkpoint_s
    o = restart_s + checkpoint_s + lost_s
    return _out((1.0 - p) * kept + p * (hour_s - o) ** 2 / (2.0 * hour_s))


def useful_step_cost_usd(
    p_revocation: ArrayLike,
    mean_price_usd_per_hour: ArrayLike,
    seconds_per_step: ArrayLike,
    *,
    restart_s: float = 0.0,
    checkpoint_s: float = 0.0,
    lost_s: float = 0.0,
    hour_s: float = HOUR_S,
) -> np.ndarray | float:
    """Opt-in refinement of Eq 2: expected USD per *useful* step, revocation overheads included.

    ``E[cost] · T / E[useful seconds]`` with ``E[cost] = (1 − p) · P̄`` (Eq 1, revoked hour refunded)
    and E[useful seconds] from :func:`expected_useful_seconds`. A ratio of expectations, i.e. the
    long-run cost per step over many hours (renewal-reward). With zero overheads and p = 0 it equals
    Eq 2; with p > 0 a revoked hour yields on average half an hour of steps, so likely-revoked
    markets are penalised by ``1 / (1 − p/2)`` even without overheads.

    Parameters
    ----------
    p_revocation : float or ndarray
        P(revoked within the hour), in [0, 1].
    mean_price_usd_per_hour : float or ndarray
        P̄ over the last hour, USD per instance-hour.
    seconds_per_step : float or ndarray
        T, seconds per training step.
    restart_s, checkpoint_s, lost_s, hour_s : float
        See :func:`expected_useful_seconds` (seconds).

    Returns
    -------
    float or ndarray
        Expected USD per useful step.

    Notes
    -----
    Source: an opt-in refinement beyond the paper ([I]; docs/design/provisioner.md); the paper's Eq 2 stays the
    default objective.
    """
    useful = np.asarray(
        expected_useful_seconds(p_revocation, restart_s=restart_s, checkpoint_s=checkpoint_s, lost_s=lost_s, hour_s=hour_s)
    )
    hour_cost = np.asarray(expected_hour_cost_usd(p_revocation, mean_price_usd_per_hour))
    return _out(hour_cost * np.asarray(seconds_per_step, dtype=float) / useful)


@runtime_checkable
class StepCostObjective(Protocol):
    """What the provisioner minimises per candidate: USD per step from (p, P̄, T). Vectorised."""

    name: str

    def __call__(
        self, p_revocation: np.ndarray, mean_price_usd_per_hour: np.ndarray, seconds_per_step: np.ndarray
    ) -> np.ndarray:
        """Expected USD per step, same (broadcast) shape as the inputs.

        Parameters
        ----------
        p_revocation : ndarray
            One-hour revocation probability, in [0, 1].
        mean_price_usd_per_hour : ndarray
            P̄, USD per instance-hour.
        seconds_per_step : ndarray
            T, seconds per step.

        Returns
        -------
        ndarray
            USD per step.
        """
        ...


@dataclass(frozen=True, slots=True)
class PaperStepCost:
    """The paper's objective, Eq 2 (the default). Source: SpotTune Eq 2."""

    name: str = "eq2"

    def __call__(self, p_revocation, mean_price_usd_per_hour, seconds_per_step):  # noqa: D102
        return np.asarray(step_cost_usd(p_revocation, mean_price_usd_per_hour, seconds_per_step))


@dataclass(frozen=True, slots=True, kw_only=True)
class UsefulStepCost:
    """Opt-in objective: expected USD per useful step (:func:`useful_step_cost_usd`).

    Parameters
    ----------
    restart_s : float
        Boot plus checkpoint-restore seconds at the start of every segment.
    checkpoint_s : float
        Seconds to write a checkpoint (at the hourly hop and at the revocation notice).
    lost_s : float
        Expected training seconds lost per revocation (work after the last completed checkpoint).
    """

    restart_s: float = 0.0
    checkpoint_s: float = 0.0
    lost_s: float = 0.0
    name: str = "useful-step"

    def __post_init__(self) -> None:
        _check_overheads(self.restart_s, self.checkpoint_s, self.lost_s, HOUR_S)

    def __call__(self, p_revocation, mean_price_usd_per_hour, seconds_per_step):  # noqa: D102
        return np.asarray(useful_step_cost_usd(
            p_revocation, mean_price_usd_per_hour, seconds_per_step,
            restart_s=self.restart_s, checkpoint_s=self.checkpoint_s, lost_s=self.lost_s,
        ))
