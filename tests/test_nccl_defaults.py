"""The nccl model's defaults that are not NCCL's come from public runs: each generation's multi-node
curve (dse/costs/nccl/tables.py MULTI_NODE_CURVE) and EFA's latency a hop. Blackwell's curve and EFA's
latency come from runs outside the validation; Hopper's from twelve multi-node H100/H200 runs,
chosen the same with any one validation machine left out (scripts/nccl_hopper_curve.py). These tests
recompute each."""

from __future__ import annotations

import dataclasses
import math

import pytest

from dse.costs.nccl import validation
from dse.costs.nccl.bundled import bundled
from dse.costs.nccl.model import NcclSystem, default_params, predict
from dse.costs.nccl.tables import (
    EFA_FAST_LATENCY_NS,
    GENERATIONS,
    MULTI_NODE_CURVE,
    NET_LATENCY_NS,
    EFA_FAST_NIC_GBps,
)

#: Blackwell's (S_half, k) sources: (measurement names, rows, mean |log error| without / with the curve)
SOURCES = {
    "blackwell": (("gcp_a4_b200", "ncclt119_a100"), 33, 0.211, 0.120),  # 11 GCP A4 rows, 22 of issue 119
}
#: the outside Hopper runs: they set EFA's latency (the p5 pair) and, with the validation's, Hopper's curve
OTHER_SOURCES = ("keitaw_p5", "ncclt319_h100", "xxrjun_h100_10node", "coreweave_h200", "coreweave_h200_nvls0")
GRID = [(float(2**i), k / 10) for i in range(16, 30) for k in range(3, 11)]


def _rows(names: tuple[str, ...]) -> list[tuple[object, int, float]]:
    systems, measurements = bundled()
    out = []
    for name in names:
        m = measurements[name]
        for run in m.runs():
            out += [(systems[m.system], r.size_bytes, r.out_of_place.time_us * 1e3) for r in run.rows]
    return out


def _time_ns(system: NcclSystem, size: int, q: object, tuner: object) -> float:
    """The all-reduce time under `q` of the plan NCCL's tuner picks under `tuner`: the defaults
    being tried (a default also decides the choice; first in NCCL's order on a tie)."""
    pick = min(predict(system, "all_reduce", size, params=tuner).candidates, key=lambda c: c.time_ns)  # type: ignore[arg-type]
    return predict(system, "all_reduce", size, params=q, algo=pick.algo, proto=pick.proto).time_ns  # type: ignore[arg-type]


def _error(rows: list[tuple[object, int, float]], s_half: float, k: float, floor: float = 0.0) -> float:
    """Mean |log(predicted / measured)| with this curve as the default and NCCL's values otherwise."""
    total = 0.0
    for system, size, measured in rows:
        q = dataclasses.replace(default_params(system), s_half_multi_bytes=s_half, k_multi=k, e_min_multi=floor)  # type: ignore[arg-type]
        total += abs(math.log(_time_ns(system, size, q, q) / measured))  # type: ignore[arg-type]
    return total / len(rows)


def _script(name: str) -> object:
    """Import scripts/`name`.py as a module."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_blackwells_curve_is_the_best_of_its_grid_on_runs_outside_the_validation() -> None:
    names, count, without, with_curve = SOURCES["blackwell"]
    rows, floor = _rows(names), MULTI_NODE_CURVE["blackwell"].floor
    assert len(rows) == count
    best = min(GRID, key=lambda g: _error(rows, *g, floor))
    assert best == MULTI_NODE_CURVE["blackwell"][:2]
    assert _error(rows, 0.0, 1.0) == pytest.approx(without, abs=0.001)
    assert _error(rows, *best, floor) == pytest.approx(with_curve, abs=0.001)  # the curve earns its place


@pytest.fixture(scope="module")
def hopper_grid() -> tuple[object, list, dict]:
    """scripts/nccl_hopper_curve.py, its sources and every grid point's scores on them."""
    script = _script("nccl_hopper_curve")
    sources = script.sources()  # type: ignore[attr-defined]
    return script, sources, script.scores(sources, script.GRID)  # type: ignore[attr-defined]


def test_hoppers_curve_is_the_best_of_its_grid_on_twelve_multi_node_h100_runs(hopper_grid: tuple) -> None:
    """Five outside runs and the seven machines the validation predicts from one node, each weighing
    the same: 10.0 % mean |log error| with the shipped curve, 12.4 % with the curve the outside runs
    alone choose (64 MiB, k 0.9, floor 0.005; 9.8 % on them), 19.3 % with none."""
    script, sources, table = hopper_grid
    shipped = MULTI_NODE_CURVE["hopper"]
    outside = [s.name for s in sources if not s.validation]
    scale = {held for split, _, held in validation.CASES if split == "scale"}
    systems, measurements = bundled()
    assert outside == list(script.OUTSIDE) and set(outside) == set(OTHER_SOURCES)
    assert {s.name for s in sources if s.validation} == {
        measurements[h].system for h in scale if systems[measurements[h].system].generation == "hopper"
    } and len(sources) == 12
    chosen, mean = script.best(table)
    assert chosen == shipped and mean == pytest.approx(0.100, abs=0.001)
    outside_only = min(table, key=lambda c: sum(table[c][n] for n in outside))
    assert outside_only == (64 * 2.0**20, 0.9, 0.005)
    assert sum(table[outside_only][n] for n in outside) / 5 == pytest.approx(0.098, abs=0.001)
    assert sum(table[outside_only].values()) / 12 == pytest.approx(0.124, abs=0.001)
    none = {s.name: script.score(s, shipped._replace(s_half_bytes=0.0, k=1.0)) for s in sources}
    assert sum(none.values()) / 12 == pytest.approx(0.193, abs=0.001)


def test_hoppers_curve_is_the_same_with_any_validation_machine_left_out(hopper_grid: tuple) -> None:
    """So each machine's numbers in `dse validate nccl` are a curve chosen without its data."""
    script, sources, table = hopper_grid
    for source in sources:
        if source.validation:
            assert script.best(table, source.name)[0] == MULTI_NODE_CURVE["hopper"], source.name


def test_generations_without_an_outside_tree_run_take_blackwells_curve() -> None:
    assert set(MULTI_NODE_CURVE) == set(GENERATIONS)
    assert MULTI_NODE_CURVE["volta"] == MULTI_NODE_CURVE["ampere"] == MULTI_NODE_CURVE["blackwell"]
    systems = bundled()[0]
    for name in ("a100_crusoe_2node", "h100_p5_2node", "b200_gcp_a4_2node"):
        q = default_params(systems[name])
        assert (q.s_half_multi_bytes, q.k_multi, q.e_min_multi) == MULTI_NODE_CURVE[systems[name].generation]


def test_blackwells_sources_cannot_tell_a_floor_so_it_has_none() -> None:
    """Blackwell's sources start at 8 MB, above where a floor acts: with the curve re-gridded too, no
    floor of a grid lowers their error by more than 0.2 points, while a large one makes it worse."""
    rows = _rows(SOURCES["blackwell"][0])
    assert MULTI_NODE_CURVE["blackwell"].floor == 0.0
    pure = _error(rows, *MULTI_NODE_CURVE["blackwell"])
    grid = [(s, k, f) for s, k in GRID for f in (0.01, 0.05, 0.2)]
    assert min(_error(rows, *g) for g in grid) > pure - 0.002
    assert _error(rows, *MULTI_NODE_CURVE["blackwell"][:2], 0.5) > pure + 0.02


def test_the_sources_are_neither_held_out_nor_calibrated_on() -> None:
    used = {name for _, calibrate, held in validation.CASES for name in (calibrate, held)}
    assert not used & {*(n for names, *_ in SOURCES.values() for n in names), *OTHER_SOURCES}


#: 16 x p5en (H200, 16 x 200G EFA v3 a node): all-reduce at 16 B, us (aws-samples/awsome-distributed-
#: training @7217859, micro-benchmarks/nccl-tests/slurm/topology-aware-nccl-tests/README.md; not shipped)
P5EN_16NODE_FLOOR_US = 167.3


def _floor_per_hop_us(system: NcclSystem, measured_us: float) -> float:
    """(measured 16 B floor - the model's floor with no network latency) / the floor's network hops."""
    q0 = dataclasses.replace(default_params(system), net_latency_ns=0.0)
    p = predict(system, "all_reduce", 16, params=q0)
    assert (p.algo, p.proto) == ("tree", "LL")  # the floor is tree LL: 2 log2(nodes) network hops
    return (measured_us - p.time_ns / 1e3) / (2 * math.log2(system.nodes))


def test_efa_latency_is_each_generations_outside_floor() -> None:
    """EFA's latency a hop is what a public run outside the validation implies for its generation,
    told by the NIC's rate, rounded to 1 us: 18.9 us on a p5 pair (100 Gb/s, EFA v2; v1 takes it too),
    13.9 us on 16 p5en nodes (200 Gb/s, EFA v3)."""
    systems, measurements = bundled()
    run = measurements["keitaw_p5"].runs()[0]
    p5 = systems["h100_p5_2node"]
    pair = _floor_per_hop_us(p5, [r.out_of_place.time_us for r in run.rows if r.size_bytes == 16][0])
    p5en = NcclSystem("hopper", 8, nodes=16, nvlink_GBps=450.0, nvlink_links=18, nics_per_node=16, nic_GBps=25.0,
                      cpu="intel", network="efa")  # fmt: skip
    big = _floor_per_hop_us(p5en, P5EN_16NODE_FLOOR_US)
    assert pair == pytest.approx(18.9, abs=0.1) and big == pytest.approx(14.0, abs=0.1)
    assert default_params(p5).net_latency_ns == NET_LATENCY_NS["efa"] == 1000.0 * round(pair)
    assert default_params(p5en).net_latency_ns == EFA_FAST_LATENCY_NS == 1000.0 * round(big)
    p4de = dataclasses.replace(p5, generation="ampere", nics_per_node=4)  # EFA v1: 4 x 100 Gb/s
    assert default_params(p4de).net_latency_ns == NET_LATENCY_NS["efa"]
    assert p5.nic_GBps < EFA_FAST_NIC_GBps <= p5en.nic_GBps
    assert default_params(dataclasses.replace(p5en, network="ib")).net_latency_ns == NET_LATENCY_NS["ib"]


def test_the_outside_score_covers_every_outside_hopper_run() -> None:
    """scripts/nccl_outside_runs.py (the score docs/model.md §15.4 compares variants by) scores every
    Hopper run that sets or checks a default, and none of the validation's."""
    script = _script("nccl_outside_runs")
    names = [name for name, _ in script.RUNS]  # type: ignore[attr-defined]
    assert set(names) == set(OTHER_SOURCES) and len(names) == len(set(names))
    rows, err = script.run_error("xxrjun_h100_10node")  # type: ignore[attr-defined]
    assert rows == 10 and err == pytest.approx(0.140, abs=0.001)
