"""Tables for people: plain-text renderings of results and comparisons (data first, text second)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dse.sim.result import Result

if TYPE_CHECKING:  # reports sit above the bounds layer; only the type is needed here
    from dse.bounds.api import Bounds
from dse.core.topology import Topology
from dse.core.units import format_size, format_time


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, align: str | None = None) -> str:
    """A fixed-width text table; `align` is one char per column, 'l' or 'r' (default: first left)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    align = align or "l" + "r" * (len(headers) - 1)
    lines = []
    for k, r in enumerate(cells):
        parts = [c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(r, widths, align)]
        lines.append("  ".join(parts).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_percent(x: float, digits: int = 2) -> str:
    """`x` (a fraction) as a percentage with `digits` decimals, never ``-0.00 %``: float noise such
    as a gap of -1e-12 prints as zero."""
    text = f"{100 * x:.{digits}f}"
    if float(text) == 0:
        text = f"{0:.{digits}f}"
    return f"{text} %"


def utilisation_text(result: Result) -> str:
    """The BW utilisation as printed: capped at 100 %, and saying so (`Result`)."""
    capped = result.bw_utilization_uncapped > result.bw_utilization * (1 + 1e-9)
    return format_percent(result.bw_utilization) + (" (capped)" if capped else "")


#: per cost model: B, the bandwidth BW utilisation divides by, and what keeps a schedule's figure
#: from 100 % (`utilization_note`; docs/model.md §6.5)
_UTILIZATION_BY_MODEL: dict[str, tuple[str, str]] = {
    "paper": (
        "the sum of the dimensions' bandwidths, GB = 10^9 B",
        "it cannot pass 100 % (phases on a dimension share its bandwidth); latency sends nothing, so "
        "with serialized latency even the best schedule stays below 100 %",
    ),
    "astra-sim": (
        "the sum of the dimensions' bandwidths as ASTRA-sim 2.x counts them: GB = 2^30 B, a "
        "fully-connected dimension's per-link bandwidth x P-1",
        "each step's latency holds its dimension and sends nothing, so even the best schedule can read far below 100 %",
    ),
    "astra-sim-1": (
        "the sum of the dimensions' bandwidths as ASTRA-sim 1.0 counts them: GB = 2^30 B, links x "
        "per-link bandwidth, a ring's links rounded down to even, a fully-connected one's to a multiple of P-1",
        "each message's latency holds its dimension and sends nothing, so even the best schedule can read below 100 %",
    ),
    "nccl": (
        "the sum of the dimensions' line rates per GPU, GB = 10^9 B, with the bytes an endpoint algorithm must "
        "send (NCCL's nominal; nccl-tests' busbw is the same count over one dimension's rate)",
        "NVLS and a tree across two nodes reduce in the switches and send less, so the figure can pass 100 % "
        "(shown capped; bw_utilization_uncapped holds it)",
    ),
}


#: the models whose concurrent phases each run at full bandwidth (active chunks > 1, docs/model.md §6.4)
FULL_BANDWIDTH_PHASES = ("astra-sim",)


def model_family(cost_model: str) -> str:
    """The cost model's name without its configuration (``nccl:HGX-H100`` and
    ``nccl,NCCL_ALGO=ring`` are ``nccl``)."""
    return cost_model.split(":", 1)[0].split(",", 1)[0]


def nccl_forced(cost_model: str) -> bool:
    """Whether an `nccl` model's name forces NCCL's algorithm, protocol or channels (``,NCCL_ALGO=...``)."""
    from dse.costs.nccl.env import split_settings

    return model_family(cost_model) == "nccl" and split_settings(cost_model)[1].forced


def schedule_cell(scheduler: str, queue: str, cost_model: str, more: str = "") -> str:
    """How a run was scheduled, for a summary table: NCCL's own choice under `nccl` (or the forced one)."""
    if model_family(cost_model) == "nccl":
        whose = "forced" if nccl_forced(cost_model) else "NCCL's"
        return f"{whose} algorithm per collective ({cost_model} model)"
    return f"{scheduler} / {queue} ({cost_model} model{more})"


def utilization_note(cost_model: str, *, iteration: bool = False) -> str:
    """What BW utilisation is measured against under `cost_model` (a model's name), in a few
    sentences: the one text every table and JSON that prints the figure shows, so the `paper` and
    ASTRA-sim figures are not read as one quantity. `iteration`: `dse iterate`'s figure (the bytes
    of all the collectives over the time at least one is in flight), else one collective's."""
    bandwidth, why = _UTILIZATION_BY_MODEL.get(
        model_family(cost_model), (f"the sum of the dimensions' bandwidths in the {cost_model} model's unit", "")
    )
    if iteration:
        head = f"BW utilisation ({cost_model} model) = bytes one NPU sends / (time any collective is in flight x B)"
        tail = "a collective on some dimensions leaves the others idle"
    else:
        head = f"BW utilisation ({cost_model} model) = bytes one NPU must send / (time x B)"
        tail = "judge a schedule by its gap to the bound (dse compare)"
    if not iteration and cost_model in FULL_BANDWIDTH_PHASES:
        why += "; with active chunks > 1 each phase runs at full bandwidth, and it can pass 100 % (shown capped)"
    parts = (f"{head}, B {bandwidth}", why, tail)
    return ". ".join(part[0].upper() + part[1:] for part in parts if part) + "."


#: per cost model: what `_UTILIZATION_BY_MODEL`'s B is, and its caveat, in a few words (`utilization_line`)
_UTILIZATION_SHORT: dict[str, tuple[str, str]] = {
    "paper": ("the dims' summed GB/s, GB = 10^9 B", "at most 100 %"),
    "astra-sim": ("the dims' bandwidth as ASTRA-sim 2.x sums it, GB = 2^30 B", "latency sends nothing"),
    "astra-sim-1": ("the dims' bandwidth as ASTRA-sim 1.0 sums it, GB = 2^30 B", "latency sends nothing"),
    "nccl": ("the dims' summed line rates per GPU, GB = 10^9 B", "NVLS reduces in the switches: can pass 100 %"),
}


def utilization_line(cost_model: str, *, iteration: bool = False, at_bound: str | None = None) -> str:
    """`utilization_note` in one sentence for a terminal (the whole text is in ``--json``'s
    ``bw_utilization_note``): what the figure divides by and its caveat; `at_bound`, the figure a
    schedule at the bound would show, is added when given."""
    b, caveat = _UTILIZATION_SHORT.get(
        model_family(cost_model), (f"the dims' summed bandwidth ({cost_model} model)", "")
    )
    time = "time in flight" if iteration else "time"
    text = f"BW utilisation ({cost_model} model) = bytes to send / ({time} x B), B {b}"
    text += f"; {caveat}" if caveat else ""
    text += f"; at the bound it would be {at_bound}" if at_bound is not None else ""
    return text + " (definition: --json bw_utilization_note)."


def footnote(text: str, width: int = 100) -> str:
    """`text` as lines of at most `width` characters, each after the first indented by two: a
    definition printed under a table."""
    import textwrap

    return textwrap.fill(text, width=width, subsequent_indent="  ", break_on_hyphens=False)


def utilization_at_bound(result: Result, bound_ns: float) -> float:
    """The BW utilisation (uncapped) a schedule finishing at `bound_ns` would show: `result`'s
    bytes and bandwidth are the same for every schedule of its collective."""
    return result.bw_utilization_uncapped * result.time_ns / bound_ns


def compare_utilization_note(result: Result, bound_ns: float) -> str:
    """`dse compare`'s footnote: `utilization_note`, then the figure a schedule at the bound would show."""
    at_bound = utilization_at_bound(result, bound_ns)
    shown = format_percent(min(at_bound, 1.0)) + (" (capped)" if at_bound > 1 + 1e-9 else "")
    return utilization_line(result.cost_model, at_bound=f"{shown} ({format_time(bound_ns)})")


def order_summary(orders: Sequence[tuple[int, ...]], limit: int = 6) -> str:
    """The orders used, most common first: ``0123 x40, 3210 x12, ...``."""
    counts = Counter("".join(map(str, o)) if len(o) <= 10 else ",".join(map(str, o)) for o in orders)
    parts = [f"{o} x{k}" for o, k in counts.most_common(limit)]
    if len(counts) > limit:
        parts.append(f"... ({len(counts)} distinct)")
    return ", ".join(parts)


def result_text(result: Result, topology: Topology) -> str:
    """A readable report of one evaluation: the headline figures, one row per dimension, then what
    BW utilisation is measured against (`utilization_note`)."""
    head = [
        ("topology", f"{result.topology} ({topology.npus} NPUs): {topology.notation()}"),
        (
            "collective",
            f"{result.collective}, {format_size(result.size_bytes, result.size_unit)} per NPU, {result.chunks} chunks"
            + (f" ({result.simulated_chunks} simulated)" if result.simulated_chunks != result.chunks else ""),
        ),
        ("schedule", f"{result.scheduler} + {result.queue}, active chunks {result.active_chunks}, seed {result.seed}"),
        ("cost model", f"{result.cost_model}, latency {result.latency_mode}"),
        ("time", f"{format_time(result.time_ns)} ({result.time_ns:.6g} ns)"),
        ("BW utilisation", utilisation_text(result)),
        ("algbw / busbw", f"{result.algbw_GBps:.2f} / {result.busbw_GBps:.2f} GB/s"),
        ("orders", order_summary(result.orders)),
    ]
    if model_family(result.cost_model) == "nccl":
        head = _closed_form_head(head, result, topology)
    w = max(len(k) for k, _ in head)
    lines = [f"{k.ljust(w)}  {v}" for k, v in head]
    rows = []
    for i, d in enumerate(topology.dims):
        rows.append(
            (
                i,
                d.notation(),
                f"{result.dim_busy_ns[i] / 1e3:.1f}",
                f"{result.dim_bytes[i] / 1e6:.2f}",
                f"{100 * result.dim_utilization[i]:.1f}",
            )
        )
    lines.append("")
    lines.append(format_table(("dim", "dimension", "busy (us)", "sent (MB)", "busy %"), rows, align="rlrrr"))
    lines += ["", footnote(utilization_line(result.cost_model))]
    return "\n".join(lines)


def _closed_form_head(head: list[tuple[str, str]], result: Result, topology: Topology) -> list[tuple[str, str]]:
    """`result_text`'s head under `nccl`: NCCL's pick in place of the schedule, no chunks or orders."""
    from dse.costs import get_cost_model
    from dse.costs.nccl.env import allowed, split_settings

    pred = get_cost_model(result.cost_model).collective_time(  # type: ignore[attr-defined]
        topology, result.collective, result.size_bytes
    )
    size = format_size(result.size_bytes, result.size_unit)
    env = split_settings(result.cost_model)[1]
    whose = "forced" if env.forced else "NCCL's pick"
    if any(len(allowed(v, result.collective) or ()) > 1 for v in (env.algo, env.proto)):  # NCCL chooses among those
        whose = "NCCL's pick of those allowed"
    pick = f"{pred.algo} / {pred.proto}: {whose} (schedulers, queues and chunks do not apply)"
    out = []
    for k, v in head:
        if k == "collective":
            out.append((k, f"{result.collective}, {size} per GPU"))
        elif k == "schedule":
            out.append(("algorithm", pick))
        elif k != "orders":
            out.append((k, v))
    return out


@dataclass(frozen=True)
class ComparisonRow:
    """One schedule's row of a comparison: its time, its bandwidth utilisation (capped and not), its
    speed-up over the baseline and its gap to the bound (None: not computed)."""

    scheduler: str
    queue: str
    time_ns: float
    bw_utilization: float
    speedup: float
    gap: float | None = None
    bw_utilization_uncapped: float | None = None

    def to_dict(self) -> dict[str, object]:
        """The row as a JSON object (`speedup_vs_baseline_fifo`; the uncapped utilisation is the capped
        one when not given)."""
        return {
            "scheduler": self.scheduler,
            "queue": self.queue,
            "time_ns": self.time_ns,
            "bw_utilization": self.bw_utilization,
            "bw_utilization_uncapped": self.bw_utilization
            if self.bw_utilization_uncapped is None
            else self.bw_utilization_uncapped,
            "speedup_vs_baseline_fifo": self.speedup,
            "gap_to_bound": self.gap,
        }


def comparison_rows(results: Sequence[Result], bounds: Bounds | None = None) -> list[ComparisonRow]:
    """Speed-up of each result over the baseline+fifo one (which must be among them), and its gap
    to the bound when one is given."""
    ref = next((r for r in results if r.scheduler == "baseline" and r.queue == "fifo"), None)
    if ref is None:
        raise ValueError("comparison needs a baseline+fifo result")
    return [
        ComparisonRow(
            r.scheduler,
            r.queue,
            r.time_ns,
            r.bw_utilization,
            ref.time_ns / r.time_ns,
            bounds.gap(r.time_ns) if bounds is not None else None,
            r.bw_utilization_uncapped,
        )
        for r in results
    ]


ALL_TO_ALL_NOTE = (
    "all-to-all sends every chunk through the dimensions in ascending order, so no scheduler changes the "
    "order and the bound is for that order alone; BW utilisation compares with the ideal (every dimension "
    "busy throughout), which all-to-all reaches only when each dimension's share of the bytes matches its "
    "share of the bandwidth"
)


def below_bound_note(rows: Sequence[ComparisonRow], cost_model: str, concurrent_phases: int) -> str | None:
    """What to say if a schedule is ever faster than the bound (a negative gap), else None.

    A bound holds for every schedule (`dse.bounds`; with `concurrent_phases` > 1 its ideal is divided
    by them, as ASTRA-sim runs them each at full bandwidth), so this is a last guard against a defect,
    said in the output rather than hidden in a negative gap."""
    worst = min((r.gap for r in rows if r.gap is not None), default=0.0)
    if worst >= -1e-9:
        return None
    where = f" with up to {concurrent_phases} phases at once on a dimension" if concurrent_phases > 1 else ""
    return (
        f"schedules beat the bound (gap down to {format_percent(worst)}): a bound must hold for every "
        f"schedule, so this is a defect of dse's bounds for the {cost_model} model{where}; please report it"
    )


def comparison_text(rows: Sequence[ComparisonRow], title: str) -> str:
    """The table of `dse compare`: one row per scheduler and queue under `title`."""
    with_gap = any(r.gap is not None for r in rows)
    body = [
        (r.scheduler, r.queue, format_time(r.time_ns), format_percent(r.bw_utilization), f"{r.speedup:.3f}x")
        + ((format_percent(r.gap),) if with_gap and r.gap is not None else ())
        for r in rows
    ]
    heads = ("scheduler", "queue", "time", "BW util", "speed-up") + (("gap",) if with_gap else ())
    return title + "\n" + format_table(heads, body, align="llrrr" + ("r" if with_gap else ""))


def bounds_text(b: Bounds, topology: Topology, size_unit: str = "decimal") -> str:
    """A readable report of `dse bound`; the size in `size_unit`'s family (`dse.core.units.size_family`)."""
    lines = [
        f"{b.topology} ({topology.npus} NPUs), {b.collective} of {format_size(b.size_bytes, size_unit)} per NPU, "
        f"{b.chunks} chunks, cost model {b.cost_model} ({b.latency_mode} latency)",
        f"ideal     {format_time(b.ideal_ns):>10}  (100 % bandwidth utilisation)",
        f"LP        {format_time(b.lp_ns):>10}  (fluid order mix)",
        f"ILP       {format_time(b.ilp_ns):>10}  (whole chunks per order)",
        f"pipeline  {format_time(b.pipeline_ns):>10}  (ILP + fill, drain and paths: the bound gaps use)",
        f"solver    {b.solver}, {b.status}, {b.solve_time_s:.3f} s",
        f"mix       {', '.join(f'{o} x{k}' for o, k in sorted(b.mix.items(), key=lambda kv: (-kv[1], kv[0])))}",
    ]
    lines += [f"note      {n}" for n in b.notes]
    return "\n".join(lines)
