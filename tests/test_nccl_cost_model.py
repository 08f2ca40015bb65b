"""The `nccl` cost model wired into dse: evaluate, compare, bounds, iterate, messages, sweeps, the CLI."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import pytest

from dse.core.errors import InputError
from dse.core.topology import parse_topology
from dse.costs import NcclModel, get_cost_model
from dse.costs.nccl.calibration import default_calibration
from dse.costs.nccl.fit import transfer
from dse.costs.nccl.model import default_params, predict
from dse.costs.nccl.system import system_of
from dse.costs.p2p import message_ns
from dse.sim.evaluate import compare, evaluate
from dse.training.iteration import iterate

TOPO = "SW(8,450,0)_SW(2,50,0)"
SIZES = (8, 4096, 1 << 20, 64 << 20, 1 << 30)


def _dse(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dse", *args], capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize("coll", ["all_reduce", "reduce_scatter", "all_gather", "all_to_all"])
@pytest.mark.parametrize("size", SIZES)
def test_evaluate_is_the_closed_form_on_the_topologys_system(coll: str, size: int) -> None:
    topo = parse_topology(TOPO)
    system = system_of(topo, generation="hopper", network="ib", cpu="other")
    pred = predict(system, {"all_to_all": "alltoall"}.get(coll, coll), size)
    r = evaluate(topo, collective=coll, size=size, cost_model="nccl")
    assert r.time_ns == pred.time_ns
    assert r.algbw_GBps == pytest.approx(size / pred.time_ns, rel=1e-12)  # nccl-tests: algbw = size / time
    assert r.busbw_GBps == pytest.approx(pred.busbw_GBps, rel=1e-12)
    assert r.orders == () and r.simulated_chunks == 0
    assert sum(r.dim_bytes) == pytest.approx(r.bytes_sent, rel=1e-12)  # the per-dim split sums to the nominal


def test_schedulers_queues_and_chunks_do_not_change_an_nccl_time() -> None:
    times = {
        evaluate(TOPO, size=1 << 26, cost_model="nccl", scheduler=s, queue=q, chunks=c).time_ns
        for s in ("baseline", "themis", "random")
        for q in ("fifo", "scf")
        for c in (1, 64)
    }
    assert len(times) == 1
    assert len(compare(TOPO, size=1 << 26, cost_model="nccl")) == 1


def test_a_calibrated_machine_carries_its_fitted_tiers_onto_each_system() -> None:
    one_node = parse_topology("SW(8,450,0)")
    base = default_calibration(one_node, generation="ampere")
    fitted = dataclasses.replace(base.params, e_ring_intra=0.5, ring_intra_hop_ns=(900.0, 2000.0, 4000.0))
    model = NcclModel(dataclasses.replace(base, params=fitted, rows=1), label="nccl:test")
    two = parse_topology(TOPO)
    system, params = model.system(two)
    assert system.generation == "ampere" and system.nodes == 2
    assert params == transfer(fitted, default_params(system), "intra")  # the fabric's, onto two nodes
    assert params is not None and params.e_ring_inter == default_params(system).e_ring_inter
    r = evaluate(two, size=1 << 30, cost_model=model)
    assert r.cost_model == "nccl:test"
    assert r.time_ns == predict(system, "all_reduce", 1 << 30, params=params).time_ns


def test_a_bundled_machine_is_a_cost_model_by_name() -> None:
    r = evaluate("HGX-H100", size=1 << 30, cost_model="nccl:hgx-h100")
    assert r.cost_model == "nccl:hgx-h100"
    assert get_cost_model("nccl:hgx-h100") is get_cost_model("nccl:hgx-h100")  # one instance per name
    out = _dse("evaluate", "HGX-H100", "--size", "1GiB", "--cost-model", "nccl", "--calibration", "HGX-H100", "--json")
    assert out.returncode == 0, out.stderr
    assert '"cost_model": "nccl:HGX-H100"' in out.stdout


def test_a_group_on_outer_dimensions_is_one_gpu_a_node() -> None:
    model = get_cost_model("nccl")
    outer = parse_topology("SW(4,50,0)_SW(2,25,0)")
    system, _ = model.system(outer, fabric=False)  # type: ignore[attr-defined]
    assert (system.gpus_per_node, system.nodes, system.nics_per_node, system.nic_GBps) == (1, 8, 1, 25.0)


def test_a_message_is_a_two_gpu_broadcast_over_what_it_crosses() -> None:
    model = get_cost_model("nccl")
    topo = parse_topology(TOPO)
    inside = message_ns(model, topo, 0, 1, 1 << 20)
    across = message_ns(model, topo, 0, 8, 1 << 20)
    pair = system_of(parse_topology("SW(2,450,0)"), generation="hopper")
    assert inside == predict(pair, "broadcast", 1 << 20).time_ns
    assert across > inside  # 50 GB/s of network against 450 of NVLink
    assert message_ns(model, topo, 0, 8, 2 << 20) > across  # and time grows with size


def test_an_iteration_of_one_collective_takes_its_closed_form_time() -> None:
    res = iterate("microAllReduce", TOPO, cost_model="nccl")
    coll = evaluate(TOPO, size=1 << 20, cost_model="nccl")  # microAllReduce: one 1 MiB all-reduce, no compute
    assert res.compute_ns == 0
    assert res.comm_ns == pytest.approx(coll.time_ns, rel=1e-12)


def test_bounds_and_wrong_calibration_flags_are_one_line_exit_2(tmp_path: Path) -> None:
    for args in (
        ("bound", TOPO, "--size", "1GB", "--cost-model", "nccl"),
        ("optimal", TOPO, "--size", "1GB", "--cost-model", "nccl", "--chunks", "4"),
        ("evaluate", TOPO, "--size", "1GB", "--calibration", "HGX-H100"),
        ("evaluate", TOPO, "--size", "1GB", "--cost-model", "nccl", "--json", "--timeline"),
        ("evaluate", TOPO, "--size", "1GB", "--cost-model", "nccl", "--plot", "t.png"),
        ("evaluate", "SW(8,450,0)_Ring(4,50,0)", "--size", "1GB", "--cost-model", "nccl"),
    ):
        out = _dse(*args, cwd=tmp_path)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert list(tmp_path.iterdir()) == []  # refused before anything is written


def test_compare_lists_nccls_candidates_and_marks_its_pick() -> None:
    out = _dse("compare", TOPO, "--size", "64MiB", "--cost-model", "nccl", "--json")
    assert out.returncode == 0, out.stderr
    import json

    d = json.loads(out.stdout)
    (chosen,) = [c for c in d["candidates"] if c["chosen"]]
    pred = predict(system_of(parse_topology(TOPO), generation="hopper"), "all_reduce", 64 << 20)
    assert (chosen["algo"], chosen["proto"], chosen["time_ns"]) == (pred.algo, pred.proto, d["time_ns"])
    for c in d["candidates"]:
        assert c["algbw_GBps"] == pytest.approx((64 << 20) / c["time_ns"], rel=1e-12)


def test_a_sweep_under_nccl_runs_and_refuses_bounds(tmp_path: Path) -> None:
    sweep = tmp_path / "s.toml"
    sweep.write_text('[sweep]\ntopology = "SW(8,450,0)_SW(2,50,0)"\nsize = ["1MB", "1GB"]\ncost_model = "nccl"\n')
    out = _dse("sweep", str(sweep), "--out", str(tmp_path / "s.csv"))
    assert out.returncode == 0, out.stderr
    rows = (tmp_path / "s.csv").read_text().splitlines()
    assert len(rows) == 3 and "nccl" in rows[1]
    sweep.write_text(sweep.read_text() + "bounds = true\n")
    out = _dse("sweep", str(sweep), "--out", str(tmp_path / "b.csv"))
    assert out.returncode == 2 and "sweep.bounds" in out.stderr
    assert not (tmp_path / "b.csv").exists()


def test_bad_machines_are_input_errors() -> None:
    with pytest.raises(InputError, match="calibration"):
        NcclModel("HGX-H100")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="calibration"):
        get_cost_model("nccl:no-such-machine")
    with pytest.raises(InputError, match="collective"):
        NcclModel().check(parse_topology(TOPO), "gather", None, 1)
    with pytest.raises(InputError, match="nccl:"):
        get_cost_model("nccl:")
    assert math.isfinite(evaluate(TOPO, size=1, cost_model="nccl").time_ns)


def test_sweep_and_study_files_read_a_calibration_beside_them(tmp_path: Path) -> None:
    log = Path(__file__).parent.parent / "dse" / "data" / "nccl" / "dgxc_dgxh100_1node_allreduce.txt"
    sub = tmp_path / "files"
    sub.mkdir()
    out = _dse("calibrate", "nccl-tests", str(log), "-t", "SW(8,450,0,links=18)", "-o", str(sub / "c.toml"))
    assert out.returncode == 0, out.stderr
    (sub / "s.toml").write_text(
        '[sweep]\ntopology = "SW(8,450,0)_SW(2,50,0)"\nsize = "1GB"\ncost_model = ["nccl", "paper"]\n'
        'calibration = "c.toml"\n'
    )
    out = subprocess.run(
        [sys.executable, "-m", "dse", "sweep", "files/s.toml", "--out", "s.csv"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "s.csv").read_text()
    assert "nccl:files/c.toml" in text and ",paper," in text
    calibrated = evaluate("SW(8,450,0)_SW(2,50,0)", size=10**9, cost_model=f"nccl:{sub / 'c.toml'}")
    assert f"{calibrated.time_ns!r}" in text or str(calibrated.time_ns) in text
    (sub / "bad.toml").write_text('[sweep]\ntopology = "SW(8,450,0)"\nsize = "1GB"\ncalibration = "c.toml"\n')
    out = _dse("sweep", str(sub / "bad.toml"), "--out", str(tmp_path / "bad.csv"))
    assert out.returncode == 2 and "sweep.calibration" in out.stderr


def test_a_study_under_a_calibrated_nccl_searches_and_refuses_gap(tmp_path: Path) -> None:
    (tmp_path / "space.toml").write_text(
        '[space]\nnpus = 128\nshapes = ["8x16"]\nkinds = [["switch"], ["switch"]]\nchunks = [1]\n'
        "[space.bandwidth]\nbudget = 500.0\nminimum = 25.0\n[space.latency]\ntiers = [0, 0]\n"
    )
    study = '[study]\nname = "gpu"\nspace = "space.toml"\nsampler = "random"\nseed = 0\ntrials = 4\n'
    study += '[workload]\ncollective = "all_reduce"\nsize = "1GB"\ncost_model = "nccl"\ncalibration = "HGX-H100"\n'
    (tmp_path / "s.toml").write_text('objectives = [{ metric = "time" }]\n' + study)
    out = _dse("study", "run", str(tmp_path / "s.toml"), "--no-progress", "--json")
    assert out.returncode == 0, out.stderr
    (tmp_path / "g.toml").write_text('objectives = [{ metric = "gap" }]\n' + study.replace('"gpu"', '"gpu2"'))
    out = _dse("study", "run", str(tmp_path / "g.toml"), "--no-progress")
    assert out.returncode == 2 and "gap" in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_the_per_dimension_bytes_follow_the_ascending_order() -> None:
    from dse.sim.evaluate import ascending_dim_bytes

    # 16 B on 2 x 4 NPUs: a reduce-scatter halves it on dim 0 (sends 8), then sends 3/4 of 8 on dim 1;
    # an all-gather of a 16 B output starts from 2 B (sends 2 on dim 0) and sends 3 x 4 on dim 1
    assert ascending_dim_bytes("reduce_scatter", 16.0, (2, 4)) == (8.0, 6.0)
    assert ascending_dim_bytes("all_gather", 16.0, (2, 4)) == (2.0, 12.0)
    assert ascending_dim_bytes("all_reduce", 16.0, (2, 4)) == (16.0, 12.0)
    assert ascending_dim_bytes("all_to_all", 16.0, (2, 4)) == (8.0, 12.0)
