"""The market-chooser contract and the candidate evaluation every chooser shares.

A chooser is pure computation: no I/O, no clock (time comes in as ``now_s``), no global
RNG (randomness comes from the injected ``numpy.random.Generator``). One provisioning round for k trials
over n markets is vectorised: prices once per market, one ``(k, n)`` draw of max prices, **one**
predictor call for all launchable (trial, market) pairs, one objective evaluation, one lexsort.

Subclasses differ only in the ranking: :meth:`BaseChooser._order_keys` returns the sort keys, primary
first; the market's position in the sorted pool (zone, type, product) always breaks remaining ties.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from spotmarket.prices import PriceHistory, to_timestamp
from revpred.protocol import OnlineRevocationPredictor, RevocationPredictor, SignalledRevocationPredictor

from provisioner._catalog import InstanceCatalog
from provisioner._choice import Candidate, Choice, Explanation, SkippedMarket
from provisioner._exclusions import MarketExclusions
from provisioner._cost import HOUR_S, PaperStepCost, StepCostObjective, expected_hour_cost_usd
from provisioner._max_price import MaxPriceRule, MaxPriceSource
from provisioner._performance import PerformanceMatrix
from provisioner._pool import Pool
from provisioner.errors import NoMarketAvailable, ProvisionerConfigError, ProvisionerError


@runtime_checkable
class MarketChooser(Protocol):
    """Chooses the market (and max price) each trial runs on next.

    Called by the orchestrator at every launch, relaunch after a revocation, and hourly hop; it
    reports every finished segment back through :meth:`record_segment`. A chooser that also prices the
    trial's plan is a :class:`HorizonChooser`; one that learns from the run is a :class:`LearningChooser`.
    """

    def choose(self, trial_id: Hashable, now_s: float) -> Choice:
        """The market for one trial at ``now_s`` (seconds since the epoch, UTC).

        Parameters
        ----------
        trial_id : hashable
            The trial's id (a row of the performance matrix).
        now_s : float
            Decision time, seconds since the epoch (UTC).

        Returns
        -------
        Choice
            The market, its max price (USD/hour) and the explanation of the ranking.
        """
        ...

    def choose_many(self, trial_ids: Sequence[Hashable], now_s: float) -> list[Choice]:
        """Choices for several trials at one time, in the order of ``trial_ids``.

        Parameters
        ----------
        trial_ids : sequence of hashable
        now_s : float
            Decision time, seconds since the epoch (UTC).

        Returns
        -------
        list of Choice
            One per trial id, in order.
        """
        ...

    def record_segment(self, trial_id: Hashable, instance_type: str, seconds: float, steps: int) -> float:
        """Fold a measured segment (training seconds, steps) into T; returns the new seconds per step.

        Parameters
        ----------
        trial_id : hashable
        instance_type : str
            The type the segment ran on, e.g. ``"r4.large"``.
        seconds : float
            Training seconds of the segment (no boot, restore or checkpoint).
        steps : int
            Steps trained in the segment.

        Returns
        -------
        float
            The trial's new seconds per step on ``instance_type``.
        """
        ...


@runtime_checkable
class HorizonChooser(Protocol):
    """A :class:`MarketChooser` whose choice may use the trial's plan (:class:`~provisioner.RefundProvisioner`).

    When :attr:`plans_horizon` is True the orchestrator passes ``steps_left`` (steps until the trial's next
    planned stop), ``resume_step`` (0 = fresh start) and ``heading`` (trials, this one included, still on
    their way to that stop) to :meth:`choose`; otherwise it calls ``choose(trial_id, now_s)``.
    """

    #: Whether :meth:`choose` uses the plan's keyword arguments.
    plans_horizon: bool

    def choose(self, trial_id: Hashable, now_s: float, *, steps_left: float | None = None,
               resume_step: int | None = None, heading: int | None = None) -> Choice:
        """The market for one trial at ``now_s`` (seconds since the epoch, UTC), given its plan.

        Parameters
        ----------
        trial_id : hashable
        now_s : float
            Decision time, seconds since the epoch (UTC).
        steps_left : float, optional
            Steps until the trial's next planned stop (hop, barrier or finish).
        resume_step : int, optional
            The step the trial resumes from (0 = fresh start, no restore).
        heading : int, optional
            Trials still on their way to the same stop, this one included.

        Returns
        -------
        Choice
        """
        ...


@runtime_checkable
class LearningChooser(Protocol):
    """A :class:`MarketChooser` that learns from what happens during the run; the orchestrator hands it the
    model events its driver delivers (``spottune.orchestrator.CapacityRefused``, ``InstanceEnded``,
    ``MarketSignal``) and asks it which markets are excluded when a launch is refused.
    """

    def exclude(self, market: Hashable, now_s: float, reason: str) -> None:
        """The cloud refused a launch in ``market`` for capacity at ``now_s``: leave it out for a while.

        Parameters
        ----------
        market : hashable
            The refused market (a :class:`spotmarket.prices.Market`).
        now_s : float
            Time of the refusal, seconds since the epoch (UTC).
        reason : str
            The cloud's refusal, e.g. ``"InsufficientInstanceCapacity: ..."``.
        """
        ...

    def excluded(self, now_s: float) -> Mapping[Hashable, str]:
        """Markets left out at ``now_s`` -> why (empty without exclusions).

        Parameters
        ----------
        now_s : float
            Seconds since the epoch (UTC).

        Returns
        -------
        mapping of market -> str
        """
        ...

    @property
    def observes_instances(self) -> bool:
        """Whether :meth:`observe` teaches a model anything (an online revocation predictor)."""
        ...

    def observe(self, market: Hashable, launch_s: float, end_s: float, interrupted: bool) -> None:
        """One instance run that ended (seconds since the epoch); ``interrupted``: by the provider for capacity.

        Parameters
        ----------
        market : hashable
        launch_s, end_s : float
            Launch and end of the run, seconds since the epoch (UTC).
        interrupted : bool
            Whether the provider ended it for capacity.
        """
        ...

    def signal(self, market: Hashable, time_s: float, kind: str, value: float) -> None:
        """One capacity signal of the cloud about ``market``.

        Parameters
        ----------
        market : hashable
        time_s : float
            When the signal came, seconds since the epoch (UTC).
        kind : str
            ``"placement_score"`` (a Spot placement score) or ``"rebalance"`` (a rebalance recommendation).
        value : float
            The score, 1..10, or 1.0 for a rebalance recommendation.
        """
        ...


class BaseChooser(abc.ABC):
    """Shared evaluation of the candidates; subclasses define the ranking.

    Parameters
    ----------
    history : PriceHistory
        Spot price history (step function per market), USD per instance-hour.
    catalog : InstanceCatalog
        Hardware facts and on-demand prices.
    pool : Pool
        Allowed markets.
    rng : numpy.random.Generator
        Seeded generator for the max-price draws (owned by the caller).
    predictor : RevocationPredictor, optional
        Gives p for Eq 1; without it p, Eq 1 and the step cost are reported as None.
    performance : PerformanceMatrix, optional
        T; default ``PerformanceMatrix.from_catalog(catalog, pool types)`` (κ = 1 s·core/step, α = 0.5).
    objective : StepCostObjective, optional
        USD per step from (p, P̄, T); default :class:`PaperStepCost` (Eq 2).
    max_price_rule : MaxPriceSource, optional
        Default :class:`MaxPriceRule` (D1: current + U[0.00001, 0.2] USD/hour).
    mean_window_s : float
        Window of P̄, seconds before the decision time (3600: "the last hour", the paper's Eq 1).
    exclusions : MarketExclusions, optional
        Where capacity refusals go (:meth:`exclude`); an excluded market is skipped like one without a known
        price until its exclusion ends. None: refusals are not remembered (the chooser asks the market again).

    Raises
    ------
    ProvisionerConfigError
        If the predictor has no ``predict_proba``, ``mean_window_s`` is negative, or the pool is invalid
        for the history and catalog (see :meth:`Pool.resolve`).
    UnknownInstanceType
        If a pool type is not in the catalog.
    NoMarketAvailable
        If no market passes the pool's filters.
    """

    #: Chooser name written into every explanation.
    policy: str = "base"

    def __init__(
        self,
        history: PriceHistory,
        catalog: InstanceCatalog,
        pool: Pool,
        rng: np.random.Generator,
        *,
        predictor: RevocationPredictor | None = None,
        performance: PerformanceMatrix | None = None,
        objective: StepCostObjective | None = None,
        max_price_rule: MaxPriceSource | None = None,
        mean_window_s: float = HOUR_S,
        exclusions: MarketExclusions | None = None,
    ):
        if not isinstance(rng, np.random.Generator):
            raise ProvisionerConfigError(
                f"rng is {type(rng).__name__}, but must be a seeded numpy.random.Generator (no global RNG)"
            )
        if predictor is not None and not callable(getattr(predictor, "predict_proba", None)):
            raise ProvisionerConfigError(f"predictor {type(predictor).__name__} has no predict_proba")
        if not (math.isfinite(mean_window_s) and mean_window_s >= 0):
            raise ProvisionerConfigError(f"mean_window_s is {mean_window_s}, but must be >= 0 seconds")
        self.history = history
        self.catalog = catalog
        self.pool = pool
        self.rng = rng
        self.predictor = predictor
        self.objective = objective if objective is not None else PaperStepCost()
        self.max_price_rule = max_price_rule if max_price_rule is not None else MaxPriceRule()
        self.mean_window_s = float(mean_window_s)
        self.exclusions = exclusions
        self.markets = self._resolve_markets()
        self._series = [history[m] for m in self.markets]
        self.instance_types = sorted({m.instance_type for m in self.markets})
        self.performance = (
            performance if performance is not None else PerformanceMatrix.from_catalog(catalog, self.instance_types)
        )
        # column of T for each market (UnknownInstanceType if a given matrix lacks a pool type)
        self._type_col = np.array([self.performance.column(m.instance_type) for m in self.markets])
        self._on_demand = (
            np.array([catalog.on_demand_usd_per_hour(m.instance_type, m.region) for m in self.markets])
            if self.max_price_rule.needs_on_demand else None
        )
        self._rank = np.arange(len(self.markets))
        self._starts = np.array([s.start_s for s in self._series])
        self._ends = np.array([s.end_s for s in self._series])
        # per market: record times (s), prices (USD/h), integral of the price up to each record (USD*s/h)
        self._arrays = [
            (s.times_s, s.prices, np.concatenate([[0.0], np.cumsum(s.prices[:-1] * np.diff(s.times_s))]))
            for s in self._series
        ]
        self._state_cache: tuple[float, tuple] | None = None

    def _resolve_markets(self):
        return self.pool.resolve(self.history, self.catalog)

    # -- the ranking ----------------------------------------------------------------------------------
    #: Names of the sort keys, primary first (documented in the explanation).
    order: tuple[str, ...] = ()

    @abc.abstractmethod
    def _order_keys(self, *, step_cost: np.ndarray | None, seconds_per_step: np.ndarray,
                    current: np.ndarray, mean: np.ndarray, **extra: np.ndarray) -> list[np.ndarray]:
        """Sort keys of shape (k, n), primary first; the market order is appended by the caller.

        ``extra`` holds the chooser's own per-candidate arrays (e.g. ``max_price`` and ``expected_usd``
        of :class:`~provisioner.RefundProvisioner`)."""

    #: :class:`provisioner.MarketExclusions` that capacity refusals go to (:meth:`exclude`); an excluded market
    #: is skipped like one without a known price until the exclusion ends. None: none are kept.
    exclusions: "MarketExclusions | None" = None

    #: Whether :meth:`choose` / :meth:`choose_many` use the trial's plan (``steps_left``,
    #: ``resume_step``); the orchestrator passes it only to choosers that set this.
    plans_horizon: bool = False

    # -- the contract ---------------------------------------------------------------------------------
    def choose(self, trial_id: Hashable, now_s: float, *, steps_left: float | None = None,
               resume_step: int | None = None, heading: int | None = None) -> Choice:
        """The market for one trial at ``now_s``; same as ``choose_many([trial_id], now_s)[0]``.

        Parameters
        ----------
        trial_id : hashable
            Trial h (str or int, for JSON event logs).
        now_s : float
            Decision time, seconds since the Unix epoch (UTC).
        steps_left : float, optional
            Steps until the trial's next planned stop (θ pause or finish); None = unknown. Only
            choosers with :attr:`plans_horizon` use it.
        resume_step : int, optional
            Step the trial resumes from (0 = a fresh start, no restore); None = unknown.
        heading : int, optional
            Trials (this one included) still on their way to the trial's next stop, >= 1; None = unknown, which
            charges the trial the whole of the job's value of time, as if it were the last straggler. Only
            choosers with :attr:`plans_horizon` use it (design R11).

        Returns
        -------
        Choice

        Raises
        ------
        NoMarketAvailable
            If no pool market has a known price at ``now_s`` or can be launched at its max price.
        """
        return self.choose_many([trial_id], now_s,
                                None if steps_left is None else [steps_left],
                                None if resume_step is None else [resume_step],
                                None if heading is None else [heading])[0]

    def record_segment(self, trial_id: Hashable, instance_type: str, seconds: float, steps: int) -> float:
        """Update T[h][i] from a finished segment (see :meth:`PerformanceMatrix.update`).

        Parameters
        ----------
        trial_id : hashable
        instance_type : str
        seconds : float
            Training seconds of the segment (without boot, restore or checkpoint time).
        steps : int
            Steps completed in it.

        Returns
        -------
        float
            New seconds per step.
        """
        return self.performance.update(trial_id, instance_type, seconds, steps)

    # -- what the run teaches (LearningChooser) --------------------------------------------------------
    def exclude(self, market: Hashable, now_s: float, reason: str) -> None:
        """A launch in ``market`` was refused for capacity at ``now_s`` (seconds): left out of the choice for
        :attr:`exclusions`' duration; nothing happens without :attr:`exclusions`.

        Parameters
        ----------
        market : hashable
        now_s : float
            Seconds since the epoch (UTC).
        reason : str
            The cloud's refusal, kept as the exclusion's reason.
        """
        if self.exclusions is not None:
            self.exclusions.exclude(market, now_s, reason)

    def excluded(self, now_s: float) -> Mapping[Hashable, str]:
        """Markets :attr:`exclusions` leaves out at ``now_s`` (seconds) -> why; empty without exclusions.

        Parameters
        ----------
        now_s : float
            Seconds since the epoch (UTC).

        Returns
        -------
        mapping of market -> str
        """
        return {} if self.exclusions is None else self.exclusions.active(now_s)

    @property
    def observes_instances(self) -> bool:
        """Whether the revocation predictor learns from ended instance runs (an
        :class:`revpred.protocol.OnlineRevocationPredictor`)."""
        return isinstance(self.predictor, OnlineRevocationPredictor)

    def observe(self, market: Hashable, launch_s: float, end_s: float, interrupted: bool) -> None:
        """Hand one ended instance run (launch and end in seconds since the epoch) to an online revocation
        predictor; nothing happens for another predictor.

        Parameters
        ----------
        market : hashable
        launch_s, end_s : float
            Seconds since the epoch (UTC).
        interrupted : bool
            Whether the provider ended the run for capacity.
        """
        if isinstance(self.predictor, OnlineRevocationPredictor):
            self.predictor.observe(market, launch_s, end_s, interrupted)

    def signal(self, market: Hashable, time_s: float, kind: str, value: float) -> None:
        """Hand one capacity signal of the cloud to a predictor that takes them
        (:class:`revpred.protocol.SignalledRevocationPredictor`); nothing happens for another predictor.

        Parameters
        ----------
        market : hashable
        time_s : float
            Seconds since the epoch (UTC).
        kind : str
            ``"placement_score"`` or ``"rebalance"``.
        value : float
            The score, 1..10, or 1.0 for a rebalance recommendation.
        """
        if isinstance(self.predictor, SignalledRevocationPredictor):
            self.predictor.signal(market, time_s, kind, value)

    def market_state(self, now_s: float) -> tuple[np.ndarray, np.ndarray, tuple[SkippedMarket, ...]]:
        """Current price and P̄ of every pool market at ``now_s``.

        P̄ is the time-weighted mean over ``[max(now − window, first record), now]`` (the step function
        integrated exactly, which equals the 1-minute-grid mean of the paper's Eq 1 up to sub-minute edges).
        Same semantics as :meth:`PriceSeries.price_at` and :meth:`PriceSeries.mean_price` (tested to
        agree), computed from per-market arrays prepared once, and cached for the last ``now_s`` so
        several trials deciding at one time share the work.

        Parameters
        ----------
        now_s : float
            Decision time, seconds since the epoch (UTC).

        Returns
        -------
        current : ndarray of shape (n,)
            Spot price at ``now_s``, USD/hour; NaN where unknown.
        mean : ndarray of shape (n,)
            P̄, USD/hour; NaN where unknown.
        skipped : tuple of SkippedMarket
            Markets without a known price at ``now_s`` (before their first record or after the end of
            the recorded history).
        """
        if self._state_cache is not None and self._state_cache[0] == now_s:
            return self._state_cache[1]
        n = len(self.markets)
        current = np.full(n, np.nan)
        mean = np.full(n, np.nan)
        ok = (self._starts <= now_s) & (now_s <= self._ends)
        skipped = []
        for j in range(n):
            if not ok[j]:
                s = self._series[j]
                skipped.append(SkippedMarket(
                    market=self.markets[j],
                    reason=f"price unknown at {to_timestamp(now_s)}: history covers "
                           f"{to_timestamp(s.start_s)} .. {to_timestamp(s.end_s)}",
                ))
                continue
            t, p, cum = self._arrays[j]
            i1 = int(np.searchsorted(t, now_s, side="right")) - 1
            current[j] = p[i1]
            a = max(now_s - self.mean_window_s, t[0])
            if now_s > a:
                i0 = int(np.searchsorted(t, a, side="right")) - 1
                area = (cum[i1] + p[i1] * (now_s - t[i1])) - (cum[i0] + p[i0] * (a - t[i0]))
                mean[j] = area / (now_s - a)
            else:
                mean[j] = p[i1]
        state = (current, mean, tuple(skipped))
        self._state_cache = (now_s, state)
        return state

    def _exclude(self, now_s: float, current: np.ndarray,
                 skipped: tuple[SkippedMarket, ...]) -> tuple[np.ndarray, tuple[SkippedMarket, ...]]:
        """``current`` with NaN for the markets :attr:`exclusions` leaves out at ``now_s``, and why."""
        out = self.exclusions.active(now_s)
        if not out:
            return current, skipped
        current = current.copy()
        extra = []
        for j, m in enumerate(self.markets):
            reason = out.get(m, out.get(str(m)))
            if reason is not None and not np.isnan(current[j]):
                current[j] = np.nan
                extra.append(SkippedMarket(market=m, reason=reason))
        return current, (*skipped, *extra)

    def _predict(self, launchable: np.ndarray, now_s: float, b: np.ndarray) -> np.ndarray:
        p = np.full(b.shape, np.nan)
        rows, cols = np.nonzero(launchable)
        if rows.size == 0:
            return p
        markets = [self.markets[j] for j in cols.tolist()]
        out = np.asarray(self.predictor.predict_proba(markets, now_s, b[rows, cols]), dtype=float)
        if out.shape != (rows.size,) or not np.all((out >= 0.0) & (out <= 1.0)):
            raise ProvisionerError(
                f"predictor {type(self.predictor).__name__} returned shape {out.shape} with values in "
                f"[{np.nanmin(out) if out.size else 'n/a'}, {np.nanmax(out) if out.size else 'n/a'}], "
                f"but must return shape ({rows.size},) in [0, 1]"
            )
        p[rows, cols] = out
        return p

    def _evaluate(self, now_s: float, current: np.ndarray, mean: np.ndarray, available: np.ndarray, T: np.ndarray,
                  plan: tuple[np.ndarray, np.ndarray]) -> tuple:
        """Max price, launchability, p, objective and Eq 1 of every (trial, market) candidate.

        Parameters
        ----------
        now_s : float
        current, mean : ndarray of shape (n,)
            Spot price now and P̄, USD/hour (NaN where unknown).
        available : ndarray of bool, shape (n,)
        T : ndarray of shape (k, n)
            Seconds per step.
        plan : (steps_left, resume_step, heading), ndarrays of shape (k,)
            NaN where unknown (unused here).

        Returns
        -------
        (b, launchable, p, cost, hour_cost, extra)
            Arrays of shape (k, n) (p, cost and hour_cost None without a predictor); ``extra`` a dict of
            further (k, n) arrays for :meth:`_order_keys` and the candidates.
        """
        k, n = T.shape
        b = np.asarray(self.max_price_rule.max_prices(self.rng, current, self._on_demand, k), dtype=float)
        with np.errstate(invalid="ignore"):
            launchable = available[None, :] & (b >= current[None, :])
        if self.predictor is None:
            return b, launchable, None, None, None, {}
        p = self._predict(launchable, now_s, b)
        p_safe = np.where(launchable, p, 0.0)
        mean_b = np.broadcast_to(np.where(available, mean, 0.0), (k, n))
        cost = np.where(launchable, self.objective(p_safe, mean_b, T), np.nan)
        hour_cost = np.where(launchable, expected_hour_cost_usd(p_safe, mean_b), np.nan)
        return b, launchable, p, cost, hour_cost, {}

    def choose_many(self, trial_ids: Sequence[Hashable], now_s: float,
                    steps_left: Sequence[float] | None = None,
                    resume_steps: Sequence[int] | None = None,
                    heading: Sequence[int] | None = None) -> list[Choice]:
        """Choices for several trials at one decision time: one vectorised round, one predictor call.

        Parameters
        ----------
        trial_ids : sequence of hashable, length k
        now_s : float
            Decision time, seconds since the Unix epoch (UTC).
        steps_left : sequence of float, length k, optional
            Steps until each trial's next planned stop (None: unknown); used by choosers with
            :attr:`plans_horizon`.
        resume_steps : sequence of int, length k, optional
            Step each trial resumes from (0 = fresh, no restore; None: unknown).
        heading : sequence of int, length k, optional
            Per trial, the trials (itself included) still on their way to its next stop (None: unknown).

        Returns
        -------
        list of Choice, length k, in the order of ``trial_ids``

        Raises
        ------
        NoMarketAvailable
            If no pool market has a known price at ``now_s``, or for some trial none can be launched
            (every max price below the current price).
        """
        trial_ids = list(trial_ids)
        now_s = float(now_s)
        if not trial_ids:
            return []
        if not math.isfinite(now_s):
            raise ProvisionerConfigError(f"now_s is {now_s}, but must be finite seconds since the epoch")
        k, n = len(trial_ids), len(self.markets)
        current, mean, skipped = self.market_state(now_s)
        if self.exclusions is not None:
            current, skipped = self._exclude(now_s, current, skipped)
        available = ~np.isnan(current)
        if not available.any():
            raise NoMarketAvailable(
                f"no market of the pool has a known price at {to_timestamp(now_s)}: "
                + "; ".join(f"{s.market}: {s.reason}" for s in skipped[:3])
            )
        T = self.performance.rows(trial_ids)[:, self._type_col]
        plan = _plan(k, steps_left, resume_steps, heading)
        b, launchable, p, cost, hour_cost, extra = self._evaluate(now_s, current, mean, available, T, plan)
        keys = self._order_keys(step_cost=cost, seconds_per_step=T,
                                current=np.broadcast_to(current, (k, n)), mean=np.broadcast_to(mean, (k, n)), **extra)
        # np.lexsort sorts by the last key first: market order last, then the chooser's keys from the
        # least significant to the primary one, then "launchable first" as the overriding key.
        rank_key = np.broadcast_to(self._rank, (k, n))
        stack = [rank_key, *[np.where(launchable, key, 0.0) for key in reversed(keys)], ~launchable]
        order = np.lexsort(stack, axis=-1)

        cur_l, mean_l = current.tolist(), mean.tolist()
        measured = {h: self.performance.measured_row(h) for h in set(trial_ids)}
        choices = []
        for i, h in enumerate(trial_ids):
            row = order[i]
            best = int(row[0])
            if not launchable[i, best]:
                raise NoMarketAvailable(
                    f"trial {h}: no pool market can be launched at {to_timestamp(now_s)} "
                    "(every known price is above its max price)"
                )
            b_i, T_i = b[i].tolist(), T[i].tolist()
            p_i = p[i].tolist() if p is not None else None
            c_i = cost[i].tolist() if cost is not None else None
            e_i = hour_cost[i].tolist() if hour_cost is not None else None
            m_i = measured[h][self._type_col].tolist()
            candidates = []
            for r, j in enumerate(row.tolist()):
                if not launchable[i, j]:
                    break  # unlaunchable markets sort last
                candidates.append(Candidate(
                    market=self.markets[j], rank=r,
                    current_price_usd_per_hour=cur_l[j], mean_price_usd_per_hour=mean_l[j],
                    max_price_usd_per_hour=b_i[j],
                    p_revocation=None if p_i is None else p_i[j],
                    expected_hour_cost_usd=None if e_i is None else e_i[j],
                    seconds_per_step=T_i[j], measured=m_i[j],
                    step_cost_usd=None if c_i is None else c_i[j],
                    **{name: float(arr[i, j]) for name, arr in extra.items() if name in _CANDIDATE_EXTRA},
                ))
            capped = extra.get("capped")
            row_skipped = list(skipped) + [
                SkippedMarket(market=self.markets[j],
                              reason="every max price of this market already holds the cap of trials chosen "
                                     "in the cap's window" if capped is not None and capped[i, j] else
                              f"max price {b_i[j]:.6g} USD/hour is below the current price {cur_l[j]:.6g}")
                for j in np.flatnonzero(available & ~launchable[i]).tolist()
            ]
            top = candidates[0]
            choices.append(Choice(
                trial_id=h, time_s=now_s, market=top.market,
                max_price_usd_per_hour=top.max_price_usd_per_hour,
                expected_step_cost_usd=top.step_cost_usd, p_revocation=top.p_revocation,
                seconds_per_step=top.seconds_per_step,
                explanation=Explanation(
                    policy=self.policy, objective=getattr(self.objective, "name", type(self.objective).__name__),
                    order=(*self.order, "market"), candidates=tuple(candidates), skipped=tuple(row_skipped),
                ),
            ))
        return choices


#: Extra per-candidate arrays a chooser may report in :class:`Candidate` (see :meth:`BaseChooser._evaluate`).
_CANDIDATE_EXTRA = ("expected_usd", "expected_useful_steps", "horizon_s", "p_objective")


def _plan(k: int, steps_left: Sequence[float] | None, resume_steps: Sequence[int] | None,
          heading: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps_left, resume_step, heading) as float arrays of shape (k,), NaN where unknown."""
    out = []
    for name, values, low in (("steps_left", steps_left, 0), ("resume_steps", resume_steps, 0), ("heading", heading, 1)):
        if values is None:
            out.append(np.full(k, np.nan))
            continue
        arr = np.array([np.nan if v is None else float(v) for v in values], dtype=float)
        if arr.shape != (k,) or np.any(arr[~np.isnan(arr)] < low):
            raise ProvisionerConfigError(f"{name} is {list(values)!r}, but must hold {k} numbers >= {low} (or None)")
        out.append(arr)
    return out[0], out[1], out[2]
