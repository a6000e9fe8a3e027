"""The provisioner stays pure (no I/O, no clock, no global RNG) and its docstring examples run."""

import ast
import doctest
import importlib
from pathlib import Path

import pytest

import provisioner

PKG = Path(provisioner.__file__).resolve().parent
MODULES = sorted(p for p in PKG.glob("*.py"))
FORBIDDEN_IMPORTS = {"spottune", "boto3", "botocore", "fsspec", "s3fs", "socket", "subprocess", "requests", "time", "random"}
FORBIDDEN_CALLS = {("datetime", "now"), ("datetime", "utcnow"), ("time", "time")}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_io_clock_or_global_rng(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            names = []
        for name in names:
            assert name.split(".")[0] not in FORBIDDEN_IMPORTS, f"{path.name} imports {name}"
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            # np.random.<fn>(...) is the global RNG; only the Generator type may be named
            if node.value.attr == "random" and node.attr not in ("Generator",):
                raise AssertionError(f"{path.name}:{node.lineno} uses the global numpy RNG: random.{node.attr}")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            assert (node.value.id, node.attr) not in FORBIDDEN_CALLS, f"{path.name}:{node.lineno} reads the clock"


def test_public_names_are_exported():
    for name in provisioner.__all__:
        assert hasattr(provisioner, name), name


@pytest.mark.parametrize("name", ["_catalog", "_cost", "_pool", "_provisioner"])
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(f"provisioner.{name}"))
    assert result.failed == 0 and result.attempted > 0
