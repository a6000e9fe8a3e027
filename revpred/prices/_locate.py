"""Find a spot price file, and load it as a :class:`PriceHistory` in one call.

Lookup order (issue 2; ``data/spot_prices/README.md``):

1. an explicit path (``--prices PATH``) that exists, as given (absolute or relative to the CWD);
2. ``data/spot_prices/`` in the project (next to ``revpred/``), then ``./data/spot_prices/``;
3. ``$SPOTTUNE_DATA`` (a directory), if set;
4. ``../shared/data/spot_prices/`` relative to the project root, then relative to the CWD.

A bare file name (``us-east-1_2015.csv.gz``) that does not exist in the CWD is looked up in 2-4 in that
order. A path with a directory part that does not exist is an error (it was explicit). Nothing is
copied anywhere.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from os import PathLike
from pathlib import Path

import revpred
from revpred.errors import PriceDataError
from revpred.prices._history import PriceHistory
from revpred.prices._readers import read_prices

#: The file used when no price file is named: the bidding-era trace (SpotTune's revocation model).
DEFAULT_PRICE_FILE = "us-east-1_2015.csv.gz"
#: Environment variable naming an extra directory of price files.
DATA_ENV = "SPOTTUNE_DATA"


def project_root() -> Path:
    """The directory that holds the ``revpred`` package (the repository root in a source checkout)."""
    return Path(revpred.__file__).resolve().parents[1]


def price_dirs() -> list[Path]:
    """Directories searched for a bare price file name, in order (duplicates removed).

    Returns
    -------
    list of pathlib.Path
        Project ``data/spot_prices``, ``./data/spot_prices``, ``$SPOTTUNE_DATA`` (if set), then
        ``../shared/data/spot_prices`` relative to the project root and to the CWD. They need not exist.
    """
    cwd = Path.cwd()
    dirs = [project_root() / "data" / "spot_prices", cwd / "data" / "spot_prices"]
    env = os.environ.get(DATA_ENV)
    if env:
        dirs.append(Path(env).expanduser())
    dirs += [project_root().parent / "shared" / "data" / "spot_prices", cwd.parent / "shared" / "data" / "spot_prices"]
    seen: set[Path] = set()
    unique = []
    for d in dirs:
        key = d.resolve() if d.exists() else d.absolute()
        if key not in seen:
            seen.add(key)
            unique.append(d)
    return unique


def locate_prices(path_or_name: str | PathLike[str] | None = None) -> Path:
    """Resolve a price file by the lookup order of this module.

    Parameters
    ----------
    path_or_name : str, path-like or None
        An explicit path, or a bare file name to look up; ``None`` means ``DEFAULT_PRICE_FILE``.

    Returns
    -------
    pathlib.Path
        An existing file.

    Raises
    ------
    PriceDataError
        If nothing is found; the message lists every place that was tried.
    """
    given = Path(path_or_name) if path_or_name is not None else Path(DEFAULT_PRICE_FILE)
    expanded = given.expanduser()
    if expanded.is_file():
        return expanded
    if expanded.exists():
        raise PriceDataError(f"price file {str(given)!r} is a directory, not a file")
    bare = path_or_name is None or (len(given.parts) == 1 and not given.is_absolute())
    if not bare:
        raise PriceDataError(f"price file {str(given)!r} does not exist")
    tried = [expanded.absolute()]
    for d in price_dirs():
        candidate = d / given.name
        if candidate.is_file():
            return candidate
        tried.append(candidate)
    env_note = "" if os.environ.get(DATA_ENV) else f" (${DATA_ENV} is not set)"
    raise PriceDataError(
        f"price file {given.name!r} not found; looked in: " + ", ".join(str(t) for t in tried) + env_note
        + ". Pass --prices PATH or put the file in data/spot_prices/ (see data/spot_prices/README.md)"
    )


def load_history(path_or_name: str | PathLike[str] | None = None, *,
                 product_description: str | Sequence[str] | None = None, end: object | None = None) -> PriceHistory:
    """Locate, read and index a price file in one call.

    Parameters
    ----------
    path_or_name : str, path-like or None
        As :func:`locate_prices`.
    product_description : str, sequence of str or None
        As :func:`read_prices`.
    end : timestamp or float seconds, optional
        End of the recorded history, as :class:`PriceHistory`; default: the last record in the file.

    Returns
    -------
    PriceHistory
        Its ``table.attrs["load_report"]`` says what was read and dropped.

    Raises
    ------
    PriceDataError
        If the file is not found or is not valid price data.
    """
    table = read_prices(locate_prices(path_or_name), product_description=product_description)
    return PriceHistory(table, end=end)
