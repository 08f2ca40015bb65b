"""Collective names and the phase kinds they are made of (docs/model.md §4-§5)."""

from __future__ import annotations

from dse.core.errors import InputError

ALL_REDUCE = "all_reduce"
REDUCE_SCATTER = "reduce_scatter"
ALL_GATHER = "all_gather"
ALL_TO_ALL = "all_to_all"
COLLECTIVES: tuple[str, ...] = (ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL)
# Rooted collectives: one GPU's data to every GPU (broadcast) or every GPU's sum to one (reduce).
# They have no chunk-phase form, so only a closed-form cost model (`nccl`) times them.
BROADCAST = "broadcast"
REDUCE = "reduce"
ROOTED: tuple[str, ...] = (BROADCAST, REDUCE)

# Phase kinds: one chunk's step on one dimension.
RS, AG, AR, A2A = "RS", "AG", "AR", "A2A"

_ALIASES = {
    "all_reduce": ALL_REDUCE,
    "allreduce": ALL_REDUCE,
    "ar": ALL_REDUCE,
    "reduce_scatter": REDUCE_SCATTER,
    "reducescatter": REDUCE_SCATTER,
    "rs": REDUCE_SCATTER,
    "all_gather": ALL_GATHER,
    "allgather": ALL_GATHER,
    "ag": ALL_GATHER,
    "all_to_all": ALL_TO_ALL,
    "alltoall": ALL_TO_ALL,
    "a2a": ALL_TO_ALL,
}
_ROOTED_ALIASES = {"broadcast": BROADCAST, "bcast": BROADCAST, "reduce": REDUCE}


def parse_collective(name: str, *, rooted: bool = False) -> str:
    """The canonical collective name; accepts `all-reduce`, `allreduce`, `AR` and the like.
    `rooted`: broadcast and reduce are accepted too (a one-collective run, which its cost model
    checks: `CostModel.check`); elsewhere they are refused, saying where they run."""
    key = str(name).strip().lower().replace("-", "_")
    if key in _ALIASES:
        return _ALIASES[key]
    if rooted and key in _ROOTED_ALIASES:
        return _ROOTED_ALIASES[key]
    where = ", ".join(ROOTED) + (" under --cost-model nccl" if rooted else ": dse evaluate --cost-model nccl")
    raise InputError("collective", f"unknown collective {name!r}", ", ".join(COLLECTIVES) + "; " + where)


def first_phase_kind(collective: str) -> str:
    """The kind of a chunk's first phase: AG for a standalone all-gather, A2A for all-to-all, else RS."""
    return {ALL_GATHER: AG, ALL_TO_ALL: A2A}.get(collective, RS)


def nominal_bytes_sent(collective: str, size: float, shape: tuple[int, ...], *, ag_input_shard: bool = False) -> float:
    """Bytes one NPU must send for the whole collective, whatever the orders (docs/model.md §6.5).

    `size` is the per-NPU input for RS and AR and the per-NPU output for AG, unless
    `ag_input_shard` (ASTRA-sim's convention: `size` is the input shard, the output N times it).
    Broadcast and reduce pass `size` along a chain of the N NPUs (NCCL's ring): N−1 sends of it.
    All-to-all is hierarchical, one phase per dimension, each sending size·(P−1)/P.
    """
    n = 1
    for p in shape:
        n *= p
    if collective == ALL_REDUCE:
        return 2.0 * size * (n - 1) / n
    if collective in (REDUCE_SCATTER, BROADCAST, REDUCE):
        return size * (n - 1) / n
    if collective == ALL_GATHER:
        return size * (n - 1) if ag_input_shard else size * (n - 1) / n
    return sum(size * (p - 1) / p for p in shape)
