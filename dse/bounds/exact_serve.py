"""The CP-SAT worker process itself (`python -m dse.bounds.exact_serve`): jobs in, results out.

`dse.bounds.exact_worker` starts it and feeds it (and says why CP-SAT runs apart). It reads pickled
`dse.bounds.exact_model.Job`s from its standard input until that closes, and writes each one's
`SolveResult` (or its error, as text) to its standard output; it holds itself to one core.
"""

from __future__ import annotations

import os
import pickle
import sys
from typing import Any

from dse.bounds.exact_model import run_job


def serve() -> None:
    """The worker's loop: a job in, its result (or its error) out, until standard input closes."""
    if hasattr(os, "sched_setaffinity"):  # one core, whatever CP-SAT's portfolio asks for
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            job = pickle.load(stdin)
        except EOFError:
            return
        try:
            answer: tuple[bool, Any] = (True, run_job(job))
        except Exception as exc:  # sent back: the caller raises it with the worker's words
            answer = (False, f"{type(exc).__name__}: {exc}")
        pickle.dump(answer, stdout, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.flush()


if __name__ == "__main__":
    try:
        serve()
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the caller reports it
        sys.exit(130)
