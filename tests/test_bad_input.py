"""Bad input on every command line: exit code 2, exactly one line on stderr, no traceback.

Each case writes its bad input into ``tmp_path`` and runs the real CLI in process (the console-script
``main`` functions, through ``revpred.cli_runner.run_click``); a few run the installed console script
as a subprocess to prove the real entry point prints no traceback either. The fuzz tests feed
arbitrary spec YAML and price CSV bytes to ``spottune run --config`` and ``spottune prices info``.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

BIN = Path(sys.executable).parent

# -- small valid inputs ---------------------------------------------------------------------------------
PRICES_CSV = (
    "timestamp,region,availability_zone,instance_type,product_description,price\n"
    "2015-05-01T00:00:00Z,us-east-1,us-east-1a,r3.large,Linux/UNIX,0.02\n"
    "2015-05-01T06:00:00Z,us-east-1,us-east-1a,r3.large,Linux/UNIX,0.03\n"
    "2015-05-02T00:00:00Z,us-east-1,us-east-1a,r3.large,Linux/UNIX,0.02\n"
)
LONG_CURVES = "config_id,step,value,max_steps\n" + "".join(
    f"c{c},{s},{1.0 / (s + c + 1):.5f},10\n" for c in range(6) for s in range(1, 11))
OPDA_LINE = {"iteration": 0, "epochs": 3, "nan_train_loss": False,
             "learning_curve": [{"epoch": e, "top_1": 0.3 + 0.1 * e} for e in range(3)]}

FAILING_WORKLOAD = '''
from spottune.trainable import Trainable
from spottune.workloads import Workload


class Boom(Trainable):
    reference_seconds_per_step = 60.0

    def setup(self, config):
        self.x = config["x"]

    def step(self):
        raise RuntimeError("boom")

    def save_checkpoint(self, checkpoint_dir):
        pass

    def load_checkpoint(self, checkpoint_dir):
        pass


WORKLOAD = Workload(name="boom", trainable=Boom, metric="loss", mode="min", max_steps=4,
                    search_space={"x": {"grid_search": [1, 2]}})
'''


def _write(path: Path, data: str | bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return str(path)


def _module(tmp: Path, source: str) -> str:
    """A fresh importable module in ``tmp`` (already on sys.path); returns its name."""
    name = f"badinput_{uuid.uuid4().hex[:8]}"
    _write(tmp / f"{name}.py", source)
    return name


def _spec(tmp: Path, text: str | bytes) -> str:
    return _write(tmp / "spec.yaml", text)


def _results(tmp: Path, trials: str) -> str:
    d = tmp / "res"
    for name in ("ledger.csv", "curves.csv"):
        _write(d / name, "a,b\n")
    _write(d / "summary.json", "{}")
    _write(d / "trials.csv", trials)
    return str(d)


_TRIALS_HEADER = ("trial_id,state,steps,metric,metric_kind,predicted,predicted_low,predicted_high,selected,rank,usd,"
                  "refunded_usd,revocations,hops,failures,lost_steps,instances,markets_used,config")
RUN = ["run", "--no-progress", "--predictor", "none", "--instance-types", "r3.large", "--zones", "us-east-1a"]
_FAST = ["--max-steps", "4", "--theta", "1", "--top-k", "1"]

# (id, program, argv builder (tmp -> list of str), words expected in the one line)
CASES = [
    # -- price files --------------------------------------------------------------------------------------
    ("prices-corrupt-gz", "spottune", lambda t: ["prices", "info", _write(t / "p.csv.gz", b"\x1f\x8b\x08\x00garbage!")],
     "damaged"),
    ("prices-truncated-gz", "spottune",
     lambda t: ["prices", "info", _write(t / "p.csv.gz", gzip.compress(PRICES_CSV.encode() * 50)[:60])], "damaged"),
    ("prices-dev-null", "spottune", lambda t: ["prices", "info", "/dev/null"], "not a regular file"),
    ("prices-empty-file", "spottune", lambda t: ["prices", "info", _write(t / "p.csv", "")], "empty"),
    ("prices-missing-file", "spottune", lambda t: ["prices", "info", str(t / "nope.csv")], "nope.csv"),
    ("prices-directory", "spottune", lambda t: ["prices", "info", str(t)], "directory"),
    ("prices-unknown-layout", "spottune", lambda t: ["prices", "info", _write(t / "p.csv", "hello\nworld\n")],
     "layout"),
    ("prices-1e300", "spottune", lambda t: ["prices", "info", _write(t / "p.csv", PRICES_CSV.replace("0.03", "1e300"))],
     "1e+300"),
    ("prices-negative", "spottune", lambda t: ["prices", "info", _write(t / "p.csv", PRICES_CSV.replace("0.03", "-1"))],
     "line 3"),
    ("prices-bad-time", "spottune",
     lambda t: ["prices", "info", _write(t / "p.csv", PRICES_CSV.replace("2015-05-01T06:00:00Z", "yesterday"))],
     "yesterday"),
    ("prices-not-utf8", "spottune", lambda t: ["prices", "info", _write(t / "p.csv", b"\xff\xfe\x00bad\x80\x81\n")],
     "p.csv"),
    ("run-prices-corrupt-gz", "spottune",
     lambda t: [*RUN, "--prices", _write(t / "p.csv.gz", b"\x1f\x8b\x08\x00garbage!"), "--output", str(t / "o")],
     "damaged"),
    ("run-prices-1e300", "spottune",
     lambda t: [*RUN, "--prices", _write(t / "p.csv", PRICES_CSV.replace("0.03", "1e300")), "--output", str(t / "o")],
     "1e+300"),
    ("simulate-prices-corrupt-gz", "spottune",
     lambda t: ["simulate", "--no-progress", "--starts", "1", "--prices",
                _write(t / "p.csv.gz", b"\x1f\x8b\x08\x00garbage!"), "--output", str(t / "o")], "damaged"),
    ("fetch-bad-region", "spottune",
     lambda t: ["prices", "fetch", "--region", "no such region!", "--instance-types", "r4.large", "--days", "1",
                "--out", str(t / "x.csv")], "no such region!"),
    ("fetch-days-0", "spottune",
     lambda t: ["prices", "fetch", "--region", "us-east-1", "--instance-types", "r4.large", "--days", "0",
                "--out", str(t / "x.csv")], "days"),
    # -- experiment specs ---------------------------------------------------------------------------------
    ("spec-not-utf8", "spottune", lambda t: ["run", "--config", _spec(t, b"theta: 0.5\nname: \xff\xfe\n")], "UTF-8"),
    ("spec-not-yaml", "spottune", lambda t: ["run", "--config", _spec(t, "theta: [0.5\n")], "YAML"),
    ("spec-a-list", "spottune", lambda t: ["run", "--config", _spec(t, "- theta\n- 0.5\n")], "mapping"),
    ("spec-unknown-key", "spottune", lambda t: ["run", "--config", _spec(t, "tehta: 0.5\n")], "tehta"),
    ("spec-gaussian", "spottune",
     lambda t: ["run", "--config", _spec(t, "search_space:\n  lr: {gaussian: [0, 1]}\n")], "gaussian"),
    ("spec-train-days-1e9", "spottune", lambda t: ["run", "--config", _spec(t, "train_days: 1e9\n")], "train_days"),
    ("spec-max-steps-1e30", "spottune", lambda t: ["run", "--config", _spec(t, "max_steps: 1e30\n")], "max_steps"),
    ("spec-max-steps-huge-int", "spottune",
     lambda t: ["run", "--config", _spec(t, "max_steps: 1000000000000\n")], "max_steps"),
    ("spec-empty-search-space", "spottune",
     lambda t: ["run", "--config", _spec(t, "search_space: {}\nnum_samples: 3\n")], "empty"),
    ("spec-identical-trials", "spottune",
     lambda t: ["run", "--config", _spec(t, "search_space: {lr: 0.1}\nnum_samples: 4\n")], "same configuration"),
    ("spec-storage-gopher", "spottune", lambda t: [*RUN, "--storage-path", "gopher://x/y"], "gopher"),
    ("spec-start-not-a-time", "spottune", lambda t: [*RUN, "--start", "next tuesday"], "next tuesday"),
    ("spec-theta-nan", "spottune", lambda t: ["run", "--config", _spec(t, "theta: .nan\n")], "theta"),
    ("spec-seed-negative", "spottune", lambda t: [*RUN, "--seed", "-1"], "seed"),
    ("workload-raises-on-import", "spottune",
     lambda t: [*RUN, "--workload", _module(t, "raise RuntimeError('no GPU here')\n") + ":X"], "no GPU here"),
    ("workload-missing-module", "spottune", lambda t: [*RUN, "--workload", "no_such_module_xyz:X"],
     "no_such_module_xyz"),
    ("workload-syntax-error", "spottune", lambda t: [*RUN, "--workload", _module(t, "def (:\n") + ":X"], "SyntaxError"),
    # -- output folder ------------------------------------------------------------------------------------
    ("output-proc", "spottune", lambda t: [*RUN, "--output", "/proc/1/nope"], "/proc/1/nope"),
    ("output-under-a-file", "spottune", lambda t: [*RUN, "--output", _write(t / "small.csv", "x\n") + "/out"],
     "small.csv"),
    ("output-is-a-file", "spottune", lambda t: [*RUN, "--output", _write(t / "small.csv", "x\n")], "small.csv"),
    ("every-trial-failed", "spottune",
     lambda t: [*RUN, *_FAST, "--workload", _module(t, FAILING_WORKLOAD) + ":WORKLOAD", "--output", str(t / "o")],
     "no trial finished"),
    ("every-trial-failed-in-setup", "spottune",
     lambda t: [*RUN, *_FAST, "--workload", _module(t, FAILING_WORKLOAD.replace(
         'self.x = config["x"]', 'raise ValueError("bad config")')) + ":WORKLOAD", "--output", str(t / "o")],
     "setup raised ValueError: bad config"),
    ("every-trial-failed-no-retries", "spottune",
     lambda t: [*RUN, *_FAST, "--max-failures", "0", "--workload", _module(t, FAILING_WORKLOAD) + ":WORKLOAD",
                "--output", str(t / "o")], "results so far are in"),
    # -- learning curves ----------------------------------------------------------------------------------
    ("curves-corrupt-cakelab-gz", "spottune",
     lambda t: ["curves", "eval", _write(t / "cakelab_resnet32_cifar10_curves.csv.gz", b"\x1f\x8b\x08\x00junk")],
     "damaged"),
    ("curves-renamed-column", "spottune",
     lambda t: ["curves", "eval", _write(t / "c.csv", LONG_CURVES.replace("value", "val_loss_x"))], "c.csv"),
    ("curves-bad-opda-jsonl", "spottune",
     lambda t: ["curves", "eval", _write(t / "o.jsonl", json.dumps({"iteration": 0, "epochs": 3}) + "\n")],
     "learning_curve"),
    ("curves-opda-point-without-top1", "spottune",
     lambda t: ["curves", "eval", _write(t / "o.jsonl", json.dumps(
         {**OPDA_LINE, "learning_curve": [{"epoch": 0}, {"epoch": 1}, {"epoch": 2}]}) + "\n")], "top_1"),
    ("curves-opda-gz-truncated", "spottune",
     lambda t: ["curves", "eval",
                _write(t / "o.jsonl.gz", gzip.compress((json.dumps(OPDA_LINE) + "\n").encode() * 9)[:40])],
     "damaged"),
    ("curves-opda-not-json", "spottune",
     lambda t: ["curves", "eval", _write(t / "o.jsonl", '{"iteration": 0, "epochs": 3\n')], "line 1"),
    ("curves-fewer-than-top-k", "spottune",
     lambda t: ["curves", "eval", _write(t / "c.csv", LONG_CURVES), "--top-k", "6"], "top-k"),
    ("curves-truncated-csv", "spottune",
     lambda t: ["curves", "eval", _write(t / "c.csv", LONG_CURVES[: LONG_CURVES.index("c1,5,") + 4])], "line"),
    ("curves-not-a-curve-file", "spottune", lambda t: ["curves", "eval", _write(t / "c.txt", "hello world\n")],
     "c.txt"),
    ("curves-empty-file", "spottune", lambda t: ["curves", "eval", _write(t / "c.csv", "")], "empty"),
    ("curves-empty-dir", "spottune", lambda t: ["curves", "eval", str(t)], "curve"),
    ("curves-top-k-0", "spottune", lambda t: ["curves", "eval", _write(t / "c.csv", LONG_CURVES), "--top-k", "0"],
     "top_k"),
    # -- results folders ----------------------------------------------------------------------------------
    ("report-truncated-trials", "spottune",
     lambda t: ["report", "--no-plots", _results(t, "trial_id,state,steps,metric\nt00,finished,4,0.")], "trials.csv"),
    ("report-empty-trials", "spottune", lambda t: ["report", "--no-plots", _results(t, "")], "trials.csv"),
    ("report-trials-cut-mid-row", "spottune",
     lambda t: ["report", "--no-plots", _results(t, _TRIALS_HEADER + "\nt00,finished,12,0.31,final,0.3")],
     "truncated"),
    ("report-not-results", "spottune", lambda t: ["report", str(t)], "not a spottune results folder"),
    # -- simulate -----------------------------------------------------------------------------------------
    ("simulate-max-steps-0", "spottune",
     lambda t: ["simulate", "--no-progress", "--starts", "1", "--max-steps", "0", "--output", str(t / "o")],
     "max-steps"),
    ("simulate-max-steps-negative", "spottune",
     lambda t: ["simulate", "--no-progress", "--starts", "1", "--max-steps", "-5", "--output", str(t / "o")],
     "max-steps"),
    ("simulate-unknown-workload", "spottune",
     lambda t: ["simulate", "--no-progress", "--workload", "nope", "--output", str(t / "o")], "nope"),
    ("simulate-time-value-negative", "spottune",
     lambda t: ["simulate", "--no-progress", "--time-value-usd-per-hour", "-0.5", "--output", str(t / "o")],
     "time-value-usd-per-hour"),
    ("run-time-value-nan", "spottune", lambda t: [*RUN, "--time-value-usd-per-hour", "nan"], "time_value_usd_per_hour"),
    ("simulate-job-time-value-negative", "spottune",
     lambda t: ["simulate", "--no-progress", "--job-time-value-usd-per-hour", "-1", "--output", str(t / "o")],
     "job-time-value-usd-per-hour is -1.0, but must be a finite number"),
    ("run-job-time-value-inf", "spottune", lambda t: [*RUN, "--job-time-value-usd-per-hour", "inf"],
     "job_time_value_usd_per_hour is inf, but must be a finite number"),
    ("simulate-max-concurrent-trials-0", "spottune",
     lambda t: ["simulate", "--no-progress", "--max-concurrent-trials", "0", "--output", str(t / "o")],
     "max-concurrent-trials"),
    ("simulate-max-concurrent-trials-seer", "spottune",
     lambda t: ["simulate", "--no-progress", "--policies", "seer", "--deadline", "6h", "--budget-usd", "40",
                "--max-concurrent-trials", "2", "--output", str(t / "o")], "max_concurrent_trials"),
    ("run-max-concurrent-trials-0", "spottune", lambda t: [*RUN, "--max-concurrent-trials", "0"],
     "max_concurrent_trials is 0, but must be an integer >= 1"),
    ("run-max-concurrent-trials-gp-ucb", "spottune",
     lambda t: [*RUN, "--search", "gp-ucb", "--trial-budget", "2", "--max-concurrent-trials", "2"], "gp-ucb"),
    ("simulate-jobs-0", "spottune",
     lambda t: ["simulate", "--no-progress", "--jobs", "0", "--output", str(t / "o")], "jobs"),
    ("simulate-seer-without-budget", "spottune",
     lambda t: ["simulate", "--no-progress", "--policies", "seer", "--deadline", "6h", "--output", str(t / "o")],
     "--budget-usd"),
    ("run-deadline-mode-unknown", "spottune",
     lambda t: ["run", "--no-progress", "--deadline", "6h", "--budget-usd", "40", "--deadline-mode", "fast",
                "--output", str(t / "o")], "deadline_mode"),
    ("run-plan-on-local", "spottune",
     lambda t: ["run", "--no-progress", "--deadline", "6h", "--budget-usd", "40", "--backend", "local",
                "--output", str(t / "o")], "--deadline-mode guard"),
    ("simulate-deadline-zero", "spottune",
     lambda t: ["simulate", "--no-progress", "--deadline", "0h", "--output", str(t / "o")], "deadline"),
    ("simulate-budget-negative", "spottune",
     lambda t: ["simulate", "--no-progress", "--budget-usd", "-1", "--output", str(t / "o")], "budget"),
    ("simulate-unknown-type", "spottune",
     lambda t: ["simulate", "--no-progress", "--starts", "1", "--instance-types", "zz.large",
                "--output", str(t / "o")], "zz.large"),
    # -- stopper hparams (docs/design/earlycurve.md §8.19) ------------------------------------------------------------
    ("run-hparams-without-previous-runs", "spottune", lambda t: ["run", "--stopper", "hparams", "--output", str(t / "o")],
     "previous runs with their hyperparameters"),
    ("simulate-hparams-without-previous-runs", "spottune",
     lambda t: ["simulate", "--workload", "cakelab-resnet32", "--policies", "spottune-0.2", "--stopper", "hparams",
                "--output", str(t / "o")], "has none"),
]

REVPRED_CASES = [
    ("revpred-index-a-list", lambda m, t: ["info", _models(m, t, index=[1, 2])], "revpred.json"),
    ("revpred-eval-index-a-list",
     lambda m, t: ["eval", "--models", _models(m, t, index=[1, 2]), "--test-start", "2015-05-01T14:00Z",
                   "--test-end", "2015-05-01T20:00Z"], "revpred.json"),
    ("revpred-info-no-models", lambda m, t: ["info", _models(m, t, meta={"models": []})], "models"),
    ("revpred-eval-no-models",
     lambda m, t: ["eval", "--models", _models(m, t, meta={"models": []}), "--test-start", "2015-05-01T14:00Z",
                   "--test-end", "2015-05-01T20:00Z"], "models"),
    ("revpred-info-bad-config", lambda m, t: ["info", _models(m, t, config={"epochs": "many"})], "epochs"),
    ("revpred-info-config-missing-keys", lambda m, t: ["info", _models(m, t, meta={"config": {"epochs": 3}})],
     "stride_min"),
    ("revpred-info-config-a-list", lambda m, t: ["info", _models(m, t, meta={"config": [1]})], "config"),
    ("revpred-info-unknown-config-key", lambda m, t: ["info", _models(m, t, config={"epoks": 3})],
     "epoks"),
    ("revpred-info-meta-not-json", lambda m, t: ["info", _models(m, t, meta_text="{")], "meta.json"),
    ("revpred-eval-pickle-weights",
     lambda m, t: ["eval", "--models", _models(m, t, pt=b"\x80\x04cos\nsystem\n."), "--test-start",
                   "2015-05-01T14:00Z", "--test-end", "2015-05-01T20:00Z"], "revpred.pt"),
    ("revpred-train-bad-time", lambda m, t: ["train", "--market", "us-east-1a/r3.large", "--train-start", "soon",
                                             "--train-end", "2015-05-02", "--out", str(t / "m")], "soon"),
]


def _models(models: Path, tmp: Path, *, index=None, meta=None, config=None, meta_text=None, pt=None) -> str:
    """A copy of a trained model folder with one file made bad."""
    d = tmp / "models"
    shutil.copytree(models, d)
    sub = next(p for p in d.iterdir() if p.is_dir())
    if index is not None:
        (d / "revpred.json").write_text(json.dumps(index))
    if meta is not None or config is not None:
        m = json.loads((sub / "meta.json").read_text())
        m.update(meta or {})
        if config is not None:
            m["config"].update(config)
        (sub / "meta.json").write_text(json.dumps(m))
    if meta_text is not None:
        (sub / "meta.json").write_text(meta_text)
    if pt is not None:
        (sub / "revpred.pt").write_bytes(pt)
    return str(d)


def _run_main(program: str, argv: list[str], monkeypatch, capsys) -> tuple[int, str]:
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
    return (0 if code is None else code), capsys.readouterr().err


def _assert_one_line(code: int, err: str, words: str) -> None:
    lines = err.strip().splitlines()
    assert "Traceback" not in err, err
    assert code == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    assert words in lines[0], err


@pytest.fixture
def tmp(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_at_least_45_cases():
    assert len(CASES) + len(REVPRED_CASES) >= 45


@pytest.mark.parametrize(("program", "build", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2(program, build, words, tmp, monkeypatch, capsys):
    code, err = _run_main(program, build(tmp), monkeypatch, capsys)
    _assert_one_line(code, err, words)


@pytest.fixture(scope="module")
def trained_models(tmp_path_factory):
    from click.testing import CliRunner

    from revpred.cli import cli
    from tests.test_revpred_cli import small_table

    t = small_table()
    raw = t.rename(columns={"timestamp": "datetime"}).assign(os="Linux")
    raw["datetime"] = raw["datetime"].astype(str)
    root = tmp_path_factory.mktemp("badinput-models")
    prices = root / "prices.csv"
    raw[["datetime", "instance_type", "os", "region", "availability_zone", "price"]].to_csv(prices, index=False)
    out = root / "m"
    res = CliRunner().invoke(cli, ["train", "--prices", str(prices), "--market", "us-east-1a/r3.large",
                                   "--train-start", "2015-05-01T00:00Z", "--train-end", "2015-05-01T14:00Z",
                                   "--out", str(out), "--epochs", "1", "--stride", "15", "--seed", "1",
                                   "--kinds", "revpred,constant"])
    assert res.exit_code == 0, res.output
    return prices, out


@pytest.mark.parametrize(("build", "words"), [c[1:] for c in REVPRED_CASES], ids=[c[0] for c in REVPRED_CASES])
def test_revpred_bad_input_is_one_line_exit_2(build, words, trained_models, tmp, monkeypatch, capsys):
    prices, models = trained_models
    argv = build(models, tmp)
    if argv[0] in ("eval", "train"):
        argv = [argv[0], "--prices", str(prices), *argv[1:]]
    code, err = _run_main("revpred", argv, monkeypatch, capsys)
    _assert_one_line(code, err, words)


# -- the real console scripts -------------------------------------------------------------------------------
@pytest.mark.parametrize(("program", "argv", "words"), [
    ("spottune", ["prices", "info", "/dev/null"], "not a regular file"),
    ("spottune", ["run", "--config", "{tmp}/spec.yaml"], "UTF-8"),
    ("spottune", ["curves", "eval", "{tmp}/p.csv.gz"], "damaged"),
    ("revpred", ["info", "{tmp}"], "revpred.json"),
    ("revpred", ["eval", "--prices", "{prices}", "--models", "{models}", "--test-start", "2015-05-01T14:00Z",
                 "--test-end", "2015-05-01T20:00Z"], "revpred.pt"),
])
def test_console_scripts_print_one_line(program, argv, words, tmp_path, trained_models):
    (tmp_path / "spec.yaml").write_bytes(b"theta: \xff\n")
    (tmp_path / "p.csv.gz").write_bytes(b"\x1f\x8b\x08\x00garbage!")
    prices, models = trained_models
    bad = _models(models, tmp_path, pt=b"\x80\x04cos\nsystem\n.")  # a pickle torch's weights_only refuses
    args = [a.replace("{tmp}", str(tmp_path)).replace("{prices}", str(prices)).replace("{models}", bad)
            for a in argv]
    env = dict(os.environ, PYTHONWARNINGS="default")
    proc = subprocess.run([str(BIN / program), *args], capture_output=True, text=True, timeout=120, env=env,
                          cwd=tmp_path)
    _assert_one_line(proc.returncode, proc.stderr, words)


# -- fuzz ---------------------------------------------------------------------------------------------------
_YAML_KEYS = ["theta", "top_k", "max_steps", "num_samples", "search_space", "train_days", "seed", "start",
              "workload", "instance_types", "prices", "storage_path", "backend", "billing", "boot_s", "tehta"]
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                     st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12))
_values = st.one_of(_scalars, st.lists(_scalars, max_size=3),
                    st.dictionaries(st.text(max_size=8), st.one_of(_scalars, st.lists(_scalars, max_size=3)),
                                    max_size=3))


@st.composite
def _mutated(draw, base: bytes) -> bytes:
    data = bytearray(base)
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["flip", "cut", "insert"]))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[pos] = draw(st.integers(0, 255))
        elif op == "cut":
            del data[pos:pos + draw(st.integers(1, 40))]
        else:
            data[pos:pos] = draw(st.binary(max_size=8))
    return bytes(data)


@st.composite
def _spec_bytes(draw) -> bytes:
    import yaml

    doc = draw(st.dictionaries(st.sampled_from(_YAML_KEYS), _values, max_size=4))
    try:
        text = yaml.safe_dump(doc).encode()
    except Exception:  # noqa: BLE001 - a value yaml cannot dump: fall back to raw bytes
        text = b""
    return draw(st.one_of(st.just(text), _mutated(text), st.binary(max_size=64)))


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=_spec_bytes())
def test_fuzz_spec_yaml(data, tmp_path_factory, monkeypatch, capsys):
    tmp = tmp_path_factory.mktemp("fuzz-spec")
    spec = _write(tmp / "spec.yaml", data)
    blocker = _write(tmp / "blocker", "a file, so the run stops at the output check\n")
    code, err = _run_main("spottune", ["run", "--no-progress", "--config", spec, "--output", blocker],
                          monkeypatch, capsys)
    assert "Traceback" not in err
    assert code == 2 and len(err.strip().splitlines()) == 1, err


@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.one_of(_mutated(PRICES_CSV.encode()), _mutated(gzip.compress(PRICES_CSV.encode(), mtime=0)),
                      st.binary(max_size=80)))
def test_fuzz_price_bytes(data, tmp_path_factory, monkeypatch, capsys):
    path = _write(tmp_path_factory.mktemp("fuzz-prices") / "p.csv", data)
    code, err = _run_main("spottune", ["prices", "info", path], monkeypatch, capsys)
    assert "Traceback" not in err
    assert code in (0, 2)
    if code == 2:
        assert len(err.strip().splitlines()) == 1, err


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.one_of(_mutated(LONG_CURVES.encode()), _mutated((json.dumps(OPDA_LINE) + "\n").encode() * 5),
                      _mutated(gzip.compress(LONG_CURVES.encode(), mtime=0)), st.binary(max_size=80)))
def test_fuzz_curve_bytes(data, tmp_path_factory, monkeypatch, capsys):
    path = _write(tmp_path_factory.mktemp("fuzz-curves") / "c.csv", data)
    code, err = _run_main("spottune", ["curves", "eval", path, "--studies", "1", "--study-size", "4", "--no-sweep",
                                       "--top-k", "1"], monkeypatch, capsys)
    assert "Traceback" not in err
    assert code in (0, 2)
    if code == 2:
        assert len(err.strip().splitlines()) == 1, err


def test_cleanup_of_an_empty_experiment_name_is_refused_before_any_aws_call(monkeypatch, capsys):
    code, err = _run_main("spottune", ["cleanup", " "], monkeypatch, capsys)
    _assert_one_line(code, err, "EXPERIMENT is empty")
