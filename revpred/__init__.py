"""revpred: spot price data and revocation prediction (the SpotTune paper's RevPred).

The model API is exported lazily (``revpred.RevPred`` etc.), so ``import revpred`` or
``import spotmarket.prices`` does not import torch.
"""

from importlib import import_module

from revpred.errors import PriceDataError, RevPredError

_LAZY = {
    "RevPred": "revpred.predictor",
    "MarketModel": "revpred.predictor",
    "RevPredClassifier": "revpred.model",
    "FeatureScaler": "revpred.features",
    "TrainConfig": "revpred.training",
    "ModelSet": "revpred.training",
    "train_markets": "revpred.training",
    "load_model_set": "revpred.store",
    "save_model_set": "revpred.store",
    "PresentRecordLogistic": "revpred.baselines",
    "EmpiricalRate": "revpred.baselines",
    "ConstantHazard": "revpred.baselines",
    "RevocationPredictor": "revpred.protocol",
    "OnlineRevocationPredictor": "revpred.protocol",
    "SignalledRevocationPredictor": "revpred.protocol",
    "ConstantRevocation": "revpred.protocol",
    "CalibratedRevocation": "revpred.calibrated",
    "OnlineHazard": "revpred.online_hazard",
}

__all__ = ["PriceDataError", "RevPredError", *_LAZY]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'revpred' has no attribute {name!r}")
    return getattr(import_module(module), name)
