"""nccl-tests output files read as they are: one `NcclTestsRun` per test, its table as `NcclTestsRow`s.

Formats (NVIDIA/nccl-tests src/util.cu, src/common.cu at 2.19.6 and tags v1.0.0, v2.0.0, v2.11.0,
v2.13.0, v2.17.5; rccl-tests prints the same; none of their code is used):

- **Lines** lose launcher prefixes first: ``0: `` (``srun -l``), ``[1,0]<stdout>:`` (Open MPI),
  ``[3] `` / ``[host:pid] `` (MPICH), ``host: `` (pdsh), ``(head, rank=0, pid=1) `` (Ray, SkyPilot),
  ISO timestamps, indentation; Open MPI's ``--tag-output`` and MPICH's ``-prepend-rank`` tags inside a
  line too (nccl-tests prints a row in pieces, each tagged).
- **Preamble** (all optional): ``# nccl-tests version V nccl-headers=H nccl-library=L`` (L is NCCL's
  version code X*10000+Y*100+Z, before 2.9 X*1000+Y*100+Z), v1's ``# NCCL Tests compiled with NCCL
  X.Y``, ``NCCL INFO NCCL version X.Y.Z`` or the bare ``NCCL version X.Y.Z+cudaA.B`` banner;
  ``# Collective test starting: all_reduce_perf``;
  ``# nThread T nGpus G ...``; ``#  Rank N ... device D [bus id] GPU NAME`` per rank. The collective
  is the ``Collective test starting`` one, else the one ``X_perf`` binary named before the table
  (an echoed command line; after a test's footer, it starts the next test), else the caller's, else
  all_reduce when busbw exceeds algbw (`factor_above_one`: no other test's factor is above 1).
- **The column header** names the columns (nothing is read by position): ``size`` (v1 ``bytes``),
  ``count`` (v1 ``N``), ``type``, ``redop`` (v1 ``op``), ``root``, as many as the version prints
  (<= 2.11: all_gather has no redop/root, broadcast no redop); one group per pass, out-of-place then
  in-place: ``time`` (``cputime`` with ``-C 1``), ``algbw``, ``busbw``, ``#wrong`` (``wrong`` where
  a copy lost the ``#``; ``N/A`` when not checked) or ``error`` / ``res`` (<= 2.11: the largest
  deviation), then ``-I 1``'s ``i_min i_max i_p99 i_cv%``; last ``timestamp`` (``-S 1``, two tokens).
  One group: the pass its banner line names (out-of-place if none). Times in µs (v1, or an ``(ms)``
  units line: ms, converted); exponent forms are read; ``N/A``, ``nan``, ``inf`` are None.
- **Settings** (`dse.costs.nccl.log_lines.settings_in`): NCCL_ALGO, NCCL_PROTO, NCCL_MAX_NCHANNELS as
  NCCL's INFO lines, ``export`` lines or an echoed command line that runs the binary show them, each
  for the test whose table follows, as printed (`dse.costs.nccl.fit` reads their values).
- **Footer**: ``Out of bounds values : K OK|FAILED``, ``Avg bus bandwidth : X``, ``Collective test
  concluded``. A file may hold several tests one after another.

Warnings (on the run): wrong elements, a FAILED footer, ``Test timeout`` / ``Test NCCL failure`` /
``Test CUDA failure`` / ``# error:`` lines (also where a failure cuts a row short: the row is not
read), ``...`` (rows left out), a table without its footer,
rank lines with gaps, unknown columns. Refused (one `InputError` naming the file and line): no
column header, no data row, a row that does not match its header, a row after its table's footer.

- **JSON**: a file whose first character is ``{`` is nccl-tests' ``-J`` output
  (`dse.costs.nccl.log_json`): one test, its rows numbered by their place in ``results`` (from 1).

``size`` is a rank's largest buffer (doc/PERFORMANCE.md): all_gather's whole output (n x per rank),
reduce_scatter's whole input, alltoall's send buffer; ``count`` is what NCCL is passed (per rank).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dse.core.errors import InputError
from dse.core.files import read_text
from dse.core.limits import check_input
from dse.costs.nccl.log_json import json_run, looks_like_json
from dse.costs.nccl.log_lines import (  # noqa: F401 (NcclTestsPass, NcclTestsRow re-exported)
    BINARY,
    INT_TOKEN,
    NUMBER_TOKEN,
    Layout,
    NcclPick,
    NcclTestsPass,
    NcclTestsRow,
    layout_of,
    pick_in,
    read_row,
    settings_in,
    strip_launchers,
)
from dse.costs.nccl.log_runs import (  # noqa: F401 (COLLECTIVES, NcclTestsRun, busbw_factor re-exported)
    COLLECTIVES,
    NcclTestsRun,
    busbw_factor,
    check_args,
    nccl_version_name,
)


def printed_error(value: float, width: int = 6) -> float:
    """Half a unit in the last place of `value` as nccl-tests >= 2.17.5 prints it in `width`
    characters (6 for bandwidths, 7 for times): 2 decimals if they fit, else 1, else 0, else an
    exponent form with 1 (width >= 7) or 0 decimals. Older versions printed bandwidths with 2
    decimals always, so this bounds their error too."""
    for decimals in (2, 1, 0):
        if len(f"{value:.{decimals}f}") <= width:
            return 0.5 * 10.0**-decimals
    exponent = math.floor(math.log10(abs(value)))
    return 0.5 * 10.0 ** (exponent - (1 if width >= 7 else 0))


def printed_ratios(rows: Sequence[NcclTestsRow]) -> Iterator[tuple[float, float, float]]:
    """(lowest, highest, printed) busbw / algbw of every pass of `rows` with algbw >= 1 GB/s, the
    bounds from the printing precision (`printed_error`)."""
    for p in (p for r in rows for p in (r.out_of_place, r.in_place) if p is not None):
        a, b = p.algbw_GBps, p.busbw_GBps
        if a is None or b is None or a < 1.0:
            continue
        ea, eb = printed_error(a), printed_error(b)
        yield (b - eb) / (a + ea), (b + eb) / (a - ea), b / a


def implied_ranks(run: NcclTestsRun) -> int | None:
    """The rank count the printed busbw / algbw ratio implies (nccl-tests computes busbw from algbw
    with the factor of `busbw_factor`), if exactly one whole number fits every pass of every row
    within the printing precision (`printed_error`); None for factor-1 collectives, an unknown
    collective, too few digits to decide (large rank counts), or ratios that disagree."""
    kind = COLLECTIVES.get(run.collective or "")
    if kind not in ("2(n-1)/n", "(n-1)/n"):
        return None
    lo, hi = 0.0, math.inf
    for low, high, _ in printed_ratios(run.rows):
        lo, hi = max(lo, low), min(hi, high)
    top = 2.0 if kind == "2(n-1)/n" else 1.0
    if hi == math.inf or lo > hi or lo >= top:
        return None
    first = math.ceil(top / (top - lo) - 1e-9)
    last = math.floor(top / (top - hi) + 1e-9) if hi < top else math.inf
    return first if first == last else None


def factor_above_one(rows: Sequence[NcclTestsRow]) -> float | None:
    """The mean busbw / algbw of `rows` when at least three passes with algbw >= 1 GB/s print one and
    every such pass shows it above 1.3 beyond the printing precision (`printed_error`), else None. Of
    nccl-tests' factors (`busbw_factor`) only all-reduce's, 2(n-1)/n, exceeds 1 (4/3 or more from 3
    ranks; 2 ranks give 1, as broadcast), so such a table is an all-reduce's (a table pasted on its
    own names no test)."""
    ratios = []
    for low, _, ratio in printed_ratios(rows):
        if low <= 1.3:
            return None
        ratios.append(ratio)
    return sum(ratios) / len(ratios) if len(ratios) >= 3 else None


def read_nccl_tests(path: str | Path, *, collective: str | None = None, ranks: int | None = None) -> list[NcclTestsRun]:
    """The tests in an nccl-tests output file (`parse_nccl_tests`), read with the text size limit
    (``DSE_MAX_TEXT_BYTES``, `dse.core.files.read_text`) checked before reading."""
    return parse_nccl_tests(read_text(path, str(path)), str(path), collective=collective, ranks=ranks)


def parse_nccl_tests(
    text: str, source: str = "<text>", *, collective: str | None = None, ranks: int | None = None
) -> list[NcclTestsRun]:
    """The tests in nccl-tests output `text` (module docstring), in file order. `collective` and
    `ranks` apply where the file does not say; if it says otherwise, that is an `InputError`.
    A file with no column header or no data row, or a row that does not parse, is one
    `InputError` naming `source` and the line."""
    check_args(collective, ranks)
    if len(text) > 1 << 20:
        check_input("text_bytes", len(text.encode("utf-8", "surrogatepass")), source, "bytes")
    if looks_like_json(text):
        return [json_run(text, source, collective=collective, ranks=ranks)]
    parser = _Parser(source)
    for n, raw in enumerate(text.splitlines(), 1):
        parser.feed(n, raw)
    return parser.finish(collective, ranks)


# ----------------------------------------------------------------------------- lines
_VERSION = re.compile(r"[nr]ccl-tests version (\S+)(?:.*?[nr]ccl-library=(\d+))?")
_COMPILED = re.compile(r"NCCL Tests compiled with NCCL (\S+)")
_INFO_VERSION = re.compile(r"(?:NCCL INFO NCCL version|^NCCL version|^RCCL version\s*:)\s*(\d+(?:\.\d+)+)")
_STARTING = re.compile(r"Collective test starting:\s*(\w+?)(?:_perf\w*)?\s*$")
_NTHREAD = re.compile(r"nThread (\d+) nGpus (\d+)")
_RANK = re.compile(r"Rank\s+(\d+)\b.*?\bdevice\s+\d+\s+\[[^\]]*\]\s*(.*?)\s*$")
_FAILURE = re.compile(r"Test (?:timeout|NCCL failure|CUDA failure|failure)\b|^error:")
_FOOTER = re.compile(r"(Out of bounds values|Avg bus bandwidth)\s*:\s*(\S+)\s*(\S*)")


# ----------------------------------------------------------------------------- runs
@dataclass
class _Draft:
    """A run being read. `phase`: 0 preamble, 1 header read, 2 rows, 3 footer, 4 concluded."""

    line: int
    phase: int = 0
    seen: set[str] = field(default_factory=set)
    collective: str | None = None
    collective_line: int = 0
    binaries: set[str] = field(default_factory=set)
    tests_version: str | None = None
    nccl_version: str | None = None
    threads: int | None = None
    gpus_per_thread: int | None = None
    ranks: dict[int, str] = field(default_factory=dict)
    layout: Layout | None = None
    scale: float = 1.0
    rows: list[NcclTestsRow] = field(default_factory=list)
    avg_busbw: float | None = None
    warnings: list[str] = field(default_factory=list)
    settings: list[tuple[str, str, int]] = field(default_factory=list)
    picks: list[NcclPick] = field(default_factory=list)


class _Parser:
    """Reads lines one by one into runs (`feed`), then checks and builds them (`finish`)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.drafts: list[_Draft] = [_Draft(1)]
        self.banner = ""
        self.orphan_row = 0  # first line that looks like a data row before any header
        self.empty = True

    @property
    def cur(self) -> _Draft:
        return self.drafts[-1]

    def _field(self, n: int) -> str:
        return f"{self.source}:{n}"

    def _preamble(self, n: int, item: str) -> _Draft:
        """The run a preamble item at line `n` belongs to: a new one once the current one has a
        table, or already has this item (a second test's preamble)."""
        d = self.cur
        if d.phase >= 1 or (item in d.seen and item != "rank"):
            d = _Draft(n)
            self.drafts.append(d)
        d.seen.add(item)
        return d

    def feed(self, n: int, raw: str) -> None:
        line = strip_launchers(raw)
        if not line:
            return
        self.empty = False
        if found := settings_in(line):
            self._settings(n, found)
        if pick := pick_in(line, n):
            self.cur.picks.append(pick)  # rank 0's record of a call of the current test's table
        if " NCCL INFO " in line and "NCCL version" not in line:
            return  # the bulk of an NCCL_DEBUG=INFO log, skipped quickly
        body = line.lstrip("#").strip()
        tokens = body.split()
        counted = len(tokens) >= 2 and INT_TOKEN.fullmatch(tokens[0]) and INT_TOKEN.fullmatch(tokens[1])
        if not line.startswith("#") and counted and not _FAILURE.search(body):  # a failure ends a row early
            self._data(n, tokens)
        elif self._meta(n, body):
            return
        elif tokens and tokens[0].startswith("(") and self.cur.phase == 1:
            if "(ms)" in tokens:
                self.cur.scale = 1000.0
        elif (layout := layout_of(tokens, n, self.banner, self._field(n))) is not None:
            self._header(n, layout)
        elif "out-of-place" in body or "in-place" in body:
            self.banner = body
        elif body in ("...", "…", "[...]") and self.cur.phase == 2:
            self.cur.warnings.append(f"line {n}: '...': rows left out of the table")
        elif self.cur.phase in (0, 3, 4) and (names := [m for m in BINARY.findall(body) if m in COLLECTIVES]):
            if self.cur.phase:  # an echoed command after a test's footer: the next test's
                self.drafts.append(_Draft(n))
            self.cur.binaries.update(names)

    def _meta(self, n: int, body: str) -> bool:
        """Preamble, footer and failure lines; True if `body` was one."""
        if m := _VERSION.search(body):
            d = self._preamble(n, "version")
            d.tests_version = m.group(1)
            d.nccl_version = nccl_version_name(int(m.group(2))) if m.group(2) else d.nccl_version
        elif m := _COMPILED.search(body):
            self._preamble(n, "version").nccl_version = m.group(1)
        elif m := _INFO_VERSION.search(body):
            self.cur.nccl_version = self.cur.nccl_version or m.group(1)
        elif m := _STARTING.match(body):
            d = self._preamble(n, "starting")
            d.collective, d.collective_line = m.group(1), n
        elif m := _NTHREAD.match(body):
            d = self._preamble(n, "nthread")
            d.threads, d.gpus_per_thread = int(m.group(1)), int(m.group(2))
        elif m := _RANK.match(body):
            self._preamble(n, "rank").ranks[int(m.group(1))] = m.group(2)
        elif m := _FOOTER.match(body):
            self._footer(n, m.group(1), m.group(2), m.group(3))
        elif body.startswith("Collective test concluded"):
            self.cur.phase = max(self.cur.phase, 4)
        elif _FAILURE.search(body):
            self.cur.warnings.append(f"line {n}: {body[:200]}")
        else:
            return False
        return True

    def _settings(self, n: int, found: list[tuple[str, str]]) -> None:
        """Settings at line `n` belong to the test whose table follows: the current one until its
        footer (other ranks may interleave NCCL's INFO lines with a table), else the next."""
        d = self.cur
        if d.phase >= 3:
            d = _Draft(n)
            self.drafts.append(d)
        d.settings += [(name, value, n) for name, value in found]

    def _header(self, n: int, layout: Layout) -> None:
        d = self.cur
        if d.phase >= 1:
            d = _Draft(n)
            self.drafts.append(d)
        d.layout, d.phase, self.banner = layout, 1, ""
        d.scale = 1000.0 if layout.ms else 1.0
        d.warnings += [f"line {n}: unknown column {c!r} ignored" for c in layout.unknown]

    def _data(self, n: int, tokens: list[str]) -> None:
        d = self.cur
        if d.layout is None:
            self.orphan_row = self.orphan_row or n
            return
        if d.phase >= 3:
            problem = "a data row after its table ended (its footer is above)"
            raise InputError(self._field(n), problem, "a column header line before every table")
        row = read_row(tokens, d.layout, d.scale, n, self._field(n))
        d.rows.append(row)
        d.phase = 2
        for kind, p in (("out-of-place", row.out_of_place), ("in-place", row.in_place)):
            if p is not None and p.wrong:
                d.warnings.append(f"line {n}: {p.wrong} wrong elements at {row.size_bytes} bytes ({kind})")

    def _footer(self, n: int, what: str, value: str, verdict: str) -> None:
        d = self.cur
        if d.layout is None:
            return
        d.phase = max(d.phase, 3)
        if what.startswith("Avg") and NUMBER_TOKEN.fullmatch(value):
            d.avg_busbw = float(value)
        if verdict == "FAILED" or (what.startswith("Out") and value not in ("0", "")):
            d.warnings.append(f"line {n}: {what} : {value} {verdict}".rstrip())

    def finish(self, collective: str | None, ranks: int | None) -> list[NcclTestsRun]:
        drafts = [d for d in self.drafts if d.layout is not None]
        allowed = "the output of an nccl-tests binary such as all_reduce_perf"
        if self.empty:
            raise InputError(self.source, "an empty file", allowed)
        if not drafts:
            where = f"line {self.orphan_row} looks like a data row, but " if self.orphan_row else ""
            header = "'# size count type redop root time algbw busbw #wrong ...'"
            raise InputError(self.source, f"not nccl-tests output: {where}no line is a column header {header}", allowed)
        if not any(d.rows for d in drafts):
            line = drafts[0].layout.line if drafts[0].layout else 1
            failed = [w for d in drafts for w in d.warnings if _FAILURE.search(w)]
            why = f" (the test failed: {failed[0]})" if failed else ""
            raise InputError(self._field(line), f"a column header with no data row after it{why}", allowed)
        return [self._run(d, collective, ranks) for d in drafts]

    def _run(self, d: _Draft, collective: str | None, ranks: int | None) -> NcclTestsRun:
        warnings = list(d.warnings)
        name = d.collective
        if name is None and len(d.binaries) == 1:
            name = next(iter(d.binaries))
        elif name is None and len(d.binaries) > 1:
            warnings.append(f"several binaries named before the table ({', '.join(sorted(d.binaries))})")
        if name is None and collective is None and (factor := factor_above_one(d.rows)) is not None:
            name = "all_reduce"
            warnings.append(f"the test is not named: all_reduce, the one whose busbw exceeds algbw (x{factor:.3f})")
        if collective is not None and name is not None and name != collective:
            problem = f"the file's test is {name}, but collective={collective!r} was given"
            raise InputError(self._field(d.collective_line or d.line), problem, f"collective={name!r}, or none")
        count = self._ranks(d, ranks, warnings)
        if d.phase < 3 and d.rows:
            warnings.append(f"the table ends after {len(d.rows)} rows without its footer (cut short, or an excerpt)")
        if not d.rows:
            warnings.append("a column header with no data row (the test stopped before its first size)")
        assert d.layout is not None
        gpus = tuple(dict.fromkeys(g for _, g in sorted(d.ranks.items()) if g))
        return NcclTestsRun(
            source=self.source, line=d.line, collective=name or collective, nccl_tests_version=d.tests_version,
            nccl_version=d.nccl_version, ranks=count, gpus=gpus, threads=d.threads, gpus_per_thread=d.gpus_per_thread,
            cpu_time=d.layout.cpu_time, rows=tuple(d.rows), avg_busbw_GBps=d.avg_busbw, warnings=tuple(warnings),
            settings=tuple(d.settings), picks=tuple(d.picks),
        )  # fmt: skip

    def _ranks(self, d: _Draft, ranks: int | None, warnings: list[str]) -> int | None:
        """Ranks from the rank lines (the highest rank + 1: nccl-tests lists every rank), else the caller's."""
        if not d.ranks:
            return ranks
        count = max(d.ranks) + 1
        if len(d.ranks) != count:
            warnings.append(f"rank lines for {len(d.ranks)} of ranks 0..{count - 1}: ranks taken as {count}")
        if ranks is not None and ranks != count:
            problem = f"the rank lines give {count} ranks, but ranks={ranks} was given"
            raise InputError(self._field(d.line), problem, f"ranks={count}, or none")
        return count
