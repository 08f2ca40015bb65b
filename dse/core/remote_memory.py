"""Memory nodes (``MEM_LOAD_NODE`` / ``MEM_STORE_NODE``): ASTRA-sim's remote-memory file and dse's model.

ASTRA-sim 2.x hands a memory node's ``tensor_size`` S to its remote-memory backend
(``workload/Workload.cc`` ``issue_remote_mem``), in the analytical build ``AnalyticalRemoteMemory``
(github.com/astra-sim/astra-memory-analytical, the commit astra-sim 518bd51 pins), configured by the
JSON file of ``--remote-memory-configuration``::

    {"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 500, "remote-mem-bw": 50}

A request of S bytes takes **latency + ⌊S / bw⌋ ns** (``get_remote_mem_runtime``), with
``remote-mem-latency`` in ns and ``remote-mem-bw`` in GB/s, GB = 1e9 B, i.e. bytes per ns; both are
held as whole numbers (uint64), the quotient is taken in double precision and truncated once.
``memory-type`` says who waits for whom:

- ``PER_NPU_MEMORY_EXPANSION``: every NPU has its own memory: requests never wait for each other.
- ``PER_NODE_MEMORY_EXPANSION``: ``num-nodes`` nodes of ``num-npus-per-node`` NPUs; NPU r uses node
  r // num-npus-per-node, which serves one request at a time, first come first served, the next
  starting the ns the previous ends (`RemoteMemory.server`).
- ``MEMORY_POOL``: one pool for all NPUs, one request at a time, first come first served.
- ``NO_MEMORY_EXPANSION``: no remote memory; ASTRA-sim exits on a memory node. dse instead reads
  the tensor from the NPU's own memory (`choose_memory`): the issue asks memory nodes to run.

On the NPU a memory node holds the communication slot (``HardwareResource.cc``: every GPU node
that is neither compute nor a receive does), or the CPU slot with ``is_cpu_op``.

**Local memory** (dse's model, used when no remote memory is configured): one pass of S bytes over
the system file's ``local-mem-bw`` M (bytes/s, GB = 1e9 B), **⌊S / M x 1e9⌋ ns**, the same term
(and double arithmetic) as one of the three of ASTRA-sim's local reduction step
(`dse.core.astra_system.SystemConfig.reduction_ns`); a load reads S bytes once, a store writes
them once.

dse refuses in one line what ASTRA-sim would run into undefined behaviour with: a missing
``memory-type``, an unknown one, a remote type without a positive ``remote-mem-bw`` (a division by
0), a per-node type without ``num-nodes`` and ``num-npus-per-node``, non-whole numbers (ASTRA-sim
truncates them silently), and, against a topology (`RemoteMemory.check_npus`), NPUs beyond the last
node. A key ASTRA-sim does not read is a warning line, as ASTRA-sim ignores it.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dse.core.astra_system import SystemConfig, read_json_object, whole
from dse.core.errors import InputError
from dse.core.limits import MAX_NPUS, MAX_NS

NO_EXPANSION = "NO_MEMORY_EXPANSION"
PER_NODE = "PER_NODE_MEMORY_EXPANSION"
PER_NPU = "PER_NPU_MEMORY_EXPANSION"
POOL = "MEMORY_POOL"
MEMORY_TYPES = (NO_EXPANSION, PER_NODE, PER_NPU, POOL)
KEYS = ("memory-type", "remote-mem-latency", "remote-mem-bw", "num-nodes", "num-npus-per-node")


@dataclass(frozen=True)
class RemoteMemory:
    """A remote-memory file as ASTRA-sim reads it: `latency_ns` (``remote-mem-latency``),
    `bandwidth` (``remote-mem-bw``: GB/s = bytes per ns), `num_nodes` and `npus_per_node` (per-node
    expansion only, else 0). `warnings`: lines about keys ASTRA-sim ignores."""

    path: str
    memory_type: str
    latency_ns: int = 0
    bandwidth: int = 0
    num_nodes: int = 0
    npus_per_node: int = 0
    warnings: tuple[str, ...] = ()

    @property
    def remote(self) -> bool:
        """Whether memory nodes go to remote memory (every type but ``NO_MEMORY_EXPANSION``)."""
        return self.memory_type != NO_EXPANSION

    def server(self, rank: int) -> int | None:
        """The memory server whose one-at-a-time queue `rank`'s requests join: its node
        (per-node expansion), 0 (the pool); None where requests never wait (per NPU, or none)."""
        if self.memory_type == PER_NODE:
            return rank // self.npus_per_node
        return 0 if self.memory_type == POOL else None

    def check_npus(self, npus: int, field: str = "--remote-memory") -> None:
        """Refuse a per-node file whose nodes do not hold `npus` NPUs (ASTRA-sim indexes past them)."""
        if self.memory_type == PER_NODE and self.num_nodes * self.npus_per_node < npus:
            raise InputError(
                f"{field} {self.path}: num-nodes",
                f"{self.num_nodes} nodes of {self.npus_per_node} NPUs do not hold the topology's {npus} NPUs",
                f"num-nodes x num-npus-per-node >= {npus}",
            )


@dataclass(frozen=True)
class LocalMemory:
    """The NPU's own memory: `bytes_per_s`, the system file's ``local-mem-bw`` x 1e9."""

    bytes_per_s: float


def local_memory(bytes_per_s: float | None) -> LocalMemory | None:
    """Local memory of `bytes_per_s` (``local-mem-bw`` x 1e9, as ASTRA-sim converts its GB/s:
    `dse.core.astra_system.SystemConfig.local_mem_bytes_per_s`); None for None (no model)."""
    if bytes_per_s is None:
        return None
    if not 0 < bytes_per_s < math.inf:
        raise InputError("local-mem-bw", f"{bytes_per_s!r} bytes/s is not a bandwidth", "a positive finite number")
    return LocalMemory(float(bytes_per_s))


def choose_memory(remote: RemoteMemory | None, local: SystemConfig | float | None) -> RemoteMemory | LocalMemory | None:
    """What memory nodes run against: the remote memory when the file configures one, else local
    memory (``NO_MEMORY_EXPANSION`` included: module docstring) at the system file's
    ``local-mem-bw`` (its value as given: 1e12 GB/s stays a bandwidth here, whose loads of less
    than 1 TB take 0 ns) or at `local` bytes/s (``--mem-bw`` x 1e9), else None (no model: a memory
    node is then refused by `memory_ns`)."""
    if remote is not None and remote.remote:
        return remote
    if isinstance(local, SystemConfig):
        return None if local.local_mem_bw is None else local_memory(local.local_mem_bw * 1e9)
    return local_memory(local)


def memory_ns(memory: RemoteMemory | LocalMemory | None, size_bytes: int) -> int:
    """The ns a memory node of `size_bytes` takes (module docstring): latency + ⌊S / bw⌋ for
    remote memory, ⌊S / M x 1e9⌋ for local memory. Waiting for a shared server (per-node, pool)
    is the caller's (`RemoteMemory.server`). None, or a file without remote memory, is one
    `InputError`: there is no model to time the node with."""
    if isinstance(memory, LocalMemory):
        return int(float(size_bytes) / memory.bytes_per_s * 1e9)
    if memory is None or not memory.remote:
        raise InputError(
            "--remote-memory",
            "a memory node (MEM_LOAD/MEM_STORE) and no memory to time it with",
            "a remote-memory file with a remote memory-type, or local-mem-bw in the system file",
        )
    return memory.latency_ns + int(float(size_bytes) / float(memory.bandwidth))


def load_remote_memory(path: str | Path, field: str = "--remote-memory") -> RemoteMemory:
    """ASTRA-sim's remote-memory file as a `RemoteMemory` (module docstring); bad content is one
    `InputError` naming `field`, the file and the key."""
    data = read_json_object(path, field)
    where = f"{field} {path}"
    warnings = []
    for key in data:
        if key not in KEYS:
            near = difflib.get_close_matches(key, KEYS, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            warnings.append(f"{where}: {key}: not an ASTRA-sim key, ignored as ASTRA-sim ignores it{hint}")
    kind = data.get("memory-type")
    if kind is None:
        raise InputError(f"{where}: memory-type", "missing (ASTRA-sim leaves it undefined)", ", ".join(MEMORY_TYPES))
    if not isinstance(kind, str) or kind not in MEMORY_TYPES:
        raise InputError(f"{where}: memory-type", f"{kind!r} is not one of them", ", ".join(MEMORY_TYPES))
    kw: dict[str, Any] = {"path": str(path), "memory_type": kind}
    if "remote-mem-latency" in data:
        kw["latency_ns"] = whole(data["remote-mem-latency"], f"{where}: remote-mem-latency", 0, int(MAX_NS), "ns")
    if kind != NO_EXPANSION:
        if "remote-mem-bw" not in data:
            raise InputError(
                f"{where}: remote-mem-bw", f"missing with {kind} (ASTRA-sim divides by it)", "1 or more GB/s"
            )
        kw["bandwidth"] = whole(data["remote-mem-bw"], f"{where}: remote-mem-bw", 1, 2**63 - 1, "GB/s")
    elif "remote-mem-bw" in data:
        whole(data["remote-mem-bw"], f"{where}: remote-mem-bw", 0, 2**63 - 1, "GB/s")
    if kind == PER_NODE:
        for key, attr in (("num-nodes", "num_nodes"), ("num-npus-per-node", "npus_per_node")):
            if key not in data:
                raise InputError(f"{where}: {key}", f"missing with {kind}", "a whole number from 1")
            kw[attr] = whole(data[key], f"{where}: {key}", 1, MAX_NPUS)
    return RemoteMemory(**kw, warnings=tuple(warnings))


__all__ = [
    "KEYS",
    "MEMORY_TYPES",
    "LocalMemory",
    "RemoteMemory",
    "choose_memory",
    "load_remote_memory",
    "local_memory",
    "memory_ns",
]
