"""The scheduler conformance suite: valid permutations, every chunk scheduled, deterministic.

Usage (pytest)::

    class TestMine(SchedulerConformance):
        @pytest.fixture
        def make_scheduler(self):
            return lambda: MyScheduler()
"""

from __future__ import annotations

import itertools

import pytest

from dse.core.collectives import ALL_TO_ALL, COLLECTIVES
from dse.core.errors import InputError
from dse.core.topology import parse_topology
from dse.costs import COST_MODELS, get_cost_model
from dse.schedulers.base import ScheduleProblem
from dse.sim.simulate import schedule_time

TOPOLOGIES = (
    "Ring(8,100,500)",
    "Ring(4,100,500)_Ring(4,50,500)",
    "3D-SW_SW_SW_hetero",
    "4D-Ring_FC_Ring_SW",
    "SW(2,10,1)_FC(4,400,5)_Ring(2,50,0)_SW(4,25,100)_SW(2,300,7)",
)
CHUNKS = (1, 4, 17, 64)


def _problems():
    for topo, coll, model, chunks in itertools.product(TOPOLOGIES, COLLECTIVES, COST_MODELS, CHUNKS):
        t = parse_topology(topo)
        m = get_cost_model(model)
        if m.closed_form:  # no chunk phases to schedule (`nccl`)
            continue
        try:  # a scheduler is only ever asked about configurations its cost model accepts
            mode = m.check(t, coll, None, 1)
        except InputError:
            continue
        plan = m.chunking(coll, 2**26, chunks, t, baseline=False)
        for queue in ("fifo", "scf"):
            yield ScheduleProblem(t, coll, plan, m, seed=7, queue=queue, latency_mode=mode, simulate=schedule_time)


class SchedulerConformance:
    """Checks every scheduler must pass; subclasses provide the `make_scheduler` fixture."""

    @pytest.fixture
    def make_scheduler(self):  # pragma: no cover - overridden
        """A factory of the scheduler under test; a subclass returns its own."""
        raise NotImplementedError

    def test_one_valid_permutation_per_chunk(self, make_scheduler) -> None:
        """One order per chunk, each a permutation of the dimensions."""
        for problem in _problems():
            orders = make_scheduler().orders(problem)
            assert len(orders) == problem.nchunks
            for o in orders:
                assert sorted(o) == list(range(problem.ndims)), (problem.collective, o)

    def test_deterministic_for_a_seed(self, make_scheduler) -> None:
        """The same problem (and seed) gives the same orders."""
        for problem in _problems():
            assert make_scheduler().orders(problem) == make_scheduler().orders(problem)

    def test_all_to_all_is_ascending(self, make_scheduler) -> None:
        """An all-to-all runs its dimensions in ascending order."""
        for problem in _problems():
            if problem.collective == ALL_TO_ALL:
                assert set(make_scheduler().orders(problem)) == {tuple(range(problem.ndims))}

    def test_every_chunk_is_simulated(self, make_scheduler) -> None:
        """`dse.evaluate` with the scheduler simulates every chunk and takes time."""
        from dse import evaluate

        for topo in TOPOLOGIES[:4]:
            for coll in COLLECTIVES:
                r = evaluate(topo, collective=coll, size="64MiB", chunks=16, scheduler=make_scheduler(), queue="scf")
                assert r.simulated_chunks == 16 and len(r.orders) == 16
                assert r.time_ns > 0
