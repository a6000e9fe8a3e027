"""Planning a tuning run under a deadline and a dollar budget (issue 17).

- :mod:`spottune.planning._seer`: SEER's Algorithms 2-3 (SoCC'21), unit-free.
- :mod:`spottune.planning._plan`: the dollar budget converted to vCPU-seconds through expected spot prices,
  and the plan ``spottune run --deadline --budget-usd`` prints.
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
