"""`dse workload list`'s rows and table: every workload `dse iterate` takes by name, its parallelism
and the topology shape it fits. Imported by `dse.cli.workload.cmd_workload_list` when it runs."""

from __future__ import annotations

import math
from typing import Required, TypedDict

from dse.core.units import format_time
from dse.output.report import format_table
from dse.training.generators import GENERATORS, generate
from dse.training.workload_load import bundled_workloads, libra_workloads, load_workload
from dse.training.workloads import Workload


class _Row(TypedDict, total=False):
    """One line of `dse workload list`. `fits`: the NPUs per dimension of the topology a placed
    workload needs (`Placement.shape`; None, printed ``*``: a dimension no group spans, of any
    size), or ``"any"``; a generator's parallelism and fit are its default options', with no layer
    figures."""

    name: Required[str]
    kind: Required[str]
    parallelism: Required[str]
    model_parallel_group: Required[int | None]
    placement: Required[dict[str, list[int]] | None]
    fits: Required[list[int | None] | str]
    layers: int
    collectives: int
    compute_ns: float
    origin: Required[str]


def workload_rows() -> list[_Row]:
    """Every workload `dse iterate` takes by name: the bundled ones, LIBRA's (`libra_*`, placed) and
    the generators (with their default options)."""
    rows: list[_Row] = []
    for kind, found in (("bundled", bundled_workloads()), ("libra", libra_workloads())):
        for name, path in found.items():
            wl = load_workload(path)
            row = _parallelism(name, kind, wl)
            row["layers"] = len(wl.layers)
            row["collectives"] = sum(1 for layer in wl.layers for s in ("fwd", "ig", "wg") if layer.comm(s))
            row["compute_ns"] = wl.compute_ns
            row["origin"] = wl.origin
            rows.append(row)
    for name, fn in GENERATORS.items():
        row = _parallelism(name, "generator", generate(name))
        row["origin"] = (fn.__doc__ or "").strip().splitlines()[0]
        rows.append(row)
    return rows


def _parallelism(name: str, kind: str, wl: Workload) -> _Row:
    """A row's name, kind, parallelism, model-parallel group, placement and the shape it fits."""
    placement = wl.placement
    return {
        "name": name,
        "kind": kind,
        "parallelism": wl.parallelism,
        "model_parallel_group": wl.model_parallel_group,
        "placement": None if placement is None else placement.to_table(),
        "fits": "any"
        if placement is None
        else [n if used else None for n, used in zip(placement.shape(), placement.involved(), strict=True)],
        "origin": "",
    }


def _groups_text(row: _Row) -> str:
    """The parallelism column: the strategy, then the model- and data-parallel groups' NPUs."""
    table = row["placement"]
    if table is not None:
        mp = math.prod(math.lcm(max(f, 1), max(i, 1)) for f, i in zip(table["fwd"], table["ig"], strict=True))
        dp = math.prod(max(w, 1) for w in table["wg"])
        groups = " x ".join(f"{what} {n}" for what, n in (("mp", mp), ("dp", dp)) if n > 1)
        return f"{row['parallelism']}, {groups}" if groups else row["parallelism"]
    group = row["model_parallel_group"]
    return f"{row['parallelism']}, mp {group}" if group else row["parallelism"]


def _fits_text(row: _Row) -> str:
    """The fits column: NPUs per dimension (``*`` for any size), or what any topology needs."""
    fits = row["fits"]
    if isinstance(fits, list):
        return "x".join("*" if n is None else str(n) for n in fits)
    group = row["model_parallel_group"]
    return f"any of >= {group} NPUs" if group else "any"


#: what `dse workload list`'s columns mean, printed under its table
LIST_NOTE = (
    "fits: NPUs per dimension of the topology a placed workload was made for (*: any size; another "
    "topology: --placement FILE); any: every topology, a model-parallel group (mp) taking its leading "
    "dimensions, split if need be. mp x dp: the NPUs of a model- and a data-parallel group. "
    "Generators: with their default options."
)


def workload_table(rows: list[_Row]) -> str:
    """`dse workload list`'s table of `workload_rows`: name, kind, parallelism, fits, layers,
    collectives, compute."""
    body = [
        (
            r["name"],
            r["kind"],
            _groups_text(r),
            _fits_text(r),
            r.get("layers", "-"),
            r.get("collectives", "-"),
            format_time(float(r["compute_ns"])) if "compute_ns" in r else "-",
        )
        for r in rows
    ]
    heads = ("name", "kind", "parallelism", "fits", "layers", "collectives", "compute")
    return format_table(heads, body, align="llllrrr")
