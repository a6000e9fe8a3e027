"""Revocation predictors of the evaluation, trained once and cached on disk.

RevPred, the Tributary-style LSTM and the constant hazard are trained together, for every market of the
pool, on the ``train_days`` before the **earliest** start of the evaluation (spec §1.9 leakage guard:
every start is then after the training window). They read features from the price history up to each
decision time, so one model set serves every later start. [I] Lighter than ``revpred train`` (same
settings as ``spottune run``): 10-minute stride, hidden size 32, 4 epochs, so that the whole evaluation
fits its CPU budget. The oracle needs no training (:class:`~spottune.evaluation.OraclePredictor`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spottune.errors import ConfigError
from spottune.evaluation._oracle import OraclePredictor
from spottune.cache import LIGHT_REVPRED, model_set_dir

LEARNED = ("revpred", "tributary", "constant")
KINDS = (*LEARNED, "oracle", "none")


def model_set_path(history: Any, markets: list, lo_s: float, hi_s: float, seed: int) -> Path:
    """Cache folder of the model set trained on ``[lo_s, hi_s]`` (seconds since the epoch, UTC)."""
    from revpred.training import TrainConfig

    return model_set_dir("revpred-eval", history, markets, lo_s, hi_s, TrainConfig(seed=seed, **LIGHT_REVPRED), LEARNED)


def ensure_model_set(history: Any, markets: list, lo_s: float, hi_s: float, seed: int, log: Any = None) -> Path:
    """Train (or find cached) RevPred + Tributary + constant hazard for ``markets``; returns the folder."""
    from revpred.store import INDEX, save_model_set
    from revpred.training import TrainConfig, train_markets

    path = model_set_path(history, markets, lo_s, hi_s, seed)
    if (path / INDEX).exists():
        return path
    if log is not None:
        log(f"training RevPred, Tributary and constant hazard for {len(markets)} markets (cached in {path}) ...")
    model_set = train_markets(history, markets, lo_s, hi_s, TrainConfig(seed=seed, **LIGHT_REVPRED), kinds=LEARNED)
    save_model_set(path, model_set)
    return path


def make_predictor(kind: str, history: Any, markets: list, lo_s: float, hi_s: float, seed: int,
                   revocation_model: Any) -> Any:
    """The :class:`~revpred.protocol.RevocationPredictor` of ``kind`` (one of :data:`KINDS`).

    ``revpred`` / ``tributary`` / ``constant`` come from the cached model set (trained if missing); the
    constant hazard is fitted on the random max-price rule of D1, the rule used at inference.
    """
    from revpred.protocol import ConstantRevocation

    if kind == "none":
        return ConstantRevocation(0.0)
    if kind == "oracle":
        return OraclePredictor(revocation_model)
    if kind not in LEARNED:
        raise ConfigError(f"predictor is {kind!r}, but must be one of {', '.join(KINDS)}")
    from revpred.store import load_model_set

    path = ensure_model_set(history, markets, lo_s, hi_s, seed)
    model_set = load_model_set(path, history, markets)
    if kind == "constant":
        return model_set.predictor("constant", rule="random")
    return model_set.predictor(kind)
