"""Damaged and inconsistent per-rank trace sets (issue 34; dse.testing.faults_ranks): every damage is
refused by `dse iterate` in a subprocess with exit 2, one line naming the file or the rank and node,
nothing on stdout and nothing written. The sets are made by dse's own pipeline generator; no file of
../shared is needed."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from dse.core.errors import InputError
from dse.testing import faults_ranks as fr
from dse.testing.faults_traces import messages, run_dse
from dse.training.chakra import schema as cs

NOT_DELETED = [d for d in fr.DAMAGES if d != "deleted"]


def _keys(s: fr.RankSetCase) -> Counter:
    """Every send and receive of the set as (kind, source, destination, tag, size), counted."""
    out: Counter = Counter()
    for r in range(s.npus):
        _, nodes = fr.read_nodes(s.rank_file(r))
        for n in nodes:
            if n.type in (cs.COMM_SEND, cs.COMM_RECV):
                peer = fr.attr(n, fr.peer_key(n)).int64_val
                src, dst = (r, peer) if n.type == cs.COMM_SEND else (peer, r)
                out[(n.type, src, dst, fr.attr(n, "comm_tag").int64_val, fr.attr(n, "comm_size").int64_val)] += 1
    return out


def _unmatched(keys: Counter) -> int:
    """Sends and receives without a counterpart of the same (source, destination, tag, size)."""
    flip = {cs.COMM_SEND: cs.COMM_RECV, cs.COMM_RECV: cs.COMM_SEND}
    return sum(max(0, k - keys[(flip[t], *rest)]) for (t, *rest), k in keys.items())


@pytest.mark.parametrize("cost_model", ["astra-sim", "paper"])
def test_the_undamaged_sets_run(tmp_path: Path, cost_model: str) -> None:
    """The control: before any damage, a set runs (exit 0), every send matched by a receive."""
    for seed in range(2):
        folder = tmp_path / str(seed)
        folder.mkdir()
        s = fr.write_set(random.Random(f"good-{seed}"), folder, "deleted", groups=seed == 0)
        assert (folder / "t.json").is_file() == s.groups == (seed == 0) and _unmatched(_keys(s)) == 0
        code, out, err, _ = run_dse([*s.argv(cost_model), "--json"], folder)
        assert code == 0 and err == "", err
        assert json.loads(out)["npus"] == s.npus


@pytest.mark.parametrize("damage", ["tag changed", "size changed"])
def test_a_changed_key_leaves_one_send_and_one_receive_unmatched(tmp_path: Path, damage: str) -> None:
    s = fr.write_set(random.Random(damage), tmp_path, damage)
    fr.damage_set(random.Random(damage), s, damage)
    assert _unmatched(_keys(s)) == 2


def test_a_cut_is_inside_a_message(tmp_path: Path) -> None:
    """A truncated rank file never ends on a message boundary (it would be a shorter, whole trace)."""
    for seed in range(20):
        folder = tmp_path / str(seed)
        folder.mkdir()
        s = fr.write_set(random.Random(seed), folder, "truncated")
        before = {r: s.rank_file(r).read_bytes() for r in range(s.npus)}
        fr.truncate(random.Random(seed), s)
        (cut,) = [r for r in range(s.npus) if s.rank_file(r).read_bytes() != before[r]]
        data = s.rank_file(cut).read_bytes()
        if data[:2] == b"\x1f\x8b":  # gzipped: a cut stream, or the cut bytes compressed
            continue
        with pytest.raises(InputError, match="truncated|empty"):
            messages(data)


@pytest.mark.parametrize("damage", NOT_DELETED)
@pytest.mark.parametrize("seed", range(2))
def test_each_damage_is_refused_in_one_line(tmp_path: Path, damage: str, seed: int) -> None:
    rng = random.Random(f"{damage}-{seed}")
    s = fr.write_set(rng, tmp_path, damage)
    needles = fr.damage_set(rng, s, damage)
    assert fr.check_refusal(s.argv(rng.choice(("astra-sim", "paper"))), tmp_path, needles) == []


@pytest.mark.parametrize("where", ["last", "middle"])
def test_a_deleted_rank_file_is_named(tmp_path: Path, where: str) -> None:
    s = fr.write_set(random.Random(where), tmp_path, "deleted")
    r = s.npus - 1 if where == "last" else s.npus // 2
    s.rank_file(r).unlink()
    assert fr.check_refusal(s.argv("astra-sim"), tmp_path, [fr.file_named(s.rank_file(r))]) == []


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("groups", [False, True])
def test_a_deleted_rank_0_or_1_is_named(tmp_path: Path, rank: int, groups: bool) -> None:
    rng = random.Random(f"deleted-{rank}-{groups}")
    s = fr.write_set(rng, tmp_path, "deleted", groups=groups)
    assert s.groups == groups == (tmp_path / "t.json").exists()
    s.rank_file(rank).unlink()
    assert fr.check_refusal(s.argv("astra-sim"), tmp_path, [fr.file_named(s.rank_file(rank))]) == []
