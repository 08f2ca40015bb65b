"""Per-dimension sweep axes (dse.explore.sweep.axes): bandwidth and latency vectors, the split
generator (counts from closed forms, order, constraints, its limit checked before it enumerates),
bwK/latK products, the CSV's per-dimension columns and units, resume, and every refusal."""

import itertools
import json
import math

import pytest

import dse
from dse.core.errors import InputError
from dse.core.topology import parse_topology
from dse.explore.sweep import axes as sweep_axes
from dse.explore.sweep.axes import count_splits, exact_notation, splits
from dse.explore.sweep.file import parse_sweep
from dse.explore.sweep.sweeps import columns, read_rows, run_sweep

T2 = "Ring(4,100,500)_SW(8,50,1000)"
T3 = "Ring(4,100,500)_FC(4,80,700)_SW(8,50,1000)"


def _sweep(**keys):
    return parse_sweep({"size": "1MB", "chunks": 4, **keys})


def _bws(sweep):
    return [tuple(parse_topology(p.topology).bandwidths) for p in sweep.points]


# ------------------------------------------------------------------ the generator


@pytest.mark.parametrize("k, n, lo, hi", [(20, 4, 1, 20), (20, 4, 1, 10), (7, 3, 0, 3), (10, 2, 4, 6), (9, 3, 4, 9)])
def test_split_count_is_the_closed_form_and_the_enumeration(k, n, lo, hi):
    brute = [p for p in itertools.product(range(lo, hi + 1), repeat=n) if sum(p) == k]
    got = list(splits(k, n, lo, hi))
    assert count_splits(k, n, lo, hi) == len(brute) == len(got)
    assert got == sorted(brute)  # ascending lexicographic, each once


def test_the_issue_generator_makes_969_splits_in_order():
    s = _sweep(topology="4D-Ring_FC_Ring_SW", bandwidth={"total": 800, "step": 40, "min": 40})
    bws = _bws(s)
    # splits of 20 steps into 4 parts of at least 1 step: C(20 - 1, 4 - 1)
    assert len(bws) == math.comb(19, 3) == 969
    assert bws[0] == (40.0, 40.0, 40.0, 680.0) and bws[1] == (40.0, 40.0, 80.0, 640.0)
    assert bws[-1] == (680.0, 40.0, 40.0, 40.0) and bws == sorted(bws) and len(set(bws)) == 969
    assert all(sum(b) == 800.0 for b in bws)
    # the shape and latencies stay the design's; the CSV names the design as the file does
    assert {parse_topology(p.topology).shape for p in s.points} == {(4, 8, 4, 8)}
    assert {row[0] for row in s.params} == {"4D-Ring_FC_Ring_SW"}


def test_min_max_and_a_decimal_step():
    s = _sweep(topology=T3, bandwidth={"total": 0.8, "step": 0.1, "min": 0.2, "max": 0.4})
    # 8 tenths in 3 parts of 2 to 4 tenths: the 3 orders of 2+2+4 and the 3 of 2+3+3
    want = [p for p in itertools.product(range(2, 5), repeat=3) if sum(p) == 8]
    assert _bws(s) == [tuple(j / 10 for j in p) for p in sorted(want)]
    assert count_splits(8, 3, 2, 4) == len(want) == 6


def test_constraints_filter_the_splits():
    cons = ["bw0 >= bw1", "bw1 + bw2 <= 400"]
    s = _sweep(topology=T3, bandwidth={"total": 800, "step": 100, "constraints": cons})
    grid = [p for p in itertools.product(range(1, 9), repeat=3) if sum(p) == 8]
    want = [tuple(100.0 * x for x in p) for p in grid if p[0] >= p[1] and p[1] + p[2] <= 4]
    assert _bws(s) == sorted(want) and 0 < len(want) < len(grid)


def test_an_astronomical_generator_is_refused_before_it_enumerates(monkeypatch):
    def never(*a):
        raise AssertionError("enumerated")

    monkeypatch.setattr(sweep_axes, "splits", never)
    gen = {"total": 1_000_000, "step": 1}  # C(10^6 - 1, 3) splits over 4 dims: about 1.7e17
    with pytest.raises(InputError, match=f"makes {math.comb(999_999, 3):,} splits"):
        _sweep(topology="4D-Ring_FC_Ring_SW", bandwidth=gen)
    with pytest.raises(InputError, match="splits"):  # constraints do not make it enumerate either
        _sweep(topology="4D-Ring_FC_Ring_SW", bandwidth={**gen, "constraints": ["bw0 == 5"]})
    # within the limit alone, but not times the other axes (3 sizes x 2 chunks), without constraints
    monkeypatch.setattr(sweep_axes, "MAX_SWEEP_POINTS", 5000)
    with pytest.raises(InputError, match=r"969 splits \(5,814 points"):
        _sweep(topology="4D-Ring_FC_Ring_SW", bandwidth={"total": 800, "step": 40}, size=[1, 2, 3], chunks=[2, 4])


def test_with_constraints_the_generator_stops_as_soon_as_it_passes_the_limit(monkeypatch):
    made = []

    def counted(*a):
        for p in splits(*a):
            made.append(p)
            yield p

    monkeypatch.setattr(sweep_axes, "splits", counted)
    monkeypatch.setattr(sweep_axes, "MAX_SWEEP_POINTS", 1000)
    gen = {"total": 800, "step": 40, "constraints": ["bw0 <= 800"]}  # keeps every one of 969
    with pytest.raises(InputError, match=r"more than 500 splits"):
        _sweep(topology="4D-Ring_FC_Ring_SW", bandwidth=gen, chunks=[2, 4])  # 2 points per split
    assert len(made) == 501  # not 969: it stopped at the first split past the limit


# ------------------------------------------------------------------ vectors, bwK, latK


def test_vectors_and_a_list_of_them():
    s = _sweep(
        topology=[T3, "3D-FC_Ring_SW"], bandwidth=[[10, 20, 30], [1.5, 2.5, 3.5]], latency=[[1, 2, 3], [0, 0, 0]]
    )
    assert len(s.points) == 2 * 2 * 2
    t = [parse_topology(p.topology) for p in s.points]
    assert [x.bandwidths for x in t[:4]] == [(10.0, 20.0, 30.0)] * 2 + [(1.5, 2.5, 3.5)] * 2
    assert [tuple(d.latency for d in x.dims) for x in t[:2]] == [(1.0, 2.0, 3.0), (0.0, 0.0, 0.0)]
    assert t[0].shape == (4, 4, 8) and t[4].shape == (8, 16, 8)
    assert t[4].dims[0].links == 7  # what a vector does not name stays the design's
    assert [row[0] for row in s.params] == [T3] * 4 + ["3D-FC_Ring_SW"] * 4


def test_bwk_and_latk_multiply_in_key_order_and_keep_the_other_dims():
    s = _sweep(topology=T3, bw2=[5, 6, 7], bw0=[100, 200], lat1=9)
    t = [parse_topology(p.topology) for p in s.points]
    assert [x.bandwidths for x in t] == [(b0, 80.0, b2) for b0 in (100.0, 200.0) for b2 in (5.0, 6.0, 7.0)]
    assert {tuple(d.latency for d in x.dims) for x in t} == {(500.0, 9.0, 1000.0)}


def test_the_topology_column_reads_back_bit_for_bit():
    bw = [123.456789012, 1 / 3, 2e-5]
    s = _sweep(topology=T3, bandwidth=bw, latency=[0.1 + 0.2, 7, 1e6 + 0.5])
    topo = parse_topology(s.params[0][1])
    assert list(topo.bandwidths) == bw and topo.dims[0].latency == 0.1 + 0.2 and topo.dims[2].latency == 1e6 + 0.5
    assert s.points[0].topology == s.params[0][1] == exact_notation(topo)
    # the exact notation is short where that is exact, and in full where it is not; the default is short
    assert topo.notation(exact=True).startswith("Ring(4,123.456789012,0.30000000000000004)")
    assert parse_topology(topo.notation()).bandwidths != topo.bandwidths


# ------------------------------------------------------------------ the CSV


def test_csv_columns_units_and_empty_cells(tmp_path):
    s = parse_sweep({"topology": [T2, T3], "size": "1MB", "chunks": 4, "schedules": ["baseline+fifo"], "bounds": True})
    assert columns(s) == (
        "point", "design", "topology", "collective", "size_bytes", "chunks", "scheduler", "queue", "cost_model",
        "latency_mode", "active_chunks", "seed", "bw0_GBps", "bw1_GBps", "bw2_GBps", "lat0_ns", "lat1_ns", "lat2_ns",
        "total_bw_GBps", "time_ns", "bw_utilization_pct", "algbw_GBps", "busbw_GBps", "bound_ns", "gap_pct",
    )  # fmt: skip
    out = tmp_path / "r.csv"
    run_sweep(s, out)
    two, three = read_rows(out)
    assert (two["design"], two["topology"]) == (T2, T2) and (two["bw2_GBps"], two["lat2_ns"]) == ("", "")
    assert [float(three[f"bw{k}_GBps"]) for k in range(3)] == [100.0, 80.0, 50.0]
    assert [float(three[f"lat{k}_ns"]) for k in range(3)] == [500.0, 700.0, 1000.0]
    assert float(two["total_bw_GBps"]) == 150.0 and float(three["total_bw_GBps"]) == 230.0
    for r, t in ((two, T2), (three, T3)):
        res = dse.evaluate(t, size="1MB", chunks=4, scheduler="baseline", queue="fifo")
        assert float(r["time_ns"]) == res.time_ns and float(r["busbw_GBps"]) == res.busbw_GBps
        assert float(r["bw_utilization_pct"]) == 100 * res.bw_utilization and 0 < res.bw_utilization <= 1
        gap = 100 * (res.time_ns / float(r["bound_ns"]) - 1)
        assert float(r["gap_pct"]) == pytest.approx(gap, rel=1e-12) and gap >= -1e-9
    assert out.read_text().splitlines()[0].endswith(",crc")


def test_a_bandwidth_sweep_resumes_without_doubling(tmp_path):
    s = _sweep(topology=T3, bandwidth={"total": 300, "step": 50}, chunks=[2, 4])  # 10 splits x 2
    whole, out = tmp_path / "whole.csv", tmp_path / "r.csv"
    run_sweep(s, whole)
    lines = whole.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"".join(lines[:8]) + lines[8][:30])  # 7 rows, the 8th cut by a kill
    with pytest.warns(UserWarning, match="repaired a last line cut short"):
        c = run_sweep(s, out, jobs=2)
    assert (c["points"], c["done_before"], c["evaluated"]) == (20, 7, 13)
    assert sorted(out.read_bytes().splitlines()) == sorted(whole.read_bytes().splitlines())
    assert run_sweep(s, out)["evaluated"] == 0 and len(read_rows(out)) == 20


# ------------------------------------------------------------------ refusals


REFUSED = [
    ({"bandwidth": [1, 2, 3], "bw0": 5}, "sweep.bw0: given with sweep.bandwidth"),
    ({"latency": [1, 2, 3], "lat2": [5]}, "sweep.lat2: given with sweep.latency"),
    ({"bandwidth": [1, 2]}, f"sweep.bandwidth: topology '{T3}' has 3 dimensions, the vectors 2 values"),
    ({"latency": [[1, 2, 3], [1, 2]]}, "sweep.latency[1]: 2 values, the first vector 3"),
    ({"bw3": 5}, f"sweep.bw3: topology '{T3}' has 3 dimensions, bw3 needs at least 4"),
    ({"bandwidth": [1, -2, 3]}, "sweep.bandwidth[1]: -2 is out of range"),
    (
        {"bandwidth": [[1, 2, 3], [1, 2e10, 3]]},
        "sweep.bandwidth[1][1]: 20000000000.0 is out of range (allowed: 1e-09 to 1e+09 GB/s)",
    ),
    ({"bandwidth": [1, 1e-12, 3]}, "sweep.bandwidth[1]: 1e-12 GB/s is too small"),
    ({"latency": [1, -1, 3]}, "sweep.latency[1]: -1 is out of range (allowed: 0 to 1e+15 ns)"),
    ({"lat0": "fast"}, "sweep.lat0: cannot read 'fast' as a number"),
    ({"bandwidth": 100}, "sweep.bandwidth: 100 is not a list"),
    ({"bandwidth": []}, "sweep.bandwidth: an empty list"),
    ({"bw1": []}, "sweep.bw1: empty list"),
    ({"latency": {"total": 5, "step": 1}}, "sweep.latency: a table"),
    ({"bandwidth": {"total": 800, "stp": 40}}, "sweep.bandwidth.stp: unknown key"),
    ({"bandwidth": {"step": 40}}, "sweep.bandwidth.total: missing"),
    (
        {"bandwidth": {"total": 810, "step": 40}},
        "sweep.bandwidth.total: 810 GB/s is not a whole multiple of step 40 GB/s",
    ),
    ({"bandwidth": {"total": 800, "step": 40, "min": 300}}, "no split of 800 GB/s over 3 dimensions"),
    ({"bandwidth": {"total": 800, "step": 100, "constraints": ["bw0 >= 900"]}}, "none of the 21 splits meets them"),
    ({"bandwidth": {"total": 800, "step": 100, "constraints": ["bw7 >= 1"]}}, "unknown variable 'bw7'"),
    ({"bandwidth": {"total": 800, "step": 100, "constraints": "bw0 >= 1"}}, "sweep.bandwidth.constraints"),
    ({"bandwidth": {"total": 800, "step": 40}, "topology": [T3, T2]}, "a generator for topologies of different"),
    ({"bw01": 5}, "sweep.bw01: unknown key"),
]


def _toml(v):
    """A TOML value: JSON's strings, numbers and arrays are TOML's; a dict is an inline table."""
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + " }"
    return json.dumps(v)


@pytest.mark.parametrize("keys, message", REFUSED)
def test_refusals_are_one_line_exit_2_and_write_nothing(tmp_path, run_cli, keys, message):
    table = {"topology": T3, "size": "1MB", **keys}
    f = tmp_path / "s.toml"
    f.write_text("[sweep]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in table.items()))
    out = tmp_path / "r.csv"
    code, stdout, err = run_cli("sweep", str(f), "--out", str(out))
    assert code == 2 and stdout == "" and err.count("\n") == 1 and "Traceback" not in err
    assert message in err, err
    assert not out.exists()
