"""Bounded reading of Chakra trace files: their bytes (gzipped or not) and their length-prefixed messages.

A crafted trace (a small gzip bomb, a huge length prefix) must be refused in seconds and well under
1 GB. Every limit here is checked before the memory it guards is taken:

- **The file** goes through `dse.core.files.read_bytes` with the ``trace_bytes`` limit: a FIFO, a
  device or a socket is refused without blocking, and no more than ``DSE_MAX_TRACE_BYTES`` is read.
- **Gzip** is decompressed in blocks (`zlib.decompressobj` with `max_length`), and refused as soon as
  the output passes ``DSE_MAX_TRACE_BYTES`` (256 MiB by default), so a bomb costs that much at most.
  Members follow one another as `gzip.decompress` reads them; anything else after the last member,
  or a stream that ends early, is damage.
- **Messages**: the length prefixes are walked (`frames`) before any message is parsed. A message
  longer than `message_cap` (a 64th of ``DSE_MAX_TRACE_BYTES``, at least 64 KiB: 4 MiB by
  default; real nodes take under 32 KiB) is refused before protobuf allocates for it, since a
  message of empty attributes or packed dependencies takes 8 to 50 times its size once parsed; so
  is a trace whose node count passes ``DSE_MAX_TRACE_NODES``.
- **Totals** (`Budget`), counted as each message is parsed and before anything is built from it: the
  dependencies kept (at most `DEPS_PER_NODE` x ``DSE_MAX_TRACE_NODES``, 4 million by default: each
  becomes an edge) and the attributes (at most `ATTRS_PER_NODE` x ``DSE_MAX_TRACE_NODES``: each is
  looked at). Real traces have 1 to 2 dependencies (PyTorch's about 50) and 2 to 8 attributes per
  node; both refusals name ``DSE_MAX_TRACE_NODES``, which raises them.
"""

from __future__ import annotations

import gc
import zlib
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dse.core.errors import InputError
from dse.core.files import read_bytes
from dse.core.limits import check_input, input_limit
from dse.core.limits import round_up_text as _round_up

GZIP_MAGIC = b"\x1f\x8b"
#: a message may take this share of the decompressed-size limit (and at least `MIN_MESSAGE_CAP`)
MESSAGE_SHARE = 64
MIN_MESSAGE_CAP = 64 * 2**10
DEPS_PER_NODE = 4
ATTRS_PER_NODE = 8
_BLOCK = 1 << 20
#: a trace's bytes: decompressed ones stay in the bytearray they were decompressed into (not copied)
Buffer = bytes | bytearray


def read_trace(path: Path, field: str, cap: int | None = None) -> Buffer | None:
    """A trace file's bytes, decompressed if gzipped (module docstring). With `cap`, a trace larger
    than `cap` once decompressed gives None instead of a refusal (another rank's file, compared only)."""
    raw = read_bytes(path, field, limit="trace_bytes")
    if raw[:2] != GZIP_MAGIC:
        return None if cap is not None and len(raw) > cap else raw
    return gunzip(raw, str(path), cap)


def gunzip(raw: bytes, where: str, cap: int | None = None) -> Buffer | None:
    """`raw` decompressed, refused as soon as the output passes the ``trace_bytes`` limit (or None
    past `cap`, when given); a damaged or truncated stream is one `InputError` naming `where`."""
    limit = input_limit("trace_bytes") if cap is None else min(cap, input_limit("trace_bytes"))
    out = bytearray()
    data = raw
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        while True:
            block = d.decompress(data, min(_BLOCK, limit + 1 - len(out)))
            out += block
            if len(out) > limit:
                if cap is not None:
                    return None
                check_input("trace_bytes", len(out), where, "decompressed bytes")
            data = d.unconsumed_tail
            if d.eof:
                rest = d.unused_data
                if not rest:
                    return out  # not copied to bytes: a bytearray reads the same, in half the memory
                if rest[:2] != GZIP_MAGIC:
                    raise InputError(
                        where, "a damaged gzip stream (bytes after its end)", "a Chakra trace, gzipped or not"
                    )
                d, data = zlib.decompressobj(16 + zlib.MAX_WBITS), rest
            elif not block and not data:
                raise InputError(where, "a damaged gzip stream (it ends early)", "a Chakra trace, gzipped or not")
    except zlib.error as e:
        raise InputError(where, f"a damaged gzip stream ({e})", "a Chakra trace, gzipped or not") from None


def message_cap() -> int:
    """The longest message (the metadata or one node) a trace may hold, in bytes."""
    limit = input_limit("trace_bytes")
    return min(limit, max(MIN_MESSAGE_CAP, limit // MESSAGE_SHARE))


def _varint(data: Buffer, pos: int, where: Callable[[int], str], k: int) -> tuple[int, int]:
    """The varint at `pos` and the position after it; an error names message `k` by `where(k)`."""
    result = shift = 0
    while True:
        if pos >= len(data):
            raise InputError(where(k), "truncated: the file ends inside a length prefix", "a whole Chakra trace")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise InputError(where(k), "damaged: a length prefix longer than 10 bytes", "a Chakra trace")


def frames(data: Buffer, path: str, node_id: Callable[[int, int], str] | None = None) -> tuple[array, array]:
    """The (start, end) of each length-prefixed message of `data`: the metadata, then the nodes.

    Nothing is parsed, but `node_id(start, end)` names a message in an error (a truncated or over-long
    message is "the node after" the one before it). More nodes than ``DSE_MAX_TRACE_NODES`` are
    refused as soon as the count passes it."""
    if not data:
        raise InputError(path, "an empty file", "a Chakra trace: a GlobalMetadata message, then Node messages")
    cap, most = message_cap(), input_limit("trace_nodes") + 1  # + 1: the metadata
    starts, ends = array("Q"), array("Q")

    def where(k: int) -> str:
        """What an error calls message `k`: the metadata, or the node after the one before it."""
        if k == 0:
            return f"{path}: the global metadata"
        before = f"message {k - 1}" if node_id is None else node_id(starts[k - 1], ends[k - 1])
        return f"{path}: the node after {'the metadata' if k == 1 else before}"

    pos, size, k = 0, len(data), 0
    while pos < size:
        if k >= most:
            check_input("trace_nodes", k, path, "nodes")
        n = data[pos]
        if n < 0x80:
            pos += 1
        elif pos + 1 < size and data[pos + 1] < 0x80:  # two bytes: a message of 128 bytes to 16 KiB
            n = (n & 0x7F) | data[pos + 1] << 7
            pos += 2
        else:
            n, pos = _varint(data, pos, where, k)  # `where` only on an error: it may parse a message
        if n > cap:
            _too_long(where(k), n, cap)
        if pos + n > size:
            raise InputError(
                where(k), f"truncated: the message needs {n} bytes, {size - pos} remain", "a whole Chakra trace"
            )
        starts.append(pos)
        ends.append(pos + n)
        pos += n
        k += 1
    return starts, ends


def _too_long(where: str, n: int, cap: int) -> None:
    need = max(n * MESSAGE_SHARE, input_limit("trace_bytes") + 1)
    raise InputError(
        where,
        f"a message of {n:,} bytes, more than the limit of {cap:,} bytes per message "
        f"(1/{MESSAGE_SHARE} of the decompressed-size limit)",
        f"a smaller message; or raise the limit: DSE_MAX_TRACE_BYTES={_round_up(need)} dse ...",
    )


class Budget:
    """The totals one rank's trace may hold (module docstring), counted as its messages are parsed."""

    def __init__(self, path: str) -> None:
        nodes = input_limit("trace_nodes")
        self.path = path
        self.max_deps, self.max_attrs = DEPS_PER_NODE * nodes, ATTRS_PER_NODE * nodes
        self.deps = self.attrs = 0

    def take(self, deps: int, attrs: int) -> None:
        """Count a message's dependencies kept and attributes; refuse past the totals."""
        self.deps += deps
        self.attrs += attrs
        if self.deps > self.max_deps:
            self._refuse("dependencies", self.deps, self.max_deps, DEPS_PER_NODE)
        if self.attrs > self.max_attrs:
            self._refuse("attributes", self.attrs, self.max_attrs, ATTRS_PER_NODE)

    def _refuse(self, what: str, used: int, most: int, share: int) -> None:
        raise InputError(
            self.path,
            f"more than {most:,} {what} ({share} per node of the node limit)",
            f"a smaller trace; or raise the limit: DSE_MAX_TRACE_NODES={_round_up(used / share)} dse ...",
        )


@contextmanager
def gc_paused() -> Iterator[None]:
    """Build a trace's graph without Python's cyclic garbage collector: the graph is a tuple per
    edge and a node per trace node, none of them garbage, which collections would walk again and
    again (with every other object the process holds). On leaving, what was allocated meanwhile
    joins the oldest generation at once (`gc.freeze` then `gc.unfreeze` move whole lists, not
    objects) instead of being walked as young objects at the next allocation; not when objects are
    frozen already (unfreezing would thaw them too). The collector is on again if it was before."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if was:
            gc.enable()
