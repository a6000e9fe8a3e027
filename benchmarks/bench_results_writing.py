"""What writing the results folder while a run goes on costs: ``make run``'s experiment with ``trials.csv`` rewritten
at every change of a trial (``TRIALS_EVERY_WALL_S`` = 0, as before 2026-11-29) against today's rule (at once on a
change of state, at most once a wall second while only step counts move) -> ``benchmarks/results/results_writing.json``.

Each run is ``spottune run`` on the bundled defaults (``ExperimentSpec()``, the simulator) through
:func:`spottune.cli._run.run_experiment` with a :class:`spottune.results.ResultsJournal`, then
:func:`spottune.results.write_results`, in a fresh temporary folder. One warm-up run (caches filled, not counted), then
the two rules alternate, ``--repeats`` times each, in the same process; the ratio is of the medians. The final
``trials.csv``, ``ledger.csv`` and the summary's cost and top-k are checked to be the same under both rules.

Run: ``.venv/bin/python benchmarks/bench_results_writing.py [--repeats 3]`` (about 3 min on two cores); ``--markdown``
prints the table from the JSON.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, repeats_main  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "results_writing.json"
RULES = {"every change": 0.0, "today": None}  # None: the default, spottune.results.TRIALS_EVERY_WALL_S


def _one(every_wall_s: float | None) -> dict:
    """One default run under a rule: wall seconds of the run and its results, rewrites of ``trials.csv``, and what
    the two rules must agree on."""
    from spottune import results
    from spottune.cli._run import run_experiment
    from spottune.experiment import ExperimentSpec

    write = results._write_atomic
    rewrites = []

    def counting(path, text):
        if path.name == "trials.csv":
            rewrites.append(1)
        return write(path, text)

    results._write_atomic = counting  # a spy: every write still happens
    journal_options = {} if every_wall_s is None else {"trials_every_wall_s": every_wall_s}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = results.prepare_output(Path(tmp) / "res")
            t0 = time.perf_counter()
            result = run_experiment(ExperimentSpec(), progress=results.ResultsJournal(out, **journal_options),
                                    output=out)
            summary = results.write_results(out, result)
            wall_s = time.perf_counter() - t0
            same = {"trials.csv": (out / "trials.csv").read_text(), "ledger.csv": (out / "ledger.csv").read_text(),
                    "cost_usd": summary["total_cost_usd"], "top_k": summary["top_k"]}
    finally:
        results._write_atomic = write
    return {"wall_s": wall_s, "trials_csv_rewrites": len(rewrites), "same": same}


def run(args) -> dict:
    from spottune import results

    _one(None)  # warm-up: predictor and curve caches, imports
    runs = {rule: [] for rule in RULES}
    for _ in range(args.repeats):
        for rule, every in RULES.items():
            runs[rule].append(_one(every))
    agree = all(r["same"] == runs["today"][0]["same"] for rs in runs.values() for r in rs)
    cells = {rule: {"wall_s": [r["wall_s"] for r in rs], "median_wall_s": statistics.median(r["wall_s"] for r in rs),
                    "trials_csv_rewrites": rs[0]["trials_csv_rewrites"]} for rule, rs in runs.items()}
    return {"config": {"repeats": args.repeats, "trials_every_wall_s": results.TRIALS_EVERY_WALL_S,
                       "experiment": "ExperimentSpec() (make run's defaults)"},
            "rules": cells, "same_results": agree,
            "cost_usd": runs["today"][0]["same"]["cost_usd"], "top_k": runs["today"][0]["same"]["top_k"],
            "ratio_today_to_every_change": cells["today"]["median_wall_s"] / cells["every change"]["median_wall_s"]}


def markdown(r: dict) -> str:
    lines = ["| rule for `trials.csv` | rewrites of `trials.csv` | wall seconds, median (each run) |",
             "| --- | --- | --- |"]
    for rule, c in r["rules"].items():
        each = ", ".join(f"{x:.1f}" for x in c["wall_s"])
        name = ("at every change of a trial (before 2026-11-29)" if rule == "every change"
                else f"at once on a change of state, else at most every {r['config']['trials_every_wall_s']:g} wall s")
        lines.append(f"| {name} | {c['trials_csv_rewrites']} | {c['median_wall_s']:.1f} ({each}) |")
    lines.append("")
    lines.append(f"Today's rule takes {r['ratio_today_to_every_change']:.2f}x the wall time; the same results under "
                 f"both rules: {'yes' if r['same_results'] else 'NO'} ({r['cost_usd']:.4f} USD, top-k "
                 f"{', '.join(t['trial_id'] for t in r['top_k'])}).")
    return "\n".join(lines)


def main(argv=None) -> int:
    return repeats_main(argv, __doc__, OUT, run, markdown, repeats=3)


if __name__ == "__main__":
    raise SystemExit(main())
