"""Issue 33, traces and workload inputs: bounded Chakra reading, rank files, generator and workload
sizes, special files as inputs; and a few cases of the two campaign classes of
`dse.testing.faults_traces`. Subprocess runs have ``RLIMIT_AS`` at 1 GiB and a timeout
(`faults_traces.run_dse`); nothing is timed."""

from __future__ import annotations

import gzip
import random
import zlib
from pathlib import Path

import pytest

from dse.core.errors import InputError
from dse.testing import faults_traces as ft
from dse.training.chakra import schema as cs
from dse.training.chakra.read import load_trace
from dse.training.workload_graph import graph_nodes

DATA = Path(__file__).parent / "data" / "chakra"
GOOD = DATA / "e_hybrid.0.et"
RING4 = "Ring(4,50,500)"


def _one_line(code: int, err: str, *needles: str) -> None:
    assert code == 2 and err.count("\n") == 1 and err.startswith("dse: error: "), err
    for n in needles:
        assert n in err, err


def _zeros_gzip(path: Path, size: int) -> None:
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        for _ in range(size >> 20):
            f.write(z.compress(b"\0" * (1 << 20)))
        f.write(z.flush())


def _node(nid: int, *deps: int) -> bytes:
    m = cs.ChakraNode(id=nid, name=f"n{nid}", type=cs.COMP, duration_micros=1)
    m.data_deps.extend(deps)
    return ft.delimited(m.SerializeToString())


META = ft.delimited(cs.GlobalMetadata(version="0.0.4").SerializeToString())


# ----- 1. Chakra traces: decompressed bytes, nodes, messages, dependencies, attributes -----------
def test_16kb_gzip_of_empty_nodes_is_refused_by_the_node_count(tmp_path: Path) -> None:
    _zeros_gzip(tmp_path / "t.0.et", 16 << 20)  # 16 KB on disk: 16 million empty messages
    assert (tmp_path / "t.0.et").stat().st_size < 64 << 10
    code, _, err, _ = ft.run_dse(["iterate", "t.0.et", "-t", ft.T4], tmp_path)
    _one_line(code, err, "1,000,001 nodes, more than the limit of 1,000,000 nodes", "DSE_MAX_TRACE_NODES=")


def test_gzip_bomb_is_refused_at_the_decompressed_limit(tmp_path: Path) -> None:
    _zeros_gzip(tmp_path / "t.0.et", 300 << 20)  # 300 MB once decompressed, over the 256 MiB default
    code, _, err, rss = ft.run_dse(["iterate", "t.0.et", "-t", ft.T4], tmp_path)
    _one_line(code, err, "decompressed bytes, more than the limit of 268,435,456", "DSE_MAX_TRACE_BYTES=")
    assert rss < 600 << 10  # KB: the output is kept, never copied


def test_a_node_with_millions_of_dependencies_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    body = b"\x08\x01\x2a" + ft.varint(30 << 20) + b"\x01" * (30 << 20)  # id 1, 30 M packed data deps
    (tmp_path / "t.0.et").write_bytes(gzip.compress(META + ft.delimited(body), 1))
    code, _, err, _ = ft.run_dse(["iterate", "t.0.et", "-t", ft.T4], tmp_path)
    _one_line(code, err, "a message of 31,457,287 bytes, more than the limit of 4,194,304 bytes per message")


def test_dependency_and_attribute_totals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSE_MAX_TRACE_NODES", "100")  # 400 dependencies, 800 attributes per rank
    p = tmp_path / "t.0.et"
    p.write_bytes(META + _node(0) + _node(1, *[0] * 401))
    with pytest.raises(InputError, match=r"more than 400 dependencies .*DSE_MAX_TRACE_NODES=101 "):
        load_trace(p)
    m = cs.ChakraNode(id=0, type=cs.COMP)
    for i in range(801):
        m.attr.add(name=f"a{i}", int64_val=i)
    p.write_bytes(META + ft.delimited(m.SerializeToString()))
    with pytest.raises(InputError, match=r"more than 800 attributes"):
        load_trace(p)
    p.write_bytes(META + b"".join(_node(i, i - 1) if i else _node(0) for i in range(101)))
    with pytest.raises(InputError, match=r"101 nodes, more than the limit of 100 nodes"):
        load_trace(p)


def test_gzip_members_truncation_and_trailing_bytes(tmp_path: Path) -> None:
    data = GOOD.read_bytes()
    p = tmp_path / "z.0.et"
    p.write_bytes(gzip.compress(data[:1000]) + gzip.compress(data[1000:]))  # two members, as gzip reads
    assert load_trace(p).graph == load_trace(GOOD).graph
    for bad, what in ((gzip.compress(data)[:-9], "ends early"), (gzip.compress(data) + b"junk", "after its end")):
        p.write_bytes(bad)
        with pytest.raises(InputError, match=f"a damaged gzip stream.*{what}"):
            load_trace(p)


def test_long_lists_and_strings_stay_one_short_line(tmp_path: Path) -> None:
    m = cs.ChakraNode(id=0, type=cs.COMM_COLL)
    m.attr.add(name="comm_type", string_val="x" * 100_000)
    p = tmp_path / "t.0.et"
    p.write_bytes(META + ft.delimited(m.SerializeToString()))
    with pytest.raises(InputError) as e:
        load_trace(p)
    assert len(str(e.value)) < 300 and "comm_type is 'xxx" in str(e.value)


# ----- 2. rank files ---------------------------------------------------------------------------
def test_a_fifo_rank_file_is_one_line_naming_it(tmp_path: Path) -> None:
    for r in (0, 2, 3):
        (tmp_path / f"t.{r}.et").write_bytes(GOOD.read_bytes())
    ft.make_special(tmp_path / "t.1.et", "fifo")
    code, _, err, _ = ft.run_dse(["iterate", "t.0.et", "-t", RING4], tmp_path)
    _one_line(code, err, "t.1.et (rank 1)", "is a FIFO, not a regular file")


def test_a_bomb_rank_file_is_refused_within_its_limits(tmp_path: Path) -> None:
    """Every rank file is read (per-rank traces): a gzip bomb is refused at the node limit, in
    bounded memory, naming the file."""
    for r in (0, 2, 3):
        (tmp_path / f"t.{r}.et").write_bytes(GOOD.read_bytes())
    _zeros_gzip(tmp_path / "t.1.et", 64 << 20)
    code, _, err, rss = ft.run_dse(["iterate", "t.0.et", "-t", RING4], tmp_path)
    _one_line(code, err, "t.1.et")
    assert rss < 256 << 10


def test_a_partial_set_of_rank_files_is_refused_naming_the_first_missing(tmp_path: Path) -> None:
    for r in (0, 1):
        (tmp_path / f"t.{r}.et").write_bytes(GOOD.read_bytes())
    code, _, err, _ = ft.run_dse(["iterate", "t.0.et", "-t", RING4], tmp_path)
    _one_line(code, err, "t.2.et: no such rank file", "the topology has 4 NPUs")


def test_ranks_that_differ_only_in_ids_are_the_same(tmp_path: Path) -> None:
    msgs = ft.messages(GOOD.read_bytes())
    moved = []
    for body in msgs[1:]:
        m = cs.ChakraNode.FromString(body)
        m.id += 1000
        for deps in (m.data_deps, m.ctrl_deps):
            moved_deps = [d + 1000 for d in deps]
            del deps[:]
            deps.extend(moved_deps)
        moved.append(ft.delimited(m.SerializeToString()))
    (tmp_path / "t.0.et").write_bytes(GOOD.read_bytes())
    (tmp_path / "t.1.et").write_bytes(gzip.compress(ft.delimited(msgs[0]) + b"".join(reversed(moved))))
    (tmp_path / "t.2.et").write_bytes(GOOD.read_bytes()[:-3])  # damaged: differs
    t = load_trace(tmp_path / "t.0.et")
    assert t.ranks == 3 and t.notes == (
        "rank 0 is the representative NPU; 1 of the 3 rank files differ from it (ranks 2)",
    )


# ----- 3. generators and workload sizes --------------------------------------------------------
def test_transformer_500000_layers_is_refused_before_building(tmp_path: Path) -> None:
    code, _, err, rss = ft.run_dse(["iterate", "transformer:layers=500000", "-t", "2D-SW_SW"], tmp_path)
    _one_line(code, err, "reading 1,000,000 layers of transformer:layers=500000", "DSE_MAX_WORK=")
    assert rss < 200 << 10


def test_a_big_workload_is_refused_before_its_graph_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    from dse.training import iteration

    def never(*a: object, **k: object) -> None:
        raise AssertionError("the graph was built")

    monkeypatch.setattr(iteration, "compile_workload", never)
    with pytest.raises(InputError, match=r"at least 120,000 tasks and 179,999 collectives"):
        iteration.iterate("transformer:layers=30000", "2D-SW_SW")


def test_recompute_is_counted_before_it_is_built() -> None:
    from dse.training.workload_graph import compile_workload
    from dse.training.workloads import Layer, Workload

    n = 3000  # every layer re-runs the forward from layer 0: 4.5 million nodes
    layers = tuple(Layer(f"l{i}", 1.0) for i in range(n))
    wl = Workload("r", "DATA", layers, checkpoints=(0,), checkpoint_initiates=tuple(range(1, n)))
    assert graph_nodes(wl) > n * n // 2
    with pytest.raises(InputError, match=r"building 4,5\d\d,\d{3} graph nodes of r"):
        compile_workload(wl)
    small = Workload("s", "DATA", layers[:40], checkpoints=(0, 9), checkpoint_initiates=(5, 17, 30))
    built = len(compile_workload(small, passes=2).nodes)
    assert built <= graph_nodes(small, 2) <= built + 2


@pytest.mark.parametrize(
    "name, text, needle",
    [
        ("w.txt", "DATA\n3\n" + "\n" * 30_000_000, "lines of"),
        ("w.txt", "DATA\n1\nl -1 " + "1 " * 5_000_000 + "\n", "needs 12 fields, got more"),
        ("w.txt", "DATA\n400000\n" + "l -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n" * 400_000, "reading 400,000 layers"),
        ("w.toml", "x = [" + "1," * 2_000_000 + "]\n", "TOML values"),
        ("w.toml", "x = " + "[" * 50_000 + "]" * 50_000 + "\n", "nested too deeply"),
    ],
)
def test_workload_files_refused_before_they_are_built(tmp_path: Path, name: str, text: str, needle: str) -> None:
    (tmp_path / name).write_text(text)
    code, _, err, _ = ft.run_dse(["iterate", name, "-t", "2D-SW_SW"], tmp_path)
    _one_line(code, err, needle)


def test_yaml_size_and_nesting(tmp_path: Path) -> None:
    (tmp_path / "c.yml").write_text("Forward: [" + "1," * 600_000 + "1]\n")
    code, _, err, _ = ft.run_dse(["iterate", "resnet152", "-t", "2D-SW_SW", "--placement", "c.yml"], tmp_path)
    _one_line(code, err, "for a YAML file", "DSE_MAX_TEXT_BYTES=")
    (tmp_path / "c.yml").write_text("Forward: " + "[" * 5000 + "]" * 5000 + "\n")
    code, _, err, _ = ft.run_dse(["iterate", "resnet152", "-t", "2D-SW_SW", "--placement", "c.yml"], tmp_path)
    _one_line(code, err, "c.yml")


# ----- 4. special files as inputs --------------------------------------------------------------
MINE = ("iterate workload", "iterate trace", "trace rank 1", "placement toml", "placement yaml")


WHERE = (*MINE, "workload convert", "workload export")


@pytest.mark.parametrize(
    "kind, where", [(k, WHERE[(i + j) % len(WHERE)]) for i, k in enumerate(ft.SPECIAL) for j in (0, 3)]
)
def test_special_file_as_an_input(tmp_path: Path, kind: str, where: str) -> None:
    target, argv, needs = ft.INPUTS[where]
    for good in needs:
        (tmp_path / good).write_bytes(ft._GOOD[good]())
    ft.make_special(tmp_path / target, kind)
    code, err, problems = ft.checked_run([a.replace("{in}", target) for a in argv], tmp_path)
    assert not problems
    assert code == 2 or (code == 0 and (kind == "empty" or (kind == "sparse" and where == "trace rank 1"))), err


# ----- the campaign classes ----------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_crafted_trace_cases(tmp_path: Path, seed: int) -> None:
    assert ft.trace_case(random.Random(f"test-{seed}"), tmp_path) == []


@pytest.mark.parametrize("seed", range(6))
def test_special_input_cases(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ft, "INPUTS", {k: ft.INPUTS[k] for k in MINE})  # the others' owners test theirs
    assert ft.special_case(random.Random(f"test-{seed}"), tmp_path) == []
