"""``spottune cleanup EXPERIMENT``: terminate every EC2 instance tagged with an experiment (issue 14)."""

from __future__ import annotations

import click


@click.command("cleanup", help="Terminate every EC2 instance tagged spottune:experiment=EXPERIMENT and list them.")
@click.argument("experiment")
@click.option("--region", default="us-east-1", show_default=True)
@click.option("--endpoint-url", default=None, help="EC2 endpoint (a test server); default: AWS.")
def cleanup(experiment: str, region: str, endpoint_url: str | None) -> None:
    from spottune.backends.aws import cleanup as terminate_tagged
    from spottune.backends.aws._session import client

    gone = terminate_tagged(client("ec2", region=region, endpoint_url=endpoint_url), experiment)
    for inst in gone:
        click.echo(f"terminated {inst.instance_id}  {inst.availability_zone}/{inst.instance_type}  "
                   f"trial {inst.trial_id or '-'}  launch {inst.launch_id or '-'}  (was {inst.state})")
    click.echo(f"{len(gone)} instance(s) of experiment {experiment!r} terminated")
