"""What `dse compare` prints for a simulated cost model: every scheduler x queue against the lower
bound, as a table with notes or as one JSON object (`dse.cli.closed_form` covers the closed-form
models). Imported by `dse.cli.collective.cmd_compare` when it runs: it loads the bounds."""

from __future__ import annotations

from typing import Any

from dse.bounds.api import EXACT_NOT_SOLVED, Bounds
from dse.core.topology import Topology
from dse.core.units import format_size, format_time
from dse.costs import COST_MODELS
from dse.output.report import (
    ALL_TO_ALL_NOTE,
    ComparisonRow,
    below_bound_note,
    compare_utilization_note,
    comparison_text,
    footnote,
    utilization_at_bound,
    utilization_note,
)
from dse.sim.result import Result


def comparison_json(
    topo: Topology, first: Result, rows: list[ComparisonRow], bounds: Bounds, skipped: dict[str, str]
) -> dict[str, Any]:
    """`dse compare --json`'s object: the collective (from the first result), the bound, the rows,
    the schedulers not run (name -> why) and what the BW utilisation is measured against."""
    return {
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


def print_comparison(
    topo: Topology, first: Result, rows: list[ComparisonRow], bounds: Bounds, skipped: dict[str, str]
) -> None:
    """Print `dse compare`'s table: a title from the first result, the rows, the bound, then notes
    (the bound's when it is not the ILP's, all-to-all's, rows below the bound, schedulers not run)."""
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
    for note in bounds.notes:
        if bounds.status in ("lp_only", "ideal_only") or note.startswith(EXACT_NOT_SOLVED):
            print(f"note: {note}")
    if first.collective == "all_to_all":
        print(f"note: {ALL_TO_ALL_NOTE}")
    concurrent = first.active_chunks if not COST_MODELS[first.cost_model].rules.shares_bandwidth else 1
    if (below := below_bound_note(rows, first.cost_model, concurrent)) is not None:
        print(f"note: {below}")
    for name, why in skipped.items():
        print(f"{name} not run: {why}")
