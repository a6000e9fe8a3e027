"""The worker protocol's types (spottune.backends.local._messages): exact wire format, round trips, bad lines."""

from __future__ import annotations

import pytest

from spottune.backends.local._messages import (
    CheckpointCommand,
    Exited,
    ExitCommand,
    Failed,
    Idle,
    Metric,
    Notice,
    Ready,
    Saved,
    SegmentCommand,
    Standby,
    decode_command,
    decode_report,
    encode,
)

REPORTS = [
    (Ready(step=0, version=None, restore_s=0.5, pid=7), '{"event": "ready", "step": 0, "restore_s": 0.5, "pid": 7}'),
    (Ready(step=5, version=1, restore_s=0.1, pid=7, requested_step=10, lost_steps=5),
     '{"event": "ready", "step": 5, "version": 1, "restore_s": 0.1, "pid": 7, "requested_step": 10, "lost_steps": 5}'),
    (Metric(step=3, metrics={"loss": 0.25}), '{"event": "metric", "step": 3, "metrics": {"loss": 0.25}}'),
    (Notice(action="terminate", time="2015-05-05T00:32:00Z"),
     '{"event": "notice", "action": "terminate", "time": "2015-05-05T00:32:00Z"}'),
    (Saved(step=4, version=2, reason="hop", save_s=0.01),
     '{"event": "checkpoint", "step": 4, "version": 2, "reason": "hop", "save_s": 0.01}'),
    (Idle(step=9), '{"event": "idle", "step": 9}'),
    (Failed(during="step", error="RuntimeError: boom"), '{"event": "failed", "during": "step", "error": "RuntimeError: boom"}'),
    (Exited(code=0), '{"event": "exit", "code": 0}'),
    (Standby(pid=7, warm_up_s=1.5), '{"event": "standby", "pid": 7, "warm_up_s": 1.5}'),
]
COMMANDS = [
    (CheckpointCommand(reason="revocation"), '{"cmd": "checkpoint", "reason": "revocation"}'),
    (ExitCommand(), '{"cmd": "exit"}'),
    (SegmentCommand(["--trial", "t0"]), '{"argv": ["--trial", "t0"]}'),
]


@pytest.mark.parametrize("message, line", REPORTS)
def test_reports_have_the_documented_wire_format_and_round_trip(message, line):
    assert encode(message) == line
    assert decode_report(line + "\n") == message


@pytest.mark.parametrize("message, line", COMMANDS)
def test_commands_have_the_documented_wire_format_and_round_trip(message, line):
    assert encode(message) == line
    assert decode_command(line) == message


def test_unknown_fields_are_ignored_and_defaults_apply():
    assert decode_report('{"event": "checkpoint", "step": 2, "extra": 1}') == Saved(step=2)
    assert decode_command('{"cmd": "checkpoint"}') == CheckpointCommand(reason="requested")


@pytest.mark.parametrize("line, match", [
    ("hello from user code", "not a JSON message"),
    ("[1, 2]", "not a JSON object"),
    ('{"event": "nope"}', "not a worker report"),
    ('{"step": 3}', "not a worker report"),
    ('{"event": "metric"}', "malformed 'metric' message"),
    ('{"event": "failed", "error": "x"}', "malformed 'failed' message"),
])
def test_bad_report_lines_are_refused(line, match):
    with pytest.raises(ValueError, match=match):
        decode_report(line)


@pytest.mark.parametrize("line, match", [
    ('{"cmd": "reboot"}', "not a worker command"),
    ('{"argv": "--trial t0"}', "argv must be a list"),
    ("{", "not a JSON message"),
])
def test_bad_command_lines_are_refused(line, match):
    with pytest.raises(ValueError, match=match):
        decode_command(line)


# -- the instance lifecycle table of the local backend -------------------------------------------------------


def _instance():
    from spottune.backends.local._backend import _Instance

    return _Instance(instance_id="i1", trial_id="t0", market=None, max_price=0.1, started_s=0.0, notice_s=1e9,
                     termination_s=1e9, seconds_per_step=60.0, vcpus=2)


def test_lifecycle_of_a_hop_and_of_a_revocation_race():
    from spottune.backends.local._backend import Phase

    inst = _instance()
    for trigger, phase in [("ready", Phase.RUNNING), ("checkpoint", Phase.CHECKPOINTING), ("saved", Phase.SAVED),
                           ("recycle", Phase.RECYCLED)]:
        inst.to(trigger)
        assert inst.phase is phase
    assert inst.gone
    race = _instance()  # the provider kills it mid-save; the save it already wrote is still read
    for trigger in ("ready", "checkpoint", "kill", "saved"):
        race.to(trigger)
    assert race.phase is Phase.KILLED and race.gone


@pytest.mark.parametrize("triggers, bad", [
    (("ready", "ready"), "ready"),  # two ready reports
    (("ready", "saved", "failed"), "failed"),  # a worker that saved cannot fail afterwards
    (("ready", "checkpoint", "checkpoint"), "checkpoint"),  # one checkpoint per segment
    (("ready", "recycle"), "recycle"),  # only a saved segment's process may be pooled again
    (("ready", "checkpoint", "saved", "recycle", "kill"), "kill"),  # a recycled process runs another segment
])
def test_illegal_transitions_are_driver_bugs(triggers, bad):
    from spottune.backends.local._backend import TRANSITIONS
    from spottune.errors import BackendError

    inst = _instance()
    for trigger in triggers[:-1]:
        inst.to(trigger)
    before = inst.phase
    assert (before, bad) not in TRANSITIONS
    with pytest.raises(BackendError, match=rf"instance i1 of trial t0: can't handle '{bad}' in phase {before.name}"):
        inst.to(bad)
    assert inst.phase is before
