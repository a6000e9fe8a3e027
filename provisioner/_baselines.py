"""Alternative choosers with the same contract as :class:`~provisioner.Provisioner`, for comparisons.

The evaluation compares policies on identical replays (baselines are further implementations
of one contract, so an ablation needs no flags). Each ranks the same candidate table differently; with a
predictor they still report p and the Eq 2 step cost of every candidate, for the record.
"""

from __future__ import annotations

from spotmarket.prices import Market

from provisioner._base import BaseChooser
from provisioner.errors import ProvisionerConfigError


class CheapestMarketChooser(BaseChooser):
    """Lowest current spot price, ignoring speed and revocation ("cheapest market", spot-with-restart).

    Order: current price, then P̄ over the last hour, then the market order. Same parameters as
    :class:`~provisioner._base.BaseChooser` (predictor optional).
    """

    policy = "cheapest"
    order = ("current_price_usd_per_hour", "mean_price_usd_per_hour")

    def _order_keys(self, *, step_cost, seconds_per_step, current, mean, **extra):
        return [current, mean]


class FastestMarketChooser(BaseChooser):
    """Smallest T[h][i] (fastest type for the trial), then the cheapest zone of it ("fastest market").

    Order: seconds per step, then current price, then the market order.
    """

    policy = "fastest"
    order = ("seconds_per_step", "current_price_usd_per_hour")

    def _order_keys(self, *, step_cost, seconds_per_step, current, mean, **extra):
        return [seconds_per_step, current]


class FixedTypeChooser(BaseChooser):
    """One fixed instance type in its cheapest zone now (the paper's Single-Spot Cheapest/Fastest; D9, E4).

    Parameters
    ----------
    instance_type : str
        The type every trial runs on; must have a market in the pool.
    *args, **kwargs
        As :class:`~provisioner._base.BaseChooser`. For "never revoked" Single-Spot runs pass
        ``max_price_rule=FixedMaxPrice(...)`` above every recorded price.

    Order: current price, then the market order (among the type's zones).
    """

    order = ("current_price_usd_per_hour",)

    def __init__(self, instance_type: str, *args, **kwargs):
        self.instance_type = instance_type
        self.policy = f"fixed:{instance_type}"
        super().__init__(*args, **kwargs)

    def _resolve_markets(self) -> list[Market]:
        self.catalog[self.instance_type]  # UnknownInstanceType if missing
        markets = [m for m in self.pool.resolve(self.history, self.catalog) if m.instance_type == self.instance_type]
        if not markets:
            raise ProvisionerConfigError(f"instance type {self.instance_type} has no market in the pool")
        return markets

    def _order_keys(self, *, step_cost, seconds_per_step, current, mean, **extra):
        return [current]

