"""Per-rank Chakra traces: the writer's node kinds, the pipeline generator and `dse workload pipeline`.

The writer round-trips every node kind through Chakra's schema (`dse.training.chakra.schema`); the
generator's rank files are checked as a whole: their count, every send matched by exactly one
receive on its peer (source, destination, tag, size), the dependencies of all ranks together with
send -> receive edges acyclic (no deadlock), and each stage's compute order under GPipe and 1F1B.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict, deque
from pathlib import Path
from typing import Any

import pytest

from dse.core.collectives import ALL_REDUCE
from dse.core.errors import InputError
from dse.training.chakra import schema as cs
from dse.training.chakra.write import (
    HEADER,
    encode_graph,
    encode_node,
    export_rank_graphs,
    frame,
    serialize,
    write_rank_files,
)
from dse.training.pipeline_traces import parse_pipeline, write_pipeline_traces
from dse.training.workload_graph import COMM, COMPUTE, MEM, RECV, REPLAY, SEND, Graph, Node

REPO = Path(__file__).resolve().parents[1]
STAGE = REPO / "workloads" / "stage" / "gpt_dp2_tp2_pp2"
PIPE = dict(fwd_us=10, bwd_us=20, activation_bytes="1MiB", grad_bytes="64MiB")


# ----- reading back with the schema ------------------------------------------------------------------
def _varint(data: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, pos


def read(path: Path | bytes) -> tuple[Any, list[Any]]:
    """A trace file's GlobalMetadata and nodes, parsed with dse's copy of Chakra's schema."""
    data = path if isinstance(path, bytes) else path.read_bytes()
    msgs, pos = [], 0
    while pos < len(data):
        n, pos = _varint(data, pos)
        msgs.append(data[pos : pos + n])
        pos += n
    return cs.GlobalMetadata.FromString(msgs[0]), [cs.ChakraNode.FromString(m) for m in msgs[1:]]


def attrs(m: Any) -> dict[str, tuple[str, Any]]:
    """name -> (the oneof field set, its value); lists as Python lists."""
    out = {}
    for a in m.attr:
        kind = a.WhichOneof("value")
        if kind is None:  # STAGE writes empty "inputs" / "outputs" attributes
            continue
        v = getattr(a, kind)
        out[a.name] = (kind, list(v.values) if kind.endswith("_list") else v)
    return out


def one(node: Node, *, rank: int | None = None, flags: list[bool] | None = None, deps=(3, 5)) -> Any:
    """`node` encoded, framed and parsed back."""
    (m,) = read(HEADER + frame(encode_node(7, node, deps, rank=rank, flags=flags)))[1]
    assert m.id == 7 and list(m.data_deps) == list(deps) and m.name == node.name
    return m


# ----- 1. every node kind round-trips through the schema ---------------------------------------------
def test_compute_nodes_round_trip() -> None:
    m = one(Node(COMPUTE, "c", duration=3000.0))
    assert m.type == cs.COMP and m.duration_micros == 3 and attrs(m) == {"is_cpu_op": ("bool_val", False)}
    m = one(Node(COMPUTE, "c", duration=2500.0, cpu=True))  # 2.5 us: 3 us for ASTRA-sim, the exact ns beside
    assert m.duration_micros == 3 and attrs(m)["dse_duration_ns"] == ("double_val", 2500.0)
    assert attrs(m)["is_cpu_op"] == ("bool_val", True)
    m = one(Node(COMPUTE, "r", flops=2.5e12, tensor_bytes=1 << 30, timed=False))  # roofline: no duration
    a = attrs(m)
    assert m.duration_micros == 0 and "dse_duration_ns" not in a
    assert a["num_ops"] == ("int64_val", 2_500_000_000_000) and a["tensor_size"] == ("uint64_val", 1 << 30)
    m = one(Node(COMPUTE, "z", duration=0.0, flops=10.0, tensor_bytes=4))  # timed at 0 ns: marked so
    assert attrs(m)["dse_duration_ns"] == ("double_val", 0.0) and attrs(m)["num_ops"] == ("int64_val", 10)


def test_send_and_receive_round_trip() -> None:
    m = one(Node(SEND, "s", peer=9, tag=4_000_000_000, size=1 << 20), rank=2)
    assert m.type == cs.COMM_SEND
    a = attrs(m)
    assert {k: a[k] for k in ("comm_src", "comm_dst", "comm_tag", "comm_size")} == {
        "comm_src": ("int64_val", 2),
        "comm_dst": ("int64_val", 9),
        "comm_tag": ("int64_val", 4_000_000_000),
        "comm_size": ("int64_val", 1 << 20),
    }
    m = one(Node(RECV, "r", peer=9, tag=1, size=0), rank=2)
    a = attrs(m)
    assert m.type == cs.COMM_RECV and a["comm_src"] == ("int64_val", 9) and a["comm_dst"] == ("int64_val", 2)
    assert a["comm_size"] == ("int64_val", 0) and a["is_cpu_op"] == ("bool_val", False)
    # the own end left out when the rank is not known (ASTRA-sim takes the rank that runs the node)
    assert "comm_src" not in attrs(one(Node(SEND, "s", peer=1, tag=0, size=8)))
    assert "comm_dst" not in attrs(one(Node(RECV, "r", peer=1, tag=0, size=8)))


def test_collective_replay_and_memory_nodes_round_trip() -> None:
    m = one(Node(COMM, "ar", collective=ALL_REDUCE, size=4096, group="3"))
    a = attrs(m)
    assert m.type == cs.COMM_COLL and a["comm_type"] == ("int64_val", cs.ALL_REDUCE)
    assert a["comm_size"] == ("int64_val", 4096) and a["pg_name"] == ("string_val", "3") and "involved_dim" not in a
    m = one(Node(COMM, "ar", collective=ALL_REDUCE, size=4096, scope=(0, 2)), flags=[True, False, True])
    assert attrs(m)["involved_dim"] == ("bool_list", [True, False, True]) and "pg_name" not in attrs(m)
    m = one(Node(REPLAY, "bc", duration=1000.0))
    assert m.type == cs.COMM_COLL and attrs(m)["comm_type"] == ("int64_val", cs.BROADCAST) and m.duration_micros == 1
    for mem, ntype in (("load", cs.MEM_LOAD), ("store", cs.MEM_STORE), ("remote_load", cs.MEM_LOAD)):
        m = one(Node(MEM, "m", mem=mem, size=123))
        assert m.type == ntype and attrs(m)["tensor_size"] == ("uint64_val", 123)


@pytest.mark.parametrize(
    ("node", "rank", "match"),
    [
        (Node(SEND, "s", peer=3, tag=0, size=1), 3, "own rank"),
        (Node(RECV, "r", peer=-1, tag=0, size=1), 0, "comm_src -1"),
        (Node(SEND, "s", peer=1, tag=2**32, size=1), 0, "comm_tag"),
        (Node(SEND, "s", peer=1, tag=0, size=2**54), 0, "comm_size"),
        (Node(MEM, "m", mem="disk", size=1), None, "mem 'disk'"),
        (Node("mark2", "x"), None, "kind 'mark2'"),
    ],
)
def test_nodes_that_cannot_be_written_are_refused(node: Node, rank: int | None, match: str) -> None:
    with pytest.raises(InputError, match=match) as e:
        encode_node(4, node, (), rank=rank)
    assert f"node 4 ({node.name})" in str(e.value) and "\n" not in str(e.value)


def test_export_rank_graphs_writes_each_rank_with_its_own_rank(tmp_path: Path) -> None:
    graphs = []
    for r in range(2):
        g = Graph()
        c = g.add(Node(COMPUTE, "c", duration=1000.0))
        g.add(Node(SEND if r == 0 else RECV, "m", peer=1 - r, tag=5, size=64), (c, 0.0))
        graphs.append(g)
    rep = export_rank_graphs(graphs, tmp_path / "p")
    assert rep.files == (str(tmp_path / "p.0.et"), str(tmp_path / "p.1.et")) and rep.nodes == 2 and rep.ranks == 2
    (_, (_, s)), (_, (_, r)) = read(tmp_path / "p.0.et"), read(tmp_path / "p.1.et")
    assert s.type == cs.COMM_SEND and attrs(s)["comm_src"][1] == 0 and attrs(s)["comm_dst"][1] == 1
    assert r.type == cs.COMM_RECV and attrs(r)["comm_src"][1] == 0 and attrs(r)["comm_dst"][1] == 1
    assert list(s.data_deps) == [0] and read(tmp_path / "p.0.et")[0].version == "0.0.4"


def test_rank_files_are_written_all_or_none(tmp_path: Path) -> None:
    (tmp_path / "p.3.et").mkdir()  # a folder where rank 3's file goes: nothing is written
    with pytest.raises(InputError, match="directory"):
        write_rank_files(tmp_path / "p", lambda r: b"x" * r, 5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.3.et"]
    written = write_rank_files(tmp_path / "q", lambda r: bytes([r]) * 3, 100)
    assert written == [str(tmp_path / f"q.{r}.et") for r in range(100)]
    assert all((tmp_path / f"q.{r}.et").read_bytes() == bytes([r]) * 3 for r in range(100))
    with pytest.raises(InputError, match="exists"):
        write_rank_files(tmp_path / "q", lambda r: b"new", 100)
    assert (tmp_path / "q.0.et").read_bytes() == b"\x00" * 3

    def fails(r: int) -> bytes:  # an error after 64 files were written: none of them is left
        if r == 80:
            raise RuntimeError("stop")
        return b"z"

    with pytest.raises(RuntimeError):
        write_rank_files(tmp_path / "w", fails, 100)
    with pytest.raises(RuntimeError):
        write_rank_files(tmp_path / "q", fails, 100, force=True)  # replacing: the old files stay
    assert not list(tmp_path.glob("w.*")) and not list(tmp_path.glob(".*.tmp"))
    assert all((tmp_path / f"q.{r}.et").read_bytes() == bytes([r]) * 3 for r in range(100))


# ----- 2. the pipeline generator ---------------------------------------------------------------------
def _ranks(tmp_path: Path, name: str, n: int) -> list[list[Any]]:
    assert sorted(p.name for p in tmp_path.glob(f"{name}.*.et")) == sorted(f"{name}.{r}.et" for r in range(n))
    return [read(tmp_path / f"{name}.{r}.et")[1] for r in range(n)]


def _check_messages_and_deadlock(ranks: list[list[Any]]) -> int:
    """Every send matched by exactly one receive on its peer and the reverse; the dependencies of
    all ranks with an edge from each send to its receive acyclic. Returns the messages."""
    sends: Counter[tuple[int, int, int, int]] = Counter()
    recvs: Counter[tuple[int, int, int, int]] = Counter()
    where: dict[tuple[int, ...], tuple[int, int]] = {}
    for r, nodes in enumerate(ranks):
        for m in nodes:
            if m.type in (cs.COMM_SEND, cs.COMM_RECV):
                a = {k: v for k, (_, v) in attrs(m).items()}
                key = (a["comm_src"], a["comm_dst"], a["comm_tag"], a["comm_size"])
                assert r == (key[0] if m.type == cs.COMM_SEND else key[1])
                (sends if m.type == cs.COMM_SEND else recvs)[key] += 1
                where[(m.type, *key)] = (r, m.id)
    assert sends == recvs and set(sends.values()) <= {1}
    edges = defaultdict(list)  # (rank, id) -> successors
    indeg: Counter[tuple[int, int]] = Counter()
    for r, nodes in enumerate(ranks):
        assert [m.id for m in nodes] == list(range(len(nodes)))
        for m in nodes:
            for d in m.data_deps:
                assert d < m.id  # ids in the order ASTRA-sim issues them; a node depends on earlier ones
                edges[(r, d)].append((r, m.id))
                indeg[(r, m.id)] += 1
    for key in sends:
        edges[where[(cs.COMM_SEND, *key)]].append(where[(cs.COMM_RECV, *key)])
        indeg[where[(cs.COMM_RECV, *key)]] += 1
    ready = deque((r, m.id) for r, nodes in enumerate(ranks) for m in nodes if not indeg[(r, m.id)])
    seen = 0
    while ready:
        seen += 1
        for nxt in edges[ready.popleft()]:
            indeg[nxt] -= 1
            if not indeg[nxt]:
                ready.append(nxt)
    assert seen == sum(map(len, ranks))  # every node ordered: no cycle, so no deadlock
    return sum(sends.values())


def _computes(nodes: list[Any]) -> list[str]:
    return [m.name for m in nodes if m.type == cs.COMP]


def _names(order: str) -> list[str]:
    """ "F0 F1 B0" -> ["fwd_mb0", "fwd_mb1", "bwd_mb0"]."""
    return [("fwd_mb" if step[0] == "F" else "bwd_mb") + step[1:] for step in order.split()]


GPIPE_4 = _names("F0 F1 F2 F3 B3 B2 B1 B0")  # every stage: all forwards, then the backwards, last first
#: 1F1B, 4 stages, 4 microbatches: stage s runs 3 - s forwards, then one forward and one backward
F1B1_4 = [
    _names("F0 F1 F2 F3 B0 B1 B2 B3"),
    _names("F0 F1 F2 B0 F3 B1 B2 B3"),
    _names("F0 F1 B0 F2 B1 F3 B2 B3"),
    _names("F0 B0 F1 B1 F2 B2 F3 B3"),
]


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipeline_rank_files(tmp_path: Path, schedule: str) -> None:
    S, D, M = 4, 2, 4
    rep = write_pipeline_traces(tmp_path, "p", stages=S, dp=D, microbatches=M, schedule=schedule, **PIPE)
    assert rep.ranks == 8 and len(rep.files) == 8 and rep.groups_file == "" and rep.involved_dim == (True, False)
    ranks = _ranks(tmp_path, "p", S * D)
    assert not (tmp_path / "p.json").exists()
    # 2 (S - 1) boundaries x M microbatches x 2 directions x D replicas
    assert _check_messages_and_deadlock(ranks) == (S - 1) * M * 2 * D
    for r, nodes in enumerate(ranks):
        s = r // D
        comp = [m for m in nodes if m.type == cs.COMP]
        assert all(list(b.data_deps)[:1] == [a.id] for a, b in zip(comp, comp[1:]))  # one chain per stage
        assert all(m.duration_micros == (10 if m.name.startswith("fwd") else 20) for m in comp)
        assert _computes(nodes) == (GPIPE_4 if schedule == "gpipe" else F1B1_4[s])
        (ar,) = [m for m in nodes if m.type == cs.COMM_COLL]
        assert ar is nodes[-1] and list(ar.data_deps) == [comp[-1].id]
        a = attrs(ar)
        assert a["comm_size"] == ("int64_val", 64 << 20) and a["involved_dim"] == ("bool_list", [True, False])
        sends = [attrs(m) for m in nodes if m.type == cs.COMM_SEND]
        peers = {a["comm_dst"][1] for a in sends}
        assert peers == ({r + D} if s < S - 1 else set()) | ({r - D} if s > 0 else set())
        assert {a["comm_tag"][1] for a in sends} == (
            ({2 * m for m in range(M)} if s < S - 1 else set()) | ({2 * m + 1 for m in range(M)} if s > 0 else set())
        )


def test_schedule_orders() -> None:
    p = parse_pipeline(stages=4, dp=1, microbatches=4, schedule="1f1b", **PIPE)
    assert p.order(1) == [("F", 0), ("F", 1), ("F", 2), ("B", 0), ("F", 3), ("B", 1), ("B", 2), ("B", 3)]
    few = parse_pipeline(stages=8, dp=1, microbatches=2, schedule="1f1b", **PIPE)  # fewer microbatches than stages
    assert few.order(0) == [("F", 0), ("F", 1), ("B", 0), ("B", 1)] and few.order(7) == [
        ("F", 0),
        ("B", 0),
        ("F", 1),
        ("B", 1),
    ]
    g = parse_pipeline(stages=2, dp=1, microbatches=3, **PIPE)
    assert g.order(0) == g.order(1) == [("F", 0), ("F", 1), ("F", 2), ("B", 2), ("B", 1), ("B", 0)]


def test_fast_path_gives_the_bytes_of_the_plain_encoding(tmp_path: Path) -> None:
    p = parse_pipeline(stages=3, dp=4, microbatches=3, schedule="1f1b", topology_dims="2x2x3", **PIPE)
    write_pipeline_traces(tmp_path, "p", stages=3, dp=4, microbatches=3, schedule="1f1b", topology_dims="2x2x3", **PIPE)
    for r in range(12):
        plain = serialize(encode_graph(p.rank_graph(r), 3, rank=r)[0])
        assert (tmp_path / f"p.{r}.et").read_bytes() == plain
    assert attrs(read(tmp_path / "p.5.et")[1][-1])["involved_dim"][1] == [True, True, False]


def test_groups_when_asked_or_when_dimensions_do_not_hold_a_stage(tmp_path: Path) -> None:
    rep = write_pipeline_traces(tmp_path, "g", stages=2, dp=3, microbatches=2, topology_dims=[2, 3], **PIPE)
    assert rep.groups_file == str(tmp_path / "g.json") and rep.involved_dim == ()
    assert json.loads((tmp_path / "g.json").read_text()) == {"1": [0, 1, 2], "2": [3, 4, 5]}
    ranks = _ranks(tmp_path, "g", 6)
    _check_messages_and_deadlock(ranks)
    for r, nodes in enumerate(ranks):
        a = attrs(nodes[-1])
        assert a["pg_name"] == ("string_val", str(r // 3 + 1)) and "involved_dim" not in a
    rep = write_pipeline_traces(tmp_path, "h", stages=2, dp=2, microbatches=1, groups=True, **PIPE)
    assert json.loads((tmp_path / "h.json").read_text()) == {"1": [0, 1], "2": [2, 3]}


def test_edge_shapes(tmp_path: Path) -> None:
    rep = write_pipeline_traces(tmp_path, "one", stages=1, dp=4, microbatches=2, **PIPE)  # data-parallel only
    ranks = _ranks(tmp_path, "one", 4)
    assert _check_messages_and_deadlock(ranks) == 0 and rep.involved_dim == (True,)
    rep = write_pipeline_traces(tmp_path, "pp", stages=3, dp=1, microbatches=2, **PIPE)  # no all-reduce
    ranks = _ranks(tmp_path, "pp", 3)
    assert _check_messages_and_deadlock(ranks) == 8 and not any(m.type == cs.COMM_COLL for n in ranks for m in n)
    assert rep.involved_dim == () and rep.groups_file == ""


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"stages": 0}, "stages: 0 is too small"),
        ({"dp": "x"}, "dp: 'x' is not an integer"),
        ({"microbatches": -1}, "microbatches"),
        ({"schedule": "zb"}, "schedule"),
        ({"fwd_us": -5}, "fwd_us"),
        ({"activation_bytes": "1.5B"}, "activation_bytes"),
        ({"topology_dims": "3x3"}, r"3x3 \(9 NPUs\) for 2 stages x 2 = 4 ranks"),
        ({"topology_dims": "2y2"}, "topology_dims"),
        ({"stages": 2048, "dp": 1024}, "ranks"),
    ],
)
def test_bad_pipelines_are_refused(tmp_path: Path, change: dict, match: str) -> None:
    kw: dict[str, Any] = dict(stages=2, dp=2, microbatches=2, **PIPE) | change
    with pytest.raises(InputError, match=match):
        write_pipeline_traces(tmp_path, "p", **kw)
    assert list(tmp_path.iterdir()) == []


# ----- 3. the command line ---------------------------------------------------------------------------
def test_cli_writes_a_pipeline(tmp_path: Path, run_cli) -> None:
    out = tmp_path / "p"
    args = "--stages 4 --dp 4 --microbatches 3 --schedule 1f1b --fwd-us 50 --bwd-us 100 --activation 2MiB"
    code, text, err = run_cli("workload", "pipeline", str(out), *args.split(), "--grads", "1GiB", "-t", "2x2x4")
    assert code == 0 and err == ""
    assert text.splitlines() == [
        f"{out}.0.et ... {out}.15.et: 16 rank files, 4 stages x 4 data-parallel ranks, 3 microbatches (1f1b), "
        "at most 19 nodes per rank",
        "data-parallel all-reduce on dimensions 0,1 of 2x2x4 (involved_dim)",
    ]
    ranks = _ranks(tmp_path, "p", 16)
    assert _check_messages_and_deadlock(ranks) == 3 * 3 * 2 * 4
    assert attrs(ranks[0][-1])["comm_size"][1] == 1 << 30 and attrs(ranks[0][1])["comm_size"][1] == 2 << 20
    code, text, _ = run_cli(
        "workload", "pipeline", str(tmp_path / "g"), *"--stages 2 --dp 2 --microbatches 1 --groups".split()
    )
    assert code == 0
    assert text.splitlines()[1] == f"data-parallel all-reduce on communicator groups: {tmp_path}/g.json (network 2x2)"


def test_cli_takes_a_network_yaml(tmp_path: Path, run_cli) -> None:
    net = REPO / "workloads" / "stage" / "R2_FC2_SW2.yml"
    code, text, _ = run_cli(
        "workload", "pipeline", str(tmp_path / "y"), *"--stages 2 --dp 4 --microbatches 2 -t".split(), str(net)
    )
    assert code == 0 and text.splitlines()[1] == "data-parallel all-reduce on dimensions 0,1 of 2x2x2 (involved_dim)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stages", "0", "--dp", "2", "--microbatches", "1"], "dse: error: stages: 0 is too small"),
        (["--stages", "2", "--dp", "2", "--microbatches", "1", "--schedule", "zb"], "dse: error: schedule: 'zb'"),
        (["--stages", "2", "--dp", "2", "--microbatches", "1", "-t", "3x3"], "dse: error: topology_dims: 3x3"),
        (["--stages", "2", "--dp", "2", "--microbatches", "1", "--grads", "0"], "dse: error: grad_bytes"),
    ],
)
def test_cli_refuses_bad_input_in_one_line(tmp_path: Path, run_cli, args: list[str], message: str) -> None:
    code, text, err = run_cli("workload", "pipeline", str(tmp_path / "p"), *args)
    assert code == 2 and text == "" and err.startswith(message) and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_cli_output_rules(tmp_path: Path, run_cli) -> None:
    base = ["--stages", "2", "--dp", "1", "--microbatches", "1"]
    code, _, err = run_cli("workload", "pipeline", str(tmp_path / "nosuch" / "p"), *base)
    assert code == 2 and "no folder" in err and err.count("\n") == 1
    code, _, err = run_cli("workload", "pipeline", str(tmp_path / "p.et"), *base)
    assert code == 2 and "ends in .et" in err
    assert run_cli("workload", "pipeline", str(tmp_path / "p"), *base)[0] == 0
    before = (tmp_path / "p.0.et").read_bytes()
    code, _, err = run_cli("workload", "pipeline", str(tmp_path / "p"), *base, "--fwd-us", "1")
    assert code == 2 and "exists" in err and (tmp_path / "p.0.et").read_bytes() == before
    assert run_cli("workload", "pipeline", str(tmp_path / "p"), *base, "--fwd-us", "1", "--force")[0] == 0
    assert (tmp_path / "p.0.et").read_bytes() != before


# ----- 4. the shipped STAGE trace --------------------------------------------------------------------
def test_shipped_stage_trace_is_whole() -> None:
    """workloads/stage/gpt_dp2_tp2_pp2 (STAGE's output, README there): 8 rank files whose sends and
    receives match, whose groups file lists each pg_name the ranks use, and which ASTRA-sim reads plain."""
    ranks = [read(STAGE / f"workload.{r}.et")[1] for r in range(8)]
    groups = json.loads((STAGE / "workload.json").read_text())
    sends = Counter()
    recvs = Counter()
    for r, nodes in enumerate(ranks):
        assert (STAGE / f"workload.{r}.et").read_bytes()[:2] != b"\x1f\x8b"  # plain: ASTRA-sim 2.x reads no gzip
        counts = Counter(cs.NODE_TYPES[m.type] for m in nodes)
        assert counts == {
            "COMP_NODE": 250 if r < 4 else 258,
            "COMM_COLL_NODE": 90,
            "COMM_SEND_NODE": 4,
            "COMM_RECV_NODE": 4,
        }
        for m in nodes:
            a = {k: v for k, (_, v) in attrs(m).items()}
            if m.type == cs.COMM_COLL:
                assert r in groups[a["pg_name"]]
            elif m.type == cs.COMM_SEND:
                sends[(r, a["comm_dst"], a["comm_tag"], a["comm_size"])] += 1
            elif m.type == cs.COMM_RECV:
                recvs[(a["comm_src"], r, a["comm_tag"], a["comm_size"])] += 1
    assert sends == recvs and len(sends) == 32  # 4 sends and 4 receives on each of the 8 ranks
