"""Per-rank timelines as Chrome / Perfetto trace events (`dse iterate --trace FILE.json`).

`trace_events` turns a per-rank result (`dse.training.chakra.ranks_result.RanksResult`, or the plain dict
``dse iterate --json --timeline`` prints for per-rank traces: ``classes`` and ``spans``) into the
JSON object format of the Trace Event Format, which ui.perfetto.dev and chrome://tracing load;
`write_trace` writes it atomically (`dse.core.files.write_atomic`). `ranks_view` reads and checks
such a result once, for this module and for `dse.output.ranks_timeline`.

The choices made here:

- **A process per rank class.** ``pid`` is the class index + 1 (some viewers treat pid 0 as the
  idle process), named ``class K: ranks 0-3,8`` (`rank_ranges`: runs of consecutive ranks, long
  lists shortened to their first and last runs with the rank count), with ``process_sort_index``
  K, and ``process_labels`` giving the class's finish, compute and exposed times with their units.
- **A thread per lane**, in the order compute, CPU, communication, receives, memory, dim 0, dim 1,
  ..., then any other lane name alphabetically (named as it is). Threads are named ``compute``,
  ``CPU``, ``communication``, ``receives``, ``memory``, ``dim 0 (Ring)`` (the dimension's kind when the
  result's topology is a notation or preset dse can read without opening a file; ``dim 0``
  otherwise). ``tid`` counts from 1 in that order, and ``thread_sort_index`` equals it.
- **Overlapping spans** on one lane (receives waiting at once, collectives sharing a dimension)
  go to extra threads of the lane, ``receives 2``, ``receives 3`` ...: first fit in start order,
  so complete events on one thread never overlap, not even nested (the lanes are resources, not
  call stacks). Spans that touch (one ends where the next starts) share a thread.
- **Times.** ``ts`` is ``start_ns / 1000`` and ``dur`` is ``(end_ns - start_ns) / 1000``, in
  microseconds (the format's unit) as floats, so no nanosecond is rounded away; ``args`` carries
  ``start_ns`` and ``end_ns`` exactly. Whether spans overlap is decided on the exact
  nanoseconds; their microsecond forms can differ from each other by an ulp of rounding.
  ``displayTimeUnit`` is ``ns``: chrome://tracing then shows times in ns; ui.perfetto.dev ignores
  the key (Perfetto releases up to early 2022 read ``ts`` in ns when it was set: 1000 times too small).
- **Deterministic bytes**: events in a fixed order (metadata, then per class per thread by start),
  keys sorted, one event per line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from dse.core.errors import InputError
from dse.core.files import check_output_file, write_atomic
from dse.core.network_yaml import is_network_file
from dse.core.topology import Topology, parse_topology
from dse.core.units import format_time
from dse.output.timeline_lanes import stack_rows

NEEDS = "a per-rank result: dse iterate --json --timeline of a per-rank trace (classes and spans)"
_FIXED_LANES = {
    "compute": (0, "compute"),
    "cpu": (1, "CPU"),
    "comm": (2, "communication"),
    "recv": (3, "receives"),
    "mem": (4, "memory"),
}
_KIND_NAMES = {"ring": "Ring", "fc": "FC", "switch": "SW"}
_META_KEYS = ("workload", "topology", "cost_model", "time_ns", "npus")
_MISSING = object()


@dataclass(frozen=True)
class ClassInfo:
    """One class of alike ranks: its index, ranks, and finish, compute and exposed times (ns, or None)."""

    index: int
    ranks: tuple[int, ...]
    finish_ns: float | None = None
    compute_ns: float | None = None
    exposed_ns: float | None = None


@dataclass(frozen=True)
class LaneSpan:
    """One busy interval of a class's lane, [start_ns, end_ns]."""

    cls: int
    lane: str
    name: str
    start_ns: float
    end_ns: float


@dataclass
class RanksView:
    """A checked per-rank result: classes by index (in index order), spans, and the run's scalars."""

    classes: dict[int, ClassInfo]
    spans: list[LaneSpan]
    meta: dict[str, Any]


def _get(obj: Any, key: str, default: Any = _MISSING) -> Any:
    """`obj[key]` of a mapping, `obj.key` of an object (a `RanksResult`, its spans); `default` if absent."""
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _time(v: Any, what: str, field: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise InputError(field, f"{what} is {v!r}, not a time >= 0 ns", NEEDS)
    return float(v)


def _index(v: Any, what: str, field: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InputError(field, f"{what} is {v!r}, not an integer >= 0", NEEDS)
    return v


def _seq(x: Any) -> TypeGuard[Sequence[Any]]:
    """A list or tuple (a sequence that is not text)."""
    return isinstance(x, Sequence) and not isinstance(x, (str, bytes))


def _class(c: Any, k: int, by_rank: Mapping[str, Any], field: str) -> ClassInfo:
    """Class entry `k`: a mapping or object (index, ranks, finish_ns, ...) or a bare list of ranks;
    a time it lacks is its first rank's in the result's ``*_ns_by_rank`` list, if any."""
    bare = _seq(c)
    index = k if bare else _index(_get(c, "index", k), f"class {k}'s index", field)
    ranks = c if bare else _get(c, "ranks", None)
    if not _seq(ranks) or not ranks:
        raise InputError(field, f"class {index} has no list of ranks", NEEDS)
    rs = tuple(_index(r, f"a rank of class {index}", field) for r in ranks)
    times: list[float | None] = []
    for key in ("finish_ns", "compute_ns", "exposed_ns"):
        v = None if bare else _get(c, key, None)
        listed = by_rank.get(key)
        if v is None and _seq(listed) and rs[0] < len(listed):
            v = listed[rs[0]]
        times.append(None if v is None else _time(v, f"class {index}'s {key}", field))
    return ClassInfo(index, rs, *times)


def _classes(raw: Any, by_rank: Mapping[str, Any], field: str) -> dict[int, ClassInfo]:
    if not _seq(raw) or not raw:
        raise InputError(field, "has no list of rank classes", NEEDS)
    out: dict[int, ClassInfo] = {}
    for k, c in enumerate(raw):
        info = _class(c, k, by_rank, field)
        if info.index in out:
            raise InputError(field, f"class {info.index} appears twice", NEEDS)
        out[info.index] = info
    return dict(sorted(out.items()))


def _spans(raw: Any, classes: Mapping[int, ClassInfo], field: str) -> list[LaneSpan]:
    if raw is _MISSING or raw is None:
        raise InputError(field, "has no spans (written without --timeline?)", NEEDS)
    if not _seq(raw):
        raise InputError(field, "its spans are not a list", NEEDS)
    out = []
    for k, s in enumerate(raw):
        cls, lane, name = _get(s, "cls", None), _get(s, "lane", None), _get(s, "name", "")
        if isinstance(cls, bool) or not isinstance(cls, int) or cls not in classes:
            raise InputError(field, f"span {k} has class {cls!r}", f"a class of the result: {rank_ranges(classes)}")
        if not isinstance(lane, str) or not lane or not isinstance(name, str):
            raise InputError(field, f"span {k} has lane {lane!r} and name {name!r}", NEEDS)
        a = _time(_get(s, "start_ns", None), f"span {k}'s start_ns", field)
        b = _time(_get(s, "end_ns", None), f"span {k}'s end_ns", field)
        if b < a:
            raise InputError(field, f"span {k} ends at {b!r} ns, before its start at {a!r} ns", NEEDS)
        out.append(LaneSpan(cls, lane, name, a, b))
    return out


def ranks_view(result: Any, field: str = "result") -> RanksView:
    """Check a per-rank result (a mapping, or an object with the same attributes) and return it as
    `RanksView`; anything missing or malformed is one `InputError` naming `field` and what is wrong."""
    if result is None or isinstance(result, (str, bytes, int, float, list)):
        raise InputError(field, "is not a result object", NEEDS)
    by_rank = {k: _get(result, f"{k}_by_rank", None) for k in ("finish_ns", "compute_ns", "exposed_ns")}
    classes = _classes(_get(result, "classes", None), by_rank, field)
    spans = _spans(_get(result, "spans", _MISSING), classes, field)
    meta = {}
    for key in _META_KEYS:
        v = _get(result, key, None)
        if isinstance(v, str) or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)):
            meta[key] = v
    return RanksView(classes, spans, meta)


def is_ranks_result(d: object) -> bool:
    """Whether a parsed JSON result is a per-rank one (``per_rank`` true, spans, or rank classes and
    no timeline of another kind), which `dse plot timeline` draws per class."""
    if not isinstance(d, Mapping):
        return False
    if d.get("per_rank") is True or "spans" in d:
        return True
    return "classes" in d and "nodes" not in d and "timeline" not in d


def rank_ranges(ranks: Iterable[int], most: int = 6) -> str:
    """``0-3,8``: sorted ranks as runs of consecutive ones; above `most` runs, the first ones,
    ``...`` and the last one, with the count: ``0,8,16,...,1016 (128 ranks)``."""
    rs = sorted(set(ranks))
    runs: list[tuple[int, int]] = []
    for r in rs:
        if runs and r == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], r)
        else:
            runs.append((r, r))
    text = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs]
    if len(text) <= most:
        return ",".join(text)
    return ",".join([*text[: most - 1], "...", text[-1]]) + f" ({len(rs)} ranks)"


def lane_order(lane: str) -> tuple[int, int, str]:
    """The sort key that puts lanes in the order compute, CPU, communication, receives, memory, dim 0, ..."""
    if lane in _FIXED_LANES:
        return (_FIXED_LANES[lane][0], 0, "")
    if lane.startswith("dim") and lane[3:].isdigit():
        return (5, int(lane[3:]), "")
    return (6, 0, lane)


def lane_title(lane: str, topology: Topology | None = None) -> str:
    """What a lane is called: ``compute``, ``CPU``, ``communication``, ``receives``, ``memory``, ``dim 0 (Ring)``
    (``dim 0`` without a topology); any other lane by its own name."""
    if lane in _FIXED_LANES:
        return _FIXED_LANES[lane][1]
    if lane.startswith("dim") and lane[3:].isdigit():
        k = int(lane[3:])
        if topology is not None and k < topology.ndims:
            kind = topology.dims[k].kind
            return f"dim {k} ({_KIND_NAMES.get(kind, kind)})"
        return f"dim {k}"
    return lane


def lane_category(lane: str) -> str:
    """The event category of a lane: compute, cpu, comm, recv, mem, network (every dimension) or the lane."""
    if lane in _FIXED_LANES:
        return lane
    return "network" if lane.startswith("dim") and lane[3:].isdigit() else lane


def result_topology(meta: Mapping[str, Any]) -> Topology | None:
    """The topology a result names, when it is a notation or preset (an ASTRA-sim network file is
    not opened: its path may not exist where the result is read); None when it cannot be read."""
    spec = meta.get("topology")
    if not isinstance(spec, str) or is_network_file(spec.strip()):
        return None
    try:
        return parse_topology(spec)
    except (InputError, ValueError):
        return None


def class_labels(c: ClassInfo) -> str:
    """``4 ranks; finish 1.235 ms, compute 0.800 ms, exposed 0.200 ms`` (the times the result has)."""
    parts = [f"{len(c.ranks)} rank{'s' if len(c.ranks) != 1 else ''}"]
    times = [
        f"{what} {format_time(v)}"
        for what, v in (("finish", c.finish_ns), ("compute", c.compute_ns), ("exposed", c.exposed_ns))
        if v is not None
    ]
    return "; ".join([*parts, ", ".join(times)] if times else parts)


def _meta_event(name: str, pid: int, args: dict[str, Any], tid: int | None = None) -> dict[str, Any]:
    e: dict[str, Any] = {"args": args, "name": name, "ph": "M", "pid": pid}
    if tid is not None:
        e["tid"] = tid
    return e


def _class_events(c: ClassInfo, spans: list[LaneSpan], topology: Topology | None) -> list[dict[str, Any]]:
    """The metadata and complete events of one class (process ``index + 1``)."""
    pid = c.index + 1
    meta = [
        _meta_event("process_name", pid, {"name": f"class {c.index}: ranks {rank_ranges(c.ranks)}"}),
        _meta_event("process_sort_index", pid, {"sort_index": c.index}),
        _meta_event("process_labels", pid, {"labels": class_labels(c)}),
    ]
    events: list[dict[str, Any]] = []
    by_lane: dict[str, list[LaneSpan]] = {}
    for s in spans:
        by_lane.setdefault(s.lane, []).append(s)
    tid = 0
    for lane in sorted(by_lane, key=lane_order):
        items = sorted(by_lane[lane], key=lambda s: (s.start_ns, s.end_ns, s.name))
        rows, nrows = stack_rows([(s.start_ns, s.end_ns) for s in items])
        title, cat = lane_title(lane, topology), lane_category(lane)
        per_row: list[list[LaneSpan]] = [[] for _ in range(nrows)]
        for s, r in zip(items, rows):
            per_row[r].append(s)
        for row, row_spans in enumerate(per_row):
            tid += 1
            name = title if row == 0 else f"{title} {row + 1}"
            meta.append(_meta_event("thread_name", pid, {"name": name}, tid))
            meta.append(_meta_event("thread_sort_index", pid, {"sort_index": tid}, tid))
            events.extend(_complete(s, c.index, pid, tid, cat, title) for s in row_spans)
    return meta + events


def _complete(s: LaneSpan, cls: int, pid: int, tid: int, cat: str, title: str) -> dict[str, Any]:
    """The complete ("X") event of one span, in µs, its exact ns in args."""
    return {
        "args": {"class": cls, "end_ns": s.end_ns, "start_ns": s.start_ns},
        "cat": cat,
        "dur": (s.end_ns - s.start_ns) / 1000.0,
        "name": s.name or title,
        "ph": "X",
        "pid": pid,
        "tid": tid,
        "ts": s.start_ns / 1000.0,
    }


def trace_events(result: Any, *, topology: Topology | None = None, field: str = "result") -> dict[str, Any]:
    """The Chrome / Perfetto trace (JSON object format) of a per-rank result: ``traceEvents`` (a
    process per rank class, a thread per lane and sub-lane, complete events in µs: module
    docstring), ``displayTimeUnit`` ``ns`` and ``otherData`` (the run's workload, topology, cost
    model, time_ns and npus where the result has them). `topology` names the dimensions' kinds
    (else the result's own, when readable: `result_topology`). Bad input: `ranks_view`'s one line."""
    view = ranks_view(result, field)
    topo = topology if topology is not None else result_topology(view.meta)
    per_class: dict[int, list[LaneSpan]] = {k: [] for k in view.classes}
    for s in view.spans:
        per_class[s.cls].append(s)
    events: list[dict[str, Any]] = []
    for k, c in view.classes.items():
        events.extend(_class_events(c, per_class[k], topo))
    other = {"generator": "dse", "units": "ts and dur in µs; args start_ns and end_ns in ns", **view.meta}
    return {"displayTimeUnit": "ns", "otherData": other, "traceEvents": events}


def trace_json(trace: Mapping[str, Any]) -> str:
    """The text of a trace: keys sorted, one event per line, ending in a newline (same input, same bytes)."""

    def dump(x: Any) -> str:
        """`x` as compact JSON, keys sorted (NaN and infinity refused)."""
        return json.dumps(x, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":"))

    events = ",\n".join(dump(e) for e in trace["traceEvents"])
    head = ",".join(f"{dump(k)}:{dump(v)}" for k, v in sorted(trace.items()) if k != "traceEvents")
    return f'{{{head},"traceEvents":[\n{events}\n]}}\n'


def check_trace_path(path: str | Path, field: str = "--trace") -> Path:
    """Check before a run that `path` is a file `write_trace` may write (`check_output_file`: its
    folder exists, it is not a directory, FIFO, device or socket); returns it."""
    return check_output_file(path, field, whole=True)


def write_trace(result: Any, path: str | Path, *, topology: Topology | None = None, field: str = "--trace") -> Path:
    """Write `trace_events(result)` to `path` atomically (`write_atomic`: whole or not at all, the
    previous file kept on failure); the path is checked first (`check_trace_path`). Returns it."""
    p = check_trace_path(path, field)
    text = trace_json(trace_events(result, topology=topology, field=field))
    write_atomic(p, text, field)
    return p
