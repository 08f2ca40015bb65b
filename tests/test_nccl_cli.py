"""`dse calibrate nccl-tests` and `dse nccl-tests` (dse/cli/nccl.py): the file written is `calibrate`'s,
the summary its figures, every bad input one line with exit code 2 and no file touched, and the
predicted table obeys nccl-tests' own arithmetic. docs/nccl.md's commands run as printed."""

from __future__ import annotations

import csv
import os
import re
import shlex
from pathlib import Path

import pytest

from dse.core.limits import MAX_BYTES
from dse.core.topology import parse_topology
from dse.costs.nccl.calibration import calibrate, read_calibration, resolve_calibration
from dse.costs.nccl.model import bus_factor, predict

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "dse" / "data" / "nccl"
TESTS = ROOT / "tests" / "data" / "nccl"
DGXC = str(DATA / "dgxc_dgxh100_1node_allreduce.txt")
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "alltoall", "broadcast", "reduce")


# --------------------------------------------------------------------------- dse calibrate nccl-tests
@pytest.mark.parametrize(
    ("log", "topology", "flags", "rows", "collective"),
    [
        (DGXC, "HGX-H100", (), 31, "all_reduce"),  # 32 B skipped: its two columns differ 5x
        (str(TESTS / "aws_p5_2node_allreduce.txt"), "SW(8,450,0,links=18)_SW(2,50,0,links=4)", ("--network", "efa",
         "--cpu", "amd"), 32, "all_reduce"),
        (str(TESTS / "dstack_gcp_a3mega_h100_2node_allgather.txt"), "SW(8,450,0,links=18)_SW(2,25,0)",
         ("--network", "tcp"), 11, "all_gather"),
        (str(TESTS / "blog_v100_8gpu_hybridcube.txt"), "FC(8,150,0,links=6)", ("--generation", "volta"), 25,
         "all_reduce"),
    ],
)  # fmt: skip
def test_calibrate_writes_what_calibrate_fits(run_cli, tmp_path, log, topology, flags, rows, collective):
    out = tmp_path / "c.toml"
    code, text, err = run_cli("calibrate", "nccl-tests", log, "-t", topology, "-o", str(out), *flags)
    assert code == 0 and err == ""
    calib = read_calibration(out)
    fields = dict(zip(flags[::2], flags[1::2]))
    expected = calibrate(
        [log],
        parse_topology(topology),
        generation=fields.get("--generation", "hopper"),
        network=fields.get("--network", "ib"),
        cpu=fields.get("--cpu", "other"),
    )
    assert calib == expected and calib.rows == rows
    lines = text.splitlines()
    skipped = 32 - rows if log == DGXC else 0
    release = calib.nccl_version or "2.30.7 (the newest restated)"  # the log's, else the newest
    assert (
        lines[0]
        == f"fitted {rows} rows of 1 log ({skipped} skipped) on {calib.topology}, {calib.generation}, NCCL {release}"
    )
    assert lines[1].split() == ["collective", "run_with", "rows", "gm_error_pct"]
    assert lines[3].split() == [collective, "NCCL's", "choice", str(rows), f"{100 * calib.fit_gm:.2f}"]
    assert (
        lines[4 : 4 + skipped]
        == [
            "skipped dgxc_dgxh100_1node_allreduce.txt:22 (32 B): out-of-place 68.14 us and in-place 13.52 us "
            "differ by more than 1.5x"
        ][:skipped]
    )
    assert lines[-1] == f"wrote {out}" and len(lines) == 5 + skipped


def test_calibrate_several_logs_reports_each_collective(run_cli, tmp_path):
    """Two files of one 8 x H100 node (NVIDIA's DGX sample and AWS p5): 64 rows, each file's 32 B row
    skipped (its out-of-place and in-place times differ 5x and 1.7x), one error line."""
    out = tmp_path / "c.toml"
    p5 = str(TESTS / "aws_p5_1node_allreduce_batch.txt")
    code, text, _ = run_cli("calibrate", "nccl-tests", DGXC, p5, "-t", "HGX-H100", "-o", str(out))
    calib = read_calibration(out)
    assert code == 0 and calib.rows == 62 and len(calib.logs) == 2
    assert text.splitlines()[0].startswith("fitted 62 rows of 2 logs (2 skipped)")
    assert re.search(rf"^all_reduce\s+NCCL's choice\s+62\s+{100 * calib.fit_gm:.2f}$", text, re.M)
    assert re.findall(r"^skipped (\S+):\d+ \(32 B\)", text, re.M) == [Path(DGXC).name, Path(p5).name]


def test_calibrate_names_ten_skipped_rows_and_counts_the_rest(run_cli, tmp_path):
    """The DGX sample with #wrong 3 on its 12 rows from 8 B to 16 KB: 10 are named, 2 counted."""
    lines = []
    for line in Path(DGXC).read_text().splitlines():
        t = line.split()
        if len(t) == 13 and t[0].isdigit() and int(t[0]) <= 16384:
            t[8] = "3"
            line = "  ".join(t)
        lines.append(line)
    log = tmp_path / "wrong.txt"
    log.write_text("\n".join(lines) + "\n")
    code, text, err = run_cli("calibrate", "nccl-tests", str(log), "-t", "HGX-H100", "-o", str(tmp_path / "c.toml"))
    out = text.splitlines()
    assert code == 0 and err == "" and out[0].startswith("fitted 20 rows of 1 log (12 skipped)")
    named = [line for line in out if line.startswith("skipped wrong.txt:")]
    assert len(named) == 10 and out[-2] == "skipped 2 more rows" and out[-1].startswith("wrote ")


def test_calibrate_collective_names_the_test_a_log_does_not(run_cli, tmp_path):
    """A table pasted without its command line names no test. Its busbw above its algbw makes it an
    all-reduce (no other test's factor exceeds 1): fitted as the named log is. One whose busbw is not
    (all-gather's (n-1)/n) is refused in one line that points to --collective, and fitted with it; a
    log naming another test than --collective is refused."""
    unnamed = tmp_path / "table.txt"
    unnamed.write_text("".join(line for line in Path(DGXC).open() if "all_reduce_perf" not in line))
    out = tmp_path / "c.toml"
    code, _, err = run_cli("calibrate", "nccl-tests", str(unnamed), "-t", "HGX-H100", "-o", str(out))
    named = calibrate([DGXC], parse_topology("HGX-H100"), generation="hopper")
    assert code == 0 and err == ""
    assert read_calibration(out).params == named.params and read_calibration(out).rows == named.rows
    gather = tmp_path / "gather.txt"
    lines = (TESTS / "dstack_gcp_a3mega_h100_2node_allgather.txt").open()
    gather.write_text("".join(line for line in lines if "all_gather_perf" not in line.lower()))
    two_nodes = ("-t", "SW(8,450,0,links=18)_SW(2,25,0,links=1)", "--network", "tcp")
    refused = tmp_path / "r.toml"
    code, text, err = run_cli("calibrate", "nccl-tests", str(gather), *two_nodes, "-o", str(refused))
    assert code == 2 and text == "" and err.count("\n") == 1 and not refused.exists()
    assert "does not say which test it is" in err and "--collective all_reduce" in err
    code, _, err = run_cli("calibrate", "nccl-tests", str(gather), *two_nodes, "-o", str(tmp_path / "g.toml"),
                           "--collective", "all_gather_perf")  # fmt: skip
    assert code == 0 and err == "" and read_calibration(tmp_path / "g.toml").rows >= 10
    code, _, err = run_cli("calibrate", "nccl-tests", DGXC, "-t", "HGX-H100", "-o", str(tmp_path / "d.toml"),
                           "--collective", "all_gather")  # fmt: skip
    assert code == 2 and "all_reduce" in err and not (tmp_path / "d.toml").exists()
    code, _, err = run_cli("calibrate", "nccl-tests", DGXC, "-t", "HGX-H100", "-o", str(tmp_path / "d.toml"),
                           "--collective", "allreduce_sum")  # fmt: skip
    assert code == 2 and err.startswith("dse: error: --collective: unknown collective")


def test_calibrate_settings_time_rows_as_run_and_say_so(run_cli, tmp_path):
    """A log that shows NCCL_ALGO=ring is fitted as ring runs, and the summary says so; --settings
    says it for a log that does not, and a log that says otherwise is refused."""
    ring = tmp_path / "ring.txt"
    ring.write_text("NCCL_ALGO=Ring ./build/all_reduce_perf -b 8 -e 16G\n" + Path(DGXC).read_text())
    out = tmp_path / "c.toml"
    code, text, err = run_cli("calibrate", "nccl-tests", str(ring), "-t", "HGX-H100", "-o", str(out))
    calib = read_calibration(out)
    assert code == 0 and err == "" and calib.rows == 31
    assert re.search(rf"^all_reduce\s+NCCL_ALGO=ring\s+31\s+{100 * calib.fit_gm:.2f}$", text, re.M), text
    given = tmp_path / "g.toml"
    code, _, _ = run_cli(
        "calibrate", "nccl-tests", DGXC, "-t", "HGX-H100", "-o", str(given), "--settings", "NCCL_ALGO=Ring"
    )
    free = calibrate([DGXC], parse_topology("HGX-H100"), generation="hopper")
    assert code == 0 and read_calibration(given).params == calib.params != free.params
    code, text, err = run_cli("calibrate", "nccl-tests", str(ring), "-t", "HGX-H100", "-o", str(given),
                              "--settings", "NCCL_ALGO=tree")  # fmt: skip
    assert code == 2 and text == "" and "the log sets NCCL_ALGO=Ring, but tree was given" in err
    code, _, err = run_cli("calibrate", "nccl-tests", DGXC, "-t", "HGX-H100", "-o", str(given), "--settings", "ring")
    assert code == 2 and err.startswith("dse: error: --settings: 'ring' is not an NCCL setting")


BAD_CALIBRATE = [
    ((DGXC,), ("-t", "SW(1,450,0)_SW(8,50,0)"), "has one GPU a node, which a dse topology drops"),
    ((str(DATA / "README.md"),), ("-t", "HGX-H100"), "not nccl-tests output"),
    ((DGXC,), ("-t", "SW(8,450,0)_SW(2,50,0)"), "a run on 8 ranks, but the topology has 16 GPUs"),
    ((str(DATA / "ncclt119_3xdgxa100_hdr.txt"),), ("-t", "HGX-H100"), "a run on 24 ranks"),
    ((DGXC,), ("-t", "SW(8,450,0)_Ring(2,50,0)"), "cannot be the network between nodes"),
    ((DGXC,), ("-t", "HGX-H100", "--generation", "pascal"), "--generation: unknown generation 'pascal'"),
    ((DGXC,), ("-t", "HGX-H100", "--cpu", "sparc"), "--cpu: unknown cpu"),
    ((DGXC,), ("-t", "HGX-H100", "--nvlink-links", "0"), "--nvlink-links"),
    ((DGXC,), ("-t", "HGX-H100", "--nics-per-node", "8"), "nics_per_node"),
    ((DGXC,), ("-t", "Nowhere-1"), "unknown preset"),
    ((str(DATA / "missing.txt"),), ("-t", "HGX-H100"), "no such file"),
    ((str(ROOT / "docs" / "optimal_timeline.png"),), ("-t", "HGX-H100"), "not UTF-8"),
    ((DGXC,), (), "required: -t"),
]


@pytest.mark.parametrize(("logs", "flags", "text"), BAD_CALIBRATE)
@pytest.mark.parametrize("existing", [False, True])
def test_calibrate_bad_input_one_line_no_file(run_cli, tmp_path, logs, flags, text, existing):
    out = tmp_path / "c.toml"
    if existing:
        out.write_text("previous")
    code, stdout, err = run_cli("calibrate", "nccl-tests", *logs, *flags, "-o", str(out))
    assert code == 2 and stdout == "" and err.count("\n") == 1 and err.startswith("dse: error: ")
    assert text in err, err
    assert (out.read_text() == "previous") if existing else not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == (["c.toml"] if existing else [])  # no temporary left


# --------------------------------------------------------------------------- dse nccl-tests
def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("calibration", [None, "DGX-A100-HDRx3"])
def test_table_obeys_nccl_tests_arithmetic(run_cli, tmp_path, collective, calibration):
    """algbw = size / time and busbw = algbw x the bus factor, in the CSV (unrounded) and the printed
    table (to its 2 decimals); sizes and counts as nccl-tests prints them; each row is `predict`'s."""
    out = tmp_path / "t.csv"
    extra = ("--calibration", calibration) if calibration else ("--generation", "ampere")
    topo = "SW(8,300,0,links=12)_SW(3,12.5,0)"
    code, text, err = run_cli("nccl-tests", topo, "--collective", f"{collective}_perf", "--csv", str(out), *extra)
    assert code == 0 and err == ""
    rows = _rows(out)
    assert len(rows) == 32 and int(rows[-1]["size_bytes"]) <= 16 * 2**30  # -b 8 -e 16G -f 2
    factor = bus_factor(collective, 24)
    calib = resolve_calibration(calibration) if calibration else None
    system = calib.system(parse_topology(topo)) if calib else None
    printed = [ln.split() for ln in text.splitlines() if re.match(r"^\s*\d", ln)]
    assert len(printed) == 32
    for k, (r, p) in enumerate(zip(rows, printed)):
        size, count, t_us = int(r["size_bytes"]), int(r["count"]), float(r["time_us"])
        per_rank = collective in ("all_gather", "reduce_scatter", "alltoall")
        assert count == (8 * 2**k // 4) // (24 if per_rank else 1) and size == count * 4 * (24 if per_rank else 1)
        algbw, busbw = float(r["algbw_GBps"]), float(r["busbw_GBps"])
        assert algbw == pytest.approx(size / (t_us * 1000.0), rel=1e-12, abs=1e-300)
        assert busbw == pytest.approx(algbw * factor, rel=1e-12, abs=1e-300)
        assert p[:5] == [r["size_bytes"], r["count"], "float", r["redop"], r["root"]] and p[8:] == [
            r["algo"],
            r["proto"],
        ]
        assert [float(x) for x in p[5:8]] == pytest.approx([t_us, algbw, busbw], abs=0.0051)
        if system is not None and calib is not None:
            want = predict(system, collective, size, params=calib.params_for(system))
            assert (t_us, r["algo"], r["proto"]) == (want.time_ns / 1000.0, want.algo, want.proto)


def test_nccl_tests_sizes_like_nccl_tests(run_cli, tmp_path):
    """-b/-e/-f and -i as nccl-tests takes them; the calibration's own topology when none is given."""
    out = tmp_path / "t.csv"
    code, text, _ = run_cli("nccl-tests", "--calibration", "dgx-a100-hdrx3", "-b", "22M", "-e", "86M", "-i", "1M",
                            "--csv", str(out))  # fmt: skip
    sizes = [int(r["size_bytes"]) for r in _rows(out)]
    assert code == 0 and sizes == list(range(22 * 2**20, 86 * 2**20 + 1, 2**20))
    assert "24 ranks (8 GPUs x 3 nodes, ampere, NCCL 2.30.7's tuner), calibration DGX-A100-HDRx3 (22 rows)" in text
    code, _, _ = run_cli("nccl-tests", "HGX-H100", "-b", "1KB", "-e", "1GiB", "-f", "10", "--csv", str(out))
    assert code == 0 and [int(r["size_bytes"]) for r in _rows(out)] == [10**k for k in range(3, 10)]
    code, text, _ = run_cli("nccl-tests", "HGX-H100", "--algo", "Ring", "--proto", "ll128", "-e", "1M")
    assert code == 0 and {ln.split()[-2:] == ["ring", "LL128"] for ln in text.splitlines()[4:-1]} == {True}


def test_nccl_tests_defaults_pick_nvls_on_h100(run_cli):
    """NCCL's defaults on one 8 x H100 node: LL ring for small sizes, NVLS for large ones."""
    code, text, _ = run_cli("nccl-tests", "HGX-H100", "-b", "8", "-e", "8G", "-f", "1024")
    picks = [ln.split()[-2:] for ln in text.splitlines()[4:-1]]
    assert code == 0 and picks[0] == ["ring", "LL"] and picks[-1] == ["nvls", "Simple"]
    assert text.splitlines()[0].endswith("NCCL's defaults")


BAD_NCCL_TESTS = [
    (("FC(1,150,0)_SW(16,50,0)",), "has one GPU a node"),
    (("--calibration", "HGX-H100", "-t", "SW(1,450,0)_SW(2,50,0)"), "has one GPU a node"),
    (("SW(8,300,0)", "--generation", "ampere", "--algo", "nvls"), "--algo: 'nvls' cannot run all_reduce"),
    (("SW(8,450,0)", "--collective", "all_gather", "--algo", "tree"), "--algo: 'tree' cannot run all_gather"),
    (("SW(8,450,0)", "--algo", "collnet"), "--algo: unknown algorithm"),
    (("SW(8,450,0)", "--algo", "nvls", "--proto", "LL"), "--proto: 'LL' cannot run"),
    (("SW(8,450,0)", "--collective", "sendrecv"), "--collective: unknown collective"),
    (("SW(8,450,0)", "-e", str(MAX_BYTES + 1)), "-e: "),
    (("SW(8,450,0)", "-e", "9000T"), "-e: "),
    (("SW(8,450,0)", "-b", "1G", "-e", "1M"), "-b: "),
    (("SW(8,450,0)", "-b", "1", "-e", "1G", "-i", "1M"), "at most 300"),
    (("SW(8,450,0)", "-f", "1"), "-f: "),
    (("SW(8,450,0)", "-f", "2", "-i", "1M"), "-i: given with -f"),
    (("SW(8,450,0)", "--calibration", "HGX-H100", "--generation", "ampere"), "--generation: given with --calibration"),
    (("SW(8,450,0)", "--calibration", "HGX-H100", "--no-nvls"), "--no-nvls: given with --calibration"),
    (("SW(8,450,0)", "--calibration", "H900"), "calibration: 'H900' is neither"),
    ((), "topology: missing"),
    (("SW(8,450,0)", "-t", "HGX-H100"), "topology: given twice"),
    (("SW(8,450,0)_Ring(2,50,0)",), "cannot be the network between nodes"),
    (("SW(8,450,0)", "--max-channels", "0"), "--max-channels: 0 is too small"),
    (("SW(8,450,0)", "--max-channels", "65"), "--max-channels: 65 is too large"),
    (("SW(8,450,0)", "--max-channels", "eight"), "--max-channels: 'eight' is not an integer"),
]


def test_nccl_tests_max_channels_limits_rings_and_says_so(run_cli, tmp_path):
    """--max-channels N is NCCL_MAX_NCHANNELS: the header says it, ring rows slow down (8 channels at
    NCCL's 15 GB/s a channel on an H100 node: 120 GB/s busbw at most), NCCL's choice stays."""
    argv = ("nccl-tests", "HGX-H100", "-b", "1M", "-e", "1G", "-f", "32")
    code, free, _ = run_cli(*argv)
    code8, limited, _ = run_cli(*argv, "--max-channels", "8", "--csv", str(tmp_path / "r.csv"))
    assert code == code8 == 0 and limited.splitlines()[0].endswith("NCCL_MAX_NCHANNELS=8")
    assert "NCCL's 24 channels (its search: 12 x 30 GB/s)" in free.splitlines()[1]
    rows, free_rows = _rows(tmp_path / "r.csv"), [ln.split() for ln in free.splitlines()[4:-1]]
    assert [(r["algo"], r["proto"]) for r in rows] == [tuple(r[-2:]) for r in free_rows]
    for r, f in zip(rows, free_rows):
        assert float(r["time_us"]) >= float(f[5]) - 0.005
        if r["algo"] == "ring":
            assert float(r["busbw_GBps"]) <= 120.0 * (1 + 1e-9)


@pytest.mark.parametrize(("argv", "text"), BAD_NCCL_TESTS)
def test_nccl_tests_bad_input_one_line(run_cli, tmp_path, argv, text):
    out = tmp_path / "t.csv"
    code, stdout, err = run_cli("nccl-tests", *argv, "--csv", str(out))
    assert code == 2 and stdout == "" and err.count("\n") == 1 and text in err, err
    assert not out.exists()


# --------------------------------------------------------------------------- docs/nccl.md
def _doc_commands() -> list[list[str]]:
    return [
        shlex.split(ln[2:]) for ln in (ROOT / "docs" / "nccl.md").read_text().splitlines() if ln.startswith("$ dse ")
    ]


def test_docs_commands_run_as_printed(run_cli, tmp_path, monkeypatch):
    """Every `$ dse ...` line of docs/nccl.md, in order, from a copy of the repository's root (its
    dse/ linked in), exits 0; the files they name are written where the doc says."""
    os.symlink(ROOT / "dse", tmp_path / "dse")
    monkeypatch.chdir(tmp_path)
    commands = _doc_commands()
    assert len(commands) >= 7
    (tmp_path / "out").mkdir()
    for argv in commands:
        assert argv[0] == "dse"
        code, _, err = run_cli(*argv[1:])
        assert code == 0, (argv, err)
    assert read_calibration("out/h100.toml").rows == 31 and read_calibration("out/a100x3.toml").rows == 22
    assert read_calibration("out/a100x3.toml").params == resolve_calibration("DGX-A100-HDRx3").params
    assert len(_rows(tmp_path / "out" / "a100.csv")) == 28  # 8 B .. 1 GiB


def test_calibrate_held_out_prints_what_the_fit_predicts_and_refuses_a_log_too_short(run_cli, tmp_path):
    log = Path(__file__).parent.parent / "dse" / "data" / "nccl" / "dgxc_dgxh100_1node_allreduce.txt"
    code, out, err = run_cli(
        "calibrate", "nccl-tests", str(log), "-t", "HGX-H100", "-o", str(tmp_path / "h.toml"), "--held-out"
    )
    assert code == 0, err
    head, _, row = out.splitlines()[1:4]
    assert head.split()[-1] == "held_out_gm_pct" and row.split()[-2:] == ["7.01", "7.24"]
    assert "held out: 7.24 % geometric-mean error over 31 rows" in out
    code, out, _ = run_cli("calibrate", "nccl-tests", str(log), "-t", "HGX-H100", "-o", str(tmp_path / "n.toml"))
    assert code == 0 and "held_out_gm_pct" not in out and "held out:" not in out
    short = tmp_path / "one.txt"
    text = log.read_text().splitlines()
    short.write_text("\n".join(line for line in text if not line.strip()[:1].isdigit() or line.split()[0] == "1024"))
    code, out, err = run_cli(
        "calibrate", "nccl-tests", str(short), "-t", "HGX-H100", "-o", str(tmp_path / "s.toml"), "--held-out"
    )
    assert (
        code == 2
        and out == ""
        and err.count("\n") == 1
        and "held-out: half the sizes (rows 2, 4, ... of each run)" in err
    ), err
    assert not (tmp_path / "s.toml").exists()
