"""A sweep's CSV: checked before anything is written, repaired only when every damaged line is its own.

What dse does with the file it is given as a sweep's output:

- missing or empty: a new file (the header goes in with the first rows, so a run that fails before
  any row leaves no file behind);
- this sweep's header and rows: kept; the sweep evaluates the points that have no row;
- damage dse can repair, because every damaged line is recognisably one of this sweep's rows: a
  last line cut short (a kill during a write), a row cut short or glued to the next one, a blank
  line, a row repeated, a header cut short. A damaged last line alone is cut off; anything else is
  repaired by writing the file anew (a temporary file renamed into place, so a kill during the
  repair loses nothing) with exactly one row per point. The run says so in one line;
- anything else (another sweep's rows, other columns, a line that is no row of this sweep, two
  different results for one point): refused with one line naming the line; the file is not touched.

Every row ends with a ``crc`` column, the CRC-32 of the rest of its line, so a row damaged anywhere
(a number cut short, a digit changed) is recognised as damaged rather than read as a result.
`SweepFile` also holds an exclusive lock on the file while a sweep writes it, so two sweeps never
write one file at once.

Writing (the rules of `dse.core.files`): a repair writes the new file whole beside the old one,
every byte checked, fsyncs it, renames it into place and fsyncs the folder; if any of that fails
(a full disk, ``ulimit -f``) the old file stays byte for byte, the temporary file is removed and
the run stops with one line (exit 1), before it says "repaired". Rows are appended with their
every byte checked too: an append that fails part-way is cut back to where it began, so no half
row is left for the next run to cut off (that would lose a finished point silently); the rows
written before are kept and the same command resumes. A symlinked ``--out`` is followed (the link
stays, its target is appended to or replaced); the CSV's folder is created if missing (a
resumable store, like a study journal).
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import math
import os
import stat
import warnings
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dse.core.errors import InputError, RunError
from dse.core.files import (
    check_output_file,
    make_dirs,
    output_target,
    remove_empty,
    sync_folder,
    temp_beside,
    write_all,
    write_failure,
)

ALLOWED = "a new file, or the sweep that wrote it"


CRC = "crc"


def csv_text(rows: Iterable[Sequence[object]]) -> str:
    """Rows as CSV text, one line each."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def _crc(body: str) -> str:
    return f"{zlib.crc32(body.encode()):08x}"


def row_lines(rows: Iterable[Sequence[object]]) -> str:
    """Result rows as the lines a sweep writes: each with its CRC-32 appended."""
    out = []
    for line in csv_text(rows).splitlines():
        out.append(f"{line},{_crc(line)}\n")
    return "".join(out)


@dataclass(frozen=True)
class CsvState:
    """What a sweep's output holds, and what to do about damage."""

    done: frozenset[int]  # points that have a row
    keep: tuple[bytes, ...] | None = None  # rewrite the file with these lines (header first)
    truncate_to: int | None = None  # or: cut the file to this many bytes (a damaged last line)
    repairs: tuple[str, ...] = ()  # what was repaired, for the note


class _Rows:
    """Recognises this sweep's rows: the text of each point's parameters, and the results after them."""

    def __init__(self, header: Sequence[str], params: Sequence[Sequence[object]]) -> None:
        self.header = csv_text([[*header, CRC]])[:-1]
        self.params = params
        self.nresults = len(header) - len(params[0]) - 1 if params else 0
        self._prefix: dict[int, str] = {}

    def prefix(self, i: int) -> str:
        """``i,<parameters>,``: a row of point `i` up to its results."""
        p = self._prefix.get(i)
        if p is None:
            p = self._prefix[i] = csv_text([[i, *self.params[i], ""]])[:-1]
        return p

    def index(self, text: str) -> int | None:
        """The point a line names (its first field), if it is one of this sweep's."""
        first = text.split(",", 1)[0]
        if not (first.isascii() and first.isdigit()) or len(first) > 12 or (len(first) > 1 and first[0] == "0"):
            return None
        i = int(first)
        return i if i < len(self.params) else None

    def row(self, text: str) -> int | None:
        """The point of a whole, valid row of this sweep, else None."""
        i = self.index(text)
        if i is None or not text.startswith(self.prefix(i)):
            return None
        body, _, crc = text.rpartition(",")
        if crc != _crc(body):
            return None
        values = body[len(self.prefix(i)) :].split(",")
        if len(values) != self.nresults:
            return None
        for v in values:
            if v == "":
                continue
            try:
                if not math.isfinite(float(v)):
                    return None
            except ValueError:
                return None
        return i

    def torn(self, text: str) -> bool:
        """A row of this sweep cut short, or with its results damaged."""
        i = self.index(text)  # a line of digits alone was cut inside its point number
        if i is None:
            return False
        p = self.prefix(i)
        return p.startswith(text) or (text.startswith(p) and self.row(text) is None)

    def _starts_row(self, text: str, k: int) -> bool:
        """Whether a row of this sweep could start at `text[k]`: a point number and its comma, or
        the start of a point number ending the line."""
        i = self.index(text[k : k + 14])  # a point number has at most 12 digits
        return i is not None and (text.startswith(f"{i},", k) or text[k:].isdigit())

    def pieces(self, text: str) -> list[tuple[int, int]] | None:
        """A line made of this sweep's rows, each cut short but perhaps the last, glued together
        (writes cut off and followed by others): the (start, end) of the whole row in it, if any,
        as a list; None if the line is not made so."""
        starts = [0] + [k for k in range(1, len(text)) if text[k].isdigit() and self._starts_row(text, k)]
        made: dict[int, list[tuple[int, int]] | None] = {}  # start -> the rest's answer
        for s in reversed(starts):
            rest = text[s:]
            if self.row(rest) is not None:
                made[s] = [(s, len(text))]
            elif self.torn(rest):
                made[s] = []
            else:
                made[s] = next(
                    (made[k] for k in starts if k > s and made[k] is not None and self.torn(text[s:k])), None
                )
        return made[0]


def inspect(data: bytes, header: Sequence[str], params: Sequence[Sequence[object]], name: str) -> CsvState:
    """Read a sweep CSV's bytes: which points are done, what to repair, or `InputError` (module doc)."""
    if not data:
        return CsvState(frozenset())
    rows = _Rows(header, params)
    lines = data.split(b"\n")
    tail = lines.pop()  # the part after the last newline: empty unless the last line was cut short
    if not lines:
        return _header_only(rows, tail, name)
    _check_header(rows, lines[0], name)
    kept = _Kept(name, [lines[0]])
    for n, raw in enumerate(lines[1:], start=2):
        _read_line(rows, kept, raw, n)
    if tail:
        if rows.pieces(tail.decode("ascii", "replace")) is None:  # the last line, cut short (its points run again)
            raise InputError("out", f"{name} line {len(lines) + 1} is not a point of this sweep", ALLOWED)
        if not kept.repairs:
            return CsvState(frozenset(kept.done), truncate_to=len(data) - len(tail), repairs=("a last line cut short",))
        kept.repairs["a last line cut short"] += 1
    return kept.state()


def _header_only(rows: _Rows, tail: bytes, name: str) -> CsvState:
    """A file of one line and no newline: a header cut short (cut off), else not a sweep CSV."""
    if rows.header.encode().startswith(tail):
        return CsvState(frozenset(), truncate_to=0, repairs=("a header cut short",))
    raise InputError("out", f"{name} exists and is not a sweep CSV", ALLOWED)


def _check_header(rows: _Rows, first: bytes, name: str) -> None:
    """The first line must be this sweep's header."""
    if first != rows.header.encode():
        if b"," in first:
            raise InputError("out", f"{name} exists with other columns", ALLOWED)
        raise InputError("out", f"{name} exists and is not a sweep CSV", ALLOWED)


@dataclass
class _Kept:
    """The lines a repair keeps (the header first), each point's row and line number, and the
    repairs counted so far."""

    name: str
    keep: list[bytes]
    done: dict[int, tuple[bytes, int]] = field(default_factory=dict)
    repairs: Counter = field(default_factory=Counter)

    def add(self, i: int, raw: bytes, n: int) -> None:
        """Point `i`'s row `raw`, on line `n`: kept once; the same row again is a repeat, another is refused."""
        if i not in self.done:
            self.done[i] = (raw, n)
            self.keep.append(raw)
        elif self.done[i][0] == raw:
            self.repairs["a repeated row"] += 1
        else:
            raise InputError(
                "out",
                f"{self.name} lines {self.done[i][1]} and {n} give point {i} different results",
                "remove the wrong row (or both, and the point runs again)",
            )

    def state(self) -> CsvState:
        """The points done, and the lines to write anew if anything was repaired."""
        if not self.repairs:
            return CsvState(frozenset(self.done))
        what = tuple(f"{k} ({v})" if v > 1 else k for k, v in self.repairs.items())
        return CsvState(frozenset(self.done), keep=tuple(self.keep), repairs=what)


def _read_line(rows: _Rows, kept: _Kept, raw: bytes, n: int) -> None:
    """Line `n` (after the header, before the tail): a row, a blank line, rows cut short and glued, or refused."""
    text = raw.decode("ascii", "replace")
    i = rows.row(text)
    if i is not None:
        kept.add(i, raw, n)
    elif not text:
        kept.repairs["a blank line"] += 1
    elif (whole := rows.pieces(text)) is not None:
        kept.repairs["a row cut short"] += 1
        for a, b in whole:
            kept.add(rows.row(text[a:b]), raw[a:b], n)  # type: ignore[arg-type]
    else:
        raise InputError("out", f"{kept.name} line {n} is not a point of this sweep", ALLOWED)


class SweepFile:
    """The output of one sweep run: opened, locked, checked and repaired, then appended to.

    Use as a context manager; `open` returns the points already done. A file this run created and
    never wrote a row to is removed again on the way out, with the folders `open` created for it."""

    def __init__(self, path: str | Path, header: Sequence[str], params: Sequence[Sequence[object]]) -> None:
        self.path = check_output_file(path, "out")
        self.target = output_target(self.path, "out")  # what a symlink names: appended to and replaced
        self.header, self.params = header, params
        self.fd = -1
        self.created = False
        self.written = 0
        self.made: list[Path] = []  # folders open() created: removed again with a file that got no row

    def __enter__(self) -> SweepFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        if not os.path.lexists(self.target):  # no row written: nor the folders open() created
            remove_empty(self.made)

    def open(self) -> frozenset[int]:
        """Lock, check and repair the file (module docstring); the points that already have a row."""
        self.made = make_dirs(self.target.parent, "out")
        try:
            return self._open()
        except OSError as e:
            raise InputError(
                "out", f"cannot write {str(self.path)!r}: {e.strerror or e}", "a file in a folder you may write to"
            ) from None

    def _open(self) -> frozenset[int]:
        for _ in range(3):  # a repair replaces the file: lock and read the new one
            self._lock()
            st = os.fstat(self.fd)
            data = os.pread(self.fd, st.st_size, 0)
            state = inspect(data, self.header, self.params, str(self.path))
            if state.keep is not None:
                self._replace(b"".join(line + b"\n" for line in state.keep))
            elif state.truncate_to is not None:
                os.ftruncate(self.fd, state.truncate_to)
            if state.repairs:  # said once the repair is on disk
                warnings.warn(
                    f"{self.path}: repaired {', '.join(state.repairs)}; each point keeps one row, lost ones run again",
                    stacklevel=2,
                )
            if state.keep is None:
                return state.done
        raise InputError("out", f"{self.path} keeps changing while dse repairs it", "one dse sweep per file at a time")

    def _lock(self) -> None:
        """Open (creating if need be) and lock the file, making sure the lock is on what the path names."""
        while True:
            self.close()
            try:
                self.fd = os.open(self.target, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NONBLOCK, 0o666)
                self.created = True
            except FileExistsError:
                self.fd = os.open(self.target, os.O_RDWR | os.O_NONBLOCK)  # a FIFO put there: no wait
            if not stat.S_ISREG(os.fstat(self.fd).st_mode):
                raise InputError("out", f"{str(self.path)!r} is not a regular file", "a regular file or a new name")
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise InputError(
                    "out", f"another dse sweep is writing {self.path}", "one dse sweep per file at a time"
                ) from None
            try:
                same = os.path.samestat(os.fstat(self.fd), os.stat(self.target))
            except FileNotFoundError:
                same = False
            if same:
                return

    def _replace(self, data: bytes) -> None:
        """Write `data` as the file's whole new content (module docstring): the old file stays
        whole unless every byte of the new one is on disk."""
        fd, tmp = temp_beside(self.target)
        try:
            write_all(fd, data)
            os.fchmod(fd, os.fstat(self.fd).st_mode & 0o777)
            os.fsync(fd)
            os.close(fd)
            fd = -1
            os.replace(tmp, self.target)
            sync_folder(self.target.parent)
        except OSError as e:
            raise write_failure("out", str(self.path), e, kept=True) from None
        finally:
            if fd >= 0:
                os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def append(self, rows: list[list]) -> None:
        """Append rows (the header first into an empty file) with one write, so a kill cuts one
        line at most; a write that fails part-way is cut back to where it began (module docstring)."""
        text = row_lines(rows)
        start = os.fstat(self.fd).st_size
        if start == 0:
            text = csv_text([[*self.header, CRC]]) + text
        os.lseek(self.fd, start, os.SEEK_SET)
        try:
            write_all(self.fd, text.encode())
        except OSError as e:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, start)
            kept = "the rows before are kept: the same command resumes" if start else "nothing was written"
            raise RunError(f"out: cannot write {str(self.path)!r}: {e.strerror or e}; {kept}") from None
        self.written += len(rows)

    def close(self) -> None:
        """Close the file (releasing its lock); a file this run created and left empty is removed."""
        if self.fd < 0:
            return
        if self.created and self.written == 0 and os.fstat(self.fd).st_size == 0:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.target)
            self.created = False
        os.close(self.fd)  # closing releases the lock
        self.fd = -1
