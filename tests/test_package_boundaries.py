"""Package boundaries (docs/design/decisions.md, "Package boundaries"): who may import whom, no import cycles, every
module importable on its own in a fresh interpreter, one definition per protocol, spotmarket without torch.

The import graph is read with ``ast`` from every ``import`` statement of every module, function-level
(lazy) imports included: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("spotmarket", "revpred", "provisioner", "earlycurve", "spottune")

#: Other project packages each package may import (``spottune`` is the top: it may import every other).
ALLOWED = {
    "spotmarket": set(),
    "earlycurve": {"spotmarket"},
    "revpred": {"spotmarket"},
    "provisioner": {"spotmarket", "revpred"},
    "spottune": {"spotmarket", "revpred", "provisioner", "earlycurve"},
}
#: The revpred modules the provisioner may import: the predictor protocol only (not the models, not torch).
PROVISIONER_USES_FROM_REVPRED = {"revpred.protocol"}

#: Each protocol (and the do-nothing last-value predictor) is defined once, here.
PROTOCOL_HOMES = {
    "MarketChooser": "provisioner._base",
    "RevocationPredictor": "revpred.protocol",
    "FinalMetricPredictor": "earlycurve._protocol",
    "LastValue": "earlycurve._baselines",
}


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> source file, for every module of every project package."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def imports_of(name: str, source: str, known: set[str], is_package: bool = False) -> set[str]:
    """Project modules that module ``name`` imports (``from a import b`` names ``a.b`` if it is a module); imports
    under ``if TYPE_CHECKING:`` are annotations only, never executed, and do not count."""
    found = set()
    tree = ast.parse(source)
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
                   for child in node.body for n in ast.walk(child)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names]
        else:
            continue
        for target in targets:
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in known:
                found.add(target)
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    known = set(modules)
    return {m: imports_of(m, p.read_text(), known, p.name == "__init__.py") - {m} for m, p in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def boundary_violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports that break the package direction, as ``importer -> imported``."""
    bad = []
    for importer, imported in sorted(graph.items()):
        pkg = importer.split(".")[0]
        for target in sorted(imported):
            target_pkg = target.split(".")[0]
            if target_pkg != pkg and target_pkg not in ALLOWED[pkg]:
                bad.append(f"{importer} -> {target}")
            elif pkg == "provisioner" and target_pkg == "revpred" and target not in PROVISIONER_USES_FROM_REVPRED:
                bad.append(f"{importer} -> {target}")
            elif (target == "spottune.cli" or target.startswith("spottune.cli.")) \
                    and not importer.startswith("spottune.cli") and importer != "spottune.__main__":  # python -m spottune
                bad.append(f"{importer} -> {target}")
    return bad


GRAPH = import_graph(project_modules())


def test_the_graph_sees_every_package_and_known_edges():
    assert {m.split(".")[0] for m in GRAPH} == set(PACKAGES)
    assert "spotmarket.prices" in GRAPH["revpred.features"]
    assert "revpred.protocol" in GRAPH["provisioner._base"]
    assert "earlycurve" in GRAPH["spottune.orchestrator._config"]


def test_packages_import_only_downwards_and_nothing_imports_the_cli():
    assert boundary_violations(GRAPH) == []


def test_no_import_cycles():
    assert cycles(GRAPH) == []


def test_the_checks_catch_a_cycle_and_an_upward_import():
    graph = {"revpred.a": {"revpred.b"}, "revpred.b": {"revpred.c"}, "revpred.c": {"revpred.a"},
             "revpred.d": {"revpred.a"}, "spotmarket.x": {"revpred.d"}, "provisioner.y": {"revpred.model"},
             "spottune.z": {"spottune.cli._run"}, "spottune.cli.w": {"spottune.cli._run"},
             "earlycurve.v": {"spotmarket.prices"}}
    assert cycles(graph) == [["revpred.a", "revpred.b", "revpred.c"]]
    assert boundary_violations(graph) == ["provisioner.y -> revpred.model", "spotmarket.x -> revpred.d",
                                          "spottune.z -> spottune.cli._run"]
    src = "import os\nfrom revpred import protocol\nfrom revpred.errors import RevPredError\n" \
          "def f():\n    from spottune.cli import _run\n"
    known = {"revpred", "revpred.protocol", "revpred.errors", "spottune", "spottune.cli", "spottune.cli._run"}
    assert imports_of("provisioner.q", src, known) == {"revpred.protocol", "revpred.errors", "spottune.cli._run"}


def test_each_protocol_is_defined_once_in_its_package():
    homes: dict[str, list[str]] = {name: [] for name in PROTOCOL_HOMES}
    for module, path in project_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name in homes:
                homes[node.name].append(module)
            if isinstance(node, ast.ClassDef) and node.name == "LastValuePredictor":
                homes.setdefault("LastValuePredictor", []).append(module)
    assert homes == {name: [module] for name, module in PROTOCOL_HOMES.items()}

    import earlycurve
    import provisioner
    from spottune.orchestrator import Orchestrator, OrchestratorConfig, _config

    assert _config.MarketChooser is provisioner.MarketChooser
    assert _config.FinalMetricPredictor is earlycurve.FinalMetricPredictor
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=2), chooser=None)
    assert type(orch.predictor) is earlycurve.LastValue


def test_hour_s_is_defined_once_in_spotmarket():
    defined = []
    for module, path in project_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            defined += [module for t in targets if isinstance(t, ast.Name) and t.id in ("HOUR_S", "SECONDS_PER_HOUR")]
    assert defined == ["spotmarket._units"]

    import provisioner
    import spotmarket

    assert spotmarket.HOUR_S == 3600.0 and provisioner.HOUR_S is spotmarket.HOUR_S


def _fresh(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip()


@pytest.mark.process
def test_spotmarket_imports_without_torch():
    code = "import sys, spotmarket, spotmarket.prices; print(sorted(m for m in ('torch', 'revpred', 'spottune', " \
           "'provisioner', 'earlycurve') if m in sys.modules))"
    assert _fresh(code) == "[]"


# Run in a fresh interpreter: third-party libraries are imported once, then every project module is
# imported in its own forked child that has no project module loaded yet (so an import that only works
# after some other module was imported first, e.g. through a cycle, fails here).
_ISOLATED = r"""
import importlib, json, os, py_compile, sys, traceback
modules, externals, sources, pycache = (json.loads(a) for a in sys.argv[1:5])
for name in externals:
    try:
        importlib.import_module(name)
    except Exception:
        pass
sys.pycache_prefix = pycache  # project bytecode compiled once here, shared by the children
for path in sources:
    py_compile.compile(path, doraise=True)
assert not [m for m in sys.modules if m.split(".")[0] in {"spotmarket", "revpred", "provisioner", "earlycurve", "spottune"}]
failures, running, todo = {}, {}, list(modules)
while todo or running:
    while todo and len(running) < 2:
        name = todo.pop(0)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            code = 0
            try:
                importlib.import_module(name)
            except BaseException:
                os.write(w, traceback.format_exc()[-4000:].encode())
                code = 1
            os._exit(code)
        os.close(w)
        running[pid] = (name, r)
    pid, status = os.wait()
    name, r = running.pop(pid)
    message = b""
    while chunk := os.read(r, 65536):
        message += chunk
    os.close(r)
    if status:
        failures[name] = message.decode(errors="replace")
print(json.dumps(failures))
"""


def _external_modules(modules: dict[str, Path]) -> list[str]:
    names = set()
    for path in modules.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return sorted(n for n in names if n.split(".")[0] not in PACKAGES)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_every_module_imports_on_its_own(tmp_path):
    modules = project_modules()
    args = [sorted(modules), _external_modules(modules), [str(p) for p in modules.values()], str(tmp_path / "pyc")]
    out = subprocess.run([sys.executable, "-c", _ISOLATED, *map(json.dumps, args)], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "MPLBACKEND": "Agg"}, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    failures = json.loads(out.stdout.strip().splitlines()[-1])
    assert failures == {}, "\n".join(f"{m}:\n{tb}" for m, tb in failures.items())
