"""ASTRA-sim 2.x network files (`dse.core.network_yaml`) wherever a topology is taken: each file
is the topology its notation spells (the same times under every cost model), and bad files are one
line naming the file, the line and the key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import dse
from dse.core.errors import InputError
from dse.core.topology import parse_topology

NETWORKS = sorted((Path(__file__).parents[1] / "workloads" / "astra-sim-2" / "network").glob("*.yml"))
NOTATION = {
    "FC4_R2_SW2": "FC(4,150,300)_Ring(2,100,500)_SW(2,50,1000)",
    "R2_FC2_R2_SW2": "Ring(2,200,200)_FC(2,150,500)_Ring(2,100,500)_SW(2,50,1000)",
    "R2_FC2_SW2": "Ring(2,200,200)_FC(2,100,500)_SW(2,50,1000)",
    "R2_FC4": "Ring(2,200,200)_FC(4,100,500)",
    "R2_FC4_SW2": "Ring(2,200,200)_FC(4,100,500)_SW(2,50,1000)",
    "R4_FC4_SW4": "Ring(4,200,200)_FC(4,100,500)_SW(4,50,1000)",
}


def test_every_shipped_file_is_read():
    assert [p.stem for p in NETWORKS] == sorted(NOTATION)


@pytest.mark.parametrize("path", NETWORKS, ids=lambda p: p.stem)
def test_a_network_file_is_the_topology_its_lists_spell(path):
    topo = parse_topology(str(path))
    assert topo == parse_topology(NOTATION[path.stem]) and topo.name == path.stem


def test_astra_sim_1_refuses_a_network_file_as_it_refuses_the_notation_without_links():
    """ASTRA-sim 1.0's model needs each dimension's links, which a 2.x network file does not carry."""
    with pytest.raises(InputError, match="has no links") as e:
        dse.evaluate(str(NETWORKS[0]), size="1MB", cost_model="astra-sim-1")
    with pytest.raises(InputError) as f:
        dse.evaluate(NOTATION[NETWORKS[0].stem], size="1MB", cost_model="astra-sim-1")
    assert str(e.value) == str(f.value)


@pytest.mark.parametrize("model", ["astra-sim", "paper"])
@pytest.mark.parametrize("path", NETWORKS[:3], ids=lambda p: p.stem)
def test_a_network_file_gives_the_notations_times(path, model):
    for scheduler in ("baseline", "themis"):
        a = dse.evaluate(str(path), size="4MB", chunks=8, cost_model=model, scheduler=scheduler)
        b = dse.evaluate(NOTATION[path.stem], size="4MB", chunks=8, cost_model=model, scheduler=scheduler)
        assert a.time_ns == b.time_ns > 0


def test_the_command_line_takes_a_network_file(run_cli):
    code, out, err = run_cli("evaluate", str(NETWORKS[0]), "--size", "1MB", "--cost-model", "astra-sim")
    assert code == 0 and err == "" and f"{NETWORKS[0].stem} (16 NPUs)" in out


def _write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "net.yml"
    p.write_text(text)
    return str(p)


GOOD = "topology: [ Ring, Switch ]\nnpus_count: [ 2, 4 ]\nbandwidth: [ 100, 50 ]\nlatency: [ 500, 1000 ]\n"


@pytest.mark.parametrize(
    "text, words",
    [
        (GOOD + "links-count: [ 1, 1 ]\n", ["net.yml:5: links-count", "cannot honour"]),
        (GOOD.replace("latency: [ 500, 1000 ]\n", ""), ["latency", "missing"]),
        (GOOD.replace("[ 100, 50 ]", "[ 100 ]"), ["net.yml:3: bandwidth", "1 values for 2 dimensions"]),
        (GOOD.replace("Switch", "Torus"), ["dimension 1: topology", "'Torus'", "FullyConnected"]),
        (GOOD.replace("[ 2, 4 ]", "[ 2, four ]"), ["npus_count[1]", "not a number"]),
        (GOOD.replace("[ 2, 4 ]", "[ 2, true ]"), ["npus_count[1]", "not a number"]),
        (GOOD.replace("[ 2, 4 ]", "[ 2, 4.5 ]"), ["dimension 1: npus"]),
        (GOOD.replace("[ 100, 50 ]", "[ 100, -1 ]"), ["dimension 1: bandwidth"]),
        (GOOD.replace("[ 500, 1000 ]", "[ 500, .nan ]"), ["dimension 1: latency"]),
        (GOOD.replace("npus_count: [ 2, 4 ]", "npus_count: 2"), ["npus_count", "not a list"]),
        ("topology: [ Ring\n", ["net.yml", "not valid YAML"]),
        ("- Ring\n", ["net.yml:1", "not a mapping"]),
        ("", ["net.yml:1", "no keys"]),
    ],
)
def test_a_bad_network_file_is_one_line_naming_where(tmp_path, text, words):
    with pytest.raises(InputError) as e:
        parse_topology(_write(tmp_path, text))
    assert "\n" not in str(e.value)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_more_dimensions_than_the_limit_are_refused_before_they_are_read(tmp_path):
    lists = {k: ", ".join([v] * 11) for k, v in (("t", "Ring"), ("n", "2"), ("b", "10"), ("l", "5"))}
    text = f"topology: [ {lists['t']} ]\nnpus_count: [ {lists['n']} ]\nbandwidth: [ {lists['b']} ]\nlatency: [ {lists['l']} ]\n"
    with pytest.raises(InputError, match="11 dimensions, more than the limit of 10"):
        parse_topology(_write(tmp_path, text))


def test_a_missing_file_or_a_fifo_is_one_line(tmp_path, run_cli):
    with pytest.raises(InputError, match="no such file"):
        parse_topology(str(tmp_path / "none.yml"))
    os.mkfifo(tmp_path / "f.yml")
    code, _, err = run_cli("evaluate", str(tmp_path / "f.yml"), "--size", "1MB")
    assert code == 2 and err.count("\n") == 1 and "is a FIFO" in err


def test_a_sweep_file_reads_its_network_file_beside_it(tmp_path, monkeypatch):
    """A relative network file in a sweep is read from the sweep file's folder, from any working
    folder; the points name it by its path from there."""
    from dse.explore.sweep.file import load_sweep

    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "net.yml").write_text(NETWORKS[0].read_text())
    (tmp_path / "cfg" / "s.toml").write_text('[sweep]\ntopology = ["net.yml"]\nsize = "1MB"\n')
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    sweep = load_sweep("../cfg/s.toml")
    assert {p.topology for p in sweep.points} == {os.path.join("..", "cfg", "net.yml")}
    assert parse_topology(sweep.points[0].topology) == parse_topology(str(NETWORKS[0]))
