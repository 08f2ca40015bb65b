"""The simulator's queue rules on hand-made phase lists (docs/model.md §6.2)."""

import pytest

from dse import evaluate
from dse.costs.base import Phase, SimRules
from dse.sim import engine as engine_front
from dse.sim.simulate import simulate


def ph(dim, busy, key=1.0, delay=0.0, fifo=False):
    return Phase(dim, "RS", float(busy), float(delay), float(key), 1.0, fifo)


ENGINES = ["python", "c"]


@pytest.fixture(params=ENGINES)
def engine(request):
    if request.param == "c" and not engine_front.c_engine_built():
        pytest.skip("the C simulator core is not built")
    return request.param


def test_fifo_serves_in_arrival_order(engine):
    # chunk 0 holds dim 0 for 10; chunks 1 (big) and 2 (small) wait on it
    plans = [(ph(0, 10),), (ph(0, 5, key=9),), (ph(0, 1, key=1),)]
    out = simulate(plans, 1, queue="fifo", engine=engine)
    assert out.chunk_end_ns == (10, 15, 16)


def test_scf_serves_the_smallest_first(engine):
    plans = [(ph(0, 10),), (ph(0, 5, key=9),), (ph(0, 1, key=1),)]
    out = simulate(plans, 1, queue="scf", engine=engine)
    assert out.chunk_end_ns == (10, 16, 11)


def test_scf_ties_by_arrival_in_dse_rule(engine):
    plans = [(ph(0, 10),), (ph(0, 5, key=3),), (ph(0, 1, key=3),)]
    out = simulate(plans, 1, queue="scf", rules=SimRules(scf_rule="priority"), engine=engine)
    assert out.chunk_end_ns == (10, 15, 16)


def test_astra_scf_overtakes_equal_keys(engine):
    # ASTRA-sim: a newcomer goes before the first waiting entry with key >= its own: LIFO for equals
    three = lambda b, k: (ph(0, b, key=k), ph(1, 1), ph(1, 1))  # noqa: E731
    plans = [three(10, 1), three(5, 3), three(1, 3)]
    out = simulate(plans, 2, queue="scf", rules=SimRules(scf_rule="astra-sim"), engine=engine)
    assert out.chunk_end_ns == (12, 18, 14)  # chunk 2 overtook chunk 1 on dim 0


def test_astra_scf_penultimate_phase_goes_to_the_back(engine):
    # the same, but each chunk enters its second-to-last phase (2 phases): appended, FIFO
    plans = [(ph(0, 10), ph(1, 1)), (ph(0, 5, key=3), ph(1, 1)), (ph(0, 1, key=3), ph(1, 1))]
    out = simulate(plans, 2, queue="scf", rules=SimRules(scf_rule="astra-sim"), engine=engine)
    assert out.chunk_end_ns == (11, 16, 17)


def test_overlapped_latency_frees_the_dimension_early(engine):
    plans = [(ph(0, 10, delay=100), ph(1, 5)), (ph(0, 10, delay=100), ph(1, 5))]
    out = simulate(plans, 2, engine=engine)
    assert out.chunk_end_ns == (115, 125)
    assert out.dim_busy_ns == (20, 10)


def test_active_chunks_without_sharing_run_in_parallel(engine):
    plans = [(ph(0, 10),), (ph(0, 10),), (ph(0, 10),)]
    out = simulate(plans, 1, active_chunks=2, rules=SimRules(shares_bandwidth=False), engine=engine)
    assert out.chunk_end_ns == (10, 10, 20)


def test_active_chunks_with_sharing_split_the_bandwidth():
    plans = [(ph(0, 10),), (ph(0, 10),), (ph(0, 10),)]
    out = simulate(plans, 1, active_chunks=2, rules=SimRules(shares_bandwidth=True))
    assert out.chunk_end_ns == pytest.approx((20, 20, 30))
    assert out.dim_busy_ns == pytest.approx((30,))


def test_timeline_records_every_phase(engine, monkeypatch):
    monkeypatch.setattr(engine_front, "DEFAULT", engine)  # what "auto" runs: `evaluate` takes no engine
    r = evaluate("Ring(4,100,10)_SW(8,50,20)", size="1MB", chunks=4, timeline=True)
    assert len(r.timeline) == 4 * 4
    for e in r.timeline:
        assert e.end >= e.start + e.busy - 1e-9
    assert max(e.end for e in r.timeline) == r.time_ns


def test_paper_active_chunks_shares_bandwidth():
    one = evaluate("Ring(8,100,0)", size="1GB", chunks=8, active_chunks=1, scheduler="baseline")
    many = evaluate("Ring(8,100,0)", size="1GB", chunks=8, active_chunks=8, scheduler="baseline")
    assert many.time_ns == pytest.approx(one.time_ns)  # one dimension, all work shared: same end
