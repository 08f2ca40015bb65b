"""Ctrl-C held back while threads share locks with the main thread, and raised where that is safe.

Python raises a KeyboardInterrupt at whatever instruction the main thread is running. Inside the
locking code of `threading`, `queue` or `concurrent.futures` (their ``__enter__`` methods are
Python code) it can leave a lock held that another thread then waits on for ever, and the
interpreter's exit waits on that thread: a hang, not a stop. `deferred_ctrl_c` turns a Ctrl-C into
a flag while such code runs; the caller raises it at points of its own choosing (`DeferredCtrlC.check`).
`ignoring_ctrl_c` starts helper processes that must never take a Ctrl-C (they inherit SIGINT ignored).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass
class DeferredCtrlC:
    """A Ctrl-C noted by `deferred_ctrl_c`'s handler; `check` raises it."""

    pending: bool = False

    def check(self) -> None:
        """Raise KeyboardInterrupt if a Ctrl-C came since the last check."""
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt


@contextlib.contextmanager
def deferred_ctrl_c(wake: Callable[[], None] | None = None) -> Iterator[DeferredCtrlC]:
    """Within the block a Ctrl-C sets ``pending`` (then calls `wake`, to end a wait the caller
    blocks in) in place of raising; one not yet checked is raised as the block ends normally.

    `wake` runs in the main thread between two of its instructions: it must not block (putting on
    a `queue.SimpleQueue` is fine). Outside the main thread, where Python runs no signal handler,
    the block runs unchanged and nothing is ever pending."""
    state = DeferredCtrlC()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return

    def note(_signum: int, _frame: object) -> None:
        state.pending = True
        if wake is not None:
            wake()

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield state
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)
    state.check()


@contextlib.contextmanager
def ignoring_ctrl_c() -> Iterator[None]:
    """Within the block SIGINT is ignored, so processes started then inherit that across exec, and
    blocked in this thread, so a Ctrl-C meanwhile waits for the handler restored after, unless a
    thread that does not block it (a native library's) takes it first and drops it. Keep the block
    short. Outside the main thread it runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
