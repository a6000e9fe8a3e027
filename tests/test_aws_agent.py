"""The EC2 agent's relay order (``spottune.backends.aws.agent``), without moto: a real IMDS emulator and a real
worker process that reports the interruption notice as its first line; the queue and the command object are
in-memory fakes of SQS and S3 (only the order of what the agent sends is asserted)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from spottune.backends.aws.agent import Agent
from spottune.backends.local._messages import Exited, Notice, encode
from spottune.backends.local.imds import ImdsEmulator
from tests.test_security_secrets import _Outbox, _segment

#: A warm worker whose host was revoked while it booted: the notice is its first report, then it exits.
NOTICED_AT_ONCE = f"""
import sys
sys.stdin.readline()  # the segment's arguments
print({encode(Notice(action="terminate", time="2015-05-05T00:32:00Z"))!r}, flush=True)
print({encode(Exited(code=0))!r}, flush=True)
"""


class _Control:
    """The segment's command object and the lease in S3; a command read takes ``S3_READ_S``, as one to S3 (or to
    moto on a loaded machine) may: meanwhile the worker's first report is relayed."""

    S3_READ_S = 0.5

    def get_command(self, launch: str) -> None:
        time.sleep(self.S3_READ_S)
        return None

    def lease_stale(self) -> bool:
        return False


@pytest.mark.process
def test_a_hint_posted_while_the_host_booted_is_relayed_before_the_workers_notice():
    outbox, code = _Outbox(), []
    with ImdsEmulator() as imds:
        url = imds.register("i-1")
        imds.rebalance("i-1", time_s=1430785500.0)  # 00:25, before the host booted
        imds.notify("i-1", time_s=1430785920.0)
        worker = subprocess.Popen([sys.executable, "-c", NOTICED_AT_ONCE], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, bufsize=1)
        agent = Agent({**_segment("logreg"), "poll_wall_s": 0.05, "linger_wall_s": 0.0}, control=_Control(),
                      outbox=outbox, imds_url=url, workload="logreg")
        # off the main thread, so that the agent installs no SIGTERM handler in the test process
        runner = threading.Thread(target=lambda: code.append(agent.run(worker)))
        runner.start()
        runner.join(timeout=30)
    assert code == [0]
    assert [kind for kind, _ in outbox.sent] == ["rebalance", "report", "exit"], outbox.sent
    assert "2015-05-05T00:25:00Z" in outbox.sent[0][1] and '"notice"' in outbox.sent[1][1]
