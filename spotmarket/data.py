"""Find the data files spottune ships: spot price traces, learning curves, interruption traces.

The project carries what it needs in its own ``data/`` folder (see ``data/README.md`` for provenance and
licences). A file is looked up in this order:

1. an explicit path that exists, as given (absolute or relative to the current directory);
2. ``$SPOTTUNE_DATA``: a folder laid out like ``data/`` (``$SPOTTUNE_DATA/<kind>/<name>``), or a flat folder
   of files (``$SPOTTUNE_DATA/<name>``);
3. the project's ``data/<kind>/`` (a source checkout or an editable install);
4. ``<sys.prefix>/share/spottune/data/<kind>/``, where a wheel installs the same files (``data-files``).

Nothing is downloaded and nothing outside these places is read.
"""

from __future__ import annotations

import os
import sys
from os import PathLike
from pathlib import Path

from spotmarket.errors import DataNotFoundError

#: Environment variable naming a data folder searched before the bundled one.
DATA_ENV = "SPOTTUNE_DATA"
#: The kinds of bundled data: one sub-folder of ``data/`` each.
KINDS = ("spot_prices", "learning_curves", "interruption_traces", "instance_types")


def project_root() -> Path:
    """The folder that holds the ``spotmarket`` package (the repository root in a source checkout).

    Returns
    -------
    pathlib.Path
        An absolute path.
    """
    return Path(__file__).resolve().parents[1]


def data_dirs(kind: str) -> list[Path]:
    """Folders searched for a bare file name of ``kind``, in order; they need not exist.

    Parameters
    ----------
    kind : {"spot_prices", "learning_curves", "interruption_traces", "instance_types"}

    Raises
    ------
    ValueError
        If ``kind`` is not one of :data:`KINDS`.
    """
    if kind not in KINDS:
        raise ValueError(f"data kind {kind!r} is not one of {', '.join(KINDS)}")
    dirs = []
    env = os.environ.get(DATA_ENV)
    if env:
        dirs += [Path(env).expanduser() / kind, Path(env).expanduser()]
    dirs += [project_root() / "data" / kind, Path(sys.prefix) / "share" / "spottune" / "data" / kind]
    return dirs


def data_dir(kind: str) -> Path:
    """The first non-empty folder named ``kind`` in :func:`data_dirs` (e.g. the whole
    ``interruption_traces`` tree); a flat ``$SPOTTUNE_DATA`` is not one.

    Raises
    ------
    DataNotFoundError
        If none exists; the message lists every place tried.
    """
    for d in data_dirs(kind):
        if d.name == kind and d.is_dir() and any(d.iterdir()):
            return d
    raise DataNotFoundError(_not_found(kind, kind, data_dirs(kind)))


def find_data_file(kind: str, path_or_name: str | PathLike[str]) -> Path:
    """Resolve a data file by the lookup order of this module.

    Parameters
    ----------
    kind : {"spot_prices", "learning_curves", "interruption_traces", "instance_types"}
    path_or_name : str or path-like
        An explicit path, or a bare file name (no folder part) to look up.

    Returns
    -------
    pathlib.Path
        An existing file.

    Raises
    ------
    DataNotFoundError
        If an explicit path does not exist or is not a regular file, or a bare name is in none of
        :func:`data_dirs`.
    """
    given = Path(path_or_name).expanduser()
    if given.is_file():
        return given
    if given.is_dir():
        raise DataNotFoundError(f"{str(path_or_name)!r} is a directory, not a file")
    if given.exists():  # /dev/null and other non-regular files
        raise DataNotFoundError(f"{str(path_or_name)!r} is not a regular file")
    bare = len(given.parts) == 1 and not given.is_absolute()
    if not bare:
        raise DataNotFoundError(f"{str(path_or_name)!r} does not exist")
    for d in data_dirs(kind):
        if (d / given.name).is_file():
            return d / given.name
    raise DataNotFoundError(_not_found(kind, given.name, data_dirs(kind)))


def _not_found(kind: str, name: str, tried: list[Path]) -> str:
    env_note = "" if os.environ.get(DATA_ENV) else f" (${DATA_ENV} is not set)"
    return (f"{name!r} not found; looked in: " + ", ".join(str(t / name) if t.name != name else str(t) for t in tried)
            + env_note
            + f". Pass a path, or set ${DATA_ENV} to a folder holding {kind}/")
