"""Nodes of one GPU (`single_gpu_nodes`, ``--single-gpu-nodes``): a dse topology drops dimensions of
1 NPU, so the machine field says every dimension is the network. The system, the calibration file
(written only when true, old files load as before), and the commands that take it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dse.core.errors import InputError
from dse.core.topology import parse_topology
from dse.costs.nccl.calibration import calibrate, calibration_text, default_calibration, read_calibration
from dse.costs.nccl.model import predict
from dse.costs.nccl.system import network_system_of, system_of

from .test_nccl_tests import row_text

NET = parse_topology("SW(2,25,0)")
SIZES = [1 << k for k in range(13, 31, 3)]


def test_every_dimension_is_the_network() -> None:
    s = system_of(NET, generation="blackwell", single_gpu_nodes=True)
    assert (s.gpus_per_node, s.nodes, s.nics_per_node, s.nic_GBps) == (1, 2, 1, 25.0)
    assert s == network_system_of(NET, generation="blackwell")
    two = system_of(parse_topology("SW(4,25,0,links=2)_SW(2,50,0)"), generation="hopper", single_gpu_nodes=True)
    assert (two.nodes, two.nics_per_node, two.nic_GBps) == (8, 2, 12.5)  # the slowest dim's 25 GB/s on its 2 links
    assert system_of(NET, generation="hopper").gpus_per_node == 2  # without it: one node of 2 GPUs
    with pytest.raises(InputError, match="single_gpu_nodes"):
        system_of(NET, generation="hopper", single_gpu_nodes="yes")  # type: ignore[arg-type]


def _log(tmp_path: Path) -> Path:
    """A 2 x 1 GPU all-reduce log whose times are the model's defaults x 1.3."""
    s = system_of(NET, generation="blackwell", single_gpu_nodes=True)
    rows = []
    for size in SIZES:
        t = 1.3 * predict(s, "all_reduce", size).time_ns / 1000.0
        rows.append(row_text(size, size // 4, round(t, 2), round(size / t / 1000, 2), round(size / t / 1000, 2), 0))
    head = "# Collective test starting: all_reduce_perf\n#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
    path = tmp_path / "pair.txt"
    path.write_text(head + "\n".join(rows) + "\n# Out of bounds values : 0 OK\n")
    return path


def test_a_calibration_of_single_gpu_nodes_round_trips_and_old_files_load(tmp_path: Path) -> None:
    calib = calibrate([_log(tmp_path)], NET, generation="blackwell", single_gpu_nodes=True)
    assert calib.single_gpu_nodes and calib.fitted_system().gpus_per_node == 1 and calib.rows == len(SIZES)
    text = calibration_text(calib)
    assert "single_gpu_nodes = true" in text
    (tmp_path / "c.toml").write_text(text)
    assert read_calibration(tmp_path / "c.toml") == calib
    four = calib.system(parse_topology("SW(4,25,0)"))
    assert (four.gpus_per_node, four.nodes) == (1, 4)
    plain = default_calibration(NET, generation="blackwell")
    assert "single_gpu_nodes" not in calibration_text(plain)  # files without it read as before
    assert dataclasses.replace(calib, single_gpu_nodes=False).fitted_system().gpus_per_node == 2


def test_the_commands_take_single_gpu_nodes(run_cli, tmp_path: Path) -> None:
    log, out = _log(tmp_path), tmp_path / "c.toml"
    args = ("calibrate", "nccl-tests", str(log), "-o", str(out), "--generation", "blackwell")
    code, _, err = run_cli(*args, "-t", "SW(1,100,0)_SW(2,25,0)")
    assert code == 2 and "has one GPU a node" in err and "--single-gpu-nodes" in err and not out.exists()
    code, text, err = run_cli(*args, "-t", "SW(1,100,0)_SW(2,25,0)", "--single-gpu-nodes")
    assert code == 0 and text.startswith("fitted 6 rows of 1 log (0 skipped) on SW(2,25,0), blackwell")
    assert read_calibration(out) == calibrate([log], NET, generation="blackwell", single_gpu_nodes=True)
    code, text, _ = run_cli("nccl-tests", "SW(4,25,0)", "--calibration", str(out), "-b", "1M", "-e", "1M")
    assert code == 0 and "4 ranks (1 GPU x 4 nodes, blackwell, NCCL 2.30.7's tuner)" in text
    code, _, err = run_cli("nccl-tests", "SW(4,25,0)", "--calibration", str(out), "--single-gpu-nodes")
    assert code == 2 and err.startswith("dse: error: --single-gpu-nodes: given with --calibration")
