#!/usr/bin/env python3
"""Print the held-out validation of the `nccl` model (`dse.costs.nccl.validation.validation_table`):
one markdown row per case, the ASTRA-sim HGX-H100 comparison, then the summary line.

Run: .venv/bin/python scripts/validate_nccl.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dse.costs.nccl.validation import ValidationTable, validation_table  # noqa: E402


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def render(table: ValidationTable) -> list[str]:
    """The table's lines: the cases, the ASTRA-sim points, the summary line last."""
    head = ("machine", "split", "calibrated on", "held out", "collective", "rows", "default gm", "fit gm", "fit max")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in table.cases:
        cells = (c.label, c.split, c.calibrated_on, c.held_out, c.collective, str(c.rows),
                 _pct(c.default_gm), _pct(c.fit_gm), _pct(c.fit_max))  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| ASTRA-sim HGX-H100 (ring) | size (B) | measured (us, plot) | ASTRA-sim (us, plot) | dse (us) |")
    lines.append("|---|---|---|---|---|")
    for p in table.astra_sim:
        lines.append(
            f"| {p.gpus} GPUs | {p.size_bytes} | {p.measured_us:.0f} | {p.astra_sim_us:.0f} | {p.dse_us:.0f} |"
        )
    gms = ", ".join(f"{g} GPUs {_pct(e)}" for g, e in sorted(table.astra_sim_gm.items()))
    lines.append(f"ASTRA-sim's published geomean errors: {gms}")
    lines.append("")
    lines.append(table.summary_line())
    return lines


def main() -> None:
    print("\n".join(render(validation_table())))


if __name__ == "__main__":
    main()
