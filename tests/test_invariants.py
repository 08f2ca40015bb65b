"""Invariants on random topologies (hypothesis): volume, utilisation, engines, determinism."""

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dse import evaluate
from dse.core.collectives import nominal_bytes_sent
from dse.core.topology import Dim, Topology
from dse.costs import SimRules, get_cost_model
from dse.schedulers import ScheduleProblem, get_scheduler
from dse.sim.engine import c_engine_built
from dse.sim.evaluate import build_plans
from dse.sim.simulate import simulate

KIND = st.sampled_from(["ring", "fc", "switch"])


@st.composite
def topologies(draw, max_dims=4, pow2=False):
    n = draw(st.integers(1, max_dims))
    dims = []
    for _ in range(n):
        kind = draw(KIND)
        p = 2 ** draw(st.integers(1, 4)) if pow2 or kind == "switch" else draw(st.integers(2, 12))
        bw = draw(st.sampled_from([12.5, 25, 50, 100, 150, 200, 375, 400]))
        lat = draw(st.sampled_from([0, 1, 20, 500, 1700]))
        dims.append(Dim(kind, p, bw, lat))
    return Topology(tuple(dims))


@st.composite
def orders_for(draw, ndims, n):
    perms = st.permutations(list(range(ndims))).map(tuple)
    return draw(st.lists(perms, min_size=n, max_size=n))


COLL = st.sampled_from(["all_reduce", "reduce_scatter", "all_gather", "all_to_all"])
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(data=st.data(), topo=topologies(), coll=COLL, model=st.sampled_from(["paper", "astra-sim"]))
def test_bytes_sent_do_not_depend_on_the_orders(data, topo, coll, model):
    n = data.draw(st.integers(1, 12))
    size = topo.npus * 4096 * n  # divisible all the way down, also in whole bytes
    orders = data.draw(orders_for(topo.ndims, n))
    text = ";".join(",".join(map(str, o)) for o in orders)
    r = evaluate(topo, collective=coll, size=size, chunks=n, scheduler="fixed", orders=text, cost_model=model)
    want = nominal_bytes_sent(coll, size, topo.shape, ag_input_shard=model == "astra-sim")
    assert math.isclose(sum(r.dim_bytes), want, rel_tol=1e-9)
    if coll == "all_reduce":
        assert math.isclose(sum(r.dim_bytes), 2 * size * (topo.npus - 1) / topo.npus, rel_tol=1e-9)


@FAST
@given(
    topo=topologies(),
    coll=COLL,
    sched=st.sampled_from(["baseline", "themis", "round_robin", "random"]),
    queue=st.sampled_from(["fifo", "scf"]),
    mode=st.sampled_from(["overlapped", "serialized"]),
    chunks=st.integers(1, 80),
    active=st.integers(1, 3),
    mib=st.integers(1, 512),
)
def test_no_schedule_beats_100_percent_bandwidth(topo, coll, sched, queue, mode, chunks, active, mib):
    r = evaluate(
        topo,
        collective=coll,
        size=mib * 2**20,
        chunks=chunks,
        scheduler=sched,
        queue=queue,
        latency_mode=mode,
        active_chunks=active,
    )
    ideal = r.bytes_sent / topo.total_bandwidth
    assert r.time_ns >= ideal * (1 - 1e-9)
    assert 0 < r.bw_utilization <= 1 + 1e-9
    assert all(u <= 1 + 1e-9 for u in r.dim_utilization)
    assert r.time_ns >= max(r.dim_busy_ns) * (1 - 1e-9)


@FAST
@given(
    topo=topologies(pow2=True),
    coll=st.sampled_from(["all_reduce", "reduce_scatter", "all_gather"]),
    sched=st.sampled_from(["baseline", "themis", "random"]),
    queue=st.sampled_from(["fifo", "scf"]),
    chunks=st.integers(1, 40),
    active=st.integers(1, 3),
    size=st.integers(10**4, 10**9),
)
def test_astra_sim_never_beats_its_own_busiest_dimension(topo, coll, sched, queue, chunks, active, size):
    r = evaluate(
        topo,
        collective=coll,
        size=size,
        chunks=chunks,
        scheduler=sched,
        queue=queue,
        cost_model="astra-sim",
        active_chunks=active,
    )
    assert r.time_ns == int(r.time_ns)  # whole nanoseconds
    assert r.time_ns * active >= max(r.dim_busy_ns)


@pytest.mark.skipif(not c_engine_built(), reason="the C simulator core is not built")
@FAST
@given(
    topo=topologies(pow2=True),
    coll=COLL,
    sched=st.sampled_from(["baseline", "themis", "round_robin", "random"]),
    queue=st.sampled_from(["fifo", "scf"]),
    model=st.sampled_from(["paper", "astra-sim"]),
    mode=st.sampled_from([None, "serialized"]),
    chunks=st.integers(1, 70),
    active=st.integers(1, 3),
    dim_tiebreak=st.booleans(),
    size=st.sampled_from([2**20, 10**6 + 7, 2**30, 12345678]),
)
def test_c_and_python_engines_agree_exactly(topo, coll, sched, queue, model, mode, chunks, active, dim_tiebreak, size):
    m = get_cost_model(model)
    s = get_scheduler(sched)
    lm = m.check(topo, coll, mode, active)
    plan = m.chunking(coll, size, chunks, topo, baseline=s.is_baseline)
    orders = s.orders(ScheduleProblem(topo, coll, plan, m, 3))
    plans = build_plans(m, topo, coll, orders, plan.sizes, lm, s.is_baseline)
    kw = dict(
        queue=queue,
        rules=SimRules(m.rules.scf_rule, shares_bandwidth=False, dim_tiebreak=dim_tiebreak),
        active_chunks=active,
        timeline=True,
    )
    a = simulate(plans, topo.ndims, engine="c", **kw)
    b = simulate(plans, topo.ndims, engine="python", **kw)
    assert a.time_ns == b.time_ns
    assert a.chunk_end_ns == b.chunk_end_ns
    assert a.timeline == b.timeline
    assert all(math.isclose(x, y, rel_tol=1e-12) for x, y in zip(a.dim_busy_ns, b.dim_busy_ns))


def test_same_command_same_numbers():
    a = evaluate("4D-Ring_FC_Ring_SW", size="1GB", scheduler="random", seed=5, timeline=True)
    b = evaluate("4D-Ring_FC_Ring_SW", size="1GB", scheduler="random", seed=5, timeline=True)
    assert a == b and a.timeline == b.timeline
