"""The C engine's entry points refuse what they cannot run: seeded mutated calls of `run`,
`batch_table`, `batch_run`, `batch_one` and `batch_costs` (dse.testing.faults_engine) each return or
raise, in a forked child, never a signal or a hang; each mutation that crashed or hung the engine,
and each rule of a shape's fields and of a batch's points, as its own test (a refused call leaves
its shape giving the recorded numbers)."""

from __future__ import annotations

import random
from array import array

import pytest

from dse.costs.base import Phase
from dse.sim import engine
from dse.sim.engine_io import NetRules
from dse.testing import faults_engine
from dse.testing.faults_engine import CAMPAIGN, broken, call_apart, capture, replay, run_apart

pytestmark = pytest.mark.skipif(not engine.c_engine_built(), reason="the C engine is not built: nothing to crash")

PAPER, ASTRA, ASTRA1 = 1, 2, 3  # a shape's kernel codes (dse.sim.compiled.KERNELS)
FIXED, LOAD, GREEDY = 0, 1, 2  # its trackers (dse.sim.compiled: NO_TRACKER, LOAD_TRACKER, OFFLINE_GREEDY)


def test_seeded_mutated_calls_keep_the_promise(tmp_path):
    """150 mutated calls, each in a forked child: every one returns or raises (no signal, no hang,
    no SystemError), and a `batch_run` or `batch_one` leaves its shape giving the recorded numbers."""
    _, _, case = CAMPAIGN["mutated engine calls"]
    rng = random.Random(33)
    problems = [p for _ in range(150) for p in case(rng, tmp_path)]
    assert problems == []
    assert {entry for entry, _, _ in capture()} == {"run", "batch_table", "batch_run", "batch_one", "batch_costs"}


def test_the_capture_covers_every_kernel_and_tracker():
    """Shapes of each kernel with each of its trackers, and a batch of mixed sizes and chunk counts."""
    shapes = {(args[0]["kernel"], args[0]["tracker"]) for entry, args, _ in capture() if entry == "batch_table"}
    assert shapes == {(PAPER, FIXED), (PAPER, LOAD), (ASTRA, FIXED), (ASTRA, GREEDY), (ASTRA1, FIXED), (ASTRA1, GREEDY)}
    mixed = [args[1] for entry, args, _ in capture() if entry == "batch_run" and len(set(args[1][2])) > 1]
    assert mixed and all(len(set(points[1])) > 1 for points in mixed)


def test_a_fresh_shape_gives_the_recorded_numbers():
    """Each recorded `batch_run` and `batch_one` on a shape parsed anew gives what it gave on the shape
    that had run other points before: the numbers do not depend on what a shape ran before (which the
    campaign's check after a mutated call takes for granted)."""
    eng, wrong = engine._engine, []
    for i, (entry, args, expected) in enumerate(capture()):
        if entry in ("batch_run", "batch_one"):
            if replay(eng, entry, eng.batch_table(args[0]), args[1:]) != repr(expected):
                wrong.append((i, entry, args[0]["kernel"], args[0]["tracker"]))
    assert wrong == []


def test_negative_lead_map_is_refused():
    """A lead map entry below 0 made the engine index before its pool: this one was a SIGSEGV."""
    ph = Phase(0, "rs", 1.0, 0.5, 1.0, 1.0, False, 0, (1, (-(2**31),) * 100_000))
    plans = [(ph,) * 4] * 2

    def run() -> object:
        return engine.run(NetRules(2, track_lead=True), plans=plans, engine="c")

    outcome = run_apart(run)
    assert outcome.startswith("raised ValueError: a lead map's entry"), outcome


@pytest.mark.parametrize(
    "stride, table",
    [(0, (0, 1)), (-1, (0, 1)), (2**40, (0, 1)), (1, ()), (1, (0, 2)), (1, (0, 2**40)), (1, (0, 1.5)), ("1", (0, 1))],
)
def test_bad_lead_maps_are_refused(stride, table):
    plans = [(Phase(0, "rs", 1.0, 0.0, 1.0, 1.0, False, 0, (stride, table)),)]
    outcome = run_apart(lambda: engine.run(NetRules(1, track_lead=True), plans=plans, engine="c"))
    assert outcome.startswith(("raised ValueError", "raised TypeError")), outcome


@pytest.mark.parametrize("field, value", [(2, -1.0), (3, float("nan")), (4, float("inf")), (5, -2.0), (2, "x")])
def test_bad_phase_numbers_are_refused(field, value):
    """Negative or non-finite busy, delay, key or bytes: times before zero once ran the flow loop
    past its inbox sentinels."""
    ph = [0, "rs", 1.0, 0.0, 1.0, 1.0, False, 0, None]
    ph[field] = value
    outcome = run_apart(lambda: engine.run(NetRules(1), plans=[(Phase(*ph),)] * 3, engine="c"))
    assert outcome.startswith(("raised ValueError", "raised TypeError")), outcome


def test_graph_that_is_not_a_tuple_is_a_type_error():
    """A graph given as a list once raised SystemError (the argument parser's, not a refusal)."""
    args = (1, 0, 1, 0, 0, 0, 0, 0, 0, [], [(0,), (0,), (1.0,), (0.0,), [0, 0], [], [], 0, 0, 0, 0.0, 0, None], None)
    assert call_apart("run", args).startswith("raised TypeError"), call_apart("run", args)


def _huge_shared_run() -> object:
    """Two chunks over two dims sharing bandwidth, each phase 1e308 ns: its end overflows to inf."""
    ph = [Phase(d, "ar", 1e308, 0.0, 1.0, 1.0, False, 0, None) for d in (0, 1)]
    return engine.run(NetRules(2, slots=2, shared=True), plans=[tuple(ph)] * 2, engine="c")


def _huge_shared_point() -> object:
    """A point of a shape sharing bandwidth (`active_chunks` 2) whose latencies make its costs inf."""
    args = next(a for entry, a, _ in capture() if entry == "batch_one" and a[0]["shared"])
    fields, size, chunks, bw, lat = args
    return engine._engine.batch_one(
        engine._engine.batch_table(fields), size, chunks, bw, array("d", [1e308] * len(lat))
    )


@pytest.mark.parametrize("call", [_huge_shared_run, _huge_shared_point], ids=["run", "batch_one"])
def test_times_beyond_the_doubles_end_under_processor_sharing(call, monkeypatch):
    """Costs whose sums overflow to inf made the processor-sharing loop spin for ever (a hang)."""
    monkeypatch.setattr(faults_engine, "CALL_SECONDS", 5.0)
    outcome = run_apart(call)
    assert not broken(outcome), outcome


def _shape(kernel: int, tracker: int) -> tuple[dict, tuple]:
    """A recorded shape of this kernel and tracker, and the recorded call to make on it (`capture`)."""
    for entry, args, expected in capture():
        if entry == "batch_table" and args[0]["kernel"] == kernel and args[0]["tracker"] == tracker:
            return args[0], expected
    raise AssertionError(f"no recorded shape with kernel {kernel} and tracker {tracker}")


def _point(fields: dict, call: tuple) -> tuple:
    """The first point of a recorded call on a shape: (size, chunks, bandwidths, latencies)."""
    entry, rest = call
    if entry == "batch_one":
        return rest
    points, nd = rest[0], fields["nd"]
    return points[1][0], points[2][0], points[3][:nd], points[4][:nd]


def _at(fields: dict, name: str, index: int, value: int) -> dict:
    """The fields with item `index` of array field `name` set to `value`."""
    a = array(fields[name].typecode, fields[name])
    a[index] = value
    return {**fields, name: a}


def _code(fields: dict, order: int) -> int:
    """Order `order`'s code, its place in `permcode`."""
    nd = fields["nd"]
    return sum(d * nd**k for k, d in enumerate(fields["perm"][order * nd : (order + 1) * nd]))


def _fc(fields: dict) -> int:
    """The first fully connected dim (astra-sim-1's `dim_kind` 1)."""
    return list(fields["dim_kind"]).index(1)


def _without(fields: dict, name: str) -> dict:
    return {k: v for k, v in fields.items() if k != name}


#: (kernel, tracker, the shape's fields changed): each must be refused by `batch_table` (and so by
#: `batch_costs`) with a ValueError or TypeError naming what is wrong
TABLE_FAULTS = {
    "permcode without an order": (PAPER, LOAD, lambda f: _at(f, "permcode", _code(f, 1), -1)),
    "permcode naming an order twice": (PAPER, LOAD, lambda f: _at(f, "permcode", 0, 0)),
    "permcode naming an order that is not there": (ASTRA, FIXED, lambda f: _at(f, "permcode", 0, f["norder"])),
    "perm not a permutation": (ASTRA, GREEDY, lambda f: _at(f, "perm", 1, f["perm"][0])),
    "perm beyond the dims": (ASTRA1, FIXED, lambda f: _at(f, "perm", 0, f["nd"])),
    "prefix beyond the orders": (ASTRA1, FIXED, lambda f: _at(f, "prefix", 2, f["norder"])),
    "prefix below 0": (PAPER, FIXED, lambda f: _at(f, "prefix", 0, -1)),
    "prefix given with a tracker": (PAPER, LOAD, lambda f: {**f, "prefix": array("i", [0])}),
    "prefix missing without one": (ASTRA, FIXED, lambda f: {**f, "prefix": array("i")}),
    "step_off from -1": (ASTRA, FIXED, lambda f: _at(f, "step_off", 0, -1)),
    "step_off decreasing": (PAPER, LOAD, lambda f: _at(f, "step_off", 1, f["step_off"][2] + 1)),
    # a SIGSEGV in batch_costs and batch_run: the rising check's step_off[k - 1] + 1 overflowed
    "step_off of the most int, then less": (PAPER, LOAD, lambda f: _at(f, "step_off", 1, 2**31 - 1)),
    "step_off beyond the steps": (ASTRA1, GREEDY, lambda f: _at(f, "step_off", -1, len(f["step_dim"]) + 1)),
    "step_dim beyond the dims": (PAPER, LOAD, lambda f: _at(f, "step_dim", 3, f["nd"])),
    "step_kind beyond 3": (ASTRA1, GREEDY, lambda f: _at(f, "step_kind", 0, 4)),
    "dim_p 0": (ASTRA, GREEDY, lambda f: _at(f, "dim_p", 0, 0)),
    "an astra-sim-1 fully connected dim of 1 NPU": (ASTRA1, GREEDY, lambda f: _at(f, "dim_p", _fc(f), 1)),
    "dim_links 0 with astra-sim-1": (ASTRA1, FIXED, lambda f: _at(f, "dim_links", 0, 0)),
    "dim_kind missing with astra-sim-1": (ASTRA1, GREEDY, lambda f: {**f, "dim_kind": array("i")}),
    "base beyond the orders with the load tracker": (PAPER, LOAD, lambda f: {**f, "base": f["norder"]}),
    "the load tracker under astra-sim": (ASTRA, GREEDY, lambda f: {**f, "tracker": LOAD}),
    "a missing field": (ASTRA, FIXED, lambda f: _without(f, "dim_steps")),
    "an unknown field": (PAPER, FIXED, lambda f: {**f, "dims": 4}),
    "a field that is not a str": (PAPER, LOAD, lambda f: {**f, 0: 1}),
    "nd 9": (PAPER, LOAD, lambda f: {**f, "nd": 9}),
    "norder 0": (ASTRA1, GREEDY, lambda f: {**f, "norder": 0}),
    "a scalar of another type": (ASTRA, GREEDY, lambda f: {**f, "slots": 1.0}),
    "an array of another type": (PAPER, FIXED, lambda f: {**f, "dim_p": array("q", f["dim_p"])}),
    "a NaN threshold": (PAPER, LOAD, lambda f: {**f, "thr_frac": float("nan")}),
    "a negative NIC latency": (ASTRA1, FIXED, lambda f: {**f, "dim_nic": array("d", [-1.0] * f["nd"])}),
}


@pytest.mark.parametrize("fault", TABLE_FAULTS.values(), ids=TABLE_FAULTS.keys())
def test_shape_faults_are_refused(fault):
    kernel, tracker, change = fault
    fields, after = _shape(kernel, tracker)
    bad = change(fields)
    outcome = call_apart("batch_table", (bad,), after)
    assert outcome.startswith(("raised ValueError", "raised TypeError")), outcome
    outcome = call_apart("batch_costs", (bad, *_point(fields, after)))
    assert outcome.startswith(("raised ValueError", "raised TypeError")), outcome


def _set(row: array, index: int, value: float) -> array:
    row = array(row.typecode, row)
    row[index] = value
    return row


#: the recorded (points, outputs) changed: each must be refused with a ValueError or TypeError
POINT_FAULTS = {
    "a count whose rows overflow": lambda p, o: ((2**62, *p[1:]), o),
    "a count beyond the rows": lambda p, o: ((p[0] + 1, *p[1:]), o),
    "a NaN bandwidth": lambda p, o: ((*p[:3], array("d", [float("nan")] * len(p[3])), *p[4:]), o),
    "a zero bandwidth": lambda p, o: ((*p[:3], array("d", [0.0] * len(p[3])), *p[4:]), o),
    "a negative latency": lambda p, o: ((*p[:4], array("d", [-1.0] * len(p[4])), p[5]), o),
    "rows of another type": lambda p, o: ((*p[:3], array("f", p[3]), *p[4:]), o),
    "sizes of another type": lambda p, o: ((p[0], array("d", p[1]), *p[2:]), o),
    "a size of 0": lambda p, o: ((p[0], _set(p[1], 1, 0), *p[2:]), o),
    "more chunks than bytes": lambda p, o: ((*p[:2], _set(p[2], 1, p[1][1] + 1), *p[3:]), o),
    "order_off going down": lambda p, o: ((*p[:5], _set(p[5], 2, p[5][1] - 1)), o),
    "order_off leaving a point less than its chunks": lambda p, o: ((*p[:5], _set(p[5], 1, 1)), o),
    "order_off beyond the orders": lambda p, o: ((*p[:5], _set(p[5], p[0], len(o[4]) + 1)), o),
    "outputs too small": lambda p, o: (p, (*o[:4], o[4][: p[5][p[0]] - 1])),
    "times too small": lambda p, o: (p, (o[0][:-1], *o[1:])),
    "outputs not writable": lambda p, o: (p, (bytes(o[0]), *o[1:])),
}


@pytest.mark.parametrize("fault", POINT_FAULTS.values(), ids=POINT_FAULTS.keys())
def test_point_faults_are_refused_and_the_shape_still_runs(fault):
    """Bad rows are refused, and the same shape then runs the recorded points to the recorded numbers."""
    fields, points, outs, expected = next(
        (*args, expected) for entry, args, expected in capture() if entry == "batch_run" and args[1][0] > 2
    )
    outcome = call_apart("batch_run", (fields, *fault(points, outs)), expected, (points, outs))
    assert outcome.startswith(("raised ValueError", "raised TypeError", "raised BufferError")), outcome
    assert not broken(outcome)


#: a recorded point of `batch_one` changed: each must be refused
ONE_FAULTS = {
    "a size of 0": lambda s, c, b, t: (0, c, b, t),
    "no chunks": lambda s, c, b, t: (s, 0, b, t),
    "more chunks than bytes": lambda s, c, b, t: (s, s + 1, b, t),
    "more chunks than the orders can hold": lambda s, c, b, t: (2**40, 2**31 - 1, b, t),
    "a size beyond the kernels' integers": lambda s, c, b, t: (2**62, c, b, t),
    "a size that is not an int": lambda s, c, b, t: (float(s), c, b, t),
    "a NaN bandwidth": lambda s, c, b, t: (s, c, _set(b, 0, float("nan")), t),
    "an infinite latency": lambda s, c, b, t: (s, c, b, _set(t, 1, float("inf"))),
    "a bandwidth short": lambda s, c, b, t: (s, c, b[:-1], t),
    "bandwidths as a list": lambda s, c, b, t: (s, c, list(b), t),
}


@pytest.mark.parametrize("fault", ONE_FAULTS.values(), ids=ONE_FAULTS.keys())
def test_one_point_faults_are_refused_and_the_shape_still_runs(fault):
    """A bad point is refused, and the same shape then runs the recorded point to the recorded numbers."""
    args, expected = next((a, x) for entry, a, x in capture() if entry == "batch_one" and a[0]["tracker"] == LOAD)
    outcome = call_apart("batch_one", (args[0], *fault(*args[1:])), expected, args[1:])
    assert outcome.startswith(("raised ValueError", "raised TypeError", "raised OverflowError")), outcome
