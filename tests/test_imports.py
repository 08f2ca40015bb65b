"""What `import dse` and the command line load: each in a fresh interpreter, checked on `sys.modules`
(never on time; scripts/bench_import.py measures that).

`import dse` loads only the package's own file, `dse --help` only the parser, `dse evaluate` the
simulator but none of the heavy libraries (solvers, plotting, search, the Chakra reader)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import dse

REPO = Path(__file__).resolve().parent.parent

#: Libraries none of `import dse`, `dse --help` and `dse evaluate` needs.
HEAVY = (
    "optuna",
    "pulp",
    "highspy",
    "scipy",
    "numpy",
    "matplotlib",
    "joblib",
    "tqdm",
    "google.protobuf",
    "sqlalchemy",
    "dask",
    "psycopg",
    "pandas",
)

#: dse's own modules that only other commands need (bounds, search, workloads, figures...).
NOT_FOR_EVALUATE = (
    "dse.bounds",
    "dse.schedulers.lp_guided",
    "dse.bounds.floorfit",
    "dse.training.iteration",
    "dse.training.chakra.read",
    "dse.training.workloads",
    "dse.training.workload_load",
    "dse.costs.nccl.cost_model",
    "dse.costs.nccl.logs",
    "dse.explore.study.spaces",
    "dse.explore.study.studies",
    "dse.explore.study.trials",
    "dse.explore.study.workers",
    "dse.explore.study.storage",
    "dse.explore.sweep.sweeps",
    "dse.output.plots",
    "dse.output.timeline_plot",
    "dse.output.reproduce",
)

#: The simulator's modules, which `dse --help` does not need.
SIMULATOR = (
    "dse.evaluate",
    "dse.sim.simulate",
    "dse.core.topology",
    "dse.costs",
    "dse.schedulers",
    "dse.output.report",
    "dse.core.units",
)


def fresh_modules(code: str) -> list[str]:
    """Run `code` in a fresh interpreter (this checkout first on the path, its output discarded) and
    return the names in its `sys.modules` at the end."""
    script = (
        "import contextlib, io, json, sys\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        + "".join(f"    {line}\n" for line in code.splitlines())
        + "print(json.dumps(sorted(sys.modules)))\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.splitlines()[-1])


def loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    """The entries of `names` that are in `modules`, as a package or as one of its submodules."""
    return [n for n in names if any(m == n or m.startswith(n + ".") for m in modules)]


def run_cli(*argv: str) -> str:
    """Code that runs `dse ARGV` through `dse.cli.main.main`; --help's exit is caught."""
    return f"from dse.cli.main import main\ntry:\n    main({list(argv)!r})\nexcept SystemExit:\n    pass"


def test_import_dse_loads_only_the_package() -> None:
    modules = fresh_modules("import dse")
    assert [m for m in modules if m.startswith("dse")] == ["dse"]
    assert loaded(modules, HEAVY + ("argparse",)) == []


def test_help_loads_only_the_parser() -> None:
    modules = fresh_modules(run_cli("--help"))
    assert loaded(modules, HEAVY) == [] and loaded(modules, SIMULATOR) == []
    assert "dse.cli.main" in modules


def test_evaluate_loads_the_simulator_and_nothing_heavy() -> None:
    modules = fresh_modules(run_cli("evaluate", "4D-Ring_FC_Ring_SW", "--size", "1GB"))
    assert loaded(modules, HEAVY) == [] and loaded(modules, NOT_FOR_EVALUATE) == []
    assert "dse.sim.evaluate" in modules and "dse.sim.simulate" in modules  # it did run


def test_evaluate_json_loads_nothing_heavy() -> None:
    modules = fresh_modules(run_cli("evaluate", "Ring(4,100,10)_SW(8,50,20)", "--size", "1MB", "--json", "--timeline"))
    assert loaded(modules, HEAVY) == [] and loaded(modules, NOT_FOR_EVALUATE) == []


def test_every_subcommand_help_lists_its_names() -> None:
    """The help texts' name lists are filled in when printed, from the registries themselves."""
    import argparse

    from dse.cli.main import build_parser
    from dse.cli.parser import NAME_LISTS
    from dse.costs import COST_MODELS
    from dse.schedulers import SCHEDULERS

    def helps(parser: argparse.ArgumentParser) -> list[str]:
        out = [parser.format_help()]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    out += helps(sub)
        return out

    parser = build_parser()
    texts = helps(parser)
    assert not [t for t in texts for kind in NAME_LISTS if "{" + kind + "}" in t]
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    evaluate_help = " ".join(sub.choices["evaluate"].format_help().split())
    assert f"one of {', '.join(SCHEDULERS)} (default themis)" in evaluate_help
    assert f"one of {', '.join(COST_MODELS)} (default paper)" in evaluate_help
    assert "lp_guided" in evaluate_help


def test_every_public_name_resolves() -> None:
    for name in dse.__all__:
        assert getattr(dse, name) is not None, name
    assert set(dse.__all__) <= set(dir(dse))
    assert dse.__version__ == "0.1.0"


def test_every_public_name_resolves_in_a_fresh_process() -> None:
    code = (
        "import dse\n"
        "names = sorted(dse.__all__)\n"
        "assert set(names) <= set(dir(dse)), 'dir'\n"
        "for n in names:\n"
        "    getattr(dse, n)\n"
        "from dse import *\n"
        "assert callable(evaluate) and callable(compare) and callable(lower_bounds) and callable(iterate)"
    )
    modules = fresh_modules(code)
    assert "dse.sim.evaluate" in modules


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="'nope'"):
        dse.nope  # noqa: B018
    assert not hasattr(dse, "nope") and not hasattr(dse, "_nope")


def test_evaluate_stays_the_function_after_its_module_is_imported() -> None:
    """`dse.evaluate` is the function even when its module `dse.sim.evaluate` is imported first (as
    `dse.explore.sweep.sweeps` does), as when the package imported it eagerly."""
    code = (
        "import dse.explore.sweep.sweeps, dse\n"
        "import dse.sim.evaluate as ev\n"
        "from dse import evaluate\n"
        "assert callable(dse.evaluate) and dse.evaluate is evaluate is ev.evaluate\n"
        "assert dse.evaluate.__module__ == 'dse.sim.evaluate'"
    )
    fresh_modules(code)


def test_submodules_are_attributes_of_the_package() -> None:
    code = "import dse\nassert dse.core.topology.parse_topology is dse.parse_topology\nassert dse.core.units.parse_size"
    modules = fresh_modules(code)
    assert "dse.core.topology" in modules and "dse.bounds" not in modules


def test_lp_guided_resolves_without_importing_anything_else() -> None:
    code = (
        "from dse.schedulers import SCHEDULERS, get_scheduler\n"
        "assert 'lp_guided' in SCHEDULERS and 'dse.schedulers.lp_guided' not in sys.modules\n"
        "assert list(SCHEDULERS)[-2:] == ['lp_guided', 'optimal']\n"
        "s = get_scheduler('lp_guided')\n"
        "assert type(s).__name__ == 'LPGuidedScheduler' and SCHEDULERS['lp_guided'] is type(s)"
    )
    assert "dse.schedulers.lp_guided" in fresh_modules(code)


def test_lp_guided_from_the_command_line() -> None:
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "dse",
            "evaluate",
            "Ring(4,100,10)_SW(8,50,20)",
            "--size",
            "1MB",
            "--chunks",
            "8",
            "--scheduler",
            "lp_guided",
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["scheduler"] == "lp_guided"


def test_lazy_registry_imports_on_lookup_only() -> None:
    """Names, `in` and `len` import nothing; a lookup imports the module, which must register it."""
    from dse.core.registry import LazyRegistry

    r: LazyRegistry[int] = LazyRegistry([("a", 1)], {"b": "dse.no_such_module", "c": "json"})
    assert list(r) == ["a", "b", "c"] and "b" in r and "z" not in r and len(r) == 3 and r["a"] == 1
    with pytest.raises(ModuleNotFoundError):
        r["b"]
    with pytest.raises(ImportError, match="json did not register 'c'"):
        r["c"]
    r["c"] = 3
    del r["b"]
    assert dict(r) == {"a": 1, "c": 3}
    with pytest.raises(KeyError):
        r["z"]
