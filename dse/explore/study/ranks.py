"""Workload studies of a per-rank trace: ASTRA-sim 2.x's files as they are, one trial one `iterate_ranks`.

A workload study (`dse.explore.study.workload`) whose ``[workload] file`` names a Chakra trace (the
``PREFIX`` of ``PREFIX.0.et``, ``PREFIX.1.et``, ..., or one ``.et`` file, which is then every rank's),
or which gives any of the per-rank keys below, runs every rank of that trace on each design
(`dse.training.chakra.ranks_run.iterate_ranks`)::

    [workload]
    file = "../workloads/stage/gpt_dp2_tp2_pp2/workload"          # the prefix, relative to the study
    comm_groups = "../workloads/stage/gpt_dp2_tp2_pp2/workload.json"  # ASTRA-sim's group file
    system = "../workloads/stage/R2_FC2_SW2_s4_ascending_FIFO_roofline_pp300_lm900.json"
    cost_model = "astra-sim"                                        # the default for a per-rank trace
    # remote_memory = "mem.json"; without a system file: chunks, peak_tflops and mem_gbps (roofline)

Paths are relative to the study file's folder. The choices made here:

- **A system file fixes the configuration.** ASTRA-sim's system file sets the scheduler, the queue
  and the chunks (`preferred-dataset-splits`), so a study with one measures that one
  configuration: each trial runs once, and every objective and constraint that is measured with a
  scheduler and queue must name the file's (``scheduler = "baseline"``, ``queue = "fifo"`` for
  ``ascending`` + ``FIFO``), so that its name (``iteration_time_ns_baseline_fifo``) says what was
  run; naming another (Themis+SCF, the default, included) is refused in one line before any
  storage opens. ``chunks``, ``peak_tflops`` and ``mem_gbps`` beside a system file are refused
  (the file sets them). The space's own chunks, schedulers and queues are not used.
- **Without a system file** each trial runs Themis+SCF and baseline+FIFO (as a layer workload's
  study does), with ``chunks`` (64 by default) and the roofline of ``peak_tflops`` (TFLOP/s) and
  ``mem_gbps`` (10^9 B/s) if the trace's compute nodes need one; any other scheduler and queue an
  objective names is run when asked.
- ``libra_iteration_time`` (LIBRA's model of a layer workload) and ``placement`` (a per-rank
  trace's nodes name their groups) are refused for a per-rank trace.
- **The definition** (`dse.explore.study.studies.StudySpec.definition`) holds a SHA-256 of the files'
  bytes (every rank file found beside the prefix, the group, system and remote-memory files), not
  their paths: a copy of the files elsewhere is the same study; an edited file is another.

A trial's record: the topology's notation and its exact bandwidths (``bandwidths_GBps``, GB/s per
NPU in the unit the cost model reads: 2^30 B under ``astra-sim``), per configuration run
``iteration_<scheduler>_<queue>_ns`` (`RanksResult.time_ns`, the latest rank's finish) and
``exposed_comm_<scheduler>_<queue>_ns`` (that rank's finish minus its compute), the ``chunks`` and
``cost_usd``. An `InputError` of the per-rank run names the study's field (``workload.system``,
``workload.comm_groups``, ...) where the command line's would name ``--system``.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.files import read_bytes
from dse.core.limits import check_work
from dse.core.topology import Topology
from dse.core.units import parse_int, parse_positive
from dse.costs import get_cost_model
from dse.explore.hwcost import HardwareCost
from dse.training.chakra.ranks_result import RanksResult
from dse.training.chakra.rankset import STEPS_PER_FILE
from dse.training.chakra.read import RANK_FILE, is_trace_path

#: the ``[workload]`` keys only a per-rank trace takes
RANK_KEYS = ("comm_groups", "system", "remote_memory", "peak_tflops", "mem_gbps")
_FILE_KEYS = ("comm_groups", "system", "remote_memory")
#: without a system file, the configurations each trial runs (as a layer workload's study)
DEFAULT_RUNS = (("themis", "scf"), ("baseline", "fifo"))
#: `iterate_ranks`'s option names in its errors -> the study's fields
_STUDY_FIELDS = {
    "--system": "workload.system",
    "--comm-groups": "workload.comm_groups",
    "--remote-memory": "workload.remote_memory",
    "--peak-tflops": "workload.peak_tflops",
    "--mem-bw": "workload.mem_gbps",
    "--chunks": "workload.chunks",
    "workload": "workload.file",
}


@dataclass(frozen=True)
class RankTrace:
    """A per-rank trace and the ASTRA-sim 2.x files it runs with (module docstring). The paths are
    absolute and not compared; `fixed` is the system file's (scheduler, queue, chunks), None
    without one; `digest` the SHA-256 of every file's bytes."""

    prefix: str = field(compare=False)
    comm_groups: str | None = field(compare=False)
    system: str | None = field(compare=False)
    remote_memory: str | None = field(compare=False)
    peak_tflops: float | None
    mem_gbps: float | None
    fixed: tuple[str, str, int] | None
    digest: str

    def runs(self) -> tuple[tuple[str, str], ...]:
        """The (scheduler, queue) pairs each trial measures: the system file's, else `DEFAULT_RUNS`."""
        return DEFAULT_RUNS if self.fixed is None else ((self.fixed[0], self.fixed[1]),)

    def iterate(self, topology: Topology, cost_model: str, scheduler: str, queue: str, chunks: int) -> RanksResult:
        """Every rank on `topology`; with a system file, the file's scheduler, queue and chunks
        (the arguments are then not used)."""
        from dse.training.chakra.ranks_run import iterate_ranks

        own = self.fixed is None
        try:
            return iterate_ranks(
                self.prefix,
                topology,
                system=self.system,
                comm_groups=self.comm_groups,
                remote_memory=self.remote_memory,
                cost_model=cost_model,
                scheduler=scheduler if own else None,
                queue=queue if own else None,
                chunks=chunks if own else None,
                peak_tflops=self.peak_tflops,
                mem_gbps=self.mem_gbps,
            )
        except InputError as e:
            raise in_study(e) from None


def wants_ranks(table: dict[str, Any], base: Path) -> bool:
    """Whether a ``[workload]`` table names a per-rank trace: a per-rank key, or a Chakra trace file."""
    return any(k in table for k in RANK_KEYS) or ("file" in table and is_trace_path(base / str(table["file"])))


def parse_rank_trace(table: dict[str, Any], base: Path) -> tuple[RankTrace, str, int]:
    """The per-rank trace of a ``[workload]`` table (keys already checked), its cost model's name
    and its chunks (the system file's, if any); files relative to the study's folder `base`."""
    if table.get("placement") is not None:
        raise InputError(
            "workload.placement", "given with a per-rank trace, whose nodes name their groups", "comm_groups"
        )
    if "file" not in table:
        raise InputError("workload.file", "missing", "the per-rank trace's PREFIX (of PREFIX.0.et ...)")
    prefix = base / str(table["file"])
    if not is_trace_path(prefix):
        raise InputError(
            "workload.file",
            f"{table['file']!r} names no Chakra trace ({prefix}.0.et not found)",
            "a per-rank trace's PREFIX (PREFIX.0.et, PREFIX.1.et, ...) or a .et file, relative to the study file",
        )
    paths = {k: os.path.abspath(base / str(table[k])) if k in table else None for k in _FILE_KEYS}
    fixed = None
    if paths["system"] is not None:
        from dse.core.astra_system import load_system

        for k in ("chunks", "peak_tflops", "mem_gbps"):
            if k in table:
                raise InputError(f"workload.{k}", "given with workload.system, whose file sets it", "one of them")
        cfg = load_system(paths["system"], "workload.system")
        fixed = (cfg.scheduler, cfg.queue, cfg.chunks)
    chunks = fixed[2] if fixed else parse_int(table.get("chunks", 64), "workload.chunks", minimum=1)
    peak, mem = (parse_positive(table[k], f"workload.{k}") if k in table else None for k in ("peak_tflops", "mem_gbps"))
    model = get_cost_model(table.get("cost_model", "astra-sim")).name
    digest = _digest(prefix, paths)
    trace = RankTrace(
        os.path.abspath(prefix), paths["comm_groups"], paths["system"], paths["remote_memory"], peak, mem, fixed, digest
    )
    return trace, model, chunks


def measure_ranks(
    trace: RankTrace, cost_model: str, chunks: int, topo: Topology, prices: HardwareCost
) -> dict[str, Any]:
    """Everything a trial records about one design (module docstring)."""
    record: dict[str, Any] = {
        "topology": topo.notation(),
        "bandwidths_GBps": [d.bandwidth for d in topo.dims],  # exact (the notation rounds them)
    }
    for s, q in trace.runs():
        res = trace.iterate(topo, cost_model, s, q, chunks)
        last = res.finish_ns_by_rank.index(res.time_ns)
        record[f"iteration_{s}_{q}_ns"] = res.time_ns
        record[f"exposed_comm_{s}_{q}_ns"] = res.exposed_ns_by_rank[last]
        record["chunks"] = res.chunks
    record["cost_usd"] = prices.dollars(topo)
    return record


def ranks_metric(
    trace: RankTrace,
    cost_model: str,
    chunks: int,
    topo: Topology,
    metric: str,
    how: tuple[str, str],
    record: dict[str, Any],
) -> float:
    """One objective or constraint value (measured with scheduler and queue `how`), from the record
    where it holds it; with a system file, `how` must be the file's (module docstring)."""
    if metric == "cost":
        return float(record["cost_usd"])
    if metric == "libra_iteration_time":
        raise InputError(
            "objectives.metric",
            "libra_iteration_time is LIBRA's model of a layer workload, not of a per-rank trace",
            "iteration_time, iteration_time x cost, cost",
        )
    s, q = how
    key = f"iteration_{s}_{q}_ns"
    if key in record:
        t = float(record[key])
    elif trace.fixed is not None:
        fs, fq, _ = trace.fixed
        raise InputError(
            "workload.system",
            f"an objective or constraint is measured with {s}+{q}, and the system file sets {fs}+{fq}",
            f'scheduler = "{fs}" and queue = "{fq}" in every objective and constraint',
        )
    else:
        t = trace.iterate(topo, cost_model, s, q, chunks).time_ns
    return t if metric == "iteration_time" else t * float(record["cost_usd"])


def in_study(e: InputError) -> InputError:
    """`e` with a command-line option's name (``--system``) replaced by the study's field, in its
    field and in what it allows."""
    allowed = e.allowed
    for option, name in _STUDY_FIELDS.items():
        if allowed and option.startswith("--"):
            allowed = allowed.replace(option, name)
    for option, name in _STUDY_FIELDS.items():
        if e.field == option or e.field.startswith((option + " ", option + ":")):
            return InputError(name + e.field[len(option) :], e.problem, allowed)
    return e if allowed == e.allowed else InputError(e.field, e.problem, allowed)


def _digest(prefix: Path, paths: dict[str, str | None]) -> str:
    """SHA-256 of the trace's rank files and the other files, each by its role (not its path)."""
    h = hashlib.sha256()
    files = _rank_files(prefix) + [(k, p) for k, p in paths.items() if p is not None]
    for role, path in files:
        data = read_bytes(path, f"workload.{role}" if role in _FILE_KEYS else "workload.file", _limit(role))
        h.update(f"{role}:{len(data)}:".encode())
        h.update(data)
    return h.hexdigest()


def _limit(role: str) -> str:
    return "text_bytes" if role in _FILE_KEYS else "trace_bytes"


def _rank_files(prefix: Path) -> list[tuple[str, str]]:
    """Every rank file of the trace `prefix` names, by rank: ``PREFIX.<r>.et`` (or ``.et.gz``) in
    the prefix's folder, or the one file it names."""
    s = str(prefix)
    m = RANK_FILE.match(os.path.basename(s))
    if os.path.lexists(s) and not m:
        return [("rank 0", s)]  # a lone .et file, every rank's
    if m:
        folder, stem, suffix = os.path.dirname(s), m.group("prefix"), ".et" + (m.group("gz") or "")
    else:
        folder, stem = os.path.split(s)
        suffix = ".et" if os.path.lexists(s + ".0.et") else ".et.gz"
    pattern = re.compile(re.escape(stem) + r"\.(0|[1-9][0-9]*)" + re.escape(suffix) + "$")
    found = []
    with os.scandir(folder or ".") as it:
        for entry in it:
            if hit := pattern.match(entry.name):
                found.append((int(hit.group(1)), os.path.join(folder, entry.name)))
    check_work(len(found) * STEPS_PER_FILE, f"reading {len(found):,} rank files")
    return [(f"rank {r}", p) for r, p in sorted(found)]
