"""Find a spot price file, and load it as a :class:`PriceHistory` in one call.

Lookup order: :mod:`spotmarket.data` (an explicit path; ``$SPOTTUNE_DATA``; the project's
``data/spot_prices/``; a wheel's ``share/spottune/data/spot_prices/``). Nothing is copied anywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from os import PathLike
from pathlib import Path

from spotmarket.data import DATA_ENV, data_dirs, find_data_file, project_root
from spotmarket.errors import DataNotFoundError, PriceDataError
from spotmarket.prices._history import PriceHistory
from spotmarket.prices._readers import read_prices

#: The file used when no price file is named: the bidding-era trace (SpotTune's revocation model).
DEFAULT_PRICE_FILE = "us-east-1_2015.csv.gz"


def price_dirs() -> list[Path]:
    """Folders searched for a bare price file name, in order (:func:`spotmarket.data.data_dirs`).

    Returns
    -------
    list of pathlib.Path
        They need not exist.
    """
    return data_dirs("spot_prices")


def locate_prices(path_or_name: str | PathLike[str] | None = None) -> Path:
    """Resolve a price file by the lookup order of :mod:`spotmarket.data`.

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
        If nothing is found, or the path is a folder; the message lists every place that was tried.
    """
    try:
        return find_data_file("spot_prices", DEFAULT_PRICE_FILE if path_or_name is None else path_or_name)
    except DataNotFoundError as exc:
        raise PriceDataError(f"price file {exc}") from None


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
