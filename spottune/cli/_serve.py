"""``spottune serve`` and its client commands: ``submit``, ``status``, ``cancel`` and ``team add|list``.

The server holds teams, studies and the org budget in a database and runs studies on the simulator, on local
worker processes, on EC2 spot instances or on a Ray cluster (:mod:`spottune.service`, docs/guide/service.md). The client commands reach it at ``--url`` (``$SPOTTUNE_URL``,
default ``http://127.0.0.1:8000``) with ``--token`` (``$SPOTTUNE_TOKEN``): a team's token, or the admin's; with
neither, the admin token file ``./spottune-service/admin-token`` that ``spottune serve`` writes in the folder it is
started from, so serve, submit and status work from one folder with no token handling (decision SV9).
"""

from __future__ import annotations

from pathlib import Path

import click

_URL = click.option("--url", envvar="SPOTTUNE_URL", default=None,
                    help="The service (default $SPOTTUNE_URL, else http://127.0.0.1:8000).")
_TOKEN = click.option("--token", envvar="SPOTTUNE_TOKEN", default=None,
                      help="Bearer token: a team's, or the admin's (default $SPOTTUNE_TOKEN, else the admin token "
                           "in ./spottune-service/admin-token).")
#: The admin token file a client command reads when given no token: the one ``spottune serve`` writes by default.
DEFAULT_ADMIN_TOKEN_FILE = Path("spottune-service") / "admin-token"


def _client(url: str | None, token: str | None):  # noqa: ANN202
    from spottune.service.client import ServiceClient, ServiceError

    if not token and DEFAULT_ADMIN_TOKEN_FILE.is_file():
        token = DEFAULT_ADMIN_TOKEN_FILE.read_text().strip()
    if not token:
        raise ServiceError(f"no token: give --token, set SPOTTUNE_TOKEN, or run from the folder where `spottune "
                           f"serve` wrote {DEFAULT_ADMIN_TOKEN_FILE}")
    return ServiceClient(url, token)


def _team_entitlements(values: tuple[str, ...]) -> dict[str, float]:
    from spottune.errors import ConfigError

    teams: dict[str, float] = {}
    for value in values:
        name, sep, share = value.partition("=")
        try:
            teams[name] = float(share) if sep else 1.0
        except ValueError:
            raise ConfigError(f"--team is {value!r}, but must be NAME or NAME=ENTITLEMENT (a number > 0)") from None
    return teams


def _subnets(values: tuple[str, ...]) -> dict[str, str]:
    from spottune.errors import ConfigError

    subnets: dict[str, str] = {}
    for value in values:
        zone, sep, subnet = value.partition("=")
        if not (sep and zone and subnet):
            raise ConfigError(f"--aws-subnet is {value!r}, but must be ZONE=SUBNET (e.g. us-east-1a=subnet-0abc)")
        subnets[zone] = subnet
    return subnets


@click.command("serve", help="Run the multi-tenant service: teams, studies and the org budget behind an HTTP API; "
               "queued studies run several at once (on the simulator, local worker processes, EC2 spot instances or a Ray "
               "cluster), each capped at its team's fair share.")
@click.option("--db", "db_url", default=None,
              help="SQLAlchemy database URL (default: sqlite:///<data dir>/service.db).")
@click.option("--data-dir", default="spottune-service", show_default=True, type=click.Path(file_okay=False),
              help="Folder of the default database, the admin token file and the studies' results.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port (0: a free one).")
@click.option("--org-budget-usd-per-hour", type=float, default=None,
              help="The org's budget, USD/hour, split among the teams with work (kept in the database).")
@click.option("--backend", type=click.Choice(["sim", "local", "aws", "ray"]), default="sim", show_default=True,
              help="Where studies run: sim (the simulator), local (worker processes on this machine; a lost "
                   "worker's unit is relaunched from its latest checkpoint), aws (EC2 spot instances of this "
                   "machine's AWS account; needs --storage-path s3://..., --aws-image, --aws-ami and an org budget) "
                   "or ray (the cluster at --ray-address, connected to once).")
@click.option("--storage-path", default=None, metavar="URL",
              help="Checkpoint store of the studies, s3://BUCKET/PREFIX (aws: required; ray: optional, default each "
                   "study's results folder); study ID uses PREFIX/studies/ID/.")
@click.option("--storage-endpoint-url", default=None, metavar="URL",
              help="S3 endpoint of --storage-path (an S3-compatible server; default AWS's). Credentials come from "
                   "the environment (AWS_ACCESS_KEY_ID, a profile, the instance role).")
@click.option("--aws-region", default="us-east-1", show_default=True, help="aws: the region of every study.")
@click.option("--aws-image", default=None, help="aws: the worker image URI (ECR) every instance runs.")
@click.option("--aws-ami", default=None, help="aws: the host AMI (with Docker) of every instance.")
@click.option("--aws-instance-profile", default="spottune-worker", show_default=True,
              help="aws: the instance profile every instance runs as (it must reach PREFIX/studies/*).")
@click.option("--aws-subnet", "aws_subnets", multiple=True, metavar="ZONE=SUBNET",
              help="aws: the subnet of an availability zone (default VPC otherwise). Repeatable.")
@click.option("--aws-security-group", "aws_security_groups", multiple=True,
              help="aws: a security group of every instance. Repeatable.")
@click.option("--aws-endpoint-url", default=None, metavar="URL",
              help="aws: the EC2, S3 and SQS endpoint (a moto server for a trial; default AWS's).")
@click.option("--ray-address", default="auto", show_default=True,
              help="ray: the cluster (auto, HOST:PORT of the head's GCS, or ray://HOST:10001).")
@click.option("--max-studies", default=4, show_default=True, type=click.IntRange(1, None),
              help="Studies run at once; a team with work and none running starts one beyond them.")
@click.option("--admin-token", envvar="SPOTTUNE_ADMIN_TOKEN", default=None,
              help="The admin's token (default $SPOTTUNE_ADMIN_TOKEN, else the one in <data dir>/admin-token, "
                   "made on first start).")
@click.option("--team", "teams", multiple=True, metavar="NAME[=ENTITLEMENT]",
              help="Create this team at start if it is missing (entitlement default 1); its token goes to "
                   "<data dir>/teams/NAME.token. Repeatable.")
@click.option("--round-period-s", type=click.FloatRange(min=0, min_open=True), default=3600.0, show_default=True,
              help="Seconds between two re-splits of the org budget over the running studies' caps.")
def serve(db_url: str | None, data_dir: str, host: str, port: int, org_budget_usd_per_hour: float | None,
          backend: str, max_studies: int, admin_token: str | None, teams: tuple[str, ...],
          round_period_s: float, storage_path: str | None, storage_endpoint_url: str | None, aws_region: str,
          aws_image: str | None, aws_ami: str | None, aws_instance_profile: str, aws_subnets: tuple[str, ...],
          aws_security_groups: tuple[str, ...], aws_endpoint_url: str | None, ray_address: str) -> None:
    from spottune.service import Service
    from spottune.service._cloud import AwsServing, RayServing
    from spottune.service._server import team_token_file, write_secret
    from spottune.service._store import new_token

    folder = Path(data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    token_file = folder / "admin-token"
    if not admin_token:
        if token_file.exists():
            admin_token = token_file.read_text().strip()
        else:
            admin_token = new_token()
            write_secret(token_file, admin_token)
    aws = ray = None
    if backend == "aws":
        if storage_path is None:
            from spottune.errors import ConfigError

            raise ConfigError("--backend aws needs --storage-path s3://BUCKET/PREFIX (EC2 instances cannot reach the "
                              "server's folders)")
        aws = AwsServing(storage_path=storage_path, storage_endpoint_url=storage_endpoint_url, region=aws_region,
                         endpoint_url=aws_endpoint_url, image=aws_image, ami=aws_ami,
                         instance_profile=aws_instance_profile, subnets=_subnets(aws_subnets),
                         security_groups=aws_security_groups)
    elif backend == "ray":
        ray = RayServing(address=ray_address, storage_path=storage_path, storage_endpoint_url=storage_endpoint_url)
    service = Service(admin_token=admin_token, db_url=db_url, data_dir=folder, host=host, port=port,
                      org_budget_usd_per_hour=org_budget_usd_per_hour, backend=backend,
                      max_studies=max_studies, teams=_team_entitlements(teams), round_period_s=round_period_s,
                      aws=aws, ray=ray)
    for name in service.created_teams:
        click.echo(f"team {name} created; its token is in {team_token_file(folder, name)}", err=True)
    click.echo(f"spottune serve on http://{host}:{port} (store {service.store.url}; admin token in {token_file} "
               "unless given)", err=True)
    try:
        service.run()
    except KeyboardInterrupt:  # Ctrl-C: uvicorn has shut down cleanly; a running study continues at the next start
        click.echo("spottune serve stopped", err=True)


@click.group("team", help="Admin: manage teams (needs the admin token).")
def team() -> None:
    pass


@team.command("add", help="Create a team and print its token (shown once).")
@click.argument("name")
@click.option("--entitlement", type=float, default=1.0, show_default=True,
              help="The team's share of the org budget (weights, normalised over the teams).")
@click.option("--min-usd-per-hour", type=click.FloatRange(min=0), default=None,
              help="Guaranteed minimum of the team's share of the org budget, USD/hour (up to its demand).")
@click.option("--max-usd-per-hour", type=click.FloatRange(min=0), default=None,
              help="Cap on the team's share of the org budget, USD/hour.")
@_URL
@_TOKEN
def team_add(name: str, entitlement: float, min_usd_per_hour: float | None, max_usd_per_hour: float | None,
             url: str | None, token: str | None) -> None:
    with _client(url, token) as c:
        click.echo(c.create_team(name, entitlement, min_usd_per_hour=min_usd_per_hour,
                                 max_usd_per_hour=max_usd_per_hour)["token"])


def _bound(text: str | None, option: str) -> float | None:
    """A bound option's value: a number of USD/hour >= 0, or ``none`` (removes the bound); ``option`` names it in the
    error (click.BadParameter)."""
    if text is None or text.lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a number of USD/hour nor 'none'", param_hint=option) from None
    if not (value >= 0 and value != float("inf")):
        raise click.BadParameter(f"{text!r} must be >= 0 and finite, or 'none'", param_hint=option)
    return value


@team.command("set", help="Change a team's entitlement, guaranteed minimum or cap; the next fair-share round uses "
              "them. Options left out keep their value.")
@click.argument("name")
@click.option("--entitlement", type=click.FloatRange(min=0, min_open=True), default=None,
              help="The team's share of the org budget (a weight).")
@click.option("--min-usd-per-hour", "lo", default=None, metavar="USD|none",
              help="Guaranteed minimum, USD/hour; 'none' removes it.")
@click.option("--max-usd-per-hour", "hi", default=None, metavar="USD|none", help="Cap, USD/hour; 'none' removes it.")
@_URL
@_TOKEN
def team_set(name: str, entitlement: float | None, lo: str | None, hi: str | None, url: str | None,
             token: str | None) -> None:
    changes: dict[str, float | None] = {} if entitlement is None else {"entitlement": entitlement}
    for key, text in (("min_usd_per_hour", lo), ("max_usd_per_hour", hi)):
        if text is not None:
            changes[key] = _bound(text, "--" + key.replace("_", "-"))
    if not changes:
        raise click.UsageError("nothing to change: give --entitlement, --min-usd-per-hour or --max-usd-per-hour")
    with _client(url, token) as c:
        t = c.update_team(name, **changes)
    click.echo(f"{t['name']}\t{t['entitlement']:g}\t{_usd(t.get('min_usd_per_hour'))}\t{_usd(t.get('max_usd_per_hour'))}")


def _usd(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


@team.command("list", help="The teams: name, entitlement, guaranteed minimum and cap (USD/hour; - for none).")
@_URL
@_TOKEN
def team_list(url: str | None, token: str | None) -> None:
    with _client(url, token) as c:
        for t in c.teams():
            click.echo(f"{t['name']}\t{t['entitlement']:g}\t{_usd(t.get('min_usd_per_hour'))}\t"
                       f"{_usd(t.get('max_usd_per_hour'))}")


@click.command("submit", help="Submit a study: an experiment spec (YAML, the keys of `spottune run --config`) for a "
               "team. Prints the study's id.")
@click.argument("study_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--team", required=True, help="The team the study belongs to.")
@click.option("--name", default=None, help="Study name (default: the file's name without .yaml).")
@click.option("--trial-budget", type=click.IntRange(min=1), default=None, help="Trials the study may run in all.")
@_URL
@_TOKEN
def submit(study_file: str, team: str, name: str | None, trial_budget: int | None, url: str | None,
           token: str | None) -> None:
    with _client(url, token) as c:
        study = c.submit(study_file, team=team, name=name, trial_budget=trial_budget)
    click.echo(f"{study['id']}\t{study['name']}\t{study['state']}")


def _cost(study: dict) -> str:
    summary = study.get("summary") or {}
    usd = summary.get("total_cost_usd")
    return f"{usd:.4f}" if isinstance(usd, (int, float)) else "-"


@click.command("status", help="Your studies (the admin: every team's), or one study in detail.")
@click.argument("study", required=False)
@_URL
@_TOKEN
def status(study: str | None, url: str | None, token: str | None) -> None:
    with _client(url, token) as c:
        if study is None:
            studies = c.studies()
            click.echo("id\tteam\tname\tstate\tusd")
            for s in studies:
                click.echo(f"{s['id']}\t{s['team']}\t{s['name']}\t{s['state']}\t{_cost(s)}")
            return
        s = c.study(study)
    best = (s.get("summary") or {}).get("best")
    for key in ("id", "team", "name", "state", "trial_budget", "output", "error", "created_utc", "started_utc",
                "ended_utc"):
        if s.get(key) is not None:
            click.echo(f"{key}: {s[key]}")
    click.echo(f"usd: {_cost(s)}")
    if best:
        click.echo(f"best: {best['trial_id']} {best['metric']}={best['value']:.6g} config={best['config']}")


@click.command("cancel", help="Cancel a queued or running study (by id or name).")
@click.argument("study")
@_URL
@_TOKEN
def cancel(study: str, url: str | None, token: str | None) -> None:
    with _client(url, token) as c:
        s = c.cancel(study)
    click.echo(f"{s['id']}\t{s['name']}\t{s['state']}" + ("" if s["state"] == "cancelled" else " (stopping)"))
