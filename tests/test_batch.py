"""The compiled evaluation (dse.tables, dse/_batch.c) and `evaluate_many` against the Python path.

`evaluate` runs a shape table in C when it can (Themis' trackers and the `paper` and `astra-sim`
phase costs compiled, the C engine); with the reference engine forced (`dse.engine.DEFAULT =
"python"`) it runs the schedulers, the cost models' own methods and `dse.engine_ref` in Python. The
two must agree to the bit on every field of the `Result`; `evaluate_many` must equal `evaluate`.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dse
from dse import engine as engine_mod
from dse.batch import evaluate_many
from dse.errors import InputError
from dse.topology import Dim, Topology, parse_topology

needs_c = pytest.mark.skipif(not engine_mod.c_engine_built(), reason="the C engine is not built")
KINDS = ("ring", "fc", "switch")


def python_evaluate(monkeypatch: pytest.MonkeyPatch, topo: "Topology | str", **kw: object) -> dse.Result:
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
    kw: dict = dict(cost_model=model, scheduler=sched, queue=draw(st.sampled_from(("fifo", "scf"))),
                    collective=draw(st.sampled_from(("all_reduce", "reduce_scatter", "all_gather", "all_to_all"))),
                    size=draw(st.sampled_from(("1GB", "64MiB", "3000017", "256KB"))),
                    chunks=draw(st.sampled_from((1, 2, 7, 16, 64))), seed=draw(st.integers(0, 3)))  # fmt: skip
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
    twice = evaluate_many([topo, topo], **kw)  # two points of one shape: its table, in C
    assert twice._results == [None, None]  # neither went through `evaluate`
    assert twice.result(1) == want
    dse.evaluate(topo, **kw)
    assert dse.evaluate(topo, **kw) == want  # a shape seen before: its table


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
    topos = [Topology(tuple(dataclasses.replace(d, bandwidth=b, latency=lt) for d, b, lt in zip(base.dims, r, lr)))
             for r, lr in zip(rows, lats)]  # fmt: skip
    for model in ("paper", "astra-sim"):
        kw = dict(size="1GB", chunks=16, cost_model=model)
        vec = evaluate_many(bandwidths=rows, latencies=lats, topology=base, **kw)
        by_topo = evaluate_many(topos, **kw)
        assert vec.time_ns == by_topo.time_ns and vec.dim_bytes == by_topo.dim_bytes
        assert vec.results() == by_topo.results() == [dse.evaluate(t, **kw) for t in topos]


def test_results_are_built_only_when_asked() -> None:
    """Points sharing a shape run on its table, their `Result`s built when asked; a shape with one
    point (a table costs more than one evaluation) goes through `evaluate`."""
    two = [parse_topology("3D-FC_Ring_SW"), parse_topology("3D-FC_Ring_SW").with_latency(5)]
    res = evaluate_many(["2D-SW_SW", *two], size="64MB", chunks=8)
    built = [r is not None for r in res._results]
    assert res.time_ns[1] > 0 and (not engine_mod.c_engine_built() or built == [True, False, False])
    assert res.result(2) == dse.evaluate(two[1], size="64MB", chunks=8)


def test_points_the_tables_cannot_run_go_through_evaluate() -> None:
    """lp_guided chooses orders from the costs; more than five dims; a congestion-unaware model with
    several active chunks (its busy time needs the timeline): each equals `evaluate`."""
    six = "Ring(2,100,10)_Ring(2,90,10)_Ring(2,80,10)_Ring(2,70,10)_Ring(2,60,10)_Ring(2,50,10)"
    pts = [dict(topology="2D-SW_SW", size="64MB", chunks=4, scheduler="lp_guided"),
           dict(topology=six, size="64MB", chunks=8),
           dict(topology="2D-SW_SW", size="64MB", chunks=8, cost_model="astra-sim", active_chunks=2)]  # fmt: skip
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
    assert want.results() == [dse.evaluate(Topology(tuple(dataclasses.replace(d, bandwidth=b) for d, b in
                                                    zip(parse_topology("2D-SW_SW").dims, r))), size="256MB", chunks=8)
                              for r in rows]  # fmt: skip


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
