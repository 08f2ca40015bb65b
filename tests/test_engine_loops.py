"""Which event loop the C engine runs (`EngineOutput.loop`, `dse.sim.engine.loop_counts`): each of its
loops forced by the run's rules and reported as the one that ran, with the reference's numbers; the
counters of every run (the batch's too); the Python reference reporting itself."""

from __future__ import annotations

import pytest

from dse.costs.base import Phase
from dse.sim import engine
from dse.sim.engine_io import FIFO, SCF_ASTRA, SCF_PRIORITY, NetRules

from .test_engine import assert_same, expected_loop, flow, needs_c

LOOPS = (
    "generic",
    "compact_dse",
    "compact_astra",
    "tied_dse",
    "tied_astra",
    "flow_dse",
    "flow_astra",
    "flow_dse_4d",
    "flow_astra_4d",
)


def chunks(nd: int, keys: int = 3) -> list[tuple[Phase, ...]]:
    """Eight chunks over `nd` dims, phases with and without a delay, up to `keys` distinct keys."""
    out = []
    for c in range(8):
        plan = []
        for j in range(3):
            d, k = (c + 2 * j) % nd, (c * 3 + j) % keys
            plan.append(Phase(d, "rs", 1.0 + (c + j) % 3, 0.5 * (j % 2), float(k + 1), 1.0, c == 5, 0, None))
        out.append(tuple(plan))
    return out


#: 65 distinct keys on dim 0: more than the ranked queues hold
MANY_KEYS = [
    (Phase(0, "rs", 1.0, 0.0, float(k % 65), 1.0, False, 0, None), Phase(1, "rs", 1.0, 0.0, 1.0, 1.0, False, 0, None))
    for k in range(70)
]

#: arrivals into dim 1 from dim 0 after 65 delays, each earlier than the one before (out of their lane's order)
MANY_DELAYS = [
    (Phase(0, "rs", 1.0, 200.0 - 3 * k, 1.0, 1.0, False, 0, None), Phase(1, "rs", 1.0, 0.0, 1.0, 1.0, False, 0, None))
    for k in range(65)
]

#: name: (the loop that must run, net, plans, record, flow loop allowed)
FORCED = {
    "fifo": ("generic", NetRules(2, FIFO, tieless=True), chunks(2), False, True),
    "a log": ("generic", NetRules(2, SCF_PRIORITY, tieless=True), chunks(2), True, True),
    "two slots": ("generic", NetRules(2, SCF_ASTRA, 2, tieless=True), chunks(2), False, True),
    "priorities": ("generic", NetRules(2, SCF_ASTRA, issue_priorities=True, tieless=True), chunks(2), False, True),
    "65 keys on a dim: not ranked": ("generic", NetRules(2, SCF_PRIORITY, tieless=True), MANY_KEYS, False, True),
    "tie keys, dse": ("tied_dse", NetRules(2, SCF_PRIORITY), chunks(2), False, True),
    "tie keys, astra": ("tied_astra", NetRules(3, SCF_ASTRA, dim_tiebreak=True), chunks(3), False, True),
    "compact, dse": ("compact_dse", NetRules(2, SCF_PRIORITY, tieless=True), chunks(2), False, False),
    "compact, astra": ("compact_astra", NetRules(4, SCF_ASTRA, tieless=True), chunks(4), False, False),
    "65 delays into a dim": ("flow_astra", NetRules(2, SCF_ASTRA, tieless=True), MANY_DELAYS, False, True),
    "65 dims: no lanes": ("flow_dse", NetRules(65, SCF_PRIORITY, tieless=True), chunks(65), False, True),
    "256 dims: beyond the flow loop": (
        "compact_dse",
        NetRules(256, SCF_PRIORITY, tieless=True),
        chunks(3),
        False,
        True,
    ),
    "flow, dse": ("flow_dse", NetRules(3, SCF_PRIORITY, tieless=True), chunks(3), False, True),
    "flow, astra": ("flow_astra", NetRules(1, SCF_ASTRA, tieless=True), chunks(1), False, True),
    "flow, dse, 4 dims": ("flow_dse_4d", NetRules(4, SCF_PRIORITY, tieless=True), chunks(4), False, True),
    "flow, astra, 4 dims": ("flow_astra_4d", NetRules(4, SCF_ASTRA, tieless=True), chunks(4), False, True),
}


@needs_c
def test_the_loops_are_named_in_their_order():
    from dse.sim import _engine

    assert _engine.LOOPS == LOOPS
    assert tuple(engine.loop_counts()) == LOOPS


@needs_c
@pytest.mark.parametrize("loop, net, plans, record, flow_on", FORCED.values(), ids=FORCED.keys())
def test_each_loop_runs_where_its_rules_say_and_reports_itself(loop, net, plans, record, flow_on):
    assert expected_loop(net, plans, record, flow_on) == loop
    with flow(flow_on):
        engine.loop_counts(reset=True)
        out = engine.run(net, plans=plans, record=record, engine="c")
        counts = engine.loop_counts(reset=True)
    assert out.loop == loop
    assert {k: n for k, n in counts.items() if n} == {loop: 1}
    assert_same(out, engine.run(net, plans=plans, record=record, engine="python"))


@needs_c
def test_flow_and_compact_loops_give_the_same_numbers():
    net, plans = NetRules(4, SCF_PRIORITY, tieless=True), chunks(4)
    with flow(False):
        compact = engine.run(net, plans=plans, engine="c")
    flowed = engine.run(net, plans=plans, engine="c")
    assert (compact.loop, flowed.loop) == ("compact_dse", "flow_dse_4d")
    assert_same(compact, flowed)
    assert compact == flowed  # == compares the numbers, not the loop


@needs_c
def test_set_flow_returns_the_previous_setting():
    with flow(True):
        assert engine.set_flow(False) is True
        assert engine.set_flow(False) is False


@needs_c
def test_loop_counts_reset_returns_the_counts_then_zeroes_them():
    engine.loop_counts(reset=True)
    for _ in range(3):
        engine.run(NetRules(2, FIFO), plans=chunks(2), engine="c")
    assert engine.loop_counts()["generic"] == 3
    assert engine.loop_counts(reset=True)["generic"] == 3
    assert set(engine.loop_counts().values()) == {0}


@needs_c
def test_a_graph_runs_the_generic_loop():
    """A workload graph's collectives are planned as they are issued: its queues are never ranked."""
    from .test_engine import Hooks, small_graph

    g = small_graph([1, 1], [2, 2], [0, 0], [((1, 0.0),), ()])
    net = NetRules(2, SCF_PRIORITY, tieless=True)
    out = engine.run(net, g, Hooks({0: (chunks(2), 0), 1: (chunks(2), 0)}), engine="c")
    assert out.loop == "generic"


def test_the_python_reference_reports_itself():
    assert engine.run(NetRules(2, SCF_PRIORITY), plans=chunks(2), engine="python").loop == "python"
