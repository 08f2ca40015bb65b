"""The quantities `dse.costs.nccl.fit` adjusts, as one vector: which a system and its rows can tell
(`candidates`), where the fit starts (`curve_starts`, `starts`), their bounds, and `NcclParams` from
a vector (`params_of`; coordinates: log hop-latency scales, efficiencies as they are, the network
latency in us, log s_half, k, log floor)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from dse.costs.nccl.model import NcclParams, NcclSystem

#: Bounds of the fitted quantities: hop-latency scales, efficiencies, s_half (bytes), k.
SCALE_BOUNDS = (0.05, 20.0)
E_BOUNDS = (0.02, 1.0)
#: An efficiency stays within these multiples of its starting value (NCCL's own: its effective
#: link rates): a node cannot run much faster than NCCL's rate allows, nor far slower.
E_RANGE = (0.5, 1.1)
S_HALF_BOUNDS_BYTES = (1.0, 1e11)
K_BOUNDS = (0.1, 1.0)
#: The multi-node curve's floor (`NcclParams.e_min_multi`): its bounds, and the values each fit with
#: rows across nodes starts it from besides not fitting it (0: the pure curve); the floor barely moves
#: the calibrated cost between them, so the starts decide where it lands, and the best fit wins.
FLOOR_BOUNDS = (1e-4, 0.5)
FLOOR_STARTS = (0.002, 0.02, 0.2)
#: Bounds of the network's own latency per hop, us (0: NCCL's NET table alone).
NET_LATENCY_BOUNDS_US = (0.0, 1000.0)
#: Starting values of s_half tried when the starting parameters have none (NCCL's tuner: 0).
S_HALF_STARTS_BYTES = (256 * 1024.0, 16 * 1024.0 * 1024.0)
#: Starting k of a tier without a curve: at k = 1 the curve is a constant latency, which the
#: identifiability test could not tell from the hop latencies.
K_START = 0.8
#: The per-hop latencies each tier's hop-latency scale multiplies.
HOPS = {
    "intra": ("ring_intra_hop_ns", "tree_intra_hop_ns", "nvls_intra_ns"),
    "inter": ("ring_inter_hop_ns", "tree_inter_hop_ns", "nvls_inter_ns", "nvls_tree_inter_ns"),
}
#: The efficiency each algorithm runs at (its tier's e_*_intra or e_*_inter is fitted).
E_OF_ALGO = {"ring": "e_ring", "tree": "e_tree", "nvls": "e_nvls", "nvls_tree": "e_nvls", "p2p": "e_ring"}


def fit_tiers(system: NcclSystem) -> tuple[str, ...]:
    """The tiers `system` has: "intra" with 2+ GPUs a node, "inter" with 2+ nodes."""
    return tuple(t for t, on in (("intra", system.gpus_per_node > 1), ("inter", system.nodes > 1)) if on)


def candidates(system: NcclSystem, start: NcclParams, algos: set[str], floor: bool) -> tuple[str, ...]:
    """Names that could be fitted, most telling first: the e_* of `algos` (the algorithms the starting
    parameters choose for the rows), then per tier its hop-latency scale, the network's own latency
    per hop, then per tier s_half and k, then the multi-node curve (with its floor if `floor`)."""
    tiers = fit_tiers(system)
    names = [f"{E_OF_ALGO[a]}_{t}" for t in tiers for a in sorted(algos)]
    names = list(dict.fromkeys(names))  # nvls and nvls_tree share e_nvls
    names += [f"lat_{t}" for t in tiers] + ["net_latency_inter"] * ("inter" in tiers)
    for prefix in ("s_half", "k"):
        names += [f"{prefix}_{t}" for t in tiers]
    if multi_node_fittable(system, start, algos):
        names += ["s_half_multi", "k_multi"] + ["floor_multi"] * floor
    return tuple(names)


def multi_node_fittable(system: NcclSystem, start: NcclParams, algos: set[str]) -> bool:
    """True when the multi-node curve can be fitted: rows across nodes running tree or NVLSTree, the
    curve on (s_half 0 turns it off)."""
    return system.nodes > 1 and bool(algos & {"tree", "nvls_tree"}) and start.s_half_multi_bytes > 0


def curve_starts(system: NcclSystem, start: NcclParams) -> list[NcclParams]:
    """The starting parameters: `start`, and across nodes with the multi-node curve on also `start`
    with the curve's s_half at each of `S_HALF_STARTS_BYTES`. The curve moves NCCL's choice between
    tree or NVLSTree and ring (dse.costs.nccl.model's tuner takes it), so from the default alone the
    rows ring runs could never tell that a tree runs them faster; a start from a weaker curve can."""
    if system.nodes < 2 or start.s_half_multi_bytes <= 0:
        return [start]
    return [start, *(replace(start, s_half_multi_bytes=s) for s in S_HALF_STARTS_BYTES)]


def starts(system: NcclSystem, start: NcclParams, algos: set[str]) -> list[tuple[float, float]]:
    """The fit's starting points, (s_half, floor): each s_half start (`_s_half_starts`) without a
    fitted floor (0), and when the rows' `algos` run the multi-node curve also from each of `FLOOR_STARTS`."""
    floors = (0.0, *FLOOR_STARTS) if multi_node_fittable(system, start, algos) else (0.0,)
    return [(s_half, floor) for s_half in _s_half_starts(start) for floor in floors]


def _s_half_starts(start: NcclParams) -> tuple[float, ...]:
    if start.s_half_intra_bytes > 0 or start.s_half_inter_bytes > 0:
        return (0.0,)  # 0: each tier starts from its own s_half
    return S_HALF_STARTS_BYTES


def vector(
    start: NcclParams, names: Sequence[str], s_half: float, floor: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Starting point and bounds in the solver's coordinates: log scale, e as is, log s_half, k, log floor."""
    x, lo, hi = [], [], []
    for name in names:
        if name.startswith("lat_"):
            v, b = 0.0, (math.log(SCALE_BOUNDS[0]), math.log(SCALE_BOUNDS[1]))
        elif name == "floor_multi":
            v, b = math.log(floor), (math.log(FLOOR_BOUNDS[0]), math.log(FLOOR_BOUNDS[1]))
        elif name.startswith("e_"):
            v = getattr(start, name)
            b = (max(E_BOUNDS[0], E_RANGE[0] * v), min(E_BOUNDS[1], max(E_RANGE[1] * v, E_BOUNDS[0])))
        elif name.startswith("net_latency"):
            v, b = start.net_latency_ns / 1000.0, NET_LATENCY_BOUNDS_US
        elif name.startswith("s_half_"):
            own = getattr(start, name + "_bytes")
            v, b = (
                math.log(own if own > 0 else s_half),
                (math.log(S_HALF_BOUNDS_BYTES[0]), math.log(S_HALF_BOUNDS_BYTES[1])),
            )
        else:  # k: from K_START when the tier has no curve yet (at k = 1, s_half is a latency)
            own = getattr(start, f"s_half_{name[2:]}_bytes")
            v, b = (getattr(start, name) if own > 0 else K_START), K_BOUNDS
        x.append(min(max(v, b[0]), b[1]))
        lo.append(b[0])
        hi.append(b[1])
    return np.array(x), np.array(lo), np.array(hi)


def params_of(start: NcclParams, names: Sequence[str], x: np.ndarray, *, check: bool = True) -> NcclParams:
    """`start` with the quantities `names` set from the solver's vector `x`. `check=False` skips
    `NcclParams`' checks: for the solver's own vectors, which its bounds keep inside them (the
    residuals build one per evaluation; the fit's result is built checked)."""
    changes: dict[str, Any] = {}
    for name, v in zip(names, x.tolist()):
        if name.startswith("lat_"):
            scale = math.exp(v)
            for field in HOPS[name[4:]]:
                old = getattr(start, field)
                changes[field] = tuple(t * scale for t in old) if isinstance(old, tuple) else old * scale
        elif name.startswith("s_half_"):
            changes[name + "_bytes"] = math.exp(v)
        elif name == "floor_multi":
            changes["e_min_multi"] = math.exp(v)
        elif name.startswith("net_latency"):
            changes["net_latency_ns"] = 1000.0 * v
        else:
            changes[name] = v
    if check:
        return replace(start, **changes)
    q = object.__new__(NcclParams)
    q.__dict__.update(start.__dict__)
    q.__dict__.update(changes)
    return q
