#!/usr/bin/env python3
"""LIBRA's exact optimum (docs/model.md §13) for GPT-3, MSFT-1T and Turing-NLG on LIBRA's 4D network,
under each LIBRA constraint set and both objectives: a Markdown table with the certified gap and
the wall time of each solve.

Run: .venv/bin/python scripts/libra_optima.py [LIBRA_DIR]   (default ../shared/workloads/libra)
"""

import sys
import time
from pathlib import Path

from dse.explore.libra.bw_constraints import LIBRA_CONSTRAINTS, BandwidthPolytope
from dse.explore.libra.files import read_libra_cost_model, read_libra_network
from dse.explore.libra.model import libra_optimum
from dse.training.libra_read import read_libra_workload

libra = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared/workloads/libra"
net = read_libra_network(libra / "network/4d_network.yml")
prices = read_libra_cost_model(libra / "cost_model/4d_cost_model.yml", net)
models = (
    ("GPT-3", "GPT_3", "GPT_3_4d"),
    ("MSFT-1T", "MSFT_1T", "MSFT_1T_4d"),
    ("Turing-NLG", "Turing_NLG", "Turing_NLG_4D"),
)
print(
    "| workload | constraints | objective | bw0 | bw1 | bw2 | bw3 | iteration (ms) | cost ($M) | objective value | certified gap | LPs | levels | time (s) |"
)
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for name, workload, communicator in models:
    wl = read_libra_workload(libra / f"workload/{workload}.txt", libra / f"communicator/{communicator}.yml")
    for set_name, constraints in LIBRA_CONSTRAINTS.items():
        polytope = BandwidthPolytope.parse(constraints, net.ndims)
        for objective in ("time", "time_x_cost"):
            t0 = time.perf_counter()
            r = libra_optimum(wl, net, polytope, objective=objective, prices=prices)
            dt = time.perf_counter() - t0
            bws = " | ".join(f"{b:.3f}" for b in r.bandwidths)
            cost = (r.cost_usd or 0.0) / 1e6
            print(
                f"| {name} | {set_name} | {objective} | {bws} | {r.predicted_ns / 1e6:.4f} | {cost:.4f} | {r.value:.7g} | {r.gap:.1e} | {r.lps} | {r.levels} | {dt:.3f} |"
            )
