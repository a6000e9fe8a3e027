"""A package's public names loaded on first use (PEP 562 module ``__getattr__`` and ``__dir__``).

A process that imports one submodule (the local worker, the EC2 agent) then does not pay for the imports
behind the package's other names.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["attach"]


def attach(package: str, where: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` that load each name of ``where`` from its module.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    where : mapping of str to str
        Public name -> the module that defines it.

    Returns
    -------
    (callable, callable)
        ``__getattr__(name)``: the name's value, imported once and kept in the package (the next use is a plain
        lookup); raises ``AttributeError`` for a name not in ``where``. ``__dir__()``: the package's names and
        those of ``where``, sorted.

    Source: PEP 562, module ``__getattr__`` and ``__dir__`` (https://peps.python.org/pep-0562/).
    """

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__
