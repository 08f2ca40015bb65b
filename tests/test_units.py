import pytest

from dse.core.errors import InputError
from dse.core.units import format_time, parse_int, parse_positive, parse_size


@pytest.mark.parametrize(
    "text,want",
    [
        ("1GiB", 2**30),
        ("64MB", 64 * 10**6),
        ("1e9", 10**9),
        ("0.1GiB", 107374182),
        ("0.7GB", 700_000_000),
        ("256 MiB", 256 * 2**20),
        ("12kb", 12_000),
        (4096, 4096),
        (2.0, 2),
        ("1.5KiB", 1536),
        ("3B", 3),
    ],
)
def test_parse_size(text, want):
    assert parse_size(text) == want


@pytest.mark.parametrize("bad", ["0", "-1", "abc", "1XB", 0, -5, "0.1B", "", "1e", True, None, float("nan")])
def test_bad_size_names_the_field(bad):
    with pytest.raises(InputError) as e:
        parse_size(bad)
    assert str(e.value).startswith("size:")
    assert "\n" not in str(e.value)


def test_parse_positive_and_int():
    assert parse_positive("2.5", "bandwidth") == 2.5
    assert parse_positive(0, "latency", allow_zero=True) == 0
    for bad in ("0", "-3", "x", float("inf")):
        with pytest.raises(InputError):
            parse_positive(bad, "bandwidth")
    assert parse_int("64", "chunks") == 64
    for bad in ("0", "1.5", "x", 0, True):
        with pytest.raises(InputError):
            parse_int(bad, "chunks")


def test_format_time():
    assert format_time(2_580_225) == "2.580 ms"
    assert format_time(512) == "512.0 ns"
