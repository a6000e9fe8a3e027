"""Record real learning curves of a step-decay workload: a torch MLP on scikit-learn's digits.

Stand-in for the main job's built-in workloads until they exist. Each configuration is
trained with SGD whose learning rate is multiplied by ``gamma`` at 50 % and 75 % of ``max_steps``
(a step-decay schedule, the multi-stage shape EarlyCurve targets); the validation cross-entropy on
a fixed held-out split is recorded every ``eval_every`` steps, including step 0.

Everything is seeded (``numpy.random.default_rng`` for the configurations and batches,
``torch.manual_seed`` for the weights); one thread, so the curves are reproducible on one machine.

With ``--workload NAME`` it instead records the main job's built-in workload (e.g. ``digits-mlp``
from ``spottune.workloads``: its default grid, ``--repeats`` seeds per configuration, every step) to
``benchmarks/results/workload_<NAME>_curves.csv`` in the same format (a metric to maximise is
stored as ``1 − value``).

Usage::

    .venv/bin/python benchmarks/digits_curves.py [--out benchmarks/results/digits_curves.csv]
        [--configs 48] [--max-steps 600] [--eval-every 10] [--seed 0]
    .venv/bin/python benchmarks/digits_curves.py --workload digits-mlp [--repeats 2] [--seed 0]

Output CSV columns: ``config_id, step, max_steps, val_loss`` (nats), ``val_accuracy``, and the
configuration: ``lr, momentum, weight_decay, hidden, batch_size, gamma, seed``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "digits_curves.csv"


def sample_configs(n_configs: int, rng: np.random.Generator) -> list[dict]:
    """Random-search configurations (seeded).

    Parameters
    ----------
    n_configs : int
        Number of configurations.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    configs : list of dict
        Keys ``lr`` (peak learning rate), ``momentum``, ``weight_decay``, ``hidden`` (units),
        ``batch_size`` (samples), ``gamma`` (LR factor at each decay).
    """
    return [
        {
            "lr": float(np.exp(rng.uniform(np.log(0.01), np.log(0.5)))),
            "momentum": float(rng.uniform(0.0, 0.9)),
            "weight_decay": float(np.exp(rng.uniform(np.log(1e-5), np.log(1e-2)))),
            "hidden": int(rng.choice([16, 32, 64, 128])),
            "batch_size": int(rng.choice([16, 32, 64])),
            "gamma": float(rng.choice([0.1, 0.2])),
        }
        for _ in range(n_configs)
    ]


def train_curve(config: dict, data: tuple, *, max_steps: int, eval_every: int, seed: int, rng: np.random.Generator) -> list[dict]:
    """Train one configuration and return its validation curve.

    Parameters
    ----------
    config : dict
        One entry of :func:`sample_configs`.
    data : tuple of ndarray
        ``(x_train, y_train, x_val, y_val)``; features of shape (n, 64), labels of shape (n,).
    max_steps : int
        SGD steps; the learning rate drops by ``gamma`` at ``max_steps // 2`` and ``3 * max_steps // 4``.
    eval_every : int
        Steps between validation evaluations.
    seed : int
        Seed of the weight initialisation.
    rng : numpy.random.Generator
        Source of mini-batch indices.

    Returns
    -------
    rows : list of dict
        ``step``, ``val_loss`` (mean cross-entropy, nats), ``val_accuracy`` per evaluation.
    """
    x_train, y_train, x_val, y_val = (torch.as_tensor(a) for a in data)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, config["hidden"]), torch.nn.ReLU(), torch.nn.Linear(config["hidden"], 10)
    )
    opt = torch.optim.SGD(
        model.parameters(), lr=config["lr"], momentum=config["momentum"], weight_decay=config["weight_decay"]
    )
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[max_steps // 2, 3 * max_steps // 4], gamma=config["gamma"])
    loss_fn = torch.nn.CrossEntropyLoss()
    rows = []

    def evaluate(step: int) -> None:
        with torch.no_grad():
            logits = model(x_val)
            loss = float(loss_fn(logits, y_val))
            acc = float((logits.argmax(1) == y_val).float().mean())
        rows.append({"step": step, "val_loss": loss, "val_accuracy": acc})

    evaluate(0)
    n = x_train.shape[0]
    for step in range(1, max_steps + 1):
        idx = torch.as_tensor(rng.integers(0, n, size=config["batch_size"]))
        opt.zero_grad()
        loss_fn(model(x_train[idx]), y_train[idx]).backward()
        opt.step()
        sched.step()
        if step % eval_every == 0:
            evaluate(step)
    return rows


def record(out: Path, *, n_configs: int, max_steps: int, eval_every: int, seed: int) -> pd.DataFrame:
    """Train every configuration and write the tidy curve table to ``out`` (CSV)."""
    torch.set_num_threads(1)
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    x_tr, x_va, y_tr, y_va = train_test_split(x, digits.target, test_size=0.3, random_state=seed, stratify=digits.target)
    data = (x_tr, y_tr.astype(np.int64), x_va, y_va.astype(np.int64))
    rng = np.random.default_rng(seed)
    frames = []
    for i, config in enumerate(sample_configs(n_configs, rng)):
        rows = train_curve(config, data, max_steps=max_steps, eval_every=eval_every, seed=seed + i, rng=rng)
        frame = pd.DataFrame(rows)
        frame.insert(0, "config_id", f"digits-{i:03d}")
        frame.insert(2, "max_steps", max_steps)
        for key, value in config.items():
            frame[key] = value
        frame["seed"] = seed + i
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)
    return table


def record_workload(name: str, out: Path, *, repeats: int, seed: int) -> pd.DataFrame:
    """Record every configuration of a built-in workload, ``repeats`` seeds each, one row per step.

    Parameters
    ----------
    name : str
        Workload name in ``spottune.workloads`` (e.g. ``"digits-mlp"``).
    out : Path
        CSV to write (columns ``config_id, step, max_steps, val_loss, seed`` + the configuration).
    repeats : int
        Seeds per configuration (``spottune.trainable.trial_seed(seed, index)``).
    seed : int
        Base seed.

    Returns
    -------
    table : pandas.DataFrame
    """
    from builtin_curves import train_curve
    from spottune.trainable import trial_seed
    from spottune.workloads import get_workload

    workload = get_workload(name)
    frames, index = [], 0
    for rep in range(repeats):
        for i, config in enumerate(workload.configs(seed)):
            frame = train_curve(workload, config, trial_seed(seed, index)).rename(columns={"value": "val_loss"})
            frame.insert(0, "config_id", f"{name}-{i:02d}-r{rep}")
            frame.insert(2, "max_steps", workload.max_steps)
            for key, val in config.items():
                frame[key] = val
            frame["seed"] = trial_seed(seed, index)
            frames.append(frame)
            index += 1
    table = pd.concat(frames, ignore_index=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="CSV to write (default depends on --workload)")
    parser.add_argument("--configs", type=int, default=48)
    parser.add_argument("--max-steps", type=int, default=600)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workload", default=None, help="record this built-in spottune workload instead")
    parser.add_argument("--repeats", type=int, default=2, help="seeds per configuration (--workload)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    if args.workload is not None:
        out = args.out if args.out != DEFAULT_OUT else DEFAULT_OUT.parent / f"workload_{args.workload}_curves.csv"
        table = record_workload(args.workload, out, repeats=args.repeats, seed=args.seed)
        print(f"wrote {out}: {table.config_id.nunique()} curves, {len(table)} rows in {time.perf_counter() - t0:.1f} s")
        return
    table = record(args.out, n_configs=args.configs, max_steps=args.max_steps, eval_every=args.eval_every, seed=args.seed)
    print(f"wrote {args.out}: {table.config_id.nunique()} curves, {len(table)} rows in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
