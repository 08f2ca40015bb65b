"""ASTRA-sim 2.x configuration files read as they are: system configurations (`dse.core.astra_system`),
communicator groups (`dse.core.comm_groups`) and remote memory (`dse.core.remote_memory`).

Every file of the shared reference loads (skipped without ../shared, saying so); copies of a few in
tests/data/astra_configs load without it; each refusal is one InputError naming the key; the memory
model against its closed form."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dse.core.astra_system import IMPLEMENTATION_KEYS, SystemConfig, load_system
from dse.core.comm_groups import group_name, load_comm_groups
from dse.core.errors import InputError
from dse.core.remote_memory import (
    LocalMemory,
    RemoteMemory,
    choose_memory,
    load_remote_memory,
    local_memory,
    memory_ns,
)
from dse.core.topology import parse_topology

from .conftest import DATA, SHARED

CONFIGS = DATA / "astra_configs"
P2P = SHARED / "workloads" / "astra-sim-2-p2p" / "configs"
STAGE_CONFIGS = SHARED / "workloads" / "stage-configs"
SHARED_SYSTEMS = sorted((P2P / "system").glob("*.json")) + sorted((STAGE_CONFIGS / "system").glob("*.json"))
SHARED_GROUPS = sorted((P2P / "comm_groups").glob("*.json")) + sorted(
    (SHARED / "workloads" / "stage").glob("*/workload.json")
)
needs_shared = pytest.mark.skipif(not SHARED_SYSTEMS, reason=f"the shared reference is not here ({SHARED})")

# A file of the reference's kind, to vary key by key.
BASE = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring", "direct", "halvingDoubling"],
    "all-gather-implementation": ["ring", "direct", "halvingDoubling"],
    "reduce-scatter-implementation": ["ring", "direct", "halvingDoubling"],
    "all-to-all-implementation": ["ring", "direct", "direct"],
    "collective-optimization": "localBWAware",
    "local-mem-bw": 900.0,
    "boost-mode": 0,
    "intra-dimension-scheduling": "FIFO",
    "inter-dimension-scheduling": "ascending",
    "roofline-enabled": 1,
    "peak-perf": 300,
}
R_FC_SW = "Ring(2,200,200)_FC(4,100,500)_SW(2,50,1000)"


@pytest.fixture
def tmp():
    d = Path(tempfile.mkdtemp(prefix="dse-astra-cfg-"))
    yield d
    shutil.rmtree(d)


def write(folder: Path, content: object, name: str = "cfg.json") -> Path:
    p = folder / name
    p.write_text(content if isinstance(content, str) else json.dumps(content))
    return p


def topology_of(sys_path: Path):
    """The network file a reference system file goes with (same name up to `_s<splits>`)."""
    stem = sys_path.name.split("_s")[0]
    net = sys_path.parents[1] / "network" / f"{stem}.yml"
    return parse_topology(str(net))


# ----------------------------------------------------------------------------- every shared file
@needs_shared
@pytest.mark.parametrize("path", SHARED_SYSTEMS, ids=lambda p: p.name)
def test_every_shared_system_file_loads_and_fits_its_topology(path):
    cfg = load_system(path)
    raw = json.loads(path.read_text())
    assert cfg.chunks == raw["preferred-dataset-splits"]
    assert cfg.scheduler == {"ascending": "baseline", "offlineGreedy": "themis"}[raw["inter-dimension-scheduling"]]
    assert cfg.queue == {"FIFO": "fifo", "smallestFirst": "scf"}[raw["intra-dimension-scheduling"]]
    assert cfg.endpoint_delay_ns == 10 and cfg.active_chunks == 1
    if raw.get("roofline-enabled"):
        assert cfg.roofline == (raw["peak-perf"] * 1e12, raw["local-mem-bw"] * 1e9)
    else:
        assert cfg.roofline is None
    topo = topology_of(path)
    # the all-reduce, reduce-scatter and all-gather lists are what dse runs on every file
    warnings = cfg.check_topology(topo, ["all_reduce", "reduce_scatter", "all_gather"])
    assert all("trace-enabled" in w or "all-to-all" in w for w in warnings)
    a2a = raw["all-to-all-implementation"]
    kinds = [d.kind for d in topo.dims]
    if a2a == [{"ring": "ring"}.get(k, "direct") for k in kinds]:
        assert cfg.check_topology(topo) == list(cfg.warnings)
    else:  # halvingDoubling on a Switch: ASTRA-sim exits on such an all-to-all, dse runs it direct
        with pytest.raises(InputError, match=r"all-to-all-implementation\[\d\]: 'halvingDoubling'"):
            cfg.check_topology(topo)


@needs_shared
@pytest.mark.parametrize("path", SHARED_GROUPS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_shared_group_file_loads(path):
    raw = json.loads(path.read_text())
    npus = 1 + max(r for ranks in raw.values() for r in ranks)
    groups = load_comm_groups(path, npus)
    assert groups == {k: tuple(v) for k, v in raw.items()}


@needs_shared
def test_the_shared_remote_memory_file_loads():
    mem = load_remote_memory(P2P / "remote_memory.json")
    assert mem == RemoteMemory(str(P2P / "remote_memory.json"), "NO_MEMORY_EXPANSION")
    assert not mem.remote and choose_memory(mem, 9e11) == LocalMemory(9e11)


# ----------------------------------------------------------------------------- the shipped copies
def test_the_shipped_copies_load_without_the_shared_reference():
    themis = load_system(CONFIGS / "FC4_R4_s4_offlineGreedy_smallestFirst.json")
    assert (themis.scheduler, themis.queue, themis.chunks) == ("themis", "scf", 4)
    assert themis.roofline is None and themis.local_mem_bytes_per_s is None  # 1e12 GB/s: infinite
    assert themis.check_topology(parse_topology("FC(4,100,500)_Ring(4,50,500)")) == []

    stage = load_system(CONFIGS / "FC4_R2_SW2_s4_offlineGreedy_smallestFirst_roofline_pp300_lm900.json")
    assert stage.roofline == (3e14, 9e11) and stage.local_mem_bytes_per_s == 9e11
    assert stage.check_topology(parse_topology("FC(4,150,300)_Ring(2,100,500)_SW(2,50,1000)")) == []

    traced = load_system(CONFIGS / "R4_SW4_s4_ascending_FIFO_trace.json")
    trace, a2a = traced.check_topology(parse_topology("Ring(4,100,500)_SW(4,50,500)"), ["all_reduce"])
    assert "trace-enabled: ignored" in trace and "all-to-all-implementation[1]" in a2a

    roof = load_system(CONFIGS / "R2_FC4_SW2_s4_ascending_FIFO_roofline_pp400_lm2000.json")
    assert (roof.scheduler, roof.queue, roof.roofline) == ("baseline", "fifo", (4e14, 2e12))
    (line,) = roof.check_topology(parse_topology(R_FC_SW), ["all_reduce", "all_gather"])
    assert "all-to-all-implementation[2]: 'halvingDoubling'" in line and "runs no all-to-all" in line

    groups = load_comm_groups(CONFIGS / "gpt_dp2_tp2_pp2_groups.json", 8)
    assert groups["5"] == (0, 2) and groups["16"] == (7,) and len(groups) == 16
    assert load_comm_groups(CONFIGS / "comm_groups_16_4.json", 16)["8"] == (3, 7, 11, 15)
    assert not load_remote_memory(CONFIGS / "remote_memory.json").remote


# ----------------------------------------------------------------------------- what values become
def test_values_become_dse_parameters(tmp):
    cfg = load_system(write(tmp, {**BASE, "endpoint-delay": 25, "active-chunks-per-dimension": 2}))
    assert isinstance(cfg, SystemConfig)
    assert (cfg.endpoint_delay_ns, cfg.active_chunks, cfg.chunks) == (25, 2, 4)
    assert cfg.implementation("all-reduce") == ("ring", "direct", "halvingDoubling")
    # ASTRA-sim's defaults where a key is left out
    bare = load_system(write(tmp, {"preferred-dataset-splits": 16}))
    assert (bare.scheduler, bare.queue, bare.endpoint_delay_ns, bare.active_chunks) == (
        "baseline",
        "fifo",
        10,
        1,
    )
    assert bare.roofline is None and bare.local_mem_bytes_per_s is None and bare.reduction_ns(10**9) == 0
    for gbps, bytes_per_s in ((1e12, None), (2.0**54, None), (9.99e11, 9.99e20)):
        assert load_system(write(tmp, {**BASE, "local-mem-bw": gbps})).local_mem_bytes_per_s == bytes_per_s


def test_reduction_is_three_truncated_passes(tmp):
    cfg = load_system(write(tmp, {**BASE, "local-mem-bw": 900.0}))
    # 1 MiB at 9e11 B/s: 1048576 / 9e11 x 1e9 = 1165.08 ns, truncated, three times
    assert cfg.reduction_ns(2**20) == 3 * 1165
    inf = load_system(write(tmp, {**BASE, "local-mem-bw": 1e12}))  # infinite for the models, exact here
    assert inf.reduction_ns(2**40) == 3 and inf.reduction_ns(10**11) == 0 and inf.local_mem_bytes_per_s is None


def test_with_implementations_takes_the_exact_non_default_algorithms(tmp):
    ring_everywhere = ["ring", "ring", "ring"]
    lists = {k: ring_everywhere for k in IMPLEMENTATION_KEYS.values()}
    cfg = load_system(write(tmp, {**BASE, **lists}))
    topo = parse_topology(R_FC_SW)
    with pytest.raises(InputError, match=r"all-reduce-implementation\[1\]: 'ring' on dimension 1 \(FullyConnected\)"):
        cfg.check_topology(topo)
    ringed = cfg.with_implementations(topo)
    assert [d.algorithm for d in ringed.dims] == ["ring", "ring", "ring"] and ringed.shape == topo.shape
    assert cfg.check_topology(ringed) == []
    # direct on a Ring is not dse's formula there (peers several hops away): left, then refused
    direct = load_system(write(tmp, {**BASE, **{k: ["direct", "direct", "direct"] for k in lists}}))
    assert direct.with_implementations(topo).dims[0].algorithm == "ring"
    with pytest.raises(InputError, match=r"\[0\]: 'direct' on dimension 0 \(Ring\), where dse runs ring"):
        direct.check_topology(direct.with_implementations(topo))


# ----------------------------------------------------------------------------- refusals, one line each
REFUSALS = [
    ({"preferred-dataset-splits": None}, "preferred-dataset-splits", "missing"),
    ({"preferred-dataset-splits": 0}, "preferred-dataset-splits", "out of range"),
    ({"preferred-dataset-splits": 2.5}, "preferred-dataset-splits", "not a whole number"),
    ({"preferred-dataset-splits": "4"}, "preferred-dataset-splits", "not a whole number"),
    ({"active-chunks-per-dimension": True}, "active-chunks-per-dimension", "not a whole number"),
    ({"endpoint-delay": -1}, "endpoint-delay", "out of range"),
    ({"scheduling-policy": "RANDOM"}, "scheduling-policy", "not one of them"),
    ({"collective-optimization": "fast"}, "collective-optimization", "not one of them"),
    ({"inter-dimension-scheduling": "offlineGreedyFlex"}, "inter-dimension-scheduling", "no offlineGreedyFlex"),
    ({"inter-dimension-scheduling": "roundRobin"}, "inter-dimension-scheduling", "keeps its rotation"),
    ({"intra-dimension-scheduling": "RG"}, "intra-dimension-scheduling", "RG queue"),
    ({"roofline-enabled": False}, "roofline-enabled", "false included"),
    ({"roofline-enabled": 1, "peak-perf": None}, "peak-perf", "missing with roofline-enabled"),
    ({"peak-perf": 0}, "peak-perf", "positive number of TFLOP/s"),
    ({"local-mem-bw": "fast"}, "local-mem-bw", "positive number of GB/s"),
    ({"all-reduce-implementation": "ring"}, "all-reduce-implementation", "a string where a list"),
    ({"all-gather-implementation": ["ring", "tree", "ring"]}, r"all-gather-implementation\[1\]", "no ASTRA-sim"),
    ({"model-shared-bus": 1}, "model-shared-bus", "shared memory bus"),
    ({"replay-only": 1}, "replay-only", "replaying its duration"),
    ({"all-reduce-implementation-custom": ["x"]}, "all-reduce-implementation-custom", "custom collectives"),
]


@pytest.mark.parametrize(("change", "key", "problem"), REFUSALS, ids=[f"{r[1]}-{i}" for i, r in enumerate(REFUSALS)])
def test_each_refusal_is_one_line_naming_the_key(tmp, change, key, problem):
    data = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    path = write(tmp, data)
    with pytest.raises(InputError, match=problem) as e:
        load_system(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"--system {path}: ")
    assert e.value.field.split(": ", 1)[1].startswith(key.replace("\\", ""))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "not valid JSON"),
        ("[1, 2]", "a list where a JSON object belongs"),
        ('{"preferred-dataset-splits": NaN}', "NaN is not a JSON number"),
        ('{"preferred-dataset-splits": 4, "preferred-dataset-splits": 8}', "given twice"),
        ('{"preferred-dataset-splits": 1e400}', "not a whole number"),
    ],
)
def test_a_file_that_is_no_json_object_is_one_line(tmp, text, problem):
    with pytest.raises(InputError, match=problem) as e:
        load_system(write(tmp, text))
    assert "\n" not in str(e.value)


def test_missing_file_and_size_limit_are_one_line(tmp, monkeypatch):
    with pytest.raises(InputError, match="no such file"):
        load_system(tmp / "nope.json")
    monkeypatch.setenv("DSE_MAX_TEXT_BYTES", "100")
    with pytest.raises(InputError, match="DSE_MAX_TEXT_BYTES"):
        load_system(write(tmp, {**BASE, "pad": "x" * 200}))


def test_lists_against_the_topology(tmp):
    topo = parse_topology(R_FC_SW)
    short = load_system(write(tmp, {**BASE, "reduce-scatter-implementation": ["ring", "direct"]}))
    with pytest.raises(InputError, match="reduce-scatter-implementation: 2 names for 3 dimensions"):
        short.check_topology(topo)
    (line,) = short.check_topology(topo, ["all_reduce", "all_to_all"])
    assert "runs no reduce-scatter" in line
    hd = load_system(write(tmp, {**BASE, "all-to-all-implementation": ["ring", "direct", "halvingDoubling"]}))
    with pytest.raises(InputError, match=r"\[2\]: 'halvingDoubling' on dimension 2 \(Switch\), where dse runs direct"):
        hd.check_topology(topo, ["all_to_all"])
    none = load_system(write(tmp, {"preferred-dataset-splits": 4}))
    with pytest.raises(InputError, match="all-reduce-implementation: missing"):
        none.check_topology(topo, ["all_reduce"])
    assert len(none.check_topology(topo, [])) == 4  # four lists missing, none needed


def test_collective_optimization_matters_for_an_all_reduce_on_two_dims(tmp):
    base = load_system(write(tmp, {**BASE, "collective-optimization": "baseline"}))
    with pytest.raises(InputError, match="collective-optimization: baseline"):
        base.check_topology(parse_topology(R_FC_SW), ["all_reduce"])
    assert base.check_topology(parse_topology(R_FC_SW), ["all_gather", "reduce_scatter", "all_to_all"]) == []
    one_dim = {**BASE, "collective-optimization": None, **{k: ["ring"] for k in IMPLEMENTATION_KEYS.values()}}
    unset = load_system(write(tmp, {k: v for k, v in one_dim.items() if v is not None}))
    assert unset.check_topology(parse_topology("Ring(8,100,500)")) == []
    two = {**one_dim, **{k: ["ring", "ring"] for k in IMPLEMENTATION_KEYS.values()}}
    unset2 = load_system(write(tmp, {k: v for k, v in two.items() if v is not None}))
    with pytest.raises(InputError, match="collective-optimization: missing"):
        unset2.check_topology(parse_topology("Ring(2,100,500)_Ring(4,100,500)"), ["all_reduce"])


def test_keys_that_change_no_time_are_warning_lines(tmp):
    cfg = load_system(write(tmp, {**BASE, "boost-mode": 1, "roofline-enable": 1, "L": 3, "track-local-mem": 1}))
    lines = cfg.check_topology(parse_topology(R_FC_SW))
    assert len(lines) == 4 and all("\n" not in w and w.startswith("--system ") for w in lines)
    assert any("roofline-enable: not an ASTRA-sim key" in w and "did you mean roofline-enabled" in w for w in lines)
    assert any("boost-mode: 1 ignored" in w for w in lines)
    quiet = load_system(write(tmp, {**BASE, "L": 0, "model-shared-bus": 0, "replay-only": 0}))
    assert quiet.warnings == ()


# ----------------------------------------------------------------------------- communicator groups
def test_groups_keep_the_files_order_and_plain_names(tmp):
    groups = load_comm_groups(write(tmp, {"2": [3, 1, 2], "010": [0]}), 4)
    assert groups == {"2": (3, 1, 2), "10": (0,)}
    assert [group_name(n) for n in ("", "0", "00", "7", "07", "pg_x")] == [None, None, None, "7", "7", "pg_x"]


@pytest.mark.parametrize(
    ("content", "group", "problem"),
    [
        ({"1": [0, 4]}, "'1'", "rank 4 is not in the topology's 4 NPUs"),
        ({"1": [-1]}, "'1'", "rank -1 is not in"),
        ({"1": [0, 1, 0]}, "'1'", "rank 0 listed twice"),
        ({"3": []}, "'3'", "an empty group"),
        ({"1": [0], "2": "0,1"}, "'2'", "str where a list of ranks"),
        ({"1": [0, 1.0]}, "'1'", "rank 1.0 is not an integer"),
        ({"1": [True]}, "'1'", "rank True is not an integer"),
        ({"0": [0, 1]}, "'0'", "0 is reserved for all ranks"),
        ({"tp": [0, 1]}, "'tp'", "not a whole number"),
        ({"1": [0], "01": [1]}, "'01'", "the same group as '1'"),
    ],
)
def test_each_bad_group_is_one_line_naming_it(tmp, content, group, problem):
    path = write(tmp, content)
    with pytest.raises(InputError, match=problem) as e:
        load_comm_groups(path, 4)
    assert str(e.value).startswith(f"--comm-groups {path}: group {group}:") and "\n" not in str(e.value)


def test_a_group_file_that_is_no_object_is_refused(tmp):
    with pytest.raises(InputError, match="a list where a JSON object belongs"):
        load_comm_groups(write(tmp, "[[0, 1]]"), 2)


# ----------------------------------------------------------------------------- memory
@given(
    latency=st.integers(0, 10**6),
    bw=st.integers(1, 10**4),
    size=st.integers(0, 2**53),
)
def test_remote_memory_ns_is_latency_plus_truncated_bytes_over_bandwidth(latency, bw, size):
    mem = RemoteMemory("m.json", "PER_NPU_MEMORY_EXPANSION", latency, bw)
    expect = latency + int(float(size) / float(bw))
    assert memory_ns(mem, size) == expect
    if size < 2**52:  # where a double holds size/bw to better than a ns
        assert abs(memory_ns(mem, size) - (latency + size // bw)) <= 1


def test_memory_closed_forms(tmp):
    mem = load_remote_memory(
        write(
            tmp,
            {
                "memory-type": "PER_NODE_MEMORY_EXPANSION",
                "remote-mem-latency": 500,
                "remote-mem-bw": 50,
                "num-nodes": 2,
                "num-npus-per-node": 4,
            },
        )
    )
    assert memory_ns(mem, 10**6) == 500 + 20_000  # 1 MB at 50 B/ns
    assert [mem.server(r) for r in (0, 3, 4, 7)] == [0, 0, 1, 1]
    mem.check_npus(8)
    with pytest.raises(InputError, match="2 nodes of 4 NPUs do not hold the topology's 16 NPUs"):
        mem.check_npus(16)
    pool = load_remote_memory(write(tmp, {"memory-type": "MEMORY_POOL", "remote-mem-bw": 3}))
    assert memory_ns(pool, 10) == 3 and pool.server(9) == 0
    # local memory: one pass at local-mem-bw (decimal GB/s, given in bytes/s)
    local = local_memory(900.0 * 1e9)
    assert local_memory(None) is None
    with pytest.raises(InputError, match="not a bandwidth"):
        local_memory(0.0)
    assert local == LocalMemory(9e11) and memory_ns(local, 2**20) == 1165
    assert memory_ns(choose_memory(None, 2e12), 2 * 10**6) == 1000
    assert choose_memory(pool, 9e11) is pool and choose_memory(None, None) is None
    lminf = load_system(write(tmp, {**BASE, "local-mem-bw": 1e12}))
    assert choose_memory(None, lminf) == LocalMemory(1e21) and memory_ns(choose_memory(None, lminf), 10**9) == 0
    assert choose_memory(load_remote_memory(CONFIGS / "remote_memory.json"), lminf) == LocalMemory(1e21)
    assert choose_memory(None, load_system(write(tmp, {"preferred-dataset-splits": 1}))) is None
    with pytest.raises(InputError, match="no memory to time it with"):
        memory_ns(None, 1)


@pytest.mark.parametrize(
    ("content", "key", "problem"),
    [
        ({}, "memory-type", "missing"),
        ({"memory-type": "HBM"}, "memory-type", "not one of them"),
        ({"memory-type": "MEMORY_POOL"}, "remote-mem-bw", "missing with MEMORY_POOL"),
        ({"memory-type": "MEMORY_POOL", "remote-mem-bw": 0}, "remote-mem-bw", "out of range"),
        ({"memory-type": "MEMORY_POOL", "remote-mem-bw": 1.5}, "remote-mem-bw", "not a whole number"),
        (
            {"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-bw": 1, "remote-mem-latency": -2},
            "remote-mem-latency",
            "out of range",
        ),
        ({"memory-type": "PER_NODE_MEMORY_EXPANSION", "remote-mem-bw": 1}, "num-nodes", "missing"),
    ],
)
def test_each_bad_remote_memory_file_is_one_line(tmp, content, key, problem):
    path = write(tmp, content)
    with pytest.raises(InputError, match=problem) as e:
        load_remote_memory(path)
    assert str(e.value).startswith(f"--remote-memory {path}: {key}:") and "\n" not in str(e.value)


def test_remote_memory_keys_astra_sim_ignores_are_warnings(tmp):
    mem = load_remote_memory(write(tmp, {"memory-type": "NO_MEMORY_EXPANSION", "remote-mem-bandwidth": 5}))
    (line,) = mem.warnings
    assert "remote-mem-bandwidth: not an ASTRA-sim key" in line and "did you mean remote-mem-bw" in line
