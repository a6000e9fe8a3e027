"""Planning a tuning run under a deadline and a dollar budget.

- :mod:`spottune.planning._seer`: SEER's Algorithms 2-3 (SoCC'21), unit-free.
- :mod:`spottune.planning._plan`: the dollar budget converted to vCPU-seconds through expected spot prices,
  and the plan ``spottune run --deadline --budget-usd`` prints.
- :mod:`spottune.planning._lean`: the cost-lean plan, the cheapest candidate that meets the deadline within
  the budget (DB15).
- :mod:`spottune.planning._brackets`: :class:`BracketOrchestrator`, an elastic schedule (SEER, E-Hyperband, E-Grid,
  the lean plan) executed with the orchestrator's trial life cycle (``spottune run --deadline-mode plan|seer`` and
  the SEER-family policies of ``spottune simulate``); pure, like :mod:`spottune.orchestrator`.
"""

from spottune.planning._seer import SeerPlan, bracket_budgets, seer_plan

__all__ = ["SeerPlan", "bracket_budgets", "seer_plan"]

from spottune.planning._plan import RunPlan, format_duration, parse_duration, plan_run  # noqa: E402

__all__ += ["RunPlan", "format_duration", "parse_duration", "plan_run"]

from spottune.planning._deadline import DEADLINE_RULES, DeadlineGuard  # noqa: E402

__all__ += ["DEADLINE_RULES", "DeadlineGuard"]

from spottune.planning._elastic import Bracket, ElasticSchedule, grid_schedule, hyperband_schedule, seer_schedule  # noqa: E402
from spottune.planning._plan import Resources, resources  # noqa: E402

__all__ += ["Bracket", "ElasticSchedule", "Resources", "grid_schedule", "hyperband_schedule", "resources",
            "seer_schedule"]

from spottune.planning._elastic import RESERVE_Z, reserve_steps  # noqa: E402
from spottune.planning._lean import InstanceClass, LeanPlan, lean_plan, schedule_cost_usd  # noqa: E402
from spottune.planning._plan import instance_classes  # noqa: E402

__all__ += ["RESERVE_Z", "InstanceClass", "LeanPlan", "instance_classes", "lean_plan", "reserve_steps",
            "schedule_cost_usd"]

from spottune.planning._brackets import (  # noqa: E402
    ELASTIC_DELTA_USD_PER_HOUR,
    LAUNCH_RETRY_S,
    RESTORE_CHECKPOINT_S,
    BracketOrchestrator,
    TypeChooser,
    bracket_orchestrator,
)

__all__ += ["ELASTIC_DELTA_USD_PER_HOUR", "LAUNCH_RETRY_S", "RESTORE_CHECKPOINT_S", "BracketOrchestrator", "TypeChooser",
            "bracket_orchestrator"]
