"""Evaluation of spottune against baselines and peers on identical replays.

Policies (:mod:`._policies`), hindsight predictor / on-demand market rules (:mod:`._oracle`), the lower
bound on cost (:mod:`._lower_bound`), Optuna pruners as stop
rules (:mod:`._pruning`), studies with ground-truth curves (:mod:`._studies`), one run and its row
(:mod:`._runner`), the tidy table (:mod:`._table`), the figures (:mod:`._plots`) and the SEER-family baselines
executed on the replay (:mod:`._elastic`). The CLI is
``spottune simulate`` (``spottune/cli/_simulate.py``); results are discussed in ``docs/design/evaluation.md``.
The parts shared with ``spottune run`` and ``spottune.tune()`` (market and revocation model, predictors,
SpotTune provisioner, curve model) come from the composition root, :mod:`spottune.compose`.
"""

from spottune._pruning import PRUNERS, OptunaStopRule, make_pruner
from spottune.backends.sim._oracle import HindsightPredictor, NeverRevoked, OnDemandBilling, OraclePredictor
from spottune.compose.orchestrators import Assembly, assemble, fixed_types
from spottune.compose.policies import DEFAULT_POLICIES, ELASTIC, FIXED, THETA_SWEEP, Policy, get_policy, parse_policies
from spottune.evaluation._lower_bound import LowerBoundSettings, lower_bound_usd, trial_lower_bounds
from spottune.planning import BracketOrchestrator, TypeChooser
from spottune.evaluation._runner import Task, default_starts, run_task, supplementary_starts, tuning_starts
from spottune.evaluation._studies import Study, list_studies, load_study
from spottune.evaluation._table import COLUMNS, make_table, normalise_pcr, ratio_table, summarise, to_markdown

__all__ = [
    "Assembly", "BracketOrchestrator", "COLUMNS", "DEFAULT_POLICIES", "ELASTIC", "FIXED", "HindsightPredictor", "LowerBoundSettings", "NeverRevoked", "OnDemandBilling", "OptunaStopRule",
    "OraclePredictor", "PRUNERS", "Policy", "Study", "THETA_SWEEP", "Task", "assemble", "default_starts", "supplementary_starts", "tuning_starts",
    "fixed_types", "get_policy", "list_studies", "load_study", "lower_bound_usd", "make_pruner", "make_table", "normalise_pcr",
    "parse_policies", "ratio_table", "run_task", "summarise", "to_markdown", "trial_lower_bounds",
    "TypeChooser",
]
