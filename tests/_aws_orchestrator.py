"""An aws-backend run in its own process, for the "orchestrator killed" scenario of tests/test_aws_backend.py.

``python -m tests._aws_orchestrator ENDPOINT EXPERIMENT STORE``: two trials of ``Walk`` with far more steps
than the test waits for, on the moto server at ENDPOINT; the test kills this process.
"""

from __future__ import annotations

import sys

from spotmarket import Billing
from spottune.backends.aws import AwsBackend, AwsSettings
from spottune.orchestrator import Orchestrator, OrchestratorConfig
from tests.test_aws_backend import FACTS, SCALE, Cheapest
from tests.test_sim_backend import T0
from tests.test_worker_process import WORKLOAD


def main(endpoint: str, experiment: str, store: str) -> None:
    trials = {"k0": ({"lr": 0.02}, 1), "k1": ({"lr": 0.05}, 2)}
    orch = Orchestrator(list(trials), OrchestratorConfig(max_steps=10_000, theta=1.0, top_k=2, metric="loss"), Cheapest())
    settings = AwsSettings(experiment=experiment, bucket="spottune-test", store_url=store, endpoint_url=endpoint,
                           time_scale=SCALE, pace_steps=True, lease_s=2000.0, lease_save_s=10_000.0, describe_every_s=60.0,
                           max_steps=10_000, reference_seconds_per_step=120.0, max_wall_s=120.0)
    AwsBackend(orch, Billing(), WORKLOAD, trials, FACTS.__getitem__, T0, settings).run()


if __name__ == "__main__":
    main(*sys.argv[1:4])
