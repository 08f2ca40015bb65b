"""The search for a schedule at the whole-step floor (dse.bounds.floorfit, dse.bounds.floor.floor_search):
exact when it finds one, a proof when the exhaustive search finds none, and the ILP either way."""

import itertools
import math
from collections import Counter

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dse import evaluate, lower_bounds
from dse.bounds.api import chunk_types, distinct_types, ilp_bound
from dse.bounds.floor import _edge_steps, floor_search
from dse.bounds.floorfit import OutOfBudget, exhaustive_flow, find_flow, targets
from dse.bounds.flow import flow_edges, objective_value, solve_counts
from dse.bounds.grid import Grid
from dse.bounds.lattice import Lattice
from dse.core.topology import Dim, Topology
from dse.sim.spec import CollectiveSpec

#: Solver limits are work, not seconds, so no outcome depends on the machine's load: a MIP solve
#: stops after this many branch-and-bound nodes (none that must finish here needs 12,000), with no
#: wall-clock limit (time_limit_s=math.inf); an LP needs no limit.
NODES = 100_000
#: a limit of work, not of seconds: the outcome never depends on the machine's load
WORK = dict(time_limit_s=math.inf, node_limit=NODES)
#: A short solve, which stops before the optimum on some examples.
SHORT = 2_000


@st.composite
def topologies(draw, min_dims, max_dims):
    """Power-of-two sizes (1-4 doublings), the bench's bandwidths and latencies, any kinds."""
    dims = [
        Dim(
            draw(st.sampled_from(["ring", "fc", "switch"])),
            2 ** draw(st.integers(1, 4)),
            draw(st.sampled_from([25, 50, 100, 150, 200, 250, 375, 400])),
            draw(st.sampled_from([0, 20, 500, 700, 1700, 2000])),
        )
        for _ in range(draw(st.integers(min_dims, max_dims)))
    ]
    return Topology(tuple(dims))


def _setup(topo, chunks, *, coll="all_reduce", size="1GB", mode="overlapped"):
    spec = CollectiveSpec.parse(topo, collective=coll, size=size, chunks=chunks, latency_mode=mode)
    types = chunk_types(spec)
    bw = [spec.cost_model.bytes_per_ns(d) for d in spec.topology.dims]
    grid = Grid.from_types(types, 1, bw)
    edges = flow_edges(types)
    steps = _edge_steps(edges, grid, 1) if grid is not None and edges is not None else None
    return spec, types, bw, grid, edges, steps


def _steps_of(flow, steps, nd):
    """Per dimension, the steps a flow adds; and the chunks it carries (checked conserved)."""
    full = (1 << nd) - 1
    for s in range(1, full):
        into = sum(v for (a, d), v in flow.items() if a | 1 << d == s)
        out = sum(v for (a, d), v in flow.items() if a == s)
        assert into == out, f"flow not conserved at set {s:b}"
    assert all(v >= 0 for v in flow.values())
    per_dim = [sum(v * steps[(a, d)] for (a, d), v in flow.items() if d == e) for e in range(nd)]
    return per_dim, sum(v for (a, d), v in flow.items() if a == 0)


def _order_steps(lattice):
    return [tuple(sum(lattice.steps[e] for e in es if e[1] == d) for d in range(lattice.nd)) for es in lattice.paths]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data(), topo=topologies(2, 4), chunks=st.integers(1, 3))
def test_exhaustive_search_agrees_with_enumerating_every_mix(data, topo, chunks):
    """On small cases, the exhaustive search finds a flow exactly when some multiset of orders makes
    the target step vector, and what it finds makes that vector: its None is a proof."""
    _, _, _, grid, _, steps = _setup(topo, chunks)
    assume(steps is not None)
    nd = topo.ndims
    lattice = Lattice(steps, nd, list(grid.live))
    vectors = _order_steps(lattice)
    made = {tuple(map(sum, zip(*combo))) for combo in itertools.combinations_with_replacement(vectors, chunks)}
    some = sorted(made)[data.draw(st.integers(0, len(made) - 1))]
    shift = data.draw(st.lists(st.integers(-2, 2), min_size=nd, max_size=nd))
    for target in (list(some), [max(0, a + b) for a, b in zip(some, shift)]):
        flow = exhaustive_flow(lattice, chunks, target, budget=[10**6])
        assert (flow is not None) == (tuple(target) in made)
        if flow is not None:
            assert _steps_of(flow, steps, nd) == (target, chunks)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(topo=topologies(4, 5), chunks=st.sampled_from([4, 16, 64, 256]))
def test_guided_search_is_exact_when_it_finds(topo, chunks):
    """Whatever the guide, a flow the guided search returns carries every chunk and makes each live
    dimension's steps exactly the target (at the floor)."""
    _, types, bw, grid, _, steps = _setup(topo, chunks)
    assume(steps is not None)
    lp = solve_counts(types, 1, relax=True, solver="highs", time_limit_s=math.inf).bound
    t, caps, slack = next(grid.walk(lp))
    lattice = Lattice(steps, topo.ndims, list(grid.live))
    for target in targets(list(grid.wt), caps, slack, limit=2) or []:
        for how in ("projection", "central", 0, 1):
            flow = find_flow(lattice, chunks, target, how, budget=300)
            if flow is not None:
                per_dim, n = _steps_of(flow, steps, topo.ndims)
                assert n == chunks
                assert [per_dim[d] for d in grid.live] == target


def test_targets_are_every_step_vector_with_the_slack():
    wt, caps = [1, 3, 2], [4, 2, 3]
    got = targets(wt, caps, 4, limit=100)
    want = [
        [c - s for c, s in zip(caps, ss)]
        for ss in itertools.product(range(5), range(3), range(4))
        if sum(w * x for w, x in zip(wt, ss)) == 4 and all(x <= c for x, c in zip(ss, caps))
    ]
    assert sorted(got) == sorted(want) and len(got) == len(set(map(tuple, got)))
    assert targets(wt, caps, 4, limit=2) == sorted(want, reverse=True)[:2]  # the first ones, in order
    # an enumeration that gives up says so rather than return a list that looks complete
    assert targets([7, 9], [10**6, 10**6], 10**6 + 1, limit=5, max_visits=3) is None


def test_exhaustive_search_stops_at_its_budget():
    _, types, _, grid, _, steps = _setup("4D-Ring_FC_Ring_SW", 64)
    lp = solve_counts(types, 1, relax=True, solver="highs", time_limit_s=math.inf).bound
    _, caps, slack = next(grid.walk(lp))
    target = targets(list(grid.wt), caps, slack, limit=1)[0]
    full = [0] * 4
    for j, d in enumerate(grid.live):
        full[d] = target[j]
    lattice = Lattice(steps, 4, list(grid.live))
    with pytest.raises(OutOfBudget):
        exhaustive_flow(lattice, 64, full, budget=[3])
    assert exhaustive_flow(lattice, 64, full, budget=[10**6]) is not None


def test_a_paper_topology_is_solved_at_the_floor_without_branch_and_bound():
    """4D-Ring_FC_Ring_SW, 64 chunks: a schedule meets the floor; the ILP equals the order model's."""
    b = lower_bounds("4D-Ring_FC_Ring_SW", size="1GB", chunks=64, pipeline=False, **WORK)
    assert any("without branch and bound" in n for n in b.notes)
    _, types, _, _, _, _ = _setup("4D-Ring_FC_Ring_SW", 64)
    by_orders = solve_counts(types, 1, relax=False, solver="highs", time_limit_s=math.inf, node_limit=NODES, flow=False)
    assert b.status == by_orders.status == "optimal"
    assert b.ilp_ns == pytest.approx(by_orders.bound, rel=1e-6)
    assert sum(b.mix.values()) == 64


def test_an_unreachable_floor_is_proven_and_stays_a_valid_bound():
    """SW(16)_FC(8)_SW(2)_SW(8), 64 chunks: no schedule meets the whole-step floor; the exhaustive
    search proves it, so the proven bound moves to the next candidate time, still at or below the
    optimum, and the MIP solves the rest."""
    topo = "SW(16,200,700)_FC(8,50,500)_SW(2,400,1700)_SW(8,150,20)"
    _, types, bw, grid, edges, _ = _setup(topo, 64)
    lp = solve_counts(types, 1, relax=True, solver="highs", time_limit_s=math.inf).bound
    floor = grid.floor(lp)
    proven, found = floor_search(types, edges, grid, 1, lp)
    assert found is None and proven > floor * (1 + 1e-9)
    by_orders = solve_counts(types, 1, relax=False, solver="highs", time_limit_s=math.inf, node_limit=NODES, flow=False)
    assert by_orders.status == "optimal" and proven <= by_orders.bound * (1 + 1e-9)
    _, used, res = ilp_bound(types, 1, bw, time_limit_s=math.inf, node_limit=NODES)
    assert used == proven and not res.searched and res.bound == pytest.approx(by_orders.bound, rel=1e-6)


def test_the_mix_found_at_the_floor_is_the_same_every_run():
    mixes = [
        lower_bounds(
            "SW(8,50,1700)_FC(4,200,700)_Ring(16,250,1700)_Ring(8,100,20)",
            size="1GB",
            chunks=64,
            pipeline=False,
            **WORK,
        ).mix
        for _ in range(2)
    ]
    assert mixes[0] == mixes[1] and sum(mixes[0].values()) == 64
    assert Counter(mixes[0]) == Counter(mixes[1])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    topo=topologies(4, 4),
    coll=st.sampled_from(["all_reduce", "reduce_scatter", "all_gather"]),
    model=st.sampled_from(["paper", "astra-sim"]),
    mode=st.sampled_from(["overlapped", "serialized"]),
    chunks=st.integers(1, 8),
)
def test_four_dimension_bounds_match_the_solver_and_no_schedule_beats_them(topo, coll, model, mode, chunks):
    """From four dimensions up the searches answer instead of the MIP: the ILP and the pipeline
    bound equal what HiGHS proves on the order model, and no scheduler beats them."""
    if model == "astra-sim":
        mode = "serialized"
    b = lower_bounds(
        topo,
        collective=coll,
        size="64MiB",
        chunks=chunks,
        cost_model=model,
        latency_mode=mode,
        time_limit_s=math.inf,
        node_limit=NODES,
    )
    spec = CollectiveSpec.parse(topo, collective=coll, size="64MiB", chunks=chunks, cost_model=model, latency_mode=mode)
    types = chunk_types(spec)
    ilp = solve_counts(types, 1, relax=False, solver="highs", time_limit_s=math.inf, node_limit=NODES, flow=False)
    pipe = solve_counts(
        distinct_types(types, pipeline=True),
        1,
        relax=False,
        solver="highs",
        time_limit_s=math.inf,
        node_limit=NODES,
        pipeline=True,
    )
    assert b.status == ilp.status == pipe.status == "optimal"
    assert b.ilp_ns == pytest.approx(ilp.bound, rel=1e-6)
    assert b.pipeline_ns == pytest.approx(max(ilp.bound, pipe.bound), rel=1e-6)
    for sched in ("baseline", "themis", "lp_guided"):
        r = evaluate(
            topo,
            collective=coll,
            size="64MiB",
            chunks=chunks,
            scheduler=sched,
            queue="scf",
            cost_model=model,
            latency_mode=mode,
        )
        assert b.pipeline_ns <= r.time_ns * (1 + 1e-9), (sched, b, r.time_ns)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    topo=topologies(4, 4),
    coll=st.sampled_from(["all_reduce", "reduce_scatter", "all_gather"]),
    model=st.sampled_from(["paper", "astra-sim"]),
    chunks=st.sampled_from([16, 32, 64]),
)
def test_bounds_the_searches_settle_are_never_above_a_schedule_the_solver_finds(topo, coll, model, chunks):
    """With more chunks the searches usually settle both bounds. Whatever the MIP solver finds in a
    short run (`SHORT` nodes) on the order model is a real mix, so neither bound may exceed its
    objective; where both solves are proven optimal, the bounds equal the solver's."""
    mode = "serialized" if model == "astra-sim" else "overlapped"
    b = lower_bounds(
        topo,
        collective=coll,
        size="1GB",
        chunks=chunks,
        cost_model=model,
        latency_mode=mode,
        time_limit_s=math.inf,
        node_limit=SHORT,
    )
    spec = CollectiveSpec.parse(topo, collective=coll, size="1GB", chunks=chunks, cost_model=model, latency_mode=mode)
    types = chunk_types(spec)
    for pipeline, bound in ((False, b.ilp_ns), (True, b.pipeline_ns)):
        kinds = distinct_types(types, pipeline=pipeline)
        ref = solve_counts(
            kinds,
            1,
            relax=False,
            solver="highs",
            time_limit_s=math.inf,
            node_limit=SHORT,
            pipeline=pipeline,
            flow=False,
        )
        counts = [round(c) for c in ref.counts]
        if sum(counts) == chunks:  # the solver has a mix (its incumbent)
            assert bound <= objective_value(kinds, counts, 1, pipeline) * (1 + 1e-9)
        if ref.status == "optimal" and b.status == "optimal":  # (both solvers may stop at the node limit)
            assert bound == pytest.approx(max(b.ilp_ns, ref.bound), rel=1e-6)
