"""`dse validate nccl`: the held-out table as the command prints it (the numbers are the validation
library's, tested in tests/test_nccl_validation.py)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def printed() -> tuple[str, dict]:
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "dse", "validate", "nccl", *a], capture_output=True, text=True, timeout=600
    )
    text, js = run(), run("--json")
    assert text.returncode == 0 and js.returncode == 0, text.stderr + js.stderr
    return text.stdout, json.loads(js.stdout)


def test_the_last_line_is_the_summary(printed: tuple[str, dict]) -> None:
    text, d = printed
    last = text.rstrip("\n").splitlines()[-1]
    m = re.fullmatch(
        r"nccl: geometric-mean error (\d+\.\d) % over (\d+) held-out measurements from (\d+) machines", last
    )
    assert m, last
    assert float(m[1]) == round(100 * d["gm"], 1)
    assert int(m[2]) == d["measurements"] == sum(c["rows"] for c in d["cases"])
    assert int(m[3]) == d["machine_count"] == len(d["machines"]) == len({c["machine"] for c in d["cases"]})


def test_each_machine_pools_its_cases_rows(printed: tuple[str, dict]) -> None:
    _, d = printed
    for m in d["machines"]:
        cases = [c for c in d["cases"] if c["machine"] == m["machine"]]
        assert m["rows"] == sum(c["rows"] for c in cases)
        lo, hi = min(c["fit_gm"] for c in cases), max(c["fit_gm"] for c in cases)
        assert lo - 1e-12 <= m["gm"] <= hi + 1e-12  # a weighted mean of its cases
    pooled = sum(m["rows"] * math.log1p(m["gm"]) for m in d["machines"]) / d["measurements"]
    assert math.expm1(pooled) == pytest.approx(d["gm"], rel=1e-9)


def test_every_held_out_file_names_its_source(printed: tuple[str, dict]) -> None:
    text, d = printed
    for c in d["cases"]:
        assert c["source"].strip(), c
        assert f"- {c['held_out']}: " in text


def test_astra_sims_points_sit_beside_dses(printed: tuple[str, dict]) -> None:
    _, d = printed
    assert {p["gpus"] for p in d["astra_sim"]} == {2, 4, 8} == {int(k) for k in d["astra_sim_gm"]}
    for p in d["astra_sim"]:
        assert p["dse_us"] > 0 and p["measured_us"] > 0
