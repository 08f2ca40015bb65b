"""Comparing a Chakra trace's other rank files with the one dse runs (`load_trace`'s notes).

The single-rank path runs one rank's file, the representative NPU; ASTRA-sim runs each NPU's own
(as does dse's per-rank path, `dse.training.chakra.rankset`, which reads them all). `check_ranks`
counts the rank files beside it (``PREFIX.<rank>.et``, by name) and notes those that differ from it
in anything but node ids. Only a note depends on them, so only what is cheap is done (a FIFO or a
gzip bomb named like a rank file must not hang or blow up a good rank 0):

- the first `CHECK_RANKS` other files, in rank order, are compared until `CHECK_BYTES` of them
  (decompressed) have been read; at least one is always compared, and the rest are not read;
- each goes through rank 0's bounded reader (`dse.training.chakra.frames`): a FIFO, a device, a
  socket, a directory or an unreadable file is one `InputError` naming it;
- a file equal to rank 0 byte for byte (decompressed) is the same; one over `GROWTH` times rank
  0's size plus 64 KiB (or over ``DSE_MAX_TRACE_BYTES``) differs, and is read no further (node ids
  of up to 10 bytes cannot make a real trace four times longer; on disk, a larger file is not read
  at all); a damaged one (gzip, framing, messages, a trace limit) differs;
- otherwise both are parsed, one message at a time, and compared with node ids replaced by their
  positions in id order: a digest of each node's type, name, duration and attributes, and the
  positions of its dependencies (data and control alike).
"""

from __future__ import annotations

import glob
import hashlib
import re
import stat
from array import array
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.limits import input_limit
from dse.training.chakra.frames import Buffer, read_trace
from dse.training.chakra.messages import parse, positions

CHECK_RANKS = 64
CHECK_BYTES = 32 * 2**20
GROWTH = 4
_SLACK = 64 * 2**10
_RANK_FILE = re.compile(r"^(?P<prefix>.*)\.(?P<rank>\d+)\.et$")


def check_ranks(path: Path, data0: Buffer) -> tuple[int, tuple[str, ...]]:
    """How many rank files share the prefix, and a note if any compared differs from this one."""
    m = _RANK_FILE.match(path.name)
    if not m:
        return 1, ()
    prefix = m.group("prefix")
    files = []
    for p in path.parent.glob(f"{glob.escape(prefix)}.*.et"):
        mm = _RANK_FILE.match(p.name)
        if mm and mm.group("prefix") == prefix:
            files.append((int(mm.group("rank")), p))
    files.sort()
    differ: list[int] = []
    seen: set[int] = {int(m.group("rank"))}
    cap = GROWTH * len(data0) + _SLACK
    sig0: bytes | None = None
    checked = read = 0
    for r, p in files:
        if p == path or r in seen:
            continue
        if checked >= CHECK_RANKS or (checked and read >= CHECK_BYTES):
            break
        seen.add(r)
        checked += 1
        data = _read_rank(p, r, cap)
        read += cap if data is None else len(data)
        if data == data0:
            continue
        if data is not None and sig0 is None:
            sig0 = fingerprint(data0, str(path))
        if data is None or fingerprint(data, str(p)) != sig0:
            differ.append(r)
    if not differ:
        return len(files), ()
    shown = ", ".join(map(str, differ[:8])) + (", ..." if len(differ) > 8 else "")
    return len(files), (
        f"rank {m.group('rank')} is the representative NPU; {len(differ)} of the {len(files)} rank "
        f"files differ from it (ranks {shown})",
    )


def _read_rank(p: Path, rank: int, cap: int) -> Buffer | None:
    """Rank `rank`'s bytes, decompressed; None if it is larger than `cap` (or the trace limit) or
    damaged: it differs. A file that is not a regular one is an `InputError` naming it."""
    field = f"workload rank {rank}"
    cap = min(cap, input_limit("trace_bytes"))
    try:
        st = p.stat()
    except OSError:
        st = None  # the reader names the problem
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_size > cap:
        return None  # not read: a trace larger than that on disk is larger decompressed (gzip's header aside)
    try:
        return read_trace(p, field, cap)
    except InputError as e:
        if e.field == field:  # the file itself: a FIFO, a device, a directory, unreadable, too large
            raise
        return None  # damaged content


def fingerprint(data: Buffer, path: str) -> bytes | None:
    """A digest of a trace equal for traces that differ only in node ids (module docstring); None
    for a trace that cannot be read (damaged, a duplicate id, over a limit)."""
    try:
        p = parse(data, path, content=_node_digest)
        order, pos = positions(p.ids, path)
    except InputError:
        return None
    h = hashlib.blake2b(digest_size=32)
    cut = p.cut
    for k in order:
        h.update(p.nodes[k])
        deps = sorted(-1 if (q := pos(d)) is None else q for d in p.deps[cut[2 * k] : cut[2 * k + 2]])
        h.update(array("q", [len(deps), *deps]).tobytes())
    return h.digest()


def _node_digest(msg: Any, nid: int) -> bytes:
    """A node's content without its id and dependencies: type, duration, name, attributes (any order)."""
    h = hashlib.blake2b(digest_size=16)
    name = msg.name.encode()
    h.update(f"{msg.type},{msg.duration_micros},{len(name)};".encode())
    h.update(name)
    for a in sorted(a.SerializeToString(deterministic=True) for a in msg.attr):
        h.update(len(a).to_bytes(8, "little"))
        h.update(a)
    return h.digest()
