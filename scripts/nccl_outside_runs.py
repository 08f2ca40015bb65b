"""How well do the `nccl` model's defaults predict the public runs outside its validation?

The defaults that are not NCCL's own (each generation's multi-node curve, Hopper's floor, EFA's
latency) come from runs the validation never holds out or calibrates on; tests/test_nccl_defaults.py
derives them. This prints each of those Hopper runs' mean |log(predicted / measured)| at the defaults,
with NCCL's choice as dse models it, and the mean over the runs, each weighing the same: the score
docs/model.md §15.4 compares model variants by. Issue 319's pair is scored on its 16 B-64 KB rows
with a one-node DGX H100 calibration's fabric carried over, as its floor was set
(tests/test_nccl_defaults.py); the other runs at NCCL's defaults alone.

    .venv/bin/python scripts/nccl_outside_runs.py
"""

from __future__ import annotations

import math

from dse.costs.nccl.bundled import bundled
from dse.costs.nccl.fit import fit, transfer
from dse.costs.nccl.model import default_params, predict

#: (measurement name, what the row says about it): the outside Hopper runs, in this order.
RUNS = (
    ("keitaw_p5", "2 x p5 H100, 32 x 100G EFA, NCCL 2.22.3"),
    ("ncclt319_h100", "2 x HGX H100, 8 x 400G IB, 16 B-64 KB"),
    ("xxrjun_h100_10node", "10 x 8 H100, NCCL 2.29.2"),
    ("coreweave_h200", "2 x 8 H200, 8 x 400G IB, NCCL 2.30.4, NVLS on"),
    ("coreweave_h200_nvls0", "the same pair, NVLS off"),
)
SMALL_ROWS = (16, 64 * 1024)  # issue 319's rows that set Hopper's floor (bytes)


def run_error(name: str) -> tuple[int, float]:
    """(rows, mean |log(predicted / measured)|) of one outside run's out-of-place times."""
    systems, measurements = bundled()
    m = measurements[name]
    system = systems[m.system]
    rows = [r for run in m.runs() for r in run.rows]
    params = default_params(system)
    if name == "ncclt319_h100":
        rows = [r for r in rows if SMALL_ROWS[0] <= r.size_bytes <= SMALL_ROWS[1]]
        one = measurements["dgxc_h100"]
        params = transfer(fit(systems[one.system], one.runs()), params, "intra")
    logs = []
    for r in rows:
        pick = predict(system, "all_reduce", r.size_bytes, params=default_params(system))
        p = predict(system, "all_reduce", r.size_bytes, params=params, algo=pick.algo, proto=pick.proto)
        logs.append(abs(math.log(p.time_ns / (r.out_of_place.time_us * 1000.0))))
    return len(logs), sum(logs) / len(logs)


def main() -> None:
    """Print one line per outside run and the mean over them."""
    print("Outside runs at the defaults (mean |log(predicted / measured)|, out-of-place times):")
    scores = []
    for name, what in RUNS:
        rows, err = run_error(name)
        scores.append(err)
        print(f"  {name:<21} {rows:3d} rows  {100 * err:5.1f} %  ({what})")
    print(f"mean over the {len(scores)} runs, each weighing the same: {100 * sum(scores) / len(scores):.1f} %")


if __name__ == "__main__":
    main()
