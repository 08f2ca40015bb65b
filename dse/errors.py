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
