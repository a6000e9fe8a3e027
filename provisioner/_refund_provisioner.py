"""SpotTune's provisioner with the refund-aware objective: it chooses the market *and* the max price.

Source: decisions R1-R2 (docs/design/provisioner.md). Per trial and per round, every (market, max price) pair of
the ladder (:data:`~provisioner.DELTA_LADDER_USD_PER_HOUR` above the current price, plus the market's
on-demand price) is priced by :func:`~provisioner.refund_step_cost_usd` over the trial's decision
horizon; each market keeps its best rung, then markets are ranked. p comes from **one** vectorised
predictor call per round (every available market × every rung; p does not depend on the trial).
"""

from __future__ import annotations

import numpy as np

from spotmarket.prices import PriceHistory
from revpred.protocol import RevocationPredictor

from provisioner._base import BaseChooser
from provisioner._catalog import InstanceCatalog
from provisioner._exclusions import MarketExclusions
from provisioner._cost import HOUR_S, expected_hour_cost_usd
from provisioner._curse import LaunchLedger, check_correction, shrink_p
from provisioner._performance import PerformanceMatrix
from provisioner._pool import Pool
from provisioner._refund import (
    RefundStepCost,
    decision_horizon_s,
    expected_paid_usd,
    expected_segment_s,
    expected_useful_steps,
    ladder_max_prices,
)
from provisioner.errors import ProvisionerConfigError, ProvisionerError

#: [I] p is capped below 1 in the objective: under a constant hazard p = 1 means "revoked at launch"
#: (no step, no cost), whereas a predictor's p = 1 means "revoked at some time within the hour".
P_CAP = 0.999


class RefundProvisioner(BaseChooser):
    """Lowest expected USD per useful step over the decision horizon, over markets × max-price ladder.

    Parameters
    ----------
    history : PriceHistory
        Spot price history, USD per instance-hour.
    catalog : InstanceCatalog
        vCPUs (for T's prior) and on-demand prices (the ladder's top rung).
    predictor : RevocationPredictor
        One-hour revocation probability per (market, time, max price); one call per round.
    pool : Pool
    rng : numpy.random.Generator
        Kept for the chooser contract; the ladder draws nothing.
    objective : RefundStepCost, optional
        Overheads (boot, checkpoint per type, notice), the ladder and the value of time
        (``time_value_usd_per_hour`` v and ``job_time_value_usd_per_hour`` V: the objective becomes
        (USD + (v + V / n) · wall-clock hours) per useful step, n the trials still heading to the trial's next stop);
        default ``RefundStepCost()`` (no overheads, dollars only).
    performance : PerformanceMatrix, optional
        T (seconds per step); default from the catalog's vCPUs.
    mean_window_s : float
        Window of P̄, seconds (3600).
    p_shrink : float in [0, 1], default 0
        Optimizer's-curse correction (:mod:`provisioner._curse`): the objective prices
        ``p' = (1 − p_shrink) · p + p_shrink · p₀`` instead of the predictor's p (0 = off).
    p_prior : float in [0, 1] or RevocationPredictor, optional
        p₀: a fixed base rate; a second predictor asked the same (market, max price) questions in one
        more call per round (e.g. the market's empirical rate, ``revpred.EmpiricalRate``); None (default)
        = per max-price rung, the mean p of the round's launchable markets at that rung.
    max_trials_per_candidate : int, optional
        Diversification cap: at most this many trials on one (market, max-price rung) among the choices
        of the last ``cap_window_s`` seconds; a trial whose best candidate is full takes its next best
        (if every candidate is full, the cap is waived for that trial). None (default) = no cap.
    cap_window_s : float, default 600
        Seconds a choice counts towards the cap (0 = the same decision time only).
    p_cap : float in (0, 1), default :data:`P_CAP` (0.999)
        Selection-aware ceiling: the objective prices ``min(p', p_cap)``. The predictor is calibrated
        over all its queries, but the argmin picks the candidates whose p is most over-estimated, and on
        the chosen candidates the top bin (p ≈ 0.98) was revoked only 55 % of the time
        (docs/design/evaluation.md, "Optimizer's curse"); a ceiling is the monotone recalibration of that bin.
    exclusions : MarketExclusions, optional
        Where capacity refusals go (:meth:`~provisioner.BaseChooser.exclude`); None: not remembered.

    Notes
    -----
    Ranking: objective (USD per useful step, plus the value of time per useful step when set), then expected USD, then the lower max price, then the
    market order. Within a market the rung is chosen by the same keys. A market whose useful steps are
    0 has an objective of +inf. Unknown ``steps_left`` gives H = 3600 s; an unknown ``resume_step``
    counts a restore (conservative).

    Raises
    ------
    ProvisionerConfigError
        Without a predictor, or with an objective that is not a :class:`RefundStepCost`.
    """

    policy = "spottune"
    order = ("step_cost_usd", "expected_usd", "max_price_usd_per_hour")
    plans_horizon = True

    def __init__(self, history: PriceHistory, catalog: InstanceCatalog, predictor: RevocationPredictor, pool: Pool,
                 rng: np.random.Generator, *, objective: RefundStepCost | None = None,
                 performance: PerformanceMatrix | None = None, mean_window_s: float = HOUR_S,
                 p_shrink: float = 0.0, p_prior: float | RevocationPredictor | None = None,
                 max_trials_per_candidate: int | None = None, cap_window_s: float = 600.0,
                 p_cap: float = P_CAP, exclusions: MarketExclusions | None = None):
        check_correction(p_shrink, p_prior, max_trials_per_candidate, cap_window_s, p_cap)
        if predictor is None:
            raise ProvisionerConfigError("RefundProvisioner needs a revocation predictor (e.g. ConstantRevocation(0.0))")
        objective = objective if objective is not None else RefundStepCost()
        if not isinstance(objective, RefundStepCost):
            raise ProvisionerConfigError(f"objective is {type(objective).__name__}, but must be a RefundStepCost")
        super().__init__(history, catalog, pool, rng, predictor=predictor, performance=performance,
                         objective=objective, mean_window_s=mean_window_s, exclusions=exclusions)
        self._od = np.array([catalog.on_demand_usd_per_hour(m.instance_type, m.region) for m in self.markets])
        self._ckpt = np.array([objective.checkpoint_seconds(m.instance_type) for m in self.markets])
        #: number of predictor calls made (one per round, two with a prior predictor; tests read it)
        self.predictor_calls = 0
        self.p_shrink = float(p_shrink)
        self.p_cap = float(p_cap)
        self.p_prior = p_prior if p_prior is None or hasattr(p_prior, "predict_proba") else float(p_prior)
        #: the diversification cap's record of recent choices (None without a cap)
        self.ledger = None if max_trials_per_candidate is None else LaunchLedger(max_trials_per_candidate, cap_window_s)

    def _ladder_p(self, now_s: float, ok: np.ndarray, b: np.ndarray, predictor: RevocationPredictor | None = None
                  ) -> np.ndarray:
        """p of every launchable (market, rung), shape (n, L), from one call of ``predictor`` (default: ours)."""
        predictor = self.predictor if predictor is None else predictor
        p = np.full(b.shape, np.nan)
        rows, cols = np.nonzero(ok)
        if rows.size == 0:
            return p
        self.predictor_calls += 1
        out = np.asarray(predictor.predict_proba([self.markets[j] for j in rows.tolist()], now_s,
                                                 b[rows, cols]), dtype=float)
        if out.shape != (rows.size,) or not np.all((out >= 0.0) & (out <= 1.0)):
            raise ProvisionerError(f"predictor {type(predictor).__name__} returned shape {out.shape}, but must "
                                   f"return shape ({rows.size},) with values in [0, 1]")
        p[rows, cols] = out
        return p

    def _evaluate(self, now_s, current, mean, available, T, plan):
        obj: RefundStepCost = self.objective
        k, n = T.shape
        b_all = ladder_max_prices(current, self._od, obj.deltas_usd_per_hour)  # (n, L)
        with np.errstate(invalid="ignore"):
            ok = available[:, None] & (b_all >= current[:, None])
        p_all = self._ladder_p(now_s, ok, b_all)
        prior = self.p_prior
        if self.p_shrink and prior is not None and not isinstance(prior, float):
            prior = self._ladder_p(now_s, ok, b_all, prior)  # the prior predictor's p of the same candidates
        p_used = shrink_p(p_all, ok, self.p_shrink, prior)  # the predictor's p when p_shrink = 0
        p_obj = np.minimum(np.where(ok, p_used, 0.0), self.p_cap)
        steps_left, resume, heading = plan
        restore = np.where(resume[:, None] == 0, 0.0, self._ckpt[None, :])  # (k, n); NaN (unknown) restores
        left = np.where(np.isnan(steps_left), np.inf, steps_left)[:, None]
        H = np.asarray(decision_horizon_s(left, T, boot_s=obj.boot_s, restore_s=restore,
                                          checkpoint_s=self._ckpt[None, :]), dtype=float)  # (k, n)
        mean0 = np.where(available, mean, 0.0)
        shape = obj.hazard_shape
        usd = np.asarray(expected_paid_usd(p_obj[None], mean0[None, :, None], H[:, :, None], shape))  # (k, n, L)
        steps = np.asarray(expected_useful_steps(
            p_obj[None], T[:, :, None], H[:, :, None], boot_s=obj.boot_s, restore_s=restore[:, :, None],
            checkpoint_s=self._ckpt[None, :, None], notice_s=obj.notice_s, hazard_shape=shape))
        priced = usd  # USD, plus the value of the trial's wall-clock when one is set (R7, R11)
        if obj.time_value_usd_per_hour or obj.job_time_value_usd_per_hour:
            v = np.asarray(obj.trial_time_value(heading), dtype=float).reshape(k, 1, 1)  # USD per trial-hour
            priced = usd + v * np.asarray(expected_segment_s(p_obj[None], H[:, :, None], obj.notice_s, shape)) / HOUR_S
        with np.errstate(divide="ignore", invalid="ignore"):
            cost = np.where(steps > 0, priced / np.where(steps > 0, steps, 1.0), np.inf)
        bad = ~np.broadcast_to(ok[None], cost.shape)
        #: every (trial, market, rung) of the last round, for a subclass that prices one rung of its own
        #: (:class:`provisioner.GuardedProvisioner`): objective, USD, useful steps, max prices, p, launchable, p priced
        self._last_round = (cost, usd, steps, b_all, p_all, ok, p_obj)
        capped = None
        if self.ledger is not None:
            bad, capped = self._cap(now_s, bad, cost, usd, b_all)
        big = np.inf
        keys = (np.where(bad, big, np.broadcast_to(b_all[None], cost.shape)), np.where(bad, big, usd),
                np.where(bad, big, cost), bad)
        rung = np.lexsort(keys, axis=-1)[..., :1]  # (k, n, 1): best rung per (trial, market)

        def pick(a: np.ndarray) -> np.ndarray:
            return np.take_along_axis(np.broadcast_to(a, cost.shape), rung, axis=-1)[..., 0]

        b, p = pick(b_all[None]), pick(np.where(ok, p_all, np.nan)[None])
        launchable = ~pick(bad)
        cost_c, usd_c, steps_c = pick(cost), pick(usd), pick(steps)
        hour_cost = np.where(launchable, expected_hour_cost_usd(np.where(launchable, p, 0.0), mean0[None, :]), np.nan)
        cost_c = np.where(launchable, cost_c, np.nan)
        extra = {"expected_usd": usd_c, "max_price": b, "expected_useful_steps": steps_c, "horizon_s": H}
        if self.p_shrink or self.p_cap < P_CAP:
            extra["p_objective"] = pick(np.minimum(p_used, self.p_cap)[None])
        if capped is not None:
            extra["capped"] = capped
        return b, launchable, p, cost_c, hour_cost, extra

    def _cap(self, now_s: float, bad: np.ndarray, cost: np.ndarray, usd: np.ndarray,
             b_all: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The diversification cap: trials in order, each takes its best (market, rung) that is not full.

        Returns ``bad`` with the full candidates of each trial added, shape (k, n, L), and the (k, n)
        mask of markets that could launch but whose every rung was full. Each trial's choice is recorded
        in :attr:`ledger` (the same candidate :meth:`choose_many` ranks first: same keys, same order).
        """
        k, n, L = cost.shape
        counts = self.ledger.counts(now_s, (n, L))
        out = bad.copy()
        capped = np.zeros((k, n), dtype=bool)
        rank = np.broadcast_to(self._rank[:, None], (n, L)).ravel()
        for i in range(k):
            closed = bad[i] | (counts >= self.ledger.cap)
            if closed.all():  # every candidate is full: the cap is waived for this trial
                closed = bad[i]
            best = int(np.lexsort((rank, np.where(closed, np.inf, b_all).ravel(),
                                   np.where(closed, np.inf, usd[i]).ravel(),
                                   np.where(closed, np.inf, cost[i]).ravel(), closed.ravel()))[0])
            if closed.flat[best]:
                continue  # nothing launchable for this trial: choose_many says so
            j, r = divmod(best, L)
            counts[j, r] += 1
            self.ledger.add(now_s, j, r)
            capped[i] = ~bad[i].all(axis=-1) & closed.all(axis=-1)
            out[i] = closed
        return out, capped

    def _order_keys(self, *, step_cost, seconds_per_step, current, mean, **extra):
        return [step_cost, extra["expected_usd"], extra["max_price"]]
