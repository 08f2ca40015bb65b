"""The NCCL release whose tuner values the `nccl` model restates (`NcclSystem.nccl_version`)."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import pytest

from dse.core.errors import InputError
from dse.core.topology import parse_notation
from dse.costs.nccl.calibration import default_calibration, read_calibration, write_calibration
from dse.costs.nccl.model import NcclSystem, default_params, predict
from dse.costs.nccl.system import system_of
from dse.costs.nccl.tables import NEWEST_RELEASE, nccl_release

H100 = dict(generation="hopper", gpus_per_node=8, fabric="nvswitch", nvlink_GBps=450.0, nvlink_links=18,
            nics_per_node=8, nic_GBps=50.0, cpu="intel", network="ib")  # fmt: skip
FOUR_NODES = "SW(8,450,0,links=18)_SW(4,50,0,links=1)"


def _h100(nodes: int, version: str) -> NcclSystem:
    return NcclSystem(nodes=nodes, nccl_version=version, **H100)  # type: ignore[arg-type]


def test_a_release_reads_as_three_numbers_and_none_is_the_newest_restated() -> None:
    assert nccl_release("2.26.2") == (2, 26, 2)
    assert nccl_release("") == NEWEST_RELEASE == (2, 30, 7)
    for bad in ("2.26", "v2.26.2", "2.26.2+cuda12.8", "2..2", " 2.26.2", 2.26):
        with pytest.raises(InputError) as e:
            nccl_release(bad, "--nccl-version")  # type: ignore[arg-type]
        assert e.value.field == "--nccl-version"
    with pytest.raises(InputError) as e:
        _h100(2, "2.26")
    assert e.value.field == "nccl_version"


@pytest.mark.parametrize(
    "version, hop_ns",
    [("2.19.3", 14000.0), ("2.26.2", 14000.0), ("2.28.7", 14000.0), ("2.28.9", 20900.0), ("", 20900.0)],
)
def test_nvlstrees_network_hop_follows_the_release(version: str, hop_ns: float) -> None:
    """tuning.cc: NVLSTree's NET hop is 14 us before 2.28.9 and 20.9 us from it. Nothing else of
    NCCL's values moves with the release."""
    q = default_params(_h100(4, version))
    assert q.nvls_tree_inter_ns == hop_ns
    newest = default_params(_h100(4, ""))
    assert dataclasses.replace(q, nvls_tree_inter_ns=newest.nvls_tree_inter_ns) == newest


@pytest.mark.parametrize("nodes", [2, 3, 4, 8, 16])
def test_nvlstrees_latency_is_its_nvlink_hop_plus_two_network_hops_a_tree_level(nodes: int) -> None:
    """At 8 B (no bandwidth term to speak of, the multi-node curve off) NVLSTree takes 25 us +
    2 floor(log2 N) x the release's hop."""
    levels = int(math.log2(nodes))
    for version, hop_us in (("2.26.2", 14.0), ("2.30.4", 20.9)):
        s = _h100(nodes, version)
        q = dataclasses.replace(default_params(s), s_half_multi_bytes=0.0)
        t = predict(s, "all_reduce", 8, params=q, algo="nvls_tree").time_ns
        assert t == pytest.approx((25.0 + 2 * levels * hop_us) * 1e3, abs=20.0)


def test_without_the_curve_2_22s_tuner_picks_nvlstree_at_1_mb_on_three_nodes_as_its_log_shows() -> None:
    """NVIDIA/nccl issue 1453 (3 x 8 H100, NCCL 2.22.3) logs tree LL128 at 256 KB and NVLSTree at 1-2 MB.
    NCCL's own tuner (the multi-node curve off) of that release picks the same; 2.30.7's keeps tree
    at 1 MB, its NVLSTree hop being 20.9 us."""
    picks = {}
    for version in ("2.22.3", ""):
        s = _h100(3, version)
        q = dataclasses.replace(default_params(s), s_half_multi_bytes=0.0, e_min_multi=0.0)
        picks[version] = [
            (p.algo, p.proto) for p in (predict(s, "all_reduce", n, params=q) for n in (2**18, 2**20, 2**21))
        ]
    assert picks["2.22.3"] == [("tree", "LL128"), ("nvls_tree", "Simple"), ("nvls_tree", "Simple")]
    assert picks[""][:2] == [("tree", "LL128"), ("tree", "LL128")]


def test_nccl_2_22s_own_estimates_on_three_nodes_give_the_restated_latencies() -> None:
    """NCCL 2.22.3's TUNING log on 3 x 8 H100 (NVIDIA/nccl issue 1453) prints its tuner's estimates:
    NVLSTree Simple 66.107201 us at 1 MB and 79.214401 us at 2 MB (latency + bytes / bandwidth, so the
    latency is 2 x 66.107201 - 79.214401 = 53.0 us), tree LL 25.214764 us at 128 B (at most 0.02 us of
    it bandwidth at any rate above 6.4 GB/s). dse's 2.22.3 latencies are those; 2.30.7's NVLSTree
    is 13.8 us higher."""
    logged_nvls_tree_us = 2 * 66.107201 - 79.214401
    for version, nvls_tree_us in (("2.22.3", logged_nvls_tree_us), ("", logged_nvls_tree_us + 2 * (20.9 - 14.0))):
        latency = {(c.algo, c.proto): c.latency_ns for c in predict(_h100(3, version), "all_reduce", 128).candidates}
        assert latency["nvls_tree", "Simple"] == pytest.approx(nvls_tree_us * 1e3, abs=1.0)
        assert 0 <= 25.214764e3 - latency["tree", "LL"] < 20.0


#: NVIDIA/nccl issue 1244 (comment of 2024-04-09): 2 x 8 H20, 16 CX-7 NDR NICs, NCCL 2.21.5,
#: NCCL_ALGO=NVLSTree, all_reduce_perf float sum, out-of-place time (us) by size (B) as printed
H20_NVLS_TREE_US = {4: 47.54, 8: 47.60, 16: 46.25, 32: 46.35, 64: 46.30, 128: 47.76, 256: 46.65, 512: 46.58}


def test_a_measured_nvlstree_floor_sits_near_its_releases_latency() -> None:
    """Forced NVLSTree on two H20 nodes under NCCL 2.21.5 measures 46-48 us at 4-512 B: dse with that
    release predicts 53 us (within 15 %), with 2.30.7's tuner 67 us (more than 35 % high)."""
    h20 = dict(H100, nvlink_GBps=450.0, nics_per_node=16, nic_GBps=50.0)
    for version, lo, hi in (("2.21.5", 0.0, 0.15), ("", 0.35, 0.50)):
        system = NcclSystem(nodes=2, nccl_version=version, **h20)  # type: ignore[arg-type]
        for size, measured_us in H20_NVLS_TREE_US.items():
            t = predict(system, "all_reduce", size, algo="nvls_tree").time_ns / 1e3
            assert lo < t / measured_us - 1 < hi, (version, size, t)


def test_one_node_does_not_depend_on_the_release() -> None:
    for size in (8, 2**20, 2**30):
        assert predict(_h100(1, "2.19.3"), "all_reduce", size) == predict(_h100(1, ""), "all_reduce", size)


def test_a_calibration_file_keeps_the_release_and_refuses_a_bad_one(tmp_path: Path) -> None:
    topology = parse_notation(FOUR_NODES)
    calib = default_calibration(topology, generation="hopper", nccl_version="2.26.2")
    assert calib.fitted_system() == system_of(topology, generation="hopper", nccl_version="2.26.2")
    path = tmp_path / "calib.toml"
    write_calibration(path, calib)
    assert 'nccl_version = "2.26.2"' in path.read_text()
    assert read_calibration(path) == calib
    newest = tmp_path / "newest.toml"
    write_calibration(newest, default_calibration(topology, generation="hopper"))
    assert "nccl_version" not in newest.read_text()  # "" is written as no key: older files read the same
    assert read_calibration(newest).nccl_version == ""
    path.write_text(path.read_text().replace('"2.26.2"', '"2.26"'))
    with pytest.raises(InputError) as e:
        read_calibration(path)
    assert e.value.field == f"{path}: nccl_version"


def _dse(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dse", *args], capture_output=True, text=True, timeout=300)


def test_the_command_line_takes_a_release_and_says_which_tuner_it_restates() -> None:
    old = _dse("nccl-tests", FOUR_NODES, "-b", "8", "-e", "8", "--algo", "nvls_tree", "--nccl-version", "2.26.2")
    new = _dse("nccl-tests", FOUR_NODES, "-b", "8", "-e", "8", "--algo", "nvls_tree")
    assert old.returncode == new.returncode == 0, old.stderr + new.stderr
    assert "NCCL 2.26.2's tuner" in old.stdout and "NCCL 2.30.7's tuner" in new.stdout
    time_us = [float(r.stdout.splitlines()[-2].split()[5]) for r in (old, new)]
    assert time_us[1] - time_us[0] == pytest.approx(2 * 2 * (20.9 - 14.0), abs=0.05)
    bad = _dse("nccl-tests", FOUR_NODES, "-b", "8", "-e", "8", "--nccl-version", "2.26")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and "--nccl-version" in bad.stderr and "Traceback" not in bad.stderr


DATA = Path(__file__).resolve().parents[1] / "dse" / "data" / "nccl"


def test_the_release_the_logs_print_is_taken_when_they_agree() -> None:
    from dse.costs.nccl.log_runs import printed_release
    from dse.costs.nccl.logs import read_nccl_tests

    vm = read_nccl_tests(DATA / "ncclt309_h100_4node_vm.txt", collective="all_reduce")
    nebius = read_nccl_tests(DATA / "dstack_nebius_h100_2node_ib_allreduce.txt", collective="all_reduce")
    cw = read_nccl_tests(DATA / "ctc_coreweave_h200_2node_allreduce.txt", collective="all_reduce")
    assert printed_release(vm) == "2.26.2" and printed_release(cw) == "2.30.4"
    assert printed_release(nebius) == ""  # the log prints none
    assert printed_release(vm + nebius) == "2.26.2"  # a log that prints none does not disagree
    assert printed_release(vm + cw) == ""  # two releases: none is taken
    short = [dataclasses.replace(vm[0], nccl_version="2.4")]  # v1's "compiled with NCCL 2.4"
    assert printed_release(short) == ""


def test_calibrate_takes_the_logs_release_unless_one_is_given(tmp_path: Path) -> None:
    log, out = str(DATA / "ncclt309_h100_4node_vm.txt"), tmp_path / "vm.toml"
    run = _dse("calibrate", "nccl-tests", log, "-t", FOUR_NODES, "-o", str(out))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0].endswith(", hopper, NCCL 2.26.2")
    assert read_calibration(out).nccl_version == "2.26.2"
    given = _dse("calibrate", "nccl-tests", log, "-t", FOUR_NODES, "-o", str(out), "--nccl-version", "2.30.4")
    assert given.returncode == 0, given.stderr
    assert read_calibration(out).nccl_version == "2.30.4"
