"""Generated workloads: ResNet-152 (data parallel) and a Megatron-style Transformer (hybrid).

Spec strings ``name[:key=value,...]`` (`generate`) are what `dse.training.workload_load.load_workload` and
``dse iterate`` accept: ``resnet152:batch=64,efficiency=0.5``, ``transformer:layers=8,mp=32``.
Only ``layers`` makes a workload long: the Transformer's layer count is checked against the work
limit before any layer is built (`dse.training.workloads.check_layers`); the other options only
scale numbers, which `Layer` checks (bytes up to 2^53, times up to 1e15 ns).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from dse.core.collectives import ALL_REDUCE
from dse.core.errors import InputError
from dse.core.limits import MAX_BYTES, MAX_LAYERS
from dse.core.units import parse_positive
from dse.training.workloads import Layer, Workload, check_layers


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
        """Append a k x k convolution layer (with batch norm if `bn`) of `cin` to `cout` channels."""
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
    return Workload("resnet152", "DATA", tuple(_fused(layers) if fused else layers), None, "generator resnet152")


def _fused(layers: list[Layer]) -> list[Layer]:
    """One all-reduce of every layer's weight gradient, and the whole update after it, on the first
    layer (the last to finish its weight gradient); the other layers communicate nothing."""
    total = sum(layer.wg_bytes for layer in layers)
    return [
        replace(
            layer,
            wg_comm=ALL_REDUCE if i == 0 else None,
            wg_bytes=total if i == 0 else 0,
            wg_update=sum(x.wg_update for x in layers) if i == 0 else 0.0,
        )
        for i, layer in enumerate(layers)
    ]


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
    check_layers(2 * layers, f"transformer:layers={layers}")  # before any is built
    rate = peak_flops * efficiency / 1e9  # FLOP per ns
    act = batch * seq * hidden * bytes_per_param
    out: list[Layer] = []
    for i in range(layers):
        for part, weights, extra in (
            ("attn", 4 * hidden * hidden, 4.0 * batch * seq * seq * hidden),
            ("mlp", 8 * hidden * hidden, 0.0),
        ):
            t = (2.0 * batch * seq * weights + extra) / mp / rate
            shard = weights // mp * bytes_per_param
            out.append(
                Layer(
                    f"{part}{i}",
                    t,
                    ALL_REDUCE,
                    act,
                    t,
                    ALL_REDUCE,
                    act,
                    t,
                    ALL_REDUCE,
                    shard,
                    2.0 * weights / mp / rate,
                )
            )
    return Workload("transformer", "HYBRID", tuple(out), mp, "generator transformer")


#: The generators by name; each takes its options as keyword-only arguments, all with defaults.
GENERATORS: dict[str, Callable[..., Workload]] = {"resnet152": resnet152, "transformer": transformer}


def generate(spec: str) -> Workload:
    """A generated workload from ``name[:key=value,...]``, e.g. ``transformer:layers=4,mp=32``."""
    name, _, opts = spec.strip().partition(":")
    key = name.lower().replace("-", "").replace("_", "")
    if key not in GENERATORS:
        raise InputError("workload", f"unknown generator {name!r}", ", ".join(GENERATORS))
    fn = GENERATORS[key]
    kwargs: dict[str, Any] = {}
    defaults: dict[str, Any] = fn.__kwdefaults__ or {}
    allowed = [k for k in defaults]
    for item in filter(None, (s.strip() for s in opts.split(","))):
        k, eq, v = item.partition("=")
        k = k.strip()
        if not eq or k not in allowed:
            raise InputError(f"workload {name}", f"bad option {item!r}", ", ".join(f"{a}=..." for a in allowed))
        default = defaults[k]
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
