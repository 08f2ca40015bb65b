"""Fault class of per-rank traces: damaged and inconsistent per-rank trace sets.

Each case writes a small pipeline trace set with `dse.training.pipeline_traces` (2 to 4 stages x 1
to 3 data-parallel ranks, 1 to 3 microbatches, GPipe or 1F1B, the data-parallel all-reduce on
communicator groups or on ``involved_dim``) and an ASTRA-sim network YAML for it (Ring,
FullyConnected or Switch dimensions of random bandwidths and latencies) in an empty folder, damages
it in one way (`DAMAGES`), and runs ``dse iterate t -t n.yml [--comm-groups t.json] --cost-model M``
in a subprocess (`dse.testing.faults_traces.run_dse`: ``RLIMIT_AS`` 1 GiB, a timeout). The damages:

- **truncated**: a random rank file cut inside a message (or to nothing), maybe gzipped after the
  cut, or its gzipped form cut inside the stream;
- **peer out of range**: a send's destination or a receive's source rewritten past the topology's
  NPUs, to 2^31 or to -1;
- **to itself**: a send's destination (or a receive's source) rewritten to its own rank;
- **deleted**: a random rank file removed;
- **extra**: a rank file past the topology's NPUs beside the others (a copy of one of them);
- **copied**: a rank file replaced by another rank's (its sends and receives name the other rank);
- **group out of range**: a rank of the group file rewritten to one the topology does not have;
- **group twice**: a rank listed twice in one group;
- **group gone**: a group the trace's collectives name removed from the group file;
- **tag changed** / **size changed**: a send's or receive's tag (to an unused one) or size, so a
  receive has no send and a send no receive.

Promise: exit 2, exactly one line on stderr (``dse: error: ...``) that names what is wrong (one of
the regexes `damage_set` returns: the file and the node, the rank and the node, or the group file
and the rank), nothing on stdout, no file in the folder written, changed or removed.

Choices: the cost model is ``astra-sim`` or ``paper`` (``astra-sim-1`` needs each switch's link
count, which a network YAML does not give); an unmatched send or receive may be reported on either
end (the damaged node, or its counterpart on the peer rank), so either is accepted; the sets are
made in-process (milliseconds) and only the command under test runs in a subprocess, so a case
takes about half a second.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dse.testing.faults import Campaign
from dse.testing.faults_files import snapshot
from dse.testing.faults_traces import TIMEOUT, delimited, messages, run_dse
from dse.training.chakra import schema as cs
from dse.training.chakra.frames import frames
from dse.training.pipeline_traces import write_pipeline_traces

DAMAGES = (
    "truncated",
    "peer out of range",
    "to itself",
    "deleted",
    "extra",
    "copied",
    "group out of range",
    "group twice",
    "group gone",
    "tag changed",
    "size changed",
)
GROUP_DAMAGES = ("group out of range", "group twice", "group gone")
KINDS = ("Ring", "FullyConnected", "Switch")
_P2P = (cs.COMM_SEND, cs.COMM_RECV)


@dataclass(frozen=True)
class RankSetCase:
    """A written set: `npus` rank files ``t.<r>.et`` in `folder`, `groups` whether ``t.json`` is there."""

    folder: Path
    npus: int
    groups: bool

    def rank_file(self, rank: int) -> Path:
        """The path of rank `rank`'s file."""
        return self.folder / f"t.{rank}.et"

    def argv(self, cost_model: str) -> list[str]:
        """``dse iterate`` on the set."""
        groups = ["--comm-groups", "t.json"] if self.groups else []
        return ["iterate", "t", "-t", "n.yml", *groups, "--cost-model", cost_model]


def write_set(rng: random.Random, folder: Path, damage: str, groups: bool | None = None) -> RankSetCase:
    """A random pipeline set and its network YAML in `folder` (module docstring); a group file (and
    more than one data-parallel rank) when `damage` is about it or `groups` is True, none when
    `groups` is False, else at random."""
    want = groups if groups is not None else (True if damage in GROUP_DAMAGES else None)
    stages, dp = rng.randint(2, 4), rng.randint(2 if want else 1, 3)
    with_groups = dp > 1 and (want if want is not None else rng.random() < 0.5)
    write_pipeline_traces(
        folder,
        "t",
        stages=stages,
        dp=dp,
        microbatches=rng.randint(1, 3),
        schedule=rng.choice(("gpipe", "1f1b")),
        fwd_us=rng.choice((0, 1, 10, 12.5)),
        bwd_us=rng.choice((0, 2, 20, 25)),
        activation_bytes=rng.choice((1, 4096, 1 << 20)),
        grad_bytes=rng.choice((1024, 4 << 20)),
        groups=with_groups,
    )
    dims = [n for n in (dp, stages) if n > 1]
    lines = [
        f"topology: [ {', '.join(rng.choice(KINDS) for _ in dims)} ]",
        f"npus_count: [ {', '.join(map(str, dims))} ]",
        f"bandwidth: [ {', '.join(str(rng.choice((12.5, 50.0, 100.0, 400.0))) for _ in dims)} ]  # GB/s",
        f"latency: [ {', '.join(str(rng.choice((0.0, 100.0, 500.0))) for _ in dims)} ]  # ns",
    ]
    (folder / "n.yml").write_text("\n".join(lines) + "\n")
    return RankSetCase(folder, stages * dp, with_groups)


# ------------------------------------------------------------------ reading and rewriting nodes
def read_nodes(path: Path) -> tuple[bytes, list[Any]]:
    """A rank file's metadata message and its nodes (`chakra_schema.ChakraNode`)."""
    msgs = messages(path.read_bytes())
    return msgs[0], [cs.ChakraNode.FromString(m) for m in msgs[1:]]


def write_nodes(path: Path, head: bytes, nodes: list[Any]) -> None:
    """Write a trace file: the metadata message `head`, then `nodes`, each length-prefixed."""
    path.write_bytes(delimited(head) + b"".join(delimited(n.SerializeToString()) for n in nodes))


def attr(node: Any, name: str) -> Any:
    """The attribute `name` of a node (it must have it)."""
    return next(a for a in node.attr if a.name == name)


def peer_key(node: Any) -> str:
    """The attribute naming a send's or receive's other end."""
    return "comm_dst" if node.type == cs.COMM_SEND else "comm_src"


def p2p_nodes(nodes: list[Any]) -> list[int]:
    """Positions of the sends and receives among `nodes`."""
    return [i for i, n in enumerate(nodes) if n.type in _P2P]


def file_named(path: Path) -> str:
    """A regex for an error naming file `path`."""
    return rf"\b{re.escape(path.name)}\b"


def rank_node(rank: int, node_id: int) -> str:
    """A regex for an error naming a rank and one of its nodes by id."""
    return rf"\brank {rank}\b.*\bnode {node_id}\b"


# ------------------------------------------------------------------ the damages
def truncate(rng: random.Random, s: RankSetCase) -> list[str]:
    """A random rank file cut inside a message (never on a message boundary: that would be a
    shorter whole trace), maybe gzipped after; or its gzipped form cut inside the stream."""
    r = rng.randrange(s.npus)
    p = s.rank_file(r)
    data = p.read_bytes()
    if rng.random() < 0.3:  # the gzipped file, cut inside its stream
        z = gzip.compress(data, rng.randint(1, 9))
        p.write_bytes(z[: rng.randrange(len(z))])
    else:
        _, ends = frames(data, "trace")
        inside = sorted(set(range(len(data))) - set(ends))
        cut = data[: rng.choice(inside)]
        p.write_bytes(gzip.compress(cut) if rng.random() < 0.3 else cut)
    return [file_named(p)]


def repeer(rng: random.Random, s: RankSetCase, itself: bool) -> list[str]:
    """A random send's destination or receive's source rewritten: to its own rank (`itself`), else
    past the topology's NPUs, to 2^31 or to -1."""
    r = rng.randrange(s.npus)
    p = s.rank_file(r)
    head, nodes = read_nodes(p)
    node = nodes[rng.choice(p2p_nodes(nodes))]
    bad = r if itself else rng.choice((s.npus, s.npus + rng.randrange(1, 1000), 2**31, -1))
    attr(node, peer_key(node)).int64_val = bad
    write_nodes(p, head, nodes)
    return [file_named(p) + rf".*\bnode {node.id}\b"]


def rank_files(rng: random.Random, s: RankSetCase, damage: str) -> list[str]:
    """Deleted (rank 0 or 1, whose files tell a per-rank set from one trace, one time in two), extra or
    copied rank files."""
    r = rng.randrange(s.npus)
    if damage == "deleted":
        r = rng.choice((0, 1, r, r))
        s.rank_file(r).unlink()
        return [file_named(s.rank_file(r))]
    if damage == "extra":
        extra = s.rank_file(s.npus + rng.choice((0, 0, 1, 7)))
        extra.write_bytes(s.rank_file(r).read_bytes())
        return [file_named(extra)]
    other = rng.choice([q for q in range(s.npus) if q != r])
    s.rank_file(other).write_bytes(s.rank_file(r).read_bytes())
    return [file_named(s.rank_file(other))]


def regroup(rng: random.Random, s: RankSetCase, damage: str) -> list[str]:
    """The group file damaged: a rank out of range, a rank twice, a group gone."""
    path = s.folder / "t.json"
    groups = json.loads(path.read_text())
    name = rng.choice(sorted(groups))
    members = groups[name]
    if damage == "group out of range":
        bad = rng.choice((s.npus, s.npus + rng.randrange(1, 1000), 2**31))
        members[rng.randrange(len(members))] = bad
        needles = [rf"\bt\.json\b.*\b{bad}\b"]
    elif damage == "group twice":
        twice = rng.choice(members)
        members.insert(rng.randrange(len(members) + 1), twice)
        needles = [rf"\bt\.json\b.*\brank {twice}\b"]
    else:
        del groups[name]
        needles = [rf"\brank {m}\b.*\bnode\b.*'{name}'" for m in members]
    path.write_text(json.dumps(groups))
    return needles


def rekey(rng: random.Random, s: RankSetCase, damage: str) -> list[str]:
    """A send's or receive's tag (to an unused one) or size changed: it and its counterpart on the
    peer rank are left unmatched; either may be named."""
    r = rng.randrange(s.npus)
    p = s.rank_file(r)
    head, nodes = read_nodes(p)
    node = nodes[rng.choice(p2p_nodes(nodes))]
    peer = attr(node, peer_key(node)).int64_val
    tag, size = attr(node, "comm_tag").int64_val, attr(node, "comm_size").int64_val
    _, theirs = read_nodes(s.rank_file(peer))
    twin = next(
        n
        for n in theirs
        if n.type in _P2P
        and n.type != node.type
        and attr(n, peer_key(n)).int64_val == r
        and attr(n, "comm_tag").int64_val == tag
        and attr(n, "comm_size").int64_val == size
    )
    if damage == "tag changed":
        attr(node, "comm_tag").int64_val = 10**6 + rng.randrange(10**6)
    else:
        attr(node, "comm_size").int64_val = rng.choice((size + rng.randint(1, 4096), max(1, size // 2) + 7))
    write_nodes(p, head, nodes)
    return [rank_node(r, node.id), rank_node(peer, twin.id)]


def damage_set(rng: random.Random, s: RankSetCase, damage: str) -> list[str]:
    """Apply `damage` to the set; returns regexes, one of which the error line must match."""
    if damage == "truncated":
        return truncate(rng, s)
    if damage in ("peer out of range", "to itself"):
        return repeer(rng, s, damage == "to itself")
    if damage in ("deleted", "extra", "copied"):
        return rank_files(rng, s, damage)
    if damage in GROUP_DAMAGES:
        return regroup(rng, s, damage)
    return rekey(rng, s, damage)


# ------------------------------------------------------------------ one case
def check_refusal(argv: list[str], folder: Path, needles: list[str]) -> list[str]:
    """Run `argv` in `folder`: exit 2, one ``dse: error:`` line matching one of `needles`, nothing on
    stdout, the folder as it was."""
    before = snapshot(folder)
    code, out, err, _ = run_dse(argv, folder)
    problems = []
    if code == -9:
        problems.append(f"no answer in {TIMEOUT:g} s (killed)")
    elif code != 2 or "Traceback" in err:
        problems.append(f"exit {code} (2 expected): {err.strip()[-300:]!r}")
    lines = err.splitlines()
    if len(lines) != 1 or not lines[0].startswith("dse: error: "):
        problems.append(f"stderr {err[-300:]!r} (exactly one 'dse: error:' line expected)")
    elif not any(re.search(n, lines[0]) for n in needles):
        problems.append(f"the error {lines[0]!r} names none of {needles}")
    if out:
        problems.append(f"stdout {out[:200]!r} (nothing expected)")
    after = snapshot(folder)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if changed:
        problems.append(f"changed {changed[:4]}")
    return problems


def rank_set_case(rng: random.Random, folder: Path) -> list[str]:
    """One damaged per-rank trace set (module docstring): refused as promised."""
    damage = rng.choice(DAMAGES)
    s = write_set(rng, folder, damage)
    needles = damage_set(rng, s, damage)
    cost_model = rng.choice(("astra-sim", "paper"))
    return [f"{damage} ({cost_model}): {p}" for p in check_refusal(s.argv(cost_model), folder, needles)]


CAMPAIGN: Campaign = {
    "damaged per-rank trace sets": (
        "a rank file cut, missing, extra or another rank's; a peer out of range or the rank itself; a group "
        "file naming a rank the topology lacks; a tag or size no receive matches: exit 2, one line naming "
        "the file or the rank and node, nothing on stdout, nothing written",
        120,
        rank_set_case,
    ),
}
