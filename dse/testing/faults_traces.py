"""Fault classes of dse's inputs: crafted Chakra traces, and special files as inputs.

Each case runs real `dse` commands in a subprocess (``python -m dse``) in an empty folder, with
``RLIMIT_AS`` at 1 GiB (a run that needs more dies with a MemoryError, which the promise forbids)
and a timeout (a run that blocks on a FIFO is killed, and reported), and returns the promises it
broke. Every run must exit 0, or exit 2 with exactly one ``dse: error:`` line (`faults.outcome_problems`),
and leave the folder as it was (a trace export that succeeds may add its own files, nothing else).

- **crafted Chakra traces** (`trace_case`): one of the test data's traces (`TRACES`) damaged by one
  to three random edits (bytes flipped, a length prefix inflated or made 11 bytes long, the file
  cut, node ids duplicated or made huge, thousands of dependencies on one node, on itself, on a
  later node or on none, thousands of attributes, long names and lists, random types, the nodes
  repeated past the node limit), gzipped or not; or a gzip bomb (zeros, or one valid node repeated)
  of a random decompressed size around the limit at a random compression level, sometimes in
  several members; or a good rank 0 beside rank files 1..4 that are FIFOs, directories, symlink
  loops, devices, bombs, garbage, empty or damaged copies. The limits are lowered in the run's
  environment (``DSE_MAX_TRACE_BYTES`` 64 KiB to 4 MiB, ``DSE_MAX_TRACE_NODES`` 50 to 5,000) so that
  a case takes a second, except one case in 16, which keeps the defaults. A set of rank files runs
  per rank on a ring of as many NPUs (every file is read): when one is not a regular file, the
  error must name a bad rank file (the first bad one, in rank order).
- **special files as inputs** (`special_case`): ``/dev/zero``, ``/dev/null``, a FIFO, a directory,
  a socket, a 100 GB sparse file, a symlink loop or an empty file, given as one input of one command
  (`INPUTS`: a workload of ``dse iterate`` and ``dse workload convert|export``, a trace, a trace's
  rank 1, a placement file in TOML or YAML, a sweep file, a study file, a study's space file, the
  journal ``dse study report`` reads, a sweep CSV or a timeline JSON to plot, the network YAML of
  ``dse workload pipeline -t`` or ``dse iterate -t``, the ``--system`` or ``--comm-groups`` JSON of
  ``dse iterate``). Promise: one line and exit 2, nothing changed; exit 0 only for an empty file a
  command may accept.
"""

from __future__ import annotations

import gzip
import os
import random
import re
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import zlib
from collections.abc import Callable
from pathlib import Path

from dse.testing.faults import ASTRA_WORKLOAD, ROOT, SPACE_TOML, STUDY_TOML, SWEEP, Campaign, outcome_problems
from dse.testing.faults_files import snapshot
from dse.training.chakra.frames import frames

TRACES = sorted((ROOT / "tests" / "data" / "chakra").glob("*.et"))
T4 = "4D-Ring_FC_Ring_SW"
MEMORY = 1 << 30
TIMEOUT = 60.0
#: the special kinds of `special_case`, and the rank-file kinds of `trace_case` that must be refused
SPECIAL = ("dev-zero", "dev-null", "fifo", "dir", "socket", "sparse", "loop", "empty")
REFUSED_RANKS = ("fifo", "dir", "loop", "dev-zero", "socket")


# ------------------------------------------------------------------ running dse
#: `python -m dse`, then the process's own peak resident memory (VmHWM, KB) written to argv[1]. A
#: child's ``ru_maxrss`` is no measure of it: Linux carries the forked parent's peak across exec.
_MEASURED = (
    "import atexit, runpy, sys\n"
    "def _hwm(path=sys.argv[1]):\n"
    "    with open('/proc/self/status') as f:\n"
    "        kb = next(int(line.split()[1]) for line in f if line.startswith('VmHWM:'))\n"
    "    with open(path, 'w') as f:\n"
    "        f.write(str(kb))\n"
    "atexit.register(_hwm)\n"
    "sys.argv = ['dse'] + sys.argv[2:]\n"
    "runpy.run_module('dse', run_name='__main__', alter_sys=True)\n"
)


def run_dse(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str, int]:
    """`python -m dse ARGV` in `cwd` under ``RLIMIT_AS`` 1 GiB: (exit code, stdout, stderr, peak
    resident KB of that process alone; the limit, 1 GiB, where it died before saying). A run that
    outlives `TIMEOUT` is killed and reported as exit -9."""
    limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))  # noqa: E731
    full = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1", **(env or {}))
    out, err, hwm = cwd / ".out", cwd / ".err", cwd / ".hwm"  # removed before the folder is compared
    with open(out, "wb") as fo, open(err, "wb") as fe:
        p = subprocess.Popen(
            [sys.executable, "-c", _MEASURED, str(hwm), *argv],
            cwd=cwd,
            env=full,
            stdout=fo,
            stderr=fe,
            stdin=subprocess.DEVNULL,
            preexec_fn=limit,
        )
        timer = threading.Timer(TIMEOUT, p.kill)
        timer.start()
        try:
            _, status = os.waitpid(p.pid, 0)
        finally:
            timer.cancel()
        p.returncode = code = os.waitstatus_to_exitcode(status)
    text = out.read_text(errors="replace"), err.read_text(errors="replace")
    peak = int(hwm.read_text() or MEMORY >> 10) if hwm.exists() else MEMORY >> 10
    for f in (out, err, hwm):
        f.unlink(missing_ok=True)
    return code, text[0], text[1], peak


def checked_run(
    argv: list[str], folder: Path, env: dict[str, str] | None = None, *, new_ok: Callable[[str], bool] = lambda k: False
) -> tuple[int, str, list[str]]:
    """Run `argv` in `folder` and check the promise: exit 0 or one line and exit 2, no traceback,
    nothing in `folder` changed (on exit 0, new entries for which `new_ok` holds aside)."""
    before = snapshot(folder, 1 << 24)
    code, _, err, _ = run_dse(argv, folder, env)
    problems = [f"no answer in {TIMEOUT:g} s (killed)"] if code == -9 else outcome_problems(code, err)
    after = snapshot(folder, 1 << 24)
    changed = [k for k in set(before) | set(after) if before.get(k) != after.get(k)]
    changed = sorted(k for k in changed if not (code == 0 and k not in before and new_ok(k)))
    if changed:
        problems.append(f"exit {code} changed {changed[:4]}")
    return code, err, problems


def make_special(path: Path, kind: str) -> None:
    """Put a special file of `kind` (`SPECIAL`) at `path`."""
    if kind in ("dev-zero", "dev-null"):
        path.symlink_to("/dev/zero" if kind == "dev-zero" else "/dev/null")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path.mkdir()
    elif kind == "socket":  # bound where its name fits (108 bytes), then moved into place
        short = Path(tempfile.mkdtemp(prefix="s", dir="/tmp")) if len(str(path)) > 100 else path.parent
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(short / "s" if short != path.parent else path))
        if short != path.parent:
            os.rename(short / "s", path)
            short.rmdir()
    elif kind == "sparse":
        with open(path, "wb") as f:
            f.truncate(100 * 2**30)
    elif kind == "loop":
        other = path.with_name(path.name + ".loop")
        path.symlink_to(other.name)
        other.symlink_to(path.name)
    else:
        path.write_bytes(b"")


# ------------------------------------------------------------------ crafted traces
def delimited(body: bytes) -> bytes:
    """A varint length prefix, then `body`."""
    return varint(len(body)) + body


def varint(n: int) -> bytes:
    """`n` (at least 0) as a protobuf varint: 7 bits a byte, lowest first."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out) + bytes([n])


def messages(data: bytes) -> list[bytes]:
    """The bodies of a well-formed trace's messages (metadata first), framed by dse's own reader."""
    starts, ends = frames(data, "trace")
    return [data[s:e] for s, e in zip(starts, ends)]


def _edit_node(rng: random.Random, msgs: list[bytes], limit_nodes: int) -> int:
    """One semantic edit of a random node; or how many times to repeat the nodes (else 1)."""
    from dse.training.chakra import schema as cs

    if len(msgs) < 2:
        return 1
    k = rng.randrange(1, len(msgs))
    m = cs.ChakraNode.FromString(msgs[k])
    ids = [cs.ChakraNode.FromString(b).id for b in msgs[1:]]
    op = rng.randrange(8)
    if op == 0:  # a duplicate id
        m.id = rng.choice(ids)
    elif op == 1:  # a huge id, maybe depended on
        m.id = rng.choice((2**64 - 1, 2**63, 2**40 + k))
    elif op == 2:  # many dependencies: one repeated, itself, a later node, a missing one
        dep = rng.choice((rng.choice(ids), m.id, max(ids), 2**64 - 1))
        m.data_deps.extend([dep] * rng.choice((1, 100, 5000, 50000)))
    elif op == 3:  # many dependencies on every node (control ones)
        m.ctrl_deps.extend(ids * rng.randint(1, 200))
    elif op == 4:  # many attributes, unknown or known with odd values (long ones when few)
        count = rng.choice((1, 50, 3000, 20000))
        long = (1, 1000, 100000) if count <= 50 else (1,)
        for i in range(count):
            name = rng.choice(("x", "comm_type", "comm_size", "dse_policy", "involved_dim", f"a{i}"))
            a = m.attr.add(name=name)
            kind = rng.randrange(4)
            if kind == 0:
                a.string_val = "s" * rng.choice(long)
            elif kind == 1:
                a.int64_val = rng.choice((-1, 0, 7, 2**62))
            elif kind == 2:
                a.bool_list.values.extend([True] * rng.choice(long))
    elif op == 5:  # a long name
        m.name = "n" * rng.choice((1000, 100000, 1000000))
    elif op == 6:  # a random type
        m.type = rng.choice((0, 1, 2, 5, 7, 8, 99))
    else:  # the nodes repeated, around the node limit (ids repeated too)
        return max(1, int(limit_nodes * rng.uniform(0.5, 2.5)) // (len(msgs) - 1))
    msgs[k] = m.SerializeToString()
    return 1


def damaged_trace(rng: random.Random, limit_nodes: int, most: int = 8 << 20) -> bytes:
    """A test trace with one to three random edits (module docstring), gzipped or not; its nodes
    repeated to at most about `most` bytes."""
    msgs = messages(rng.choice(TRACES).read_bytes())
    reps = 1
    for _ in range(rng.randint(0, 2)):
        reps = max(reps, _edit_node(rng, msgs, limit_nodes))
    frames = [delimited(m) for m in msgs]
    if rng.random() < 0.3:  # a length prefix inflated, or 11 bytes long
        k = rng.randrange(len(msgs))
        big = rng.choice((len(msgs[k]) + 1, 2**20, 2**31, 2**63))
        frames[k] = (b"\xff" * 10 + b"\x01" if rng.random() < 0.2 else varint(big)) + msgs[k]
    body = b"".join(frames[1:])
    data = frames[0] + body * min(reps, max(1, most // max(1, len(body))))
    for _ in range(rng.randint(0, 2)):
        if rng.random() < 0.5 and data:  # bytes flipped
            for _ in range(rng.randint(1, 8)):
                i = rng.randrange(len(data))
                data = data[:i] + bytes([rng.randrange(256)]) + data[i + 1 :]
        else:  # cut
            data = data[: rng.randrange(len(data) + 1)]
    if rng.random() < 0.4:
        data = gzip.compress(data, rng.randint(1, 9))
        if rng.random() < 0.2:  # cut inside the gzip stream, or garbage after it
            data = data[: rng.randrange(len(data))] if rng.random() < 0.5 else data + b"garbage"
    return data


def gzip_bomb(rng: random.Random, path: Path, size: int) -> None:
    """A gzip stream of `size` decompressed bytes: zeros, or a metadata then one valid node repeated,
    at a random level, sometimes in several members; written a block at a time."""
    from dse.training.chakra import schema as cs

    node = cs.ChakraNode(id=rng.choice((0, 7)), name="n", type=cs.COMP, duration_micros=1)
    node.data_deps.extend([0] * rng.choice((0, 1, 300)))
    unit = b"\0" if rng.random() < 0.4 else delimited(node.SerializeToString())
    head = b"" if unit == b"\0" else delimited(cs.GlobalMetadata(version="0.0.4").SerializeToString())
    block = unit * max(1, (1 << 20) // len(unit))
    members = rng.choice((1, 1, 1, 2, 3))
    with open(path, "wb") as f:
        for part in range(members):
            z = zlib.compressobj(rng.randint(1, 9), zlib.DEFLATED, 31)
            left = size // members
            f.write(z.compress(head if part == 0 else b""))
            while left > 0:
                f.write(z.compress(block[:left]))
                left -= len(block)
            f.write(z.flush())


def trace_case(rng: random.Random, folder: Path) -> list[str]:
    """One crafted-trace case (module docstring): `dse iterate` (or ``workload export``) on it."""
    defaults = rng.random() < 1 / 16
    limit_bytes = 256 * 2**20 if defaults else rng.choice((64, 256, 1024, 4096)) * 2**10
    limit_nodes = 1_000_000 if defaults else rng.choice((50, 500, 5000))
    env = {"DSE_MAX_WORK": "2e6"}
    if not defaults:
        env |= {"DSE_MAX_TRACE_BYTES": str(limit_bytes), "DSE_MAX_TRACE_NODES": str(limit_nodes)}
    trace = folder / "t.0.et"
    what = rng.choice(("damaged", "damaged", "bomb", "ranks"))
    refused_rank = None
    if what == "damaged":
        trace.write_bytes(damaged_trace(rng, limit_nodes, 64 << 20 if defaults else 8 << 20))
    elif what == "bomb":
        gzip_bomb(rng, trace, int(limit_bytes * rng.uniform(0.3, 3 if not defaults else 1.5)))
    else:
        trace.write_bytes(rng.choice(TRACES).read_bytes())
        for r in range(1, rng.randint(2, 5)):
            kind = rng.choice(REFUSED_RANKS + ("bomb", "garbage", "copy", "damaged", "empty"))
            p = folder / f"t.{r}.et"
            if kind == "bomb":
                gzip_bomb(rng, p, int(limit_bytes * rng.uniform(0.3, 3)))
            elif kind == "garbage":
                p.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randint(1, 3000))))
            elif kind == "copy":
                p.write_bytes(trace.read_bytes())
            elif kind == "damaged":
                p.write_bytes(damaged_trace(rng, limit_nodes))
            else:
                make_special(p, "dev-zero" if kind == "dev-zero" else kind)
            if kind in REFUSED_RANKS and refused_rank is None:
                refused_rank = r
    ranks = len(list(folder.glob("t.*.et")))
    if rng.random() >= 0.8:
        argv = ["workload", "export", "t.0.et", "-o", "out", "-t", T4, "--npus", "2"]
    elif ranks > 1:  # a set of rank files: every one is read, one per NPU
        argv = ["iterate", "t.0.et", "-t", f"Ring({ranks},50,500)", "--cost-model", "astra-sim"]
    else:
        argv = ["iterate", "t.0.et", "-t", T4, "--iterations", str(rng.randint(1, 3))]
    code, err, problems = checked_run(argv, folder, env, new_ok=lambda k: k.startswith("out."))
    if refused_rank is not None and code == 0:
        problems.append(f"rank file t.{refused_rank}.et (not a regular file) was not refused")
    elif refused_rank is not None and code == 2 and not re.search(r"\bt\.[1-9]\d*\.et\b", err):
        problems.append(f"the error names no rank file: {err.strip()[:200]}")
    return problems


# ------------------------------------------------------------------ special files as inputs
#: input -> (file name, argv with {in} for it, good files it needs beside it)
INPUTS: dict[str, tuple[str, list[str], tuple[str, ...]]] = {
    "iterate workload": ("w.txt", ["iterate", "{in}", "-t", "2D-SW_SW"], ()),
    "iterate trace": ("t.0.et", ["iterate", "{in}", "-t", T4], ()),
    "iterate trace prefix": ("t.0.et", ["iterate", "t", "-t", T4], ()),
    "trace rank 1": ("g.1.et", ["iterate", "g.0.et", "-t", "Ring(2,50,500)"], ("g.0.et",)),
    "placement toml": ("p.toml", ["iterate", "resnet152", "-t", "2D-SW_SW", "--placement", "{in}"], ()),
    "placement yaml": ("p.yml", ["iterate", "resnet152", "-t", "2D-SW_SW", "--placement", "{in}"], ()),
    "workload convert": ("w.txt", ["workload", "convert", "{in}", "-o", "o.toml"], ()),
    "workload export": ("w.toml", ["workload", "export", "{in}", "-o", "o", "--npus", "1"], ()),
    "sweep file": ("s.toml", ["sweep", "{in}", "--out", "o.csv"], ()),
    "study file": ("st.toml", ["study", "run", "{in}", "--trials", "1", "--storage", "j.journal"], ()),
    "space file": (
        "space.toml",
        ["study", "run", "study.toml", "--trials", "1", "--storage", "j.journal"],
        ("study.toml",),
    ),
    "study report journal": ("r.journal", ["study", "report", "fz", "--storage", "{in}", "--out", "rep"], ()),
    "plot sweep csv": ("in.csv", ["plot", "sweep", "{in}", "--x", "chunks", "--y", "time_ns", "--out", "o.png"], ()),
    "plot timeline json": ("r.json", ["plot", "timeline", "{in}", "--out", "o.png"], ()),
    "pipeline network yaml": (
        "n.yml",
        ["workload", "pipeline", "o", "--stages", "4", "--dp", "2", "--microbatches", "2", "-t", "{in}"],
        (),
    ),
    "iterate network yaml": ("n.yml", ["iterate", "g.0.et", "-t", "{in}", "--cost-model", "astra-sim"], ("g.0.et",)),
    "iterate system json": ("sys.json", ["iterate", "g.0.et", "-t", T4, "--system", "{in}"], ("g.0.et",)),
    "iterate comm groups json": ("cg.json", ["iterate", "g.0.et", "-t", T4, "--comm-groups", "{in}"], ("g.0.et",)),
}
_GOOD = {
    "g.0.et": lambda: TRACES[-1].read_bytes(),
    "study.toml": lambda: STUDY_TOML.encode(),
    "w.txt": lambda: ASTRA_WORKLOAD.encode(),
    "s.toml": lambda: SWEEP.encode(),
    "space.toml": lambda: SPACE_TOML.encode(),
}


def special_case(rng: random.Random, folder: Path) -> list[str]:
    """One special file (`SPECIAL`) as one input (`INPUTS`) of one command (module docstring)."""
    name = rng.choice(sorted(INPUTS))
    kind = rng.choice(SPECIAL)
    target, argv, needs = INPUTS[name]
    for good in needs:
        (folder / good).write_bytes(_GOOD[good]())
    make_special(folder / target, kind)
    code, _, problems = checked_run([a.replace("{in}", target) for a in argv], folder, {"DSE_MAX_WORK": "2e6"})
    if code == 0 and not (kind == "empty" or (kind == "sparse" and name == "trace rank 1")):
        problems.append(f"{kind} as the {name} was accepted (exit 0)")
    return [f"{kind} as {name}: {p}" for p in problems]


CAMPAIGN: Campaign = {
    "crafted Chakra traces": (
        "a damaged trace, a gzip bomb or bad rank files beside a good one: runs (exit 0) or one line and "
        "exit 2, under 1 GiB of address space, nothing written; a rank file that is no regular file is named",
        120,
        trace_case,
    ),
    "special files as inputs": (
        "/dev/zero, /dev/null, a FIFO, a folder, a socket, a 100 GB sparse file or a symlink loop as any "
        "input: one line and exit 2 without blocking, under 1 GiB, nothing changed",
        100,
        special_case,
    ),
}
