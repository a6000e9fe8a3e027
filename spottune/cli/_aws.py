"""``spottune cleanup EXPERIMENT``: terminate every EC2 instance tagged with an experiment."""

from __future__ import annotations

import click


@click.command("cleanup", help="Terminate every EC2 instance tagged spottune:experiment=EXPERIMENT and list them.")
@click.argument("experiment")
@click.option("--region", default="us-east-1", show_default=True)
@click.option("--endpoint-url", default=None, help="EC2 endpoint (a test server); default: AWS.")
def cleanup(experiment: str, region: str, endpoint_url: str | None) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    from spottune.backends.aws import cleanup as terminate_tagged
    from spottune.backends.aws._session import client
    from spottune.errors import BackendError, ConfigError

    if not experiment.strip():  # an empty tag value would name no experiment: refuse before calling AWS
        raise ConfigError("EXPERIMENT is empty, but must be the experiment's name (its spottune:experiment tag)")
    try:
        gone = terminate_tagged(client("ec2", region=region, endpoint_url=endpoint_url), experiment)
    except (BotoCoreError, ClientError) as exc:  # no credentials, no permission: one line, exit 2
        raise BackendError(f"cleanup of {experiment!r} failed: {type(exc).__name__}: {exc}") from None
    for inst in gone:
        click.echo(f"terminated {inst.instance_id}  {inst.availability_zone}/{inst.instance_type}  "
                   f"trial {inst.trial_id or '-'}  launch {inst.launch_id or '-'}  (was {inst.state})")
    click.echo(f"{len(gone)} instance(s) of experiment {experiment!r} terminated")
