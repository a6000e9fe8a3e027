"""The on-disk cache of trained revocation models (RevPred, Tributary, the calibrated predictor) and recorded curves
(``$SPOTTUNE_CACHE``).

Everything cached is deterministic for its key, so a cache hit gives the same result as recomputing.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: RevPred settings of the main job and the evaluation: lighter than ``revpred train`` (the paper's RevPred,
#: §III-B, at decision D6's sizes: stride 1-5 min, LSTM 3x64) to meet the 8-minute ``make run`` budget on 2 cores.
LIGHT_REVPRED = {"stride_min": 10, "epochs": 4, "hidden_size": 32, "validation_days": 0.5, "n_threads": 1}

_REVPRED_MODULES = ("features.py", "labels.py", "calibration.py", "model.py", "baselines.py", "training.py", "store.py")
#: The calibrated predictor's code (``revpred.calibrated`` and what makes its queries, labels and features)
CALIBRATED_MODULES = ("calibrated.py", "ladder.py", "ladder_features.py", "labels.py", "queries.py")


def cache_dir() -> Path:
    """``$SPOTTUNE_CACHE`` or ``~/.cache/spottune``."""
    return Path(os.environ.get("SPOTTUNE_CACHE") or Path.home() / ".cache" / "spottune")


def revpred_code_digest(modules: Sequence[str] = _REVPRED_MODULES) -> str:
    """sha256 of RevPred's model code (``modules``, files of the ``revpred`` package): part of every model
    cache key, so a code change retrains."""
    import revpred

    digest = hashlib.sha256()
    for name in modules:
        digest.update((Path(revpred.__file__).parent / name).read_bytes())
    return digest.hexdigest()


def _series_digest(series: Any) -> str:
    """SHA-256 of a price series' records (times and prices, float64) and its end, hex."""
    digest = hashlib.sha256()
    for arr in (series.times_s, series.prices):
        digest.update(np.ascontiguousarray(arr, dtype=np.float64).tobytes())
    digest.update(repr(float(series.end_s)).encode())
    return digest.hexdigest()


def model_set_dir(kind: str, history: Any, markets: Sequence[Any], lo_s: float, hi_s: float, config: Any,
                  extra: Any = None, modules: Sequence[str] = _REVPRED_MODULES) -> Path:
    """Cache folder of revocation models trained on ``[lo_s, hi_s]`` (seconds since the epoch, UTC).

    The key covers the price data of ``markets`` (a SHA-256 of every record's time and price, and the
    series' end), the window, the training config (an object with ``to_dict()``, or a dict), RevPred's code
    (``modules``) and ``extra``: an edited record anywhere in a series gives a new folder.
    """
    data = {str(m): _series_digest(history[m]) for m in markets}
    settings = config.to_dict() if hasattr(config, "to_dict") else config
    payload = json.dumps([data, lo_s, hi_s, settings, revpred_code_digest(modules), extra], sort_keys=True, default=str)
    return cache_dir() / kind / hashlib.sha256(payload.encode()).hexdigest()[:16]
