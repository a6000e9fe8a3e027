"""A bounded load test of ``spottune serve``'s HTTP API on 127.0.0.1 -> ``benchmarks/results/service_load.json``.

The server runs as its own process (``python -m spottune serve``, SQLite store, sim backend, ``--max-studies 4``).
``--teams`` teams (20) each submit ``--studies-per-team`` studies (10: 200 in all) at once, one client thread per
team, while the org budget is 0 USD/hour (the queue is held, decision SV11); then each team reads its list and each
of its studies; the admin sets a budget of 10 USD/hour, so the runner starts studies (2 trials of ``linreg``, 8 steps
each, on the simulator) while every team cancels all of its studies at once. Measured: every call's wall time,
per phase (p50, p99, max) and over all calls, the calls that failed (any status other than the expected one) and
the studies' end states (all cancelled or finished, none failed). Every call is made through
:class:`spottune.service.ServiceClient` (httpx), one client per team.

Run: ``.venv/bin/python benchmarks/bench_service_load.py [--teams 20 --studies-per-team 10]`` (under a minute);
``--markdown`` prints the table from the JSON.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, run_or_print  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "service_load.json"
#: A study that runs in about a second on the simulator.
TINY = {"workload": "linreg", "search_space": {"lr": {"grid_search": [0.01, 0.05]}}, "max_steps": 8, "theta": 1,
        "top_k": 1, "predictor": "none"}
ADMIN = "bench-admin-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _percentiles(ms: list[float]) -> dict:
    import numpy as np

    a = np.asarray(ms)
    return {"calls": len(ms), "p50_ms": float(np.percentile(a, 50)), "p99_ms": float(np.percentile(a, 99)),
            "max_ms": float(a.max())}


def run(args: argparse.Namespace) -> dict:
    from spottune.service import ServiceClient, ServiceError

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "SPOTTUNE_ADMIN_TOKEN": ADMIN, "PYTHONPATH": str(ROOT)}
        server = subprocess.Popen([sys.executable, "-m", "spottune", "serve", "--data-dir", tmp, "--port", str(port),
                                   "--org-budget-usd-per-hour", "0", "--max-studies", "4"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=open(args.server_log, "w"))
        try:
            admin = ServiceClient(url, ADMIN)
            deadline = time.monotonic() + 60
            while True:
                try:
                    admin.health()
                    break
                except ServiceError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise RuntimeError("the server did not start") from None
                    time.sleep(0.1)
            names = [f"team{i:02d}" for i in range(args.teams)]
            clients = {n: ServiceClient(url, admin.create_team(n, 1.0 + i % 3)["token"]) for i, n in enumerate(names)}
            times: dict[str, list[float]] = {"submit": [], "read": [], "cancel": []}
            errors: list[str] = []

            def call(phase: str, fn, *a, **kw):  # noqa: ANN001, ANN202
                t0 = time.perf_counter()
                try:
                    out = fn(*a, **kw)
                except ServiceError as exc:
                    errors.append(f"{phase}: {exc}")
                    out = None
                times[phase].append(1000 * (time.perf_counter() - t0))
                return out

            def submit_all(team: str) -> None:
                for k in range(args.studies_per_team):
                    call("submit", clients[team].submit, TINY, team=team, name=f"s{k:03d}")

            def read_all(team: str) -> None:
                for st in call("read", clients[team].studies) or []:
                    call("read", clients[team].study, st["id"])

            def cancel_all(team: str) -> None:
                for k in range(args.studies_per_team):
                    try:
                        call("cancel", clients[team].cancel, f"s{k:03d}")
                    except Exception as exc:  # noqa: BLE001
                        errors.append(f"cancel: {exc}")

            with ThreadPoolExecutor(args.teams) as pool:
                t0 = time.perf_counter()
                list(pool.map(submit_all, names))
                submit_wall = time.perf_counter() - t0
                list(pool.map(read_all, names))
                admin.set_org_budget(10.0)
                list(pool.map(cancel_all, names))
            # a study that ended before its cancel arrived answers 409 "finished already": that is not an error
            errors = [e for e in errors if "already (HTTP 409)" not in e]
            deadline = time.monotonic() + 120
            while True:
                states = [s["state"] for s in admin.studies()]
                if all(s in ("finished", "failed", "cancelled") for s in states) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            org = admin.org()
            for c in clients.values():
                c.close()
            admin.close()
        finally:
            server.terminate()
            server.wait(30)
    every = [t for ts in times.values() for t in ts]
    return {"teams": args.teams, "studies": args.teams * args.studies_per_team, "submit_wall_s": submit_wall,
            "errors": errors, "phases": {k: _percentiles(v) for k, v in times.items()}, "all": _percentiles(every),
            "end_states": {s: states.count(s) for s in sorted(set(states))}, "fair_share_rounds": len(org["rounds"])}


def markdown(r: dict) -> str:
    lines = [f"{r['teams']} teams, {r['studies']} studies submitted at once in {r['submit_wall_s']:.2f} s; "
             f"errors: {len(r['errors'])}; end states: "
             + ", ".join(f"{k} {v}" for k, v in r["end_states"].items()), "",
             "| phase | calls | p50 ms | p99 ms | max ms |", "| --- | ---: | ---: | ---: | ---: |"]
    for name, p in [*r["phases"].items(), ("all", r["all"])]:
        lines.append(f"| {name} | {p['calls']} | {p['p50_ms']:.1f} | {p['p99_ms']:.1f} | {p['max_ms']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--teams", type=int, default=20)
    ap.add_argument("--studies-per-team", type=int, default=10)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--server-log", type=Path, default=Path(os.devnull), help="where the server's stderr goes")
    ap.add_argument("--markdown", action="store_true", help="print the table of the stored JSON")
    return run_or_print(ap.parse_args(argv), run, markdown)


if __name__ == "__main__":
    sys.exit(main())
