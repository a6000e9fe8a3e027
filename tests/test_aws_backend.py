"""The aws backend end to end against a moto server, with a harness that plays the EC2 hosts.

One moto server for the module (EC2 + S3 + SQS + IAM on 127.0.0.1, spot price history seeded from the
scripted market), agents and workers as real local processes (:mod:`tests._aws_host`).

The scripted market (``tests.test_sim_backend.history``): A (us-east-1a r3.large) at 0.02 USD/h spiking to
1.0 from 1800 s to 4200 s; B (us-east-1b c3.xlarge) flat at 0.05. The chooser takes the cheapest market
not excluded, at max price = price + 0.08 (A: 0.10, B: 0.13), so the spike revokes every instance on A
and the relaunch goes to B. Four trials of the NumPy ``Walk`` trainable, 40 steps of 180 s, θ = 0.5,
top-2; the first launch of t3 is refused for capacity (InsufficientInstanceCapacity on A: A is excluded
for 30 min, so t3 starts on B).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import boto3
import pytest

from provisioner import MarketExclusions
from spotmarket import Billing, LegacyBidRevocation
from spotmarket.prices import Market
from spottune.backends import LocalBackend, LocalSettings
from spottune.backends.aws import (AwsBackend, AwsClients, AwsSettings, LaunchRefused, cleanup, find_instances,
                                   launch_request, user_data)
from spottune.backends.aws._launch import launch
from spottune.orchestrator import Orchestrator, OrchestratorConfig, TrialState
from tests._aws_host import MIN_NOTICE_WALL_S, REGION, ROOT, Ec2Hosts, moto_server
from tests._wait import wait_until
from tests.test_sim_backend import A, B, T0, history
from tests.test_worker_process import WORKLOAD

pytestmark = pytest.mark.server

FACTS = {"r3.large": (2, 6.5), "c3.xlarge": (2, 6.5)}  # same speed: every 30-step segment outlives its hour
CONFIGS = {"t0": {"lr": 0.02}, "t1": {"lr": 0.05}, "t2": {"lr": 0.01}, "t3": {"lr": 0.03}}
SEEDS = {t: 200 + i for i, t in enumerate(CONFIGS)}
MAX_STEPS, THETA, TOP_K, SPS = 50, 0.4, 2, 120.0
SCALE = 500.0
#: An agent whose worker saved on a notice and exited waits this long (engine s) for the provider before it powers
#: its host off (as ``Client.InstanceInitiatedShutdown``, a user ending): longer than the harness's notice window
#: (``MIN_NOTICE_WALL_S`` wall seconds), so a revoked host is always ended by the provider, as on EC2 (2 min <<
#: the 10-min default linger).
LINGER_S = 4 * MIN_NOTICE_WALL_S * SCALE
HIST = history(spike_at_s=1800.0, spike_len_s=2400.0, hours=12)


@dataclass(frozen=True)
class Choice:
    market: Market
    max_price_usd_per_hour: float


class Cheapest:
    """The cheapest market with a known price that is not excluded; max price = price + 0.08 USD/h.

    A ``provisioner.LearningChooser``: capacity refusals go to ``exclusions``, signals to ``predictor.signal``."""

    observes_instances = False

    def __init__(self, exclusions=None, predictor=None):
        self.exclusions = exclusions
        self.predictor = predictor
        self.segments = []

    def exclude(self, market, now_s, reason):
        if self.exclusions is not None:
            self.exclusions.exclude(market, now_s, reason)

    def excluded(self, now_s):
        return self.exclusions.active(now_s) if self.exclusions is not None else {}

    def observe(self, market, launch_s, end_s, interrupted):
        pass

    def signal(self, market, time_s, kind, value):
        if self.predictor is not None:
            self.predictor.signal(market, time_s, kind, value)

    def choose(self, trial_id, now_s):
        out = self.exclusions.active(now_s) if self.exclusions is not None else {}
        prices = {m: HIST[m].price_at(now_s) for m in (A, B) if m not in out}
        m = min(prices, key=lambda k: (prices[k], str(k)))
        return Choice(m, round(prices[m] + 0.08, 5))

    def choose_many(self, ids, now_s):
        return [self.choose(t, now_s) for t in ids]

    def record_segment(self, *args):
        self.segments.append(args)


def orchestrator(chooser):
    return Orchestrator(list(CONFIGS), OrchestratorConfig(max_steps=MAX_STEPS, theta=THETA, top_k=TOP_K,
                                                          metric="loss"), chooser)


@pytest.fixture(scope="module")
def moto():
    with moto_server(HIST) as url:
        boto3.client("s3", endpoint_url=url).create_bucket(Bucket="spottune-test")
        yield url


def settings(url, experiment, store=None, **kw):
    base = dict(experiment=experiment, bucket="spottune-test", store_url=store or f"s3://spottune-test/ckpt/{experiment}",
                endpoint_url=url, storage_options={"endpoint_url": url}, time_scale=SCALE, pace_steps=True,
                poll_s=5.0, describe_every_s=60.0, lease_s=3000.0, linger_s=LINGER_S, max_attempts=2,
                max_steps=MAX_STEPS, reference_seconds_per_step=SPS, max_wall_s=120.0)
    base.update(kw)
    return AwsSettings(**base)


def aws_run(url, tmp_path, experiment, *, inject=None, warm=6, **kw):
    exclusions = MarketExclusions(1800.0)
    orch = orchestrator(Cheapest(exclusions))
    s = settings(url, experiment, store=str(tmp_path / "store"), **kw)
    backend = AwsBackend(orch, Billing(), WORKLOAD, {t: (CONFIGS[t], SEEDS[t]) for t in CONFIGS}, FACTS.__getitem__,
                         T0, s, clients=AwsClients.create(s))
    hosts = Ec2Hosts(url, experiment, workload=WORKLOAD, store=s.store_url, log_dir=tmp_path,
                     revocation=LegacyBidRevocation(HIST), clock=backend.clock, warm=warm)
    hosts.attach(backend.ec2)
    if inject:
        inject(hosts)
    hosts.start()
    try:
        record = backend.run()
        hosts.settle()  # the harness has seen the run's end (hosts killed, shutdowns and errors recorded)
        left = hosts.running()
    finally:
        hosts.stop()
    return orch, record, hosts, left


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """The same experiment on the local backend (same seeds, same replayed market; faster clock)."""
    orch = orchestrator(Cheapest(MarketExclusions(1800.0)))
    LocalBackend(orch, HIST, LegacyBidRevocation(HIST), Billing(), WORKLOAD, {t: (CONFIGS[t], SEEDS[t]) for t in CONFIGS},
                 FACTS.__getitem__, T0, LocalSettings(store_url=str(tmp_path_factory.mktemp("local") / "store"),
                                                       time_scale=2500.0, max_steps=MAX_STEPS,
                                                       reference_seconds_per_step=SPS, max_wall_s=120.0)).run()
    return orch


@pytest.fixture(scope="module")
def aws(moto, tmp_path_factory):
    return aws_run(moto, tmp_path_factory.mktemp("aws"), "exp-main",
                   inject=lambda h: h.refuse("us-east-1a", "r3.large", times=1))


def decisions(record, trial_id):
    return [(r["type"], r.get("reason")) for r in record.log if r["kind"] == "action" and r.get("trial_id") == trial_id]


def launches(record, trial_id):
    return [r for r in record.log if r["kind"] == "action" and r["type"] == "Launch" and r["trial_id"] == trial_id]


def events(record, type_, trial_id=None):
    return [r for r in record.log if r["kind"] == "event" and r["type"] == type_
            and (trial_id is None or r.get("trial_id") == trial_id)]


def launch_after(record, trial_id, t):
    """The first Launch of ``trial_id`` logged at or after engine time ``t``."""
    return next(r for r in launches(record, trial_id) if r["t"] >= t)


THETA_STEP = int(THETA * MAX_STEPS)


@pytest.mark.slow  # the moto scenario: about 20 s for the module fixture, once
def test_a_clean_run_of_four_trials_leaves_nothing_running(aws):
    orch, record, hosts, left = aws
    assert left == [] and hosts.errors == []
    assert len(orch.top_k) == TOP_K
    for t in CONFIGS:
        tr = orch.trials[t]
        if t in orch.top_k:
            assert (tr.state, tr.step) == (TrialState.FINISHED, MAX_STEPS), t
        else:
            assert (tr.state, tr.step) == (TrialState.STOPPED_EARLY, THETA_STEP), t
        assert tr.steps == list(range(1, tr.step + 1)), t  # every step reported once, in order, across instances
    # one ledger row per instance that existed, each billed once
    assert sorted(r.instance_id for r in record.ledger) == sorted(hosts.booted)
    assert record.meta["cleanup_terminated"] == []  # nothing was left for the final sweep


@pytest.mark.slow
def test_the_ledger_is_billed_at_the_api_price_history(aws):
    """describe_spot_price_history (seeded with the replayed market) prices every row exactly as the replay does."""
    _, record, _, _ = aws
    for row in record.ledger:
        want = Billing().charge(HIST[row.market], row.start_s, row.end_s, str(row.ended_by))
        assert (row.charged_usd, row.refunded_usd) == pytest.approx((want.charged_usd, want.refunded_usd), abs=1e-12)
    provider = [r for r in record.ledger if str(r.ended_by) == "provider"]
    assert provider and all(r.charged_usd == 0.0 and r.refunded_usd > 0 for r in provider)  # the first hour refunded


@pytest.mark.slow
def test_a_capacity_refusal_is_a_launch_failure_and_excludes_the_market(aws):
    _, record, hosts, _ = aws
    first = hosts.run_calls[0]
    assert (first["zone"], first["type"], first["answer"]) == ("us-east-1a", "r3.large", "InsufficientInstanceCapacity")
    # EC2 answers it with HTTP 500, which botocore's standard mode would retry: tried once, then LaunchFailed
    assert [c["answer"] for c in hosts.run_calls if c["launch"] == first["launch"]] == ["InsufficientInstanceCapacity"]
    failed = events(record, "LaunchFailed")[0]
    assert failed["trial_id"] == first["trial"] and failed["error"].startswith("InsufficientInstanceCapacity: ")
    # A is cheaper, but excluded for 30 minutes: the retry goes to B at once, with no back-off (design E12)
    retry = launch_after(record, first["trial"], failed["t"])
    assert retry["market"] == str(B) and retry["resume_step"] == 0 and retry["t"] == failed["t"]
    assert not [r for r in record.log if r["type"] == "ScheduleWakeUp" and r.get("trial_id") == first["trial"]
                and r["t"] == failed["t"]]


@pytest.mark.slow
def test_revocation_checkpoint_then_relaunch_in_another_market(aws):
    _, record, hosts, _ = aws
    notices = events(record, "RevocationNotice")
    assert len(notices) >= 2 and len(hosts.revoked) == len(notices)
    for n in notices:
        tid = n["trial_id"]
        saved = next(e for e in events(record, "CheckpointSaved", tid) if e["t"] >= n["t"])
        # the noticed instance's own end: the relaunched segment may end (at θ, by us) before the provider's termination
        ended = next(e for e in events(record, "SegmentEnded", tid) if e["instance_id"] == n["instance_id"])
        assert saved["reason"] == "revocation" and ended["reason"] == "provider", tid
        assert "noticeTime" in record.meta["worker"][n["instance_id"]]["rebalance"], tid  # the early hint, relayed
        hint = [s for s in record.meta["signals"] if s["kind"] == "rebalance" and s["t"] <= n["t"]]
        assert {"market": str(A), "kind": "rebalance", "value": 1.0} in [
            {k: s[k] for k in ("market", "kind", "value")} for s in hint], tid  # ... to the predictor, before the notice
        relaunch = launch_after(record, tid, saved["t"])  # at once: the revoked instance is left to the provider
        assert relaunch["market"] == str(B) and relaunch["resume_step"] == saved["step"], tid  # A is at 1.0
    # (a slow boot may bring the notice before the first step: then the save is of step 0)
    assert any(e["step"] > 0 for e in events(record, "CheckpointSaved") if e["reason"] == "revocation")


@pytest.mark.slow
def test_the_hourly_hop_resumes_where_it_saved(aws):
    _, record, _, _ = aws
    hops = events(record, "CheckpointSaved")
    hops = [e for e in hops if e["reason"] == "hop"]
    assert hops
    for h in hops:
        nxt = [r for r in launches(record, h["trial_id"]) if r["t"] >= h["t"]]
        if nxt:
            assert nxt[0]["resume_step"] == h["step"], h


@pytest.mark.slow
def test_theta_barrier_keeps_the_top_k(aws, local):
    orch, record, _, _ = aws
    for t in CONFIGS:
        assert ("Terminate", "theta") in decisions(record, t) or t in orch.top_k and THETA_STEP in orch.trials[t].steps
        if t not in orch.top_k:
            assert decisions(record, t)[-1] == ("Stop", "not_top_k"), t
    assert set(orch.top_k) == set(local.top_k)


@pytest.mark.slow
def test_final_metrics_equal_the_local_backend(aws, local):
    orch = aws[0]
    for t in CONFIGS:
        a, lo = orch.trials[t], local.trials[t]
        assert (a.state, a.step) == (lo.state, lo.step), t
        assert a.losses == lo.losses, t  # bit for bit, every step


def test_throttling_is_retried_and_cleanup_terminates_by_tag(moto, tmp_path):
    s = settings(moto, "exp-api", max_attempts=3)
    clients = AwsClients.create(s)
    hosts = Ec2Hosts(moto, "exp-api", workload=WORKLOAD, store=str(tmp_path), log_dir=tmp_path, warm=0)
    try:
        hosts.attach(clients.ec2)
        req = launch_request(instance_type="r3.large", availability_zone="us-east-1b", max_price_usd_per_hour=0.1,
                             ami=s.ami, instance_profile=s.instance_profile,
                             tags={"spottune:experiment": "exp-api", "spottune:trial": "t9", "spottune:launch": "l1"},
                             user_data_script=user_data(image="img:1", segment_url="s3://b/k.json", region=REGION))
        hosts.throttle(1)
        iid = launch(clients.ec2, req)
        assert [c["answer"] for c in hosts.run_calls] == ["RequestLimitExceeded", "ok"]  # botocore retried it
        hosts.refuse("us-east-1b", "r3.large", code="SpotMaxPriceTooLow")
        with pytest.raises(LaunchRefused) as err:
            launch(clients.ec2, req)
        assert err.value.code == "SpotMaxPriceTooLow"
        for code in ("InsufficientInstanceCapacity", "InternalError"):  # both HTTP 500: only the capacity one is final
            hosts.run_calls.clear()
            hosts.refuse("us-east-1b", "r3.large", code=code, status=500)
            with pytest.raises(LaunchRefused) as err:
                launch(clients.ec2, {**req, "TagSpecifications": [{"ResourceType": "instance", "Tags": [
                    *req["TagSpecifications"][0]["Tags"][:2], {"Key": "spottune:launch", "Value": code}]}]})
            assert err.value.code == code
            assert [c["answer"] for c in hosts.run_calls] == [code] * (1 if code.startswith("Insufficient") else 3)
        (inst,) = find_instances(clients.ec2, "exp-api")
        assert (inst.instance_id, inst.availability_zone, inst.trial_id, inst.launch_id) == (iid, "us-east-1b", "t9", "l1")
        desc = clients.ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
        assert desc["MetadataOptions"]["HttpTokens"] == "required"
        assert desc["MetadataOptions"]["HttpPutResponseHopLimit"] == 2
        assert desc.get("InstanceLifecycle") == "spot"
        gone = cleanup(clients.ec2, "exp-api")
        assert [g.instance_id for g in gone] == [iid] and cleanup(clients.ec2, "exp-api") == []
        assert find_instances(clients.ec2, "exp-api")[0].state == "terminated"
    finally:
        hosts.stop()


@pytest.mark.slow
def test_a_killed_orchestrator_leaves_no_instance_running(moto, tmp_path):
    """SIGKILL the orchestrator mid-run: the agents find the lease stale, have their workers checkpoint (within
    ``lease_save_s``) and power their hosts off."""
    exp = "exp-kill"
    hosts = Ec2Hosts(moto, exp, workload=WORKLOAD, store=str(tmp_path / "store"), log_dir=tmp_path, warm=2).start()
    heard = tmp_path / "heard"  # the orchestrator appends each trial's id at its first metric
    proc = subprocess.Popen([sys.executable, "-m", "tests._aws_orchestrator", moto, exp, str(tmp_path / "store"),
                             str(heard)], cwd=str(ROOT), env=hosts.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: len(hosts.booted) == 2, 60, interval_s=0.1, what="the orchestrator launches its two instances")
        wait_until(lambda: heard.exists() and set(heard.read_text().split()) == {"k0", "k1"}, 60, interval_s=0.05,
                   what="both trials report a metric")  # mid-run: both workers train
        proc.kill()
        proc.wait()
        wait_until(lambda: hosts.running() == [], 30, interval_s=0.2, what="every host powers itself off")
        assert sorted(hosts.shutdowns) == sorted(hosts.booted)  # each host powered itself off
        for iid in hosts.booted:
            _, host = hosts.hosts[iid]
            log = (tmp_path / f"{host}.log").read_text()
            assert "lease is stale" in log and "saved step " in log, log[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        hosts.stop()


def test_no_credential_reaches_the_segment_the_user_data_or_the_record(moto, monkeypatch):
    """Storage secrets and the environment's AWS keys stay in this process: the S3 segment, the user data,
    the tags and the run record hold none of them."""
    from spottune.orchestrator import Launch

    secret, env_secret = "sekret-STORAGE-1234567890", "sekret-ENV-0987654321"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", env_secret)
    s = settings(moto, "exp-sec", storage_options={"endpoint_url": moto, "key": "AKIAEXAMPLE", "secret": secret})
    backend = AwsBackend(orchestrator(Cheapest()), Billing(), WORKLOAD, {t: (CONFIGS[t], SEEDS[t]) for t in CONFIGS},
                         FACTS.__getitem__, T0, s)
    backend.queue_url = "https://sqs.example/q.fifo"
    backend.clock.start()
    backend.transport.launch(Launch(trial_id="t0", market=A, max_price_usd_per_hour=0.1, resume_step=0, target_steps=5))
    (inst,) = find_instances(backend.ec2, "exp-sec")
    seg = backend.clients.s3.get_object(Bucket="spottune-test", Key="spottune/exp-sec/segments/l00001.json")["Body"].read()
    import base64

    ud = base64.b64decode(backend.ec2.describe_instance_attribute(InstanceId=inst.instance_id, Attribute="userData")
                          ["UserData"]["Value"])
    for blob in (seg, ud, repr(backend.record).encode(), repr(inst).encode()):
        assert secret.encode() not in blob and env_secret.encode() not in blob and b"AKIAEXAMPLE" not in blob
    assert b"endpoint_url" in seg  # the public options do travel
    backend.clock.stop()
    assert [i.instance_id for i in cleanup(backend.ec2, "exp-sec")] == [inst.instance_id]


def test_caps_are_checked_before_a_launch():
    from spottune.backends.aws import CapExceeded, check_caps

    live = [(0.10, T0), (0.13, T0 + 1800.0)]
    # hourly: 0.23 live + 0.10 = 0.33 <= 0.33 goes; + 0.11 waits; one instance above the cap never can
    assert check_caps(max_price=0.10, live=live, now_s=T0 + 3600, spent_usd=0.0, max_usd_per_hour=0.33, budget_usd=None) is None
    assert check_caps(max_price=0.11, live=live, now_s=T0 + 3600, spent_usd=0.0, max_usd_per_hour=0.33,
                      budget_usd=None).startswith("max-usd-per-hour cap: 0.2300 USD/h")
    with pytest.raises(CapExceeded, match="exceeds --max-usd-per-hour 0.05"):
        check_caps(max_price=0.10, live=[], now_s=T0, spent_usd=0.0, max_usd_per_hour=0.05, budget_usd=None)
    # budget: 1.0 billed + accrued 0.10 * 1 h + 0.13 * 0.5 h = 0.165, + one hour at 0.10 = 1.265
    assert check_caps(max_price=0.10, live=live, now_s=T0 + 3600, spent_usd=1.0, max_usd_per_hour=None,
                      budget_usd=1.265 + 1e-9) is None
    with pytest.raises(CapExceeded, match=r"1.0000 USD billed \+ 0.1650 accrued"):
        check_caps(max_price=0.10, live=live, now_s=T0 + 3600, spent_usd=1.0, max_usd_per_hour=None, budget_usd=1.26)


def test_dry_run_prints_the_plan_and_launches_nothing(tmp_path):
    from click.testing import CliRunner

    from spottune.cli import cli

    cfg = tmp_path / "aws.yaml"
    cfg.write_text("workload: logreg\nsearch_space: {lr: {grid_search: [0.05, 0.2]}}\nmax_steps: 12\ntheta: 0.5\n"
                   "top_k: 1\ninstance_types: [r3.large, c3.xlarge]\nzones: [us-east-1a]\npredictor: none\n"
                   "aws: {bucket: my-bucket, live_prices: false, endpoint_url: 'http://127.0.0.1:9'}\n")
    result = CliRunner().invoke(cli, ["run", "--config", str(cfg), "--backend", "aws", "--dry-run",
                                      "--max-usd-per-hour", "0.5", "--output", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "dry run: nothing is launched"
    rows = [ln.split() for ln in lines if ln.startswith("t0")]
    assert [r[0] for r in rows] == ["t00", "t01"] and all(r[1].startswith("us-east-1a/") for r in rows)
    bound = sum(float(r[-1]) for r in rows)
    assert f"hourly cost bound (sum of max prices): {bound:.5f} USD/h" in result.output
    assert "--max-usd-per-hour 0.5: ok" in result.output
    assert not (tmp_path / "out").exists()  # nothing ran (the endpoint is a closed port: any call would fail)


def test_cleanup_command_terminates_what_is_tagged(moto):
    from click.testing import CliRunner

    from spottune.cli import cli

    ec2 = boto3.client("ec2", endpoint_url=moto, region_name=REGION)
    tags = [{"ResourceType": "instance", "Tags": [{"Key": "spottune:experiment", "Value": "exp-cli"}]}]
    ids = [i["InstanceId"] for i in ec2.run_instances(ImageId="ami-12c6146b", MinCount=2, MaxCount=2,
                                                      InstanceType="r3.large", TagSpecifications=tags)["Instances"]]
    other = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="r3.large")["Instances"][0]
    result = CliRunner().invoke(cli, ["cleanup", "exp-cli", "--endpoint-url", moto])
    assert result.exit_code == 0, result.output
    assert sorted(ln.split()[1] for ln in result.output.splitlines() if ln.startswith("terminated ")) == sorted(ids)
    assert result.output.splitlines()[-1] == "2 instance(s) of experiment 'exp-cli' terminated"
    state = {i["InstanceId"]: i["State"]["Name"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]}
    assert all(state[i] == "terminated" for i in ids) and state[other["InstanceId"]] != "terminated"


@pytest.mark.slow
def test_tune_on_the_aws_backend_restores_from_s3_and_writes_results(moto, tmp_path):
    """The composition root's aws path end to end: spottune.tune(backend="aws") against the moto server (replayed
    prices, no revocation), checkpoints in S3 on moto, the usual results folder, nothing left running. Each host
    runs its user-data script: the image's entry point ``agent --segment URL``, then the power-off."""
    import json

    import spottune

    exp = "exp-tune"
    hosts = Ec2Hosts(moto, exp, workload=WORKLOAD, store="", log_dir=tmp_path, user_data=True).start()
    try:
        grid = spottune.tune(workload=WORKLOAD, search_space={"lr": spottune.grid_search([0.02, 0.05])}, max_steps=8,
                             metric="loss", mode="min",
                             theta=0.5, top_k=1, instance_types=["r3.large"], availability_zones=["us-east-1a"],
                             predictor="none", backend="aws", time_scale=SCALE, seed=3, train_days=0.5,
                             start_utc="2015-05-05T00:00Z", prices=str(_trace(tmp_path)),
                             storage_path=f"s3://spottune-test/{exp}/ckpt", storage_options={"endpoint_url": moto},
                             aws={"bucket": "spottune-test", "experiment": exp, "live_prices": False,
                                  "endpoint_url": moto, "lease_s": 3000.0},
                             output=str(tmp_path / "res"))
        hosts.settle()
        assert hosts.running() == [] and hosts.errors == []
    finally:
        hosts.stop()
    df = grid.get_dataframe()
    assert sorted(df["state"]) == ["finished", "stopped_early"]
    assert sorted(df["steps"]) == [4, 8]
    summary = json.loads((tmp_path / "res" / "summary.json").read_text())
    assert summary["settings"]["backend"] == "aws" and summary["settings"]["experiment"] == exp
    assert len(grid.ledger) == len(hosts.booted) >= 3  # 2 fresh launches + the winner after the θ pause
    scripts = sorted(tmp_path.glob("h*.user-data.sh"))
    assert len(scripts) == len(hosts.booted) and all("--segment" in p.read_text() for p in scripts)
    # the hosts ran nothing but their scripts (docker run IMAGE --segment URL): the trained steps came through them
    s3 = boto3.client("s3", endpoint_url=moto)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="spottune-test", Prefix=f"{exp}/ckpt/")["Contents"]]
    assert keys  # the workers saved (and the winner restored) through S3


def _trace(tmp_path):
    """The scripted market as a price file (the replayed trace moto serves)."""
    path = tmp_path / "prices.csv"
    HIST.table.to_csv(path, index=False)
    return path


def test_a_missing_bucket_is_one_clear_error_and_nothing_is_launched(moto):
    from spottune.errors import BackendError

    s = settings(moto, "exp-nobucket", bucket="no-such-bucket")
    backend = AwsBackend(orchestrator(Cheapest()), Billing(), WORKLOAD, {t: (CONFIGS[t], SEEDS[t]) for t in CONFIGS},
                         FACTS.__getitem__, T0, s)
    with pytest.raises(BackendError, match=r"^aws backend: NoSuchBucket: .*PutObject"):
        backend.run()
    assert find_instances(backend.ec2, "exp-nobucket") == []


def test_spot_placement_scores_per_market_with_a_stubbed_ec2():
    """``GetSpotPlacementScores`` is not implemented by moto 5.2.5: this is a botocore Stubber (a mock) with the
    answer shapes of the EC2 API reference; per zone ID, mapped to zone names, one call per instance type."""
    from botocore.stub import Stubber

    from spottune.backends.aws._signals import placement_scores

    ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    zones = {"AvailabilityZones": [{"ZoneName": "us-east-1a", "ZoneId": "use1-az6"},
                                   {"ZoneName": "us-east-1b", "ZoneId": "use1-az1"},
                                   {"ZoneName": "us-east-1c", "ZoneId": "use1-az2"}]}
    with Stubber(ec2) as stub:
        stub.add_response("describe_availability_zones", zones, {})
        for itype, scores in (("r3.large", {"use1-az6": 9, "use1-az1": 3, "use1-az2": 7}),
                              ("c3.xlarge", {"use1-az1": 1})):
            stub.add_response("get_spot_placement_scores", {"SpotPlacementScores": [
                {"Region": REGION, "AvailabilityZoneId": z, "Score": s} for z, s in scores.items()]},
                {"InstanceTypes": [itype], "TargetCapacity": 1, "SingleAvailabilityZone": True,
                 "RegionNames": [REGION]})
        got = placement_scores(ec2, ["r3.large", "c3.xlarge"], ["us-east-1a", "us-east-1b"], region=REGION)
        stub.assert_no_pending_responses()
    assert got == {A: 9, Market("us-east-1b", "r3.large"): 3, B: 1}  # us-east-1c is not in the pool


def test_without_placement_scores_the_run_goes_on_with_a_warning(moto):
    """moto does not implement the call (HTTP 500, an HTML page): the fallback is no score and one warning."""
    from spottune.backends.aws._session import client
    from spottune.backends.aws._signals import read_placement_scores

    ec2 = client("ec2", region=REGION, endpoint_url=moto, max_attempts=1)
    with pytest.warns(RuntimeWarning, match="Spot placement scores are unavailable"):
        assert read_placement_scores(ec2, ["r3.large"], ["us-east-1a"], region=REGION) == {}


@pytest.mark.slow  # two hosts warm up (a few seconds each on a loaded machine)
def test_the_budget_guard_counts_the_live_instances_first_hours(moto, tmp_path):
    """Four trials on A at max price 0.10 USD/h under --budget-usd 0.25: the third launch would commit 0.30 USD (two
    live first hours + its own), so the run stops there with two instances launched and ended; before the shared
    guard the aws backend counted only their accrued time (0 at the start) and launched all four (0.40 USD)."""
    from tests.test_budget_cap import committed_at_max_price

    orch, record, hosts, left = aws_run(moto, tmp_path, "exp-budget", budget_usd=0.25, warm=2)
    assert left == [] and hosts.errors == []
    assert "would exceed --budget-usd 0.25" in record.meta["budget_exhausted"]
    assert [str(r.market) for r in record.ledger] == [str(A)] * 2
    assert committed_at_max_price(record) == pytest.approx(0.20)  # <= 0.25
    assert sum(r.charged_usd for r in record.ledger) <= 0.25
    assert [r.reason for r in record.ledger] == ["budget", "budget"]


def test_hosts_that_never_report_are_named_not_waited_for(moto, tmp_path):
    """No host runs the user data (a plain moto server): after report_timeout_s each launch is named in a warning
    and its segment fails; with max_failures 1 the trial fails after two silent launches and the run ends."""
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=MAX_STEPS, theta=THETA, top_k=1, metric="loss",
                                                   max_failures=1), Cheapest())
    s = settings(moto, "exp-silent", store=str(tmp_path / "store"), report_timeout_s=1.5, max_wall_s=60.0)
    backend = AwsBackend(orch, Billing(), WORKLOAD, {"t0": (CONFIGS["t0"], SEEDS["t0"])}, FACTS.__getitem__, T0, s,
                         clients=AwsClients.create(s))
    with pytest.warns(RuntimeWarning, match=r"has not reported within 1.5 s of its launch: its user data did not "
                                            r"start the agent"):
        record = backend.run()
    assert orch.trials["t0"].state is TrialState.FAILED
    assert len(record.meta["silent_instances"]) == 2 == len(record.ledger)
    assert [r.reason for r in record.ledger] == ["failure", "failure"]
    assert find_instances(backend.ec2, "exp-silent") and all(
        i.state == "terminated" for i in find_instances(backend.ec2, "exp-silent"))
