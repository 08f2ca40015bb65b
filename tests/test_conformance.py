"""Every scheduler and every cost model passes the conformance suites in dse.testing."""

import pytest

from dse.costs import AstraSim1Model, AstraSimModel, PaperModel
from dse.schedulers import BaselineScheduler, FixedScheduler, RandomScheduler, RoundRobinScheduler, ThemisScheduler
from dse.testing.cost_models import CostModelConformance
from dse.testing.schedulers import SchedulerConformance


class TestBaseline(SchedulerConformance):
    @pytest.fixture
    def make_scheduler(self):
        return BaselineScheduler


class TestThemis(SchedulerConformance):
    @pytest.fixture
    def make_scheduler(self):
        return ThemisScheduler


class TestThemisSeeded(SchedulerConformance):
    @pytest.fixture
    def make_scheduler(self):
        return lambda: ThemisScheduler(seed_latency=True)


class TestRoundRobin(SchedulerConformance):
    @pytest.fixture
    def make_scheduler(self):
        return RoundRobinScheduler


class TestRandom(SchedulerConformance):
    @pytest.fixture
    def make_scheduler(self):
        return RandomScheduler


class _AnyDims(FixedScheduler):
    """A fixed scheduler that fits itself to the topology, so the suite can run it everywhere."""

    def _orders(self, problem):
        n = problem.ndims
        self.fixed = (tuple(range(n)), tuple(reversed(range(n))), tuple(range(1, n)) + (0,))
        return super()._orders(problem)


class TestFixed(SchedulerConformance):
    @pytest.fixture
    def make_scheduler(self):
        return _AnyDims


class TestPaperModel(CostModelConformance):
    @pytest.fixture
    def cost_model(self):
        return PaperModel()


class TestAstraSimModel(CostModelConformance):
    @pytest.fixture
    def cost_model(self):
        return AstraSimModel()


class TestAstraSim1Model(CostModelConformance):
    @pytest.fixture
    def cost_model(self):
        return AstraSim1Model()


def test_random_depends_on_the_seed():
    from dse import evaluate

    a = evaluate("4D-Ring_FC_Ring_SW", size="1GB", scheduler="random", seed=1)
    b = evaluate("4D-Ring_FC_Ring_SW", size="1GB", scheduler="random", seed=1)
    c = evaluate("4D-Ring_FC_Ring_SW", size="1GB", scheduler="random", seed=2)
    assert a.orders == b.orders and a.time_ns == b.time_ns
    assert a.orders != c.orders


def test_fixed_orders_are_cycled_and_checked():
    from dse import InputError, evaluate

    r = evaluate("Ring(4,100,1)_SW(8,50,1)", size="1MB", chunks=5, scheduler="fixed", orders="01;10")
    assert r.orders == ((0, 1), (1, 0), (0, 1), (1, 0), (0, 1))
    for bad in ("012", "00", "0x", ""):
        with pytest.raises(InputError):
            evaluate("Ring(4,100,1)_SW(8,50,1)", size="1MB", chunks=5, scheduler="fixed", orders=bad or None)


def test_round_robin_rotates():
    from dse import evaluate

    r = evaluate("Ring(4,100,1)_SW(8,50,1)_FC(4,80,1)", size="1MB", chunks=4, scheduler="round_robin")
    assert r.orders == ((0, 1, 2), (1, 2, 0), (2, 0, 1), (0, 1, 2))
