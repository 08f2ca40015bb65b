"""Interrupted runs, a case of the fault injection (`dse.testing.faults`): kill -9 or SIGINT at a
chosen moment of a sweep, a study or a reproduction.

SIGINT exits 130 with one line; no worker process or /dev/shm entry outlives the run; running the
same command again gives the uninterrupted output (byte for byte for sweeps with one job and
reproductions, the same rows for sweeps with several, the same trials for studies).

A case looks only at what its run created, never at the rest of a shared machine: the /dev/shm
entries left are those new since the run started that either a process of the run held open or
mapped (`RunTree` reads /proc/PID/fd and /proc/PID/maps of the run's processes while it runs) or
whose name carries one of the run's process ids (as multiprocessing's, joblib's and loky's names
do). An entry another process made meanwhile is none of these, and is not counted.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from dse.testing.faults import ROOT, STUDY, journal_trials


def default_sigint() -> None:
    """Let Ctrl-C reach the commands a check starts, however this process was started: a process
    started in the background of a non-interactive shell (``cmd &``, ``nohup``) has SIGINT ignored,
    and an ignored signal stays ignored in every child, so a check that sends SIGINT to a command
    would test nothing but that. Called by the test suite and the fault campaign at start."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _digest(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.md5(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file() and not p.name.endswith(".raw.csv")
    }


SHM = "/dev/shm"


def _shm() -> set[str]:
    try:
        return set(os.listdir(SHM))
    except OSError:
        return set()


class RunTree:
    """A process and its descendants as seen at each `scan`: their ids, and the /dev/shm entries
    they hold open or mapped (names under /dev/shm)."""

    def __init__(self, pid: int) -> None:
        self.root = pid
        self.pids: set[int] = {pid}
        self.held: set[str] = set()
        self._next = 0.0

    def scan(self, every: float = 0.0) -> None:
        """Record the tree's processes and what they hold (at most once per `every` seconds)."""
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + every
        todo = [self.root]
        while todo:
            pid = todo.pop()
            self.pids.add(pid)
            todo.extend(k for k in child_pids(pid) if k not in self.pids)
        for pid in self.pids:
            self.held |= _shm_held(pid)

    def leftovers(self, before: set[str]) -> list[str]:
        """The /dev/shm entries, new since `before`, that this run made (module docstring)."""
        return sorted(n for n in _shm() - before if n in self.held or _names_pid(n, self.pids))


def _shm_held(pid: int) -> set[str]:
    """Names of the /dev/shm entries process `pid` holds open or has mapped (none once it is gone)."""
    out = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith(SHM + "/"):
                    out.add(target[len(SHM) + 1 :].split("/")[0].removesuffix(" (deleted)"))
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            where = line.find(SHM + "/")
            if where >= 0:
                out.add(line[where + len(SHM) + 1 :].split("/")[0].removesuffix(" (deleted)"))
    return out


def _names_pid(name: str, pids: set[int]) -> bool:
    """Whether `name` carries one of `pids` as a whole number (``joblib_memmapping_folder_4242_...``)."""
    return any(int(tok) in pids for tok in re.findall(r"\d+", name) if len(tok) < 10)


def child_pids(pid: int) -> list[int]:
    """Processes whose parent is `pid` (read from /proc; none where there is no /proc)."""
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


KILL_TARGETS = ("sweep1", "sweep2", "study", "reproduce")


def kill_command(target: str, folder: Path) -> tuple[list[str], Path, Callable[[], object]]:
    """The command of a kill target, its output, and how to read that output for comparison."""
    dse = [sys.executable, "-m", "dse"]
    if target.startswith("sweep"):
        spec = folder / "kill.toml"
        spec.write_text(
            '[sweep]\ntopology = ["4D-Ring_FC_Ring_SW", "3D-SW_SW_SW_hetero"]\n'
            'size = ["100MB", "300MB", "500MB"]\nchunks = [64, 256, 1024]\n'
            'schedules = ["themis+scf", "baseline+fifo", "round_robin+scf"]\nseed = [0, 1]\n'
        )
        out = folder / f"{target}.csv"
        jobs = target[-1]
        read = (lambda: out.read_bytes()) if jobs == "1" else (lambda: sorted(out.read_bytes().splitlines()))
        return dse + ["sweep", str(spec), "--out", str(out), "--jobs", jobs, "--batch", "3"], out, read
    if target == "study":
        out = folder / "kill.journal"
        return (
            dse
            + ["study", "run", str(STUDY), "--only", "bw_split_4d.themis", "--trials", "120", "--storage", str(out)],
            out,
            lambda: journal_trials(str(out)),
        )
    out = folder / "repro"
    return dse + ["reproduce", "themis", "--quick", "--jobs", "2", "--out", str(out)], out, lambda: _digest(out)


def output_size(out: Path) -> int:
    """Bytes written so far: the output file, or every file of an output folder (a temporary file
    renamed or removed while it is counted is skipped: an atomic write in progress)."""
    if out.is_dir():
        total = 0
        for p in out.rglob("*"):
            with contextlib.suppress(FileNotFoundError):
                total += p.stat().st_size if p.is_file() else 0
        return total
    return out.stat().st_size if out.exists() else 0


#: Starts of a kill case: a loaded machine may let a run finish between two looks at its output.
KILL_ATTEMPTS = 3


def kill_case(target: str, sig: int, at: float, folder: Path, reference: tuple[object, int]) -> list[str]:
    """Start `target`, send `sig` once its output holds `at` (a fraction) of the uninterrupted run's
    bytes, check how it stopped, run it again and compare with `reference` (`kill_reference`). A run
    that ends before `at` interrupted nothing: its output is removed and it starts again, at most
    `KILL_ATTEMPTS` times in all."""
    want, total = reference
    cmd, out, read = kill_command(target, folder)
    shm = _shm()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for _ in range(KILL_ATTEMPTS):
        p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        tree = RunTree(p.pid)
        while p.poll() is None and output_size(out) < at * total:
            tree.scan(every=0.1)
            time.sleep(0.002)
        tree.scan()
        kids = child_pids(p.pid)
        if p.poll() is None:
            break
        p.communicate()
        _remove_output(out)
    else:
        return [f"the run ended (exit {p.returncode}) before {at:.0%} of its output: no interruption tested"]
    p.send_signal(sig)
    err = p.communicate(timeout=120)[1]
    problems = []
    if sig == signal.SIGINT and p.returncode not in (0, 130):
        problems.append(f"SIGINT: exit {p.returncode}")
    if sig == signal.SIGINT and p.returncode == 130:
        if len(err.splitlines()) != 1 or "run the same command again" not in err:
            problems.append(f"SIGINT: stderr {err[-300:]!r}")
    deadline = time.time() + 10
    while time.time() < deadline and any(_alive(k) for k in kids):
        time.sleep(0.05)
    if any(_alive(k) for k in kids):
        problems.append(f"{sum(_alive(k) for k in kids)} child process(es) outlived the run")
    left = tree.leftovers(shm)
    if left:
        problems.append(f"/dev/shm entries left: {sorted(left)[:3]}")
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        problems.append(f"resume: exit {done.returncode}: {done.stderr[-300:]!r}")
    elif read() != want:
        problems.append("the resumed output differs from the uninterrupted one")
    return problems


def kill_reference(target: str, folder: Path) -> tuple[object, int]:
    """The uninterrupted output of `target` (run in `folder`, then read), and its size in bytes."""
    cmd, out, read = kill_command(target, folder)
    subprocess.run(
        cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True, capture_output=True, timeout=300
    )
    result = read(), output_size(out)
    _remove_output(out)
    return result


def _remove_output(out: Path) -> None:
    """Remove a run's output: its folder, or its file with the files named after it."""
    if out.is_dir():
        shutil.rmtree(out)
    else:
        for p in out.parent.glob(out.name + "*"):
            p.unlink()


def end_worker(parent: int) -> None:
    """A task that ends the worker process running it at once (exit code 3), as a crash or the
    out-of-memory killer would; run in the process `parent` itself, it does nothing."""
    if os.getpid() != parent:
        os._exit(3)
