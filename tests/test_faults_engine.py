"""The C engine's entry points refuse what they cannot run (issue 33): seeded mutated calls of `run`,
`batch_table`, `batch_run` and `batch_costs` (dse.testing.faults_engine) each return or raise, in a
forked child, never a signal; and each mutation that crashed the engine before, as its own test."""

from __future__ import annotations

import random
from array import array

import pytest

from dse.costs.base import Phase
from dse.sim import engine
from dse.sim.engine_io import NetRules
from dse.testing.faults_engine import CAMPAIGN, broken, call_apart, capture, run_apart

pytestmark = pytest.mark.skipif(not engine.c_engine_built(), reason="the C engine is not built: nothing to crash")

PAPER, ASTRA, ASTRA1 = 1, 2, 3  # the table's kernel codes (dse.sim.tables.KERNELS)
FIXED, LOAD, GREEDY = 0, 1, 2  # its trackers


def test_seeded_mutated_calls_keep_the_promise(tmp_path):
    """150 mutated calls, each in a forked child: every one returns or raises (no signal, no hang,
    no SystemError), and a refused `batch_run` leaves its table giving the recorded numbers."""
    _, _, case = CAMPAIGN["mutated engine calls"]
    rng = random.Random(33)
    problems = [p for _ in range(150) for p in case(rng, tmp_path)]
    assert problems == []
    assert {entry for entry, _, _ in capture()} == {"run", "batch_table", "batch_run", "batch_costs"}


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


def _table(kernel: int, tracker: int) -> tuple[tuple, tuple]:
    """A recorded table of this kernel and tracker, and the recorded (points, outputs) to run on it."""
    for entry, args, expected in capture():
        if entry == "batch_table" and args[0][0][8] == kernel and args[0][0][7] == tracker:
            return args[0], expected
    raise AssertionError(f"no recorded table with kernel {kernel} and tracker {tracker}")


def _with(table: tuple, item: int, index: int | None, value: int) -> tuple:
    t = list(table)
    a = array(t[item].typecode, t[item])
    if index is None:
        del a[:]
    else:
        a[index] = value
    t[item] = a
    return tuple(t)


#: (kernel, tracker, item, index, value): each crashed the engine of 2026-11-28 through batch_table and
#: batch_run (SIGSEGV, SIGFPE) or gave a SystemError; index None empties the item
TABLE_FAULTS = {
    "plan_off from -1": (PAPER, FIXED, 6, 0, -1),
    "slot_of beyond the plans": (ASTRA, FIXED, 8, 0, 256),
    "slot_of below 0": (ASTRA1, GREEDY, 8, 3, -3),
    "chunk_sc beyond the size classes": (ASTRA, FIXED, 9, 3, 3),
    "chunk_cc beyond the charge classes": (PAPER, LOAD, 10, 5, 65536),
    "fixed order beyond the orders": (ASTRA1, FIXED, 11, 3, 64),
    "permcode without an order": (PAPER, LOAD, 13, 0 + 1 * 4 + 2 * 16 + 3 * 64, -1),
    "ch_idx below 0": (PAPER, LOAD, 16, 11, -(2**31)),
    "chk_dim beyond the dims": (PAPER, LOAD, 27, 8, 2**31 - 1),
    "dim_p of 0 (a division by zero)": (ASTRA, GREEDY, 20, 0, 0),
    "a fully connected dim of one NPU (astra-sim-1, a division by zero)": (ASTRA1, GREEDY, 20, 1, 1),
    "greedy_r emptied (SystemError)": (ASTRA, GREEDY, 21, None, 0),
    "chunk_sc emptied (SystemError)": (PAPER, LOAD, 9, None, 0),
}


@pytest.mark.parametrize("fault", TABLE_FAULTS.values(), ids=TABLE_FAULTS.keys())
def test_table_faults_are_refused(fault):
    kernel, tracker, item, index, value = fault
    table, after = _table(kernel, tracker)
    outcome = call_apart("batch_table", (_with(table, item, index, value),), after)
    assert outcome.startswith("raised ValueError"), outcome
    kernel_only = (_with(table, item, index, value), (after[0][1][: table[0][0]], after[0][2][: table[0][0]]))
    if kernel:  # batch_costs parses the same table
        assert call_apart("batch_costs", kernel_only).startswith("raised ValueError")


POINT_FAULTS = {
    "a count whose rows overflow": lambda p: (2**62, *p[1:]),
    "a NaN bandwidth": lambda p: (p[0], array("d", [float("nan")] * len(p[1])), *p[2:]),
    "a zero bandwidth": lambda p: (p[0], array("d", [0.0] * len(p[1])), *p[2:]),
    "a negative latency": lambda p: (p[0], p[1], array("d", [-1.0] * len(p[2])), *p[3:]),
    "rows of another type": lambda p: (p[0], array("f", p[1]), *p[2:]),
}


@pytest.mark.parametrize("fault", POINT_FAULTS.values(), ids=POINT_FAULTS.keys())
def test_point_faults_are_refused_and_the_table_still_runs(fault):
    """Bad rows are refused, and the same table then runs the recorded points to the recorded numbers."""
    table, points, outs, expected = next(
        (*args, expected) for entry, args, expected in capture() if entry == "batch_run" and args[1][0] > 1
    )
    outcome = call_apart("batch_run", (table, fault(points), outs), expected, (points, outs))
    assert outcome.startswith("raised ValueError"), outcome
    assert not broken(outcome)
