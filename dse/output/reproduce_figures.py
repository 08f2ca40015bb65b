"""Figures of `dse reproduce themis`: each figure's data in one function, its drawing in another."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dse.core.files import atomic_output
from dse.output.reproduce_experiments import GANTT_CASE, topology_for
from dse.sim.evaluate import evaluate


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


def timeline_data(model: str) -> list[Any]:
    """The per-dimension phases of baseline+FIFO and Themis+SCF on one case: one
    `dse.output.timeline_lanes.TimelinePlotData` each, the same as `dse evaluate --plot` draws."""
    from dse.core.units import format_size, format_time
    from dse.output.timeline_plot import result_timeline_data

    name, size, chunks = GANTT_CASE
    topo = topology_for(name, model)
    panels = []
    for sched, queue in (("baseline", "fifo"), ("themis", "scf")):
        r = evaluate(topo, size=size, chunks=chunks, scheduler=sched, queue=queue, cost_model=model, timeline=True)
        title = (
            f"{sched}+{queue}: {format_time(r.time_ns)} ({name}, {format_size(r.size_bytes, r.size_unit)} "
            f"all-reduce, {chunks} chunks, {model} model)"
        )
        panels.append(result_timeline_data(r, topo, title=title))
    return panels


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_utilization(data: dict[str, dict[str, list[tuple[float, float]]]], path: Path) -> Path:
    """`utilization_data` drawn to `path` (PNG): one panel per topology, utilisation against size per
    schedule."""
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
    for ax in list(axes.flat)[len(topos) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    with atomic_output(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return path


def draw_chunks(data: dict[str, dict[str, list[tuple[int, float]]]], path: Path) -> Path:
    """`chunk_data` drawn to `path` (PNG): one panel per topology, utilisation against chunks per
    schedule."""
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


def draw_timeline(data: list[Any], path: Path) -> Path:
    """`timeline_data` drawn by `dse.output.timeline_plot.draw_timelines`: its legend names exactly the
    colours drawn."""
    from dse.output.timeline_plot import draw_timelines

    return draw_timelines(data, path)
