"""dse topologies as NCCL systems and back (dse/costs/nccl/system.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dse.core.errors import InputError
from dse.core.presets import PRESETS
from dse.core.topology import Topology, parse_topology
from dse.costs.nccl.bundled import bundled
from dse.costs.nccl.model import COLLECTIVES, NcclSystem, predict
from dse.costs.nccl.system import system_of, topology_of

SYSTEMS, _ = bundled()
SIZES = (8, 1 << 10, 1 << 20, 1 << 27, 1 << 33)


def _back(s: NcclSystem) -> NcclSystem:
    return system_of(
        topology_of(s),
        generation=s.generation,
        nvls=s.nvls_enabled,
        network=s.network,
        cpu=s.cpu,
        nics_per_node=s.nics_per_node if s.nodes > 1 else None,
        nccl_version=s.nccl_version,
    )


@pytest.mark.parametrize("key", sorted(SYSTEMS))
def test_round_trip_every_bundled_machine(key: str) -> None:
    s = SYSTEMS[key]
    if s.nodes > 1:
        assert _back(s) == s
    else:  # one node: its NICs have no dse dimension and play no part in any prediction
        assert _back(s) == replace(s, nics_per_node=0, nic_GBps=0.0)
        for c in COLLECTIVES:
            assert predict(_back(s), c, 1 << 24) == predict(s, c, 1 << 24)


def test_nics_per_gpu_ride_on_links() -> None:
    """NICs that divide evenly among the GPUs need no `nics_per_node` on the way back."""
    p5 = SYSTEMS["h100_p5_2node"]
    topo = topology_of(p5)
    assert topo.notation() == "SW(8,450,0,links=18)_SW(2,50,0,links=4)"
    assert system_of(topo, generation="hopper", cpu="amd", network="efa") == p5
    p4de = SYSTEMS["a100_p4de_2node"]  # 4 NICs for 8 GPUs: no links, the count must be passed
    assert topology_of(p4de).dims[1].links is None
    assert system_of(topology_of(p4de), generation="ampere", nvls=False).nics_per_node == 8


def test_closed_form() -> None:
    s = system_of(parse_topology("SW(8,450,100)_SW(4,50,1000)"), generation="hopper")
    assert (s.gpus_per_node, s.nodes, s.fabric) == (8, 4, "nvswitch")
    assert (s.nics_per_node, s.nic_GBps, s.nics_per_node * s.nic_GBps) == (8, 50.0, 400.0)
    assert (s.nvlink_GBps, s.nvlink_links) == (450.0, 18)  # Hopper's 18 NVLinks by default
    assert s.has_nvls
    mesh = system_of(parse_topology("FC(4,150,10)"), generation="volta", nvlink_links=3)
    assert (mesh.fabric, mesh.nodes, mesh.nics_per_node, mesh.nvlink_links) == ("nvlink_mesh", 1, 0, 3)
    ring = system_of(parse_topology("Ring(4,150,10)"), generation="volta", nvlink_links=3)
    assert ring == mesh  # NcclSystem sees "NVSwitch or not" and the per-GPU rate only


def test_slowest_outer_dim_sets_the_nics_and_all_multiply_nodes() -> None:
    s = system_of(PRESETS["HGX-H100-pod"], generation="hopper")
    assert (s.gpus_per_node, s.nodes) == (8, 32 * 4)
    assert (s.nics_per_node, s.nic_GBps) == (8, 50.0)  # the NDR dim (50 GB/s, links=1), not the 225 one
    fast_last = system_of(parse_topology("SW(8,450,0)_SW(2,25,0)_FC(3,100,0)"), generation="hopper")
    assert (fast_last.nodes, fast_last.nics_per_node * fast_last.nic_GBps) == (6, 200.0)


def test_latencies_are_ignored() -> None:
    a = system_of(parse_topology("SW(8,450,1)_SW(2,50,1)"), generation="hopper")
    b = system_of(parse_topology("SW(8,450,9000)_SW(2,50,90000)"), generation="hopper")
    assert a == b


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_h100_preset_predicts_as_the_bundled_machines(collective: str) -> None:
    """The HGX-H100-pod preset's node (dim 0) and NDR network (dim 2), on 1 and 2 nodes, are the
    bundled DGX H100 and Nebius H100 machines, so NCCL's predictions agree to the bit."""
    node, ndr = PRESETS["HGX-H100-pod"].dims[0], PRESETS["HGX-H100-pod"].dims[2]
    one = system_of(Topology((node,)), generation="hopper", cpu="intel")
    two = system_of(Topology((node, replace(ndr, npus=2))), generation="hopper", cpu="other", network="ib")
    assert two == SYSTEMS["h100_nebius_2node"]
    for size in SIZES:
        assert predict(one, collective, size) == predict(SYSTEMS["h100_dgx_1node"], collective, size)
        assert predict(two, collective, size) == predict(SYSTEMS["h100_nebius_2node"], collective, size)


TOPO = parse_topology("SW(8,450,0)_SW(2,50,0)")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"generation": "pascal"}, "generation"),
        ({"generation": "hopper", "network": "myrinet"}, "network"),
        ({"generation": "hopper", "cpu": "sparc"}, "cpu"),
        ({"generation": "hopper", "nvls": "yes"}, "nvls"),
        ({"generation": "hopper", "nvlink_links": 0}, "nvlink_links"),
        ({"generation": "hopper", "nics_per_node": 0}, "nics_per_node"),
        ({"generation": "hopper", "nics_per_node": 2.5}, "nics_per_node"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict, field: str) -> None:
    with pytest.raises(InputError) as e:
        system_of(TOPO, **kwargs)
    assert e.value.field == field


def test_bad_topologies_are_refused() -> None:
    with pytest.raises(InputError, match="dim 1 kind") as e:
        system_of(parse_topology("SW(8,450,0)_Ring(4,50,0)"), generation="hopper")
    assert "switch or fc" in str(e.value)
    with pytest.raises(InputError, match="one-node") as e:
        system_of(parse_topology("SW(8,450,0)"), generation="hopper", nics_per_node=8)
    with pytest.raises(InputError) as e:
        system_of("SW(8,450,0)", generation="hopper")  # type: ignore[arg-type]
    assert e.value.field == "topology"


def test_systems_without_a_dse_form_are_refused() -> None:
    pcie = NcclSystem(generation="ampere", gpus_per_node=4, fabric="pcie", pcie_GBps=32.0)
    with pytest.raises(InputError) as e:
        topology_of(pcie)
    assert e.value.field == "fabric"
    single = NcclSystem(generation="hopper", gpus_per_node=1, nodes=4, nvlink_GBps=0.0, nics_per_node=1, nic_GBps=50.0)
    with pytest.raises(InputError) as e:
        topology_of(single)
    assert e.value.field == "gpus_per_node"
