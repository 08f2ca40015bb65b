"""Fault classes of dse's outputs: special files where an output goes, short writes and
full disks. Each case runs real `dse` commands in a subprocess (so a FIFO opened by mistake cannot
hang the caller: every run has a timeout) in an empty folder, and returns the promises it broke.

- **special files as outputs** (`special_case`): a FIFO, a character device (``/dev/null``'s, made
  with mknod), a socket, a directory, a symlink to a FIFO, a symlink loop, a symlink to a file or to a
  missing file, placed where a command's output goes (a figure, a converted workload, a trace, a
  sweep CSV, a file of a report's or a reproduction's folder, the folder itself, or any file of the
  per-rank trace `dse workload pipeline` writes: a rank file or its groups file). Promise: the
  special ones are refused in one line, exit 2, nothing in the folder changed; a symlink to a file
  (missing or not) is followed: exit 0, the link still a link, its target holding exactly what the
  command writes to a plain file, nothing else changed, no temporary file left.
- **short writes and full disks** (`short_write_case`): a sweep's repair, a sweep's appends, a study
  report, a reproduction (``--quick``), a figure, a converted workload, an exported trace and a
  pipeline's per-rank trace (four rank files and a groups file) written under ``RLIMIT_FSIZE`` = N
  bytes (Python ignores SIGXFSZ, so writes come back short, then EFBIG), or on a small tmpfs filled
  to a random level when the campaign may mount one. Promise: exit 0 with the complete output, or
  exit 1 with one line and every previous file byte for byte as it was (a file written whole is its
  old or its new content, a sweep CSV its old rows and whole new ones, no half row); no temporary
  file left; then the same command without the limit gives the uninterrupted output, nothing lost
  or doubled.

References (what each command writes to plain files) are computed once per process in a temporary
folder removed at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from dse.testing.faults import ASTRA_WORKLOAD, ROOT, STUDY, SWEEP, Campaign

STUDY_NAME = "bw_split_4d.themis"
#: name -> (argv run in the case folder, the output: a file, or a folder ending in "/", weight)
COMMANDS: dict[str, tuple[list[str], str, int]] = {
    "evaluate --plot": (["evaluate", "2D-SW_SW", "--size", "1MB", "--plot", "{out}"], "o.png", 4),
    "iterate --plot": (["iterate", "in.txt", "-t", "2D-SW_SW", "--plot", "{out}"], "o.png", 3),
    "optimal --plot": (
        ["optimal", "2D-SW_SW", "--size", "1MB", "--chunks", "2", "--work", "1", "--plot", "{out}"],
        "o.png",
        1,
    ),
    "plot sweep": (
        ["plot", "sweep", "in.csv", "--x", "chunks", "--y", "time_ns", "--hue", "scheduler,queue"]
        + ["--facet", "topology,size_bytes", "--out", "{out}"],
        "o.png",
        3,
    ),
    "plot timeline": (["plot", "timeline", "r.json", "--out", "{out}"], "o.png", 3),
    "workload convert": (["workload", "convert", "in.txt", "-o", "{out}", "--force"], "o.toml", 4),
    "workload export": (["workload", "export", "in.txt", "-o", "{prefix}", "--npus", "1", "--force"], "o.0.et", 4),
    "workload pipeline": (
        ["workload", "pipeline", "{prefix}", "--stages", "2", "--dp", "2", "--microbatches", "2"]
        + ["--groups", "--force"],
        "o.0.et",
        4,
    ),
    "sweep": (["sweep", "in.toml", "--out", "{out}"], "o.csv", 4),
    "study report": (["study", "report", STUDY_NAME, "--storage", "s.journal", "--out", "{out}"], "rep/", 4),
    "reproduce --quick": (["reproduce", "themis", "--quick", "--out", "{out}"], "rq/", 2),
}
REFUSED = ("fifo", "chr", "socket", "dir", "link-fifo", "link-loop")
FOLLOWED = ("link-file", "link-missing")
LOCKS = (".dse-lock", ".flock")  # a storage's lock files, beside the journal
_cache: dict[str, object] = {}


def argv_for(name: str, out: str) -> list[str]:
    """The command `name` writing to `out` (a file, a folder, or for traces the file ``PREFIX.0.et``)."""
    prefix = out[: -len(".0.et")] if out.endswith(".0.et") else out
    return [a.replace("{out}", out.rstrip("/")).replace("{prefix}", prefix) for a in COMMANDS[name][0]]


def run_dse(argv: list[str], cwd: Path, *, fsize: int | None = None, timeout: float = 300) -> tuple[int, str, str]:
    """`python -m dse ARGV` in `cwd`: (exit code, stdout, stderr); `fsize`: RLIMIT_FSIZE in bytes. A
    run that outlives `timeout` is killed and reported as exit -9 (a FIFO opened for writing blocks)."""
    limit = (lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))) if fsize is not None else None
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    try:
        p = subprocess.run(
            [sys.executable, "-m", "dse", *argv],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=limit,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return -9, "", f"timed out after {timeout} s"
    return p.returncode, p.stdout, p.stderr


def line_problems(code: int, err: str, codes: tuple[int, ...]) -> list[str]:
    """Exit in `codes`; no traceback; a non-zero exit prints exactly one ``dse: error:`` line (warnings aside)."""
    if "Traceback" in err or code < 0:
        return [f"exit {code}: {err[-300:]!r}"]
    problems = [] if code in codes else [f"exit {code} ({codes} expected): {err[-300:]!r}"]
    lines = [ln for ln in err.splitlines() if not ln.startswith("dse: warning: ")]
    errors = [ln for ln in lines if ln.startswith("dse: error: ")]
    if (code != 0 and (len(errors) != 1 or len(lines) != 1)) or (code == 0 and lines):
        problems.append(f"stderr {err[-300:]!r} (one 'dse: error:' line on failure, nothing else)")
    return problems


def snapshot(folder: Path, max_bytes: int | None = None) -> dict[str, tuple]:
    """Every entry under `folder` (links not followed): its kind, and a file's bytes or a link's
    target; a file over `max_bytes` (if given) by its size and modification time instead."""
    out: dict[str, tuple] = {}
    for dirpath, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(dirpath) / name
            st = os.lstat(p)
            key = str(p.relative_to(folder))
            if stat.S_ISLNK(st.st_mode):
                out[key] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                big = max_bytes is not None and st.st_size > max_bytes
                out[key] = ("file", st.st_size, st.st_mtime_ns) if big else ("file", p.read_bytes())
            else:  # a folder's own size and time change with what is written inside it: its kind alone
                out[key] = (stat.S_IFMT(st.st_mode),)
    return out


def changes(before: dict[str, tuple], after: dict[str, tuple], allowed: set[str] | None = None) -> list[str]:
    """Entries that differ, lock files and `allowed` aside."""
    keys = (set(before) | set(after)) - (allowed or set())
    return sorted(k for k in keys if before.get(k) != after.get(k) and not k.endswith(LOCKS))


def temps(folder: Path) -> list[str]:
    """Temporary files dse left (``.NAME.PID.XXXX.tmp``)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".*.tmp"))


# ----------------------------------------------------------------------------- references
def cache() -> Path:
    """A folder for this process's references, removed at exit."""
    if "dir" not in _cache:
        d = Path(tempfile.mkdtemp(prefix="dse-faults-files-"))
        atexit.register(shutil.rmtree, d, True)
        _cache["dir"] = d
    return _cache["dir"]  # type: ignore[return-value]


def inputs(folder: Path) -> None:
    """The commands' inputs in `folder`: a sweep file and its CSV, a workload, a timeline JSON, a journal."""
    c = cache()
    if not (c / "s.journal").exists():
        (c / "in.toml").write_text(SWEEP)
        (c / "in.txt").write_text(ASTRA_WORKLOAD)
        code, _, err = run_dse(["sweep", "in.toml", "--out", "in.csv"], c)
        assert code == 0, err
        code, out, err = run_dse(["evaluate", "2D-SW_SW", "--size", "1MB", "--json", "--timeline"], c)
        assert code == 0, err
        (c / "r.json").write_text(out)
        run = ["study", "run", str(STUDY), "--only", STUDY_NAME, "--trials", "4", "--storage", "j/s.journal"]
        code, _, err = run_dse(run, c)
        assert code == 0, err
        shutil.copyfile(c / "j" / "s.journal", c / "s.journal")
    for name in ("in.toml", "in.txt", "in.csv", "r.json", "s.journal"):
        shutil.copyfile(c / name, folder / name)


def reference(name: str) -> dict[str, bytes]:
    """What command `name` writes to a plain output: file name (in its folder, for folders) -> bytes."""
    key = f"ref:{name}"
    if key not in _cache:
        d = cache() / name.replace(" ", "_").replace("-", "")
        d.mkdir(exist_ok=True)
        inputs(d)
        out = COMMANDS[name][1]
        code, _, err = run_dse(argv_for(name, out), d)
        assert code == 0, (name, err)
        p = d / out
        if out.endswith("/"):
            _cache[key] = {f.name: f.read_bytes() for f in p.iterdir()}
        elif out.endswith(".0.et"):  # a trace's every file: PREFIX.<rank>.et, and PREFIX.json for groups
            _cache[key] = {f.name: f.read_bytes() for f in d.iterdir() if f.name.startswith(out[: -len("0.et")])}
        else:
            _cache[key] = {out: p.read_bytes()}
    return _cache[key]  # type: ignore[return-value]


def outputs_of(name: str) -> list[str]:
    """Where command `name` writes, relative to its folder: its file, its folder's files, or every
    file of a trace (each rank file, a groups file)."""
    out = COMMANDS[name][1]
    if out.endswith("/"):
        return [f"{out}{f}" for f in reference(name)]
    return sorted(reference(name)) if out.endswith(".0.et") else [out]


# ----------------------------------------------------------------------------- special files
def make_special(path: Path, kind: str, rng: random.Random, content: bytes = b"old\n") -> Path | None:
    """Put a special entry of `kind` at `path`; returns a followed link's target (else None)."""
    elsewhere = path.parent / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    target = elsewhere / f"t{path.suffix}"
    link = str(target.resolve()) if rng.random() < 0.5 else os.path.relpath(target, path.parent)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "chr":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's device
        except PermissionError:
            os.symlink("/dev/null", path)
    elif kind == "socket":
        os.mknod(path, stat.S_IFSOCK | 0o666)
    elif kind == "dir":
        path.mkdir()
        (path / "keep.txt").write_text("keep\n")
    elif kind == "link-fifo":
        os.mkfifo(target)
        os.symlink(link, path)
    elif kind == "link-loop":
        os.symlink(path.name, path)
    else:
        if kind == "link-file":
            target.write_bytes(content)
        os.symlink(link, path)
        return target
    return None


def _place(rng: random.Random, folder: Path, name: str) -> tuple[Path, tuple[str, ...]]:
    """Where the special entry goes for command `name`, and the kinds that may go there: a file
    output's own place; for a folder output, the folder's place (refusals only) or a file in it."""
    out = COMMANDS[name][1]
    if out.endswith(".0.et"):  # one file of a trace's set: a rank file or the groups file
        return folder / rng.choice(sorted(reference(name))), REFUSED + FOLLOWED
    if not out.endswith("/"):
        return folder / out, REFUSED + (FOLLOWED if name != "optimal --plot" else ())  # a slow solve: refusals
    if name == "reproduce --quick" or rng.random() < 0.3:  # a slow reproduction: refusals only
        return folder / out.rstrip("/"), tuple(k for k in REFUSED if k != "dir")
    (folder / out).mkdir()
    return folder / out / rng.choice(sorted(reference(name))), REFUSED + FOLLOWED


def special_case(rng: random.Random, folder: Path) -> list[str]:
    """One special entry where one command's output goes; run it; check the promise (module doc)."""
    names = list(COMMANDS)
    name = rng.choices(names, weights=[COMMANDS[n][2] for n in names])[0]
    out = COMMANDS[name][1]
    inputs(folder)
    place, kinds = _place(rng, folder, name)
    kind = rng.choice(kinds)
    content = b"old\n"
    if name == "sweep" and kind == "link-file":  # a sweep resumed through the link: its first rows
        content = b"".join(reference(name)[out].splitlines(keepends=True)[: rng.randint(0, 17)])
    target = make_special(place, kind, rng, content)
    link = os.readlink(place) if place.is_symlink() else None
    before = snapshot(folder)
    code, _, err = run_dse(argv_for(name, out), folder)
    problems = line_problems(code, err, (2,) if target is None else (0,))
    after = snapshot(folder)
    if target is None:
        problems += [f"a refused run changed {c}" for c in changes(before, after)[:3]]
    else:
        if link is None or not place.is_symlink() or os.readlink(place) != link:
            problems.append("the link was replaced")
        ref = reference(name)
        if not target.is_file() or target.read_bytes() != ref[place.name]:
            problems.append("the link's target is not the whole output")
        written = {str(target.relative_to(folder))}
        if out.endswith("/") or out.endswith(".0.et"):
            written |= set(outputs_of(name))
            others = [f for f in outputs_of(name) if f != str(place.relative_to(folder))]
            problems += [
                f"{f} differs"
                for f in others
                if not (folder / f).is_file() or (folder / f).read_bytes() != ref[Path(f).name]
            ]
        problems += [f"changed {c}" for c in changes(before, after, written)[:3]]
    problems += [f"left {t}" for t in temps(folder)]
    return [f"{name}, {kind} at {place.relative_to(folder)}: {p}" for p in problems]


# ----------------------------------------------------------------------------- short writes, full disks
#: what is written under a limit -> (the command, weight)
SHORT: dict[str, tuple[str, int]] = {
    "sweep repair": ("sweep", 3),
    "sweep": ("sweep", 3),
    "study report": ("study report", 3),
    "reproduce --quick": ("reproduce --quick", 1),
    "evaluate --plot": ("evaluate --plot", 2),
    "workload convert": ("workload convert", 2),
    "workload export": ("workload export", 2),
    "workload pipeline": ("workload pipeline", 2),
}


def _store(name: str) -> bool:
    """Whether output file `name` is a sweep CSV (appended to, resumed), not a file written whole."""
    return name == "o.csv" or name.endswith(".raw.csv")


def same_output(name: str, now: bytes | None, want: bytes) -> bool:
    """Whether `now` is the whole output `want`: byte for byte, or for a sweep CSV the same rows
    (a repair keeps each point's first row where it stood, so the order may differ)."""
    if now is None or not _store(name):
        return now == want
    return now.endswith(b"\n") and sorted(now.splitlines()) == sorted(want.splitlines())


def prior_files(what: str, rng: random.Random, ref: dict[str, bytes]) -> dict[str, bytes]:
    """The outputs present before the run (name -> bytes): a damaged sweep CSV to repair (its own
    rows repeated, blank lines: nothing lost), a sweep's first rows, or old files of each name."""
    out: dict[str, bytes] = {}
    for name, data in ref.items():
        lines = data.splitlines(keepends=True)
        if what == "sweep repair":
            for _ in range(rng.randint(1, 3)):
                lines.insert(rng.randrange(1, len(lines) + 1), rng.choice([b"\n", lines[rng.randrange(1, len(lines))]]))
            out[name] = b"".join(lines)
        elif _store(name):
            if (k := rng.randint(-1, len(lines) - 1)) >= 0:  # a header and k rows, or no file
                out[name] = b"".join(lines[: k + 1])
        elif rng.random() < 0.5:
            out[name] = b"old " + name.encode() + b"\n"
    return out


def _fill(disk: Path, free: int) -> None:
    """Fill a small file system until about `free` bytes are left."""
    st = os.statvfs(disk)
    room = st.f_bavail * st.f_frsize - free
    with contextlib.suppress(OSError), open(disk / "filler", "wb") as f:
        while room > 0:
            room -= f.write(b"\0" * min(room, 1 << 16))


@contextlib.contextmanager
def small_disk(path: Path, size: int, allowed: bool) -> Iterator[bool]:
    """`path` as a tmpfs of `size` bytes (True), or a plain folder (False) when not `allowed` or
    mount fails (not root, no mount); unmounted on the way out."""
    path.mkdir()
    mounted = False
    if allowed and os.geteuid() == 0 and shutil.which("mount"):
        cmd = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)]
        mounted = subprocess.run(cmd, capture_output=True).returncode == 0
    try:
        yield mounted
    finally:
        if mounted and subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def output_problems(disk: Path, out: str, prior: dict[str, bytes], ref: dict[str, bytes], code: int) -> list[str]:
    """After a run under a limit: complete outputs (exit 0), or each file its previous bytes or its
    whole new ones, a sweep CSV its previous rows and whole new ones (exit 1); nothing else there."""
    base = disk / out if out.endswith("/") else disk
    problems = []
    for name in sorted(set(prior) | set(ref)):
        p = base / name
        now = p.read_bytes() if p.is_file() else None
        if same_output(name, now, ref[name]) or (code != 0 and now == prior.get(name)):
            continue
        if code != 0 and _store(name) and now is not None and now.endswith(b"\n"):
            rows, want = now.splitlines(), set(ref[name].splitlines())
            old = set(prior.get(name, b"").splitlines())
            if len(rows) == len(set(rows)) and set(rows) <= want and old <= set(rows):
                continue
        problems.append(f"{name}: {'missing' if now is None else 'neither its old content nor the whole new'}")
    names = {str(Path(out.rstrip("/")) / n) if out.endswith("/") else n for n in set(prior) | set(ref)}
    extra = [k for k in snapshot(disk) if k not in names and k not in ("filler", out.rstrip("/"))]
    problems += [f"left {k}" for k in sorted(extra) if not k.endswith(LOCKS)]
    if out.endswith("/") and code != 0 and not prior and base.is_dir() and not any(base.iterdir()):
        problems.append(f"an empty {out} left by a failed run")
    return problems


def short_write_case(rng: random.Random, folder: Path, *, tmpfs: bool = False) -> list[str]:
    """One command writing under RLIMIT_FSIZE (or on a nearly full tmpfs, with `tmpfs` and root);
    check the promise (module doc), then run it again without the limit."""
    what = rng.choices(list(SHORT), weights=[w for _, w in SHORT.values()])[0]
    name = SHORT[what][0]
    out = COMMANDS[name][1]
    ref = reference(name)
    inputs(folder)
    total = sum(map(len, ref.values()))
    with small_disk(folder / "disk", max(64 << 10, -(-2 * total // 4096) * 4096), tmpfs) as mounted:
        disk = folder / "disk"
        prior = prior_files(what, rng, ref)
        if prior and out.endswith("/"):
            (disk / out).mkdir()
        for n, data in prior.items():
            ((disk / out / n) if out.endswith("/") else disk / n).write_bytes(data)
        argv = argv_for(name, f"disk/{out}") + (["--batch", str(rng.choice((1, 2, 3, 5)))] if what == "sweep" else [])
        fsize = None
        if mounted:
            _fill(disk, rng.randint(0, int(1.2 * total)))
        else:
            fsize = rng.randint(0, int(1.2 * max(map(len, ref.values()))))
        code, _, err = run_dse(argv, folder, fsize=fsize)
        label = f"{what} ({'tmpfs' if mounted else f'RLIMIT_FSIZE={fsize}'})"
        problems = line_problems(code, err, (0, 1)) + output_problems(disk, out, prior, ref, code)
        (disk / "filler").unlink(missing_ok=True)
        code, _, err = run_dse(argv, folder)
        problems += [f"again: {p}" for p in line_problems(code, err, (0,))]
        for n, data in ref.items():
            p = (disk / out / n) if out.endswith("/") else disk / n
            if not same_output(n, p.read_bytes() if p.is_file() else None, data):
                problems.append(f"again: {n} differs from the uninterrupted output")
    return [f"{label}: {p}" for p in problems]


def full_disk_case(rng: random.Random, folder: Path) -> list[str]:
    """`short_write_case` on a small tmpfs one time in three, when this process may mount one."""
    return short_write_case(rng, folder, tmpfs=rng.random() < 1 / 3)


CAMPAIGN: Campaign = {
    "special files as outputs": (
        "a FIFO, device, socket, folder or symlink loop where an output goes is refused in one line "
        "with nothing changed; a symlink is followed, the link kept and its target written whole",
        80,
        special_case,
    ),
    "short writes and full disks": (
        "under a file size limit or on a full disk: exit 0 complete, or exit 1 in one line with every "
        "file its old bytes or its whole new ones; the same command then resumes to the full result",
        30,
        full_disk_case,
    ),
}
