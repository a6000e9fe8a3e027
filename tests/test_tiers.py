"""The fast tier stays fast: the markers that keep tests out of `make check` are honest (tests/conftest.py: Tiers).

- No test recorded above ``SLOW_S`` in tests/durations.json is in the fast tier, and the record covers the suite.
- A test in the fast tier that starts a process fails (the conftest's guard).
- `make check` selects exactly the conftest's fast tier.
- No test waits with a fixed wall-clock sleep: it waits on the condition (:func:`tests._wait.wait_until`).
"""

from __future__ import annotations

import ast
import re
import time
from pathlib import Path

import pytest

from tests._wait import wait_until
from tests.conftest import COLLECTED, DURATIONS, FAST_TIER, FAST_TIER_EXCLUDES, SLOW_S, recorded

TESTS = Path(__file__).parent
ROOT = TESTS.parent


def slow_in_fast_tier(collected: dict[str, tuple[frozenset[str], tuple[str, ...]]], tests: dict[str, float],
                      fixtures: dict[str, float], slow_s: float) -> dict[str, float]:
    """The tests of ``collected`` (node id -> (markers, shared fixtures)) in the fast tier that were recorded above
    ``slow_s`` seconds, or use a fixture whose setup was: node id -> those seconds."""
    out = {}
    for nodeid, (marks, used) in collected.items():
        seconds = max([tests.get(nodeid, 0.0), *(fixtures.get(f, 0.0) for f in used)])
        if not marks & set(FAST_TIER_EXCLUDES) and seconds > slow_s:
            out[nodeid] = seconds
    return out


def test_slow_in_fast_tier_finds_an_unmarked_slow_test_or_fixture():
    collected = {"t.py::fast": (frozenset(), ()), "t.py::slow": (frozenset(), ()),
                 "t.py::marked": (frozenset({"slow"}), ()), "t.py::server": (frozenset({"server", "parametrize"}), ()),
                 "t.py::new": (frozenset(), ()), "t.py::shares": (frozenset(), ("t.py::run",))}
    tests = {"t.py::fast": 0.3, "t.py::slow": 2.5, "t.py::marked": 9.0, "t.py::server": 30.0, "t.py::shares": 0.1}
    assert slow_in_fast_tier(collected, tests, {"t.py::run": 40.0}, 2.0) == {"t.py::slow": 2.5, "t.py::shares": 40.0}
    assert slow_in_fast_tier(collected, tests, {"t.py::run": 1.0}, 3.0) == {}


def test_no_test_recorded_as_slow_is_in_the_fast_tier(request):
    """Checks the session's own collection, so it needs the whole suite collected (`make check`, `make test`)."""
    config = request.config
    whole = any(Path(arg.split("::", 1)[0]).resolve() in (TESTS, ROOT) for arg in config.args)
    if not whole:
        pytest.skip("checks the whole suite's markers: run it in `make check` or `make test`")
    collected = config.stash[COLLECTED]
    tests, fixtures = recorded()
    offenders = slow_in_fast_tier(collected, tests, fixtures, SLOW_S)
    assert not offenders, (f"recorded above {SLOW_S:g} s in {DURATIONS.name} but in the fast tier (not marked slow "
                           f"at collection): " + ", ".join(f"{n} ({s:.1f} s)" for n, s in sorted(offenders.items())))
    # the record covers the suite (a record of another suite would let anything through)
    unrecorded = sorted(set(collected) - set(tests))
    assert len(unrecorded) <= len(collected) // 4, (f"{len(unrecorded)} of {len(collected)} tests have no recorded "
                                                    f"time: re-record with `make durations`")


def test_make_check_selects_the_fast_tier():
    makefile = (ROOT / "Makefile").read_text()
    (tier,) = re.findall(r"^FAST_TIER\s*:=\s*(.+)$", makefile, flags=re.M)
    assert tier.strip() == FAST_TIER
    (recipe,) = re.findall(r"^check:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    assert "-m '$(FAST_TIER)'" in recipe


GUARDED = """
import sys

import pytest


def test_unmarked_python():
    sys.audit("subprocess.Popen", None, [sys.executable, "-c", "pass"], None, None)


def test_unmarked_fork():
    sys.audit("os.fork")


@pytest.mark.process
def test_marked_python():
    sys.audit("subprocess.Popen", None, [sys.executable, "-c", "pass"], None, None)


def test_unmarked_quick_tool():
    sys.audit("subprocess.Popen", None, ["git", "rev-parse", "HEAD"], None, None)
"""


def test_a_test_that_starts_a_process_unmarked_fails(pytester):
    """The guard sees the interpreter's audit events (raised here without starting anything)."""
    pytester.makeini("[pytest]\nmarkers =\n    process: starts a real process\n")
    pytester.makepyfile(test_guarded=GUARDED)
    result = pytester.runpytest_inprocess("-p", "tests.conftest", "-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=2, failed=2)
    out = result.stdout.str()
    assert "FAILED test_guarded.py::test_unmarked_python" in out and "FAILED test_guarded.py::test_unmarked_fork" in out
    assert "is in the fast tier but started 1 process(es)" in out and "mark it @pytest.mark.process" in out
    assert "a fork of the test process" in out


def _fixed_sleeps(source: str) -> list[tuple[int, str]]:
    """``time.sleep`` calls outside a ``while`` loop (a poll), with the function they are in."""
    out: list[tuple[int, str]] = []

    def visit(node: ast.AST, function: str, in_while: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child.name, False)
                continue
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) and child.func.attr == "sleep"
                    and isinstance(child.func.value, ast.Name) and child.func.value.id == "time" and not in_while):
                out.append((child.lineno, function))
            visit(child, function, in_while or isinstance(child, ast.While))

    visit(ast.parse(source), "<module>", False)
    return out


def test_fixed_sleeps_are_found_outside_a_polling_loop():
    source = ("import time\n"
              "def f():\n    time.sleep(0.3)\n"
              "def g():\n    while not done():\n        time.sleep(0.01)\n"
              "def h():\n    for _ in range(3):\n        time.sleep(1)\n")
    assert _fixed_sleeps(source) == [(3, "f"), (9, "h")]


#: sleeps that are what the test emulates, not a wait: (file, function)
EMULATED = {("test_worker_process.py", "save_checkpoint"),  # a slow checkpoint upload
            ("_ray_cloud.py", "preempt"),  # the provider ends the drained nodes at the notice's deadline
            ("test_aws_agent.py", "get_command")}  # a slow read of the segment's command object from S3


def test_no_test_waits_with_a_fixed_sleep():
    found = [f"{path.name}:{line} ({function})" for path in sorted(TESTS.glob("*.py"))
             for line, function in _fixed_sleeps(path.read_text()) if (path.name, function) not in EMULATED]
    assert not found, f"fixed sleeps (wait on the condition with tests._wait.wait_until): {', '.join(found)}"


def test_wait_until_returns_the_first_truthy_value():
    calls = []

    def third_time():
        calls.append(1)
        return len(calls) >= 3 and "ready"

    assert wait_until(third_time, 5.0, interval_s=0.001) == "ready" and len(calls) == 3


def test_wait_until_gives_up_after_the_timeout():
    t0 = time.monotonic()
    with pytest.raises(AssertionError, match=r"not within 0.05 s: the door opens"):
        wait_until(lambda: False, 0.05, interval_s=0.01, what="the door opens")
    assert 0.05 <= time.monotonic() - t0 < 5.0
