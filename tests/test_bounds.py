"""Bounds (docs/model.md §7): valid on random topologies, exact on tiny ones, tight where they should be."""

import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dse import InputError, evaluate, lower_bounds
from dse.bounds.api import chunk_types, ilp_bound
from dse.bounds.flow import flow_edges, flow_paths, objective_value, solve_counts
from dse.bounds.grid import _grid_floor, _sum_reachable
from dse.core.presets import PAPER_PRESETS
from dse.sim.spec import CollectiveSpec

from .test_invariants import topologies

REL = 1e-9
#: Solver limits are work, not seconds, so no outcome depends on the machine's load: a MIP solve
#: stops after this many branch-and-bound nodes (none here needs 3,000), with no wall-clock limit
#: (time_limit_s=math.inf); an LP needs no limit.
NODES = 100_000
#: a limit of work, not of seconds: the outcome never depends on the machine's load
WORK = dict(time_limit_s=math.inf, node_limit=NODES)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    topo=topologies(max_dims=3, pow2=True),
    coll=st.sampled_from(["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]),
    model=st.sampled_from(["paper", "astra-sim"]),
    mode=st.sampled_from(["overlapped", "serialized"]),
    chunks=st.integers(1, 6),
    size=st.sampled_from([2**20, 10**7 + 3, 2**28]),
)
def test_no_schedule_beats_a_bound(topo, coll, model, mode, chunks, size):
    if model == "astra-sim":
        mode = "serialized"
    b = lower_bounds(
        topo,
        collective=coll,
        size=size,
        chunks=chunks,
        cost_model=model,
        latency_mode=mode,
        time_limit_s=math.inf,
        node_limit=NODES,
    )
    assert b.ideal_ns <= b.lp_ns * (1 + REL) and b.lp_ns <= b.ilp_ns * (1 + REL)
    assert b.ilp_ns <= b.pipeline_ns * (1 + REL) and b.bound_ns == b.pipeline_ns
    for sched in ("baseline", "themis", "round_robin", "random", "lp_guided"):
        for queue in ("fifo", "scf"):
            r = evaluate(
                topo,
                collective=coll,
                size=size,
                chunks=chunks,
                scheduler=sched,
                queue=queue,
                cost_model=model,
                latency_mode=mode,
            )
            assert b.pipeline_ns <= r.time_ns * (1 + REL), (sched, queue, b, r.time_ns)


def _brute_force(spec, pipeline):
    types = chunk_types(spec)
    n = spec.chunks
    best = math.inf
    for combo in itertools.combinations_with_replacement(range(len(types)), n):
        counts = [combo.count(i) for i in range(len(types))]
        best = min(best, objective_value(types, counts, 1, pipeline))
    return best


@pytest.mark.parametrize(
    "topo",
    ["Ring(4,200,10)_SW(4,50,100)", "FC(4,100,5)_Ring(4,300,50)_SW(2,40,500)", "SW(8,50,1)_SW(4,400,1)"],
)
@pytest.mark.parametrize("coll", ["all_reduce", "reduce_scatter", "all_gather"])
@pytest.mark.parametrize("chunks", [1, 2, 3, 4])
@pytest.mark.parametrize("mode", ["overlapped", "serialized"])
def test_ilp_equals_brute_force(topo, coll, chunks, mode):
    spec = CollectiveSpec.parse(topo, collective=coll, size="64MiB", chunks=chunks, latency_mode=mode)
    b = lower_bounds(topo, collective=coll, size="64MiB", chunks=chunks, latency_mode=mode, **WORK)
    assert b.status == "optimal"
    assert b.ilp_ns == pytest.approx(max(b.lp_ns, _brute_force(spec, False)), rel=1e-9)
    assert b.pipeline_ns == pytest.approx(max(b.ilp_ns, _brute_force(spec, True)), rel=1e-9)


@pytest.mark.parametrize("name", PAPER_PRESETS)
def test_lp_equals_ideal_on_the_paper_topologies(name):
    b = lower_bounds(name, size="1GB", chunks=64, pipeline=False, time_limit_s=math.inf, node_limit=100)
    assert b.lp_ns == pytest.approx(b.ideal_ns, rel=1e-9)


def test_lp_is_above_ideal_when_under_provisioned():
    b = lower_bounds("Ring(4,400,0)_Ring(4,50,0)", size="1GB", chunks=64, **WORK)
    assert b.lp_ns > b.ideal_ns * 1.5
    # dim 1 can receive at most a quarter of the data: 2 * S/4 * 3/4 / 50 B/ns
    assert b.lp_ns == pytest.approx(2 * 1e9 / 4 * 3 / 4 / 50)


def test_one_chunk_pipeline_bound_is_the_chunks_own_path():
    b = lower_bounds("4D-Ring_FC_Ring_SW", size="1GB", chunks=1, **WORK)
    r = evaluate("4D-Ring_FC_Ring_SW", size="1GB", chunks=1, scheduler="lp_guided")
    assert b.pipeline_ns == pytest.approx(r.time_ns, rel=1e-9)  # exact: one chunk, best order
    assert b.ilp_ns < b.pipeline_ns


def test_time_limited_solve_is_still_a_valid_bound():
    # no schedule meets this one's whole-step floor, and HiGHS needs over a minute to prove the ILP
    topo = "Ring(8,50,500)_FC(16,25,500)_FC(2,200,700)_SW(4,400,20)_Ring(8,50,0)"
    b = lower_bounds(topo, size="1GB", chunks=64, time_limit_s=0.01)
    assert b.status != "optimal" and any("dual bound" in n for n in b.notes)
    assert b.ideal_ns <= b.lp_ns <= b.ilp_ns <= b.pipeline_ns
    for sched in ("themis", "baseline"):
        assert b.pipeline_ns <= evaluate(topo, size="1GB", chunks=64, scheduler=sched).time_ns


def test_all_to_all_says_order_does_not_matter():
    b = lower_bounds("Ring(4,100,1)_SW(8,50,1)", collective="all_to_all", size="1MB", chunks=4, **WORK)
    assert not b.order_matters and any("does not matter" in n for n in b.notes)
    assert b.mix == {"01": 4}


def test_cbc_gives_the_same_bound():
    a = lower_bounds("Ring(4,200,10)_SW(4,50,100)", size="64MiB", chunks=4, solver="highs", **WORK)
    c = lower_bounds("Ring(4,200,10)_SW(4,50,100)", size="64MiB", chunks=4, solver="cbc", **WORK)
    assert c.solver == "cbc" and c.ilp_ns == pytest.approx(a.ilp_ns, rel=1e-6)
    assert c.pipeline_ns == pytest.approx(a.pipeline_ns, rel=1e-6)


def test_bad_solver_input():
    with pytest.raises(InputError):
        lower_bounds("2D-SW_SW", size="1GB", solver="gurobi")
    with pytest.raises(InputError):
        lower_bounds("2D-SW_SW", size="1GB", time_limit_s=0)


def test_bound_cli(run_cli):
    import json

    code, out, _ = run_cli("bound", "Ring(4,200,10)_SW(4,50,100)", "--size", "64MiB", "--chunks", "4", "--json")
    d = json.loads(out)
    assert code == 0 and d["ideal_ns"] <= d["lp_ns"] <= d["ilp_ns"] <= d["pipeline_ns"] == d["bound_ns"]
    assert sum(d["mix"].values()) == 4 and d["solver"] == "highs"
    code, out, _ = run_cli("bound", "Ring(4,200,10)_SW(4,50,100)", "--size", "64MiB", "--chunks", "4")
    assert code == 0 and "pipeline" in out and "mix" in out
    code, _, err = run_cli("bound", "Ring(4,200,10)", "--size", "1MB", "--solver", "nope")
    assert code == 2 and err.startswith("dse: error: solver")


def test_node_limited_bound_is_valid_and_the_same_every_run():
    topo = "Ring(4,375,20)_FC(8,175,700)_Ring(4,150,700)_SW(8,100,1700)"
    a = lower_bounds(topo, size="1GB", chunks=64, node_limit=20, time_limit_s=math.inf)
    b = lower_bounds(topo, size="1GB", chunks=64, node_limit=20, time_limit_s=math.inf)
    assert (a.lp_ns, a.ilp_ns, a.pipeline_ns, a.status) == (b.lp_ns, b.ilp_ns, b.pipeline_ns, b.status)
    assert a.status in ("optimal", "node_limit")
    assert a.ideal_ns <= a.lp_ns <= a.ilp_ns <= a.pipeline_ns
    for sched in ("themis", "lp_guided"):
        assert a.pipeline_ns <= evaluate(topo, size="1GB", chunks=64, scheduler=sched).time_ns
    with pytest.raises(InputError):
        lower_bounds(topo, size="1GB", node_limit=0)


def test_compare_is_deterministic(run_cli):
    import json

    args = ("compare", "4D-Ring_FC_Ring_SW", "--size", "1GB", "--json")
    runs = [json.loads(run_cli(*args)[1]) for _ in range(2)]
    for r in runs:  # everything but the solver's wall-clock time
        r["bound"].pop("solve_time_s")
    assert runs[0] == runs[1]


# --- the flow model and the whole-step floor (dse.bounds.grid._grid_floor, dse.bounds.flow.solve_flow) ---


def _spec_types(topo, coll, chunks, mode, model="paper", size="64MiB"):
    spec = CollectiveSpec.parse(topo, collective=coll, size=size, chunks=chunks, latency_mode=mode, cost_model=model)
    types = chunk_types(spec)
    bw = [spec.cost_model.bytes_per_ns(d) for d in spec.topology.dims]
    return spec, types, bw


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    topo=topologies(max_dims=4, pow2=False),
    coll=st.sampled_from(["all_reduce", "reduce_scatter", "all_gather"]),
    model=st.sampled_from(["paper", "astra-sim"]),
    mode=st.sampled_from(["overlapped", "serialized"]),
    chunks=st.integers(1, 9),
)
def test_flow_model_and_floor_agree_with_the_order_model(topo, coll, model, mode, chunks):
    """The flow over dimension sets has the same optimum as counting orders, and the whole-step floor
    never exceeds that optimum (it is a lower bound), whatever the kinds, sizes and latencies."""
    if model == "astra-sim":
        mode = "serialized"
    _, types, bw = _spec_types(topo, coll, chunks, mode, model)
    by_orders = solve_counts(types, 1, relax=False, solver="highs", time_limit_s=math.inf, node_limit=NODES, flow=False)
    by_flow = solve_counts(types, 1, relax=False, solver="highs", time_limit_s=math.inf, node_limit=NODES)
    assert by_orders.status == by_flow.status == "optimal"
    # both are proven bounds; HiGHS's tolerances may leave either up to ~1e-7 under the optimum
    assert by_flow.bound == pytest.approx(by_orders.bound, rel=1e-6)
    if flow_edges(types) is not None:  # the flow's mix is whole orders adding up to the chunks
        assert sum(by_flow.mix.values()) == sum({t.size: t.count for t in types}.values())  # remainders too
        assert objective_value(types, list(by_flow.counts), 1, False) == pytest.approx(by_flow.bound, rel=1e-6)
    lp = solve_counts(types, 1, relax=True, solver="highs", time_limit_s=math.inf).bound
    floor = _grid_floor(types, 1, bw, lp)
    assert lp * (1 - REL) <= floor <= by_orders.bound * (1 + 1e-6)
    # the whole method: LP, floor, then the flow MIP given the floor
    _, used_floor, res = ilp_bound(types, 1, bw, time_limit_s=math.inf, node_limit=NODES)
    assert res.status == "optimal"
    # the method's LP (straight through highspy) and PuLP's agree to ~1e-9 relative, so may its floor
    assert floor * (1 - 1e-8) <= used_floor <= res.bound * (1 + 1e-6)
    # HiGHS may call a solve optimal with its dual bound a few ns (1e-7) under the optimum, its
    # tolerances; the bound stays valid (test_no_schedule_beats_a_bound), so compare to 1e-6 here
    assert res.bound == pytest.approx(by_orders.bound, rel=1e-6)
    assert res.bound <= objective_value(types, list(res.counts), 1, False) * (1 + REL) + 0.01


def test_floor_of_one_chunk_is_its_larger_phase():
    """Ring(2)xRing(2), one 1 MiB chunk, equal bandwidths: the LP splits the chunk across both orders
    (3/4 of its busy time per dimension), but a whole chunk sends half its data on its first
    dimension and a quarter on its second (twice, for all-reduce): the floor proves the whole-chunk
    optimum, 2 x 2^19 B / 12.5 B/ns."""
    _, types, bw = _spec_types("Ring(2,12.5,0)_Ring(2,12.5,0)", "all_reduce", 1, "overlapped", size=2**20)
    lp = solve_counts(types, 1, relax=True, solver="highs", time_limit_s=math.inf).bound
    assert lp == pytest.approx(0.75 * 2 * 2**19 / 12.5)
    assert _grid_floor(types, 1, bw, lp) == pytest.approx(2 * 2**19 / 12.5)


def test_floor_is_the_ilp_on_a_paper_topology():
    """4D-Ring_FC_Ring_SW at 64 chunks: the LP is the ideal, the floor is one grid step above it, and
    the ILP reaches the floor (so the solver had nothing left to prove)."""
    b = lower_bounds("4D-Ring_FC_Ring_SW", size="1GB", chunks=64, pipeline=False, **WORK)
    _, types, bw = _spec_types("4D-Ring_FC_Ring_SW", "all_reduce", 64, "overlapped", size="1GB")
    floor = _grid_floor(types, 1, bw, b.lp_ns)
    assert b.lp_ns == pytest.approx(b.ideal_ns, rel=1e-12)
    assert floor > b.lp_ns * (1 + 1e-6)
    assert b.status == "optimal" and b.ilp_ns == pytest.approx(floor, rel=1e-9)


@settings(max_examples=300, deadline=None)
@given(
    target=st.integers(0, 60),
    items=st.lists(st.tuples(st.integers(1, 9), st.integers(0, 5)), min_size=1, max_size=4),
)
def test_sum_reachable_matches_enumeration(target, items):
    weights = [w for w, _ in items]
    caps = [c for _, c in items]
    sums = {sum(w * x for w, x in zip(weights, xs)) for xs in itertools.product(*(range(c + 1) for c in caps))}
    assert _sum_reachable(target, weights, caps) == (target in sums)


def test_paths_split_a_flow_into_whole_orders():
    # 3 chunks over dims {0,1,2}: 2 x order (0,1,2), 1 x order (2,0,1); edges are (set after d, d)
    flow = {(0, 2): 2, (4, 1): 2, (6, 0): 2, (0, 1): 1, (2, 0): 1, (3, 2): 1}
    assert sorted(flow_paths(flow, 3)) == [((0, 1, 2), 2), ((2, 0, 1), 1)]


def test_a_solve_highs_rejects_for_a_tiny_violation_is_solved_again():
    """HiGHS 1.15 finds this order model's optimum, then calls it a solve error for a 1e-6 row
    violation; `_run` solves it once more with tighter tolerances (the flow model agrees)."""
    _, types, _ = _spec_types("Ring(7,200,0)_Ring(2,200,0)_Ring(2,200,0)", "reduce_scatter", 7, "overlapped")
    by_orders = solve_counts(types, 1, relax=False, solver="highs", time_limit_s=math.inf, node_limit=NODES, flow=False)
    by_flow = solve_counts(types, 1, relax=False, solver="highs", time_limit_s=math.inf, node_limit=NODES)
    assert by_orders.status == by_flow.status == "optimal"
    assert by_orders.bound == pytest.approx(by_flow.bound, rel=1e-6)


def test_bound_valid_when_concurrent_phases_each_run_at_full_speed() -> None:
    """ASTRA-sim's congestion-unaware model runs `active_chunks` phases of a dimension at full
    bandwidth each: the bounds (ideal included) must still sit below every schedule."""
    import dse

    topo, kw = "Ring(4,100,10)_SW(4,50,100)", dict(size="64MB", chunks=8, cost_model="astra-sim", active_chunks=4)
    b = dse.lower_bounds(topo, **kw, **WORK)
    times = [r.time_ns for r in dse.compare(topo, **kw)]
    assert b.bound_ns <= min(times) * (1 + 1e-9)
    one = dse.lower_bounds(topo, **{**kw, "active_chunks": 1}, **WORK)
    assert b.ideal_ns == pytest.approx(one.ideal_ns / 4)
