"""`dse iterate` on per-rank traces, end to end through the CLI, against ASTRA-sim 2.x's runs.

Golden values are copied from ../shared/reference/astra-sim-2-stage.csv and astra-sim-2-p2p.csv
(ASTRA-sim 2.x, master 518bd51, analytical congestion-unaware backend); the traces and
configurations are the ones shipped in workloads/stage/ and tests/data/ (each with its origin), so
no test here needs ../shared.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dse.cli.main import main
from dse.training.chakra import schema as cs

ROOT = Path(__file__).resolve().parents[1]
STAGE = ROOT / "workloads" / "stage"
GPT = STAGE / "gpt_dp2_tp2_pp2"
DATA = ROOT / "tests" / "data"
RANKS = DATA / "ranks"
SYS = "R2_FC2_SW2_s4_ascending_FIFO_roofline_pp300_lm{}.json"
#: astra-sim-2-stage.csv, gpt_dp2_tp2_pp2 on R2_FC2_SW2, ascending/FIFO: finish and exposed ns of ranks 0-3 and 4-7
GOLDEN_GPT = {
    "900": ((3968241, 2775183), (2587889, 1390175)),
    "inf": ((3362812, 2413883), (2175418, 1226425)),
}
#: astra-sim-2-p2p.csv, pp_gpipe_S4M4_R4SW4_ppd1_dpd0 on R4_SW4 (s4, ascending, FIFO): ranks 0-3, 4-7, 8-11, 12-15
GOLDEN_PP = (6099268, 5699268, 5141018, 4582768)
R4_SW4 = "Ring(4,100,500)_Switch(4,50,1000)"


def _run(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _stage(lm: str, *extra: str) -> list[str]:
    return [
        "iterate",
        str(GPT / "workload"),
        "--topology",
        str(STAGE / "R2_FC2_SW2.yml"),
        "--system",
        str(STAGE / SYS.format(lm)),
        "--comm-groups",
        str(GPT / "workload.json"),
        "--cost-model",
        "astra-sim",
        *extra,
    ]


@pytest.mark.parametrize("lm", ["900", "inf"])
def test_stage_trace_matches_astra_sim_per_rank(lm: str, capsys: pytest.CaptureFixture) -> None:
    code, out, _ = _run(_stage(lm, "--json"), capsys)
    assert code == 0
    d = json.loads(out)
    finish, exposed = GOLDEN_GPT[lm]
    assert d["finish_ns_by_rank"] == [finish[0]] * 4 + [finish[1]] * 4
    assert d["exposed_ns_by_rank"] == [exposed[0]] * 4 + [exposed[1]] * 4
    assert [f - e for f, e in zip(d["finish_ns_by_rank"], d["exposed_ns_by_rank"])] == d["compute_ns_by_rank"]
    assert d["time_ns"] == d["total_ns"] == max(finish) and d["npus"] == 8 and d["iterations"] == 1
    assert d["exposed_comm_ns"] == exposed[0] and d["compute_ns"] == finish[0] - exposed[0]  # the last rank's
    assert [c["ranks"] for c in d["classes"]] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert "spans" not in d


def test_pipeline_trace_with_sends_and_all_reduces(capsys: pytest.CaptureFixture) -> None:
    wl = RANKS / "pp_gpipe_S4M4_R4SW4_ppd1_dpd0" / "pp_gpipe_S4M4_R4SW4_ppd1_dpd0"
    argv = ["iterate", str(wl), "-t", R4_SW4, "--cost-model", "astra-sim", "--scheduler", "baseline", "--queue"]
    code, out, _ = _run([*argv, "fifo", "--chunks", "4", "--json"], capsys)
    assert code == 0
    assert json.loads(out)["finish_ns_by_rank"] == [f for f in GOLDEN_PP for _ in range(4)]


def test_point_to_point_across_a_fully_connected_dimension(capsys: pytest.CaptureFixture) -> None:
    """p2p_pp_fc_1MiB_R4FC4SW2: rank 0 and rank 4 ping-pong 1 MiB on the FC dimension (13,620 ns);
    every other rank runs one 0 us compute, which ASTRA-sim runs for 1 ns."""
    wl = RANKS / "p2p_pp_fc_1MiB_R4FC4SW2" / "p2p_pp_fc_1MiB_R4FC4SW2"
    topo = "Ring(4,100,500)_FC(4,150,300)_Switch(2,50,1000)"  # R4_FC4_SW2.yml
    code, out, _ = _run(["iterate", str(wl), "-t", topo, "--cost-model", "astra-sim", "--json"], capsys)
    assert code == 0
    finish = json.loads(out)["finish_ns_by_rank"]
    assert finish[0] == finish[4] == 13620 and set(finish[1:4] + finish[5:]) == {1}


def test_text_output_has_a_row_per_class(capsys: pytest.CaptureFixture) -> None:
    code, out, _ = _run(_stage("900"), capsys)
    assert code == 0
    assert "3.968 ms" in out and "classes of alike ranks        2" in out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith(("0  0-3", "1  4-7"))]
    assert [r[:3] for r in rows] == [["0", "0-3", "3.968"], ["1", "4-7", "2.775"]]


def test_trace_file_is_chrome_trace_events(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "t.json"
    code, _, _ = _run(_stage("900", "--trace", str(out)), capsys)
    assert code == 0
    events = json.loads(out.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"class 0: ranks 0-3", "class 1: ranks 4-7"}
    spans = [e for e in events if e["ph"] == "X"]
    assert spans and max(e["ts"] + e["dur"] for e in spans) == pytest.approx(3968241 / 1000)


@pytest.mark.parametrize(
    ("model", "topology"),
    [
        ("paper", str(STAGE / "R2_FC2_SW2.yml")),
        ("astra-sim-1", "Ring(2,200,200,links=2)_FC(2,100,500,links=1)_Switch(2,50,1000,links=1)"),
    ],
)
def test_other_cost_models_run_the_stage_trace(model: str, topology: str, capsys: pytest.CaptureFixture) -> None:
    argv = _stage("900", "--json")
    argv[argv.index("--topology") + 1] = topology
    argv[argv.index("--cost-model") + 1] = model
    code, out, _ = _run(argv, capsys)
    assert code == 0
    d = json.loads(out)
    assert d["cost_model"] == model
    assert all(f >= c > 0 for f, c in zip(d["finish_ns_by_rank"], d["compute_ns_by_rank"]))
    # the roofline comes from the system file, whatever the cost model: the same compute as ASTRA-sim's
    finish, exposed = GOLDEN_GPT["900"]
    assert d["compute_ns_by_rank"] == [finish[0] - exposed[0]] * 4 + [finish[1] - exposed[1]] * 4


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "gpt"
    shutil.copytree(GPT, dst)
    return dst


def _refused(argv: list[str], capsys: pytest.CaptureFixture, *needles: str) -> None:
    code, out, err = _run(argv, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("dse: error: "), err
    for n in needles:
        assert n in err, err


def test_a_missing_rank_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    gpt = _copy(tmp_path)
    (gpt / "workload.5.et").unlink()
    argv = _stage("900")
    argv[1] = str(gpt / "workload")
    _refused(argv, capsys, "workload.5.et", "the topology has 8 NPUs")


def test_a_group_naming_a_rank_the_topology_lacks_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    groups = json.loads((GPT / "workload.json").read_text())
    groups["1"] = [0, 9]
    bad = tmp_path / "groups.json"
    bad.write_text(json.dumps(groups))
    argv = _stage("900")
    argv[argv.index("--comm-groups") + 1] = str(bad)
    _refused(argv, capsys, "--comm-groups", "9")


def test_a_trace_with_groups_needs_a_group_file(capsys: pytest.CaptureFixture) -> None:
    argv = _stage("900")
    i = argv.index("--comm-groups")
    del argv[i : i + 2]
    _refused(argv, capsys, "--comm-groups", "communicator group")


def test_a_system_file_and_a_scheduler_are_one_too_many(capsys: pytest.CaptureFixture) -> None:
    _refused(_stage("900", "--scheduler", "themis"), capsys, "--scheduler", "--system")


def test_a_trace_into_a_missing_folder_is_refused_before_the_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _refused(_stage("900", "--trace", str(tmp_path / "no" / "t.json")), capsys, "--trace")
    assert list(tmp_path.iterdir()) == []


def _write_rank(path: Path, nodes: list) -> None:
    def delimited(b: bytes) -> bytes:
        out, n = bytearray(), len(b)
        while True:
            out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
            n >>= 7
            if not n:
                return bytes(out) + b

    meta = cs.GlobalMetadata(version="0.0.4").SerializeToString()
    path.write_bytes(delimited(meta) + b"".join(delimited(n.SerializeToString()) for n in nodes))


def _p2p(nid: int, kind: int, **ints: int) -> object:
    n = cs.ChakraNode(id=nid, name=f"n{nid}", type=kind)
    n.attr.append(cs.AttributeProto(name="is_cpu_op", bool_val=False))
    for k, v in ints.items():
        n.attr.append(cs.AttributeProto(name=k, int64_val=v))
    return n


def test_a_send_to_oneself_names_the_file_rank_and_node(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _write_rank(tmp_path / "t.0.et", [_p2p(0, cs.COMM_SEND, comm_dst=0, comm_tag=1, comm_size=64)])
    _write_rank(tmp_path / "t.1.et", [_p2p(0, cs.COMP)])
    _refused(["iterate", str(tmp_path / "t"), "-t", "Ring(2,50,500)"], capsys, "t.0.et (rank 0)", "node 0", "itself")


def test_an_unmatched_receive_names_rank_node_and_key(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _write_rank(tmp_path / "t.0.et", [_p2p(0, cs.COMM_SEND, comm_dst=1, comm_tag=1, comm_size=64)])
    _write_rank(tmp_path / "t.1.et", [_p2p(0, cs.COMM_RECV, comm_src=0, comm_tag=2, comm_size=64)])
    _refused(
        ["iterate", str(tmp_path / "t"), "-t", "Ring(2,50,500)"],
        capsys,
        "rank 0: node 0 ('n0') is a send to rank 1 (tag 1, 64 B) that no receive takes",
    )
