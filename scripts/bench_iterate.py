#!/usr/bin/env python3
"""Benchmark: training iterations per second of `dse.iterate`, and the Themis artifact's 156 runs.

Run: .venv/bin/python scripts/bench_iterate.py [--workload W] [--topology T] [--scheduler S]
     [--queue Q] [--cost-model M] [--calls N] [--rounds R] [--artifact-runs] [--chakra [TRACE]]

Default: the bundled Transformer-1T workload (18 layers, activation recompute of 16 layers, 15
collectives a pass) on 4D-Ring_FC_Ring_SW, themis + scf, paper model; target 50 iterations/s or
more. Each round makes `--calls` `iterate` calls (topology parsing included, workload loaded once);
printed: iterations/s, min and median over the rounds (the machines are shared: at least 5 rounds).

`--artifact-runs` times all 156 end-to-end runs of the Themis artifact under `astra-sim-1` (six
bundled workload files x six paper presets at 1 ns x baseline / Themis FIFO / Themis SCF, one
pass; and 3 passes, baseline and Themis SCF, of the four Fig. 12 workloads) in this one process, per round; target under 5 s.

`--chakra [TRACE]` times a Chakra trace, by default the real PyTorch trace beside the repository
(``../shared/workloads/chakra/chakra-tests/pytorch_trace.0.et``: 3,664 nodes, 5 all-reduces):
reading it (`load_trace`) and running it (`iterate` on the loaded trace), per round; target under
0.3 s to run on one core.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from dse.core.presets import PAPER_PRESETS
from dse.training.chakra_read import load_trace
from dse.training.iteration import iterate
from dse.training.workloads import bundled_workloads, load_workload

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
    """Read and run one Chakra trace per round; min and median of each."""
    reads, runs = [], []
    res = tr = None
    for _ in range(a.rounds):
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
    a = ap.parse_args()
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
