"""The multi-node curve in NCCL's choice: dse's tuner ranks plans under the defaults with the given
parameters' multi-node curve (ours, not NCCL's), so a calibration that refits the curve moves the
choice between tree or NVLSTree and ring across nodes; efficiencies and latencies never do."""

from __future__ import annotations

import dataclasses

import pytest

from dse.costs.nccl import fit as F
from dse.costs.nccl import validation as V
from dse.costs.nccl.bundled import bundled
from dse.costs.nccl.fit_vector import S_HALF_STARTS_BYTES, curve_starts
from dse.costs.nccl.model import default_params, predict, predict_time

SYSTEMS, MEASUREMENTS = bundled()
FOUR = SYSTEMS["h100_vpbench_4node"]  # 4 x 8 H100, 8 x 400G IB


def _weak(system):  # a multi-node curve far weaker than the default's
    return dataclasses.replace(default_params(system), s_half_multi_bytes=256 * 1024.0, e_min_multi=0.0)


def _strong(system):  # the multi-node curve Hopper had before its current default (docs/model.md §15.4)
    return dataclasses.replace(default_params(system), s_half_multi_bytes=64 * 2.0**20, k_multi=0.9, e_min_multi=0.01)


def test_a_strong_curve_runs_ring_at_one_megabyte_on_four_nodes_and_a_weaker_one_runs_tree() -> None:
    assert predict_time(FOUR, "all_reduce", 1 << 20, _strong(FOUR))[2] == "ring"
    assert predict_time(FOUR, "all_reduce", 1 << 20)[2] == "tree"  # the default, as NCCL's logs show there
    q = _weak(FOUR)
    t, lat, algo, proto = predict_time(FOUR, "all_reduce", 1 << 20, q)
    assert algo == "tree"
    forced = predict_time(FOUR, "all_reduce", 1 << 20, q, algo="tree", proto=proto)
    assert (t, lat) == forced[:2]
    p = predict(FOUR, "all_reduce", 1 << 20, params=q)
    assert (p.algo, p.proto, p.time_ns) == (algo, proto, t)


@pytest.mark.parametrize("size", [1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 28])
def test_efficiencies_and_latencies_do_not_move_the_choice(size: int) -> None:
    d = default_params(FOUR)
    slow = dataclasses.replace(
        d,
        e_ring_inter=0.6 * d.e_ring_inter,
        e_tree_inter=1.05 * d.e_tree_inter,
        tree_inter_hop_ns=tuple(3 * t for t in d.tree_inter_hop_ns),
    )
    assert predict_time(FOUR, "all_reduce", size, slow)[2:] == predict_time(FOUR, "all_reduce", size)[2:]
    assert predict(FOUR, "all_reduce", size, params=slow).algo == predict_time(FOUR, "all_reduce", size)[2]


def test_one_node_has_no_multi_node_curve_to_move() -> None:
    one = dataclasses.replace(FOUR, nodes=1)
    for size in (1 << 10, 1 << 20, 1 << 28):
        assert predict_time(one, "all_reduce", size, _weak(one))[2:] == predict_time(one, "all_reduce", size)[2:]


def test_curve_starts() -> None:
    start = default_params(FOUR)
    got = curve_starts(FOUR, start)
    assert got[0] is start and [q.s_half_multi_bytes for q in got[1:]] == list(S_HALF_STARTS_BYTES)
    assert all(dataclasses.replace(q, s_half_multi_bytes=start.s_half_multi_bytes) == start for q in got)
    assert curve_starts(dataclasses.replace(FOUR, nodes=1), start) == [start]
    off = dataclasses.replace(start, s_half_multi_bytes=0.0)
    assert curve_starts(FOUR, off) == [off]


@pytest.mark.parametrize("release", ["", "2.24.3"])
def test_a_fit_on_four_nodes_finds_the_tree_nccl_runs(monkeypatch: pytest.MonkeyPatch, release: str) -> None:
    """Half the sizes of a public 4-node sweep (NCCL 2.24.3), fitted from a strong multi-node curve
    (`_strong`): the fit lands where tree runs 64 KB-1 MB (as NCCL logs on multi-node H100 runs) and
    predicts the other half within 7 %, under the newest tuner dse restates and under the run's own.
    Under the newest, from the strong curve alone (no weaker start) ring keeps those sizes and the
    error is about twice as large; under 2.24.3's (its NVLSTree hop 14 us) the strong start finds
    the tree too, and errs less than 8 %. From the default curve the fit runs tree there too."""
    four = dataclasses.replace(FOUR, nccl_version=release)
    m = MEASUREMENTS["vpbench_h100_4node"]
    fit_on, held = V.split_runs("sizes", m, m)
    sizes = (1 << 16, 1 << 18, 1 << 20)
    assert {predict_time(four, "all_reduce", s, F.fit(four, fit_on))[2] for s in sizes} == {"tree"}
    q = F.fit(four, fit_on, params=_strong(four))
    assert {predict_time(four, "all_reduce", s, q)[2] for s in sizes} == {"tree"}
    gm = F.geomean_error(e.error for e in F.errors(four, q, held))
    assert gm < 0.07
    monkeypatch.setattr(F, "curve_starts", lambda system, start: [start])
    alone = F.fit(four, fit_on, params=_strong(four))
    alone_gm = F.geomean_error(e.error for e in F.errors(four, alone, held))
    if release == "":
        assert predict_time(four, "all_reduce", 1 << 20, alone)[2] == "ring"
        assert alone_gm > 1.5 * gm
    else:
        assert {predict_time(four, "all_reduce", s, alone)[2] for s in sizes} == {"tree"}
        assert gm <= alone_gm < 0.08
