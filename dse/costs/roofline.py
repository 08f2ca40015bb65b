"""The roofline: the time of a compute node from its FLOPs and the bytes it touches (ASTRA-sim 2.x's rule).

A node of F floating-point operations over a tensor of T bytes has the operational intensity
F/T FLOP per byte; it runs at perf = min(M·F/T, P) FLOP/s, M the local memory bandwidth (bytes/s)
and P the peak (FLOP/s), and takes ⌊F/perf·10^9⌋ ns, truncated once (ASTRA-sim 2.x:
`Workload::issue_comp` in astra-sim/workload/Workload.cc, `Roofline::get_perf` in
astra-sim/system/Roofline.cc). The arithmetic is ASTRA-sim's, in doubles and in its order, so the
result is the same to the nanosecond: pass P and M as ASTRA-sim forms them from its system file,
``peak-perf × 10^12`` and ``local-mem-bw × 10^9`` (one multiplication each; its GB/s here is
decimal, unlike the network's 2^30).

Where ASTRA-sim is not a number, dse chooses (and documents):
- T = 0: ASTRA-sim skips the node as invalid (`Workload::skip_invalid`); it takes 0 ns here. (In
  ASTRA-sim the nodes it frees are issued only at the rank's next completion, not at once: the
  caller's business.)
- F = 0 with T > 0: ASTRA-sim divides 0 by a zero perf (NaN, an undefined cast); 0 ns here.
"""

from __future__ import annotations

import math

from dse.core.errors import InputError


def roofline_ns(flops: float, tensor_bytes: float, peak_flops_per_s: float, mem_bytes_per_s: float) -> int:
    """ns of a compute node of `flops` operations over `tensor_bytes` bytes on a roofline of
    `peak_flops_per_s` FLOP/s and `mem_bytes_per_s` bytes/s (module docstring): ⌊F/perf·10^9⌋ with
    perf = min(M·F/T, P). 0 when `tensor_bytes` or `flops` is 0. `InputError` for a negative count
    or a roofline that is not positive and finite."""
    for field, value in (("num_ops", flops), ("tensor_size", tensor_bytes)):
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < math.inf):
            raise InputError(field, f"{value!r} is not a count", "a number from 0 up")
    for field, value in (("peak-perf", peak_flops_per_s), ("local-mem-bw", mem_bytes_per_s)):
        if not (isinstance(value, (int, float)) and 0 < value < math.inf):
            raise InputError(field, f"{value!r} is not a positive rate", "a positive finite number")
    f, t = float(flops), float(tensor_bytes)
    if t == 0.0 or f == 0.0:
        return 0
    perf = min(mem_bytes_per_s * (f / t), peak_flops_per_s)  # std::min(bandwidth * intensity, peak)
    return int(f / perf * 1e9)
