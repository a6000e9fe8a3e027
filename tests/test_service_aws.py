"""``spottune serve --backend aws`` end to end: a study submitted through the API runs on EC2 spot instances of the
org's account (a moto server, seeded with the scripted market's prices; live prices, so the run starts now), its
checkpoints in the org's S3 store (SeaweedFS) under the study's own prefix, the hosts played by
:class:`tests._aws_host.Ec2Hosts` running their user data (the image's entry point, the agent and its worker as
local processes). One credential chain stands for the account, as on AWS: the server's environment and the
hosts' (their instance profile) hold SeaweedFS's keys, which moto accepts too (decision SV16)."""

from __future__ import annotations

import csv
import json

import boto3
import pytest

from spottune.service import Service, ServiceClient, ServiceError
from spottune.service._cloud import AwsServing, experiment_name
from tests._aws_host import Ec2Hosts, moto_server
from tests.test_sim_backend import history

ADMIN = "aws-admin"
STORE = "s3://spottune/org"
#: 2 trials of linear regression, 6 steps each; θ = 0.5 pauses both at step 3 and the better one goes on.
STUDY = {"workload": "linreg", "search_space": {"lr": {"grid_search": [0.01, 0.05]}}, "max_steps": 6, "theta": 0.5,
         "top_k": 1, "predictor": "none", "backend": "aws", "instance_types": ["r3.large"],
         "availability_zones": ["us-east-1a"], "train_days": 0.5, "aws": {"lease_s": 3000.0, "describe_every_s": 1.0}}


@pytest.mark.server
@pytest.mark.process
@pytest.mark.slow
def test_a_study_runs_on_ec2_with_its_checkpoints_in_the_orgs_s3_store(seaweedfs, tmp_path, monkeypatch):
    with moto_server(history(spike_at_s=1800.0, spike_len_s=2400.0, hours=12)) as moto:
        boto3.client("s3", endpoint_url=moto).create_bucket(Bucket="spottune")  # the control objects' bucket
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweedfs["key"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweedfs["secret"])
        experiment = experiment_name(STORE, "1")
        hosts = Ec2Hosts(moto, experiment, workload="linreg", store="", log_dir=tmp_path, user_data=True)
        hosts.env.update(AWS_ACCESS_KEY_ID=seaweedfs["key"], AWS_SECRET_ACCESS_KEY=seaweedfs["secret"])
        aws = AwsServing(storage_path=STORE, storage_endpoint_url=seaweedfs["endpoint_url"], endpoint_url=moto,
                         image="spottune-worker:test", ami="ami-12c6146b")
        svc = Service(admin_token=ADMIN, data_dir=tmp_path / "svc", port=0, backend="aws", aws=aws,
                      org_budget_usd_per_hour=1.5).start()
        hosts.start()
        try:
            with ServiceClient(svc.url, ADMIN) as admin:
                token = admin.create_team("vision")["token"]
                with pytest.raises(ServiceError) as info:  # the org's budget stays: every study runs under a share
                    admin.set_org_budget(None)
                assert info.value.status == 422
            with ServiceClient(svc.url, token) as vision:
                with pytest.raises(ServiceError) as info:  # where it runs is the org's
                    vision.submit({**STUDY, "aws": {"bucket": "elsewhere"}}, team="vision", name="mine")
                assert info.value.status == 422 and str(info.value).startswith(
                    "spec: aws.bucket is 'elsewhere', but on the service the org sets aws.bucket, aws.prefix")
                study = vision.submit(STUDY, team="vision", name="ec2")
                assert study["id"] == 1
                done = vision.wait("ec2", timeout_s=90)
            hosts.settle()
            assert done["state"] == "finished", done["error"]
            assert hosts.running() == [] and hosts.errors == []
            control = boto3.client("s3", endpoint_url=moto).list_objects_v2(Bucket="spottune")["Contents"]
            assert {o["Key"].rsplit("/", 2)[0] for o in control} == {f"org/studies/1/{experiment}"}
        finally:
            svc.stop()
            hosts.stop()
    out = tmp_path / "svc" / "studies" / "1"
    settings = json.loads((out / "summary.json").read_text())["settings"]
    assert (settings["backend"], settings["experiment"]) == ("aws", experiment)
    # the org's cap: the team's fair-share allocation of the 1.5 USD/h budget (half, on its prior demand), which
    # every launch was checked against
    assert done["max_usd_per_hour"] == settings["max_usd_per_hour"] == 0.75
    with open(out / "trials.csv") as f:
        trials = {r["trial_id"]: (r["state"], r["steps"]) for r in csv.DictReader(f)}
    assert trials == {"t00": ("stopped_early", "3"), "t01": ("finished", "6")}
    with open(out / "ledger.csv") as f:  # 2 first launches + the winner's relaunch after the θ pause, from step 3
        ledger = [(r["trial_id"], r["market"], r["ended_by"], r["reason"], r["steps"]) for r in csv.DictReader(f)]
    market = "us-east-1a/r3.large/Linux/UNIX"
    assert sorted(ledger) == [("t00", market, "user", "theta", "3"), ("t01", market, "user", "end", "3"),
                              ("t01", market, "user", "theta", "3")]
    assert len(hosts.booted) == 3
    seaweed = boto3.client("s3", endpoint_url=seaweedfs["endpoint_url"], aws_access_key_id=seaweedfs["key"],
                           aws_secret_access_key=seaweedfs["secret"], region_name="us-east-1")
    keys = [o["Key"] for o in seaweed.list_objects_v2(Bucket="spottune", Prefix="org/studies/1/")["Contents"]]
    assert keys and all(k.startswith("org/studies/1/checkpoints/t0") for k in keys)  # saved at θ, restored by t01
