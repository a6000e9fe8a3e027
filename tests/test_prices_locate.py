"""Finding a price file: explicit path, project data/spot_prices/, $SPOTTUNE_DATA, ../shared/data/spot_prices/."""

from __future__ import annotations

from pathlib import Path

import pytest

from revpred.errors import PriceDataError
from revpred.prices import _locate, load_history, load_report, locate_prices, price_dirs

KAGGLE = "2017-04-26 00:00:10+00:00,r4.large,Linux/UNIX,us-east-1a,0.0321\n"


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A fake project root and shared directory; the CWD is somewhere else."""
    project = tmp_path / "work" / "main"
    d = {
        "project": project / "data" / "spot_prices",
        "env": tmp_path / "env_prices",
        "shared": tmp_path / "work" / "shared" / "data" / "spot_prices",
        "cwd": tmp_path / "elsewhere" / "cwd",
    }
    for p in d.values():
        p.mkdir(parents=True)
    monkeypatch.setattr(_locate, "project_root", lambda: project)
    monkeypatch.setenv("SPOTTUNE_DATA", str(d["env"]))
    monkeypatch.chdir(d["cwd"])
    return d


def test_lookup_order(dirs: dict[str, Path]) -> None:
    for key in ("shared", "env", "project"):  # add from the back: each new one must win
        (dirs[key] / "p.csv").write_text(KAGGLE)
        assert locate_prices("p.csv") == dirs[key] / "p.csv"
    (dirs["cwd"] / "p.csv").write_text(KAGGLE)  # an existing path as given beats everything
    assert locate_prices("p.csv") == Path("p.csv")
    explicit = dirs["env"] / "p.csv"
    assert locate_prices(str(explicit)) == explicit


def test_shared_relative_to_cwd_and_default_name(dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPOTTUNE_DATA")
    side = dirs["cwd"].parent / "shared" / "data" / "spot_prices"
    side.mkdir(parents=True)
    (side / _locate.DEFAULT_PRICE_FILE).write_text(KAGGLE)
    assert locate_prices() == side / _locate.DEFAULT_PRICE_FILE
    assert price_dirs()[-1] == side
    history = load_history()
    assert len(history) == 1 and load_report(history.table).records_read == 1


def test_not_found_lists_every_place(dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(PriceDataError) as err:
        locate_prices("nope.csv.gz")
    msg = str(err.value)
    for key in ("project", "env", "shared", "cwd"):
        assert str(dirs[key] / "nope.csv.gz") in msg
    assert "--prices PATH" in msg
    monkeypatch.delenv("SPOTTUNE_DATA")
    with pytest.raises(PriceDataError, match=r"\$SPOTTUNE_DATA is not set"):
        locate_prices("nope.csv.gz")


def test_explicit_path_is_not_searched(dirs: dict[str, Path]) -> None:
    (dirs["shared"] / "p.csv").write_text(KAGGLE)
    with pytest.raises(PriceDataError, match=r"'sub/p.csv' does not exist"):
        locate_prices("sub/p.csv")
    with pytest.raises(PriceDataError, match="is a directory"):
        locate_prices(str(dirs["env"]))


def test_real_project_finds_the_shared_traces() -> None:
    path = locate_prices("us-east-1_2015.csv.gz")
    assert path.is_file() and path.parent.name == "spot_prices"
