"""NCCL's own record of its choice (NCCL_DEBUG_SUBSYS=TUNING: 'AllReduce: N Bytes -> Algo TREE proto
LL128 ...'): read per row, each row fitted with the pick NCCL made, and compared to the model's."""

from __future__ import annotations

from pathlib import Path

import pytest

from dse.core.errors import InputError
from dse.core.topology import parse_topology
from dse.costs.nccl.calibration import calibrate, read_calibration
from dse.costs.nccl.fit import samples
from dse.costs.nccl.logs import parse_nccl_tests, read_nccl_tests
from dse.costs.nccl.model import predict_time
from dse.costs.nccl.system import system_of

LOG = Path(__file__).parent.parent / "dse" / "data" / "nccl" / "dstack_nebius_h100_2node_ib_allreduce.txt"
TOPO = "SW(8,450,0,links=18)_SW(2,50,0,links=1)"
NAMES = {"tree": "TREE", "ring": "RING", "nvls": "NVLS", "nvls_tree": "NVLS_TREE", "Simple": "SIMPLE"}


def _system():
    return system_of(parse_topology(TOPO), generation="hopper", network="ib", cpu="other")


def _with_picks(pick_of, repeats: int = 3) -> str:
    """The Nebius log with rank 0's TUNING lines before each row: `pick_of(size)` gives NCCL's
    (algorithm, protocol) as NCCL prints them, or None for no line."""
    out = []
    for line in LOG.read_text().splitlines():
        tokens = line.split()
        if len(tokens) > 3 and tokens[0].isdigit() and tokens[2] == "float" and (pick := pick_of(int(tokens[0]))):
            record = f"node-a:1234:1300 [0] NCCL INFO AllReduce: {tokens[0]} Bytes -> Algo {pick[0]} proto {pick[1]}"
            out += [record + " channel{Lo..Hi}={0..15}"] * repeats
        out.append(line)
    return "\n".join(out) + "\n"


def _models_pick(size: int) -> tuple[str, str]:
    algo, proto = predict_time(_system(), "all_reduce", size)[2:]
    return NAMES[algo], NAMES.get(proto, proto)


def test_each_row_takes_the_pick_nccl_logged_for_its_bytes() -> None:
    def pick_of(size: int) -> tuple[str, str]:
        return ("RING", "LL128") if size >= 1 << 20 else ("TREE", "LL")

    text = _with_picks(pick_of)
    text += "x:1:1 [0] NCCL INFO AllGather: 8 Bytes -> Algo PAT proto SIMPLE channel{Lo..Hi}={0..0}\n"  # another test's
    (run,) = parse_nccl_tests(text, "picks.txt")
    assert len(run.picks) == 3 * len(run.rows) + 1
    got, _ = samples(_system(), [run])
    assert got and all(s.logged for s in got)
    assert all((s.algo, s.proto) == (("ring", "LL128") if s.size_bytes >= 1 << 20 else ("tree", "LL")) for s in got)
    s = next(s for s in got if s.size_bytes == 1 << 20)
    assert (
        s.predicted_ns(_system(), None) == predict_time(_system(), "all_reduce", 1 << 20, algo="ring", proto="LL128")[0]
    )


def test_the_most_logged_pick_wins_and_a_row_without_one_is_the_models_choice() -> None:
    text = _with_picks(lambda size: ("TREE", "LL") if size == 1024 else None)
    text = text.replace(
        "AllReduce: 1024 Bytes -> Algo TREE proto LL ", "AllReduce: 1024 Bytes -> Algo RING proto LL ", 1
    )
    (run,) = parse_nccl_tests(text, "picks.txt")
    row = next(r for r in run.rows if r.size_bytes == 1024)
    assert run.logged_pick(row) == ("TREE", "LL")  # 2 of 3 lines
    got, _ = samples(_system(), [run])
    assert [s.size_bytes for s in got if s.logged] == [1024]
    assert all(s.algo is None and s.proto is None for s in got if not s.logged)


def test_picks_that_are_the_models_own_time_every_row_as_without_them(tmp_path: Path) -> None:
    """Logged picks equal to the model's own choice under a calibration time every row as that
    calibration does without them: pinning NCCL's choice to the one the model makes changes nothing.
    (Fits can differ: without picks a fit may move the choice through the multi-node curve.)"""
    plain = calibrate([LOG], parse_topology(TOPO), generation="hopper").params

    def own(size: int) -> tuple[str, str]:
        algo, proto = predict_time(_system(), "all_reduce", size, plain)[2:]
        return NAMES[algo], NAMES.get(proto, proto)

    logged = tmp_path / "logged.txt"
    logged.write_text(_with_picks(own))
    pinned, _ = samples(_system(), read_nccl_tests(logged))
    free, _ = samples(_system(), read_nccl_tests(LOG))
    assert len(pinned) == len(free) > 20 and all(s.logged for s in pinned)
    assert {s.algo for s in pinned} >= {"tree", "ring"}  # the choice moves with the size
    assert [s.predicted_ns(_system(), plain) for s in pinned] == [s.predicted_ns(_system(), plain) for s in free]


def test_calibrate_times_rows_with_nccls_picks_and_says_how_often_the_model_agrees(run_cli, tmp_path: Path) -> None:
    def pick_of(size: int) -> tuple[str, str]:
        return ("PAT", "LL") if size == 4096 else ("RING", "LL128") if 1 << 16 <= size < 1 << 26 else _models_pick(size)

    log = tmp_path / "picks.txt"
    log.write_text(_with_picks(pick_of))
    code, out, err = run_cli("calibrate", "nccl-tests", str(log), "-t", TOPO, "-o", str(tmp_path / "c.toml"))
    assert code == 0, err
    (run,) = read_nccl_tests(log)
    used, _ = samples(_system(), [run])
    same = sum(predict_time(_system(), "all_reduce", s.size_bytes)[2:] == (s.algo, s.proto) for s in used)
    assert 0 < same < len(used)
    assert f"the model picks the same algorithm and protocol for {same} of {len(used)} rows" in out
    assert "NCCL's logged pick" in out.splitlines()[3]
    line = next(r.line for r in run.rows if r.size_bytes == 4096)
    assert f"skipped picks.txt:{line} (4096 B): NCCL ran it as PAT / LL, which the model does not have" in out
    assert read_calibration(str(tmp_path / "c.toml")).rows == len(used)


def test_a_logged_pick_the_described_machine_cannot_run_is_one_line_exit_2(run_cli, tmp_path: Path) -> None:
    log = tmp_path / "nvls.txt"
    log.write_text(_with_picks(lambda size: ("NVLS_TREE", "SIMPLE") if size >= 1 << 27 else None))
    code, out, err = run_cli(
        "calibrate", "nccl-tests", str(log), "-t", TOPO, "--no-nvls", "-o", str(tmp_path / "c.toml")
    )
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "NCCL's log shows it ran nvls_tree / Simple" in err and "nvls.txt:" in err
    assert not (tmp_path / "c.toml").exists()
    with pytest.raises(InputError, match="the machine the log was made on"):
        samples(system_of(parse_topology(TOPO), generation="hopper", nvls=False), read_nccl_tests(log))
