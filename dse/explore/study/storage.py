"""Where studies live: Optuna storages, the locks workers share, dead workers, damaged journals.

- `open_storage`: a journal file (the default: embedded, safe for several processes on one
  machine), ``sqlite:///file.db`` or ``postgresql+psycopg://...`` (several machines). A SQLite or
  PostgreSQL storage's tables are created under a lock, so two commands starting at once on a fresh
  database do not race each other.
- A journal is Optuna's line-based log: one JSON record per line, appended under `FlockLock`. A
  process killed while appending leaves its last line cut short; one that later appends after it
  would glue its record to the fragment and make the file unreadable for good. So before a study
  runs, `repair_journal` cuts a damaged end (a fragment, or whole lines that are not records) back to
  the last complete record, under the journal's own lock, and says so in one line. Readers (list,
  report) leave the file as it is: Optuna skips a damaged end when reading. Damage anywhere else,
  or a file that is not a journal at all, is refused with one line and never modified.
- PostgreSQL storages get a connect and a statement timeout (`network_timeouts`), so a server that
  accepts and never answers is one line within seconds: ``DSE_STORAGE_CONNECT_TIMEOUT`` (default
  10 s, libpq's least is 2 s) and ``DSE_STORAGE_STATEMENT_TIMEOUT`` (default 60 s; 0: none), given
  to libpq unless the URL sets them. MySQL URLs are refused in one line, before any connection.
- No secret in any message: `redact` shows ``user:password@`` as ``user:***@`` and ``password=...``
  as ``password=***`` in every message and result that carries a storage URL or a driver's error
  (and the URL's password, 4 characters or more, wherever the driver repeats it). An in-memory
  SQLite URL, or ``:memory:``, is refused (it lives in one process; workers and reports need one storage).
- `storage_lock`: the lock under which a worker counts trials and creates one (a file lock beside a journal
  or SQLite file, a PostgreSQL advisory lock otherwise).
- `fail_dead`: running trials whose worker process on this host is gone are marked failed, so the
  next worker replaces them. Each running trial records its worker's host and process id.

What a trial holds (`trial_record`, `trial_params`): its sampled parameters, the worker that runs
it (`WORKER_ATTR`, written under `storage_lock` right after the trial is created) and, once measured,
one user attribute `RECORD_ATTR` ("dse"): a dict of the design's record (topology, times, bound,
cost...) and, under `FIXED_KEY`, the choices its space leaves no freedom in (a kind, a chunk count
or a scheduler with one allowed value), which are not Optuna parameters since they would cost one
journal append each and tell a sampler nothing. Studies of layout 1 (the record as
separate user attributes, every choice a parameter) are read as they are: both functions take
either layout, trial by trial, and such a study keeps writing every choice as a parameter
(`LAYOUT_ATTR`), so its samplers see the same parameters in every trial.

Durability of a journal: see `dse.explore.study.journal` (in short, no finished trial is lost to a kill
-9, a power loss or an OS crash; what a running trial wrote may be, and the trial is replaced).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import socket
import stat
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.files import check_output_file, make_dirs, output_folder, pid_alive
from dse.explore.study.storage_urls import network_timeouts, redact  # noqa: F401  (public here too)

WORKER_ATTR = "dse_worker"
RECORD_ATTR = "dse"  # a trial's record, one dict (one journal append); see the module docstring
FIXED_KEY = "fixed_params"  # in the record: the choices the space fixed, by parameter name
LAYOUT_ATTR = "dse_layout"  # a study's trial layout: absent on a layout-1 study
LAYOUT = 2  # fixed choices in the record, not parameters; layout 1: every choice a parameter
SQLITE = "sqlite:///"
_TAIL = 1 << 20  # how much of a journal's end to read when looking for damage
_NOT_JOURNAL = "a journal file written by dse study run, or a new file name"
_KINDS = "a journal file path, sqlite:///file.db, postgresql+psycopg://..."
STUDIES_OUT = Path("studies") / "out"  # where `dse study run studies/<file>.toml` writes by default


def default_storage(out_dir: str, study_name: str) -> str:
    """The journal file a study uses when no --storage is given."""
    return str(Path(out_dir) / f"{study_name.split('.')[0]}.journal")


def default_journals(folder: Path = STUDIES_OUT) -> list[str]:
    """The journal files in `folder` (``studies/out/`` of the current folder), sorted by name."""
    return sorted(str(p) for p in folder.glob("*.journal") if p.is_file())


def storage_for(name: str, storage: str | None, folder: Path = STUDIES_OUT) -> str:
    """`storage`, or the journal `dse study run` writes study `name` to by default:
    ``studies/out/<name up to its first dot>.journal``. When that file does not exist, one line
    lists the studies the journals in ``studies/out/`` hold."""
    if storage is not None:
        return storage
    url = default_storage(str(folder), name)
    if Path(url).is_file():
        return url
    held = [n for j in default_journals(folder) for n in _names_or_none(j)]
    raise InputError(
        "study",
        f"no study {name!r}: there is no {url} (where dse study run writes it by default)",
        ", ".join(held) or "--storage S, or dse study run on its file first",
    )


def _names_or_none(url: str) -> list[str]:
    try:
        return study_names(url)
    except InputError:  # a damaged or foreign file among the journals: not a place to look
        return []


def study_names(url: str) -> list[str]:
    """The names of the studies on a storage that must exist."""
    return _names(open_storage(url, must_exist=True), url)


def _names(storage: Any, url: str) -> list[str]:
    with reading(url):
        return [s.study_name for s in storage.get_all_studies()]


def load_study(name: str, url: str) -> Any:
    """Optuna study `name` on `url`; an unknown name is one line listing the studies there."""
    import optuna

    storage = open_storage(url, must_exist=True)
    names = _names(storage, url)
    if name not in names:
        raise InputError("study", f"no study {name!r} on {redact(url)}", ", ".join(names) or "none: it holds no study")
    with reading(url):
        return optuna.load_study(study_name=name, storage=storage)


def open_storage(url: str, *, must_exist: bool = False, repair: bool = False) -> Any:
    """An Optuna storage from a journal file path, ``sqlite:///...`` or ``postgresql+psycopg://...``.

    `must_exist`: the storage must already exist (reports and lists, which only read). `repair`: cut
    a damaged journal end before appending (`repair_journal`); only `dse study run` asks for it."""
    import optuna
    from optuna.storages.journal import JournalStorage

    from dse.explore.study.journal import SyncedJournal

    if not isinstance(url, str) or not url.strip():
        raise InputError("storage", "an empty storage", _KINDS)
    if url.startswith("sqlite:"):
        return _open_sqlite(url, must_exist)
    if url.startswith("postgresql"):
        try:
            with storage_lock(url, "storage-init"):
                return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": network_timeouts(url)})
        except ImportError as e:
            raise _missing_driver(url, e) from None
        except InputError:
            raise
        except Exception as e:  # connection refused or timed out, bad URL, authentication...
            raise InputError("storage", f"cannot open {redact(url)!r}: {_error_text(e, url)}") from None
    if "://" in url:
        raise InputError("storage", f"unsupported storage {redact(url)!r}", _KINDS)
    if url.strip() == ":memory:":  # not a journal file to create in the current folder
        raise InputError("storage", "':memory:': dse has no in-memory storage (workers and reports need one)", _KINDS)
    path = check_output_file(url, "storage")
    if must_exist and not path.exists():
        raise InputError("storage", f"no such journal file {url!r}", "the --storage a study ran on")
    make_dirs(path.parent, "storage")
    try:
        check_journal(path, repair=repair)
        with reading(url):
            return JournalStorage(SyncedJournal(str(path), FlockLock(str(path))))
    except OSError as e:
        raise InputError(
            "storage", f"cannot use {url!r}: {e.strerror or e}", "a journal file in a folder you may write to"
        ) from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


def _error_text(e: BaseException, url: str) -> str:
    """A driver's error as one line with no secret: its type and its first line."""
    return redact(f"{type(e).__name__}: {_first_line(e)}", url)


def _missing_driver(url: str, e: ImportError) -> InputError:
    return InputError(
        "storage",
        f"{url.split(':')[0]} storage needs a driver that is not installed ({e.name})",
        "pip install 'dse[postgres]'",
    )


def _open_sqlite(url: str, must_exist: bool) -> Any:
    """A SQLite storage ``sqlite:///file.db`` (missing folders created). One that cannot be opened
    leaves no database, folder or lock file this call created (a command waiting on the lock fails
    on the same file; the database is removed under the lock, before anyone else can use it)."""
    import optuna

    path = Path(url[len(SQLITE) :]) if url.startswith(SQLITE) else Path()
    if not url.startswith(SQLITE) or str(path) in ("", ".", ":memory:") or "mode=memory" in url:
        raise InputError(
            "storage",
            f"{url!r} is not a SQLite file (an in-memory database lives in one process only)",
            "sqlite:///path/to/file.db",
        )
    if must_exist and not path.is_file():
        raise InputError("storage", f"no such SQLite file {url!r}", "the --storage a study ran on")
    check_output_file(path, "storage")
    lock = Path(f"{path}.dse-lock")
    new_lock = not lock.exists()
    try:
        with output_folder(path.parent, "storage"), storage_lock(url, "storage-init"):
            new_db = not path.exists()
            try:
                return optuna.storages.RDBStorage(url)
            except BaseException:
                if new_db:
                    with contextlib.suppress(OSError):
                        path.unlink()
                raise
    except ImportError as e:
        raise _missing_driver(url, e) from None
    except Exception as e:  # a file that is no database, a folder that cannot be written...
        if new_lock:
            with contextlib.suppress(OSError):
                lock.unlink()
        if isinstance(e, InputError):
            raise
        raise InputError("storage", f"cannot open {url!r}: {_error_text(e, url)}") from None


@contextlib.contextmanager
def reading(url: str) -> Iterator[None]:
    """Turn Optuna's errors on a damaged journal (records that do not parse) into one line."""
    try:
        yield
    except (json.JSONDecodeError, KeyError) as e:
        raise InputError(
            "storage",
            f"{redact(url)} is damaged inside ({type(e).__name__}: {_first_line(e)}); dse repairs only a damaged end",
            "the journal from a backup, or a new --storage",
        ) from None
    except ValueError as e:
        if "log format" not in str(e):
            raise
        raise InputError(
            "storage",
            f"{redact(url)} is damaged inside (a record cut short); dse repairs only a damaged end",
            "the journal from a backup, or a new --storage",
        ) from None
    except Exception as e:
        if not type(e).__module__.startswith(("sqlalchemy", "psycopg")):
            raise
        raise InputError("storage", f"{redact(url)}: {_error_text(e, url)}") from None


def _is_record(line: bytes) -> bool:
    """Whether `line` is one of Optuna's journal records (a JSON object with an ``op_code``)."""
    try:
        parsed = json.loads(line)
    except ValueError:
        return False
    return isinstance(parsed, dict) and "op_code" in parsed


#: The longest first record a journal may have (Optuna's create-study record is under 1 KiB).
_FIRST_MAX = 1 << 20


def _check_journal_start(path: Path) -> None:
    """Refuse a special file, or a file whose first bytes are no journal record or whose first line
    runs past `_FIRST_MAX`, without blocking and without reading more than that."""
    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        raise InputError("storage", f"{path} is not a regular file", _NOT_JOURNAL)
    with open(path, "rb") as f:
        head = f.readline(_FIRST_MAX)
    if not head.startswith(b'{"op_code":') or (not head.endswith(b"\n") and len(head) < st.st_size):
        raise InputError("storage", f"{path} is not an Optuna journal", _NOT_JOURNAL)


def check_journal(path: Path, *, repair: bool) -> None:
    """Refuse a file that is not a journal; repair (or, for readers, report) a damaged end."""
    if not path.exists() or path.stat().st_size == 0:
        return
    _check_journal_start(path)  # before the lock, so a file that is no journal gets no lock file beside it
    # under the journal's lock no writer is half-way through a record; a reader that may not create
    # the lock file (a read-only folder) looks without it
    with _lock_if_possible(path, required=repair):
        with open(path, "rb") as f:
            first = f.readline(_FIRST_MAX)
            size = os.fstat(f.fileno()).st_size
            start = max(0, size - _TAIL)
            f.seek(start)
            tail = f.read(size - start)
        keep: int | None
        if not first.endswith(b"\n"):
            if not first.startswith(b'{"op_code":'):
                raise InputError("storage", f"{path} is not an Optuna journal", _NOT_JOURNAL)
            keep = 0
        elif not _is_record(first):
            raise InputError("storage", f"{path} is not an Optuna journal", _NOT_JOURNAL)
        else:
            keep = _intact_end(tail, start)
        if keep is None:
            raise InputError(
                "storage",
                f"{path} has no readable record in its last {_TAIL >> 20} MiB",
                "the journal from a backup, or a new --storage",
            )
        if keep == size:
            return
        lost = size - keep
        if not repair:
            if (path, size) not in _REPORTED:  # once per command, though it opens the journal twice
                _REPORTED.add((path, size))
                warnings.warn(
                    f"{path}: its last {lost} bytes are not a whole record (an interrupted write); "
                    "reading up to them. dse study run repairs it",
                    stacklevel=3,
                )
            return
        with open(path, "r+b") as f:
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
        warnings.warn(
            f"{path}: removed a damaged end of {lost} bytes left by an interrupted write; the study "
            "continues from its last complete record",
            stacklevel=3,
        )


@contextlib.contextmanager
def _lock_if_possible(path: Path, *, required: bool) -> Iterator[None]:
    lock = FlockLock(str(path))
    try:
        lock.acquire()
    except OSError:
        if required:
            raise
        yield
        return
    try:
        yield
    finally:
        lock.release()


_REPORTED: set[tuple[Path, int]] = set()


def _intact_end(tail: bytes, start: int) -> int | None:
    """The byte offset just after the last complete, readable record in `tail` (read from `start`)."""
    end = len(tail)
    if not tail.endswith(b"\n"):
        end = tail.rfind(b"\n") + 1  # drop a fragment after the last newline
    while end > 0:
        prev = tail.rfind(b"\n", 0, end - 1) + 1
        if prev == 0 and start > 0:
            return None if not _is_record(tail[:end]) else start + end  # the first line here may be partial
        if _is_record(tail[prev:end]):
            return start + end
        end = prev
    return start if start == 0 else None


class FlockLock:
    """The journal's lock as an flock(2) on a side file (the interface of Optuna's `BaseJournalFileLock`,
    which its journal backend only calls `acquire` and `release` on):
    the kernel releases it when its process dies, so a killed worker never leaves a stale lock
    behind (Optuna's own locks wait 30 s)."""

    def __init__(self, path: str) -> None:
        self._path = f"{path}.flock"
        self._file: Any = None

    def acquire(self) -> bool:
        """Take the lock, waiting as long as another process holds it; True."""
        self._file = open(self._path, "a")
        fcntl.flock(self._file, fcntl.LOCK_EX)
        return True

    def release(self) -> None:
        """Release the lock (nothing if it is not held)."""
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


@contextlib.contextmanager
def storage_lock(url: str, name: str) -> Iterator[None]:
    """An exclusive lock named `name` on the storage at `url`, across processes and machines."""
    if url.startswith("postgresql"):
        import psycopg

        dsn = re.sub(r"^postgresql(\+\w+)?://", "postgresql://", url)
        key = zlib.crc32(f"dse:{name}".encode()) - 2**31
        try:
            conn = psycopg.connect(dsn, autocommit=True, **network_timeouts(url))
        except psycopg.Error as e:
            raise InputError("storage", f"cannot open {redact(url)!r}: {_error_text(e, url)}") from None
        with conn:  # closing the connection releases the lock too
            try:
                conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            except psycopg.Error as e:
                raise InputError("storage", f"{redact(url)}: {_error_text(e, url)}") from None
            try:
                yield
            finally:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        return
    path = url[len(SQLITE) :] if url.startswith(SQLITE) else url
    with open(f"{path}.dse-lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def worker_id() -> str:
    """This worker, as running trials record it: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def fail_dead(study: Any) -> int:
    """Mark failed the running trials whose worker is gone; call it under `storage_lock`.

    A trial of this host whose process no longer exists is gone; so is a running trial with no
    worker recorded at all, since a worker records itself under `storage_lock` right after creating it."""
    from optuna.trial import TrialState

    host = socket.gethostname()
    n = 0
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = t.user_attrs.get(WORKER_ATTR)
        if owner is not None:
            h, _, pid = str(owner).rpartition(":")
            if h != host or not pid.isdigit() or pid_alive(int(pid)):
                continue
        study._storage.set_trial_state_values(t._trial_id, state=TrialState.FAIL)
        n += 1
    return n


def trial_record(trial: Any) -> dict[str, Any]:
    """What dse recorded about a trial's design (topology, times, bound, cost...), in either layout
    (see the module docstring); empty for a trial that recorded nothing (a failed one)."""
    record = trial.user_attrs.get(RECORD_ATTR)
    if isinstance(record, dict):
        return {k: v for k, v in record.items() if k != FIXED_KEY}
    return {k: v for k, v in trial.user_attrs.items() if k not in (WORKER_ATTR, RECORD_ATTR)}


def trial_params(trial: Any) -> dict[str, Any]:
    """Every choice of a trial's design, sampled or fixed by its space, in the order
    `dse.explore.study.spaces.SearchSpace.suggest` makes them (the order of a trial's parameters before the fixed
    ones left them; other names after, as they come)."""
    record = trial.user_attrs.get(RECORD_ATTR)
    fixed = record.get(FIXED_KEY) if isinstance(record, dict) else None
    if not fixed:
        return dict(trial.params)
    return dict(sorted({**trial.params, **fixed}.items(), key=lambda kv: _suggest_rank(kv[0])))


def feasible(trial: Any) -> bool:
    """Whether a trial meets every constraint (a constraint value <= 0 is met)."""
    return all(v <= 0 for v in trial.constraints.values())


_CHOICES = ("dims", "shape", "kind", "bw", "chunks", "scheduler", "queue")  # as SearchSpace.suggest draws them
_CHOICE = re.compile(r"^(?:dims|shape_\d+d|(?:kind|bw)_\d+d_(\d+)|chunks|scheduler|queue)$")


def _suggest_rank(name: str) -> tuple[int, int]:
    """Where a choice named `name` comes in `SearchSpace.suggest`: its kind, then its dimension."""
    m = _CHOICE.match(name)
    if not m:
        return (len(_CHOICES), 0)
    return (_CHOICES.index(name.split("_")[0]), int(m.group(1) or 0))
