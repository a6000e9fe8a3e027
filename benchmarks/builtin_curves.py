"""Record random-search learning curves of spottune's built-in workloads (the "built-in" family).

The built-in workloads ship 16-configuration grids, whose curves are the same in every start. For the
early-stopping benchmark each workload's grid is widened into a random-search space (A requirement:
≥ 64 configurations sampled per workload): every numeric ``grid_search`` becomes ``loguniform`` over
[smallest positive value / 3, largest value × 3] (a grid holding 0 keeps it as a 1-in-4 choice of 0), and
an integer grid becomes a ``choice`` of its values. ``--configs`` configurations are drawn from
``spottune.search_space.generate_configs(space, n, seed)`` and each is trained to the workload's
``max_steps`` with ``spottune.trainable.trial_seed(seed, i)``, recording the validation metric at every
step (a metric to maximise is stored as ``1 − value``).

Usage::

    .venv/bin/python benchmarks/builtin_curves.py [--workloads digits-mlp,logreg,linear-svm] [--configs 128] [--seed 0]

Writes ``data/learning_curves/builtin/builtin_<workload>_curves.csv.gz`` (gzip, ``long-csv`` layout: ``config_id, step,
value, max_steps`` + the configuration), read by ``earlycurve.evaluation.load_curves``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

OUT = Path(__file__).resolve().parents[1] / "data" / "learning_curves" / "builtin"  # _common.BUILTIN_CURVES


def random_space(space: dict) -> dict:
    """The workload's grid widened into a random-search space (module docstring)."""
    from spottune.search_space import GridSearch

    out = {}
    for name, dom in space.items():
        vals = list(dom.values) if isinstance(dom, GridSearch) else None
        if not vals or not all(isinstance(v, (int, float)) for v in vals):
            out[name] = dom
        elif all(isinstance(v, int) for v in vals):
            out[name] = {"choice": sorted(vals)}
        else:
            pos = [float(v) for v in vals if v > 0]
            out[name] = {"loguniform": [min(pos) / 3, max(pos) * 3]}
            if 0 in vals:
                out[name] = {"__zero_or__": out[name]}
    return out


def sample(space: dict, n: int, seed: int) -> list[dict]:
    from spottune.search_space import generate_configs

    plain = {k: (v["__zero_or__"] if isinstance(v, dict) and "__zero_or__" in v else v) for k, v in space.items()}
    configs = generate_configs(plain, n, seed)
    rng = np.random.default_rng([seed, 1])
    for c in configs:
        for k, v in space.items():
            if isinstance(v, dict) and "__zero_or__" in v and rng.random() < 0.25:
                c[k] = 0.0
    return configs


def train_curve(workload, config: dict, seed: int) -> pd.DataFrame:
    """One configuration of a built-in workload trained to ``workload.max_steps``, every step recorded.

    Returns columns ``step`` and ``value``: the workload's metric as a loss (``1 - value`` for a ``max`` metric).
    """
    trial = workload.trainable(config, seed=seed, max_steps=workload.max_steps)
    rows = []
    for _ in range(workload.max_steps):
        r = trial.train()
        v = float(r[workload.metric])
        rows.append({"step": int(r.get("step", len(rows) + 1)), "value": v if workload.mode == "min" else 1.0 - v})
    return pd.DataFrame(rows)


def record(name: str, n: int, seed: int) -> pd.DataFrame:
    from spottune.trainable import trial_seed
    from spottune.workloads import get_workload

    w = get_workload(name)
    configs = sample(random_space(dict(w.search_space)), n, seed)
    frames = []
    for i, config in enumerate(configs):
        f = train_curve(w, config, trial_seed(seed, i))
        f.insert(0, "config_id", f"{name}-{i:03d}")
        f["max_steps"] = w.max_steps
        for k, v in config.items():
            f[k] = v
        frames.append(f)
    return pd.concat(frames, ignore_index=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="digits-mlp,logreg,linear-svm")
    ap.add_argument("--configs", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    for name in args.workloads.split(","):
        t0 = time.time()
        table = record(name, args.configs, args.seed)
        out = OUT / f"builtin_{name}_curves.csv.gz"
        table.to_csv(out, index=False, compression={"method": "gzip", "mtime": 0})
        print(f"wrote {out}: {table.config_id.nunique()} curves in {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
