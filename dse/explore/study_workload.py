"""Studies of a training workload: which network makes one training iteration fastest, or cheapest.

A study whose ``[workload]`` table names a ``file`` measures each design by simulating one training
iteration of that workload (`dse.training.iteration.iterate`) rather than one collective::

    [workload]
    file = "libra_gpt_3_4d"                  # a file (dse TOML, ASTRA-sim 1.0 text) or a bundled name
    placement = "gpt_3_4d.yml"               # optional: LIBRA's communicator file, a TOML file with
                                             # a [placement] table, or an inline table
    cost_model = "paper"
    chunks = 64                              # per collective (iterate's chunk rule)

Its metrics (`dse.explore.objectives.WORKLOAD_METRICS`): ``iteration_time`` (ns, with the
objective's scheduler and queue), ``cost`` ($, `dse.explore.hwcost`), ``iteration_time_x_cost`` and
``libra_iteration_time`` (LIBRA's own analytic model, `dse.explore.libra_model.libra_iteration_ns`).
Every trial records the topology (and its exact bandwidths), the Themis+SCF and baseline+FIFO
iteration times, Themis's exposed communication and the cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.topology import Topology
from dse.core.units import parse_int
from dse.costs import get_cost_model
from dse.explore.hwcost import HardwareCost
from dse.explore.libra_model import libra_iteration_ns
from dse.explore.toml_fields import check_keys
from dse.training.iteration import IterationResult, iterate
from dse.training.placement_read import load_placement, with_placement
from dse.training.workloads import Workload, load_workload

WORKLOAD_TABLE_KEYS = {"file", "placement", "cost_model", "chunks"}


@dataclass(frozen=True)
class WorkloadTarget:
    """What a workload study simulates on each design: a workload (with its placement), a cost
    model and the chunks per collective."""

    workload: Workload
    cost_model: str
    chunks: int = 64

    def run(self, topology: Topology, scheduler: str, queue: str) -> IterationResult:
        """One training iteration of the workload on `topology`."""
        return iterate(
            self.workload, topology, scheduler=scheduler, queue=queue, cost_model=self.cost_model, chunks=self.chunks
        )


def parse_workload_target(table: dict[str, Any], base: Path) -> WorkloadTarget:
    """The ``[workload]`` table of a workload study (files relative to the study file's folder `base`)."""
    check_keys(table, WORKLOAD_TABLE_KEYS, "workload")
    path = base / str(table["file"])  # a file beside the study, else a bundled workload's name
    wl = load_workload(str(path) if path.exists() else str(table["file"]))
    if not isinstance(wl, Workload):
        raise InputError("workload.file", f"{table['file']} is not a layer workload", "a dse TOML or text workload")
    if table.get("placement") is not None:
        raw = table["placement"]
        wl = with_placement(wl, load_placement(raw if isinstance(raw, dict) else base / str(raw), "workload.placement"))
    model = get_cost_model(table.get("cost_model", "paper")).name
    chunks = parse_int(table.get("chunks", 64), "workload.chunks", minimum=1)
    return WorkloadTarget(wl, model, chunks)


def measure_workload(target: WorkloadTarget, topo: Topology, prices: HardwareCost) -> dict[str, Any]:
    """Everything a workload study's trial records about one design (module docstring)."""
    themis = target.run(topo, "themis", "scf")
    base = target.run(topo, "baseline", "fifo")
    return {
        "topology": topo.notation(),
        "bandwidths_GBps": [d.bandwidth for d in topo.dims],  # exact (the notation rounds them)
        "iteration_themis_ns": themis.time_ns,
        "iteration_baseline_ns": base.time_ns,
        "exposed_comm_themis_ns": themis.exposed_comm_ns,
        "cost_usd": prices.dollars(topo),
    }


def workload_metric(
    target: WorkloadTarget, topo: Topology, metric: str, scheduler: str, queue: str, record: dict[str, Any]
) -> float:
    """One objective or constraint value of a workload study, reusing the trial's record."""
    if metric == "cost":
        return float(record["cost_usd"])
    if metric == "libra_iteration_time":  # LIBRA's analytic model (docs/model.md §13), computed when asked
        return libra_iteration_ns(target.workload, topo)
    if (scheduler, queue) == ("themis", "scf"):
        t = record["iteration_themis_ns"]
    elif (scheduler, queue) == ("baseline", "fifo"):
        t = record["iteration_baseline_ns"]
    else:
        t = target.run(topo, scheduler, queue).time_ns
    return float(t if metric == "iteration_time" else t * record["cost_usd"])
