"""Placements: a workload's groups on chosen dimensions and on parts of a dimension (issue 21).

- a collective on k of a dimension's P NPUs is that dimension's algorithm on k NPUs at its
  per-NPU bandwidth: closed forms (2(k-1)/k · S / B for an all-reduce with one chunk, no latency)
  and `dse.evaluate` on the cut topology, for each kind;
- groups that share a physical dimension queue for it (their times add), where the hybrid split of
  ASTRA-sim 1.0 would give each logical dimension its own links;
- whole-dimension placements equal the DATA and HYBRID scopes;
- the TOML form round-trips, and bad placements are one `InputError` line.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import dse
from dse.core.errors import InputError
from dse.core.topology import Dim, Topology
from dse.training.iteration import iterate
from dse.training.placement import Placement
from dse.training.workload_formats import to_toml
from dse.training.workload_read import load_toml_text
from dse.training.workloads import Layer, Workload

S = 2**24
T = Topology((Dim("ring", 4, 100.0, 0.0), Dim("fc", 8, 70.0, 0.0), Dim("switch", 4, 50.0, 0.0)))
GPT3 = {"Forward": [4, 4, -1, -1], "InputGrad": [4, 4, -1, -1], "WeightGrad": [-1, 2, 4, 32]}


def _one(slot: str, coll: str, placement: Placement, size: int = S) -> Workload:
    layer = Layer("only", **{f"{slot}_comm": coll, f"{slot}_bytes": size})
    return Workload("one", "DATA", (layer,), placement=placement, layer0_input_gradient=True)


@pytest.mark.parametrize("dim,k", [(0, 2), (1, 4), (1, 2), (2, 2), (1, 8)])
def test_an_all_reduce_on_part_of_a_dimension_is_the_closed_form(dim: int, k: int) -> None:
    groups = tuple(k if d == dim else 0 for d in range(3))
    r = iterate(_one("fwd", "all_reduce", Placement(groups, (0, 0, 0), (0, 0, 0))), T, chunks=1)
    bw = T.dims[dim].bandwidth
    assert r.time_ns == pytest.approx(2 * (k - 1) / k * S / bw, rel=1e-12)
    assert [c.dims for c in r.collectives] == [(dim,)]


@pytest.mark.parametrize("coll", ["all_reduce", "reduce_scatter", "all_gather", "all_to_all"])
@pytest.mark.parametrize("groups", [(2, 4, 0), (0, 2, 4), (4, 2, 2), (2, 0, 2)])
def test_a_group_on_parts_of_dimensions_equals_evaluate_on_the_cut_topology(coll: str, groups: tuple) -> None:
    lat = Topology(tuple(Dim(d.kind, d.npus, d.bandwidth, 300.0 * (i + 1)) for i, d in enumerate(T.dims)))
    r = iterate(_one("ig", coll, Placement((0, 0, 0), groups, (0, 0, 0))), lat, chunks=16)
    cut = Topology(tuple(Dim(d.kind, k, d.bandwidth, d.latency) for d, k in zip(lat.dims, groups) if k))
    e = dse.evaluate(cut, collective=coll, size=S, chunks=16, scheduler="themis", queue="scf")
    assert r.time_ns == pytest.approx(e.time_ns, rel=1e-12)
    assert r.collectives[0].dims == tuple(d for d, k in enumerate(groups) if k)


def test_groups_on_one_physical_dimension_queue_for_it() -> None:
    # layer 1's ig (4 of the FC's 8) and wg (2 of them) are issued together and share dim 1's links
    wl = Workload(
        "two",
        "DATA",
        (Layer("a"), Layer("b", ig_comm="all_reduce", ig_bytes=S, wg_comm="all_reduce", wg_bytes=S)),
        placement=Placement((0, 0, 0), (0, 4, 0), (0, 2, 0)),
    )
    r = iterate(wl, T, chunks=1)
    alone = [2 * (k - 1) / k * S / 70.0 for k in (4, 2)]
    assert r.time_ns == pytest.approx(sum(alone), rel=1e-12)
    assert {c.slot: c.issue_ns for c in r.collectives} == {"ig": 0.0, "wg": 0.0}


def test_whole_dimensions_equal_the_data_and_hybrid_scopes() -> None:
    topo = "4D-Ring_FC_Ring_SW"
    wl = dse.load_workload("transformer:layers=2,hidden=2048,seq=512,batch=4,mp=32")
    whole = Placement((4, 8, 0, 0), (4, 8, 0, 0), (0, 0, 4, 8))
    # the strategy still decides the loop (the order a layer issues its ig and wg collectives)
    assert iterate(Workload("p", "HYBRID", wl.layers, placement=whole), topo) == iterate(
        Workload("p", "HYBRID", wl.layers, 32), topo
    )
    every = Placement((4, 8, 4, 8), (4, 8, 4, 8), (4, 8, 4, 8))
    data = Workload("p", "DATA", wl.layers)
    assert iterate(Workload("p", "DATA", wl.layers, placement=every), topo).time_ns == iterate(data, topo).time_ns


def test_libra_communicator_form_and_the_toml_round_trip() -> None:
    p = Placement.parse(GPT3)
    assert (p.fwd, p.ig, p.wg) == ((4, 4, 0, 0), (4, 4, 0, 0), (0, 2, 4, 32))
    assert p.parts("wg").dims == (1, 2, 3)
    wl = Workload("gpt", "DATA", (Layer("a", wg_comm="all_reduce", wg_bytes=S),), placement=p)
    back = load_toml_text(to_toml(wl), "gpt.toml")
    assert back.placement == p and back.layers == wl.layers
    topo = Topology((Dim("ring", 4, 250.0, 20.0), Dim("fc", 8, 200.0, 700.0), Dim("ring", 4, 100.0, 700.0)))
    topo = Topology(topo.dims + (Dim("switch", 32, 50.0, 1700.0),))
    p.check(topo)
    r = iterate(back, topo)
    assert r.collectives[0].dims == (1, 2, 3) and r.logical_topology == ""


@pytest.mark.parametrize(
    "raw,match",
    [
        ({"fwd": [4, 4], "ig": [4, 4]}, "placement.wg: missing"),
        ({"fwd": [4, 4], "ig": [4, 4], "wg": [4, 4], "bwd": [1, 1]}, "unknown slot"),
        ({"fwd": [4, -2], "ig": [4, 4], "wg": [4, 4]}, "not a group size"),
        ({"fwd": [4, 4], "ig": [4], "wg": [4, 4]}, "different numbers of dimensions"),
        ({"fwd": "4,4", "ig": [4, 4], "wg": [4, 4]}, "not a list"),
        ({"Forward": [4], "fwd": [4], "ig": [4], "wg": [4]}, "given twice"),
    ],
)
def test_bad_placements_are_one_line(raw: dict, match: str) -> None:
    with pytest.raises(InputError, match=match):
        Placement.parse(raw)


def test_a_placement_must_fit_the_topology() -> None:
    with pytest.raises(InputError, match="a group of 3 NPUs in dimension 1 of 8"):
        iterate(_one("fwd", "all_reduce", Placement((0, 3, 0), (0, 0, 0), (0, 0, 0))), T)
    with pytest.raises(InputError, match="2 entries for 3 dimensions"):
        iterate(_one("fwd", "all_reduce", Placement((0, 2), (0, 0), (0, 0))), T)
    with pytest.raises(InputError, match="given with a model_parallel_group"):
        Workload("x", "HYBRID", (Layer("a"),), 4, placement=Placement((2,), (2,), (2,)))


def test_dse_iterate_runs_a_toml_placement_and_refuses_a_bad_one(tmp_path) -> None:
    good = tmp_path / "w.toml"
    wl = _one("wg", "all_reduce", Placement((0, 4, 0), (0, 4, 0), (2, 2, 4)))
    good.write_text(to_toml(wl))
    topo = T.notation()
    out = subprocess.run([sys.executable, "-m", "dse", "iterate", str(good), "--topology", topo], capture_output=True)
    assert out.returncode == 0, out.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text(to_toml(wl).replace("wg = [2, 2, 4]", "wg = [2, 3, 4]"))
    out = subprocess.run([sys.executable, "-m", "dse", "iterate", str(bad), "--topology", topo], capture_output=True)
    err = out.stderr.decode()
    assert out.returncode == 2 and err.count("\n") == 1 and "placement.wg" in err and "Traceback" not in err


def test_a_whole_dimension_placement_exports_to_chakra_and_a_part_is_refused(tmp_path) -> None:
    from dse.training.chakra.read import load_trace
    from dse.training.chakra.write import export_chakra

    whole = Workload("w", "HYBRID", _one("wg", "all_reduce", Placement((0, 0, 0), (0, 0, 0), (4, 0, 0))).layers)
    whole = Workload("w", "HYBRID", whole.layers, placement=Placement((4, 8, 0), (4, 8, 0), (0, 0, 4)))
    export_chakra(whole, tmp_path / "w", topology=T, npus=1)
    back = load_trace(tmp_path / "w")
    a, b = iterate(whole, T), iterate(back, T)
    assert a.time_ns == b.time_ns and [c.dims for c in a.collectives] == [c.dims for c in b.collectives] == [(2,)]
    part = Workload("p", "HYBRID", whole.layers, placement=Placement((4, 4, 0), (4, 4, 0), (0, 2, 4)))
    with pytest.raises(InputError, match="the fwd group spans 4 of dimension 1's 8 NPUs"):
        export_chakra(part, tmp_path / "p", topology=T, npus=1)
    assert not list(tmp_path.glob("p*"))
    with pytest.raises(InputError, match="topology"):
        export_chakra(whole, tmp_path / "q", npus=1)


def test_dse_iterate_takes_a_placement_file(tmp_path) -> None:
    wl = tmp_path / "w.toml"
    wl.write_text(to_toml(Workload("w", "HYBRID", _one("fwd", "all_reduce", Placement((2,), (2,), (2,))).layers, 4)))
    pl = tmp_path / "p.toml"
    pl.write_text("[placement]\nfwd = [0, 4, 0]\nig = [0, 4, 0]\nwg = [4, 0, 2]\n")
    cmd = [sys.executable, "-m", "dse", "iterate", str(wl), "-t", T.notation(), "--json", "--collectives"]
    out = subprocess.run([*cmd, "--placement", str(pl)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    import json

    got = json.loads(out.stdout)
    assert [c["dims"] for c in got["collectives"]] == [[1]]
    assert got["time_ns"] == pytest.approx(2 * 3 / 4 * S / 70.0, rel=1e-12)
    pl.write_text("[placement]\nfwd = [0, 4]\nig = [0, 4, 0]\nwg = [4, 0, 2]\n")
    out = subprocess.run([*cmd, "--placement", str(pl)], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "different numbers of dimensions" in out.stderr


def test_libras_communicator_file_is_a_placement_file(tmp_path) -> None:
    from dse.training.placement_read import load_placement

    f = tmp_path / "gpt.yml"
    f.write_text("# GPT-3\nForward: [ 4, 4, -1, -1 ]\nInputGrad: [ 4, 4, -1, -1 ]\nWeightGrad: [ -1, 2, 4, 32 ]\n")
    assert load_placement(f) == Placement.parse(GPT3)
    f.write_text("Forward: [ 4, 4, -1, -1 ]\nInputGrad: [ 4, 4, -1, -1 ]\nWeightGrad: [ -1, 2, x, 32 ]\n")
    with pytest.raises(InputError, match=r"gpt.yml:3"):
        load_placement(f)


# ----- the shape a placement needs, in its errors and in `dse workload list` (issue 36, item 7) ---
def _libra_files() -> dict[str, dict]:
    """LIBRA's bundled workloads, as the files say: name -> the TOML table."""
    import tomllib

    from dse.training.workload_load import libra_workloads

    return {name: tomllib.loads(path.read_text()) for name, path in libra_workloads().items()}


def test_a_placements_shape_is_its_groups_times_each_other_and_libras_networks() -> None:
    """On `shape()` the model-parallel groups (fwd, ig) tile the NPUs and the data-parallel ones (wg)
    too: per dimension the two groups multiply to its NPUs. LIBRA's files name their networks."""
    import math
    import tomllib

    from dse.training.workload_load import LIBRA_DIR

    networks = tomllib.loads((LIBRA_DIR / "networks.toml").read_text())
    files = _libra_files()
    assert len(files) == 8
    for name, table in files.items():
        p = Placement.parse(table["placement"])
        mp = math.prod(max(k, 1) for k in p.fwd)
        dp = math.prod(max(k, 1) for k in p.wg)
        assert math.prod(p.shape()) == mp * dp == math.prod(networks[name[-2:]]["npus"])
        assert list(p.shape()) == networks[name[-2:]]["npus"], name
        assert all(n % m == 0 for n, m in zip(p.shape(), p.multiples()))
    p = Placement.parse(GPT3)
    assert p.shape() == (4, 8, 4, 32) and p.multiples() == (4, 4, 4, 32) and all(p.involved())
    for shape in ((4, 8, 4, 32), (4, 4, 4, 32), (8, 8, 4, 64)):  # the shape and any of multiples pass
        p.check(Topology(tuple(Dim("ring", n, 100.0, 0.0) for n in shape)))
    q = Placement((0, 2), (0, 2), (0, 0))
    assert q.shape() == (1, 2) and q.involved() == (False, True) and "shape *x2" in q.fits_text()


GPT3_4D = "libra_gpt_3_4d"
#: 4D-Ring_FC_Ring_SW is 4x8x4x8: GPT-3's 4D placement needs 32 NPUs in dimension 3
OTHER_SHAPE = "4D-Ring_FC_Ring_SW"


def test_a_placement_error_names_the_shape_needed_the_shape_given_and_placement() -> None:
    from dse.training.workload_load import load_workload

    with pytest.raises(InputError) as e:
        iterate(load_workload(GPT3_4D), OTHER_SHAPE)
    text = str(e.value)
    assert "placement.wg: a group of 32 NPUs in dimension 3 of 8" in text
    assert "4D-Ring_FC_Ring_SW is 4x8x4x8" in text  # the shape given
    assert "a topology of shape 4x8x4x32" in text and "multiples of 4x4x4x32" in text  # the shape needed
    assert "--placement FILE" in text and "\n" not in text
    with pytest.raises(InputError) as e:  # the 3D placement on a 4D topology: the count of dimensions
        iterate(load_workload("libra_gpt_3_3d"), OTHER_SHAPE)
    text = str(e.value)
    assert "placement.fwd: 3 entries for 4 dimensions: 4D-Ring_FC_Ring_SW is 4x8x4x8" in text
    assert "a topology of shape 16x8x32" in text and "--placement FILE" in text
    assert "multiples" not in text  # 16x8x32 is already the least: every dimension is one group times another


@pytest.mark.parametrize("workload,shape", [(GPT3_4D, "4x8x4x32"), ("libra_gpt_3_3d", "16x8x32")])
def test_dse_iterate_on_another_shape_is_one_line_exit_2(workload: str, shape: str) -> None:
    cmd = [sys.executable, "-m", "dse", "iterate", workload, "--topology", OTHER_SHAPE]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1
    assert out.stderr.startswith("dse: error: ") and "Traceback" not in out.stderr
    for words in (f"a topology of shape {shape}", "is 4x8x4x8", "--placement FILE"):
        assert words in out.stderr
    # named as the user named it, not by its path inside the package
    assert out.stderr.startswith(f"dse: error: bundled workload {workload}: ") and "dse/data" not in out.stderr


def test_what_the_error_advises_runs(tmp_path) -> None:
    """--placement with groups that fit 4x8x4x8 runs the bundled workload there; a topology of the
    shape named runs it as bundled."""
    pl = tmp_path / "p.toml"
    pl.write_text("[placement]\nfwd = [4, 4, 0, 0]\nig = [4, 4, 0, 0]\nwg = [0, 2, 4, 8]\n")
    base = [sys.executable, "-m", "dse", "iterate", GPT3_4D, "--json"]
    out = subprocess.run([*base, "--topology", OTHER_SHAPE, "--placement", str(pl)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    shaped = "Ring(4,375,20)_FC(8,175,700)_Ring(4,150,700)_SW(32,100,1700)"  # 4x8x4x32
    out = subprocess.run([*base, "--topology", shaped], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
