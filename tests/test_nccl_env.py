"""NCCL's settings in a cost model's name (``nccl,NCCL_ALGO=ring``): parsing, the forced times
everywhere a cost model is taken, and bad settings as one line."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from dse.core.errors import InputError
from dse.core.topology import parse_topology
from dse.costs import get_cost_model
from dse.costs.nccl.env import NcclEnv, split_settings
from dse.costs.nccl.model import predict
from dse.sim.evaluate import evaluate
from dse.training.iteration import iterate

TOPO = "SW(8,450,0,links=18)_SW(2,50,0,links=1)"
SIZES = (8, 4096, 1 << 20, 64 << 20, 1 << 30)


def _dse(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dse", *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_settings_are_read_in_any_spelling_and_named_canonically() -> None:
    base, env = split_settings("nccl:HGX-H100, nccl_proto=ll128 ,NCCL_ALGO=NVLSTree")
    assert base == "nccl:HGX-H100" and env == NcclEnv("nvls_tree", "LL128", None)
    assert env.suffix() == ",NCCL_ALGO=nvls_tree,NCCL_PROTO=LL128"
    assert split_settings("nccl:my,file.toml") == ("nccl:my,file.toml", NcclEnv())  # no NCCL_: all calibration
    one = get_cost_model("nccl,NCCL_MAX_NCHANNELS=8,NCCL_ALGO=Ring")
    assert one is get_cost_model("NCCL,nccl_algo=ring,NCCL_MAX_NCHANNELS=8")
    assert one.label == "nccl,NCCL_ALGO=ring,NCCL_MAX_NCHANNELS=8"
    assert get_cost_model("nccl,NCCL_PROTO=Simple").label == "nccl,NCCL_PROTO=Simple"
    assert get_cost_model("nccl:HGX-H100,NCCL_ALGO=tree").label == "nccl:HGX-H100,NCCL_ALGO=tree"
    assert not NcclEnv().forced and NcclEnv(max_channels=1).forced


def test_lists_and_exclusions_name_one_model_and_nccl_picks_among_those_allowed() -> None:
    base, env = split_settings("nccl:HGX-H100,NCCL_ALGO=Ring,Tree, NCCL_PROTO=^LL128,NCCL_MAX_NCHANNELS=4")
    assert base == "nccl:HGX-H100" and env == NcclEnv("tree,ring", "LL,Simple", 4)
    assert env.suffix() == ",NCCL_ALGO=tree,ring,NCCL_PROTO=LL,Simple,NCCL_MAX_NCHANNELS=4"
    assert split_settings("nccl" + env.suffix())[1] == env  # a label reads back as itself
    assert get_cost_model("nccl,NCCL_ALGO=^NVLS,NVLSTree") is get_cost_model("nccl,NCCL_ALGO=tree,ring")
    assert get_cost_model("nccl,NCCL_ALGO=^CollNetDirect,PAT").label == "nccl"  # allows all the model runs
    system, params = get_cost_model("nccl").system(parse_topology(TOPO))  # type: ignore[attr-defined]
    for size in SIZES:
        free = predict(system, "all_reduce", size, params=params)
        runs = {c.algo for c in free.candidates}
        single = {a: predict(system, "all_reduce", size, params=params, algo=a).time_ns for a in runs}
        for allow in (("tree", "ring"), ("ring", "nvls_tree"), ("tree", "nvls_tree")):
            algo = NcclEnv(algo=",".join(allow)).algo
            pick = predict(system, "all_reduce", size, params=params, algo=algo)
            best = min(single[a] for a in allow if a in runs)  # under the defaults the tuner's times are the times
            assert pick.algo in allow and pick.time_ns == best
            assert evaluate(TOPO, size=size, cost_model=f"nccl,NCCL_ALGO={algo}").time_ns == pick.time_ns
        rest = predict(system, "all_reduce", size, params=params, algo=NcclEnv(algo=f"^{free.algo}").algo)
        assert rest.algo != free.algo and rest.time_ns >= free.time_ns
    per = get_cost_model("nccl,NCCL_ALGO=Ring;AllReduce:Tree")  # NCCL's per-collective form
    assert per.label == "nccl,NCCL_ALGO=broadcast:ring;reduce:ring;allgather:ring;reducescatter:ring;allreduce:tree"
    assert get_cost_model(per.label) is per
    for collective, algo in (("all_reduce", "tree"), ("all_gather", "ring"), ("reduce_scatter", "ring")):
        want = predict(system, collective, 1 << 20, params=params, algo=algo).time_ns
        assert evaluate(TOPO, collective=collective, size=1 << 20, cost_model=per.label).time_ns == want
    only = get_cost_model("nccl,NCCL_ALGO=allreduce:tree")  # the others keep NCCL's own choice
    for collective in ("all_reduce", "all_gather"):
        free = evaluate(TOPO, collective=collective, size=1 << 30, cost_model="nccl").time_ns
        forced = evaluate(TOPO, collective=collective, size=1 << 30, cost_model=only.label).time_ns
        assert (forced > free) == (collective == "all_reduce")  # NVLSTree is NCCL's all-reduce pick at 1 GiB here
    with pytest.raises(InputError, match="'nvls' cannot run all_reduce"):
        predict(system, "all_reduce", 1 << 20, algo="nvls")  # two nodes: NVLS needs CollNet across them


@pytest.mark.parametrize(
    "name, field",
    [
        ("nccl,NCCL_ALGO=star", "NCCL_ALGO"),
        ("nccl,NCCL_PROTO=LL64", "NCCL_PROTO"),
        ("nccl,NCCL_MAX_NCHANNELS=0", "NCCL_MAX_NCHANNELS"),
        ("nccl,NCCL_MAX_NCHANNELS=65", "NCCL_MAX_NCHANNELS"),
        ("nccl,NCCL_MAX_NCHANNELS=eight", "NCCL_MAX_NCHANNELS"),
        ("nccl,NCCL_ALGO=ring,NCCL_ALGO=tree", "cost_model"),
        ("nccl,NCCL_BUFFSIZE=4194304", "cost_model"),
        ("nccl,NCCL_ALGO=", "cost_model"),
        ("nccl,NCCL_ALGO=ring,extra", "NCCL_ALGO"),
        ("nccl,NCCL_ALGO=ring;tree", "NCCL_ALGO"),
        ("nccl,NCCL_ALGO=allreduse:ring", "NCCL_ALGO"),
        ("nccl,NCCL_ALGO=ring;allreduce:collnetdirect", "NCCL_ALGO"),
        ("nccl,NCCL_ALGO=^ring,tree,nvls,nvlstree", "NCCL_ALGO"),
        ("nccl,NCCL_PROTO=^LL,LL128,Simple", "NCCL_PROTO"),
        ("nccl:,NCCL_ALGO=ring", "cost_model"),
        ("ncclx,NCCL_ALGO=ring", "cost_model"),
    ],
)
def test_a_bad_setting_is_one_input_error_on_its_field(name: str, field: str) -> None:
    with pytest.raises(InputError) as e:
        get_cost_model(name)
    assert e.value.field == field
    with pytest.raises(InputError):
        NcclEnv(algo="star")
    assert NcclEnv(algo="Ring", proto="^LL") == NcclEnv(algo="ring", proto="LL128,Simple")  # held canonical


@pytest.mark.parametrize("size", SIZES)
def test_a_forced_collective_is_the_forced_prediction_and_never_beats_nccls_pick(size: int) -> None:
    model = get_cost_model("nccl")
    system, params = model.system(parse_topology(TOPO))  # type: ignore[attr-defined]
    free = evaluate(TOPO, size=size, cost_model="nccl").time_ns
    for algo, proto, channels in (
        ("ring", None, None),
        ("tree", "LL", None),
        (None, "Simple", 4),
        ("nvls_tree", None, 2),
    ):
        settings = NcclEnv(algo, proto, channels).suffix()
        forced = evaluate(TOPO, size=size, cost_model=f"nccl{settings}").time_ns
        want = predict(system, "all_reduce", size, params=params, algo=algo, proto=proto, max_channels=channels)
        assert forced == want.time_ns
        assert forced >= free  # NCCL's own pick is the fastest under its defaults; a cap only slows
    # all-to-all is send/receive in NCCL: NCCL_ALGO and NCCL_PROTO leave it alone
    a2a = {
        evaluate(TOPO, collective="all_to_all", size=size, cost_model=m).time_ns
        for m in ("nccl", "nccl,NCCL_ALGO=tree")
    }
    assert len(a2a) == 1


def test_a_calibration_and_forcing_combine_on_the_command_line_and_in_the_model() -> None:
    model = get_cost_model("nccl:HGX-H100,NCCL_ALGO=ring,NCCL_PROTO=LL128")
    system, params = model.system(parse_topology("HGX-H100"))  # type: ignore[attr-defined]
    size = 1 << 30
    want = predict(system, "all_reduce", size, params=params, algo="ring", proto="LL128")
    assert evaluate("HGX-H100", size=size, cost_model=model.label).time_ns == want.time_ns
    out = _dse("evaluate", "HGX-H100", "--size", "1GiB", "--cost-model", "nccl,NCCL_ALGO=ring,NCCL_PROTO=LL128",
               "--calibration", "HGX-H100")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "ring / LL128: forced" in out.stdout and "nccl:HGX-H100,NCCL_ALGO=ring,NCCL_PROTO=LL128" in out.stdout
    out = _dse("evaluate", "HGX-H100", "--size", "1GiB", "--cost-model", "nccl", "--calibration", "HGX-H100")
    assert "NCCL's pick" in out.stdout and "forced" not in out.stdout


def test_a_setting_the_topology_cannot_run_is_one_line_exit_2(tmp_path: Path) -> None:
    cases = (
        ("evaluate", TOPO, "--size", "1MB", "--collective", "all_gather", "--cost-model", "nccl,NCCL_ALGO=tree"),
        ("evaluate", "HGX-H100", "--size", "1MB", "--cost-model", "nccl,NCCL_ALGO=nvls_tree"),
        ("compare", TOPO, "--size", "1MB", "--cost-model", "nccl,NCCL_PROTO=LL256"),
        ("evaluate", TOPO, "--size", "1MB", "--cost-model", "paper,NCCL_ALGO=ring"),
        ("evaluate", TOPO, "--size", "1MB", "--cost-model", "paper,NCCL_ALGO=ring", "--calibration", "HGX-H100"),
    )
    for args in cases:
        out = _dse(*args, cwd=tmp_path)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, (args, out.stderr)
    assert list(tmp_path.iterdir()) == []
    assert "NCCL_ALGO: 'tree' cannot run all_gather" in _dse(*cases[0]).stderr


def test_an_iteration_under_forcing_times_each_collective_as_forced() -> None:
    free = iterate("gnmt_fp16_fused", "HGX-H100", cost_model="nccl")
    ring = iterate("gnmt_fp16_fused", "HGX-H100", cost_model="nccl,NCCL_ALGO=ring,NCCL_PROTO=Simple")
    model = get_cost_model("nccl,NCCL_ALGO=ring,NCCL_PROTO=Simple")
    timing = model.collective_timing(parse_topology("HGX-H100"), "all_reduce", 1 << 26)  # type: ignore[attr-defined]
    pred = model.collective_time(parse_topology("HGX-H100"), "all_reduce", 1 << 26)  # type: ignore[attr-defined]
    assert timing[0] == pred.time_ns and timing[2:] == ("ring", "Simple") and 0 < timing[1] < timing[0]
    assert ring.cost_model == "nccl,NCCL_ALGO=ring,NCCL_PROTO=Simple"
    assert ring.comm_ns > free.comm_ns and ring.time_ns >= free.time_ns


def test_a_sweep_compares_nccls_pick_with_forced_ones_under_one_calibration(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(
        '[sweep]\ntopology = "DGX-A100-HDRx3"\nsize = ["64KB", "64MB"]\n'
        'cost_model = ["nccl", "nccl,NCCL_ALGO=tree,NCCL_PROTO=Simple", "paper"]\ncalibration = "DGX-A100-HDRx3"\n'
    )
    out = _dse("sweep", "s.toml", "--out", "s.csv", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader((tmp_path / "s.csv").open()))
    models = sorted({r["cost_model"] for r in rows})
    assert models == ["nccl:DGX-A100-HDRx3", "nccl:DGX-A100-HDRx3,NCCL_ALGO=tree,NCCL_PROTO=Simple", "paper"]
    for r in rows:
        want = evaluate("DGX-A100-HDRx3", size=int(r["size_bytes"]), cost_model=r["cost_model"]).time_ns
        assert float(r["time_ns"]) == pytest.approx(want, rel=1e-12)
    t = {(r["size_bytes"], r["cost_model"]): float(r["time_ns"]) for r in rows}
    assert t[("64000000", models[1])] > t[("64000000", models[0])]  # forced tree/Simple is slower than NCCL's pick


@pytest.mark.parametrize("calibration", [None, "HGX-H100", "DGX-A100-HDRx3"])
def test_the_fast_forced_time_is_predicts_forced_pick(calibration: str | None) -> None:
    from dse.costs.nccl.model import predict_time

    name = "nccl" if calibration is None else f"nccl:{calibration}"
    topologies = ("HGX-H100", TOPO, "DGX-A100-HDRx3", "SW(8,300,0,links=12)_SW(4,25,0,links=1)")
    settings = [
        NcclEnv(a, p, c) for a in (None, "ring", "tree", "nvls") for p in (None, "LL", "Simple") for c in (None, 3)
    ]
    checked = 0
    for topo in topologies:
        system, params = get_cost_model(name).system(parse_topology(topo))  # type: ignore[attr-defined]
        for env in settings[1:]:
            for size in (0, *SIZES, 3 << 30):
                try:
                    want = predict(system, "all_reduce", size, params=params, algo=env.algo, proto=env.proto,
                                   max_channels=env.max_channels)  # fmt: skip
                except InputError as e:
                    with pytest.raises(InputError, match=e.problem):
                        predict_time(system, "all_reduce", size, params, algo=env.algo, proto=env.proto)
                    continue
                got = predict_time(system, "all_reduce", size, params, algo=env.algo, proto=env.proto,
                                   max_channels=env.max_channels)  # fmt: skip
                latency = next(c.latency_ns for c in want.candidates if (c.algo, c.proto) == (want.algo, want.proto))
                assert got == (want.time_ns, latency, want.algo, want.proto), (topo, env, size)
                checked += 1
    assert checked > 200


def test_nccl_tests_takes_lists_exclusions_and_per_collective_forms(tmp_path: Path) -> None:
    free = _dse("nccl-tests", "HGX-H100", "-b", "1G", "-e", "1G")
    rest = _dse("nccl-tests", "HGX-H100", "-b", "1G", "-e", "1G", "--algo", "^NVLS", "--proto", "^LL128")
    assert free.returncode == 0 and rest.returncode == 0, free.stderr + rest.stderr
    assert free.stdout.splitlines()[4].split()[-2:] == ["nvls", "Simple"]  # NCCL's pick on an H100 node at 1 GiB
    assert rest.stdout.splitlines()[4].split()[-2:] == ["ring", "Simple"]
    mine = _dse("nccl-tests", "HGX-H100", "-b", "1G", "-e", "1G", "--algo", "AllGather:tree;AllReduce:^NVLS")
    assert mine.returncode == 0 and mine.stdout.splitlines()[4].split()[-2:] == ["ring", "Simple"], mine.stderr
    bad = _dse("nccl-tests", "HGX-H100", "--algo", "allreduce:ring;tree", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("dse: error: --algo: 'allreduce:ring;tree': only the first")
    assert bad.stderr.count("\n") == 1 and list(tmp_path.iterdir()) == []
