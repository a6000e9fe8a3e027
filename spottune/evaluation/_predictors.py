"""Revocation predictors of the evaluation, trained once and cached on disk.

RevPred and the Tributary-style LSTM are trained together, for every market of the pool, on the
``train_days`` before the **earliest** start of the evaluation (leakage guard, decision E6: every start is
then after the training window). They read features from the price history up to each decision time,
so one model set serves every later start. [I] Lighter than ``revpred train`` (same settings as
``spottune run``, ``spottune.cache.LIGHT_REVPRED``): 10-minute stride, hidden size 32, 4 epochs, so that
the whole evaluation fits its CPU budget. The constant hazard is fitted on the same window without
training (:func:`spottune.compose.constant_hazard`); the hindsight predictor needs no training
(:class:`~spottune.evaluation.HindsightPredictor`). Every predictor is built by the composition root,
:func:`spottune.compose.make_predictor`.
"""

from __future__ import annotations

from collections.abc import Callable

from revpred.protocol import RevocationPredictor
from spottune.compose import PREDICTOR_KINDS, MarketSetup, make_predictor

#: Kinds trained together in the evaluation's cached model set.
LEARNED = ("revpred", "tributary")
KINDS = PREDICTOR_KINDS


def ensure_model_set(market: MarketSetup, lo_s: float, hi_s: float, seed: int,
                     log: Callable[[str], None] | None = None) -> None:
    """Train (or find cached) RevPred + Tributary for the pool on ``[lo_s, hi_s]`` (seconds since the epoch, UTC).

    Called once before the worker processes start, so they all read the cache.
    """
    make_predictor("revpred", market, lo_s, hi_s, seed, learned_kinds=LEARNED, log_fn=log)


def evaluation_predictor(kind: str, market: MarketSetup, lo_s: float, hi_s: float, seed: int) -> RevocationPredictor:
    """The :class:`~revpred.protocol.RevocationPredictor` of ``kind`` (one of :data:`KINDS`) for the evaluation.

    Raises
    ------
    ConfigError
        On an unknown kind.
    """
    return make_predictor(kind, market, lo_s, hi_s, seed, learned_kinds=LEARNED)[0]
