"""The fit's fast paths give exactly what the checked paths give: `params_of(check=False)` (the
residuals' unchecked build) equals the checked build for every vector inside the solver's bounds, and
`predict_time`'s remembered NCCL pick equals `predict`'s fresh one, whatever order sizes and curves
come in."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.costs.nccl.bundled import bundled
from dse.costs.nccl.fit_vector import candidates, params_of, vector
from dse.costs.nccl.model import default_params, predict, predict_time

SYSTEMS, _ = bundled()
NAMES = ("h100_vpbench_4node", "a100_oci_oke_2node", "h100_p5_1node", "v100_1node")


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(NAMES),
    u=st.lists(st.floats(0.0, 1.0), min_size=32, max_size=32),
)
def test_unchecked_params_equal_checked_inside_the_bounds(name: str, u: list[float]) -> None:
    system = SYSTEMS[name]
    start = default_params(system)
    names = candidates(system, start, {"ring", "tree", "nvls", "nvls_tree"}, floor=True)
    _, lo, hi = vector(start, names, 256 * 1024.0, 0.02)
    x = lo + (hi - lo) * np.array(u[: len(names)])
    fast, checked = params_of(start, names, x, check=False), params_of(start, names, x)
    assert fast == checked
    assert hash(fast) == hash(checked)
    assert type(fast) is type(checked)


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 1 << 34), min_size=1, max_size=12),
    s_half=st.sampled_from([0.0, 256 * 1024.0, 16 * 1024.0 * 1024.0, 64 * 1024.0 * 1024.0]),
    e=st.floats(0.5, 1.0),
)
def test_remembered_picks_equal_fresh_ones(sizes: list[int], s_half: float, e: float) -> None:
    system = SYSTEMS["h100_vpbench_4node"]
    q = dataclasses.replace(default_params(system), s_half_multi_bytes=s_half, e_ring_inter=e * 0.8)
    for size in sizes + sizes[::-1]:
        for params in (None, q):
            t, _, algo, proto = predict_time(system, "all_reduce", size, params)
            p = predict(system, "all_reduce", size, params=params)
            assert (algo, proto, t) == (p.algo, p.proto, p.time_ns)
