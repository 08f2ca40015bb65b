"""One line of nccl-tests output (the formats `dse.costs.nccl.logs` describes): launcher prefixes and
tags off (`strip_launchers`), a column header's layout (`layout_of`), a data row read by it
(`read_row`), and the NCCL settings a line shows a run was made with (`settings_in`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import NamedTuple

from dse.core.errors import InputError
from dse.core.limits import MAX_BYTES


@dataclass(frozen=True)
class NcclTestsPass:
    """One pass (out-of-place or in-place) of a row. `time_us` is the mean time of one operation
    (CPU time if the run's `cpu_time`); bandwidths in GB/s (1e9 B/s); None where ``N/A``.
    `wrong`: elements found wrong (None when not checked, or in old logs); `max_error`: the
    largest deviation old logs print instead (<= 2.11), None otherwise."""

    time_us: float | None
    algbw_GBps: float | None
    busbw_GBps: float | None
    wrong: int | None
    max_error: float | None = None


@dataclass(frozen=True)
class NcclTestsRow:
    """One row of the table: one message size. `redop` / `root` are None when the layout has no
    such column (old logs); `root` is -1 for collectives without a root. A pass the header does not
    have is None. `line`: its line number in the file; `timestamp` (``-S 1``) as printed."""

    size_bytes: int
    count: int
    type: str
    redop: str | None
    root: int | None
    out_of_place: NcclTestsPass | None
    in_place: NcclTestsPass | None
    line: int
    timestamp: str | None = None


_TIMESTAMP = r"\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?"
_LAUNCHERS = (
    r"\[\d+,\d+\]<std(?:out|err)>:|\d+:(?=[\s#]|$)|\[\d+\](?=\s)|\[[\w.-]+:\d+\](?=\s)|[A-Za-z][\w.-]*:(?=\s)"
    r"|\((?=[^()]*=)[^()]*\)(?=\s)"  # Ray's (SkyPilot's) "(head, rank=0, pid=3808) "
)
_PREFIX = re.compile(r"(?:\s*(?:" + _LAUNCHERS + "|" + _TIMESTAMP + r"(?=\s)))*", re.ASCII)
_MPI_TAG = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:", re.ASCII)
_RANK_TAG = re.compile(r"\[\d+\]", re.ASCII)
INT_TOKEN = re.compile(r"[0-9]+", re.ASCII)
NUMBER_TOKEN = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_MISSING = {"n/a", "nan", "-nan", "inf", "-inf", "+inf"}
#: Column names as printed, by version, to one name each.
_ALIASES = {
    "size": "size", "bytes": "size", "count": "count", "n": "count", "type": "type", "redop": "redop",
    "op": "redop", "root": "root", "time": "time", "cputime": "time", "algbw": "algbw", "busbw": "busbw",
    "#wrong": "wrong", "wrong": "wrong", "error": "error", "res": "error", "timestamp": "timestamp",
}  # fmt: skip
_FIXED = ("size", "count", "type", "redop", "root")


@dataclass(frozen=True)
class Layout:
    """The columns a header names: fixed ones, then per pass (its name, its columns)."""

    fixed: tuple[str, ...]
    passes: tuple[tuple[str, tuple[str, ...]], ...]
    timestamp: bool
    cpu_time: bool
    ms: bool  # v1 printed times in ms
    line: int
    unknown: tuple[str, ...]

    @property
    def width(self) -> int:
        """The tokens a data row of this layout has."""
        return len(self.fixed) + sum(len(c) for _, c in self.passes) + (2 if self.timestamp else 0)


def layout_of(tokens: list[str], n: int, banner: str, where: str) -> Layout | None:
    """The layout of a column header line (`tokens` without the ``#``), None if it is not one."""
    names = [_ALIASES.get(t.lower(), t) for t in tokens]
    if len(names) < 2 or names[:2] != ["size", "count"] or "time" not in names:
        return None
    first = names.index("time")
    fixed = tuple(names[:first])
    if any(c not in _FIXED for c in fixed):
        raise InputError(where, f"a column header with {fixed} before 'time'", "columns of " + ", ".join(_FIXED))
    timestamp = names[-1] == "timestamp"
    rest = names[first : len(names) - timestamp]
    groups: list[list[str]] = []
    for name in rest:
        if name == "time":
            groups.append([])
        groups[-1].append(name)
    if len(groups) > 2 or any("algbw" not in g or "busbw" not in g for g in groups):
        raise InputError(where, f"a column header with {len(groups)} time group(s) or without algbw/busbw",
                         "one or two groups of time, algbw, busbw, #wrong")  # fmt: skip
    kinds: tuple[str, ...]
    if len(groups) == 2:
        kinds = ("out_of_place", "in_place")
    else:
        kinds = ("in_place",) if "in-place" in banner and "out-of-place" not in banner else ("out_of_place",)
    known = {"time", "algbw", "busbw", "wrong", "error", "i_min", "i_max", "i_p99", "i_cv%"}
    unknown = tuple(sorted({c for g in groups for c in g} - known))
    passes = tuple((k, tuple(g)) for k, g in zip(kinds, groups))
    cpu_time = "cputime" in (t.lower() for t in tokens)
    return Layout(fixed, passes, timestamp, cpu_time, tokens[0].lower() == "bytes", n, unknown)


def _float(tok: str, name: str, where: str) -> float | None:
    """A non-negative number as printed; None for N/A, nan or inf."""
    if tok.lower() in _MISSING:
        return None
    if not NUMBER_TOKEN.fullmatch(tok) or float(tok) < 0:
        raise InputError(where, f"column {name!r} is {tok!r}", "a number from 0, or N/A")
    return float(tok) if math.isfinite(float(tok)) else None


def _pass(values: dict[str, str], scale: float, where: str) -> NcclTestsPass:
    time = _float(values["time"], "time", where)
    wrong = _float(values["wrong"], "#wrong", where) if "wrong" in values else None
    if wrong is not None and wrong != int(wrong):
        raise InputError(where, f"column '#wrong' is {values['wrong']!r}", "a whole number, or N/A")
    error = _float(values["error"], "error", where) if "error" in values else None
    algbw, busbw = _float(values["algbw"], "algbw", where), _float(values["busbw"], "busbw", where)
    time_us = None if time is None else time * scale
    return NcclTestsPass(time_us, algbw, busbw, None if wrong is None else int(wrong), error)


def _blank_redop(tokens: list[str], layout: Layout) -> list[str]:
    """`tokens` with an empty redop put back where the header has one and the row left it blank
    (nccl-tests of about 2020 printed alltoall so: ``0  0  float  1.63 ...`` under ``redop``)."""
    if len(tokens) != layout.width - 1 or "redop" not in layout.fixed:
        return tokens
    at = layout.fixed.index("redop")
    if at >= len(tokens) or not NUMBER_TOKEN.fullmatch(tokens[at]):
        return tokens
    return [*tokens[:at], "", *tokens[at:]]


def read_row(tokens: list[str], layout: Layout, scale: float, n: int, where: str) -> NcclTestsRow:
    """One data row read by its header's columns (a blank redop allowed: `_blank_redop`)."""
    tokens = _blank_redop(tokens, layout)
    if len(tokens) != layout.width:
        problem = f"a cut or garbled row: {len(tokens)} fields, its header (line {layout.line}) has {layout.width}"
        raise InputError(where, problem, "whole rows as nccl-tests prints them")
    fixed = dict(zip(layout.fixed, tokens))
    root = fixed.get("root")
    if root is not None and not re.fullmatch(r"-?[0-9]+", root):
        raise InputError(where, f"column 'root' is {root!r}", "a whole number (-1: no root)")
    if len(tokens[0]) > 16 or int(tokens[0]) > MAX_BYTES:
        raise InputError(where, f"size {tokens[0]} B", f"at most {MAX_BYTES} B (2^53)")
    at = len(layout.fixed)
    passes: dict[str, NcclTestsPass] = {}
    for kind, columns in layout.passes:
        passes[kind] = _pass(dict(zip(columns, tokens[at:])), scale, where)
        at += len(columns)
    return NcclTestsRow(
        size_bytes=int(tokens[0]), count=int(tokens[1]), type=fixed.get("type", "?"), redop=fixed.get("redop") or None,
        root=None if root is None else int(root), out_of_place=passes.get("out_of_place"),
        in_place=passes.get("in_place"), line=n, timestamp=" ".join(tokens[-2:]) if layout.timestamp else None,
    )  # fmt: skip


# ----------------------------------------------------------------------------- settings
#: The settings `settings_in` reads: those the model honours (`dse.costs.nccl.env.SETTINGS`), and
#: NCCL_NVLS_ENABLE, which a calibration's machine holds (its `nvls` field).
SETTING_NAMES = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MAX_NCHANNELS", "NCCL_NVLS_ENABLE")
_NAMES = "|".join(SETTING_NAMES)
_INFO_SETTING = re.compile(rf"NCCL INFO (?:({_NAMES}) set by environment to (\S+)|.*?Setting ({_NAMES}) to \"?(\w+))")
_EXPORT = re.compile(rf"^(?:export|setenv|set)\s+({_NAMES})[=\s]\s*(\S+)")
_ASSIGNED = re.compile(rf"(?<![\w-])({_NAMES})=([^\s;&|]+)")
_GENV = re.compile(rf"-g?env\s+({_NAMES})\s+([^\s;&|]+)")
#: An nccl-tests binary's name (all_reduce_perf, alltoall_perf_mpi); group 1 is its test.
BINARY = re.compile(r"\b([a-z]+(?:_[a-z]+)*?)_perf\w*\b")


def strip_launchers(raw: str) -> str:
    """`raw` without launcher prefixes (srun -l, Open MPI, MPICH, pdsh, timestamps) and without the
    tags Open MPI's --tag-output or MPICH's -prepend-rank put inside a line, stripped."""
    cut = m.end() if (m := _PREFIX.match(raw)) else 0
    line = raw[cut:].strip()
    if "]<std" in line:  # Open MPI's tags inside the line (--tag-output on a row printed in pieces)
        line = _MPI_TAG.sub(" ", line).strip()
    elif "[" in line and _RANK_TAG.search(raw[:cut]):  # MPICH's -prepend-rank tags, the same way
        line = _RANK_TAG.sub(" ", line).strip()
    return line


def settings_in(line: str) -> list[tuple[str, str]]:
    """The (name, value) NCCL settings of `SETTING_NAMES` that `line` (launchers stripped) shows a
    run was made with, values as written (quotes off): NCCL's own ``NCCL INFO NCCL_ALGO set by
    environment to Ring`` or a network plugin's ``NCCL INFO NET/OFI Setting NCCL_PROTO to
    "simple"``; ``export NCCL_ALGO=Ring``; and on an echoed command line that runs an nccl-tests
    binary, ``NCCL_ALGO=Ring`` (an environment prefix, ``-x``, ``--env``) or MPICH's ``-genv
    NCCL_ALGO Ring``. A line of nccl-tests' own (``#``) never sets one."""
    if line.startswith("#"):
        return []
    if " NCCL INFO " in line or line.startswith("NCCL INFO"):
        return [(m.group(1) or m.group(3), m.group(2) or m.group(4)) for m in _INFO_SETTING.finditer(line)]
    if m := _EXPORT.match(line):
        return [(m.group(1), m.group(2).strip("\"'"))]
    if not BINARY.search(line):
        return []
    found = sorted((m.start(), m.group(1), m.group(2)) for r in (_ASSIGNED, _GENV) for m in r.finditer(line))
    return [(name, value.strip("\"'")) for _, name, value in found]


# ----------------------------------------------------------------------------- NCCL's picks
#: NCCL's record of its choice for one call, on rank 0 (NCCL_DEBUG=INFO with the TUNING subsystem,
#: NCCL 2.24 on; src/enqueue.cc): ``AllReduce: 16777216 Bytes -> Algo TREE proto LL128 ...``.
_PICK = re.compile(
    r"NCCL INFO (AllReduce|AllGather|ReduceScatter|Broadcast|Reduce): (\d+) Bytes -> Algo (\w+) proto (\w+)"
)
#: NCCL's function names as nccl-tests' tests
PICK_TESTS = {
    "AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast", "Reduce": "reduce",
}  # fmt: skip


class NcclPick(NamedTuple):
    """NCCL's algorithm and protocol for one call, as its log line printed them: the test
    (``all_reduce``, ...), the bytes NCCL names (count x type size: a rank's share for all-gather and
    reduce-scatter), the algorithm (``TREE``, ``RING``, ``NVLS``, ``NVLS_TREE``, ``PAT``, ...) and
    protocol (``LL``, ``LL128``, ``SIMPLE``), and the line."""

    test: str
    nbytes: int
    algo: str
    proto: str
    line: int


def pick_in(line: str, n: int) -> NcclPick | None:
    """The `NcclPick` that `line` (launchers stripped; line number `n`) records, if any."""
    m = _PICK.search(line)
    return NcclPick(PICK_TESTS[m.group(1)], int(m.group(2)), m.group(3), m.group(4), n) if m else None
