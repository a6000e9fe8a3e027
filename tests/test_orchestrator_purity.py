"""The orchestrator stays sans-I/O: an ast check of its imports and calls (STYLE.md §1)."""

from __future__ import annotations

import ast
from pathlib import Path

import spottune.orchestrator

FORBIDDEN_MODULES = {"boto3", "botocore", "fsspec", "s3fs", "subprocess", "socket", "time", "random", "os",
                     "requests", "urllib", "http", "asyncio", "threading"}
FORBIDDEN_CALLS = {("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("random", "random"),
                   ("np.random", "default_rng"), ("np.random", "seed"), ("numpy.random", "seed")}


def _sources():
    folder = Path(spottune.orchestrator.__file__).parent
    files = sorted(folder.glob("*.py"))
    assert len(files) >= 5
    return files


def _dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def test_orchestrator_does_no_io_and_reads_no_clock():
    problems = []
    for path in _sources():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                names = []
            for name in names:
                if name.split(".")[0] in FORBIDDEN_MODULES or name.startswith(("datetime.datetime", "numpy.random")):
                    problems.append(f"{path.name}:{node.lineno} imports {name}")
            if isinstance(node, ast.Call):
                func = _dotted(node.func) or ""
                head, _, attr = func.rpartition(".")
                if (head.split(".")[-1], attr) in {(h.split(".")[-1], a) for h, a in FORBIDDEN_CALLS} or func in {"open", "print", "input"}:
                    problems.append(f"{path.name}:{node.lineno} calls {func}")
    assert problems == []


def test_the_check_catches_a_forbidden_import(tmp_path):
    bad = "import time\nfrom datetime import datetime\nx = datetime.now()\n"
    tree = ast.parse(bad)
    hits = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert {a.name for h in hits for a in h.names} >= {"time", "datetime"}
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call))
    assert _dotted(call.func) == "datetime.now"
