import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dse.core.errors import InputError
from dse.core.presets import PAPER_PRESETS, PRESETS, SYSTEM_PRESETS
from dse.core.topology import Dim, Topology, notation_dims, parse_topology

# The Themis paper's Table 2: shape, aggregate GB/s per NPU, latency ns per step.
TABLE2 = {
    "2D-SW_SW": ((16, 64), (150, 100), (700, 1700)),
    "3D-SW_SW_SW_homo": ((16, 8, 8), (100, 100, 100), (700, 700, 1700)),
    "3D-SW_SW_SW_hetero": ((16, 8, 8), (200, 100, 50), (700, 700, 1700)),
    "3D-FC_Ring_SW": ((8, 16, 8), (175, 100, 50), (700, 700, 1700)),
    "4D-Ring_SW_SW_SW": ((4, 4, 8, 8), (250, 200, 100, 50), (20, 700, 700, 1700)),
    "4D-Ring_FC_Ring_SW": ((4, 8, 4, 8), (375, 175, 150, 100), (20, 700, 700, 1700)),
}


@pytest.mark.parametrize("name", list(TABLE2))
def test_presets_match_table2(name):
    t = parse_topology(name)
    shape, bw, lat = TABLE2[name]
    assert t.shape == shape and t.bandwidths == bw
    assert tuple(d.latency for d in t.dims) == lat
    assert t.npus == 1024 and t.name == name
    assert parse_topology(name.lower()) == t
    # links x per-link bandwidth of the artifact (reference/astra-sim-1.0.md §7) is the aggregate
    assert all(d.links is not None for d in t.dims)


def test_notation_round_trips_and_kinds_are_case_insensitive():
    t = parse_topology("ring(4,375,20)_FullyConnected(8,175,700)_RING(4,150,700)_Switch(8,100,1700)")
    assert [d.kind for d in t.dims] == ["ring", "fc", "ring", "switch"]
    assert [d.algorithm for d in t.dims] == ["ring", "direct", "ring", "halving_doubling"]
    assert parse_topology(t.notation()) == t
    assert t.notation() == "Ring(4,375,20)_FC(8,175,700)_Ring(4,150,700)_SW(8,100,1700)"


def test_paper_form_equals_notation():
    a = parse_topology("Ring_FC_Ring_SW 4x8x4x8 375,175,150,100 20,700,700,1700")
    b = parse_topology("Ring(4,375,20)_FC(8,175,700)_Ring(4,150,700)_SW(8,100,1700)")
    c = Topology.from_paper(
        kinds="Ring_FC_Ring_SW", shape="4x8x4x8", bandwidth="375,175,150,100", latency=[20, 700, 700, 1700]
    )
    assert a == b == c


def test_keywords():
    t = parse_topology("Ring(4,375,1,links=2)_FC(8,175,1,links=7,nic=3)_SW(8,100,1,router=5,algorithm=ring)")
    assert [d.links for d in t.dims] == [2, 7, None]
    assert t.dims[1].nic_latency == 3 and t.dims[2].router_latency == 5
    assert t.dims[2].algorithm == "ring" and t.dims[2].steps == 7
    assert parse_topology(t.notation()) == t


def test_steps():
    assert Dim("ring", 8, 1).steps == 7
    assert Dim("fc", 8, 1).steps == 1
    assert Dim("switch", 8, 1).steps == 3
    assert Dim("switch", 6, 1).steps == 3  # ⌈log2 6⌉


def test_size_one_dims_are_dropped_with_a_warning():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t = parse_topology("Ring(1,100,5)_SW(8,50,1)")
    assert t.shape == (8,) and w
    dims = notation_dims("Ring(1,100,5)_SW(8,50,1)")  # as written, for callers that must know
    assert [(d.kind, d.npus, d.bandwidth) for d in dims] == [("ring", 1, 100.0), ("switch", 8, 50.0)]
    with pytest.raises(InputError):
        notation_dims("Ring(0,100,5)_SW(8,50,1)")


@pytest.mark.parametrize(
    "bad,field",
    [
        ("Ring(4,375)", "topology"),
        ("Ring(4,375,20", "topology"),
        ("Mesh(4,1,1)", "topology kind"),
        ("Ring(0,100,1)", "npus"),
        ("Ring(4,0,1)", "bandwidth"),
        ("Ring(4,-5,1)", "bandwidth"),
        ("Ring(4,100,-1)", "latency"),
        ("Ring(4,abc,1)", "bandwidth"),
        ("Ring(2.5,100,1)", "npus"),
        ("Ring(4,100,1,foo=2)", "topology"),
        ("Ring(4,100,1,links=0)", "links"),
        ("nosuchpreset", "topology"),
        ("Ring_FC 4x8 100", "topology"),
        ("", "topology"),
        ("Ring(1,100,1)", "topology"),
        ("Ring(4,100,1,algorithm=magic)", "algorithm"),
    ],
)
def test_bad_topologies(bad, field):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(InputError) as e:
            parse_topology(bad)
    assert field in e.value.field and "\n" not in str(e.value)


def test_presets_listed():
    # the paper's six, then the real systems; the six paper ones are PAPER_PRESETS, in Table 2's order
    assert tuple(PRESETS)[:6] == PAPER_PRESETS == tuple(TABLE2)
    assert tuple(PRESETS)[6:] == SYSTEM_PRESETS and len(SYSTEM_PRESETS) >= 2


def test_hash_is_the_dims_and_is_not_pickled():
    """A topology's hash is its dims' (the name is not compared), worked out once and kept, but never
    carried to another process: strings hash differently there."""
    import pickle

    t = parse_topology("4D-Ring_FC_Ring_SW")
    plain = Topology(t.dims)
    assert hash(t) == hash(plain) == hash((t.dims,)) and t == plain
    back = pickle.loads(pickle.dumps(t))
    assert "_hash" not in back.__dict__ and back == t and hash(back) == hash(t) and back.name == t.name
    assert {t: 1}[back] == 1


@given(
    bw=st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False),
    lat=st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False),
)
def test_the_notation_reads_back_exactly(bw, lat):
    """A topology's exact notation parses back to the same dimensions, bit for bit, short where exact."""
    topo = parse_topology(f"Ring(4,{bw!r},{lat!r})_SW(8,100,1700)")
    assert parse_topology(topo.notation(exact=True)).dims == topo.dims
    assert topo.notation(exact=True).endswith("_SW(8,100,1700)")
