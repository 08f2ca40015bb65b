"""Calibrating the `nccl` model (`dse.costs.nccl.model`) on nccl-tests measurements, and its errors.

`fit` adjusts a few `NcclParams` so that `predict` matches the out-of-place times of nccl-tests runs
(`dse.costs.nccl.logs`) on one system, minimising soft-L1 residuals of log(time) (`robust`: each row
weighs the same, and about by |error| as the error measure does, so one glitch cannot pull the fit),
each row predicted with its run's GPUs per thread (``-g``, `Sample.gpus_per_thread`). Per tier ("intra":
the node's GPU fabric; "inter": the network): a **hop-latency scale** on every per-hop latency of the
tier (ring and tree hops of all protocols, NVLS's hops; the bases stay NCCL's); across nodes the
network's **own latency per hop** (`net_latency_ns`, from the `network` kind's default); the
**efficiencies** e_* of the algorithms the starting parameters choose for the rows; the **efficiency
curve** (s_half, k): e(S) = e_max·S^k/(S^k + s_half^k); and across nodes, when tree or NVLSTree run,
the multi-node curve (`s_half_multi_bytes`, `k_multi`) from its default, and its floor (`e_min_multi`).

A parameter is fitted only when the rows can tell it: its tier exists, its algorithm ran, and moving
it moves some row's time beyond what the ones before it do (`identifiable`); the others keep their
starting values. The solver (`dse.costs.nccl.solver`) is a small bounded Levenberg-Marquardt in numpy,
started from the given parameters with s_half at 256 KiB and again at 16 MiB (k at 0.8), and with
rows across nodes each of those also with the floor fitted from each of `FLOOR_STARTS`, and all of
these again with the multi-node curve's s_half at 256 KiB and at 16 MiB (`curve_starts`, both in
dse.costs.nccl.fit_vector: the curve moves NCCL's choice, dse.costs.nccl.model, so from its default
alone rows that ring runs could never show that a tree runs them faster); each start runs plain least
squares and then the robust residuals, and the best fit wins (deterministic). A fit worse than the
start returns the start.

Rows are skipped, and counted (`row_skips` says why), when #wrong > 0, a warning names their
line, their run warns of a failure (timeout, NCCL/CUDA failure, a FAILED footer), their time is
missing, their size is 0, or their out-of-place and in-place times differ by more than
`DISAGREE_RATIO`: both columns time the same collective on the same size, so one of them was
disturbed and the row cannot be trusted; or NCCL's log records that it ran the row with an algorithm
or protocol the model does not have (PAT, CollNet). A row whose log records NCCL's pick
(`NcclTestsRun.logged_pick`) is timed with that pick; one the described machine cannot run is an
`InputError`.

`errors` gives each row's relative time error (predicted - measured) / measured; `geomean_error`
summarises them as exp(mean(log(1 + |err|))) - 1: a +20 % and a -20 % row count the same, and one
large outlier weighs less than in an arithmetic mean of |err|; 0 only when every row is exact.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from dse.core.errors import InputError
from dse.costs.nccl.env import NcclEnv, logged_env
from dse.costs.nccl.fit_vector import HOPS, candidates, curve_starts, params_of, starts, vector
from dse.costs.nccl.logs import NcclTestsRow, NcclTestsRun, implied_ranks
from dse.costs.nccl.model import COLLECTIVES, NcclParams, NcclSystem, default_params, predict, predict_time
from dse.costs.nccl.solver import Residuals, identifiable, levenberg_marquardt, robust

#: The prior: each fitted efficiency, hop-latency scale and network latency is pulled toward its
#: starting value by one extra residual (log(value / start) / PRIOR_SIGMA; the network latency's
#: change in units of PRIOR_NET_US): a weak pull next to the rows' own residuals, which keeps
#: quantities the rows barely tell near NCCL's values instead of wherever they trade off.
PRIOR_SIGMA = 4.0
PRIOR_NET_US = 20.0
#: A row whose out-of-place and in-place times differ by more than this factor is skipped. The two
#: agree within 1 % on half of the 516 rows dse ships and within 16 % on 95 %; 7 differ by more
#: than 1.5x (a 32 B all-reduce at 68 us out-of-place, 13.5 us in-place, beside 13-15 us rows).
DISAGREE_RATIO = 1.5
_FAILURE = re.compile(r"Test (?:timeout|NCCL failure|CUDA failure|failure)|error:|FAILED")
_LINE = re.compile(r"^line (\d+):")


class Sample(NamedTuple):
    """One usable measurement: a collective of `size_bytes` took `time_ns` (out-of-place), read from
    `source` at `line`, with `gpus_per_thread` GPUs per nccl-tests thread (``-g``; 1 when unknown)
    and what its run forced (NCCL_ALGO, NCCL_PROTO, NCCL_MAX_NCHANNELS; None: NCCL's choice)."""

    collective: str
    size_bytes: int
    time_ns: float
    source: str
    line: int
    gpus_per_thread: int = 1
    algo: str | None = None
    proto: str | None = None
    max_channels: int | None = None
    logged: bool = False  # algo and proto are NCCL's own pick, as its log recorded it

    def predicted_ns(self, system: NcclSystem, params: NcclParams | None) -> float:
        """The model's time for this measurement, as its run was made."""
        s, g = self.size_bytes, self.gpus_per_thread
        return predict_time(system, self.collective, s, params, g, algo=self.algo, proto=self.proto,
                            max_channels=self.max_channels)[0]  # fmt: skip


class RowError(NamedTuple):
    """A sample with the model's time for it, the relative error (predicted - measured) / measured,
    and the algorithm and protocol the model chose."""

    sample: Sample
    predicted_ns: float
    error: float
    algo: str
    proto: str


@dataclass(frozen=True)
class NcclFit:
    """What `fit_details` did: the calibrated `params`, the names of the quantities it fitted
    (``lat_intra``, ``e_ring_intra``, ``s_half_inter``, ...; empty if none), the samples used, the
    rows skipped, and the sum of squared log-time residuals before (`cost_start`) and after."""

    params: NcclParams
    fitted: tuple[str, ...]
    samples: tuple[Sample, ...]
    skipped: int
    cost_start: float
    cost: float


def samples(
    system: NcclSystem,
    runs: Iterable[NcclTestsRun],
    *,
    collective: str | None = None,
    settings: NcclEnv | None = None,
) -> tuple[list[Sample], int]:
    """The usable out-of-place measurements of `runs` on `system`, and how many rows were skipped
    (module docstring). A run must name a collective the model predicts (and be `collective` if
    given) and have `system`'s rank count (its rank lines, else the busbw/algbw ratio); otherwise
    `InputError`. Each sample keeps its run's GPUs per thread (1 when the log does not say) and the
    NCCL settings its log shows (`logged_env`; `settings` where it shows none; all-to-all takes none:
    NCCL runs it as send/receive)."""
    out: list[Sample] = []
    skipped = 0
    for run in runs:
        if not isinstance(run, NcclTestsRun):
            raise InputError("runs", f"{type(run).__name__} is not NcclTestsRun", "runs from read_nccl_tests")
        name = _check_run(system, run, collective)
        env = logged_env(run.settings, run.source, settings)
        forced = (env.algo, env.proto, env.max_channels) if name != "alltoall" else (None, None, None)
        skips = row_skips(run)
        for row in run.rows:
            p = row.out_of_place
            if row.line in skips or p is None or p.time_us is None:
                skipped += 1
                continue
            t = p.time_us * 1000.0
            pick = _model_pick(run.logged_pick(row))  # NCCL logs none for all-to-all (send/receive)
            if pick:
                _check_pick(system, name, row.size_bytes, pick, run.row_place(row))
            made = (*pick, forced[2], True) if pick else forced
            out.append(Sample(name, row.size_bytes, t, run.source, row.line, run.gpus_per_thread or 1, *made))
    return out, skipped


#: NCCL's names of the algorithms and protocols the model has (NCCL's log lines), as the model's
_PICKED = {"TREE": "tree", "RING": "ring", "NVLS": "nvls", "NVLS_TREE": "nvls_tree", "LL": "LL", "LL128": "LL128",
           "SIMPLE": "Simple"}  # fmt: skip


def _model_pick(pick: tuple[str, str] | None) -> tuple[str, str] | None:
    """A logged (algorithm, protocol) as the model names them; None if there is none or the model
    has not both (`row_skips` skips such rows)."""
    if pick is None or pick[0] not in _PICKED or pick[1] not in _PICKED:
        return None
    return _PICKED[pick[0]], _PICKED[pick[1]]


def _check_pick(system: NcclSystem, collective: str, size: int, pick: tuple[str, str], where: str) -> None:
    """A logged pick the system cannot run (NVLS on a machine without it, say) is an `InputError`
    on `where`: the log was made on another machine than the one described."""
    try:
        predict_time(system, collective, size, algo=pick[0], proto=pick[1])
    except InputError as e:
        raise InputError(
            where,
            f"NCCL's log shows it ran {pick[0]} / {pick[1]}: {e.problem}",
            "-t and flags describing the machine the log was made on",
        ) from None


def row_skips(run: NcclTestsRun) -> dict[int, str]:
    """Why `samples` skips rows of `run`, by their line (module docstring); rows it uses are absent."""
    failed = any(_FAILURE.search(w) for w in run.warnings)
    flagged = {int(m.group(1)): w[m.end() :].strip() for w in run.warnings if (m := _LINE.match(w))}
    out = {}
    for row in run.rows:
        p = row.out_of_place
        if failed or row.line in flagged:
            out[row.line] = "its run reports a failure" if failed else flagged[row.line]
        elif p is None or p.time_us is None or p.time_us <= 0 or row.size_bytes <= 0:
            out[row.line] = "no out-of-place time, or size 0"
        elif (p.wrong or 0) > 0:
            out[row.line] = f"#wrong {p.wrong}"
        elif (pick := run.logged_pick(row)) and _model_pick(pick) is None:
            out[row.line] = f"NCCL ran it as {pick[0]} / {pick[1]}, which the model does not have"
        elif columns_disagree(row) and row.in_place is not None:
            out[row.line] = (
                f"out-of-place {p.time_us:g} us and in-place {row.in_place.time_us:g} us differ by more than "
                f"{DISAGREE_RATIO:g}x"
            )
    return out


def columns_disagree(row: NcclTestsRow) -> bool:
    """True when the row's out-of-place and in-place times differ by more than `DISAGREE_RATIO`
    (`samples` skips it; False when a column is missing)."""
    times = [c.time_us for c in (row.out_of_place, row.in_place) if c is not None and c.time_us]
    return len(times) == 2 and max(times) > DISAGREE_RATIO * min(times)


def _check_run(system: NcclSystem, run: NcclTestsRun, collective: str | None) -> str:
    """The run's collective, after checking it against `collective` and its ranks against `system`."""
    where = f"{run.source}:{run.line}"
    name = run.collective
    if name is None or name not in COLLECTIVES:
        raise InputError(where, f"collective {name!r} has no model", ", ".join(COLLECTIVES))
    if collective is not None and name != collective:
        raise InputError(where, f"a run of {name}, but collective={collective!r} was asked", f"runs of {collective}")
    ranks = run.ranks if run.ranks is not None else implied_ranks(run)
    if ranks is not None and ranks != system.ranks:
        raise InputError(where, f"a run on {ranks} ranks for a system of {system.ranks}", f"{system.ranks} ranks")
    return name


def errors(
    system: NcclSystem, params: NcclParams | None, runs: Iterable[NcclTestsRun], *, settings: NcclEnv | None = None
) -> list[RowError]:
    """Each usable row of `runs` (`samples`, with `settings` where a log shows none) with the model's
    time for it under `params` (None: `default_params(system)`) and its relative error
    (predicted - measured) / measured."""
    rows, _ = samples(system, runs, settings=settings)
    return sample_errors(system, params, rows)


def sample_errors(system: NcclSystem, params: NcclParams | None, rows: Sequence[Sample]) -> list[RowError]:
    """`errors` for samples already read."""
    out = []
    for s in rows:
        p = predict(system, s.collective, s.size_bytes, params=params, gpus_per_thread=s.gpus_per_thread,
                    algo=s.algo, proto=s.proto, max_channels=s.max_channels)  # fmt: skip
        out.append(RowError(s, p.time_ns, (p.time_ns - s.time_ns) / s.time_ns, p.algo, p.proto))
    return out


def geomean_error(errs: Iterable[float]) -> float:
    """exp(mean(log(1 + |err|))) - 1 over relative errors `errs` (0.1 = 10 %): the geometric mean of
    1 + |err|, less one. No errors: `InputError`."""
    values = [abs(float(e)) for e in errs]
    if not values or not all(math.isfinite(v) for v in values):
        raise InputError("errors", "no errors, or one not finite", "one or more finite relative errors")
    return math.expm1(sum(math.log1p(v) for v in values) / len(values))


def fit(
    system: NcclSystem,
    runs: Iterable[NcclTestsRun],
    *,
    params: NcclParams | None = None,
    collective: str | None = None,
    settings: NcclEnv | None = None,
) -> NcclParams:
    """`params` (None: `default_params(system)`) calibrated on the out-of-place times of `runs` on
    `system` (module docstring; `fit_details` says what was fitted). No usable row: `InputError`."""
    return fit_details(system, runs, params=params, collective=collective, settings=settings).params


def fit_details(
    system: NcclSystem,
    runs: Iterable[NcclTestsRun],
    *,
    params: NcclParams | None = None,
    collective: str | None = None,
    settings: NcclEnv | None = None,
) -> NcclFit:
    """`fit`, with what it fitted, the samples, the rows skipped and the costs before and after.
    Each row is timed as its run was made (`samples`: the NCCL settings its log shows, else `settings`)."""
    if not isinstance(system, NcclSystem):
        raise InputError("system", f"{type(system).__name__} is not NcclSystem", "an NcclSystem")
    start = default_params(system) if params is None else params
    rows, skipped = samples(system, list(runs), collective=collective, settings=settings)
    if not rows:
        raise InputError("runs", f"no usable row ({skipped} skipped)", "rows with a time, a size > 0 and #wrong 0")
    y = np.log([s.time_ns for s in rows])
    cost_start = _cost(system, start, rows, y)
    best: tuple[float, NcclParams, tuple[str, ...]] = (cost_start, start, ())
    for begin in curve_starts(system, start):
        best = _best_from(system, begin, rows, y, best, curve=begin is not start)
    return NcclFit(best[1], best[2], tuple(rows), skipped, cost_start, best[0])


def _best_from(
    system: NcclSystem, begin: NcclParams, rows: Sequence[Sample], y: np.ndarray,
    best: tuple[float, NcclParams, tuple[str, ...]], *, curve: bool,
) -> tuple[float, NcclParams, tuple[str, ...]]:  # fmt: skip
    """`best`, or a better fit from `begin` (each of its `starts`). With `curve` (`begin` is a
    `curve_starts` variant) a fit that cannot tell the multi-node curve is dropped: its start's curve
    would stay, untold by the rows."""
    algos = {predict_time(system, s.collective, s.size_bytes, begin, algo=s.algo, proto=s.proto)[2] for s in rows}
    for s_half, floor in starts(system, begin, algos):
        names = candidates(system, begin, algos, floor > 0)
        x0, lo, hi = vector(begin, names, s_half, floor)
        keep = identifiable(_residuals(system, begin, names, rows, y, plain=True), x0, lo, hi, len(rows))
        told = {n for n, k in zip(names, keep) if k}
        names = tuple(n for n in names if n in told and (n[:2] != "k_" or f"s_half_{n[2:]}" in told))  # k needs s_half
        if not names or (curve and "s_half_multi" not in names):
            continue
        x0, lo, hi = vector(begin, names, s_half, floor)
        # least squares first (a wide basin), then the robust weighing from there (`robust`)
        x = levenberg_marquardt(_residuals(system, begin, names, rows, y, plain=True), x0, lo, hi)
        x = levenberg_marquardt(_residuals(system, begin, names, rows, y), x, lo, hi)
        fitted = params_of(begin, names, x)
        cost = _cost(system, fitted, rows, y)
        if cost < best[0]:
            best = (cost, fitted, names)
    return best


def held_out_errors(
    system: NcclSystem, runs: Sequence[NcclTestsRun], *, settings: NcclEnv | None = None
) -> list[RowError]:
    """Each usable row's error when the fit never saw it: every run's rows split into alternate
    sizes (`dse validate nccl`'s sizes split), each half fitted from NCCL's defaults and the other
    half predicted. A half with no usable row is an `InputError` naming it."""
    out = []
    for first in (0, 1):
        fitted = [replace(r, rows=r.rows[first::2]) for r in runs]
        try:
            params = fit_details(system, fitted, settings=settings).params
        except InputError as e:
            half = f"half the sizes (rows {'2, 4' if first else '1, 3'}, ... of each run) cannot be fitted: {e.problem}"
            raise InputError("held-out", half, "logs with at least two usable sizes a run") from None
        out += errors(system, params, [replace(r, rows=r.rows[1 - first :: 2]) for r in runs], settings=settings)
    return out


def transfer(source: NcclParams, target: NcclParams, tier: str) -> NcclParams:
    """`target` with every `tier` ("intra" or "inter") quantity `fit` calibrates taken from `source`:
    that tier's hop latencies, efficiencies and efficiency curve, and with "inter" the network's
    latency and the multi-node curve (so a fit on one node can predict two:
    `transfer(fit_1node, default_params(system_2nodes), "intra")`)."""
    if tier not in HOPS:
        raise InputError("tier", f"{tier!r} is not a tier", "intra, inter")
    names = (*HOPS[tier], *(f"e_{a}_{tier}" for a in ("ring", "tree", "nvls")), f"s_half_{tier}_bytes", f"k_{tier}")
    if tier == "inter":
        names = (*names, "net_latency_ns", "s_half_multi_bytes", "k_multi", "e_min_multi")
    return replace(target, **{n: getattr(source, n) for n in names})


# --------------------------------------------------------------------------- the residuals


def _residuals(
    system: NcclSystem, start: NcclParams, names: Sequence[str], rows: Sequence[Sample], y: np.ndarray, plain=False
) -> Residuals:
    """log(predicted) - log(measured) per row as a function of the solver's vector, as the solver
    weighs them (`robust`), or `plain` (what tells a quantity, `identifiable`)."""
    weigh = (lambda r: r) if plain else robust

    prior = _prior(start, names)

    def fun(x: np.ndarray) -> np.ndarray:
        q = params_of(start, names, x, check=False)
        t = [s.predicted_ns(system, q) for s in rows]
        return np.concatenate((weigh(np.log(np.array(t)) - y), prior(x)))

    return fun


def _prior(start: NcclParams, names: Sequence[str]) -> Callable[[np.ndarray], np.ndarray]:
    """The prior's residuals (`PRIOR_SIGMA`): efficiencies and hop-latency scales in log space, the
    network latency in `PRIOR_NET_US`; s_half and k are free (NCCL has no curve to pull toward)."""
    kinds = [n[:2] if n[:2] in ("e_", "la") else ("ne" if n.startswith("net_") else "") for n in names]
    idx = [i for i, k in enumerate(kinds) if k]
    e0 = {i: math.log(max(getattr(start, names[i]), 1e-9)) for i, k in enumerate(kinds) if k == "e_"}
    net0 = start.net_latency_ns / 1000.0

    def prior(x: np.ndarray) -> np.ndarray:
        out = np.empty(len(idx))
        for j, i in enumerate(idx):
            if kinds[i] == "e_":
                out[j] = (math.log(max(float(x[i]), 1e-9)) - e0[i]) / PRIOR_SIGMA
            elif kinds[i] == "la":
                out[j] = float(x[i]) / PRIOR_SIGMA
            else:
                out[j] = (float(x[i]) - net0) / PRIOR_NET_US
        return out

    return prior


def _cost(system: NcclSystem, q: NcclParams, rows: Sequence[Sample], y: np.ndarray) -> float:
    """Sum of squared log-time residuals over the rows (without the prior)."""
    t = np.array([s.predicted_ns(system, q) for s in rows])
    r = robust(np.log(t) - y)
    return float(r @ r)
