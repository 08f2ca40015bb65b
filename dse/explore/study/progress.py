"""Progress of `dse study run`: a bar of complete trials out of the target, one per study.

The bar counts what the storage holds, not what this process did: a worker reports the complete
trials it counts under the storage's lock before each new trial, and a parent running several
worker processes polls the storage's count (`CompleteCount`). Either way a trial is counted once,
however many processes finish trials, and a resumed study starts its bar at the trials it already
has. The bar is tqdm's on stderr; its shape comes from the terminal, or 80x20 when the terminal
reports none (a pty without a size says 0x0, and tqdm would then draw nothing).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from typing import IO

from dse.core.errors import InputError
from dse.core.progress import FALLBACK_COLUMNS, FALLBACK_ROWS, bar_shape, progress_bar  # noqa: F401  (re-exported)
from dse.explore.study.storage import open_storage, reading

POLL_SECONDS = 0.5  # how often a parent of several workers reads the storage's count


class TrialBar:
    """A tqdm bar of one study's complete trials, `total` the target, starting at `initial`."""

    def __init__(self, name: str, total: int, initial: int, stream: IO[str] | None = None) -> None:
        self._bar = progress_bar(total, initial=initial, desc=name, unit="trial", stream=stream)

    @property
    def n(self) -> int:
        """The complete trials the bar shows."""
        return self._bar.n

    def show(self, complete: int) -> None:
        """Move the bar to `complete` trials (never backwards, never past the total)."""
        complete = min(complete, self._bar.total)
        if complete > self._bar.n:
            self._bar.update(complete - self._bar.n)

    def close(self) -> None:
        """Close the bar (its last state stays on the terminal)."""
        self._bar.close()


class CompleteCount:
    """The complete trials of study `name` on `url`, read again at every call (one open storage)."""

    def __init__(self, name: str, url: str) -> None:
        self.url = url
        self._storage = open_storage(url, must_exist=True)
        with reading(url):
            self._study_id = self._storage.get_study_id_from_name(name)

    def __call__(self) -> int:
        from optuna.trial import TrialState

        with reading(self.url):
            return len(self._storage.get_all_trials(self._study_id, deepcopy=False, states=(TrialState.COMPLETE,)))

    def show_on(self, bar: TrialBar) -> Callable[[], None]:
        """A function that moves `bar` to the count (a read that fails leaves the bar where it is:
        the workers, which read the same storage, report the failure)."""

        def poll() -> None:
            """Move the bar to the storage's count; a failed read leaves it where it is."""
            try:
                bar.show(self())
            except InputError:
                pass

        return poll


def wait_all(procs: Sequence[subprocess.Popen], poll: Callable[[], None] | None = None) -> list[int]:
    """Wait for every process; with `poll`, call it about every `POLL_SECONDS` while they run."""
    if poll is None:
        return [p.wait() for p in procs]
    for p in procs:
        while True:
            try:
                p.wait(POLL_SECONDS)
                break
            except subprocess.TimeoutExpired:
                poll()
    poll()
    return [p.returncode for p in procs]
