"""nccl-tests' JSON results (-J FILE.json) read as its text tables are: the same rows, the same fit,
the settings its environment shows, and bad files refused in one line."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from dse.core.errors import InputError
from dse.costs.nccl.calibration import read_calibration
from dse.costs.nccl.logs import NcclTestsPass, NcclTestsRun, parse_nccl_tests, read_nccl_tests

LOG = Path(__file__).parent.parent / "dse" / "data" / "nccl" / "dgxc_dgxh100_1node_allreduce.txt"


def _pass(p: NcclTestsPass | None, key: str = "time") -> dict[str, Any] | None:
    if p is None:
        return None
    return {key: p.time_us, "alg_bw": p.algbw_GBps, "bus_bw": p.busbw_GBps, "nwrong": p.wrong}


def _as_json(run: NcclTestsRun, *, env: tuple[str, ...] = (), version: int = 3, **edits: Any) -> str:
    """`run` as nccl-tests >= 2.17.3 writes it with -J (src/util.cu: a "%6i" root string, booleans as
    strings, NaN as "nan"), version 1's misspelt average key when `version` is 1."""
    avg_key = "bandwidith" if version == 1 else "bandwidth"
    doc: dict[str, Any] = {
        "version": version,
        "start_time": "2026-11-30 08:00:00",
        "args": ["/opt/nccl-tests/build/all_reduce_perf", "-b", "8", "-e", "16G", "-f", "2", "-J", "r.json"],
        "env": ["PATH=/usr/bin", "HOME=/root", *env],
        "nccl_version": 22703,
        "config": {
            "nthreads": 1, "ngpus": 1, "minimum_bytes": 8, "maximum_bytes": 1 << 34, "step_factor": 2,
            "warmup_iters": 5, "iterations": 20, "aggregated_iterations": 1, "validation": 1, "graph": 0,
            "blocking_collectives": "false", "parallel_init": "false",
            "devices": [
                {"rank": i, "group": 0, "pid": 100 + i, "hostname": "node0", "device": i,
                 "device_hex": "0000:19:00", "device_info": "NVIDIA H100 80GB HBM3"}
                for i in range(run.ranks or 0)
            ],
        },
        "results": [
            {"size": r.size_bytes, "count": r.count, "type": r.type, "redop": r.redop, "root": f"{r.root:6d}",
             "out_of_place": _pass(r.out_of_place), "in_place": _pass(r.in_place),
             "actual_iterations": 20, "experiment_name": ""}
            for r in run.rows
        ],
        "out_of_bounds": {"count": 0, "okay": "true"},
        "average_bus_bandwidth": {avg_key: run.avg_busbw_GBps, "okay": "unchecked"},
        "end_time": "2026-11-30 08:01:00",
    }  # fmt: skip
    doc.update(edits)
    return json.dumps(doc)


@pytest.fixture(scope="module")
def text_run() -> NcclTestsRun:
    (run,) = read_nccl_tests(LOG)
    return run


def test_a_json_file_gives_the_rows_its_text_log_gives(text_run: NcclTestsRun, tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(_as_json(text_run))
    (run,) = read_nccl_tests(path)
    assert run.json and run.collective == "all_reduce" and run.ranks == 8
    assert run.gpus == ("NVIDIA H100 80GB HBM3",) and run.nccl_version == "2.27.3"
    assert run.avg_busbw_GBps == text_run.avg_busbw_GBps and run.settings == () and run.warnings == ()
    assert len(run.rows) == len(text_run.rows) == 32
    for got, want in zip(run.rows, text_run.rows):
        assert (got.size_bytes, got.count, got.type, got.redop, got.root) == (
            want.size_bytes, want.count, want.type, want.redop, want.root,
        )  # fmt: skip
        assert (got.out_of_place, got.in_place) == (want.out_of_place, want.in_place)
    assert (
        run.row_place(run.rows[2]) == "r.json results[2]"
        and text_run.row_place(text_run.rows[0]) == f"{LOG.name}:{text_run.rows[0].line}"
    )


def test_calibrating_on_json_fits_what_the_text_log_fits(text_run: NcclTestsRun, tmp_path: Path, run_cli) -> None:
    (tmp_path / "r.json").write_text(_as_json(text_run))
    code, out, err = run_cli(
        "calibrate", "nccl-tests", str(tmp_path / "r.json"), "-t", "HGX-H100", "-o", str(tmp_path / "j.toml")
    )
    assert code == 0, err
    assert "skipped r.json results[2] (32 B): out-of-place 68.14 us and in-place 13.52 us" in out
    code, _, err = run_cli("calibrate", "nccl-tests", str(LOG), "-t", "HGX-H100", "-o", str(tmp_path / "t.toml"))
    assert code == 0, err
    fit_json, fit_text = read_calibration(str(tmp_path / "j.toml")), read_calibration(str(tmp_path / "t.toml"))
    # the JSON names NCCL 2.27.3 (the text log names none): only that release's NVLSTree hop differs
    assert (fit_json.nccl_version, fit_text.nccl_version) == ("2.27.3", "")
    hop = fit_text.params.nvls_tree_inter_ns
    assert dataclasses.replace(fit_json.params, nvls_tree_inter_ns=hop) == fit_text.params
    assert fit_json.rows == fit_text.rows == 31


def test_the_environment_in_the_json_is_how_the_run_was_made(text_run: NcclTestsRun, tmp_path: Path, run_cli) -> None:
    path = tmp_path / "ring.json"
    path.write_text(_as_json(text_run, env=("NCCL_ALGO=Ring", "NCCL_DEBUG=INFO", "MY_NCCL_PROTO=LL")))
    (run,) = read_nccl_tests(path)
    assert run.settings == (("NCCL_ALGO", "Ring", 1),)  # only NCCL's own names, only those dse reads
    code, out, err = run_cli("calibrate", "nccl-tests", str(path), "-t", "HGX-H100", "-o", str(tmp_path / "c.toml"))
    assert code == 0 and "NCCL_ALGO=ring" in out, err


def test_version_one_cpu_time_null_passes_and_wrong_elements(text_run: NcclTestsRun) -> None:
    doc = json.loads(_as_json(text_run, version=1))
    first = doc["results"][0]
    first["out_of_place"] = None  # a pass nccl-tests did not run (trace replay)
    first["in_place"] = {"cpu_time": 20.5, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 3.0}
    doc["results"][1]["in_place"]["nwrong"] = None  # -c 0: not checked
    doc["results"][1]["in_place"]["bus_bw"] = "nan"
    (run,) = parse_nccl_tests(json.dumps(doc), "v1.json")
    assert run.avg_busbw_GBps == text_run.avg_busbw_GBps  # version 1's "bandwidith"
    assert run.rows[0].out_of_place is None and run.cpu_time
    assert run.rows[0].in_place == NcclTestsPass(20.5, 0.0, 0.0, 3)
    assert run.rows[1].in_place is not None and run.rows[1].in_place.wrong is None
    assert run.rows[1].in_place.busbw_GBps is None
    assert run.warnings == ("results[0] (8 B): 3 wrong elements",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"version": 3, "results": [{"size": 8, "count": 2', "not valid JSON at line 1"),
        ('{"version": 3}', "without a 'results' list"),
        ('{"results": []}', "no result"),
        ('{"results": [{"count": 2}]}', "results[0]: a result without a whole 'size'"),
        ('{"results": [7]}', "results[0]: int is not a result object"),
        ('{"results": [{"size": 1' + "0" * 30 + ', "count": 2}]}', "results[0]: size 1" + "0" * 30 + " B"),
        ('{"a":' * 100_000 + "1" + "}" * 100_000, "nested too deeply"),
    ],
)
def test_bad_json_is_one_input_error(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_nccl_tests(text, "bad.json")


def test_a_json_file_that_contradicts_the_caller_is_refused(text_run: NcclTestsRun) -> None:
    text = _as_json(text_run)
    with pytest.raises(InputError, match="the file's test is all_reduce"):
        parse_nccl_tests(text, "r.json", collective="reduce_scatter")
    with pytest.raises(InputError, match="its devices give 8 ranks"):
        parse_nccl_tests(text, "r.json", ranks=16)
    (run,) = parse_nccl_tests(
        _as_json(text_run, args=["./a.out"], config={}), "r.json", collective="all_reduce", ranks=8
    )
    assert (run.collective, run.ranks) == ("all_reduce", 8)  # the caller's, where the file says nothing


def test_a_cut_json_file_and_an_oversized_one_are_one_line_exit_2(
    text_run: NcclTestsRun, tmp_path: Path, run_cli, monkeypatch
) -> None:
    cut = tmp_path / "cut.json"
    cut.write_text(_as_json(text_run)[:5000])  # a run that crashed mid-sweep
    code, out, err = run_cli("calibrate", "nccl-tests", str(cut), "-t", "HGX-H100", "-o", str(tmp_path / "c.toml"))
    assert code == 2 and out == "" and err.count("\n") == 1 and "not valid JSON" in err, err
    monkeypatch.setenv("DSE_MAX_TEXT_BYTES", "1000")
    code, _, err = run_cli("calibrate", "nccl-tests", str(cut), "-t", "HGX-H100", "-o", str(tmp_path / "c.toml"))
    assert code == 2 and "DSE_MAX_TEXT_BYTES" in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.json"]  # nothing written


def test_a_size_beyond_two_to_the_53_is_refused_in_a_text_row_too() -> None:
    lines = LOG.read_text().splitlines()
    i = next(n for n, line in enumerate(lines) if line.split()[:1] == ["16384"])
    lines[i] = lines[i].replace("16384", "9" * 20, 1)
    with pytest.raises(InputError, match=rf"^t.txt:{i + 1}: size 9{{20}} B"):
        parse_nccl_tests("\n".join(lines), "t.txt")
