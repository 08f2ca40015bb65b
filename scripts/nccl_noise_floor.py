"""How noisy are the public nccl-tests logs the `nccl` model is validated on?

For every "sizes" case of `dse validate nccl` (calibrated on every other row of one sweep, held out on
the rest), this predicts each held-out row without any model: log-log interpolation between the two
calibration rows beside it in the sweep (rows the fit skips, whose out-of-place and in-place times
differ by more than 1.5x, are neither predicted nor used as neighbours). A model of smooth curves cannot do much better than that on
rows whose measured time jumps by tens of percent between neighbouring sizes, so the figure says how
much of a case's error is the log's own noise. Prints, per case, the held-out rows and the model's geomean error, then the rows that have a
calibration row on each side and the interpolation's geomean error on them (the same `geomean_error`).

For every "file" case (calibrated on one published run, held out on another run of the same kind of
machine), it then takes the calibration run's own measured times as the prediction, at the sizes both
runs measured: how far apart two machines of one kind are, beside the model's error on the same rows.

    .venv/bin/python scripts/nccl_noise_floor.py
"""

from __future__ import annotations

import math

from dse.costs.nccl.bundled import bundled
from dse.costs.nccl.fit import columns_disagree, errors, geomean_error
from dse.costs.nccl.validation import CASES, calibrated, split_runs, validate_case


def interpolation_errors(name: str) -> list[float]:
    """Relative errors of the neighbour interpolation on the held-out (even-indexed from 1) rows."""
    _, measurements = bundled()
    errors = []
    for run in measurements[name].runs():
        rows = [
            (r.size_bytes, r.out_of_place.time_us, not columns_disagree(r))
            for r in run.rows
            if r.out_of_place and r.out_of_place.time_us
        ]
        for i in range(1, len(rows) - 1, 2):
            (s0, t0, ok0), (s, t, ok), (s1, t1, ok1) = rows[i - 1], rows[i], rows[i + 1]
            if not ok0 or not ok or not ok1:
                continue
            w = math.log(s / s0) / math.log(s1 / s0)
            predicted = math.exp((1 - w) * math.log(t0) + w * math.log(t1))
            errors.append(predicted / t - 1)
    return errors


def measured_times(runs: list) -> dict[int, float]:
    """Out-of-place time (ns) by size of `runs`' rows the fit keeps (the first run measuring a size)."""
    out: dict[int, float] = {}
    for run in runs:
        for r in run.rows:
            if r.out_of_place and r.out_of_place.time_us and not columns_disagree(r):
                out.setdefault(r.size_bytes, r.out_of_place.time_us * 1e3)
    return out


def copied_errors(calibrate: str, held_out: str) -> tuple[list[float], list[float]]:
    """A file case's calibrated model errors and the calibration run's own times' errors, on the
    held-out rows whose size the calibration run measured too."""
    systems, measurements = bundled()
    calib, held = measurements[calibrate], measurements[held_out]
    calib_runs, held_runs = split_runs("file", calib, held)
    params = calibrated("file", systems[calib.system], systems[held.system], calib_runs)
    theirs = measured_times(calib_runs)
    rows = [e for e in errors(systems[held.system], params, held_runs) if e.sample.size_bytes in theirs]
    return [e.error for e in rows], [theirs[e.sample.size_bytes] / e.sample.time_ns - 1 for e in rows]


def main() -> None:
    print(f"{'sizes case':16} {'rows':>4} {'model gm':>9} {'rows with 2 neighbours':>22} {'interpolation gm':>17}")
    for split, calibrate, held_out in CASES:
        if split != "sizes":
            continue
        case = validate_case(split, calibrate, held_out)
        interpolated = interpolation_errors(held_out)
        gm = 100 * geomean_error(interpolated)
        print(f"{held_out:16} {case.rows:>4} {100 * case.fit_gm:>8.1f}% {len(interpolated):>22} {gm:>16.1f}%")
    print()
    print(f"{'file case':30} {'shared rows':>11} {'model gm':>9} {'other run measured gm':>22}")
    for split, calibrate, held_out in CASES:
        if split != "file":
            continue
        model, copied = copied_errors(calibrate, held_out)
        if not model:
            print(f"{calibrate + ' -> ' + held_out:30} {0:>11} {'-':>9} {'no size in common':>22}")
            continue
        name = f"{calibrate} -> {held_out}"
        print(f"{name:30} {len(model):>11} {100 * geomean_error(model):>8.1f}% {100 * geomean_error(copied):>21.1f}%")


if __name__ == "__main__":
    main()
