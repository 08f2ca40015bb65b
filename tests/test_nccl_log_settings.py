"""nccl-tests logs as people paste them (dse.costs.nccl.log_lines, dse.costs.nccl.logs): Ray's
prefixes, a failure that cuts a row short, a command echoed between two tests, NCCL's bare version
banner; and the NCCL settings a log shows a run was made with, which the fit honours
(dse.costs.nccl.env.logged_env, dse.costs.nccl.fit.samples)."""

from __future__ import annotations

import pytest

from dse.core.errors import InputError
from dse.costs.nccl import fit as F
from dse.costs.nccl.env import NcclEnv, logged_env, parse_settings
from dse.costs.nccl.log_lines import settings_in, strip_launchers
from dse.costs.nccl.logs import parse_nccl_tests
from dse.costs.nccl.model import NcclSystem, default_params, predict

from .test_nccl_tests import FOOTER, HEADER, PREAMBLE, RS_ROW, row_text

H100_2N = NcclSystem(
    generation="hopper", gpus_per_node=8, nodes=2, nvlink_GBps=450.0, nvlink_links=18, nics_per_node=8, nic_GBps=50.0
)
SIZES = [1 << k for k in range(10, 31, 2)]


def _table(rows: list[str], footer: bool = True) -> str:
    return HEADER + "".join(r + "\n" for r in rows) + (FOOTER if footer else "")


# ----------------------------------------------------------------------------- formats
def test_ray_prefixes_are_removed_and_units_lines_kept() -> None:
    """SkyPilot runs mpirun under Ray, which puts "(head, rank=0, pid=3808) " before every line."""
    ray = "(head, rank=0, pid=3808) [1,0]<stdout>:"
    text = "".join(ray + line + "\n" for line in (PREAMBLE + _table([RS_ROW])).splitlines())
    (run,) = parse_nccl_tests(text)
    (plain,) = parse_nccl_tests(PREAMBLE + _table([RS_ROW]))
    assert run.rows == plain.rows and run.collective == "reduce_scatter"
    assert strip_launchers("(worker1, rank=1, pid=2769, ip=10.1.2.3) # nThread 1") == "# nThread 1"
    assert strip_launchers("      (B)    (elements)      (us)") == "(B)    (elements)      (us)"


def test_a_failure_that_cuts_a_row_short_is_a_warning_and_the_row_is_not_read() -> None:
    """nccl-tests prints a row's first columns before it runs the collective, so a failure's message
    lands on the row's line."""
    cut = "     2097152        524288     float     sum      -1 node0: Test CUDA failure common.cu:389 'illegal'"
    (run,) = parse_nccl_tests(PREAMBLE + _table([RS_ROW, cut], footer=False))
    assert len(run.rows) == 1 and any("Test CUDA failure" in w for w in run.warnings)
    with pytest.raises(InputError, match=r"no data row after it \(the test failed: line \d+: .*Test CUDA failure"):
        parse_nccl_tests(PREAMBLE + _table([cut], footer=False))


def test_a_command_echoed_after_a_footer_names_the_next_test() -> None:
    """Tables without `Collective test starting` (nccl-tests before 2.13), each after the command
    that ran it: every test takes its own binary's name."""
    body = _table([RS_ROW]).replace("# Collective test concluded: reduce_scatter_perf_mpi\n", "")
    text = "Running: ./build/all_gather_perf -b 8 -e 1M\n" + body + "Running: ./build/reduce_scatter_perf -g 2\n" + body
    runs = parse_nccl_tests(text)
    assert [r.collective for r in runs] == ["all_gather", "reduce_scatter"]


@pytest.mark.parametrize(
    ("line", "version"),
    [("NCCL version 2.26.2+cuda12.8", "2.26.2"), ("host:1:1 [0] NCCL INFO NCCL version 2.19.3+cuda12.2", "2.19.3")],
)
def test_nccl_version_banners(line: str, version: str) -> None:
    (run,) = parse_nccl_tests(line + "\n" + _table([RS_ROW]), collective="reduce_scatter")
    assert run.nccl_version == version


# ----------------------------------------------------------------------------- settings in lines
@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("host:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Ring", [("NCCL_ALGO", "Ring")]),
        ('w-0:21:21 [0] NCCL INFO NET/OFI Setting NCCL_PROTO to "simple"', [("NCCL_PROTO", "simple")]),
        ("export NCCL_MAX_NCHANNELS=4", [("NCCL_MAX_NCHANNELS", "4")]),
        ("NCCL_ALGO=Tree NCCL_PROTO='LL128' ./build/all_reduce_perf -b 8", [("NCCL_ALGO", "Tree"), ("NCCL_PROTO", "LL128")]),
        ("$ mpirun -np 16 -x NCCL_IB_HCA=mlx5 -x NCCL_ALGO=Ring all_gather_perf -g 1", [("NCCL_ALGO", "Ring")]),
        ("mpiexec -genv NCCL_PROTO Simple -n 8 ./alltoall_perf", [("NCCL_PROTO", "Simple")]),
        ("# notes: the run set NCCL_ALGO=Ring in all_reduce_perf", []),  # nccl-tests' own or a note
        ("I also tried NCCL_ALGO=Ring, same numbers", []),  # no command
        ("mpirun -x MY_NCCL_ALGO=Ring -x XNCCL_PROTO=LL all_reduce_perf", []),
        ("host:1:1 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5", []),
    ],
)  # fmt: skip
def test_settings_in_a_line(line: str, found: list[tuple[str, str]]) -> None:
    assert settings_in(line) == found


def test_settings_belong_to_the_test_whose_table_follows() -> None:
    info = "host:1:1 [0] NCCL INFO NCCL_PROTO set by environment to Simple"
    first = "NCCL_ALGO=Ring ./build/reduce_scatter_perf -b 8\n" + PREAMBLE + _table([RS_ROW, info])
    second = "NCCL_ALGO=Tree ./build/reduce_scatter_perf -b 8\n" + PREAMBLE + _table([RS_ROW])
    a, b = parse_nccl_tests(first + second)
    assert [(k, v) for k, v, _ in a.settings] == [("NCCL_ALGO", "Ring"), ("NCCL_PROTO", "Simple")]
    assert [(k, v) for k, v, _ in b.settings] == [("NCCL_ALGO", "Tree")]
    assert len(a.rows) == len(b.rows) == 1


# ----------------------------------------------------------------------------- what they mean
def test_logged_env_reads_values_fills_gaps_and_refuses_what_it_cannot_force() -> None:
    logged = (("NCCL_ALGO", "Ring", 3), ("NCCL_ALGO", "ring", 9), ("NCCL_MAX_NCHANNELS", "8", 4))
    assert logged_env(logged, "f.txt") == NcclEnv("ring", None, 8)
    assert logged_env(logged, "f.txt", NcclEnv(proto="LL128")) == NcclEnv("ring", "LL128", 8)
    assert logged_env((), "f.txt", NcclEnv(algo="tree")) == NcclEnv(algo="tree")
    assert logged_env((("NCCL_ALGO", "Ring,Tree", 3),), "f.txt") == NcclEnv("tree,ring")  # a list: NCCL's order
    assert logged_env((("NCCL_ALGO", "^NVLS", 5), ("NCCL_PROTO", "^LL128", 6)), "f.txt") == NcclEnv(
        "tree,ring,nvls_tree", "LL,Simple"
    )
    bad = [
        ((("NCCL_ALGO", "allreduce:tree;ring", 3),), None, "f.txt:3: the log sets NCCL_ALGO=allreduce:tree;ring,"),
        ((("NCCL_ALGO", "CollNetDirect", 5),), None, "f.txt:5: the log sets NCCL_ALGO=CollNetDirect"),
        ((("NCCL_MAX_NCHANNELS", "0", 2),), None, "f.txt:2: the log sets NCCL_MAX_NCHANNELS=0"),
        ((("NCCL_PROTO", "LL", 2), ("NCCL_PROTO", "Simple", 7)), None, "f.txt:7: the log sets NCCL_PROTO twice"),
        ((("NCCL_ALGO", "Tree", 1),), NcclEnv(algo="ring"), "f.txt:1: the log sets NCCL_ALGO=Tree, but ring was given"),
    ]
    for settings, given, message in bad:
        with pytest.raises(InputError) as e:
            logged_env(settings, "f.txt", given)
        assert str(e.value).startswith(message), str(e.value)
    assert parse_settings("NCCL_ALGO=NVLSTree,nccl_proto=ll", "--settings") == NcclEnv("nvls_tree", "LL")
    with pytest.raises(InputError, match="^--settings: 'NCCL_IB_HCA=mlx5' is not an NCCL setting"):
        parse_settings("NCCL_IB_HCA=mlx5", "--settings")


def _forced_run(algo: str | None, proto: str | None) -> str:
    """A 2 x 8 H100 all-reduce log whose times are the model's under NCCL's defaults with `algo` and
    `proto` forced, and whose command line says so."""
    rows, env = [], NcclEnv(algo, proto)
    for s in SIZES:
        t = predict(H100_2N, "all_reduce", s, algo=env.algo, proto=env.proto).time_ns / 1000.0
        bw = s / t / 1000.0
        rows.append(row_text(s, s // 4, round(t, 2), round(bw, 2), round(bw * 15 / 8, 2), 0))
    env = " ".join(f"{k}={v}" for k, v in (("NCCL_ALGO", algo), ("NCCL_PROTO", proto)) if v)
    return f"{env} ./build/all_reduce_perf -b 1K -e 1G -f 4\n" + _table(rows).replace("reduce_scatter", "all_reduce")


def test_the_fit_times_each_row_as_its_log_says_it_was_run() -> None:
    """Rows made by forced ring / Simple are exactly the defaults' forced times: fitted as run, they
    are already right (nothing to fit, errors at the printing's rounding); fitted as NCCL's choice,
    they are not. The same rows with the setting given by the caller instead fit the same."""
    text = _forced_run("ring", "Simple")
    runs = parse_nccl_tests(text)
    rows, _ = F.samples(H100_2N, runs)
    assert {(s.algo, s.proto, s.max_channels) for s in rows} == {("ring", "Simple", None)}
    as_run = F.errors(H100_2N, default_params(H100_2N), runs)
    assert max(abs(e.error) for e in as_run) < 2e-3 and {(e.algo, e.proto) for e in as_run} == {("ring", "Simple")}
    free = parse_nccl_tests(text.split("\n", 1)[1], collective="all_reduce")
    assert max(abs(e.error) for e in F.errors(H100_2N, None, free)) > 0.2  # NCCL's own pick is not ring/Simple
    given = F.errors(H100_2N, None, free, settings=NcclEnv("ring", "Simple"))
    assert [e.predicted_ns for e in given] == [e.predicted_ns for e in as_run]
    fitted = F.fit_details(H100_2N, runs)
    assert fitted.cost_start < 1e-4 and fitted.cost <= fitted.cost_start


def test_a_log_run_with_an_exclusion_is_fitted_as_nccls_pick_of_the_rest() -> None:
    """NCCL_ALGO=^NVLS,NVLSTree / NCCL_PROTO=^LL128 as NCCL reads them: its pick among the others. Rows
    made so are exact when fitted as run, and not when taken as NCCL's free choice (NVLSTree on this
    machine at large sizes)."""
    runs = parse_nccl_tests(_forced_run("^NVLS,NVLSTree", "^LL128"))
    rows, _ = F.samples(H100_2N, runs)
    assert {(s.algo, s.proto) for s in rows} == {("tree,ring", "LL,Simple")}
    as_run = F.errors(H100_2N, default_params(H100_2N), runs)
    assert max(abs(e.error) for e in as_run) < 2e-3
    assert {e.algo for e in as_run} == {"tree", "ring"} and {e.proto for e in as_run} <= {"LL", "Simple"}
    free = F.errors(H100_2N, None, runs, settings=None)
    assert max(abs(e.error) for e in free) < 2e-3  # the log's own setting wins over none given
    plain = parse_nccl_tests(_forced_run("^NVLS,NVLSTree", "^LL128").split("\n", 1)[1], collective="all_reduce")
    assert max(abs(e.error) for e in F.errors(H100_2N, None, plain)) > 0.05


def test_a_log_that_turned_nvls_off_needs_no_nvls(tmp_path) -> None:
    """NCCL_NVLS_ENABLE=0 is the machine's: calibrating such a log with NVLS on is refused in one
    line naming the flag; with --no-nvls it fits, and the setting forces no algorithm."""
    from dse.core.topology import parse_topology
    from dse.costs.nccl.calibration import calibrate

    log = tmp_path / "off.txt"
    log.write_text(
        "NCCL_NVLS_ENABLE=0 ./build/all_reduce_perf -b 1K -e 1G -f 4\n" + _forced_run("ring", None).split("\n", 1)[1]
    )
    (run,) = parse_nccl_tests(log.read_text())
    assert [(k, v) for k, v, _ in run.settings] == [("NCCL_NVLS_ENABLE", "0")]
    assert logged_env(run.settings, "off.txt") == NcclEnv()
    topology = parse_topology("SW(8,450,0,links=18)_SW(2,50,0,links=1)")
    with pytest.raises(InputError, match=r"off.txt:1: the log sets NCCL_NVLS_ENABLE=0 \(allowed: --no-nvls"):
        calibrate([log], topology, generation="hopper")
    assert calibrate([log], topology, generation="hopper", nvls=False).rows == len(SIZES)
