"""What nccl-tests output is read into: one test as an `NcclTestsRun` (its rows, `NcclTestsRow`,
from `dse.costs.nccl.log_lines`), with nccl-tests' bus-bandwidth factors and type sizes."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from dse.core.errors import InputError
from dse.costs.nccl.log_lines import NcclPick, NcclTestsRow
from dse.costs.nccl.tables import nccl_release

#: Bytes of one element of each type nccl-tests names (src/common.cu test_typenames).
TYPE_BYTES = {
    "int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
    "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1, "char": 1, "int": 4,  # the last two: before 2.0
}  # fmt: skip

#: Collectives nccl-tests measures, with the factor busbw = algbw x factor for n ranks
#: (nccl-tests doc/PERFORMANCE.md and src/<test>.cu GetBw): "2(n-1)/n", "(n-1)/n" or "1".
COLLECTIVES: dict[str, str] = {
    "all_reduce": "2(n-1)/n", "reduce_scatter": "(n-1)/n", "all_gather": "(n-1)/n", "alltoall": "(n-1)/n",
    "alltoallv": "(n-1)/n", "gather": "(n-1)/n", "scatter": "(n-1)/n",
    "broadcast": "1", "reduce": "1", "sendrecv": "1", "hypercube": "1",
}  # fmt: skip


@dataclass(frozen=True)
class NcclTestsRun:
    """One test of an nccl-tests file (`source`; `line`: where it starts, 1 for the first). `collective`
    (``all_reduce``, ...; None if neither the file nor the caller names it), versions as printed
    (``nccl_version`` is RCCL's in rccl-tests output; None if not printed), `ranks` (rank lines, or given by
    the caller; None if unknown), `gpus` (GPU model names in the rank lines, first seen first),
    `threads` / `gpus_per_thread` (``nThread`` / ``nGpus``), `cpu_time` (``-C 1``), the rows in file
    order, the footer's average busbw (over every printed entry, both passes), warnings, and the NCCL
    settings the log shows the test ran with: (name, value as written, line)."""

    source: str
    line: int
    collective: str | None
    nccl_tests_version: str | None
    nccl_version: str | None
    ranks: int | None
    gpus: tuple[str, ...]
    threads: int | None
    gpus_per_thread: int | None
    cpu_time: bool
    rows: tuple[NcclTestsRow, ...]
    avg_busbw_GBps: float | None
    warnings: tuple[str, ...]
    settings: tuple[tuple[str, str, int], ...] = ()
    json: bool = False  # read from nccl-tests' -J JSON: a row's `line` is its place in 'results', from 1
    picks: tuple[NcclPick, ...] = ()  # NCCL's logged choices (NCCL_DEBUG_SUBSYS=TUNING), in file order

    def logged_pick(self, row: NcclTestsRow) -> tuple[str, str] | None:
        """NCCL's (algorithm, protocol) for `row` as its log printed them (``TREE``, ``LL128``): the
        most often logged for the row's bytes (count x type size), first logged on a tie; None if
        the log records none for it, or the row's type size is unknown."""
        size = TYPE_BYTES.get(row.type)
        seen = self._pick_counts.get(row.count * size) if size is not None else None
        return max(seen, key=seen.__getitem__) if seen else None

    @cached_property
    def _pick_counts(self) -> dict[int, Counter[tuple[str, str]]]:
        """This test's logged picks counted by the bytes NCCL named, in file order."""
        out: dict[int, Counter[tuple[str, str]]] = {}
        for p in self.picks:
            if p.test == self.collective:
                out.setdefault(p.nbytes, Counter())[(p.algo, p.proto)] += 1
        return out

    def row_place(self, row: NcclTestsRow) -> str:
        """Where `row` is, for a person: ``file.txt:42``, or ``file.json results[3]``."""
        name = Path(self.source).name
        return f"{name} results[{row.line - 1}]" if self.json else f"{name}:{row.line}"

    def busbw_factor(self) -> float | None:
        """busbw / algbw for this run (`busbw_factor`), None if the collective or ranks are unknown."""
        if self.collective not in COLLECTIVES or self.ranks is None:
            return None
        return busbw_factor(self.collective, self.ranks)


def busbw_factor(collective: str, ranks: int) -> float:
    """nccl-tests' busbw / algbw for `collective` on `ranks` ranks: 2(n-1)/n for all_reduce,
    (n-1)/n for reduce_scatter, all_gather, alltoall(v), gather, scatter, 1 for the rest."""
    check_args(collective, ranks)
    kind = COLLECTIVES[collective]
    return 2 * (ranks - 1) / ranks if kind == "2(n-1)/n" else (ranks - 1) / ranks if kind == "(n-1)/n" else 1.0


def check_args(collective: str | None, ranks: int | None) -> None:
    """An unknown collective, or a rank count that is not a whole number from 1: `InputError`."""
    if collective is not None and collective not in COLLECTIVES:
        raise InputError("collective", f"unknown collective {collective!r}", ", ".join(COLLECTIVES))
    if ranks is not None and (not isinstance(ranks, int) or isinstance(ranks, bool) or ranks < 1):
        raise InputError("ranks", f"{ranks!r} is not a rank count", "a whole number from 1")


def printed_release(runs: list[NcclTestsRun]) -> str:
    """The NCCL release (X.Y.Z) every one of `runs` that prints a release prints; "" when none does,
    they differ, or it is not in X.Y.Z form."""
    found = {r.nccl_version for r in runs if r.nccl_version}
    one = found.pop() if len(found) == 1 else ""
    try:
        nccl_release(one)
    except InputError:
        return ""
    return one


def nccl_version_name(code: int) -> str | None:
    """NCCL's version code as X.Y.Z (X*10000+Y*100+Z; before 2.9, X*1000+Y*100+Z)."""
    if code <= 0:
        return None
    major, rest = divmod(code, 10000 if code >= 10000 else 1000)
    return f"{major}.{rest // 100}.{rest % 100}"
