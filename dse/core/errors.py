"""The one exception type that carries a user's bad input.

Every validation in `dse` raises `InputError` with a single line that names the field, says what was
wrong and what is allowed. The command line turns it into that line on stderr and exit code 2.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input: the message is one line, ready to show as it is."""

    def __init__(self, field: str, problem: str, allowed: str | None = None) -> None:
        self.field = field
        self.problem = problem
        self.allowed = allowed
        msg = f"{field}: {problem}"
        if allowed:
            msg += f" (allowed: {allowed})"
        super().__init__(msg)


class RunError(RuntimeError):
    """A run that failed for a reason outside the input (a worker process killed, say): one line,
    exit code 1, and what was finished is kept for the next run."""


_swallowed_interrupt = False


def note_swallowed_interrupt() -> None:
    """Record a Ctrl-C that Python swallowed (it landed in a finalizer or weakref callback, where a
    KeyboardInterrupt is only reported, never raised); `raise_if_interrupted` raises it later."""
    global _swallowed_interrupt
    _swallowed_interrupt = True


def raise_if_interrupted() -> None:
    """Raise a swallowed Ctrl-C at a point where stopping is safe (between batches, between trials)."""
    global _swallowed_interrupt
    if _swallowed_interrupt:
        _swallowed_interrupt = False
        raise KeyboardInterrupt
