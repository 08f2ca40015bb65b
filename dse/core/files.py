"""Files dse reads and writes: one-line errors for unusable paths, TOML and text input, safe output.

Every path a user gives goes through here, so an empty path, a directory where a file belongs, a
missing or unreadable file, non-UTF-8 bytes or a place dse cannot write is one `InputError` naming
the field, never a traceback.

Outputs, the rules every command follows (checked before any work runs):

- **Written in one go** (reports, figures, summaries, converted workloads, traces): written whole
  to a temporary file beside the output, every byte checked (short writes looped on), fsynced, then
  renamed into place and the folder fsynced (`atomic_output`, `write_atomic`). A run that stops or
  fails half-way leaves the old file byte for byte, or none, never half of one. A full disk, a
  file size limit (``ulimit -f``) or an I/O error is one line and exit 1 (`RunError`: not bad
  input); a place dse may not write is one line and exit 2.
- **Symlinks are followed**: an output that is a symlink is written beside the file the link
  names (at the end of its chain) and renamed onto it, so the link stays a link and its target gets
  the whole new content; a link to a missing file creates that file. A symlink loop is refused.
- **Only regular files are replaced**: a directory, FIFO, character or block device or socket
  where an output goes is refused in one line (exit 2), never opened, written or replaced.
- **Folders**: the folder of an output FILE must exist already, as for ``cp`` or matplotlib's
  ``savefig`` (``--plot nosuch/x.png`` is refused, naming the folder). The exceptions are the
  resumable stores, a sweep's CSV and a study's journal, which create their folder (with
  ``mkdir -p``) because a fresh clone's ``studies/out/`` does not exist yet (a sweep that writes
  no row removes its file and the folders it created). An output FOLDER
  (``reproduce --out``, ``study report --out``, ``libra-compare --out``) is created by
  `output_folder` once the run's input is accepted, and removed again if the run fails before
  writing anything in it.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import stat
import tempfile
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from dse.core.errors import InputError, RunError
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
        first = os.read(fd, min(st.st_size, cap) + 1)  # the whole file in one buffer, as a rule
        chunks, got = [first], len(first)
        while first:  # a file that grew, or a short read: go on, never past the limit
            if got > cap:
                check_input(limit, got, field, "bytes")
            block = os.read(fd, min(1 << 20, cap + 1 - got))
            if not block:
                break
            chunks.append(block)
            got += len(block)
        return first if len(chunks) == 1 else b"".join(chunks)
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


def read_text(path: str | Path, field: str, limit: str = "text_bytes") -> str:
    """The UTF-8 text of an existing regular file (size-limited: `read_bytes`)."""
    data = read_bytes(path, field, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(field, f"{str(path)!r} is not UTF-8 text (byte {e.start})", "a UTF-8 text file") from None


#: A TOML file (sweep, study, space, placement) may hold this share of the text limit: tomllib
#: parses a few microseconds per value, so 4 MiB (by default) is parsed in seconds; real ones hold a few KiB.
TOML_SHARE = 16


def read_toml(path: str | Path, field: str) -> dict[str, Any]:
    """A TOML file as a dict; an unreadable, binary, malformed, too deeply nested or too large file
    (over 1/`TOML_SHARE` of ``DSE_MAX_TEXT_BYTES``) is one `InputError`."""
    text = read_text(path, field)
    share = input_limit("text_bytes") // TOML_SHARE
    if len(text) > share:
        raise InputError(
            field,
            f"{len(text):,} bytes of TOML, more than the limit of {share:,} (1/{TOML_SHARE} of DSE_MAX_TEXT_BYTES)",
            f"a smaller file; or raise the limit: DSE_MAX_TEXT_BYTES={TOML_SHARE * len(text)} dse ...",
        )
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(field, f"{Path(path).name} is not valid TOML: {e}") from None
    except RecursionError:
        raise InputError(field, f"{Path(path).name} nests tables or arrays too deeply", "a flatter TOML file") from None


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


# ----------------------------------------------------------------------------- output
def output_target(path: str | Path, field: str) -> Path:
    """Where writing `path` lands: `path` itself, or for a symlink the file it names at the end of
    its chain (which a write creates if it is missing). A symlink loop is one `InputError`."""
    p = _path(path, field)
    if not os.path.islink(p):
        return p
    try:
        os.stat(p)
    except FileNotFoundError:
        pass  # a link to a missing file: the write creates its target
    except OSError as e:
        raise InputError(field, f"cannot follow the symlink {str(path)!r}: {e.strerror or e}", "a file name") from None
    return Path(os.path.realpath(p))


def _existing(target: Path, shown: str, field: str) -> os.stat_result | None:
    """The status of an output that exists (None if it does not): a directory, FIFO, device or
    socket is refused, so dse never writes into or replaces one."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return None
    except OSError as e:  # a file where a folder of the path should be, say
        raise InputError(field, f"cannot write {shown!r}: {e.strerror or e}", "a file name") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(field, f"{shown!r} is a directory", "a file name")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(field, f"{shown!r} is {_kind(st.st_mode)}, not a regular file", "a regular file or a new name")
    return st


def _folder_of(target: Path, shown: str, field: str) -> None:
    """The folder of a file written in one go must exist (dse does not create it) and be writable."""
    parent = target.parent
    if not parent.is_dir():
        if parent.exists() or os.path.islink(parent):
            raise InputError(field, f"cannot create {shown!r}: {str(parent)!r} is not a directory")
        raise InputError(field, f"no folder {str(parent)!r} for {shown!r}", "an existing folder: create it first")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(field, f"cannot write in {str(parent)!r} (permission denied)", "a folder you may write to")


def check_output_file(path: str | Path, field: str, *, whole: bool = False) -> Path:
    """An output file dse may write (module docstring), checked before any work; returns `path`.

    An existing output must be a regular file dse may write (a symlink is followed to it); a
    directory, FIFO, device or socket is refused. `whole`: the file is written in one go and
    renamed into place, so its folder must exist and be writable; otherwise (a resumable store:
    a sweep CSV, a study journal) the nearest existing folder must be, and dse creates the rest."""
    p = _path(path, field)
    target = output_target(p, field)
    st = _existing(target, str(path), field)
    if st is not None and not os.access(target, os.R_OK | os.W_OK):
        raise InputError(field, f"cannot write {str(path)!r} (permission denied)")
    if whole:
        _folder_of(target, str(path), field)
    elif st is None:
        _writable_parent(target, field)
    return p


def check_outputs_in(folder: str | Path, names: Iterable[str], field: str) -> None:
    """`check_output_file(whole=True)` for each file `names` that a command may write in its
    output folder, if the folder already exists: a FIFO, device, socket or directory sitting where
    one goes is refused before any work."""
    if not Path(folder).is_dir():
        return  # created by this run: nothing sits in it
    for name in names:
        check_output_file(Path(folder) / name, field, whole=True)


def check_output_dir(path: str | Path, field: str) -> Path:
    """An output folder dse may create or write into (a symlink to a folder is followed)."""
    p = _path(path, field)
    if p.exists():
        if not p.is_dir():
            raise InputError(field, f"{str(path)!r} exists and is not a directory", "a folder name")
        if not os.access(p, os.W_OK | os.X_OK):
            raise InputError(field, f"cannot write in {str(path)!r} (permission denied)")
    elif os.path.islink(p):
        raise InputError(field, f"{str(path)!r} is a symlink that leads nowhere", "a folder name")
    else:
        _writable_parent(p, field)
    return p


def make_dirs(path: Path, field: str) -> list[Path]:
    """`mkdir -p`, with an `InputError` instead of an OSError; returns the folders it created,
    innermost first (for `remove_empty`)."""
    made: list[Path] = []
    q = path
    while not q.exists() and not os.path.islink(q) and q != q.parent:
        made.append(q)
        q = q.parent
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(field, f"cannot create the folder {str(path)!r}: {e.strerror or e}") from None
    return made


def remove_empty(folders: Iterable[Path]) -> None:
    """Remove `folders` (innermost first) while they are empty: what a run created and left unused."""
    for d in folders:
        try:
            d.rmdir()
        except OSError:  # not empty (something was written: it is kept for the next run), or gone
            break


@contextlib.contextmanager
def output_folder(path: str | Path, field: str) -> Iterator[Path]:
    """An output folder (`check_output_dir`), created with its missing parents as the block starts;
    if the block fails (bad input, an error, Ctrl-C), the folders it created are removed again
    as long as they are empty, so a run that wrote nothing leaves nothing."""
    p = check_output_dir(path, field)
    made = make_dirs(p, field)
    try:
        yield p
    except BaseException:
        remove_empty(made)
        raise


def write_failure(field: str, shown: str, e: OSError, *, kept: bool) -> InputError | RunError:
    """The one-line error of a write that failed: a place dse may not write is bad input (exit 2);
    a full disk, a file size limit or an I/O error is a failed run (`RunError`, exit 1). `kept`:
    the previous file is still there, whole."""
    what = e.strerror or str(e)
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return InputError(field, f"cannot write {shown!r}: {what}", "a place you may write to")
    return RunError(
        f"{field}: cannot write {shown!r}: {what}; " + ("the previous file is kept" if kept else "it was not created")
    )


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` to `fd`, looping on short writes; a write that writes nothing
    (a full disk reported that way) is `ENOSPC`. An error is raised as the OSError it is."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[n:]


def sync_folder(folder: Path) -> None:
    """fsync a folder (so a rename in it is on disk); best effort where a folder cannot be synced."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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
    """Yields a temporary path beside the output; the block writes it whole, and only then is it
    fsynced and renamed onto the output (module docstring: a symlink is followed, the folder must
    exist, a special file is refused). Any failure removes the temporary file and leaves the
    previous output byte for byte as it was; a failed write is `write_failure`'s one line."""
    shown = str(path)
    target = output_target(path, field)
    st = _existing(target, shown, field)
    if st is None:
        _folder_of(target, shown, field)
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
    try:
        fd, tmp = temp_beside(target)
    except OSError as e:
        raise write_failure(field, shown, e, kept=st is not None) from None
    os.close(fd)
    try:
        os.chmod(tmp, mode)  # mkstemp makes 0600: the usual permissions, or the replaced file's
        yield Path(tmp)
        fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        _existing(target, shown, field)  # a FIFO or folder put there meanwhile is refused, not replaced
        os.replace(tmp, target)
        sync_folder(target.parent)
    except OSError as e:
        raise write_failure(field, shown, e, kept=st is not None) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | Path, data: str | bytes, field: str = "out") -> None:
    """Write a whole file atomically (see `atomic_output`), every byte checked (`write_all`)."""
    raw = data.encode() if isinstance(data, str) else data
    with atomic_output(path, field) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
        try:
            write_all(fd, raw)
        finally:
            os.close(fd)
