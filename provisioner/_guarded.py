"""The refund-aware provisioner that leaves spot-restart's choice only for a margin (decision R12).

Spot-restart's choice at a launch (the cheapest market now, max price = the on-demand price) is always a
candidate. :class:`GuardedProvisioner` prices it with the same objective as every other (market, max price)
candidate of :class:`~provisioner.RefundProvisioner` (expected USD, plus the value of time, per useful step over
the decision horizon), and takes another candidate only when that candidate's step cost is below
``(1 − margin)`` times the restart candidate's::

    leave  ⇔  min over candidates c of C(c)  <  (1 − m) · C(restart)

Both sides are priced with the provisioner's *honest* estimates, which err against a bet the provisioner has not
measured (design R12):

* **speed of an unmeasured type**: the burden of proof is on leaving. On an instance type no trial has run on yet,
  a candidate that leaves the restart choice gets no speed-up from cores (the performance matrix's units: vCPUs, or GPUs
  for a GPU trainable) above the reference count c_ref
  (``reference_cores``): the matrix's prediction times ``(cores / c_ref)^β`` for ``cores > c_ref`` (β the pooled
  matrix's fitted exponent, 1 for the per-trial ``κ / cores`` rule); the restart candidate gets no slow-down from
  fewer cores (the same factor for ``cores < c_ref``). A larger type is thus chosen for its price (or refund), never
  for a guessed speed; once a trial has run on a type, the measurement (pooled across trials) replaces the guess;
* **revocation probability**: the objective prices ``p' = (1 − w) · p + w · p₀`` (:func:`provisioner.shrink_p`,
  ``p_shrink`` w, p₀ the round's mean at the same rung), the optimizer's-curse correction of decision R5: the
  argmin picks the candidates whose p is most over-estimated, and a refund bet lives on a high p;
* **robust p** (``robust_p``, off by default): the chosen candidate must also beat ``(1 − m)`` times the restart
  candidate with the predictor's own p (w = 0) and with the pool's rate at its rung (w = 1), not only with the
  shrunk p' between them. p's error is not known per market; the two ends bound where a calibrated but noisy p
  and the base rate put it, so a move is taken only when its gain survives both (a worst case over the set,
  rather than one point of it);
* **a probe trial** (``probes``, decision R13): the honest speed rule never finds out whether a larger type is worth its
  price, since no trial is ever sent there to be measured. A trial that keeps the restart choice is sent instead to an
  unmeasured type when that type's candidate, priced at the matrix's own (optimistic) speed, beats ``(1 − m)`` times
  the restart candidate; at most ``probes`` such segments are in flight at once, one per type, each on the trial whose
  bet is cheapest in expected USD. The segment trains the trial as any other does; when it ends, the type is measured
  (pooled across trials) for every later launch. The bet of one trial is bounded; the correlated bet of all trials on
  a guessed speed is what the honest rule forbids;
* **the margin** m covers what the two corrections leave (the estimates' remaining error and the correlated bet of
  trials that decide together). It is chosen on tuning starts (``benchmarks/bench_provisioning.py --tuning``).

With ``margin = 1`` nothing but a launch that spot-restart cannot make (no market at the on-demand price) leaves the
restart choice: the chooser is spot-restart. The hourly hop is the caller's (the composition turns it off: every
launch pays the boot and a restore, docs/design/decisions.md R12).
"""

from __future__ import annotations

import math

import numpy as np

from provisioner._cost import HOUR_S, expected_hour_cost_usd
from provisioner._pooled_speed import DEFAULT_SIGMAS, PooledSpeedMatrix
from provisioner._refund_provisioner import RefundProvisioner
from provisioner.errors import ProvisionerConfigError

#: [I] The reference core count of the honest speed rule: a workload declares its speed on a 2-vCPU instance.
REFERENCE_CORES = 2.0
#: The margin m, chosen on the tuning starts of both shipped traces (decision R12; ``bench_provisioning.py --tuning``).
DEFAULT_GUARD_MARGIN = 0.1
#: The shrinkage w of p towards the round's mean at the same rung, chosen with :data:`DEFAULT_GUARD_MARGIN` (R12).
DEFAULT_GUARD_P_SHRINK = 0.75


class GuardedProvisioner(RefundProvisioner):
    """:class:`~provisioner.RefundProvisioner` that keeps spot-restart's choice unless another beats it by a margin.

    Parameters
    ----------
    *args, **kwargs
        As :class:`~provisioner.RefundProvisioner`; ``p_shrink`` (the revocation probability's shrinkage) defaults to
        :data:`DEFAULT_GUARD_P_SHRINK` (0.75) here.
    margin : float in [0, 1], default :data:`DEFAULT_GUARD_MARGIN` (0.1)
        m: another candidate is taken only when its step cost (USD per useful step) is below ``(1 − m)`` times the
        restart candidate's (module docstring; decision R12).
    honest_speed : bool, default True
        Price an instance type no trial has measured at the seconds per step of the reference core count (no
        speed-up from extra cores until measured); False: the matrix's own prediction.
    reference_cores : float, default :data:`REFERENCE_CORES` (2)
        c_ref of the honest speed rule, in the performance matrix's units (vCPUs; GPUs for a matrix built with
        ``units="gpus"``, where the reference is 1).
    robust_p : bool, default False
        Leave the restart choice only when the chosen candidate beats ``(1 − m)`` times the restart candidate's step
        cost at each of p' (``p_shrink`` w), the predictor's p (w = 0) and the pool's rate (w = 1) (module
        docstring; decision R12).
    probes : int >= 0, default 0
        Probe segments in flight at most (module docstring; decision R13): a trial that keeps the restart choice is
        sent to an unmeasured instance type when its candidate there, at the matrix's own speed, beats ``(1 − m)``
        times the restart candidate; one probe per type, until a segment on that type is recorded (or the probe's
        horizon plus an hour has passed without one). 0: no probes. Needs ``honest_speed``.

    Attributes
    ----------
    decisions : dict of str -> int
        Choices made: ``"restart"`` (the restart candidate kept), ``"left"`` (another candidate won by the margin) and,
        with ``probes``, ``"probe"`` (a trial sent to an unmeasured type; counted in ``"restart"`` too).

    Raises
    ------
    ProvisionerConfigError
        ``margin`` outside [0, 1], ``reference_cores`` not > 0, ``probes`` not an int >= 0, or as :class:`~provisioner.RefundProvisioner`.

    Notes
    -----
    Ranking: the guard's key first (for a trial that keeps the restart choice, its market ranks first with the
    on-demand max price), then :class:`~provisioner.RefundProvisioner`'s keys. The restart candidate is the
    launchable market (on-demand price >= its current price) with the lowest current price, then the lowest P̄,
    then the first in the pool's order, as :class:`~provisioner.CheapestMarketChooser` ranks them.
    """

    policy = "spottune-guarded"
    order = ("restart_guard", "step_cost_usd", "expected_usd", "max_price_usd_per_hour")

    def __init__(self, *args, margin: float = DEFAULT_GUARD_MARGIN, honest_speed: bool = True,
                 reference_cores: float = REFERENCE_CORES, robust_p: bool = False, probes: int = 0, probe_z: float = 1.0, **kwargs):
        if isinstance(margin, bool) or not (isinstance(margin, (int, float)) and 0.0 <= margin <= 1.0):
            raise ProvisionerConfigError(f"margin is {margin!r}, but must be a fraction in [0, 1]")
        if isinstance(probes, bool) or not isinstance(probes, (int, np.integer)) or probes < 0:
            raise ProvisionerConfigError(f"probes is {probes!r}, but must be an int >= 0 (probe segments in flight)")
        if not (isinstance(reference_cores, (int, float)) and math.isfinite(reference_cores) and reference_cores > 0):
            raise ProvisionerConfigError(f"reference_cores is {reference_cores!r}, but must be > 0 (the matrix's units)")
        super().__init__(*args, **kwargs)
        self.margin = float(margin)
        self.honest_speed = bool(honest_speed)
        self.reference_cores = float(reference_cores)
        self.robust_p = bool(robust_p)
        self.probes = int(probes)
        self.probe_z = float(probe_z)
        #: instance type -> the time (seconds since the epoch) after which its probe counts as lost
        self._probing: dict[str, float] = {}
        # the performance matrix's own units (vCPUs, or GPUs for a GPU trainable), per market
        self._cores = np.asarray(self.performance.cores, dtype=float)[self._type_col]
        self._measured_types: set[str] = set()
        self.decisions = {"restart": 0, "left": 0}
        if self.robust_p:
            self.decisions["kept_by_robust_p"] = 0
        if self.probes:
            self.decisions["probe"] = 0

    def record_segment(self, trial_id, instance_type: str, seconds: float, steps: int) -> float:
        """As :meth:`provisioner.BaseChooser.record_segment`; also marks ``instance_type`` as measured (seconds of
        training, whole steps; returns the new seconds per step)."""
        out = super().record_segment(trial_id, instance_type, seconds, steps)
        if steps > 0 and seconds > 0:
            self._measured_types.add(instance_type)
            self._probing.pop(instance_type, None)
        return out

    def honest_seconds_per_step(self, T: np.ndarray, *, leaving: bool = True) -> np.ndarray:
        """T (seconds per step, shape (k, n) over the markets) as the guard prices it on the types no trial has
        measured: no faster than at the reference core count for a candidate that leaves the restart choice
        (``leaving``), no slower than it for the restart candidate (module docstring).

        Parameters
        ----------
        T : ndarray of shape (k, n)
            The performance matrix's seconds per step per (trial, market).
        leaving : bool, default True
            True: ``T · (cores / c_ref)^β`` on the unmeasured types above c_ref; False: the same on the unmeasured
            types below c_ref (which makes them as fast as the reference).

        Returns
        -------
        ndarray of shape (k, n)
            Seconds per step; ``T`` on the measured types and with ``honest_speed`` off.
        """
        if not self.honest_speed:
            return T
        beta = self.performance.pooled_fit()[1] if isinstance(self.performance, PooledSpeedMatrix) else 1.0
        unmeasured = np.array([m.instance_type not in self._measured_types for m in self.markets])
        side = self._cores > self.reference_cores if leaving else self._cores < self.reference_cores
        factor = np.where(unmeasured & side, (self._cores / self.reference_cores) ** max(beta, 0.0), 1.0)
        return T * factor[None, :]

    def _ladder_p(self, now_s, ok, b, predictor=None):
        key = (now_s, id(predictor), ok.tobytes(), b.tobytes())  # the restart pricing asks the same questions again
        cached = getattr(self, "_p_cache", None)
        if cached is not None and cached[0] == key:
            return cached[1].copy()
        p = super()._ladder_p(now_s, ok, b, predictor)
        self._p_cache = (key, p)
        return p.copy()

    def restart_market(self, current: np.ndarray, mean: np.ndarray, ok_on_demand: np.ndarray) -> int | None:
        """Index of spot-restart's market: the launchable one at its on-demand price with the lowest current price
        (USD/hour), then P̄, then the pool's order; None when no market can launch at its on-demand price."""
        idx = np.flatnonzero(ok_on_demand)
        if idx.size == 0:
            return None
        order = np.lexsort((self._rank[idx], mean[idx], current[idx]))
        return int(idx[order[0]])

    def _evaluate(self, now_s, current, mean, available, T, plan):
        T_restart = self.honest_seconds_per_step(T, leaving=False)
        if T_restart is not T:  # the restart candidate priced at its optimistic speed (module docstring)
            super()._evaluate(now_s, current, mean, available, T_restart, plan)
            r_cost, r_usd, r_steps = self._last_round[:3]
        b, launchable, p, cost_c, hour_cost, extra = super()._evaluate(
            now_s, current, mean, available, self.honest_seconds_per_step(T), plan)
        cost, usd, steps, b_all, p_all, ok, p_obj = self._last_round
        if T_restart is not T:
            cost, usd, steps = r_cost, r_usd, r_steps
        k, n = cost_c.shape
        guard = np.zeros((k, n))
        j = self.restart_market(current, np.where(np.isnan(mean), current, mean), ok[:, -1])
        if j is None:  # spot-restart could not launch: the refund objective's choice as it stands
            self.decisions["left"] += k
            extra["restart_guard"] = guard
            return b, launchable, p, cost_c, hour_cost, extra
        c_r = cost[:, j, -1]  # (k,): the restart candidate's step cost per trial
        best = np.min(np.where(launchable, cost_c, np.inf), axis=1)
        leave = ~np.isfinite(c_r) | (best < (1.0 - self.margin) * c_r)
        if self.robust_p and (leave & np.isfinite(c_r)).any():
            survive = self._robust_leave(now_s, current, mean, available, T, T_restart, plan, launchable, cost_c,
                                         b, b_all, j)
            kept = leave & np.isfinite(c_r) & ~survive
            self.decisions["kept_by_robust_p"] += int(kept.sum())
            leave &= ~kept
            self._last_round = (cost, usd, steps, b_all, p_all, ok, p_obj)  # this round's, as priced (w)
        stay = np.flatnonzero(~leave)
        self.decisions["left"] += int(leave.sum())
        self.decisions["restart"] += int(stay.size)
        if stay.size:
            b, launchable, p, cost_c, hour_cost = (a.copy() for a in (b, launchable, p, cost_c, hour_cost))
            extra = {key: (v.copy() if isinstance(v, np.ndarray) and v.shape == (k, n) else v)
                     for key, v in extra.items()}
            b[stay, j], p[stay, j], launchable[stay, j] = b_all[j, -1], p_all[j, -1], True
            cost_c[stay, j] = c_r[stay]
            hour_cost[stay, j] = expected_hour_cost_usd(np.array([p_all[j, -1]]), np.array([mean[j]]))[0]
            extra["expected_usd"][stay, j] = usd[stay, j, -1]
            extra["expected_useful_steps"][stay, j] = steps[stay, j, -1]
            extra["max_price"][stay, j] = b_all[j, -1]
            if "p_objective" in extra:
                extra["p_objective"][stay, j] = p_obj[j, -1]
            guard[stay] = 1.0
            guard[stay, j] = 0.0
            if self.probes and self.honest_speed:
                self._probe(now_s, current, mean, available, T, plan, stay, c_r,
                            (b, launchable, p, cost_c, hour_cost, extra, guard))
        extra["restart_guard"] = guard
        return b, launchable, p, cost_c, hour_cost, extra

    def _probe(self, now_s, current, mean, available, T, plan, stay, c_r, out) -> None:
        """Send some of the trials that keep the restart choice (``stay``) to unmeasured types (``probes``): edits the
        round's arrays ``out`` = (b, launchable, p, cost_c, hour_cost, extra, guard) in place, row by row."""
        self._probing = {u: until for u, until in self._probing.items() if until > now_s}
        free = self.probes - len(self._probing)
        types = np.array([m.instance_type for m in self.markets])
        open_ = np.array([t not in self._measured_types and t not in self._probing for t in types])
        if free <= 0 or not open_.any():
            return
        sigma = getattr(self.performance, "sigmas", DEFAULT_SIGMAS)["sigma_type"]
        T_up = T * np.where(open_, math.exp(-self.probe_z * sigma), 1.0)[None, :]  # the upper bound of the type's speed
        b_o, ok_o, p_o, cost_o, hour_o, extra_o = RefundProvisioner._evaluate(self, now_s, current, mean, available,
                                                                              T_up, plan)
        b, launchable, p, cost_c, hour_cost, extra, guard = out
        bet = ok_o[stay] & open_[None, :] & (cost_o[stay] < (1.0 - self.margin) * c_r[stay, None])
        usd = extra_o["expected_usd"][stay]
        while free > 0 and bet.any():
            a, j = np.unravel_index(np.argmin(np.where(bet, usd, np.inf)), bet.shape)
            i = stay[a]
            for arr, new in ((b, b_o), (launchable, ok_o), (p, p_o), (cost_c, cost_o), (hour_cost, hour_o)):
                arr[i] = new[i]
            for key, v in extra_o.items():
                if key in extra and isinstance(v, np.ndarray) and v.shape == cost_o.shape:
                    extra[key][i] = v[i]
            guard[i] = 1.0
            guard[i, j] = 0.0
            self._probing[str(types[j])] = now_s + float(extra_o["horizon_s"][i, j]) + HOUR_S
            bet[a] = False
            bet[:, types == types[j]] = False
            free -= 1
            self.decisions["probe"] += 1

    def _robust_leave(self, now_s, current, mean, available, T, T_restart, plan, launchable, cost_c, b, b_all,
                      j) -> np.ndarray:
        """(k,) bool: each trial's best candidate (by ``cost_c``, at its max price ``b``) beats ``(1 − m)`` times the
        restart candidate (market ``j`` at the on-demand rung) at p_shrink 0 and 1 too (``robust_p``)."""
        k = cost_c.shape[0]
        filled = np.where(launchable, cost_c, np.inf)
        jc = np.argmin(filled, axis=1)  # (k,) each trial's best market
        rung = np.array([int(np.argmin(np.abs(b_all[jc[i]] - b[i, jc[i]]))) for i in range(k)])
        out = np.isfinite(filled[np.arange(k), jc])
        old = self.p_shrink
        try:
            for w in (0.0, 1.0):
                self.p_shrink = w
                RefundProvisioner._evaluate(self, now_s, current, mean, available, self.honest_seconds_per_step(T),
                                            plan)
                c_leave = self._last_round[0]
                if T_restart is not T:
                    RefundProvisioner._evaluate(self, now_s, current, mean, available, T_restart, plan)
                c_restart = self._last_round[0][:, j, -1]
                out &= c_leave[np.arange(k), jc, rung] < (1.0 - self.margin) * c_restart
        finally:
            self.p_shrink = old
        return out

    def _order_keys(self, *, step_cost, seconds_per_step, current, mean, **extra):
        return [extra["restart_guard"], step_cost, extra["expected_usd"], extra["max_price"]]
