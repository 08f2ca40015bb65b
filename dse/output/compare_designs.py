"""`dse compare-designs`: one training workload on several network designs, side by side.

`check_designs` validates everything before any run: the workload (and `--placement`), every design
(a preset name, a notation or a network file) and that the workload's groups fit it, the scheduler,
queue, cost model and chunk count, and the price table. `compare_designs` then runs
`dse.training.iteration.iterate` on each design, as `dse iterate` does, and returns a
`DesignComparison`: per design the iteration time, compute, exposed communication (time and share
of the iteration), BW utilisation while communicating, the hardware cost when priced
(`dse.explore.hwcost`, the `[cost]` table studies use) and the speed-up against the first design
(t_first / t). `comparison_table`, `comparison_json` and `draw_comparison` present it; every field
name carries its unit (`dse.core.quantities`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.quantities import axis_label
from dse.core.topology import Topology
from dse.explore.hwcost import PRICE_KEYS, HardwareCost


@dataclass(frozen=True)
class DesignRow:
    """One design's iteration: times in ns, shares in %, cost in $ (None: not priced)."""

    design: str
    topology: str
    npus: int
    iteration_time_ns: float
    compute_ns: float
    comm_ns: float
    exposed_comm_ns: float
    exposed_comm_pct: float
    bw_utilization_pct: float
    speedup: float
    cost_usd: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The row as a dict of its fields, without `cost_usd` when it is None."""
        d = dict(self.__dict__)
        if self.cost_usd is None:
            d.pop("cost_usd")
        return d


@dataclass(frozen=True)
class DesignComparison:
    """What ran (workload, placement, scheduler, queue, cost model, chunks) and one row per design."""

    workload: str
    placement: str | None
    scheduler: str
    queue: str
    cost_model: str
    chunks: int
    rows: tuple[DesignRow, ...]
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Checked:
    """The validated inputs of a comparison: nothing has run yet."""

    workload: Any
    designs: tuple[tuple[str, Topology], ...]
    prices: HardwareCost | None


def load_prices(path: str | Path) -> HardwareCost:
    """The prices of a TOML file: its ``[cost]`` table (a study file does), or a file of price keys only."""
    from dse.core.files import read_toml

    doc = read_toml(path, "--cost")
    if "cost" in doc and isinstance(doc["cost"], dict):
        return HardwareCost.from_table(doc["cost"], "cost")
    if doc and set(doc) <= set(PRICE_KEYS):
        return HardwareCost.from_table(doc, "cost")
    raise InputError(
        "--cost",
        f"{Path(path).name} has no [cost] table",
        f"a TOML file with a [cost] table of prices ({', '.join(PRICE_KEYS)}), as a study's",
    )


def check_designs(
    workload: str,
    designs: Sequence[str],
    *,
    placement: str | None = None,
    scheduler: str = "themis",
    queue: str = "scf",
    cost_model: str = "paper",
    chunks: int | str = 64,
    cost: str | None = None,
) -> Checked:
    """Every input checked (module docstring); the first bad one is one `InputError`."""
    from dse.core.topology import parse_topology
    from dse.core.units import parse_int
    from dse.costs import get_cost_model
    from dse.schedulers import get_scheduler, parse_queue
    from dse.training.iteration import check_fit
    from dse.training.workload_load import load_workload
    from dse.training.workloads import Workload

    prices = load_prices(cost) if cost is not None else None
    get_cost_model(cost_model)
    parse_queue(queue)
    if scheduler.strip().lower() != "ideal":
        get_scheduler(scheduler)
    parse_int(chunks, "--chunks", minimum=1)
    wl = load_workload(workload)
    if placement is not None:
        from dse.training.placement_read import load_placement, with_placement

        if not isinstance(wl, Workload):
            raise InputError(
                "--placement", "given with a Chakra trace, which names its dimensions itself", "a layer workload"
            )
        wl = with_placement(wl, load_placement(placement, "--placement"))
    seen: set[str] = set()
    checked = []
    for spec in designs:
        if spec in seen:
            raise InputError("design", f"{spec!r} given twice", "each design once")
        seen.add(spec)
        topo = parse_topology(spec)
        wl = check_fit(wl, topo)  # one NPU's workload whose groups (or placement) fit this design
        checked.append((spec, topo))
    return Checked(wl, tuple(checked), prices)


def compare_designs(
    checked: Checked,
    *,
    placement: str | None = None,
    scheduler: str = "themis",
    queue: str = "scf",
    cost_model: str = "paper",
    chunks: int | str = 64,
) -> DesignComparison:
    """Run the workload on every checked design (`dse.training.iteration.iterate`) and compare them."""
    from dse.core.units import parse_int
    from dse.training.iteration import iterate

    chunks = parse_int(chunks, "--chunks", minimum=1)
    results = [
        (
            spec,
            topo,
            iterate(checked.workload, topo, scheduler=scheduler, queue=queue, cost_model=cost_model, chunks=chunks),
        )
        for spec, topo in checked.designs
    ]
    first = results[0][2].time_ns
    rows = tuple(
        DesignRow(
            design=spec,
            topology=topo.notation(),
            npus=topo.npus,
            iteration_time_ns=res.time_ns,
            compute_ns=res.compute_ns,
            comm_ns=res.comm_ns,
            exposed_comm_ns=res.exposed_comm_ns,
            exposed_comm_pct=100.0 * res.exposed_comm_ns / res.time_ns if res.time_ns else 0.0,
            bw_utilization_pct=100.0 * res.bw_utilization,
            speedup=first / res.time_ns if res.time_ns else 0.0,
            cost_usd=checked.prices.dollars(topo) if checked.prices is not None else None,
        )
        for spec, topo, res in results
    )
    r0 = results[0][2]
    notes = tuple(dict.fromkeys(n for _, _, res in results for n in res.notes))
    return DesignComparison(r0.workload, placement, r0.scheduler, r0.queue, r0.cost_model, r0.chunks, rows, notes)


#: The table's columns after design and NPUs: a `DesignRow` field and its header (quantity and unit).
TABLE_HEADERS = {
    "iteration_time_ns": "iteration time (ms)",
    "exposed_comm_ns": "exposed comm. (ms)",
    "exposed_comm_pct": "exposed (%)",
    "bw_utilization_pct": "BW utilisation (%)",
    "cost_usd": "cost ($)",
    "speedup": "speed-up (x)",
}


def _fixed(v: float, decimals: int) -> str:
    return f"{v:,.{decimals}f}"


def comparison_table(cmp: DesignComparison) -> str:
    """The comparison as a text table, a title line above it and the BW utilisation note below."""
    from dse.output.report import footnote, format_table, model_family, schedule_cell, utilization_line

    priced = cmp.rows[0].cost_usd is not None
    headers = ["design", "NPUs", *(h for c, h in TABLE_HEADERS.items() if priced or c != "cost_usd")]
    body = []
    for r in cmp.rows:
        body.append(
            [
                r.design,
                r.npus,
                _fixed(r.iteration_time_ns / 1e6, 3),
                _fixed(r.exposed_comm_ns / 1e6, 3),
                _fixed(r.exposed_comm_pct, 1),
                _fixed(r.bw_utilization_pct, 1),
                *([_fixed(r.cost_usd or 0.0, 0)] if priced else []),
                f"{r.speedup:.3f}",
            ]
        )
    how = f"{cmp.scheduler} / {cmp.queue}, {cmp.cost_model} model, {cmp.chunks} chunks per collective"
    if model_family(cmp.cost_model) == "nccl":
        how = schedule_cell(cmp.scheduler, cmp.queue, cmp.cost_model)
    title = f"{cmp.workload} on {len(cmp.rows)} design(s): {how}" + (
        f", placement {cmp.placement}" if cmp.placement else ""
    )
    note = footnote(utilization_line(cmp.cost_model, iteration=True))
    what = (
        "Exposed comm.: iteration time - compute time, the time compute waits for the network; exposed (%): "
        "its share of the iteration time. Speed-up: the first design's iteration time / this one's."
    )
    return "\n".join(
        [title, "", format_table(headers, body, align="l" + "r" * (len(headers) - 1)), "", footnote(what), note]
    )


def comparison_json(cmp: DesignComparison) -> dict[str, Any]:
    """The comparison as one JSON-ready dict; each field's unit is its name's suffix (`_ns`, `_pct`, `_usd`)."""
    from dse.output.report import utilization_note

    return {
        "workload": cmp.workload,
        "placement": cmp.placement,
        "scheduler": cmp.scheduler,
        "queue": cmp.queue,
        "cost_model": cmp.cost_model,
        "chunks": cmp.chunks,
        "designs": [r.as_dict() for r in cmp.rows],
        "speedup_note": "speedup = t_first / t: the first design's iteration time over this one's",
        "bw_utilization_note": utilization_note(cmp.cost_model, iteration=True),
        "notes": list(cmp.notes),
    }


def comparison_plot_data(cmp: DesignComparison) -> dict[str, Any]:
    """What `draw_comparison` draws: per design (first on top) the compute-only and exposed-communication
    parts of the iteration (ms), the speed-up, the cost ($, when priced), and the axis labels."""
    return {
        "designs": [r.design for r in cmp.rows],
        "overlapped_ms": [(r.iteration_time_ns - r.exposed_comm_ns) / 1e6 for r in cmp.rows],
        "exposed_ms": [r.exposed_comm_ns / 1e6 for r in cmp.rows],
        "speedup": [r.speedup for r in cmp.rows],
        "cost_usd": [r.cost_usd for r in cmp.rows] if cmp.rows[0].cost_usd is not None else None,
        "time_label": axis_label("iteration_time_ns", "ms"),
        "cost_label": axis_label("cost_usd"),
        "title": f"{cmp.workload}: {cmp.scheduler} / {cmp.queue}, {cmp.cost_model} model",
    }


def draw_comparison(cmp: DesignComparison, out: str | Path) -> Path:
    """Draw `comparison_figure` to `out` (.png or .svg, by the extension)."""
    from dse.core.files import atomic_output
    from dse.output.plots import figure_path

    out, fmt = figure_path(out, "--plot")
    fig = comparison_figure(cmp)
    try:
        with atomic_output(out) as tmp:
            fig.savefig(tmp, format=fmt, dpi=120)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    return out


def comparison_figure(cmp: DesignComparison) -> Any:
    """Horizontal bars, one per design (the first on top): the iteration split into compute and
    exposed communication, labelled with its time and speed-up; beside them the cost, when priced.
    The matplotlib figure (Agg backend); the caller closes it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dse.output.plots import wrap_label

    d = comparison_plot_data(cmp)
    n = len(d["designs"])
    labels = [wrap_label(s) for s in d["designs"]]
    lines = sum(label.count("\n") + 1 for label in labels)
    height = max(2.4, 0.25 * max(lines, 2 * n) + 1.4)
    ncols = 2 if d["cost_usd"] is not None else 1
    width = 7.5 + 3.5 * (ncols - 1) + 0.065 * max(len(line) for label in labels for line in label.split("\n"))
    fig, axes = plt.subplots(
        1,
        ncols,
        figsize=(width, height),
        squeeze=False,
        sharey=True,
        layout="constrained",
        width_ratios=[2, 1.2][:ncols],
    )
    _time_panel(axes[0, 0], d, labels)
    fig.legend(loc="outside lower center", ncols=2, fontsize=8)
    if d["cost_usd"] is not None:
        _cost_panel(axes[0, 1], d)
    return fig


def _time_panel(ax: Any, d: dict[str, Any], labels: list[str]) -> None:
    """Stacked bars of compute and exposed communication (ms), each labelled with its total and speed-up."""
    from dse.output.plots import plain_number, plain_ticks

    pos = list(range(len(labels)))
    ax.barh(pos, d["overlapped_ms"], 0.6, label="compute (communication overlapped with it)", color="#4c72b0")
    bars = ax.barh(pos, d["exposed_ms"], 0.6, left=d["overlapped_ms"], label="exposed communication", color="#dd8452")
    totals = [a + b for a, b in zip(d["overlapped_ms"], d["exposed_ms"])]
    ax.bar_label(
        bars, labels=[f"{plain_number(t)} ms, {s:.3f}x" for t, s in zip(totals, d["speedup"])], fontsize=8, padding=3
    )
    ax.set_yticks(pos, labels, fontsize=8)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.margins(x=0.25)
    ax.set_xlabel(d["time_label"])
    ax.set_title(f"{d['title']} (speed-up against the first design)", fontsize=9)
    plain_ticks(ax, "x")
    ax.grid(True, axis="x", alpha=0.3)


def _cost_panel(ax: Any, d: dict[str, Any]) -> None:
    """Bars of each design's network cost ($), each labelled with its value."""
    from dse.output.plots import plain_number, plain_ticks

    bars = ax.barh(list(range(len(d["cost_usd"]))), d["cost_usd"], 0.6, color="#55a868")
    ax.bar_label(bars, labels=[f"${plain_number(c)}" for c in d["cost_usd"]], fontsize=8, padding=3)
    ax.margins(x=0.3)
    ax.set_xlabel(d["cost_label"])
    ax.set_title("network cost", fontsize=9)
    plain_ticks(ax, "x", wide_x=3)
    ax.grid(True, axis="x", alpha=0.3)
