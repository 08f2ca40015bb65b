"""`dse optimal`: the best schedule of one collective, its proven lower bound, and how it compares."""

from __future__ import annotations

import argparse

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see dse.cli.main)
if TYPE_CHECKING:
    from dse.bounds.optimal import OptimalSchedule
    from dse.sim.spec import CollectiveSpec


def add_optimal_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `optimal` subcommand (dse.cli.main hooks it)."""
    from dse.cli.main import _add_common, _add_topology

    p = sub.add_parser("optimal", help="the optimal schedule of one collective (CP-SAT), proven against a lower bound")
    _add_topology(p)
    _add_common(p)
    p.set_defaults(chunks="16")
    p.add_argument(
        "--work",
        default="20",
        help="the solver's budget in CP-SAT deterministic seconds, about seconds of one quiet core "
        "(default 20; a work limit, so the answer is the same on every run)",
    )
    p.add_argument(
        "--time-limit", default=None, help="also stop after this many seconds (then the answer may depend on load)"
    )
    p.add_argument(
        "--plot", default=None, metavar="FILE", help="draw the optimal and Themis timelines to FILE (.png/.svg)"
    )
    p.set_defaults(func=cmd_optimal)


def cmd_optimal(args: argparse.Namespace) -> int:
    import json

    from dse.bounds.optimal import MAX_SEED, optimal_for
    from dse.cli.main import _spec_args, _topology_arg
    from dse.core.topology import parse_topology
    from dse.core.units import parse_int, parse_positive
    from dse.sim.spec import CollectiveSpec

    topo = parse_topology(_topology_arg(args))
    spec = CollectiveSpec.parse(topo, **_spec_args(args))
    if args.plot:  # a bad output place is refused before the solve, not after it
        from dse.output.plots import figure_path

        figure_path(args.plot, "plot")
    best = optimal_for(
        spec,
        work=parse_positive(args.work, "work"),
        time_limit=None if args.time_limit is None else parse_positive(args.time_limit, "time_limit"),
        seed=parse_int(args.seed, "seed", minimum=0, maximum=MAX_SEED),
    )
    if args.plot:
        _plot(spec, best, args.plot, float(args.work))
    if args.json:
        print(json.dumps({"topology": best.topology, "notation": topo.notation(), **best.to_dict()}))
    else:
        print(optimal_text(best, topo.npus))
    return 0


def optimal_text(b: OptimalSchedule, npus: int) -> str:
    """`dse optimal`'s report: the schedule's time, the bound, the status, the seeds, the schedule."""
    from dse.core.units import format_size, format_time

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


def _plot(spec: CollectiveSpec, best: OptimalSchedule, out: str, work: float) -> None:
    """The optimal schedule's timeline above Themis+SCF's, on one time axis."""
    from dse.bounds.optimal_scheduler import OptimalScheduler
    from dse.output.timeline_plot import draw_timelines, result_timeline_data
    from dse.schedulers import get_scheduler
    from dse.sim.evaluate import evaluate_prepared
    from dse.sim.spec import RunSpec

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
