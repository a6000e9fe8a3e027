"""``spottune serve --backend local``: a study runs through ``spottune.tune`` on real worker processes of the
server's machine (a real uvicorn server on 127.0.0.1); ``serve --backend aws`` without the org's settings is one
line (SV16)."""

from __future__ import annotations

import json

import pytest

from spottune.cli import main
from spottune.service import Service, ServiceClient, ServiceError


ADMIN = "local-admin"
#: 2 trials of linear regression, 8 steps each, on worker processes (about 3 s of wall time).
STUDY = {"workload": "linreg", "search_space": {"lr": {"grid_search": [0.01, 0.05]}}, "max_steps": 8, "theta": 1,
         "top_k": 1, "predictor": "none", "backend": "local", "time_scale": 3600}


@pytest.mark.server
@pytest.mark.process
@pytest.mark.slow
def test_a_study_runs_on_local_worker_processes(tmp_path):
    svc = Service(admin_token=ADMIN, data_dir=tmp_path, port=0, backend="local").start()
    try:
        with ServiceClient(svc.url, ADMIN) as admin:
            assert admin.health() == {"ok": True, "backend": "local"}
            token = admin.create_team("vision")["token"]
        with ServiceClient(svc.url, token) as vision:
            with pytest.raises(ServiceError) as info:  # a spec for another backend than the server's
                vision.submit({**STUDY, "backend": "sim"}, team="vision", name="elsewhere")
            assert info.value.status == 422
            assert str(info.value) == "spec: backend is 'sim', but this server runs studies on 'local' (HTTP 422)"
            study = vision.submit(STUDY, team="vision", name="procs")
            done = vision.wait("procs", timeout_s=120)
        assert done["state"] == "finished", done["error"]
        out = tmp_path / "studies" / str(study["id"])
        summary = json.loads((out / "summary.json").read_text())
        assert done["summary"]["steps_executed"] == summary["steps_executed"] == 16 and summary["steps_lost"] == 0
        settings = summary["settings"]
        assert settings["units"]["steps_done"] == {"t00": 8, "t01": 8} and settings["units"]["lost"] == []
        assert (settings["units"]["heartbeat_wall_s"], settings["units"]["missed_beats"]) == (2.0, 3)
        workers = settings["worker"]  # each segment ran in a worker process that reported ready
        assert len(workers) == 2 and all(w["ready_wall_s"] > 0 and w["worker"].startswith("w") for w in workers.values())
        assert sorted(p.name for p in (out / "workers").glob("w*.log"))  # the processes' logs in the results
        curves = (out / "curves.csv").read_text().splitlines()[1:]
        assert sorted((r.split(",")[0], int(r.split(",")[1])) for r in curves) == \
            [(t, s) for t in ("t00", "t01") for s in range(1, 9)]  # every step once
    finally:
        svc.stop()


@pytest.mark.parametrize("args, why", [
    ([], "--backend aws needs --storage-path s3://BUCKET/PREFIX (EC2 instances cannot reach the server's folders)"),
    (["--storage-path", "/srv/ckpt"], "--storage-path is '/srv/ckpt', but --backend aws needs s3://BUCKET/PREFIX "
                                      "(EC2 instances cannot reach the server's folders)"),
    (["--storage-path", "s3://b/p", "--aws-image", "img"],
     "--backend aws needs --aws-ami (the worker image in ECR, a host AMI with Docker; docs/guide/aws.md)"),
    (["--storage-path", "s3://b/p", "--aws-image", "img", "--aws-ami", "ami-1"],
     "--backend aws needs --org-budget-usd-per-hour (or a budget kept in the database): every study on the org's "
     "account runs under its share of it"),
    (["--storage-path", "s3://b/p", "--aws-image", "img", "--aws-ami", "ami-1", "--org-budget-usd-per-hour", "2",
      "--aws-subnet", "us-east-1a"], "--aws-subnet is 'us-east-1a', but must be ZONE=SUBNET (e.g. us-east-1a=subnet-0abc)"),
])
def test_serve_on_aws_without_the_orgs_settings_is_one_line(tmp_path, monkeypatch, capsys, args, why):
    """What the org must give to serve on its AWS account (decision SV16): one line, exit 2, nothing served."""
    monkeypatch.setattr("sys.argv", ["spottune", "serve", "--backend", "aws", "--data-dir", str(tmp_path),
                                     "--port", "0", "--admin-token", ADMIN, *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err == f"error: {why}\n"



def test_each_run_of_an_aws_study_gets_its_own_prefix_and_experiment(tmp_path):
    """The org's settings written into a run's spec (SV16): a trial-budget study's round gets its own folder of the
    store and its own experiment name; the spec parses; a run outside the studies folder is refused."""
    import hashlib

    from spottune.errors import ConfigError
    from spottune.experiment import ExperimentSpec
    from spottune.service import AwsServing

    aws = AwsServing(storage_path="s3://org-bucket/serve/", image="img", ami="ami-1", region="eu-west-1",
                     subnets={"eu-west-1a": "subnet-1"}, storage_endpoint_url="http://s3.example")
    studies = tmp_path / "studies"
    digest = hashlib.sha256(b"s3://org-bucket/serve").hexdigest()[:8]
    got = aws.study_spec({"workload": "linreg", "backend": "aws", "aws": {"lease_s": 60.0}},
                         studies / "7" / "trial-000-c3", studies)
    assert got == {"workload": "linreg", "backend": "aws",
                   "storage_path": "s3://org-bucket/serve/studies/7/trial-000-c3/checkpoints",
                   "storage_options": {"endpoint_url": "http://s3.example"},
                   "aws": {"lease_s": 60.0, "bucket": "org-bucket", "prefix": "serve/studies/7/trial-000-c3",
                           "experiment": f"study-7-trial-000-c3-{digest}", "region": "eu-west-1", "image": "img",
                           "ami": "ami-1", "instance_profile": "spottune-worker", "subnets": {"eu-west-1a": "subnet-1"},
                           "security_groups": [], "live_prices": True}}
    assert ExperimentSpec.from_dict(got).storage_path == got["storage_path"]
    with pytest.raises(ConfigError, match="is not under the service's studies folder"):
        aws.study_spec({"backend": "aws"}, tmp_path / "elsewhere", studies)
