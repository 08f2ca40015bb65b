"""The small bounded least-squares solver `dse.costs.nccl.fit` calibrates with (numpy only).

`levenberg_marquardt` minimises the squared norm of a residual function over a box; `identifiable`
says which coordinates a set of rows can tell apart at a starting point; `robust` is the soft-L1
weighing of log-time residuals the fit uses. Deterministic: no randomness, fixed step rules.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: A residual function of the solver's vector: rows first, then any prior's residuals.
Residuals = Callable[[np.ndarray], np.ndarray]
#: Residuals (log time) beyond this are weighed about linearly, not squared (`robust`)
ROBUST_SCALE = 0.05
MAX_ITERATIONS = 100
#: Smallest change of log-times (2-norm over the rows) a unit change of a coordinate must make,
#: beyond what the coordinates before it make, for it to be fitted (`identifiable`).
MIN_SENSITIVITY = 1e-2


def robust(r: np.ndarray) -> np.ndarray:
    """Log-time residuals weighed soft-L1 (`ROBUST_SCALE`): squared, they sum about |r| as `geomean_error` does."""
    d = ROBUST_SCALE
    return np.sign(r) * np.sqrt(2.0 * d * d * (np.sqrt(1.0 + (r / d) ** 2) - 1.0))


def jacobian(fun: Residuals, x: np.ndarray, r: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Forward differences (backward at an upper bound)."""
    jac = np.zeros((r.size, x.size))
    for j in range(x.size):
        h = 1e-6 * max(1.0, abs(float(x[j])))
        if x[j] + h > hi[j]:
            h = -h
        xj = x.copy()
        xj[j] += h
        jac[:, j] = (fun(xj) - r) / h
    return jac


def identifiable(fun: Residuals, x: np.ndarray, lo: np.ndarray, hi: np.ndarray, n_rows: int) -> list[bool]:
    """Which coordinates the rows can tell, in order: a coordinate is kept when its Jacobian column
    at the start, less its projection on the columns kept before it, still has a norm above
    `MIN_SENSITIVITY` (it moves some log-time in a way the earlier ones cannot). So at most as many
    coordinates as rows are kept, and one that moves no row is never kept."""
    jac = jacobian(fun, x, fun(x), lo, hi)[:n_rows]  # the rows only, not the prior
    kept: list[int] = []
    for j in range(x.size):
        col = jac[:, j]
        if kept:
            basis = jac[:, kept]
            col = col - basis @ np.linalg.lstsq(basis, col, rcond=None)[0]
        if float(np.linalg.norm(col)) > MIN_SENSITIVITY:
            kept.append(j)
    return [j in kept for j in range(x.size)]


def levenberg_marquardt(fun: Residuals, x0: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Minimise |fun(x)|² over lo <= x <= hi: damped Gauss-Newton steps, clipped to the bounds,
    accepted only when they lower the cost; the damping grows on a rejected step, shrinks on an
    accepted one. Stops after `MAX_ITERATIONS`, or when no step lowers the cost by 1e-12 relative."""
    x = np.clip(x0, lo, hi)
    r = fun(x)
    cost = float(r @ r)
    damping = 1e-3
    for _ in range(MAX_ITERATIONS):
        jac = jacobian(fun, x, r, lo, hi)
        a, g = jac.T @ jac, jac.T @ r
        scale = np.diag(a) + 1e-9
        accepted = False
        while damping < 1e12 and not accepted:
            step = np.linalg.solve(a + damping * np.diag(scale), -g)
            xn = np.clip(x + step, lo, hi)
            rn = fun(xn)
            cn = float(rn @ rn)
            if cn < cost:
                accepted = True
                done = cost - cn <= 1e-12 * max(cost, 1e-30)
                x, r, cost = xn, rn, cn
                damping = max(damping / 3.0, 1e-12)
            else:
                damping *= 4.0
        if not accepted or done:
            break
    return x
