"""Units and parsing: every number a user gives enters here (docs/model.md §2).

Sizes are bytes; `KB`/`MB`/`GB`/`TB` are decimal, `KiB`/`MiB`/`GiB`/`TiB` binary, and a size is
printed back in the family it was given in (`size_family`, `format_size`). Bandwidth is
GB/s, which in the `paper` model is 1e9 B/s = 1 B/ns. Times are ns.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_FLOOR, Decimal

from dse.core.errors import InputError
from dse.core.limits import MAX_BYTES

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")

NS_PER_S = 1e9


def parse_size(value: int | float | str, field: str = "size") -> int:
    """Bytes from an int, a float or a string such as ``"1GiB"`` (`_parse_size`; strings are parsed
    once and remembered)."""
    if type(value) is int and 1 <= value <= MAX_BYTES:  # a whole number of bytes in range, as it is
        return value
    if type(value) is str and field == "size":
        hit = _SIZES.get(value)
        if hit is None:
            hit = _parse_size(value, field)
            if len(_SIZES) >= 4096:
                _SIZES.clear()
            _SIZES[value] = hit
        return hit
    return _parse_size(value, field)


_SIZES: dict[str, int] = {}


def _parse_size(value: int | float | str, field: str = "size") -> int:
    """Bytes from an int, a float or a string such as ``"1GiB"``, ``"64MB"``, ``"1e9"``.

    A count of bytes (no unit, or ``B``) must be whole: ``"1.5B"`` is refused. With a larger unit,
    fractional byte counts (``"0.1GiB"``) are rounded down to whole bytes, as ASTRA-sim does; the
    arithmetic is decimal, so ``"0.7GB"`` is exactly 700,000,000 bytes. At most 2^53 bytes
    (`dse.core.limits.MAX_BYTES`), so that every byte count stays exact in floating point.
    """
    allowed = (
        "1 byte to 2^53 bytes: a whole number of bytes, or a number with a unit KB, MB, GB, TB, KiB, MiB, GiB, TiB"
    )
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InputError(field, f"{value!r} is not a size", allowed)
    unit = ""
    if isinstance(value, str):
        m = _SIZE_RE.match(value)
        if not m or m.group(2).lower() not in _SIZE_UNITS:
            raise InputError(field, f"cannot read {value!r} as a size", allowed)
        number, unit = Decimal(m.group(1)), m.group(2).lower()
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(field, f"{value!r} is not a size", allowed)
        number = Decimal(repr(value))
    else:
        number = Decimal(value)
    if number <= 0:
        raise InputError(field, f"{value!r} is not positive", allowed)
    if number > MAX_BYTES:  # compared before multiplying: '1e999999999' stays cheap
        raise InputError(field, f"{value!r} is more than 2^53 bytes", allowed)
    if unit in ("", "b") and number != number.to_integral_value():
        raise InputError(field, f"{value!r} is not a whole number of bytes", allowed)
    nbytes = int((number * _SIZE_UNITS[unit]).to_integral_value(rounding=ROUND_FLOOR))
    if nbytes <= 0:
        raise InputError(field, f"{value!r} is less than one byte", allowed)
    if nbytes > MAX_BYTES:
        raise InputError(field, f"{value!r} is more than 2^53 bytes", allowed)
    return nbytes


_NUMBER_RE = re.compile(r"\s*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*", re.ASCII)
_INT_RE = re.compile(r"\s*[+-]?[0-9]+\s*", re.ASCII)


def parse_positive(value: object, field: str, *, allow_zero: bool = False, maximum: float | None = None) -> float:
    """A finite number > 0 (or >= 0 with `allow_zero`, and <= `maximum` if given).

    From a number or a plain decimal string (ASCII digits, optional sign, point and exponent)."""
    low = "a number >= 0" if allow_zero else "a number > 0"
    allowed = low if maximum is None else f"{low} and <= {maximum:g}"
    if isinstance(value, bool):
        raise InputError(field, f"{value!r} is not a number", allowed)
    if isinstance(value, str) and not _NUMBER_RE.fullmatch(value):
        raise InputError(field, f"cannot read {value!r} as a number", allowed)
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise InputError(field, f"cannot read {value!r} as a number", allowed) from None
    if not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero) or (maximum is not None and x > maximum):
        raise InputError(field, f"{value!r} is out of range", allowed)
    return x


def parse_int(value: object, field: str, *, minimum: int = 1, maximum: int | None = None) -> int:
    """An integer >= `minimum` (and <= `maximum` if given), from an int or a string of ASCII digits."""
    allowed = f"an integer >= {minimum}" if maximum is None else f"an integer from {minimum} to {maximum}"
    if isinstance(value, bool):
        raise InputError(field, f"{value!r} is not an integer", allowed)
    if isinstance(value, int):
        x = value
    elif isinstance(value, float) and value.is_integer():
        x = int(value)
    elif isinstance(value, str) and _INT_RE.fullmatch(value):
        if len(value.strip().lstrip("+-")) > 30:
            raise InputError(field, f"{value.strip()[:20]}... ({len(value.strip())} digits) is too large", allowed)
        x = int(value)
    else:
        raise InputError(field, f"{value!r} is not an integer", allowed)
    if x < minimum:
        raise InputError(field, f"{x} is too small", allowed)
    if maximum is not None and x > maximum:
        raise InputError(field, f"{x} is too large", allowed)
    return x


def format_time(ns: float) -> str:
    """A time in ns for people: ns, µs, ms or s with 4 significant digits."""
    a = abs(ns)
    if a < 1e3:
        return f"{ns:#.4g} ns"
    if a < 1e6:
        return f"{ns / 1e3:#.4g} us"
    if a < 1e9:
        return f"{ns / 1e6:#.4g} ms"
    return f"{ns / 1e9:#.4g} s"


SIZE_FAMILIES = ("decimal", "binary")
_DECIMAL_UNITS = (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("KB", 10**3))
_BINARY_UNITS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def size_family(value: object) -> str:
    """The unit family a size was given in: ``"binary"`` for KiB/MiB/GiB/TiB, else ``"decimal"``.

    A plain number of bytes (``4096``, ``"1e9"``, ``"3B"``) names no family, so it counts as
    decimal, as do the Python API's ints and floats. Call it on a size `parse_size` accepted."""
    if isinstance(value, str):
        m = _SIZE_RE.match(value)
        if m and m.group(2).lower().endswith("ib"):
            return "binary"
    return "decimal"


def _in_unit(nbytes: float, units: tuple[tuple[str, int], ...]) -> tuple[str, str]:
    """(number, unit): the largest unit whose value is >= 1, at most 4 significant digits."""
    for k, (unit, mult) in enumerate(units):
        if nbytes >= mult:
            text = f"{nbytes / mult:.4g}"
            if k > 0 and f"{nbytes / units[k - 1][1]:.4g}" == "1":  # 999.96 MB rounds to 1000: say 1 GB
                return "1", units[k - 1][0]
            return text, unit
    return f"{nbytes:.4g}" if nbytes != int(nbytes) else str(int(nbytes)), "B"


def format_size(nbytes: float, family: str | None = None) -> str:
    """A byte count for people, in the unit family the size was given in (`size_family`).

    The largest unit of the family whose value is at least 1, with up to 4 significant digits and no
    trailing zeros: ``2 GB``, ``256 MB``, ``1 GiB``, ``102.4 MiB`` (0.1 GiB rounded down to whole
    bytes), ``512 B``. `family` None: binary when that is exact at 4 digits (``64 MiB``), else
    decimal (``2 GB``, never ``1953125 KiB``)."""
    if family is None:
        number, unit = _in_unit(nbytes, _BINARY_UNITS)
        mult = dict(_BINARY_UNITS).get(unit, 1)
        if unit != "B" and float(number) * mult == nbytes:
            return f"{number} {unit}"
        family = "decimal"
    if family not in SIZE_FAMILIES:
        raise InputError("size_unit", f"unknown unit family {family!r}", ", ".join(SIZE_FAMILIES))
    number, unit = _in_unit(nbytes, _BINARY_UNITS if family == "binary" else _DECIMAL_UNITS)
    return f"{number} {unit}"
