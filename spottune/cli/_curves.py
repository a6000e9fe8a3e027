"""``spottune curves eval``: EarlyCurve against its baselines on recorded learning curves,
and the early stoppers (ours, EarlyCurve at θ, ASHA, Optuna's pruners) side by side; ``spottune curves choose``:
the θ barrier's setting chosen on a family's own curves.

Bad input raises :class:`earlycurve.EarlyCurveError` subclasses or ``click.BadParameter``; the
CLI runner turns both into one line on stderr and exit code 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from earlycurve.errors import InvalidCurveError
from earlycurve.evaluation import THETAS, default_predictors, evaluate_learned, evaluate_set, find_datasets
from earlycurve.evaluation._barrier import BARRIER_KEEPS, TWO_RUNG_GRID, choose_barrier
from earlycurve.evaluation._compare import compare_stoppers

_COLUMNS = (
    ("median_rel_err", "med.err", "{:.4f}"),
    ("p90_rel_err", "p90.err", "{:.4f}"),
    ("coverage", "cover", "{:.2f}"),
    ("top1", "top1", "{:.3f}"),
    ("topk_recall", "topk", "{:.3f}"),
    ("regret1", "regret1", "{:.4f}"),
    ("regretk", "regretk", "{:.4f}"),
)


def _check_theta(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if not 0 < value <= 1:
        raise click.BadParameter(f"theta is {value}, but must be 0 < theta <= 1", ctx=ctx, param=param)
    return value


def _check_positive(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    if value is not None and value < 1:
        raise click.BadParameter(f"{param.name} is {value}, but must be >= 1", ctx=ctx, param=param)
    return value


def format_table(result: dict, theta: float) -> str:
    """Plain-text table of one data set's rows at ``theta`` (one line per predictor)."""
    errors = {r["predictor"]: r for r in result["errors"] if abs(r["theta"] - theta) < 1e-9}
    selection = {r["predictor"]: r for r in result["selection"] if abs(r["theta"] - theta) < 1e-9}
    counts = ", ".join(f"{k}={v}" for k, v in result["counts"].items())
    header = "  " + "predictor".ljust(18) + "".join(h.rjust(9) for _, h, _ in _COLUMNS)
    lines = [f"{result['name']} (theta={theta:g}; {counts})", header]
    for name, row in errors.items():
        merged = row | selection.get(name, {})
        cells = "".join(fmt.format(merged[key]).rjust(9) for key, _, fmt in _COLUMNS)
        lines.append("  " + name.ljust(18) + cells)
    return "\n".join(lines)


def format_stoppers(result: dict) -> str:
    """Plain-text table of :func:`earlycurve.evaluation._compare.compare_stoppers` (one line per method)."""
    lines = [f"{result['name']} early stopping ({result['n_studies']} studies of {result['study_size']}, "
             f"{result['workers']} workers, grid of {result['n_steps']} steps; mean ± sd over studies)",
             "  " + "stopper".ljust(12) + "top1".rjust(7) + "top3".rjust(7) + "regret".rjust(17) + "cost".rjust(15)
             + "  setting"]
    for name, m in result["methods"].items():
        s = m["summary"]
        lines.append("  " + name.ljust(12) + f"{s['top1']['mean']:7.3f}{s['top3']['mean']:7.3f}"
                     + f"{s['regret']['mean']:.4f} ± {s['regret']['sd']:.4f}".rjust(17)
                     + f"{s['cost']['mean']:.3f} ± {s['cost']['sd']:.3f}".rjust(15) + f"  {m['setting']}")
    return "\n".join(lines)


@click.group(help="Learning-curve prediction (EarlyCurve) and its evaluation.")
def curves() -> None:
    pass


@curves.command("eval")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--theta", type=float, default=0.7, show_default=True, callback=_check_theta,
    help="Observed fraction of max_steps for the printed table.",
)
@click.option(
    "--top-k", "top_k", type=int, default=3, show_default=True, callback=_check_positive,
    help="Trials kept per study.",
)
@click.option(
    "--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="Write every figure (all thetas) to this JSON file.",
)
@click.option(
    "--studies", type=int, default=200, show_default=True, callback=_check_positive,
    help="Seeded random studies per data set.",
)
@click.option(
    "--study-size", type=int, default=16, show_default=True, callback=_check_positive,
    help="Configurations per study.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the study sampling and the predictors.")
@click.option(
    "--digits", type=click.Path(exists=True, dir_okay=False, path_type=Path), multiple=True,
    help="Also evaluate this curve file (any layout PATH accepts); repeatable.",
)
@click.option(
    "--max-curves", type=int, default=None, callback=_check_positive,
    help="Evaluate at most N curves per data set (seeded subsample; for quick runs).",
)
@click.option(
    "--sweep/--no-sweep", default=True, show_default=True,
    help="Evaluate every theta in 0.1..1.0 (else only --theta).",
)
@click.option(
    "--stoppers/--no-stoppers", default=True, show_default=True,
    help="Also replay the early stoppers (predictive, rank, paper, last-value, asha, sha, hyperband, median, full).",
)
@click.option(
    "--learned/--no-learned", default=True, show_default=True,
    help="Also fit ResidualCurvePredictor on a seeded half of each data set and compare it with the last value on "
         "the other half (skipped, with the reason, when a half is too small or the model cannot be fitted).",
)
@click.option(
    "--stopper-studies", type=int, default=40, show_default=True, callback=_check_positive,
    help="Seeded studies per data set for the stoppers.",
)
@click.option(
    "--workers", type=int, default=4, show_default=True, callback=_check_positive,
    help="Trials run in parallel in the stoppers' replay.",
)
def eval_command(
    path: Path,
    theta: float,
    top_k: int,
    json_out: Path | None,
    studies: int,
    study_size: int,
    seed: int,
    digits: tuple[Path, ...],
    max_curves: int | None,
    sweep: bool,
    stoppers: bool,
    learned: bool,
    stopper_studies: int,
    workers: int,
) -> None:
    """Compare EarlyCurve with SLAQ, last value and best value on the curves under PATH.

    PATH is data/learning_curves, another folder of curve files, or one curve file of any name. The
    layout is detected from the content (docs/design/earlycurve.md, "Curve files"): a long CSV
    config_id,step,value[,max_steps] (value a loss); opda-style JSON lines (plain or .gz) with one
    configuration per line ("epochs", "learning_curve" of {"epoch", "top_1"}); the cakelab CSV
    (curve_id,step,accuracy); the digits CSV (config_id,step,max_steps,val_loss). Values are losses
    (1 - top-1 or 1 - accuracy; digits: validation cross-entropy); errors are relative to the true final loss.

    With --learned (default) a final-metric predictor learned from previous runs (ResidualCurvePredictor,
    docs/design/earlycurve.md §8.7) is fitted on a seeded half of each data set and compared with the last value on
    the other half; the chosen ridge alpha per theta says where it uses coefficients (inf, null in the JSON: it
    ranks as the last value). With --stoppers (default) each data set is also replayed as tuning studies under every early
    stopper at fixed settings: top-1 / top-3 accuracy of the trial picked, regret (its final loss minus
    the best) and cost (steps trained / training every trial), mean and sd over studies.
    """
    sets = find_datasets(path, digits)
    for name, curve_set in sets.items():
        n = len(curve_set.curves) if max_curves is None else min(max_curves, len(curve_set.curves))
        if n <= top_k:
            raise click.UsageError(
                f"{name}: {n} complete curve(s) ({', '.join(f'{k}={v}' for k, v in curve_set.counts.items())}), "
                f"but --top-k {top_k} needs more than {top_k}: with every curve kept the selection scores would "
                "be trivially perfect")
    thetas = tuple(sorted(set(THETAS) | {theta})) if sweep else (theta,)
    predictors = default_predictors(seed)
    report = {
        "theta": theta,
        "top_k": top_k,
        "studies": studies,
        "study_size": study_size,
        "seed": seed,
        "max_curves": max_curves,
        "thetas": list(thetas),
        "datasets": {},
    }
    for name, curve_set in sets.items():
        result = evaluate_set(
            curve_set,
            predictors,
            thetas=thetas,
            n_studies=studies,
            study_size=study_size,
            top_k=top_k,
            seed=seed,
            max_curves=max_curves,
        )
        report["datasets"][name] = result
        click.echo(format_table(result, theta))
        if learned:
            try:
                held_out = evaluate_learned(curve_set, thetas=thetas, n_studies=studies, study_size=study_size,
                                            top_k=top_k, seed=seed, max_curves=max_curves)
            except InvalidCurveError as e:  # e.g. losses <= 0: the other tables still stand
                held_out = {"skipped": str(e)}
                click.echo(f"  learned: skipped ({e})")
            result["learned"] = held_out
            if held_out is None:
                click.echo(f"  learned: skipped ({result['counts']['evaluated']} curves; each half needs "
                           f"{max(study_size, 5)})")
            elif "skipped" not in held_out:
                click.echo(format_table(held_out, theta))
                alphas = ", ".join(f"{t}: {'inf' if a is None else f'{a:g}'}" for t, a in held_out["learned"]["alpha"].items())
                click.echo(f"  learned: ridge alpha per theta ({alphas})")
        if stoppers:
            cmp = compare_stoppers(curve_set, theta=theta, top_k=top_k, n_studies=stopper_studies,
                                   study_size=study_size, workers=workers, seed=seed)
            result["stoppers"] = cmp
            click.echo(format_stoppers(cmp))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        click.echo(f"wrote {json_out}")


@curves.command("choose")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--target-top3", type=float, default=0.95, show_default=True,
              help="Top-3 accuracy (mean minus one standard error over the tuning studies) the setting must reach.")
@click.option("--study-size", type=int, default=16, show_default=True, callback=_check_positive,
              help="Trials per study (your study's size).")
@click.option("--tuning-studies", type=int, default=120, show_default=True, callback=_check_positive)
@click.option("--test-studies", type=int, default=40, show_default=True, callback=_check_positive)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the halves and the studies.")
@click.option("--paper/--no-paper", "with_paper", default=False, show_default=True,
              help="Also consider ranking at θ by EarlyCurve's prediction (--stopper paper; slower: one fit per curve "
                   "and θ).")
@click.option("--two-rung/--no-two-rung", "two_rung", default=False, show_default=True,
              help="Also consider two synchronous last-value rungs (--rungs θ1:keep1 before --theta; grid θ1 0.04-0.1 x "
                   "keep1 4-8 below --study-size x θ2 0.15-0.5 x keep2 2-3).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write every figure to this JSON file.")
def choose_command(path: Path, target_top3: float, study_size: int, tuning_studies: int, test_studies: int, seed: int,
                   with_paper: bool, two_rung: bool, json_out: Path | None) -> None:
    """Choose --theta and --top-k of `spottune run --stopper barrier` on finished curves of your family under PATH.

    PATH: any curve file or folder `spottune curves eval` reads (values a loss). The curves are split into two seeded
    halves; studies of --study-size trials are drawn from each. On the tuning studies the cheapest (θ, keep) of the
    grid θ 0.04-0.5 x keep 2-6 (below --study-size) whose mean top-3 accuracy minus one standard error reaches
    --target-top3 is chosen; its top-3 and cost (steps / training every trial) on the test studies are printed,
    never used to choose (docs/design/earlycurve.md §8.10). With --paper the ranking at θ is chosen too: the last value
    (--stopper barrier) or EarlyCurve's predicted final value (--stopper paper). With --two-rung two synchronous
    rungs are candidates too: every trial trains to θ1, the keep1 lowest last values to θ, the --top-k lowest there
    to the end (--rungs θ1:keep1; docs/design/earlycurve.md §8.12).
    """
    if not 0 < target_top3 <= 1:
        raise click.BadParameter(f"target_top3 is {target_top3}, but must be 0 < target_top3 <= 1",
                                 param_hint="--target-top3")
    report = {}
    for name, curve_set in find_datasets(path).items():
        keeps = [k for k in BARRIER_KEEPS if k < study_size] or [1]
        two = [g for g in TWO_RUNG_GRID if g[1] < study_size]
        r = choose_barrier(curve_set, keeps=keeps, n_tuning=tuning_studies, n_test=test_studies, study_size=study_size,
                           target_top3=target_top3, seed=seed,
                           rankings=("last-value", "paper") if with_paper else ("last-value",),
                           two_rung=two_rung and bool(two), two_rung_grid=two)
        report[name] = r
        tun, test = r["tuning"], r["test"]
        rungs = f" --rungs {','.join(f'{t:g}:{k}' for t, k in r['rungs'])}" if r["rungs"] else ""
        click.echo(f"{name} ({r['n_curves']} curves): --stopper {r['stopper']}{rungs} --theta {r['theta']:g} "
                   f"--top-k {r['keep']}"
                   + ("" if r["met"] else f" (no setting reached {target_top3:g} on tuning: the most accurate)"))
        click.echo(f"  tuning ({tuning_studies} studies of {r['study_size']}): top-3 {tun['top3']:.3f} ± {tun['top3_se']:.3f}"
                   f", cost {tun['cost']:.3f}; test ({test_studies} studies): top-3 {test['top3']:.3f}, top-1 "
                   f"{test['top1']:.3f}, regret {test['regret']:.4f}, cost {test['cost']:.3f}")
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        click.echo(f"wrote {json_out}")
