"""Per-rank Chakra traces: every node kind converted, every rank read, alike ranks grouped, bad input refused.

Traces are built here from the schema (`dse.training.chakra.schema`), and real ones are in
tests/data/ranks (README there: two generated pipelines of the ASTRA-sim 2.x reference runs and a
STAGE trace). The reader's shortcuts (a file read once per distinct content, a node message converted
once per distinct content, peers and groups read from the bytes of messages alike but for them) are
checked against the plain reader: for every rank, its class's graph with its own peers and groups is
the graph `load_trace` builds from its file alone.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from dse.core.errors import InputError
from dse.training.chakra import schema as cs
from dse.training.chakra.rankset import (
    READ_STEPS_PER_NODE,
    STEPS_PER_FILE,
    RankSet,
    is_rank_set,
    load_rank_set,
)
from dse.training.chakra.read import load_trace, needs_ranks
from dse.training.workload_graph import COMM, COMPUTE, MEM, RECV, REPLAY, SEND, Node

from .conftest import DATA

RANKS = DATA / "ranks"
GPIPE = RANKS / "pp_gpipe_S4M4_R4SW4_ppd1_dpd0" / "pp_gpipe_S4M4_R4SW4_ppd1_dpd0"
PINGPONG = RANKS / "p2p_pp_fc_1MiB_R4FC4SW2" / "p2p_pp_fc_1MiB_R4FC4SW2"
STAGE = RANKS / "gpt_dp2_tp2_pp2" / "workload"
INT_KINDS = ("int32_val", "int64_val", "uint32_val", "uint64_val")


# ----- building trace files ---------------------------------------------------------------------
def msg(nid: int, ntype: int, *deps: int, us: int = 0, name: str = "", **attrs: object) -> object:
    """A Chakra node: `attrs` as name=value (an int as int64_val, a str as string_val, a bool as
    bool_val) or name=(kind, value)."""
    m = cs.ChakraNode(id=nid, name=name or f"n{nid}", type=ntype, duration_micros=us)
    m.data_deps.extend(deps)
    for key, v in attrs.items():
        kind, value = v if isinstance(v, tuple) else (_kind(v), v)
        m.attr.add(name=key, **{kind: value})
    return m


def _kind(v: object) -> str:
    return "bool_val" if isinstance(v, bool) else "int64_val" if isinstance(v, int) else "string_val"


def _delimited(body: bytes) -> bytes:
    n, head = len(body), bytearray()
    while n >= 0x80:
        head.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(head) + bytes([n]) + body


def encode(nodes: list, meta: object = None) -> bytes:
    parts = [meta or cs.GlobalMetadata(version="0.0.4"), *nodes]
    return b"".join(_delimited(m.SerializeToString()) for m in parts)


def write_set(folder: Path, ranks: list[list], name: str = "t", meta: object = None) -> Path:
    """PREFIX.<rank>.et for each rank's node list; returns PREFIX."""
    folder.mkdir(parents=True, exist_ok=True)
    for r, nodes in enumerate(ranks):
        (folder / f"{name}.{r}.et").write_bytes(encode(nodes, meta))
    return folder / name


def send(nid: int, dst: int, *deps: int, tag: int = 7, size: int = 1024, **kw: object) -> object:
    return msg(nid, cs.COMM_SEND, *deps, comm_dst=dst, comm_tag=tag, comm_size=size, **kw)


def recv(nid: int, src: int, *deps: int, tag: int = 7, size: int = 1024, **kw: object) -> object:
    return msg(nid, cs.COMM_RECV, *deps, comm_src=src, comm_tag=tag, comm_size=size, **kw)


def rank_nodes(rs: RankSet, r: int) -> list[Node]:
    """Rank r's graph nodes: its class's graph with r's own peers and groups."""
    c = rs.classes[rs.class_of[r]]
    k = c.ranks.index(r)
    peers, groups = iter(c.peers[k]), iter(c.groups[k])
    out = []
    for n in c.graph.nodes:
        if n.kind in (SEND, RECV):
            n = replace(n, peer=next(peers))
        elif n.kind == COMM:
            n = replace(n, group=next(groups))
        out.append(n)
    assert next(peers, None) is None and next(groups, None) is None
    return out


def assert_same_as_plain_reader(rs: RankSet, prefix: Path) -> None:
    """Every rank's graph (`rank_nodes`) is the one `load_trace` reads from its file alone."""
    assert rs.npus == len(rs.class_of) and sorted(r for c in rs.classes for r in c.ranks) == list(range(rs.npus))
    for k, c in enumerate(rs.classes):
        assert list(c.ranks) == sorted(c.ranks) and all(rs.class_of[r] == k for r in c.ranks)
        assert len(c.peers) == len(c.groups) == len(c.ranks)
    assert [c.ranks[0] for c in rs.classes] == sorted(c.ranks[0] for c in rs.classes)  # numbered by first rank
    for r in range(rs.npus):
        plain = load_trace(f"{prefix}.{r}.et")
        c = rs.classes[rs.class_of[r]]
        assert rank_nodes(rs, r) == plain.graph.nodes, r
        assert c.graph.edges == plain.graph.edges and c.graph.end == plain.graph.end


# ----- 1. each node kind ------------------------------------------------------------------------
@pytest.mark.parametrize("kind", INT_KINDS)
def test_send_and_receive(tmp_path: Path, kind: str) -> None:
    a = {"comm_tag": (kind, 9), "comm_size": (kind, 4096)}
    r0 = [
        msg(0, cs.COMM_SEND, comm_dst=(kind, 1), comm_src=(kind, 0), **a),
        msg(1, cs.COMM_RECV, comm_src=(kind, 1), **a),
    ]
    r1 = [
        msg(0, cs.COMM_RECV, comm_src=(kind, 0), comm_dst=(kind, 1), **a),
        msg(1, cs.COMM_SEND, comm_dst=(kind, 0), **a),
    ]
    prefix = write_set(tmp_path, [r0, r1])
    rs = load_rank_set(prefix, 2)
    n0 = rank_nodes(rs, 0)
    assert (n0[0].kind, n0[0].peer, n0[0].tag, n0[0].size) == (SEND, 1, 9, 4096)
    assert (n0[1].kind, n0[1].peer, n0[1].tag, n0[1].size) == (RECV, 1, 9, 4096)
    assert [(n.kind, n.peer) for n in rank_nodes(rs, 1)[:2]] == [(RECV, 0), (SEND, 0)]
    assert len(rs.classes) == 2  # a send then a receive is not a receive then a send
    assert_same_as_plain_reader(rs, prefix)
    assert needs_ranks(load_trace(f"{prefix}.0.et"))


def test_memory_compute_and_groups(tmp_path: Path) -> None:
    nodes = [
        msg(0, cs.MEM_LOAD, tensor_size=("uint64_val", 1 << 20)),
        msg(1, cs.MEM_STORE, 0, tensor_size=512),
        msg(2, cs.COMP, 1, num_ops=2_000_000, tensor_size=("uint64_val", 4096)),
        msg(3, cs.COMP, 2, us=5, num_ops=("int32_val", 10), tensor_size=8),
        msg(4, cs.COMP, 3),
        msg(5, cs.COMM_COLL, 4, comm_type=cs.ALL_REDUCE, comm_size=64, pg_name="5"),
        msg(6, cs.COMM_COLL, 5, comm_type=cs.ALL_GATHER, comm_size=64, pg_name=("int32_val", 7)),
        msg(7, cs.COMM_COLL, 6, comm_type=cs.ALL_REDUCE, comm_size=64, pg_name="0"),
        msg(8, cs.COMM_COLL, 7, comm_type=cs.ALL_REDUCE, comm_size=64, is_cpu_op=("int32_val", 0)),
        msg(9, cs.COMM_COLL, 8, us=3, is_cpu_op=True),  # PyTorch's c10d call on the CPU: replayed
    ]
    prefix = write_set(tmp_path, [nodes, nodes])
    rs = load_rank_set(prefix, 2)
    assert len(rs.classes) == 1 and rs.class_of == (0, 0) and rs.classes[0].ids == tuple(range(10))
    n = rs.classes[0].graph.nodes
    assert (n[0].kind, n[0].mem, n[0].size) == (MEM, "load", 1 << 20)
    assert (n[1].kind, n[1].mem, n[1].size) == (MEM, "store", 512)
    assert (n[2].kind, n[2].flops, n[2].tensor_bytes, n[2].timed, n[2].duration) == (COMPUTE, 2e6, 4096, False, 0.0)
    assert (n[3].flops, n[3].tensor_bytes, n[3].timed, n[3].duration) == (10.0, 8, True, 5000.0)
    assert (n[4].flops, n[4].timed, n[4].duration) == (0.0, True, 0.0)  # as before: no duration, no num_ops
    assert [x.group for x in n[5:9]] == ["5", "7", "", ""] and rs.classes[0].groups == (("5", "7", "", ""),) * 2
    assert (n[9].kind, n[9].cpu, n[9].duration) == (REPLAY, True, 3000.0)
    assert rs.notes == ()  # one class, one distinct file


# ----- 2. real per-rank traces ------------------------------------------------------------------
def test_gpipe_classes_are_the_stages() -> None:
    rs = load_rank_set(GPIPE, 16)
    assert [c.ranks for c in rs.classes] == [(0, 1, 2, 3), tuple(range(4, 12)), (12, 13, 14, 15)]
    first, middle, last = rs.classes
    assert first.peers[0] == (4,) * 8 and first.peers[3] == (7,) * 8
    assert set(middle.peers[middle.ranks.index(5)]) == {1, 9} and last.peers[0] == (8,) * 8
    assert_same_as_plain_reader(rs, GPIPE)
    assert rs.name == GPIPE.name and rs.version == "0.0.4" and rs.trace_groups == {}


def test_pingpong_reads_identical_files_once() -> None:
    rs = load_rank_set(PINGPONG, 32)
    assert [c.ranks for c in rs.classes] == [(0,), tuple(r for r in range(1, 32) if r != 4), (4,)]
    assert rs.classes[0].peers == ((4, 4),) and rs.classes[2].peers == ((0, 0),)
    assert any("3 distinct files parsed" in n for n in rs.notes)  # 29 idle ranks: one file content
    assert_same_as_plain_reader(rs, PINGPONG)


def test_stage_trace_groups_and_roofline_nodes() -> None:
    rs = load_rank_set(STAGE, 8)  # gzipped copies
    assert [c.ranks for c in rs.classes] == [(0, 1, 2, 3), (4, 5, 6, 7)]  # the two pipeline stages
    groups = {name: set(ranks) for name, ranks in json.loads((STAGE.parent / "workload.json").read_text()).items()}
    for c in rs.classes:
        for r, names in zip(c.ranks, c.groups, strict=True):
            assert names and all(r in groups[g] for g in names), r  # each rank's collectives name its own groups
        computes = [n for n in c.graph.nodes if n.kind == COMPUTE]
        assert computes and all(not n.timed and n.flops > 0 and n.tensor_bytes > 0 for n in computes)
    assert rs.classes[0].peers[1] == (5,) * 8 and rs.classes[1].peers[2] == (2,) * 8  # stage to stage: rank +- 4
    assert_same_as_plain_reader(rs, STAGE)


def test_spec_forms_and_is_rank_set(tmp_path: Path) -> None:
    for spec in (GPIPE, f"{GPIPE}.0.et", f"{GPIPE}.7.et"):
        assert is_rank_set(spec) and load_rank_set(spec, 16).class_of == load_rank_set(GPIPE, 16).class_of
    single = DATA / "chakra" / "d_mixed.0.et"
    assert not is_rank_set(single) and not is_rank_set(tmp_path / "nothing") and not is_rank_set(single.parent)
    assert len(load_rank_set(single, 1).classes) == 1 and not needs_ranks(load_trace(single))
    assert needs_ranks(load_trace(f"{STAGE}.0.et"))
    gz = tmp_path / "g"
    write_set(gz, [[msg(0, cs.COMP, us=1)]] * 2)
    for r in range(2):
        p = gz / f"t.{r}.et"
        (gz / f"t.{r}.et.gz").write_bytes(gzip.compress(p.read_bytes()))
        p.unlink()
    assert is_rank_set(gz / "t") and is_rank_set(gz / "t.1.et.gz") and load_rank_set(gz / "t", 2).class_of == (0, 0)


def test_random_rank_sets_match_the_plain_reader(tmp_path: Path) -> None:
    """Ranks of a few shapes with random peers, groups, integer kinds and exact copies: the shortcuts
    give what each file read alone gives."""
    for seed in range(8):
        rng = random.Random(seed)
        npus = rng.randint(2, 7)
        ranks: list[list] = []
        for r in range(npus):
            j = rng.randrange(r) if r else 0
            if r and rng.random() < 0.3 and all(_ok(n, r) for n in ranks[j]):
                ranks.append(ranks[j])  # an exact copy of an earlier rank's file
            else:
                ranks.append(_random_rank(rng, r, npus, rng.randint(0, 3)))
        prefix = write_set(tmp_path / str(seed), ranks)
        assert_same_as_plain_reader(load_rank_set(prefix, npus), prefix)


def _ok(m: object, r: int) -> bool:
    """Can rank r run this node (no send to itself, no other own end)?"""
    a = {x.name: getattr(x, x.WhichOneof("value")) for x in m.attr}
    if m.type == cs.COMM_SEND:
        return a["comm_dst"] != r and a.get("comm_src", r) == r
    if m.type == cs.COMM_RECV:
        return a["comm_src"] != r and a.get("comm_dst", r) == r
    return True


def _random_rank(rng: random.Random, r: int, npus: int, shape: int) -> list:
    others = [x for x in range(npus) if x != r]
    out = []
    for i in range(4 + 2 * shape):
        deps = [i - 1] if i else []
        kind = rng.choice(INT_KINDS)
        what = (i + shape) % 4
        if what == 0:
            own = {"comm_src": (kind, r)} if rng.random() < 0.5 else {}
            dst = (kind, rng.choice(others))
            out.append(msg(i, cs.COMM_SEND, *deps, comm_dst=dst, comm_tag=(kind, i), comm_size=64, **own))
        elif what == 1:
            out.append(recv(i, rng.choice(others), *deps, tag=i))
        elif what == 2:
            pg = rng.choice(["1", "2", "0", "", ("int64_val", 3), f"g{rng.randint(0, 300)}"])
            out.append(msg(i, cs.COMM_COLL, *deps, comm_type=cs.ALL_REDUCE, comm_size=64, pg_name=pg))
        else:
            out.append(msg(i, cs.COMP, *deps, us=shape, name="comm_dst" if rng.random() < 0.3 else ""))
    return out


def test_a_name_holding_an_attribute_pattern_is_read_in_full(tmp_path: Path) -> None:
    """A node name that holds the bytes of a comm_dst attribute must not be taken for one."""
    fake = "\x52\x0c\x0a\x08comm_dst\x48\x01"
    ranks = [[send(0, 1, name=fake + "x")], [send(0, 2, name=fake + "x")], [send(0, 0, name=fake + "x")]]
    prefix = write_set(tmp_path, ranks)
    rs = load_rank_set(prefix, 3)
    assert [rank_nodes(rs, r)[0].peer for r in range(3)] == [1, 2, 0] and len(rs.classes) == 1
    assert rank_nodes(rs, 0)[0].name == fake + "x"
    assert_same_as_plain_reader(rs, prefix)


# ----- 3. PyTorch process groups ------------------------------------------------------------------
def _pg_node(nid: int, groups: list[dict]) -> object:
    m = msg(nid, cs.METADATA, name="## process_group:init ##")
    m.inputs.values = str([json.dumps(groups)])  # as Chakra's PyTorch converter writes it
    return m


def _torch_meta() -> object:
    meta = cs.GlobalMetadata(version="0.0.4")
    meta.attr.add(name="schema", string_val="1.0.3-chakra.0.0.4")
    return meta


def test_pytorch_process_groups(tmp_path: Path) -> None:
    def rank(r: int) -> list:
        mine = {"0": [], "1": [0, 1], "2": [2, 3]}
        groups = [{"pg_name": g, "pg_desc": "x", "ranks": v} for g, v in mine.items() if not v or r in v]
        pg = "1" if r < 2 else "2"
        return [_pg_node(0, groups), msg(1, cs.COMM_COLL, 0, comm_type=cs.ALL_REDUCE, comm_size=8, pg_name=pg)]

    rs = load_rank_set(write_set(tmp_path / "a", [rank(r) for r in range(4)], meta=_torch_meta()), 4)
    assert rs.trace_groups == {"0": (0, 1, 2, 3), "1": (0, 1), "2": (2, 3)}
    assert len(rs.classes) == 1 and rs.classes[0].groups == (("1",), ("1",), ("2",), ("2",))
    bad = [rank(r) for r in range(4)]
    bad[3][0] = _pg_node(0, [{"pg_name": "1", "ranks": [0, 3]}])
    prefix = write_set(tmp_path / "b", bad, meta=_torch_meta())
    with pytest.raises(InputError) as e:
        load_rank_set(prefix, 4)
    assert str(e.value).startswith(f"{prefix}.3.et (rank 3): node 0: process group '1' has ranks [0, 3] here")
    bad[3][0] = _pg_node(0, [{"pg_name": "1", "ranks": [0, 9]}])
    with pytest.raises(InputError, match=r"rank 3\): node 0: process group '1' lists rank 9"):
        load_rank_set(write_set(tmp_path / "c", bad, meta=_torch_meta()), 4)
    damaged = _pg_node(0, [])
    damaged.inputs.values = '[\'[{"pg_name": "1", "ranks": [0, 1\''
    bad[3][0] = damaged
    rs = load_rank_set(write_set(tmp_path / "d", bad, meta=_torch_meta()), 4)
    assert any("rank 3): node 0: a process-group description dse cannot read" in n for n in rs.notes)


# ----- 4. bad input ---------------------------------------------------------------------------------
def _copy(tmp_path: Path, prefix: Path = GPIPE) -> Path:
    shutil.copytree(prefix.parent, tmp_path / prefix.parent.name)
    return tmp_path / prefix.parent.name / prefix.name


def _refused(spec: Path | str, npus: int) -> str:
    with pytest.raises(InputError) as e:
        load_rank_set(spec, npus)
    text = str(e.value)
    assert "\n" not in text and len(text) < 400, text
    return text


def test_missing_extra_and_too_many_rank_files(tmp_path: Path) -> None:
    prefix = _copy(tmp_path)
    assert _refused(prefix, 8).startswith(f"{prefix}.8.et: a rank file past the topology's NPUs (16 rank files for 8")
    assert _refused(prefix, 20).startswith(f"{prefix}.16.et: no such rank file (16 rank files found)")
    assert _refused(DATA / "chakra" / "d_mixed.0.et", 4).startswith(f"{DATA / 'chakra' / 'd_mixed'}.1.et: no such")
    Path(f"{prefix}.2.et").unlink()
    text = _refused(prefix, 16)
    assert text.startswith(f"{prefix}.2.et: no such rank file") and f"{prefix.name}.0.et to {prefix.name}.15.et" in text
    assert _refused(tmp_path / "nothing", 2).startswith("workload: no such Chakra trace")
    lone = tmp_path / "one.et"
    lone.write_bytes(encode([msg(0, cs.COMP, us=1)]))
    assert _refused(lone, 2).startswith(f"workload {str(lone)!r}: one trace file for a topology of 2 NPUs")
    assert load_rank_set(lone, 1).classes[0].graph.nodes[0].duration == 1000


@pytest.mark.parametrize(
    "how",
    ["self", "range", "src", "cpu send", "cpu collective", "negative tag", "no tag", "recv self", "recv dst"],
)
def test_bad_send_or_receive_is_one_line(tmp_path: Path, how: str) -> None:
    nodes = {
        "self": send(5, 1),
        "range": send(5, 3),
        "src": send(5, 0, comm_src=0),
        "cpu send": send(5, 0, is_cpu_op=True),
        "cpu collective": msg(5, cs.COMM_COLL, comm_type=cs.ALL_REDUCE, comm_size=8, is_cpu_op=("int32_val", 1)),
        "negative tag": send(5, 0, tag=-1),
        "no tag": msg(5, cs.COMM_SEND, comm_dst=0, comm_size=8),
        "recv self": recv(5, 1),
        "recv dst": recv(5, 0, comm_dst=0),
    }
    problem = {
        "self": "rank 1 sends to itself (comm_dst 1)",
        "range": "rank 1 sends to rank 3, which the topology does not have",
        "src": "comm_src is 0 in rank 1's trace",
        "cpu send": "a COMM_SEND_NODE with is_cpu_op true",
        "cpu collective": "a COMM_COLL_NODE with is_cpu_op true",
        "negative tag": "comm_tag is -1",
        "no tag": "a COMM_SEND_NODE without comm_tag",
        "recv self": "rank 1 receives from itself (comm_src 1)",
        "recv dst": "comm_dst is 0 in rank 1's trace",
    }[how]
    prefix = write_set(tmp_path, [[msg(0, cs.COMP, us=1)], [msg(0, cs.COMP, us=1), nodes[how]]])
    if how == "range":
        Path(f"{prefix}.2.et").write_bytes(encode([msg(0, cs.COMP, us=1)]))  # 3 NPUs: rank 3 is past them
    text = _refused(prefix, 3 if how == "range" else 2)
    assert text.startswith(f"{prefix}.1.et (rank 1): node 5: {problem}"), text


def test_the_single_rank_reader_checks_its_own_rank(tmp_path: Path) -> None:
    p = tmp_path / "x.1.et"
    p.write_bytes(encode([send(0, 1)]))
    with pytest.raises(InputError, match=r"x\.1\.et: node 0: rank 1 sends to itself"):
        load_trace(p)
    assert load_trace(f"{GPIPE}.4.et").graph.nodes[0].kind == RECV  # the new kinds load


def test_truncated_and_damaged_rank_files(tmp_path: Path) -> None:
    prefix = _copy(tmp_path)
    p = Path(f"{prefix}.3.et")
    data = p.read_bytes()
    p.write_bytes(data[:-5])
    text = _refused(prefix, 16)
    assert text.startswith(f"{p} (rank 3): the node after node ") and "truncated" in text
    p.write_bytes(b"\x1f\x8b" + b"garbage" * 3)
    assert _refused(prefix, 16).startswith(f"{p} (rank 3): a damaged gzip stream")
    p.write_bytes(data[:2] + b"\xff" * 40 + data[42:])
    assert _refused(prefix, 16).startswith(f"{p} (rank 3): ")


def test_limits_before_building(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = 336  # pp_gpipe_S4M4_R4SW4_ppd1_dpd0's 16 files
    monkeypatch.setenv("DSE_MAX_WORK", str(max(16 * STEPS_PER_FILE, (nodes - 1) * READ_STEPS_PER_NODE)))
    assert "reading 336 nodes in 16 rank files" in _refused(GPIPE, 16)
    monkeypatch.setenv("DSE_MAX_WORK", str(16 * STEPS_PER_FILE - 1))
    assert "reading 16 rank files" in _refused(GPIPE, 16)
    monkeypatch.delenv("DSE_MAX_WORK")
    monkeypatch.setenv("DSE_MAX_TRACE_NODES", "10")
    assert _refused(GPIPE, 16).startswith(f"{GPIPE}.0.et (rank 0): ")
