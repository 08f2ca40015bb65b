#!/usr/bin/env python3
"""The README table: Themis+SCF and lp_guided+SCF against the bound on the paper topologies (1 GB AR).

Run: .venv/bin/python scripts/lp_guided_table.py  (prints a Markdown table)
"""

import dse
from dse.core.units import format_time

print("| topology | chunks | Themis+SCF | lp_guided+SCF | bound (status) | Themis gap | lp_guided gap |")
print("|---|---|---|---|---|---|---|")
for n in dse.PRESETS:
    for ch in (4, 16, 64):
        th = dse.evaluate(n, size="1GB", chunks=ch)
        lg = dse.evaluate(n, size="1GB", chunks=ch, scheduler="lp_guided")
        b = dse.lower_bounds(n, size="1GB", chunks=ch, node_limit=100, time_limit_s=60)
        st = "" if b.status == "optimal" else f" ({b.status})"
        print(
            f"| {n} | {ch} | {format_time(th.time_ns)} | {format_time(lg.time_ns)} | {format_time(b.bound_ns)}{st} | {100 * b.gap(th.time_ns):.2f} % | {100 * b.gap(lg.time_ns):.2f} % |"
        )
