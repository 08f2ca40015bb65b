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


def test_machines_view_splits_each_machine_and_judges_the_target() -> None:
    """--machines: one row per machine with its pooled, own-sizes and carried errors and the 8 %
    target (too few rows under 10), the sources' place, and the summary line last (a built table)."""
    from dse.costs.nccl.validation import ValidationCase, ValidationTable
    from dse.output.nccl_report import machines_text

    def case(machine: str, split: str, rows: int, gm: float) -> ValidationCase:
        return ValidationCase(
            machine, machine.upper(), split, "c", f"{machine}.txt", "src", "all_reduce", rows, 0.2, gm, gm
        )

    cases = (
        case("a", "sizes", 10, 0.05),
        case("a", "scale", 30, 0.10),
        case("b", "sizes", 12, 0.07),
        case("c", "file", 3, 0.01),
    )
    rows = sum(c.rows for c in cases)
    gm = math.expm1(sum(c.rows * math.log1p(c.fit_gm) for c in cases) / rows)
    table = ValidationTable(cases=cases, astra_sim=(), astra_sim_gm={}, measurements=rows, machines=3, gm=gm)
    lines = machines_text(table).splitlines()
    pooled_a = math.expm1((10 * math.log1p(0.05) + 30 * math.log1p(0.10)) / 40)
    row = {ln.split()[0]: ln.split() for ln in lines if ln.split() and ln.split()[0] in ("A", "B", "C")}
    assert row["A"][1:] == ["40", f"{100 * pooled_a:.1f}", "%", "5.0", "%", "10.0", "%", "missed"]
    assert row["B"][1:] == ["12", "7.0", "%", "7.0", "%", "-", "met"]
    assert row["C"][1:] == ["3", "1.0", "%", "-", "1.0", "%", "too", "few", "rows"]
    assert "dse/data/nccl/README.md" in machines_text(table) and lines[-1] == table.summary_line()


def test_json_cases_carry_their_held_out_points(printed: tuple[str, dict]) -> None:
    _, d = printed
    for c in d["cases"]:
        assert len(c["points"]) == c["rows"]
        assert set(c["points"][0]) == {"line", "size_bytes", "measured_us", "predicted_us", "error", "algo", "proto"}


def test_rows_view_lists_every_point_under_its_case() -> None:
    """--rows: each case's title (machine, split, calibration, held-out file, source), one line per
    held-out point with its signed error and what ran, the summary line last (a built table)."""
    from dse.costs.nccl.validation import HeldOutPoint, ValidationCase, ValidationTable
    from dse.output.nccl_report import rows_text

    points = (
        HeldOutPoint(12, 1024, 20.0, 25.0, 0.25, "ring", "LL"),
        HeldOutPoint(14, 4096, 40.0, 30.0, -0.25, "tree", "LL128"),
    )
    case = ValidationCase(
        "m", "Machine M", "sizes", "m_run", "m.txt", "src of m", "all_reduce", 2, 0.3, 0.25, 0.25, points
    )
    table = ValidationTable(cases=(case,), astra_sim=(), astra_sim_gm={}, measurements=2, machines=1, gm=0.25)
    lines = rows_text(table).splitlines()
    assert "Machine M: sizes case, calibrated on m_run, held out m.txt (2 rows, gm 25.0 %); source: src of m" in lines
    rows = [ln.split() for ln in lines if ln.split()[:1] in (["12"], ["14"])]
    assert rows == [["12", "1024", "20.00", "25.00", "+25.0", "%", "ring", "LL"],
                    ["14", "4096", "40.00", "30.00", "-25.0", "%", "tree", "LL128"]]  # fmt: skip
    assert lines[-1] == table.summary_line()
    assert "| 12 | 1024 | 20.00 | 25.00 | +25.0 % | ring LL |" in rows_text(table, markdown=True)


@pytest.mark.parametrize("views", [("--rows", "--machines"), ("--json", "--rows")])
def test_one_view_at_a_time(views: tuple[str, str]) -> None:
    r = subprocess.run([sys.executable, "-m", "dse", "validate", "nccl", *views], capture_output=True, text=True)
    assert r.returncode == 2 and "not allowed with argument" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""
