"""An aws-backend run in its own process, for the "orchestrator killed" scenario of tests/test_aws_backend.py.

``python -m tests._aws_orchestrator ENDPOINT EXPERIMENT STORE [HEARD]``: two trials of ``Walk`` with far more
steps than the test waits for, on the moto server at ENDPOINT; the test kills this process. HEARD: a file to
which the id of each trial is appended when its first metric arrives (the test kills the process once both
trials train).
"""

from __future__ import annotations

import sys
from pathlib import Path

from spotmarket import Billing
from spottune.backends.aws import AwsBackend, AwsSettings
from spottune.orchestrator import MetricReported, Orchestrator, OrchestratorConfig
from tests.test_aws_backend import FACTS, SCALE, Cheapest
from tests.test_sim_backend import T0
from tests.test_worker_process import WORKLOAD


class Heard(Orchestrator):
    """Appends a trial's id to the file ``heard`` at its first reported metric."""

    def __init__(self, *args, heard: Path | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.heard, self.told = heard, set()

    def handle(self, event):
        if self.heard is not None and isinstance(event, MetricReported) and event.trial_id not in self.told:
            self.told.add(event.trial_id)
            with open(self.heard, "a") as f:
                f.write(event.trial_id + "\n")
        return super().handle(event)


def main(endpoint: str, experiment: str, store: str, heard: str | None = None) -> None:
    trials = {"k0": ({"lr": 0.02}, 1), "k1": ({"lr": 0.05}, 2)}
    orch = Heard(list(trials), OrchestratorConfig(max_steps=10_000, theta=1.0, top_k=2, metric="loss"), Cheapest(),
                 heard=Path(heard) if heard else None)
    settings = AwsSettings(experiment=experiment, bucket="spottune-test", store_url=store, endpoint_url=endpoint,
                           time_scale=SCALE, pace_steps=True, lease_s=2000.0, lease_save_s=10_000.0, describe_every_s=60.0,
                           max_steps=10_000, reference_seconds_per_step=120.0, max_wall_s=120.0)
    AwsBackend(orch, Billing(), WORKLOAD, trials, FACTS.__getitem__, T0, settings).run()


if __name__ == "__main__":
    main(*sys.argv[1:5])
