"""What a fresh process pays before it does anything: the local worker module, the EC2 agent and ``spottune --help``,
each started as its own interpreter, against the same process with ``spottune.api`` imported first (what
``import spottune`` imported at once until 2026-11-29, before its names were loaded on first use)
-> ``benchmarks/results/startup.json``.

Every local trial segment (and every relaunch after a revocation or an hourly hop) starts a worker process, and every
EC2 host an agent: their start-up is paid per segment. The two variants of each entry point alternate, ``--repeats``
times each, in the same run; the ratio is of the medians.

Run: ``.venv/bin/python benchmarks/bench_startup.py [--repeats 7]`` (about 1 min on two cores); ``--markdown`` prints
the table from the JSON.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, repeats_main  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "startup.json"
#: entry point -> the Python code a fresh interpreter runs for it
ENTRY_POINTS = {
    "local worker (python -m spottune.backends.local.worker)": "import spottune.backends.local.worker",
    "EC2 agent (python -m spottune.backends.aws.agent)": "import spottune.backends.aws.agent",
    "spottune --help": "import sys; sys.argv = ['spottune', '--help']\nfrom spottune.cli import main\n"
                       "try:\n    main()\nexcept SystemExit:\n    pass",
}
#: what ``import spottune`` loaded at once before its names were loaded on first use
EAGER = "import spottune.api\n"


def _wall_s(code: str) -> float:
    """Wall seconds of ``python -c code`` in a fresh interpreter (its output thrown away); raises if it fails."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def run(args) -> dict:
    cells = {}
    for name, code in ENTRY_POINTS.items():
        _wall_s(code)  # warm-up: the files in the page cache, the .pyc written
        walls = {"eager": [], "today": []}
        for _ in range(args.repeats):
            walls["eager"].append(_wall_s(EAGER + code))
            walls["today"].append(_wall_s(code))
        med = {k: statistics.median(v) for k, v in walls.items()}
        cells[name] = {"wall_s": walls, "median_wall_s": med, "ratio_today_to_eager": med["today"] / med["eager"]}
    return {"config": {"repeats": args.repeats, "eager_prefix": EAGER.strip()}, "entry_points": cells}


def markdown(r: dict) -> str:
    lines = ["| process | with `spottune.api` imported first (as before 2026-11-29): median wall s | today: median "
             "wall s | today ÷ before |", "| --- | --- | --- | --- |"]
    for name, c in r["entry_points"].items():
        m = c["median_wall_s"]
        lines.append(f"| {name} | {m['eager']:.2f} | {m['today']:.2f} | {c['ratio_today_to_eager']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    return repeats_main(argv, __doc__, OUT, run, markdown, repeats=7)


if __name__ == "__main__":
    raise SystemExit(main())
