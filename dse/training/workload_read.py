"""Reading workload files: the ASTRA-sim 1.0 text format and the native TOML form (or a mapping).

`dse.training.workload_load` describes both formats and holds `load_workload`, which picks the
reader. Every error names the file and the field, or the line for the text format. A TOML text is
refused before it is parsed when it may hold more values than the work limit allows (`check_toml`,
`TOML_STEPS_PER_VALUE` steps per value).
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from dse.core.collectives import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, REDUCE_SCATTER, parse_collective
from dse.core.errors import InputError
from dse.core.limits import MAX_BYTES, MAX_NS, check_work
from dse.training.placement import Placement
from dse.training.workloads import (
    ALL_DIMS_STRATEGIES,
    LAYER0_IG_STRATEGIES,
    SLOTS,
    STRATEGIES,
    Layer,
    Workload,
    check_layers,
)

#: Work to parse one TOML value, in steps of `check_work`.
TOML_STEPS_PER_VALUE = 16

#: Makes the error of one line: (problem, allowed=None) -> InputError.
LineError = Callable[..., InputError]

_ASTRA_TYPES = {
    "NONE": None,
    "ALLREDUCE": ALL_REDUCE,
    "ALLGATHER": ALL_GATHER,
    "REDUCESCATTER": REDUCE_SCATTER,
    "ALLTOALL": ALL_TO_ALL,
}
_HEADER_OPTIONS = ("model_parallel_NPU_group:", "checkpoints:", "checkpoint_initiates:")
LAYER_FIELDS = (
    "name dependency fwd_compute fwd_type fwd_bytes ig_compute ig_type ig_bytes "
    "wg_compute wg_type wg_bytes wg_update_time"
)


# ----- the ASTRA-sim 1.0 text format ------------------------------------------------------------
def parse_astra_text(text: str, source: str = "workload") -> Workload:
    """Parse the ASTRA-sim 1.0 text format; errors name `source` and the line number."""

    def err(lineno: int, problem: str, allowed: str | None = None) -> InputError:
        """The error of line `lineno`."""
        return InputError(f"{source}:{lineno}", problem, allowed)

    numbered = text_lines(text, source)
    if not numbered:
        raise err(1, "empty workload file")
    head_at, head_line = numbered[0]
    head = head_line.split(None, 2 * len(numbered) + 16)  # no valid header has more words (the rest: one word)
    strategy, group, dlrm, lists = _parse_header(head, lambda p, a=None: err(head_at, p, a))
    body = _layer_lines(numbered, err)
    check_layers(len(body), source)
    layers = [
        parse_layer_line(line.split(None, 12), lambda p, allowed=None, _n=lineno: err(_n, p, allowed))
        for lineno, line in body
    ]
    _check_header_layers(dlrm, lists, len(layers), lambda p, a=None: err(head_at, p, a))
    return Workload(
        Path(source).stem if source else "workload",
        strategy,
        tuple(layers),
        group,
        source,
        dlrm,
        lists.get("checkpoints", ()),
        lists.get("checkpoint_initiates", ()),
        layer0_input_gradient=strategy in LAYER0_IG_STRATEGIES,
        header_at=f"{source}:{head_at}",
    )


#: what `str.splitlines` splits on
_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def text_lines(text: str, what: str) -> list[tuple[int, str]]:
    """The non-blank lines of `text` with their numbers (from 1); a text of more lines than the
    work limit allows (a step each: a file of 64 MiB of newlines would take half a gigabyte) is
    refused before they are split."""
    breaks = sum(text.count(c) for c in _BREAKS)
    check_work(breaks + 1, f"reading {breaks + 1:,} lines of {what}")
    return [(i + 1, ln) for i, ln in enumerate(text.splitlines()) if ln and not ln.isspace()]


def _parse_header(head: list[str], err: LineError) -> tuple[str, int | None, int | None, dict[str, tuple[int, ...]]]:
    """Line 1: strategy, ``HYBRID_DLRM k``'s k, ``model_parallel_NPU_group: N`` and the
    recompute lists (``checkpoints: COUNT i ...``); an option dse does not know is refused, not dropped."""
    strategy = head[0].upper()
    if strategy not in STRATEGIES:
        raise err(f"unknown parallelism {head[0]!r}", ", ".join(STRATEGIES))
    group = dlrm = None
    lists: dict[str, tuple[int, ...]] = {}
    k = 1
    if strategy == "HYBRID_DLRM" and len(head) > 1:
        dlrm = _int(head[1], err, "HYBRID_DLRM last bottom layer", minimum=0)
        k = 2
    while k < len(head):
        opt = head[k].lower()
        if opt == "model_parallel_npu_group:":
            if k + 1 >= len(head):
                raise err("model_parallel_NPU_group: needs a number")
            group = _int(head[k + 1], err, "model_parallel_NPU_group", minimum=1)
            k += 2
        elif opt in ("checkpoints:", "checkpoint_initiates:"):
            what = opt[:-1]
            count = _int(head[k + 1], err, f"{what} count", minimum=0) if k + 1 < len(head) else -1
            if count < 0 or k + 2 + count > len(head):
                raise err(f"{what}: needs a count and that many layer indices")
            lists[what] = tuple(_int(t, err, f"{what} layer", minimum=0) for t in head[k + 2 : k + 2 + count])
            k += 2 + count
        else:
            raise err(f"unknown option {head[k][:40]!r} on the parallelism line", ", ".join(_HEADER_OPTIONS))
    if strategy not in ALL_DIMS_STRATEGIES and group is None:
        raise err(f"{strategy} needs model_parallel_NPU_group: N")
    return strategy, group, dlrm, lists


def _layer_lines(numbered: Sequence[tuple[int, str]], err: Callable[..., InputError]) -> Sequence[tuple[int, str]]:
    """The layer lines after the layer count's line, as many as it says (`err`: (line, problem) -> error)."""
    if len(numbered) < 2:
        raise err(numbered[0][0] + 1, "missing the layer count")
    lineno, count_line = numbered[1]
    count_toks = count_line.split(None, 16)
    count = _int(count_toks[0], lambda p: err(lineno, p), "layer count", minimum=1)
    if len(count_toks) > 1:
        got = f"{len(count_toks)}" if len(count_toks) <= 16 else "more than 16"
        raise err(lineno, f"expected only the layer count, got {got} fields")
    body = numbered[2:]
    if len(body) != count:
        where = body[count][0] if len(body) > count else (body[-1][0] + 1 if body else lineno + 1)
        raise err(where, f"the file says {count} layers but has {len(body)} layer lines")
    return body


def parse_layer_line(toks: list[str], e: LineError) -> Layer:
    """One layer line, split on whitespace (at most 12 times: ``line.split(None, 12)``): twelve
    fields (`LAYER_FIELDS`); `e` makes the line's error. Shared by the ASTRA-sim 1.0 reader and
    LIBRA's headerless files (`dse.training.libra_read`)."""
    if len(toks) != 12:
        got = f"{len(toks)}" if len(toks) <= 12 else "more"  # split at most 12 times: the rest is one
        raise e(f"a layer line needs 12 fields, got {got}", LAYER_FIELDS)
    vals: dict[str, Any] = {"name": toks[0], "dependency": _int(toks[1], e, "dependency", minimum=-1)}
    for slot, base in zip(SLOTS, (2, 5, 8)):
        vals[f"{slot}_compute"] = float(_int(toks[base], e, f"{slot}_compute", minimum=0, maximum=int(MAX_NS)))
        t = toks[base + 1].upper()
        if t not in _ASTRA_TYPES:
            raise e(f"unknown {slot} communication type {toks[base + 1]!r}", ", ".join(_ASTRA_TYPES))
        vals[f"{slot}_comm"] = _ASTRA_TYPES[t]
        vals[f"{slot}_bytes"] = _int(toks[base + 2], e, f"{slot}_bytes", minimum=0, maximum=MAX_BYTES)
    vals["wg_update"] = float(_int(toks[11], e, "wg_update_time", minimum=0, maximum=int(MAX_NS)))
    return Layer(**vals)


def _check_header_layers(dlrm: int | None, lists: dict[str, tuple[int, ...]], n: int, err: LineError) -> None:
    """The layers line 1 names (``HYBRID_DLRM k``, the recompute lists) exist among the `n` read."""
    if dlrm is not None and dlrm >= n:
        raise err(f"HYBRID_DLRM {dlrm}: the workload has only {n} layers")
    for what, idx in lists.items():
        bad = [li for li in idx if li >= n]
        if bad:
            raise err(
                f"{what}: layer {bad[0]} does not exist (the workload has {n} layers)",
                f"layer indices 0 to {n - 1}",
            )


def _int(tok: str, err: LineError, what: str, *, minimum: int, maximum: int | None = None) -> int:
    if not (len(tok) <= 30 and re.fullmatch(r"[+-]?[0-9]+", tok, re.ASCII)):
        raise err(f"{what} {tok[:40]!r} is not an integer")
    v = int(tok)
    if v < minimum:
        raise err(f"{what} {v} is below {minimum}")
    if maximum is not None and v > maximum:
        raise err(f"{what} {v} is above {maximum:.3g}", f"at most {maximum:.3g}")
    return v


# ----- the native TOML form ---------------------------------------------------------------------
WORKLOAD_KEYS = (
    "name",
    "parallelism",
    "model_parallel_group",
    "dlrm_last_bottom",
    "checkpoints",
    "checkpoint_initiates",
    "layer0_input_gradient",
    "origin",
    "source_sha256",
    "placement",
    "layers",
)
_LAYER_KEYS = {"name", "dependency", "wg_update"} | {f"{s}_{k}" for s in SLOTS for k in ("compute", "comm", "bytes")}


def check_toml(text: str, what: str) -> None:
    """Refuse, before parsing it, a TOML text that may hold more values than the work limit allows:
    every value of a TOML file stands after a newline, a comma or an opening bracket."""
    values = 1 + sum(text.count(c) for c in "\n,[{")
    check_work(values * TOML_STEPS_PER_VALUE, f"parsing up to {values:,} TOML values of {what}")


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """A TOML text as a dict, refused first if it may hold more values than the work limit allows
    (`check_toml`); invalid or too deeply nested TOML is one `InputError` naming `source`."""
    check_toml(text, source)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(source, f"not valid TOML: {e}") from None
    except RecursionError:  # tomllib recurses into nested arrays and tables
        raise InputError(source, "not valid TOML: nested too deeply to read") from None


def load_toml_text(text: str, source: str = "workload") -> Workload:
    """Parse the native TOML form (`dse.training.workload_load`) into a `Workload` named after the
    file's stem unless it names itself; errors name `source`."""
    data = parse_toml(text, source)
    wl = workload_from_mapping(data, source)
    return replace(wl, name=wl.name if "name" in data else Path(source).stem, source=source)


def workload_from_mapping(data: Mapping[str, Any], source: str) -> Workload:
    """A workload from the TOML form's keys (`WORKLOAD_KEYS`); errors name `source` and the key."""
    unknown = set(data) - set(WORKLOAD_KEYS)
    if unknown:
        raise InputError(source, f"unknown key(s) {', '.join(sorted(unknown))}", ", ".join(WORKLOAD_KEYS))
    strategy = str(data.get("parallelism", "DATA")).strip().upper()
    if strategy not in STRATEGIES:
        raise InputError(f"{source}: parallelism", f"unknown parallelism {strategy!r}", ", ".join(STRATEGIES))
    group = data.get("model_parallel_group")
    if group is not None and (not isinstance(group, int) or group < 1):
        raise InputError(f"{source}: model_parallel_group", f"{group!r} is not a positive integer")
    placement = None if data.get("placement") is None else Placement.parse(data["placement"], f"{source}: placement")
    if strategy not in ALL_DIMS_STRATEGIES and group is None and placement is None:
        raise InputError(f"{source}: model_parallel_group", f"{strategy} needs a model_parallel_group")
    layers = _layers(data.get("layers"), source)
    dlrm = data.get("dlrm_last_bottom")
    if dlrm is not None and (strategy != "HYBRID_DLRM" or not isinstance(dlrm, int) or not 0 <= dlrm < len(layers)):
        raise InputError(f"{source}: dlrm_last_bottom", f"{dlrm!r} needs parallelism HYBRID_DLRM and a layer index")
    lists = {
        k: _index_list(data.get(k, []), f"{source}: {k}", len(layers)) for k in ("checkpoints", "checkpoint_initiates")
    }
    text = {k: data.get(k, "") for k in ("origin", "source_sha256")}
    for k, v in text.items():
        if not isinstance(v, str):
            raise InputError(f"{source}: {k}", f"{v!r} is not a string")
    slice_ = data.get("layer0_input_gradient", False)
    if not isinstance(slice_, bool):
        raise InputError(f"{source}: layer0_input_gradient", f"{slice_!r} is not true or false", "true, false")
    return Workload(
        str(data.get("name", "workload")),
        strategy,
        tuple(layers),
        group,
        source,
        dlrm,
        lists["checkpoints"],
        lists["checkpoint_initiates"],
        **text,
        layer0_input_gradient=slice_,
        placement=placement,
    )


def _layers(raw: Any, source: str) -> list[Layer]:
    """The ``[[layers]]`` tables (or `Layer` objects): one or more, at most `MAX_LAYERS`."""
    if not isinstance(raw, (list, tuple)) or not raw:
        raise InputError(f"{source}: layers", "no layers", "one or more [[layers]] tables")
    check_layers(len(raw), source)
    return [entry if isinstance(entry, Layer) else _layer(entry, i, source, len(raw)) for i, entry in enumerate(raw)]


def _layer(entry: Any, i: int, source: str, n: int) -> Layer:
    """Layer `i`'s ``[[layers]]`` table, of a workload of `n` layers; absent fields are 0 or none."""
    where = f"{source}: layers[{i}]"
    if not isinstance(entry, Mapping):
        raise InputError(where, f"{entry!r} is not a table")
    bad = set(entry) - _LAYER_KEYS
    if bad:
        raise InputError(where, f"unknown key(s) {', '.join(sorted(bad))}", ", ".join(sorted(_LAYER_KEYS)))
    dep = entry.get("dependency", -1)
    if isinstance(dep, bool) or not isinstance(dep, int) or not -1 <= dep < n:
        raise InputError(f"{where}.dependency", f"{dep!r} is not a layer index", "-1 or a layer index")
    vals: dict[str, Any] = {"name": str(entry.get("name", f"layer{i}")), "dependency": dep}
    for slot in SLOTS:
        vals[f"{slot}_compute"] = _nonneg(entry.get(f"{slot}_compute", 0), f"{where}.{slot}_compute")
        vals[f"{slot}_comm"] = _comm(entry.get(f"{slot}_comm", "none"), f"{where}.{slot}_comm")
        vals[f"{slot}_bytes"] = _bytes(entry.get(f"{slot}_bytes", 0), f"{where}.{slot}_bytes")
    vals["wg_update"] = _nonneg(entry.get("wg_update", 0), f"{where}.wg_update")
    return Layer(**vals)


def _comm(comm: Any, where: str) -> str | None:
    """A slot's collective: none (absent, ``"none"``) or a collective's name."""
    if comm is None or str(comm).strip().lower() == "none":
        return None
    try:
        return parse_collective(str(comm))
    except InputError as e:
        raise InputError(where, e.problem, e.allowed) from None


def _bytes(nbytes: Any, where: str) -> int:
    """A slot's bytes per NPU: a whole number, 0 to 2^53."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not 0 <= nbytes <= MAX_BYTES:
        raise InputError(where, f"{nbytes!r} is out of range", "a whole number of bytes, 0 to 2^53")
    return nbytes


def _index_list(v: Any, where: str, n: int) -> tuple[int, ...]:
    if not isinstance(v, (list, tuple)) or any(
        isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n for i in v
    ):
        raise InputError(where, f"{v!r} is not a list of layer indices", f"integers 0 to {n - 1}")
    return tuple(v)


def _nonneg(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= MAX_NS:
        raise InputError(where, f"{v!r} is out of range", f"a number of ns from 0 to {MAX_NS:g}")
    return float(v)
