"""Every number a sweep writes carries its unit: each CSV column of either kind of sweep is text, a
count, or a quantity whose unit `dse.core.quantities` reads from its name, the same one the plots
label it with."""

from __future__ import annotations

import pytest

from dse.core.quantities import axis_label, quantity
from dse.explore.sweep.file import parse_sweep
from dse.explore.sweep.sweeps import columns

TEXT = {"design", "topology", "collective", "scheduler", "queue", "cost_model", "latency_mode", "workload",
        "placement", "crc"}  # fmt: skip
COUNTS = {"point", "chunks", "active_chunks", "seed"}
SWEEPS = {
    "collective": {"topology": "Ring(4,200,500)_SW(8,50,1000)", "size": "1MB", "chunks": 4, "bounds": True},
    "iteration": {"topology": "Ring(4,200,500)_SW(8,50,1000)", "workload": "microAllReduce", "chunks": 4},
}
UNITS = {"_ns": "ms", "_GBps": "GB/s", "_bytes": "MB"}  # the stored unit's suffix -> the unit shown (fixed scale)


@pytest.mark.parametrize("kind", sorted(SWEEPS))
def test_every_sweep_column_is_text_a_count_or_has_a_unit(kind):
    cols = columns(parse_sweep(SWEEPS[kind]))
    assert "bw0_GBps" in cols and "total_bw_GBps" in cols
    for c in cols:
        q = quantity(c)
        if c in TEXT:
            assert q.kind == "text", c
        elif c in COUNTS:
            assert q.kind == "count" and q.unit == "", c
        else:
            suffix = next(s for s in ("_ns", "_pct", "_GBps", "_bytes") if c.endswith(s))  # a unit in the name
            assert q.unit.startswith(UNITS.get(suffix, "%")), (c, q)
            assert axis_label(c, q.unit).endswith(f"({q.unit})")
