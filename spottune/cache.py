"""The on-disk cache of trained revocation models and recorded curves (``$SPOTTUNE_CACHE``).

Everything cached is deterministic for its key, so a cache hit gives the same result as recomputing.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: RevPred settings of the main job and the evaluation: lighter than ``revpred train`` (spec §1.7,
#: D6: stride 1-5 min, LSTM 3x64) to meet the 8-minute ``make run`` budget on 2 cores.
LIGHT_REVPRED = {"stride_min": 10, "epochs": 4, "hidden_size": 32, "validation_days": 0.5, "n_threads": 1}

_REVPRED_MODULES = ("features.py", "labels.py", "calibration.py", "model.py", "baselines.py", "training.py", "store.py")


def cache_dir() -> Path:
    """``$SPOTTUNE_CACHE`` or ``~/.cache/spottune``."""
    return Path(os.environ.get("SPOTTUNE_CACHE") or Path.home() / ".cache" / "spottune")


def revpred_code_digest() -> str:
    """sha256 of RevPred's model code: part of every model cache key, so a code change retrains."""
    import revpred

    digest = hashlib.sha256()
    for name in _REVPRED_MODULES:
        digest.update((Path(revpred.__file__).parent / name).read_bytes())
    return digest.hexdigest()


def model_set_dir(kind: str, history: Any, markets: Sequence[Any], lo_s: float, hi_s: float, config: Any,
                  extra: Any = None) -> Path:
    """Cache folder of revocation models trained on ``[lo_s, hi_s]`` (seconds since the epoch, UTC).

    The key covers the price data of ``markets`` (first/last record and count), the window, the
    training config, RevPred's code and ``extra``.
    """
    data = {str(m): [float(history[m].times_s[0]), float(history[m].times_s[-1]), len(history[m])] for m in markets}
    payload = json.dumps([data, lo_s, hi_s, config.to_dict(), revpred_code_digest(), extra], sort_keys=True, default=str)
    return cache_dir() / kind / hashlib.sha256(payload.encode()).hexdigest()[:16]
