"""The C engine's loop for a single collective without a global event order (dse/sim/_flow.c) equal to
the Python reference (dse/sim/engine_ref.py) to the bit, and reported as the loop that ran: one
collective alone on servers of one place, compact events, smallest-first queues (dse's and
ASTRA-sim's), phases with and without a delay in one run (RELEASE and ARRIVE, or COMPLETE),
same-time events everywhere (grid values, equal phases, equal bandwidths), arrivals out of their
source's order (unequal delays on one dim), a delay lost to rounding, latency-bound runs (many
arrivals in flight); `evaluate_many` on such runs against the Python path; and the flow loop's own
Python reference (dse/sim/engine_flow_ref.py) equal to the engine's."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dse
from dse.core.topology import Topology, parse_topology
from dse.costs.base import Phase
from dse.sim import engine, engine_flow_ref, engine_ref
from dse.sim.batch import evaluate_many
from dse.sim.engine_io import FIFO, SCF_ASTRA, SCF_PRIORITY, NetRules

from .test_engine import BUSY, KEY, MANY, SENT, assert_same, both, expected_loop, needs_c, single_agrees

#: a delay: none (a COMPLETE), a few equal ones (same-time arrivals), any
FLOW_DELAY = st.one_of(st.just(0.0), st.sampled_from([0.5, 1.0, 2.0]), st.floats(1e-3, 50.0))
FLOW_GRID = st.sampled_from([0.0, 1.0, 2.0])


@st.composite
def flow_phase(draw, ndims, grid):
    d = draw(st.integers(0, ndims - 1))
    busy = draw(FLOW_GRID if grid else BUSY)
    delay = draw(FLOW_GRID if grid else FLOW_DELAY)
    return Phase(d, "rs", busy, delay, draw(KEY), draw(SENT), draw(st.booleans()), 0, None)


@st.composite
def flow_cases(draw):
    """(net, plans) the flow loop runs: a pool of phases (equal phases: ties), chunks of up to 12
    of them (a dim twice in a row, as an all-reduce's middle), up to 64 chunks."""
    nd = draw(st.integers(1, 5))
    grid = draw(st.booleans())
    pool = draw(st.lists(flow_phase(nd, grid), min_size=1, max_size=12))
    plans = []
    for _ in range(draw(st.integers(1, 64))):
        if plans and draw(st.integers(0, 3)) == 0:
            plans.append(draw(st.sampled_from(plans)))  # the same tuple: one plan for several chunks
            continue
        idx = draw(st.lists(st.integers(0, len(pool) - 1), min_size=1, max_size=12))
        plans.append(tuple(pool[i] for i in idx))
    net = NetRules(nd, draw(st.sampled_from([SCF_PRIORITY, SCF_ASTRA])), 1, tieless=True)
    return net, plans


@needs_c
@MANY
@given(flow_cases())
def test_flow_loop_equals_reference(case):
    net, plans = case
    assert expected_loop(net, plans, False).startswith("flow_")
    single_agrees(net, plans, record=False)


@needs_c
@MANY
@given(flow_cases(), st.sampled_from([FLOW_GRID, BUSY]))
def test_flow_loop_with_one_delay_per_dim_equals_reference(case, busy):
    """Every phase of a dim with one delay (its arrivals come in order, as a cost model makes them),
    the busy times from a grid or any: the case the flow loop is built for."""
    net, plans = case
    delay = {d: 0.5 + d for d in range(net.ndims)}
    plans = [tuple(x._replace(delay=delay[x.dim]) for x in p) for p in plans]
    assert expected_loop(net, plans, False).startswith("flow_")
    single_agrees(net, plans, record=False)


@needs_c
@pytest.mark.parametrize("policy", [SCF_PRIORITY, SCF_ASTRA])
def test_flow_loop_delay_lost_to_rounding_is_none(policy):
    """At 2^53 ns a delay of 0.5 is lost (2^53 + 0.5 == 2^53): that phase completes, its chunk moves
    on at once, among phases whose delay is kept."""
    big, p = 2.0**53, Phase
    plans = [
        (p(0, "rs", big, 0.5, 1.0, 1.0, False, 0, None), p(1, "rs", 2.0, 0.5, 2.0, 1.0, False, 0, None)),
        (p(1, "rs", 3.0, 0.5, 1.0, 1.0, False, 0, None), p(0, "rs", 1.0, 0.0, 1.0, 1.0, False, 0, None)),
        (p(0, "rs", 1.0, 2.0, 4.0, 1.0, False, 0, None), p(0, "rs", 2.0, 0.5, 1.0, 1.0, False, 0, None)),
    ]
    out, _ = both(NetRules(2, policy, 1, tieless=True), plans=plans)
    assert out.loop == ("flow_dse" if policy == SCF_PRIORITY else "flow_astra")
    assert out.chunk_end[0] == big + 2.0  # no arrival after either phase: it moved on at 2^53, ended 2 later


@needs_c
def test_flow_loop_many_chunks_agree():
    """A large run (512 chunks, 8 phases each over 3 dims) against the reference."""
    pool = [
        Phase(d, "rs", 1.0 + d + 0.25 * k, 2.0 * d + 0.5, float(1 + k % 3), 1.0, k % 5 == 0, 0, None)
        for d in range(3)
        for k in range(4)
    ]
    plans = [tuple(pool[(c * 7 + j * 5) % len(pool)] for j in range(8)) for c in range(512)]
    assert expected_loop(NetRules(3, SCF_PRIORITY, 1, tieless=True), plans, False) == "flow_dse"
    single_agrees(NetRules(3, SCF_PRIORITY, 1, tieless=True), plans, record=False)


@needs_c
@pytest.mark.parametrize("policy", [SCF_PRIORITY, SCF_ASTRA])
def test_flow_loop_latency_bound_agrees(policy):
    """Phases far shorter than their delays, unequal per dim (a small collective's latencies): every
    chunk in flight at once, each dim's arrivals from several dims interleaved (its lanes)."""
    pool = [
        Phase(d, "rs", 0.01 * (1 + k), (60.0, 700.0, 2100.0, 5100.0)[d], float(1 + k % 3), 1.0, k == 3, 0, None)
        for d in range(4)
        for k in range(4)
    ]
    plans = [tuple(pool[(c * 5 + j * 7) % len(pool)] for j in range(8)) for c in range(600)]
    net = NetRules(4, policy, 1, tieless=True)
    assert expected_loop(net, plans, False).startswith("flow_")
    single_agrees(net, plans, record=False)


# ----- evaluate_many on the flow loop against the Python path -------------------------------------
BW = st.sampled_from([25.0, 50.0, 100.0, 200.0])  # few values: equal bandwidths, same-time events


@st.composite
def flow_points(draw):
    """Rows of one 4-dim shape (equal values often), Themis with smallest-first queues; latencies
    none (phases without a delay: COMPLETEs), equal or the preset's."""
    model = draw(st.sampled_from(("paper", "astra-sim")))
    n = draw(st.integers(2, 4))
    rows = [[draw(st.one_of(BW, st.floats(25.0, 400.0))) for _ in range(4)] for _ in range(n)]
    lat = draw(st.sampled_from([None, [0.0] * 4, [20.0] * 4, [700.0, 700.0, 0.0, 20.0]]))
    kw = dict(
        topology="4D-Ring_FC_Ring_SW",
        size=draw(st.sampled_from(("1GB", "64MiB", "3000017"))),
        chunks=draw(st.sampled_from((1, 4, 16, 64))),
        scheduler="themis",
        queue="scf",
        cost_model=model,
        collective=draw(st.sampled_from(("all_reduce", "reduce_scatter", "all_gather"))),
    )
    return rows, lat, kw


@needs_c
@settings(max_examples=40, deadline=None)
@given(flow_points())
def test_evaluate_many_on_the_flow_loop_equals_the_python_path(point):
    rows, lat, kw = point
    engine.loop_counts(reset=True)
    res = evaluate_many(bandwidths=rows, latencies=None if lat is None else [lat] * len(rows), **kw)
    ran = {name: n for name, n in engine.loop_counts().items() if n}
    assert ran and set(ran) <= {"flow_dse_4d", "flow_astra_4d"}, ran  # the batch's runs: the flow loop's
    shape = parse_topology(kw["topology"])
    common = {k: v for k, v in kw.items() if k != "topology"}
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(engine, "DEFAULT", "python")
        for i, row in enumerate(rows):
            dims = tuple(
                replace(d, bandwidth=b, latency=d.latency if lat is None else lat[j])
                for j, (d, b) in enumerate(zip(shape.dims, row))
            )
            assert res.result(i) == dse.evaluate(Topology(dims), **common)
    finally:
        mp.undo()


# ----- the flow loop's Python reference ----------------------------------------------------------
@settings(MANY, max_examples=150)
@given(flow_cases(), st.booleans())
def test_flow_reference_equals_the_engine_reference(case, one_delay):
    """dse/sim/engine_flow_ref.py (the flow loop's algorithm) against dse/sim/engine_ref.py (the global
    event order), to the bit; with one delay per dim or any."""
    net, plans = case
    if one_delay:
        plans = [tuple(x._replace(delay=0.5 + x.dim) for x in p) for p in plans]
    out = engine_flow_ref.run(net, plans)
    assert out.loop == "python-flow"
    assert_same(out, engine_ref.run(net, None, None, plans=plans))


@pytest.mark.parametrize(
    "net", [NetRules(2, FIFO, tieless=True), NetRules(2, SCF_PRIORITY, 2, tieless=True), NetRules(2, SCF_PRIORITY)]
)
def test_flow_reference_refuses_what_the_flow_loop_does_not_run(net):
    with pytest.raises(ValueError, match="flow loop"):
        engine_flow_ref.run(net, [(Phase(0, "rs", 1.0, 0.0, 1.0, 1.0, False, 0, None),)])
