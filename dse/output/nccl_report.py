"""What the `nccl` cost model reports beyond a `Result`: every algorithm and protocol NCCL could have
run for one collective, and NCCL's pick (`dse compare --cost-model nccl`); and the held-out
validation against public measurements (`dse validate nccl`). Data first (`nccl_candidates`,
`machine_errors`), text from it (`candidates_text`, `validation_text`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dse.core.topology import Topology
from dse.core.units import format_size, format_time
from dse.costs import CostModel
from dse.output.report import format_table, nccl_forced
from dse.sim.result import Result


@dataclass(frozen=True)
class CandidateRow:
    """One (algorithm, protocol) NCCL could run: its time, nccl-tests' algbw and busbw (GB/s = 1e9
    B/s), its latency part, whether NCCL picks it, and its time over the pick's (1 = the pick)."""

    algo: str
    proto: str
    time_ns: float
    latency_ns: float
    algbw_GBps: float
    busbw_GBps: float
    chosen: bool
    vs_chosen: float

    def to_dict(self) -> dict[str, object]:
        """The candidate as a JSON object, one key per field."""
        return {
            "algo": self.algo,
            "proto": self.proto,
            "time_ns": self.time_ns,
            "latency_ns": self.latency_ns,
            "algbw_GBps": self.algbw_GBps,
            "busbw_GBps": self.busbw_GBps,
            "chosen": self.chosen,
            "time_vs_chosen": self.vs_chosen,
        }


def nccl_candidates(result: Result, topology: Topology, model: CostModel) -> list[CandidateRow]:
    """Every candidate of `result`'s collective under the closed-form `model`, in NCCL's order."""
    pred = model.collective_time(topology, result.collective, result.size_bytes)  # type: ignore[attr-defined]
    factor = result.busbw_GBps / result.algbw_GBps if result.algbw_GBps else 0.0
    rows = []
    for c in pred.candidates:
        algbw = result.size_bytes / c.time_ns if c.time_ns > 0 else 0.0
        chosen = (c.algo, c.proto) == (pred.algo, pred.proto)
        rows.append(
            CandidateRow(
                c.algo, c.proto, c.time_ns, c.latency_ns, algbw, algbw * factor, chosen, c.time_ns / pred.time_ns
            )
        )
    return rows


def candidates_text(rows: list[CandidateRow], result: Result, topology: Topology) -> str:
    """`dse compare`'s table under `nccl`: a title, one row per candidate, NCCL's pick (or the forced
    one) marked."""
    title = (
        f"{result.topology} ({topology.npus} GPUs), {result.collective} of "
        f"{format_size(result.size_bytes, result.size_unit)} per GPU, cost model {result.cost_model}: "
        "NCCL's algorithms and protocols"
    )
    mark = "forced" if nccl_forced(result.cost_model) else "NCCL's pick"
    cells = [
        (
            r.algo,
            r.proto,
            format_time(r.time_ns),
            format_time(r.latency_ns),
            f"{r.algbw_GBps:.2f}",
            f"{r.busbw_GBps:.2f}",
            f"{r.vs_chosen:.3f}",
            mark if r.chosen else "",
        )
        for r in rows
    ]
    headers = ("algorithm", "protocol", "time", "latency part", "algbw (GB/s)", "busbw (GB/s)", "x pick", "")
    lines = [title, "", format_table(headers, cells, align="llrrrrrl")]
    lines.append("")
    lines.append(
        "note: nccl is closed form (docs/model.md §15): schedulers, queues and chunks do not apply, and dse's "
        "bounds are for chunk schedules (dse bound refuses nccl)."
    )
    return "\n".join(lines)


@dataclass(frozen=True)
class MachineError:
    """One machine's held-out error over all its cases: rows and geometric-mean error (fraction)."""

    machine: str
    label: str
    cases: int
    rows: int
    gm: float


def machine_errors(table: Any) -> list[MachineError]:
    """Per machine of a `dse.costs.nccl.validation.ValidationTable`: its cases' rows pooled, the
    geometric mean of 1 + |error| taken over them (each case's gm weighted by its rows, in log space)."""
    by: dict[str, list[Any]] = {}
    for c in table.cases:
        by.setdefault(c.machine, []).append(c)
    out = []
    for machine, cases in by.items():
        rows = sum(c.rows for c in cases)
        out.append(MachineError(machine, cases[0].label, len(cases), rows, _pooled(cases) or 0.0))
    return out


#: The issue's target: at most this geometric-mean error on every machine with enough data, that is
#: at least `TARGET_MIN_ROWS` held-out rows.
TARGET_GM = 0.08
TARGET_MIN_ROWS = 10


def machines_text(table: Any, *, markdown: bool = False) -> str:
    """`dse validate nccl --machines`: each machine's error pooled over its cases, split into its own
    held-out sizes and the predictions carried from another run, machine or scale; whether it meets the
    8 % target; where the sources are; the summary line last."""
    pct = lambda x: "-" if x is None else f"{100 * x:.1f} %"  # noqa: E731
    rows = []
    for m in machine_errors(table):
        cases = [c for c in table.cases if c.machine == m.machine]
        own = _pooled([c for c in cases if c.split == "sizes"])
        other = _pooled([c for c in cases if c.split != "sizes"])
        met = "too few rows" if m.rows < TARGET_MIN_ROWS else ("met" if m.gm <= TARGET_GM else "missed")
        rows.append((m.label, m.rows, pct(m.gm), pct(own), pct(other), met))
    head = ("machine", "held-out rows", "calibrated gm", "own sizes", "from another run/scale", "8 % target")
    render = _markdown if markdown else format_table
    parts = [
        f"Per machine (held-out rows pooled; target: at most {100 * TARGET_GM:.0f} % on machines with "
        f"{TARGET_MIN_ROWS} or more rows):",
        render(head, rows),
        "Sources: each file's `# source:` line, listed in dse/data/nccl/README.md; every case: dse validate nccl",
        "",
        table.summary_line(),
    ]
    return "\n".join(parts)


def _pooled(cases: Sequence[Any]) -> float | None:
    """The rows-weighted geometric-mean error of `cases` (None for none)."""
    rows = sum(c.rows for c in cases)
    return math.expm1(sum(c.rows * math.log1p(c.fit_gm) for c in cases) / rows) if rows else None


def validation_text(table: Any, *, markdown: bool = False) -> str:
    """`dse validate nccl`: every held-out case with its source, each machine's error, ASTRA-sim's
    published HGX-H100 points beside dse's, and the summary line last."""
    pct = lambda x: f"{100 * x:.1f} %"  # noqa: E731
    head = ("machine", "split", "calibrated on", "held out", "rows", "NCCL defaults gm", "calibrated gm", "worst")
    cases = [
        (c.label, c.split, c.calibrated_on, c.held_out, c.rows, pct(c.default_gm), pct(c.fit_gm), pct(c.fit_max))
        for c in table.cases
    ]
    machines = [(m.label, m.cases, m.rows, pct(m.gm)) for m in machine_errors(table)]
    astra = [
        (
            f"{p.gpus} GPUs",
            format_size(p.size_bytes, "binary"),
            f"{p.measured_us:.0f}",
            f"{p.astra_sim_us:.0f}",
            f"{p.dse_us:.0f}",
            pct(abs(p.dse_us / p.measured_us - 1)),
        )  # fmt: skip
        for p in table.astra_sim
    ]
    render = _markdown if markdown else format_table
    sources = sorted({(c.held_out, c.source) for c in table.cases})
    parts = [
        "Held-out cases (time error of the out-of-place column; gm = exp(mean log(1 + |error|)) - 1):",
        render(head, cases),
        "",
        "Per machine (its cases' rows pooled):",
        render(("machine", "cases", "rows", "calibrated gm"), machines),
        "",
        "ASTRA-sim's HGX-H100 validation (NCCL ring; measured and ASTRA-sim read off its plots, about +/-3 %):",
        render(("GPUs", "size", "measured (us)", "ASTRA-sim (us)", "dse (us)", "dse error"), astra),
        "ASTRA-sim's published geomean errors: "
        + ", ".join(f"{g} GPUs {pct(e)}" for g, e in sorted(table.astra_sim_gm.items())),
        "",
        "Sources of the held-out files:",
        *(f"- {name}: {src}" for name, src in sources),
        "",
        table.summary_line(),
    ]
    return "\n".join(parts)


def rows_text(table: Any, *, markdown: bool = False) -> str:
    """`dse validate nccl --rows`: every held-out measurement of every case under its case's title
    (machine, split, what it was calibrated on, the held-out file and its source): the file's line,
    the size, the measured and predicted times, the signed error and what the model ran; the summary
    line last."""
    render = _markdown if markdown else lambda h, r: format_table(h, r, align="rrrrrl")
    head = ("line", "size (B)", "measured (us)", "dse (us)", "error", "dse ran")
    parts = ["Every held-out measurement (out-of-place time; error = (dse - measured) / measured):", ""]
    for c in table.cases:
        parts.append(
            f"{c.label}: {c.split} case, calibrated on {c.calibrated_on}, held out {c.held_out} "
            f"({c.rows} rows, gm {100 * c.fit_gm:.1f} %); source: {c.source}"
        )
        cells = [
            (p.line, p.size_bytes, f"{p.measured_us:.2f}", f"{p.predicted_us:.2f}", f"{100 * p.error:+.1f} %",
             f"{p.algo} {p.proto}")
            for p in c.points
        ]  # fmt: skip
        parts += [render(head, cells), ""]
    parts.append(table.summary_line())
    return "\n".join(parts)


def _markdown(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)
