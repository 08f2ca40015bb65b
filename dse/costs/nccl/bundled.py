"""The nccl-tests measurements dse ships and the machines they ran on (dse/data/nccl/systems.toml,
listed with their origins in dse/data/nccl/README.md): `bundled` reads them, each `Measurement`
gives its run as `dse.costs.nccl.fit` and `dse.costs.nccl.validation` take it."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import fields
from pathlib import Path
from typing import Any, NamedTuple

from dse.core.errors import InputError
from dse.core.files import read_toml
from dse.costs.nccl.logs import NcclTestsRun, read_nccl_tests
from dse.costs.nccl.params import NcclSystem

#: The measured systems and nccl-tests files dse ships (dse/data/nccl/README.md).
BUNDLED_DIR = Path(__file__).resolve().parents[2] / "data" / "nccl"
_SYSTEM_FIELDS = {f.name for f in fields(NcclSystem)}
_MEASUREMENT_KEYS = {"name", "file", "system", "collective", "run", "launch"}


class Measurement(NamedTuple):
    """One shipped nccl-tests test: its `name`, the `system` key it ran on, the file `path`, the
    `collective`, which test of the file (`run`, from 0) and the `launch` mode: "gN", nccl-tests' -g N
    (N GPUs per thread; "g1": a process per GPU), what the run has when its log lacks the header."""

    name: str
    system: str
    path: Path
    collective: str
    run: int
    launch: str

    def runs(self) -> list[NcclTestsRun]:
        """The run this measurement names, with `launch`'s GPUs per thread (a header saying else: `InputError`)."""
        found = read_nccl_tests(self.path, collective=self.collective)
        if not 0 <= self.run < len(found):
            n = len(found)
            raise InputError(f"{self.name}.run", f"test {self.run} of a file with {n}", f"0 to {n - 1}")
        run, gpus = found[self.run], int(self.launch[1:])
        if run.gpus_per_thread not in (None, gpus):
            problem = f"launch {self.launch!r}, but the log's header says nGpus {run.gpus_per_thread}"
            raise InputError(f"{self.name}.launch", problem, f"launch = 'g{run.gpus_per_thread}'")
        return [dataclasses.replace(run, gpus_per_thread=gpus)]


def bundled(folder: str | Path | None = None) -> tuple[dict[str, NcclSystem], dict[str, Measurement]]:
    """The systems (by key) and measurements (by name) of `folder`'s systems.toml (None: the ones
    dse ships, `BUNDLED_DIR`). An unknown key, a bad system or a measurement of an unknown system is
    an `InputError`."""
    root = BUNDLED_DIR if folder is None else Path(folder)
    data = read_toml(root / "systems.toml", "systems.toml")
    systems = {key: _system(key, table) for key, table in _table(data, "systems").items()}
    measurements: dict[str, Measurement] = {}
    for i, entry in enumerate(data.get("measurements", [])):
        where = f"measurements[{i}]"
        if not isinstance(entry, dict) or set(entry) != _MEASUREMENT_KEYS:
            raise InputError(
                where,
                f"keys {sorted(entry) if isinstance(entry, dict) else entry!r}",
                ", ".join(sorted(_MEASUREMENT_KEYS)),
            )
        if entry["system"] not in systems:
            raise InputError(f"{where}.system", f"{entry['system']!r} is not a system", ", ".join(systems))
        run = entry["run"]
        if isinstance(run, bool) or not isinstance(run, int) or run < 0:
            raise InputError(f"{where}.run", f"{run!r} is not a test index", "a whole number from 0")
        if not re.fullmatch(r"g[1-9][0-9]{0,3}", str(entry["launch"])):
            raise InputError(f"{where}.launch", f"{entry['launch']!r} is not a launch mode", "g1, g8, ... (-g N)")
        path = root / str(entry["file"])
        measurements[str(entry["name"])] = Measurement(
            str(entry["name"]), entry["system"], path, str(entry["collective"]), run, str(entry["launch"])
        )
    return systems, measurements


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict) or not value:
        raise InputError(key, "missing or not a table", f"[{key}.NAME] tables")
    return value


def _system(key: str, table: object) -> NcclSystem:
    """An `NcclSystem` from its TOML table (its `label` and `sources` are documentation)."""
    if not isinstance(table, dict):
        raise InputError(f"systems.{key}", "not a table", "a [systems.NAME] table")
    extra = set(table) - _SYSTEM_FIELDS - {"label", "sources"}
    if extra:
        raise InputError(f"systems.{key}", f"unknown keys {sorted(extra)}", ", ".join(sorted(_SYSTEM_FIELDS)))
    if not table.get("sources"):
        raise InputError(f"systems.{key}.sources", "no source", "a list of where the description comes from")
    return NcclSystem(**{k: v for k, v in table.items() if k in _SYSTEM_FIELDS})
