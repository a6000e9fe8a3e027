"""The refund-aware objective: expected USD per *useful* step over the decision horizon.

Source: decision R1 (docs/design/provisioner.md), replacing Eq 2's assumptions by the billing rule of the market replay
(``spotmarket.Billing``, decision M3): a run the provider ends in its first 3600 s is free, a run the user ends (our
hourly hop, θ pause or finish) pays every second. So only a revocation that comes *before our own end* is free, and a
revoked segment still yields the steps saved at its notice.

The model, for one (trial, market, max price b) candidate launched now:

* **Horizon** ``H = min(3600 s, boot + restore + steps_left · T + checkpoint)``: the trial's next
  planned stop (its θ pause or its finish) or the hourly hop, whichever comes first
  (:func:`decision_horizon_s`).
* **Revocation time** τ (the notice), fitted to the predictor's one-hour probability p: a Weibull
  hazard of shape k (``hazard_shape``), ``P(τ ≤ t) = 1 − (1 − p)^((t/3600)^k)``, so
  ``q(H) = 1 − (1 − p)^((H/3600)^k)`` (:func:`revocation_within`). k = 1 is a constant hazard (the
  default); k < 1 puts the revocations of the hour early, as the legacy trace does (docs/design/provisioner.md).
* **Paid USD** ``E[USD] = (1 − q(H)) · P̄ · H / 3600``: revoked before H, the run is free; otherwise we
  end it ourselves at H and pay the whole run at the mean price P̄ (:func:`expected_paid_usd`).
* **Useful steps**, whole steps only (the step in progress at our end or at a notice is lost):
  ``E[steps] = (1 − q(H)) · floor((H − boot − restore − checkpoint) / T) + s · E[floor((τ − boot −
  restore) / T); τ < H]`` with ``s = 1`` if a checkpoint fits in the notice window (the notice-time
  checkpoint saves the work done), else 0 (the segment's work is lost) (:func:`expected_useful_steps`).
* **Objective** ``E[USD] / E[steps]``, USD per useful step (+inf when no step is expected)
  (:func:`refund_step_cost_usd`).
* **Value of time** (opt-in; docs/design/decisions.md, R7): with a value of time ``v`` USD per trial-hour the objective is
  ``(E[USD] + v · E[W] / 3600) / E[steps]``, where ``W = min(τ + notice, H)`` is the wall-clock the segment
  occupies the trial (boot, restore, lost steps and the notice included) (:func:`expected_segment_s`).
  ``v = 0`` (default) is the objective above, bit for bit.

Approximations, documented in ``docs/design/provisioner.md``: the provider's termination follows the notice by
the notice lead (120 s), so a notice in the last 120 s of the first hour is in fact paid; it is counted
as free here. The hazard's shape is one number for every market and max price.

All functions are vectorised (NumPy broadcasting) and return a float for scalar input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from provisioner._cost import HOUR_S, _check_p, _out
from provisioner.errors import ProvisionerConfigError
from spotmarket import NOTICE_LEAD_S

#: The max-price ladder: ``b = current price + δ`` for each δ, USD per instance-hour (plus ``b`` = the
#: market's on-demand price, see :func:`ladder_max_prices`). The refund-aware objective chooses among
#: these, and a calibrated revocation predictor is trained on exactly these queries (decision P1).
DELTA_LADDER_USD_PER_HOUR: tuple[float, ...] = (0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3)

#: Seconds from the revocation notice to the termination (EC2's two-minute notice, decision M1): the market
#: rules' own constant, :data:`spotmarket.NOTICE_LEAD_S`.
NOTICE_S = NOTICE_LEAD_S


def ladder_max_prices(current_usd_per_hour: ArrayLike, on_demand_usd_per_hour: ArrayLike,
                      deltas_usd_per_hour: tuple[float, ...] = DELTA_LADDER_USD_PER_HOUR) -> np.ndarray:
    """The max prices of the ladder for each market: ``current + δ`` for each δ, then on-demand.

    Parameters
    ----------
    current_usd_per_hour : array of shape (n,)
        Spot price in force now, USD per instance-hour (NaN where unknown).
    on_demand_usd_per_hour : array of shape (n,)
        On-demand price of each market's instance type, USD per instance-hour.
    deltas_usd_per_hour : tuple of float
        δ values, USD per instance-hour (default :data:`DELTA_LADDER_USD_PER_HOUR`).

    Returns
    -------
    ndarray of shape (n, len(deltas) + 1)
        Max prices b, USD per instance-hour; the last column is the on-demand price (which may be below
        the current price: such a rung cannot launch).

    Examples
    --------
    >>> ladder_max_prices([0.03], [0.175])[0, [0, 2, -1]].round(4).tolist()
    [0.0301, 0.031, 0.175]
    """
    cur = np.asarray(current_usd_per_hour, dtype=float)
    od = np.asarray(on_demand_usd_per_hour, dtype=float)
    return np.concatenate([cur[:, None] + np.asarray(deltas_usd_per_hour, dtype=float)[None, :], od[:, None]], axis=1)


#: Accepted Weibull shapes of the revocation time (``hazard_shape``): wide around the fitted 0.59, and narrow enough
#: that the incomplete-gamma form of :func:`_survival_integral` stays finite.
HAZARD_SHAPE_RANGE = (0.05, 20.0)
#: Up to this many steps in the horizon the Weibull sum of revoked steps is summed exactly; above, its midpoint integral.
_EXACT_STEPS = 256


def _check_shape(k: float) -> None:
    lo, hi = HAZARD_SHAPE_RANGE
    if isinstance(k, bool) or not (isinstance(k, (int, float)) and lo <= k <= hi):
        raise ProvisionerConfigError(f"hazard_shape is {k!r}, but must be a Weibull shape in [{lo}, {hi}]")


def _cum_hazard(p: np.ndarray) -> np.ndarray:
    """The hour's cumulative hazard ``−ln(1 − p)`` (inf at p = 1)."""
    with np.errstate(divide="ignore"):
        return -np.log1p(-p)


def revocation_within(p_revocation: ArrayLike, horizon_s: ArrayLike, hazard_shape: float = 1.0) -> np.ndarray | float:
    """q(H): P(revoked within ``horizon_s``) from the one-hour p under a Weibull hazard of shape k.

    ``q(H) = 1 − (1 − p)^((H / 3600)^k)``; k = 1 is a constant hazard.

    Parameters
    ----------
    p_revocation : float or ndarray
        P(revoked within 3600 s), in [0, 1].
    horizon_s : float or ndarray
        Horizon H, seconds (>= 0).
    hazard_shape : float, default 1
        k in :data:`HAZARD_SHAPE_RANGE`; k < 1 front-loads the hour's revocations (a decreasing hazard).

    Raises
    ------
    ProvisionerConfigError
        On a p outside [0, 1] or a shape outside :data:`HAZARD_SHAPE_RANGE`.

    Returns
    -------
    float or ndarray
        q(H) in [0, 1] (broadcast shape).

    Examples
    --------
    >>> round(revocation_within(0.75, 1800.0), 6)   # half an hour of a 75 % hour: 1 - 0.25 ** 0.5
    0.5
    """
    p = np.asarray(p_revocation, dtype=float)
    _check_p(p)
    _check_shape(hazard_shape)
    h = np.asarray(horizon_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):  # H = 0: q = 0, also at p = 1
        return _out(np.where(h == 0, 0.0, -np.expm1((h / HOUR_S) ** hazard_shape * np.log1p(-p))))


def decision_horizon_s(steps_left: ArrayLike, seconds_per_step: ArrayLike, *, boot_s: float = 0.0,
                       restore_s: ArrayLike = 0.0, checkpoint_s: ArrayLike = 0.0) -> np.ndarray | float:
    """H = min(3600, boot + restore + steps_left · T + checkpoint), seconds.

    The run's length up to the trial's next planned stop (θ pause or finish, which ends with a
    checkpoint), capped at the hourly hop.

    Parameters
    ----------
    steps_left : float or ndarray
        Steps until the trial's next planned stop (> 0); ``inf`` for "unknown" (H = 3600).
    seconds_per_step : float or ndarray
        T, seconds per step.
    boot_s, restore_s, checkpoint_s : float or ndarray
        Seconds of boot, of the checkpoint restore (0 for a fresh trial) and of the final checkpoint.

    Returns
    -------
    float or ndarray of the broadcast shape
        H, seconds, at most 3600.
    """
    h = boot_s + np.asarray(restore_s, dtype=float) + np.asarray(steps_left, dtype=float) * np.asarray(
        seconds_per_step, dtype=float) + np.asarray(checkpoint_s, dtype=float)
    return _out(np.minimum(HOUR_S, h))


def expected_paid_usd(p_revocation: ArrayLike, mean_price_usd_per_hour: ArrayLike,
                      horizon_s: ArrayLike, hazard_shape: float = 1.0) -> np.ndarray | float:
    """Expected USD paid for a run until the horizon: ``(1 − q(H)) · P̄ · H / 3600``.

    A provider revocation before H (≤ 3600 s) is refunded; otherwise we end the run ourselves at H
    (hop, θ pause or finish) and pay every second at the market price, taken as P̄.

    Parameters
    ----------
    p_revocation : float or ndarray
        One-hour revocation probability at the chosen max price, in [0, 1].
    mean_price_usd_per_hour : float or ndarray
        P̄, the time-weighted mean spot price over the last hour, USD per instance-hour.
    horizon_s : float or ndarray
        H, seconds, in [0, 3600].
    hazard_shape : float, default 1
        k of :func:`revocation_within`.

    Returns
    -------
    float or ndarray of the broadcast shape
        Expected USD for one instance.

    Examples
    --------
    >>> round(expected_paid_usd(0.5, 0.10, 3600.0), 6), round(expected_paid_usd(0.5, 0.10, 1800.0), 6)
    (0.05, 0.035355)
    """
    h = np.asarray(horizon_s, dtype=float)
    q = np.asarray(revocation_within(p_revocation, h, hazard_shape))
    return _out((1.0 - q) * np.asarray(mean_price_usd_per_hour, dtype=float) * h / HOUR_S)


def _survival_integral(cum1: np.ndarray, x0: np.ndarray, x1: np.ndarray, k: float) -> np.ndarray:
    """``∫_{x0}^{x1} S(x) dx``, ``S(x) = exp(−cum1 · (x / 3600)^k)``, seconds (0 where x1 <= x0 or cum1 = inf).

    With ``u = cum1 (x/3600)^k``: ``3600 Γ(1/k) [P(1/k, u1) − P(1/k, u0)] / (k cum1^(1/k))`` (P the regularised
    lower incomplete gamma); ``x1 − x0`` where cum1 = 0.
    """
    from scipy import special  # lazy, as in spotmarket: keeps `import provisioner` light

    x0 = np.maximum(x0, 0.0)
    x1 = np.maximum(x1, x0)
    a = 1.0 / k
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        u0, u1 = cum1 * (x0 / HOUR_S) ** k, cum1 * (x1 / HOUR_S) ** k
        val = HOUR_S * special.gamma(a) * (special.gammainc(a, u1) - special.gammainc(a, u0)) / (k * cum1 ** a)
    return np.where(cum1 == 0, x1 - x0, np.where(np.isfinite(cum1) & (cum1 > 0), val, 0.0))


def _revoked_steps_weibull(cum1: np.ndarray, a: np.ndarray, t: np.ndarray, h: np.ndarray, k: float) -> np.ndarray:
    """``Σ_{j=1}^{K} [S(a + jT) − S(H)]``, ``K = floor((H − a) / T)``, for the Weibull survival of
    :func:`_survival_integral`: summed exactly where K <= ``_EXACT_STEPS``, else as the midpoint integral
    ``∫_{a+T/2}^{a+(K+1/2)T} S(x) dx / T`` (S is convex for k <= 1, so that overstates the sum; by under 0.1 % of
    the kept steps just above 256 steps an hour, tested). 0 where K < 1 or cum1 is 0 or inf."""
    cum1, a, t, h = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (cum1, a, t, h)))
    K = np.floor(np.maximum(h - a, 0.0) / t + 1e-9)
    j = np.arange(1, _EXACT_STEPS + 1, dtype=float)
    with np.errstate(invalid="ignore", over="ignore"):
        s_h = np.exp(-cum1 * (h / HOUR_S) ** k)
        x = a[..., None] + j * t[..., None]
        exact = np.sum(np.where(j <= K[..., None], np.exp(-cum1[..., None] * (x / HOUR_S) ** k), 0.0), axis=-1)
        small = K <= _EXACT_STEPS
        mid = _survival_integral(cum1, a + t / 2, a + (K + 0.5) * t, k) / t
        val = np.where(small, exact, mid) - K * s_h
    return np.where((K >= 1) & (cum1 > 0) & np.isfinite(cum1), np.maximum(val, 0.0), 0.0)


def _revoked_steps(lam: np.ndarray, a: np.ndarray, t: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``E[floor((τ − a) / T); τ < H] = Σ_{k=1}^{K} [S(a + kT) − S(H)]``, ``K = floor((H − a) / T)``, S(x) = e^{−λx}.

    The geometric sum in closed form; 0 where K < 1, λ = 0 or λ = inf.
    """
    K = np.floor(np.maximum(h - a, 0.0) / t + 1e-9)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        x = lam * t
        ratio = np.where(x > 0, np.expm1(-x * K) / np.where(x > 0, np.expm1(-x), 1.0), K)  # Σ_{k=0}^{K-1} e^{-kx}
        val = np.exp(-lam * (a + t)) * ratio - K * np.exp(-lam * h)
    return np.where((K >= 1) & (lam > 0) & np.isfinite(lam), np.maximum(val, 0.0), 0.0)


def expected_useful_steps(p_revocation: ArrayLike, seconds_per_step: ArrayLike, horizon_s: ArrayLike, *,
                          boot_s: float = 0.0, restore_s: ArrayLike = 0.0, checkpoint_s: ArrayLike = 0.0,
                          notice_s: float = NOTICE_S, hazard_shape: float = 1.0) -> np.ndarray | float:
    """Expected whole steps kept (saved in a checkpoint) from a run launched now, over the horizon H.

    The step in progress at our own end or at a notice is lost. Not revoked before H (probability
    1 − q(H)): ``floor((H − boot − restore − checkpoint) / T)`` steps (exactly ``steps_left`` when H is
    the planned stop). Revoked at the notice τ < H: the notice-time checkpoint saves
    ``floor((τ − boot − restore) / T)`` steps if a checkpoint fits in the notice window
    (``checkpoint_s ≤ notice_s``), else the segment is lost. τ follows the constant hazard
    ``λ = −ln(1 − p) / 3600`` per second, S(t) = e^{−λt}, so the revoked part is
    ``Σ_{k=1}^{K} [S(boot + restore + kT) − S(H)]`` with ``K = floor((H − boot − restore) / T)``. With a
    ``hazard_shape`` k ≠ 1, S is the Weibull survival of :func:`revocation_within` (the sum exact up to 256
    steps, else its midpoint integral).

    Parameters
    ----------
    p_revocation : float or ndarray
        One-hour revocation probability, in [0, 1].
    seconds_per_step : float or ndarray
        T, seconds per step (> 0).
    horizon_s : float or ndarray
        H, seconds.
    boot_s : float
        Launch-to-training latency, seconds.
    restore_s, checkpoint_s : float or ndarray
        Seconds to read / write the checkpoint (restore 0 for a fresh trial).
    notice_s : float
        Seconds from the notice to the termination (120).
    hazard_shape : float, default 1
        k of :func:`revocation_within`.

    Returns
    -------
    float or ndarray
        Expected useful steps.

    Raises
    ------
    ProvisionerConfigError
        On a p outside [0, 1] or a ``hazard_shape`` outside :data:`HAZARD_SHAPE_RANGE`.
    """
    p = np.asarray(p_revocation, dtype=float)
    _check_p(p)
    h = np.asarray(horizon_s, dtype=float)
    t = np.asarray(seconds_per_step, dtype=float)
    restore = np.asarray(restore_s, dtype=float)
    ckpt = np.asarray(checkpoint_s, dtype=float)
    cum1 = _cum_hazard(p)
    survive = 1.0 - np.asarray(revocation_within(p, h, hazard_shape))
    kept = survive * np.floor(np.maximum(h - boot_s - restore - ckpt, 0.0) / t + 1e-9)
    if hazard_shape == 1.0:
        part = _revoked_steps(cum1 / HOUR_S, boot_s + restore, t, h)
    else:
        part = _revoked_steps_weibull(cum1, boot_s + restore, t, h, hazard_shape)
    revoked = np.where(ckpt <= notice_s, part, 0.0)
    return _out(kept + revoked)


def expected_segment_s(p_revocation: ArrayLike, horizon_s: ArrayLike, notice_s: float = NOTICE_S,
                       hazard_shape: float = 1.0) -> np.ndarray | float:
    """E[W]: expected wall-clock seconds a run launched now occupies its trial, ``W = min(τ + notice, H)``.

    The run ends at our own stop H, or at the termination that follows a revocation notice τ by
    ``notice_s``, whichever comes first; boot, restore, the checkpoint and the lost step are inside it.
    Under the constant hazard ``λ = −ln(1 − p) / 3600`` per second:
    ``E[W] = min(n, H) + (1 − e^{−λ · max(H − n, 0)}) / λ`` (``= H`` when p = 0), n = ``notice_s``; with a
    ``hazard_shape`` k ≠ 1, ``min(n, H) + ∫_0^{max(H − n, 0)} S(x) dx`` for the Weibull S of :func:`revocation_within`.

    Parameters
    ----------
    p_revocation : float or ndarray
        One-hour revocation probability, in [0, 1].
    horizon_s : float or ndarray
        H, seconds (>= 0).
    notice_s : float
        Seconds from the notice to the termination (120).
    hazard_shape : float, default 1
        k of :func:`revocation_within`.

    Returns
    -------
    float or ndarray
        E[W], seconds, in [min(n, H), H].

    Raises
    ------
    ProvisionerConfigError
        On a p outside [0, 1] or a ``hazard_shape`` outside :data:`HAZARD_SHAPE_RANGE`.

    Examples
    --------
    >>> expected_segment_s(0.0, 3600.0), round(expected_segment_s(0.75, 3720.0, 120.0), 3)  # 120 + 3600 · 0.75 / ln 4
    (3600.0, 2067.638)
    """
    p = np.asarray(p_revocation, dtype=float)
    _check_p(p)
    h = np.asarray(horizon_s, dtype=float)
    _check_shape(hazard_shape)
    rest = np.maximum(h - notice_s, 0.0)
    cum1 = _cum_hazard(p)
    if hazard_shape != 1.0:
        mean_rest = _survival_integral(cum1, np.zeros_like(rest), rest, hazard_shape)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = cum1 / HOUR_S
            mean_rest = np.where(lam > 0, -np.expm1(-lam * rest) / np.where(lam > 0, lam, 1.0), rest)
    return _out(np.minimum(notice_s, h) + mean_rest)


def refund_step_cost_usd(p_revocation: ArrayLike, mean_price_usd_per_hour: ArrayLike, seconds_per_step: ArrayLike,
                         horizon_s: ArrayLike, *, boot_s: float = 0.0, restore_s: ArrayLike = 0.0,
                         checkpoint_s: ArrayLike = 0.0, notice_s: float = NOTICE_S,
                         time_value_usd_per_hour: float = 0.0, hazard_shape: float = 1.0) -> np.ndarray | float:
    """Expected USD per useful step over the horizon: ``(E[USD] + v · E[W] / 3600) / E[steps]`` (+inf if no step is expected).

    See :func:`expected_paid_usd`, :func:`expected_useful_steps` and :func:`expected_segment_s` (same
    parameters, same units; ``hazard_shape`` is k of :func:`revocation_within`); ``v`` = ``time_value_usd_per_hour``,
    the value of an hour of the trial's wall-clock, USD per trial-hour (0: dollars only, ``E[USD] / E[steps]``;
    docs/design/decisions.md, R7). With p = 0, H = 3600 s, v = 0 and no overheads it equals Eq 2, ``P̄ · T / 3600``.

    Parameters
    ----------
    p_revocation : float or ndarray
        One-hour revocation probability at the max price, in [0, 1].
    mean_price_usd_per_hour : float or ndarray
        P̄, mean spot price over the last hour, USD per instance-hour.
    seconds_per_step : float or ndarray
        T, seconds per step on the instance type.
    horizon_s : float or ndarray
        H, seconds, in [0, 3600] (:func:`decision_horizon_s`).
    boot_s : float, default 0
        Launch-to-training latency, seconds.
    restore_s, checkpoint_s : float or ndarray, default 0
        Seconds to restore the trial's checkpoint (0 for a fresh trial) and to write one.
    notice_s : float, default 120
        Seconds from the revocation notice to the termination.
    time_value_usd_per_hour : float, default 0
        v, USD per trial-hour of wall-clock (decision R7).
    hazard_shape : float, default 1
        Weibull shape k of the revocation time within the hour (decision R10).

    Returns
    -------
    float or ndarray of the broadcast shape
        USD per useful step; ``inf`` where no step is expected.

    Raises
    ------
    ProvisionerConfigError
        On a p outside [0, 1] or a ``hazard_shape`` outside :data:`HAZARD_SHAPE_RANGE`.

    Examples
    --------
    >>> f"{refund_step_cost_usd(0.0, 0.036, 2.0, 3600.0):.6g}"   # Eq 2: 0.036 * 2 / 3600
    '2e-05'
    >>> f"{refund_step_cost_usd(0.0, 0.036, 2.0, 3600.0, time_value_usd_per_hour=0.036):.6g}"  # twice: time = price
    '4e-05'
    """
    k = hazard_shape
    usd = np.asarray(expected_paid_usd(p_revocation, mean_price_usd_per_hour, horizon_s, k))
    if time_value_usd_per_hour:
        usd = usd + time_value_usd_per_hour * np.asarray(expected_segment_s(p_revocation, horizon_s, notice_s, k)) / HOUR_S
    steps = np.asarray(expected_useful_steps(p_revocation, seconds_per_step, horizon_s, boot_s=boot_s, restore_s=restore_s,
                                             checkpoint_s=checkpoint_s, notice_s=notice_s, hazard_shape=k))
    with np.errstate(divide="ignore", invalid="ignore"):
        return _out(np.where(steps > 0, usd / np.where(steps > 0, steps, 1.0), np.inf))


@dataclass(frozen=True, slots=True, kw_only=True)
class RefundStepCost:
    """The refund-aware objective's overheads: what a segment costs besides its training steps.

    Parameters
    ----------
    boot_s : float
        Launch-to-training latency (spot request fulfilment, boot, container start), seconds.
    checkpoint_s : float or mapping instance type -> float
        Seconds to write one checkpoint on an instance type; reading it back (restore) takes the same
        (decision R3: restore uses the checkpoint bandwidth). A float applies to every type.
    notice_s : float
        Seconds from the revocation notice to the termination (120).
    deltas_usd_per_hour : tuple of float
        The max-price ladder's δ (default :data:`DELTA_LADDER_USD_PER_HOUR`).
    time_value_usd_per_hour : float, default 0
        Value of time v, USD per trial-hour of wall-clock: the objective adds ``v · E[W] / 3600`` to the
        expected USD of a segment (:func:`refund_step_cost_usd`), so a faster market wins when the refund
        saving per step is smaller than the time it costs. 0 = dollars only (docs/design/decisions.md, R7).
    job_time_value_usd_per_hour : float, default 0
        Value of time V, USD per hour of the *job's* wall-clock (design R11). The job moves on (past a barrier, or
        to its end) when the last of the trials heading there arrives, so a trial that shares its next stop with
        n − 1 others still on their way is charged V / n per trial-hour, on top of ``time_value_usd_per_hour``
        (:meth:`trial_time_value`): the 3 trials left after the θ barrier get V / 3 each, the last straggler
        before it V, and each of 16 fresh trials V / 16.
    hazard_shape : float, default 1
        Weibull shape k of the revocation time within the hour (:func:`revocation_within`), in
        :data:`HAZARD_SHAPE_RANGE`; 1 = a constant hazard.

    Raises
    ------
    ProvisionerConfigError
        On a negative or non-finite time or value of time, or an empty / non-positive ladder.
    """

    boot_s: float = 0.0
    checkpoint_s: float | Mapping[str, float] = 0.0
    notice_s: float = NOTICE_S
    deltas_usd_per_hour: tuple[float, ...] = DELTA_LADDER_USD_PER_HOUR
    time_value_usd_per_hour: float = 0.0
    job_time_value_usd_per_hour: float = 0.0
    hazard_shape: float = 1.0
    name: str = field(default="refund")

    def __post_init__(self) -> None:
        values = self.checkpoint_s.values() if isinstance(self.checkpoint_s, Mapping) else [self.checkpoint_s]
        for label, v in [("boot_s", self.boot_s), ("notice_s", self.notice_s),
                         *[("checkpoint_s", c) for c in values]]:
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ProvisionerConfigError(f"{label} is {v!r}, but must be a finite number of seconds >= 0")
        for label, v, per in [("time_value_usd_per_hour", self.time_value_usd_per_hour, "trial"),
                              ("job_time_value_usd_per_hour", self.job_time_value_usd_per_hour, "job")]:
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ProvisionerConfigError(f"{label} is {v!r}, but must be a finite number of USD per {per}-hour >= 0")
        _check_shape(self.hazard_shape)
        d = tuple(self.deltas_usd_per_hour)
        if not d or not all(math.isfinite(x) and x > 0 for x in d):
            raise ProvisionerConfigError(f"deltas_usd_per_hour is {d!r}, but must be positive USD/hour values")

    def trial_time_value(self, heading: ArrayLike = 1.0) -> np.ndarray | float:
        """Value of time of a trial, USD per trial-hour: ``v + V / n``.

        Parameters
        ----------
        heading : float or array
            n, the trials (this one included) still on their way to this trial's next stop (a barrier or the
            end); NaN (unknown) counts as 1, so an unknown trial is charged the whole of V.

        Returns
        -------
        float or ndarray (shape of ``heading``)
            USD per trial-hour.

        Raises
        ------
        ProvisionerConfigError
            On an n below 1.

        Examples
        --------
        >>> f"{RefundStepCost(time_value_usd_per_hour=0.01, job_time_value_usd_per_hour=0.3).trial_time_value(3):.6g}"
        '0.11'
        """
        n = np.asarray(heading, dtype=float)
        n = np.where(np.isnan(n), 1.0, n)
        if np.any(n < 1):
            raise ProvisionerConfigError(f"heading is {np.asarray(heading).tolist()!r}, but must count at least the "
                                         "trial itself (>= 1)")
        return _out(self.time_value_usd_per_hour + self.job_time_value_usd_per_hour / n)

    def checkpoint_seconds(self, instance_type: str) -> float:
        """Seconds to write (or read) one checkpoint on ``instance_type``.

        Parameters
        ----------
        instance_type : str

        Returns
        -------
        float
            Seconds.

        Raises
        ------
        ProvisionerConfigError
            If a mapping lacks the type.
        """
        if not isinstance(self.checkpoint_s, Mapping):
            return float(self.checkpoint_s)
        try:
            return float(self.checkpoint_s[instance_type])
        except KeyError:
            raise ProvisionerConfigError(f"checkpoint_s has no entry for instance type {instance_type}") from None
