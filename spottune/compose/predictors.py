"""Revocation predictors of Eq 1: one factory, :func:`make_predictor`, for every kind of :data:`PREDICTOR_KINDS`.

The LSTMs (``revpred``, ``tributary``) are trained with ``spottune.cache.LIGHT_REVPRED`` and cached on disk; their
training modules need torch and are imported only when one is asked for (a build without torch falls back to the
constant hazard, :func:`make_predictor` ``fallback``). The ``calibrated`` model is cached the same way
(:func:`calibrated_predictor`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np
import sklearn

import provisioner
from revpred import RevPredError
from revpred.baselines import ConstantHazard, EmpiricalRate
from revpred.calibrated import CalibratedRevocation
from revpred.errors import OneClassError
from revpred.labels import market_seed, max_rise, random_max_prices, revocation_labels, sample_times
from revpred.ladder import DELTA_LADDER_USD_PER_HOUR
from revpred.online_hazard import OnlineHazard
from revpred.protocol import ConstantRevocation, RevocationPredictor
from spotmarket.prices import Market, PriceHistory
from spottune.backends.sim._oracle import HindsightPredictor
from spottune.cache import CALIBRATED_MODULES, LIGHT_REVPRED, model_set_dir
from spottune.compose.market import DAY_S, MarketSetup
from spottune.errors import ConfigError
from spottune.experiment import PREDICTOR_KINDS

__all__ = ["CALIBRATED_HISTORY_DAYS", "CALIBRATED_P_CAP", "PREDICTOR_KINDS", "calibrated_predictor", "constant_hazard",
           "empirical_rate_predictor", "make_predictor", "selection_p_cap"]

log = logging.getLogger(__name__)

#: Days of price history before the start that the ``calibrated`` and ``online-hazard`` predictors train on
#: (at least ``train_days``); set to "what a user has" (AWS serves 90 days), not tuned (decision P7).
CALIBRATED_HISTORY_DAYS = 28.0
#: The refund objective prices ``min(p, 0.6)`` of the ``calibrated`` predictor (design R6): calibrated over
#: all its queries, it over-states the p of the candidates the argmin picks (chosen at p ≈ 0.98, revoked
#: 55 %). Chosen on the tuning starts (``benchmarks/bench_curse.py``; docs/design/evaluation.md "Optimizer's curse").
CALIBRATED_P_CAP = 0.6


def constant_hazard(history: PriceHistory, markets: Sequence[Market], lo_s: float, hi_s: float, seed: int,
                    stride_min: int | None = None) -> ConstantHazard:
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
    stride = LIGHT_REVPRED["stride_min"] if stride_min is None else stride_min
    rates = {}
    for m in markets:
        series = history[m]
        t = sample_times(series, lo_s, hi_s, stride)
        if t.size == 0:
            raise ConfigError(f"market {m}: the predictor's training window holds no decision time; "
                              "start later or lower train_days")
        rng = np.random.default_rng(market_seed(seed, m))
        rates[m] = float(revocation_labels(series, t, random_max_prices(series, t, rng)).mean())
    return ConstantHazard.from_rates(rates)


def calibrated_predictor(market: MarketSetup, lo_s: float, hi_s: float, seed: int,
                         feature_set: str = "base") -> CalibratedRevocation:
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
    default, is the 14 columns of docs/design/revpred.md).

    Parameters
    ----------
    market : MarketSetup
        The replayed market: its history, pool markets and catalog.
    lo_s, hi_s : float
        Training window, seconds since the epoch (UTC).
    seed : int
        Seeds the training.
    feature_set : str, default "base"
        The model's columns (see above).

    Returns
    -------
    revpred.calibrated.CalibratedRevocation
        Trained (or read from the cache); p is the probability of a revocation within the next hour.

    Raises
    ------
    revpred.RevPredError
        If the window holds one class of labels only (train on more days), or on an unknown feature set.
    """
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


def empirical_rate_predictor(market: MarketSetup, lo_s: float, hi_s: float, stride_min: int = 10) -> EmpiricalRate:
    """The market's base rate as a predictor: :class:`revpred.EmpiricalRate` on ``[lo_s, hi_s]``.

    p(market, t, b) is the (Laplace-smoothed) share of the window's decision times, every ``stride_min``
    minutes, whose price rose above ``b − price(t)`` over the current price within the hour: the market's
    own frequency for the same question, with no model. The refund objective's optimizer's-curse
    correction shrinks the calibrated p towards it (``RefundProvisioner(p_prior=...)``).

    Parameters
    ----------
    market : MarketSetup
        The replayed market.
    lo_s, hi_s : float
        The window, seconds since the epoch (UTC).
    stride_min : int, default 10
        Minutes between the window's decision times.

    Returns
    -------
    revpred.EmpiricalRate
        p per market and max price (USD/hour), from the window's price rises.

    Raises
    ------
    revpred.RevPredError
        If a market has no decision time in the window.
    """
    rises = {}
    for m in market.markets:
        series = market.history[m]
        rises[m] = max_rise(series, sample_times(series, lo_s, hi_s, stride_min))
    return EmpiricalRate(market.history, rises)


def _learned(kind: str, history: PriceHistory, markets: list[Market], lo_s: float, hi_s: float, seed: int,
             kinds: Sequence[str], cache: str, log_fn: Callable[[str], None] | None) -> tuple[RevocationPredictor, str]:
    """Trained ``kind`` (revpred or tributary) from the model set of ``kinds``, cached by data, window, code.

    Imports the training modules here: they need torch, which a build may lack (:func:`make_predictor` ``fallback``).
    """
    from revpred.store import INDEX, load_model_set, save_model_set
    from revpred.training import TrainConfig, train_markets

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
                   given_capacity: bool | None = None) -> tuple[RevocationPredictor, str]:
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
        when it has one; learns from the run through ``observe``). On a calm market (the window's labels hold
        one class only, :class:`revpred.errors.OneClassError`) both use :func:`constant_hazard` on that window
        instead, and the note says so.
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

    Returns
    -------
    predictor : revpred.protocol.RevocationPredictor
        p(market, t, max price): the probability of a revocation within the next hour.
    note : str
        One line saying which predictor it is (and a fallback, if one was taken).

    Raises
    ------
    ConfigError
        On an unknown kind.
    """
    if kind not in PREDICTOR_KINDS:
        raise ConfigError(f"predictor is {kind!r}, but must be one of {', '.join(PREDICTOR_KINDS)}")
    if kind == "auto":  # the predictor that answers the market mode's question
        kind = "calibrated" if market.market_mode == "legacy" else "online-hazard"
    days = (hi_s - lo_s) / DAY_S
    if kind == "none":
        return ConstantRevocation(0.0), "p = 0 (no revocation prediction)"
    if kind == "hindsight":
        return HindsightPredictor(market.revocation_model), "hindsight (p from the replay's own revocations)"
    if kind in ("calibrated", "online-hazard"):
        # cheap to train (seconds), so it reads the history a user has at hand: up to 28 days before the
        # start (AWS serves 90), never less than the given window (decision P7, docs/design/decisions.md)
        first_s = max(float(market.history[m].start_s) for m in market.markets)
        cal_lo_s = max(first_s, min(lo_s, hi_s - CALIBRATED_HISTORY_DAYS * DAY_S))
        try:
            pred = calibrated_predictor(market, cal_lo_s, hi_s, seed, feature_set)
            pred_desc = pred.describe()
        except OneClassError as exc:  # a calm market (no revocation at any max price): the constant hazard (AWS16)
            pred = constant_hazard(market.history, market.markets, cal_lo_s, hi_s, seed)
            pred_desc = (f"constant hazard per market fitted on {(hi_s - cal_lo_s) / DAY_S:g} days (the calibrated "
                         f"model cannot be trained: {'every' if exc.revoked else 'no'} query was revoked)")
        if kind == "calibrated":
            return pred, f"{pred_desc}, before the start"
        model = market.revocation_model
        cal = getattr(model, "calibration", None)  # the modern model's; None: the default
        if given_capacity is None:
            given_capacity = bool(getattr(model, "outages", False) and getattr(model, "correlated", False))
        launch = "a fulfilled launch" if given_capacity else "a launch at any time"
        return (OnlineHazard.from_calibration(cal, pred, given_capacity=given_capacity),
                f"online-hazard: gamma-Poisson interruption rate per market (prior from the interruption "
                f"traces for {launch}, updated by the run) combined with {pred_desc}")
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


def selection_p_cap(predictor: RevocationPredictor) -> float:
    """The refund objective's ceiling on p for ``predictor`` (design R6).

    Parameters
    ----------
    predictor : revpred.protocol.RevocationPredictor
        The provisioner's predictor.

    Returns
    -------
    float in (0, 1)
        :data:`CALIBRATED_P_CAP` (0.6) for a :class:`revpred.calibrated.CalibratedRevocation` (the ``calibrated``
        predictor, legacy mode's default), else :data:`provisioner.P_CAP` (0.999, no ceiling).
    """
    return CALIBRATED_P_CAP if isinstance(predictor, CalibratedRevocation) else provisioner.P_CAP
