"""Sweeps over training iterations: a ``[sweep]`` that names ``workload`` runs one training pass
(`dse.training.iteration.iterate`) per point instead of one collective.

```toml
[sweep]
topology = ["Ring_FC_Ring_SW 4x8x4x32 375,175,150,100 20,700,700,1700", "..."]
workload = ["libra_gpt_3_4d", "transformer:layers=8", "my_model.toml"]   # any form dse iterate takes
placement = "my_groups.yml"                      # optional, only with workload: a file or a list
schedules = ["baseline+fifo", "themis+scf"]      # scheduler may also be "ideal" (100 % bandwidth)
chunks = 64
cost_model = "paper"
```

Parameters, in expansion order (the last varies fastest): ``topology`` (then its bandwidth and
latency axes, `dse.explore.sweep.axes`), ``workload``, ``placement``, ``chunks``, ``scheduler``
and ``queue`` (or ``schedules``), ``cost_model``; each a value or a list. A workload is a bundled
name (``dse workload list``, LIBRA's ``libra_*`` included), a generator spec or a file; a relative
file (a workload, a Chakra trace prefix, a placement) is read from the sweep file's folder, and the
CSV names it by its path from the working folder. A placement (``dse iterate --placement``:
LIBRA's communicator file or a TOML ``[placement]`` table) replaces the workload's model-parallel
group. Keys that belong to one collective (`COLLECTIVE_ONLY`) are refused in one line.

Before any point runs, every workload and placement is read and every (workload, placement) is
fitted on every topology of the sweep as `iterate` fits it (its placement's groups, or its
model-parallel group), so a bad file or a shape that does not fit costs one line and no output.

A row's results (`RESULT_COLUMNS`), per training pass: ``iteration_time_ns``; ``compute_ns``;
``comm_ns`` (time at least one collective is on the network); ``exposed_comm_ns`` (iteration time
- GPU compute) and ``exposed_comm_pct`` (that, in % of the iteration time); ``bw_utilization_pct``
(bytes one NPU sends / (comm_ns x the sum of the dims' bandwidths), in %: the utilisation while
communicating that ``dse iterate`` prints).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.topology import Topology

#: the parameters of an iteration sweep, in expansion order
ITERATION_PARAMS: tuple[str, ...] = ("topology", "workload", "placement", "chunks", "scheduler", "queue", "cost_model")
#: keys of a collective sweep that do not apply to a training iteration
COLLECTIVE_ONLY: tuple[str, ...] = (
    "collective",
    "size",
    "latency_mode",
    "active_chunks",
    "seed",
    "bounds",
    "bounds_time_limit",
    "bounds_node_limit",
)
RESULT_COLUMNS: tuple[str, ...] = (
    "iteration_time_ns",
    "compute_ns",
    "comm_ns",
    "exposed_comm_ns",
    "exposed_comm_pct",
    "bw_utilization_pct",
)
_FILE_SUFFIXES = (".toml", ".txt", ".et", ".gz", ".yml", ".yaml", ".json")


@dataclass(frozen=True)
class IterationPoint:
    """What one point of an iteration sweep runs: `topology` as the worker parses it (the design
    as the file names it, or the exact notation of its substituted copy), the workload and the
    placement as resolved (``""``: none), and how it runs."""

    topology: str
    workload: str
    placement: str
    chunks: int
    scheduler: str
    queue: str
    cost_model: str

    def values(self) -> tuple:
        """The parameters' values, in `ITERATION_PARAMS` order."""
        return (self.topology, self.workload, self.placement, self.chunks, self.scheduler, self.queue, self.cost_model)


def check_keys(table: dict[str, Any]) -> None:
    """A collective's key in an iteration sweep, or ``placement`` without ``workload``: one line."""
    if "workload" not in table:
        if "placement" in table:
            raise InputError("sweep.placement", "given without workload", "placement with workload only")
        return
    for key in COLLECTIVE_ONLY:
        if key in table:
            raise InputError(
                f"sweep.{key}",
                "does not apply to a training iteration (the sweep names a workload)",
                ", ".join(k for k in ITERATION_PARAMS if k != "topology")
                + ", schedules, bandwidth, latency, bwK, latK",
            )


def beside(spec: str, base: Path | None, always: bool = False) -> str:
    """A relative file, read from `base` (the sweep file's folder): its path from the working
    folder. A workload that names no file there and does not look like a path (a bundled name, a
    generator spec) stays as it is; a placement (`always`) is always a file."""
    if base is None or Path(spec).is_absolute():
        return spec
    here = base / spec
    looks_like_file = os.sep in spec or "/" in spec or Path(spec).suffix.lower() in _FILE_SUFFIXES
    if always or looks_like_file or here.exists() or os.path.lexists(f"{here}.0.et"):
        return os.path.relpath(here)
    return spec


@lru_cache(maxsize=32)
def workload_of(spec: str, placement: str) -> Any:
    """The workload `spec` names, with `placement` applied (``""``: none); cached, so the sweep's
    checks read each file once and forked workers inherit what the checks read."""
    from dse.training.workload_load import load_workload
    from dse.training.workloads import Workload

    wl = load_workload(spec)
    if not placement:
        return wl
    from dse.training.placement_read import load_placement, with_placement

    if not isinstance(wl, Workload):
        raise InputError(
            "sweep.placement",
            f"given with {spec!r}, a Chakra trace, which names its dimensions itself",
            "a layer workload",
        )
    return with_placement(wl, load_placement(placement, "sweep.placement"))


def check_fits(workloads: Sequence[str], placements: Sequence[str], designs: dict[str, Topology]) -> None:
    """Read every workload and placement, and fit each pair on every design as `iterate` does
    (the substituted bandwidths and latencies do not change a design's shape)."""
    from dse.training.iteration import check_fit

    workload_of.cache_clear()  # files read now, not by an earlier sweep of this process
    for spec, placement in itertools.product(workloads, placements):
        what = f"workload {spec!r}" + (f" with placement {placement!r}" if placement else "")
        try:
            wl = workload_of(spec, placement)
        except InputError as e:
            raise InputError("sweep", f"{what}: {e}") from None
        for name, topo in designs.items():
            try:
                check_fit(wl, topo)
            except InputError as e:
                raise InputError("sweep", f"{what} on topology {name!r}: {e}") from None


def iteration_points(
    variants: Sequence[tuple[str, str, tuple]], lists: dict[str, list], pairs: Sequence[tuple[str, str]]
) -> Iterator[tuple[IterationPoint, tuple]]:
    """Each point and its CSV parameter cells: the variants (design, what runs, (notation, *axis
    cells)) times the workloads, placements, chunks, scheduler+queue pairs and cost models."""
    rest = list(itertools.product(lists["workload"], lists["placement"], lists["chunks"], pairs, lists["cost_model"]))
    for design, spec, (notation, *cells) in variants:
        for wl, placement, chunks, (s, q), model in rest:
            yield (
                IterationPoint(spec, wl, placement, chunks, s, q, model),
                (design, notation, wl, placement, chunks, s, q, model, *cells),
            )


def iterate_point(p: IterationPoint, topo: Topology) -> list[float]:
    """`RESULT_COLUMNS` of one point (module docstring), unrounded."""
    from dse.training.iteration import iterate

    r = iterate(
        workload_of(p.workload, p.placement),
        topo,
        scheduler=p.scheduler,
        queue=p.queue,
        cost_model=p.cost_model,
        chunks=p.chunks,
    )
    exposed_pct = 100.0 * r.exposed_comm_ns / r.time_ns if r.time_ns else 0.0
    return [r.time_ns, r.compute_ns, r.comm_ns, r.exposed_comm_ns, exposed_pct, 100.0 * r.bw_utilization]
