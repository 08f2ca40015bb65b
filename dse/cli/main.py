"""The `dse` command line: one function per subcommand, argparse, one-line errors with exit code 2."""

from __future__ import annotations

import argparse
import signal
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from dse.cli.compare_designs import add_compare_designs_parser
from dse.cli.iterate import add_iterate_parser
from dse.cli.libra import add_libra_parser
from dse.cli.nccl import add_nccl_parser
from dse.cli.optimal import add_optimal_parser
from dse.cli.parser import Parser as _Parser
from dse.cli.parser import add_calibration, cost_model_arg, given_topology
from dse.cli.plot import add_plot_parser
from dse.cli.reproduce import add_reproduce_parser
from dse.cli.study import add_study_parser
from dse.cli.sweep import add_sweep_parser
from dse.cli.validate import add_validate_parser
from dse.cli.workload import add_workload_parser
from dse.core.errors import InputError, RunError, note_swallowed_interrupt

# Each command imports what it runs when it runs (`dse --help` builds every parser and imports none
# of the simulator): keep the imports above to the parser's own modules.

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (type checkers read the name)
if TYPE_CHECKING:
    from dse.bounds.api import Bounds
    from dse.core.topology import Topology
    from dse.output.report import ComparisonRow
    from dse.sim.result import Result


def _add_topology(p: argparse.ArgumentParser) -> None:
    p.add_argument("topology_pos", nargs="?", metavar="TOPOLOGY", help="preset name or notation")
    p.add_argument("-t", "--topology", help="preset name or notation (same as the positional argument)")


def _topology_arg(args: argparse.Namespace) -> str:
    spec = given_topology(args)
    if not spec:
        raise InputError(
            "topology", "missing", "a preset name (dse topologies) or a notation such as Ring(4,375,20)_SW(8,100,1700)"
        )
    return spec


def _add_common(p: argparse.ArgumentParser, *, seed: bool = True) -> None:
    """The collective's flags; `seed=False` for commands with no randomness (`dse bound`)."""
    p.add_argument("--collective", default="all_reduce", help="one of {collectives} (default all_reduce)")
    p.add_argument("--size", required=True, help="bytes per NPU, e.g. 1GB, 256MiB, 1e9")
    p.add_argument("--chunks", default="64", help="chunks per collective (default 64)")
    p.add_argument("--cost-model", default="paper", help="one of {cost_models} (default paper)")
    add_calibration(p)
    p.add_argument("--latency-mode", default=None, help="overlapped or serialized (default: the cost model's)")
    p.add_argument("--active-chunks", default="1", help="phases a dimension serves at once (default 1)")
    if seed:
        p.add_argument(
            "--seed",
            default="0",
            help="seed of the random scheduler, lp_guided's search and the exact solver (default 0; "
            "with the solver, dse optimal, at most 2^31-1)",
        )
    p.add_argument(
        "--json", action="store_true", help="print one JSON object instead of the table (every number unrounded)"
    )


def build_parser() -> argparse.ArgumentParser:
    """The whole `dse` parser: every subcommand, in the order --help lists them."""
    parser = _Parser(prog="dse", description="Collectives on multi-dimensional networks: Themis, bounds, search.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _add_evaluate_parser(sub)
    _add_compare_parser(sub)
    _add_bound_parser(sub)
    add_sweep_parser(sub)
    add_plot_parser(sub)
    add_study_parser(sub)
    add_reproduce_parser(sub)
    add_iterate_parser(sub)
    add_compare_designs_parser(sub)
    add_workload_parser(sub)
    add_optimal_parser(sub)
    add_libra_parser(sub)
    add_nccl_parser(sub)
    add_validate_parser(sub)
    p = sub.add_parser("topologies", help="list the preset topologies: the paper's, NAME@artifact, real systems")
    p.add_argument("--json", action="store_true", help="print a JSON list: every field of the table, and each source")
    p.set_defaults(func=cmd_topologies)
    return parser


def _add_evaluate_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="simulate one collective")
    _add_topology(p)
    _add_common(p)
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


#: `dse compare` solves the exact problem (`--exact-work`) for at most this many chunks
EXACT_COMPARE_CHUNKS = 16


def _add_compare_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="every scheduler x queue on one topology, with the bound and gaps")
    _add_topology(p)
    _add_common(p)
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


def _add_bound_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bound", help="lower bounds: ideal, fluid LP, ILP, pipeline; the optimal order mix")
    _add_topology(p)
    _add_common(p, seed=False)  # the bound has no randomness: no --seed
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


def cmd_evaluate(args: argparse.Namespace) -> int:
    from dse.core.topology import parse_topology
    from dse.output.report import result_text
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
    if (args.timeline or args.plot is not None) and _closed_form(args):
        flag, what = "--plot" if args.plot is not None else "--timeline", cost_model_arg(args)
        raise InputError(flag, f"{what} is closed form: it has no phases", "paper, astra-sim or astra-sim-1")
    topo = parse_topology(_topology_arg(args))
    res = evaluate(
        topo,
        scheduler=args.scheduler,
        queue=args.queue,
        seed=args.seed,
        orders=args.orders,
        service_order=args.service_order,
        timeline=args.timeline or args.plot is not None,
        **_spec_args(args),
    )
    if args.plot is not None:
        from dse.output.timeline_plot import draw_timelines, result_timeline_data

        draw_timelines([result_timeline_data(res, topo)], args.plot)
    if args.json:
        import json

        from dse.output.report import utilization_note

        d = res.to_dict(timeline=args.timeline)
        d = {"topology": d.pop("topology"), "notation": topo.notation(), **d}
        d["bw_utilization_note"] = utilization_note(res.cost_model)
        print(json.dumps(d))
    else:
        print(result_text(res, topo))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    import json

    from dse.bounds.api import lower_bounds
    from dse.core.topology import parse_topology
    from dse.core.units import parse_int, parse_positive
    from dse.costs import get_cost_model
    from dse.output.report import comparison_rows, utilization_at_bound, utilization_note
    from dse.schedulers.lp_guided import too_many_orders
    from dse.sim.evaluate import COMPARE_SCHEDULERS, compare

    topo = parse_topology(_topology_arg(args))
    spec = _spec_args(args)
    if get_cost_model(spec["cost_model"]).closed_form:
        from dse.cli.closed_form import compare_closed_form

        return compare_closed_form(args, topo, spec)
    skipped = {"lp_guided": why} if (why := too_many_orders(topo.ndims)) else {}
    results = compare(
        topo,
        seed=args.seed,
        schedulers=tuple(s for s in COMPARE_SCHEDULERS if s not in skipped),
        **_spec_args(args),
    )
    bounds = lower_bounds(
        topo,
        **_spec_args(args),
        time_limit_s=parse_positive(args.time_limit, "time_limit"),
        node_limit=parse_int(args.node_limit, "node_limit", minimum=1),
        exact_work=_exact_work(args, results[0].chunks),
    )
    rows = comparison_rows(results, bounds)
    first = results[0]
    if args.json:
        out = {
            "topology": first.topology,
            "notation": topo.notation(),
            "collective": first.collective,
            "size_bytes": first.size_bytes,
            "chunks": first.chunks,
            "cost_model": first.cost_model,
            "latency_mode": first.latency_mode,
            "bound": bounds.to_dict(),
            "rows": [r.to_dict() for r in rows],
            "not_run": skipped,
            "bw_utilization_note": utilization_note(first.cost_model),
            "bw_utilization_at_bound": utilization_at_bound(first, bounds.bound_ns),
        }
        print(json.dumps(out))
    else:
        _print_comparison(topo, first, rows, bounds, skipped)
    return 0


def _closed_form(args: argparse.Namespace) -> bool:
    """Whether the command line's cost model is closed form (`nccl`: no chunk phases)."""
    from dse.costs import get_cost_model

    return get_cost_model(cost_model_arg(args)).closed_form


def _exact_work(args: argparse.Namespace, chunks: int) -> float:
    """`--exact-work`, or 0 beyond `EXACT_COMPARE_CHUNKS` chunks."""
    from dse.core.units import parse_positive

    work = parse_positive(args.exact_work, "exact_work", allow_zero=True)
    return work if chunks <= EXACT_COMPARE_CHUNKS else 0.0


def _print_comparison(
    topo: Topology, first: Result, rows: list[ComparisonRow], bounds: Bounds, skipped: dict[str, str]
) -> None:
    """`dse compare`'s table: a title from the first result, the rows, the bound, then notes."""
    from dse.core.units import format_size, format_time
    from dse.costs import COST_MODELS
    from dse.output.report import ALL_TO_ALL_NOTE, below_bound_note, compare_utilization_note, comparison_text, footnote

    title = (
        f"{first.topology} ({topo.npus} NPUs), {first.collective} of "
        f"{format_size(first.size_bytes, first.size_unit)} per NPU, "
        f"{first.chunks} chunks, cost model {first.cost_model} ({first.latency_mode} latency)"
    )
    print(comparison_text(rows, title))
    print(
        f"bound {format_time(bounds.bound_ns)} ({bounds.status}): ideal {format_time(bounds.ideal_ns)}, "
        f"ILP {format_time(bounds.ilp_ns)}, pipeline {format_time(bounds.pipeline_ns)}"
        + (f", exact {format_time(bounds.exact_ns)} ({bounds.exact_status})" if bounds.exact_status else "")
    )
    print(footnote(compare_utilization_note(first, bounds.bound_ns)))
    from dse.bounds.api import EXACT_NOT_SOLVED

    for note in bounds.notes:
        if bounds.status in ("lp_only", "ideal_only") or note.startswith(EXACT_NOT_SOLVED):
            print(f"note: {note}")
    if first.collective == "all_to_all":
        print(f"note: {ALL_TO_ALL_NOTE}")
    concurrent = first.active_chunks if not COST_MODELS[first.cost_model].shares_bandwidth else 1
    if (below := below_bound_note(rows, first.cost_model, concurrent)) is not None:
        print(f"note: {below}")
    for name, why in skipped.items():
        print(f"{name} not run: {why}")


def cmd_bound(args: argparse.Namespace) -> int:
    import json

    from dse.bounds.api import lower_bounds
    from dse.core.topology import parse_topology
    from dse.core.units import parse_int, parse_positive, size_family
    from dse.output.report import bounds_text

    topo = parse_topology(_topology_arg(args))
    no_limit = args.node_limit.strip().lower() == "none"
    b = lower_bounds(
        topo,
        **_spec_args(args),
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
    """The presets: name, size, bandwidth, what each is (paper Table 2, the Themis artifact's
    configuration, a real system) and its notation; then where the figures come from."""
    import json
    import textwrap

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


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


_warned: set[str] = set()  # the warnings this command printed: each once, however often it is raised


def _spec_args(args: argparse.Namespace) -> dict[str, Any]:
    """The collective's keywords (`dse.sim.spec.SpecArgs`) as the command line gave them."""
    from dse.sim.spec import SPEC_KEYS

    out = {key: getattr(args, key) for key in SPEC_KEYS}
    out["cost_model"] = cost_model_arg(args)
    return out


def _warn_one_line(message, category, filename, lineno, file=None, line=None):
    text = _one_line(message)
    if text not in _warned:
        _warned.add(text)
        print(f"dse: warning: {text}", file=sys.stderr)


def _resumable(args: argparse.Namespace | None) -> bool:
    """Whether the command's work survives an interruption (the same command resumes it)."""
    command = getattr(args, "command", None)
    return command in ("sweep", "reproduce") or (command == "study" and getattr(args, "study_command", None) == "run")


def _unraisable(args: sys.UnraisableHookArgs) -> None:
    if args.exc_type is not None and issubclass(args.exc_type, KeyboardInterrupt):
        note_swallowed_interrupt()  # raised again at the next safe point, never printed as a traceback
    else:
        sys.__unraisablehook__(args)


def _interrupted(args: argparse.Namespace | None) -> int:
    """Ctrl-C: one line on stderr (how to resume, where that applies), exit code 130."""
    if not getattr(args, "quiet", False):
        hint = "; nothing finished is lost: run the same command again to resume" if _resumable(args) else ""
        print(f"dse: interrupted{hint}", file=sys.stderr)
    return 130


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `dse` console script; returns the exit code.

    Bad input: one line on stderr, exit 2. Ctrl-C: one line (how to resume, where that applies),
    exit 130. A file-system failure no check foresaw (a full disk, say): one line, exit 1."""
    warnings.showwarning = _warn_one_line
    _warned.clear()
    sys.unraisablehook = _unraisable
    args: argparse.Namespace | None = None
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # `dse.__main__` blocks it while loading
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_help()
            return 2
        return int(args.func(args))
    except InputError as e:
        print(f"dse: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return _interrupted(args)
    except BrokenPipeError:  # e.g. `dse ... | head`
        return 0
    except RunError as e:
        print(f"dse: error: {_one_line(e)}", file=sys.stderr)
        return 1
    except RuntimeError as e:  # Python 3.11 wraps a Ctrl-C that lands in a `__set_name__` (as a dataclass is made)
        if not isinstance(e.__cause__, KeyboardInterrupt):
            raise
        return _interrupted(args)
    except MemoryError:  # a last guard: the input limits are meant to refuse such a run before it starts
        print(
            "dse: error: out of memory; what was finished is kept (allowed: a smaller input, "
            "or lower DSE_MAX_WORK and the DSE_MAX_* input limits)",
            file=sys.stderr,
        )
        return 1
    except OSError as e:
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"dse: error: {where}{_one_line(e.strerror or e)}", file=sys.stderr)
        return 1


def run() -> int:
    """The command (`dse.__main__.run` calls it): `main`, then Ctrl-C is ignored while the interpreter
    shuts down (its exit handlers join worker threads; an interrupt there would end the process by
    SIGINT after the work is done and its exit code chosen).

    SIGINT is blocked before it is ignored: a Ctrl-C that arrived while `signal.signal` installed
    SIG_IGN would otherwise be raised after this function's ``try`` (Python runs the handler at a
    later instruction) and end the process by SIGINT. Blocked, it waits in the kernel and is
    discarded once ignored; one already caught is raised by `signal.signal`, inside the ``try``.
    Last, `_forget_handled_interrupt`: no Ctrl-C is left unhandled once this function returns."""
    code = 130
    try:
        try:
            code = main()
        finally:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:  # after main's return: `code` is what main chose, or 130 before it
        pass
    finally:
        _forget_handled_interrupt()
    return code


def _forget_handled_interrupt() -> None:
    """Clear CPython's note of a KeyboardInterrupt that left a string `exec` or `eval`.

    CPython notes such an interrupt as unhandled even when it is caught later, and under
    ``python -m dse`` it then ends the process by SIGINT (exit -2) in place of the exit code chosen.
    Dataclasses build their methods with a string `exec` as a module loads, so a Ctrl-C during a
    command's imports did that. Each string `exec` clears the note as it starts."""
    exec("pass", {})


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
