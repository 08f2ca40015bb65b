"""`dse reproduce themis`: the Themis paper's experiments, from one command.

Two experiments, both run through the sweep machinery (so they run in parallel and resume):

- single all-reduce: the six paper topologies x 19 sizes (0.10 to 1.00 GiB in steps of 0.05 GiB,
  the sizes of the paper's artifact) x {baseline+FIFO, Themis+FIFO, Themis+SCF, lp_guided+SCF}
  at 64 chunks, with the ideal (100 % bandwidth) and the tightest bound (`dse.bounds`);
- chunk sensitivity: 0.1 GiB on 3D-SW_SW_SW_hetero and 4D-Ring_FC_Ring_SW, 4 to 512 chunks.

Under `astra-sim-1` every part runs the presets ``NAME@artifact`` (the artifact's 1 ns links, as
in the paper's own runs); under `astra-sim` each fully-connected dimension's bandwidth is divided
by P−1 (ASTRA-sim 2.x reads it per link), so that every model sees the same hardware; `summary.md`
and the command's output record the exact notation each topology ran as. `summary.md` reports
what the paper reports: per topology the mean bandwidth utilisation of each schedule and its
speed-up over the baseline (arithmetic and geometric means over sizes), and overall the
geometric-mean speed-ups and average utilisations (with `--quick`, labelled as not comparable
with the paper's). Each part shows a labelled progress bar when stderr is a terminal.
Figures: utilisation against size per topology, the chunk-sensitivity curves, and a per-dimension
timeline of the baseline and Themis for one case, where the baseline's idle dimensions show. And
the end-to-end table (`end_to_end.csv`, and in `summary.md`): training iterations of ResNet-152,
GNMT, DLRM and Transformer-1T on the six topologies, speed-ups of Themis+SCF and of the ideal
(every collective at 100 % bandwidth) over the baseline (`dse.training.iteration`). Next to it, unless the
model is `astra-sim-1` already, the same table as the paper's own simulator gives it
(`end_to_end_astra-sim-1.csv`): `astra-sim-1` on the artifact's presets and its own workload
files (ResNet-50 for ResNet), which replays the artifact's end-to-end runs to the ns.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dse.bounds.api import ideal_ns
from dse.core.errors import raise_if_interrupted
from dse.core.files import atomic_output, check_output_dir, check_outputs_in, output_folder, write_atomic
from dse.core.presets import PAPER_PRESETS
from dse.core.progress import progress_bar as _bar
from dse.core.progress import wanted
from dse.costs import get_cost_model
from dse.explore.sweep.file import parse_sweep
from dse.explore.sweep.sweeps import read_rows, run_sweep
from dse.output.reproduce_experiments import (
    EXPERIMENTS,
    GANTT_CASE,
    QUICK_SIZES_GIB,
    QUICK_TOPOLOGIES,
    SCHEDULES,
    SIZES_GIB,
    run_as,
    sweeps,
    topology_for,
)
from dse.output.reproduce_figures import (
    chunk_data,
    draw_chunks,
    draw_timeline,
    draw_utilization,
    timeline_data,
    utilization_data,
)
from dse.sim.spec import CollectiveSpec
from dse.training.iteration import end_to_end_markdown, end_to_end_rows

PAPER = {"baseline_util": 0.5631, "themis_util": 0.9514, "speedup_geomean": 1.72}


def reproduce_themis(
    out: str | Path, *, cost_model: str = "paper", jobs: int = 1, quick: bool = False, progress: bool | None = None
) -> dict[str, Any]:
    """Run (or resume) both experiments and the training iterations into `out`, and write the
    summary and the figures. `progress`: labelled bars on stderr (None: when it is a terminal).

    The output rules of `dse.core.files`: the folder and every file of `output_files` in it are
    checked before any work (a FIFO, device, socket or folder where a file goes is refused; a
    symlink is followed); the folder is created as the run starts and removed again if the run
    fails or is refused before writing anything in it."""
    model = get_cost_model(cost_model).name
    out = check_output_dir(out, "out")
    check_outputs_in(out, output_files(model), "out")
    with output_folder(out, "out"):
        return _reproduce_in(out, model, jobs=jobs, quick=quick, progress=progress)


def output_files(model: str) -> tuple[str, ...]:
    """Every file `reproduce_themis` writes in its folder under cost model `model`."""
    files = [f"{name}{ext}" for name in EXPERIMENTS for ext in (".raw.csv", ".csv")]
    files += ["end_to_end.csv", "summary.md", "utilization.png", "chunks.png", "timeline.png"]
    return (*files, *(() if model == "astra-sim-1" else ("end_to_end_astra-sim-1.csv",)))


def _reproduce_in(out: Path, model: str, *, jobs: int, quick: bool, progress: bool | None) -> dict[str, Any]:
    """`reproduce_themis` in its checked, existing folder."""
    counts, tables = _run_sweeps(out, model, jobs=jobs, quick=quick, progress=progress)
    summary = summarize(tables["single_allreduce"])
    raise_if_interrupted()
    e2e_names = QUICK_TOPOLOGIES if quick else PAPER_PRESETS
    e2e = end_to_end(model, e2e_names, progress)
    write_csv(out / "end_to_end.csv", e2e)
    artifact = e2e if model == "astra-sim-1" else end_to_end("astra-sim-1", e2e_names, progress)
    if model != "astra-sim-1":
        write_csv(out / "end_to_end_astra-sim-1.csv", artifact)
    ran = [
        n for n in PAPER_PRESETS if any(r["topology"] == n for t in tables.values() for r in t) or n == GANTT_CASE[0]
    ]
    notations = {n: topology_for(n, model).notation() for n in ran}
    e2e_note = (
        f"Quick run: {len(QUICK_TOPOLOGIES)} of {len(PAPER_PRESETS)} topologies. The paper column is the paper's "
        "average over its full set of topologies, not comparable with these.\n\n"
        if quick
        else ""
    )
    write_atomic(
        out / "summary.md",
        summary_markdown(
            summary, tables["chunks"], model, quick=quick, ran={n: run_as(n, model) for n in ran}, notations=notations
        )
        + "\n## Training iterations (speed-up over baseline+FIFO)\n\n"
        + e2e_note
        + end_to_end_markdown(e2e)
        + "\n"
        + (
            ""
            if model == "astra-sim-1"
            else "\n" + ARTIFACT_E2E_TITLE + e2e_note + end_to_end_markdown(artifact) + "\n"
        ),
    )
    raise_if_interrupted()
    figures = _draw_figures(tables, model, out)
    return {
        "out": str(out),
        "counts": counts,
        "summary": summary,
        "topologies": notations,
        "figures": [str(f) for f in figures],
    }


def _run_sweeps(
    out: Path, model: str, *, jobs: int, quick: bool, progress: bool | None
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """Both experiments' sweeps (resumed from their raw CSVs), and their finished tables."""
    names = {topology_for(n, model).notation(): n for n in PAPER_PRESETS}
    counts = {}
    tables: dict[str, list[dict[str, Any]]] = {}
    for name, table in sweeps(model, quick).items():
        sweep = parse_sweep(table, source=f"reproduce:{name}")
        raw_path = out / f"{name}.raw.csv"
        counts[name] = run_sweep(sweep, raw_path, jobs=jobs, progress=progress, label=f"{EXPERIMENTS[name]} ({model})")
        tables[name] = finish_rows(read_rows(raw_path), names, model)
        write_csv(out / f"{name}.csv", tables[name])
    return counts, tables


def _draw_figures(tables: dict[str, list[dict[str, Any]]], model: str, out: Path) -> list[Path]:
    """The utilisation, chunk and timeline figures."""
    return [
        draw_utilization(utilization_data(tables["single_allreduce"]), out / "utilization.png"),
        draw_chunks(chunk_data(tables["chunks"]), out / "chunks.png"),
        draw_timeline(timeline_data(model), out / "timeline.png"),
    ]


ARTIFACT_E2E_TITLE = (
    "## Training iterations as the paper's own simulator runs them (astra-sim-1, the artifact's settings)\n\n"
    "ASTRA-sim 1.0 replayed to the ns (`dse iterate --cost-model astra-sim-1`), the artifact's own workload files "
    "(ResNet-50, not the paper's ResNet-152) on its 1 ns presets: its speed-ups are well below Fig. 12's.\n\n"
)


def end_to_end(model: str, names: Sequence[str], progress: bool | None = None) -> list[dict[str, Any]]:
    """`dse.training.iteration.end_to_end_rows` on each paper preset as `topology_for` makes it, one
    topology at a time under a labelled bar; rows keep the preset's name and gain its notation."""
    rows: list[dict[str, Any]] = []
    bar = progress_bar(f"training iterations ({model})", len(names), 0, "topology", progress)
    try:
        for n in names:
            topo = topology_for(n, model)
            for r in end_to_end_rows(model, topologies=[topo]):
                rows.append({**r, "topology": n, "notation": topo.notation()})
            raise_if_interrupted()
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    workloads = {w: i for i, w in enumerate(dict.fromkeys(r["workload"] for r in rows))}
    index = {n: i for i, n in enumerate(names)}
    return sorted(rows, key=lambda r: (workloads[r["workload"]], index[r["topology"]]))


def progress_bar(desc: str, total: int, initial: int, unit: str, progress: bool | None) -> Any:
    """A labelled tqdm bar on stderr, or None: `progress` None shows it only when stderr is a
    terminal, so CI logs stay quiet (as `dse sweep`)."""
    return _bar(total, initial=initial, desc=desc, unit=unit) if wanted(progress) else None


def finish_rows(rows: list[dict[str, str]], names: dict[str, str], model: str) -> list[dict[str, Any]]:
    """Sweep rows with the preset name, the schedule, the ideal, and numbers as numbers; the sweep's
    ``bw_utilization_pct`` and ``gap_pct`` (percent) become ``bw_utilization`` and ``gap`` (fractions)."""
    out = []
    ideal_cache: dict[tuple[str, int], float] = {}
    for r in rows:
        size = int(r["size_bytes"] if "size_bytes" in r else r["size"])
        key = (r["topology"], size)
        if key not in ideal_cache:
            spec = CollectiveSpec.parse(r["topology"], size=size, chunks=1, cost_model=model)
            ideal_cache[key] = ideal_ns(spec)
        time_ns = float(r["time_ns"])
        out.append(
            {
                "topology": names.get(r["topology"], r["topology"]),
                "notation": r["topology"],
                "size_bytes": size,
                "chunks": int(r["chunks"]),
                "scheduler": r["scheduler"],
                "queue": r["queue"],
                "schedule": f"{r['scheduler']}+{r['queue']}",
                "cost_model": r["cost_model"],
                "time_ns": time_ns,
                "bw_utilization": float(r["bw_utilization_pct"]) / 100.0,
                "ideal_ns": ideal_cache[key],
                "bound_ns": float(r["bound_ns"]),
                "gap": float(r["gap_pct"]) / 100.0,
            }
        )
    return out


#: fractions the tables keep, written to a CSV in percent under a name that says so
_PERCENT_COLUMNS = {"bw_utilization": "bw_utilization_pct", "gap": "gap_pct"}


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """`rows` as a CSV, every column's unit in its name (`_PERCENT_COLUMNS` become percent)."""
    import csv

    rows = [{_PERCENT_COLUMNS.get(k, k): 100.0 * v if k in _PERCENT_COLUMNS else v for k, v in r.items()} for r in rows]
    with atomic_output(path) as tmp, open(tmp, "w", newline="") as f:
        keys: list[str] = []
        for r in rows:
            keys += [k for k in r if k not in keys]
        w = csv.DictWriter(f, fieldnames=keys or ["topology"])
        w.writeheader()
        w.writerows(rows)


@dataclass(frozen=True)
class Summary:
    """What `summary.md` reports, by `summarize`: per topology and schedule, and overall per schedule,
    the mean utilisation, the speed-ups over baseline+FIFO and the mean gap to the bound."""

    per_topology: dict[str, dict[str, dict[str, float]]]  # topology -> schedule -> figures
    overall: dict[str, dict[str, float]]  # schedule -> figures


def _geomean(xs: Sequence[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def summarize(rows: Sequence[dict[str, Any]]) -> Summary:
    """Mean utilisation and speed-ups over the baseline, per topology and overall."""
    base = {(r["topology"], r["size_bytes"]): r["time_ns"] for r in rows if r["schedule"] == "baseline+fifo"}
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by[(r["topology"], r["schedule"])].append(r)
    per: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    overall_rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (topo, sched), rs in by.items():
        speed = [base[(topo, r["size_bytes"])] / r["time_ns"] for r in rs if (topo, r["size_bytes"]) in base]
        per[topo][sched] = {
            "bw_utilization": statistics.mean(r["bw_utilization"] for r in rs),
            "speedup_mean": statistics.mean(speed) if speed else float("nan"),
            "speedup_geomean": _geomean(speed),
            "gap_mean": statistics.mean(r["gap"] for r in rs),
        }
        overall_rows[sched] += rs
    overall = {}
    for sched, rs in overall_rows.items():
        speed = [
            base[(r["topology"], r["size_bytes"])] / r["time_ns"]
            for r in rs
            if (r["topology"], r["size_bytes"]) in base
        ]
        overall[sched] = {
            "bw_utilization": statistics.mean(r["bw_utilization"] for r in rs),
            "speedup_geomean": _geomean(speed),
            "gap_mean": statistics.mean(r["gap"] for r in rs),
        }
    return Summary(dict(per), overall)


def summary_markdown(
    s: Summary,
    chunk_rows: Sequence[dict[str, Any]],
    model: str,
    *,
    quick: bool = False,
    ran: Mapping[str, str] | None = None,
    notations: Mapping[str, str] | None = None,
) -> str:
    """The summary as Markdown tables, next to the paper's headline numbers.

    `quick`: the overall means cover part of the grid, so the paper's (every topology and size)
    are not set beside them as if comparable. `ran` / `notations`: per paper preset, what it was
    run as and its exact notation (recorded so every figure can be re-run by hand)."""
    scheds = [x for x in SCHEDULES if x in s.overall]
    lines = [f"# Themis reproduction, cost model `{model}`", ""]
    lines += _overall_lines(s, scheds, quick)
    if ran:
        lines += _ran_lines(ran, notations or {}, model)
    lines += _per_topology_lines(s, scheds)
    lines += _chunk_lines(chunk_rows, scheds)
    return "\n".join(lines) + "\n"


def _overall_lines(s: Summary, scheds: list[str], quick: bool) -> list[str]:
    """The overall table, and the paper's headline numbers beside it (not after a quick run)."""
    lines: list[str] = []
    if quick:
        scope = (
            f"{len(s.per_topology)} of {len(PAPER_PRESETS)} topologies, {len(QUICK_SIZES_GIB)} of "
            f"{len(SIZES_GIB)} sizes"
        )
        lines += [f"## Overall (quick run: {scope}; not comparable with the paper's means)", ""]
    else:
        lines += ["## Overall (every topology and size)", ""]
    lines += [
        "| schedule | mean BW utilisation | geo-mean speed-up over baseline | mean gap to bound |",
        "|---|---|---|---|",
    ]
    for sc in scheds:
        o = s.overall[sc]
        lines.append(
            f"| {sc} | {100 * o['bw_utilization']:.2f} % | {o['speedup_geomean']:.3f}x | {100 * o['gap_mean']:.2f} % |"
        )
    if quick:
        lines += [
            "",
            (
                f"Quick run ({scope}): the paper's headline figures are means over all {len(PAPER_PRESETS)} "
                f"topologies and {len(SIZES_GIB)} sizes, so they are not set beside these. Run without --quick "
                "to compare with the paper."
            ),
            "",
        ]
    else:
        lines += [
            "",
            (
                f"The paper: baseline {100 * PAPER['baseline_util']:.2f} %, Themis {100 * PAPER['themis_util']:.2f} % "
                f"utilisation, geometric-mean speed-up {PAPER['speedup_geomean']}x."
            ),
            "",
        ]
    return lines


def _ran_lines(ran: Mapping[str, str], notations: Mapping[str, str], model: str) -> list[str]:
    """What each paper preset was run as, and its exact notation."""
    lines: list[str] = []
    lines += [
        f"## Topologies as run (cost model `{model}`)",
        "",
        "| topology | run as | notation |",
        "|---|---|---|",
    ]
    lines += [f"| {n} | {what} | `{notations.get(n, topology_for(n, model).notation())}` |" for n, what in ran.items()]
    lines.append("")
    return lines


def _per_topology_lines(s: Summary, scheds: list[str]) -> list[str]:
    """Per topology and schedule, the means over sizes."""
    lines: list[str] = []
    lines += [
        "## Per topology (means over sizes)",
        "",
        "| topology | schedule | BW utilisation | speed-up (arith.) | speed-up (geo.) | gap to bound |",
        "|---|---|---|---|---|---|",
    ]
    for topo in s.per_topology:
        for sc in scheds:
            f = s.per_topology[topo].get(sc)
            if f:
                lines.append(
                    f"| {topo} | {sc} | {100 * f['bw_utilization']:.2f} % | {f['speedup_mean']:.3f}x | "
                    f"{f['speedup_geomean']:.3f}x | {100 * f['gap_mean']:.2f} % |"
                )
    return lines


def _chunk_lines(chunk_rows: Sequence[dict[str, Any]], scheds: list[str]) -> list[str]:
    """BW utilisation per topology and chunk count."""
    lines: list[str] = []
    lines += [
        "",
        "## Chunk sensitivity (0.1 GiB)",
        "",
        "| topology | chunks | " + " | ".join(scheds) + " |",
        "|---|---|" + "---|" * len(scheds),
    ]
    cell: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    for r in chunk_rows:
        cell[(r["topology"], r["chunks"])][r["schedule"]] = r["bw_utilization"]
    for (topo, ch), v in sorted(cell.items()):
        lines.append(
            f"| {topo} | {ch} | " + " | ".join(f"{100 * v[sc]:.1f} %" if sc in v else "" for sc in scheds) + " |"
        )
    return lines
