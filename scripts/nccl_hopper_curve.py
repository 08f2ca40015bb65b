"""Hopper's multi-node curve: the best of a grid on twelve public multi-node H100/H200 runs.

The sources, each weighing the same: the five outside runs (scripts/nccl_outside_runs.py) and the
seven Hopper machines the validation predicts from one node (its scale cases: a one-node
calibration's fabric carried onto the machine's defaults, exactly as `dse validate nccl` times
them). A source's score is the mean |log(predicted / measured)| of its rows (`dse.costs.nccl.fit.errors`:
NCCL's choice under the curve being tried, or the algorithm the log records), with that curve as the
default and everything else as shipped. Issue 319's pair is scored on its 16 B-64 KB rows with the
DGX H100 node's fabric carried over, as the scale cases are.

The validation's machines help choose a default here, so the validation must not see its own data
through it: for each of the seven this also prints the grid's best with that machine left out. When
every one of those is the shipped curve, each machine's numbers in `dse validate nccl` are what a
curve chosen without its data gives (leave-one-machine-out). tests/test_nccl_defaults.py runs the
same grid and checks both (about ten seconds).

    .venv/bin/python scripts/nccl_hopper_curve.py
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import NamedTuple

from dse.costs.nccl.bundled import bundled
from dse.costs.nccl.fit import errors, fit, transfer
from dse.costs.nccl.model import NcclParams, NcclSystem, default_params
from dse.costs.nccl.tables import MULTI_NODE_CURVE, MULTI_NODE_FLOORS, MultiNodeCurve
from dse.costs.nccl.validation import CASES, calibrated, split_runs

#: The outside Hopper runs (never held out or calibrated on by the validation).
OUTSIDE = ("keitaw_p5", "ncclt319_h100", "xxrjun_h100_10node", "coreweave_h200", "coreweave_h200_nvls0")
SMALL_ROWS = (16, 64 * 1024)  # issue 319's rows scored (bytes)
#: S_half 2^16-2^29 B, k 0.3-1.0 in 0.1, every floor of `MULTI_NODE_FLOORS` (1008 points).
GRID = tuple(
    MultiNodeCurve(2.0**e, k / 10, floor) for e in range(16, 30) for k in range(3, 11) for floor in MULTI_NODE_FLOORS
)


class Source(NamedTuple):
    """One run scored: its name, system, parameters before the curve is set, and its runs."""

    name: str
    system: NcclSystem
    params: NcclParams
    runs: list
    validation: bool  # a validation machine's scale case (left out in turn)


def sources() -> list[Source]:
    """The outside runs, then the validation's Hopper scale cases (held-out machine names)."""
    systems, measurements = bundled()
    one = measurements["dgxc_h100"]
    fabric = fit(systems[one.system], one.runs())
    out = []
    for name in OUTSIDE:
        m = measurements[name]
        system, runs = systems[m.system], m.runs()
        params = default_params(system)
        if name == "ncclt319_h100":
            params = transfer(fabric, params, "intra")
            runs = [dataclasses.replace(r, rows=[x for x in r.rows if SMALL_ROWS[0] <= x.size_bytes <= SMALL_ROWS[1]])
                    for r in runs]  # fmt: skip
        out.append(Source(name, system, params, runs, False))
    for split, calibrate, held in CASES:
        calib_m, held_m = measurements[calibrate], measurements[held]
        held_sys = systems[held_m.system]
        if split != "scale" or held_sys.generation != "hopper":
            continue
        calib_runs, held_runs = split_runs(split, calib_m, held_m)
        params = calibrated(split, systems[calib_m.system], held_sys, calib_runs)
        out.append(Source(held_m.system, held_sys, params, held_runs, True))
    return out


def score(source: Source, curve: MultiNodeCurve) -> float:
    """The source's mean |log(predicted / measured)| with `curve` as its multi-node curve."""
    q = dataclasses.replace(source.params, s_half_multi_bytes=curve.s_half_bytes, k_multi=curve.k,
                            e_min_multi=curve.floor)  # fmt: skip
    logs = [abs(math.log1p(e.error)) for e in errors(source.system, q, source.runs)]
    return sum(logs) / len(logs)


def scores(srcs: list[Source], grid: Iterable[MultiNodeCurve]) -> dict[MultiNodeCurve, dict[str, float]]:
    """Every grid point's score on every source, by source name."""
    return {curve: {s.name: score(s, curve) for s in srcs} for curve in grid}


def best(table: dict[MultiNodeCurve, dict[str, float]], leave_out: str | None = None) -> tuple[MultiNodeCurve, float]:
    """The grid point with the lowest mean score over the sources but `leave_out`, and that mean
    (ties: the first in grid order)."""

    def mean(curve: MultiNodeCurve) -> float:
        kept = [v for name, v in table[curve].items() if name != leave_out]
        return sum(kept) / len(kept)

    chosen = min(table, key=mean)
    return chosen, mean(chosen)


def _name(curve: MultiNodeCurve) -> str:
    return f"S_half {curve.s_half_bytes / 2**20:g} MiB, k {curve.k:g}, floor {curve.floor:g}"


def main() -> None:
    """Print the shipped curve's score per source, the grid's best, and each leave-one-out best."""
    srcs = sources()
    table = scores(srcs, GRID)
    shipped = MULTI_NODE_CURVE["hopper"]
    chosen, mean = best(table)
    print(f"Hopper's multi-node curve over {len(GRID)} grid points and {len(srcs)} runs "
          f"(mean |log(predicted / measured)|, each run weighing the same):")  # fmt: skip
    print(f"  grid's best: {_name(chosen)}, {100 * mean:.1f} %; shipped: {_name(shipped)}")
    print(f"  {'run':<22} {'shipped curve':>13}  best with the run left out")
    for s in srcs:
        line = f"  {s.name:<22} {100 * table[shipped][s.name]:11.1f} %"
        if s.validation:
            left, m = best(table, s.name)
            line += f"  {_name(left)}, {100 * m:.1f} %"
        print(line)


if __name__ == "__main__":
    main()
