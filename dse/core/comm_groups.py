"""ASTRA-sim 2.x communicator-group files (``--comm-groups GROUPS.json``), read as they are.

The file is the JSON object ASTRA-sim's ``--comm-group-configuration`` takes, and the one STAGE
writes beside its traces (``workload.json``)::

    {"1": [0, 1], "2": [2, 3], "5": [0, 2]}

Each key is a group's ``pg_name``, each value its ranks. What ASTRA-sim does with it
(``workload/Workload.cc`` ``initialize_comm_groups`` and ``extract_comm_group``,
``system/CommunicatorGroup.cc``): a name is read as an integer (``std::stoi``); a trace node whose
``pg_name`` is empty or ``"0"`` runs on all ranks (group 0 is reserved for that); a group that is
a strict subset of the ranks runs its collectives on a logical ring of its members **in the order
the file lists them**; a group of all ranks runs as an ordinary collective.

So dse reads: an object whose keys are whole numbers from 1 (decimal digits; the returned dict
is keyed by the number's plain form, ``"01"`` -> ``"1"``, so two keys of one number are refused,
as is ``"0"``), each value a non-empty list of distinct whole-number ranks in 0..npus-1, kept in
the file's order. Any other content is one `InputError` naming the file and the group. The file
is read size-limited (`dse.core.files.read_text`). `group_name` gives the key a trace's
``pg_name`` looks up (None for all ranks).
"""

from __future__ import annotations

from pathlib import Path

from dse.core.astra_system import read_json_object
from dse.core.errors import InputError


def group_name(pg_name: str) -> str | None:
    """The group a trace node's ``pg_name`` names: None for ``""`` and ``"0"`` (all ranks, as in
    ASTRA-sim), the plain form of a whole number (``"07"`` -> ``"7"``), else the name as it is."""
    text = str(pg_name).strip()
    if text.isascii() and text.isdigit():
        n = int(text)
        return None if n == 0 else str(n)
    return None if text == "" else text


def load_comm_groups(path: str | Path, npus: int, field: str = "--comm-groups") -> dict[str, tuple[int, ...]]:
    """The groups of an ASTRA-sim communicator-group file (module docstring): ``pg_name`` ->
    ranks in the file's order. `npus`: the topology's NPU count, which every rank must be below."""
    data = read_json_object(path, field)
    where = f"{field} {path}"
    out: dict[str, tuple[int, ...]] = {}
    first: dict[str, str] = {}
    for name, ranks in data.items():
        at = f"{where}: group {name!r}"
        text = name.strip()
        if not (text.isascii() and text.isdigit()) or int(text) == 0:
            problem = "0 is reserved for all ranks" if text.isascii() and text.isdigit() else "not a whole number"
            raise InputError(at, problem, "group names 1, 2, ... (ASTRA-sim reads them as integers)")
        key = str(int(text))
        if key in first:
            raise InputError(at, f"the same group as {first[key]!r}", "each group number once")
        first[key] = name
        out[key] = _ranks(ranks, at, npus)
    return out


def _ranks(value: object, at: str, npus: int) -> tuple[int, ...]:
    """One group's ranks: a non-empty list of distinct whole numbers in 0..npus-1."""
    if not isinstance(value, list):
        raise InputError(at, f"{type(value).__name__} where a list of ranks belongs", "a JSON list of ranks")
    if not value:
        raise InputError(at, "an empty group", "at least one rank")
    seen: set[int] = set()
    for r in value:
        if isinstance(r, bool) or not isinstance(r, int):
            raise InputError(at, f"rank {r!r} is not an integer", f"ranks 0 to {npus - 1}")
        if not 0 <= r < npus:
            raise InputError(at, f"rank {r} is not in the topology's {npus} NPUs", f"ranks 0 to {npus - 1}")
        if r in seen:
            raise InputError(at, f"rank {r} listed twice", "each rank once per group")
        seen.add(r)
    return tuple(value)


__all__ = ["group_name", "load_comm_groups"]
