"""The composition root: the one place that builds an experiment's parts.

``spottune run`` (:mod:`spottune.cli._run`), ``spottune.tune()`` (:mod:`spottune.api`) and ``spottune
simulate`` (:mod:`spottune.evaluation`) all assemble their runs here:

=================  ==========================================================================================
part               built by
=================  ==========================================================================================
market             :func:`build_market`: price history (USD per instance-hour), instance catalog, pool, the
                   pool's markets, and the revocation model of the market mode (:func:`revocation_model`,
                   the only ``legacy | modern`` switch of the project)
predictor          :func:`make_predictor`: the revocation predictor of Eq 1 (``revpred``, ``tributary``,
                   ``constant``, ``hindsight``, ``none``, ``calibrated``, ``online-hazard``;
                   :data:`PREDICTOR_KINDS`)
provisioner        :func:`make_provisioner`: SpotTune's market choice, objective ``refund`` (market and max
                   price by expected USD per useful step) or ``paper`` (Eq 1-2 with a max-price rule)
curve model        :func:`curve_model`: EarlyCurve + the plateau rule, or the last value without plateaus
orchestrator       :func:`build` (spec) or :func:`spottune.evaluation.assemble` (policy), from the parts above
backend            :func:`build`: the simulator (``sim``), real worker processes (``local``) or EC2 spot
                   instances (``aws``, :mod:`spottune.backends.aws._build`)
=================  ==========================================================================================

:func:`run` builds an experiment from an :class:`~spottune.experiment.ExperimentSpec` and runs it.
"""

from __future__ import annotations

import logging
import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spottune.errors import ConfigError
from spottune.experiment import DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR, MARKET_MODES, ExperimentSpec

__all__ = [
    "PREDICTOR_KINDS", "Experiment", "MarketSetup", "build", "build_market", "calibrated_predictor", "check_start",
    "constant_hazard", "empirical_rate_predictor",
    "curve_model", "deadline_guard", "dry_run", "make_predictor", "make_provisioner", "plan_orchestrator", "plan_spec", "revocation_model", "run", "store_url",
]

log = logging.getLogger(__name__)

DAY_S = 86400.0
#: Days of price history before the start that the ``calibrated`` and ``online-hazard`` predictors train on
#: (at least ``train_days``); set to "what a user has" (AWS serves 90 days), not tuned (decision P7).
CALIBRATED_HISTORY_DAYS = 28.0
#: Revocation predictors for Eq 1. ``revpred`` and ``tributary`` are trained LSTMs (cached on disk),
#: ``constant`` a per-market hazard fitted on the training window (:func:`constant_hazard`), ``hindsight``
#: is the replay's own future as p (perfect p in Eq 2, evaluation only; not a lower bound), ``none`` is p = 0.
#: ``calibrated`` is trained on the provisioner's own (market, time, max price) queries, monotone in the
#: max price (:func:`calibrated_predictor`); ``online-hazard`` adds a per-market capacity-interruption
#: rate learned online during the run (modern mode; :class:`revpred.online_hazard.OnlineHazard`).
#: ``auto`` (the default) is ``calibrated`` in legacy mode and ``online-hazard`` in modern mode.
#: The refund objective prices ``min(p, 0.6)`` of the ``calibrated`` predictor (design R6): calibrated over
#: all its queries, it over-states the p of the candidates the argmin picks (chosen at p ≈ 0.98, revoked
#: 55 %). Chosen on the tuning starts (``benchmarks/bench_curse.py``; docs/evaluation.md "Optimizer's curse").
CALIBRATED_P_CAP = 0.6
PREDICTOR_KINDS = ("auto", "revpred", "tributary", "constant", "hindsight", "none", "calibrated", "online-hazard")


# -- market ---------------------------------------------------------------------------------------------
def revocation_model(market_mode: str, history: Any, seed: int) -> Any:
    """The spot revocation rule of a market mode: the project's only ``legacy | modern`` switch.

    Parameters
    ----------
    market_mode : {"legacy", "modern"}
        ``legacy``: the 2017 bid rule, revoked when the price rises above the max price
        (:class:`spotmarket.LegacyBidRevocation`); ``modern``: today's capacity interruptions, a hazard
        model calibrated on recorded interruption traces (:class:`spotmarket.ModernHazardRevocation`),
        its draws seeded by ``seed``.
    history : spotmarket.prices.PriceHistory
        Spot prices, USD per instance-hour.
    seed : int

    Raises
    ------
    ConfigError
        If ``market_mode`` is not one of :data:`spottune.experiment.MARKET_MODES`.
    """
    from spotmarket import LegacyBidRevocation, ModernHazardRevocation

    if market_mode == "legacy":
        return LegacyBidRevocation(history)
    if market_mode == "modern":
        return ModernHazardRevocation(None, seed, history=history)
    raise ConfigError(f"market_mode is {market_mode!r}, but must be one of {', '.join(MARKET_MODES)}")


@dataclass(frozen=True, slots=True)
class MarketSetup:
    """The replayed spot market of one experiment.

    Attributes
    ----------
    history : spotmarket.prices.PriceHistory
        Spot prices, USD per instance-hour.
    catalog : provisioner.InstanceCatalog
        vCPUs, ECU and on-demand prices (USD/hour) per instance type.
    pool : provisioner.Pool
    markets : list of spotmarket.prices.Market
        The pool resolved on the history (sorted).
    market_mode : {"legacy", "modern"}
    revocation_model : spotmarket.RevocationModel
        :func:`revocation_model` of ``market_mode``.
    """

    history: Any
    catalog: Any
    pool: Any
    markets: list
    market_mode: str
    revocation_model: Any

    def facts(self, instance_type: str) -> tuple[int, float | None]:
        """(vCPUs, ECU or None) of an instance type: what the backends' speed model reads."""
        it = self.catalog[instance_type]
        return it.vcpus, it.ecu


def build_market(prices: str | None, *, market_mode: str, seed: int, instance_types: Sequence[str] | None = None,
                 availability_zones: Sequence[str] | None = None, history: Any = None,
                 markets: Sequence[Any] | None = None) -> MarketSetup:
    """Load the price history and build the market of one experiment.

    Parameters
    ----------
    prices : str or None
        Price file path or dataset name (``spotmarket.prices.load_history``; None: its default trace).
    market_mode : {"legacy", "modern"}
    seed : int
        Seeds the modern mode's interruption draws.
    instance_types, availability_zones : sequence of str, optional
        The pool (None: every type / zone of the price data).
    history : spotmarket.prices.PriceHistory, optional
        Given prices instead of loading ``prices`` (the aws backend's live prices).
    markets : sequence of Market, optional
        An explicit market list for the pool instead of types x zones (the ray backend: the markets the
        cluster offers); the type and zone filters still apply.

    Raises
    ------
    ConfigError
        On a bad market mode; price and pool errors (a missing file, a type the catalog lacks) come
        from ``spotmarket`` / ``provisioner``.
    """
    from provisioner import InstanceCatalog, Pool
    from spotmarket.prices import load_history

    if market_mode not in MARKET_MODES:  # before minutes of loading
        raise ConfigError(f"market_mode is {market_mode!r}, but must be one of {', '.join(MARKET_MODES)}")
    history = load_history(prices) if history is None else history  # given: live prices (aws backend)
    catalog = InstanceCatalog.load()
    pool = Pool(instance_types=instance_types, availability_zones=availability_zones, markets=markets)
    markets = pool.resolve(history, catalog)
    return MarketSetup(history=history, catalog=catalog, pool=pool, markets=markets, market_mode=market_mode,
                       revocation_model=revocation_model(market_mode, history, seed))


#: ``spottune run`` warns about the collection gaps of the replayed prices within this long after its start, seconds.
GAP_WARNING_S = 86400.0


def gap_warnings(market: MarketSetup, start_s: float) -> list[str]:
    """One warning line per collection gap of the replayed price data (no record in any of its markets for far longer
    than usual, :meth:`spotmarket.prices.PriceHistory.collection_gaps`) within :data:`GAP_WARNING_S` after
    ``start_s``: the replay reads the prices there as flat, so no price crossing can revoke or refund anything
    (data/spot_prices/README.md, "Quirks")."""
    from spotmarket.prices import to_timestamp

    def utc(t: float) -> str:
        return f"{to_timestamp(t):%Y-%m-%d %H:%M} UTC"

    return [f"warning: {'the start lies in' if a < start_s else 'the first day of the run meets'} a {(b - a) / 3600:.1f} h "
            f"collection gap of the price data ({utc(a)} .. {utc(b)}: no record in any of its markets); the replay "
            "reads the prices there as flat"
            for a, b in market.history.collection_gaps() if a < start_s + GAP_WARNING_S and b > start_s]


def check_start(market: MarketSetup, start_s: float, train_days: float) -> None:
    """The start must leave ``train_days`` of price history of every pool market before it, inside the history.

    Parameters
    ----------
    market : MarketSetup
    start_s : float
        Experiment start, seconds since the epoch (UTC).
    train_days : float
        Days of history the predictor is trained on before the start.

    Raises
    ------
    ConfigError
        Naming the start and the allowed range.
    """
    from spotmarket.prices import to_timestamp

    history = market.history
    first = max(history[m].start_s for m in market.markets)
    lo, hi = first + train_days * DAY_S, history.end_s
    if lo >= hi:  # no start fits: say what is short, not an empty interval
        raise ConfigError(f"train_days is {train_days:g}, but every pool market has prices only from {to_timestamp(first)} "
                          f"to {to_timestamp(hi)} ({(hi - first) / DAY_S:.3g} days), and a start needs train_days of "
                          "them before it; lower --train-days or give longer price data")
    if not lo <= start_s < hi:
        raise ConfigError(
            f"start is {to_timestamp(start_s)}, but must lie in [{to_timestamp(lo)}, {to_timestamp(hi)}): every "
            f"pool market has prices from {to_timestamp(first)} to {to_timestamp(hi)}, and a start needs train_days "
            f"({train_days:g}) of them before it"
        )


# -- predictor ------------------------------------------------------------------------------------------
def constant_hazard(history: Any, markets: Sequence[Any], lo_s: float, hi_s: float, seed: int,
                    stride_min: int | None = None) -> Any:
    """The constant-hazard predictor: one revocation rate per market, fitted on ``[lo_s, hi_s]``.

    Per market: decision times every ``stride_min`` minutes in the window
    (:func:`revpred.labels.sample_times`: each with its label hour inside the window), max prices drawn
    by the rule used at inference, D1's ``b = price + U[0.00001, 0.2]`` USD/hour
    (:func:`revpred.labels.random_max_prices`, generator seeded by
    :func:`revpred.training.market_seed`), labels ``y = 1`` if the price rises above b within the hour.
    The rate r is the share of positive labels and ``p = 1 - exp(-lambda)`` with ``lambda = -log(1 - r)``
    per hour (:meth:`revpred.baselines.ConstantHazard.from_rates`).

    This is exactly the ``constant`` model of a trained RevPred model set
    (``ModelSet.predictor("constant", rule="random")``, same samples, same draws), computed without
    training the LSTMs. It replaces the ``spottune run`` variant that fixed b at price + 0.1 USD/hour
    (D1's mean) on its own grid, which estimated a different probability than the one Eq 1 asks for.

    Parameters
    ----------
    history : spotmarket.prices.PriceHistory
    markets : sequence of Market
    lo_s, hi_s : float
        Training window, seconds since the epoch (UTC).
    seed : int
    stride_min : int, optional
        Minutes between decision times (default: ``spottune.cache.LIGHT_REVPRED``'s, 10).

    Returns
    -------
    revpred.baselines.ConstantHazard

    Raises
    ------
    ConfigError
        If the window holds no decision time of a market.
    """
    from revpred.baselines import ConstantHazard
    from revpred.labels import random_max_prices, revocation_labels, sample_times
    from spottune.cache import LIGHT_REVPRED

    stride = LIGHT_REVPRED["stride_min"] if stride_min is None else stride_min
    rates = {}
    for m in markets:
        series = history[m]
        t = sample_times(series, lo_s, hi_s, stride)
        if t.size == 0:
            raise ConfigError(f"market {m}: the predictor's training window holds no decision time; "
                              "start later or lower train_days")
        rng = np.random.default_rng(_market_seed(seed, m))
        rates[m] = float(revocation_labels(series, t, random_max_prices(series, t, rng)).mean())
    return ConstantHazard.from_rates(rates)


def calibrated_predictor(market: MarketSetup, lo_s: float, hi_s: float, seed: int, feature_set: str = "base") -> Any:
    """:class:`revpred.calibrated.CalibratedRevocation` of the pool, trained on ``[lo_s, hi_s]``.

    The first 75 % of the window trains the model, the last 25 % calibrates it (isotonic); queries
    every 10 minutes with the provisioner's max-price ladder (``provisioner.DELTA_LADDER_USD_PER_HOUR``
    when it defines one, else :data:`revpred.ladder.DELTA_LADDER_USD_PER_HOUR`) and the catalog's
    on-demand prices. Training takes about 6 s for the default 28 days and 15 markets (more on a busy machine; 1.8 s
    to load, ``benchmarks/bench_predictor_cache.py``), so the fitted model is cached
    on disk (``$SPOTTUNE_CACHE/calibrated``, keyed like the LSTMs' model sets: the markets' price data, the
    window, these settings, the predictor's code and scikit-learn's version); a cache hit gives the same p. It answers
    on the same 10-minute grid (``query_grid_s``), so one provisioning period costs one model call.
    ``feature_set`` names the model's columns (:data:`revpred.ladder_features.FEATURE_SETS`; ``"base"``, the
    default, is the 14 columns of docs/revpred.md).

    Raises
    ------
    revpred.RevPredError
        If the window holds one class of labels only (train on more days), or on an unknown feature set.
    """
    import sklearn

    import provisioner
    from revpred import RevPredError
    from revpred.calibrated import CalibratedRevocation
    from revpred.ladder import DELTA_LADDER_USD_PER_HOUR
    from spottune.cache import CALIBRATED_MODULES, model_set_dir

    on_demand = {}
    for m in market.markets:
        try:
            on_demand[m] = market.catalog[m.instance_type].on_demand(m.region)
        except Exception:  # no on-demand price for this region: the query is left out  # noqa: BLE001
            pass
    ladder = getattr(provisioner, "DELTA_LADDER_USD_PER_HOUR", DELTA_LADDER_USD_PER_HOUR)
    kwargs = dict(ladder=ladder, on_demand=on_demand or None, stride_min=10, query_grid_s=600.0, seed=seed,
                  feature_set=feature_set)
    key = {**kwargs, "ladder": list(ladder), "on_demand": {str(m): p for m, p in on_demand.items()},
           "sklearn": sklearn.__version__}
    path = model_set_dir("calibrated", market.history, market.markets, lo_s, hi_s, key,
                         modules=CALIBRATED_MODULES) / "state.skops"
    if path.exists():
        try:
            return CalibratedRevocation(market.history, market.markets, **kwargs).load(path)
        except RevPredError as exc:  # a stale or damaged cache entry is retrained and replaced
            log.warning("%s; retraining", exc)
    pred = CalibratedRevocation.train(market.history, market.markets, lo_s, hi_s, **kwargs)
    pred.save(path)
    return pred


def empirical_rate_predictor(market: MarketSetup, lo_s: float, hi_s: float, stride_min: int = 10) -> Any:
    """The market's base rate as a predictor: :class:`revpred.EmpiricalRate` on ``[lo_s, hi_s]``.

    p(market, t, b) is the (Laplace-smoothed) share of the window's decision times, every ``stride_min``
    minutes, whose price rose above ``b − price(t)`` over the current price within the hour: the market's
    own frequency for the same question, with no model. The refund objective's optimizer's-curse
    correction shrinks the calibrated p towards it (``RefundProvisioner(p_prior=...)``).

    Raises
    ------
    revpred.RevPredError
        If a market has no decision time in the window.
    """
    from revpred.baselines import EmpiricalRate
    from revpred.labels import max_rise, sample_times

    rises = {}
    for m in market.markets:
        series = market.history[m]
        rises[m] = max_rise(series, sample_times(series, lo_s, hi_s, stride_min))
    return EmpiricalRate(market.history, rises)


def _market_seed(seed: int, market: Any) -> int:
    """:func:`revpred.training.market_seed`, without importing the training module (which needs torch)."""
    import zlib

    return (int(seed) * 1_000_003 + zlib.crc32(str(market).encode())) % (2**31 - 1)


def _learned(kind: str, history: Any, markets: list, lo_s: float, hi_s: float, seed: int,
             kinds: Sequence[str], cache: str, log_fn: Callable[[str], None] | None) -> tuple[Any, str]:
    """Trained ``kind`` (revpred or tributary) from the model set of ``kinds``, cached by data, window, code."""
    from revpred.store import INDEX, load_model_set, save_model_set
    from revpred.training import TrainConfig, train_markets
    from spottune.cache import LIGHT_REVPRED, model_set_dir

    config = TrainConfig(seed=seed, **LIGHT_REVPRED)
    path = model_set_dir(cache, history, markets, lo_s, hi_s, config, None if cache == "revpred" else tuple(kinds))
    desc = f"{kind} trained on {(hi_s - lo_s) / DAY_S:g} days before the start ({path})"
    if (path / INDEX).exists():
        try:
            return load_model_set(path, history, markets).predictor(kind), desc + ", cached"
        except Exception as exc:  # a stale or partial cache is retrained  # noqa: BLE001
            log.warning("model cache %s is unreadable (%s: %s); retraining", path, type(exc).__name__, exc)
    if log_fn is not None:
        log_fn(f"training {', '.join(kinds)} for {len(markets)} markets (cached afterwards in {path}) ...")
    model_set = train_markets(history, markets, lo_s, hi_s, config, kinds=tuple(kinds))
    save_model_set(path, model_set)
    return model_set.predictor(kind), desc


def make_predictor(kind: str, market: MarketSetup, lo_s: float, hi_s: float, seed: int, *,
                   learned_kinds: Sequence[str] = ("revpred",), log_fn: Callable[[str], None] | None = None,
                   fallback: bool = False, feature_set: str = "base",
                   given_capacity: bool | None = None) -> tuple[Any, str]:
    """The revocation predictor of Eq 1 (a :class:`revpred.protocol.RevocationPredictor`) and a one-line note.

    Parameters
    ----------
    kind : one of :data:`PREDICTOR_KINDS`
        ``none``: p = 0. ``constant``: :func:`constant_hazard` on ``[lo_s, hi_s]``. ``revpred`` /
        ``tributary``: LSTMs trained on ``[lo_s, hi_s]`` with ``spottune.cache.LIGHT_REVPRED`` and cached
        on disk (``$SPOTTUNE_CACHE``). ``hindsight``: the replay's own future
        (:class:`spottune.evaluation.HindsightPredictor` of ``market.revocation_model``). ``calibrated``:
        :func:`calibrated_predictor` on up to :data:`CALIBRATED_HISTORY_DAYS` days before ``hi_s`` (never
        fewer than ``[lo_s, hi_s]``, never before the history). ``online-hazard``: the same combined with
        :class:`revpred.online_hazard.OnlineHazard` (prior from ``market.revocation_model.calibration``
        when it has one; learns from the run through ``observe``).
    market : MarketSetup
    lo_s, hi_s : float
        Training window, seconds since the epoch (UTC), before every start it serves.
    seed : int
    learned_kinds : sequence of str, default ("revpred",)
        Model kinds trained together in one cached model set (the evaluation trains RevPred and
        Tributary together); must contain ``kind`` when it is learned.
    log_fn : callable (str) -> None, optional
        Told before a (minutes-long) training starts.
    fallback : bool, default False
        If RevPred cannot be imported (no torch in this build), use the constant hazard instead of
        raising ImportError; the note says so.
    feature_set : str, default "base"
        Columns of the ``calibrated`` model (also inside ``online-hazard``), passed to
        :func:`calibrated_predictor`; ignored by the other kinds.
    given_capacity : bool, optional
        ``online-hazard``'s prior: the first-hour share of a fulfilled launch (True) or of a launch at any time
        (False; :meth:`revpred.online_hazard.OnlineHazard.from_calibration`). None (default): True when
        ``market.revocation_model`` refuses launches in outages of correlated events (modern mode's default model,
        design P8), else False.

    Raises
    ------
    ConfigError
        On an unknown kind.
    """
    from revpred.protocol import ConstantRevocation

    if kind not in PREDICTOR_KINDS:
        raise ConfigError(f"predictor is {kind!r}, but must be one of {', '.join(PREDICTOR_KINDS)}")
    if kind == "auto":  # the predictor that answers the market mode's question (issue 12)
        kind = "calibrated" if market.market_mode == "legacy" else "online-hazard"
    days = (hi_s - lo_s) / DAY_S
    if kind == "none":
        return ConstantRevocation(0.0), "p = 0 (no revocation prediction)"
    if kind == "hindsight":
        from spottune.evaluation._oracle import HindsightPredictor

        return HindsightPredictor(market.revocation_model), "hindsight (p from the replay's own revocations)"
    if kind in ("calibrated", "online-hazard"):
        # cheap to train (seconds), so it reads the history a user has at hand: up to 28 days before the
        # start (AWS serves 90), never less than the given window (decision P7, docs/design.md)
        first_s = max(float(market.history[m].start_s) for m in market.markets)
        pred = calibrated_predictor(market, max(first_s, min(lo_s, hi_s - CALIBRATED_HISTORY_DAYS * DAY_S)), hi_s, seed,
                                    feature_set)
        if kind == "calibrated":
            return pred, f"{pred.describe()}, before the start"
        from revpred.online_hazard import OnlineHazard

        model = market.revocation_model
        cal = getattr(model, "calibration", None)  # the modern model's; None: the default
        if given_capacity is None:
            given_capacity = bool(getattr(model, "outages", False) and getattr(model, "correlated", False))
        launch = "a fulfilled launch" if given_capacity else "a launch at any time"
        return (OnlineHazard.from_calibration(cal, pred, given_capacity=given_capacity),
                f"online-hazard: gamma-Poisson interruption rate per market (prior from the interruption "
                f"traces for {launch}, updated by the run) combined with {pred.describe()}")
    note = ""
    if kind in ("revpred", "tributary"):
        kinds = tuple(learned_kinds) if kind in learned_kinds else (kind,)
        try:
            return _learned(kind, market.history, market.markets, lo_s, hi_s, seed, kinds,
                            "revpred" if kinds == ("revpred",) else "revpred-eval", log_fn)
        except ImportError as exc:  # RevPred's training or store not importable in this build
            if not fallback:
                raise
            note = f"{kind} unavailable ({exc}); "
    pred = constant_hazard(market.history, market.markets, lo_s, hi_s, seed)
    return pred, f"{note}constant hazard per market fitted on {days:g} days before the start"


# -- provisioner and curve model --------------------------------------------------------------------------
def make_provisioner(history: Any, catalog: Any, pool: Any, predictor: Any, seed: int,
                     max_price_rule: Any = None, *, objective: str = "refund", boot_s: float | None = None,
                     checkpoint_size_mb: float = 1.0, reference_seconds_per_step: float | None = None,
                     time_value_usd_per_hour: float = 0.0,
                     job_time_value_usd_per_hour: float = DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR,
                     speed_model: str = "pooled", exclusions: Any = None) -> Any:
    """SpotTune's market chooser over the pool's markets, with the objective ``objective``.

    Parameters
    ----------
    history : spotmarket.prices.PriceHistory
        Spot prices, USD per instance-hour.
    catalog : provisioner.InstanceCatalog
    pool : provisioner.Pool
    predictor : RevocationPredictor
        One-hour revocation probability (:func:`make_predictor`).
    seed : int
        Seeds the max-price draws (``numpy.random.default_rng(seed)``).
    max_price_rule : MaxPriceSource, optional
        ``paper`` only. Default: D1, ``b = price + U[0.00001, 0.2]`` USD/hour (``provisioner.MaxPriceRule()``).
    objective : {"refund", "paper"}, default "refund"
        ``refund``: :class:`provisioner.RefundProvisioner`, the market and max price (ladder) with the
        lowest expected USD per useful step over the decision horizon; ``paper``:
        :class:`provisioner.Provisioner` with Eq 2 and the max-price rule.
    boot_s : float, optional
        ``refund`` only: launch-to-training latency, seconds (default
        :data:`spottune.backends._speed.DEFAULT_BOOT_S`; pass the backend's own value).
    checkpoint_size_mb : float
        ``refund`` only: checkpoint size, MB; write and restore times per instance type come from the
        checkpoint bandwidth model (:func:`spottune.backends._speed.transfer_seconds`, plus the sim's
        fixed per-checkpoint overhead).
    reference_seconds_per_step : float, optional
        ``refund`` only: the workload's declared seconds per step on the 2-vCPU reference instance; sets
        T's prior ``κ = T_ref · 2`` s·core/step (default κ = 1), so that the horizon and the whole-step
        count are right before the first measurement (a step longer than the hour is never chosen).
    time_value_usd_per_hour : float, default 0
        ``refund`` only: value of a trial's wall-clock hour, USD per trial-hour
        (:attr:`provisioner.RefundStepCost.time_value_usd_per_hour`; docs/design.md, issue 12, R7).
    job_time_value_usd_per_hour : float, default :data:`spottune.experiment.DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR`
        ``refund`` only: value of the job's wall-clock hour, USD per job-hour, shared by the trials heading to the
        same stop (:attr:`provisioner.RefundStepCost.job_time_value_usd_per_hour`; R11).
    speed_model : {"pooled", "cores"}, default "pooled"
        ``refund`` only: T's model for the instance types a trial has not run on (``spottune.experiment.SPEED_MODELS``;
        :class:`provisioner.PooledSpeedMatrix` pivoting at the 2-vCPU reference instance, or the spec's
        :class:`provisioner.PerformanceMatrix`).
    exclusions : provisioner.MarketExclusions, optional
        Where the chooser keeps capacity refusals (:func:`market_exclusions`); None: none are kept.

    Raises
    ------
    ConfigError
        On an unknown objective or speed model.
    ProvisionerConfigError
        On a negative or non-finite value of time.
    """
    from provisioner import Provisioner, RefundProvisioner, RefundStepCost
    from spottune.backends import SimSettings
    from spottune.backends._speed import DEFAULT_BOOT_S, transfer_seconds
    from spottune.experiment import OBJECTIVES, SPEED_MODELS

    rng = np.random.default_rng(seed)
    if objective == "paper":
        return Provisioner(history, catalog, predictor, pool, rng, max_price_rule=max_price_rule, exclusions=exclusions)
    if objective != "refund":
        raise ConfigError(f"objective is {objective!r}, but must be one of {', '.join(OBJECTIVES)}")
    if speed_model not in SPEED_MODELS:
        raise ConfigError(f"speed_model is {speed_model!r}, but must be one of {', '.join(SPEED_MODELS)}")
    overhead = SimSettings().checkpoint_overhead_s
    types = {m.instance_type for m in pool.resolve(history, catalog)}
    ckpt = {t: transfer_seconds(checkpoint_size_mb, catalog[t].vcpus, overhead) for t in sorted(types)}
    cost = RefundStepCost(boot_s=DEFAULT_BOOT_S if boot_s is None else float(boot_s), checkpoint_s=ckpt,
                          time_value_usd_per_hour=time_value_usd_per_hour,
                          job_time_value_usd_per_hour=job_time_value_usd_per_hour)
    from provisioner import PerformanceMatrix, PooledSpeedMatrix
    from spottune.backends._speed import REFERENCE_VCPUS

    kappa = {} if reference_seconds_per_step is None else {"kappa_s": REFERENCE_VCPUS * float(reference_seconds_per_step)}
    perf = (PooledSpeedMatrix.from_catalog(catalog, sorted(types), reference_cores=REFERENCE_VCPUS, **kappa)
            if speed_model == "pooled" else PerformanceMatrix.from_catalog(catalog, sorted(types), **kappa))
    return RefundProvisioner(history, catalog, predictor, pool, rng, objective=cost, performance=perf,
                             p_cap=selection_p_cap(predictor), exclusions=exclusions)


def selection_p_cap(predictor: Any) -> float:
    """The refund objective's ceiling on p for ``predictor`` (design R6).

    Returns
    -------
    float in (0, 1)
        :data:`CALIBRATED_P_CAP` (0.6) for a :class:`revpred.calibrated.CalibratedRevocation` (the ``calibrated``
        predictor, legacy mode's default), else :data:`provisioner.P_CAP` (0.999, no ceiling).
    """
    from provisioner import P_CAP
    from revpred.calibrated import CalibratedRevocation

    return CALIBRATED_P_CAP if isinstance(predictor, CalibratedRevocation) else P_CAP


def curve_model(max_steps: int, early_curve: bool = True) -> tuple[Any, Any]:
    """(final-metric predictor, plateau rule) of the orchestrator.

    ``early_curve``: EarlyCurve at S_max = ``max_steps`` steps and :func:`earlycurve.is_plateau`;
    otherwise the last observed value and no plateau rule (None).
    """
    if not early_curve:
        from earlycurve import LastValue

        return LastValue(), None
    from earlycurve import EarlyCurve, is_plateau

    return EarlyCurve(max_steps), (lambda steps, values, smax: is_plateau(steps, values, smax))


# -- the whole experiment ---------------------------------------------------------------------------------
def store_url(spec: ExperimentSpec, folder: str | Path) -> str:
    """Where the local backend's workers checkpoint: ``storage_path``, or ``<folder>/checkpoints``.

    A plain folder is made absolute (the workers are separate processes); URLs (``s3://``,
    ``file://``) are used as they are, with ``spec.storage_options``.
    """
    path = spec.storage_path
    if path is None:
        return str((Path(folder) / "checkpoints").resolve())
    return path if "://" in path else str(Path(path).expanduser().resolve())


@dataclass(slots=True)
class Experiment:
    """An experiment built from a spec, ready to run (:meth:`run`).

    Attributes
    ----------
    spec : ExperimentSpec
    market : MarketSetup
    start_s : float
        Start, seconds since the epoch (UTC).
    trials : list of TrialSpec
    predictor_desc : str
    orchestrator : spottune.orchestrator.Orchestrator
    backend : SimBackend or LocalBackend
    curves : TrainableCurves or None
        The sim backend's curves (None for the local backend).
    configs : dict
        trial_id -> configuration.
    plan : spottune.planning.RunPlan or None
        The plan of a run with both a deadline and a budget (executed when ``spec.executes_plan``).
    """

    spec: ExperimentSpec
    market: MarketSetup
    start_s: float
    trials: list
    predictor_desc: str
    orchestrator: Any
    backend: Any
    curves: Any = None
    configs: dict = field(default_factory=dict)
    plan: Any = None

    def run(self) -> dict[str, Any]:
        """Run the backend to the end; returns what :func:`spottune.results.write_results` reads.

        Returns
        -------
        dict
            ``orchestrator``, ``record`` (RunRecord), ``curves``, ``spec``, ``opts`` (``spec.to_dict()``),
            ``workload``, ``configs`` (trial_id -> config), ``predictor_desc``.
        """
        spec, orch = self.spec, self.orchestrator
        workload = spec.get_workload()
        if hasattr(self.backend.progress, "attach"):  # a spottune.results.ResultsJournal: written as the run goes
            self.backend.progress.attach(self.backend.record, self.configs)
        record = self.backend.run()
        record.meta.update(workload=workload.name, market_mode=spec.market_mode, predictor=self.predictor_desc,
                           theta=orch.config.theta, top_k=orch.config.top_k, max_steps=spec.max_steps, seed=spec.seed,
                           start=spec.start.isoformat(), start_s=self.start_s,
                           markets=[str(m) for m in self.market.markets], metric=spec.metric, mode=spec.mode,
                           n_trials=len(self.trials), spec=spec.to_dict())
        if self.plan is not None:
            record.meta.update(deadline_mode=spec.deadline_mode, plan=self.plan.render(mode=spec.deadline_mode),
                               plan_executed=spec.executes_plan)
        if spec.executes_plan:  # what ran: per bracket, per round, the trials; and the planned round ends
            schedule = executed_schedule(self.plan, spec.deadline_mode)[0]
            ends = np.cumsum(schedule.brackets[0].durations)
            record.meta.update(plan_rounds=[[list(r) for r in rounds] for rounds in orch.members],
                               plan_round_ends_s=[float(x) for x in ends], plan_executed_name=schedule.name)
        return {"orchestrator": orch, "record": record, "curves": self.curves, "spec": spec, "opts": spec.to_dict(),
                "workload": workload, "configs": self.configs, "predictor_desc": self.predictor_desc}


def check_supported(spec: ExperimentSpec) -> None:
    """Refuse, at once, what this build cannot run.

    Raises
    ------
    ConfigError
        On a backend other than ``sim``, ``local``, ``aws`` and ``ray``, ``aws`` without ``aws.bucket``, or
        an executed plan (``spec.executes_plan``) on a backend other than ``sim`` (decision DB14).
    """
    if spec.backend not in ("sim", "local", "aws", "ray"):
        raise ConfigError(f"backend is {spec.backend!r}, but this build runs only sim, local, aws and ray")
    if spec.backend == "aws" and not spec.aws.get("bucket"):
        raise ConfigError("backend aws needs aws.bucket (an S3 bucket for checkpoints and control objects; "
                          "docs/aws.md)")
    if spec.executes_plan and spec.backend != "sim":
        raise ConfigError("--deadline with --budget-usd executes a plan on the sim backend only; use "
                          "--deadline-mode guard")


def build(spec: ExperimentSpec, *, progress: Any = None, output: str | Path | None = None,
          log_fn: Callable[[str], None] | None = None, live_start_s: float | None = None) -> Experiment:
    """Build every part of ``spec``: market, predictor, provisioner, curve model, orchestrator, backend.

    Parameters
    ----------
    spec : ExperimentSpec
    progress : callable (now_s, orchestrator, usd) -> None, optional
        Called by the backend after every delivered event (USD spent so far).
    output : str or Path, optional
        The run's results folder. The local backend keeps its checkpoints (when ``storage_path`` is
        None) in ``<output>/checkpoints/`` and its worker logs in ``<output>/workers/``; without
        ``output`` a new temporary folder is used (and left for inspection).
    log_fn : callable (str) -> None, optional
        Told before RevPred is trained (minutes, once per data and window; cached afterwards), and given the warnings
        of :func:`gap_warnings` when the replayed prices have a collection gap near the start.
    live_start_s : float, optional
        aws with live prices: the start of the run being resumed (its journaled ``ExperimentStarted``), so
        the provisioner sees the prices it saw then; default: now.

    Raises
    ------
    ConfigError
        On a backend this build cannot run (``aws``), or a start without ``train_days`` of history
        before it.
    """
    from spotmarket import Billing
    from spotmarket.prices import to_seconds

    check_supported(spec)
    seed = spec.seed
    spec.get_workload()  # an unknown workload fails before the prices are loaded
    live = None
    if spec.backend == "aws":
        from spottune.backends.aws._build import live_market

        live = live_market(spec, now_s=live_start_s)  # (history, now) from the EC2 API, or None: the replayed trace
    history, pool, offered = None if live is None else live[0], None, None
    if spec.backend == "ray":  # the chooser's pool: the markets the cluster offers (decision R2)
        from spotmarket.prices import load_history
        from spottune.backends.ray._build import pool_markets

        history = load_history(spec.prices)
        pool, offered = pool_markets(spec, history)
    market = build_market(spec.prices, market_mode=spec.market_mode, seed=seed,
                          instance_types=spec.instance_types, availability_zones=spec.availability_zones,
                          history=history, markets=pool)
    start_s = float(to_seconds(spec.start)) if live is None else live[1]
    check_start(market, start_s, spec.train_days)
    if live is None and log_fn is not None:
        for note in gap_warnings(market, start_s):
            log_fn(note)
    plan = plan_spec(spec, market, start_s)  # deadline and budget: an infeasible request is refused before training
    trials = spec.trials()
    if spec.executes_plan:  # issue 17, DB14: SEER's printed plan, executed (no revocation predictor needed)
        orch = plan_orchestrator(spec, market, plan, [t.trial_id for t in trials])
        desc = "none (the plan's bracket types, max price current + 0.01 USD/h)"
    else:
        orch, desc = _algorithm_1(spec, market, start_s, log_fn)
    parts = (orch, market.history, market.revocation_model, Billing(spec.billing))
    curves = None
    if spec.backend == "sim":
        from spottune.backends import SimBackend, SimSettings, TrainableCurves

        # make_trainable passes the spec's max_steps, so LR schedules scale with max_steps
        curves = TrainableCurves({t.trial_id: (lambda t=t: spec.make_trainable(t)) for t in trials})
        backend: Any = SimBackend(*parts, curves, market.facts, start_s,
                                  SimSettings(boot_s=spec.boot_s, step_time_cov=spec.step_time_cov, seed=seed),
                                  progress=progress)
    elif spec.backend == "aws":
        from spottune.backends.aws._build import aws_backend

        backend = aws_backend(spec, orch, Billing(spec.billing), trials, market, start_s, live=live is not None,
                              output=output, progress=progress)
    elif spec.backend == "ray":
        from spottune.backends.ray._build import ray_backend

        folder = Path(output) if output is not None else Path(tempfile.mkdtemp(prefix="spottune-run-"))
        from spottune.checkpoint._secrets import experiment_key

        backend = ray_backend(spec, orch, Billing(spec.billing), trials, market, start_s, offered=offered,
                              store_url=store_url(spec, folder), progress=progress,
                              checkpoint_key=experiment_key(folder))
    else:
        from spottune.backends import LocalBackend, LocalSettings

        folder = Path(output) if output is not None else Path(tempfile.mkdtemp(prefix="spottune-run-"))
        from spottune.checkpoint._secrets import experiment_key

        settings = LocalSettings(store_url=store_url(spec, folder), storage_options=dict(spec.storage_options),
                                 time_scale=spec.time_scale, max_steps=spec.max_steps,
                                 checkpoint_keep=spec.checkpoint_keep, log_dir=str(folder / "workers"),
                                 checkpoint_key=experiment_key(folder))
        backend = LocalBackend(*parts, spec.workload, {t.trial_id: (t.config, t.seed) for t in trials}, market.facts,
                               start_s, settings, progress=progress)
    if spec.backend != "aws":  # the aws backend checks its own (AwsSettings); the same rule, _caps.check_caps
        backend.budget_usd, backend.max_usd_per_hour = spec.budget_usd, spec.max_usd_per_hour
    return Experiment(spec=spec, market=market, start_s=start_s, trials=trials, predictor_desc=desc,
                      orchestrator=orch, backend=backend, curves=curves,
                      configs={t.trial_id: t.config for t in trials}, plan=plan)


def _algorithm_1(spec: ExperimentSpec, market: MarketSetup, start_s: float,
                 log_fn: Callable[[str], None] | None) -> tuple[Any, str]:
    """SpotTune's orchestrator (Algorithm 1: θ barrier, top-k, EarlyCurve) with its predictor and provisioner,
    inside the deadline guard when ``spec.deadline`` is set; and the predictor's one-line note."""
    from spottune._early_stop import early_stopping, learned_final_predictor
    from spottune.orchestrator import Orchestrator, OrchestratorConfig

    seed = spec.seed
    predictor, desc = make_predictor(spec.predictor, market, start_s - spec.train_days * DAY_S, start_s, seed,
                                     log_fn=log_fn, fallback=True)
    config = OrchestratorConfig(max_steps=spec.max_steps, theta=spec.theta, top_k=spec.top_k, metric=spec.metric,
                                mode=spec.mode, max_failures=spec.max_failures, rungs=spec.rungs)
    trials = spec.trials()
    at_theta = (learned_final_predictor(spec.stopper_curves, seed, spec.stopper, config.barrier_fractions,
                                        spec.max_steps, {k for t in trials for k in t.config})
                if spec.stopper_curves else None)
    fmp, plateau, stop_rule = early_stopping(spec.stopper, spec.max_steps, spec.theta_steps, spec.top_k, seed,
                                             final_predictor=at_theta, predictive=spec.predictive_options)
    ranking = ({"rung_predictor": at_theta, "configs": {t.trial_id: t.config for t in trials}}
               if spec.stopper == "hparams" else {})
    chooser = make_provisioner(market.history, market.catalog, market.pool, predictor, seed, objective=spec.objective,
                               boot_s=spec.boot_s if spec.backend in ("sim", "aws", "ray") else 0.0,
                               checkpoint_size_mb=spec.get_workload().checkpoint_size_mb,
                               reference_seconds_per_step=getattr(spec.get_workload().trainable,
                                                                  "reference_seconds_per_step", None),
                               time_value_usd_per_hour=spec.time_value_usd_per_hour,
                               job_time_value_usd_per_hour=spec.job_time_value_usd_per_hour,
                               speed_model=spec.speed_model, exclusions=market_exclusions(spec))
    if spec.deadline is not None:  # stable capacity when the deadline is at risk
        chooser = deadline_guard(spec, market, start_s, chooser)
    orch = Orchestrator(
        [t.trial_id for t in trials],
        config,
        chooser,
        predictor=fmp,
        plateau_rule=plateau,
        stop_rule=stop_rule,
        **ranking,
    )
    return orch, desc


def market_exclusions(spec: ExperimentSpec) -> Any:
    """Where the chooser keeps the markets that refused a launch for capacity (design AWS3, E12): a
    :class:`provisioner.MarketExclusions` for sim and local (a replayed outage's refusals, 30 min) and aws (EC2's,
    ``aws.exclusion_s``); None for ray (the cluster offers its own markets)."""
    from provisioner import MarketExclusions

    if spec.backend == "aws":
        from spottune.backends.aws._build import exclusion_s

        return MarketExclusions(exclusion_s(spec))
    return MarketExclusions() if spec.backend in ("sim", "local") else None


def plan_orchestrator(spec: ExperimentSpec, market: MarketSetup, plan: Any, trial_ids: Sequence[str]) -> Any:
    """The printed plan executed: the ``seer-lean`` (``deadline_mode="plan"``) or ``seer-predictive``
    (``deadline_mode="seer"``) orchestrator of ``spottune simulate`` on ``plan``.

    The schedule is :func:`executed_schedule` of the printed plan (one source: what is printed is what runs), each
    round on the plan's instance types, rounds ending at the plan's wall-clock times after the start less a noise
    reserve of ``spec.step_time_cov``, elimination by EarlyCurve's predicted final value, the answer the best of the
    last round (:func:`spottune.evaluation._elastic.bracket_orchestrator`, decisions DB7, DB9, DB13, DB14, DB15).

    Parameters
    ----------
    spec : ExperimentSpec
    market : MarketSetup
    plan : spottune.planning.RunPlan
        A feasible plan (:func:`plan_spec`).
    trial_ids : sequence of str
        The experiment's trials, in sampling order.

    Returns
    -------
    spottune.evaluation._elastic.BracketOrchestrator

    Raises
    ------
    ConfigError
        If the plan has no round (not feasible).
    """
    from spottune.evaluation._elastic import bracket_orchestrator

    if plan is None or plan.seer is None:
        raise ConfigError("the deadline and the budget fit no round of SEER's plan")
    schedule, types, hop = executed_schedule(plan, spec.deadline_mode)
    ref = spec.get_workload().reference_seconds_per_step
    orch, _, _ = bracket_orchestrator(
        schedule, types, trial_ids, history=market.history, catalog=market.catalog, pool=market.pool,
        rng=np.random.default_rng(spec.seed), max_steps=spec.max_steps, metric=spec.metric, mode=spec.mode,
        top_k=spec.top_k, reference_seconds_per_step=lambda _tid: ref, boot_s=spec.boot_s, predictive=True,
        step_time_cov=spec.step_time_cov, hourly_hop=hop)
    return orch


def executed_schedule(plan: Any, deadline_mode: str) -> tuple[Any, dict[float, str], bool]:
    """(schedule, vCPUs -> instance type, hourly relaunches) that ``deadline_mode`` executes: ``plan``, the lean plan
    (DB15; SEER's brackets when no lean candidate fits); ``seer``, SEER's brackets without hops (DB14)."""
    from spottune.planning import seer_schedule

    if deadline_mode == "plan" and plan.lean is not None:
        return plan.lean.schedule, plan.lean.type_map, True
    return (seer_schedule(plan.seer), {float(p): t for p, t in zip(plan.seer.parallelism, plan.instance_types)},
            deadline_mode == "plan")


def deadline_guard(spec: ExperimentSpec, market: MarketSetup, start_s: float, chooser: Any) -> Any:
    """``chooser`` wrapped in :class:`spottune.planning.DeadlineGuard` for ``spec.deadline`` (seconds after
    ``start_s``): the workload's speed per instance type, boot plus one checkpoint restore as the overhead."""
    from spottune.backends import SimSettings
    from spottune.backends._speed import seconds_per_step, transfer_seconds
    from spottune.planning import DeadlineGuard

    wl = spec.get_workload()
    ref = wl.reference_seconds_per_step

    def sps(instance_type: str) -> float:
        return seconds_per_step(ref, *market.facts(instance_type))

    restore = max(transfer_seconds(wl.checkpoint_size_mb, market.facts(m.instance_type)[0],
                                   SimSettings().checkpoint_overhead_s) for m in market.markets)
    return DeadlineGuard(chooser, start_s=start_s, deadline_s=start_s + spec.deadline, max_steps=spec.max_steps,
                         markets=market.markets, seconds_per_step=sps, overhead_s=spec.boot_s + restore,
                         on_demand_usd_per_hour=lambda m: market.catalog.on_demand_usd_per_hour(m.instance_type, m.region))


def plan_spec(spec: ExperimentSpec, market: MarketSetup | None = None, start_s: float | None = None) -> Any:
    """The plan of a run with both ``deadline`` and ``budget_usd`` (:func:`spottune.planning.plan_run`), or None.

    The expected prices come from the ``train_days`` before the start.

    Raises
    ------
    ConfigError
        One line: bad input (see :func:`~spottune.planning.plan_run`), or an infeasible request, saying
        what is feasible ("at most 12 trials by 6 h within 40 USD ...").
    """
    if spec.deadline is None or spec.budget_usd is None:
        return None
    from spottune.planning import plan_run

    if market is None:
        from spotmarket.prices import to_seconds

        market = build_market(spec.prices, market_mode=spec.market_mode, seed=spec.seed,
                              instance_types=spec.instance_types, availability_zones=spec.availability_zones)
        start_s = float(to_seconds(spec.start))
    from spottune.evaluation._elastic import ELASTIC_DELTA_USD_PER_HOUR, RESTORE_CHECKPOINT_S

    wl = spec.get_workload()
    plan = plan_run(deadline_s=spec.deadline, budget_usd=spec.budget_usd, history=market.history,
                    catalog=market.catalog, markets=market.markets, start_s=float(start_s),
                    window_s=spec.train_days * DAY_S, reference_seconds_per_step=wl.reference_seconds_per_step,
                    boot_s=spec.boot_s, n_requested=spec.n_trials, max_steps=spec.max_steps, top_k=spec.top_k,
                    theta=spec.theta, overhead_s=spec.boot_s + RESTORE_CHECKPOINT_S, step_time_cov=spec.step_time_cov,
                    hourly_hop=True, delta_usd_per_hour=ELASTIC_DELTA_USD_PER_HOUR)
    if not plan.feasible:
        raise ConfigError(plan.refusal())
    if spec.executes_plan:
        first = first_round_commitment_usd(plan, market, float(start_s), spec.deadline_mode)
        if first > spec.budget_usd:
            n0 = sum(b.live[0] for b in executed_schedule(plan, spec.deadline_mode)[0].brackets)
            raise ConfigError(f"the plan starts {n0} trials at once, and the budget cap counts an hour of each at its "
                              f"max price: {first:.3f} USD, more than the budget of {spec.budget_usd:g} USD; give at least "
                              f"--budget-usd {math.ceil(first * 1000) / 1000:g}, fewer trials, or "
                              "--deadline-mode guard")
    return plan


def first_round_commitment_usd(plan: Any, market: MarketSetup, start_s: float, deadline_mode: str = "seer") -> float:
    """USD the budget cap commits when an executed plan's first round has launched: one hour of every trial
    of the round at its max price (DB5), the cheapest zone's price at ``start_s`` plus
    ``ELASTIC_DELTA_USD_PER_HOUR`` per instance type (DB9). The cap stops a run whose commitment exceeds the
    budget before it trains, so such a plan is refused (DB14). ``deadline_mode`` says which schedule runs
    (:func:`executed_schedule`)."""
    from spottune.evaluation._elastic import ELASTIC_DELTA_USD_PER_HOUR

    schedule, types, _ = executed_schedule(plan, deadline_mode)
    total = 0.0
    for b in schedule.brackets:
        itype = types[float(b.resources[0])]
        price = min(float(market.history[m].price_at(start_s)) for m in market.markets if m.instance_type == itype)
        total += b.live[0] * (price + ELASTIC_DELTA_USD_PER_HOUR)
    return total


def dry_run(spec: ExperimentSpec, *, log_fn: Callable[[str], None] | None = None) -> str:
    """What ``spec`` would launch first (every trial's market and max price, the hourly cost bound), as text;
    nothing is launched (the aws backend reads prices only). See :func:`spottune.backends.aws.plan`."""
    from spottune.backends.aws._safety import plan

    exp = build(spec, log_fn=log_fn)
    p = plan(exp.orchestrator.chooser, [t.trial_id for t in exp.trials], exp.start_s,
             steps_left=spec.theta * spec.max_steps)
    return p.render(max_usd_per_hour=spec.max_usd_per_hour, budget_usd=spec.budget_usd)


def run(spec: ExperimentSpec, *, progress: Any = None, output: str | Path | None = None,
        log_fn: Callable[[str], None] | None = None, journal: Any = None,
        resume: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """:func:`build` ``spec`` and run it; returns :meth:`Experiment.run`'s dict (nothing is written).

    ``journal`` (a :class:`spottune.journal.Journal`) records the run; with ``resume`` (the records of
    a killed run's journal, which ``journal`` then replays) the backend's :meth:`~spottune.backends.Driver.resume`
    hook continues that run instead of starting afresh (issue 15).
    """
    started = next((r["e"]["time_s"] for r in resume or () if r["k"] == "event"), None)  # ExperimentStarted
    exp = build(spec, progress=progress, output=output, log_fn=log_fn, live_start_s=started)
    if journal is not None:  # the driver journals; a replay recalls the predictor's journaled answers
        exp.backend.journal = journal
        journal.sync_intents = spec.backend != "sim"  # real side effects: fsync before each one
    if resume is not None:
        exp.backend.resume(resume)
    return exp.run()
