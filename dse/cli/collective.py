"""The one-collective commands: `dse evaluate` (simulate it), `dse compare` (every scheduler x queue
against the lower bound), `dse bound` (the lower bounds) and `dse topologies` (the presets).

Each `cmd_*` imports what it runs when it runs, in one block at its start (`dse --help` builds these
parsers and loads none of the simulator); an optional output (``--plot``) imports its drawing
where the option is taken."""

from __future__ import annotations

import argparse
import json
import textwrap

from dse.cli.parser import add_collective_options, add_topology, cost_model_arg, required_topology
from dse.core.errors import InputError

#: `dse compare` solves the exact problem (`--exact-work`) for at most this many chunks
EXACT_COMPARE_CHUNKS = 16


def add_evaluate_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `evaluate` subcommand on `sub`."""
    p = sub.add_parser("evaluate", help="simulate one collective")
    add_topology(p)
    add_collective_options(p)
    p.add_argument("--scheduler", default="themis", help="one of {schedulers} (default themis)")
    p.add_argument("--queue", default="scf", help="one of {queues} (default scf), or fixed with --service-order")
    p.add_argument("--orders", default=None, help="orders for --scheduler fixed, e.g. 0123 or '0123;3210'")
    p.add_argument(
        "--service-order",
        default=None,
        help="for --queue fixed: per dimension the chunks it serves, in order, e.g. '0,1,1,0|1,0,0,1'",
    )
    p.add_argument("--timeline", action="store_true", help="with --json: include every phase's start and end")
    p.add_argument(
        "--plot",
        default=None,
        metavar="FILE",
        help="also draw the per-dimension timeline of the phases "
        "to FILE (.png or .svg); the table or JSON is printed as usual",
    )
    p.set_defaults(func=cmd_evaluate)


def add_compare_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `compare` subcommand on `sub`."""
    p = sub.add_parser("compare", help="every scheduler x queue on one topology, with the bound and gaps")
    add_topology(p)
    add_collective_options(p)
    p.add_argument("--time-limit", default="60", help="seconds for each bound solve, a safety net (default 60)")
    p.add_argument(
        "--node-limit",
        default="100",
        help="branch-and-bound nodes per bound solve (default 100; "
        "a work limit, so the bound is the same on every run)",
    )
    p.add_argument(
        "--exact-work",
        default="5",
        help="CP-SAT work (deterministic s) for the exact optimum, which makes the bound and gaps exact; "
        f"solved for at most {EXACT_COMPARE_CHUNKS} chunks (default 5; 0: off)",
    )
    p.set_defaults(func=cmd_compare)


def add_bound_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `bound` subcommand on `sub` (no ``--seed``: the bound has no randomness)."""
    p = sub.add_parser("bound", help="lower bounds: ideal, fluid LP, ILP, pipeline; the optimal order mix")
    add_topology(p)
    add_collective_options(p, seed=False)
    p.add_argument(
        "--time-limit", default="10", help="seconds per solve (default 10); a cut-short solve reports its dual bound"
    )
    p.add_argument("--solver", default="highs", help="highs (in process, default) or cbc")
    p.add_argument("--no-pipeline", action="store_true", help="skip the pipeline-tightened ILP")
    p.add_argument(
        "--node-limit",
        default="100",
        help="branch-and-bound nodes per HiGHS solve (default 100, as "
        "dse compare uses, so both print the same bound on every run; 'none' for no limit)",
    )
    p.set_defaults(func=cmd_bound)


def add_topologies_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `topologies` subcommand on `sub`."""
    p = sub.add_parser("topologies", help="list the preset topologies: the paper's, NAME@artifact, real systems")
    p.add_argument("--json", action="store_true", help="print a JSON list: every field of the table, and each source")
    p.set_defaults(func=cmd_topologies)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Simulate one collective (`dse.evaluate`) and print its table, or one JSON object with --json
    (with every phase under --timeline); --plot FILE also draws its per-dimension timeline. A
    --timeline without --json, or --timeline/--plot under a closed-form model, is an `InputError`."""
    from dse.cli.spec import spec_args
    from dse.core.topology import parse_topology
    from dse.costs import get_cost_model
    from dse.output.report import result_text, utilization_note
    from dse.sim.evaluate import evaluate

    if args.timeline and not args.json:
        raise InputError(
            "--timeline",
            "given without --json",
            "--json --timeline (the phases are listed in the JSON), or --plot FILE.png to draw them",
        )
    if args.plot is not None:
        from dse.output.plots import figure_path

        figure_path(args.plot, "plot")  # refused before any work
    if (args.timeline or args.plot is not None) and get_cost_model(cost_model_arg(args)).closed_form:
        flag, what = "--plot" if args.plot is not None else "--timeline", cost_model_arg(args)
        raise InputError(flag, f"{what} is closed form: it has no phases", "paper, astra-sim or astra-sim-1")
    topo = parse_topology(required_topology(args))
    res = evaluate(
        topo,
        scheduler=args.scheduler,
        queue=args.queue,
        seed=args.seed,
        orders=args.orders,
        service_order=args.service_order,
        timeline=args.timeline or args.plot is not None,
        **spec_args(args),
    )
    if args.plot is not None:
        from dse.output.timeline_plot import draw_timelines, result_timeline_data

        draw_timelines([result_timeline_data(res, topo)], args.plot)
    if args.json:
        d = res.to_dict(timeline=args.timeline)
        d = {"topology": d.pop("topology"), "notation": topo.notation(), **d}
        d["bw_utilization_note"] = utilization_note(res.cost_model)
        print(json.dumps(d))
    else:
        print(result_text(res, topo))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Run every scheduler x queue on one collective, solve its lower bound (and, up to
    `EXACT_COMPARE_CHUNKS` chunks, the exact optimum) and print the table with gaps, or one JSON
    object. A closed-form model (`nccl`) prints its algorithms and protocols instead."""
    from dse.bounds.api import lower_bounds
    from dse.cli.closed_form import compare_closed_form
    from dse.cli.comparison import comparison_json, print_comparison
    from dse.cli.spec import spec_args
    from dse.core.topology import parse_topology
    from dse.core.units import parse_int, parse_positive
    from dse.costs import get_cost_model
    from dse.output.report import comparison_rows
    from dse.schedulers.lp_guided import too_many_orders
    from dse.sim.evaluate import COMPARE_SCHEDULERS, compare

    topo = parse_topology(required_topology(args))
    spec = spec_args(args)
    if get_cost_model(spec["cost_model"]).closed_form:
        return compare_closed_form(args, topo, spec)
    skipped = {"lp_guided": why} if (why := too_many_orders(topo.ndims)) else {}
    results = compare(topo, seed=args.seed, schedulers=tuple(s for s in COMPARE_SCHEDULERS if s not in skipped), **spec)
    time_limit = parse_positive(args.time_limit, "time_limit")
    node_limit = parse_int(args.node_limit, "node_limit", minimum=1)
    exact_work = parse_positive(args.exact_work, "exact_work", allow_zero=True)
    bounds = lower_bounds(
        topo,
        **spec,
        time_limit_s=time_limit,
        node_limit=node_limit,
        exact_work=exact_work if results[0].chunks <= EXACT_COMPARE_CHUNKS else 0.0,
    )
    rows = comparison_rows(results, bounds)
    if args.json:
        print(json.dumps(comparison_json(topo, results[0], rows, bounds, skipped)))
    else:
        print_comparison(topo, results[0], rows, bounds, skipped)
    return 0


def cmd_bound(args: argparse.Namespace) -> int:
    """Solve one collective's lower bounds (ideal, fluid LP, ILP, pipeline) and print them with the
    optimal order mix, or one JSON object."""
    from dse.bounds.api import lower_bounds
    from dse.cli.spec import spec_args
    from dse.core.topology import parse_topology
    from dse.core.units import parse_int, parse_positive, size_family
    from dse.output.report import bounds_text

    topo = parse_topology(required_topology(args))
    no_limit = args.node_limit.strip().lower() == "none"
    b = lower_bounds(
        topo,
        **spec_args(args),
        time_limit_s=parse_positive(args.time_limit, "time_limit"),
        solver=args.solver,
        pipeline=not args.no_pipeline,
        node_limit=None if no_limit else parse_int(args.node_limit, "node_limit", minimum=1),
    )
    if args.json:
        print(json.dumps(b.to_dict()))
        return 0
    print(bounds_text(b, topo, size_family(args.size)))
    return 0


def cmd_topologies(args: argparse.Namespace) -> int:
    """Print the presets: name, size, bandwidth, what each is (paper Table 2, the Themis artifact's
    configuration, a real system) and its notation; then where the figures come from. --json: the
    records as one JSON list."""
    from dse.core.presets import NOT_PRESETS, preset_records
    from dse.output.report import format_table

    records = preset_records()
    if args.json:
        print(json.dumps(records))
        return 0
    rows = [
        (
            r["name"],
            r["npus"],
            "x".join(map(str, r["shape"])),
            f"{r['total_bandwidth_gbps']:g}",
            r["what"],
            r["notation"],
        )
        for r in records
    ]
    print(format_table(("name", "NPUs", "shape", "GB/s/NPU", "what", "notation"), rows, align="lrrrll"))
    print("\nSources (NAME@artifact is accepted wherever a topology is):")
    sources: dict[str, list[str]] = {}
    for r in records:
        key = str(r["source"])
        sources.setdefault(key, []).append(str(r["name"]) if r["family"] == "system" else str(r["family"]))
    for source, who in sources.items():
        label = who[0] if len(who) == 1 or who[0] not in ("paper", "artifact") else f"{who[0]} ({len(who)} presets)"
        print(textwrap.fill(source, width=100, initial_indent=f"- {label}: ", subsequent_indent="  "))
    for name, why in NOT_PRESETS.items():
        print(textwrap.fill(why, width=100, initial_indent=f"- {name}: ", subsequent_indent="  "))
    return 0
