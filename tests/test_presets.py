"""Presets: every one parses and round-trips, `NAME@artifact` is what the reproduction runs, the
real systems carry their figures' sources, and `dse topologies` shows (and --json carries) it all."""

import json
import re

import pytest

import dse
from dse.core.errors import InputError
from dse.core.presets import ARTIFACT_PRESETS, PAPER_PRESETS, PRESET_INFO, PRESETS, SYSTEM_PRESETS, preset_records
from dse.core.topology import parse_topology
from dse.explore.sweep.file import parse_sweep
from dse.explore.sweep.sweeps import read_rows, run_sweep
from dse.output.reproduce import SIZES_GIB, finish_rows, summarize, sweeps, topology_for

# The artifact's own notation of its topologies, as recorded beside its end-to-end runs
# (reference/astra-sim-1.0-end-to-end.csv, column `notation`).
ARTIFACT_CSV = {
    "2D-SW_SW": "SW(16,150,1,links=6)_SW(64,100,1,links=1)",
    "3D-FC_Ring_SW": "FC(8,175,1,links=7)_Ring(16,100,1,links=4)_SW(8,50,1,links=1)",
    "4D-Ring_FC_Ring_SW": "Ring(4,375,1,links=2)_FC(8,175,1,links=7)_Ring(4,150,1,links=6)_SW(8,100,1,links=1)",
}


@pytest.mark.parametrize("name", list(PRESET_INFO))
def test_every_preset_parses_and_round_trips(name):
    t = parse_topology(name)
    assert t.name == name and parse_topology(name.lower()) == t and parse_topology(name.upper()) == t
    again = parse_topology(t.notation())
    assert again == t and again.notation() == t.notation()
    assert all(d.links is not None for d in t.dims)  # every preset runs under astra-sim-1 too


def test_listing_order_and_families():
    fams = [(p.name, p.family) for p in PRESET_INFO.values()]
    expected = [x for n in PAPER_PRESETS for x in ((n, "paper"), (f"{n}@artifact", "artifact"))]
    assert fams == expected + [(n, "system") for n in SYSTEM_PRESETS]
    assert set(PRESETS) == set(PAPER_PRESETS) | set(SYSTEM_PRESETS)  # the variants are names, not PRESETS keys


@pytest.mark.parametrize("name", PAPER_PRESETS)
def test_artifact_variant_is_what_the_reproduction_runs(name):
    art = parse_topology(f"{name}@artifact")
    paper = PRESETS[name]
    assert art == topology_for(name, "astra-sim-1") == ARTIFACT_PRESETS[f"{name}@artifact"]
    # the same network as Table 2's, every link latency 1 ns (reference/astra-sim-1.0.md §7)
    assert art.shape == paper.shape and art.bandwidths == paper.bandwidths
    assert [d.links for d in art.dims] == [d.links for d in paper.dims]
    assert [d.latency for d in art.dims] == [1] * art.ndims and art != paper
    assert art.label() == f"{name}@artifact"
    if name in ARTIFACT_CSV:
        assert art.notation() == ARTIFACT_CSV[name]
    # the reproduction's sweep tables list exactly these notations under astra-sim-1
    tables = sweeps("astra-sim-1")
    assert tables["single_allreduce"]["topology"][PAPER_PRESETS.index(name)] == art.notation()


def test_every_command_and_the_api_accept_the_variant(run_cli):
    r = dse.evaluate("4D-Ring_FC_Ring_SW@artifact", size="64MiB", cost_model="astra-sim-1")
    assert r.topology == "4D-Ring_FC_Ring_SW@artifact"
    code, out, err = run_cli(
        "evaluate", "4d-ring_fc_ring_sw@ARTIFACT", "--size", "64MiB", "--cost-model", "astra-sim-1", "--json"
    )
    assert code == 0 and err == "" and json.loads(out)["time_ns"] == r.time_ns
    code, out, _ = run_cli("bound", "-t", "2D-SW_SW@artifact", "--size", "64MiB", "--json")
    assert code == 0 and json.loads(out)["topology"] == "2D-SW_SW@artifact"


def _reproduction_speedup(tmp_path, name, size, model):
    """Themis+SCF's speed-up over baseline+FIFO as `dse reproduce themis` computes it: its own sweep
    table cut down to one topology and size, run through the sweep machinery and `summarize`."""
    table = dict(sweeps(model)["single_allreduce"])
    table.update(
        topology=[topology_for(name, model).notation()], size=[size], schedules=["baseline+fifo", "themis+scf"]
    )
    raw = tmp_path / "one.raw.csv"
    run_sweep(parse_sweep(table, source="test"), raw)
    rows = finish_rows(read_rows(raw), {topology_for(name, model).notation(): name}, model)
    return summarize(rows).per_topology[name]["themis+scf"]["speedup_mean"]


def test_compare_on_the_artifact_variant_matches_the_reproduction(run_cli, tmp_path):
    name, size = "4D-Ring_FC_Ring_SW", f"{SIZES_GIB[-1]}GiB"
    want = _reproduction_speedup(tmp_path, name, size, "astra-sim-1")
    code, out, err = run_cli("compare", f"{name}@artifact", "--size", size, "--cost-model", "astra-sim-1", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["topology"] == f"{name}@artifact" and d["notation"] == parse_topology(f"{name}@artifact").notation()
    rows = {(r["scheduler"], r["queue"]): r for r in d["rows"]}
    got = rows[("themis", "scf")]["speedup_vs_baseline_fifo"]
    assert got == pytest.approx(want, rel=1e-9)
    # Table 2's latencies give another answer under this model: the variant is what makes them agree
    code, out, _ = run_cli("compare", name, "--size", size, "--cost-model", "astra-sim-1", "--json")
    table2 = {(r["scheduler"], r["queue"]): r for r in json.loads(out)["rows"]}[("themis", "scf")]
    assert abs(table2["speedup_vs_baseline_fifo"] - want) > 0.1


@pytest.mark.parametrize(
    "spec,text",
    [
        ("2D-SW_SW@paper", "unknown variant '@paper' of 2D-SW_SW"),
        ("2D-SW_SW@1ns", "unknown variant '@1ns'"),
        ("HGX-H100-pod@artifact", "HGX-H100-pod has no '@artifact' variant"),
        ("NoSuch@artifact", "unknown preset 'NoSuch'"),
        ("2D-SW_SW@artifact@artifact", "unknown preset"),
    ],
)
def test_unknown_variant_is_one_line_naming_the_allowed_ones(run_cli, spec, text):
    with pytest.raises(InputError) as e:
        parse_topology(spec)
    assert e.value.field == "topology" and text in str(e.value)
    code, out, err = run_cli("evaluate", spec, "--size", "1MB")
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("dse: error: topology: ")
    assert text in err and ("@artifact (on 2D-SW_SW" in err or "presets: 2D-SW_SW" in err)


@pytest.mark.parametrize("name", SYSTEM_PRESETS)
def test_real_systems_state_the_source_of_every_figure(name):
    p = PRESET_INFO[name]
    t = p.topology
    assert p.family == "system" and "Themis talk" in p.source  # the seed that names the system and its kinds
    assert t.kinds_label() in p.source
    for d in t.dims:  # every bandwidth and size figure appears in the source text
        assert re.search(rf"\b{d.bandwidth:g} GB/s\b", p.source), (name, d.bandwidth)
        assert re.search(rf"(?<!\d){d.npus}(?!\d)", p.source), (name, d.npus)
    assert "Latency: none published" in p.source and "assumed" in p.source  # the assumption is said


def test_topologies_table_and_json_carry_the_same_fields(run_cli):
    code, text, err = run_cli("topologies")
    assert code == 0 and err == ""
    code, out, _ = run_cli("topologies", "--json")
    records = json.loads(out)
    assert records == preset_records() and [r["name"] for r in records] == list(PRESET_INFO)
    header = text.splitlines()[0].split()
    assert header == ["name", "NPUs", "shape", "GB/s/NPU", "what", "notation"]
    lines = {ln.split()[0]: ln for ln in text.splitlines()[2 : 2 + len(records)]}
    for r in records:
        assert {"name", "npus", "shape", "total_bandwidth_gbps", "what", "notation", "source", "family"} <= set(r)
        ln = lines[r["name"]]
        shape = "x".join(map(str, r["shape"]))
        assert re.search(rf"\s{r['npus']}\s+{shape}\s+{r['total_bandwidth_gbps']:g}\s+", ln)
        assert r["what"] in ln and ln.rstrip().endswith(r["notation"])
        assert r["source"]
        if r["family"] == "artifact":
            assert "1 ns" in r["what"] and r["base"] == r["name"].removesuffix("@artifact")
    flat = " ".join(text.split())
    for name in SYSTEM_PRESETS:  # the real systems' source figures are printed, not only in the JSON
        assert " ".join(PRESET_INFO[name].source.split()) in flat


def test_topologies_json_has_help(run_cli, capsys):
    from dse.cli.main import main

    with pytest.raises(SystemExit):
        main(["topologies", "--help"])
    assert "JSON" in capsys.readouterr().out


def test_topologies_says_why_there_is_no_zion_preset(run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli("topologies")
    assert code == 0 and "- Zion-like FC_SW: " in out and "no invented figures" in out
    assert not any("zion" in name.lower() for name in __import__("dse").PRESETS)
