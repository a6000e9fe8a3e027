"""``revpred train|eval|info``: a working round trip, and bad input -> one line on stderr, exit code 2."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from revpred.cli import cli, main
from tests.test_revpred_e2e import small_table


@pytest.fixture(scope="module")
def prices(tmp_path_factory):
    t = small_table()
    raw = t.rename(columns={"timestamp": "datetime"}).assign(os="Linux")
    raw["datetime"] = raw["datetime"].astype(str)
    path = tmp_path_factory.mktemp("prices") / "us-east-1_small.csv"
    raw[["datetime", "instance_type", "os", "region", "availability_zone", "price"]].to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def models(prices, tmp_path_factory):
    out = tmp_path_factory.mktemp("models") / "m"
    res = CliRunner().invoke(cli, ["train", "--prices", str(prices), "--market", "us-east-1a/r3.large",
                                   "--train-start", "2015-05-01T00:00Z", "--train-end", "2015-05-01T14:00Z",
                                   "--out", str(out), "--epochs", "1", "--stride", "15", "--seed", "1"])
    assert res.exit_code == 0, res.output
    return out


def test_train_info_eval(prices, models, tmp_path):
    res = CliRunner().invoke(cli, ["info", str(models)])
    assert res.exit_code == 0 and "us-east-1a/r3.large/Linux/UNIX" in res.output and "revpred:" in res.output
    out = tmp_path / "eval.json"
    res = CliRunner().invoke(cli, ["eval", "--prices", str(prices), "--models", str(models), "--test-start",
                                   "2015-05-01T14:00Z", "--test-end", "2015-05-01T20:00Z", "--json", str(out),
                                   "--stride", "10", "--per-market"])
    assert res.exit_code == 0, res.output
    for name in ("revpred", "revpred_raw", "tributary", "logreg", "empirical", "constant"):
        assert name in res.output
    data = json.loads(out.read_text())
    assert set(data["rules"]) == {"random", "alg2"}
    assert data["rules"]["alg2"]["revpred"]["pooled"]["n"] == 31


def run_main(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["revpred", *args])
    with pytest.raises(SystemExit) as exc:
        main()
    return exc.value.code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "--prices", "/nonexistent.csv", "--market", "us-east-1a/r3.large", "--train-start", "2015-05-01T00:00Z",
          "--train-end", "2015-05-02T00:00Z", "--out", "/tmp/x"], "does not exist"),
        (["train", "--prices", "{prices}", "--market", "us-east-1a/x9.huge", "--train-start", "2015-05-01T00:00Z",
          "--train-end", "2015-05-01T14:00Z", "--out", "{tmp}"], "not in the price data"),
        (["train", "--prices", "{prices}", "--market", "bogus", "--train-start", "2015-05-01T00:00Z",
          "--train-end", "2015-05-01T14:00Z", "--out", "{tmp}"], "AZ/TYPE"),
        (["train", "--prices", "{prices}", "--all-markets", "--market", "us-east-1a/r3.large", "--train-start",
          "2015-05-01T00:00Z", "--train-end", "2015-05-01T14:00Z", "--out", "{tmp}"], "not both"),
        (["train", "--prices", "{prices}", "--market", "us-east-1a/r3.large", "--train-start", "2015-05-01T14:00Z",
          "--train-end", "2015-05-01T00:00Z", "--out", "{tmp}"], "not after"),
        (["train", "--prices", "{prices}", "--market", "us-east-1a/r3.large", "--train-start", "2015-05-01T00:00Z",
          "--train-end", "2015-05-01T14:00Z", "--out", "{tmp}", "--kinds", "revpred,oracle"], "unknown"),
        (["eval", "--prices", "{prices}", "--models", "{models}", "--test-start", "2015-05-01T12:00Z",
          "--test-end", "2015-05-01T20:00Z"], "inside the training window"),
        (["eval", "--prices", "{prices}", "--models", "{tmp}/none", "--test-start", "2015-05-01T14:00Z",
          "--test-end", "2015-05-01T20:00Z"], "does not exist"),
        (["info", "{tmp}"], "revpred.json does not exist"),
        (["train", "--epochs", "0"], "epochs"),
    ],
)
def test_bad_input_exits_2_with_one_line(monkeypatch, capsys, prices, models, tmp_path, args, message):
    args = [a.format(prices=prices, models=models, tmp=tmp_path) for a in args]
    code, err = run_main(monkeypatch, capsys, *args)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
