"""Single-dimension closed forms, every kind and collective, one and many chunks (docs/model.md §4)."""

import math

import pytest

from dse import evaluate
from dse.core.topology import Dim, Topology

KINDS = {"ring": 7, "fc": 1, "switch": 3}  # steps on 8 NPUs: P-1, 1, log2 P
P, B, ALPHA = 8, 50.0, 500.0
S = 2**30


def topo(kind: str) -> Topology:
    return Topology((Dim(kind, P, B, ALPHA),))


def paper_closed_form(coll: str, kind: str, n: int, mode: str) -> float:
    """The exact time of `n` chunks on one dimension in the paper model."""
    c = S / n
    tau = c * (P - 1) / P / B  # RS, AG (output convention) and A2A all send c(P-1)/P per chunk
    lam = KINDS[kind] * ALPHA
    if coll == "all_reduce":  # RS then AG per chunk, on the same server
        if mode == "serialized":
            return 2 * n * (tau + lam)
        return max(2 * n * tau + lam, (n + 1) * tau + 2 * lam)
    if mode == "serialized":
        return n * (tau + lam)
    return n * tau + lam


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("coll", ["all_reduce", "reduce_scatter", "all_gather", "all_to_all"])
@pytest.mark.parametrize("n", [1, 2, 16, 64])
@pytest.mark.parametrize("mode", ["overlapped", "serialized"])
@pytest.mark.parametrize("queue", ["fifo", "scf"])
def test_paper_single_dim(kind, coll, n, mode, queue):
    for sched in ("baseline", "themis"):
        r = evaluate(topo(kind), collective=coll, size=S, chunks=n, scheduler=sched, queue=queue, latency_mode=mode)
        assert math.isclose(r.time_ns, paper_closed_form(coll, kind, n, mode), rel_tol=1e-12)
        # one dimension: the bytes sent are the whole collective's
        want = 2 * S * (P - 1) / P if coll == "all_reduce" else S * (P - 1) / P
        assert math.isclose(r.dim_bytes[0], want, rel_tol=1e-12)
        assert math.isclose(r.bw_utilization, want / B / r.time_ns, rel_tol=1e-12)


def test_latency_hides_behind_transfers_only_when_overlapped():
    t = topo("ring")
    over = evaluate(t, size=S, chunks=64, latency_mode="overlapped", scheduler="baseline")
    ser = evaluate(t, size=S, chunks=64, latency_mode="serialized", scheduler="baseline")
    assert ser.time_ns - over.time_ns == pytest.approx(2 * 64 * 7 * ALPHA - 7 * ALPHA)


# ASTRA-sim 2.x (reference/README.md): GB = 2^30 B, e = 10 ns, hops 2 on a switch, one formula per phase.
E = 10
BETA = B * 2**30 / 1e9


def msg(nbytes: int, hops: int = 1) -> int:
    return int(hops * ALPHA + math.floor(nbytes / BETA))


def astra_phase(kind: str, op: str, c: int) -> int:
    if kind == "ring":
        return {
            "RS": (P - 1) * msg(c // P) + E * P,
            "AG": (P - 1) * msg(c) + E * P,
            "AR": 2 * (P - 1) * msg(c // P) + E * (2 * P - 1),
        }[op]
    if kind == "fc":
        return {"RS": msg(c // P) + 2 * E, "AG": msg(c) + 2 * E, "AR": 2 * msg(c // P) + 3 * E}[op]
    L = 3
    rs = sum(msg(c // 2**k, 2) for k in range(1, L + 1))
    return {
        "RS": rs + E * (L + 1),
        "AG": sum(msg(c * 2**k, 2) for k in range(L)) + E * (L + 1),
        "AR": rs + sum(msg((c // P) * 2**k, 2) for k in range(L)) + E * (2 * L + 1),
    }[op]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("n", [1, 4, 64])
def test_astra_sim_single_dim(kind, n):
    t = topo(kind)
    c = S // n
    for coll, op in (("all_reduce", "AR"), ("reduce_scatter", "RS"), ("all_gather", "AG")):
        r = evaluate(t, collective=coll, size=S, chunks=n, scheduler="baseline", queue="fifo", cost_model="astra-sim")
        assert r.time_ns == n * astra_phase(kind, op, c)
    # Themis runs an all-reduce as RS then AG: one endpoint delay more per chunk (§3.3)
    r = evaluate(t, size=S, chunks=n, scheduler="themis", queue="fifo", cost_model="astra-sim")
    assert r.time_ns == n * (astra_phase(kind, "RS", c) + astra_phase(kind, "AG", c // P))
    if kind == "ring":
        assert r.time_ns == n * (astra_phase(kind, "AR", c) + E)
