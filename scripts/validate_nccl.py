#!/usr/bin/env python3
"""Held-out validation of the calibrated `nccl` model on the nccl-tests measurements dse ships.

Run: .venv/bin/python scripts/validate_nccl.py
Each case calibrates the model (`dse.costs.nccl.fit.fit`) on some measurements of a machine and
reports the time error on others it never saw (dse/data/nccl/systems.toml names the machines and files):

- **sizes**: one sweep, calibrated on every other size (1st, 3rd, ...), held out on the rest;
- **file**: calibrated on one file, held out on another of the same machine kind (the split
  /work/brief/nccl_data/README.md recommends);
- **scale**: calibrated on one node, held out on two nodes of the same kind: the fabric tier's
  quantities carry over (`transfer`: they are the node's); the network's are its kind's defaults
  (`default_params`: NCCL's efficiencies and NET hops, plus the `network` kind's latency per hop,
  `NET_LATENCY_NS`, taken from public runs outside this set).

In file and scale cases the fitted tiers are carried onto the held-out system's default parameters;
across network kinds (a file case from IB to EFA) the network's latency stays the held-out kind's.
Errors are relative time errors of the out-of-place column; "gm" is exp(mean(log(1 + |err|))) - 1
(`geomean_error`). The last line sums every case: a row held out in two cases counts twice.
Deterministic (no randomness, fixed solver starts); needs only the repository.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dse.costs.nccl.fit import bundled, errors, fit, geomean_error, transfer  # noqa: E402
from dse.costs.nccl.logs import NcclTestsRun  # noqa: E402
from dse.costs.nccl.model import NcclParams, NcclSystem, default_params  # noqa: E402

#: (split, calibrate on, hold out): measurement names of systems.toml.
CASES: tuple[tuple[str, str, str], ...] = (
    ("file", "dgxc_h100", "p5_1node"),
    ("sizes", "p5_1node", "p5_1node"),
    ("scale", "p5_1node", "p5_2node"),
    ("scale", "dgxc_h100", "nebius_h100"),
    ("sizes", "nebius_h100", "nebius_h100"),
    ("sizes", "p5_2node", "p5_2node"),
    ("file", "nebius_h100", "p5_2node"),
    ("file", "nebius_h100", "dell_h200"),
    ("file", "nebius_h100", "oci_h100"),
    ("sizes", "dell_h200", "dell_h200"),
    ("file", "a100_blog_g8", "a100_dkh"),
    ("file", "a100_blog_g8", "a100_oci"),
    ("scale", "a100_blog_g1", "crusoe_a100"),
    ("sizes", "crusoe_a100", "crusoe_a100"),
    ("sizes", "p4de_2node", "p4de_2node"),
    ("sizes", "v100_blog", "v100_blog"),
    ("file", "v100_blog", "v100_oci"),
)


def _every_other(runs: list[NcclTestsRun], first: int) -> list[NcclTestsRun]:
    return [dataclasses.replace(r, rows=r.rows[first::2]) for r in runs]


def calibrated(split: str, calib: NcclSystem, held: NcclSystem, runs: list[NcclTestsRun]) -> NcclParams:
    """Parameters for `held` from a fit on `runs` of `calib`: every tier `calib` has (scale: the
    fabric only) carried onto `held`'s defaults."""
    fitted = fit(calib, runs)
    params = default_params(held)
    tiers = ["intra"] if split == "scale" else ["intra"] * (calib.gpus_per_node > 1) + ["inter"] * (calib.nodes > 1)
    for tier in tiers:
        params = transfer(fitted, params, tier)
    if calib.network != held.network:  # the network's latency is its kind's: keep held's default
        params = dataclasses.replace(params, net_latency_ns=default_params(held).net_latency_ns)
    return params


def run_case(split: str, calib_name: str, held_name: str) -> tuple[str, str, str, list[float], list[float]]:
    """One case: (machine label, held-out file, collective, default errors, calibrated errors)."""
    systems, measurements = bundled()
    calib_m, held_m = measurements[calib_name], measurements[held_name]
    calib_sys, held_sys = systems[calib_m.system], systems[held_m.system]
    calib_runs, held_runs = calib_m.runs(), held_m.runs()
    if split == "sizes":
        calib_runs, held_runs = _every_other(calib_runs, 0), _every_other(held_runs, 1)
    params = calibrated(split, calib_sys, held_sys, calib_runs)
    default = [e.error for e in errors(held_sys, None, held_runs)]
    tuned = [e.error for e in errors(held_sys, params, held_runs)]
    return held_m.system, held_m.path.name, held_m.collective, default, tuned


def main() -> None:
    header = (
        "machine",
        "split",
        "calibrated on",
        "held out (source)",
        "collective",
        "rows",
        "default gm",
        "fit gm",
        "fit max",
    )
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    all_tuned: list[float] = []
    machines: set[str] = set()
    distinct: set[tuple[str, int]] = set()
    for split, calib_name, held_name in CASES:
        machine, source, collective, default, tuned = run_case(split, calib_name, held_name)
        all_tuned += tuned
        machines.add(machine)
        _, ms = bundled()
        for run in ms[held_name].runs():
            rows = run.rows[1::2] if split == "sizes" else run.rows
            distinct.update((source, r.line) for r in rows)
        worst = max(abs(e) for e in tuned)
        cells = (machine, split, calib_name, source, collective, str(len(tuned)),
                 f"{100 * geomean_error(default):.1f} %", f"{100 * geomean_error(tuned):.1f} %", f"{100 * worst:.1f} %")  # fmt: skip
        print("| " + " | ".join(cells) + " |")
    print(f"distinct held-out rows: {len(distinct)}")
    gm = 100 * geomean_error(all_tuned)
    print(
        f"nccl: geometric-mean error {gm:.1f} % over {len(all_tuned)} held-out measurements from {len(machines)} machines"
    )


if __name__ == "__main__":
    main()
