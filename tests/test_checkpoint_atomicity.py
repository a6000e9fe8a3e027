"""A writer process killed in the middle of a checkpoint leaves the previous good version restorable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid

import pytest

from spottune.checkpoint import open_store

WRITER = textwrap.dedent("""
    import json, sys
    from spottune.checkpoint._store import FsspecCheckpointStore

    class HeldStore(FsspecCheckpointStore):
        def _put(self, local, remote):
            super()._put(local, remote)
            print("uploaded", remote, flush=True)
            sys.stdin.readline()   # held between two files until the test has killed it (or lets it go on)

    url, options, folder = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    HeldStore(url, options).save("t00", folder, step=2)
    print("published", flush=True)
""")


@pytest.fixture(params=["file", pytest.param("s3", marks=pytest.mark.server)])
def store_args(request, tmp_path):
    if request.param == "file":
        return str(tmp_path / "store"), {}
    seaweedfs = request.getfixturevalue("seaweedfs")
    return f"s3://{seaweedfs['bucket']}/kill-{uuid.uuid4().hex}", seaweedfs["storage_options"]


@pytest.mark.process
def test_killed_writer_leaves_previous_version(store_args, tmp_path):
    url, options = store_args
    store = open_store(url, options)
    v1 = tmp_path / "v1"
    v1.mkdir()
    (v1 / "a").write_bytes(b"first")
    store.save("t00", v1, step=1)
    v2 = tmp_path / "v2"
    v2.mkdir()
    for name in "abcdef":
        (v2 / name).write_bytes(name.encode() * 1000)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, url, json.dumps(options), str(v2)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        line = proc.stdout.readline()
        assert line.startswith("uploaded"), line
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    good = store.latest_good("t00")
    assert (good.version, good.step) == (1, 1)
    assert store.restore("t00", tmp_path / "out").step == 1
    assert (tmp_path / "out" / "a").read_bytes() == b"first" and not (tmp_path / "out" / "b").exists()
    # the next writer publishes version 2 and sweeps the dead writer's files away
    info = store.save("t00", v2, step=2)
    assert info.version == 2
    data = {p.split("/data/", 1)[1].split("/", 1)[0] for p in store.fs.find(f"{store.root}/t00/data")}
    assert len(data) == 2  # v1 (kept) and the new v2; the killed writer's upload is gone
