"""The fixed service order (queue ``fixed``, dse/sim/service_order.py): each dimension serves the phases
of a given sequence of chunks, idle until the next one's phase arrives (docs/model.md §6.2).

- the C engine equals the Python reference to the bit, on raw phases (ties, processor sharing, lead
  maps; valid, shuffled and broken sequences, stalls included) and on the cost models' phases;
- any schedule the simulator produces can be replayed: a fifo or scf run's per-dimension service
  sequences, read off its timeline and served by queue ``fixed``, give the same time and timeline;
- a hand-made case where serving the later-arriving chunk first is forced, against its closed form;
- every bad input is one `InputError` line on ``service_order`` (or ``queue``), and a sequence that
  deadlocks is an error found when no event is left, never a hang.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dse import evaluate, evaluate_many
from dse.core.errors import InputError
from dse.core.topology import Dim, Topology, parse_topology
from dse.costs import get_cost_model
from dse.costs.base import Phase
from dse.schedulers import ScheduleProblem, get_scheduler, parse_queue
from dse.sim import engine
from dse.sim.compiled import compilable
from dse.sim.engine_io import FIFO, FIXED_SEQ, N_COMM, NET, EngineGraph, NetRules, ServiceStall
from dse.sim.evaluate import build_plans
from dse.sim.service_order import served_order
from dse.sim.simulate import simulate
from dse.sim.spec import RunSpec

from .conftest import bits

C_BUILT = engine.c_engine_built()
needs_c = pytest.mark.skipif(not C_BUILT, reason="the C engine (dse/sim/_engine.c) is not built: nothing to compare")
ENGINES = ["python"] + (["c"] if C_BUILT else [])
CASES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ----- helpers -----------------------------------------------------------------------------------


def interleaved(plans: Sequence[Sequence[Phase]], ndims: int, rng: random.Random) -> list[list[int]]:
    """A valid service order: a random interleaving of the chunks' phases (each chunk's in its
    order), each dimension's sequence the chunks in the order their phases there come in it. Every
    such order can be served: the earliest phase not yet started always gets its turn."""
    left = [list(p) for p in plans]
    seqs: list[list[int]] = [[] for _ in range(ndims)]
    live = [c for c in range(len(plans)) if left[c]]
    while live:
        c = rng.choice(live)
        seqs[left[c].pop(0).dim].append(c)
        if not left[c]:
            live.remove(c)
    return seqs


def served(timeline, ndims: int) -> list[list[int]]:
    """Each dimension's service sequence in a run (`served_order`), as lists."""
    return [list(s) for s in served_order(timeline, ndims)]


def outcome(fn):
    """What `fn()` returns, or the stall / input error it raises (as comparable values)."""
    try:
        return fn()
    except ServiceStall as e:
        return ("stall", e.dim, e.entry, e.chunk)
    except InputError as e:
        return ("input", str(e))


# ----- C == reference on raw phases --------------------------------------------------------------
BUSY = st.one_of(st.sampled_from([0.0, 1e-9, 0.5, 1.0, 2.0, 3.0]), st.floats(0.0, 50.0))
DELAY = st.one_of(st.just(0.0), st.sampled_from([0.5, 1.0, 2.0]), st.floats(1e-3, 20.0))


@st.composite
def raw_phase(draw, nd, tied, leads):
    tie = tuple(draw(st.sampled_from([0.0, 0.5, 1.0])) for _ in range(3)) if tied else 0
    lead = (draw(st.sampled_from([1, 2])), tuple(draw(st.permutations(range(3))))) if leads else None
    return Phase(
        draw(st.integers(0, nd - 1)),
        "rs",
        draw(BUSY),
        draw(DELAY),
        draw(st.sampled_from([1.0, 2.0])),
        float(draw(st.integers(0, 100))),
        draw(st.booleans()),
        tie,
        lead,
    )


def mutated(seqs: list[list[int]], nchunks: int, how: str, rng: random.Random) -> list[list[int]]:
    """`seqs` shuffled per dimension (a deadlock, or another valid order), or broken: an entry
    dropped, added (maybe for a chunk that does not exist) or moved to another dimension."""
    out = [list(s) for s in seqs]
    full = [d for d, s in enumerate(out) if s]
    if how == "shuffled":
        for s in out:
            rng.shuffle(s)
    elif how == "dropped" and full:
        s = out[rng.choice(full)]
        s.pop(rng.randrange(len(s)))
    elif how == "added":
        s = out[rng.randrange(len(out))]
        s.insert(rng.randrange(len(s) + 1), rng.randrange(nchunks + 2))
    elif how == "moved" and full:
        d = rng.choice(full)
        out[rng.randrange(len(out))].append(out[d].pop())
    return out


@st.composite
def raw_cases(draw):
    """(net, plans, record, valid): a fixed service order over random phases, any engine rule."""
    nd, slots = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    shared = slots > 1 and draw(st.integers(0, 2)) == 0
    tied = not shared and draw(st.booleans())
    leads = not shared and draw(st.booleans())
    pool = draw(st.lists(raw_phase(nd, tied, leads), min_size=1, max_size=8))
    plans: list[tuple[Phase, ...]] = []
    for _ in range(draw(st.integers(1, 8))):
        if plans and draw(st.integers(0, 3)) == 0:  # the same tuple object (the C side converts it once)
            plans.append(draw(st.sampled_from(plans)))
        else:
            plans.append(tuple(draw(st.lists(st.sampled_from(pool), min_size=1, max_size=6))))
    rng = draw(st.randoms(use_true_random=False))
    how = draw(st.sampled_from(["valid", "valid", "valid", "shuffled", "dropped", "added", "moved"]))
    seqs = mutated(interleaved(plans, nd, rng), len(plans), how, rng)
    net = NetRules(
        nd,
        FIXED_SEQ,
        slots,
        shared=shared,
        dim_tiebreak=not shared and draw(st.booleans()),
        issue_priorities=draw(st.booleans()),  # no effect on a fixed order: both engines ignore them
        track_lead=leads,
        tieless=not tied and draw(st.booleans()),
        service_order=tuple(map(tuple, seqs)),
    )
    return net, plans, draw(st.booleans()), how == "valid"


@needs_c
@CASES
@given(raw_cases())
def test_engine_c_equals_reference_on_raw_phases(case):
    net, plans, record, valid = case
    c = outcome(lambda: engine.run(net, plans=plans, record=record, engine="c"))
    p = outcome(lambda: engine.run(net, plans=plans, record=record, engine="python"))
    assert bits(c) == bits(p)
    event("stalled" if isinstance(c, tuple) else "ran")
    if valid:
        assert not (isinstance(c, tuple) and c[0] == "stall")
        assert len(c.chunk_end) == len(plans)


# ----- C == reference on the cost models' phases -------------------------------------------------
@st.composite
def small_topologies(draw, max_dims=3):
    dims = []
    for _ in range(draw(st.integers(1, max_dims))):
        kind = draw(st.sampled_from(["ring", "fc", "switch"]))
        p = 2 ** draw(st.integers(1, 3))
        dims.append(Dim(kind, p, draw(st.sampled_from([25, 50, 100, 375])), draw(st.sampled_from([0, 20, 700]))))
    return Topology(tuple(dims))


COLL = st.sampled_from(["all_reduce", "all_reduce", "reduce_scatter", "all_gather", "all_to_all"])


def model_plans(topo, kw, sched):
    """What `evaluate` simulates for the point `kw` with scheduler `sched`: its orders, the model's phases."""
    m, coll = get_cost_model(kw["cost_model"]), kw["collective"]
    lm = m.check(topo, coll, kw["latency_mode"], kw["active_chunks"])
    plan = m.chunking(coll, kw["size"], kw["chunks"], topo, baseline=sched.is_baseline)
    orders = sched.orders(ScheduleProblem(topo, coll, plan, m, 0))
    return m, build_plans(m, topo, coll, orders, plan.sizes, lm, sched.is_baseline)


@st.composite
def model_cases(draw):
    """A random small point with random orders (scheduler fixed) and a random valid service order."""
    topo = draw(small_topologies())
    nd, chunks = topo.ndims, draw(st.integers(1, 6))
    orders = [tuple(draw(st.permutations(range(nd)))) for _ in range(chunks)]
    model = draw(st.sampled_from(["paper", "astra-sim"]))
    mode = draw(st.sampled_from([None, "serialized"]))
    kw = dict(
        collective=draw(COLL),
        size=draw(st.sampled_from([2**20, 10**6 + 7, 12345678])),
        chunks=chunks,
        cost_model=model,
        latency_mode=mode,
        active_chunks=draw(st.integers(1, 2)),
        scheduler="fixed",
        orders=";".join(",".join(map(str, o)) for o in orders),
    )
    m, plans = model_plans(topo, kw, get_scheduler("fixed", orders=orders))
    seqs = interleaved(plans, nd, draw(st.randoms(use_true_random=False)))
    return topo, kw, m, plans, seqs


@needs_c
@pytest.mark.filterwarnings("ignore:BW utilisation above 100 %")  # astra-sim, 2 active chunks: each at full speed
@CASES
@given(model_cases())
def test_c_equals_reference_on_the_models_phases(case):
    topo, kw, m, plans, seqs = case
    run = dict(queue="fixed", service_order=seqs, rules=m.rules, active_chunks=kw["active_chunks"], timeline=True)
    c = simulate(plans, topo.ndims, engine="c", **run)
    p = simulate(plans, topo.ndims, engine="python", **run)
    assert bits(c) == bits(p)
    assert served(c.timeline, topo.ndims) == seqs or kw["active_chunks"] > 1
    r = evaluate(topo, queue="fixed", service_order=seqs, timeline=True, **kw)  # the API: the same run
    assert bits((r.time_ns, r.timeline)) == bits((c.time_ns, c.timeline))


# ----- any run replays exactly ---------------------------------------------------------------------
def replays(topo, **kw) -> None:
    """A run with `kw`'s queue, and the same with queue fixed serving the sequences its timeline shows:
    the same numbers to the bit."""
    topo = parse_topology(topo)
    a = evaluate(topo, timeline=True, **kw)
    seqs = served(a.timeline, topo.ndims)
    b = evaluate(topo, timeline=True, **{**kw, "queue": "fixed", "service_order": seqs})
    assert b.queue == "fixed" and a.orders == b.orders
    assert bits((a.time_ns, a.dim_busy_ns, a.dim_bytes, a.timeline)) == bits(
        (b.time_ns, b.dim_busy_ns, b.dim_bytes, b.timeline)
    )


@settings(CASES, max_examples=200)
@given(
    data=st.data(),
    topo=small_topologies(),
    coll=COLL,
    sched=st.sampled_from(["baseline", "themis", "round_robin", "random", "fixed"]),
    queue=st.sampled_from(["fifo", "scf"]),
    model=st.sampled_from(["paper", "astra-sim"]),
    mode=st.sampled_from([None, "serialized"]),
    chunks=st.integers(1, 12),
    size=st.sampled_from([2**20, 10**6 + 7, 12345678]),
)
def test_a_fifo_or_scf_run_replays_exactly(data, topo, coll, sched, queue, model, mode, chunks, size):
    kw = dict(
        collective=coll, size=size, chunks=chunks, scheduler=sched, queue=queue, cost_model=model, latency_mode=mode
    )
    if sched == "fixed":
        perms = st.permutations(range(topo.ndims)).map(lambda o: ",".join(map(str, o)))
        kw["orders"] = ";".join(data.draw(st.lists(perms, min_size=1, max_size=chunks)))
    replays(topo, seed=data.draw(st.integers(0, 3)), **kw)


@pytest.mark.parametrize("topo", ["4D-Ring_FC_Ring_SW@artifact", "3D-SW_SW_SW_hetero@artifact"])
@pytest.mark.parametrize("sched, queue", [("baseline", "fifo"), ("themis", "scf"), ("themis", "fifo")])
def test_astra_sim_1_runs_replay_exactly(topo, sched, queue):
    """ASTRA-sim 1.0's same-tick tie keys and lower-dimension-first rule, replayed too."""
    replays(topo, size="4MB", chunks=4, scheduler=sched, queue=queue, cost_model="astra-sim-1")


def test_the_paper_presets_replay_exactly():
    for topo in ("4D-Ring_SW_SW_SW", "3D-FC_Ring_SW"):
        for queue in ("fifo", "scf"):
            replays(topo, size="1GB", chunks=16, scheduler="themis", queue=queue)


# ----- a forced order, in closed form --------------------------------------------------------------
def ph(dim, busy, delay=0.0):
    return Phase(dim, "rs", float(busy), float(delay), 1.0, 1.0)


@pytest.mark.parametrize("eng", ENGINES)
def test_the_later_chunk_first_idles_the_dimension(eng):
    """Chunk 0 waits on dim 0 from t = 0; chunk 1 gets there after its phase on dim 1 (busy 5,
    latency 3). Serving chunk 1 first, dim 0 idles until 8: T = 5 + 3 + 1 + 10 (fifo: 11)."""
    plans = [(ph(0, 10),), (ph(1, 5, delay=3), ph(0, 1))]
    fixed = simulate(plans, 2, queue="fixed", service_order=[[1, 0], [1]], timeline=True, engine=eng)
    assert fixed.time_ns == 5 + 3 + 1 + 10 and fixed.chunk_end_ns == (19, 9)
    assert [(e.chunk, e.dim, e.start) for e in fixed.timeline] == [(1, 1, 0), (1, 0, 8), (0, 0, 9)]
    assert simulate(plans, 2, queue="fifo", engine=eng).time_ns == 11


def test_serving_one_chunk_whole_first_on_a_ring():
    """A 1 MB all-reduce in 2 chunks on one ring of 4 (paper model, overlapped latency): each phase
    is busy b = (S/2)(P-1)/P / B and then waits l = (P-1)α. Dim 0 serving chunk 1's RS and AG before
    chunk 0's waits out chunk 1's latency while chunk 0 is queued: T = 4b + 3l, not fifo's 4b + l."""
    topo = Topology((Dim("ring", 4, 100, 500),))
    b, lat = (1e6 / 2) * 3 / 4 / 100, 3 * 500
    kw = dict(size="1MB", chunks=2, scheduler="baseline")
    r = evaluate(topo, queue="fixed", service_order="1,1,0,0", timeline=True, **kw)
    assert r.time_ns == 4 * b + 3 * lat
    assert [(e.chunk, e.kind) for e in sorted(r.timeline, key=lambda e: e.start)] == [
        (1, "RS"),
        (1, "AG"),
        (0, "RS"),
        (0, "AG"),
    ]
    assert evaluate(topo, queue="fifo", **kw).time_ns == 4 * b + lat
    assert evaluate(topo, queue="fixed", service_order="0,1,0,1", **kw).time_ns == 4 * b + lat


# ----- bad input -----------------------------------------------------------------------------------
TOPO = "SW(4,100,700)_SW(8,50,1700)"
POINT = dict(size="1MB", chunks=2, scheduler="fixed", orders="01;10")  # chunk 0: 0,1,1,0; chunk 1: 1,0,0,1
GOOD = "0,1,1,0|1,0,0,1"
BAD = {
    "fixed without a service order": (dict(queue="fixed"), "service_order: queue fixed needs a service order"),
    "a service order with fifo": (dict(queue="fifo", service_order=GOOD), "service_order: given with queue fifo"),
    "too few dimensions": (dict(queue="fixed", service_order="0,1,1,0"), "1 sequence(s) for 2 dimension(s)"),
    "too many dimensions": (dict(queue="fixed", service_order=GOOD + "|0"), "3 sequence(s) for 2 dimension(s)"),
    "a chunk out of range": (dict(queue="fixed", service_order="0,1,1,2|1,0,0,1"), "chunk 2 in dimension 0's"),
    "a visit missing": (dict(queue="fixed", service_order="0,1,1|1,0,0,1"), "chunk 0 is 1 time(s) in dimension 0's"),
    "a visit too many": (dict(queue="fixed", service_order="0,1,1,0,1|1,0,0,1"), "chunk 1 is 3 time(s)"),
    "unreadable text": (dict(queue="fixed", service_order="0,1,x|1"), "cannot read '0,1,x'"),
    "not a number": (dict(queue="fixed", service_order=[[0, 1, 1.0, 0], [1, 0, 0, 1]]), "1.0 in dimension 0's"),
    "negative": (dict(queue="fixed", service_order=[[0, 1, 1, -1], [1, 0, 0, 1]]), "-1 in dimension 0's"),
    "not sequences": (dict(queue="fixed", service_order=["0110", "1001"]), "cannot read"),
    "a deadlock": (dict(queue="fixed", service_order="1,1,0,0|0,0,1,1"), "deadlock"),
    "lp_guided times under the queue": (
        dict(queue="fixed", service_order=GOOD, scheduler="lp_guided", orders=None),
        "queue: fixed with the lp_guided scheduler",
    ),
}


@pytest.mark.parametrize("eng", ENGINES)
@pytest.mark.parametrize("kw, message", BAD.values(), ids=BAD.keys())
def test_bad_service_orders_are_one_line(monkeypatch, eng, kw, message):
    monkeypatch.setattr(engine, "DEFAULT", eng)
    args = {k: v for k, v in {**POINT, **kw}.items() if v is not None}
    with pytest.raises(InputError) as e:
        evaluate(TOPO, **args)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).startswith("queue:" if "queue:" in message else "service_order:")
    assert evaluate(TOPO, queue="fixed", service_order=GOOD, **POINT).time_ns > 0  # and the good one runs


@pytest.mark.parametrize("eng", ENGINES)
def test_a_deadlock_in_the_engine_is_an_error_not_a_hang(eng):
    """Each dim waits for the other's chunk: no event is left with entries unserved."""
    plans = [(ph(0, 1), ph(1, 1)), (ph(1, 1), ph(0, 1))]
    net = NetRules(2, FIXED_SEQ, service_order=((1, 0), (0, 1)))
    with pytest.raises(ServiceStall) as e:
        engine.run(net, plans=plans, engine=eng)
    assert (e.value.dim, e.value.entry, e.value.chunk) == (0, 0, 1)
    with pytest.raises(InputError, match=r"^service_order: dimension 0 waits at entry 0 for chunk 1, .*deadlock"):
        simulate(plans, 2, queue="fixed", service_order=[[1, 0], [0, 1]], engine=eng)


STALLS = {
    # (service order, the stall the engine names): a chunk left without an entry comes first
    "an entry missing": (((0,), (0, 1)), (0, 1, 1)),
    "an entry too many": (((0, 1, 1), (0, 1)), (0, 2, 1)),
    "a chunk that never comes": (((0, 1), (0, 1, 5)), (1, 2, 5)),
    "all empty": (((), ()), (0, 0, 0)),
}


@pytest.mark.parametrize("eng", ENGINES)
@pytest.mark.parametrize("order, stall", STALLS.values(), ids=STALLS.keys())
def test_the_engine_names_where_an_order_stalls(eng, order, stall):
    plans = [(ph(0, 10), ph(1, 5)), (ph(0, 3), ph(1, 1))]
    with pytest.raises(ServiceStall) as e:
        engine.run(NetRules(2, FIXED_SEQ, service_order=order), plans=plans, engine=eng)
    assert (e.value.dim, e.value.entry, e.value.chunk) == stall


@pytest.mark.parametrize(
    "kw",
    [
        dict(policy=FIXED_SEQ),
        dict(policy=FIFO, service_order=((0,),)),
        dict(policy=FIXED_SEQ, service_order=((0,), (0,))),
        dict(policy=FIXED_SEQ, service_order=((-1,),)),
    ],
)
def test_net_rules_refuse_a_malformed_order(kw):
    with pytest.raises(ValueError):
        NetRules(1, **kw)


@needs_c
def test_the_c_entry_refuses_a_malformed_order():
    plans = [(ph(0, 1),)]
    for policy, order in [(FIXED_SEQ, None), (FIFO, ((0,),)), (FIXED_SEQ, ((0,), (0,))), (FIXED_SEQ, ((-1,),))]:
        with pytest.raises(ValueError):
            engine._engine.run(1, policy, 1, 0, 0, 0, 0, 0, 1, plans, None, None, order)


def test_fixed_is_refused_where_no_order_can_be_given():
    with pytest.raises(InputError, match="^queue: fixed needs a service order"):
        parse_queue("fixed")
    with pytest.raises(InputError, match="queue fixed needs a service order"):
        evaluate_many([TOPO], queue="fixed", **{k: v for k, v in POINT.items() if k in ("size", "chunks")})


def test_the_compiled_path_leaves_fixed_points_to_the_python_path():
    p = RunSpec.parse(TOPO, queue="fixed", service_order=GOOD, **POINT)
    assert p.service_order == ((0, 1, 1, 0), (1, 0, 0, 1)) and not compilable(p)
    for same in ([[0, 1, 1, 0], [1, 0, 0, 1]], "0,1,1,0;1,0,0,1", " 0, 1, 1, 0 | 1, 0, 0, 1 "):
        assert RunSpec.parse(TOPO, queue="fixed", service_order=same, **POINT).service_order == p.service_order
    for _ in range(3):  # the same call again: never from evaluate's remembered calls
        assert evaluate(TOPO, queue="fixed", service_order=GOOD, **POINT).queue == "fixed"


def test_the_command_line_takes_a_service_order(run_cli):
    args = ("evaluate", TOPO, "--size", "1MB", "--chunks", "2", "--scheduler", "fixed", "--orders", "01;10")
    code, out, _ = run_cli(*args, "--queue", "fixed", "--service-order", GOOD)
    assert code == 0 and "fixed + fixed" in out
    code, _, err = run_cli(*args, "--queue", "fixed", "--service-order", "1,1,0,0|0,0,1,1")
    assert code == 2 and err.count("\n") == 1 and "service_order: dimension 0 waits" in err


@pytest.mark.parametrize("record", [False, True])
def test_a_graph_of_two_collectives_follows_one_order(record):
    """In a workload graph chunk ids run on across collectives, in issue order: collective 1 (chunks
    2, 3) starts after collective 0 (chunks 0, 1); each dim serves the later chunk of each first."""
    g = EngineGraph((N_COMM, N_COMM), (NET, NET), (0.0, 0.0), (0.0, 0.0), (((1, 0.0),), ()), 1)
    plans = [(ph(0, 2), ph(1, 1)), (ph(0, 1), ph(1, 3))]
    net = NetRules(2, FIXED_SEQ, service_order=((1, 0, 3, 2), (1, 0, 3, 2)))
    outs = [engine.run(net, g, _Twice(plans), record=record, engine=e) for e in ENGINES]
    assert all(bits(o) == bits(outs[0]) for o in outs)
    # chunk 1 on dim 0 in [0, 1], dim 1 [1, 4]; chunk 0 on dim 0 [1, 3], dim 1 [4, 5]; then again from 5
    assert outs[0].node_end == (5.0, 10.0) and outs[0].chunk_end == (5.0, 4.0, 10.0, 9.0)


class _Twice:
    """Hooks that issue the same chunks for both collectives."""

    def __init__(self, plans):
        self.plans = plans

    def issue(self, node, t, lead):
        return self.plans, 0

    def resumed(self):
        pass
