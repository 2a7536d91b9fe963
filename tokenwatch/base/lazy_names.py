"""A package's names loaded on first use (PEP 562's module ``__getattr__``), for faces whose modules would
start an import cycle if loaded with the package."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_names(package: str, lazy: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package`` that loads each name of ``lazy`` (name -> its module) when
    first asked for, and says which name is missing otherwise."""

    def load(name: str) -> object:
        if name in lazy:
            return getattr(importlib.import_module(lazy[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return load
