"""The experiments of `dse reproduce themis`: which topologies, sizes, schedules and chunk counts
each part runs, and each paper preset as it runs under every cost model.

Shared by the runner (`dse.output.reproduce`) and its figures (`dse.output.reproduce_figures`). A
new experiment is a sweep table in `sweeps` with its label in `EXPERIMENTS` (`dse.output.reproduce`
runs each table into its own CSV).
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

from dse.core.presets import ARTIFACT_SUFFIX, PAPER_PRESETS, PRESET_INFO, PRESETS
from dse.core.topology import Topology, parse_topology

SCHEDULES = ("baseline+fifo", "themis+fifo", "themis+scf", "lp_guided+scf")
SIZES_GIB = tuple(Decimal("0.10") + Decimal("0.05") * i for i in range(19))
CHUNK_TOPOLOGIES = ("3D-SW_SW_SW_hetero", "4D-Ring_FC_Ring_SW")
CHUNKS = (4, 8, 16, 32, 64, 128, 256, 512)
QUICK_TOPOLOGIES = PAPER_PRESETS[:2]
QUICK_SIZES_GIB = SIZES_GIB[::9]
QUICK_CHUNK_TOPOLOGIES = CHUNK_TOPOLOGIES[:1]
QUICK_CHUNKS = (4, 64, 512)
GANTT_CASE = ("3D-SW_SW_SW_hetero", "0.25GiB", 16)


def topology_for(name: str, cost_model: str) -> Topology:
    """A paper preset as the experiment uses it, the same hardware in every model.

    Under `astra-sim-1`: the preset ``NAME@artifact`` (the artifact's 1 ns links, as the paper's
    own runs; `dse.core.presets.ARTIFACT_PRESETS`, the one definition). Under `astra-sim`: each
    fully-connected dimension's bandwidth divided by P−1, because ASTRA-sim 2.x reads an FC
    bandwidth as per link (its P−1 direct messages each run at it).
    """
    t = PRESETS[name]
    if cost_model == "astra-sim-1":
        return parse_topology(f"{name}{ARTIFACT_SUFFIX}")
    if cost_model == "astra-sim":
        dims = tuple(replace(d, bandwidth=d.bandwidth / (d.npus - 1)) if d.kind == "fc" else d for d in t.dims)
        return Topology(dims, name=f"{name}@FC-per-link")
    return t


def run_as(name: str, cost_model: str) -> str:
    """What `topology_for` makes of a paper preset under a model, in words (reports say it)."""
    if cost_model == "astra-sim-1":
        return f"{name}{ARTIFACT_SUFFIX}: {PRESET_INFO[name + ARTIFACT_SUFFIX].what}"
    if cost_model == "astra-sim":
        return f"{name}@FC-per-link: Table 2, each FC dimension's bandwidth / (P-1) (ASTRA-sim 2.x reads it per link)"
    return f"{name}: {PRESET_INFO[name].what}"


def sweeps(cost_model: str, quick: bool = False) -> dict[str, dict[str, Any]]:
    """The two sweep tables (`quick`: two topologies, three sizes, three chunk counts)."""
    names = QUICK_TOPOLOGIES if quick else PAPER_PRESETS
    sizes = QUICK_SIZES_GIB if quick else SIZES_GIB
    chunk_topos = QUICK_CHUNK_TOPOLOGIES if quick else CHUNK_TOPOLOGIES
    chunks = QUICK_CHUNKS if quick else CHUNKS
    return {
        "single_allreduce": {
            "topology": [topology_for(n, cost_model).notation() for n in names],
            "size": [f"{s}GiB" for s in sizes],
            "chunks": 64,
            "schedules": list(SCHEDULES),
            "cost_model": cost_model,
            "bounds": True,
            "bounds_time_limit": 60.0,
            "bounds_node_limit": 100,
        },
        "chunks": {
            "topology": [topology_for(n, cost_model).notation() for n in chunk_topos],
            "size": "0.1GiB",
            "chunks": list(chunks),
            "schedules": list(SCHEDULES),
            "cost_model": cost_model,
            "bounds": True,
            "bounds_time_limit": 60.0,
            "bounds_node_limit": 100,
        },
    }


EXPERIMENTS = {"single_allreduce": "single all-reduce", "chunks": "chunk sensitivity"}
