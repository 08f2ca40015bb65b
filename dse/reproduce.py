"""`dse reproduce themis`: the Themis paper's experiments, from one command.

Two experiments, both run through the sweep machinery (so they run in parallel and resume):

- single all-reduce: the six paper topologies x 19 sizes (0.10 to 1.00 GiB in steps of 0.05 GiB,
  the sizes of the paper's artifact) x {baseline+FIFO, Themis+FIFO, Themis+SCF, lp_guided+SCF}
  at 64 chunks, with the ideal (100 % bandwidth) and the tightest bound (`dse.bounds`);
- chunk sensitivity: 0.1 GiB on 3D-SW_SW_SW_hetero and 4D-Ring_FC_Ring_SW, 4 to 512 chunks.

Under `astra-sim-1` the topologies get the artifact's 1 ns link latency (the presets already carry
its links), as in the paper's own runs; under `astra-sim` each fully-connected dimension's bandwidth
is divided by P−1 (ASTRA-sim 2.x reads it per link), so that every model sees the same hardware. `summary.md` reports what the paper reports: per topology the
mean bandwidth utilisation of each schedule and its speed-up over the baseline (arithmetic and
geometric means over sizes), and overall the geometric-mean speed-ups and average utilisations.
Figures: utilisation against size per topology, the chunk-sensitivity curves, and a per-dimension
timeline of the baseline and Themis for one case, where the baseline's idle dimensions show. And
the end-to-end table (`end_to_end.csv`, and in `summary.md`): training iterations of ResNet-152,
GNMT, DLRM and Transformer-1T on the six topologies, speed-ups of Themis+SCF and of the ideal
(every collective at 100 % bandwidth) over the baseline (`dse.iteration`).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from .bounds import ideal_ns
from .costs import get_cost_model
from .errors import raise_if_interrupted
from .evaluate import evaluate
from .files import atomic_output, check_output_dir, make_dirs, write_atomic
from .iteration import end_to_end_markdown, end_to_end_rows
from .spec import CollectiveSpec
from .sweep import read_rows, run_sweep
from .sweepfile import parse_sweep
from .topology import PAPER_PRESETS, PRESETS, Topology

SCHEDULES = ("baseline+fifo", "themis+fifo", "themis+scf", "lp_guided+scf")
SIZES_GIB = tuple(Decimal("0.10") + Decimal("0.05") * i for i in range(19))
CHUNK_TOPOLOGIES = ("3D-SW_SW_SW_hetero", "4D-Ring_FC_Ring_SW")
CHUNKS = (4, 8, 16, 32, 64, 128, 256, 512)
PAPER = {"baseline_util": 0.5631, "themis_util": 0.9514, "speedup_geomean": 1.72}
GANTT_CASE = ("3D-SW_SW_SW_hetero", "0.25GiB", 16)


def topology_for(name: str, cost_model: str) -> Topology:
    """A paper preset as the experiment uses it, the same hardware in every model.

    Under `astra-sim-1`: the artifact's 1 ns link latency (the presets carry its links). Under
    `astra-sim`: each fully-connected dimension's bandwidth divided by P−1, because ASTRA-sim 2.x
    reads an FC bandwidth as per link (its P−1 direct messages each run at it).
    """
    t = PRESETS[name]
    if cost_model == "astra-sim-1":
        return t.with_latency(1)
    if cost_model == "astra-sim":
        dims = tuple(replace(d, bandwidth=d.bandwidth / (d.npus - 1)) if d.kind == "fc" else d for d in t.dims)
        return Topology(dims, name=f"{name}@FC-per-link")
    return t


def sweeps(cost_model: str, quick: bool = False) -> dict[str, dict[str, Any]]:
    """The two sweep tables (`quick`: two topologies, three sizes, three chunk counts)."""
    names = PAPER_PRESETS[:2] if quick else PAPER_PRESETS
    sizes = SIZES_GIB[::9] if quick else SIZES_GIB
    chunk_topos = CHUNK_TOPOLOGIES[:1] if quick else CHUNK_TOPOLOGIES
    chunks = (4, 64, 512) if quick else CHUNKS
    return {
        "single_allreduce": {
            "topology": [topology_for(n, cost_model).notation() for n in names],
            "size": [f"{s}GiB" for s in sizes],
            "chunks": 64,
            "schedules": list(SCHEDULES),
            "cost_model": cost_model,
            "bounds": True,
            "bounds_time_limit": 60.0,
            "bounds_node_limit": 100,
        },
        "chunks": {
            "topology": [topology_for(n, cost_model).notation() for n in chunk_topos],
            "size": "0.1GiB",
            "chunks": list(chunks),
            "schedules": list(SCHEDULES),
            "cost_model": cost_model,
            "bounds": True,
            "bounds_time_limit": 60.0,
            "bounds_node_limit": 100,
        },
    }


def run(out: str | Path, *, cost_model: str = "paper", jobs: int = 1, quick: bool = False) -> dict[str, Any]:
    """Run (or resume) both experiments into `out` and write the summary and the figures."""
    model = get_cost_model(cost_model).name
    out = check_output_dir(out, "out")
    make_dirs(out, "out")
    names = {topology_for(n, model).notation(): n for n in PAPER_PRESETS}
    counts = {}
    tables: dict[str, list[dict[str, Any]]] = {}
    for name, table in sweeps(model, quick).items():
        sweep = parse_sweep(table, source=f"reproduce:{name}")
        raw_path = out / f"{name}.raw.csv"
        counts[name] = run_sweep(sweep, raw_path, jobs=jobs)
        tables[name] = finish_rows(read_rows(raw_path), names, model)
        write_csv(out / f"{name}.csv", tables[name])
    summary = summarize(tables["single_allreduce"])
    raise_if_interrupted()
    e2e = end_to_end_rows(model, topologies=(PAPER_PRESETS[:2] if quick else PAPER_PRESETS))
    write_csv(out / "end_to_end.csv", e2e)
    write_atomic(
        out / "summary.md",
        summary_markdown(summary, tables["chunks"], model)
        + "\n## Training iterations (speed-up over baseline+FIFO)\n\n" + end_to_end_markdown(e2e) + "\n",
    )
    raise_if_interrupted()
    figures = [
        draw_utilization(utilization_data(tables["single_allreduce"]), out / "utilization.png"),
        draw_chunks(chunk_data(tables["chunks"]), out / "chunks.png"),
        draw_timeline(timeline_data(model), out / "timeline.png"),
    ]
    return {"out": str(out), "counts": counts, "summary": summary, "figures": [str(f) for f in figures]}


def finish_rows(rows: list[dict[str, str]], names: dict[str, str], model: str) -> list[dict[str, Any]]:
    """Sweep rows with the preset name, the schedule, the ideal, and numbers as numbers."""
    out = []
    ideal_cache: dict[tuple[str, int], float] = {}
    for r in rows:
        size = int(r["size_bytes"] if "size_bytes" in r else r["size"])
        key = (r["topology"], size)
        if key not in ideal_cache:
            spec = CollectiveSpec.parse(r["topology"], size=size, chunks=1, cost_model=model)
            ideal_cache[key] = ideal_ns(spec)
        time_ns = float(r["time_ns"])
        out.append({
            "topology": names.get(r["topology"], r["topology"]),
            "notation": r["topology"],
            "size_bytes": size,
            "chunks": int(r["chunks"]),
            "scheduler": r["scheduler"],
            "queue": r["queue"],
            "schedule": f"{r['scheduler']}+{r['queue']}",
            "cost_model": r["cost_model"],
            "time_ns": time_ns,
            "bw_utilization": float(r["bw_utilization"]),
            "ideal_ns": ideal_cache[key],
            "bound_ns": float(r["bound_ns"]),
            "gap": float(r["gap"]),
        })  # fmt: skip
    return out


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    import csv

    with atomic_output(path) as tmp, open(tmp, "w", newline="") as f:
        keys: list[str] = []
        for r in rows:
            keys += [k for k in r if k not in keys]
        w = csv.DictWriter(f, fieldnames=keys or ["topology"])
        w.writeheader()
        w.writerows(rows)


@dataclass(frozen=True)
class Summary:
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
        speed = [base[(r["topology"], r["size_bytes"])] / r["time_ns"] for r in rs if (r["topology"], r["size_bytes"]) in base]
        overall[sched] = {
            "bw_utilization": statistics.mean(r["bw_utilization"] for r in rs),
            "speedup_geomean": _geomean(speed),
            "gap_mean": statistics.mean(r["gap"] for r in rs),
        }
    return Summary(dict(per), overall)


def summary_markdown(s: Summary, chunk_rows: Sequence[dict[str, Any]], model: str) -> str:
    """The summary as Markdown tables, next to the paper's headline numbers."""
    scheds = [x for x in SCHEDULES if x in s.overall]
    lines = [f"# Themis reproduction, cost model `{model}`", ""]
    lines += ["## Overall (every topology and size)", "",
              "| schedule | mean BW utilisation | geo-mean speed-up over baseline | mean gap to bound |", "|---|---|---|---|"]  # fmt: skip
    for sc in scheds:
        o = s.overall[sc]
        lines.append(f"| {sc} | {100 * o['bw_utilization']:.2f} % | {o['speedup_geomean']:.3f}x | {100 * o['gap_mean']:.2f} % |")
    lines += ["", f"The paper: baseline {100 * PAPER['baseline_util']:.2f} %, Themis {100 * PAPER['themis_util']:.2f} % "
              f"utilisation, geometric-mean speed-up {PAPER['speedup_geomean']}x.", ""]  # fmt: skip
    lines += ["## Per topology (means over sizes)", "",
              "| topology | schedule | BW utilisation | speed-up (arith.) | speed-up (geo.) | gap to bound |", "|---|---|---|---|---|---|"]  # fmt: skip
    for topo in s.per_topology:
        for sc in scheds:
            f = s.per_topology[topo].get(sc)
            if f:
                lines.append(f"| {topo} | {sc} | {100 * f['bw_utilization']:.2f} % | {f['speedup_mean']:.3f}x | "
                             f"{f['speedup_geomean']:.3f}x | {100 * f['gap_mean']:.2f} % |")  # fmt: skip
    lines += ["", "## Chunk sensitivity (0.1 GiB)", "", "| topology | chunks | " + " | ".join(scheds) + " |",
              "|---|---|" + "---|" * len(scheds)]  # fmt: skip
    cell: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    for r in chunk_rows:
        cell[(r["topology"], r["chunks"])][r["schedule"]] = r["bw_utilization"]
    for (topo, ch), v in sorted(cell.items()):
        lines.append(f"| {topo} | {ch} | " + " | ".join(f"{100 * v[sc]:.1f} %" if sc in v else "" for sc in scheds) + " |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ figures: data, then drawing
def utilization_data(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """topology -> schedule -> [(size GiB, utilisation)], sorted by size."""
    data: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        data[r["topology"]][r["schedule"]].append((r["size_bytes"] / 2**30, r["bw_utilization"]))
    return {t: {s: sorted(v) for s, v in d.items()} for t, d in data.items()}


def chunk_data(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """topology -> schedule -> [(chunks, utilisation)]."""
    data: dict[str, dict[str, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        data[r["topology"]][r["schedule"]].append((r["chunks"], r["bw_utilization"]))
    return {t: {s: sorted(v) for s, v in d.items()} for t, d in data.items()}


def timeline_data(model: str) -> dict[str, Any]:
    """The per-dimension phases of baseline+FIFO and Themis+SCF on one case."""
    name, size, chunks = GANTT_CASE
    topo = topology_for(name, model)
    out = {"case": f"{name}, {size}, {chunks} chunks, {model}", "ndims": topo.ndims, "runs": {}}
    for sched, queue in (("baseline", "fifo"), ("themis", "scf")):
        r = evaluate(topo, size=size, chunks=chunks, scheduler=sched, queue=queue, cost_model=model, timeline=True)
        out["runs"][f"{sched}+{queue}"] = {
            "time_ns": r.time_ns,
            "bars": [(e.dim, e.start, e.busy, e.kind, e.chunk) for e in r.timeline or ()],
        }
    return out


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_utilization(data: dict[str, dict[str, list[tuple[float, float]]]], path: Path) -> Path:
    plt = _plt()
    topos = list(data)
    cols = 3
    rows = max(1, math.ceil(len(topos) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(13, 3.6 * rows), squeeze=False, sharey=True)
    for ax, topo in zip(axes.flat, topos):
        for sched, pts in data[topo].items():
            ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], marker="o", ms=3, label=sched)
        ax.set_title(topo)
        ax.set_xlabel("all-reduce size (GiB)")
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("BW utilisation (%)")
    for ax in list(axes.flat)[len(topos):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    with atomic_output(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return path


def draw_chunks(data: dict[str, dict[str, list[tuple[int, float]]]], path: Path) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(1, max(1, len(data)), figsize=(6 * max(1, len(data)), 4), squeeze=False)
    for ax, topo in zip(axes.flat, data):
        for sched, pts in data[topo].items():
            ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], marker="o", ms=3, label=sched)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{topo}, 0.1 GiB all-reduce")
        ax.set_xlabel("chunks")
        ax.set_ylabel("BW utilisation (%)")
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_output(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return path


def draw_timeline(data: dict[str, Any], path: Path) -> Path:
    plt = _plt()
    runs = data["runs"]
    fig, axes = plt.subplots(len(runs), 1, figsize=(12, 1.2 + 0.7 * data["ndims"] * len(runs)), sharex=True, squeeze=False)
    colors = {"RS": "tab:blue", "AG": "tab:orange", "AR": "tab:green", "A2A": "tab:purple"}
    for ax, (label, run) in zip(axes[:, 0], runs.items()):
        for dim, start, busy, kind, _chunk in run["bars"]:
            ax.broken_barh([(start / 1e3, busy / 1e3)], (dim - 0.4, 0.8), facecolors=colors.get(kind, "gray"), edgecolor="white", linewidth=0.3)
        ax.set_yticks(range(data["ndims"]))
        ax.set_yticklabels([f"dim {d}" for d in range(data["ndims"])])
        ax.invert_yaxis()
        ax.set_title(f"{label}: {run['time_ns'] / 1e3:.0f} us (blue: reduce-scatter, orange: all-gather, green: all-reduce)", fontsize=9)
    axes[-1, 0].set_xlabel(f"time (us) - {data['case']}")
    fig.tight_layout()
    with atomic_output(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return path
