"""Studies of a training workload: which network makes one training iteration fastest, or cheapest.

A study whose ``[workload]`` table names a ``file`` measures each design by simulating one training
iteration of that workload (`dse.training.iteration.iterate`) rather than one collective::

    [workload]
    file = "libra_gpt_3_4d"                  # a file (dse TOML, ASTRA-sim 1.0 text) or a bundled name
    placement = "gpt_3_4d.yml"               # optional: LIBRA's communicator file, a TOML file with
                                             # a [placement] table, or an inline table
    cost_model = "paper"
    chunks = 64                              # per collective (iterate's chunk rule)

Its metrics (`dse.explore.study.objectives.WORKLOAD_METRICS`): ``iteration_time`` (ns, with the
objective's scheduler and queue), ``cost`` ($, `dse.explore.hwcost`), ``iteration_time_x_cost`` and
``libra_iteration_time`` (LIBRA's own analytic model, `dse.explore.libra.model.libra_iteration_ns`).
Every trial records the topology (and its exact bandwidths), the Themis+SCF and baseline+FIFO
iteration times, Themis's exposed communication and the cost.

A ``file`` that names a per-rank Chakra trace (``PREFIX`` of ``PREFIX.0.et`` ...), with
``comm_groups``, ``system`` (an ASTRA-sim 2.x system file, which then sets the scheduler, queue and
chunks), ``remote_memory`` and ``cost_model`` (``astra-sim`` by default), runs every rank of it on
each design instead (`dse.explore.study.ranks`, which says what such a trial records): the
target's `workload` is then a `dse.explore.study.ranks.RankTrace`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.topology import Topology
from dse.core.units import parse_int
from dse.costs import get_cost_model, with_calibration
from dse.explore.hwcost import HardwareCost
from dse.explore.libra.model import libra_iteration_ns
from dse.explore.study.ranks import RANK_KEYS, RankTrace, measure_ranks, parse_rank_trace, ranks_metric, wants_ranks
from dse.explore.study.toml_fields import check_keys
from dse.training.chakra.ranks_result import RanksResult
from dse.training.iteration import IterationResult, iterate
from dse.training.placement_read import load_placement, with_placement
from dse.training.workload_load import load_workload
from dse.training.workloads import Workload

WORKLOAD_TABLE_KEYS = {"file", "placement", "cost_model", "calibration", "chunks", *RANK_KEYS}


@dataclass(frozen=True)
class WorkloadTarget:
    """What a workload study simulates on each design: a workload (with its placement) or a
    per-rank trace, a cost model and the chunks per collective (a system file's, for a trace with one)."""

    workload: Workload | RankTrace
    cost_model: str
    chunks: int = 64

    def iterate(self, topology: Topology, scheduler: str, queue: str) -> IterationResult | RanksResult:
        """One training iteration of the workload on `topology` (a per-rank trace with a system
        file: with the file's scheduler and queue)."""
        if isinstance(self.workload, RankTrace):
            return self.workload.iterate(topology, self.cost_model, scheduler, queue, self.chunks)
        return self.iterate_layers(topology, scheduler, queue)

    def iterate_layers(self, topology: Topology, scheduler: str, queue: str) -> IterationResult:
        """One iteration of a layer workload (not a per-rank trace) on `topology`."""
        assert isinstance(self.workload, Workload)
        return iterate(
            self.workload, topology, scheduler=scheduler, queue=queue, cost_model=self.cost_model, chunks=self.chunks
        )


def parse_workload_target(table: dict[str, Any], base: Path) -> WorkloadTarget:
    """The ``[workload]`` table of a workload study (files relative to the study file's folder `base`)."""
    check_keys(table, WORKLOAD_TABLE_KEYS, "workload")
    if wants_ranks(table, base):
        return WorkloadTarget(*parse_rank_trace(table, base))
    path = base / str(table["file"])  # a file beside the study, else a bundled workload's name
    wl = load_workload(str(path) if path.exists() else str(table["file"]))
    if not isinstance(wl, Workload):
        raise InputError("workload.file", f"{table['file']} is not a layer workload", "a dse TOML or text workload")
    if table.get("placement") is not None:
        raw = table["placement"]
        wl = with_placement(wl, load_placement(raw if isinstance(raw, dict) else base / str(raw), "workload.placement"))
    (name,) = with_calibration(
        [table.get("cost_model", "paper")], table.get("calibration"), base, "workload.calibration"
    )
    model = get_cost_model(name).label
    chunks = parse_int(table.get("chunks", 64), "workload.chunks", minimum=1)
    return WorkloadTarget(wl, model, chunks)


def measure_workload(target: WorkloadTarget, topo: Topology, prices: HardwareCost) -> dict[str, Any]:
    """Everything a workload study's trial records about one design (module docstring)."""
    if isinstance(target.workload, RankTrace):
        return measure_ranks(target.workload, target.cost_model, target.chunks, topo, prices)
    themis = target.iterate_layers(topo, "themis", "scf")
    # a closed-form model (nccl) gives one time whatever the schedule: measured once
    closed = get_cost_model(target.cost_model).closed_form
    base = themis if closed else target.iterate_layers(topo, "baseline", "fifo")
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
    if isinstance(target.workload, RankTrace):
        return ranks_metric(target.workload, target.cost_model, target.chunks, topo, metric, (scheduler, queue), record)
    if metric == "cost":
        return float(record["cost_usd"])
    if metric == "libra_iteration_time":  # LIBRA's analytic model (docs/model.md §13), computed when asked
        return libra_iteration_ns(target.workload, topo)
    if (scheduler, queue) == ("themis", "scf"):
        t = record["iteration_themis_ns"]
    elif (scheduler, queue) == ("baseline", "fifo"):
        t = record["iteration_baseline_ns"]
    else:
        t = target.iterate_layers(topo, scheduler, queue).time_ns
    return float(t if metric == "iteration_time" else t * record["cost_usd"])
