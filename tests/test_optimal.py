"""Exact schedules (dse/bounds/exact.py, exact_model.py, optimal.py; docs/model.md §12).

- on tiny cases the solver's optimum equals brute force over every route assignment and every
  service sequence of every dimension (three cost models, both latency modes, RS, AG and AR);
- the simulator replays the solver's schedule to the solver's time (`scheduler="optimal"`, and
  `fixed` orders with the `fixed` queue);
- no schedule of any scheduler and queue beats the proven bound (hypothesis, random topologies);
- a solve cut short by its work limit still returns a valid bound and a schedule above it;
- the coarse seed: a schedule split into m times the chunks is never slower (overlapped latency),
  and a solve with many chunks is at least as good as its coarse solve;
- the paper topologies at 4 chunks: proven optimal, to the values an independent prototype found;
- bad input is one `InputError` line; `dse optimal` prints, writes JSON, and exits 2 on bad input.
Budgets are CP-SAT work limits (deterministic), never seconds.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dse
from dse.bounds.exact import Schedule, build_problem, replay_steps
from dse.bounds.optimal import coarse_chunks, optimal_schedule, replay_ns, split_schedule
from dse.core.errors import InputError
from dse.core.topology import Dim, Topology
from dse.sim.service_order import served_order
from dse.sim.spec import CollectiveSpec

# never import ortools here: its HiGHS would shadow highspy's in this process (dse/bounds/exact_worker.py)
if importlib.util.find_spec("ortools") is None:
    pytest.skip("OR-Tools is not installed (pip install ortools)", allow_module_level=True)

TINY = [
    ("Ring(4,100,500)_SW(2,40,1000)", "all_reduce", "paper", None, 2),
    ("Ring(4,100,500)_SW(2,40,1000)", "all_reduce", "paper", "serialized", 2),
    ("FC(4,60,700)_Ring(2,200,20)", "reduce_scatter", "paper", None, 3),
    ("FC(4,60,700)_Ring(2,200,20)", "all_gather", "paper", None, 3),
    ("Ring(4,100,500)_SW(4,40,1000)", "all_reduce", "astra-sim", None, 2),
    ("Ring(4,100,500,links=2)_SW(4,40,1000,links=1)", "all_reduce", "astra-sim-1", None, 2),
    ("SW(2,50,100)_Ring(4,120,300)", "all_reduce", "paper", None, 3),
]


def _distinct_perms(items: list[int]) -> list[tuple[int, ...]]:
    return sorted(set(itertools.permutations(items)))


def brute_force(spec: CollectiveSpec, *, true_costs: bool = False) -> float:
    """The least time over every route per chunk and every sequence per dimension: in integer
    steps, or (`true_costs`) in ns as the simulator runs each schedule."""
    p = build_problem(spec)
    best: float | None = None
    for routes in itertools.product(*(range(len(p.chunk_routes(k))) for k in range(p.nchunks))):
        visits: list[list[int]] = [[] for _ in range(p.ndims)]
        for k, ri in enumerate(routes):
            for d, _, _ in p.chunk_routes(k)[ri].steps:
                visits[d].append(k)
        for seqs in itertools.product(*(_distinct_perms(v) for v in visits)):
            sched = Schedule(tuple(routes), tuple(seqs))
            rp = replay_steps(p, sched)
            if rp is None:
                continue
            t = replay_ns(p, sched) if true_costs else rp[0]
            if best is None or t < best:
                best = t
    assert best is not None
    return best


@pytest.mark.parametrize("topo,coll,model,mode,chunks", TINY)
def test_the_solver_equals_brute_force_on_tiny_cases(topo, coll, model, mode, chunks):
    spec = CollectiveSpec.parse(topo, collective=coll, size="3MB", chunks=chunks, cost_model=model, latency_mode=mode)
    p = build_problem(spec)
    assert p.exact
    best = optimal_schedule(spec, work=5)
    assert best.status == "optimal"
    assert best.time_ns == pytest.approx(p.ns(int(brute_force(spec))), rel=1e-12, abs=1e-9)
    assert best.bound_ns <= best.time_ns


def test_costs_off_the_integer_grid_give_a_valid_bound_and_a_near_optimal_schedule():
    # a 3-NPU FC dimension divides by 3: no power-of-two step holds the costs exactly, so they are
    # rounded down (a valid bound) and the schedule is timed with the true costs
    spec = CollectiveSpec.parse("FC(3,60,700)_Ring(2,200,20)", collective="reduce_scatter", size="3MB", chunks=3)
    assert not build_problem(spec).exact
    best = optimal_schedule(spec, work=5)
    truth = brute_force(spec, true_costs=True)
    assert best.bound_ns <= truth <= best.time_ns <= truth * (1 + 1e-9)
    assert any("rounded down" in n for n in best.notes)


@pytest.mark.parametrize("topo,coll,model,mode,chunks", TINY[:5])
def test_the_simulator_replays_the_solvers_time(topo, coll, model, mode, chunks):
    args = dict(collective=coll, size="3MB", chunks=chunks, cost_model=model, latency_mode=mode)
    best = optimal_schedule(topo, work=5, **args)
    replayed = dse.evaluate(topo, scheduler="optimal", **args)
    assert replayed.time_ns == best.time_ns
    assert replayed.queue == "fixed" and replayed.scheduler == "optimal"
    if not any(best.ar_phase):
        assert dse.evaluate(topo, **best.replay_args(), **args).time_ns == best.time_ns
    with_timeline = dse.evaluate(topo, scheduler="optimal", timeline=True, **args)
    assert with_timeline.time_ns == best.time_ns


# the paper topologies at 4 chunks, 1 GB all-reduce, paper model: proven optimal; the values are
# those an independent CP-SAT prototype (another model of the same problem) proved optimal
PAPER_4 = {
    "2D-SW_SW": 9426628.125,
    "3D-SW_SW_SW_homo": 8820459.375,
    "3D-SW_SW_SW_hetero": 7073471.09375,
    "3D-FC_Ring_SW": 7520931.25,
    "4D-Ring_SW_SW_SW": 4427812.1875,
    "4D-Ring_FC_Ring_SW": 3253104.6875,
}


@pytest.mark.parametrize("topo", sorted(PAPER_4))
def test_paper_topologies_at_four_chunks_are_proven_optimal(topo):
    best = optimal_schedule(topo, size="1GB", chunks=4, work=10)
    assert best.status == "optimal" and best.gap == 0.0
    assert best.time_ns == PAPER_4[topo]
    assert best.time_ns <= min(best.seed_ns.values())
    assert best.dse_bound_ns <= best.bound_ns <= best.time_ns
    assert dse.evaluate(topo, size="1GB", chunks=4, scheduler="optimal").time_ns == best.time_ns


def test_a_solve_cut_short_is_a_valid_bound_and_a_valid_schedule():
    # 4D-Ring_FC_Ring_SW at 16 chunks: optimal at 2.502013125 ms (bench_optimal); a tiny budget cannot prove it
    best = optimal_schedule("4D-Ring_FC_Ring_SW", size="1GB", chunks=16, work=0.05)
    assert best.status == "feasible" and best.gap > 0
    assert best.bound_ns <= 2502013.125 <= best.time_ns
    assert best.time_ns == pytest.approx(best.bound_ns * (1 + best.gap))
    assert dse.evaluate("4D-Ring_FC_Ring_SW", size="1GB", chunks=16, **best.replay_args()).time_ns == best.time_ns


def _topology(draw_dims: list[tuple[str, int, float, float]]) -> Topology:
    return Topology(tuple(Dim(kind, n, bw, lat) for kind, n, bw, lat in draw_dims))


DIMS = st.lists(
    st.tuples(
        st.sampled_from(["ring", "fc", "switch"]),
        st.sampled_from([2, 3, 4]),
        st.sampled_from([25.0, 50.0, 100.0, 200.0]),
        st.sampled_from([0.0, 20.0, 500.0]),
    ),
    min_size=2,
    max_size=3,
)


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    dims=DIMS,
    chunks=st.integers(1, 4),
    mode=st.sampled_from(["overlapped", "serialized"]),
    coll=st.sampled_from(["all_reduce", "reduce_scatter", "all_gather"]),
)
def test_no_scheduler_beats_the_proven_bound(dims, chunks, mode, coll):
    topo = _topology(dims)
    args = dict(collective=coll, size="4MB", chunks=chunks, latency_mode=mode)
    best = optimal_schedule(topo, work=2, **args)
    assert best.bound_ns <= best.time_ns
    for r in dse.compare(topo, **args):  # every scheduler x queue
        t = r.time_ns
        assert t >= best.bound_ns * (1 - 1e-9), (r.scheduler, r.queue)
        if best.status == "optimal":
            assert t >= best.time_ns * (1 - 1e-12)


def test_coarse_chunk_counts():
    assert [coarse_chunks(n) for n in (4, 16, 17, 34, 64, 100, 4096)] == [None, None, None, 2, 16, 10, 16]


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    dims=DIMS,
    coarse=st.integers(1, 5),
    m=st.integers(2, 4),
    coll=st.sampled_from(["all_reduce", "reduce_scatter", "all_gather"]),
    scheduler=st.sampled_from(["baseline", "themis", "lp_guided"]),
)
def test_a_split_schedule_is_never_slower_than_its_coarse_one(dims, coarse, m, coll, scheduler):
    # with overlapped latency a chunk split in m costs 1/m of the busy time per phase and the same
    # delay, so each piece ends each phase no later than the whole chunk did (induction on the sequence)
    topo = _topology(dims)
    args = dict(collective=coll, size=60 * 2**16)
    run = dse.evaluate(topo, chunks=coarse, scheduler=scheduler, queue="fifo", timeline=True, **args)
    fine = build_problem(CollectiveSpec.parse(topo, chunks=coarse * m, **args))
    split = split_schedule(fine, run.orders, [False] * coarse, served_order(run.timeline, topo.ndims))
    assert split is not None
    assert [len(s) for s in split.service] == [m * len(s) for s in served_order(run.timeline, topo.ndims)]
    assert replay_ns(fine, split) <= run.time_ns * (1 + 1e-12)
    n = coarse * m + 1  # more coarse chunks than fine ones: no split
    assert split_schedule(fine, [run.orders[0]] * n, [False] * n, ()) is None


def test_many_chunks_start_from_the_coarse_optimum():
    topo, args = "FC(4,100,500)_Ring(4,40,1000)_SW(4,20,200)", dict(size="6MB")
    best = optimal_schedule(topo, chunks=20, work=0.5, **args)
    coarse = optimal_schedule(topo, chunks=10, work=0.25, **args)  # the search's own coarse solve (half of 0.5)
    assert best.time_ns <= coarse.time_ns * (1 + 1e-12)
    assert best.found_by == "coarse" and best.time_ns < min(best.seed_ns.values())
    assert best.bound_ns <= best.time_ns
    assert dse.evaluate(topo, chunks=20, **args, **best.replay_args()).time_ns == best.time_ns


def test_astra_sim_bound_covers_the_baselines_ar_composition():
    for model, topo in (
        ("astra-sim", "Ring(4,100,500)_SW(4,40,1000)"),
        ("astra-sim-1", "Ring(4,100,500,links=2)_SW(4,40,1000,links=1)"),
    ):
        best = optimal_schedule(topo, size="1MB", chunks=3, cost_model=model, work=5)
        base = dse.evaluate(topo, size="1MB", chunks=3, cost_model=model, scheduler="baseline", queue="fifo")
        assert best.bound_ns <= base.time_ns
        assert best.status == "optimal"
        assert any(best.ar_phase)  # here the optimum runs some chunks as the AR composition
        replay = dse.evaluate(topo, size="1MB", chunks=3, cost_model=model, scheduler="optimal")
        assert replay.time_ns == best.time_ns
        with pytest.raises(ValueError):
            best.replay_args()  # `fixed` orders cannot say "AR composition"


def test_the_replay_is_the_simulators_not_the_solvers_word():
    spec = CollectiveSpec.parse("Ring(4,100,500)_SW(2,40,1000)", size="3MB", chunks=2)
    p = build_problem(spec)
    # both chunks in order 01, dimension 0 serving chunk 1 first: the integer replay and the simulator agree
    routes = tuple(next(i for i, r in enumerate(p.chunk_routes(k)) if r.order == (0, 1)) for k in range(2))
    sched = Schedule(routes, ((1, 0, 0, 1), (1, 0, 1, 0)))
    steps = replay_steps(p, sched)
    assert steps is not None
    assert replay_ns(p, sched) == p.ns(steps[0])
    # dimension 0 holds chunk 0 back until chunk 1 is all-gathered, which waits on dimension 1 serving chunk 0 first
    assert replay_steps(p, Schedule(routes, ((1, 1, 0, 0), (0, 0, 1, 1)))) is None


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"active_chunks": 2}, "active_chunks"),
        ({"work": 0}, "work"),
        ({"work": float("inf")}, "work"),
        ({"time_limit": -1}, "time_limit"),
        ({"seed": -1}, "seed"),
        ({"chunks": 0}, "chunks"),
    ],
)
def test_bad_input_is_one_line(kwargs, field):
    args = {"size": "1MB", "chunks": 2, **kwargs}
    with pytest.raises(InputError) as e:
        optimal_schedule("Ring(4,100,500)_SW(2,40,1000)", **args)
    assert e.value.field == field


def test_the_optimal_scheduler_refuses_a_service_order():
    with pytest.raises(InputError) as e:
        dse.evaluate("2D-SW_SW", size="1MB", chunks=2, scheduler="optimal", service_order="0,0,1,1|0,0,1,1")
    assert e.value.field == "service_order"


def test_dse_optimal_prints_and_writes_json_and_refuses_bad_input(tmp_path):
    base = [sys.executable, "-m", "dse", "optimal", "Ring(4,100,500)_SW(2,40,1000)", "--size", "3MB", "--chunks", "2"]
    out = subprocess.run(base + ["--work", "5"], capture_output=True, text=True, check=True).stdout
    assert "proven optimal" in out and "service order:" in out
    d = json.loads(subprocess.run(base + ["--json"], capture_output=True, text=True, check=True).stdout)
    assert d["status"] == "optimal" and d["time_ns"] == d["bound_ns"]
    plot = tmp_path / "t.png"
    subprocess.run(base + ["--plot", str(plot)], capture_output=True, text=True, check=True)
    assert plot.stat().st_size > 0
    bad = subprocess.run(base + ["--work", "-3"], capture_output=True, text=True)
    assert (
        bad.returncode == 2 and bad.stderr.count("\n") == 1 and "work" in bad.stderr and "Traceback" not in bad.stderr
    )


def test_cp_sat_never_loads_in_the_callers_process():
    code = (
        "import sys, dse\n"
        "b = dse.lower_bounds('Ring(4,100,500)_SW(2,40,1000)', size='3MB', chunks=2)\n"
        "best = dse.optimal_schedule('Ring(4,100,500)_SW(2,40,1000)', size='3MB', chunks=2)\n"
        "b2 = dse.lower_bounds('Ring(4,100,500)_SW(2,40,1000)', size='3MB', chunks=3)\n"
        "assert 'highspy' in sys.modules and 'ortools' not in sys.modules\n"
        "assert best.status == 'optimal' and b.bound_ns <= best.time_ns\n"
        "print('ok')"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr


def test_lower_bounds_with_exact_work_takes_the_proven_bound():
    plain = dse.lower_bounds("4D-Ring_SW_SW_SW", size="1GB", chunks=4, node_limit=100)
    exact = dse.lower_bounds("4D-Ring_SW_SW_SW", size="1GB", chunks=4, node_limit=100, exact_work=5)
    assert plain.exact_ns == 0.0 and plain.bound_ns == plain.pipeline_ns
    assert exact.exact_status == "optimal" and exact.exact_ns == PAPER_4["4D-Ring_SW_SW_SW"]
    assert exact.bound_ns == exact.exact_ns > exact.pipeline_ns
    with pytest.raises(InputError):
        dse.lower_bounds("4D-Ring_SW_SW_SW", size="1GB", chunks=4, exact_work=-1)


def test_optimal_is_refused_where_it_cannot_run():
    from dse.explore.study.toml_fields import parse_scheduler

    with pytest.raises(InputError) as e:
        parse_scheduler("optimal")  # a study or sweep would solve at every point
    assert e.value.field == "scheduler" and "optimal" not in str(e.value).split("allowed:")[1]
    with pytest.raises(InputError) as e:
        dse.iterate("Resnet50_DataParallel_fused", "Ring(4,100,500)_SW(2,40,1000)", scheduler="optimal")
    assert e.value.field == "scheduler"


class _Die:
    """Unpickled in the CP-SAT worker, it ends the worker (exit code 6, as an abort would)."""

    def __reduce__(self):
        import os

        return (os._exit, (6,))


def test_a_worker_that_dies_is_replaced_and_a_solve_that_kills_it_twice_is_skipped():
    from dse.bounds.exact_model import Job, solve
    from dse.bounds.exact_worker import WorkerDied, call

    with pytest.raises(WorkerDied, match="exit code 6"):
        call(_Die())
    p = build_problem(CollectiveSpec.parse("Ring(4,100,500)_SW(2,40,1000)", size="3MB", chunks=2))
    job = Job(p, None, 0, None, True, None, 0.5, None, 0)
    assert solve(job).status == "OPTIMAL"  # a new worker took over
    crashed = solve(job._replace(hint=_Die()))
    assert crashed.status == "CRASHED" and crashed.schedule is None and crashed.bound == 0 and crashed.work == 0.5
    assert solve(job).status == "OPTIMAL"


def test_the_search_survives_crashed_solves(monkeypatch):
    from dse.bounds import optimal
    from dse.bounds.exact_model import SolveResult

    monkeypatch.setattr(optimal, "solve", lambda job: SolveResult("CRASHED", None, None, 0, job.work, 0.0))
    best = optimal_schedule("4D-Ring_FC_Ring_SW", size="1GB", chunks=4, work=3, seed=7)
    assert best.status == "feasible" and best.found_by == "lp_guided" and best.time_ns == best.seed_ns["lp_guided"]
    assert best.bound_ns == best.dse_bound_ns and any("died twice" in n for n in best.notes)
