"""Ctrl-C held back while threads share locks (`dse.core.interrupts`); a parallel sweep and the writing
of per-rank files, each stopped by a Ctrl-C at every line their main thread runs: they stop cleanly
(no thread left running, all files or none) or finish."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dse.core.interrupts import deferred_ctrl_c, ignoring_ctrl_c
from dse.training.chakra.write import write_rank_files

ROOT = Path(__file__).resolve().parents[1]


def _ctrl_c() -> None:
    """A real SIGINT to the main thread (Python runs its handler at the next instruction)."""
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


def test_a_ctrl_c_in_the_block_is_noted_then_raised_by_check() -> None:
    before = signal.getsignal(signal.SIGINT)
    woken = []
    with pytest.raises(KeyboardInterrupt), deferred_ctrl_c(wake=lambda: woken.append(1)) as ctrl_c:
        ctrl_c.check()  # nothing pending yet
        _ctrl_c()
        for _ in range(1000):  # instructions for the handler to run between; nothing is raised here
            pass
        assert ctrl_c.pending and woken == [1]
        ctrl_c.check()
        pytest.fail("check did not raise")  # pragma: no cover
    assert signal.getsignal(signal.SIGINT) is before


def test_one_left_unchecked_is_raised_as_the_block_ends_and_once_only() -> None:
    with pytest.raises(KeyboardInterrupt), deferred_ctrl_c():
        _ctrl_c()
        x = sum(range(100))  # the handler runs here
    assert x == 4950
    with pytest.raises(ValueError), deferred_ctrl_c():  # leaving by another error: that error, not a second one
        _ctrl_c()
        sum(range(100))
        raise ValueError("own")
    with deferred_ctrl_c() as ctrl_c:  # checked: nothing more at the end
        _ctrl_c()
        sum(range(100))
        with pytest.raises(KeyboardInterrupt):
            ctrl_c.check()
    assert not ctrl_c.pending


def test_outside_the_main_thread_nothing_changes() -> None:
    seen: list[object] = []

    def body() -> None:
        with deferred_ctrl_c() as ctrl_c:
            seen.append(ctrl_c.pending)
        seen.append(signal.getsignal(signal.SIGINT))

    before = signal.getsignal(signal.SIGINT)
    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert seen == [False, before]


_IGNORING = """
import os, signal, subprocess, sys
from dse.core.interrupts import ignoring_ctrl_c
with ignoring_ctrl_c():
    child = subprocess.run([sys.executable, "-c", "import signal; print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)"],
                           capture_output=True, text=True).stdout.strip()
    os.kill(os.getpid(), signal.SIGINT)
    print("in the block:", child, flush=True)
print("not raised")
"""


def test_ignoring_ctrl_c_passes_sigint_ignored_on_and_raises_one_that_came_after_the_block() -> None:
    """A fresh process with no other thread: nothing can take the held Ctrl-C but the main thread."""
    r = subprocess.run([sys.executable, "-c", _IGNORING], capture_output=True, text=True, timeout=120)
    assert r.stdout == "in the block: True\n"  # the child started ignoring SIGINT
    assert r.returncode != 0 and r.stderr.rstrip().endswith("KeyboardInterrupt"), r.stderr
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ignoring_ctrl_c_outside_the_main_thread_changes_nothing() -> None:
    seen: list[object] = []

    def body() -> None:
        with ignoring_ctrl_c():
            seen.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert seen == [signal.getsignal(signal.SIGINT)]


def test_a_ctrl_c_while_rank_files_are_written_leaves_none_of_them(tmp_path: Path) -> None:
    def data(r: int) -> bytes:
        if r == 70:  # in the second group of 64: the group ends, then the stop
            _ctrl_c()
        return b"z" * r

    with pytest.raises(KeyboardInterrupt):
        write_rank_files(tmp_path / "w", data, 100)
    assert list(tmp_path.iterdir()) == []


# Every line the main thread runs in a call, a real SIGINT sent there, one run per line. In a fresh
# process: a pool thread that a held lock blocks would keep this one from ending. After each run the
# probe joins what is left for up to 60 s, a margin for a loaded machine (a blocked thread never ends).
_PROBE = """
import os, signal, sys, threading
from pathlib import Path

def probe(call, check):
    me, main = os.getpid(), threading.main_thread().ident
    def run(at):
        seen = [0]
        def tracer(frame, event, arg):
            if os.getpid() != me:  # a forked worker
                sys.settrace(None)
                return None
            if event == "line":
                seen[0] += 1
                if seen[0] == at:
                    signal.pthread_kill(main, signal.SIGINT)
            return tracer
        sys.settrace(tracer)
        try:
            out, stopped = call(at), False
        except KeyboardInterrupt:
            out, stopped = None, True
        finally:
            sys.settrace(None)
        return seen[0], stopped, out
    lines, stopped, out = run(0)
    check(0, False, out)
    for at in range(1, lines + 1):
        _, stopped, out = run(at)
        left = [t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon]
        for t in left:
            t.join(60)
        if any(t.is_alive() for t in left):
            print(f"a thread left running after a Ctrl-C at line {at}", flush=True)
            os._exit(1)
        check(at, stopped, out)
    print(f"lines {lines}", flush=True)
    os._exit(0)
"""

_SWEEP = """
from dse.explore.sweep.runners import process_runner

def square(x):
    return x * x

def check(at, stopped, out):  # stopped, or every result
    assert stopped or sorted(out) == [x * x for x in range(6)], (at, out)

probe(lambda at: list(process_runner(2)(square, list(range(6)))), check)
"""

_RANK_FILES = """
import tempfile
from dse.training.chakra.write import write_rank_files

folder = Path(tempfile.mkdtemp())

def call(at):
    return write_rank_files(folder / f"w{at}", lambda r: bytes([r]) * 3, 4)

def check(at, stopped, out):  # all the files, whole, or none; never a temporary file
    names = sorted(p.name for p in folder.iterdir() if p.name.startswith((f"w{at}.", f".w{at}.")))
    assert names in ([], [f"w{at}.{r}.et" for r in range(4)]), (at, names)
    assert stopped or names, at
    assert all((folder / f"w{at}.{r}.et").read_bytes() == bytes([r]) * 3 for r in range(4) if names), at

probe(call, check)
"""


@pytest.mark.parametrize("body", [_SWEEP, _RANK_FILES], ids=["parallel-sweep", "rank-files"])
def test_a_ctrl_c_at_any_line_stops_cleanly_and_leaves_no_thread(body: str, tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-c", _PROBE + body],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)},
        timeout=3600,  # a last guard only: a blocked thread is reported after 60 s
    )
    assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    assert int(p.stdout.split()[1]) > 500, p.stdout  # the probe reached into the pools' own code
