"""Issue 20's targets: `optimal_schedule` on the six paper topologies, 1 GB all-reduce, `paper` model.

For each case: Themis+SCF, lp_guided+SCF, the optimum found, the proven lower bound, the gap, the
solver's deterministic work (the same on every run) and the wall time: min and median of
`--repeat` runs, each a new solve (run it pinned to one core: `taskset -c 1`).
At 64 chunks: lp_guided's gap to dse's bound (`lower_bounds`) and the solver's, within its budget.

    taskset -c 1 .venv/bin/python scripts/bench_optimal.py --chunks 4 16 --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import time

from dse.bounds.optimal import _SOLVED, optimal_schedule
from dse.core.presets import PAPER_PRESETS


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--topologies", nargs="+", default=list(PAPER_PRESETS))
    ap.add_argument("--work", type=float, default=20.0)
    ap.add_argument("--cost-model", default="paper")
    ap.add_argument("--repeat", type=int, default=1, help="solves per case (wall time: min and median)")
    a = ap.parse_args()
    print(
        "| topology | chunks | Themis+SCF | lp_guided+SCF | optimum | lower bound | gap | status | work "
        "| wall min / median |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for chunks in a.chunks:
        for topo in a.topologies:
            walls = []
            for _ in range(a.repeat):
                _SOLVED.clear()  # a new solve each time, not the remembered one
                t0 = time.perf_counter()
                r = optimal_schedule(topo, size="1GB", chunks=chunks, work=a.work, cost_model=a.cost_model)
                walls.append(time.perf_counter() - t0)
            ms = [r.seed_ns["themis"] / 1e6, r.seed_ns["lp_guided"] / 1e6, r.time_ns / 1e6, r.bound_ns / 1e6]
            print(
                f"| {topo} | {chunks} | {ms[0]:.4f} ms | {ms[1]:.4f} ms | {ms[2]:.4f} ms | {ms[3]:.4f} ms | "
                f"{100 * r.gap:.3f} % | {r.status} | {r.work:.2f} | {min(walls):.1f} / {statistics.median(walls):.1f} s |",
                flush=True,
            )


if __name__ == "__main__":
    main()
