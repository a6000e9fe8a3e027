"""Pure schedulers of the multi-tenant service (``spottune serve``): no clock, no I/O, one concept per module.

======================  ===========================================================================================
module                  concept
======================  ===========================================================================================
:mod:`._fairness`       :func:`max_min_fair` of the org's USD/hour over entitlements and demands, :func:`round_loss`
                        (U, O, M, min(U + O, M)); Kandasamy et al., Algorithm 1 [R]
:mod:`._demands`        :class:`OnlineFairShare`: demands learned online by :class:`BinarySearchDemand` (efficient
                        and strategy-proof modes; noisy rewards: :class:`NoisyBinarySearchDemand` or the paper's
                        :class:`NonparametricTreeDemand`)
:mod:`._units`          :class:`UnitQueues`: Cerebro's pending Q and in-flight Q', heartbeats, re-queueing
:mod:`._teams`          :class:`HybridTeamPicker`: ease.ml's GREEDY team pick with the HYBRID fall-back
:mod:`._gpucb`          :class:`CostAwareGPUCB`: ease.ml's cost-aware GP-UCB for the next configuration;
                        :func:`search_sequentially`, the single-study loop (SV13)
======================  ===========================================================================================

Decisions SV1-SV6, SV12-SV15 in ``docs/design/decisions.md`` ("Service").
"""

from spottune.scheduling._demands import (FAIR_SHARE_MODES, NOISY_SEARCHES, BinarySearchDemand, FairShareRound,
                                          NoisyBinarySearchDemand, NonparametricTreeDemand, OnlineFairShare)
from spottune.scheduling._fairness import RoundLoss, max_min_fair, round_loss
from spottune.scheduling._gpucb import (CostAwareGPUCB, beta_t, check_flat, cost_aware_ucb, encode_configs,
                                       search_sequentially)
from spottune.scheduling._teams import FREEZE_ROUNDS, HybridTeamPicker, TeamBound, TeamPick
from spottune.scheduling._units import StaleUnit, Unit, UnitQueues

__all__ = [
    "FAIR_SHARE_MODES", "FREEZE_ROUNDS", "BinarySearchDemand", "CostAwareGPUCB", "FairShareRound", "HybridTeamPicker",
    "NOISY_SEARCHES", "NoisyBinarySearchDemand", "NonparametricTreeDemand", "OnlineFairShare", "RoundLoss", "StaleUnit", "TeamBound",
    "TeamPick", "Unit", "UnitQueues", "beta_t", "check_flat", "cost_aware_ucb", "encode_configs", "max_min_fair", "round_loss",
    "search_sequentially",
]
