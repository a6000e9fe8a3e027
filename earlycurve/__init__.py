"""earlycurve: staged learning-curve prediction (the SpotTune paper's EarlyCurve, Eq 4-7).

Public surface (one concept per private module):

- :class:`EarlyCurve` — Eq 4 refitted per learning-rate stage (Eq 7), online and batch, with a
  plateau rule and an uncertainty interval (``_model``);
- :class:`FinalMetricPredictor`, :class:`Prediction` — the contract the orchestrator uses
  (``_protocol``); :class:`SLAQ`, :class:`LastValue`, :class:`BestValue` — baselines (``_baselines``);
- :class:`CurveFitter`, :class:`CurveParams`, :func:`curve` — one stage of Eq 4 (``_curve``);
- :class:`StageRule`, :class:`PlateauRule`, :func:`split_stages`, :func:`is_plateau` (``_stages``);
- :class:`ParametricEnsemble` — Domhan et al. 2015 families, median of the fits (``_extrapolate``);
  :class:`RankConfidenceRule`, :func:`prob_top_k` — stop when P(top-k) < ε (``_rank_stop``);
  :class:`RankConfidenceStopping` — that rule on a live study, calibrated on its finished trials (``_online_stop``);
  :class:`PredictiveStopping` — predictive ASHA: re-judged rungs, slope-corrected ranks, optimistic bound (``_predictive_stop``);
- :class:`ResidualCurvePredictor` — last value + a residual learned from previously recorded curves (``_residual``);
  :class:`HyperparameterCurvePredictor` — the final loss from the hyperparameters and the partial curve, learned
  from previous runs of the search space (``_hyper``);
- :func:`rank_trials`, :class:`Ranking` (``_ranking``); :func:`to_loss`, :func:`from_loss` (``_mode``).

Everything here computes and does no I/O. The data loaders and the evaluation live in
:mod:`earlycurve.evaluation`, which this module does not import.
"""

from earlycurve._baselines import SLAQ, BestValue, LastValue
from earlycurve._curve import CurveFitter, CurveParams, curve
from earlycurve._extrapolate import FAMILIES, ParametricEnsemble
from earlycurve._mode import from_loss, to_loss
from earlycurve._model import RECOMMENDED, EarlyCurve
from earlycurve._protocol import ConfigAwarePredictor, FinalMetricPredictor, Prediction
from earlycurve._online_stop import RUNG_FRACTIONS, Decision, RankConfidenceStopping, rungs_for
from earlycurve._predictive_stop import (PREDICTIVE_DEFAULTS, PREDICTIVE_KEYS, PredictiveStopping,
                                         check_predictive_options, predictive_options, predictive_settings)
from earlycurve._hyper import HYPER_THETAS, ConfigEncoder, HyperparameterCurvePredictor
from earlycurve._residual import RESIDUAL_THETAS, ResidualCurvePredictor
from earlycurve._rank_stop import RankConfidenceRule, prob_top_k
from earlycurve._ranking import Ranking, rank_trials
from earlycurve._stages import NOISY_STAGE_RULE, PlateauRule, Stage, StageRule, is_plateau, split_stages
from earlycurve.errors import (
    CurveFitError,
    EarlyCurveError,
    InvalidCurveError,
    NotFittedError,
    TooFewPointsError,
)

__all__ = [
    "ConfigAwarePredictor",
    "EarlyCurve",
    "ParametricEnsemble",
    "FAMILIES",
    "RankConfidenceRule",
    "prob_top_k",
    "RankConfidenceStopping",
    "PredictiveStopping",
    "PREDICTIVE_DEFAULTS",
    "predictive_options",
    "check_predictive_options",
    "predictive_settings",
    "PREDICTIVE_KEYS",
    "ResidualCurvePredictor",
    "RESIDUAL_THETAS",
    "HyperparameterCurvePredictor",
    "HYPER_THETAS",
    "ConfigEncoder",
    "Decision",
    "RUNG_FRACTIONS",
    "rungs_for",
    "RECOMMENDED",
    "FinalMetricPredictor",
    "Prediction",
    "SLAQ",
    "LastValue",
    "BestValue",
    "CurveFitter",
    "CurveParams",
    "curve",
    "StageRule",
    "NOISY_STAGE_RULE",
    "PlateauRule",
    "Stage",
    "split_stages",
    "is_plateau",
    "Ranking",
    "rank_trials",
    "to_loss",
    "from_loss",
    "EarlyCurveError",
    "CurveFitError",
    "TooFewPointsError",
    "InvalidCurveError",
    "NotFittedError",
]
