#!/usr/bin/env python3
"""Benchmark: training iterations per second of `dse.iterate`, and the Themis artifact's 156 runs.

Run: .venv/bin/python scripts/bench_iterate.py [--workload W] [--topology T] [--scheduler S]
     [--queue Q] [--cost-model M] [--calls N] [--rounds R] [--artifact-runs] [--chakra [TRACE]]
     [--ranks [--stage-trace PREFIX [--stage-network NET.yml] [--stage-system SYS.json]
     [--stage-groups G.json]] [--pipeline-topology T]]

Default: the bundled Transformer-1T workload (18 layers, activation recompute of 16 layers, 15
collectives a pass) on 4D-Ring_FC_Ring_SW, themis + scf, paper model; target 50 iterations/s or
more. Each round makes `--calls` `iterate` calls (topology parsing included, workload loaded once);
printed: iterations/s, min and median over the rounds (the machines are shared: at least 5 rounds).

`--artifact-runs` times all 156 end-to-end runs of the Themis artifact under `astra-sim-1` (six
bundled workload files x six paper presets at 1 ns x baseline / Themis FIFO / Themis SCF, one
pass; and 3 passes, baseline and Themis SCF, of the four Fig. 12 workloads) in this one process, per round; target under 5 s.

`--chakra [TRACE]` times a Chakra trace, by default the real PyTorch trace beside the repository
(``../shared/workloads/chakra/chakra-tests/pytorch_trace.0.et``: 3,664 nodes, 5 all-reduces):
reading it (`load_trace`) and running it (`iterate` on the loaded trace), per round, each timed on
its own; target under 0.3 s to read and run on one core.

`--ranks` times per-rank traces, each as a whole `dse iterate ... --cost-model astra-sim` process
started afresh per round (interpreter start and imports included, as a user waits for it): wall
time, and the process's own peak resident memory (``VmHWM``, read as it exits: a child's
``ru_maxrss`` is no measure of it, since Linux carries the parent's peak across fork and exec).
- A 64-rank STAGE trace (`--stage-trace PREFIX`; it is not in the repository: without the option the
  bench prints the STAGE command line that makes one and skips it) on `--stage-network` and
  `--stage-system` (default: the ASTRA-sim 2.x files of ``../shared/workloads/stage-configs/`` for
  R4_FC4_SW4) with `--stage-groups` (default ``PREFIX.json``, STAGE's group file); target under 1 s.
- A 1,024-rank pipeline (8 stages x 128 data-parallel ranks, 8 microbatches, GPipe), written by
  `dse workload pipeline` into a temporary folder (removed after) for a 128x8 network, run on
  `--pipeline-topology`; target under 5 s and 2 GB.
Printed: the machine, then per trace the min and median wall time and peak memory over `--rounds`
runs (one untimed run first, with ``--json``, checks the run and gives the simulated time).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dse
from dse.core.presets import PAPER_PRESETS
from dse.training.chakra.read import load_trace
from dse.training.iteration import iterate
from dse.training.workload_load import bundled_workloads, load_workload

DEFAULT = "transformer_1t_fused_only_t"
ARTIFACT = (
    "Resnet50_DataParallel_fused",
    "gnmt_fp16_fused",
    "large_DLRM_fused",
    "medium_DLRM_fused",
    "transformer_1t_fused_only_t",
    "microAllReduce",
)
THREE_PASS = ("Resnet50_DataParallel_fused", "gnmt_fp16_fused", "large_DLRM_fused", "transformer_1t_fused_only_t")
SCHEDULERS = (("baseline", "fifo"), ("themis", "fifo"), ("themis", "scf"))


def artifact_runs() -> int:
    """All 156 runs once; returns how many ran."""
    n = 0
    workloads = {w: load_workload(w) for w in ARTIFACT}
    for w, wl in workloads.items():
        for topo in PAPER_PRESETS:
            for sched, queue in SCHEDULERS:
                for passes in (1, 3):
                    if passes == 3 and (queue == "fifo" and sched == "themis" or w not in THREE_PASS):
                        continue  # 3 passes: baseline and Themis SCF of the four Fig. 12 workloads
                    iterate(
                        wl,
                        f"{topo}@artifact",
                        scheduler=sched,
                        queue=queue,
                        cost_model="astra-sim-1",
                        iterations=passes,
                    )
                    n += 1
    return n


PYTORCH_TRACE = (
    Path(__file__).resolve().parents[2] / "shared" / "workloads" / "chakra" / "chakra-tests" / "pytorch_trace.0.et"
)


def chakra(a: argparse.Namespace) -> int:
    """Read and run one Chakra trace per round; min and median of each. A round holds nothing of the
    one before: its trace and result are freed before the clock starts."""
    reads, runs = [], []
    res = tr = None
    for _ in range(a.rounds):
        res = tr = None
        t0 = time.perf_counter()
        tr = load_trace(a.chakra)
        t1 = time.perf_counter()
        res = iterate(tr, a.topology, scheduler=a.scheduler, queue=a.queue, cost_model=a.cost_model)
        t2 = time.perf_counter()
        reads.append(t1 - t0)
        runs.append(t2 - t1)
    assert res is not None and tr is not None
    print(
        f"{tr.name} ({len(tr.graph.nodes) - 1:,} nodes, {len(res.collectives)} collectives) on {a.topology}, "
        f"{a.scheduler}+{a.queue}, {a.cost_model} model: read min {min(reads):.3f} s, median "
        f"{statistics.median(reads):.3f} s; run min {min(runs):.3f} s, median {statistics.median(runs):.3f} s "
        f"over {a.rounds} rounds; simulated {res.time_ns / 1e6:.3f} ms"
    )
    return 0


ROOT = Path(__file__).resolve().parents[1]
STAGE_CONFIGS = ROOT.parent / "shared" / "workloads" / "stage-configs"
STAGE_NETWORK = STAGE_CONFIGS / "network" / "R4_FC4_SW4.yml"
STAGE_SYSTEM = STAGE_CONFIGS / "system" / "R4_FC4_SW4_s4_ascending_FIFO_roofline_pp300_lm900.json"
#: how the 64-rank trace was made (STAGE 9ec6c02, github.com/astra-sim/stage, Python 3.11)
STAGE_HOWTO = (
    "git clone https://github.com/astra-sim/stage && cd stage && pip install -r requirements.txt && "
    "python main.py --output_dir OUT --output_name workload.%d.et --dp 4 --tp 4 --pp 4 --model_type gpt "
    "--num_stacks 8 --dmodel 1024 --dff 4096 --head 16 --kvhead 16 --seq 1024 --batch 16 --micro_batch 4 "
    "--dvocal 32000   (then: --stage-trace OUT/workload)"
)
PIPELINE = ["--stages", "8", "--dp", "128", "--microbatches", "8", "-t", "128x8"]
#: 128 NPUs on dimension 0 (a stage's data-parallel ranks: 400 GB/s, 500 ns), 8 on dimension 1 (the
#: stages: 50 GB/s, 2 us)
PIPELINE_TOPOLOGY = "SW_SW 128x8 400,50 500,2000"
#: `python -m dse ARGV...`, then this process's own peak resident memory (VmHWM, KB) into argv[1]
_MEASURED = (
    "import atexit, runpy, sys\n"
    "def _peak(path=sys.argv[1]):\n"
    "    with open('/proc/self/status') as f:\n"
    "        kb = [int(line.split()[1]) for line in f if line.startswith('VmHWM:')]\n"
    "    with open(path, 'w') as f:\n"
    "        f.write(str(kb[0] if kb else -1))\n"
    "atexit.register(_peak)\n"
    "sys.argv = ['dse'] + sys.argv[2:]\n"
    "runpy.run_module('dse', run_name='__main__', alter_sys=True)\n"
)


def machine() -> str:
    """The machine the figures come from: CPU model, cores, dse and Python versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return f"dse {dse.__version__}, Python {platform.python_version()}, {cpu} ({platform.machine()}, {os.cpu_count()} cores)"


def dse_process(argv: list[str], folder: Path) -> tuple[float, int, str]:
    """Run `dse ARGV` as a fresh process: (wall seconds, its peak resident KB (-1: unknown), stdout).
    A failing run stops the bench with its error."""
    peak = folder / "peak.kb"
    peak.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _MEASURED, str(peak), *argv], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"dse {' '.join(argv)}: exit {p.returncode}: {p.stderr.strip()[-500:]}")
    return wall, int(peak.read_text()) if peak.exists() else -1, p.stdout


def bench_process(label: str, argv: list[str], rounds: int, folder: Path, targets: str) -> None:
    """One untimed ``--json`` run (checks it, gives the simulated time), then `rounds` timed runs."""
    _, _, out = dse_process([*argv, "--json"], folder)
    res = json.loads(out)
    walls, peaks = [], []
    for _ in range(rounds):
        wall, kb, _ = dse_process(argv, folder)
        walls.append(wall)
        peaks.append(kb)
    mb = [k / 1024 for k in peaks]
    memory = (
        f"peak memory median {statistics.median(mb):.0f} MB, max {max(mb):.0f} MB"
        if min(peaks) >= 0
        else "peak memory unknown (no /proc/self/status)"
    )
    print(
        f"{label}: {res['npus']:,} ranks, {len(res['classes'])} classes of alike ranks, "
        f"{res['collectives']:,} collectives, {res['messages']:,} messages; simulated {res['time_ns'] / 1e6:.3f} ms"
    )
    print(
        f"  whole `dse iterate` process: wall min {min(walls):.3f} s, median {statistics.median(walls):.3f} s; "
        f"{memory} over {rounds} runs ({targets})"
    )


def ranks(a: argparse.Namespace) -> int:
    """The per-rank traces (module docstring): the 64-rank STAGE trace if given, the 1,024-rank pipeline."""
    print(machine())
    work = Path(tempfile.mkdtemp(prefix="dse-bench-ranks-"))
    try:
        if a.stage_trace is None:
            print(f"64-rank STAGE trace: skipped (no --stage-trace PREFIX). Make one with STAGE: {STAGE_HOWTO}")
        else:
            groups = a.stage_groups or f"{a.stage_trace}.json"
            argv = ["iterate", a.stage_trace, "--topology", a.stage_network, "--system", a.stage_system]
            argv += ["--comm-groups", groups] if Path(groups).is_file() else []
            argv += ["--cost-model", "astra-sim"]
            print(f"$ dse {shlex.join(argv)}")
            bench_process(f"STAGE trace {a.stage_trace}", argv, a.rounds, work, "target under 1 s")
        prefix = str(work / "pp")
        made, _, _ = dse_process(["workload", "pipeline", prefix, *PIPELINE, "--force"], work)
        print(f"$ dse workload pipeline {shlex.join([prefix, *PIPELINE])} --force   ({made:.2f} s, not timed below)")
        argv = ["iterate", prefix, "--topology", a.pipeline_topology, "--cost-model", "astra-sim"]
        print(f"$ dse {shlex.join(argv)}")
        bench_process(
            "1,024-rank pipeline (8 stages x 128 dp, 8 microbatches)", argv, a.rounds, work, "target under 5 s and 2 GB"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default=DEFAULT)
    ap.add_argument("--topology", default="4D-Ring_FC_Ring_SW")
    ap.add_argument("--scheduler", default="themis")
    ap.add_argument("--queue", default="scf")
    ap.add_argument("--cost-model", default="paper")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--artifact-runs", action="store_true")
    ap.add_argument("--chakra", nargs="?", const=str(PYTORCH_TRACE), default=None, metavar="TRACE")
    ap.add_argument("--ranks", action="store_true", help="per-rank traces as whole dse iterate processes")
    ap.add_argument("--stage-trace", default=None, metavar="PREFIX", help="a 64-rank STAGE trace (PREFIX.<r>.et)")
    ap.add_argument("--stage-network", default=str(STAGE_NETWORK), metavar="NET.yml")
    ap.add_argument("--stage-system", default=str(STAGE_SYSTEM), metavar="SYS.json")
    ap.add_argument("--stage-groups", default=None, metavar="G.json", help="default PREFIX.json when present")
    ap.add_argument("--pipeline-topology", default=PIPELINE_TOPOLOGY, metavar="NET.yml|notation")
    a = ap.parse_args()
    if a.ranks:
        return ranks(a)
    if a.chakra is not None:
        return chakra(a)
    assert set(ARTIFACT) <= set(bundled_workloads())
    if a.artifact_runs:
        secs = []
        for _ in range(a.rounds):
            t0 = time.perf_counter()
            n = artifact_runs()
            secs.append(time.perf_counter() - t0)
        print(
            f"{n} ASTRA-sim 1.0 artifact runs (astra-sim-1) in one process: min {min(secs):.2f} s, "
            f"median {statistics.median(secs):.2f} s over {a.rounds} rounds"
        )
        return 0
    wl = load_workload(a.workload)
    rates = []
    res = None
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        for _ in range(a.calls):
            res = iterate(wl, a.topology, scheduler=a.scheduler, queue=a.queue, cost_model=a.cost_model)
        rates.append(a.calls / (time.perf_counter() - t0))
    assert res is not None
    chunks = sum(c.chunks for c in res.collectives)
    print(
        f"{wl.name} on {a.topology}, {a.scheduler}+{a.queue}, {a.cost_model} model: iterations/s min "
        f"{min(rates):.1f}, median {statistics.median(rates):.1f} over {a.rounds} rounds of {a.calls} "
        f"({len(res.collectives)} collectives, {chunks} chunks); simulated iteration {res.time_ns / 1e6:.3f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
