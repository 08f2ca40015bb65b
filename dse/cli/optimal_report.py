"""What `dse optimal` prints and draws: the optimal schedule against its bound and the seeds' times,
and its timeline above Themis+SCF's. Imported by `dse.cli.optimal.cmd_optimal` when it runs."""

from __future__ import annotations

from dse.bounds.optimal import OptimalSchedule
from dse.bounds.optimal_scheduler import OptimalScheduler
from dse.core.units import format_size, format_time
from dse.output.timeline_plot import draw_timelines, result_timeline_data
from dse.schedulers import get_scheduler
from dse.sim.evaluate import evaluate_prepared
from dse.sim.spec import CollectiveSpec, RunSpec


def optimal_text(b: OptimalSchedule, npus: int) -> str:
    """`dse optimal`'s report on `b` for a topology of `npus` NPUs: the schedule's time, the bound, the
    status, the seeds' times, then the orders and the service order."""
    lines = [
        f"{b.topology} ({npus} NPUs), {b.collective} of {format_size(b.size_bytes, 'decimal')} per NPU, "
        f"{b.chunks} chunks, cost model {b.cost_model} ({b.latency_mode} latency)",
    ]
    status = "proven optimal" if b.status == "optimal" else f"within {100 * b.gap:.3g} % of optimal"
    lines.append(f"optimal schedule  {format_time(b.time_ns)}  {status} (lower bound {format_time(b.bound_ns)})")
    lines.append(f"  found by {b.found_by}; solver work {b.work:.3g} (CP-SAT deterministic s)")
    for name, t in b.seed_ns.items():
        lines.append(f"  {name}+SCF {format_time(t)}  ({100 * (t / b.time_ns - 1):+.2f} % vs this schedule)")
    lines.append(f"  dse's bound (pipeline) {format_time(b.dse_bound_ns)}")
    sep = "" if len(b.orders[0]) <= 10 else ","  # one digit per dimension up to 10, as the JSON
    lines.append(
        "orders: " + " ".join((sep.join(map(str, o)) + ("/AR" if ar else "")) for o, ar in zip(b.orders, b.ar_phase))
    )
    lines.append("service order: " + "|".join(",".join(map(str, s)) for s in b.service_order))
    lines += [f"note: {n}" for n in b.notes]
    return "\n".join(lines)


def plot_optimal_and_themis(spec: CollectiveSpec, best: OptimalSchedule, out: str, work: float) -> None:
    """Draw to `out` the optimal schedule's timeline (solved again within `work`) above Themis+SCF's,
    on one time axis, each with the seed `best` used."""
    panels = []
    scheds: tuple[tuple[str, str | OptimalScheduler], ...] = (
        ("optimal", OptimalScheduler(work=work)),
        ("Themis+SCF", "themis"),
    )
    for title, sched in scheds:
        chosen = get_scheduler(sched)
        queue = "fixed" if chosen.serves_own_order else "scf"
        res = evaluate_prepared(RunSpec(spec, chosen, queue, best.seed, "decimal"), timeline=True)
        panels.append(result_timeline_data(res, spec.topology, title=f"{title}: {res.time_ns / 1e6:.4g} ms"))
    draw_timelines(panels, out)
