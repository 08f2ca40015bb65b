"""dse.costs.nccl.validation: honest held-out cases, the summary line, golden error ceilings, bad input."""

from __future__ import annotations

import re
from typing import Any

import pytest

from dse.core.errors import InputError
from dse.costs.nccl import bundled as B
from dse.costs.nccl import fit as F
from dse.costs.nccl import validation as V
from dse.costs.nccl.logs import NcclTestsRun
from dse.costs.nccl.model import NcclParams, NcclSystem, default_params

#: Measured fit gm per case (split, calibrate, hold out), with about one point of headroom: a change
#: that makes any case worse than this fails. The overall ceiling likewise.
CEILINGS = {
    ("file", "dgxc_h100", "p5_1node"): 0.073,
    ("sizes", "p5_1node", "p5_1node"): 0.076,
    ("scale", "p5_1node", "p5_2node"): 0.095,
    ("scale", "dgxc_h100", "nebius_h100"): 0.087,
    ("sizes", "nebius_h100", "nebius_h100"): 0.064,
    ("sizes", "p5_2node", "p5_2node"): 0.069,
    ("file", "nebius_h100", "p5_2node"): 0.091,
    ("file", "nebius_h100", "dell_h200"): 0.106,
    ("file", "nebius_h100", "oci_h100"): 0.017,
    ("sizes", "dell_h200", "dell_h200"): 0.100,
    ("sizes", "lambda_b200", "lambda_b200"): 0.067,
    ("file", "a100_blog_g8", "a100_dkh"): 0.096,
    ("file", "a100_blog_g8", "a100_oci"): 0.134,
    ("scale", "a100_blog_g1", "crusoe_a100"): 0.081,
    ("sizes", "crusoe_a100", "crusoe_a100"): 0.061,
    ("sizes", "p4de_2node", "p4de_2node"): 0.065,
    ("sizes", "v100_blog", "v100_blog"): 0.027,
    ("file", "v100_blog", "v100_oci"): 0.063,
    ("sizes", "xe9680_h100", "xe9680_h100"): 0.059,
    ("scale", "dgxc_h100", "xe9680_h100"): 0.136,
    ("sizes", "oci_oke_a100", "oci_oke_a100"): 0.061,
    ("scale", "a100_blog_g1", "oci_oke_a100"): 0.186,
    ("sizes", "vm4_h100", "vm4_h100"): 0.103,
    ("scale", "dgxc_h100", "vm4_h100"): 0.137,
    ("sizes", "ib4_h100", "ib4_h100"): 0.037,
    ("scale", "dgxc_h100", "ib4_h100"): 0.113,
    ("sizes", "ib8_h100", "ib8_h100"): 0.055,
    ("scale", "dgxc_h100", "ib8_h100"): 0.088,
    ("file", "ib4_h100", "ib8_h100"): 0.160,
    ("sizes", "vpbench_h100_4node", "vpbench_h100_4node"): 0.070,
    ("scale", "dgxc_h100", "vpbench_h100_4node"): 0.097,
    ("file", "vm4_h100", "vpbench_h100_4node"): 0.090,
}
OVERALL_CEILING = 0.094
SUMMARY = re.compile(r"nccl: geometric-mean error (\d+\.\d) % over (\d+) held-out measurements from (\d+) machines")


@pytest.fixture(scope="module")
def spied() -> tuple[V.ValidationTable, list[dict[str, Any]]]:
    """The bundled table, computed once, with what each case fitted on and what it held out."""
    seen: list[dict[str, Any]] = []

    calibrated = V.calibrated

    def spy_calibrated(
        split: str, calib: NcclSystem, held: NcclSystem, runs: list[NcclTestsRun], **kw: Any
    ) -> NcclParams:
        seen.append({"fit": V.row_keys(runs), "held": set()})
        return calibrated(split, calib, held, runs, **kw)

    def spy_errors(system: NcclSystem, params: NcclParams | None, runs: list[NcclTestsRun]) -> list[F.RowError]:
        seen[-1]["held"] |= V.row_keys(runs)
        return F.errors(system, params, runs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(V, "calibrated", spy_calibrated)
        mp.setattr(V, "errors", spy_errors)
        table = V.validation_table()
    return table, seen


def test_no_case_calibrates_on_a_held_out_row(spied: tuple[V.ValidationTable, list[dict[str, Any]]]) -> None:
    table, seen = spied
    held = [s for s in seen if s["held"]]
    assert len(held) == len(V.CASES) == len(table.cases)
    for s in held:
        assert s["fit"] and not s["fit"] & s["held"]
    for split, calib, hold in V.CASES:
        _, ms = B.bundled()
        fit_runs, held_runs = V.split_runs(split, ms[calib], ms[hold])
        assert V.row_keys(fit_runs) and not V.row_keys(fit_runs) & V.row_keys(held_runs)
        if split == "sizes":  # the two halves together are the whole sweep
            assert V.row_keys(fit_runs) | V.row_keys(held_runs) == V.row_keys(ms[calib].runs())


def test_each_case_lists_its_held_out_points(spied: tuple[V.ValidationTable, list[dict[str, Any]]]) -> None:
    """Every case carries its held-out rows: as many as it counts, their errors give its gm and its
    worst, each is the held-out file's own out-of-place time at that line (in the file's order), and
    the prediction is the measured time times 1 + error."""
    table, _ = spied
    for case in table.cases:
        points = case.points
        assert len(points) == case.rows > 0
        assert F.geomean_error([p.error for p in points]) == pytest.approx(case.fit_gm, rel=1e-12)
        assert max(abs(p.error) for p in points) == case.fit_max
        assert [p.line for p in points] == sorted({p.line for p in points})
        lines = (B.BUNDLED_DIR / case.held_out).read_text().splitlines()
        for p in points:
            cols = lines[p.line - 1].split()
            cols = cols[next(i for i, c in enumerate(cols) if c.isdigit()) :]  # a launcher's prefix off
            assert int(cols[0]) == p.size_bytes
            header = [ln for ln in lines[: p.line] if "redop" in ln.split()][-1]
            root = "root" in header.split()  # old logs' headers have no root column
            assert float(cols[5 if root else 4]) == pytest.approx(p.measured_us, rel=1e-9), (case.held_out, p.line)
            assert p.predicted_us == pytest.approx(p.measured_us * (1 + p.error), rel=1e-9)
            assert p.algo in ("ring", "tree", "nvls", "nvls_tree") and p.proto in ("LL", "LL128", "Simple")


def test_every_case_stays_under_its_measured_ceiling(spied: tuple[V.ValidationTable, list[dict[str, Any]]]) -> None:
    table, _ = spied
    assert set(CEILINGS) == set(V.CASES)
    for case, spec in zip(table.cases, V.CASES):
        assert (case.split, case.calibrated_on) == spec[:2]
        assert 0 < case.fit_gm <= case.fit_max
        assert case.fit_gm < CEILINGS[spec], (spec, case.fit_gm)
    assert table.gm < OVERALL_CEILING
    # Calibrating on a machine's own rows beats the defaults on its other rows, on every machine but
    # the 4 VM nodes: 9.3 % against 8.7 %; their 2 MB row, 191 us out-of-place against 132 us
    # in-place, is among the rows fitted, and without it the fit errs 6.1 %. Carried to another
    # machine or scale it can be worse or no better (docs/nccl.md "Where it misses").
    worse = [c.calibrated_on for c in table.cases if c.split == "sizes" and c.fit_gm >= c.default_gm]
    assert worse == ["vm4_h100"]
    assert sum(c.fit_gm < c.default_gm for c in table.cases) >= len(table.cases) - 10


def test_g8_cases_are_predicted_with_their_launch_latency(
    spied: tuple[V.ValidationTable, list[dict[str, Any]]],
) -> None:
    """The -g 8 held-out files (Dell H200 RoCE, A100 dkh, V100) are predicted with 8 GPUs per thread:
    NCCL's defaults with the launch latency are closer to their measured floors than without."""
    table, _ = spied
    by_case = {(c.split, c.calibrated_on, c.held_out): c for c in table.cases}
    assert by_case[("file", "a100_blog_g8", "blog_a100_8gpu_1node_dkh.txt")].default_gm < 0.25  # 0.49 at -g 1
    assert by_case[("file", "nebius_h100", "redhat_dell_h200_2node_roce.txt")].default_gm < 0.20  # 0.27 at -g 1


def test_table_totals_and_summary_line(spied: tuple[V.ValidationTable, list[dict[str, Any]]]) -> None:
    table, _ = spied
    m = SUMMARY.fullmatch(table.summary_line())
    assert m is not None, table.summary_line()
    assert int(m.group(2)) == table.measurements == sum(c.rows for c in table.cases)
    assert int(m.group(3)) == table.machines == len({c.machine for c in table.cases}) >= 10
    assert float(m.group(1)) == round(100 * table.gm, 1)
    systems, _ = B.bundled()
    for c in table.cases:
        assert c.machine in systems and c.label and c.source and c.held_out.endswith(".txt")
        assert c.collective == "all_reduce" and c.rows >= 1


def test_summary_line_of_a_built_table() -> None:
    t = V.ValidationTable(cases=(), astra_sim=(), astra_sim_gm={}, measurements=12, machines=3, gm=0.0849)
    assert t.summary_line() == "nccl: geometric-mean error 8.5 % over 12 held-out measurements from 3 machines"


def test_astra_sim_comparison(spied: tuple[V.ValidationTable, list[dict[str, Any]]]) -> None:
    """dse's ring times on HGX-H100 lie within 8 % of the plot readings (themselves about +/-3 %)."""
    table, _ = spied
    assert table.astra_sim_gm == {2: 0.2063, 4: 0.1201, 8: 0.0969}
    assert {p.gpus for p in table.astra_sim} == {2, 4, 8} and len(table.astra_sim) == 9
    for p in table.astra_sim:
        assert abs(p.dse_us / p.measured_us - 1) < 0.08, p


def test_the_network_tier_carries_only_on_the_same_nccl_transport() -> None:
    """A file case from IB to RoCE (both NCCL's IB verbs transport) carries the fitted network
    quantities but not the IB latency; from IB to EFA (its own plugin) it carries the fabric only, as
    a scale case does: every network quantity is the held-out kind's default."""
    systems, ms = B.bundled()
    ib, roce, efa = systems["h100_nebius_2node"], systems["h200_dell_2node"], systems["h100_p5_2node"]
    runs = ms["nebius_h100"].runs()
    fitted = F.fit(ib, runs)
    network = ("net_latency_ns", "e_nvls_inter", "e_ring_inter", "ring_inter_hop_ns", "s_half_multi_bytes", "k_multi")
    assert fitted.s_half_multi_bytes != default_params(roce).s_half_multi_bytes  # the carry is visible
    to_roce = V.calibrated("file", ib, roce, runs)
    for name in network[1:]:
        assert getattr(to_roce, name) == getattr(fitted, name), name
    assert to_roce.net_latency_ns == default_params(roce).net_latency_ns
    to_efa = V.calibrated("file", ib, efa, runs)
    assert to_efa.e_ring_intra == fitted.e_ring_intra
    scaled = V.calibrated("scale", systems["h100_p5_1node"], efa, ms["p5_1node"].runs())
    for name in network:
        assert getattr(to_efa, name) == getattr(scaled, name) == getattr(default_params(efa), name), name
    assert default_params(efa).net_latency_ns == 19000.0  # 32 x 100 Gb/s: EFA v2


@pytest.mark.parametrize(
    ("case", "field"),
    [
        (("bogus", "p5_1node", "p5_1node"), "split"),
        (("sizes", "p5_1node", "p5_2node"), "split"),  # sizes needs one sweep
        (("file", "p5_1node", "p5_1node"), "split"),  # a file case on its own file
        (("file", "nope", "p5_1node"), "calibrate"),
        (("file", "p5_1node", "nope"), "hold_out"),
    ],
)
def test_bad_case_is_one_input_error(case: tuple[str, str, str], field: str) -> None:
    with pytest.raises(InputError) as e:
        V.validate_case(*case)
    assert e.value.field == field


def test_bad_case_list_is_one_input_error() -> None:
    with pytest.raises(InputError):
        V.validation_table(())
    with pytest.raises(InputError):
        V.validation_table([("sizes", "p5_1node")])  # type: ignore[list-item]


def test_a_table_fits_each_calibration_once_and_equals_its_cases_alone() -> None:
    """Two scale cases calibrate on the same one-node runs as the ASTRA-sim comparison: the table fits
    them once, and its cases equal each case validated on its own (a fit depends on its inputs only)."""
    cases = [("scale", "dgxc_h100", "nebius_h100"), ("scale", "dgxc_h100", "xe9680_h100")]
    calls: list[int] = []

    def counted(system: NcclSystem, runs: list[NcclTestsRun], **kw: Any) -> NcclParams:
        calls.append(len(runs))
        return F.fit(system, runs, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(V, "fit", counted)
        table = V.validation_table(cases)
    assert len(calls) == 1
    assert table.cases == tuple(V.validate_case(*c) for c in cases)
