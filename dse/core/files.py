"""Files dse reads and writes: one-line errors for unusable paths, TOML and text input, atomic output.

Every path a user gives goes through here, so an empty path, a directory where a file belongs, a
missing or unreadable file, non-UTF-8 bytes or a place dse cannot write is one `InputError` naming
the field, never a traceback. Outputs written in one go (reports, figures, summaries) are written to
a temporary file beside them and renamed into place, so a run that stops half-way leaves the old
file or none, never half of one.
"""

from __future__ import annotations

import contextlib
import glob
import os
import stat
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.limits import check_input, input_limit


def _path(path: str | Path, field: str) -> Path:
    if not str(path).strip():
        raise InputError(field, "an empty path", "a file name")
    return Path(path)


def read_bytes(path: str | Path, field: str, limit: str = "text_bytes") -> bytes:
    """The bytes of an existing regular file of at most `input_limit(limit)` bytes.

    A FIFO, device or socket is refused without opening it for a blocking read (a FIFO would wait
    forever, ``/dev/zero`` never ends); the size is checked from the open file before reading, and
    no more than the limit is ever read (a file growing meanwhile is refused too)."""
    p = _path(path, field)
    if p.is_dir():
        raise InputError(field, f"{str(path)!r} is a directory", "a file")
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(field, f"no such file {str(path)!r}") from None
    except OSError as e:
        raise InputError(field, f"cannot read {str(path)!r}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(field, f"{str(path)!r} is {_kind(st.st_mode)}, not a regular file", "a file")
        check_input(limit, st.st_size, field, "bytes")
        cap = input_limit(limit)
        chunks: list[bytes] = []
        got = 0
        while True:
            block = os.read(fd, min(1 << 20, cap + 1 - got))
            if not block:
                break
            chunks.append(block)
            got += len(block)
            if got > cap:
                check_input(limit, got, field, "bytes")
        return b"".join(chunks)
    except OSError as e:
        raise InputError(field, f"cannot read {str(path)!r}: {e.strerror or e}") from None
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    """What a non-regular file is, for a message."""
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "a special file"


def read_text(path: str | Path, field: str) -> str:
    """The UTF-8 text of an existing regular file (size-limited: `read_bytes`)."""
    data = read_bytes(path, field)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(field, f"{str(path)!r} is not UTF-8 text (byte {e.start})", "a UTF-8 text file") from None


def read_toml(path: str | Path, field: str) -> dict[str, Any]:
    """A TOML file as a dict; an unreadable, binary or malformed file is one `InputError`."""
    text = read_text(path, field)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(field, f"{Path(path).name} is not valid TOML: {e}") from None


def _writable_parent(p: Path, field: str) -> None:
    """The nearest existing ancestor of `p` must be a directory dse may write into."""
    parent = p.parent
    while not parent.exists():
        if parent == parent.parent:
            break
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(field, f"cannot create {str(p)!r}: {str(parent)!r} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(field, f"cannot write in {str(parent)!r} (permission denied)", "a folder you may write to")


def check_output_file(path: str | Path, field: str) -> Path:
    """An output file dse may create or extend: not empty, not a directory, in a writable place."""
    p = _path(path, field)
    if p.is_dir():
        raise InputError(field, f"{str(path)!r} is a directory", "a file name")
    if p.exists():
        if not p.is_file():
            raise InputError(field, f"{str(path)!r} is not a regular file", "a file name")
        if not os.access(p, os.R_OK | os.W_OK):
            raise InputError(field, f"cannot write {str(path)!r} (permission denied)")
    else:
        _writable_parent(p, field)
    return p


def check_output_dir(path: str | Path, field: str) -> Path:
    """An output folder dse may create or write into."""
    p = _path(path, field)
    if p.exists():
        if not p.is_dir():
            raise InputError(field, f"{str(path)!r} exists and is not a directory", "a folder name")
        if not os.access(p, os.W_OK | os.X_OK):
            raise InputError(field, f"cannot write in {str(path)!r} (permission denied)")
    else:
        _writable_parent(p, field)
    return p


def make_dirs(path: Path, field: str) -> None:
    """`mkdir -p`, with an `InputError` instead of an OSError."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(field, f"cannot create the folder {str(path)!r}: {e.strerror or e}") from None


def temp_beside(target: Path) -> tuple[int, str]:
    """A new temporary file ``.NAME.PID.XXXX.tmp`` beside `target` (fd, path), after removing the
    ones a killed dse process left there (their PID no longer runs)."""
    prefix = f".{target.name}."
    with contextlib.suppress(OSError):
        for old in target.parent.glob(f"{glob.escape(prefix)}*.tmp"):
            pid = old.name[len(prefix) :].split(".", 1)[0]
            if pid.isdigit() and not pid_alive(int(pid)):
                with contextlib.suppress(OSError):
                    old.unlink()
    return tempfile.mkstemp(prefix=f"{prefix}{os.getpid()}.", suffix=".tmp", dir=target.parent)


def pid_alive(pid: int) -> bool:
    """Whether process `pid` runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def atomic_output(path: str | Path, field: str = "out") -> Iterator[Path]:
    """Yields a temporary path beside `path`; renamed onto `path` only when the block succeeds."""
    target = Path(path)
    make_dirs(target.parent, field)
    try:
        fd, tmp = temp_beside(target)
    except OSError as e:
        raise InputError(field, f"cannot write in {str(target.parent)!r}: {e.strerror or e}") from None
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual permissions
        yield Path(tmp)
        os.replace(tmp, target)
    except OSError as e:
        raise InputError(field, f"cannot write {str(target)!r}: {e.strerror or e}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | Path, data: str | bytes, field: str = "out") -> None:
    """Write a whole file atomically (see `atomic_output`)."""
    with atomic_output(path, field) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
