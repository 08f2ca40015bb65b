"""The named topologies: the Themis paper's six (and their artifact variants), systems, and what
`dse topologies` lists (docs/model.md §3.3). Each is parsed from its notation by `dse.core.topology_model`;
`dse.core.topology.parse_topology` finds them by name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dse.core.errors import InputError
from dse.core.topology_model import Topology, parse_notation

_PRESET_INDEX: dict[str, str] = {}


def _preset(name: str, notation: str) -> Topology:
    # built in, at import: not held to DSE_MAX_DIMENSIONS here (a low limit must not break the import);
    # `parse_topology` holds a preset to it when a user names one
    return Topology(parse_notation(notation, check=False).dims, name=name)


@dataclass(frozen=True)
class Preset:
    """A named topology with what it is and where its figures come from (`dse topologies`).

    `family`: ``paper`` (Table 2), ``artifact`` (the Themis artifact's ASTRA-sim 1.0 runs) or
    ``system`` (a real machine); `base`: the paper preset an ``artifact`` variant derives from.
    """

    name: str
    topology: Topology
    family: str
    what: str
    source: str
    base: str | None = None


ARTIFACT_SUFFIX = "@artifact"
_PAPER_WHAT = "paper Table 2"
_PAPER_SOURCE = (
    "Rashidi et al., Themis, ISCA 2022, Table 2: shape, aggregate GB/s per NPU and ns per step (700 / 1700 ns, 20 ns "
    "on the 4D rings); links per NPU (for the astra-sim-1 model) from the artifact's network files "
    "(docs/model.md §3.3)"
)
_ARTIFACT_WHAT = "Themis artifact (ASTRA-sim 1.0 runs): 1 ns latency, links"
_ARTIFACT_SOURCE = (
    "the Themis artifact's network files (docs/model.md §3.3): the Table 2 shape and bandwidths as links x "
    "per-link GB/s, every link latency 1 ns, NIC and router 0 ns; what the paper's figures were simulated with"
)

# The named base presets: the six topologies of the Themis paper (Table 2: aggregate GB/s per NPU
# and ns per step), carrying the artifact's links per NPU (docs/model.md §3.3); the
# real systems below are added after them.
PRESETS: dict[str, Topology] = {
    t.name: t  # type: ignore[misc]
    for t in (
        _preset("2D-SW_SW", "SW(16,150,700,links=6)_SW(64,100,1700,links=1)"),
        _preset("3D-SW_SW_SW_homo", "SW(16,100,700,links=4)_SW(8,100,700,links=4)_SW(8,100,1700,links=1)"),
        _preset("3D-SW_SW_SW_hetero", "SW(16,200,700,links=8)_SW(8,100,700,links=4)_SW(8,50,1700,links=1)"),
        _preset("3D-FC_Ring_SW", "FC(8,175,700,links=7)_Ring(16,100,700,links=4)_SW(8,50,1700,links=1)"),
        _preset(
            "4D-Ring_SW_SW_SW",
            "Ring(4,250,20,links=2)_SW(4,200,700,links=8)_SW(8,100,700,links=4)_SW(8,50,1700,links=1)",
        ),
        _preset(
            "4D-Ring_FC_Ring_SW",
            "Ring(4,375,20,links=2)_FC(8,175,700,links=7)_Ring(4,150,700,links=6)_SW(8,100,1700,links=1)",
        ),
    )
}
PAPER_PRESETS: tuple[str, ...] = tuple(PRESETS)

#: `NAME@artifact` for each paper preset: the same network at the artifact's 1 ns link latency, the
#: configuration behind the paper's figures and the one `dse reproduce themis --cost-model
#: astra-sim-1` runs (`dse.output.reproduce_experiments.topology_for`). Every command accepts these names.
ARTIFACT_PRESETS: dict[str, Topology] = {
    f"{n}{ARTIFACT_SUFFIX}": Topology(PRESETS[n].with_latency(1).dims, name=f"{n}{ARTIFACT_SUFFIX}")
    for n in PAPER_PRESETS
}

# Real systems the seed documents name with their kinds (the Themis talk: "NVIDIA HGX-H100: SW_SW_SW",
# "Google TPUv4: Ring_Ring_Ring"); the seeds give no figures, so these come from public documents
# (the vendors' and others'), cited in each source text. No latency is published for either: Table
# 2's value for the same tier is used. "Facebook Zion: FC_SW", named there too, is left out: no
# source at hand states its per-accelerator bandwidths, and none is invented (`NOT_PRESETS`).
NOT_PRESETS = {
    "Zion-like FC_SW": 'named by the Themis talk ("Facebook Zion: FC_SW"), but no source at hand '
    "gives its per-accelerator bandwidths, so it is not a preset (no invented figures)"
}
_SYSTEMS: tuple[tuple[str, str, str, str], ...] = (
    (
        "HGX-H100-pod",
        "SW(8,450,700,links=18)_SW(32,225,700,links=9)_SW(4,50,1700,links=1)",
        "real system: HGX H100-like (sources below)",
        (
            "kinds SW_SW_SW: the Themis talk (ISCA 2022). dim 0: an HGX H100 board, 8 GPUs on 4 NVSwitches, each "
            "GPU 900 GB/s bidirectional over 18 NVLink 4 links = 450 GB/s one way, 25 GB/s a link (NVIDIA, "
            "'Introducing NVIDIA HGX H100', developer blog, 2022; NVIDIA Hopper architecture page). dim 1: the "
            "NVLink Switch System, 32 boards = 256 GPUs; 72 NVLinks leave each board, 9 per GPU = 225 GB/s one "
            "way (FiberMall's and NADDOD's DGX H100 SuperPOD analyses), the 57.6 TB/s over 256 GPUs NVIDIA quotes"
            " for the NVLink Switch System. dim 2: InfiniBand NDR, one ConnectX-7 at 400 Gb/s = 50 GB/s per GPU "
            "(NVIDIA DGX H100 datasheet); 4 NVLink domains is a scale choice (1024 GPUs, as the paper's presets),"
            " not a published figure. Latency: none published; Table 2's 700 ns (node and pod dims) and 1700 ns "
            "(scale-out NIC) assumed. dims 0 and 1 share the GPU's 18 NVLinks, which dse's per-dimension "
            "bandwidths cannot express: optimistic when both are busy at once."
        ),
    ),
    (
        "TPUv4-torus",
        "Ring(16,100,700,links=2)_Ring(16,100,700,links=2)_Ring(16,100,700,links=2)",
        "real system: TPU v4-like 3D torus (sources below)",
        (
            "kinds Ring_Ring_Ring: the Themis talk (ISCA 2022). 4096 chips a pod, 3D torus slices in multiples of"
            " 4 (Google Cloud TPU v4 documentation), built of 64 4x4x4 cubes (Jouppi et al., TPU v4, ISCA 2023): "
            "16x16x16. Each ICI link carries 400 Gb/s = 50 GB/s each way (Jouppi et al., as summarised at "
            "glennklockwood.com/garden/processors/TPUv4); a torus gives a chip 2 links per dimension = 100 GB/s. "
            "Check: 4096 chips x 6 links x 50 GB/s = 1.2e15 B/s = 1.1 PiB/s, Google's 'all-reduce bandwidth per "
            "pod 1.1 PB/s'. Latency: none published; Table 2's 700 ns for a dimension inside a pod assumed."
        ),
    ),
)
# The measured GPU machines of the `nccl` cost model (docs/nccl.md): each also has a bundled calibration of
# the same name (dse/data/nccl/machines/, fitted on the public nccl-tests output named in its source).
# The `nccl` model reads no latency from a topology (NCCL's come from its tables and the calibration).
_NCCL_LATENCY = (
    "Latency: none published; Table 2's 700 ns (node) and 1700 ns (scale-out NIC) assumed for the other cost "
    "models, while the nccl cost model uses no dse latency (NCCL's come from its own tables and the calibration)."
)
_SYSTEMS += (
    (
        "HGX-H100",
        "SW(8,450,700,links=18)",
        "real system: 8 x H100 node (nccl calibration)",
        (
            "kinds SW: the node dimension of the HGX-H100 the Themis talk (ISCA 2022) names as SW_SW_SW. An HGX H100 "
            "board, 8 GPUs on 4 NVSwitches, each GPU 900 GB/s bidirectional over 18 NVLink 4 links = 450 GB/s one "
            "way (NVIDIA, 'Introducing NVIDIA HGX H100', developer blog, 2022; NVIDIA Hopper architecture page). "
            "Measured: NVIDIA's DGX H100 nccl-tests sample, all-reduce 8 B-16 GB (NVIDIA/dgxc-benchmarking "
            "nccl/README.md @841f546; the calibration is fitted on it); ring about 370 GB/s and NVLS about 480 "
            "GB/s bus bandwidth above 256 MB (NVIDIA/nccl-tests issue 212). " + _NCCL_LATENCY
        ),
    ),
    (
        "H800-node",
        "SW(8,200,700,links=8)",
        "real system: 8 x H800 node (nccl calibration)",
        (
            "kinds SW: an HGX H800 board, the HGX H100 node (the Themis talk's HGX-H100: SW_SW_SW) with NVLink cut to "
            "8 links: 8 GPUs on NVSwitches, NVLink 400 GB/s bidirectional per GPU = 200 GB/s one way over 8 NVLink 4 "
            "links of 25 GB/s (NVIDIA/nccl issue 1374: 'unidirectional peak BW 200GB/s' on an 'H800 * 8 node'; "
            "NVIDIA/nccl-tests issue 153). Measured: NVLS all-reduce bus bandwidth 215 GB/s (nccl issue 1374, "
            "prose only: no table is published, so the calibration keeps NCCL's defaults). " + _NCCL_LATENCY
        ),
    ),
    (
        "DGX-A100-HDRx3",
        "SW(8,300,700,links=12)_SW(3,12.5,1700,links=1)",
        "real system: 3 x 8 A100, 4 HDR a node (nccl calibration)",
        (
            "kinds SW_SW: a node's NVSwitch, then an InfiniBand switch (as the Themis talk's HGX-H100 SW_SW_SW). "
            "The cluster of NVIDIA/nccl-tests issue 119: 3 servers of 8 A100-SXM4-40GB, 2 Intel Xeon Platinum 8358 "
            "and 4 HDR InfiniBand NICs each (a DGX A100 itself has AMD CPUs and 8 compute NICs). dim 0: NVSwitch, "
            "12 NVLink 3 links of 25 GB/s = 300 GB/s one way per GPU (NVIDIA A100 architecture page). dim 1: 4 "
            "NICs of 200 Gb/s = 100 GB/s a node, 12.5 GB/s per GPU (the issue: '100GB/s (200G x 4 / 8)'), "
            "written as links=1, one link per GPU (half a NIC per GPU has no whole-count form; the calibration "
            "says 4 NICs a node). Measured: all-reduce bus bandwidth 84.8 GB/s average, 96 GB/s peak, and 22 "
            "rows of the table (22-86 MB; the calibration is fitted on them). " + _NCCL_LATENCY
        ),
    ),
)
SYSTEM_PRESETS: tuple[str, ...] = tuple(n for n, *_ in _SYSTEMS)
PRESETS.update({n: _preset(n, notation) for n, notation, *_ in _SYSTEMS})

#: Every named topology with what it is, in listing order: each paper preset followed by its
#: `@artifact` variant, then the real systems.
PRESET_INFO: dict[str, Preset] = {}
for _n in PAPER_PRESETS:
    PRESET_INFO[_n] = Preset(_n, PRESETS[_n], "paper", _PAPER_WHAT, _PAPER_SOURCE)
    _a = f"{_n}{ARTIFACT_SUFFIX}"
    PRESET_INFO[_a] = Preset(_a, ARTIFACT_PRESETS[_a], "artifact", _ARTIFACT_WHAT, _ARTIFACT_SOURCE, base=_n)
for _n, _notation, _what, _source in _SYSTEMS:
    PRESET_INFO[_n] = Preset(_n, PRESETS[_n], "system", _what, _source)
del _n, _a, _notation, _what, _source
_PRESET_INDEX.update({n.lower(): n for n in PRESET_INFO})
VARIANTS: dict[str, tuple[str, ...]] = {ARTIFACT_SUFFIX[1:]: PAPER_PRESETS}


def find(text: str) -> Topology | None:
    """The preset named `text` (``NAME@variant`` too), or None if `text` names none and has no '@'."""
    name = _PRESET_INDEX.get(text.lower())
    if name is not None:
        return PRESET_INFO[name].topology
    if "@" in text and "(" not in text:
        return _preset_variant(text)
    return None


def _preset_variant(text: str) -> Topology:
    """`NAME@variant` (``@artifact`` on a paper preset), or one line naming what is allowed."""
    base, _, variant = text.rpartition("@")
    base_name = _PRESET_INDEX.get(base.strip().lower())
    if base_name is None or "@" in base_name:
        raise InputError("topology", f"unknown preset {base.strip()!r} in {text!r}", f"presets: {', '.join(PRESETS)}")
    allowed = ", ".join(f"@{v} (on {', '.join(names)})" for v, names in VARIANTS.items())
    names = VARIANTS.get(variant.strip().lower())
    if names is None:
        raise InputError("topology", f"unknown variant '@{variant.strip()}' of {base_name}", allowed)
    if base_name not in names:
        raise InputError("topology", f"{base_name} has no '@{variant.strip().lower()}' variant", allowed)
    return PRESET_INFO[f"{base_name}@{variant.strip().lower()}"].topology


def preset_records() -> list[dict[str, Any]]:
    """Every preset as a dict of the fields `dse topologies` shows (table and ``--json`` alike)."""
    return [
        {
            "name": p.name,
            "family": p.family,
            "what": p.what,
            "npus": p.topology.npus,
            "shape": list(p.topology.shape),
            "total_bandwidth_gbps": p.topology.total_bandwidth,
            "bandwidth_gbps": list(p.topology.bandwidths),
            "latency_ns": [d.latency for d in p.topology.dims],
            "links": [d.links for d in p.topology.dims],
            "notation": p.topology.notation(),
            "base": p.base,
            "source": p.source,
        }
        for p in PRESET_INFO.values()
    ]
