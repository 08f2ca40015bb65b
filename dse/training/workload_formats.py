"""Writing workloads: dse's native TOML and ASTRA-sim 1.0's text, losslessly (``dse workload convert``).

Reading is `dse.training.workload_load.load_workload`; this module is its inverse. A converted file carries a line
of origin and ``source_sha256``, the SHA-256 of the source's figures (`figures_sha256`: the
ASTRA-sim text's tokens, one line per line, single-spaced), so anyone can check, without the
source, that the TOML still holds every figure: render it back with `to_astra_text` and compare the
hashes (the test suite does, for every bundled workload).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from dse.core.collectives import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, REDUCE_SCATTER
from dse.core.errors import InputError
from dse.core.files import check_output_file, read_text, write_atomic
from dse.training.workload_load import load_workload, looks_like_toml
from dse.training.workload_read import load_toml_text, parse_astra_text
from dse.training.workloads import LAYER0_IG_STRATEGIES, SLOTS, Layer, Workload

_ASTRA_NAMES = {
    ALL_REDUCE: "ALLREDUCE",
    ALL_GATHER: "ALLGATHER",
    REDUCE_SCATTER: "REDUCESCATTER",
    ALL_TO_ALL: "ALLTOALL",
    None: "NONE",
}
#: Output formats by file suffix.
FORMATS = {".toml": "dse TOML", ".txt": "ASTRA-sim 1.0 text"}


def figures_sha256(astra_text: str) -> str:
    """SHA-256 of an ASTRA-sim 1.0 text's figures: each non-blank line's tokens joined by one space.

    Whitespace (tabs, runs of spaces, trailing blanks) does not count; every token does."""
    lines = (" ".join(ln.split()) for ln in astra_text.splitlines())
    return hashlib.sha256("\n".join(ln for ln in lines if ln).encode()).hexdigest()


def _whole(v: float, where: str) -> int:
    if not float(v).is_integer():
        raise InputError(where, f"{v!r} ns is not a whole number", "ASTRA-sim 1.0 text holds whole cycles (ns)")
    return int(v)


def _header(wl: Workload) -> str:
    parts = [wl.parallelism]
    if wl.dlrm_last_bottom is not None:
        parts.append(str(wl.dlrm_last_bottom))
    if wl.model_parallel_group is not None:
        parts += ["model_parallel_NPU_group:", str(wl.model_parallel_group)]
    for what in ("checkpoints", "checkpoint_initiates"):
        idx = getattr(wl, what)
        if idx:
            parts += [f"{what}:", str(len(idx)), *map(str, idx)]
    return " ".join(parts)


def _astra_line(layer: Layer) -> str:
    if not layer.name or len(layer.name.split()) != 1:
        raise InputError(f"layer {layer.name!r}: name", "is empty or has spaces", "one word (ASTRA-sim 1.0 text)")
    toks = [layer.name, str(layer.dependency)]
    for slot in SLOTS:
        toks += [
            str(_whole(getattr(layer, f"{slot}_compute"), f"layer {layer.name}: {slot}_compute")),
            _ASTRA_NAMES[getattr(layer, f"{slot}_comm")],
            str(getattr(layer, f"{slot}_bytes")),
        ]
    toks.append(str(_whole(layer.wg_update, f"layer {layer.name}: wg_update")))
    return "\t".join(toks)


def to_astra_text(wl: Workload) -> str:
    """The workload as an ASTRA-sim 1.0 text file (tab separated); times must be whole ns.

    The text format has no `layer0_input_gradient`: its strategy implies it (ASTRA-sim 1.0's
    model-parallel loops compute layer 0's input gradient), so a workload that says otherwise is refused."""
    if wl.layer0_input_gradient != (wl.parallelism in LAYER0_IG_STRATEGIES):
        raise InputError(
            "layer0_input_gradient",
            f"{str(wl.layer0_input_gradient).lower()} cannot be written for {wl.parallelism} in ASTRA-sim 1.0 text",
            "TOML (.toml), or the strategy's own: true for " + ", ".join(LAYER0_IG_STRATEGIES),
        )
    return "\n".join([_header(wl), str(len(wl.layers)), *map(_astra_line, wl.layers)]) + "\n"


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(map(_value, v)) + "]"
    return repr(v)


def to_toml(wl: Workload, *, origin: str = "", source_sha256: str = "") -> str:
    """The workload in dse's TOML form: a comment of origin, then every field that is not a default."""
    origin = origin or wl.origin
    source_sha256 = source_sha256 or wl.source_sha256
    out = [f"# {' '.join(line.split())}" for line in (origin or "a dse workload").splitlines()[:1]]
    out.append("# dse workload (see dse/training/workloads.py); times in ns, bytes per NPU")
    top: dict[str, Any] = {
        "name": wl.name,
        "parallelism": wl.parallelism,
        "model_parallel_group": wl.model_parallel_group,
        "dlrm_last_bottom": wl.dlrm_last_bottom,
        "checkpoints": list(wl.checkpoints) or None,
        "checkpoint_initiates": list(wl.checkpoint_initiates) or None,
        "layer0_input_gradient": True if wl.layer0_input_gradient else None,
        "origin": origin or None,
        "source_sha256": source_sha256 or None,
    }
    out += [f"{k} = {_value(v)}" for k, v in top.items() if v is not None]
    if wl.placement is not None:
        out += ["", "[placement]  # per slot, the NPUs of each dimension its group spans (0: none)"]
        out += [f"{k} = {_value(v)}" for k, v in wl.placement.to_table().items()]
    default = Layer("")
    for layer in wl.layers:
        out += ["", "[[layers]]", f"name = {_value(layer.name)}"]
        for f in ("dependency", *(f"{s}_{k}" for s in SLOTS for k in ("compute", "comm", "bytes")), "wg_update"):
            v = getattr(layer, f)
            if v != getattr(default, f):
                out.append(f"{f} = {_value(v)}")
    return "\n".join(out) + "\n"


def convert(source: str | Path, out: str | Path, *, origin: str = "", force: bool = False) -> Workload:
    """Write `source` (any workload `load_workload` reads) to `out` as TOML (``.toml``) or ASTRA-sim
    1.0 text (``.txt``), losslessly: reading `out` back gives an equal `Workload` (checked before
    anything is written). An existing `out` is refused unless `force`."""
    target = Path(out)
    fmt = target.suffix.lower()
    if fmt not in FORMATS:
        raise InputError(
            "out", f"{str(out)!r} has no known suffix", ", ".join(f"{k} ({v})" for k, v in FORMATS.items())
        )
    check_output_file(target, "out", whole=True)  # dse.core.files: its folder exists, no special file
    if target.exists() and not force:
        raise InputError("out", f"{str(out)!r} exists", "a new file, or --force to replace it")
    wl = load_workload(source)
    sha = wl.source_sha256
    src_path = Path(source) if isinstance(source, (str, Path)) and Path(source).is_file() else None
    src_text = read_text(src_path, "workload") if src_path is not None else ""
    if src_path is not None and src_path.suffix.lower() != ".toml" and not looks_like_toml(src_text):
        sha = figures_sha256(src_text)
        if figures_sha256(to_astra_text(wl)) != sha:  # pragma: no cover - a parser that dropped a figure
            raise InputError("workload", f"{src_path} holds figures dse does not keep; not converted")
    if not origin and src_path is not None:
        origin = f"converted by `dse workload convert` from {src_path.name}"
    text = to_toml(wl, origin=origin, source_sha256=sha) if fmt == ".toml" else to_astra_text(wl)
    back = load_toml_text(text, str(target)) if fmt == ".toml" else parse_astra_text(text, str(target))
    if replace(back, name=wl.name) != wl:  # pragma: no cover - a writer that lost a field
        raise InputError("out", f"{target.name} would not read back as the same workload; not written")
    write_atomic(target, text, "out")
    return wl
