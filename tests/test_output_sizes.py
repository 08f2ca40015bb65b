"""Sizes are printed in the unit family they were given in (decimal in, decimal out), readably."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dse import evaluate
from dse.core.limits import MAX_BYTES
from dse.core.topology import parse_topology
from dse.core.units import format_size, parse_size, size_family
from dse.output.report import bounds_text, result_text

MULT = {
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
}
SMALL = "Ring(4,100,10)_SW(4,50,100)"


@pytest.mark.parametrize(
    "size,printed",
    [
        ("2GB", "2 GB"),
        ("256MB", "256 MB"),
        ("1GiB", "1 GiB"),
        ("0.1GiB", "102.4 MiB"),
        ("1e9", "1 GB"),
        ("4096", "4.096 KB"),
        ("1.5KiB", "1.5 KiB"),
        ("999999999B", "1 GB"),
        ("12kb", "12 KB"),
    ],
)
def test_evaluate_prints_the_size_in_the_family_given(run_cli, size, printed):
    code, out, err = run_cli("evaluate", SMALL, "--size", size, "--chunks", "4")
    assert code == 0 and err == ""
    assert f"all_reduce, {printed} per NPU, 4 chunks" in out


def test_the_issue_examples_on_the_preset():
    topo = parse_topology("2D-SW_SW")
    for size, printed in (("2GB", "2 GB"), ("256MB", "256 MB")):
        text = result_text(evaluate(topo, size=size, chunks=4), topo)
        assert f"all_reduce, {printed} per NPU" in text and "KiB" not in text


def test_compare_title_and_bound_text_use_the_family(run_cli):
    code, out, _ = run_cli("compare", SMALL, "--size", "0.1GiB", "--chunks", "4")
    assert code == 0 and out.splitlines()[0].startswith(f"{SMALL} (16 NPUs), all_reduce of 102.4 MiB per NPU, 4 chunks")
    code, out, _ = run_cli("bound", SMALL, "--size", "256MB", "--chunks", "4")
    assert code == 0 and out.splitlines()[0].startswith(f"{SMALL} (16 NPUs), all_reduce of 256 MB per NPU, 4 chunks")


def test_python_api_ints_are_decimal():
    topo = parse_topology(SMALL)
    r = evaluate(topo, size=2**30, chunks=4)
    assert r.size_unit == "decimal" and "1.074 GB per NPU" in result_text(r, topo)
    assert evaluate(topo, size="1GiB", chunks=4).size_unit == "binary"
    from dse import lower_bounds

    b = lower_bounds(topo, size=2**30, chunks=4)
    assert "1.074 GB per NPU" in bounds_text(b, topo) and "1 GiB per NPU" in bounds_text(b, topo, "binary")


def test_size_family():
    assert [size_family(v) for v in ("1GiB", "64 mib", "2KiB", "1GB", "1e9", "3B", "17")] == [
        "binary",
        "binary",
        "binary",
        "decimal",
        "decimal",
        "decimal",
        "decimal",
    ]
    assert size_family(4096) == size_family(1e9) == "decimal"


def test_format_size_examples():
    assert format_size(2 * 10**9, "decimal") == "2 GB"
    assert format_size(256 * 10**6, "decimal") == "256 MB"
    assert format_size(2**30, "binary") == "1 GiB"
    assert format_size(parse_size("0.1GiB"), "binary") == "102.4 MiB"
    assert format_size(999_960_000, "decimal") == "1 GB"  # rounds up into the next unit, not "1000 MB"
    assert format_size(512, "binary") == "512 B"
    # no family: binary only where that is exact, so 2 GB is never "1953125 KiB"
    assert format_size(2 * 10**9) == "2 GB" and format_size(64 * 2**20) == "64 MiB"


_PRINTED = re.compile(r"^(\d+(?:\.\d+)?) ([KMGT]i?B|B)$")


@given(nbytes=st.integers(1, MAX_BYTES), family=st.sampled_from(["decimal", "binary"]))
def test_printed_size_times_its_unit_is_the_bytes(nbytes, family):
    text = format_size(nbytes, family)
    m = _PRINTED.match(text)
    assert m, text
    number, unit = m.groups()
    assert unit == "B" or unit.endswith("iB") == (family == "binary")
    digits = number.replace(".", "").lstrip("0")
    assert len(digits) <= 4 and not (("." in number) and number.endswith("0"))  # 4 significant digits, no trailing 0
    value = float(number)
    assert value >= 1
    assert abs(value * MULT[unit] - nbytes) <= 5e-4 * nbytes  # within rounding at 4 significant digits
