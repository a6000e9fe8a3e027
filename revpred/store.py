"""Model directories: save and load a :class:`~revpred.training.ModelSet` without pickle.

Layout::

    DIR/revpred.json               index: format, version, {market: subdirectory}
    DIR/<market-slug>/meta.json    market, training window, config, feature scaling, calibration,
                                   estimator parameters, logistic coefficients, empirical table, rates
    DIR/<market-slug>/revpred.pt   torch state_dict of the RevPred network
    DIR/<market-slug>/tributary.pt torch state_dict of the Tributary-style network

Weights are loaded with ``torch.load(..., weights_only=True)``. Loading checks the format version, that
the stored market is the requested one (a model for another market is refused with
:class:`RevPredError`), that the training window is well formed, and that the weights fit the stored
architecture.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import numpy as np
import torch

from revpred.baselines import PresentRecordLogistic
from revpred.errors import RevPredError
from revpred.features import FeatureScaler
from revpred.model import RevPredClassifier
from revpred.predictor import MarketModel
from spotmarket.prices import Market, PriceHistory, to_timestamp
from revpred.training import LEARNED_KINDS, MarketFit, ModelSet, TrainConfig

FORMAT = "revpred-models"
FORMAT_VERSION = 1
INDEX = "revpred.json"


def _version() -> str:
    try:
        return metadata.version("spottune")
    except metadata.PackageNotFoundError:  # pragma: no cover - source checkout without install
        return "unknown"


def market_slug(market: Market) -> str:
    """File-system-safe directory name of a market, e.g. ``us-east-1a_r3.large_Linux_UNIX``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(market)).strip("_")


def _iso(t_s: float) -> str:
    return to_timestamp(t_s).isoformat()


def _json_default(o: object) -> object:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON-able: {type(o).__name__}")


def save_market_fit(path: str | Path, fit: MarketFit) -> Path:
    """Write one market's fit into directory ``path`` (created). Returns the directory."""
    d = Path(path)
    d.mkdir(parents=True, exist_ok=True)
    models = {}
    for kind, mm in fit.models.items():
        entry = {"grid_method": mm.grid_method, "scaler": mm.scaler.to_dict(), "info": mm.info}
        if kind == "logreg":
            entry["estimator"] = mm.estimator.export_state()
        else:
            meta, state = mm.estimator.export_state()
            entry["estimator"] = meta
            entry["file"] = f"{kind}.pt"
            torch.save(state, d / entry["file"])
        models[kind] = entry
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "spottune_version": _version(),
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "market": str(fit.market),
        "train_start": _iso(fit.train_start_s),
        "train_end": _iso(fit.train_end_s),
        "train_start_s": fit.train_start_s,
        "train_end_s": fit.train_end_s,
        "config": fit.config.to_dict(),
        "info": fit.info,
        "models": models,
        "empirical": None if fit.rises is None else {"rises_usd_per_hour": np.asarray(fit.rises).tolist()},
        "constant": {"positive_share": fit.rates} if fit.rates else None,
    }
    (d / "meta.json").write_text(json.dumps(meta, indent=1, default=_json_default))
    return d


def save_model_set(path: str | Path, model_set: ModelSet) -> Path:
    """Write every market of ``model_set`` under ``path`` and (re)write the index.

    Markets already indexed in ``path`` and not in ``model_set`` are kept.

    Parameters
    ----------
    path : str or Path
        The model directory (created if needed).
    model_set : ModelSet

    Returns
    -------
    Path
        The model directory.

    Raises
    ------
    RevPredError
        If ``path`` exists and is not a directory, or its index is damaged.
    """
    root = Path(path)
    if root.exists() and not root.is_dir():
        raise RevPredError(f"model output {root} exists and is not a directory")
    root.mkdir(parents=True, exist_ok=True)
    index = _read_index(root) if (root / INDEX).exists() else {"markets": {}}
    for m, fit in model_set.fits.items():
        save_market_fit(root / market_slug(m), fit)
        index["markets"][str(m)] = market_slug(m)
    index.update({"format": FORMAT, "format_version": FORMAT_VERSION, "spottune_version": _version()})
    (root / INDEX).write_text(json.dumps(index, indent=1))
    return root


def _read_json(p: Path) -> dict:
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise RevPredError(f"{p} does not exist") from None
    except (OSError, ValueError) as exc:
        raise RevPredError(f"{p}: unreadable model metadata ({exc})") from None
    if not isinstance(data, dict):
        raise RevPredError(f"{p} holds a JSON {type(data).__name__}, but must hold an object; it is damaged or "
                           "not a RevPred model file")
    return data


def _config_from_meta(d: Path, config: object) -> TrainConfig:
    """The training config stored in ``meta.json``, checked key by key (never silently defaulted)."""
    import dataclasses

    where = f"model in {d}: meta.json config"
    if not isinstance(config, dict):
        raise RevPredError(f"{where} is a {type(config).__name__}, but must be an object of training settings")
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(config) - set(fields))
    if unknown:
        raise RevPredError(f"{where} has unknown key(s) {', '.join(map(repr, unknown))} (known: {', '.join(fields)})")
    missing = [k for k in fields if k not in config]
    if missing:
        raise RevPredError(f"{where} lacks the key(s) {', '.join(map(repr, missing))}; it is damaged")
    for name, f in fields.items():
        value, default = config[name], f.default
        if default is None or isinstance(default, dataclasses._MISSING_TYPE):  # noqa: SLF001
            ok = value is None or isinstance(value, (int, float, str))
        elif isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif isinstance(default, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        else:
            ok = isinstance(value, type(default))
        if not ok:
            raise RevPredError(f"{where}: {name} is {value!r}, but must be a {type(default).__name__} "
                               f"like the default {default!r}")
    try:
        return TrainConfig(**config)
    except (TypeError, ValueError) as exc:
        raise RevPredError(f"{where} is invalid ({exc})") from None


def _check_format(d: dict, where: Path) -> None:
    if d.get("format") != FORMAT:
        raise RevPredError(f"{where} is not a RevPred model file")
    if d.get("format_version") != FORMAT_VERSION:
        raise RevPredError(f"{where} has model format version {d.get('format_version')}; this revpred reads "
                           f"version {FORMAT_VERSION}; retrain with `revpred train`")


def _read_index(root: Path) -> dict:
    if not root.is_dir():
        raise RevPredError(f"model directory {root} does not exist")
    index = _read_json(root / INDEX)
    _check_format(index, root / INDEX)
    markets = index.get("markets")
    if not isinstance(markets, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in markets.items()):
        raise RevPredError(f"{root / INDEX}: 'markets' must be an object of market -> subfolder, not {markets!r}")
    if not markets:
        raise RevPredError(f"{root / INDEX} lists no market; train with `revpred train`")
    return index


def load_market_fit(path: str | Path, market: Market) -> MarketFit:
    """Load one market's fit from its directory, refusing a model stored for another market.

    Raises
    ------
    RevPredError
        Missing or unreadable files, another market, another format version, a malformed training
        window, or weights that do not fit the stored architecture.
    """
    d = Path(path)
    meta = _read_json(d / "meta.json")
    _check_format(meta, d / "meta.json")
    if meta.get("market") != str(market):
        raise RevPredError(f"model in {d} was trained for market {meta.get('market')}, not {market}; "
                           "refusing to use it for another market")
    try:
        return _market_fit_from_meta(d, meta, market)
    except KeyError as exc:  # a hand-edited or truncated meta.json
        raise RevPredError(f"model in {d}: meta.json lacks the field {exc.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError) as exc:  # a value of the wrong type or shape
        if isinstance(exc, RevPredError):
            raise
        raise RevPredError(f"model in {d}: meta.json is damaged ({type(exc).__name__}: {exc})") from None


def _market_fit_from_meta(d: Path, meta: dict, market: Market) -> MarketFit:
    start, end = float(meta["train_start_s"]), float(meta["train_end_s"])
    if not (math.isfinite(start) and math.isfinite(end) and start < end):
        raise RevPredError(f"model in {d} has a malformed training window {meta['train_start']} .. {meta['train_end']}")
    if meta["train_start"] != _iso(start) or meta["train_end"] != _iso(end):
        raise RevPredError(f"model in {d}: training window fields disagree")
    config = _config_from_meta(d, meta["config"])
    fit = MarketFit(market, start, end, config, info=meta.get("info", {}))
    models = meta["models"]
    if not isinstance(models, dict):
        raise RevPredError(f"model in {d}: meta.json 'models' is a {type(models).__name__}, but must be an object "
                           "of model kind -> entry")
    if not models and not meta.get("empirical") and not meta.get("constant"):
        raise RevPredError(f"model in {d}: meta.json holds no models (empty 'models', no empirical or constant "
                           "baseline); retrain with `revpred train`")
    for kind, entry in models.items():
        if kind not in LEARNED_KINDS:
            raise RevPredError(f"model in {d}: unknown model kind {kind!r}")
        scaler = FeatureScaler.from_dict(entry["scaler"])
        if kind == "logreg":
            est = PresentRecordLogistic.from_state(entry["estimator"])
        else:
            f = d / entry["file"]
            try:
                with warnings.catch_warnings():  # the one-line error below says it all
                    warnings.simplefilter("ignore")
                    state = torch.load(f, weights_only=True, map_location="cpu")
            except FileNotFoundError:
                raise RevPredError(f"model weights {f} are missing") from None
            except Exception as exc:  # torch raises UnpicklingError / RuntimeError on bad files
                raise RevPredError(f"model weights {f} are unreadable ({type(exc).__name__})") from None
            est = RevPredClassifier.from_state(entry["estimator"], state)
            if est.architecture != kind:
                raise RevPredError(f"model in {d}: {kind} entry holds a {est.architecture} network")
        fit.models[kind] = MarketModel(market, kind, scaler, est, entry["grid_method"], start, end, entry.get("info", {}))
    if meta.get("empirical"):
        fit.rises = np.asarray(meta["empirical"]["rises_usd_per_hour"], dtype=np.float64)
    if meta.get("constant"):
        fit.rates = {k: float(v) for k, v in meta["constant"]["positive_share"].items()}
    return fit


def index_markets(path: str | Path) -> list[Market]:
    """Markets listed in a model directory's index, sorted."""
    return sorted(Market.parse(m) for m in _read_index(Path(path))["markets"])


def read_index(path: str | Path) -> dict:
    """The index JSON of a model directory (checked)."""
    return _read_index(Path(path))


def load_model_set(path: str | Path, history: PriceHistory, markets: Sequence[Market] | None = None) -> ModelSet:
    """Load a model directory (all markets, or ``markets``) as a :class:`ModelSet` reading ``history``.

    Parameters
    ----------
    path : str or Path
        A directory written by :func:`save_model_set`.
    history : PriceHistory
        The prices the predictors read features from.
    markets : sequence of Market or str, optional
        Default: every market of the directory.

    Returns
    -------
    ModelSet

    Raises
    ------
    RevPredError
        A requested market is not in the directory, or any check of :func:`load_market_fit` fails.
    """
    root = Path(path)
    index = _read_index(root)
    wanted = [Market.parse(m) if isinstance(m, str) else m for m in (markets or index_markets(root))]
    fits = {}
    for m in wanted:
        sub = index["markets"].get(str(m))
        if sub is None:
            raise RevPredError(f"model directory {root} has no model for market {m}")
        fits[m] = load_market_fit(root / sub, m)
    return ModelSet(history, fits)
