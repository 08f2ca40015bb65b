"""The compiled path (dse.sim.compiled, dse/sim/_batch.c) and `evaluate_many` against the Python path.

`evaluate` runs a point on the compiled path when it can (its shape's chunks, phases and Themis'
trackers made in C for the point's size and chunks, the `paper`, `astra-sim` and `astra-sim-1` phase
costs compiled, dse/sim/_kernels.c, the C engine); with the reference engine forced
(`dse.sim.engine.DEFAULT = "python"`) it runs the schedulers, the cost models' own methods and
`dse.sim.engine_ref` in Python. The two must agree to the bit on every field of the `Result`;
`evaluate_many` must equal `evaluate`.
"""

from __future__ import annotations

import dataclasses
from array import array

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import dse
from dse.core.errors import InputError
from dse.core.topology import Dim, Topology, parse_topology
from dse.sim import engine as engine_mod
from dse.sim.batch import evaluate_many, prepare
from dse.sim.compiled import CACHE, FIELD_NAMES, KIND_CODES, compilable

needs_c = pytest.mark.skipif(not engine_mod.c_engine_built(), reason="the C engine is not built")
KINDS = ("ring", "fc", "switch")


def python_evaluate(monkeypatch: pytest.MonkeyPatch, topo: Topology | str, **kw: object) -> dse.Result:
    with monkeypatch.context() as m:
        m.setattr(engine_mod, "DEFAULT", "python")
        return dse.evaluate(topo, **kw)


@st.composite
def topologies(draw: st.DrawFn, model: str) -> Topology:
    nd = draw(st.integers(1, 5))
    dims = []
    for _ in range(nd):
        kind = draw(st.sampled_from(KINDS))
        npus = draw(st.sampled_from((2, 4, 8))) if kind == "switch" or model != "paper" else draw(st.integers(2, 9))
        bw = draw(st.floats(1.0, 500.0, allow_nan=False))
        lat = draw(st.sampled_from((0.0, 1.0, 20.0, 700.0, draw(st.floats(0.0, 2000.0)))))
        links = {"ring": 2, "fc": npus - 1, "switch": 1}[kind] * draw(st.integers(1, 2))
        dims.append(Dim(kind, npus, bw, lat, links=links if model == "astra-sim-1" else None))
    return Topology(tuple(dims))


@st.composite
def points(draw: st.DrawFn) -> tuple[Topology, dict]:
    model = draw(st.sampled_from(("paper", "astra-sim", "astra-sim-1")))
    topo = draw(topologies(model))
    sched = draw(st.sampled_from(("themis", "baseline", "round_robin", "random")))
    kw: dict = dict(
        cost_model=model,
        scheduler=sched,
        queue=draw(st.sampled_from(("fifo", "scf"))),
        collective=draw(st.sampled_from(("all_reduce", "reduce_scatter", "all_gather", "all_to_all"))),
        size=draw(st.sampled_from(("1GB", "64MiB", "3000017", "256KB"))),
        chunks=draw(st.sampled_from((1, 2, 7, 16, 64))),
        seed=draw(st.integers(0, 3)),
    )
    if model == "paper":
        kw["latency_mode"] = draw(st.sampled_from(("overlapped", "serialized")))
        kw["active_chunks"] = draw(st.sampled_from((1, 1, 2, 3)))
    return topo, kw


@needs_c
@settings(max_examples=300, deadline=None)
@given(points())
def test_compiled_evaluate_equals_the_python_path(point: tuple[Topology, dict]) -> None:
    topo, kw = point
    mp = pytest.MonkeyPatch()
    try:
        want = python_evaluate(mp, topo, **kw)
    except InputError:
        return  # a configuration both paths refuse (checked below)
    finally:
        mp.undo()
    twice = evaluate_many([topo, topo], **kw)  # two points of one shape, in C
    assert twice._results == [None, None]  # neither went through `evaluate`
    assert twice.result(1) == want
    dse.evaluate(topo, **kw)
    assert dse.evaluate(topo, **kw) == want  # a call seen before


@needs_c
@settings(max_examples=60, deadline=None)
@given(st.lists(points(), min_size=1, max_size=6))
def test_evaluate_many_equals_evaluate(pts: list) -> None:
    specs = []
    for topo, kw in pts:
        try:
            dse.evaluate(topo, **kw)
        except InputError:
            continue
        specs.append({"topology": topo, **kw})
    res = evaluate_many(specs)
    assert len(res) == len(specs)
    for i, p in enumerate(specs):
        r = dse.evaluate(**p)
        assert res.time_ns[i] == r.time_ns and res.dim_busy_ns[i] == r.dim_busy_ns
        assert res.result(i) == r


@needs_c
def test_vectorised_form_equals_topologies() -> None:
    base = parse_topology("4D-Ring_FC_Ring_SW")
    rows = [[100.0 + 10 * i, 200.0, 300.0 - 5 * i, 200.0 + i] for i in range(25)]
    lats = [[d.latency * (1 + i % 3) for d in base.dims] for i in range(25)]
    topos = [
        Topology(tuple(dataclasses.replace(d, bandwidth=b, latency=lt) for d, b, lt in zip(base.dims, r, lr)))
        for r, lr in zip(rows, lats)
    ]
    for model in ("paper", "astra-sim", "astra-sim-1"):
        kw = dict(size="1GB", chunks=16, cost_model=model)
        vec = evaluate_many(bandwidths=rows, latencies=lats, topology=base, **kw)
        by_topo = evaluate_many(topos, **kw)
        assert vec.time_ns == by_topo.time_ns and vec.dim_bytes == by_topo.dim_bytes
        assert vec.results() == by_topo.results() == [dse.evaluate(t, **kw) for t in topos]


# ----- astra-sim-1's kernel (dse/sim/_kernels.c) against dse/costs/astra_sim1.py ----------------------
ASTRA1_SHAPES = ("ring", "direct", "halving_doubling")


@st.composite
def astra1_dim(draw: st.DrawFn) -> Dim:
    """A dim astra-sim-1 accepts: any kind and algorithm (halving-doubling on powers of two), links
    not always a multiple of what a message uses, fractional latencies."""
    kind = draw(st.sampled_from(KINDS))
    npus = draw(st.sampled_from((2, 4, 8, 16))) if draw(st.booleans()) else draw(st.integers(2, 12))
    algos = ASTRA1_SHAPES if npus & (npus - 1) == 0 else ASTRA1_SHAPES[:2]
    unit = {"ring": 2, "fc": npus - 1, "switch": 1}[kind]
    links = unit * draw(st.integers(1, 3)) + draw(st.integers(0, 2))

    def ns() -> float:
        return draw(st.sampled_from((0.0, 1.0, 10.5, 700.0, draw(st.floats(0.0, 5000.0)))))

    return Dim(
        kind,
        npus,
        draw(st.floats(0.01, 1000.0)),
        ns(),
        algorithm=draw(st.sampled_from(algos)),
        links=links,
        nic_latency=ns(),
        router_latency=ns(),
    )


@st.composite
def astra1_points(draw: st.DrawFn) -> tuple[list[Topology], dict]:
    """Points of one shape: a topology, then copies with new bandwidths and latencies (what a point
    brings) and some with new links, NIC or router latencies (what the shape fixes)."""
    base = [draw(astra1_dim()) for _ in range(draw(st.integers(1, 4)))]
    topos = [Topology(tuple(base))]
    for _ in range(draw(st.integers(1, 4))):
        dims = []
        for d in base:
            d = dataclasses.replace(d, bandwidth=draw(st.floats(0.01, 1000.0)), latency=draw(st.floats(0.0, 5000.0)))
            if draw(st.integers(0, 3)) == 0:
                unit = {"ring": 2, "fc": d.npus - 1, "switch": 1}[d.kind]
                d = dataclasses.replace(
                    d,
                    links=unit * draw(st.integers(1, 3)),
                    nic_latency=draw(st.floats(0.0, 100.0)),
                    router_latency=draw(st.floats(0.0, 100.0)),
                )
            dims.append(d)
        topos.append(Topology(tuple(dims)))
    kw: dict = dict(
        cost_model="astra-sim-1",
        scheduler=draw(st.sampled_from(("themis", "baseline", "round_robin"))),
        queue=draw(st.sampled_from(("fifo", "scf"))),
        collective=draw(st.sampled_from(("all_reduce", "reduce_scatter", "all_gather", "all_to_all"))),
        size=draw(st.sampled_from(("1GB", "64MiB", "3000017", "256KB", "1000"))),
        chunks=draw(st.sampled_from((1, 2, 7, 16, 64))),
    )
    return topos, kw


KINDS_BY_CODE = {v: k for k, v in KIND_CODES.items()}


def kernel_costs(p: object) -> tuple:
    """One point's combos and their (busy, delay, ties, greedy bandwidths) from its shape's C kernel."""
    spec = p.spec  # type: ignore[attr-defined]
    topo = spec.topology
    bw, lat = array("d", [d.bandwidth for d in topo.dims]), array("d", [d.latency for d in topo.dims])
    eng = engine_mod._engine
    return eng.batch_costs(CACHE.shape(p).capsule, spec.size, spec.chunks, bw, lat)  # type: ignore[union-attr]


@needs_c
@settings(max_examples=300, deadline=None)
@given(astra1_points())
def test_astra_sim1_kernel_equals_the_cost_model(point: tuple[list[Topology], dict]) -> None:
    """Per combo the kernel's busy, delay and tie offsets are `_make_phase`'s (`phase_timing`), and
    per dim its greedy bandwidth is `greedy_bandwidth`, to the bit, at every point of the shape."""
    topos, kw = point
    try:
        prepared = [prepare(dict(kw, topology=t)) for t in topos]
    except InputError:
        return
    model = prepared[0].spec.cost_model
    for p in prepared:
        assert compilable(p)
        combos, busy, delay, ties, gbw = kernel_costs(p)
        dims = p.spec.topology.dims
        for k, (d, kind, c) in enumerate(combos):
            ph, _ = model._make_phase(dims[d], d, KINDS_BY_CODE[kind], c, p.spec.latency_mode)
            assert (busy[k], delay[k], tuple(ties[3 * k : 3 * k + 3])) == (ph.busy, ph.delay, ph.tie)
        assert list(gbw) == [model.greedy_bandwidth(d) for d in dims]


@needs_c
@pytest.mark.filterwarnings("ignore:BW utilisation above 100")
@settings(max_examples=300, deadline=None)
@given(astra1_points())
def test_astra_sim1_evaluate_many_equals_the_python_path(point: tuple[list[Topology], dict]) -> None:
    """Random astra-sim-1 points, several of a shape with new bandwidths and latencies (and some
    with new links, NIC or router latencies, another shape): `evaluate_many` runs them on the
    kernel and equals the pure-Python path and `evaluate`, to the bit."""
    topos, kw = point
    mp = pytest.MonkeyPatch()
    try:
        want = [python_evaluate(mp, t, **kw) for t in topos]
    except InputError:
        return
    finally:
        mp.undo()
    res = evaluate_many(topos, **kw)
    assert res.results() == want
    assert [dse.evaluate(t, **kw) for t in topos] == want


@needs_c
def test_astra_sim1_beyond_the_kernel_integers_runs_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Times the kernel cannot hold exactly (2^61 ns and more) are refused by it, and so are byte
    counts beyond exact doubles (an all-gather grows its chunk by every dim's size): such points run
    in Python, the rest of their batch compiled. All equal the Python path."""
    fast = Topology((Dim("ring", 4, 100.0, 10.0, links=2), Dim("switch", 8, 50.0, 5.5, links=1, router_latency=3.0)))
    slow = Topology((dataclasses.replace(fast.dims[0], bandwidth=1e-8), fast.dims[1]))
    kw = dict(cost_model="astra-sim-1", size="1TB", chunks=2)
    kernel_costs(prepare(dict(kw, topology=fast)))
    with pytest.raises(OverflowError):
        kernel_costs(prepare(dict(kw, topology=slow)))
    want = [python_evaluate(monkeypatch, t, **kw) for t in (fast, slow, fast)]
    assert max(want[1].dim_busy_ns) >= 2**61
    assert evaluate_many([fast, slow, fast], **kw).results() == want
    rows = [[d.bandwidth for d in t.dims] for t in (fast, slow, fast)]
    assert evaluate_many(bandwidths=rows, topology=fast, **kw).results() == want
    huge = "Switch(1048576,100,1,links=1)_Switch(1048576,100,1,links=1)"
    for model in ("astra-sim", "astra-sim-1"):
        kw = dict(cost_model=model, collective="all_gather", size=2**40, chunks=1)
        with pytest.raises(OverflowError):
            kernel_costs(prepare(dict(kw, topology=huge)))
        want = [python_evaluate(monkeypatch, huge, **kw)] * 2
        assert evaluate_many([huge, huge], **kw).results() == want
        assert dse.evaluate(huge, **kw) == want[0]


def test_results_are_built_only_when_asked() -> None:
    """Points of the compiled path get their `Result`s when asked, each one shape or many."""
    two = [parse_topology("3D-FC_Ring_SW"), parse_topology("3D-FC_Ring_SW").with_latency(5)]
    res = evaluate_many(["2D-SW_SW", *two], size="64MB", chunks=8)
    built = [r is not None for r in res._results]
    assert res.time_ns[1] > 0 and (not engine_mod.c_engine_built() or built == [False, False, False])
    assert res.result(2) == dse.evaluate(two[1], size="64MB", chunks=8)


def test_points_the_compiled_path_cannot_run_go_through_evaluate() -> None:
    """lp_guided chooses orders from the costs; more than five dims; a congestion-unaware model with
    several active chunks (its busy time needs the timeline): each equals `evaluate`."""
    six = "Ring(2,100,10)_Ring(2,90,10)_Ring(2,80,10)_Ring(2,70,10)_Ring(2,60,10)_Ring(2,50,10)"
    pts = [
        dict(topology="2D-SW_SW", size="64MB", chunks=4, scheduler="lp_guided"),
        dict(topology=six, size="64MB", chunks=8),
        dict(topology="2D-SW_SW", size="64MB", chunks=8, cost_model="astra-sim", active_chunks=2),
    ]
    with pytest.warns(UserWarning):
        res = evaluate_many(pts)
        want = [dse.evaluate(**p) for p in pts]
    assert res.results() == want


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(bandwidths=[[100.0, -1.0]], topology="2D-SW_SW"), "bandwidths row 0"),
        (dict(bandwidths=[[100.0, float("nan")]], topology="2D-SW_SW"), "bandwidths row 0"),
        (dict(bandwidths=[[100.0, 50.0], [1.0]], topology="2D-SW_SW"), "bandwidths row 1"),
        (dict(bandwidths=[[100.0, 50.0]], latencies=[[1.0, -2.0]], topology="2D-SW_SW"), "latencies row 0"),
        (dict(bandwidths=[[100.0, 50.0]], latencies=[[1.0, 2.0]] * 2, topology="2D-SW_SW"), "latencies"),
        (dict(latencies=[[1.0, 2.0]], topology="2D-SW_SW"), "latencies"),
        (dict(bandwidths=[[100.0, 50.0], [100.0, "fast"]], topology="2D-SW_SW"), "bandwidths row 1"),
        (dict(bandwidths=[[100.0, 50.0], [100.0, None]], topology="2D-SW_SW"), "bandwidths row 1"),
        (dict(bandwidths="100,50", topology="2D-SW_SW"), "bandwidths"),
        (dict(bandwidths=7, topology="2D-SW_SW"), "bandwidths"),
        (dict(bandwidths=[[100.0, 50.0, 25.0]], topology="2D-SW_SW"), "bandwidths row 0"),
    ],
)
def test_bad_vectorised_input_is_one_line(kwargs: dict, field: str) -> None:
    with pytest.raises(InputError) as e:
        evaluate_many(size="1GB", **kwargs)
    assert e.value.field == field and "\n" not in str(e.value)


@needs_c
def test_vectorised_rows_may_be_any_array_like() -> None:
    """Lists, tuples, a numpy array and a generator of rows give the same numbers."""
    import numpy as np

    rows = [[100.0 + i, 50.0 + 2 * i] for i in range(6)]
    kw = dict(topology="2D-SW_SW", size="256MB", chunks=8)
    want = evaluate_many(bandwidths=rows, **kw)
    for form in (tuple(map(tuple, rows)), np.array(rows), (r for r in rows), [np.array(r) for r in rows]):
        got = evaluate_many(bandwidths=form, **kw)
        assert got.time_ns == want.time_ns and got.dim_busy_ns == want.dim_busy_ns
    assert want.results() == [
        dse.evaluate(
            Topology(tuple(dataclasses.replace(d, bandwidth=b) for d, b in zip(parse_topology("2D-SW_SW").dims, r))),
            size="256MB",
            chunks=8,
        )
        for r in rows
    ]


def test_bad_point_names_its_index() -> None:
    with pytest.raises(InputError) as e:
        evaluate_many(["2D-SW_SW", "Ring(4,100,1)_Nope(2,1,1)"], size="1GB")
    assert e.value.field.startswith("point 1:")
    with pytest.raises(InputError) as e:
        evaluate_many([{"topology": "2D-SW_SW", "size": "1GB", "colour": "red"}])
    assert e.value.field.startswith("point 0:") and "colour" in str(e.value)
    with pytest.raises(InputError):
        evaluate_many(["2D-SW_SW"], bandwidths=[[1.0, 2.0]], size="1GB")


def test_repeated_arguments_are_checked_and_labelled_each_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """`evaluate` remembers validated arguments; the work limit is still checked on every call, and
    a topology with the same dims under another name keeps its own label."""
    named = parse_topology("2D-SW_SW")
    plain = Topology(named.dims)
    assert dse.evaluate(named, size="1GB").topology == "2D-SW_SW"
    assert dse.evaluate(plain, size="1GB").topology == plain.notation()
    assert dse.evaluate(named, size="1GB").time_ns == dse.evaluate(plain, size="1GB").time_ns
    monkeypatch.setenv("DSE_MAX_WORK", "10")
    with pytest.raises(InputError) as e:
        dse.evaluate(named, size="1GB")
    assert "work" in str(e.value).lower() or e.value.field == "DSE_MAX_WORK" or "steps" in str(e.value)
    with pytest.raises(InputError):
        dse.evaluate(named, size="1GB", chunks=True)  # type: ignore[arg-type]


# ----- fresh points: any size and chunk count on a shape built once ----------------------------------
@st.composite
def fresh_points(draw: st.DrawFn) -> tuple[Topology, dict, list[tuple[int, int]]]:
    """One shape and points of it at new sizes and chunk counts (sizes that leave a smaller last chunk
    in the integer models, chunk counts above the first point's)."""
    topo, kw = draw(points())
    kw.pop("size")
    kw.pop("chunks")
    pairs = draw(
        st.lists(
            st.tuples(st.integers(1, 3 * 10**9) | st.sampled_from((1000, 4097, 2**30 + 3)), st.integers(1, 130)),
            min_size=2,
            max_size=6,
        )
    )
    return topo, kw, [(max(s, c), c) for s, c in pairs]


@needs_c
@pytest.mark.filterwarnings("ignore:BW utilisation above 100")
@settings(max_examples=150, deadline=None)
@given(fresh_points())
def test_fresh_sizes_and_chunks_equal_the_python_path(case: tuple[Topology, dict, list[tuple[int, int]]]) -> None:
    """Points of one shape at sizes and chunk counts never seen, in one `evaluate_many` call and one
    `evaluate` each, equal the pure-Python path to the bit."""
    topo, kw, pairs = case
    pts = [dict(kw, topology=topo, size=s, chunks=c) for s, c in pairs]
    mp = pytest.MonkeyPatch()
    try:
        want = [python_evaluate(mp, topo, **dict(kw, size=s, chunks=c)) for s, c in pairs]
    except InputError:
        event("refused by both paths")
        return
    finally:
        mp.undo()
    event("compared")
    CACHE.clear()
    res = evaluate_many(pts)
    if compilable(prepare(pts[0])):
        assert res._results == [None] * len(pts)  # every point compiled, in one call
    assert res.results() == want
    assert [dse.evaluate(topo, **dict(kw, size=s, chunks=c)) for s, c in pairs] == want


@needs_c
def test_a_scheduler_s_orders_grow_with_the_chunks() -> None:
    """A shape made at 2 chunks holds the orders of 6; a point of 100 chunks gets more (random's
    seeded stream, round-robin's cycle), the same as the Python path."""
    for sched in ("random", "round_robin", "baseline"):
        kw = dict(size="64MB", scheduler=sched, seed=3, queue="fifo")
        CACHE.clear()
        small = dse.evaluate("3D-SW_SW_SW_hetero", chunks=2, **kw)
        big = evaluate_many([dict(kw, topology="3D-SW_SW_SW_hetero", chunks=100)]).result(0)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(engine_mod, "DEFAULT", "python")
            assert small == dse.evaluate("3D-SW_SW_SW_hetero", chunks=2, **kw)
            assert big == dse.evaluate("3D-SW_SW_SW_hetero", chunks=100, **kw)
        assert len(big.orders) == 100


@needs_c
def test_the_shape_is_given_by_field_name() -> None:
    """The Python side gives exactly the fields the C side declares; a missing or unknown one is one
    ValueError naming it."""
    p = prepare(dict(topology="4D-Ring_FC_Ring_SW", size="1GB"))
    fields = CACHE.shape(p).fields()
    assert sorted(fields) == sorted(FIELD_NAMES) and len(FIELD_NAMES) == len(set(FIELD_NAMES))
    eng = engine_mod._engine
    for name in ("permcode", "nd"):
        with pytest.raises(ValueError, match=name):
            eng.batch_table({k: v for k, v in fields.items() if k != name})  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="colour"):
        eng.batch_table(dict(fields, colour=1))  # type: ignore[union-attr]


@needs_c
def test_one_cache_and_one_clear() -> None:
    """`CACHE` holds the shapes and `evaluate`'s calls; `clear()` empties both, and the next call gives
    the same result."""
    first = dse.evaluate("2D-SW_SW", size="1GB", chunks=8)
    assert CACHE.shapes and CACHE.calls
    CACHE.clear()
    assert not CACHE.shapes and not CACHE.calls
    assert dse.evaluate("2D-SW_SW", size="1GB", chunks=8) == first


def test_metrics_equal_the_results() -> None:
    """`BatchResult.metrics` gives each point's figures of merit as its `Result` has them."""
    res = evaluate_many([dict(topology="3D-SW_SW_SW_hetero", size=10**8 + k * 999, chunks=4 + k) for k in range(6)])
    for i in range(len(res)):
        m = res.metrics(i)
        r = res.result(i)
        assert m == (r.bw_utilization, r.bw_utilization_uncapped, r.algbw_GBps, r.busbw_GBps)
        assert res.metrics(i) == m  # from the Result, once built
