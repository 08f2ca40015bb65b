"""Held-out validation of the calibrated `nccl` model on the nccl-tests measurements dse ships.

Each case calibrates the model (`dse.costs.nccl.fit.fit`) on some measurements of a machine and
reports the time error on other rows it never saw (dse/data/nccl/systems.toml names the machines
and files). Splits:

- **sizes**: one sweep, calibrated on every other size (1st, 3rd, ...), held out on the rest;
- **file**: calibrated on one file, held out on another of the same machine kind;
- **scale**: calibrated on one node, held out on two nodes of the same kind: the fabric tier's
  quantities carry over (`transfer`: they are the node's); the network's are its kind's defaults
  (`default_params`: NCCL's efficiencies and NET hops, plus the `network` kind's latency per hop).

In file and scale cases the fitted tiers are carried onto the held-out system's default parameters.
The network tier carries only between networks on the same NCCL transport (`NET_TRANSPORT`: IB and
RoCE share IB verbs; EFA has its plugin); across network kinds its latency stays the held-out kind's.
Errors are relative time errors of the out-of-place column; gm is `geomean_error`. The table's gm
sums every case: a row held out in two cases counts twice. `validation_table` is deterministic and
needs only the repository; it checks that no case's calibration rows meet its held-out rows
(`ValueError` otherwise: a broken case list).

ASTRA-sim publishes its own validation on HGX-H100 (NCCL ring forced, 2/4/8 GPUs) only as plots and
geomean errors; `ASTRA_SIM_POINTS` are readings off those plots (approximate), and dse's figure for
each is the ring time on an HGX-H100 of that many GPUs with the DGX H100 file's fabric calibration.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dse.core.errors import InputError
from dse.core.files import read_text, read_toml
from dse.costs.nccl.bundled import BUNDLED_DIR, Measurement, bundled
from dse.costs.nccl.fit import RowError, errors, fit, geomean_error, transfer
from dse.costs.nccl.logs import NcclTestsRun
from dse.costs.nccl.model import NET_TRANSPORT, NcclParams, NcclSystem, default_params, predict

SPLITS = ("sizes", "file", "scale")

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
    ("sizes", "lambda_b200", "lambda_b200"),
    ("file", "a100_blog_g8", "a100_dkh"),
    ("file", "a100_blog_g8", "a100_oci"),
    ("scale", "a100_blog_g1", "crusoe_a100"),
    ("sizes", "crusoe_a100", "crusoe_a100"),
    ("sizes", "p4de_2node", "p4de_2node"),
    ("sizes", "v100_blog", "v100_blog"),
    ("file", "v100_blog", "v100_oci"),
    ("sizes", "xe9680_h100", "xe9680_h100"),
    ("scale", "dgxc_h100", "xe9680_h100"),
    ("sizes", "oci_oke_a100", "oci_oke_a100"),
    ("scale", "a100_blog_g1", "oci_oke_a100"),
    ("sizes", "vm4_h100", "vm4_h100"),
    ("scale", "dgxc_h100", "vm4_h100"),
    ("sizes", "ib4_h100", "ib4_h100"),
    ("scale", "dgxc_h100", "ib4_h100"),
    ("sizes", "ib8_h100", "ib8_h100"),
    ("scale", "dgxc_h100", "ib8_h100"),
    ("file", "ib4_h100", "ib8_h100"),
    ("sizes", "vpbench_h100_4node", "vpbench_h100_4node"),
    ("scale", "dgxc_h100", "vpbench_h100_4node"),
    ("file", "vm4_h100", "vpbench_h100_4node"),
)

#: ASTRA-sim's published geomean errors on HGX-H100 all-reduce by GPU count (astra-sim/astra-sim-docs
#: validation/hardware, gpu-validation-hgx-h100: 20.63 / 12.01 / 9.69 %).
ASTRA_SIM_GM = {2: 0.2063, 4: 0.1201, 8: 0.0969}
#: (gpus, size bytes, measured us, ASTRA-sim us) read off the same page's linear plots
#: (_static/images/validation/hardware/hgx_h100/{2,4,8}gpus.png, astra-sim-docs @4a4dcf4): about
#: +/-3 % at these sizes; smaller sizes cannot be read.
ASTRA_SIM_READINGS: tuple[tuple[int, int, float, float], ...] = (
    (2, 536870912, 1520.0, 1370.0),
    (2, 1073741824, 3000.0, 2700.0),
    (2, 2147483648, 5900.0, 5400.0),
    (4, 536870912, 2200.0, 2050.0),
    (4, 1073741824, 4400.0, 4050.0),
    (4, 2147483648, 8700.0, 8050.0),
    (8, 536870912, 2600.0, 2450.0),
    (8, 1073741824, 5100.0, 4750.0),
    (8, 2147483648, 10150.0, 9450.0),
)
#: The measurement whose fit gives the fabric tier for the ASTRA-sim comparison (a DGX H100 node).
ASTRA_SIM_CALIBRATION = "dgxc_h100"


@dataclass(frozen=True)
class HeldOutPoint:
    """One held-out measurement of a case: its line in the held-out file, its size (nccl-tests' size
    column, bytes), the measured out-of-place time and the calibrated model's time for it (us), the
    relative error (predicted - measured) / measured, and the algorithm and protocol the model timed
    (NCCL's choice as modelled, or what the run forced)."""

    line: int
    size_bytes: int
    measured_us: float
    predicted_us: float
    error: float
    algo: str
    proto: str


@dataclass(frozen=True)
class ValidationCase:
    """One held-out case: the machine (systems.toml key and label), the split, the measurement(s)
    calibrated on, the held-out file and its `# source:` line, the collective, the held-out rows and
    the geomean errors of default and calibrated parameters on them, the calibrated worst |error|
    (fractions: 0.113 = 11.3 %), and each held-out row as a `HeldOutPoint` (in the file's order)."""

    machine: str
    label: str
    split: str
    calibrated_on: str
    held_out: str
    source: str
    collective: str
    rows: int
    default_gm: float
    fit_gm: float
    fit_max: float
    points: tuple[HeldOutPoint, ...] = ()


@dataclass(frozen=True)
class AstraSimPoint:
    """One of ASTRA-sim's published HGX-H100 all-reduce points (ring): measured and ASTRA-sim times
    read off its plots (approximate) and dse's time for the same GPU count and size."""

    gpus: int
    size_bytes: int
    measured_us: float
    astra_sim_us: float
    dse_us: float


@dataclass(frozen=True)
class ValidationTable:
    """Every case, the ASTRA-sim comparison and its published geomean errors by GPU count, and the
    totals: held-out measurements (rows summed over cases), distinct machines, overall geomean error."""

    cases: tuple[ValidationCase, ...]
    astra_sim: tuple[AstraSimPoint, ...]
    astra_sim_gm: dict[int, float]
    measurements: int
    machines: int
    gm: float

    def summary_line(self) -> str:
        """`nccl: geometric-mean error X % over N held-out measurements from M machines`."""
        return (
            f"nccl: geometric-mean error {100 * self.gm:.1f} % over {self.measurements} held-out "
            f"measurements from {self.machines} machines"
        )


def split_runs(split: str, calib: Measurement, held: Measurement) -> tuple[list[NcclTestsRun], list[NcclTestsRun]]:
    """The runs a case calibrates on and the runs it holds out (sizes: odd and even rows of one
    sweep). An unknown split, or a sizes case over two measurements, is an `InputError`."""
    if split not in SPLITS:
        raise InputError("split", f"{split!r} is not a split", ", ".join(SPLITS))
    if split == "sizes":
        if calib.name != held.name:
            raise InputError("split", f"sizes over {calib.name!r} and {held.name!r}", "one measurement for both")
        runs = calib.runs()
        return _rows(runs, 0), _rows(runs, 1)
    if calib.name == held.name:
        raise InputError("split", f"{split} case calibrated on its own held-out file {held.name!r}", "two files")
    return calib.runs(), held.runs()


def _rows(runs: list[NcclTestsRun], first: int) -> list[NcclTestsRun]:
    return [dataclasses.replace(r, rows=r.rows[first::2]) for r in runs]


def row_keys(runs: Sequence[NcclTestsRun]) -> set[tuple[str, int]]:
    """(file, line) of every row of `runs`: what a case calibrates on or holds out."""
    return {(r.source, row.line) for r in runs for row in r.rows}


class Fits(dict[tuple[NcclSystem, tuple[NcclTestsRun, ...]], NcclParams]):
    """The fits a table has made, by (system, runs): several cases calibrate on the same runs (every
    scale case on one DGX H100 node), and a fit depends on nothing else, so each is made once."""


def fitted_params(system: NcclSystem, runs: list[NcclTestsRun], fits: Fits | None) -> NcclParams:
    """`fit(system, runs)`, taken from `fits` when made before (and kept there); None: always fitted."""
    if fits is None:
        return fit(system, runs)
    key = (system, tuple(runs))
    if key not in fits:
        fits[key] = fit(system, runs)
    return fits[key]


def calibrated(
    split: str, calib: NcclSystem, held: NcclSystem, runs: list[NcclTestsRun], *, fits: Fits | None = None
) -> NcclParams:
    """Parameters for `held` from a fit on `runs` of `calib`: every tier `calib` has (scale: the
    fabric only; the network only on the same NCCL transport) carried onto `held`'s defaults; the
    network latency stays `held`'s kind's when the network kinds differ. `fits`: see `fitted_params`."""
    fitted = fitted_params(calib, runs, fits)
    params = default_params(held)
    network = calib.nodes > 1 and NET_TRANSPORT[calib.network] == NET_TRANSPORT[held.network]
    tiers = ["intra"] if split == "scale" else ["intra"] * (calib.gpus_per_node > 1) + ["inter"] * network
    for tier in tiers:
        params = transfer(fitted, params, tier)
    if calib.network != held.network:
        params = dataclasses.replace(params, net_latency_ns=default_params(held).net_latency_ns)
    return params


def validate_case(
    split: str, calibrate: str, hold_out: str, *, folder: str | Path | None = None, fits: Fits | None = None
) -> ValidationCase:
    """One case of `folder`'s measurements (None: the bundled ones): calibrate on `calibrate`, report
    the errors on `hold_out` (module docstring). Unknown names or splits: `InputError`; a calibration
    row among the held-out rows: `ValueError`. `fits`: see `fitted_params`."""
    systems, measurements = bundled(folder)
    for field, name in (("calibrate", calibrate), ("hold_out", hold_out)):
        if name not in measurements:
            raise InputError(field, f"{name!r} is not a measurement", ", ".join(sorted(measurements)))
    calib_m, held_m = measurements[calibrate], measurements[hold_out]
    calib_runs, held_runs = split_runs(split, calib_m, held_m)
    if row_keys(calib_runs) & row_keys(held_runs):
        raise ValueError(f"case {split} {calibrate} -> {hold_out} calibrates on a held-out row")
    calib_sys, held_sys = systems[calib_m.system], systems[held_m.system]
    params = calibrated(split, calib_sys, held_sys, calib_runs, fits=fits)
    default = [e.error for e in errors(held_sys, None, held_runs)]
    points = tuple(_point(e) for e in errors(held_sys, params, held_runs))
    tuned = [p.error for p in points]
    labels = _labels(folder)
    return ValidationCase(
        machine=held_m.system,
        label=labels.get(held_m.system, held_m.system),
        split=split,
        calibrated_on=calibrate,
        held_out=held_m.path.name,
        source=_source_line(held_m.path),
        collective=held_m.collective,
        rows=len(tuned),
        default_gm=geomean_error(default),
        fit_gm=geomean_error(tuned),
        fit_max=max(abs(e) for e in tuned),
        points=points,
    )


def _point(e: RowError) -> HeldOutPoint:
    """A held-out row's error as the case reports it."""
    s = e.sample
    return HeldOutPoint(s.line, s.size_bytes, s.time_ns / 1000.0, e.predicted_ns / 1000.0, e.error, e.algo, e.proto)


def _labels(folder: str | Path | None) -> dict[str, str]:
    """Each system's `label` from systems.toml (already checked by `bundled`)."""
    root = BUNDLED_DIR if folder is None else Path(folder)
    data = read_toml(root / "systems.toml", "systems.toml")
    return {k: str(v.get("label", k)) for k, v in data["systems"].items()}


def _source_line(path: Path) -> str:
    """The text of a measurement file's first `# source:` line ("" when it has none)."""
    for line in read_text(path, "measurement").splitlines():
        if line.startswith("# source:"):
            return line[len("# source:") :].strip()
    return ""


def astra_sim_points(*, folder: str | Path | None = None, fits: Fits | None = None) -> tuple[AstraSimPoint, ...]:
    """dse next to ASTRA-sim's HGX-H100 readings: ring forced (as ASTRA-sim's runs forced NCCL's
    ring) on one HGX-H100 node of each GPU count, with the fabric tier fitted on the DGX H100 file
    (none when `folder` lacks that measurement). `fits`: see `fitted_params`."""
    systems, measurements = bundled(folder)
    if ASTRA_SIM_CALIBRATION not in measurements:
        return ()
    calib_m = measurements[ASTRA_SIM_CALIBRATION]
    calib_sys = systems[calib_m.system]
    fitted = fitted_params(calib_sys, calib_m.runs(), fits)
    out = []
    for gpus, size, measured, astra in ASTRA_SIM_READINGS:
        hgx = dataclasses.replace(calib_sys, gpus_per_node=gpus, nics_per_node=0, nic_GBps=0.0)
        params = transfer(fitted, default_params(hgx), "intra")
        t = predict(hgx, "all_reduce", size, params=params, algo="ring").time_ns / 1000.0
        out.append(AstraSimPoint(gpus, size, measured, astra, t))
    return tuple(out)


def validation_table(
    cases: Sequence[tuple[str, str, str]] = CASES, *, folder: str | Path | None = None
) -> ValidationTable:
    """Every case of `cases` (default `CASES`) on `folder`'s measurements (None: the bundled ones),
    the ASTRA-sim comparison, and the totals. No case: `InputError`."""
    if not cases:
        raise InputError("cases", "no case", "one or more (split, calibrate, hold_out) cases")
    done, fits = [], Fits()
    for case in cases:
        if not (isinstance(case, tuple) and len(case) == 3):
            raise InputError("cases", f"{case!r} is not a case", "(split, calibrate, hold_out)")
        done.append(validate_case(*case, folder=folder, fits=fits))
    # A case's gm weighted by its rows, in log space: the gm over all the cases' rows.
    total = sum(v.rows for v in done)
    log_sum = sum(v.rows * math.log1p(v.fit_gm) for v in done)
    return ValidationTable(
        cases=tuple(done),
        astra_sim=astra_sim_points(folder=folder, fits=fits),
        astra_sim_gm=dict(ASTRA_SIM_GM),
        measurements=total,
        machines=len({v.machine for v in done}),
        gm=math.expm1(log_sum / total),
    )
