"""Progress bars on stderr, one kind for every long command (sweeps, studies, the reproduction).

A bar is shown when asked for, or by default only when stderr is a terminal, so CI logs stay quiet.
Its shape comes from the terminal, else $COLUMNS / $LINES, else 80x20: a pty that reports a size of
0x0 would otherwise make tqdm draw nothing.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any

FALLBACK_COLUMNS = 80
FALLBACK_ROWS = 20


def bar_shape(stream: IO[str]) -> tuple[int, int]:
    """Columns and rows for a bar on `stream`: its terminal's, else $COLUMNS/$LINES, else 80x20."""
    try:
        cols, rows = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):  # not a terminal (a pipe, a captured stream)
        cols = rows = 0
    return _positive(cols, "COLUMNS", FALLBACK_COLUMNS), _positive(rows, "LINES", FALLBACK_ROWS)


def _positive(value: int, env: str, fallback: int) -> int:
    if value > 0:
        return value
    text = os.environ.get(env, "")
    return int(text) if text.isdigit() and int(text) > 0 else fallback


def wanted(progress: bool | None, stream: IO[str] | None = None) -> bool:
    """`progress` if given, else whether `stream` (stderr) is a terminal."""
    stream = stream if stream is not None else sys.stderr
    return progress if progress is not None else stream.isatty()


def progress_bar(
    total: int, *, initial: int = 0, desc: str | None = None, unit: str = "it", stream: IO[str] | None = None
) -> Any:
    """A tqdm bar of `total` steps (starting at `initial`) on `stream` (stderr), shaped by
    `bar_shape`; None when tqdm is missing."""
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return None
    stream = stream if stream is not None else sys.stderr
    tqdm.monitor_interval = 0  # no monitor thread: worker processes are forked beside it
    cols, rows = bar_shape(stream)
    return tqdm(
        total=total, initial=min(initial, total), desc=desc, unit=unit, file=stream, ncols=cols, nrows=rows, leave=True
    )
