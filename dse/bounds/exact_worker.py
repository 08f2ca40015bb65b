"""The client of the process CP-SAT runs in (`dse.bounds.exact_serve`): it starts the worker and feeds it jobs.

OR-Tools ships its own HiGHS library under the same name (libhighs.so.1) as highspy's, of another
version, and a process loads only the first of the two: CP-SAT in a process whose bounds use
highspy fails to load (highspy first) or hands highspy the wrong HiGHS (OR-Tools first). So every
CP-SAT solve runs in a worker process of its own that never imports highspy, started on the first
solve and kept for the next (it is slow to start). The worker holds itself to one core (the
first its parent may use): the solves are single-threaded or interleave CP-SAT's subsolvers on it.
Jobs and results cross its standard input and output as pickles; a plain subprocess rather than
`multiprocessing`, so that a caller's script is never re-imported in the worker.
"""

from __future__ import annotations

import atexit
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

_PROC: subprocess.Popen | None = None


class WorkerDied(RuntimeError):
    """The worker process ended in the middle of a job (OR-Tools aborted or was killed)."""


def call(job: Any) -> Any:
    """Run `job` (`dse.bounds.exact_model.Job`) in the worker and return its `SolveResult`.
    `WorkerDied` when the worker ends before it answers (the next call starts a new one)."""
    global _PROC
    proc = _PROC if _PROC is not None and _PROC.poll() is None else _start()
    _PROC = proc
    try:
        assert proc.stdin is not None and proc.stdout is not None
        pickle.dump(job, proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        proc.stdin.flush()
        ok, value = pickle.load(proc.stdout)
    except (EOFError, BrokenPipeError):
        code = proc.wait()
        _stop()
        raise WorkerDied(f"the CP-SAT worker ended with exit code {code} during a solve") from None
    except BaseException:
        _stop()  # interrupted or broken: a half-read answer must not reach the next call
        raise
    if not ok:
        raise RuntimeError(f"the CP-SAT worker failed: {value}")
    return value


def _start() -> subprocess.Popen:
    root = str(Path(__file__).resolve().parents[2])  # the directory holding the dse package
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return subprocess.Popen(
        [sys.executable, "-m", "dse.bounds.exact_serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )


def _stop() -> None:
    global _PROC
    proc, _PROC = _PROC, None
    if proc is None:
        return
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=5)
    except Exception:
        proc.kill()
        proc.wait()


atexit.register(_stop)
