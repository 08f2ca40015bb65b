"""Bandwidth constraints (issue 21): the string syntax, and the polytope a study samples.

- constraint strings parse to the coefficients they say, and bad ones are one `InputError` line;
- LIBRA's constraint sets map as LIBRA states them (multiple_constraints fixes bw0 = 500 and
  bw1 = 300, and leaves bw2 in [minimum, 200 - minimum]);
- property: for random feasible constraint sets and random u, `point(u)` is inside to 1e-9, and
  every allowed point is reached (`point(coordinates(x)) == x`);
- equalities like sum == 1000 hold to the last bits; infeasible and unbounded sets are refused.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.core.errors import InputError
from dse.explore.libra.bw_constraints import (
    LIBRA_CONSTRAINTS,
    BandwidthPolytope,
    LinearConstraint,
    parse_constraint,
    parse_constraints,
)


@pytest.mark.parametrize(
    "text,coeffs,sense,rhs",
    [
        ("bw0 == 500", (1, 0, 0, 0), "==", 500),
        ("bw0 >= bw1", (1, -1, 0, 0), ">=", 0),
        ("bw2 + bw3 == 200", (0, 0, 1, 1), "==", 200),
        ("bw0 + bw1 + bw2 + bw3 == 1000", (1, 1, 1, 1), "==", 1000),
        ("2*bw1 - bw0 <= 10", (-1, 2, 0, 0), "<=", 10),
        ("sum == 1000", (1, 1, 1, 1), "==", 1000),
        ("TOTAL <= 1e3", (1, 1, 1, 1), "<=", 1000),
        ("0.5 * bw0 = 250", (0.5, 0, 0, 0), "==", 250),
        ("-bw0 + 3 <= -bw1 * 2", (-1, 2, 0, 0), "<=", -3),
        ("bw3 - 10 >= 0.25*sum", (-0.25, -0.25, -0.25, 0.75), ">=", 10),
    ],
)
def test_constraints_parse(text: str, coeffs: tuple, sense: str, rhs: float) -> None:
    c = parse_constraint(text, 4)
    assert (c.coeffs, c.sense, c.rhs, c.text) == (tuple(map(float, coeffs)), sense, rhs, text)


@pytest.mark.parametrize(
    "text,message",
    [
        ("bw7 == 1", "unknown variable 'bw7' for 4 dimensions"),
        ("bw0 + bw1", "no comparison"),
        ("bw0 * bw1 <= 3", "non-linear term"),
        ("bw0 < 3", "strict inequality"),
        ("1 <= bw0 <= 3", "more than one comparison"),
        ("bw0 - bw0 == 0", "no bandwidth left"),
        ("bw0 + <= 3", "a side ends with '+'"),
        ("== 3", "a side of the comparison is empty"),
        ("bw0 ^ 2 <= 3", "unexpected '^ 2 <= 3'"),
        ("2bw0 <= 1", "follows a term without an operator"),
        ("bw0 <= 1e999", "too large"),
        ("bw <= 1", "unknown variable 'bw'"),
        ("", "is not a constraint"),
    ],
)
def test_bad_constraints_are_one_line(text: str, message: str) -> None:
    with pytest.raises(InputError) as e:
        parse_constraints(["sum == 10", text], 4)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).startswith("constraints[1]")


def test_libra_sets() -> None:
    p = BandwidthPolytope.parse(LIBRA_CONSTRAINTS["multiple_constraints"], 4, minimum=1e-3)
    assert (p.free, p.free_dims) == (1, (2,))
    assert p.ranges[:2] == ((500.0, 500.0), (300.0, 300.0))
    assert p.ranges[2] == pytest.approx((1e-3, 200 - 1e-3), rel=1e-12)
    assert p.point([0.0]) == pytest.approx((500, 300, 1e-3, 200 - 1e-3), rel=1e-12)
    assert p.point([1.0]) == pytest.approx((500, 300, 200 - 1e-3, 1e-3), rel=1e-9)
    mid = p.point([0.5])
    assert mid == (500.0, 300.0, 100.0, 100.0) and p.contains(mid)
    for name, total in (("total_bw_500gbps", 500), ("total_bw_1000gbps", 1000)):
        p = BandwidthPolytope.parse(LIBRA_CONSTRAINTS[name], 4)
        assert (p.free, p.free_dims) == (3, (0, 1, 2))
        for u in ((0, 0, 0), (1, 1, 1), (0.3, 0.9, 0.1), (1, 0, 1)):
            x = p.point(u)
            assert p.contains(x) and abs(math.fsum(x) - total) <= 1e-12 * total


def test_implicit_equalities_reduce_the_free_coordinates() -> None:
    p = BandwidthPolytope.parse(["bw0 >= bw1", "bw1 >= bw0", "sum <= 100"], 3)
    assert p.free == 2  # bw0 == bw1 although no constraint says so with ==
    x = p.point([0.7, 0.2])
    assert x[0] == x[1] and p.contains(x)


def test_infeasible_and_unbounded_sets_are_refused() -> None:
    with pytest.raises(InputError, match="no allocation meets them all"):
        BandwidthPolytope.parse(["sum == 100", "bw0 >= 200"], 2)
    with pytest.raises(InputError, match="bw1 can grow without limit"):
        BandwidthPolytope.parse(["bw0 == 100"], 2)
    assert BandwidthPolytope.parse(["bw0 == 100"], 2, maximum=400.0).ranges[1] == (1e-3, 400.0)
    with pytest.raises(InputError, match="minimum bandwidth"):
        BandwidthPolytope.parse(["sum == 1"], 2, minimum=0.0)
    with pytest.raises(InputError, match="3 numbers from 0 to 1"):
        BandwidthPolytope.parse(["sum == 10"], 4).point([0.5, 2.0, 0.1])


@st.composite
def feasible_sets(draw: st.DrawFn) -> tuple[int, list[LinearConstraint], tuple[float, ...]]:
    """A random constraint set around a random allowed point x (so it is never empty)."""
    n = draw(st.integers(2, 5))
    x = tuple(draw(st.floats(1.0, 100.0)) for _ in range(n))
    out = [LinearConstraint((1.0,) * n, "<=", math.fsum(x) + draw(st.floats(0, 500)), "sum <= ...")]
    for _ in range(draw(st.integers(0, 5))):
        coeffs = [float(draw(st.integers(-3, 3))) for _ in range(n)]
        if not any(coeffs):
            continue
        sense = draw(st.sampled_from(["==", "<=", ">="]))
        ax = math.fsum(c * v for c, v in zip(coeffs, x))
        slack = 0.0 if sense == "==" else draw(st.floats(0.0, 50.0))
        out.append(LinearConstraint(tuple(coeffs), sense, ax + slack if sense == "<=" else ax - slack, "random"))
    return n, out, x


@settings(max_examples=300, deadline=None)
@given(feasible_sets(), st.lists(st.floats(0.0, 1.0), min_size=5, max_size=5))
def test_every_u_gives_an_allowed_point_and_every_point_is_reached(case: tuple, u: list) -> None:
    n, cons, x = case
    p = BandwidthPolytope(tuple(cons), n, minimum=0.5)
    assert p.contains(x)
    y = p.point(u[: p.free])
    assert p.contains(y, tol=1e-9)
    assert p.point(u[: p.free]) == y  # deterministic
    back = p.point(p.coordinates(x))
    assert back == pytest.approx(x, rel=1e-7, abs=1e-7)
    for c in cons:
        if c.sense == "==":
            assert abs(c.lhs(y) - c.rhs) <= 1e-12 * max(
                1.0, abs(c.rhs), math.fsum(abs(a * b) for a, b in zip(c.coeffs, y))
            )
