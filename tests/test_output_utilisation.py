"""Utilisations never pass 100 %: busy time is the union of a dimension's phases, and a BW utilisation
above 100 % (ASTRA-sim's concurrent phases at full bandwidth each) is shown capped, with a warning."""

import json
import math
import re
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dse import evaluate
from dse.core.collectives import nominal_bytes_sent
from dse.costs import get_cost_model
from dse.sim.evaluate import busy_union

from .test_invariants import topologies

# ASTRA-sim model, 4 active chunks: 2D-SW_SW, 1 GB all-reduce printed a BW utilisation of 240.86 %
# and dimensions 261 % and 330 % busy before busy time became a union and the utilisation was capped.
CASE = dict(topology="2D-SW_SW", size="1GB", cost_model="astra-sim", active_chunks=4)


def _covered(intervals, t0, t1):
    """Whether [t0, t1] lies inside one of `intervals` (an elementary segment test)."""
    mid = (t0 + t1) / 2
    return any(a <= mid <= b for a, b in intervals)


def _union_by_segments(intervals):
    """The measure of a union of intervals, by cutting the line at every endpoint (not a merge)."""
    points = sorted({x for iv in intervals for x in iv})
    return sum(b - a for a, b in zip(points, points[1:]) if _covered(intervals, a, b))


def test_the_case_that_passed_100_percent_is_capped_with_a_warning():
    with pytest.warns(UserWarning, match=r"4 phases at once.*full bandwidth.*congestion-unaware") as rec:
        r = evaluate(
            CASE["topology"],
            size=CASE["size"],
            cost_model=CASE["cost_model"],
            active_chunks=CASE["active_chunks"],
            timeline=True,
        )
    assert len([w for w in rec if "BW utilisation" in str(w.message)]) == 1
    model = get_cost_model("astra-sim")
    topo_bw = sum(model.bytes_per_ns(d) for d in __import__("dse").core.topology.parse_topology("2D-SW_SW").dims)
    raw = nominal_bytes_sent("all_reduce", 10**9, (16, 64), ag_input_shard=True) / (r.time_ns * topo_bw)
    assert raw > 2 and math.isclose(r.bw_utilization_uncapped, raw, rel_tol=1e-12)  # the old, uncapped value
    assert r.bw_utilization == 1.0
    # the old busy time (the sum of the phases' busy times) passed the collective's time ...
    old = [sum(e.busy for e in r.timeline if e.dim == d) for d in range(2)]
    assert all(b > r.time_ns for b in old)
    # ... the union of the intervals cannot, and equals the union measured another way
    for d in range(2):
        spans = [(e.start, e.start + e.busy) for e in r.timeline if e.dim == d]
        assert math.isclose(r.dim_busy_ns[d], _union_by_segments(spans), rel_tol=1e-9)
        assert r.dim_busy_ns[d] <= r.time_ns and 0 < r.dim_utilization[d] <= 1


def test_one_phase_at_a_time_keeps_the_sum():
    """With one active chunk (or shared bandwidth) nothing changes: busy = the sum of busy times."""
    for model in ("paper", "astra-sim", "astra-sim-1"):
        r = evaluate("3D-SW_SW_SW_hetero", size="64MiB", chunks=16, cost_model=model, timeline=True)
        for d in range(3):
            es = [e for e in r.timeline if e.dim == d]
            assert math.isclose(r.dim_busy_ns[d], sum(e.busy for e in es), rel_tol=1e-12)
            assert math.isclose(busy_union(r.timeline, 3)[d], r.dim_busy_ns[d], rel_tol=1e-9)
        assert r.bw_utilization == r.bw_utilization_uncapped <= 1


def test_busy_union_merges_overlaps():
    from dse.sim.simulate import TimelineEntry as E

    tl = [E(0, 0, "RS", 0, 9, 4), E(1, 0, "RS", 1, 9, 2), E(2, 0, "RS", 6, 9, 1), E(3, 1, "AG", 2, 9, 3)]
    assert busy_union(tl, 3) == (5.0, 3.0, 0.0)  # [0,4] U [1,3] U [6,7]; [2,5]; nothing


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    topo=topologies(max_dims=3, pow2=True),
    coll=st.sampled_from(["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]),
    sched=st.sampled_from(["baseline", "themis", "random"]),
    queue=st.sampled_from(["fifo", "scf"]),
    model=st.sampled_from(["astra-sim", "paper"]),
    chunks=st.integers(1, 24),
    active=st.sampled_from([1, 2, 4]),
    size=st.integers(10**4, 10**9),
)
def test_utilisations_stay_within_0_and_1(topo, coll, sched, queue, model, chunks, active, size):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        r = evaluate(
            topo,
            collective=coll,
            size=size,
            chunks=chunks,
            scheduler=sched,
            queue=queue,
            cost_model=model,
            active_chunks=active,
        )
    assert all(0 <= u <= 1 + 1e-9 for u in r.dim_utilization)
    assert all(b <= r.time_ns * (1 + 1e-9) for b in r.dim_busy_ns)
    assert 0 < r.bw_utilization <= 1 and r.bw_utilization == min(1.0, r.bw_utilization_uncapped)
    capped = [w for w in rec if "BW utilisation above 100 %" in str(w.message)]
    assert len(capped) == (1 if r.bw_utilization_uncapped > 1 + 1e-9 else 0)
    if capped:
        assert model == "astra-sim" and active > 1  # only concurrent full-bandwidth phases can do it


def _percents(text):
    return [float(x) for x in re.findall(r"(-?\d+(?:\.\d+)?) %", text)]


def test_cli_shows_the_cap_and_keeps_the_uncapped_value_in_json(run_cli):
    args = ("evaluate", CASE["topology"], "--size", "1GB", "--cost-model", "astra-sim", "--active-chunks", "4")
    code, out, err = run_cli(*args)
    assert code == 0 and "BW utilisation  100.00 % (capped)" in out
    busy = [float(line.split()[-1]) for line in out.splitlines()[-2:]]  # the busy % column
    assert all(0 < b <= 100 for b in busy) and all(p <= 100 for p in _percents(out))
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dse: warning: BW utilisation above 100 % shown as 100 %")
    assert "congestion-unaware" in lines[0] and "4 phases at once" in lines[0]
    code, out, _ = run_cli(*args, "--json")
    d = json.loads(out)
    assert d["bw_utilization"] == 1.0 and d["bw_utilization_uncapped"] > 2 and max(d["dim_utilization"]) <= 1


#: `dse compare` where astra-sim runs 4 phases at once on a dimension, each at full bandwidth
CONCURRENT_COMPARE = (
    "compare",
    "Ring(4,100,10)_SW(4,50,100)",
    "--size",
    "64MB",
    "--chunks",
    "8",
    "--cost-model",
    "astra-sim",
    "--active-chunks",
    "4",
)


def test_compare_warns_once(run_cli):
    code, out, err = run_cli(*CONCURRENT_COMPARE)
    assert code == 0 and err.count("dse: warning: BW utilisation above 100 %") == 1 and err.count("\n") == 1
    rows = [line.split() for line in out.splitlines()[3:13]]
    assert len(rows) == 10 and all(float(r[4]) == 100.0 for r in rows)  # scheduler queue time unit util % ...


def test_a_schedule_below_the_bound_is_explained(run_cli):
    from dse.output.report import ComparisonRow, below_bound_note

    rows = [ComparisonRow("baseline", "fifo", 1.0, 1.0, 1.0, -0.5), ComparisonRow("themis", "scf", 1.0, 1.0, 1.0, 0.1)]
    note = below_bound_note(rows, "astra-sim", 4)
    assert note is not None and "-50.00 %" in note and "4 phases at once" in note
    assert below_bound_note(rows[1:], "astra-sim", 4) is None
    assert below_bound_note([ComparisonRow("b", "f", 1.0, 1.0, 1.0, -1e-12)], "paper", 1) is None  # float noise
    code, out, _ = run_cli(*CONCURRENT_COMPARE, "--json")
    negative = any(r["gap_to_bound"] < -1e-9 for r in json.loads(out)["rows"])
    code, out, _ = run_cli(*CONCURRENT_COMPARE)
    assert code == 0 and ("note: schedules beat the bound" in out) == negative
