"""Placements from files: a TOML file with a ``[placement]`` table, or LIBRA's communicator file.

`load_placement` is what `dse iterate --placement`, `dse workload convert --placement` and a
workload study's ``placement`` take (`dse.training.placement.Placement` says what a placement is).
Files are read bounded (`dse.core.files.read_text`: special files refused, ``DSE_MAX_TEXT_BYTES``)
and TOML is parsed by `dse.training.workload_read.parse_toml` (its values counted against the
work limit first).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.files import read_text
from dse.training.placement import Placement
from dse.training.workload_read import parse_toml
from dse.training.workloads import Workload


def load_placement(spec: str | Path | dict[str, Any] | Placement, field: str = "placement") -> Placement:
    """A placement: itself, an inline table, or a file (``.toml`` with a ``[placement]`` table, or
    LIBRA's communicator file, ``.yml``/``.yaml``)."""
    if isinstance(spec, Placement):
        return spec
    if isinstance(spec, dict):
        return Placement.parse(spec, field)
    path = Path(spec)
    if path.suffix.lower() in (".yml", ".yaml"):
        from dse.training.libra_read import read_libra_communicator  # it reads workloads too

        return read_libra_communicator(path)
    data = parse_toml(read_text(path, "placement file"), str(path))
    if "placement" not in data:
        raise InputError(f"{path}", "no [placement] table", "[placement] fwd = [...], ig = [...], wg = [...]")
    return Placement.parse(data["placement"], f"{path}: placement")


def with_placement(wl: Workload, placement: Placement) -> Workload:
    """`wl` with its collectives placed by `placement` (which replaces a model-parallel group)."""
    return replace(wl, placement=placement, model_parallel_group=None)
