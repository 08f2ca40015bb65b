"""What `dse iterate` prints for a single-rank run: one JSON object, or the notes, the summary table,
the BW utilisation note and, on request, every collective. Imported by `dse.cli.iterate.cmd_iterate`
when it runs."""

from __future__ import annotations

import argparse
import json

from dse.core.units import format_size, format_time
from dse.output.report import footnote, format_table, schedule_cell, utilization_line, utilization_note
from dse.training.iteration import IterationResult


def print_iteration(res: IterationResult, args: argparse.Namespace) -> None:
    """Print `res` as --json, --timeline and --collectives ask: one JSON object, or the notes, the
    summary table, what its BW utilisation is measured against (`dse.output.report.utilization_note`)
    and, with --collectives, the collectives."""
    if args.json:
        d = res.as_dict(details=args.collectives)
        if not args.timeline:
            d.pop("nodes", None)
        d["bw_utilization_note"] = utilization_note(res.cost_model, iteration=True)
        print(json.dumps(d))
        return
    for note in res.notes:
        print(f"note: {note}")
    print(_summary_table(res))
    print(footnote(utilization_line(res.cost_model, iteration=True)))
    if args.collectives and res.collectives:
        print()
        print(_collectives_table(res))


def _summary_table(res: IterationResult) -> str:
    """The iteration's quantities, one per row."""
    rows = [
        ("workload", res.workload),
        ("topology", res.topology),
        *([("split for the model-parallel group", res.logical_topology)] if res.logical_topology else []),
        ("scheduler / queue", schedule_cell(res.scheduler, res.queue, res.cost_model)),
        ("iterations", res.iterations),
        ("iteration time", format_time(res.time_ns)),
        ("compute", format_time(res.compute_ns) + (f" (CPU {format_time(res.cpu_ns)})" if res.cpu_ns else "")),
        ("communication in flight", format_time(res.comm_ns)),
        (
            "exposed communication",
            f"{format_time(res.exposed_comm_ns)} ({res.exposed_comm_ns / res.time_ns:.1%})" if res.time_ns else "0",
        ),
        ("BW utilisation (while communicating)", f"{res.bw_utilization:.1%}"),
        ("collectives", len(res.collectives)),
    ]
    return format_table(("quantity", "value"), rows, align="ll")


def _collectives_table(res: IterationResult) -> str:
    """Every collective: pass, layer, slot, what, where, and when it was issued and done."""
    body = [
        (
            c.iteration,
            c.layer,
            c.slot,
            c.collective,
            format_size(c.size_bytes),
            ",".join(map(str, c.dims)),
            c.chunks,
            format_time(c.issue_ns),
            format_time(c.end_ns + c.delay_ns),
        )
        for c in res.collectives
    ]
    return format_table(
        ("it", "layer", "slot", "collective", "size", "dims", "chunks", "issued", "done"), body, align="rllllrrrr"
    )
