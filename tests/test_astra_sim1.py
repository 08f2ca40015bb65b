"""The `astra-sim-1` cost model: ASTRA-sim 1.0 runs to the ns, hand-computed phases, bad input.

Golden values: tests/data/astra-sim-1.0-calibration.csv (real ASTRA-sim 1.0 runs, a copy of
../shared/reference); the closed forms below are worked out by hand from
reference/astra-sim-1.0.md §1-§3. A per-link bandwidth of 1e9/2^30 GB/s is exactly 1 B/ns there.
"""

import itertools
import json

import pytest

from dse import InputError, evaluate
from dse.core.presets import PRESETS
from dse.core.topology import Dim, Topology
from dse.costs import AstraSim1Model, SimRules, get_cost_model
from dse.schedulers import get_scheduler
from dse.schedulers.base import ScheduleProblem
from dse.sim.engine import c_engine_built
from dse.sim.evaluate import build_plans
from dse.sim.simulate import simulate

from .conftest import read_csv

ROWS = read_csv("astra-sim-1.0-calibration.csv")
SCHED = {"baseline": ("baseline", "fifo"), "themis_fifo": ("themis", "fifo"), "themis_scf": ("themis", "scf")}
LATENCY = {"artifact_1ns": 1}
U = 1e9 / 2**30  # GB/s (GB = 2^30 B) that make exactly 1 B/ns


def _id(r):
    return f"{r['topology']}-{r['latency_variant']}-{r['size_bytes']}-{r['splits']}-{r['scheduler']}"


def test_row_counts():
    assert len(ROWS) == 195
    assert {r["scheduler"] for r in ROWS} == set(SCHED)


@pytest.mark.parametrize("row", ROWS, ids=_id)
def test_reproduces_astra_sim_1_to_the_ns(row):
    topo = PRESETS[row["topology"]].with_latency(LATENCY[row["latency_variant"]])
    sched, queue = SCHED[row["scheduler"]]
    r = evaluate(
        topo,
        size=int(row["size_bytes"]),
        chunks=int(row["splits"]),
        scheduler=sched,
        queue=queue,
        cost_model="astra-sim-1",
    )
    assert r.time_ns + 5 == int(row["sim_time_ns"])  # ASTRA-sim 1.0 adds 5 ns of trailing compute


# ----- closed forms (reference §2), one dimension, one chunk --------------------------------------
RING = Dim("ring", 4, 2 * U, 10, links=2)  # 2 links of 1 B/ns: one message at 2 B/ns, 1 hop
SWITCH = Dim("switch", 8, 4 * U, 5, links=1, nic_latency=2, router_latency=3)  # 4 B/ns, 2 hops
FC = Dim("fc", 4, 3 * U, 7, links=3)  # 3 links = P-1: each message at 1 B/ns


def _one(dim, collective, size, scheduler="baseline"):
    return evaluate(
        Topology((dim,)),
        collective=collective,
        size=size,
        chunks=1,
        scheduler=scheduler,
        queue="fifo",
        cost_model="astra-sim-1",
        timeline=True,
    )


def test_ring_reduce_scatter_closed_form():
    # P-1 = 3 sends of D//P = 1e6 B; c = 10 + 1e6/2 = 500010; proc(1e6) = 3*2 = 6
    # (1 + c) + (P-2)(1 + proc + c) + 1 + proc
    want = (1 + 500010) + 2 * (1 + 6 + 500010) + 1 + 6
    assert want == 1500052
    assert _one(RING, "reduce_scatter", 4_000_000).time_ns == want


def test_ring_all_gather_closed_form():
    # P-1 = 3 sends of D = 1e6 B, nothing reduced: c = 10 + 5e5; (P-1)(1 + c) + 1
    assert _one(RING, "all_gather", 1_000_000).time_ns == 3 * (1 + 500010) + 1


def test_halving_doubling_all_reduce_closed_form():
    # The baseline's single AR phase. log2 P = 3 sends halving 4e6, 2e6, 1e6, then 1e6, 2e6, 4e6;
    # c(m) = 2*5 + m/4 + 2*2 (nic) + 3 (router). First refill: a zero packet, then 2 reduced ones
    # (proc(2e6) = 12, proc(1e6) = 6); second refill unreduced; the closing zero packet adds 1.
    c = {m: 10 + m // 4 + 4 + 3 for m in (4_000_000, 2_000_000, 1_000_000)}
    want = (
        (1 + c[4_000_000])
        + (1 + 12 + c[2_000_000])
        + (1 + 6 + c[1_000_000])
        + (1 + c[1_000_000])
        + (1 + c[2_000_000])
        + (1 + c[4_000_000])
        + 1
    )
    assert want == 3500127
    r = _one(SWITCH, "all_reduce", 8_000_000)
    assert [e.kind for e in r.timeline] == ["AR"] and r.time_ns == want


def test_direct_reduce_scatter_closed_form():
    # all P-1 messages of D//P = 1e6 B at once: 1 + c + 1 + proc, c = 7 + 1e6/1, proc = 6
    assert _one(FC, "reduce_scatter", 4_000_000).time_ns == 1 + 1_000_007 + 1 + 6 == 1_000_015


def test_themis_all_reduce_is_rs_then_ag_without_an_ar_phase():
    r = _one(RING, "all_reduce", 4_000_000, scheduler="themis")
    assert [e.kind for e in r.timeline] == ["RS", "AG"]
    # RS as above, then AG of 1e6 B: 3 * (1 + 500010) + 1
    assert r.time_ns == 1500052 + 3 * (1 + 500010) + 1


def test_fc_links_not_a_multiple_of_p_minus_1():
    m = AstraSim1Model()
    dim = Dim("fc", 4, 7 * U, 7, links=7)  # 7 // 3 = 2 links per message, 6 counted by Themis
    assert m.greedy_bandwidth(dim) == pytest.approx(6 * U)
    # 1 + c + 1 + proc with c = 7 + 1e6/2
    assert _one(dim, "reduce_scatter", 4_000_000).time_ns == 1 + 500_007 + 1 + 6


# ----- chunking --------------------------------------------------------------------------------
def test_remainder_chunk_has_its_true_size():
    # 1_000_003 B in 4 splits: 4 chunks of 250_000 and one of 3 B. Baseline: one AR phase each.
    # AR on the ring: 2(P-1) = 6 sends of D//P, the first refill's 3 non-zero packets reduced:
    # 6 (1 + c) + 3 proc + 1. D = 250_000: c = 10 + 62_500/2, proc = 0; D = 3: c = 10 + 0.
    big = 6 * (1 + 10 + 31_250) + 1
    small = 6 * (1 + 10) + 1
    r = evaluate(
        Topology((RING,)),
        size=1_000_003,
        chunks=4,
        scheduler="baseline",
        queue="fifo",
        cost_model="astra-sim-1",
        timeline=True,
    )
    assert r.chunks == 4 and r.simulated_chunks == 5
    assert [e.busy for e in r.timeline] == [big] * 4 + [small]
    assert r.time_ns == 4 * big + small
    plan = AstraSim1Model().chunking("all_reduce", 1_000_003, 4, Topology((RING,)), baseline=False)
    assert plan.sizes == (250_000,) * 4 + (3,) and plan.charges == (250_000,) * 5


def test_even_split_has_no_remainder_chunk():
    r = evaluate(Topology((RING,)), size=1_000_000, chunks=4, scheduler="themis", cost_model="astra-sim-1")
    assert r.simulated_chunks == 4


# ----- configuration -----------------------------------------------------------------------------
def test_model_is_registered_stateless_and_immutable():
    m = get_cost_model("astra-sim-1")
    assert isinstance(m, AstraSim1Model) and get_cost_model("astra_sim_1.0").name == "astra-sim-1"
    with pytest.raises(AttributeError):
        m.name = "other"  # type: ignore[misc]


def test_only_serialized_latency_and_one_active_chunk():
    t = PRESETS["4D-Ring_FC_Ring_SW"]
    assert evaluate(t, size="1MB", cost_model="astra-sim-1").latency_mode == "serialized"
    with pytest.raises(InputError) as e:
        evaluate(t, size="1MB", cost_model="astra-sim-1", latency_mode="overlapped")
    assert e.value.field == "latency_mode"
    with pytest.raises(InputError) as e:
        evaluate(t, size="1MB", cost_model="astra-sim-1", active_chunks=2)
    assert e.value.field == "active_chunks"


@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather", "all_to_all"])
def test_other_collectives_run(collective):
    for sched, queue in (("baseline", "fifo"), ("themis", "scf"), ("round_robin", "fifo")):
        r = evaluate(
            "4D-Ring_FC_Ring_SW",
            collective=collective,
            size="64MiB",
            chunks=16,
            scheduler=sched,
            queue=queue,
            cost_model="astra-sim-1",
        )
        assert r.time_ns > 0 and r.time_ns == int(r.time_ns) and r.time_ns >= max(r.dim_busy_ns)


def test_with_latency_replaces_every_dimension():
    t = PRESETS["2D-SW_SW"].with_latency(1)
    assert [d.latency for d in t.dims] == [1, 1] and t.label() == "2D-SW_SW@1ns"
    assert [d.links for d in t.dims] == [6, 1]
    t2 = PRESETS["2D-SW_SW"].with_latency([3, 4.5])
    assert [d.latency for d in t2.dims] == [3, 4.5] and t2.label() == "2D-SW_SW@3/4.5ns"
    assert Topology((RING,)).with_latency(2).name is None
    with pytest.raises(InputError):
        PRESETS["2D-SW_SW"].with_latency([1, 2, 3])
    with pytest.raises(InputError):
        PRESETS["2D-SW_SW"].with_latency(-1)


# ----- bad topologies ---------------------------------------------------------------------------
BAD = [
    ("Ring(4,100,10,links=2)_SW(8,50,20)", "topology dim 1", "links"),
    ("FC(8,175,700,links=5)_SW(8,100,1700,links=1)", "topology dim 0", "P-1 = 7"),
    ("Ring(4,100,10,links=1)", "topology dim 0", "links"),
    ("SW(6,100,10,links=1)", "topology dim 0", "power-of-two"),
]


@pytest.mark.parametrize("spec,field,text", BAD)
def test_bad_topology_is_an_input_error(spec, field, text):
    with pytest.raises(InputError) as e:
        evaluate(spec, size="1MB", cost_model="astra-sim-1")
    assert e.value.field == field and text in str(e.value)


def test_missing_links_says_how_to_give_them():
    with pytest.raises(InputError) as e:
        evaluate("FC(8,175,700)", size="1MB", cost_model="astra-sim-1")
    assert "astra-sim-1" in str(e.value) and "links=7" in str(e.value)
    evaluate("FC(8,175,700)", size="1MB", cost_model="astra-sim")  # other models do not need links


@pytest.mark.parametrize("spec,field,text", BAD[:2])
def test_bad_topology_on_the_command_line(run_cli, spec, field, text):
    code, out, err = run_cli("evaluate", spec, "--size", "1MB", "--cost-model", "astra-sim-1")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("dse: error: ") and field in err and text in err


def test_command_line_runs_the_model(run_cli):
    code, out, err = run_cli("evaluate", "4D-Ring_FC_Ring_SW", "--size", "1GB", "--cost-model", "astra-sim-1", "--json")
    d = json.loads(out)
    assert code == 0 and err == "" and d["cost_model"] == "astra-sim-1"
    assert d["time_ns"] == evaluate("4D-Ring_FC_Ring_SW", size="1GB", cost_model="astra-sim-1").time_ns


# ----- the C loop and the Python reference agree on this model's tie keys -----------------------
@pytest.mark.skipif(not c_engine_built(), reason="the C simulator core is not built")
@pytest.mark.parametrize("preset", list(PRESETS))
def test_c_and_python_engines_agree(preset):
    m = AstraSim1Model()
    for topo, coll, sched, queue, chunks, size in itertools.product(
        (PRESETS[preset], PRESETS[preset].with_latency(1)),
        ("all_reduce", "all_gather"),
        ("baseline", "themis", "random"),
        ("fifo", "scf"),
        (7, 64),
        (10**6 + 7, 107374182),
    ):
        s = get_scheduler(sched)
        plan = m.chunking(coll, size, chunks, topo, baseline=s.is_baseline)
        orders = s.orders(ScheduleProblem(topo, coll, plan, m, 3))
        plans = build_plans(m, topo, coll, orders, plan.sizes, "serialized", s.is_baseline)
        kw = dict(
            queue=queue, rules=SimRules(m.rules.scf_rule, shares_bandwidth=False, dim_tiebreak=True), timeline=True
        )
        a = simulate(plans, topo.ndims, engine="c", **kw)
        b = simulate(plans, topo.ndims, engine="python", **kw)
        assert a.time_ns == b.time_ns and a.timeline == b.timeline
