"""The orchestrators stay sans-I/O: an ast check of their imports and calls (STYLE.md §1).

Checked: every module of :mod:`spottune.orchestrator`, and :mod:`spottune.planning._brackets` (the
:class:`~spottune.planning.BracketOrchestrator` that ``spottune run --deadline-mode plan`` executes)."""

from __future__ import annotations

import ast
from pathlib import Path

import spottune.orchestrator
import spottune.planning._brackets

FORBIDDEN_MODULES = {"boto3", "botocore", "fsspec", "s3fs", "subprocess", "socket", "time", "random", "os",
                     "requests", "urllib", "http", "asyncio", "threading"}
FORBIDDEN_CALLS = {("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("random", "random"),
                   ("np.random", "default_rng"), ("np.random", "seed"), ("numpy.random", "seed")}


def _sources():
    folder = Path(spottune.orchestrator.__file__).parent
    files = sorted(folder.glob("*.py"))
    assert len(files) >= 5
    return [*files, Path(spottune.planning._brackets.__file__)]


def _dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _problems(source: str, name: str) -> list[str]:
    """Forbidden imports and calls in one module's source, in line order, as ``name:line imports|calls what``."""
    problems = []
    forbidden_calls = {(h.split(".")[-1], a) for h, a in FORBIDDEN_CALLS}
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            names = []
        for imported in names:
            if imported.split(".")[0] in FORBIDDEN_MODULES or imported.startswith(("datetime.datetime", "numpy.random")):
                problems.append((node.lineno, f"{name}:{node.lineno} imports {imported}"))
        if isinstance(node, ast.Call):
            func = _dotted(node.func) or ""
            head, _, attr = func.rpartition(".")
            if (head.split(".")[-1], attr) in forbidden_calls or func in {"open", "print", "input"}:
                problems.append((node.lineno, f"{name}:{node.lineno} calls {func}"))
    return [text for _, text in sorted(problems)]


def test_orchestrator_does_no_io_and_reads_no_clock():
    assert "BracketOrchestrator" in _sources()[-1].read_text()
    problems = [p for path in _sources() for p in _problems(path.read_text(), path.name)]
    assert problems == []


def test_the_check_catches_forbidden_imports_and_calls():
    bad = ("import time\nfrom datetime import datetime\nimport numpy as np\nx = datetime.now()\n"
           "rng = np.random.default_rng()\nprint(x)\nfrom os import path\n")
    assert _problems(bad, "bad.py") == [
        "bad.py:1 imports time",
        "bad.py:2 imports datetime.datetime",
        "bad.py:4 calls datetime.now",
        "bad.py:5 calls np.random.default_rng",
        "bad.py:6 calls print",
        "bad.py:7 imports os",
        "bad.py:7 imports os.path",
    ]
    assert _problems("import math\nfrom datetime import timedelta\ny = math.ceil(2.5)\n", "ok.py") == []
