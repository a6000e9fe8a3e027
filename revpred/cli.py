"""``revpred`` command line: train, eval, info. Errors: one line, exit code 2.

Examples::

    revpred train --prices us-east-1_2015.csv.gz --all-markets \\
        --train-start 2015-05-01T00:00Z --train-end 2015-05-10T00:00Z --out models/
    revpred eval --prices us-east-1_2015.csv.gz --models models/ \\
        --test-start 2015-05-10T00:00Z --test-end 2015-05-13T00:00Z --json eval.json
    revpred info models/
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import click

from revpred.cli_runner import run_click
from revpred.errors import RevPredError
from spotmarket.errors import SpotMarketError


@click.group(help="RevPred: revocation prediction from spot price history (the SpotTune paper's RevPred).")
def cli() -> None:
    pass


def _seconds(value: str, name: str) -> float:
    from spotmarket.prices import to_seconds

    try:
        return to_seconds(value)
    except (RevPredError, SpotMarketError) as exc:  # to_seconds raises PriceDataError for every bad value
        raise RevPredError(f"{name}: {exc}") from None


def _markets(history, market_args: tuple[str, ...], all_markets: bool) -> list:
    from spotmarket.prices import Market

    if all_markets and market_args:
        raise RevPredError("give either --market (repeatable) or --all-markets, not both")
    if all_markets:
        return history.markets
    if not market_args:
        raise RevPredError("no market given; use --market AZ/TYPE[/PRODUCT] (repeatable) or --all-markets")
    markets = [Market.parse(m) for m in market_args]
    for m in markets:
        history[m]  # raises PriceDataError naming the market if it is not in the data
    return markets


def _history(prices: str | None):
    """Price history of ``--prices`` (a path or a bare file name; default: :mod:`spotmarket.data`'s lookup)."""
    from spotmarket.prices import load_history

    return load_history(prices)


@cli.command(help="Train RevPred and the baselines per market on a training window.")
@click.option("--prices", default=None, metavar="PATH",
              help="Price file or bare file name (default: us-east-1_2015.csv.gz via the data lookup).")
@click.option("--market", "market_args", multiple=True, metavar="AZ/TYPE[/PRODUCT]", help="Market to train (repeatable).")
@click.option("--all-markets", is_flag=True, help="Train every market in the price file.")
@click.option("--train-start", required=True,
              help="UTC, e.g. 2015-05-01T00:00Z or 2015-05-01; a time without a zone is read as UTC, as AWS reports.")
@click.option("--train-end", required=True, help="UTC (a time without a zone is UTC); training labels end here.")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Model directory to write.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--epochs", default=8, show_default=True, type=click.IntRange(min=1))
@click.option("--stride", default=5, show_default=True, type=click.IntRange(min=1), help="Minutes between training samples.")
@click.option("--grid", "grid_method", default="ffill", show_default=True, type=click.Choice(["ffill", "linear"]))
@click.option("--variations", default="events", show_default=True, type=click.Choice(["events", "grid"]),
              help="Algorithm 2 variations (decision D4).")
@click.option("--calibration", default="prior_shift", show_default=True,
              type=click.Choice(["prior_shift", "platt", "temperature", "none"]), help="Eq 3 (decision D5).")
@click.option("--kinds", default="revpred,tributary,logreg,empirical,constant", show_default=True,
              help="Comma-separated models to train.")
@click.option("--revpred-max-prices", default="alg2", show_default=True, type=click.Choice(["alg2", "mixed"]),
              help="RevPred training max prices: Algorithm 2 (paper) or half Algorithm 2, half random delta.")
@click.option("--validation-days", default=1.0, show_default=True, type=click.FloatRange(min=0.0),
              help="Validation slice at the end of the window (at most 1/8 of it).")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(min=1), help="torch threads.")
def train(prices, market_args, all_markets, train_start, train_end, out, seed, epochs, stride, grid_method,
          variations, calibration, kinds, revpred_max_prices, validation_days, threads) -> None:
    from tqdm import tqdm

    from revpred.store import save_model_set
    from revpred.training import LEARNED_KINDS, TrainConfig, train_markets

    start_s, end_s = _seconds(train_start, "--train-start"), _seconds(train_end, "--train-end")
    if end_s <= start_s:
        raise RevPredError(f"--train-end {train_end} is not after --train-start {train_start}")
    from revpred.training import ALL_KINDS

    kind_list = [k.strip() for k in kinds.split(",") if k.strip()]
    unknown = [k for k in kind_list if k not in ALL_KINDS]
    if unknown or not kind_list:
        raise RevPredError(f"--kinds {kinds!r}: unknown or empty; use some of {', '.join(ALL_KINDS)}")
    history = _history(prices)
    markets = _markets(history, market_args, all_markets)
    config = TrainConfig(stride_min=stride, epochs=epochs, grid_method=grid_method, variations=variations,
                         calibration=calibration, seed=seed, n_threads=threads, validation_days=validation_days,
                         revpred_max_prices=revpred_max_prices)
    n_lstm = sum(k in LEARNED_KINDS and k != "logreg" for k in kind_list)
    bar = tqdm(total=len(markets) * max(n_lstm, 1) * epochs, unit="epoch", desc="revpred train", disable=None)

    def progress(market, kind, epoch, loss):
        bar.set_postfix_str(f"{market} {kind} loss={loss:.3f}")
        bar.update(1)

    try:
        model_set = train_markets(history, markets, start_s, end_s, config, kind_list, progress)
    finally:
        bar.close()
    root = save_model_set(out, model_set)
    click.echo(f"trained {len(markets)} market(s) x {len(kind_list)} model(s) -> {root}")


@cli.command(name="eval", help="Score RevPred and every baseline on a test window after the training window.")
@click.option("--prices", default=None, metavar="PATH", help="As for train; the same file the models were trained on.")
@click.option("--models", "models_dir", required=True, type=click.Path(file_okay=False))
@click.option("--test-start", required=True,
              help="UTC (a time without a zone is read as UTC, as AWS reports); not before the end of training.")
@click.option("--test-end", required=True, help="UTC (a time without a zone is UTC).")
@click.option("--market", "market_args", multiple=True, metavar="AZ/TYPE[/PRODUCT]", help="Subset of the trained markets.")
@click.option("--stride", default=5, show_default=True, type=click.IntRange(min=1), help="Minutes between test queries.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random test max prices.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="Write all metrics as JSON.")
@click.option("--per-market", is_flag=True, help="Also print per-market rows.")
def eval_(prices, models_dir, test_start, test_end, market_args, stride, seed, json_out, per_market) -> None:
    from revpred.evaluation import evaluate, summary_rows
    from spotmarket.prices import Market
    from revpred.store import load_model_set

    start_s, end_s = _seconds(test_start, "--test-start"), _seconds(test_end, "--test-end")
    history = _history(prices)
    markets = [Market.parse(m) for m in market_args] or None
    ms = load_model_set(models_dir, history, markets)
    predictors = build_predictors(ms)
    cfg = next(iter(ms.fits.values())).config
    from tqdm import tqdm

    from revpred.evaluation import RULES, undefined_metrics

    n_pred = sum(len(p) if isinstance(p, dict) else 1 for p in predictors.values())
    bar = tqdm(total=len(ms.markets) * (1 + len(RULES) * n_pred), unit="step", desc="revpred eval", disable=None,
               file=sys.stderr)
    try:
        result = evaluate(history, predictors, ms.markets, start_s, end_s, stride_min=stride, seed=seed,
                          variations=cfg.variations, grid_method=cfg.grid_method, train_end_s=ms.train_window_s[1],
                          on_market=lambda: bar.update(1))
    finally:
        bar.close()
    result["models_dir"] = str(models_dir)
    undefined = undefined_metrics(result)
    if undefined:
        pos = {r: next(iter(per.values()))["pooled"].get("n_pos", 0) for r, per in result["rules"].items()}
        click.echo(f"warning: F1 or ROC AUC undefined (shown as 'undefined', null in JSON) for {len(undefined)} "
                   f"score(s): the test labels hold no positive or only positives (positives: "
                   + ", ".join(f"{r} {n}" for r, n in pos.items()) + ")", err=True)
    header = ["rule", "model", "n", "positives", "accuracy", "f1", "roc_auc", "brier"]
    rows = summary_rows(result)
    if per_market:
        for rule, per in result["rules"].items():
            for name, res in per.items():
                for m, met in res["markets"].items():
                    rows.append([rule, f"{name} @ {m}", str(met["n"]), str(met["n_pos"]),
                                 *(_fmt(met.get(k)) for k in ("accuracy", "f1", "roc_auc", "brier"))])
    click.echo(_table(header, rows))
    if json_out:
        Path(json_out).write_text(json.dumps(_clean(result), indent=1))
        click.echo(f"metrics -> {json_out}")


def build_predictors(ms) -> dict:
    """Name -> predictor (or {rule: predictor}) for every model kind in a ModelSet, plus raw RevPred."""
    out: dict = {}
    kinds = ms.kinds()
    for kind in kinds:
        if kind == "constant":
            out[kind] = {rule: ms.predictor(kind, rule=rule) for rule in ("random", "alg2")}
        else:
            out[kind] = ms.predictor(kind)
        if kind == "revpred":
            out["revpred_raw"] = ms.predictor(kind, raw=True)
    return out


@cli.command(help="Describe a model directory.")
@click.argument("models_dir", type=click.Path(file_okay=False))
def info(models_dir) -> None:
    from spotmarket.prices import to_timestamp
    from revpred.store import index_markets, load_market_fit, market_slug, read_index

    index = read_index(models_dir)
    markets = index_markets(models_dir)
    click.echo(f"{models_dir}: format {index['format_version']}, spottune {index.get('spottune_version')}, "
               f"{len(markets)} market(s)")
    for m in markets:
        fit = load_market_fit(Path(models_dir) / index["markets"].get(str(m), market_slug(m)), m)
        c = fit.config
        click.echo(f"- {m}: train {to_timestamp(fit.train_start_s)} .. {to_timestamp(fit.train_end_s)}; "
                   f"stride {c.stride_min} min, epochs {c.epochs}, grid {c.grid_method}, Alg-2 {c.variations}, "
                   f"calibration {c.calibration}, RevPred max prices {c.revpred_max_prices}, seed {c.seed}")
        for kind, mm in fit.models.items():
            est = mm.estimator
            extra = f", best epoch {est.best_epoch_}/{est.n_iter_}" if hasattr(est, "best_epoch_") else ""
            click.echo(f"    {kind}: {mm.info.get('n_train')} train / {mm.info.get('n_val')} val rows, "
                       f"positive share {mm.info.get('train_positive_share', float('nan')):.3f} "
                       f"({mm.info.get('rule')} max prices){extra}")
        if fit.rises is not None:
            click.echo(f"    empirical: {fit.rises.size} training hours")
        if fit.rates:
            click.echo("    constant: " + ", ".join(f"{k} {v:.3f}" for k, v in fit.rates.items()))


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "undefined" if math.isnan(v) else f"{v:.3f}"
    return str(v)


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(r, widths)) for r in [header, *rows]]
    return "\n".join(lines)


def _clean(o):
    """JSON-safe copy: NaN -> None."""
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_clean(v) for v in o]
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o


def main() -> None:
    """Console-script entry point."""
    run_click(cli, (RevPredError, SpotMarketError), prog_name="revpred")
