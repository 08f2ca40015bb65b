"""lp_guided: conformance, never behind Themis, close to the bound on the paper topologies."""

import math

import pytest

from dse import evaluate, lower_bounds
from dse.core.presets import PAPER_PRESETS
from dse.schedulers.lp_guided import LPGuidedScheduler
from dse.testing.schedulers import SchedulerConformance


class TestLPGuided(SchedulerConformance):
    @pytest.fixture
    def make_scheduler(self):
        return lambda: LPGuidedScheduler(budget=20)


@pytest.mark.parametrize("name", PAPER_PRESETS)
def test_ahead_of_themis_and_within_2_percent_of_the_lp_at_64_chunks(name):
    themis = evaluate(name, size="1GB", chunks=64, scheduler="themis", queue="scf")
    lpg = evaluate(name, size="1GB", chunks=64, scheduler="lp_guided", queue="scf")
    b = lower_bounds(name, size="1GB", chunks=64, pipeline=False, time_limit_s=math.inf, node_limit=100)
    assert lpg.time_ns < themis.time_ns
    assert lpg.time_ns <= 1.02 * b.lp_ns  # the LP is below the ILP: a stricter test


@pytest.mark.parametrize("chunks", [4, 16])
@pytest.mark.parametrize("name", PAPER_PRESETS)
def test_never_behind_themis(name, chunks):
    for queue in ("fifo", "scf"):
        themis = evaluate(name, size="1GB", chunks=chunks, scheduler="themis", queue=queue)
        lpg = evaluate(name, size="1GB", chunks=chunks, scheduler="lp_guided", queue=queue)
        assert lpg.time_ns <= themis.time_ns


def test_works_under_every_cost_model():
    for model in ("paper", "astra-sim", "astra-sim-1"):
        t = evaluate("4D-Ring_FC_Ring_SW", size="256MiB", chunks=16, scheduler="themis", cost_model=model)
        g = evaluate("4D-Ring_FC_Ring_SW", size="256MiB", chunks=16, scheduler="lp_guided", cost_model=model)
        assert g.time_ns <= t.time_ns
