"""The training-iteration engine: limits against `evaluate`, overlap, placement, determinism."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

import dse
from dse.core.errors import InputError
from dse.core.presets import PRESETS
from dse.sim.evaluate import evaluate
from dse.training.iteration import chunk_count, end_to_end_markdown, end_to_end_rows, iterate, scope_dims
from dse.training.iteration_engine import RULES
from dse.training.workload_load import load_workload
from dse.training.workloads import ALL, DP, MP, Layer, Workload

T4 = "4D-Ring_FC_Ring_SW"
GIB = 2**30


def _wl(*layers: Layer, parallelism: str = "DATA", group: int | None = None) -> Workload:
    return Workload("test", parallelism, tuple(layers), group)


def test_exports() -> None:
    assert dse.iterate is iterate and dse.load_workload is load_workload and dse.IterationResult


def test_no_communication_is_the_compute_sum() -> None:
    wl = _wl(
        Layer("a", 100, None, 0, 200, None, 0, 300, None, 0, 7), Layer("b", 1000, None, 0, 50, None, 0, 60, None, 0, 3)
    )
    r = iterate(wl, T4)
    # layer 0 computes no input gradient (200), and updates are delays after collectives (none here)
    assert r.time_ns == pytest.approx(1510) and r.compute_ns == pytest.approx(1510)
    assert r.comm_ns == 0 and r.exposed_comm_ns == 0 and r.bw_utilization == 0 and r.collectives == ()
    sliced = iterate(replace(wl, layer0_input_gradient=True), T4)
    assert sliced.time_ns == pytest.approx(1710) and sliced.compute_ns == pytest.approx(1710)
    # ASTRA-sim 1.0: one tick per state change (F_a, F_b, W_b, I_b, W_a, then the pass's end)
    a1 = iterate(wl, T4 + "@artifact", cost_model="astra-sim-1")
    assert a1.compute_ns == pytest.approx(1510) and a1.time_ns == pytest.approx(1510 + 5)


@pytest.mark.parametrize("cost_model", ["paper", "astra-sim-1", "astra-sim"])
@pytest.mark.parametrize(("scheduler", "queue"), [("baseline", "fifo"), ("themis", "scf"), ("round_robin", "fifo")])
def test_one_collective_equals_evaluate(cost_model: str, scheduler: str, queue: str) -> None:
    wl = _wl(Layer("only", wg_comm="all_reduce", wg_bytes=GIB))
    r = iterate(wl, T4, scheduler=scheduler, queue=queue, cost_model=cost_model)
    e = evaluate(T4, size=GIB, scheduler=scheduler, queue=queue, cost_model=cost_model)
    model = dse.get_cost_model(cost_model)
    # W_0 starts one state change after F_0; ASTRA-sim 2.x gives F_0 and W_0 (no compute) 1 ns each
    tick = model.rules.workload_tick + 2 * RULES[model.rules.workload_rules].min_ns
    assert r.collectives[0].issue_ns == tick
    assert r.time_ns == pytest.approx(tick + e.time_ns, rel=1e-12)
    exposed = tick + e.time_ns  # F_0 and W_0 compute nothing: their 1 ns is time, not compute
    assert r.compute_ns == 0
    assert r.comm_ns == pytest.approx(e.time_ns, rel=1e-12) and r.exposed_comm_ns == pytest.approx(exposed, rel=1e-12)
    assert r.collectives[0].chunks == 64


@pytest.mark.parametrize("coll", ["all_gather", "reduce_scatter", "all_to_all"])
def test_one_collective_other_kinds_equal_evaluate(coll: str) -> None:
    wl = _wl(Layer("only", fwd_comm=coll, fwd_bytes=256 * 2**20))
    r = iterate(wl, "3D-FC_Ring_SW", scheduler="themis", queue="scf")
    e = evaluate("3D-FC_Ring_SW", collective=coll, size=256 * 2**20, scheduler="themis", queue="scf")
    assert r.time_ns == pytest.approx(e.time_ns, rel=1e-12)


def test_collective_after_compute_is_shifted() -> None:
    wl = _wl(Layer("only", 5000, None, 0, 0, None, 0, 0, "all_reduce", GIB, 0))
    r = iterate(wl, T4, scheduler="baseline", queue="fifo")
    e = evaluate(T4, size=GIB, scheduler="baseline", queue="fifo")
    assert r.time_ns == pytest.approx(5000 + e.time_ns, rel=1e-9)
    assert r.collectives[0].issue_ns == 5000


@pytest.mark.parametrize(("scheduler", "queue"), [("baseline", "fifo"), ("baseline", "scf"), ("round_robin", "fifo")])
def test_chain_of_collectives_is_the_sum_of_evaluates(scheduler: str, queue: str) -> None:
    sizes = [GIB, 256 * 2**20, 96 * 2**20]
    colls = ["all_reduce", "all_gather", "reduce_scatter"]
    wl = _wl(*(Layer(f"l{i}", fwd_comm=c, fwd_bytes=s) for i, (c, s) in enumerate(zip(colls, sizes))))
    r = iterate(wl, T4, scheduler=scheduler, queue=queue)
    want = sum(
        evaluate(T4, collective=c, size=s, scheduler=scheduler, queue=queue).time_ns for c, s in zip(colls, sizes)
    )
    assert r.time_ns == pytest.approx(want, rel=1e-9)
    assert r.comm_ns == pytest.approx(want, rel=1e-9) and r.compute_ns == 0
    runs = r.collectives
    assert [c.layer for c in runs] == ["l0", "l1", "l2"]
    assert all(a.end_ns == pytest.approx(b.issue_ns) for a, b in zip(runs, runs[1:]))


def test_themis_tracker_carries_over_collectives() -> None:
    """The first collective matches evaluate; the tracker's loads then carry into the second."""
    wl = _wl(Layer("a", fwd_comm="all_reduce", fwd_bytes=GIB), Layer("b", fwd_comm="all_reduce", fwd_bytes=GIB))
    r = iterate(wl, T4, scheduler="themis", queue="scf")
    e = evaluate(T4, size=GIB, scheduler="themis", queue="scf").time_ns
    assert r.collectives[0].end_ns == pytest.approx(e, rel=1e-12)
    assert r.time_ns == pytest.approx(r.collectives[1].end_ns)
    assert r.time_ns <= 2 * e * 1.05


def test_overlapped_collective_is_hidden() -> None:
    e = evaluate(T4, size=64 * 2**20, scheduler="themis", queue="scf").time_ns
    big = 10 * e
    wl = _wl(
        Layer("first", 10, None, 0, big, None, 0, big, None, 0, 1),
        Layer("last", 10, None, 0, 10, None, 0, 10, "all_reduce", 64 * 2**20, 5),
    )
    r = iterate(wl, T4)
    compute = 10 + 10 + 10 + 10 + big  # F_first, F_last, W_last, I_last, W_first (no I_first, no updates)
    assert r.exposed_comm_ns == 0
    assert r.time_ns == pytest.approx(compute) and r.compute_ns == pytest.approx(compute)
    assert r.comm_ns == pytest.approx(e, rel=1e-9)


def test_fwd_collective_blocks_the_next_layer() -> None:
    e = evaluate(T4, size=64 * 2**20, scheduler="baseline", queue="fifo").time_ns
    wl = _wl(Layer("a", 100, "all_reduce", 64 * 2**20, 0, None, 0, 0, None, 0, 0), Layer("b", 100))
    r = iterate(wl, T4, scheduler="baseline", queue="fifo")
    assert r.time_ns == pytest.approx(200 + e, rel=1e-9)
    assert r.exposed_comm_ns == pytest.approx(e, rel=1e-9)


def test_ig_collective_blocks_the_previous_layers_ig_not_wg() -> None:
    e = evaluate(T4, size=64 * 2**20, scheduler="baseline", queue="fifo").time_ns
    # DATA runs W_c, I_c, W_b, I_b, W_a: c's ig all-reduce (issued after I_c) overlaps W_b, then I_b waits for it
    wl = _wl(
        Layer("a"),
        Layer("b", 0, None, 0, 10, None, 0, e / 2, None, 0, 0),
        Layer("c", 0, None, 0, 0, "all_reduce", 64 * 2**20, 0, None, 0, 0),
    )
    r = iterate(wl, T4, scheduler="baseline", queue="fifo")
    assert r.time_ns == pytest.approx(e + 10, rel=1e-9)
    assert r.exposed_comm_ns == pytest.approx(e / 2, rel=1e-9)


def test_wg_collective_blocks_only_the_update() -> None:
    e = evaluate(T4, size=64 * 2**20, scheduler="baseline", queue="fifo").time_ns
    wl = _wl(Layer("a", 0, None, 0, 0, None, 0, 0, "all_reduce", 64 * 2**20, 7))
    r = iterate(wl, T4, scheduler="baseline", queue="fifo")
    assert r.time_ns == pytest.approx(e + 7, rel=1e-9)


def test_iterations_chain_and_average() -> None:
    wl = _wl(
        Layer("a", 100, None, 0, 100, None, 0, 100, "all_reduce", 64 * 2**20, 10),
        Layer("b", 100, None, 0, 100, None, 0, 100, None, 0, 10),
    )
    one = iterate(wl, T4)
    three = iterate(wl, T4, iterations=3)
    assert three.compute_ns == pytest.approx(one.compute_ns)
    assert three.total_ns == pytest.approx(3 * three.time_ns)
    # the wg all-reduce of layer a (issued last) delays the next iteration's F_a only
    assert three.time_ns <= one.time_ns * 1.0000001
    assert len(three.collectives) == 3 and {c.iteration for c in three.collectives} == {0, 1, 2}


def test_deterministic() -> None:
    wl = load_workload("transformer:layers=2,hidden=2048,seq=512,batch=4,mp=32")
    a = iterate(wl, T4, iterations=2)
    b = iterate(wl, T4, iterations=2)
    assert a == b


def test_hybrid_placement() -> None:
    topo = PRESETS[T4]
    assert scope_dims(topo, MP, 128) == (0, 1, 2)
    assert scope_dims(topo, DP, 128) == (3,)
    assert scope_dims(topo, ALL, None) == (0, 1, 2, 3)
    assert scope_dims(topo, MP, 4) == (0,) and scope_dims(topo, DP, 1024) == ()
    # no prefix holds the group: a dimension is split (16 x 64 -> 16 x 8 x 8)
    assert scope_dims(PRESETS["2D-SW_SW"], MP, 128) == (0, 1) and scope_dims(PRESETS["2D-SW_SW"], DP, 128) == (2,)
    with pytest.raises(InputError, match="48"):
        scope_dims(topo, MP, 48)  # 4 x 8 = 32 NPUs before dim 2, 48 is no multiple of 32
    with pytest.raises(InputError, match="model_parallel_group"):
        iterate("transformer:layers=1,mp=48", T4)


def test_transformer_file_runs_mp_on_first_three_dims() -> None:
    r = iterate("transformer_1t_fused_only_t", T4)
    dims = {(c.slot, c.dims) for c in r.collectives}
    assert dims == {("fwd", (0, 1, 2)), ("ig", (0, 1, 2)), ("wg", (3,))}
    assert r.time_ns > r.compute_ns and 0 < r.bw_utilization <= 1 and r.logical_topology == ""
    split = iterate("transformer_1t_fused_only_t", "2D-SW_SW")  # 16 x 64 -> 16 x 8 x 8
    assert {(c.slot, c.dims) for c in split.collectives} == {("fwd", (0, 1)), ("ig", (0, 1)), ("wg", (2,))}
    assert split.logical_topology.count("SW(") == 3


def test_sub_topology_collective_matches_evaluate_on_those_dims() -> None:
    wl = _wl(Layer("a", wg_comm="all_reduce", wg_bytes=GIB), parallelism="HYBRID", group=32)
    r = iterate(wl, T4, scheduler="themis", queue="scf")
    sub = dse.Topology(PRESETS[T4].dims[2:])
    assert r.collectives[0].dims == (2, 3)
    assert r.time_ns == pytest.approx(evaluate(sub, size=GIB, scheduler="themis", queue="scf").time_ns, rel=1e-12)


def test_dlrm_all_to_all_runs() -> None:
    r = iterate("large_DLRM_fused", "3D-SW_SW_SW_homo", scheduler="baseline", queue="fifo")
    kinds = {(c.slot, c.collective) for c in r.collectives}
    assert kinds == {("fwd", "all_to_all"), ("ig", "all_to_all"), ("wg", "all_reduce")}


def test_ideal_is_no_slower_and_exact_for_one_collective() -> None:
    wl = _wl(Layer("only", wg_comm="all_reduce", wg_bytes=GIB))
    r = iterate(wl, T4, scheduler="ideal")
    n = PRESETS[T4].npus
    assert r.time_ns == pytest.approx(2 * GIB * (n - 1) / n / PRESETS[T4].total_bandwidth)
    assert r.bw_utilization == pytest.approx(1.0)
    wl2 = load_workload("resnet152")
    assert iterate(wl2, T4, scheduler="ideal").time_ns <= iterate(wl2, T4).time_ns


def test_chunk_rule() -> None:
    assert chunk_count(GIB, 64) == 64 and chunk_count(4 * 2**20, 64) == 4
    assert chunk_count(2**20 - 1, 64) == 1 and chunk_count(100 * 2**20, 16) == 16
    wl = _wl(Layer("small", wg_comm="all_reduce", wg_bytes=3 * 2**20))
    assert iterate(wl, T4).collectives[0].chunks == 3


def test_bad_arguments() -> None:
    with pytest.raises(InputError):
        iterate("resnet152", T4, iterations=0)
    with pytest.raises(InputError):
        iterate("resnet152", T4, queue="lifo")
    with pytest.raises(InputError):
        iterate("resnet152", T4, scheduler="nope")


def test_end_to_end_table_on_two_topologies() -> None:
    rows = end_to_end_rows(topologies=["3D-SW_SW_SW_homo", T4])
    assert {r["workload"] for r in rows} >= {"ResNet-152"}
    for r in rows:
        if "error" in r:
            continue
        assert r["ideal_ns"] <= r["baseline_ns"] * (1 + 1e-9) and r["themis_speedup"] > 0.9
        assert math.isclose(r["themis_speedup"], r["baseline_ns"] / r["themis_ns"])
    md = end_to_end_markdown(rows)
    assert "geomean" in md and "1.49" in md


def test_cli_table_and_json(capsys: pytest.CaptureFixture) -> None:
    import argparse
    import json

    from dse.cli.iterate import add_iterate_parser

    parser = argparse.ArgumentParser(prog="dse")
    add_iterate_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["iterate", "transformer:layers=1,mp=32", "--topology", T4, "--json"])
    assert args.func(args) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["time_ns"] > 0 and obj["collective_count"] == 5  # no input-gradient collective for layer 0
    args = parser.parse_args(
        ["iterate", "resnet152", "-t", T4, "--collectives", "--scheduler", "baseline", "--queue", "fifo"]
    )
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "iteration time" in out and "all_reduce" in out


def test_dlrm_embedding_all_to_all_overlaps_the_bottom_mlp() -> None:
    size = 64 * 2**20
    e = evaluate(T4, collective="all_to_all", size=size, scheduler="baseline", queue="fifo").time_ns
    layers = (
        Layer("emb", 10, "all_to_all", size, 10, "all_to_all", size, 0, None, 0, 0),
        Layer("bottom", 2 * e, None, 0, 2 * e, None, 0, 0, None, 0, 0),
        Layer("top", 10, None, 0, 10, None, 0, 0, None, 0, 0),
    )
    plain = iterate(Workload("d", "HYBRID_DLRM", layers), T4, scheduler="baseline", queue="fifo")
    dlrm = iterate(Workload("d", "HYBRID_DLRM", layers, dlrm_last_bottom=1), T4, scheduler="baseline", queue="fifo")
    assert plain.exposed_comm_ns == pytest.approx(e, rel=1e-9)  # the fwd all-to-all gates the bottom MLP
    assert [c.slot for c in plain.collectives] == ["fwd"]  # layer 0 has no input gradient to send
    assert dlrm.exposed_comm_ns == 0 and dlrm.time_ns == pytest.approx(dlrm.compute_ns)
    runs = {c.slot: c for c in dlrm.collectives}
    assert runs["ig"].issue_ns == pytest.approx(10 + 2 * e + 10 + 10)  # after I_top, not after I_emb


def test_dlrm_file_reads_last_bottom_layer() -> None:
    assert load_workload("large_DLRM_fused").dlrm_last_bottom == 7


def test_end_to_end_never_drops_a_workload_silently(monkeypatch: pytest.MonkeyPatch) -> None:
    odd = "SW(6,100,1)_SW(200,100,1)"  # 128 is neither 6 x k nor a split of 200 after 6
    rows = end_to_end_rows(topologies=[odd])
    assert [r["workload"] for r in rows] == ["ResNet-152", "GNMT", "DLRM", "Transformer-1T"]
    (skipped,) = [r for r in rows if "error" in r]
    assert skipped["workload"] == "Transformer-1T" and "128" in skipped["error"]
    md = end_to_end_markdown(rows)
    assert f"| Transformer-1T | {odd} | not run |" in md and f"- Transformer-1T on {odd}: " in md
    assert "| Transformer-1T | 0 of 1 |" in md
    import dse.training.iteration

    monkeypatch.setitem(dse.training.iteration.END_TO_END, "GNMT", "no_such_workload")
    with pytest.raises(InputError, match="no_such_workload"):
        end_to_end_rows(topologies=["2D-SW_SW"])
