"""Point-to-point messages, communicator-group collectives (`dse.costs.p2p`), the roofline
(`dse.costs.roofline`) and the reduction cost of `local-mem-bw` (`AstraSimModel`), against closed
forms and ASTRA-sim 2.x's runs (../shared/reference/astra-sim-2-p2p.csv, astra-sim-2-stage.csv:
the golden values below are copied from them, so no test here needs ../shared)."""

from __future__ import annotations

import math

import pytest

from dse import evaluate
from dse.core.collectives import A2A, AG, AR, RS
from dse.core.errors import InputError
from dse.core.topology import Dim, parse_topology
from dse.costs import AstraSim1Model, AstraSimModel, PaperModel, get_cost_model
from dse.costs.base import CostModel
from dse.costs.p2p import (
    GROUP_BUNDLE_NS,
    coords,
    group_chunks,
    group_collective_ends_ns,
    group_collective_ns,
    message_ns,
)
from dse.costs.roofline import roofline_ns

ASTRA = AstraSimModel()
KIB, MIB = 1024, 2**20
R4FC4SW2 = "Ring(4,100,500)_FC(4,150,300)_SW(2,50,1000)"  # the reference's R4_FC4_SW2.yml


def beta(gbps: float) -> float:
    """ASTRA-sim 2.x's bytes per ns of `gbps` GB/s (GB = 2^30 B)."""
    return gbps * 2**30 / 1e9


def proc(m: int, mem: float) -> int:
    """ASTRA-sim 2.x's reduction of a bundle of `m` bytes: a write and two reads, each truncated."""
    return 3 * int(m / mem * 1e9)


# ----- ranks and messages ------------------------------------------------------------------------


def test_coords_dim0_fastest() -> None:
    t = parse_topology(R4FC4SW2)
    assert coords(t, 0) == (0, 0, 0)
    assert coords(t, 5) == (1, 1, 0)
    assert coords(t, 23) == (3, 1, 1)
    assert [sum(c * s for c, s in zip(coords(t, r), (1, 4, 16))) for r in range(32)] == list(range(32))


#: ASTRA-sim 2.x ping-pongs (one round trip = 2 T): (topology, src, dst, bytes) -> round trip ns,
#: from astra-sim-2-p2p.csv (rows p2p_pp_*, check closed_form_ok)
PING_PONG = {
    (R4FC4SW2, 0, 1, KIB): 1018,  # ring, 1 hop
    (R4FC4SW2, 0, 2, 64 * KIB): 3220,  # ring, 2 hops
    (R4FC4SW2, 0, 4, MIB): 13620,  # fully connected
    (R4FC4SW2, 0, 16, 16 * MIB): 629000,  # switch: 2 hops
    (R4FC4SW2, 0, 5, 256 * MIB): 5001000,  # dims 0 and 1 differ: dim 0 alone is charged
    (R4FC4SW2, 0, 23, MIB): 20530,  # all three differ: dim 0
    (R4FC4SW2, 0, 20, 16 * MIB): 208932,  # dims 1 and 2: dim 1
    ("Ring(8,50,500)", 0, 4, MIB): 43062,  # 4 hops either way
    ("Ring(8,50,500)", 7, 1, 64 * KIB): 4440,  # the short way, across 0
    ("SW(8,50,500)", 0, 5, KIB): 2038,
    ("FC(8,50,500)", 0, 5, 256 * MIB): 10001000,
}


@pytest.mark.parametrize("case", list(PING_PONG), ids=[f"{t}:{a}->{b}:{s}" for t, a, b, s in PING_PONG])
def test_astra_sim_message_against_runs(case: tuple) -> None:
    topo, a, b, size = case
    t = parse_topology(topo)
    assert message_ns(ASTRA, t, a, b, size) + message_ns(ASTRA, t, b, a, size) == PING_PONG[case]


def test_astra_sim_message_closed_form() -> None:
    t = parse_topology("Ring(8,100,500)_FC(4,150,300)_SW(2,50,1000)")
    s = 3_000_001
    assert message_ns(ASTRA, t, 0, 3, s) == math.floor(3 * 500 + s / beta(100))
    assert message_ns(ASTRA, t, 0, 5, s) == math.floor(3 * 500 + s / beta(100))  # 8 - 5 = 3 the other way
    assert message_ns(ASTRA, t, 0, 8 * 3, s) == math.floor(300 + s / beta(150))
    assert message_ns(ASTRA, t, 0, 32 + 8 + 1, s) == message_ns(ASTRA, t, 0, 1, s)  # the lowest dim only
    assert message_ns(ASTRA, t, 0, 32, s) == math.floor(2 * 1000 + s / beta(50))


def test_astra_sim_message_truncated_once() -> None:
    t = parse_topology("Ring(4,100,0.6)")  # 2 hops of 0.6 ns: 1.2 + S/β, truncated after the sum
    s = int(0.9 * beta(100)) + 1  # S/β just above 0.9
    assert s / beta(100) > 0.9
    assert message_ns(ASTRA, t, 0, 2, s) == 2  # ⌊1.2 + 0.9..⌋, not ⌊1.2⌋ + ⌊0.9..⌋ = 1


def test_paper_message_store_and_forward() -> None:
    paper = PaperModel()
    s = 1_000_000
    assert message_ns(paper, parse_topology("Ring(8,100,500)"), 0, 3, s) == 3 * 500 + s / 50
    assert message_ns(paper, parse_topology("Ring(2,100,500)"), 0, 1, s) == 500 + s / 100  # both links
    assert message_ns(paper, parse_topology("FC(8,70,300)"), 0, 5, s) == 300 + s / 10  # one of 7 links
    assert message_ns(paper, parse_topology("SW(8,100,700)"), 0, 5, s) == 700 + s / 100
    t = parse_topology(R4FC4SW2)
    across = (500 + s / 50) + (300 + s / 50) + (1000 + s / 50)  # 0 -> 23 = (3, 1, 1): every dim, 1 hop each
    assert message_ns(paper, t, 0, 23, s) == pytest.approx(across, rel=1e-15)
    assert message_ns(paper, t, 0, 20, s) == pytest.approx((300 + s / 50) + (1000 + s / 50), rel=1e-15)


def test_astra_sim_1_message_store_and_forward() -> None:
    t = parse_topology("Ring(4,100,500,links=2,nic=7)_SW(2,50,1000,links=1,nic=7,router=20)")
    s = 5_000_003

    def one(hops: int, lat: float, rate: float, router: float) -> int:
        return int(int(int(hops * lat) + s / rate) + 2 * 7) + int(router)

    ring = one(1, 500, 100 / 2 * 2**30 / 1e9 * 2, 0)  # a ring message gets its 2 links
    sw = one(2, 1000, 50 * 2**30 / 1e9, 20)
    model = AstraSim1Model()
    assert message_ns(model, t, 0, 1, s) == ring
    assert message_ns(model, t, 0, 4, s) == sw
    assert message_ns(model, t, 0, 5, s) == ring + sw
    with pytest.raises(InputError, match="no links"):
        message_ns(model, parse_topology("Ring(4,100,500)"), 0, 1, s)


def test_message_bad_input() -> None:
    t = parse_topology("Ring(8,100,500)")
    with pytest.raises(InputError, match="to itself"):
        message_ns(ASTRA, t, 3, 3, 10)
    with pytest.raises(InputError, match="rank 8 is not an NPU"):
        message_ns(ASTRA, t, 0, 8, 10)
    with pytest.raises(InputError, match="source rank"):
        message_ns(ASTRA, t, -1, 0, 10)
    with pytest.raises(InputError, match="message size"):
        message_ns(ASTRA, t, 0, 1, -5)

    class Other(CostModel):
        name = "other"

        def _phase_cost(self, dim: Dim, kind: str, c: float, latency_mode: str) -> tuple[float, float]:
            return 0.0, 0.0

        def bandwidth_time(self, dim: Dim, kind: str, c: float) -> float:
            return 0.0

        def bytes_per_ns(self, dim: Dim, collective: str | None = None) -> float:
            return 1.0

    with pytest.raises(InputError, match="no point-to-point rule"):
        message_ns(Other(), t, 0, 1, 10)


# ----- collectives on groups (astra-sim) -----------------------------------------------------------


def test_group_chunks() -> None:
    assert group_chunks("all_reduce", 100, 4, 8) == (25, 4)
    assert group_chunks("all_reduce", 103, 4, 8) == (25, 5)  # every chunk at the full size
    assert group_chunks("all_reduce", 10, 4, 8) == (8, 4)  # raised to the NPU count
    assert group_chunks("all_to_all", 10, 4, 8) == (8, 4)  # so is an all-to-all (Sys::determine_chunk_size)
    assert group_chunks("all_gather", 10, 4, 8) == (2, 5)  # not an all-gather
    with pytest.raises(InputError, match="cannot be cut"):
        group_chunks("all_gather", 3, 4, 8)


def ring_phase(p: int, kind: str, c: int, t_msg: int, red: int = 0) -> int:
    """A uniform ring phase with 10 ns bundles: n messages of T, n + 1 bundles, `red` each reduction."""
    n = {RS: p - 1, AG: p - 1, AR: 2 * (p - 1), A2A: p * (p - 1) // 2}[kind]
    reductions = p - 1 if kind in (RS, AR) else 0
    return n * t_msg + (n + 1) * GROUP_BUNDLE_NS + reductions * red


@pytest.mark.parametrize(
    "collective,kind", [("reduce_scatter", RS), ("all_reduce", AR), ("all_gather", AG), ("all_to_all", A2A)]
)
@pytest.mark.parametrize("mem", [None, 900e9])
def test_group_ring_on_many_dims_uniform(collective: str, kind: str, mem: float | None) -> None:
    """Members that differ on dim 1 only (the FC): every ring step is one FC message."""
    t = parse_topology("Ring(2,200,200)_FC(4,100,500)")
    model = AstraSimModel(local_mem_bytes_per_s=mem)
    size = 3 * MIB + 7
    c = size // 4
    m = c if kind == AG else c // 4
    t_msg = math.floor(500 + m / beta(100))
    red = 0 if mem is None else proc(c // 4, mem)
    assert group_chunks(collective, size, 4, 8) == (c, 5)  # ⌈S/c⌉: a fifth chunk, at the full size
    want = 5 * ring_phase(4, kind, c, t_msg, red)  # the chunks one after another
    ends = group_collective_ends_ns(model, t, collective, size, [1, 3, 5, 7], splits=4)
    assert ends == (want,) * 4
    assert group_collective_ns(model, t, collective, size, [1, 3, 5, 7], splits=4) == want


def test_group_ring_links_differ() -> None:
    """On Ring(8), the group [0, 1, 2, 3]'s ring closes with a 3-hop link 3 -> 0: each member ends
    after the three links into it and the two before (2 T1 + T3), member 3 after three short ones."""
    t = parse_topology("Ring(8,100,500)")
    size = 4 * MIB
    m = size // 4
    t1, t3 = math.floor(500 + m / beta(100)), math.floor(1500 + m / beta(100))
    ends = group_collective_ends_ns(ASTRA, t, "reduce_scatter", size, [0, 1, 2, 3], splits=1)
    assert ends == (40 + 2 * t1 + t3,) * 3 + (40 + 3 * t1,)
    # the members' order is the ring's: 0 -> 2 -> 1 -> 3 -> 0 has links of 2, 1, 2 and 3 hops
    t2 = math.floor(1000 + m / beta(100))
    assert group_collective_ends_ns(ASTRA, t, "reduce_scatter", size, [0, 2, 1, 3], splits=1) == (
        40 + t1 + t2 + t3,
        40 + t2 + t3 + t2,
        40 + t3 + t2 + t1,
        40 + t2 + t1 + t2,
    )


def test_group_members_start_apart() -> None:
    """Two members, the second 10 us late: the first waits for its message, the second's arrived."""
    t = parse_topology("Ring(2,200,200)_FC(4,100,500)")
    size = MIB
    t_msg = math.floor(500 + (size // 2) / beta(100))
    assert t_msg < 10000
    ends = group_collective_ends_ns(ASTRA, t, "reduce_scatter", size, [0, 2], splits=1, starts=[0, 10000])
    assert ends == (10000 + 10 + t_msg + 10, 10000 + 10 + 10)
    # two chunks: each member starts its second as soon as its own first ends
    two = group_collective_ends_ns(ASTRA, t, "reduce_scatter", size, [0, 2], splits=2, starts=[0, 10000])
    half = math.floor(500 + (size // 4) / beta(100))
    first = (10020 + half, 10020)  # member 0 waited for member 1's message; member 1's had arrived
    # second chunk: member 0 sends at first[0] + 10, member 1 at 10030 and waits for member 0's
    assert two == (first[0] + 10 + 10, first[0] + 10 + half + 10)


def test_group_halving_doubling_on_a_switch() -> None:
    """One dimension: its algorithm. A tiny bandwidth makes each byte count, so ASTRA-sim's size
    truncation shows: an AR of 84 bytes on 4 sends 42, 21, then 2·⌊21/2⌋ = 20 and 40."""
    t = parse_topology("SW(8,0.000001,500)")

    def tm(m: int) -> int:
        return math.floor(1000 + m / beta(0.000001))

    mem = 900e9
    model = AstraSimModel(local_mem_bytes_per_s=mem)
    ar = group_collective_ns(model, t, "all_reduce", 84, [0, 1, 2, 3], splits=1)
    assert ar == tm(42) + tm(21) + tm(20) + tm(40) + 5 * GROUP_BUNDLE_NS + proc(21, mem)  # one reduced bundle
    rs = group_collective_ns(model, t, "reduce_scatter", 84, [4, 5, 6, 7], splits=1)
    assert rs == tm(42) + tm(21) + 3 * GROUP_BUNDLE_NS + proc(21, mem)
    ag = group_collective_ns(model, t, "all_gather", 84, [4, 5, 6, 7], splits=1)
    assert ag == tm(84) + tm(168) + 3 * GROUP_BUNDLE_NS
    with pytest.raises(InputError, match="power-of-two group"):
        group_collective_ns(model, t, "all_reduce", 84, [0, 1, 2], splits=1)


def test_group_direct_on_fully_connected() -> None:
    """Direct on a Local ring: all messages at once; an all-reduce's second round reduces too
    (its refill has (P−1)^2 reducing bundles), unless the group has two members."""
    t = parse_topology("FC(8,100,500)")
    mem = 900e9
    model = AstraSimModel(local_mem_bytes_per_s=mem)
    c = 8 * MIB
    m = c // 4
    t_msg = math.floor(500 + m / beta(100))
    assert group_collective_ns(model, t, "reduce_scatter", c, [0, 2, 4, 6], splits=1) == t_msg + 20 + proc(m, mem)
    assert group_collective_ns(model, t, "all_to_all", c, [0, 2, 4, 6], splits=1) == t_msg + 20
    assert (
        group_collective_ns(model, t, "all_gather", c, [0, 2, 4, 6], splits=1) == math.floor(500 + c / beta(100)) + 20
    )
    assert group_collective_ns(model, t, "all_reduce", c, [0, 2, 4, 6], splits=1) == 2 * t_msg + 30 + 2 * proc(m, mem)
    m2 = c // 2
    t2 = math.floor(500 + m2 / beta(100))
    assert group_collective_ns(model, t, "all_reduce", c, [1, 6], splits=1) == 2 * t2 + 30 + proc(m2, mem)
    # members apart: the second round waits for the last first-round message
    ends = group_collective_ends_ns(ASTRA, t, "all_reduce", c, [0, 2, 4, 6], splits=1, starts=[0, 0, 0, 3000])
    assert ends == (3000 + 2 * t_msg + 30,) * 3 + (3000 + 2 * t_msg + 30,)


def test_group_of_one_and_refusals() -> None:
    t = parse_topology("Ring(2,200,200)_FC(4,100,500)")
    assert group_collective_ns(ASTRA, t, "all_reduce", MIB, [3], splits=4) == 4 * GROUP_BUNDLE_NS
    with pytest.raises(InputError, match="never finishes"):
        group_collective_ns(ASTRA, parse_topology("FC(8,100,500)"), "all_reduce", MIB, [3], splits=4)
    with pytest.raises(InputError, match="every NPU"):
        group_collective_ns(ASTRA, t, "all_reduce", MIB, [7, 6, 5, 4, 3, 2, 1, 0], splits=4)
    with pytest.raises(InputError, match="maps a group"):
        group_collective_ns(get_cost_model("paper"), t, "all_reduce", MIB, [0, 1], splits=4)
    with pytest.raises(InputError, match="listed twice"):
        group_collective_ns(ASTRA, t, "all_reduce", MIB, [0, 1, 0], splits=4)
    with pytest.raises(InputError, match="rank 9 is not an NPU"):
        group_collective_ns(ASTRA, t, "all_reduce", MIB, [0, 9], splits=4)
    with pytest.raises(InputError, match="no members"):
        group_collective_ns(ASTRA, t, "all_reduce", MIB, [], splits=4)
    with pytest.raises(InputError, match="start times"):
        group_collective_ends_ns(ASTRA, t, "all_reduce", MIB, [0, 1], splits=4, starts=[0.0])
    with pytest.raises(InputError, match="splits"):
        group_collective_ns(ASTRA, t, "all_reduce", MIB, [0, 1], splits=0)
    with pytest.raises(InputError, match="unknown collective"):
        group_collective_ns(ASTRA, t, "broadcast", MIB, [0, 1], splits=4)


# ----- the reduction cost of local-mem-bw ------------------------------------------------------------


def test_default_model_unchanged() -> None:
    assert repr(AstraSimModel()) == "AstraSimModel(endpoint_delay_ns=10)"
    assert AstraSimModel().batch_kernel == "astra-sim"
    assert AstraSimModel().phase_reduction_ns(Dim("ring", 4, 100), RS, 10**6) == 0
    with_mem = AstraSimModel(local_mem_bytes_per_s=900e9)
    assert with_mem.batch_kernel is None  # the C kernel has no reduction cost
    assert AstraSimModel.batch_kernel == "astra-sim"
    with pytest.raises(InputError, match="local-mem-bw"):
        AstraSimModel(local_mem_bytes_per_s=0.0)


def test_phase_reduction_per_algorithm() -> None:
    mem = 900e9
    model = AstraSimModel(local_mem_bytes_per_s=mem)
    c = 10**7 + 3
    ring, direct, hd = Dim("ring", 4, 100), Dim("fc", 4, 100), Dim("switch", 8, 100)
    assert model.phase_reduction_ns(ring, RS, c) == 3 * proc(c // 4, mem)
    assert model.phase_reduction_ns(ring, AR, c) == 3 * proc(c // 4, mem)
    assert model.phase_reduction_ns(direct, RS, c) == proc(c // 4, mem)  # P−1 at once
    assert model.phase_reduction_ns(direct, AR, c) == proc(c // 4, mem)  # the second round does not reduce
    assert model.phase_reduction_ns(hd, RS, c) == proc(c // 4, mem) + proc(c // 8, mem)  # L−1 = 2 of 3 steps
    assert model.phase_reduction_ns(hd, AR, c) == proc(c // 4, mem) + proc(c // 8, mem)
    assert model.phase_reduction_ns(Dim("switch", 2, 100), RS, c) == 0  # one step, no reducing bundle
    for d in (ring, direct, hd):
        assert model.phase_reduction_ns(d, AG, c) == model.phase_reduction_ns(d, A2A, c) == 0
    base = AstraSimModel()
    for d in (ring, direct, hd):
        busy = model.phases(parse_topology(d.notation()), "reduce_scatter", (0,), c, latency_mode="serialized")[0].busy
        assert busy == base.phase_ns(d, RS, c) + model.phase_reduction_ns(d, RS, c)


def test_reduction_in_evaluate() -> None:
    """The Python costing (no kernel) gives the kernel's numbers when M is huge, and adds the
    reductions otherwise: a one-chunk ring all-reduce on Ring(8) carries 7 of ⌊c/8⌋ bytes."""
    size = 64 * MIB
    kw = dict(collective="all_reduce", size=size, chunks=1, scheduler="baseline", queue="fifo")
    base = evaluate("Ring(8,50,500)", cost_model="astra-sim", **kw).time_ns
    huge = evaluate("Ring(8,50,500)", cost_model=AstraSimModel(local_mem_bytes_per_s=1e21), **kw).time_ns
    assert huge == base
    mem = 900e9
    got = evaluate("Ring(8,50,500)", cost_model=AstraSimModel(local_mem_bytes_per_s=mem), **kw).time_ns
    assert got == base + 7 * proc(size // 8, mem)


# ----- the roofline ------------------------------------------------------------------------------


def test_roofline_closed_forms() -> None:
    peak, mem = 300e12, 900e9
    assert roofline_ns(2**20, 2**20, peak, mem) == math.floor(2**20 / mem * 1e9)  # intensity 1: memory-bound
    f, t = 8 * 2**30, 2**20  # intensity 8192: compute-bound
    assert roofline_ns(f, t, peak, mem) == math.floor(f / peak * 1e9)
    assert roofline_ns(f, 0, peak, mem) == 0  # ASTRA-sim skips it
    assert roofline_ns(0, t, peak, mem) == 0
    for bad in (-1, math.nan, math.inf, True):
        with pytest.raises(InputError):
            roofline_ns(bad, t, peak, mem)
    with pytest.raises(InputError, match="peak-perf"):
        roofline_ns(f, t, 0.0, mem)


#: the compute nodes of STAGE traces, (num_ops, tensor_size): count, and each rank's compute ns in
#: astra-sim-2-stage.csv (finish − exposed), at peak-perf 300 and local-mem-bw 1e12 (lminf) or 900
FSDP_RANK0 = {
    (1572864, 1572864): 8, (2097152, 2097152): 28, (4194304, 4194304): 4, (6291456, 2097152): 4,
    (6291456, 6291456): 4, (10485760, 2097152): 18, (12582912, 2097152): 12, (32768000, 32768000): 4,
    (2147483648, 1048576): 4, (2147483648, 2097152): 8, (6442450944, 2097152): 4, (6442450944, 3145728): 4,
    (6442450944, 6291456): 4, (8589934592, 2097152): 8, (8589934592, 4194304): 8, (8589934592, 8388608): 8,
    (67108864000, 2097152): 2, (67108864000, 32768000): 2, (67108864000, 65536000): 2,
}  # fmt: skip
LLAMA_RANK8 = {
    (524288, 524288): 56, (1048576, 1048576): 8, (1572864, 524288): 8, (1572864, 1572864): 8,
    (2621440, 524288): 40, (3145728, 524288): 24, (9961472, 9961472): 4, (65536000, 65536000): 2,
    (1073741824, 524288): 8, (1073741824, 1048576): 8, (1073741824, 2097152): 8, (2952790016, 1441792): 16,
    (2952790016, 2097152): 16, (2952790016, 2883584): 16, (3221225472, 1572864): 8, (3221225472, 2097152): 8,
    (3221225472, 3145728): 8, (16777216000, 524288): 4, (16777216000, 8192000): 4, (16777216000, 65536000): 4,
}  # fmt: skip


@pytest.mark.parametrize(
    "nodes,mem_gbps,want",
    [
        (FSDP_RANK0, 1e12, 2374912),
        (FSDP_RANK0, 900.0, 2723620),
        (LLAMA_RANK8, 1e12, 1488376),
        (LLAMA_RANK8, 900.0, 1842358),
    ],
    ids=["gpt_fsdp_dp8-lminf", "gpt_fsdp_dp8-lm900", "llama-rank8-lminf", "llama-rank8-lm900"],
)
def test_roofline_against_runs(nodes: dict, mem_gbps: float, want: int) -> None:
    peak, mem = 300 * 1000000000000, mem_gbps * 1000000000  # as ASTRA-sim forms them from its system file
    assert sum(k * roofline_ns(f, t, peak, mem) for (f, t), k in nodes.items()) == want
