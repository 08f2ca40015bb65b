"""ASTRA-sim 2.x system configuration files (``--system SYS.json``), read as they are.

What each key does in ASTRA-sim (astra-sim 518bd51, ``astra-sim/system/Sys.cc`` ``initialize_sys``,
``astraccl/CollectiveImplLookup.cc``, ``workload/Workload.cc``; the two scheduling keys are not read
by that commit, which always runs ``ascending`` + ``FIFO``; the reference build re-enables them and
dse honours them as written) and what it becomes in dse:

=============================== ===================================================================
``preferred-dataset-splits``    required (ASTRA-sim divides by it): `SystemConfig.chunks`
``active-chunks-per-dimension`` default 1: `SystemConfig.active_chunks`
``endpoint-delay``              ns, default 10: `SystemConfig.endpoint_delay_ns`
``scheduling-policy``           LIFO, FIFO or EXPLICIT: the priority of a collective's chunks against
                                another collective's on the same NPU. ASTRA-sim runs one collective
                                at a time per NPU (one communication slot), so it never changes a
                                time; recorded, nothing else
``collective-optimization``     ``localBWAware``: an all-reduce runs RS, one AR phase, AG (dse's
                                only composition); ``baseline`` (an AR phase on every dimension) or
                                a missing key (ASTRA-sim leaves it undefined) is refused where an
                                all-reduce spans two or more dimensions (`check_topology`)
``*-implementation``            one name per dimension and collective: `check_topology`
``inter-dimension-scheduling``  ``ascending`` (default) -> scheduler ``baseline``; ``offlineGreedy``
                                -> ``themis``. ``offlineGreedyFlex`` (dse has no such scheduler) and
                                ``roundRobin`` (ASTRA-sim keeps its rotation across collectives;
                                dse's ``round_robin`` restarts per collective) are refused
``intra-dimension-scheduling``  ``FIFO`` (default) -> queue ``fifo``; ``smallestFirst`` -> ``scf``;
                                ``RG`` and ``lessRemainingPhaseFirst`` are refused
``roofline-enabled``            0 or 1 (ASTRA-sim enables on any value but 0, ``false`` included, so
                                only 0 and 1 are taken); with 1, ``peak-perf`` and ``local-mem-bw``
                                are required: `SystemConfig.roofline`
``peak-perf``                   TFLOP/s (x 1e12)
``local-mem-bw``                GB/s with GB = 1e9 B: the roofline's memory side and the local
                                reduction step of collectives, 3 x floor(S / M x 1e9) ns per
                                bundle of S bytes (``PacketBundle.cc``): `SystemConfig.reduction_ns`
``boost-mode``                  not read by ASTRA-sim 2.x: 0 taken, anything else a warning
``trace-enabled``, ``track-local-mem``, ``local-mem-trace-filename``: logs and files only; set,
                                they are a warning line (dse's ``--trace`` writes a timeline)
``L``, ``o``, ``g``, ``G``, ``local-reduction-delay``: used only by the shared-bus model: a warning
``model-shared-bus``, ``replay-only``: 0 taken, anything else refused (they change times)
``*-implementation-custom``, ``per-node-custom-implementation``: custom collectives, refused
=============================== ===================================================================

The implementation lists (`check_topology`): ASTRA-sim runs entry d of a list on dimension d; dse's
``astra-sim`` model runs each dimension's own algorithm (``ring`` on Ring, ``direct`` on
FullyConnected, ``halvingDoubling`` on Switch, unless the topology names another), and an all-to-all
``ring`` on a ring-algorithm dimension, ``direct`` on any other (`dse_algorithm`). An entry that
differs, a list of another length than the topology's dimensions (dse drops dimensions of one NPU,
so such a network file needs lists without their entries), or a missing list is refused when the
workload runs that collective and a warning line when it does not (ASTRA-sim only reads a list when
the collective runs; it exits on a halving-doubling all-to-all). `SystemConfig.with_implementations`
first takes a non-default algorithm where dse's formula for it is ASTRA-sim's (any of the three on
FullyConnected and Switch, whose peers are all one and two hops away; on a Ring only ``ring``).
``local-mem-bw`` of 1e12 GB/s or more counts as infinite for the cost models
(`SystemConfig.local_mem_bytes_per_s` None): every bundle below 1 TB then costs 0 ns, as in ASTRA-sim.

A key ASTRA-sim does not know is ignored by ASTRA-sim (it only reads the keys above), so ignoring it
cannot make dse's times differ from ASTRA-sim's: it is a warning line naming the key (with the
nearest known key, for a typo), not a refusal. A missing required key, a value of the wrong type,
a number out of range or a value dse cannot honour is one `InputError` naming the option, the file
and the key. JSON is read whole, size-limited (`dse.core.files.read_text`); a key given twice is
refused (JSON readers disagree on which one wins). Warning lines carry no prefix: the caller prints
them (`check_topology` returns them all).
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dse.core.collectives import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, COLLECTIVES, REDUCE_SCATTER, parse_collective
from dse.core.errors import InputError
from dse.core.files import read_text
from dse.core.topology import Dim, Topology

#: the key of each collective's per-dimension implementation list
IMPLEMENTATION_KEYS = {
    ALL_REDUCE: "all-reduce-implementation",
    REDUCE_SCATTER: "reduce-scatter-implementation",
    ALL_GATHER: "all-gather-implementation",
    ALL_TO_ALL: "all-to-all-implementation",
}
#: ASTRA-sim's implementation names that dse runs, and dse's algorithm for each
IMPLEMENTATIONS = {"ring": "ring", "direct": "direct", "halvingDoubling": "halving_doubling"}
_ASTRA_NAME = {v: k for k, v in IMPLEMENTATIONS.items()}
#: names ASTRA-sim accepts besides those (``direct<N>``/``oneDirect<N>``: a window of N messages)
ASTRA_ONLY = ("oneRing", "oneDirect", "oneHalvingDoubling", "doubleBinaryTree")
#: the algorithms whose dse formula is ASTRA-sim's on each kind (a message costs the same hops to
#: every peer there); on a ring, direct and halving-doubling reach peers several hops away
EXACT_ON = {
    "ring": ("ring",),
    "fc": ("ring", "direct", "halving_doubling"),
    "switch": ("ring", "direct", "halving_doubling"),
}
_KIND_NAME = {"ring": "Ring", "fc": "FullyConnected", "switch": "Switch"}

INTER = {"ascending": "baseline", "offlineGreedy": "themis"}
INTRA = {"FIFO": "fifo", "smallestFirst": "scf"}
_REFUSED_VALUES = {
    "offlineGreedyFlex": "dse has no offlineGreedyFlex (variable-size chunks)",
    "roundRobin": "ASTRA-sim's roundRobin keeps its rotation across collectives, dse's round_robin restarts",
    "RG": "dse does not run the RG queue",
    "lessRemainingPhaseFirst": "dse does not run the lessRemainingPhaseFirst queue",
}
POLICIES = ("LIFO", "FIFO", "EXPLICIT")
OPTIMIZATIONS = ("localBWAware", "baseline")
_WARN_KEYS = {
    "trace-enabled": "ASTRA-sim's debug log only (dse --trace writes a timeline)",
    "track-local-mem": "a memory-usage file only",
    "local-mem-trace-filename": "a memory-usage file only",
    "L": "used only with model-shared-bus 1",
    "o": "used only with model-shared-bus 1",
    "g": "used only with model-shared-bus 1",
    "G": "used only with model-shared-bus 1",
    "local-reduction-delay": "used only with model-shared-bus 1",
}
_ZERO_ONLY = {
    "model-shared-bus": "the shared memory bus model, which dse does not run",
    "replay-only": "every node replaying its duration, communication included, which dse does not run",
}
_CUSTOM = (
    "all-reduce-implementation-custom",
    "reduce-scatter-implementation-custom",
    "all-gather-implementation-custom",
    "all-to-all-implementation-custom",
    "per-node-custom-implementation",
)
_VALUE_KEYS = (
    "preferred-dataset-splits",
    "active-chunks-per-dimension",
    "endpoint-delay",
    "scheduling-policy",
    "collective-optimization",
    *IMPLEMENTATION_KEYS.values(),
    "inter-dimension-scheduling",
    "intra-dimension-scheduling",
    "roofline-enabled",
    "peak-perf",
    "local-mem-bw",
    "boost-mode",
)
#: every key ASTRA-sim 2.x reads (with the two scheduling keys), in the order this module lists them
KNOWN_KEYS: tuple[str, ...] = (*_VALUE_KEYS, *_WARN_KEYS, *_ZERO_ONLY, *_CUSTOM)
#: a local-mem-bw (GB/s) from which dse takes the local memory as infinite (no reduction cost):
#: there a bundle of S bytes waits 3 x floor(S x 1e-12) ns or less, 0 for every S below 1e12 B
#: (1 TB, beyond any chunk a workload sends); the references' "lminf" files give exactly 1e12
INFINITE_LOCAL_MEM_GBPS = 1e12
_INT32 = 2**31 - 1


# ----------------------------------------------------------------------------- JSON, values
def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    for t, name in ((dict, "an object"), (list, "a list"), (str, "a string"), ((int, float), "a number")):
        if isinstance(value, t):
            return name
    return "null"


def read_json_object(path: str | Path, field: str) -> dict[str, Any]:
    """The top-level JSON object of a file, read size-limited (`read_text`); not JSON, a key given
    twice, NaN or Infinity, or anything but an object is one `InputError` naming `field` and the file."""
    where = f"{field} {path}"
    text = read_text(path, field)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        """The object of `items`, refusing a key given twice."""
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                raise InputError(f"{where}: {k}", "given twice", "each key once")
            out[k] = v
        return out

    def constant(name: str) -> Any:
        """Refuse NaN and Infinity."""
        raise InputError(where, f"{name} is not a JSON number", "finite numbers")

    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except json.JSONDecodeError as e:
        raise InputError(
            where, f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})", "a JSON object"
        ) from None
    except RecursionError:
        raise InputError(where, "nested too deeply to read", "a JSON object") from None
    except ValueError as e:  # an integer of more than 4300 digits
        raise InputError(where, f"not readable as JSON: {e}", "a JSON object") from None
    if not isinstance(data, dict):
        raise InputError(where, f"{_json_type(data)} where a JSON object belongs", "a JSON object of keys to values")
    return data


def whole(value: Any, where: str, minimum: int, maximum: int, unit: str = "") -> int:
    """A JSON whole number (``4`` or ``4.0``) within [minimum, maximum]; anything else one line."""
    u = f" {unit}" if unit else ""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value != int(value):
        raise InputError(where, f"{value!r} is not a whole number{u}", f"a whole number from {minimum}{u}")
    v = int(value)
    if not minimum <= v <= maximum:
        raise InputError(where, f"{v}{u} is out of range", f"{minimum} to {maximum}{u}")
    return v


def _positive(value: Any, where: str, unit: str) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value <= 0:
        raise InputError(where, f"{value!r} is not a positive number of {unit}", f"a positive number of {unit}")
    return float(value)


def _choice(value: Any, where: str, allowed: Iterable[str]) -> str:
    names = tuple(allowed)
    if not isinstance(value, str) or value not in names:
        reason = _REFUSED_VALUES.get(value) if isinstance(value, str) else None
        problem = f"{value!r}: {reason}" if reason else f"{value!r} is not one of them"
        raise InputError(where, problem, ", ".join(names))
    return value


def _flag(value: Any, where: str) -> int:
    if isinstance(value, bool) or value not in (0, 1):
        raise InputError(where, f"{value!r}", "0 or 1 (ASTRA-sim reads any other value, false included, as on)")
    return int(value)


def _names(value: Any, where: str) -> tuple[str, ...]:
    """An implementation list: strings ASTRA-sim knows (it exits on any other)."""
    if not isinstance(value, list) or not value:
        raise InputError(where, f"{_json_type(value)} where a list of names belongs", "one name per dimension")
    for i, name in enumerate(value):
        known = isinstance(name, str) and (
            name in IMPLEMENTATIONS or name in ASTRA_ONLY or _windowed(name, "direct") or _windowed(name, "oneDirect")
        )
        if not known:
            allowed = ", ".join([*IMPLEMENTATIONS, *ASTRA_ONLY, "direct<N>", "oneDirect<N>"])
            raise InputError(f"{where}[{i}]", f"{name!r} is no ASTRA-sim implementation", allowed)
    return tuple(value)


def _windowed(name: str, stem: str) -> bool:
    return name.startswith(stem) and name[len(stem) :].isdigit()


# ----------------------------------------------------------------------------- the configuration
@dataclass(frozen=True)
class SystemConfig:
    """An ASTRA-sim 2.x system configuration as the file gives it (module docstring): the values
    in ASTRA-sim's units, with methods that say what dse's run parameters become. `warnings`: the
    lines about keys that change no time (printed by the caller, with `check_topology`'s)."""

    path: str
    field: str
    splits: int
    active_chunks_per_dimension: int = 1
    endpoint_delay: int = 10
    scheduling_policy: str | None = None
    collective_optimization: str | None = None
    all_reduce_implementation: tuple[str, ...] | None = None
    reduce_scatter_implementation: tuple[str, ...] | None = None
    all_gather_implementation: tuple[str, ...] | None = None
    all_to_all_implementation: tuple[str, ...] | None = None
    inter_dimension_scheduling: str = "ascending"
    intra_dimension_scheduling: str = "FIFO"
    roofline_enabled: bool = False
    peak_perf: float | None = None
    local_mem_bw: float | None = None
    boost_mode: int = 0
    warnings: tuple[str, ...] = ()

    # ----- dse's run parameters -------------------------------------------------------------------
    @property
    def scheduler(self) -> str:
        """dse's inter-dimension scheduler: ``baseline`` (ascending) or ``themis`` (offlineGreedy)."""
        return INTER[self.inter_dimension_scheduling]

    @property
    def queue(self) -> str:
        """dse's queue policy: ``fifo`` (FIFO) or ``scf`` (smallestFirst)."""
        return INTRA[self.intra_dimension_scheduling]

    @property
    def chunks(self) -> int:
        """dse's ``chunks``: ASTRA-sim's ``preferred-dataset-splits``."""
        return self.splits

    @property
    def active_chunks(self) -> int:
        """Chunks in flight per dimension (``active-chunks-per-dimension``)."""
        return self.active_chunks_per_dimension

    @property
    def endpoint_delay_ns(self) -> int:
        """The endpoint delay in ns, for the ``astra-sim`` model. ASTRA-sim charges it on the
        phases of whole-dimension collectives; a collective on a strict-subset communicator group
        runs on a ``Local`` ring, whose memory-bus steps take a fixed 10 ns instead (``MemBus.cc``
        ``Transmition::Fast``)."""
        return self.endpoint_delay

    @property
    def roofline(self) -> tuple[float, float] | None:
        """(peak FLOP/s, memory bytes/s) with the roofline enabled, else None: ``peak-perf`` x 1e12
        and ``local-mem-bw`` x 1e9, the products ASTRA-sim forms (same double arithmetic)."""
        if not self.roofline_enabled or self.peak_perf is None or self.local_mem_bw is None:
            return None
        return self.peak_perf * 1e12, self.local_mem_bw * 1e9

    @property
    def local_mem_bytes_per_s(self) -> float | None:
        """``local-mem-bw`` in bytes/s (x 1e9) for the reduction cost of the ``astra-sim`` model,
        or None for none: when the key is absent (ASTRA-sim would divide by 0) or at least
        `INFINITE_LOCAL_MEM_GBPS` (every bundle below 1 TB costs 0 ns there, as in ASTRA-sim)."""
        if self.local_mem_bw is None or self.local_mem_bw >= INFINITE_LOCAL_MEM_GBPS:
            return None
        return self.local_mem_bw * 1e9

    def reduction_ns(self, size_bytes: int) -> int:
        """ASTRA-sim's local reduction of a bundle of `size_bytes`, whatever its size: a write and
        two reads, each ⌊S / M x 1e9⌋ ns truncated separately (M = ``local-mem-bw`` x 1e9 B/s);
        0 without ``local-mem-bw``."""
        if self.local_mem_bw is None:
            return 0
        return 3 * int(float(size_bytes) / (self.local_mem_bw * 1e9) * 1e9)

    def implementation(self, collective: str) -> tuple[str, ...] | None:
        """The file's list for `collective` (dse's name, e.g. ``all_reduce``), None if absent."""
        attr = IMPLEMENTATION_KEYS[parse_collective(collective)].replace("-", "_")
        value: tuple[str, ...] | None = getattr(self, attr)
        return value

    # ----- against a topology ---------------------------------------------------------------------
    def check_topology(self, topology: Topology, collectives: Iterable[str] | None = None) -> list[str]:
        """Check the per-dimension lists and ``collective-optimization`` against `topology` (the
        algorithm dse runs on each dimension: `dse_algorithm`) and return every warning line, the
        file's own (`warnings`) first. `collectives`: the collectives the workload runs (dse's
        names; None = all four). A mismatch for a collective it runs is an `InputError` naming the
        key, index, value and what is allowed; for one it does not run, a warning line."""
        runs = set(COLLECTIVES) if collectives is None else {parse_collective(c) for c in collectives}
        out = list(self.warnings)
        for coll in COLLECTIVES:
            for where, problem, allowed in self._list_problems(coll, topology):
                if coll in runs:
                    raise InputError(where, problem, allowed)
                out.append(f"{where}: {problem}: ignored, the workload runs no {coll.replace('_', '-')}")
        opt = self.collective_optimization
        if ALL_REDUCE in runs and topology.ndims >= 2 and opt != "localBWAware":
            problem = (
                "missing: ASTRA-sim leaves the all-reduce's composition undefined"
                if opt is None
                else "baseline: an all-reduce as an AR phase on every dimension, which dse does not run"
            )
            raise InputError(f"{self.field} {self.path}: collective-optimization", problem, "localBWAware")
        return out

    def _list_problems(self, coll: str, topology: Topology) -> list[tuple[str, str, str]]:
        key = IMPLEMENTATION_KEYS[coll]
        where = f"{self.field} {self.path}: {key}"
        names = self.implementation(coll)
        if names is None:
            return [(where, "missing (ASTRA-sim exits when the collective runs)", "one name per dimension")]
        if len(names) != topology.ndims:
            return [(where, f"{len(names)} names for {topology.ndims} dimensions", "one name per dimension")]
        out = []
        for i, (name, dim) in enumerate(zip(names, topology.dims, strict=True)):
            runs = dse_algorithm(coll, dim)
            if IMPLEMENTATIONS.get(name) != runs:
                note = "; ASTRA-sim exits on it" if coll == ALL_TO_ALL and name == "halvingDoubling" else ""
                problem = (
                    f"{name!r} on dimension {i} ({_KIND_NAME[dim.kind]}), where dse runs {_ASTRA_NAME[runs]}{note}"
                )
                out.append((f"{where}[{i}]", problem, _ASTRA_NAME[runs]))
        return out

    def with_implementations(self, topology: Topology, collectives: Iterable[str] | None = None) -> Topology:
        """`topology` with each dimension's algorithm set from the all-reduce, reduce-scatter and
        all-gather lists (of the collectives the workload runs) where they name one algorithm
        whose dse formula is ASTRA-sim's on that kind (`EXACT_ON`: any on FullyConnected and
        Switch, ring only on Ring); other dimensions are left as they are, for `check_topology`."""
        runs = set(COLLECTIVES) if collectives is None else {parse_collective(c) for c in collectives}
        lists = [self.implementation(c) for c in (ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER) if c in runs]
        given = [names for names in lists if names is not None and len(names) == topology.ndims]
        dims = list(topology.dims)
        for i, dim in enumerate(dims):
            algos = {IMPLEMENTATIONS.get(names[i]) for names in given}
            if len(algos) == 1:
                algo = algos.pop()
                if algo is not None and algo in EXACT_ON[dim.kind] and algo != dim.algorithm:
                    dims[i] = replace(dim, algorithm=algo)
        return topology if dims == list(topology.dims) else Topology(tuple(dims), name=topology.name)


def dse_algorithm(collective: str, dim: Dim) -> str:
    """The algorithm dse's ``astra-sim`` model runs for `collective` on `dim`: the dimension's own
    (``ring`` on Ring, ``direct`` on FullyConnected, ``halving_doubling`` on Switch by default);
    an all-to-all runs ``ring`` on a ring-algorithm dimension and ``direct`` on every other."""
    if collective == ALL_TO_ALL:
        return "ring" if dim.algorithm == "ring" else "direct"
    return str(dim.algorithm)


# ----------------------------------------------------------------------------- reading
def load_system(path: str | Path, field: str = "--system") -> SystemConfig:
    """An ASTRA-sim 2.x system configuration file as a `SystemConfig` (module docstring); any
    key or value dse cannot honour is one `InputError` naming `field`, the file and the key."""
    data = read_json_object(path, field)
    where = f"{field} {path}"
    warnings = _other_keys(data, where)
    if "preferred-dataset-splits" not in data:
        raise InputError(
            f"{where}: preferred-dataset-splits", "missing (ASTRA-sim divides by it)", "a whole number from 1"
        )
    kw: dict[str, Any] = {"path": str(path), "field": field}
    for key in _VALUE_KEYS:
        if key in data:
            _read_value(key, data[key], f"{where}: {key}", kw)
    if kw.get("boost_mode"):
        warnings.append(f"{where}: boost-mode: {kw['boost_mode']} ignored: ASTRA-sim 2.x does not read it")
    if kw.get("roofline_enabled"):
        for key, attr in (("peak-perf", "peak_perf"), ("local-mem-bw", "local_mem_bw")):
            if attr not in kw:
                raise InputError(f"{where}: {key}", "missing with roofline-enabled 1", "a positive number")
    return SystemConfig(**kw, warnings=tuple(warnings))


def _read_value(key: str, value: Any, where: str, kw: dict[str, Any]) -> None:
    """Check one value key and put it in `kw` under its `SystemConfig` field."""
    attr = key.replace("-", "_")
    if key == "preferred-dataset-splits":
        kw["splits"] = whole(value, where, 1, _INT32)
    elif key == "active-chunks-per-dimension":
        kw[attr] = whole(value, where, 1, _INT32)
    elif key == "endpoint-delay":
        kw[attr] = whole(value, where, 0, _INT32, "ns")
    elif key == "scheduling-policy":
        kw[attr] = _choice(value, where, POLICIES)
    elif key == "collective-optimization":
        kw[attr] = _choice(value, where, OPTIMIZATIONS)
    elif key in IMPLEMENTATION_KEYS.values():
        kw[attr] = _names(value, where)
    elif key == "inter-dimension-scheduling":
        kw[attr] = _choice(value, where, INTER)
    elif key == "intra-dimension-scheduling":
        kw[attr] = _choice(value, where, INTRA)
    elif key == "roofline-enabled":
        kw[attr] = bool(_flag(value, where))
    elif key == "peak-perf":
        kw[attr] = _positive(value, where, "TFLOP/s")
    elif key == "local-mem-bw":
        kw[attr] = _positive(value, where, "GB/s")
    else:  # boost-mode
        kw[attr] = _flag(value, where)


def _other_keys(data: dict[str, Any], where: str) -> list[str]:
    """Refuse the keys dse cannot honour; the warning lines of those it safely ignores."""
    out = []
    for key, value in data.items():
        if key in _VALUE_KEYS:
            continue
        if key in _CUSTOM:
            raise InputError(f"{where}: {key}", "custom collectives (Chakra graphs) are not run by dse", "native lists")
        if key in _ZERO_ONLY:
            if _flag(value, f"{where}: {key}"):
                raise InputError(f"{where}: {key}", f"1: {_ZERO_ONLY[key]}", "0, or leave it out")
        elif key in _WARN_KEYS:
            if value not in (0, "") or isinstance(value, bool):
                out.append(f"{where}: {key}: ignored: {_WARN_KEYS[key]}")
        else:
            near = difflib.get_close_matches(key, KNOWN_KEYS, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            out.append(f"{where}: {key}: not an ASTRA-sim key, ignored as ASTRA-sim ignores it{hint}")
    return out


__all__ = [
    "IMPLEMENTATIONS",
    "IMPLEMENTATION_KEYS",
    "KNOWN_KEYS",
    "SystemConfig",
    "dse_algorithm",
    "load_system",
    "read_json_object",
    "whole",
]
