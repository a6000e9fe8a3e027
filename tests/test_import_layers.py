"""The import graph of ``spottune/`` has no cycle and no upward import: an ast check of every import.

Every module and subpackage directly under ``spottune/`` is a unit (``spottune/compose/`` is one unit, ``speed.py``
another; ``spottune/__init__.py`` is the unit ``spottune``). Every ``import`` and ``from ... import`` counts, at module
level and inside functions, except those under ``if TYPE_CHECKING:`` (annotations only; never executed). A unit may
import only units of a lower layer of :data:`LAYERS`; imports point down, from the entry points (``cli``, the package
facade) through the composition root (``compose``) and the things it wires (backends, journal, the experiment spec,
planning, the orchestrator) to the leaves (errors, the speed model). In words:

- ``errors`` and ``_lazy`` (a package's names loaded on first use) import nothing of spottune; the speed model, the cache paths, the search-space grammar, the pure
  orchestrator and the Optuna stop rules only ``errors``;
- ``planning`` (plans, the deadline guard, the bracket orchestrator) sits on the orchestrator and the speed model;
- the experiment spec sits on planning, workloads and the trainable API; the stoppers, results and the journal on it;
- the backends (drivers) sit on the spec, the journal and the checkpoint store, and never import the composition root;
- ``compose`` builds from all of those; ``evaluation``, ``api`` and ``integrations`` build through ``compose``;
- ``cli`` is the command line over everything, and ``spottune`` (the package facade) re-exports the API.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import spottune

ROOT = Path(spottune.__file__).parent

#: Layer of every unit; a unit imports only units of a strictly lower layer.
LAYERS: dict[str, int] = {
    "errors": 0, "_lazy": 0,
    "speed": 1, "cache": 1, "search_space": 1, "orchestrator": 1, "_pruning": 1, "scheduling": 1, "_serving": 1,
    "checkpoint": 2, "planning": 2,
    "trainable": 3, "results": 3,
    "workloads": 4, "report": 4, "dashboard": 4,
    "experiment": 5,
    "_early_stop": 6, "journal": 6,
    "backends": 7,
    "compose": 8,
    "evaluation": 9, "api": 9, "integrations": 9,
    "service": 10,
    "cli": 11,
    "spottune": 12, "__main__": 12,  # ``python -m spottune``: the command line, like the console script
}


def _units(root: Path) -> set[str]:
    return {p.stem for p in root.glob("*.py") if p.name != "__init__.py"} | {
        p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()}


def _unit(module: str, units: set[str]) -> str | None:
    parts = module.split(".")
    if parts[0] != "spottune":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in units else "spottune"


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for child in node.body:
                skip.update(id(n) for n in ast.walk(child))
    return skip


def import_edges(sources: Iterable[tuple[str, str]], units: set[str]) -> list[tuple[str, str, str]]:
    """``(from unit, to unit, "path:line")`` of every import between two units in ``sources`` (``(path, text)`` of
    files under a ``spottune/`` folder, paths relative to the folder above it, e.g. ``spottune/compose/market.py``)."""
    edges = []
    for path, text in sources:
        parts = list(Path(path).with_suffix("").parts)
        package = parts if parts[-1] == "__init__" else parts[:-1]
        if parts[-1] == "__init__":
            parts = parts[:-1]
            package = parts
        src = _unit(".".join(parts), units)
        tree = ast.parse(text, filename=path)
        skip = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package[:len(package) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" for a in node.names] if base == "spottune" else [base]
            else:
                continue
            for target in targets:
                dst = _unit(target, units)
                if dst is not None and dst != src:
                    edges.append((src, dst, f"{path}:{node.lineno}"))
    return edges


def cycles(edges: Iterable[tuple[str, str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan), each sorted, in sorted order."""
    graph: dict[str, set[str]] = {}
    for a, b, _ in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def upward(edges: Iterable[tuple[str, str, str]], layers: Mapping[str, int]) -> list[str]:
    """``"where: a -> b"`` for every import of a unit of the same or a higher layer (or of a unit without a layer)."""
    return sorted(f"{where}: {a} -> {b}" for a, b, where in edges
                  if a not in layers or b not in layers or layers[b] >= layers[a])


def _tree_edges() -> list[tuple[str, str, str]]:
    files = sorted(ROOT.rglob("*.py"))
    sources = [(path.relative_to(ROOT.parent).as_posix(), path.read_text()) for path in files]
    return import_edges(sources, _units(ROOT))


def test_every_unit_has_a_layer():
    assert sorted(_units(ROOT) | {"spottune"}) == sorted(LAYERS)


def test_the_import_graph_has_no_cycle_and_no_upward_import():
    edges = _tree_edges()
    assert len(edges) > 100  # the walk sees the function-level imports too
    assert cycles(edges) == []
    assert upward(edges, LAYERS) == []


def test_the_composition_root_is_imported_only_by_the_entry_points():
    importers = {a for a, b, _ in _tree_edges() if b == "compose"}
    assert importers == {"api", "cli", "evaluation"}


def test_the_check_catches_cycles_upward_and_function_level_imports():
    units = {"a", "b", "c"}
    sources = [
        ("spottune/a.py", "from spottune.b import x\n"),
        ("spottune/b/__init__.py", "def f():\n    from spottune import a\n    from . import _y\n"),
        ("spottune/b/_y.py", "from ..c import z\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                             "    from spottune.a import T\n"),
        ("spottune/c.py", "import spottune.errors\nimport numpy\n"),
    ]
    edges = import_edges(sources, units)
    assert sorted(edges) == [("a", "b", "spottune/a.py:1"), ("b", "a", "spottune/b/__init__.py:2"),
                             ("b", "c", "spottune/b/_y.py:1"), ("c", "spottune", "spottune/c.py:1")]
    assert cycles(edges) == [["a", "b"]]
    assert upward(edges, {"spottune": 0, "a": 2, "b": 1, "c": 0}) == [
        "spottune/b/__init__.py:2: b -> a", "spottune/c.py:1: c -> spottune"]
