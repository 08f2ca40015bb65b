"""Topologies as users name them: `parse_topology` reads a preset name (``NAME@artifact`` too), either
notation, or an ASTRA-sim 2.x network file into a `Topology` (docs/model.md §3).

The model itself (`Dim`, `Topology`, the notation and its dimension limit) is `dse.core.topology_model`,
re-exported here; the named presets are `dse.core.presets`, which this module looks names up in.

Presets (`PRESET_INFO`, listed by `dse topologies`): the paper's six with Table 2's latencies, each
also as ``NAME@artifact`` (the Themis artifact's ASTRA-sim 1.0 configuration: 1 ns links, what the
paper's figures ran on), and real systems with their cited figures (`SYSTEM_PRESETS`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from dse.core import presets
from dse.core.errors import InputError
from dse.core.network_yaml import is_network_file, read_network
from dse.core.topology_model import (
    ALGORITHMS,
    DEFAULT_ALGORITHM,
    KIND_CHOICES,
    KINDS,
    NOTATION_HELP,
    Dim,
    Topology,
    check_dimensions,
    notation_dims,
    parse_kind,
    parse_notation,
)

__all__ = [
    "ALGORITHMS",
    "DEFAULT_ALGORITHM",
    "KIND_CHOICES",
    "KINDS",
    "NOTATION_HELP",
    "Dim",
    "Topology",
    "check_dimensions",
    "notation_dims",
    "parse_kind",
    "parse_notation",
    "parse_topology",
]


def _from_network_file(path: str) -> Topology:
    """The topology of an ASTRA-sim 2.x network file, named after the file; a number out of range
    is one line naming the file, the line and the dimension."""
    dims = []
    for nd in read_network(path):
        try:
            dims.append(Dim(nd.kind, nd.npus, nd.bandwidth, nd.latency))
        except InputError as e:
            raise InputError(f"{nd.where}: {e.field}", e.problem, e.allowed) from None
    return Topology(tuple(dims), name=Path(path).stem)


def parse_topology(spec: str | os.PathLike | Topology) -> Topology:
    """A `Topology` from a preset name (``NAME@artifact`` too), either notation, an ASTRA-sim 2.x
    network file (``*.yml``, `dse.core.network_yaml`), or a `Topology` (returned as is). Every
    form is held to the dimension limit (`check_dimensions`), counted before any dimension is parsed."""
    if isinstance(spec, Topology):
        check_dimensions(spec.ndims)
        return spec
    if isinstance(spec, os.PathLike):  # a network file given as a path
        spec = os.fspath(spec)
    if not isinstance(spec, str) or not spec.strip():
        raise InputError("topology", f"{spec!r} is not a topology", NOTATION_HELP)
    text = spec.strip()
    if "(" in text:  # the notation (no preset name has a parenthesis)
        return parse_notation(text)
    if is_network_file(text):
        return _from_network_file(text)
    found = presets.find(text)
    if found is not None:
        check_dimensions(found.ndims)
        return found
    parts = [p for p in re.split(r"[\s;]+", text) if p]
    if len(parts) in (3, 4):
        return Topology.from_paper(
            kinds=parts[0], shape=parts[1], bandwidth=parts[2], latency=parts[3] if len(parts) == 4 else None
        )
    raise InputError(
        "topology",
        f"unknown preset or malformed topology {text!r}",
        f"presets: {', '.join(presets.PRESETS)} (the paper's six also as NAME{presets.ARTIFACT_SUFFIX}); "
        f"or {NOTATION_HELP}",
    )
