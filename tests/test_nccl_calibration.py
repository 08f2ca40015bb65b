"""dse.costs.nccl.calibration: calibration files round trip bit for bit, `calibrate` is `fit` on the
logs, every bad file is one InputError naming its key, and the bundled machines resolve, carry their
sources and are what scripts/make_nccl_machines.py makes."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import math
import re
import struct
from pathlib import Path
from types import ModuleType

import pytest

from dse.core.errors import InputError
from dse.core.presets import PRESET_INFO, SYSTEM_PRESETS
from dse.core.topology import parse_notation, parse_topology
from dse.costs.nccl import calibration as C
from dse.costs.nccl.fit import errors, fit, geomean_error, transfer
from dse.costs.nccl.logs import read_nccl_tests
from dse.costs.nccl.model import NcclParams, default_params, predict
from dse.costs.nccl.system import system_of

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "dse" / "data" / "nccl"
DGXC = DATA / "dgxc_dgxh100_1node_allreduce.txt"
ISSUE119 = DATA / "ncclt119_3xdgxa100_hdr.txt"
H100 = parse_topology("SW(8,450,0,links=18)")
A100X3 = parse_topology("SW(8,300,0,links=12)_SW(3,12.5,0)")
A100X3_FIELDS = {"generation": "ampere", "nvls": False, "cpu": "intel", "nics_per_node": 4}


def _bits(x: object) -> object:
    """A value with every float as its 8 bytes, so that -0.0 != 0.0 and NaNs compare by payload."""
    if isinstance(x, float):
        return struct.pack("<d", x)
    if isinstance(x, tuple):
        return tuple(_bits(v) for v in x)
    if isinstance(x, NcclParams):
        return tuple((f.name, _bits(getattr(x, f.name))) for f in dataclasses.fields(x))
    return (type(x).__name__, x)


def _same_bits(a: C.Calibration, b: C.Calibration) -> None:
    assert a == b
    for f in dataclasses.fields(C.Calibration):
        assert _bits(getattr(a, f.name)) == _bits(getattr(b, f.name)), f.name


@pytest.fixture(scope="module")
def h100_calibration() -> C.Calibration:
    return C.calibrate([DGXC], H100, generation="hopper")


# --------------------------------------------------------------------------- calibrate
def test_calibrate_is_fit_on_the_logs(h100_calibration):
    """The parameters are exactly `fit`'s on the same runs and system; rows, error and logs follow."""
    c = h100_calibration
    system = system_of(H100, generation="hopper")
    runs = read_nccl_tests(DGXC)
    assert c.params == fit(system, runs)
    assert _bits(c.params) == _bits(fit(system, runs))
    assert c.rows == 31 == len(errors(system, c.params, runs))  # 8 B .. 16 GiB but 32 B (its columns differ 5x)
    assert c.fit_gm == geomean_error(e.error for e in errors(system, c.params, runs)) > 0
    digest = hashlib.sha256(DGXC.read_bytes()).hexdigest()
    assert c.logs == (f"dgxc_dgxh100_1node_allreduce.txt sha256:{digest}",)
    assert c.topology == "SW(8,450,0,links=18)" and c.name == "" and c.sources == (str(DGXC),)
    assert (c.generation, c.nvls, c.network, c.cpu, c.nvlink_links, c.nics_per_node) == (
        "hopper", True, "ib", "other", None, None,
    )  # fmt: skip
    assert c.system(H100) == system and c.fitted_system() == system


def test_calibrate_golden_rows_of_issue_119():
    """The 22 public rows of nccl-tests issue 119 (3 x 8 A100, 4 HDR NICs a node): the errors are
    against the times the file prints (first and last rows read back as published)."""
    calib, errs, skipped, _ = C.calibrate_details([ISSUE119], A100X3, **A100X3_FIELDS)  # type: ignore[arg-type]
    assert calib.rows == 22 == len(errs) and skipped == ()
    first, last = errs[0].sample, errs[-1].sample
    assert (first.size_bytes, first.time_ns) == (23068680, 518400.0)
    assert (last.size_bytes, last.time_ns) == (85983240, 1757800.0)
    system = calib.fitted_system()
    assert (system.ranks, system.nodes, system.nics_per_node, system.nic_GBps) == (24, 3, 4, 25.0)
    for e in errs:
        t = predict(system, "all_reduce", e.sample.size_bytes, params=calib.params).time_ns
        assert e.error == (t - e.sample.time_ns) / e.sample.time_ns
    assert calib.fit_gm == geomean_error(e.error for e in errs)
    assert calib.fit_gm < 0.25  # the fit is near the measured plateau (84.8-96 GB/s busbw)


@pytest.mark.parametrize(
    ("logs", "topology", "fields", "text"),
    [
        ([DGXC], "SW(8,450,0)_SW(2,50,0)", {}, "a run on 8 ranks, but the topology has 16 GPUs"),
        ([ISSUE119], "SW(8,300,0)", {"generation": "ampere"}, "a run on 24 ranks, but the topology has 8 GPUs"),
        ([DATA / "README.md"], "SW(8,450,0)", {}, "no line is a column header"),
        ([DGXC], "SW(8,450,0)_Ring(2,50,0)", {}, "cannot be the network between nodes"),
        ([DGXC], "SW(8,450,0)", {"generation": "pascal"}, "unknown generation 'pascal'"),
        ([DGXC], "SW(8,450,0)", {"network": "ethernet"}, "unknown network"),
        ([], "SW(8,450,0)", {}, "no nccl-tests log given"),
        ([DATA / "missing.txt"], "SW(8,450,0)", {}, "no such file"),
    ],
)
def test_calibrate_refuses_bad_input(logs, topology, fields, text):
    with pytest.raises(InputError, match=re.escape(text)):
        C.calibrate(logs, parse_topology(topology), **{"generation": "hopper", **fields})


def test_default_calibration_is_nccls_tuner():
    c = C.default_calibration(parse_topology("H800-node"), generation="hopper")
    assert c.params == default_params(c.fitted_system()) and (c.rows, c.fit_gm, c.logs) == (0, 0.0, ())
    with pytest.raises(InputError, match="nics_per_node: 8 given for a one-node topology"):
        C.default_calibration(H100, generation="hopper", nics_per_node=8)


# --------------------------------------------------------------------------- the file
def test_file_round_trips_bit_for_bit(tmp_path, h100_calibration):
    path = tmp_path / "c.toml"
    C.write_calibration(path, h100_calibration)
    _same_bits(C.read_calibration(path), h100_calibration)
    text = path.read_text()
    assert text.startswith("# dse NCCL calibration") and "Written by `dse calibrate nccl-tests`" in text
    assert 'format = "dse-nccl-calibration-1"' in text and "\n[params]\n" in text
    assert "fit_gm_fraction = " in text and "nvlink_links" not in text  # None is left out
    C.write_calibration(path, h100_calibration)
    assert path.read_text() == text  # deterministic


def test_awkward_values_round_trip(tmp_path, h100_calibration):
    """Strings TOML must escape, inf, the smallest subnormal, -0.0 and the optional counts."""
    p = dataclasses.replace(
        h100_calibration.params, nvls_tree_max_GBps=math.inf, s_half_intra_bytes=5e-324, net_latency_ns=-0.0 + 0.0
    )
    calib = dataclasses.replace(
        h100_calibration,
        name='a "machine" \\ with\nnewline, tab\t, DEL \x7f, é and 🙂',
        sources=("", "x" * 1000, "[not] = 'toml'"),
        params=p,
        nvlink_links=18,
        fit_gm=1e-17,
    )
    path = tmp_path / "c.toml"
    C.write_calibration(path, calib)
    _same_bits(C.read_calibration(path), calib)
    two_nodes = C.default_calibration(parse_topology("DGX-A100-HDRx3"), generation="ampere", nics_per_node=4)
    C.write_calibration(path, two_nodes)
    _same_bits(C.read_calibration(path), two_nodes)


@pytest.fixture(scope="module")
def good_text(tmp_path_factory: pytest.TempPathFactory) -> str:
    calib = C.calibrate([ISSUE119], A100X3, **A100X3_FIELDS)  # type: ignore[arg-type]
    path = tmp_path_factory.mktemp("good") / "good.toml"
    C.write_calibration(path, calib)
    return path.read_text()


BAD_FILES = [
    (('format = "dse-nccl-calibration-1"', 'format = "dse-nccl-calibration-9"'), "format"),
    (("nvls = false", 'nvls = "no"'), "nvls"),
    (("nvls = false", "nvls = false\ncolour = 1"), "colour"),
    (('cpu = "intel"\n', ""), "cpu"),
    (('generation = "ampere"', 'generation = "pascal"'), "generation"),
    (('network = "ib"', 'network = "ethernet"'), "network"),
    (("nics_per_node = 4", "nics_per_node = 0"), "nics_per_node"),
    (("nics_per_node = 4", "nics_per_node = 4.0"), "nics_per_node"),
    (("SW(8,300,0,links=12)_SW(3,12.5,0)", "SW(8,300,0,links=12)"), "nics_per_node"),  # one node has no NICs
    (("rows = 22", "rows = -1"), "rows"),
    (("rows = 22", "rows = 0"), "rows"),
    (("fit_gm_fraction = ", "fit_gm_fraction = -"), "fit_gm_fraction"),
    (('topology = "SW(8,300,0,links=12)_SW(3,12.5,0)"', 'topology = "DGX-A100-HDRx3"'), "topology"),
    (('topology = "SW(8,300,0,links=12)_SW(3,12.5,0)"', 'topology = "SW(8,300,0)_Ring(3,12.5,0)"'), "topology"),
    (('topology = "SW(8,300,0,links=12)_SW(3,12.5,0)"', 'topology = "SW(8,-1,0)"'), "topology"),
    (('logs = ["ncclt119', 'logs = ["x sha256:12", "ncclt119'), "logs[0]"),
    (("sources = [", "sources = [1, "), "sources[0]"),
    (("e_ring_intra = ", "e_ring_intra = 1.5 + "), None),  # malformed TOML
    (("e_tree_intra = ", "e_tree_intra = 1.5\nx_tree_intra = "), "params.x_tree_intra"),
    (("\ne_ring_intra = ", "\ne_ring_intra = 1.5  # was "), "params.e_ring_intra"),
    (("k_inter = 1.0", "k_inter = 0.0"), "params.k_inter"),
    (("k_inter = 1.0\n", ""), "params.k_inter"),
    (("ring_base_ns = [", "ring_base_ns = [1.0, "), "params.ring_base_ns"),
    (("ring_base_ns = [", 'ring_base_ns = ["1", '), "params.ring_base_ns"),
    (("net_latency_ns = 0.0", "net_latency_ns = nan"), "params.net_latency_ns"),
    (("net_latency_ns = 0.0", "net_latency_ns = true"), "params.net_latency_ns"),
    (("[params]", "[other]"), "other"),
]


@pytest.mark.parametrize(("change", "key"), BAD_FILES)
def test_bad_files_name_the_key(tmp_path, good_text, change, key):
    text = good_text
    old, new = change
    assert old in text, old
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(old, new, 1))
    with pytest.raises(InputError) as e:
        C.read_calibration(bad)
    assert str(e.value).count("\n") == 0
    if key is not None:
        assert e.value.field == f"{bad}: {key}", str(e.value)


def test_a_file_written_before_the_curves_floor_loads_as_it_predicted(tmp_path, good_text):
    """Files of this format written before `e_min_multi` existed lack it: they load with 0, the pure
    curve they were fitted with, and predict what they did; a bad value of it is still refused."""
    assert "\ne_min_multi = 0.0" in good_text
    old = tmp_path / "old.toml"
    old.write_text(good_text.replace("\ne_min_multi = 0.0", ""))
    new = tmp_path / "new.toml"
    new.write_text(good_text)
    calib = C.read_calibration(old)
    assert calib == C.read_calibration(new) and calib.params.e_min_multi == 0.0
    bad = tmp_path / "bad.toml"
    bad.write_text(good_text.replace("e_min_multi = 0.0", "e_min_multi = 2.0"))
    with pytest.raises(InputError) as e:
        C.read_calibration(bad)
    assert e.value.field == f"{bad}: params.e_min_multi"


def test_a_file_without_params_is_refused(tmp_path, good_text):
    bad = tmp_path / "bad.toml"
    bad.write_text(good_text.split("\n[params]")[0])
    with pytest.raises(InputError) as e:
        C.read_calibration(bad)
    assert e.value.field == f"{bad}: params" and "missing" in str(e.value)


def test_reading_is_size_limited(tmp_path, monkeypatch, h100_calibration):
    path = tmp_path / "c.toml"
    C.write_calibration(path, h100_calibration)
    monkeypatch.setenv("DSE_MAX_TEXT_BYTES", "1000")
    with pytest.raises(InputError, match="DSE_MAX_TEXT_BYTES"):
        C.read_calibration(path)


def test_an_invalid_calibration_is_not_written(tmp_path, h100_calibration):
    path = tmp_path / "c.toml"
    path.write_text("kept")
    bad = dataclasses.replace(h100_calibration, rows=0)  # rows 0 with a log: refused
    with pytest.raises(InputError, match="rows"):
        C.write_calibration(path, bad)
    assert path.read_text() == "kept"


# --------------------------------------------------------------------------- bundled machines
def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_nccl_machines", ROOT / "scripts" / "make_nccl_machines.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", C.BUNDLED)
def test_bundled_machines_resolve_and_carry_sources(name):
    calib = C.resolve_calibration(name.upper())
    assert calib is C.resolve_calibration(name.lower()) and calib.name == name
    preset = PRESET_INFO[name]
    assert name in SYSTEM_PRESETS and preset.family == "system"
    assert calib.topology == preset.topology.notation(exact=True)
    assert "nccl cost model uses no dse latency" in " ".join(preset.source.split())
    assert calib.sources and all(s.strip() for s in calib.sources)
    assert (calib.rows > 0) == bool(calib.logs)
    for entry in calib.logs:  # each log is shipped, unchanged since the fit
        file, digest = entry.rsplit(" sha256:", 1)
        assert hashlib.sha256((DATA / file).read_bytes()).hexdigest() == digest
        assert (DATA / file).read_text().startswith("# source: ")
    if calib.rows == 0:
        assert calib.params == default_params(calib.fitted_system()) and calib.fit_gm == 0.0


def test_bundled_set_and_files_agree():
    assert sorted(p.stem for p in C.MACHINES_DIR.glob("*.toml")) == sorted(C.BUNDLED)
    from dse.cli.nccl import BUNDLED_HELP as _BUNDLED_HELP

    assert _BUNDLED_HELP == ", ".join(C.BUNDLED)
    h800 = C.resolve_calibration("H800-node").fitted_system()
    assert (h800.nvlink_GBps, h800.nvlink_links, h800.has_nvls) == (200.0, 8, True)
    big = predict(h800, "all_reduce", 8 * 2**30, params=C.resolve_calibration("H800-node").params)
    assert big.algo == "nvls" and abs(big.busbw_GBps - 215.0) / 215.0 < 0.05  # nccl issue 1374's 215 GB/s


def test_bundled_files_are_what_the_script_makes(tmp_path, capsys):
    """Rerun scripts/make_nccl_machines.py after the model or the fit changes."""
    script = _script()
    assert script.main(["--check"]) == 0, capsys.readouterr().err
    assert script.main(["--out", str(tmp_path)]) == 0
    for name in C.BUNDLED:
        assert (tmp_path / f"{name}.toml").read_bytes() == (C.MACHINES_DIR / f"{name}.toml").read_bytes()
    (tmp_path / "HGX-H100.toml").write_text("changed")
    assert script.main(["--check", "--out", str(tmp_path)]) == 1


def test_resolve_a_file_or_refuse(tmp_path, h100_calibration):
    path = tmp_path / "mine.toml"
    C.write_calibration(path, h100_calibration)
    assert C.resolve_calibration(str(path)) == h100_calibration
    for text in ("H900-node", "", str(tmp_path / "none.toml")):
        with pytest.raises(InputError) as e:
            C.resolve_calibration(text)
        assert e.value.field == "calibration" and "HGX-H100, H800-node, DGX-A100-HDRx3" in str(e.value)


def test_params_for_other_systems(h100_calibration):
    """The fitted system gets the fitted parameters; another gets NCCL's defaults for it with the
    fitted tiers carried over; a calibration without rows is NCCL's defaults everywhere."""
    c = h100_calibration
    assert c.params_for(c.fitted_system()) is c.params
    two = c.system(parse_notation("SW(8,450,0,links=18)_SW(2,50,0,links=1)"))
    assert c.params_for(two) == transfer(c.params, default_params(two), "intra")
    assert c.params_for(two).ll_max_GBps == default_params(two).ll_max_GBps != c.params.ll_max_GBps
    a100 = C.resolve_calibration("DGX-A100-HDRx3")
    six = a100.system(parse_notation("SW(8,300,0,links=12)_SW(6,12.5,0)"))
    expected = transfer(a100.params, transfer(a100.params, default_params(six), "intra"), "inter")
    assert a100.params_for(six) == expected and six.nics_per_node == 4
    h800 = C.resolve_calibration("h800-node")
    other = h800.system(parse_notation("SW(4,200,0,links=8)"))
    assert h800.params_for(other) == default_params(other)
    assert a100.system(parse_notation("SW(8,300,0)")).nodes == 1  # its NIC count is dropped on one node


def test_a_file_written_before_the_channel_caps_loads_without_them(tmp_path, good_text):
    """Files written before the per-channel caps lack them: they load uncapped (inf), which is how they
    were fitted and what they predicted; a file with the caps keeps them, and a bad cap is refused."""
    caps = ("ring_ll128_max_GBps", "tree_max_GBps", "tree_ll128_max_GBps")
    lines = good_text.split("\n")
    assert all(any(ln.startswith(f"{c} = ") for ln in lines) for c in caps)
    old = tmp_path / "old.toml"
    old.write_text("\n".join(ln for ln in lines if not ln.startswith(caps)))
    calib, full = C.read_calibration(old), C.read_calibration(_write(tmp_path / "new.toml", good_text))
    assert all(getattr(calib.params, c) == math.inf for c in caps)
    assert all(0 < getattr(full.params, c) < math.inf for c in caps)
    assert dataclasses.replace(calib.params, **{c: getattr(full.params, c) for c in caps}) == full.params
    bad = tmp_path / "bad.toml"
    bad.write_text("\n".join(f"{ln.split(' = ')[0]} = -1.0" if ln.startswith("tree_max_GBps") else ln for ln in lines))
    with pytest.raises(InputError) as e:
        C.read_calibration(bad)
    assert e.value.field == f"{bad}: params.tree_max_GBps"


def _write(path, text):
    path.write_text(text)
    return path


def test_held_out_errors_are_the_validations_sizes_split_both_ways() -> None:
    from dse.costs.nccl.bundled import bundled
    from dse.costs.nccl.fit import errors, held_out_errors
    from dse.costs.nccl.validation import calibrated, split_runs

    systems, measurements = bundled()
    m = measurements["nebius_h100"]
    system = systems[m.system]
    held = held_out_errors(system, m.runs())
    usable = errors(system, None, m.runs())
    assert sorted(e.sample.size_bytes for e in held) == sorted(e.sample.size_bytes for e in usable)  # each once
    fit_on, held_out = split_runs("sizes", m, m)  # `dse validate nccl`'s case: even rows fitted, odd predicted
    case = errors(system, calibrated("sizes", system, system, fit_on), held_out)
    by_size = {e.sample.size_bytes: e.error for e in held}
    assert case and all(by_size[e.sample.size_bytes] == e.error for e in case)
