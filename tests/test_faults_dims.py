"""Many dimensions and big enumerations (issue 33, dse.testing.faults_dims): the campaign's cases on
a few seeds, and one regression test per item: 7, 9 and 10 dimensions answer, more than the limit
is refused in one line, CP-SAT's seed range, a 40-dimension search space.

Every command runs in a subprocess under 1 GiB of address space (``RLIMIT_AS``) with a safety
timeout that fails the test; nothing here measures time."""

from __future__ import annotations

import itertools
import json
import os
import random
from pathlib import Path

import pytest

from dse.core.errors import InputError
from dse.testing import faults_dims as fd


def ring(nd: int) -> str:
    return "_".join(f"{('Ring', 'FC', 'SW')[i % 3]}(2,{100 + 10 * i},{i})" for i in range(nd))


def dse_run(argv: list[str], cwd: Path, **env: str) -> tuple[int, str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("DSE_")}
    base["PYTHONPATH"] = os.pathsep.join(p for p in (str(fd.ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return fd.run_limited(argv, cwd, {**base, **env})


def one_line(code: int, err: str, *words: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("dse: error: "), (code, err)
    assert all(w in lines[0] for w in words) and "Traceback" not in err, err
    return lines[0]


# ----------------------------------------------------------------------------- the campaign's cases
@pytest.mark.parametrize("seed", range(5))
def test_campaign_cases(seed: int, tmp_path: Path) -> None:
    assert fd.dims_case(random.Random(f"test-{seed}"), tmp_path) == []


# ----------------------------------------------------------------------------- 1. counted, then enumerated
@pytest.mark.parametrize("nd", [7, 9, 10])
def test_compare_and_optimal_answer_on_many_dimensions_at_few_chunks(nd: int, tmp_path: Path) -> None:
    """With 16 chunks or fewer both solved the exact problem, enumerating nd! orders first (no
    answer in 30-60 s, 40 dimensions OOM-killed): now the orders are counted and both fall back."""
    code, out, err = dse_run(["compare", ring(nd), "--size", "1MB", "--chunks", "16"], tmp_path)
    assert code == 0 and err == "", err
    assert "note: exact optimum not solved" in out and "themis" in out
    assert ("lp_only" if nd <= 8 else "ideal_only") in out
    code, out, err = dse_run(["optimal", ring(nd), "--size", "1MB", "--chunks", "4", "--json"], tmp_path)
    assert code == 0 and err == "", err
    best = json.loads(out)
    assert best["status"] in ("optimal", "feasible") and best["work"] == 0 and best["time_ns"] >= best["bound_ns"]
    assert any("the exact problem was not solved" in n for n in best["notes"])
    assert best["found_by"] in ("themis", "lp_guided") and len(best["orders"]) == 4
    assert list(tmp_path.iterdir()) == []


def test_the_exact_problem_is_counted_before_any_order_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    from dse.bounds import exact
    from dse.schedulers import order_mix
    from dse.sim.spec import CollectiveSpec

    def no(*args: object) -> None:
        raise AssertionError("enumerated")

    monkeypatch.setattr(itertools, "permutations", no)  # what exact.py and order_mix.py enumerate with
    spec = CollectiveSpec.parse(ring(7), size="1MB", chunks=2)
    with pytest.raises(InputError) as e:
        exact.build_problem(spec)
    assert e.value.field == "topology" and "5,040 dimension orders" in str(e.value)
    assert exact.exact_refusal(CollectiveSpec.parse(ring(3), size="1MB", chunks=2)) is None
    plan = spec.cost_model.chunking(spec.collective, spec.size, spec.chunks, spec.topology, baseline=False)
    nine = CollectiveSpec.parse(ring(9), size="1MB").topology
    with pytest.raises(InputError, match="362,880 chunk types"):
        order_mix.types_for_plan(spec.cost_model, nine, spec.collective, plan, "overlapped")


def test_optimal_falls_back_where_the_exact_model_is_too_large() -> None:
    """Six dimensions and 64 chunks: too many phases for the model (refused before); the seeds."""
    import dse

    best = dse.optimal_schedule(ring(6), size="1MB", chunks=64, work=0.1)
    assert best.work == 0 and best.found_by in ("themis", "lp_guided") and best.time_ns >= best.bound_ns
    assert any("exact model of" in n for n in best.notes)
    assert dse.evaluate(ring(6), size="1MB", chunks=64, **best.replay_args()).time_ns == best.time_ns


# ----------------------------------------------------------------------------- 2. the dimension limit
@pytest.mark.parametrize("nd", [11, 40])
@pytest.mark.parametrize("command", ["compare", "optimal", "bound", "evaluate", "iterate"])
def test_more_dimensions_than_the_limit_are_one_line(nd: int, command: str, tmp_path: Path) -> None:
    topo = ring(nd)
    argv = (
        ["iterate", "microAllReduce", "-t", topo]
        if command == "iterate"
        else [command, topo, "--size", "1MB", "--chunks", "4"]
    )
    line = one_line(*dse_run(argv, tmp_path)[::2], f"topology: {nd} dimensions", "limit of 10", "DSE_MAX_DIMENSIONS")
    assert f"DSE_MAX_DIMENSIONS={nd} " in line  # a plain number, not 4e1
    assert list(tmp_path.iterdir()) == []


def test_the_limit_holds_for_every_form_and_its_variable_raises_it(tmp_path: Path) -> None:
    paper = "Ring_" * 10 + "SW " + "x".join(["2"] * 11) + " " + ",".join(["100"] * 11)
    one_line(*dse_run(["evaluate", paper, "--size", "1MB"], tmp_path)[::2], "11 dimensions")
    one_line(
        *dse_run(["evaluate", "4D-Ring_FC_Ring_SW", "--size", "1MB"], tmp_path, DSE_MAX_DIMENSIONS="3")[::2],
        "4 dimensions",
    )
    code, out, err = dse_run(["topologies"], tmp_path, DSE_MAX_DIMENSIONS="2")  # presets built all the same
    assert code == 0 and "4D-Ring_FC_Ring_SW" in out, err
    code, out, err = dse_run(
        ["compare", ring(40), "--size", "1MB", "--chunks", "16"], tmp_path, DSE_MAX_DIMENSIONS="40"
    )
    assert code == 0 and "ideal_only" in out and "lp_guided not run" in out, err
    one_line(
        *dse_run(["evaluate", "2D-SW_SW", "--size", "1MB"], tmp_path, DSE_MAX_DIMENSIONS="x")[::2], "DSE_MAX_DIMENSIONS"
    )


def test_round_up_prints_small_numbers_whole() -> None:
    from dse.core.limits import round_up_text as _round_up

    assert [_round_up(x) for x in (1, 2.5, 3, 40, 9999)] == ["1", "3", "3", "40", "9999"]
    assert [_round_up(x) for x in (10_000, 3.2e8, 1e9)] == ["1e4", "4e8", "1e9"]


# ----------------------------------------------------------------------------- 3. a 40-dimension space
SPACE = "[space]\nnpus = {npus}\n{shape}\nchunks = [16]\n[space.bandwidth]\nbudget = 800.0\nminimum = 1.0\n"
STUDY = (
    '[study]\nname = "many"\nspace = "space.toml"\nsampler = "random"\nseed = 0\ntrials = 2\n'
    '[workload]\ncollective = "all_reduce"\nsize = "1MB"\n[[objectives]]\nmetric = "time"\n'
)


@pytest.mark.parametrize(
    "shape,field",
    [
        ("dims = [40]\nsizes = [2]", "space.dims: 40 dimensions"),
        (f'shapes = ["{"x".join(["2"] * 40)}"]', "space.shapes: 40 dimensions"),
    ],
)
def test_a_40_dimension_space_is_one_line_and_leaves_no_journal(shape: str, field: str, tmp_path: Path) -> None:
    from dse.explore.study.spaces import SearchSpace

    (tmp_path / "space.toml").write_text(SPACE.format(npus=2**40, shape=shape))
    (tmp_path / "study.toml").write_text(STUDY)
    with pytest.raises(InputError) as e:
        SearchSpace.from_toml(tmp_path / "space.toml")
    assert e.value.field in field
    before = sorted(p.name for p in tmp_path.iterdir())
    one_line(*dse_run(["study", "run", "study.toml", "--no-progress"], tmp_path)[::2], field, "DSE_MAX_DIMENSIONS=40 ")
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no out/ folder, no journal


# ----------------------------------------------------------------------------- 4. CP-SAT's seed
def test_seeds_beyond_cp_sats_range_are_one_line(tmp_path: Path) -> None:
    import dse
    from dse.bounds.optimal import MAX_SEED

    big = str(2**70)
    base = ["2D-SW_SW", "--size", "1MB", "--chunks", "2"]
    one_line(*dse_run(["optimal", *base, "--seed", big, "--work", "0.2"], tmp_path)[::2], "seed", "2147483647")
    one_line(*dse_run(["evaluate", *base, "--seed", big, "--scheduler", "optimal"], tmp_path)[::2], "seed")
    with pytest.raises(InputError) as e:
        dse.optimal_schedule("2D-SW_SW", size="1MB", chunks=2, seed=MAX_SEED + 1)
    assert e.value.field == "seed"
    assert dse.optimal_schedule("2D-SW_SW", size="1MB", chunks=2, seed=MAX_SEED, work=0.2).seed == MAX_SEED
    code, _, err = dse_run(["compare", *base, "--seed", big, "--exact-work", "0.2"], tmp_path)  # random's seed
    assert code == 0, err


def test_no_permutation_is_left_uncounted() -> None:
    """Every module that enumerates the dimension orders counts them first (or runs only below a
    count: the compiled path's shapes at five dimensions, the lattice at six): a new one must be added here."""
    root = fd.ROOT / "dse"
    users = sorted(
        str(p.relative_to(root)) for p in root.rglob("*.py") if "permutations(" in p.read_text(encoding="utf-8")
    )
    assert users == [
        "bounds/exact.py",
        "bounds/floorfit.py",
        "bounds/lattice.py",
        "schedulers/order_mix.py",
        "sim/compiled.py",
        "testing/cost_models.py",
    ]
