"""A small linear program kept in HiGHS between solves (highspy, in process).

The bandwidth polytope (`dse.explore.libra.bw_constraints`) asks it for coordinate ranges and LIBRA's exact
optimum (`dse.explore.libra.model`) adds cutting planes to it one solve after another; HiGHS restarts
each solve from the previous basis. Tolerances are HiGHS's tightest feasibility tolerances (1e-10),
so a solution breaks a row by at most about 1e-10 times the row's scale.
"""

from __future__ import annotations

from collections.abc import Sequence

import highspy
import numpy as np

INF = float(highspy.kHighsInf)
_STATUS = {
    highspy.HighsModelStatus.kOptimal: "optimal",
    highspy.HighsModelStatus.kInfeasible: "infeasible",
    highspy.HighsModelStatus.kUnbounded: "unbounded",
    highspy.HighsModelStatus.kUnboundedOrInfeasible: "unbounded_or_infeasible",
}


class SmallLp:
    """min cost·x subject to row bounds and column bounds; rows added and bounds changed in place."""

    def __init__(self, lower: Sequence[float], upper: Sequence[float]) -> None:
        self.h = highspy.Highs()
        for option, value in (
            ("output_flag", False),
            ("primal_feasibility_tolerance", 1e-10),
            ("dual_feasibility_tolerance", 1e-10),
            ("threads", 1),
        ):
            self.h.setOptionValue(option, value)
        self.ncols = 0
        self.nrows = 0
        self.solves = 0
        self.add_cols(lower, upper)

    def add_cols(self, lower: Sequence[float], upper: Sequence[float]) -> int:
        """Columns (of cost 0, in no row yet) with these bounds; the index of the first."""
        first = self.ncols
        none = np.array([], dtype=np.int32)
        for lo, hi in zip(lower, upper):
            self.h.addCol(0.0, _clip(lo), _clip(hi), 0, none, np.array([]))
            self.ncols += 1
        return first

    def add_row(self, lower: float, upper: float, coeffs: dict[int, float]) -> int:
        """A row lower <= Σ coeffs[j]·x_j <= upper (±inf: no bound); its index."""
        idx = np.array(sorted(coeffs), dtype=np.int32)
        vals = np.array([coeffs[j] for j in sorted(coeffs)], dtype=float)
        self.h.addRow(_clip(lower), _clip(upper), len(idx), idx, vals)
        self.nrows += 1
        return self.nrows - 1

    def set_row_bounds(self, row: int, lower: float, upper: float) -> None:
        """Set row `row` to lower <= Σ coeffs·x <= upper (±inf: no bound)."""
        self.h.changeRowBounds(row, _clip(lower), _clip(upper))

    def set_col_bounds(self, col: int, lower: float, upper: float) -> None:
        """Set column `col` to lower <= x_col <= upper (±inf: no bound)."""
        self.h.changeColBounds(col, _clip(lower), _clip(upper))

    def set_cost(self, cost: Sequence[float] | np.ndarray) -> None:
        """The objective's coefficients, one per column (minimised)."""
        self.h.changeColsCost(self.ncols, np.arange(self.ncols, dtype=np.int32), np.asarray(cost, dtype=float))

    def solve(self) -> str:
        """Run HiGHS: ``optimal``, ``infeasible``, ``unbounded``, ``unbounded_or_infeasible`` or another status."""
        self.h.run()
        self.solves += 1
        ms = self.h.getModelStatus()
        if ms != highspy.HighsModelStatus.kOptimal:
            # a warm start can end in "unknown" with a feasible, dual-feasible basis: solve afresh
            self.h.clearSolver()
            self.h.run()
            ms = self.h.getModelStatus()
        return _STATUS.get(ms, self.h.modelStatusToString(ms).lower().replace(" ", "_"))

    @property
    def objective(self) -> float:
        """The objective's value at the last solve's solution."""
        return float(self.h.getInfo().objective_function_value)

    @property
    def x(self) -> np.ndarray:
        """The last solve's solution, one value per column."""
        return np.asarray(self.h.getSolution().col_value, dtype=float)

    @property
    def row_duals(self) -> np.ndarray:
        """d(objective)/d(row bound) at the optimum, per row."""
        return np.asarray(self.h.getSolution().row_dual, dtype=float)

    def extreme(self, col: int, *, maximise: bool) -> tuple[str, float]:
        """The status and the least (or largest) value of column `col` over the rows."""
        cost = np.zeros(self.ncols)
        cost[col] = -1.0 if maximise else 1.0
        self.set_cost(cost)
        status = self.solve()
        return status, (float(self.x[col]) if status == "optimal" else float("nan"))


def _clip(v: float) -> float:
    return max(-INF, min(INF, float(v)))
