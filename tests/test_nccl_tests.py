"""Reading nccl-tests output (dse.costs.nccl.logs): golden values from public logs (tests/data/nccl,
each with its `# source:` line), the invariants nccl-tests' own arithmetic guarantees (algbw = size /
time, busbw = algbw x the collective's factor, within the printing precision), every format variant
(built from the layouts in nccl-tests' src/util.cu), warnings, every refusal, and a round trip of
rows printed the way nccl-tests prints them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dse.core.errors import InputError
from dse.costs.nccl.logs import (
    COLLECTIVES,
    NcclTestsPass,
    NcclTestsRun,
    busbw_factor,
    factor_above_one,
    implied_ranks,
    parse_nccl_tests,
    printed_error,
    read_nccl_tests,
)

from .conftest import DATA

NCCL = DATA / "nccl"
NCCL_DATA = Path(__file__).resolve().parents[1] / "dse" / "data" / "nccl"  # the files dse ships
H100_1NODE = NCCL / "dgxc_dgxh100_1node_allreduce.txt"
P5_2NODE = NCCL / "aws_p5_2node_allreduce.txt"
P5_1NODE = NCCL / "aws_p5_1node_allreduce_batch.txt"
V100 = NCCL / "blog_v100_8gpu_hybridcube.txt"
ALLGATHER = NCCL / "dstack_gcp_a3mega_h100_2node_allgather.txt"
TWO_TESTS = NCCL / "oci_gpu_container_v100_a100_1node.txt"
#: Ranks of each log, from its `# machine:` line (nodes x GPUs), where the log has no rank lines.
RANKS = {P5_2NODE: 16, P5_1NODE: 8, V100: 8, ALLGATHER: 16, H100_1NODE: 8, TWO_TESTS: 8}


def one(path: Path, **kw) -> NcclTestsRun:
    runs = read_nccl_tests(path, **kw)
    assert len(runs) == 1
    return runs[0]


def by_size(run: NcclTestsRun, size: int):
    (row,) = [r for r in run.rows if r.size_bytes == size]
    return row


def values(p: NcclTestsPass | None) -> tuple:
    assert p is not None
    return (p.time_us, p.algbw_GBps, p.busbw_GBps, p.wrong)


# ----------------------------------------------------------------------------- golden values
def test_single_node_h100_new_format() -> None:
    run = one(H100_1NODE)
    assert (run.collective, run.ranks, run.gpus) == ("all_reduce", 8, ("NVIDIA H100 80GB HBM3",))
    assert (run.threads, run.gpus_per_thread, run.cpu_time, run.warnings) == (1, 1, False, ())
    assert (len(run.rows), run.rows[0].size_bytes, run.rows[-1].size_bytes) == (32, 8, 17179869184)
    gib = by_size(run, 1073741824)
    assert (gib.count, gib.type, gib.redop, gib.root) == (268435456, "float", "sum", -1)
    assert values(gib.out_of_place) == (4029.4, 266.48, 466.33, 0)
    assert values(gib.in_place) == (4016.4, 267.34, 467.85, 0)
    assert values(by_size(run, 32).out_of_place) == (68.14, 0.0, 0.0, 0)  # the outlier row, as printed
    assert values(by_size(run, 17179869184).in_place) == (62636.0, 274.28, 479.99, 0)
    assert run.avg_busbw_GBps == 159.151 and run.busbw_factor() == 1.75 and implied_ranks(run) == 8


def test_multi_node_with_srun_prefixes() -> None:
    run = one(P5_2NODE)
    assert (run.collective, run.ranks, run.gpus, run.avg_busbw_GBps) == ("all_reduce", None, (), None)
    assert len(run.rows) == 32 and implied_ranks(run) == 16
    assert values(by_size(run, 17179869184).out_of_place) == (66132.0, 259.78, 487.09, 0)
    assert values(by_size(run, 8).in_place) == (72.43, 0.0, 0.0, 0)
    assert run.warnings == ("the table ends after 32 rows without its footer (cut short, or an excerpt)",)
    assert one(P5_2NODE, ranks=16).busbw_factor() == 1.875


def test_open_mpi_prefixes_and_footer() -> None:
    run = one(P5_1NODE)
    assert (len(run.rows), run.avg_busbw_GBps, run.warnings, implied_ranks(run)) == (32, 156.742, (), 8)
    assert values(by_size(run, 134217728).out_of_place) == (592.8, 226.39, 396.19, 0)
    assert values(by_size(run, 17179869184).in_place) == (62200.0, 276.2, 483.35, 0)


def test_old_format_v100() -> None:
    run = one(V100)
    assert (run.collective, run.threads, run.gpus_per_thread, run.avg_busbw_GBps) == ("all_reduce", 1, 8, 25.9598)
    row = by_size(run, 134217728)
    assert (row.count, row.redop, row.root) == (33554432, "sum", None)  # no root column before 2.13
    assert values(row.out_of_place) == (1818.8, 73.8, 129.14, None)  # 'error', not a count of wrong elements
    assert row.out_of_place is not None and row.out_of_place.max_error == 2e-07
    assert by_size(run, 16).in_place.max_error == 6e-08  # type: ignore[union-attr]
    assert len(run.rows) == 25 and implied_ranks(run) == 8 and run.warnings == ()


def test_all_gather_without_checking_and_without_hashes() -> None:
    run = one(ALLGATHER)
    assert (run.collective, len(run.rows), run.avg_busbw_GBps, implied_ranks(run)) == ("all_gather", 11, 146.948, 16)
    row = by_size(run, 8589934592)
    assert (row.count, row.redop, row.root) == (134217728, "none", -1)  # count per rank, size of the whole output
    assert values(row.out_of_place) == (42713.0, 201.11, 188.54, None)  # N/A: validation off
    assert one(ALLGATHER, ranks=16).busbw_factor() == 15 / 16


def test_two_tests_in_one_file() -> None:
    a, b = read_nccl_tests(TWO_TESTS)
    assert (a.collective, b.collective) == ("all_reduce", None)  # only the first test's binary is named before it
    assert values(a.rows[0].out_of_place) == (13867.0, 77.43, 135.5, 0) and a.avg_busbw_GBps == 135.455
    assert values(b.rows[0].in_place) == (81154.0, 132.31, 231.54, 0) and b.avg_busbw_GBps == 231.793
    assert (a.rows[0].size_bytes, b.rows[0].size_bytes, b.line) == (1073741824, 10737418240, 11)
    assert [r.collective for r in read_nccl_tests(TWO_TESTS, collective="all_reduce")] == ["all_reduce"] * 2


def raw_numbers(path: Path, line: int) -> list[str]:
    """The tokens of a file's line, launcher prefix removed by hand (independently of the reader)."""
    text = path.read_text().splitlines()[line - 1]
    return re.sub(r"^\s*(\[1,0\]<stdout>:|0:)", "", text).split()


@pytest.mark.parametrize("path", sorted(RANKS), ids=lambda p: p.name)
def test_every_row_is_the_text_of_its_line(path: Path) -> None:
    for run in read_nccl_tests(path):
        for row in run.rows:
            tokens = raw_numbers(path, row.line)
            assert (int(tokens[0]), int(tokens[1])) == (row.size_bytes, row.count)
            width = 4  # time, algbw, busbw, #wrong / error
            for p, toks in ((row.out_of_place, tokens[-2 * width : -width]), (row.in_place, tokens[-width:])):
                assert p is not None
                assert [p.time_us, p.algbw_GBps, p.busbw_GBps] == [float(t) for t in toks[:3]]
                assert p.wrong == (None if toks[3] == "N/A" or "e" in toks[3] else int(toks[3]))


# ----------------------------------------------------------------------------- invariants
def decimals_error(token: str) -> float:
    """Half a unit in the last place of a number as printed."""
    return 0.5 * 10.0 ** -(len(token.split(".")[1]) if "." in token else 0)


@pytest.mark.parametrize("path", sorted(RANKS), ids=lambda p: p.name)
def test_busbw_is_algbw_times_the_factor_and_algbw_is_size_over_time(path: Path) -> None:
    for run in read_nccl_tests(path, collective="all_gather" if path == ALLGATHER else "all_reduce", ranks=RANKS[path]):
        factor = run.busbw_factor()
        assert factor is not None
        checked = 0
        for row in run.rows:
            tokens = raw_numbers(path, row.line)
            for p, (t_tok, a_tok, _b, _w) in ((row.out_of_place, tokens[-8:-4]), (row.in_place, tokens[-4:])):
                assert p is not None and p.time_us and p.algbw_GBps is not None and p.busbw_GBps is not None
                ea, eb, et = decimals_error(a_tok), printed_error(p.busbw_GBps), decimals_error(t_tok)
                assert abs(p.busbw_GBps - factor * p.algbw_GBps) <= eb + factor * ea + 1e-9
                exact = row.size_bytes / (p.time_us * 1e3)  # GB/s from bytes and µs
                assert abs(p.algbw_GBps - exact) <= ea + exact * et / p.time_us + 1e-9
                checked += 1
        assert checked == 2 * len(run.rows) > 0


def test_factors_and_implied_ranks_closed_forms() -> None:
    assert [busbw_factor("all_reduce", n) for n in (1, 2, 8, 16)] == [0.0, 1.0, 1.75, 1.875]
    assert [busbw_factor(c, 8) for c in ("reduce_scatter", "all_gather", "alltoall")] == [0.875] * 3
    assert [busbw_factor(c, 8) for c in ("broadcast", "reduce", "sendrecv")] == [1.0] * 3
    assert set(COLLECTIVES) >= {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce"}
    for n in (2, 3, 8, 24, 64):  # a row printed from algbw 200 implies exactly n
        for coll in ("all_reduce", "all_gather"):
            text = HEADER + row_text(1 << 30, 1 << 28, 1e6, 200.0, 200.0 * busbw_factor(coll, n), 0) + "\n"
            assert implied_ranks(parse_nccl_tests(text, collective=coll)[0]) == n
    few_digits = HEADER + row_text(1 << 30, 1 << 28, 1e6, 20.0, 20.0 * busbw_factor("all_reduce", 128), 0)
    assert implied_ranks(parse_nccl_tests(few_digits, collective="all_reduce")[0]) is None  # 123..134 all fit
    mixed = (
        HEADER
        + row_text(1 << 30, 1 << 28, 1e6, 200.0, 350.0, 0)
        + "\n"
        + row_text(1 << 31, 1 << 29, 2e6, 200.0, 375.0, 0)
    )
    assert implied_ranks(parse_nccl_tests(mixed, collective="all_reduce")[0]) is None  # 8 and 16 disagree
    bcast = parse_nccl_tests(HEADER + row_text(1 << 30, 1 << 28, 1e6, 200.0, 200.0, 0), collective="broadcast")
    assert implied_ranks(bcast[0]) is None  # factor 1 says nothing
    assert (printed_error(1.5), printed_error(999.99), printed_error(1234.5), printed_error(123456.0)) == (
        0.005, 0.005, 0.05, 0.5,
    )  # fmt: skip


# ----------------------------------------------------------------------------- formats
def c_float(value: float, width: int) -> str:
    """A number the way nccl-tests >= 2.17.5 prints it (util.cu getFloatStr: 2, 1, 0 decimals, then e)."""
    for decimals in (2, 1, 0):
        text = f"{value:{width}.{decimals}f}"
        if len(text) <= width:
            return text
    return f"{value:{width}.{1 if width >= 7 else 0}e}"


def pass_text(time: float, algbw: float, busbw: float, wrong: int | None) -> str:
    tail = "    N/A" if wrong is None else f"  {wrong:6g}"
    return f"  {c_float(time, 7):>7}  {c_float(algbw, 6):>6}  {c_float(busbw, 6):>6}{tail}"


def row_text(size, count, time, algbw, busbw, wrong, dtype="float", op="sum", root=-1, inplace=None) -> str:
    head = f"{size:12d}  {count:12d}  {dtype:>8}  {op:>6}  {root:6d}"
    return head + pass_text(time, algbw, busbw, wrong) + pass_text(*(inplace or (time, algbw, busbw, wrong)))


HEADER = (
    "#                                                              out-of-place                       in-place\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
)
PREAMBLE = """# nccl-tests version 2.19.6 nccl-headers=23007 nccl-library=22602
# Collective test starting: reduce_scatter_perf_mpi
# nThread 1 nGpus 2 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1234 on      host1 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   1234 on      host1 device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid   1240 on      host2 device  0 [0000:18:00] NVIDIA H200
#  Rank  3 Group  0 Pid   1240 on      host2 device  1 [0000:2a:00] NVIDIA H200
host1:1234:1250 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
host1:1234:1250 [0] NCCL INFO NCCL version 2.26.2+cuda12.8
"""
FOOTER = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 38.36 \n#\n# Collective test concluded: reduce_scatter_perf_mpi\n"
RS_ROW = row_text(1048576, 65536, 20.5, 51.15, 38.36, 0)


def test_an_unnamed_table_whose_busbw_exceeds_its_algbw_is_an_all_reduce() -> None:
    """Only all-reduce's factor, 2(n-1)/n, is above 1 (4/3 or more from 3 ranks): a pasted table
    showing one above 1.3 (beyond the printing precision, on three passes or more) is read as
    all_reduce, and says so; other factors, too few passes, or the caller's collective leave it."""
    sizes = (1 << 20, 1 << 22, 1 << 24)

    def table(factor: float, rows: int = 3) -> str:
        body = "".join(row_text(s, s // 4, s / 52.43e3, 52.43, 52.43 * factor, 0) + "\n" for s in sizes[:rows])
        return HEADER + body + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 91.75 \n"

    (run,) = parse_nccl_tests(table(1.75))
    assert run.collective == "all_reduce" and factor_above_one(run.rows) == pytest.approx(1.75, abs=1e-3)
    assert run.warnings == ("the test is not named: all_reduce, the one whose busbw exceeds algbw (x1.750)",)
    (three,) = parse_nccl_tests(table(4 / 3))
    assert three.collective == "all_reduce" and implied_ranks(three) == 3
    for factor, rows in ((0.75, 3), (1.0, 3), (1.2, 3), (1.75, 1)):  # reduce_scatter; n = 2 or broadcast; none; 1 row
        (other,) = parse_nccl_tests(table(factor, rows))
        assert other.collective is None and other.warnings == ()
    (given,) = parse_nccl_tests(table(1.75), collective="all_reduce")
    assert given.collective == "all_reduce" and given.warnings == ()


def test_full_preamble_versions_ranks_and_interleaved_info_lines() -> None:
    (run,) = parse_nccl_tests(
        PREAMBLE
        + HEADER
        + RS_ROW
        + "\nhost1:1234:1250 [0] NCCL INFO comm 0x1 rank 0 nranks 4 - Destroy COMPLETE\n"
        + FOOTER,
        "rs.log",
    )
    assert (run.collective, run.nccl_tests_version, run.nccl_version) == ("reduce_scatter", "2.19.6", "2.26.2")
    assert (run.ranks, run.gpus, run.threads, run.gpus_per_thread) == (
        4,
        ("NVIDIA H100 80GB HBM3", "NVIDIA H200"),
        1,
        2,
    )
    assert (len(run.rows), run.avg_busbw_GBps, run.warnings, run.source, run.busbw_factor()) == (
        1,
        38.36,
        (),
        "rs.log",
        0.75,
    )
    (info,) = parse_nccl_tests(PREAMBLE.replace("nccl-library=22602", "nccl-library=0") + HEADER + RS_ROW)
    assert info.nccl_version == "2.26.2"  # from the NCCL INFO line when the library code says nothing
    (old,) = parse_nccl_tests("# nccl-tests version 2.10.0 nccl-headers=2804 nccl-library=2804\n" + HEADER + RS_ROW)
    assert old.nccl_version == "2.8.4"  # version codes before 2.9: X*1000 + Y*100 + Z
    (rccl,) = parse_nccl_tests("# rccl-tests version 2.17.9 rccl-headers=22707 rccl-library=22707\n" + HEADER + RS_ROW)
    assert (rccl.nccl_tests_version, rccl.nccl_version) == ("2.17.9", "2.27.7")


@pytest.mark.parametrize(
    "prefix",
    ["0: ", "12: ", "[1,0]<stdout>:", "[1,3]<stderr>: ", "[3] ", "[node-a1:4242] ", "node-a1: ",
     "2025-03-04T05:06:07.123456789Z ", "[2025-03-04 05:06:07] ", "   ", "\t", "0: [1,0]<stdout>:"],
)  # fmt: skip
def test_launcher_prefixes_are_removed(prefix: str) -> None:
    text = "".join(prefix + line + "\n" for line in (PREAMBLE + HEADER + RS_ROW + "\n" + FOOTER).splitlines())
    (run,) = parse_nccl_tests(text)
    assert (run.collective, run.ranks, run.avg_busbw_GBps, run.warnings) == ("reduce_scatter", 4, 38.36, ())
    assert values(run.rows[0].out_of_place) == (20.5, 51.15, 38.36, 0)


def test_open_mpi_tags_inside_a_row_are_removed() -> None:
    """`mpirun --tag-output` tags each piece nccl-tests prints, so a row carries tags mid-line
    (dse/data/nccl/keitaw_p5_h100_2node_allreduce.txt); the row reads as without them."""
    tag = "[1,0]<stdout>:"
    cells = RS_ROW.split()
    torn = tag + " ".join(cells[:5]) + tag + "  " + " ".join(cells[5:9]) + tag + "  " + " ".join(cells[9:])
    text = "".join(tag + line + "\n" for line in (PREAMBLE + HEADER).splitlines()) + torn + "\n" + FOOTER
    (run,) = parse_nccl_tests(text)
    (plain,) = parse_nccl_tests(PREAMBLE + HEADER + RS_ROW + "\n" + FOOTER)
    assert run.rows[0].out_of_place == plain.rows[0].out_of_place
    assert run.rows[0].in_place == plain.rows[0].in_place
    shipped = read_nccl_tests(NCCL_DATA / "keitaw_p5_h100_2node_allreduce.txt")
    assert [len(r.rows) for r in shipped] == [32] and shipped[0].rows[1].out_of_place.time_us == 63.44


def test_mpich_rank_tags_inside_a_row_are_removed() -> None:
    """MPICH's `-prepend-rank` tags each piece too (`-1[0]    366.5`, as in NVIDIA/nccl issue 1453);
    the row reads as without them, and a line without a rank prefix keeps its brackets."""
    cells = RS_ROW.split()
    torn = "[0] " + " ".join(cells[:5]) + "[0]  " + " ".join(cells[5:9]) + "[0]  " + " ".join(cells[9:])
    text = "".join("[0] " + line + "\n" for line in (PREAMBLE + HEADER).splitlines()) + torn + "\n" + FOOTER
    (run,) = parse_nccl_tests(text)
    (plain,) = parse_nccl_tests(PREAMBLE + HEADER + RS_ROW + "\n" + FOOTER)
    assert (run.rows[0].out_of_place, run.rows[0].in_place) == (plain.rows[0].out_of_place, plain.rows[0].in_place)
    with pytest.raises(InputError, match="root"):
        parse_nccl_tests(PREAMBLE + HEADER + torn.removeprefix("[0] ") + "\n" + FOOTER)


def test_old_layouts_by_their_headers() -> None:
    allgather = (
        "#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "     1048576        131072   float    101.3   10.35    9.06  0e+00    100.9   10.39    9.09  0e+00\n"
    )
    (ag,) = parse_nccl_tests(allgather, collective="all_gather")
    assert (ag.rows[0].redop, ag.rows[0].root, ag.rows[0].in_place.max_error) == (None, None, 0.0)  # type: ignore[union-attr]
    bcast = (
        "#       size         count    type    root     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "     1048576        262144   float       0    50.00   20.97   20.97  0e+00    49.50   21.18   21.18  0e+00\n"
    )
    assert parse_nccl_tests(bcast)[0].rows[0].root == 0
    v1 = (  # nccl-tests 1.0: other names, times in ms
        "# NCCL Tests compiled with NCCL 2.3\n"
        "#      bytes             N    type      op     time  algbw  busbw      res     time  algbw  busbw      res\n"
        "     1048576        262144   float     sum    0.105  10.00  17.50    1e-07    0.104  10.08  17.65    1e-07\n"
    )
    # alltoall of about 2020 (microsoft/superbenchmark tests/data/nccl_alltoall.log): redop left blank
    blank = (
        "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "        1024            32   float            88.17    0.01    0.01    N/A    88.98    0.01    0.01    N/A\n"
    )
    (a2a,) = parse_nccl_tests(blank, collective="alltoall")
    assert (a2a.rows[0].redop, a2a.rows[0].out_of_place.time_us, a2a.rows[0].in_place.time_us) == (None, 88.17, 88.98)  # type: ignore[union-attr]
    with pytest.raises(InputError, match="a cut or garbled row: 12 fields, its header"):
        parse_nccl_tests(HEADER + RS_ROW.rsplit(None, 1)[0] + "\n")  # the last field cut: not a blank redop
    (old,) = parse_nccl_tests(v1)
    ms_units = HEADER.replace("(us)", "(ms)") + row_text(1048576, 262144, 0.25, 4.19, 7.34, 0)
    assert parse_nccl_tests(ms_units)[0].rows[0].in_place.time_us == 250.0  # type: ignore[union-attr]
    assert (old.nccl_version, old.rows[0].out_of_place.time_us, old.rows[0].redop) == ("2.3", 105.0, "sum")  # type: ignore[union-attr]


def test_cputime_timestamps_per_iteration_columns_and_exponents() -> None:
    header = (
        "#       size         count      type   redop    root  cputime   algbw   busbw #wrong    i_min    i_max    i_p99    i_cv%"
        "  cputime   algbw   busbw #wrong    i_min    i_max    i_p99    i_cv%           timestamp\n"
    )
    row = (
        "  4294967296    1073741824     float     sum      -1  1.2e+07    0.36    0.63      0  1.1e+07  1.3e+07  1.3e+07     2.50"
        "    15791  271.98  475.97      0    15700    15900    15890     0.30 2025-01-02 03:04:05\n"
    )
    (run,) = parse_nccl_tests(header + row)
    r = run.rows[0]
    assert run.cpu_time and r.timestamp == "2025-01-02 03:04:05"
    assert values(r.out_of_place) == (1.2e7, 0.36, 0.63, 0) and values(r.in_place) == (15791.0, 271.98, 475.97, 0)


def test_a_header_with_one_pass() -> None:
    header = "#                    in-place\n#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
    row = "     1048576        262144     float     sum      -1    20.00   52.43   91.75      0\n"
    (run,) = parse_nccl_tests(header + row)
    assert run.rows[0].out_of_place is None and values(run.rows[0].in_place) == (20.0, 52.43, 91.75, 0)
    (oop,) = parse_nccl_tests(header.split("\n", 1)[1] + row)
    assert oop.rows[0].in_place is None and oop.rows[0].out_of_place is not None


def test_missing_values_are_none() -> None:
    row = "     1048576        262144     float     sum      -1      N/A     N/A     N/A    N/A     -nan     inf    0.00    N/A\n"
    r = parse_nccl_tests(HEADER + row)[0].rows[0]
    assert values(r.out_of_place) == (None, None, None, None) and values(r.in_place) == (None, None, 0.0, None)


def test_several_tests_with_their_own_preambles() -> None:
    second = (
        PREAMBLE.replace("reduce_scatter", "all_gather")
        + HEADER
        + row_text(4194304, 262144, 40.0, 104.86, 78.64, 0, op="none")
    )
    text = PREAMBLE + HEADER + RS_ROW + "\n" + FOOTER + second + "\n"
    a, b = parse_nccl_tests(text)
    starts = [n for n, line in enumerate(text.splitlines(), 1) if line.startswith("# nccl-tests version")]
    assert (a.collective, b.collective, [a.line, b.line]) == ("reduce_scatter", "all_gather", starts)
    assert b.rows[0].redop == "none" and b.ranks == 4


# ----------------------------------------------------------------------------- warnings
def test_warnings_never_raise() -> None:
    text = (
        "#  Rank  0 Group  0 Pid 1 on h device 0 [0000:18:00] NVIDIA A100-SXM4-80GB\n"
        "#  Rank  3 Group  0 Pid 1 on h device 3 [0000:48:00] NVIDIA A100-SXM4-80GB\n"
        + HEADER
        + row_text(8, 2, 30.0, 0.0, 0.0, 3)
        + "\n    ...\n"
        + "host1: Test timeout (60s) common.cu:523\n"
        + "# Out of bounds values : 3 FAILED\n# Avg bus bandwidth    : 0.1 \n"
    )
    (run,) = parse_nccl_tests(text)
    assert run.ranks == 4  # the highest rank listed, + 1
    joined = "\n".join(run.warnings)
    for expected in ("rank lines for 2 of ranks 0..3", "3 wrong elements at 8 bytes (out-of-place)",
                     "3 wrong elements at 8 bytes (in-place)", "rows left out", "Test timeout (60s)",
                     "Out of bounds values : 3 FAILED"):  # fmt: skip
        assert expected in joined
    cut_short = parse_nccl_tests(HEADER + RS_ROW + "\n")[0]
    assert cut_short.warnings == ("the table ends after 1 rows without its footer (cut short, or an excerpt)",)
    unknown = "#  size  count  type  redop  root  time  algbw  busbw  #wrong  newcol\n" + RS_ROW.split("  20.50")[0]
    (run,) = parse_nccl_tests(unknown + "  20.50  51.15  38.36  0  7\n")
    assert "unknown column 'newcol' ignored" in run.warnings[0]


# ----------------------------------------------------------------------------- refusals
def refused(text: str, match: str, **kw) -> InputError:
    with pytest.raises(InputError, match=match) as e:
        parse_nccl_tests(text, "x.log", **kw)
    assert "\n" not in str(e.value)
    return e.value


def test_refusals_name_the_file_and_line(tmp_path: Path) -> None:
    e = refused("hello\nworld\n", r"^x\.log: not nccl-tests output: no line is a column header")
    assert "all_reduce_perf" in str(e)
    massaged = "size time algbw busbw\n(B) (us) (GB/s) (GB/s)\n1048_576 101.9 10.29 18.00\n"
    refused(massaged, "not nccl-tests output")
    refused(
        RS_ROW + "\n", r"x\.log: not nccl-tests output: line 1 looks like a data row, but no line is a column header"
    )
    refused(HEADER + FOOTER, r"^x\.log:2: a column header with no data row after it")
    cut = HEADER + " ".join(RS_ROW.split()[:9]) + "\n"
    refused(cut, r"^x\.log:4: a cut or garbled row: 9 fields, its header \(line 2\) has 13")
    refused(HEADER + RS_ROW.replace("51.15", "5l.15", 1), r"^x\.log:4: column 'algbw' is '5l.15'")
    refused(HEADER + RS_ROW.replace("  -1", "  rt", 1), r"^x\.log:4: column 'root' is 'rt'")
    refused(HEADER + RS_ROW.replace("20.50", "-20.5", 1), r"^x\.log:4: column 'time' is '-20.5'")
    refused(HEADER + RS_ROW + "\n" + FOOTER + RS_ROW + "\n", r"^x\.log:9: a data row after its table ended")
    refused(
        "#  size  count  type  foo  time  algbw  busbw\n",
        r"x\.log:1: a column header with \('size', 'count', 'type', 'foo'\)",
    )
    refused(
        PREAMBLE + HEADER + RS_ROW,
        r"x\.log:2: the file's test is reduce_scatter, but collective='all_reduce'",
        collective="all_reduce",
    )
    refused(PREAMBLE + HEADER + RS_ROW, r"x\.log:1: the rank lines give 4 ranks, but ranks=8", ranks=8)
    refused(HEADER + RS_ROW, r"^collective: unknown collective 'allreduce'", collective="allreduce")
    for bad in (0, -2, True):
        refused(HEADER + RS_ROW, r"^ranks: ", ranks=bad)
    with pytest.raises(InputError, match="unknown collective"):
        busbw_factor("all-reduce", 8)


def test_files_empty_missing_or_too_large(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("")
    with pytest.raises(InputError, match=r"empty\.log: an empty file"):
        read_nccl_tests(empty)
    empty.write_text("\n   \n\t\n")
    with pytest.raises(InputError, match="an empty file"):
        read_nccl_tests(empty)
    with pytest.raises(InputError, match="no such file"):
        read_nccl_tests(tmp_path / "none.log")
    with pytest.raises(InputError, match="is a directory"):
        read_nccl_tests(tmp_path)
    monkeypatch.setenv("DSE_MAX_TEXT_BYTES", "4096")
    with pytest.raises(InputError, match=r"5,989 bytes, more than the limit of 4,096 bytes.*DSE_MAX_TEXT_BYTES"):
        read_nccl_tests(H100_1NODE)
    big = H100_1NODE.read_text() + "#" * (1 << 20)
    with pytest.raises(InputError, match=r"^big\.log: .*DSE_MAX_TEXT_BYTES"):
        parse_nccl_tests(big, "big.log")  # text handed over directly meets the same limit


# ----------------------------------------------------------------------------- properties
sizes = st.integers(0, 2**44)
bandwidths = st.floats(0, 2e6, allow_nan=False)
passes = st.tuples(st.floats(0, 1e9, allow_nan=False), bandwidths, bandwidths, st.none() | st.integers(0, 10**9))
prefixes = st.sampled_from(["", "0: ", "[1,0]<stdout>:", "[node7:99] ", "2025-01-02T03:04:05Z ", "  "])


@given(
    st.lists(st.tuples(sizes, sizes, st.sampled_from(["float", "half", "bfloat16", "int8", "f8e4m3"]),
                       st.sampled_from(["sum", "prod", "max", "min", "avg", "none"]), st.integers(-1, 4095),
                       passes, passes), min_size=1, max_size=6),
    prefixes,
)  # fmt: skip
def test_rows_printed_like_nccl_tests_read_back(rows, prefix: str) -> None:
    lines = [row_text(s, c, *oop, dtype=t, op=o, root=r, inplace=ip) for s, c, t, o, r, oop, ip in rows]
    text = "".join(prefix + line + "\n" for line in (HEADER + "\n".join(lines)).splitlines())
    (run,) = parse_nccl_tests(text)
    assert len(run.rows) == len(rows)
    for got, (size, count, dtype, op, root, oop, ip) in zip(run.rows, rows):
        assert (got.size_bytes, got.count, got.type, got.redop, got.root) == (size, count, dtype, op, root)
        for p, (time, algbw, busbw, wrong) in ((got.out_of_place, oop), (got.in_place, ip)):
            assert p is not None and p.time_us is not None and p.algbw_GBps is not None and p.busbw_GBps is not None
            assert p.time_us == float(c_float(time, 7)) and abs(p.time_us - time) <= printed_error(time, 7) * 1.0001
            for parsed, value in ((p.algbw_GBps, algbw), (p.busbw_GBps, busbw)):
                assert parsed == float(c_float(value, 6)) and abs(parsed - value) <= printed_error(value) * 1.0001
            assert p.wrong == (None if wrong is None else int(float(f"{wrong:g}")))


REAL_LINES = (PREAMBLE + HEADER + RS_ROW + "\n" + FOOTER).splitlines() + V100.read_text().splitlines()[5:9]


@given(st.lists(st.sampled_from(REAL_LINES) | st.text(max_size=40), max_size=12))
def test_any_text_is_runs_or_one_input_error(lines: list[str]) -> None:
    try:
        runs = parse_nccl_tests("\n".join(lines), "fuzz.log")
    except InputError as e:
        assert str(e).startswith(("fuzz.log", "collective", "ranks")) and "\n" not in str(e)
    else:
        assert runs and all(isinstance(r, NcclTestsRun) for r in runs) and any(r.rows for r in runs)
