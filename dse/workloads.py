"""Training workloads: layers with compute times and the collectives they issue (DESIGN.md §1).

A `Workload` is what one training iteration runs on every NPU: per layer a forward compute, an
input-gradient (``ig``) compute and a weight-gradient (``wg``) compute, each optionally followed
by a collective, and a weight update. `dse.iteration` turns it into a timeline.

Three ways to get one:

- the ASTRA-sim 1.0 text format (`load_workload("x.txt")`): line 1 the parallelism strategy and
  its options (``model_parallel_NPU_group: N``; checkpoint lists are read and ignored), line 2
  the layer count, then one line per layer, whitespace separated (tabs or runs of spaces)::

      name dependency fwd_compute fwd_type fwd_bytes ig_compute ig_type ig_bytes
           wg_compute wg_type wg_bytes wg_update_time

  compute times in cycles (= ns), bytes per NPU, types NONE/ALLREDUCE/ALLGATHER/REDUCESCATTER/
  ALLTOALL. A damaged line raises `InputError` naming the file and the line number.
- the native TOML form (``*.toml``, see `workloads/*.toml` in the repository)::

      name = "tiny"
      parallelism = "DATA"            # or MODEL, HYBRID (needs model_parallel_group), HYBRID_DLRM, ...
      model_parallel_group = 128      # HYBRID only: NPUs per model-parallel group
      dlrm_last_bottom = 7            # HYBRID_DLRM only (the number after HYBRID_DLRM in ASTRA-sim)
      [[layers]]
      name = "conv1"
      fwd_compute = 1000              # ns; every field below is optional (0 / "none")
      fwd_comm = "none"               # none, all_reduce, all_gather, reduce_scatter, all_to_all
      fwd_bytes = 0                   # bytes per NPU
      ig_compute = 1000
      ig_comm = "none"
      ig_bytes = 0
      wg_compute = 1000
      wg_comm = "all_reduce"
      wg_bytes = 1048576
      wg_update = 10                  # ns

- the built-in generators, by spec string: ``"resnet152"`` or ``"transformer"``, with options
  after a colon: ``"resnet152:batch=64,efficiency=0.5"``, ``"transformer:layers=8,mp=32"``
  (see `resnet152` and `transformer`).

Where the collectives run (`Workload.scope`): in ``DATA``, ``MODEL``, ``MICRO`` and
``HYBRID_DLRM`` every collective spans all dimensions; in the other hybrid strategies the fwd and
ig collectives are model-parallel (the first dims whose NPU counts multiply to the group) and the
wg collective is data-parallel (the remaining dims).
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from .collectives import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, REDUCE_SCATTER, parse_collective
from .errors import InputError
from .files import read_text
from .limits import MAX_BYTES, MAX_LAYERS, MAX_NS
from .units import parse_positive

#: The three collective slots of a layer, in the order the fields appear.
SLOTS = ("fwd", "ig", "wg")
MP, DP, ALL = "mp", "dp", "all"

_ASTRA_TYPES = {
    "NONE": None,
    "ALLREDUCE": ALL_REDUCE,
    "ALLGATHER": ALL_GATHER,
    "REDUCESCATTER": REDUCE_SCATTER,
    "ALLTOALL": ALL_TO_ALL,
}
_STRATEGIES = ("DATA", "MODEL", "MICRO", "HYBRID_DLRM", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA",
               "HYBRID_TRANSFORMER", "HYBRID_TRANSFORMER_FWD_IN_BCKWD", "HYBRID")  # fmt: skip
_ALL_DIMS = ("DATA", "MODEL", "MICRO", "HYBRID_DLRM")


@dataclass(frozen=True)
class Layer:
    """One layer: compute ns and (collective, bytes per NPU) per slot; collective None = none."""

    name: str
    fwd_compute: float = 0.0
    fwd_comm: str | None = None
    fwd_bytes: int = 0
    ig_compute: float = 0.0
    ig_comm: str | None = None
    ig_bytes: int = 0
    wg_compute: float = 0.0
    wg_comm: str | None = None
    wg_bytes: int = 0
    wg_update: float = 0.0
    dependency: int = -1

    def comm(self, slot: str) -> tuple[str, int] | None:
        """The slot's (collective, bytes) or None when it has none (or zero bytes)."""
        coll = getattr(self, f"{slot}_comm")
        nbytes = getattr(self, f"{slot}_bytes")
        return (coll, nbytes) if coll and nbytes > 0 else None

    def __post_init__(self) -> None:
        """Every time finite, 0 to 1e15 ns, every byte count a whole number, 0 to 2^53 (`dse.limits`),
        whichever front-end built the layer."""
        for f in ("fwd_compute", "ig_compute", "wg_compute", "wg_update"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= MAX_NS:
                raise InputError(f"layer {self.name}: {f}", f"{v!r} ns is out of range", f"0 to {MAX_NS:g} ns")
        for f in ("fwd_bytes", "ig_bytes", "wg_bytes"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_BYTES:
                raise InputError(f"layer {self.name}: {f}", f"{v!r} is out of range", "a whole number of bytes, 0 to 2^53")

    @property
    def compute_ns(self) -> float:
        return self.fwd_compute + self.ig_compute + self.wg_compute + self.wg_update


@dataclass(frozen=True)
class Workload:
    """A training iteration's layers and parallelism (`model_parallel_group` for hybrids)."""

    name: str
    parallelism: str
    layers: tuple[Layer, ...]
    model_parallel_group: int | None = None
    source: str = field(default="", compare=False)
    #: ``HYBRID_DLRM k``: the last bottom-MLP layer; the embedding (layer 0) collectives overlap
    #: the bottom MLP (layers 1..k), see `fwd_gate` and `ig_source`
    dlrm_last_bottom: int | None = None

    def scope(self, slot: str) -> str:
        """Where a slot's collectives run: ``all`` dims, the model-parallel or data-parallel dims."""
        if self.parallelism in _ALL_DIMS or not self.model_parallel_group:
            return ALL
        return DP if slot == "wg" else MP

    def fwd_gate(self, li: int) -> int:
        """The layer whose forward compute waits for layer `li`'s fwd collective (n: the backward).

        Layer li+1 (it consumes li's output); in ``HYBRID_DLRM k`` the embedding's (layer 0)
        all-to-all is first needed by layer k+1 (the interaction/top MLP), so it overlaps the
        bottom MLP.
        """
        k = self.dlrm_last_bottom
        if li == 0 and k is not None and 0 <= k < len(self.layers) - 1:
            return k + 1
        return li + 1

    def ig_source(self, li: int) -> int:
        """The layer whose input-gradient compute issues layer `li`'s ig collective.

        Layer li itself; in ``HYBRID_DLRM k`` the embedding's backward all-to-all carries the
        gradient of its output, ready once layer k+1's input gradient is computed.
        """
        k = self.dlrm_last_bottom
        if li == 0 and k is not None and 0 <= k < len(self.layers) - 1:
            return k + 1
        return li

    def ig_gate(self, li: int) -> int:
        """The layer whose input-gradient compute waits for layer `li`'s ig collective (-1: none).

        Layer li-1 (back-propagation continues through it); the DLRM embedding's own (layer 0).
        """
        if self.ig_source(li) != li:
            return li
        return li - 1

    @property
    def compute_ns(self) -> float:
        """Compute of one iteration on one NPU (all layers, all slots, updates)."""
        return sum(layer.compute_ns for layer in self.layers)


# ----- loading ---------------------------------------------------------------------------------
def load_workload(spec: "str | Path | Workload | Mapping[str, Any]") -> Workload:
    """A `Workload` from a file (ASTRA-sim text or ``.toml``), a generator spec, a dict or itself.

    A string that names no existing file but starts with a generator name (``resnet152``,
    ``transformer``) is a generator spec.
    """
    if isinstance(spec, Workload):
        return spec
    if isinstance(spec, Mapping):
        return _from_mapping(spec, "workload")
    if not isinstance(spec, (str, Path)):
        raise InputError("workload", f"{spec!r} is not a workload", "a file path, a generator spec or a Workload")
    if not str(spec).strip():
        raise InputError("workload", "an empty path", f"a workload file or a generator: {', '.join(GENERATORS)}")
    path = Path(spec)
    if not path.exists():
        gen = str(spec).strip().split(":", 1)[0].lower().replace("-", "").replace("_", "")
        if gen in GENERATORS:
            return generate(str(spec))
        raise InputError("workload", f"no such file {str(spec)!r}", f"a workload file or a generator: {', '.join(GENERATORS)}")
    text = read_text(path, "workload")
    if path.suffix.lower() == ".toml" or _looks_like_toml(text):
        return load_toml_text(text, str(path))
    return parse_astra_text(text, str(path))


def _looks_like_toml(text: str) -> bool:
    return bool(re.search(r"^\s*\[\[layers\]\]", text, re.M))


def parse_astra_text(text: str, source: str = "workload") -> Workload:
    """Parse the ASTRA-sim 1.0 text format; errors name `source` and the line number."""
    lines = text.splitlines()

    def err(lineno: int, problem: str, allowed: str | None = None) -> InputError:
        return InputError(f"{source}:{lineno}", problem, allowed)

    numbered = [(i + 1, ln.split()) for i, ln in enumerate(lines)]
    numbered = [(i, toks) for i, toks in numbered if toks]
    if not numbered:
        raise err(1, "empty workload file")
    lineno, head = numbered[0]
    strategy = head[0].upper()
    if strategy not in _STRATEGIES:
        raise err(lineno, f"unknown parallelism {head[0]!r}", ", ".join(_STRATEGIES))
    group = None
    for k, tok in enumerate(head):
        if tok.lower() == "model_parallel_npu_group:":
            if k + 1 >= len(head):
                raise err(lineno, "model_parallel_NPU_group: needs a number")
            group = _int(head[k + 1], lambda p: err(lineno, p), "model_parallel_NPU_group", minimum=1)
    if strategy not in _ALL_DIMS and group is None:
        raise err(lineno, f"{strategy} needs model_parallel_NPU_group: N")
    dlrm = None
    if strategy == "HYBRID_DLRM" and len(head) > 1:
        dlrm = _int(head[1], lambda p: err(lineno, p), "HYBRID_DLRM last bottom layer", minimum=0)
    if len(numbered) < 2:
        raise err(lineno + 1, "missing the layer count")
    lineno, count_toks = numbered[1]
    count = _int(count_toks[0], lambda p: err(lineno, p), "layer count", minimum=1)
    if len(count_toks) > 1:
        raise err(lineno, f"expected only the layer count, got {len(count_toks)} fields")
    body = numbered[2:]
    if len(body) != count:
        where = body[count][0] if len(body) > count else (body[-1][0] + 1 if body else lineno + 1)
        raise err(where, f"the file says {count} layers but has {len(body)} layer lines")
    layers = []
    for lineno, toks in body:
        e = lambda p, allowed=None, _n=lineno: err(_n, p, allowed)  # noqa: E731
        if len(toks) != 12:
            raise e(f"a layer line needs 12 fields, got {len(toks)}",
                    "name dependency fwd_compute fwd_type fwd_bytes ig_compute ig_type ig_bytes "
                    "wg_compute wg_type wg_bytes wg_update_time")  # fmt: skip
        name = toks[0]
        dep = _int(toks[1], e, "dependency", minimum=-1)
        vals: dict[str, Any] = {"name": name, "dependency": dep}
        for slot, base in zip(SLOTS, (2, 5, 8)):
            vals[f"{slot}_compute"] = float(_int(toks[base], e, f"{slot}_compute", minimum=0, maximum=int(MAX_NS)))
            t = toks[base + 1].upper()
            if t not in _ASTRA_TYPES:
                raise e(f"unknown {slot} communication type {toks[base + 1]!r}", ", ".join(_ASTRA_TYPES))
            vals[f"{slot}_comm"] = _ASTRA_TYPES[t]
            vals[f"{slot}_bytes"] = _int(toks[base + 2], e, f"{slot}_bytes", minimum=0, maximum=MAX_BYTES)
        vals["wg_update"] = float(_int(toks[11], e, "wg_update_time", minimum=0, maximum=int(MAX_NS)))
        layers.append(Layer(**vals))
    name = Path(source).stem if source else "workload"
    if dlrm is not None and dlrm >= len(layers):
        raise err(numbered[0][0], f"HYBRID_DLRM {dlrm}: the workload has only {len(layers)} layers")
    return Workload(name, strategy, tuple(layers), group, source, dlrm)


def _int(tok: str, err: Any, what: str, *, minimum: int, maximum: int | None = None) -> int:
    if not (len(tok) <= 30 and re.fullmatch(r"[+-]?[0-9]+", tok, re.ASCII)):
        raise err(f"{what} {tok[:40]!r} is not an integer")
    v = int(tok)
    if v < minimum:
        raise err(f"{what} {v} is below {minimum}")
    if maximum is not None and v > maximum:
        raise err(f"{what} {v} is above {maximum:.3g}", f"at most {maximum:.3g}")
    return v


def load_toml_text(text: str, source: str = "workload") -> Workload:
    """Parse the native TOML form (module docstring)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(source, f"not valid TOML: {e}") from None
    wl = _from_mapping(data, source)
    return replace(wl, name=wl.name if "name" in data else Path(source).stem, source=source)


_LAYER_KEYS = {"name", "dependency", "wg_update"} | {f"{s}_{k}" for s in SLOTS for k in ("compute", "comm", "bytes")}


def _from_mapping(data: Mapping[str, Any], source: str) -> Workload:
    keys = ("name", "parallelism", "model_parallel_group", "dlrm_last_bottom", "layers")
    unknown = set(data) - set(keys)
    if unknown:
        raise InputError(source, f"unknown key(s) {', '.join(sorted(unknown))}", ", ".join(keys))
    strategy = str(data.get("parallelism", "DATA")).strip().upper()
    if strategy not in _STRATEGIES:
        raise InputError(f"{source}: parallelism", f"unknown parallelism {strategy!r}", ", ".join(_STRATEGIES))
    group = data.get("model_parallel_group")
    if group is not None:
        if not isinstance(group, int) or group < 1:
            raise InputError(f"{source}: model_parallel_group", f"{group!r} is not a positive integer")
    if strategy not in _ALL_DIMS and group is None:
        raise InputError(f"{source}: model_parallel_group", f"{strategy} needs a model_parallel_group")
    raw = data.get("layers")
    if not isinstance(raw, (list, tuple)) or not raw:
        raise InputError(f"{source}: layers", "no layers", "one or more [[layers]] tables")
    if len(raw) > MAX_LAYERS:
        raise InputError(f"{source}: layers", f"{len(raw):,} layers", f"at most {MAX_LAYERS:,}")
    layers = []
    for i, entry in enumerate(raw):
        where = f"{source}: layers[{i}]"
        if isinstance(entry, Layer):
            layers.append(entry)
            continue
        if not isinstance(entry, Mapping):
            raise InputError(where, f"{entry!r} is not a table")
        bad = set(entry) - _LAYER_KEYS
        if bad:
            raise InputError(where, f"unknown key(s) {', '.join(sorted(bad))}", ", ".join(sorted(_LAYER_KEYS)))
        dep = entry.get("dependency", -1)
        if isinstance(dep, bool) or not isinstance(dep, int) or not -1 <= dep < len(raw):
            raise InputError(f"{where}.dependency", f"{dep!r} is not a layer index", "-1 or a layer index")
        vals: dict[str, Any] = {"name": str(entry.get("name", f"layer{i}")), "dependency": dep}
        for slot in SLOTS:
            vals[f"{slot}_compute"] = _nonneg(entry.get(f"{slot}_compute", 0), f"{where}.{slot}_compute")
            comm = entry.get(f"{slot}_comm", "none")
            if comm is None or str(comm).strip().lower() == "none":
                vals[f"{slot}_comm"] = None
            else:
                try:
                    vals[f"{slot}_comm"] = parse_collective(str(comm))
                except InputError as e:
                    raise InputError(f"{where}.{slot}_comm", e.problem, e.allowed) from None
            nbytes = entry.get(f"{slot}_bytes", 0)
            if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not 0 <= nbytes <= MAX_BYTES:
                raise InputError(f"{where}.{slot}_bytes", f"{nbytes!r} is out of range", "a whole number of bytes, 0 to 2^53")
            vals[f"{slot}_bytes"] = nbytes
        vals["wg_update"] = _nonneg(entry.get("wg_update", 0), f"{where}.wg_update")
        layers.append(Layer(**vals))
    dlrm = data.get("dlrm_last_bottom")
    if dlrm is not None and (strategy != "HYBRID_DLRM" or not isinstance(dlrm, int) or not 0 <= dlrm < len(layers)):
        raise InputError(f"{source}: dlrm_last_bottom", f"{dlrm!r} needs parallelism HYBRID_DLRM and a layer index")
    return Workload(str(data.get("name", "workload")), strategy, tuple(layers), group, source, dlrm)


def _nonneg(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= MAX_NS:
        raise InputError(where, f"{v!r} is out of range", f"a number of ns from 0 to {MAX_NS:g}")
    return float(v)


# ----- generators ------------------------------------------------------------------------------
def resnet152(
    *,
    batch: int = 32,
    bytes_per_param: int = 2,
    peak_flops: float = 1000e12,
    efficiency: float = 0.7,
    image: int = 224,
    classes: int = 1000,
    fused: int = 1,
) -> Workload:
    """ResNet-152, data parallel: one layer per convolution (with its batch norm) and the fc.

    Parameters come from the real layer shapes (stem 7x7/64, bottleneck stages [3, 8, 36, 3] of
    widths 64..512 with expansion 4, a 1x1 projection in each stage's first block, stride on the
    3x3 conv): conv weights + 2 per BN channel + the fc, 60.19 M in total (the published 60.2 M).
    Compute is a roofline: forward FLOPs = 2 x MACs x batch; ig and wg each cost as much as the
    forward; time = FLOPs / (peak_flops x efficiency). The update costs 2 FLOPs per parameter. The
    defaults (batch 32, 1000 TFLOP/s at 70 %) put ResNet-50's forward at ~0.38 ms, as in the shared
    ASTRA-sim ResNet-50 file. `fused=1` (default, like the artifact's ``*_fused`` files): one
    all-reduce of all weight gradients, issued by the first layer (conv1), the last to finish its
    weight gradient; ``fused=0``: every layer all-reduces its own weight gradient as soon as it is
    computed.
    """
    rate = peak_flops * efficiency / 1e9  # FLOP per ns
    if rate <= 0 or batch < 1 or bytes_per_param < 1:
        raise InputError("resnet152", "batch, bytes_per_param, peak_flops and efficiency must be positive")
    layers: list[Layer] = []

    def add(name: str, cin: int, cout: int, k: int, hw_out: int, *, bn: bool = True) -> None:
        params = k * k * cin * cout + (2 * cout if bn else cout)
        flops = 2.0 * k * k * cin * cout * hw_out * hw_out * batch
        t = flops / rate
        layers.append(Layer(name, t, None, 0, t, None, 0, t, ALL_REDUCE, params * bytes_per_param, 2.0 * params / rate))

    hw = image // 2
    add("conv1", 3, 64, 7, hw)
    hw //= 2  # max pool
    cin = 64
    for stage, (blocks, width) in enumerate(zip((3, 8, 36, 3), (64, 128, 256, 512)), start=1):
        for b in range(blocks):
            stride = 2 if (b == 0 and stage > 1) else 1
            out_hw = hw // stride
            p = f"layer{stage}.{b}"
            add(f"{p}.conv1", cin, width, 1, hw)
            add(f"{p}.conv2", width, width, 3, out_hw)
            add(f"{p}.conv3", width, 4 * width, 1, out_hw)
            if b == 0:
                add(f"{p}.downsample", cin, 4 * width, 1, out_hw)
            cin, hw = 4 * width, out_hw
    params = cin * classes + classes
    t = 2.0 * cin * classes * batch / rate
    layers.append(Layer("fc", t, None, 0, t, None, 0, t, ALL_REDUCE, params * bytes_per_param, 2.0 * params / rate))
    if fused:
        total = sum(layer.wg_bytes for layer in layers)
        layers = [replace(layer, wg_comm=ALL_REDUCE if i == 0 else None, wg_bytes=total if i == 0 else 0,
                          wg_update=sum(x.wg_update for x in layers) if i == 0 else 0.0)
                  for i, layer in enumerate(layers)]  # fmt: skip
    return Workload("resnet152", "DATA", tuple(layers), None, "generator resnet152")


def parameter_count(workload: Workload, bytes_per_param: int = 2) -> int:
    """Parameters implied by the weight-gradient bytes (generated data-parallel workloads)."""
    return sum(layer.wg_bytes for layer in workload.layers) // bytes_per_param


def transformer(
    *,
    layers: int = 24,
    hidden: int = 8192,
    seq: int = 2048,
    batch: int = 8,
    mp: int = 128,
    bytes_per_param: int = 2,
    peak_flops: float = 1000e12,
    efficiency: float = 0.7,
) -> Workload:
    """A Megatron-style Transformer with model-parallel groups of `mp` NPUs (hybrid parallelism).

    Each transformer layer is two workload layers, attention (4h^2 weights) and MLP (8h^2
    weights), sharded over the `mp` NPUs of a group. Each has a forward all-reduce and an
    input-gradient all-reduce of its output activations (batch x seq x hidden x bytes) within the
    group, and a weight-gradient all-reduce of its weight shard (weights / mp x bytes) across the
    data-parallel dims. Compute: forward FLOPs = 2 x batch x seq x weights / mp (+ 4 x batch x
    seq^2 x hidden / mp for attention scores), ig and wg as much each, at peak x efficiency.
    """
    if min(layers, hidden, seq, batch, mp, bytes_per_param) < 1 or peak_flops * efficiency <= 0:
        raise InputError("transformer", "every size must be positive")
    rate = peak_flops * efficiency / 1e9  # FLOP per ns
    act = batch * seq * hidden * bytes_per_param
    out: list[Layer] = []
    for i in range(layers):
        for part, weights, extra in (("attn", 4 * hidden * hidden, 4.0 * batch * seq * seq * hidden),
                                     ("mlp", 8 * hidden * hidden, 0.0)):  # fmt: skip
            t = (2.0 * batch * seq * weights + extra) / mp / rate
            shard = weights // mp * bytes_per_param
            out.append(Layer(f"{part}{i}", t, ALL_REDUCE, act, t, ALL_REDUCE, act, t, ALL_REDUCE, shard,
                             2.0 * weights / mp / rate))  # fmt: skip
    return Workload("transformer", "HYBRID", tuple(out), mp, "generator transformer")


GENERATORS = {"resnet152": resnet152, "transformer": transformer}


def generate(spec: str) -> Workload:
    """A generated workload from ``name[:key=value,...]``, e.g. ``transformer:layers=4,mp=32``."""
    name, _, opts = spec.strip().partition(":")
    key = name.lower().replace("-", "").replace("_", "")
    if key not in GENERATORS:
        raise InputError("workload", f"unknown generator {name!r}", ", ".join(GENERATORS))
    fn = GENERATORS[key]
    kwargs: dict[str, Any] = {}
    allowed = [k for k in fn.__kwdefaults__]  # type: ignore[union-attr]
    for item in filter(None, (s.strip() for s in opts.split(","))):
        k, eq, v = item.partition("=")
        k = k.strip()
        if not eq or k not in allowed:
            raise InputError(f"workload {name}", f"bad option {item!r}", ", ".join(f"{a}=..." for a in allowed))
        default = fn.__kwdefaults__[k]  # type: ignore[index]
        x = parse_positive(v, f"workload {name}: {k}", allow_zero=True, maximum=MAX_BYTES)
        if isinstance(default, int):
            if not x.is_integer():
                raise InputError(f"workload {name}: {k}", f"{v.strip()!r} is not a whole number")
            x = int(x)
        kwargs[k] = x
    if kwargs.get("layers", 1) > MAX_LAYERS // 2:
        raise InputError(f"workload {name}: layers", f"{kwargs['layers']:,} layers", f"at most {MAX_LAYERS // 2:,}")
    wl = fn(**kwargs)
    return replace(wl, name=spec.strip() if opts else wl.name)
