#!/usr/bin/env python3
"""How much does Themis relax the provisioning problem? Random bandwidth splits of 4D-Ring_FC_Ring_SW.

Run: .venv/bin/python scripts/provisioning_relief.py [--splits 300] [--seed 1]
Draws random splits of 800 GB/s per NPU over the 4x8x4x8 Ring_FC_Ring_SW shape (each dimension at
least 25 GB/s, the paper's latencies), runs a 1 GB all-reduce with Themis+SCF and with the baseline,
and prints how many land within 5 % of the ideal time (100 % bandwidth) and the median ratio.
"""

from __future__ import annotations

import argparse
import random
import statistics

from dse import evaluate, lower_bounds
from dse.core.topology import Dim, Topology


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    ideal = lower_bounds("4D-Ring_FC_Ring_SW", size="1GB", pipeline=False, time_limit_s=0.1).ideal_ns
    ratios: dict[str, list[float]] = {"themis+scf": [], "baseline+fifo": []}
    for _ in range(args.splits):
        w = [rng.random() for _ in range(4)]
        bws = [25 + 700 * x / sum(w) for x in w]
        topo = Topology(
            tuple(
                Dim(k, p, b, lat)
                for k, p, b, lat in zip(("ring", "fc", "ring", "switch"), (4, 8, 4, 8), bws, (20, 700, 700, 1700))
            )
        )
        ratios["themis+scf"].append(evaluate(topo, size="1GB").time_ns / ideal)
        ratios["baseline+fifo"].append(evaluate(topo, size="1GB", scheduler="baseline", queue="fifo").time_ns / ideal)
    print(f"{args.splits} random splits of 800 GB/s (seed {args.seed}); ideal {ideal / 1e6:.4f} ms")
    for name, r in ratios.items():
        within = sum(x <= 1.05 for x in r) / len(r)
        print(f"{name:>14}: {100 * within:.0f} % within 5 % of ideal; median {statistics.median(r):.3f}x ideal")


if __name__ == "__main__":
    main()
