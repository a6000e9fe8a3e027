"""The aws backend end to end against a moto server, with a harness that plays the EC2 hosts.

One moto server for the module (EC2 + S3 + SQS + IAM on 127.0.0.1, spot price history seeded from the
scripted market), agents and workers as real local processes (:mod:`tests._aws_host`).

The scripted market (``tests.test_sim_backend.history``): A (us-east-1a r3.large) at 0.02 USD/h spiking to
1.0 from 1800 s to 2400 s; B (us-east-1b c3.xlarge) flat at 0.05. The chooser takes the cheapest market
not excluded, at max price = price + 0.08 (A: 0.10, B: 0.13), so the spike revokes every instance on A
and the relaunch goes to B. Four trials of the NumPy ``Walk`` trainable, 40 steps of 180 s, θ = 0.5,
top-2; the first launch of t3 is refused for capacity (InsufficientInstanceCapacity on A: A is excluded
for 30 min, so t3 starts on B).
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import boto3
import pytest

from provisioner import MarketExclusions
from spotmarket import Billing, LegacyBidRevocation
from spotmarket.prices import Market
from spottune.backends import LocalBackend, LocalSettings
from spottune.backends.aws import AwsBackend, AwsClients, AwsSettings, cleanup, find_instances
from spottune.orchestrator import Orchestrator, OrchestratorConfig, TrialState
from tests._aws_host import REGION, ROOT, Ec2Hosts, moto_server
from tests.test_sim_backend import A, B, T0, history
from tests.test_worker_process import WORKLOAD

pytestmark = pytest.mark.server

FACTS = {"r3.large": (2, 6.5), "c3.xlarge": (4, 14.0)}
CONFIGS = {"t0": {"lr": 0.02}, "t1": {"lr": 0.05}, "t2": {"lr": 0.01}, "t3": {"lr": 0.03}}
SEEDS = {t: 200 + i for i, t in enumerate(CONFIGS)}
MAX_STEPS, THETA, TOP_K, SPS = 40, 0.5, 2, 120.0
SCALE = 500.0
HIST = history(spike_at_s=1800.0, hours=12)


@dataclass(frozen=True)
class Choice:
    market: Market
    max_price_usd_per_hour: float


class Cheapest:
    """The cheapest market with a known price that is not excluded; max price = price + 0.08 USD/h."""

    def __init__(self, exclusions=None):
        self.exclusions = exclusions
        self.segments = []

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


def settings(url, experiment, **kw):
    base = dict(experiment=experiment, bucket="spottune-test", store_url=f"s3://spottune-test/ckpt/{experiment}",
                endpoint_url=url, storage_options={"endpoint_url": url}, time_scale=SCALE, pace_steps=True,
                poll_s=5.0, describe_every_s=10.0, lease_s=600.0, linger_s=600.0, max_attempts=2,
                max_steps=MAX_STEPS, reference_seconds_per_step=SPS, max_wall_s=120.0)
    base.update(kw)
    return AwsSettings(**base)


def aws_run(url, tmp_path, experiment, *, inject=None, **kw):
    exclusions = MarketExclusions(1800.0)
    orch = orchestrator(Cheapest(exclusions))
    s = settings(url, experiment, **kw)
    backend = AwsBackend(orch, Billing(), WORKLOAD, {t: (CONFIGS[t], SEEDS[t]) for t in CONFIGS}, FACTS.__getitem__,
                         T0, s, clients=AwsClients.create(s), exclusions=exclusions)
    hosts = Ec2Hosts(url, experiment, workload=WORKLOAD, store=s.store_url, log_dir=tmp_path,
                     revocation=LegacyBidRevocation(HIST), clock=backend.clock, warm=4)
    hosts.attach(backend.ec2)
    if inject:
        inject(hosts)
    hosts.start()
    try:
        record = backend.run()
        time.sleep(0.3)
        left = hosts.running()
    finally:
        hosts.stop()
    return orch, record, hosts, left


@pytest.fixture(scope="module")
def aws(moto, tmp_path_factory):
    return aws_run(moto, tmp_path_factory.mktemp("aws"), "exp-main",
                   inject=lambda h: h.refuse("us-east-1a", "r3.large", times=1))


def decisions(record, trial_id):
    return [(r["type"], r.get("reason")) for r in record.log if r["kind"] == "action" and r.get("trial_id") == trial_id]


def events(record, type_, trial_id=None):
    return [r for r in record.log if r["kind"] == "event" and r["type"] == type_
            and (trial_id is None or r.get("trial_id") == trial_id)]


def test_debug(aws):
    orch, record, hosts, left = aws
    for t in CONFIGS:
        print(t, orch.trials[t].state, orch.trials[t].step, decisions(record, t))
    for r in record.ledger:
        print(r)
    print(hosts.run_calls, hosts.revoked, hosts.shutdowns, left, hosts.errors)
    assert False
