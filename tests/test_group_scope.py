"""`dse.training.chakra.group_scope`: what a communicator group spans under `paper` and `astra-sim-1`."""

from __future__ import annotations

import pytest

from dse.core.errors import InputError
from dse.core.topology import parse_topology
from dse.training.chakra.group_scope import group_scope
from dse.training.placement import PartScope

# 4 x 8 x 2: rank = c0 + 4·c1 + 32·c2
TOPO = parse_topology("Ring(4,100,500)_FC(8,150,300)_SW(2,50,1000)")


def test_whole_dimension() -> None:
    assert group_scope(TOPO, [4, 5, 6, 7]) == (0,)  # c1 = 1, all of dim 0
    assert group_scope(TOPO, [7, 6, 5, 4]) == (0,)  # the order does not matter here
    assert group_scope(TOPO, [1 + 4 * k for k in range(8)]) == (1,)
    assert group_scope(TOPO, [3, 35]) == (2,)


def test_two_dimensions_and_all() -> None:
    assert group_scope(TOPO, list(range(32))) == (0, 1)
    assert group_scope(TOPO, [2 + 4 * k + 32 * j for k in range(8) for j in range(2)]) == (1, 2)
    assert group_scope(TOPO, list(range(64))) == (0, 1, 2)


def test_part_of_one_dimension() -> None:
    # two consecutive NPUs of the ring, and a stretch across its end (coordinates 3 and 0)
    assert group_scope(TOPO, [1, 2]) == PartScope(((0, 2),))
    assert group_scope(TOPO, [3, 0]) == PartScope(((0, 2),))
    # any 4 of the fully-connected dimension's 8
    part = group_scope(TOPO, [0, 8, 20, 28])
    assert part == PartScope(((1, 4),))
    assert isinstance(part, PartScope)
    sub = part.topology(TOPO)
    assert sub is not None and sub.shape == (4,) and sub.dims[0].kind == "fc"
    # a whole dimension and a part of the next (LIBRA's [4, 4, -1] tensor parallelism)
    assert group_scope(TOPO, list(range(16))) == PartScope(((0, 4), (1, 4)))


def test_one_member() -> None:
    assert group_scope(TOPO, [9]) == ()


@pytest.mark.parametrize(
    "members,match",
    [
        ([0, 1, 4], "not a box"),  # (0,0), (1,0), (0,1): three of the four corners
        ([0, 2], "not a stretch"),  # ring coordinates 0 and 2: a gap on both sides
        ([0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 15], "not a box"),
        ([0, 2, 32, 34], "not a stretch"),
        ([0, 0], "listed twice"),
        ([0, 64], "rank 64 of"),
        ([], "no members"),
    ],
)
def test_refused_shapes(members: list[int], match: str) -> None:
    with pytest.raises(InputError, match=match):
        group_scope(TOPO, members, name="7")


def test_error_names_the_group() -> None:
    with pytest.raises(InputError, match=r"^group '7': \[0, 1, 4\] is not a box") as e:
        group_scope(TOPO, [0, 1, 4], name="7")
    assert e.value.allowed is not None and "whole dimensions" in e.value.allowed
    with pytest.raises(InputError, match=r"^group: "):
        group_scope(TOPO, [0, 2])
