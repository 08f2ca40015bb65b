"""Without a C compiler `dse` still runs: the C engine missing, every path falls back to the Python
reference (`dse.sim.engine_ref`) and gives the same numbers. A fresh process hides `dse.sim._engine` (as an
install without a compiler has none) and prints what it computes; this process compares."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import dse

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import importlib.abc, json, sys, warnings
warnings.simplefilter("ignore")

class NoEngine(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "dse.sim._engine":
            raise ImportError("no C engine in this test")
        return None

sys.meta_path.insert(0, NoEngine())
import dse
from dse.sim import engine
assert not engine.c_engine_built()
out = {
    "paper": dse.evaluate("4D-Ring_FC_Ring_SW", size="1GB", chunks=16).time_ns,
    "astra": dse.evaluate("3D-FC_Ring_SW", size="64MB", chunks=8, cost_model="astra-sim", queue="fifo").time_ns,
    "shared": dse.evaluate("2D-SW_SW", size="64MB", chunks=8, active_chunks=3).time_ns,
    "many": dse.evaluate_many(["2D-SW_SW", "3D-FC_Ring_SW"], size="64MB", chunks=8).time_ns,
    "iterate": dse.iterate("gnmt_fp16_fused", "4D-Ring_FC_Ring_SW").time_ns,
}
print(json.dumps(out))
"""


def test_everything_runs_on_the_python_reference_without_the_c_engine() -> None:
    p = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["paper"] == dse.evaluate("4D-Ring_FC_Ring_SW", size="1GB", chunks=16).time_ns
    assert (
        got["astra"]
        == dse.evaluate("3D-FC_Ring_SW", size="64MB", chunks=8, cost_model="astra-sim", queue="fifo").time_ns
    )
    assert got["shared"] == dse.evaluate("2D-SW_SW", size="64MB", chunks=8, active_chunks=3).time_ns
    assert got["many"] == dse.evaluate_many(["2D-SW_SW", "3D-FC_Ring_SW"], size="64MB", chunks=8).time_ns
    assert got["iterate"] == dse.iterate("gnmt_fp16_fused", "4D-Ring_FC_Ring_SW").time_ns
