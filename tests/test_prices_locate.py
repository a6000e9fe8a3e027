"""Finding a data file: explicit path, $SPOTTUNE_DATA, the project's data/, a wheel's share/spottune/data/."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from spotmarket import data
from spotmarket.errors import DataNotFoundError, PriceDataError
from spotmarket.prices import load_history, load_report, locate_prices, price_dirs

KAGGLE = "2017-04-26 00:00:10+00:00,r4.large,Linux/UNIX,us-east-1a,0.0321\n"


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A fake project root, $SPOTTUNE_DATA (laid out like data/, and flat) and sys.prefix; the CWD is elsewhere."""
    project = tmp_path / "work" / "main"
    prefix = tmp_path / "venv"
    d = {
        "wheel": prefix / "share" / "spottune" / "data" / "spot_prices",
        "project": project / "data" / "spot_prices",
        "env_flat": tmp_path / "env",
        "env": tmp_path / "env" / "spot_prices",
        "cwd": tmp_path / "elsewhere" / "cwd",
    }
    for p in d.values():
        p.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(data, "project_root", lambda: project)
    monkeypatch.setattr(sys, "prefix", str(prefix))
    monkeypatch.setenv("SPOTTUNE_DATA", str(d["env_flat"]))
    monkeypatch.chdir(d["cwd"])
    return d


def test_lookup_order(dirs: dict[str, Path]) -> None:
    for key in ("wheel", "project", "env_flat", "env"):  # add from the back: each new one must win
        (dirs[key] / "p.csv").write_text(KAGGLE)
        assert locate_prices("p.csv") == dirs[key] / "p.csv"
    (dirs["cwd"] / "p.csv").write_text(KAGGLE)  # an existing path as given beats everything
    assert locate_prices("p.csv") == Path("p.csv")
    explicit = dirs["project"] / "p.csv"
    assert locate_prices(str(explicit)) == explicit


def test_default_name_and_nothing_else_searched(dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPOTTUNE_DATA")
    assert price_dirs() == [dirs["project"], dirs["wheel"]]  # nothing beside the project, nothing in the CWD
    (dirs["project"] / "us-east-1_2015.csv.gz").write_bytes(__import__("gzip").compress(KAGGLE.encode()))
    history = load_history()
    assert len(history) == 1 and load_report(history.table).records_read == 1


def test_not_found_lists_every_place(dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(PriceDataError) as err:
        locate_prices("nope.csv.gz")
    msg = str(err.value)
    for key in ("project", "env", "env_flat", "wheel"):
        assert str(dirs[key] / "nope.csv.gz") in msg
    monkeypatch.delenv("SPOTTUNE_DATA")
    with pytest.raises(PriceDataError, match=r"\$SPOTTUNE_DATA is not set"):
        locate_prices("nope.csv.gz")


def test_explicit_path_is_not_searched(dirs: dict[str, Path]) -> None:
    (dirs["project"] / "p.csv").write_text(KAGGLE)
    with pytest.raises(PriceDataError, match=r"'sub/p.csv' does not exist"):
        locate_prices("sub/p.csv")
    with pytest.raises(PriceDataError, match="is a directory"):
        locate_prices(str(dirs["env"]))
    with pytest.raises(PriceDataError, match="not a regular file"):
        locate_prices("/dev/null")


def test_data_dir_finds_a_whole_tree(dirs: dict[str, Path]) -> None:
    with pytest.raises(DataNotFoundError):
        data.data_dir("learning_curves")
    (dirs["project"].parent / "learning_curves").mkdir()
    (dirs["project"].parent / "learning_curves" / "x.csv").write_text("a\n")
    assert data.data_dir("learning_curves") == dirs["project"].parent / "learning_curves"
    with pytest.raises(ValueError, match="data kind"):
        data.data_dirs("nope")


def test_the_project_ships_its_data() -> None:
    """A bare clone runs: every file the defaults, tests and evaluation read is in the project's data/."""
    root = Path(__file__).resolve().parents[1] / "data"
    for rel in ("spot_prices/us-east-1_2015.csv.gz", "spot_prices/eu-west-1_2021-08.csv.gz",
                "spot_prices/on_demand_us-east-1_2015.csv", "spot_prices/on_demand_2017_noahgift.csv",
                "learning_curves/opda_alexnet_imagenet_tuning.jsonl.gz",
                "learning_curves/opda_convnext-tiny_imagenet_tuning.jsonl.gz",
                "learning_curves/cakelab_resnet32_cifar10_curves.csv.gz",
                "interruption_traces/skypilot/periods.csv.gz", "interruption_traces/skypilot/summary_per_trace.csv"):
        assert (root / rel).is_file(), rel
    for kind in data.KINDS:
        assert (root / kind / "README.md").is_file()
