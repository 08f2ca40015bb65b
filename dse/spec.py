"""`CollectiveSpec`: one collective on one topology under one cost model, validated in one place.

`evaluate`, `lower_bounds` and everything above them parse their user-facing arguments here, so a
bad value gets the same one-line message wherever it enters.
"""

from __future__ import annotations

from dataclasses import dataclass

from .collectives import parse_collective
from .costs import CostModel, get_cost_model
from .topology import Topology, parse_topology
from .units import parse_int, parse_size


@dataclass(frozen=True)
class CollectiveSpec:
    """A validated collective: topology, collective name, bytes per NPU, chunks, cost model, modes."""

    topology: Topology
    collective: str
    size: int
    chunks: int
    cost_model: CostModel
    latency_mode: str
    active_chunks: int

    @classmethod
    def parse(
        cls,
        topology: "Topology | str",
        *,
        collective: str = "all_reduce",
        size: "int | float | str",
        chunks: int = 64,
        cost_model: "str | CostModel" = "paper",
        latency_mode: str | None = None,
        active_chunks: int = 1,
    ) -> "CollectiveSpec":
        topo = parse_topology(topology)
        coll = parse_collective(collective)
        nbytes = parse_size(size)
        nchunks = parse_int(chunks, "chunks", minimum=1)
        model = get_cost_model(cost_model)
        active = parse_int(active_chunks, "active_chunks", minimum=1)
        mode = model.check(topo, coll, latency_mode, active)
        return cls(topo, coll, nbytes, nchunks, model, mode, active)
