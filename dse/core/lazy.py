"""`lazy_submodules`: a package's `__getattr__` that imports its submodules on first use (PEP 562),
so `import dse.core` costs nothing until `dse.core.topology` is asked for."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_submodules(package: str) -> Callable[[str], Any]:
    """A `__getattr__` for `package`: a public name is its submodule, imported on first use; anything
    else (or a submodule that does not exist) is an AttributeError. A submodule that exists but fails
    to import raises its own error."""

    def getattr_(name: str) -> Any:
        """The submodule `name` of the package, imported now; AttributeError if there is none."""
        if name.isidentifier() and not name.startswith("_"):
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as e:
                if e.name != f"{package}.{name}":
                    raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return getattr_
