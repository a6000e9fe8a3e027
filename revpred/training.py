"""Offline training of RevPred and its baselines for a set of markets over one training window.

One market, one window (``fit_market``):

1. decision times every ``stride_min`` minutes with 118 min of history and the label hour inside the
   window (``revpred.labels.sample_times``);
2. record features (``revpred.features.record_features``), built once and shared by every model;
3. max prices: Algorithm 2 for RevPred and logistic regression, ``price + U[0.00001, 0.2]`` for the
   Tributary baseline (seeded per market);
4. labels from the raw records (``revpred.labels.revocation_labels``);
5. split [I]: the last ``validation_days`` (default 1, the paper's "last training day"; at most 1/8 of
   the window) validate; the training rows end one hour before them so no training label covers the
   validation period;
6. a :class:`~revpred.features.FeatureScaler` per model, fitted on its training rows only; then the
   estimator; then (LSTMs) the Eq 3 calibrator.

The empirical-rate baseline keeps the max rise of every training hour; the constant hazard the positive
share under each max-price rule (train + validation rows: both lie inside the training window).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from revpred.baselines import ConstantHazard, EmpiricalRate, PresentRecordLogistic
from revpred.errors import RevPredError
from revpred.features import FeatureScaler, make_inputs, record_features
from revpred.labels import (HORIZON_S, alg2_max_prices, market_seed, max_rise, random_max_prices,
                            revocation_labels, sample_times)
from revpred.model import RevPredClassifier
from revpred.predictor import MarketModel, RevPred
from spotmarket.prices import Market, PriceHistory, PriceSeries

#: Learned per-market models and the max-price rule of their training labels.
LEARNED_KINDS = {"revpred": "alg2", "tributary": "random", "logreg": "alg2"}
RULES = ("random", "alg2")
ALL_KINDS = ("revpred", "tributary", "logreg", "empirical", "constant")


@dataclass(frozen=True)
class TrainConfig:
    """Training settings shared by all markets of one run (all recorded with the models).

    Attributes
    ----------
    stride_min : int
        Minutes between training decision times [I: 5 to meet the CPU budget; the paper implies 1].
    epochs : int
        LSTM epochs [I].
    grid_method : {"ffill", "linear"}
        Minute-grid method (D3).
    variations : {"events", "grid"}
        Algorithm 2 variations (D4).
    calibration : str
        Eq 3 calibrator (D5).
    validation_days : float
        Length of the validation slice at the end of the training window (capped at 1/8 of the window).
    seed : int
        Base seed; each market derives its own from the seed and its name.
    revpred_max_prices : {"alg2", "mixed"}
        Max prices of RevPred's training rows: Algorithm 2 (the paper, default) or [I] "mixed": each row
        gets its Algorithm 2 or its random (``price + U[0.00001, 0.2]``) max price with probability 1/2,
        so that the model also sees the max prices SpotTune queries at inference (D1).
    n_threads : int or None
        torch threads (None: leave as is).
    hidden_size, lr, batch_size : model settings (D6). [I] batch 64, not the suggested 256: with a
        stride of 5-10 minutes a market has ~1-2k training rows, and 256 leaves too few Adam steps
        per epoch (measured: same CPU cost per sample within ~15%).
    """

    stride_min: int = 5
    epochs: int = 8
    grid_method: str = "ffill"
    variations: str = "events"
    calibration: str = "prior_shift"
    validation_days: float = 1.0
    seed: int = 0
    revpred_max_prices: str = "alg2"
    n_threads: int | None = None
    hidden_size: int = 64
    lr: float = 1e-3
    batch_size: int = 64

    def to_dict(self) -> dict:
        """JSON-able settings (for the model directory's ``meta.json``).

        Returns
        -------
        dict
            One key per field.
        """
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        """Inverse of :meth:`to_dict`; unknown keys are ignored, missing ones take their defaults.

        Parameters
        ----------
        d : dict

        Returns
        -------
        TrainConfig
        """
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


@dataclass
class TrainingData:
    """Samples of one market in one window (all arrays share the first axis n, time-ordered).

    Attributes
    ----------
    times_s : ndarray (n,)
    feats : ndarray (n, 60, 6)
    b : dict rule -> ndarray (n,), USD/hour
    y : dict rule -> ndarray (n,), 0/1
    train, val : ndarray (n,) of bool
    """

    market: Market
    times_s: np.ndarray
    feats: np.ndarray
    b: dict[str, np.ndarray]
    y: dict[str, np.ndarray]
    train: np.ndarray
    val: np.ndarray


def training_data(series: PriceSeries, start_s: float, end_s: float, config: TrainConfig) -> TrainingData:
    """Build the samples of ``series`` in the training window ``[start_s, end_s]`` (see module docstring).

    ``b`` and ``y`` hold the rules ``"alg2"``, ``"random"`` and ``"mixed"`` (see :class:`TrainConfig`).
    """
    if config.revpred_max_prices not in ("alg2", "mixed"):
        raise RevPredError(f"revpred_max_prices is {config.revpred_max_prices!r}, but must be 'alg2' or 'mixed'")
    t = sample_times(series, start_s, end_s, config.stride_min)
    if t.size < 20:
        raise RevPredError(f"market {series.market}: only {t.size} training samples in the window; "
                           "it needs a longer window or more price history")
    feats = record_features(series, t, config.grid_method)
    rng = np.random.default_rng(market_seed(config.seed, series.market))
    b = {"alg2": alg2_max_prices(series, t, variations=config.variations, method=config.grid_method),
         "random": random_max_prices(series, t, rng)}
    b["mixed"] = np.where(rng.uniform(size=t.size) < 0.5, b["alg2"], b["random"])
    y = {rule: revocation_labels(series, t, bb) for rule, bb in b.items()}
    val_s = min(config.validation_days * 86400.0, 0.125 * (float(end_s) - float(start_s)))
    val_start = min(float(end_s), series.end_s) - HORIZON_S - val_s
    val = t >= val_start
    train = t <= val_start - HORIZON_S
    if train.sum() < 10:
        raise RevPredError(f"market {series.market}: the training window leaves {int(train.sum())} training rows "
                           f"after the {config.validation_days}-day validation slice")
    return TrainingData(series.market, t, feats, b, y, train, val)


def fit_learned(data: TrainingData, kind: str, config: TrainConfig, start_s: float, end_s: float,
                on_epoch: Callable[[int, float], None] | None = None) -> MarketModel:
    """Fit one learned model (``revpred``, ``tributary`` or ``logreg``) on prepared samples."""
    rule = config.revpred_max_prices if kind == "revpred" else LEARNED_KINDS[kind]
    X = make_inputs(data.feats, data.b[rule])
    y = data.y[rule]
    scaler = FeatureScaler().fit(X[data.train])
    Xs = scaler.transform(X)
    t0 = time.perf_counter()
    if kind == "logreg":
        est = PresentRecordLogistic().fit(Xs[data.train], y[data.train])
    else:
        est = RevPredClassifier(architecture=kind, epochs=config.epochs, calibration=config.calibration,
                                hidden_size=config.hidden_size, lr=config.lr, batch_size=config.batch_size,
                                random_state=market_seed(config.seed, data.market), n_threads=config.n_threads)
        eval_set = (Xs[data.val], y[data.val]) if data.val.any() else None
        est.fit(Xs[data.train], y[data.train], eval_set=eval_set, on_epoch=on_epoch)
    info = {"n_train": int(data.train.sum()), "n_val": int(data.val.sum()), "rule": rule,
            "train_positive_share": float(y[data.train].mean()),
            "val_positive_share": float(y[data.val].mean()) if data.val.any() else None,
            "fit_seconds": round(time.perf_counter() - t0, 3)}
    return MarketModel(data.market, kind, scaler, est, config.grid_method, float(start_s), float(end_s), info)


@dataclass
class MarketFit:
    """Everything trained for one market in one window.

    Attributes
    ----------
    models : dict kind -> MarketModel
        Learned models (subset of ``revpred``, ``tributary``, ``logreg``).
    rises : ndarray (k,) or None
        Empirical-rate table (max rise per training hour, USD/hour).
    rates : dict rule -> float
        Positive share of the training labels per max-price rule (constant hazard).
    """

    market: Market
    train_start_s: float
    train_end_s: float
    config: TrainConfig
    models: dict[str, MarketModel] = field(default_factory=dict)
    rises: np.ndarray | None = None
    rates: dict[str, float] = field(default_factory=dict)
    info: dict = field(default_factory=dict)


def fit_market(series: PriceSeries, start_s: float, end_s: float, config: TrainConfig,
               kinds: Iterable[str] = ALL_KINDS,
               on_epoch: Callable[[str, int, float], None] | None = None) -> MarketFit:
    """Train the requested ``kinds`` for one market on the window ``[start_s, end_s]`` (seconds, UTC)."""
    kinds = list(kinds)
    for k in kinds:
        if k not in ALL_KINDS:
            raise RevPredError(f"model kind {k!r} is unknown; use some of {ALL_KINDS}")
    t0 = time.perf_counter()
    data = training_data(series, start_s, end_s, config)
    fit = MarketFit(series.market, float(start_s), float(end_s), config)
    fit.info["features_seconds"] = round(time.perf_counter() - t0, 3)
    for kind in kinds:
        if kind in LEARNED_KINDS:
            cb = (lambda e, loss, _k=kind: on_epoch(_k, e, loss)) if on_epoch else None
            fit.models[kind] = fit_learned(data, kind, config, start_s, end_s, cb)
    if "empirical" in kinds:
        fit.rises = max_rise(series, data.times_s)
    if "constant" in kinds:
        fit.rates = {rule: float(data.y[rule].mean()) for rule in RULES}
    fit.info["n_samples"] = int(data.times_s.size)
    fit.info["positive_share"] = {rule: float(data.y[rule].mean()) for rule in RULES}
    fit.info["seconds"] = round(time.perf_counter() - t0, 3)
    return fit


class ModelSet:
    """Trained fits for several markets over one window; hands out one predictor per model kind.

    Parameters
    ----------
    history : PriceHistory
        Price history the predictors read features from.
    fits : mapping Market -> MarketFit

    Raises
    ------
    RevPredError
        If ``fits`` is empty.
    """

    def __init__(self, history: PriceHistory, fits: dict[Market, MarketFit]):
        if not fits:
            raise RevPredError("a model set needs at least one market")
        self.history = history
        self.fits = dict(fits)

    @property
    def markets(self) -> list[Market]:
        """Markets with a fit, sorted."""
        return sorted(self.fits)

    @property
    def train_window_s(self) -> tuple[float, float]:
        """(earliest start, latest end) of the training windows, seconds since the epoch."""
        return (min(f.train_start_s for f in self.fits.values()), max(f.train_end_s for f in self.fits.values()))

    def kinds(self) -> list[str]:
        """Model kinds available for every market.

        Returns
        -------
        list of str
            A subset of ``ALL_KINDS``, in its order.
        """
        out = []
        for kind in ALL_KINDS:
            if kind in LEARNED_KINDS:
                ok = all(kind in f.models for f in self.fits.values())
            elif kind == "empirical":
                ok = all(f.rises is not None for f in self.fits.values())
            else:
                ok = all(f.rates for f in self.fits.values())
            if ok:
                out.append(kind)
        return out

    def predictor(self, kind: str, rule: str = "alg2", raw: bool = False):
        """The :class:`RevocationPredictor` of ``kind`` over all markets.

        ``rule`` selects which training labels the constant hazard is fitted on; ``raw`` returns the
        uncalibrated output of LSTM models.

        Parameters
        ----------
        kind : str
            One of ``ALL_KINDS``: ``"revpred"``, ``"tributary"``, ``"logreg"``, ``"empirical"``, ``"constant"``.
        rule : {"alg2", "random"}, default "alg2"
            The max-price rule of the constant hazard's labels (Algorithm 2, or decision D1's random max price).
        raw : bool, default False
            LSTM models only: skip the Eq 3 calibration.

        Returns
        -------
        RevocationPredictor
            :class:`RevPred`, :class:`EmpiricalRate` or :class:`ConstantHazard`.

        Raises
        ------
        RevPredError
            If the kind or rule is unknown or a market lacks that model.
        """
        if kind in LEARNED_KINDS:
            missing = [str(m) for m, f in self.fits.items() if kind not in f.models]
            if missing:
                raise RevPredError(f"no {kind} model for markets {missing[:3]}")
            return RevPred(self.history, {m: f.models[kind] for m, f in self.fits.items()}, raw=raw)
        if kind == "empirical":
            return EmpiricalRate(self.history, {m: f.rises for m, f in self.fits.items() if f.rises is not None})
        if kind == "constant":
            if rule not in RULES:
                raise RevPredError(f"max-price rule {rule!r} is unknown; use one of {RULES}")
            return ConstantHazard.from_rates({m: f.rates[rule] for m, f in self.fits.items()})
        raise RevPredError(f"model kind {kind!r} is unknown; use one of {ALL_KINDS}")


def train_markets(history: PriceHistory, markets: Sequence[Market], start_s: float, end_s: float,
                  config: TrainConfig = TrainConfig(), kinds: Iterable[str] = ALL_KINDS,
                  progress: Callable[[Market, str, int, float], None] | None = None) -> ModelSet:
    """Train every market (sequentially) and return the :class:`ModelSet`.

    Parameters
    ----------
    history : PriceHistory
    markets : sequence of Market
    start_s, end_s : float
        Training window, seconds since the epoch (UTC); ``end_s - start_s`` should be days.
    config : TrainConfig
    kinds : iterable of str
        Subset of ``ALL_KINDS``.
    progress : callable(market, kind, epoch, loss), optional

    Returns
    -------
    ModelSet

    Raises
    ------
    RevPredError
        If the window ends before it starts, or a market cannot be trained.
    PriceDataError
        If a market is not in the history.
    """
    if end_s <= start_s:
        raise RevPredError("the training window ends before it starts")
    kinds = list(kinds)
    fits = {}
    for m in markets:
        cb = (lambda k, e, loss, _m=m: progress(_m, k, e, loss)) if progress else None
        fits[m] = fit_market(history[m], start_s, end_s, config, kinds, cb)
    return ModelSet(history, fits)
