"""`LazyRegistry`: a name -> object mapping whose entries may be loaded on first lookup.

Used for `dse.schedulers.SCHEDULERS`: the `lp_guided` scheduler solves an LP (PuLP, HiGHS), so its
entry names the module that defines it (and registers it), imported only when a lookup asks for
it. Listing the names, `len` and `in` import nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import TypeVar

T = TypeVar("T")


class LazyRegistry(MutableMapping[str, T]):
    """Objects by name, in registration order. An entry given in `modules` is the name of a module
    that, once imported, sets the entry to its object (e.g. by a decorator that does
    ``registry[name] = obj``); a lookup of that name imports the module first."""

    def __init__(self, items: Iterable[tuple[str, T]] = (), modules: Mapping[str, str] | None = None) -> None:
        self._entries: dict[str, T | _Pending] = dict(items)
        for name, module in (modules or {}).items():
            self._entries[name] = _Pending(module)

    def __getitem__(self, name: str) -> T:
        entry = self._entries[name]
        if not isinstance(entry, _Pending):
            return entry
        importlib.import_module(entry.module)  # sets the entry
        if self._entries[name] is entry:
            raise ImportError(f"{entry.module} did not register {name!r}")
        return self._entries[name]  # type: ignore[return-value]

    def __setitem__(self, name: str, value: T) -> None:
        self._entries[name] = value

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self._entries)})"


class _Pending:
    """An entry not loaded yet: the module that registers it."""

    __slots__ = ("module",)

    def __init__(self, module: str) -> None:
        self.module = module

    def __repr__(self) -> str:
        return f"<{self.module}, not imported yet>"
