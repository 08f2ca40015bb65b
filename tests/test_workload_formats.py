"""Lossless conversion of workloads (`dse workload convert`) and the bundled Themis-artifact workloads."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dse.training.iteration import iterate
from dse.training.workload_formats import convert, figures_sha256, to_astra_text, to_toml
from dse.training.workload_load import bundled_workloads, load_workload
from dse.training.workload_read import load_toml_text

SHARED_WL = Path(__file__).resolve().parents[2] / "shared" / "workloads" / "astra-sim-1.0"
BUNDLED = [
    "Resnet50_DataParallel_fused",
    "gnmt_fp16_fused",
    "large_DLRM_fused",
    "medium_DLRM_fused",
    "microAllReduce",
    "transformer_1t_fused_only_t",
]


def test_the_six_artifact_workloads_are_bundled() -> None:
    assert sorted(bundled_workloads(), key=str.lower) == sorted(BUNDLED, key=str.lower)


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_toml_holds_every_figure_of_its_source(name: str) -> None:
    """The TOML rendered back to ASTRA-sim text hashes to the source's recorded figures hash; with
    ../shared beside the repository, the source file itself is checked too (no skip without it:
    the recorded hash is what was computed from it at conversion)."""
    wl = load_workload(name)
    assert len(wl.source_sha256) == 64 and "Themis artifact" in wl.origin
    assert figures_sha256(to_astra_text(wl)) == wl.source_sha256
    text = bundled_workloads()[name].read_text()
    assert text.startswith("# Converted by dse workload convert from ")
    original = SHARED_WL / f"{name}.txt"
    if original.is_file():
        assert figures_sha256(original.read_text()) == wl.source_sha256
        assert load_workload(original) == wl


def test_figures_hash_ignores_whitespace_only() -> None:
    a = "DATA\n1\nx\t-1\t1\tNONE\t0\t2\tNONE\t0\t3\tALLREDUCE\t8\t4\n"
    assert figures_sha256(a) == figures_sha256(a.replace("\t", "   ") + "\n\n")
    assert figures_sha256(a) != figures_sha256(a.replace("\t8\t", "\t9\t"))


@pytest.mark.parametrize("name", ["gnmt_fp16_fused", "large_DLRM_fused", "transformer_1t_fused_only_t"])
def test_text_and_toml_give_the_same_iteration(name: str, tmp_path: Path) -> None:
    txt = tmp_path / f"{name}.txt"
    convert(name, txt)
    toml = tmp_path / f"{name}.toml"
    convert(txt, toml)
    assert load_workload(toml) == load_workload(txt) == load_workload(name)
    assert load_workload(toml).source_sha256 == figures_sha256(txt.read_text())
    for sched, queue in (("baseline", "fifo"), ("themis", "scf")):
        a = iterate(txt, "4D-Ring_FC_Ring_SW", scheduler=sched, queue=queue)
        b = iterate(toml, "4D-Ring_FC_Ring_SW", scheduler=sched, queue=queue)
        assert a.time_ns == b.time_ns and a.exposed_comm_ns == b.exposed_comm_ns


def test_generated_workload_converts_to_toml_not_to_text(tmp_path: Path) -> None:
    wl = load_workload("transformer:layers=2,mp=32")
    out = tmp_path / "t.toml"
    convert("transformer:layers=2,mp=32", out)
    assert load_workload(out) == wl
    assert load_toml_text(to_toml(wl)) == wl
    with pytest.raises(Exception, match="not a whole number"):
        convert("transformer:layers=2,mp=32", tmp_path / "t.txt")
    assert not (tmp_path / "t.txt").exists()


def test_cli_convert(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "gnmt.txt"
    src.write_text(to_astra_text(load_workload("gnmt_fp16_fused")).replace("\t", "    "))
    out = tmp_path / "gnmt.toml"
    code, stdout, err = run_cli("workload", "convert", str(src), "-o", str(out))
    assert code == 0 and err == "" and "10 layers" in stdout
    assert replace(load_workload(out), name="gnmt_fp16_fused") == load_workload("gnmt_fp16_fused")
    assert out.read_text().splitlines()[0] == "# converted by `dse workload convert` from gnmt.txt"
    before = out.read_bytes()
    for argv, words in (
        ([str(src), "-o", str(out)], "exists"),
        ([str(src), "-o", str(tmp_path / "x.csv")], "suffix"),
        ([str(tmp_path / "missing.txt"), "-o", str(tmp_path / "y.toml")], "no such file"),
    ):
        code, stdout, err = run_cli("workload", "convert", *argv)
        assert code == 2 and stdout == "" and len(err.strip().splitlines()) == 1 and words in err
    assert out.read_bytes() == before and not (tmp_path / "y.toml").exists()
    code, _, _ = run_cli("workload", "convert", str(src), "-o", str(out), "--force", "--origin", "mine")
    assert code == 0 and out.read_text().startswith("# mine\n")


def test_cli_list(run_cli) -> None:  # type: ignore[no-untyped-def]
    import json

    from dse.training.workload_load import libra_workloads

    code, out, _ = run_cli("workload", "list", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0 and set(BUNDLED) | set(libra_workloads()) | {"resnet152", "transformer"} == set(rows)
    assert rows["transformer_1t_fused_only_t"]["layers"] == 18


@pytest.mark.parametrize(
    ("header", "words"),
    [
        ("HYBRID_TRANSFORMER model_parallel_NPU_group: 2 checkpoints: 1 5", "checkpoints: layer 5 does not exist"),
        ("HYBRID_TRANSFORMER model_parallel_NPU_group: 2 checkpoints: 3 0", "needs a count and that many"),
        ("DATA pipeline: 4", "unknown option 'pipeline:'"),
    ],
)
def test_bad_parallelism_line(tmp_path: Path, header: str, words: str) -> None:
    from dse.core.errors import InputError

    f = tmp_path / "w.txt"
    f.write_text(f"{header}\n1\nx -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 0\n")
    with pytest.raises(InputError, match="w.txt:1: ") as e:
        load_workload(f)
    assert words in str(e.value)


def test_bundled_names_any_case_and_unknown_names_listed() -> None:
    from dse.core.errors import InputError

    assert load_workload("GNMT_FP16_FUSED") == load_workload("gnmt_fp16_fused")
    with pytest.raises(InputError, match="gnmt_fp16_fused.*resnet152"):
        load_workload("gnmt")
