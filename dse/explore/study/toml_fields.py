"""Checks of the TOML fields that search-space and study files share: value lists, known keys and
scheduler names, each refused with one line naming the field."""

from __future__ import annotations

from typing import Any

from dse.core.errors import InputError
from dse.schedulers import SCHEDULERS


def as_list(value: Any, field: str) -> list:
    """`value` as a list (a single value is a list of one); an empty list is refused."""
    values = value if isinstance(value, list) else [value]
    if not values:
        raise InputError(field, "empty list", "at least one value")
    return values


def check_keys(table: dict[str, Any], allowed: set[str], where: str) -> None:
    """Refuse the first key of `table` that is not in `allowed`, naming it as ``where.key``."""
    for key in table:
        if key not in allowed:
            raise InputError(f"{where}.{key}", "unknown key", ", ".join(sorted(allowed)))


def parse_scheduler(name: Any) -> str:
    """A scheduler's registry name (any case, ``-`` or ``_``); ``fixed`` needs orders and ``optimal`` is
    a solve of its own (`dse optimal`), so no space offers them."""
    key = str(name).strip().lower().replace("-", "_")
    if key not in SCHEDULERS or key in _NOT_IN_SPACES:
        allowed = ", ".join(s for s in SCHEDULERS if s not in _NOT_IN_SPACES)
        raise InputError("scheduler", f"unknown scheduler {name!r}", allowed)
    return key


_NOT_IN_SPACES = ("fixed", "optimal")
