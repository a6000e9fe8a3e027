"""earlycurve stays independent and pure: an ``ast`` check of its imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "earlycurve"
FORBIDDEN_EVERYWHERE = {"spottune", "revpred", "provisioner"}
# The core is injected into the orchestrator: no I/O, no clock, no global RNG.
FORBIDDEN_IN_CORE = {"gzip", "json", "pandas", "pathlib", "time", "datetime", "random", "socket", "subprocess", "torch"}


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports(path):
    found = _imports(path)
    assert not found & FORBIDDEN_EVERYWHERE
    if "evaluation" not in path.parts:
        assert not found & FORBIDDEN_IN_CORE


def test_core_uses_no_global_numpy_rng():
    for path in PACKAGE.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "np.random.seed" not in text and "np.random.rand" not in text, path
