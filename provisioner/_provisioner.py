"""SpotTune's provisioner: each trial goes to the market with the lowest expected cost per step.

Source: SpotTune (ICDCS 2020) getBestInst, Eq 1–2:
``argmin_i (1 − p_i) · P̄_i · T[h][i] / 3600`` over the pool, p_i predicted at the max price b_i that
is then requested (D1).
"""

from __future__ import annotations

import numpy as np

from spotmarket.prices import PriceHistory
from revpred.protocol import RevocationPredictor

from provisioner._base import BaseChooser
from provisioner._catalog import InstanceCatalog
from provisioner._exclusions import MarketExclusions
from provisioner._cost import HOUR_S, StepCostObjective
from provisioner._max_price import MaxPriceSource
from provisioner._performance import PerformanceMatrix
from provisioner._pool import Pool
from provisioner.errors import ProvisionerConfigError


class Provisioner(BaseChooser):
    """SpotTune's market choice: lowest expected USD per step (Eq 2, or an opt-in objective).

    Parameters
    ----------
    history : PriceHistory
        Spot price history, USD per instance-hour.
    catalog : InstanceCatalog
        vCPUs (for T's prior) and on-demand prices (for the optional cap).
    predictor : RevocationPredictor
        p_i = P(price > b_i within the next hour); one call per provisioning round.
    pool : Pool
        Allowed markets (types × zones, vCPU and memory filters).
    rng : numpy.random.Generator
        Seeded generator for the max-price draws.
    performance : PerformanceMatrix, optional
        T (seconds per step); default from the catalog's vCPUs, κ = 1, α = 0.5.
    objective : StepCostObjective, optional
        Default :class:`~provisioner.PaperStepCost` (Eq 2); :class:`~provisioner.UsefulStepCost`
        accounts for revocation overheads.
    max_price_rule : MaxPriceSource, optional
        Default :class:`~provisioner.MaxPriceRule` (D1).
    mean_window_s : float
        Window of P̄, seconds (3600).
    exclusions : MarketExclusions, optional
        Where capacity refusals go (:meth:`~provisioner.BaseChooser.exclude`); None: not remembered.

    Raises
    ------
    ProvisionerConfigError, UnknownInstanceType, NoMarketAvailable
        As :class:`~provisioner.BaseChooser`.

    Notes
    -----
    Tie-break ([I]): candidates with bit-equal objective values are ordered by smaller T (faster,
    so shorter JCT), then lower current price, then the market order (zone, type, product).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from spotmarket.prices import PriceHistory
    >>> from revpred.protocol import ConstantRevocation
    >>> table = pd.DataFrame({
    ...     "timestamp": pd.to_datetime(["2015-05-01T00:00Z"] * 2 + ["2015-05-02T00:00Z"] * 2),
    ...     "availability_zone": ["us-east-1a", "us-east-1a"] * 2,
    ...     "instance_type": ["r3.large", "c3.xlarge"] * 2,
    ...     "product_description": "Linux/UNIX", "price": [0.02, 0.05, 0.02, 0.05]})
    >>> prov = Provisioner(PriceHistory(table), InstanceCatalog.load(), ConstantRevocation(0.0),
    ...                    Pool(), np.random.default_rng(0))
    >>> t = pd.Timestamp("2015-05-01T12:00Z").value / 1e9
    >>> prov.choose("trial-0", t).market.instance_type   # 0.02/2 cores < 0.05/4 cores
    'r3.large'
    """

    policy = "spottune"
    order = ("step_cost_usd", "seconds_per_step", "current_price_usd_per_hour")

    def __init__(
        self,
        history: PriceHistory,
        catalog: InstanceCatalog,
        predictor: RevocationPredictor,
        pool: Pool,
        rng: np.random.Generator,
        *,
        performance: PerformanceMatrix | None = None,
        objective: StepCostObjective | None = None,
        max_price_rule: MaxPriceSource | None = None,
        mean_window_s: float = HOUR_S,
        exclusions: MarketExclusions | None = None,
    ):
        if predictor is None:
            raise ProvisionerConfigError("Provisioner needs a revocation predictor (e.g. ConstantRevocation(0.0))")
        super().__init__(history, catalog, pool, rng, predictor=predictor, performance=performance,
                         objective=objective, max_price_rule=max_price_rule, mean_window_s=mean_window_s,
                         exclusions=exclusions)

    def _order_keys(self, *, step_cost, seconds_per_step, current, mean, **extra):
        return [step_cost, seconds_per_step, current]
