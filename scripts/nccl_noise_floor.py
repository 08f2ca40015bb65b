"""How noisy are the public nccl-tests logs the `nccl` model is validated on?

For every "sizes" case of `dse validate nccl` (calibrated on every other row of one sweep, held out on
the rest), this predicts each held-out row without any model: log-log interpolation between the two
calibration rows beside it in the sweep (rows the fit skips, whose out-of-place and in-place times
differ by more than 1.5x, are neither predicted nor used as neighbours). A model of smooth curves cannot do much better than that on
rows whose measured time jumps by tens of percent between neighbouring sizes, so the figure says how
much of a case's error is the log's own noise. Prints, per case, the held-out rows and the model's geomean error, then the rows that have a
calibration row on each side and the interpolation's geomean error on them (the same `geomean_error`).

    .venv/bin/python scripts/nccl_noise_floor.py
"""

from __future__ import annotations

import math

from dse.costs.nccl.fit import bundled, columns_disagree, geomean_error
from dse.costs.nccl.validation import CASES, validate_case


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


def main() -> None:
    print(f"{'sizes case':16} {'rows':>4} {'model gm':>9} {'rows with 2 neighbours':>22} {'interpolation gm':>17}")
    for split, calibrate, held_out in CASES:
        if split != "sizes":
            continue
        case = validate_case(split, calibrate, held_out)
        interpolated = interpolation_errors(held_out)
        gm = 100 * geomean_error(interpolated)
        print(f"{held_out:16} {case.rows:>4} {100 * case.fit_gm:>8.1f}% {len(interpolated):>22} {gm:>16.1f}%")


if __name__ == "__main__":
    main()
