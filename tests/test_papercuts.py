"""Papercuts of the command line and the API, and results written during the run, each pinned by a test."""

from __future__ import annotations

import gzip
import json
import logging
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

DATA = Path(__file__).resolve().parents[1] / "data"


def _main(program: str, argv: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    if program == "spottune":
        from spottune.cli import main
    else:
        from revpred.cli import main
    monkeypatch.setattr(sys, "argv", [program, *argv])
    code: object = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return (0 if code is None else int(code)), out.out, out.err


# -- naive times are UTC ------------------------------------------------------------------------------------
def test_naive_times_are_read_as_utc():
    from spotmarket.prices import to_seconds

    assert to_seconds("2015-06-01") == to_seconds("2015-06-01T00:00Z") == 1433116800.0
    assert to_seconds("2015-06-01 12:30") == to_seconds("2015-06-01T12:30:00+00:00")
    assert to_seconds("2015-06-01T02:00+02:00") == to_seconds("2015-06-01")  # an explicit zone still counts


@pytest.mark.parametrize("command", ["train", "eval"])
def test_revpred_help_says_naive_times_are_utc(command):
    from revpred.cli import cli

    res = CliRunner().invoke(cli, [command, "--help"])
    assert res.exit_code == 0 and "without a zone is read as UTC" in " ".join(res.output.split())


@pytest.mark.parametrize(("command", "option"), [("run", "--start"), ("simulate", "--start-times")])
def test_spottune_help_says_naive_times_are_utc(command, option):
    from spottune.cli import cli

    res = CliRunner().invoke(cli, [command, "--help"])
    text = " ".join(res.output.split())
    assert res.exit_code == 0 and option in text and "without a zone" in text and "read as UTC" in text


def test_revpred_train_accepts_a_date_without_zone(tmp_path):
    from revpred.cli import _seconds

    assert _seconds("2015-06-01", "--train-start") == 1433116800.0


# -- curves eval: any file name, layout detected by content --------------------------------------------------
def _long_csv(n_configs: int = 6, max_steps: int = 12) -> str:
    rows = ["config_id,step,value,max_steps"]
    for c in range(n_configs):
        rows += [f"cfg{c},{s},{0.2 + 1.0 / (s + c + 1):.6f},{max_steps}" for s in range(1, max_steps + 1)]
    return "\n".join(rows) + "\n"


_EVAL = ["--studies", "3", "--study-size", "5", "--no-sweep", "--max-curves", "30"]


def test_curves_eval_reads_a_renamed_opda_file(tmp_path, monkeypatch, capsys):
    renamed = tmp_path / "alexnet_copy.jsonl.gz"
    shutil.copy(DATA / "learning_curves" / "opda_alexnet_imagenet_tuning.jsonl.gz", renamed)
    code, out, err = _main("spottune", ["curves", "eval", str(renamed), *_EVAL], monkeypatch, capsys)
    assert code == 0, err
    assert out.startswith("alexnet-copy (theta=0.7; total=")
    assert "earlycurve" in out.lower()


def test_curves_eval_reads_plain_opda_jsonl(tmp_path, monkeypatch, capsys):
    from earlycurve.evaluation import detect_layout, load_curves

    lines = gzip.decompress((DATA / "learning_curves" / "opda_alexnet_imagenet_tuning.jsonl.gz").read_bytes())
    plain = tmp_path / "runs.jsonl"
    plain.write_bytes(lines)
    assert detect_layout(plain) == "opda-jsonl"
    gz = load_curves(DATA / "learning_curves" / "opda_alexnet_imagenet_tuning.jsonl.gz", "a")
    assert load_curves(plain, "a").counts == gz.counts


def test_curves_eval_reads_a_long_csv(tmp_path, monkeypatch, capsys):
    from earlycurve.evaluation import detect_layout, load_curves

    path = tmp_path / "my sweep.csv"
    path.write_text(_long_csv())
    assert detect_layout(path) == "long-csv"
    cs = load_curves(path)
    assert cs.name == "my sweep" and cs.counts == {"total": 6, "diverged": 0, "incomplete": 0, "used": 6}
    assert cs.curves[0].max_steps == 12 and cs.curves[0].final == pytest.approx(0.2 + 1 / 13, abs=1e-6)
    code, out, err = _main("spottune", ["curves", "eval", str(path), "--studies", "2", "--study-size", "5",
                                        "--no-sweep"], monkeypatch, capsys)
    assert code == 0, err
    assert out.startswith("my sweep (theta=0.7; total=6, diverged=0, incomplete=0, used=6")


def test_long_csv_without_max_steps_skips_short_curves(tmp_path):
    from earlycurve.evaluation import load_curves

    text = "config_id,step,value\n" + "".join(f"a,{s},{1 / s}\n" for s in range(1, 11)) + \
        "".join(f"b,{s},{1 / s}\n" for s in range(1, 6)) + "c,1,1\nc,10,nan\n"
    path = tmp_path / "c.csv"
    path.write_text(text)
    cs = load_curves(path)
    assert cs.counts == {"total": 3, "diverged": 1, "incomplete": 1, "used": 1}
    assert cs.curves[0].curve_id == "a" and cs.curves[0].max_steps == 10


def test_cakelab_layout_is_still_read_under_another_name(tmp_path):
    from earlycurve.evaluation import detect_layout, load_cakelab, load_curves

    src = DATA / "learning_curves" / "cakelab_resnet32_cifar10_curves.csv.gz"
    other = tmp_path / "resnet.csv.gz"
    shutil.copy(src, other)
    assert detect_layout(other) == "cakelab-csv"
    assert load_curves(other).counts == load_cakelab(src).counts


# -- the default pool: types the catalog knows -----------------------------------------------------------------
def _prices_with_unknown_type(path: Path) -> Path:
    t0 = pd.Timestamp("2015-05-01T00:00Z")
    rows = []
    for h in range(0, 24 * 12, 3):
        for it, base in (("r3.large", 0.02), ("a1.2xlarge", 0.05), ("zz9.mega", 1.0)):
            rows.append((t0 + pd.Timedelta(hours=h), "us-east-1", "us-east-1a", it, "Linux/UNIX",
                         base * (1 + 0.1 * ((h // 3) % 3))))
    pd.DataFrame(rows, columns=["timestamp", "region", "availability_zone", "instance_type", "product_description",
                                "price"]).to_csv(path, index=False)
    return path


def test_default_pool_is_the_catalogued_types(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr("provisioner._pool._NOTED", set())
    from provisioner import InstanceCatalog, Pool
    from spotmarket.prices import load_history

    history = load_history(_prices_with_unknown_type(tmp_path / "p.csv"))
    with caplog.at_level(logging.WARNING, logger="provisioner"):
        markets = Pool().resolve(history, InstanceCatalog.load())
        Pool().resolve(history, InstanceCatalog.load())  # noted once, not twice
    assert [str(m) for m in markets] == ["us-east-1a/r3.large/Linux/UNIX"]
    notes = [r.getMessage() for r in caplog.records if r.name == "provisioner"]
    assert len(notes) == 1 and "2 instance type(s)" in notes[0] and "a1.2xlarge, zz9.mega" in notes[0]


def test_named_unknown_type_is_still_refused(tmp_path):
    from provisioner import InstanceCatalog, Pool
    from provisioner.errors import UnknownInstanceType
    from spotmarket.prices import load_history

    history = load_history(_prices_with_unknown_type(tmp_path / "p.csv"))
    with pytest.raises(UnknownInstanceType, match="zz9.mega"):  # a1.2xlarge is in the catalog now (no price)
        Pool(instance_types=["zz9.mega"]).resolve(history, InstanceCatalog.load())


def test_run_on_prices_with_uncatalogued_types(tmp_path, monkeypatch, capsys, caplog):
    monkeypatch.setattr("provisioner._pool._NOTED", set())  # the note is made once per process
    prices = _prices_with_unknown_type(tmp_path / "p.csv")
    out = tmp_path / "res"
    with caplog.at_level(logging.WARNING, logger="provisioner"):  # the console shows it as one stderr line
        code, stdout, err = _main("spottune", ["run", "--prices", str(prices), "--predictor", "none", "--max-steps",
                                               "4", "--theta", "1", "--top-k", "1", "--start", "2015-05-06",
                                               "--no-progress", "--output", str(out)], monkeypatch, capsys)
    assert code == 0, err
    notes = [r.getMessage() for r in caplog.records if "a1.2xlarge" in r.getMessage()]
    assert len(notes) == 1 and "\n" not in notes[0]
    assert "results:" in stdout and pd.read_csv(out / "trials.csv")["markets_used"].str.contains("r3.large").all()


def test_simulate_has_pool_options():
    from spottune.cli import cli

    res = CliRunner().invoke(cli, ["simulate", "--help"])
    assert res.exit_code == 0 and "--instance-types" in res.output and "--zones" in res.output


# -- on-demand prices for the shipped regions ----------------------------------------------------------------
def test_every_catalogued_type_of_the_eu_trace_has_an_on_demand_price():
    from provisioner import InstanceCatalog, Pool
    from spotmarket.prices import load_history

    catalog = InstanceCatalog.load()
    history = load_history("eu-west-1_2021-08.csv.gz")
    markets = Pool().resolve(history, catalog)
    assert len(markets) > 100
    catalog.check_on_demand(markets)  # no error
    table = pd.read_csv(DATA / "spot_prices" / "on_demand_eu-west-1.csv")
    assert list(table.columns[:4]) == ["instance_type", "region", "os", "on_demand_price_usd_per_hour"]
    assert (table["region"] == "eu-west-1").all() and table["basis"].str.startswith("derived").all()
    r4 = catalog["r4.large"]
    assert r4.on_demand("eu-west-1") == pytest.approx(round(r4.on_demand("us-east-1") * 1.11, 4))
    assert "on_demand_eu-west-1.csv (derived" in r4.source
    readme = (DATA / "spot_prices" / "README.md").read_text()
    assert "on_demand_eu-west-1.csv" in readme and "1.11" in readme


def test_missing_on_demand_price_is_one_error_naming_every_type():
    from provisioner import InstanceCatalog
    from provisioner.errors import UnknownInstanceType
    from spotmarket.prices import Market

    catalog = InstanceCatalog.load()
    markets = [Market.parse("ap-south-1a/r4.large"), Market.parse("ap-south-1b/m4.large")]
    with pytest.raises(UnknownInstanceType, match=r"2 instance type\(s\).*m4.large \(ap-south-1\), r4.large"):
        catalog.check_on_demand(markets)


# -- revpred eval: undefined metrics -------------------------------------------------------------------------
def test_no_positive_label_makes_f1_undefined():
    from revpred.evaluation import binary_metrics, summary_rows, undefined_metrics

    m = binary_metrics(np.zeros(10), np.full(10, 0.1))
    assert m["n_pos"] == 0 and m["accuracy"] == 1.0 and math.isnan(m["f1"]) and math.isnan(m["roc_auc"])
    result = {"rules": {"alg2": {"revpred": {"pooled": m, "markets": {}}}}}
    assert summary_rows(result, ("accuracy", "f1")) == [["alg2", "revpred", "10", "0", "1.000", "undefined"]]
    assert undefined_metrics(result) == ["alg2/revpred"]
    some = binary_metrics(np.array([0, 1, 0, 1]), np.array([0.1, 0.2, 0.1, 0.9]))
    assert some["f1"] == pytest.approx(2 / 3) and some["n_pos"] == 2


def test_eval_reports_progress_per_market():
    from revpred.evaluation import RULES, evaluate
    from spotmarket.prices import Market, PriceHistory
    from tests.test_revpred_cli import small_table

    history = PriceHistory(small_table())
    markets = [Market.parse("us-east-1a/r3.large")]

    class Half:
        def predict_proba(self, ms, t, b):
            return np.full(len(t), 0.5)

    calls = []
    t0 = pd.Timestamp("2015-05-01T14:00Z").value / 1e9
    evaluate(history, {"half": Half()}, markets, t0, t0 + 6 * 3600, stride_min=30, on_market=lambda: calls.append(1))
    assert len(calls) == len(markets) * (1 + len(RULES))


# -- prices info: gaps --------------------------------------------------------------------------------------
def test_prices_info_reports_gaps_over_a_day(tmp_path, monkeypatch, capsys):
    path = tmp_path / "p.csv"
    path.write_text("timestamp,region,availability_zone,instance_type,product_description,price\n"
                    "2015-05-01T00:00Z,us-east-1,us-east-1a,r3.large,Linux/UNIX,0.02\n"
                    "2015-05-01T12:00Z,us-east-1,us-east-1a,r3.large,Linux/UNIX,0.03\n"
                    "2015-05-04T12:00Z,us-east-1,us-east-1a,r3.large,Linux/UNIX,0.02\n"
                    "2015-05-04T18:00Z,us-east-1,us-east-1a,r3.large,Linux/UNIX,0.02\n")
    code, out, err = _main("spottune", ["prices", "info", str(path)], monkeypatch, capsys)
    assert code == 0, err
    assert ("gaps:        1 of 1 markets have no record for more than a day (1 gaps); longest: "
            "us-east-1a/r3.large/Linux/UNIX, 3.0 days (2015-05-01 12:00 .. 2015-05-04 12:00 UTC)") in out
    code, out, err = _main("spottune", ["prices", "info", "--json", str(path)], monkeypatch, capsys)
    m = json.loads(out)["markets"][0]
    assert m["gaps_over_1_day"] == 1 and m["longest_gap_days"] == 3.0
    assert m["longest_gap_utc"] == ["2015-05-01T12:00:00+00:00", "2015-05-04T12:00:00+00:00"]


def test_prices_info_reports_collection_gaps(tmp_path, monkeypatch, capsys):
    header = "timestamp,region,availability_zone,instance_type,product_description,price\n"

    def write(name, rows):
        path = tmp_path / name
        path.write_text(header + "".join(f"{pd.Timestamp('2015-05-01', tz='UTC') + pd.Timedelta(seconds=t):%Y-%m-%dT%H:%M:%SZ},"
                                         f"us-east-1,us-east-1{z},r3.large,Linux/UNIX,{0.02 + 0.001 * (i % 2)}\n"
                                         for i, (t, z) in enumerate(rows)))
        return str(path)

    # two markets, a record each every 60 s (merged every 30 s) for 10 h; both silent for 3 h; then 1 h more
    times = [*range(0, 36_000, 60), *range(46_800, 50_400, 60)]
    both = write("both.csv", [(t, "a") for t in times] + [(t + 30, "b") for t in times])
    code, out, err = _main("spottune", ["prices", "info", both], monkeypatch, capsys)
    assert code == 0, err
    assert ("silences:    1 collection gaps (no record in any market for far longer than usual, "
            "PriceHistory.collection_gaps); longest 3.0 h (2015-05-01 09:59 .. 2015-05-01 13:00 UTC)") in out
    code, out, err = _main("spottune", ["prices", "info", "--json", both], monkeypatch, capsys)
    assert json.loads(out)["collection_gaps_utc"] == [["2015-05-01T09:59:30+00:00", "2015-05-01T13:00:00+00:00"]]
    # the same silence in one market only, while the other records on: no collection gap
    one = write("one.csv", [(t, "a") for t in times] + [(t + 30, "b") for t in range(0, 50_400, 60)])
    code, out, err = _main("spottune", ["prices", "info", one], monkeypatch, capsys)
    assert "silences:    no collection gap" in out


# -- results during the run (docs/design/decisions.md, "Results during the run") -----------------------------
def test_output_folder_is_checked_before_the_run(tmp_path):
    from spottune.errors import ConfigError
    from spottune.results import prepare_output

    (tmp_path / "small.csv").write_text("x\n")
    with pytest.raises(ConfigError, match="'small.csv'.* is a file, not a folder|small.csv.*is a file"):
        prepare_output(tmp_path / "small.csv" / "out")
    with pytest.raises(ConfigError, match="is a file, but must be a folder"):
        prepare_output(tmp_path / "small.csv")
    assert prepare_output(tmp_path / "a" / "b").is_dir()


def test_results_are_written_while_the_run_goes_on(tmp_path):
    from spottune.cli._run import run_experiment
    from spottune.experiment import ExperimentSpec
    from spottune.results import ResultsJournal, prepare_output, write_results

    out = prepare_output(tmp_path / "res")
    seen = []

    def check(now_s, orch, usd):
        events = (out / "events.jsonl").read_text().splitlines()
        ledger = pd.read_csv(out / "ledger.csv")
        seen.append((len(events), len(journal.record.log), len(ledger), len(journal.record.ledger)))

    journal = ResultsJournal(out, progress=check)
    spec = ExperimentSpec(max_steps=6, theta=0.5, top_k=2, predictor="none", instance_types=["r3.large"],
                          availability_zones=["us-east-1a"])
    result = run_experiment(spec, progress=journal, output=out)
    assert seen and all(e == n for e, n, _, _ in seen) and all(lr == n for _, _, lr, n in seen)
    assert seen[-1][2] > 0  # instances were billed (and written) before the end
    trials_mid = pd.read_csv(out / "trials.csv")
    assert len(trials_mid) == 16
    write_results(out, result)
    final = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert len(final) == len(result["record"].log)
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]


def test_revpred_eval_without_positives_warns_once_and_prints_undefined(tmp_path, monkeypatch, capsys):
    from tests.test_revpred_cli import small_table

    raw = small_table().rename(columns={"timestamp": "datetime"}).assign(os="Linux")
    raw["datetime"] = raw["datetime"].astype(str)
    prices = tmp_path / "prices.csv"
    raw[["datetime", "instance_type", "os", "region", "availability_zone", "price"]].to_csv(prices, index=False)
    models = tmp_path / "m"
    code, _, err = _main("revpred", ["train", "--prices", str(prices), "--market", "us-east-1a/r3.large",
                                     "--train-start", "2015-05-01", "--train-end", "2015-05-01 14:00",
                                     "--out", str(models), "--kinds", "constant,empirical"], monkeypatch, capsys)
    assert code == 0, err
    monkeypatch.setattr("revpred.evaluation.revocation_labels", lambda s, t, b: np.zeros(len(t), dtype=np.int64))
    code, out, err = _main("revpred", ["eval", "--prices", str(prices), "--models", str(models), "--test-start",
                                       "2015-05-01T14:00Z", "--test-end", "2015-05-01T20:00Z", "--stride", "10",
                                       "--json", str(tmp_path / "e.json")], monkeypatch, capsys)
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "positives: random 0, alg2 0" in warnings[0]
    header, *rows = [line.split() for line in out.splitlines()[:5]]
    assert header == ["rule", "model", "n", "positives", "accuracy", "f1", "roc_auc", "brier"]
    assert all(r[3] == "0" and r[5] == "undefined" and r[6] == "undefined" for r in rows)
    pooled = json.loads((tmp_path / "e.json").read_text())["rules"]["alg2"]["empirical"]["pooled"]
    assert pooled["n_pos"] == 0 and pooled["f1"] is None and pooled["accuracy"] is not None


def test_a_run_that_dies_midway_keeps_its_events_and_ledger(tmp_path):
    from spottune.cli._run import run_experiment
    from spottune.experiment import ExperimentSpec
    from spottune.results import ResultsJournal, prepare_output

    out = prepare_output(tmp_path / "res")
    calls = []

    def die(now_s, orch, usd):
        calls.append(now_s)
        if len(calls) == 40:
            raise KeyboardInterrupt  # the user's Ctrl-C, or a crash

    journal = ResultsJournal(out, progress=die)
    spec = ExperimentSpec(max_steps=6, theta=0.5, top_k=2, predictor="none", instance_types=["r3.large"],
                          availability_zones=["us-east-1a"])
    with pytest.raises(KeyboardInterrupt):
        run_experiment(spec, progress=journal, output=out)
    journal.close()
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert len(events) == len(journal.record.log) > 40 and events[0]["type"] == "ExperimentStarted"
    assert len(pd.read_csv(out / "ledger.csv")) == len(journal.record.ledger)
    assert len(pd.read_csv(out / "trials.csv")) == 16 and not (out / "summary.json").exists()


@pytest.mark.parametrize("every_wall_s", [0.0, 3600.0])
def test_trials_csv_follows_every_state_change_and_the_steps_at_most_once_a_wall_second(tmp_path, monkeypatch,
                                                                                     every_wall_s):
    """``trials.csv`` is rewritten at every change of a trial's state; a change of step counts alone waits for
    ``trials_every_wall_s`` (0: every one is written; an hour: none is, in this replay of a few wall seconds)."""
    from spottune import results
    from spottune.cli._run import run_experiment
    from spottune.experiment import ExperimentSpec

    out = results.prepare_output(tmp_path / "res")
    written, seen = [], []
    write = results._write_atomic

    def counting(path, text):  # a spy: every write still happens
        if path.name == "trials.csv":
            written.append(text)
        return write(path, text)

    monkeypatch.setattr(results, "_write_atomic", counting)

    def look(now_s, orch, usd):
        key = tuple((t, str(tr.state), tr.step) for t, tr in orch.trials.items())
        if not seen or seen[-1] != key:
            seen.append(key)

    journal = results.ResultsJournal(out, progress=look, trials_every_wall_s=every_wall_s)
    spec = ExperimentSpec(max_steps=6, theta=0.5, top_k=2, predictor="none", instance_types=["r3.large"],
                          availability_zones=["us-east-1a"])
    run_experiment(spec, progress=journal, output=out)
    states = [tuple(k[:2] for k in key) for key in seen]
    state_changes = 1 + sum(a != b for a, b in zip(states, states[1:]))
    assert len(seen) > state_changes  # steps moved without a state change: the case throttled
    assert len(written) == (len(seen) if every_wall_s == 0.0 else state_changes)


@pytest.mark.parametrize("every_wall_s", [-1.0, math.nan, math.inf, "1"])
def test_a_results_journal_refuses_a_throttle_that_is_not_a_finite_number_of_seconds(tmp_path, every_wall_s):
    from spottune.errors import ConfigError
    from spottune.results import ResultsJournal

    with pytest.raises(ConfigError, match="trials_every_wall_s is .*, but must be a finite number of wall seconds >= 0"):
        ResultsJournal(tmp_path, trials_every_wall_s=every_wall_s)
