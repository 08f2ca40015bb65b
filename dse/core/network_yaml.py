"""ASTRA-sim 2.x network configuration files (``--network-configuration``), read as they are.

An analytical network file is a YAML mapping of four lists, one entry per dimension, innermost
first::

    topology: [ Ring, FullyConnected, Switch ]
    npus_count: [ 2, 4, 2 ]
    bandwidth: [ 200.0, 100.0, 50.0 ]  # GB/s
    latency: [ 200.0, 500.0, 1000.0 ]  # ns

Each dimension becomes a dse `Dim`: ``Ring`` -> ``ring``, ``FullyConnected`` -> ``fc``, ``Switch``
-> ``switch`` (each with its default algorithm), ``npus_count`` -> NPUs, ``bandwidth`` -> GB/s per
NPU, ``latency`` -> ns per step. The numbers are taken unchanged; each cost model reads them in its
own unit (docs/model.md, "Units"): under ``astra-sim`` and ``astra-sim-1`` a GB is 2^30 B, as in
ASTRA-sim, so a file gives the same times as ASTRA-sim's analytical backend; under ``paper`` a GB
is 1e9 B. ``astra-sim-1`` also needs each dimension's links per NPU, which a 2.x file does not
carry: it refuses such a topology in one line, as it refuses the notation without ``links=``. Any
other key (a congestion-aware or ns-3 setting dse does not model) is refused in one line naming
it, as is a list of another length, a kind ASTRA-sim does not have, or a number out of dse's
ranges. The file is read with `dse.core.yaml_read` (size-limited, special files refused).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.limits import check_input

#: The keys of an analytical network file, in the order ASTRA-sim documents them.
KEYS = ("topology", "npus_count", "bandwidth", "latency")
#: ASTRA-sim's names of the dimension kinds, and dse's.
KINDS = {"Ring": "ring", "FullyConnected": "fc", "Switch": "switch"}
SUFFIXES = (".yml", ".yaml")


def is_network_file(text: str) -> bool:
    """Whether a topology argument names an ASTRA-sim network file (by its ``.yml``/``.yaml`` ending)."""
    return text.strip().lower().endswith(SUFFIXES)


@dataclass(frozen=True)
class NetworkDim:
    """One dimension of a network file, before dse checks its numbers: `kind` is dse's name,
    `where` the file and line that a refusal names."""

    kind: str
    npus: Any
    bandwidth: Any
    latency: Any
    where: str


def read_network(path: str | Path) -> list[NetworkDim]:
    """The dimensions of an ASTRA-sim 2.x network file, innermost first (module docstring); the
    caller (`dse.core.topology.parse_topology`) makes them `Dim` objects, checking their ranges."""
    from dse.core.yaml_read import read_yaml_mapping  # PyYAML: imported only when a file is read

    entries = read_yaml_mapping(path, "topology")
    unknown = [k for k in entries if k not in KEYS]
    if unknown:
        e = entries[unknown[0]]
        raise InputError(
            f"{path}:{e.line}: {unknown[0]}",
            "a key dse's analytical models cannot honour",
            f"the analytical network keys {', '.join(KEYS)}",
        )
    missing = [k for k in KEYS if k not in entries]
    if missing:
        raise InputError(f"{path}: {missing[0]}", "missing", f"the four lists {', '.join(KEYS)}")
    lists = {k: _list(entries[k].value, f"{path}:{entries[k].line}: {k}") for k in KEYS}
    n = len(lists["topology"])
    check_input("dimensions", n, f"{path}: topology", "dimensions")
    for k in KEYS[1:]:
        if len(lists[k]) != n:
            raise InputError(
                f"{path}:{entries[k].line}: {k}", f"{len(lists[k])} values for {n} dimensions", "one per dimension"
            )
    dims = []
    for d in range(n):
        where = f"{path}:{entries['topology'].line}: dimension {d}"
        kind = lists["topology"][d]
        if kind not in KINDS:
            raise InputError(f"{where}: topology", f"kind {kind!r}", ", ".join(KINDS))
        npus, bw, lat = (_number(lists[k][d], f"{path}:{entries[k].line}: {k}[{d}]") for k in KEYS[1:])
        dims.append(NetworkDim(KINDS[kind], npus, bw, lat, where))
    return dims


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise InputError(where, f"{value!r} is not a list of values", "a YAML list, one value per dimension")
    return value


def _number(value: Any, where: str) -> Any:
    """A YAML number as it is (the `Dim` checks ranges and wholeness); anything else one line."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(where, f"{value!r} is not a number")
    return value
