"""Broadcast and reduce: the `nccl` cost model times them in evaluate, compare and sweeps as
`dse nccl-tests` does; the chunk-phase models, workloads and bounds refuse them in one line."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dse.core.collectives import nominal_bytes_sent, parse_collective
from dse.core.errors import InputError
from dse.core.topology import parse_topology
from dse.costs.nccl.model import predict
from dse.costs.nccl.system import system_of
from dse.sim.evaluate import ascending_dim_bytes, evaluate

TOPO = "SW(8,450,0)_SW(4,50,0)"
SIZES = (8, 4096, 1 << 20, 64 << 20, 1 << 30)


def _dse(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dse", *args], capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize("coll", ["broadcast", "reduce"])
@pytest.mark.parametrize("size", SIZES)
def test_evaluate_times_a_rooted_collective_with_nccls_ring(coll: str, size: int) -> None:
    topo = parse_topology(TOPO)
    pred = predict(system_of(topo, generation="hopper", network="ib", cpu="other"), coll, size)
    r = evaluate(topo, collective=coll, size=size, cost_model="nccl")
    assert r.time_ns == pred.time_ns and pred.algo == "ring"  # NCCL runs broadcast and reduce as rings
    assert r.algbw_GBps == pytest.approx(size / r.time_ns, rel=1e-12)
    assert r.busbw_GBps == pytest.approx(r.algbw_GBps, rel=1e-12) == pred.busbw_GBps  # nccl-tests: factor 1
    # one chain of the 32 GPUs, dimension 0 innermost: 28 hops inside the nodes, 3 across them
    assert r.bytes_sent == pytest.approx(size * 31 / 32, rel=1e-12)
    assert r.dim_bytes == pytest.approx((size * 28 / 32, size * 3 / 32), rel=1e-12)


def test_evaluate_and_nccl_tests_print_the_same_broadcast(tmp_path: Path) -> None:
    out = _dse("evaluate", TOPO, "--size", "64MiB", "--collective", "bcast", "--cost-model", "nccl", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["collective"] == "broadcast"
    csv = tmp_path / "b.csv"
    out = _dse("nccl-tests", TOPO, "--collective", "broadcast", "-b", "64M", "-e", "64M", "--csv", str(csv))
    assert out.returncode == 0, out.stderr
    head, row = csv.read_text().splitlines()[:2]
    rec = dict(zip(head.split(","), row.split(",")))
    assert float(rec["time_us"]) == pytest.approx(d["time_ns"] / 1e3, rel=1e-6)
    assert float(rec["busbw_GBps"]) == pytest.approx(d["busbw_GBps"], rel=1e-6)


def test_compare_lists_only_rings_for_a_reduce() -> None:
    out = _dse("compare", TOPO, "--size", "1MiB", "--collective", "reduce", "--cost-model", "nccl", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert {c["algo"] for c in d["candidates"]} == {"ring"}
    assert {c["proto"] for c in d["candidates"]} == {"LL", "LL128", "Simple"}
    (chosen,) = [c for c in d["candidates"] if c["chosen"]]
    assert chosen["time_ns"] == d["time_ns"] == min(c["time_ns"] for c in d["candidates"])


@given(st.lists(st.integers(2, 64), min_size=1, max_size=5), st.sampled_from(["broadcast", "reduce"]))
def test_a_rooted_collectives_bytes_per_dimension_sum_to_its_chain(shape: list[int], coll: str) -> None:
    size = 1e6
    dims = ascending_dim_bytes(coll, size, tuple(shape))
    assert all(b > 0 for b in dims)
    assert math.isclose(sum(dims), nominal_bytes_sent(coll, size, tuple(shape)), rel_tol=1e-12)
    assert math.isclose(dims[0], size * (shape[0] - 1) / shape[0], rel_tol=1e-12)  # the innermost links


@pytest.mark.parametrize("model", ["paper", "astra-sim", "astra-sim-1"])
def test_chunk_phase_models_refuse_a_broadcast_in_one_line(model: str, tmp_path: Path) -> None:
    out = _dse(
        "evaluate", "Ring(8,50,500,links=2)", "--size", "1GB", "--collective", "broadcast", "--cost-model", model
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("dse: error: collective:") and "--cost-model nccl" in out.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_forced_tree_reduce_and_a_bound_are_refused_in_one_line(tmp_path: Path) -> None:
    for args in (
        ("evaluate", TOPO, "--size", "1GB", "--collective", "reduce", "--cost-model", "nccl,NCCL_ALGO=tree"),
        ("bound", TOPO, "--size", "1GB", "--collective", "broadcast", "--cost-model", "nccl"),
        ("bound", TOPO, "--size", "1GB", "--collective", "broadcast"),
    ):
        out = _dse(*args, cwd=tmp_path)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_times_broadcasts_under_nccl_and_refuses_them_under_paper_before_writing(tmp_path: Path) -> None:
    sweep = tmp_path / "s.toml"
    sweep.write_text(
        f'[sweep]\ntopology = "{TOPO}"\ncollective = ["broadcast", "reduce"]\nsize = "1MB"\ncost_model = "nccl"\n'
    )
    out = _dse("sweep", str(sweep), "--out", str(tmp_path / "s.csv"))
    assert out.returncode == 0, out.stderr
    head, *rows = (tmp_path / "s.csv").read_text().splitlines()
    got = {r["collective"]: float(r["time_ns"]) for r in (dict(zip(head.split(","), _cells(x))) for x in rows)}
    want = evaluate(TOPO, collective="broadcast", size=10**6, cost_model="nccl").time_ns
    assert set(got) == {"broadcast", "reduce"} and got["broadcast"] == pytest.approx(want, rel=1e-12)
    sweep.write_text(sweep.read_text().replace('cost_model = "nccl"', 'cost_model = ["nccl", "paper"]'))
    out = _dse("sweep", str(sweep), "--out", str(tmp_path / "p.csv"))
    assert out.returncode == 2 and "cost_model paper" in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert not (tmp_path / "p.csv").exists()


def _cells(line: str) -> list[str]:
    import csv

    return next(csv.reader([line]))


def test_a_workload_or_a_bare_name_refuses_a_rooted_collective_saying_where_it_runs() -> None:
    with pytest.raises(InputError, match="dse evaluate --cost-model nccl") as e:
        parse_collective("broadcast")
    assert e.value.field == "collective"
    assert parse_collective(" Bcast ", rooted=True) == "broadcast"
    with pytest.raises(InputError, match="broadcast, reduce under --cost-model nccl"):
        parse_collective("gather", rooted=True)
