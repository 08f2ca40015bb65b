"""Workload loading: the ASTRA-sim 1.0 files, the native TOML form, the generators, damaged files."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from dse.core.errors import InputError
from dse.training.generators import generate, parameter_count, resnet152, transformer
from dse.training.workload_formats import to_astra_text
from dse.training.workload_load import load_workload
from dse.training.workloads import ALL, DP, MP, Layer, Workload

REPO = Path(__file__).resolve().parents[1]


def artifact_text(name: str, tmp_path: Path) -> Path:
    """The Themis artifact's ASTRA-sim 1.0 file `name`, rebuilt from the bundled TOML (whose figures
    `test_workload_formats.py` proves equal to the original's)."""
    dst = tmp_path / name
    dst.write_text(to_astra_text(load_workload(Path(name).stem)))
    return dst


# file -> (parallelism, layers, model-parallel group, [(layer index, slot, collective, bytes)])
EXPECTED = {
    "Resnet50_DataParallel_fused.txt": ("DATA", 54, None, [(0, "wg", "all_reduce", 51005824)]),
    "gnmt_fp16_fused.txt": ("DATA", 10, None, [(0, "wg", "all_reduce", 267788288)]),
    "large_DLRM_fused.txt": (
        "HYBRID_DLRM",
        20,
        None,
        [(0, "fwd", "all_to_all", 100663296), (0, "wg", "all_reduce", 1329694368)],
    ),
    "medium_DLRM_fused.txt": (
        "HYBRID_DLRM",
        20,
        None,
        [(0, "ig", "all_to_all", 4194304), (0, "wg", "all_reduce", 114823168)],
    ),
    "transformer_1t_fused_only_t.txt": (
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
        18,
        128,
        [(0, "ig", "all_reduce", 805306368), (0, "wg", "all_reduce", 240316416), (5, "ig", "all_gather", 6291456)],
    ),
    "microAllReduce.txt": ("MICRO", 1, None, [(0, "wg", "all_reduce", 1048576)]),
}


@pytest.mark.parametrize("fname", sorted(EXPECTED))
def test_artifact_workload_files_load(fname: str, tmp_path: Path) -> None:
    wl = load_workload(artifact_text(fname, tmp_path))
    par, n, group, comms = EXPECTED[fname]
    assert (wl.parallelism, len(wl.layers), wl.model_parallel_group) == (par, n, group)
    for li, slot, coll, nbytes in comms:
        assert wl.layers[li].comm(slot) == (coll, nbytes)
    assert (wl.compute_ns == 0) == (par == "MICRO")  # a microbenchmark only communicates


def test_gnmt_first_layer_fields() -> None:
    layer = load_workload("gnmt_fp16_fused").layers[0]
    assert layer == Layer("Var2", 136174, None, 0, 136174, None, 0, 50592, "all_reduce", 267788288, 33554, -1)


def test_scopes_of_the_strategies() -> None:
    t = load_workload("transformer_1t_fused_only_t")
    assert (t.scope("fwd"), t.scope("ig"), t.scope("wg")) == (MP, MP, DP)
    assert (t.checkpoints, t.checkpoint_initiates) == ((0, 9), (17, 8))
    d = load_workload("large_DLRM_fused")
    assert {d.scope(s) for s in ("fwd", "ig", "wg")} == {ALL}


def _damage(tmp_path: Path, lineno: int, new: str) -> Path:
    lines = to_astra_text(load_workload("gnmt_fp16_fused")).splitlines()
    lines[lineno - 1] = new
    dst = tmp_path / "gnmt_damaged.txt"
    dst.write_text("\n".join(lines) + "\n")
    return dst


@pytest.mark.parametrize(
    ("lineno", "new", "words"),
    [
        (5, "Var4\t-1\t298155\tNONE\t0\t29815x\tNONE\t0\t232953\tNONE\t0\t50331", "ig_compute"),
        (7, "Var6\t-1\t136174\tNONE\t0\t136174", "12 fields"),
        (4, "Var3\t-1\t136174\tBROADCAST\t0\t136174\tNONE\t0\t50592\tNONE\t0\t33554", "communication type"),
        (1, "PIPELINE", "parallelism"),
        (2, "ten", "layer count"),
    ],
)
def test_damaged_file_names_file_and_line(tmp_path: Path, lineno: int, new: str, words: str) -> None:
    path = _damage(tmp_path, lineno, new)
    with pytest.raises(InputError) as e:
        load_workload(path)
    msg = str(e.value)
    assert f"gnmt_damaged.txt:{lineno}:" in msg and words in msg
    assert "\n" not in msg


def test_wrong_layer_count(tmp_path: Path) -> None:
    dst = tmp_path / "short.txt"
    lines = to_astra_text(load_workload("gnmt_fp16_fused")).splitlines()
    dst.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(InputError, match=r"short.txt:\d+: the file says 10 layers but has 9"):
        load_workload(dst)


def test_damaged_file_cli_exit_2_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from dse.cli.iterate import add_iterate_parser

    path = _damage(tmp_path, 6, "Var5\t-1\t136174\tNONE\t0\t136174\tNONE\t0\t50592\tNONE\t-3\t33554")
    parser = argparse.ArgumentParser(prog="dse")
    add_iterate_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["iterate", str(path), "--topology", "2D-SW_SW"])
    with pytest.raises(InputError) as e:
        args.func(args)
    assert f"{path}:6:" in str(e.value)


def test_damaged_file_via_dse_cli(tmp_path: Path, run_cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Through `dse.cli.main.main`; until dse.cli.main hooks `iterate` itself, the test hooks it."""
    import dse.cli.main
    from dse.cli.iterate import add_iterate_parser

    if "iterate" not in dse.cli.main.build_parser().format_help():
        original = dse.cli.main.build_parser

        def hooked() -> argparse.ArgumentParser:
            parser = original()
            sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
            add_iterate_parser(sub)
            return parser

        monkeypatch.setattr(dse.cli.main, "build_parser", hooked)
    path = _damage(tmp_path, 6, "Var5\t-1\t136174\tNONE\t0\t136174\tNONE\t0\t50592\tNONE\t-3\t33554")
    code, out, err = run_cli("iterate", str(path), "--topology", "2D-SW_SW")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and f"{path}:6:" in err


def test_copy_of_artifact_file_loads_the_same(tmp_path: Path) -> None:
    src = artifact_text("large_DLRM_fused.txt", tmp_path)
    dst = tmp_path / "copy.txt"
    shutil.copy(src, dst)
    assert load_workload(dst).layers == load_workload(src).layers == load_workload("large_DLRM_fused").layers


def test_toml_examples_load() -> None:
    tiny = load_workload(REPO / "workloads" / "tiny_hybrid.toml")
    assert tiny.parallelism == "HYBRID" and tiny.model_parallel_group == 32 and len(tiny.layers) == 2
    assert tiny.layers[1].comm("wg") == ("all_reduce", 16777216)
    micro = load_workload(REPO / "workloads" / "micro_allreduce.toml")
    assert micro.layers == load_workload("microAllReduce").layers


def test_toml_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[[layers]]\nfwd_compute = -1\n')
    with pytest.raises(InputError, match=r"bad.toml: layers\[0\].fwd_compute"):
        load_workload(bad)
    bad.write_text('name = "x"\nparallelism = "HYBRID"\n[[layers]]\nfwd_compute = 1\n')
    with pytest.raises(InputError, match="model_parallel_group"):
        load_workload(bad)
    bad.write_text('name = "x"\n[[layers]\n')
    with pytest.raises(InputError, match="bad.toml: not valid TOML"):
        load_workload(bad)


def test_mapping_and_workload_pass_through() -> None:
    wl = load_workload({"name": "m", "layers": [{"fwd_compute": 3, "wg_comm": "allreduce", "wg_bytes": 10}]})
    assert wl.layers[0].comm("wg") == ("all_reduce", 10) and load_workload(wl) is wl


def test_resnet152_parameter_count() -> None:
    wl = resnet152()
    assert parameter_count(wl) == pytest.approx(60.2e6, rel=0.005)
    assert parameter_count(resnet152(fused=0)) == parameter_count(wl)
    assert len(resnet152(fused=0).layers) == 1 + 3 * (3 + 8 + 36 + 3) + 4 + 1
    assert parameter_count(resnet152(bytes_per_param=4), 4) == parameter_count(wl)


def test_resnet152_roofline_scales() -> None:
    a, b = resnet152(batch=32), resnet152(batch=64, efficiency=0.35)
    assert b.layers[1].fwd_compute == pytest.approx(4 * a.layers[1].fwd_compute)
    assert a.parallelism == "DATA" and a.scope("wg") == ALL


def test_transformer_generator() -> None:
    wl = transformer(layers=2, hidden=1024, seq=128, batch=2, mp=32)
    assert len(wl.layers) == 4 and wl.model_parallel_group == 32
    act = 2 * 128 * 1024 * 2
    assert wl.layers[0].comm("fwd") == ("all_reduce", act) and wl.layers[0].comm("ig") == ("all_reduce", act)
    assert wl.layers[0].comm("wg") == ("all_reduce", 4 * 1024 * 1024 // 32 * 2)
    assert wl.layers[1].comm("wg") == ("all_reduce", 8 * 1024 * 1024 // 32 * 2)
    assert (wl.scope("fwd"), wl.scope("wg")) == (MP, DP)


def test_generator_specs() -> None:
    wl = load_workload("transformer:layers=3,mp=32")
    assert len(wl.layers) == 6 and wl.model_parallel_group == 32
    assert isinstance(generate("resnet152"), Workload)
    with pytest.raises(InputError, match="bad option"):
        load_workload("resnet152:depth=50")
    with pytest.raises(InputError, match="no such file"):
        load_workload("no_such_workload.txt")


# ----- `dse workload list`: every name dse iterate takes, with its parallelism and shape (issue 36) --
def _files() -> dict[str, tuple[str, dict]]:
    """Every bundled workload file, read as TOML: name dse iterate takes -> (kind, table)."""
    import tomllib

    data = REPO / "dse" / "data"
    found = {p.stem: ("bundled", p) for p in (data / "workloads").glob("*.toml")}
    found |= {f"libra_{p.stem}": ("libra", p) for p in (data / "libra").glob("*.toml") if p.stem != "networks"}
    return {name: (kind, tomllib.loads(p.read_text())) for name, (kind, p) in found.items()}


def _fits_by_hand(table: dict) -> list[int] | str:
    """Per dimension, the model-parallel group (fwd, which equals ig in these files) times the
    data-parallel one (wg), groups of 0 counting as one; "any" without a placement."""
    if "placement" not in table:
        return "any"
    p = table["placement"]
    assert p["fwd"] == p["ig"]
    return [max(f, 1) * max(w, 1) for f, w in zip(p["fwd"], p["wg"])]


def test_the_list_names_every_bundled_and_libra_workload_and_the_generators(run_cli) -> None:
    import json

    from dse.training.generators import GENERATORS

    code, out, _ = run_cli("workload", "list", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    files = _files()
    assert code == 0 and set(rows) == set(files) | set(GENERATORS)
    assert any(name.startswith("libra_") for name in files) and len(rows) == len(json.loads(out))
    for name, (kind, table) in files.items():
        row = rows[name]
        assert row["kind"] == kind and row["parallelism"] == table["parallelism"], name
        assert row["model_parallel_group"] == table.get("model_parallel_group"), name
        assert row["fits"] == _fits_by_hand(table), name
        assert row["placement"] == (
            {k: table["placement"][k] for k in ("fwd", "ig", "wg")} if "placement" in table else None
        )
        assert row["layers"] == len(table["layers"]), name
        assert load_workload(name).name == table["name"]  # every listed name is one dse iterate takes
    assert rows["transformer"]["parallelism"] == "HYBRID" and rows["transformer"]["model_parallel_group"] == 128
    assert rows["resnet152"]["parallelism"] == "DATA" and rows["resnet152"]["fits"] == "any"


def test_the_table_shows_parallelism_and_fit_and_says_what_they_mean(run_cli) -> None:
    import json
    import math

    code, out, _ = run_cli("workload", "list")
    lines = out.splitlines()
    rows = {line.split()[0]: line for line in lines[2:] if line and not line.startswith(" ")}
    _, js, _ = run_cli("workload", "list", "--json")
    for r in json.loads(js):
        line = rows[r["name"]]
        fits = "x".join(map(str, r["fits"])) if isinstance(r["fits"], list) else "any"
        assert f"  {fits}" in line and f"  {r['parallelism']}" in line, line
        if r["placement"] is not None and r["placement"]["fwd"] != [0] * len(r["fits"]):
            mp = math.prod(max(k, 1) for k in r["placement"]["fwd"])
            dp = math.prod(max(k, 1) for k in r["placement"]["wg"])
            assert f", mp {mp} x dp {dp}" in line and mp * dp == math.prod(r["fits"])
        elif r["model_parallel_group"]:
            assert f", mp {r['model_parallel_group']}" in line and f"any of >= {r['model_parallel_group']} NPUs" in line
    assert "libra_gpt_3_4d" in rows and "4x8x4x32" in rows["libra_gpt_3_4d"]
    note = " ".join(line.strip() for line in lines if line.startswith(("fits:", "  ")))
    assert "--placement FILE" in note and "Generators: with their default options" in note
