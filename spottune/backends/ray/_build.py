"""The ray parts of an experiment, for the composition root (:func:`spottune.compose.build`).

- :func:`pool_markets`: connect to the cluster (``ray.address``) and return the markets of the price
  history the cluster offers (:func:`~._cluster.cluster_markets`): the chooser's pool (decision RY2).
- :func:`settings_from_spec` and :func:`ray_backend`: :class:`RaySettings` from ``spec.ray`` and the driver.
"""

from __future__ import annotations

from typing import Any

from spottune.backends.ray._settings import RaySettings
from spottune.experiment import RAY_KEYS

__all__ = ["pool_markets", "ray_backend", "settings_from_spec"]



def pool_markets(spec: Any, history: Any) -> tuple[list[Any], list[Any]]:
    """(markets of ``history`` the cluster offers, every market the cluster offers) for ``spec``.

    Parameters
    ----------
    spec : ExperimentSpec
        The experiment (its ``ray`` options: ``address``, ``log_to_driver``; ``prices``).
    history : spotmarket.prices.PriceHistory
        The price history.

    Returns
    -------
    markets : list of Market
        The pool: markets of the history the cluster offers, sorted.
    offered : list of OfferedMarket
        Every market the cluster offers.

    Raises
    ------
    spottune.errors.BackendError
        If Ray is missing or the cluster cannot be reached.
    spottune.errors.ConfigError
        If the cluster offers no market of the price history (``prices``), naming both sides.
    """
    from spottune.backends.ray._cluster import cluster_markets, connect
    from spottune.errors import ConfigError

    connect(spec.ray.get("address", "auto"), log_to_driver=bool(spec.ray.get("log_to_driver", False)))
    offered = cluster_markets()
    keys = {(m.instance_type, m.availability_zone) for m in offered}
    markets = sorted((m for m in history.markets if (m.instance_type, m.availability_zone) in keys), key=str)
    if not markets:
        raise ConfigError(f"the Ray cluster offers the markets {', '.join(m.key for m in offered) or 'none'}, but the "
                          f"price history {spec.prices!r} has none of them (docs/guide/ray.md)")
    return markets, offered


def settings_from_spec(spec: Any, *, store_url: str, checkpoint_key: str | None = None) -> RaySettings:
    """:class:`RaySettings` of ``spec`` (``spec.ray``, ``time_scale``, ``max_steps``, the store, the checkpoint key).

    Parameters
    ----------
    spec : ExperimentSpec
        The experiment (its ``ray`` options).
    store_url : str
        The checkpoint store.
    checkpoint_key : str, optional
        The experiment's checkpoint key, hex.

    Returns
    -------
    RaySettings
    """
    r = dict(spec.ray)
    return RaySettings(store_url=store_url, storage_options=dict(spec.storage_options), time_scale=spec.time_scale,
                       checkpoint_key=checkpoint_key,
                       pace_steps=spec.time_scale != 1.0, max_steps=spec.max_steps,
                       checkpoint_keep=spec.checkpoint_keep, **{k: r[k] for k in RAY_KEYS if k in r})


def ray_backend(spec: Any, orchestrator: Any, billing: Any, trials: list, market: Any, start_s: float, *,
                offered: list[Any], store_url: str, progress: Any = None, checkpoint_key: str | None = None) -> Any:
    """The :class:`RayBackend` of ``spec`` on the markets ``offered`` (:func:`pool_markets`), checkpointing to
    ``store_url`` with the experiment's ``checkpoint_key`` (hex; default :class:`RaySettings`').

    Parameters
    ----------
    spec : ExperimentSpec
        The experiment.
    orchestrator : spottune.orchestrator.Orchestrator
        The run's orchestrator.
    billing : spotmarket.Billing
        The billing rule.
    trials : list of TrialSpec
        The trials (config and seed per id).
    market : MarketSetup
        The replayed market (prices, instance facts).
    start_s : float
        Start, seconds since the epoch (UTC).
    offered : list of OfferedMarket
        The cluster's markets (:func:`pool_markets`).
    store_url : str
        The checkpoint store.
    progress : callable, optional
        The progress callback (:data:`spottune.backends.Progress`).
    checkpoint_key : str, optional
        The experiment's checkpoint key, hex.

    Returns
    -------
    RayBackend
        Not started.
    """
    from spottune.backends.ray._backend import RayBackend

    settings = settings_from_spec(spec, store_url=store_url, checkpoint_key=checkpoint_key)
    return RayBackend(orchestrator, market.history, billing, spec.workload,
                      {t.trial_id: (t.config, t.seed) for t in trials}, market.facts, start_s, settings,
                      markets=offered, progress=progress)
