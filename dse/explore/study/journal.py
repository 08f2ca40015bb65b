"""The journal file backend of dse studies: Optuna's journal format, fsynced once per finished trial.

Optuna's `JournalFileBackend` fsyncs every record it appends; a trial appends one per parameter,
attribute and state change, so a study would wait on the disk once per record. `SyncedJournal` reads the
file as Optuna's backend does (it is one) and writes the same bytes, under the same lock, but
fsyncs only the records that finish a trial or change a study:

- every record is written to the file (the kernel's page cache) before the call that makes it
  returns, so other workers see it at once, and a worker killed at any moment, kill -9 included,
  loses nothing it wrote (a record cut short by the kill is repaired by `dse.explore.study.storage`);
- a record that finishes a trial (its state and values: complete, failed), creates or deletes a
  study or sets a study attribute is fsynced before its call returns: it and every record written
  before it, by any worker, are on the disk;
- the records of a trial still running (its creation, parameters, user and system attributes) are
  not fsynced on their own. A power loss or an OS crash loses no finished trial, only what running
  trials wrote since the last fsync; such a trial is then missing, or left running with no live
  worker and failed and replaced by the next run (`dse.explore.study.storage.fail_dead`). A record the crash cut
  short at the end of the file is cut back by the next `dse study run`.

This relies on the disk honouring fsync (a local file system; not a network one that caches
writes). Several machines should share a PostgreSQL storage instead, whose commits are durable.
"""

from __future__ import annotations

import json
import os
from typing import Any

from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

# Optuna's journal operation codes (its file format, shared by the journals of every Optuna version)
# of the records that only change a running trial: a parameter, an intermediate value, a user or a
# system attribute; creating a trial (code 4) is one too unless it is created finished
_CREATE_TRIAL = 4
_RUNNING_TRIAL_OPS = frozenset({5, 7, 8, 9})


def needs_sync(log: dict[str, Any]) -> bool:
    """Whether a journal record must be on the disk before its append returns: every record but a
    running trial's (a trial created finished, as `Study.add_trial` does, is synced)."""
    op = log.get("op_code")
    if op in _RUNNING_TRIAL_OPS:
        return False
    if op == _CREATE_TRIAL:
        return TrialState(log.get("state", TrialState.RUNNING)).is_finished()
    return True


class SyncedJournal(JournalFileBackend):
    """Optuna's journal file backend with `append_logs` (the backend interface, the only method
    replaced) fsyncing only where `needs_sync` says so; `lock` is the lock every writer takes."""

    def __init__(self, file_path: str, lock: Any) -> None:
        super().__init__(file_path, lock_obj=lock)
        self._path, self._writers = file_path, lock

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        """Append `logs` in one write under the writers' lock, fsynced if any of them `needs_sync`."""
        data = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs).encode("utf-8")
        self._writers.acquire()
        try:
            with open(self._path, "ab") as f:
                f.write(data)
                f.flush()
                if any(needs_sync(log) for log in logs):
                    os.fsync(f.fileno())
        finally:
            self._writers.release()
