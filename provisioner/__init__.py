"""provisioner: instance catalog, expected cost per step (Eq 1-2) and market choice (the SpotTune paper's
getBestInst), and the refund-aware objective that also chooses the max price (decision R1, ``RefundProvisioner``).

Pure computation: choosers take time as ``now_s`` (seconds since the epoch, UTC) and randomness from
an injected ``numpy.random.Generator``; only :meth:`InstanceCatalog.load` reads files. Imports revpred's
price history and predictor protocol, never ``spottune``. See ``docs/design/provisioner.md``.
"""

from provisioner._base import BaseChooser, HorizonChooser, LearningChooser, MarketChooser
from provisioner._baselines import CheapestMarketChooser, FastestMarketChooser, FixedTypeChooser
from provisioner._catalog import PUBLIC_FACTS, InstanceCatalog, InstanceFacts, InstanceSpec, find_data_file
from provisioner._choice import Candidate, Choice, Explanation, SkippedMarket
from provisioner._cost import (
    HOUR_S,
    PaperStepCost,
    StepCostObjective,
    UsefulStepCost,
    expected_hour_cost_usd,
    expected_useful_seconds,
    step_cost_usd,
    useful_step_cost_usd,
)
from provisioner._exclusions import DEFAULT_EXCLUSION_S, MarketExclusions
from provisioner._max_price import FixedMaxPrice, MaxPriceRule, MaxPriceSource
from provisioner._performance import DEFAULT_ALPHA, PerformanceMatrix
from provisioner._pool import Pool
from provisioner._pooled_speed import PooledSpeedMatrix
from provisioner._provisioner import Provisioner
from provisioner._refund import (
    DELTA_LADDER_USD_PER_HOUR,
    NOTICE_S,
    RefundStepCost,
    decision_horizon_s,
    expected_paid_usd,
    expected_segment_s,
    expected_useful_steps,
    ladder_max_prices,
    refund_step_cost_usd,
    revocation_within,
)
from provisioner._curse import LaunchLedger, shrink_p
from provisioner._guarded import DEFAULT_GUARD_MARGIN, DEFAULT_GUARD_P_SHRINK, GuardedProvisioner
from provisioner._refund_provisioner import P_CAP, RefundProvisioner
from provisioner.errors import (
    CatalogError,
    NoMarketAvailable,
    ProvisionerConfigError,
    ProvisionerError,
    UnknownInstanceType,
)

__all__ = [
    "BaseChooser",
    "Candidate",
    "CatalogError",
    "CheapestMarketChooser",
    "Choice",
    "DEFAULT_ALPHA",
    "DEFAULT_EXCLUSION_S",
    "DEFAULT_GUARD_MARGIN",
    "DEFAULT_GUARD_P_SHRINK",
    "DELTA_LADDER_USD_PER_HOUR",
    "Explanation",
    "P_CAP",
    "FastestMarketChooser",
    "FixedMaxPrice",
    "FixedTypeChooser",
    "GuardedProvisioner",
    "HOUR_S",
    "InstanceCatalog",
    "MarketExclusions",
    "InstanceFacts",
    "InstanceSpec",
    "LaunchLedger",
    "MarketChooser",
    "HorizonChooser",
    "LearningChooser",
    "MaxPriceRule",
    "MaxPriceSource",
    "NOTICE_S",
    "NoMarketAvailable",
    "PUBLIC_FACTS",
    "PaperStepCost",
    "PerformanceMatrix",
    "PooledSpeedMatrix",
    "Pool",
    "Provisioner",
    "ProvisionerConfigError",
    "ProvisionerError",
    "RefundProvisioner",
    "RefundStepCost",
    "SkippedMarket",
    "StepCostObjective",
    "UnknownInstanceType",
    "UsefulStepCost",
    "decision_horizon_s",
    "expected_hour_cost_usd",
    "expected_paid_usd",
    "expected_segment_s",
    "expected_useful_seconds",
    "expected_useful_steps",
    "ladder_max_prices",
    "refund_step_cost_usd",
    "revocation_within",
    "shrink_p",
    "find_data_file",
    "step_cost_usd",
    "useful_step_cost_usd",
]
