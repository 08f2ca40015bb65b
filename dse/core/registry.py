"""`LazyRegistry`: a name -> object mapping whose entries may be loaded on first lookup.

Used for `dse.schedulers.SCHEDULERS`: the `lp_guided` scheduler solves an LP (PuLP, HiGHS), so its
entry names the module that defines it (and registers it), imported only when a lookup asks for
it. A registry with an entry-point `group` also takes the modules that installed packages declare
in that group (``[project.entry-points."dse.schedulers"]``): that is how a layer above, or another
package, adds an entry without the registry naming it. Listing the names, `len` and `in` import
none of the entries' modules.
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

    def __init__(
        self, items: Iterable[tuple[str, T]] = (), modules: Mapping[str, str] | None = None, *, group: str | None = None
    ) -> None:
        self._entries: dict[str, T | _Pending] = dict(items)
        for name, module in (modules or {}).items():
            self._entries[name] = _Pending(module)
        self._group = group  # read on the first listing or miss, then None

    def _load_group(self) -> None:
        """Add the group's entry points (name -> module), sorted by name, under names not taken."""
        if self._group is None:
            return
        from importlib.metadata import entry_points  # only when the names are needed

        group, self._group = self._group, None
        for ep in sorted(entry_points(group=group), key=lambda e: e.name):
            self._entries.setdefault(ep.name, _Pending(ep.value))

    def __getitem__(self, name: str) -> T:
        if name not in self._entries:
            self._load_group()
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
        if name not in self._entries:
            self._load_group()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        self._load_group()
        return iter(self._entries)

    def __len__(self) -> int:
        self._load_group()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)})"


class _Pending:
    """An entry not loaded yet: the module that registers it."""

    __slots__ = ("module",)

    def __init__(self, module: str) -> None:
        self.module = module

    def __repr__(self) -> str:
        return f"<{self.module}, not imported yet>"
