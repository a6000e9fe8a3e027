"""The aws parts of an experiment, for the composition root (:func:`spottune.compose.build`).

- :func:`live_market`: with ``aws.live_prices`` (the default) the provisioner reads real prices: the last
  ``train_days`` days (plus 6 hours) of ``describe_spot_price_history`` for the pool's instance types, and
  the start is now (engine time = wall time). ``aws.live_prices: false`` replays ``spec.prices`` from
  ``spec.start`` instead (a moto server seeded with that trace, as in the tests).
- :func:`settings_from_spec`, :func:`exclusion_s` and :func:`aws_backend`: :class:`AwsSettings` from ``spec.aws``
  and the caps, how long the chooser's :class:`provisioner.MarketExclusions` leave a market out, and the driver.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from spottune.backends.aws._settings import AwsSettings
from spottune.experiment import AWS_KEYS

__all__ = ["aws_backend", "exclusion_s", "live_market", "on_demand_from_api", "settings_from_spec"]

#: The ``spec.aws`` keys passed on to :class:`AwsSettings` as they are (``experiment`` falls back to the output
#: folder's name).
_SETTING_KEYS = tuple(k for k in AWS_KEYS if k != "experiment")
#: Seconds past now that the prices read at a live start stay in force (30 days): the provisioner reads prices once,
#: at the start, and a relaunch later in the run (a θ pause, an hourly hop, a revocation) needs a known price then.
LIVE_HOLD_S = 30 * 86400


def live_market(spec: Any, *, ec2: Any = None, now_s: float | None = None) -> tuple[Any, float] | None:
    """(price history from the EC2 API, now) for ``spec``, or None when ``aws.live_prices`` is false.

    Parameters
    ----------
    spec : ExperimentSpec
        The experiment (its ``aws`` options: ``live_prices``, ``region``, ``endpoint_url``; ``instance_types``).
    ec2 : botocore client, optional
        An EC2 client; default: a new one for the region.
    now_s : float, optional
        Now, seconds since the epoch (UTC); default: the wall clock.

    Returns
    -------
    tuple of (spotmarket.prices.PriceHistory, float) or None
        The recent spot prices (USD per instance-hour) of the pool, the last ones held for :data:`LIVE_HOLD_S`
        seconds past now, and now as a nanosecond timestamp stores it (``now_s`` to the nanosecond); None without
        live prices.

    Raises
    ------
    spottune.errors.ConfigError
        If the API returns no price for the pool's instance types.
    """
    if not spec.aws.get("live_prices", True):
        return None
    from spotmarket.prices import PriceHistory
    from spotmarket.prices._readers import records_to_table
    from spottune.backends.aws._prices import fetch_records
    from spottune.backends.aws._session import client
    from spottune.errors import ConfigError

    if not spec.instance_types:
        raise ConfigError("backend aws with live prices needs instance_types (the pool's instance types)")
    now = time.time() if now_s is None else float(now_s)
    ec2 = ec2 or client("ec2", region=spec.aws.get("region", "us-east-1"), endpoint_url=spec.aws.get("endpoint_url"))
    start = now - (float(spec.train_days) + 0.25) * 86400.0
    recs, _ = fetch_records(ec2, instance_types=list(spec.instance_types), product_descriptions=["Linux/UNIX"],
                            start_utc=datetime.fromtimestamp(start, tz=timezone.utc),
                            end_utc=datetime.fromtimestamp(now, tz=timezone.utc))
    if not recs:
        raise ConfigError(f"describe_spot_price_history returned no price for {', '.join(spec.instance_types)}")
    import pandas as pd

    table = records_to_table(recs, source="describe_spot_price_history")
    end = pd.Timestamp(now, unit="s", tz="UTC")
    # the start is now as a nanosecond timestamp stores it: the float -> timestamp -> float round trip moves now by
    # up to a microsecond either way, and a start past the last record would be refused (decision AWS16). The
    # prices read now stay in force after it (AWS17): without them a relaunch after the start found no market.
    start = float(PriceHistory(table, end=end).end_s)
    return PriceHistory(table, end=end + pd.Timedelta(seconds=LIVE_HOLD_S)), start


def on_demand_from_api(spec: Any, *, pricing: Any = None, cache_path: str | Path | None = None,
                       log_fn: Any = None) -> dict[str, dict[str, float]] | None:
    """On-demand prices of the pool's types in the run's region from the AWS Price List API (cached), for a live run.

    Parameters
    ----------
    spec : ExperimentSpec
        The experiment (``instance_types``; ``aws.region``, ``aws.endpoint_url``).
    pricing : botocore client, optional
        A ``pricing`` client (default: one in us-east-1, two attempts).
    cache_path : path, optional
        The cache file (default :data:`._pricelist.CACHE_FILE` in ``$SPOTTUNE_CACHE``).
    log_fn : callable, optional
        Receives one line when the API cannot be asked and the bundled tables answer instead.

    Returns
    -------
    dict or None
        ``{region: {type: USD per instance-hour}}``; None with a test endpoint (``aws.endpoint_url``: moto has no
        Price List API), without ``instance_types``, or when the API refuses (no credentials, no network, access
        denied): the catalog's bundled prices and ``--on-demand-prices`` then answer (decisions.md IC1).
    """
    a = dict(spec.aws)
    if a.get("endpoint_url") or not spec.instance_types:
        return None
    from botocore.exceptions import BotoCoreError, ClientError

    from spottune.backends.aws._pricelist import get_on_demand_prices
    from spottune.backends.aws._session import client

    region = a.get("region", "us-east-1")
    try:
        pricing = pricing or client("pricing", region="us-east-1", max_attempts=2)
        got = get_on_demand_prices(spec.instance_types, region, pricing=pricing, cache_path=cache_path)
    except (BotoCoreError, ClientError) as exc:
        if log_fn is not None:
            log_fn(f"warning: AWS Price List API not asked ({exc}); on-demand prices come from "
                   "the bundled tables and --on-demand-prices")
        return None
    return {region: got}


def settings_from_spec(spec: Any, *, live: bool, output: str | Path | None = None,
                       require_image: bool = True) -> AwsSettings:
    """:class:`AwsSettings` of ``spec`` (``spec.aws``, the caps, ``storage_path``; experiment name from
    ``aws.experiment`` or the output folder's name).

    Parameters
    ----------
    spec : ExperimentSpec
        The experiment (its ``aws`` options).
    live : bool
        A real run (``aws.image`` and ``aws.ami`` required).
    output : str or pathlib.Path, optional
        The results folder.
    require_image : bool, default True
        With ``live``, refuse a spec without ``aws.image`` or ``aws.ami``; False for a dry run, which
        launches nothing (it says what is missing instead).

    Returns
    -------
    AwsSettings

    Raises
    ------
    spottune.errors.ConfigError
        With live prices (a real run), if ``aws.image`` or ``aws.ami`` is missing.
    """
    from spottune.errors import ConfigError

    a = dict(spec.aws)
    missing = [k for k in ("image", "ami") if live and require_image and not a.get(k)]
    if missing:  # the defaults are placeholders for a test endpoint
        raise ConfigError(f"backend aws needs aws.{' and aws.'.join(missing)} (the worker image in ECR, a host AMI "
                          "with Docker; docs/guide/aws.md)")
    experiment = a.get("experiment") or (Path(output).name if output is not None else f"run-{int(time.time())}")
    prefix = a.get("prefix", "spottune")
    store = spec.storage_path or f"s3://{a['bucket']}/{prefix}/{experiment}/checkpoints"
    from spottune.checkpoint._secrets import experiment_key

    key = experiment_key(output) if output is not None else None  # kept beside the results: a resume reads it
    return AwsSettings(experiment=str(experiment), store_url=store, storage_options=dict(spec.storage_options),
                       checkpoint_key=key,
                       time_scale=1.0 if live else spec.time_scale, pace_steps=not live,
                       max_usd_per_hour=spec.max_usd_per_hour, budget_usd=spec.budget_usd, max_steps=spec.max_steps,
                       checkpoint_keep=spec.checkpoint_keep, **{k: a[k] for k in _SETTING_KEYS if k in a})


def exclusion_s(spec: Any) -> float:
    """Seconds a market that refused an aws launch for capacity is left out (``aws.exclusion_s``, default
    :data:`provisioner.DEFAULT_EXCLUSION_S` as in :class:`AwsSettings`): the duration of the chooser's
    :class:`provisioner.MarketExclusions`.

    Parameters
    ----------
    spec : ExperimentSpec
        The experiment (its ``aws`` options).

    Returns
    -------
    float
        Seconds.
    """
    from provisioner import DEFAULT_EXCLUSION_S

    return float(dict(spec.aws).get("exclusion_s", DEFAULT_EXCLUSION_S))


def aws_backend(spec: Any, orchestrator: Any, billing: Any, trials: list, market: Any, start_s: float, *, live: bool,
                output: str | Path | None = None, progress: Any = None, dry_run: bool = False) -> Any:
    """The :class:`AwsBackend` of ``spec`` (the chooser was built with :func:`exclusion_s`'s exclusions); with live
    prices the Spot placement scores of the pool are read for the predictor (:func:`._signals.read_placement_scores`).

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
        The market (live or replayed prices, instance facts).
    start_s : float
        Start, seconds since the epoch (UTC).
    live : bool
        Prices from the EC2 API (a real run), else a replayed test market.
    output : str or pathlib.Path, optional
        The results folder (names the experiment when ``aws.experiment`` is not set).
    progress : callable, optional
        The progress callback (:data:`spottune.backends.Progress`).
    dry_run : bool, default False
        Built to be looked at, never run: ``aws.image`` and ``aws.ami`` are not required.

    Returns
    -------
    AwsBackend
        Not started.

    Raises
    ------
    ConfigError
        As :func:`settings_from_spec`.
    """
    from spottune.backends.aws._backend import AwsBackend

    settings = settings_from_spec(spec, live=live, output=output, require_image=not dry_run)
    backend = AwsBackend(orchestrator, billing, spec.workload, {t.trial_id: (t.config, t.seed) for t in trials},
                         market.facts, start_s, settings, progress=progress)
    if live:  # AWS's own capacity signal, read once (a replayed test market has none: moto lacks the call)
        from spottune.backends.aws._signals import read_placement_scores

        pool = list(market.markets)
        backend.placement_scores = read_placement_scores(
            backend.ec2, sorted({m.instance_type for m in pool}), sorted({m.availability_zone for m in pool}),
            region=settings.region)
    return backend
