"""The command line: tables, JSON, and bad input as one line with exit code 2."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dse import evaluate

REPO = Path(__file__).resolve().parent.parent


def test_evaluate_json_has_the_result_fields(run_cli):
    code, out, err = run_cli("evaluate", "4D-Ring_FC_Ring_SW", "--size", "1GB", "--json")
    assert code == 0 and err == ""
    d = json.loads(out)
    r = evaluate("4D-Ring_FC_Ring_SW", size="1GB")
    assert d["time_ns"] == r.time_ns and d["bw_utilization"] == r.bw_utilization
    for key in ("busbw_GBps", "dim_busy_ns", "dim_utilization", "orders", "scheduler", "queue", "cost_model"):
        assert key in d
    assert len(d["orders"]) == 64


def test_evaluate_every_parameter_is_a_flag(run_cli):
    code, out, _ = run_cli(
        "evaluate",
        "--topology",
        "Ring(4,100,10)_SW(8,50,20)",
        "--collective",
        "reduce_scatter",
        "--size",
        "64MiB",
        "--chunks",
        "8",
        "--scheduler",
        "random",
        "--queue",
        "fifo",
        "--cost-model",
        "astra-sim",
        "--latency-mode",
        "serialized",
        "--active-chunks",
        "2",
        "--seed",
        "3",
        "--json",
    )
    d = json.loads(out)
    r = evaluate(
        "Ring(4,100,10)_SW(8,50,20)",
        collective="reduce_scatter",
        size="64MiB",
        chunks=8,
        scheduler="random",
        queue="fifo",
        cost_model="astra-sim",
        active_chunks=2,
        seed=3,
    )
    assert code == 0 and d["time_ns"] == r.time_ns and d["seed"] == 3 and d["active_chunks"] == 2


def test_evaluate_timeline_json(run_cli):
    code, out, _ = run_cli("evaluate", "Ring(4,100,10)", "--size", "1MB", "--chunks", "2", "--json", "--timeline")
    d = json.loads(out)
    assert code == 0 and len(d["timeline"]) == 4 and {"chunk", "dim", "kind", "start", "end"} <= set(d["timeline"][0])


def test_evaluate_table(run_cli):
    code, out, _ = run_cli("evaluate", "3D-FC_Ring_SW", "--size", "1GB")
    assert code == 0 and "BW utilisation" in out and "FC(8,175,700" in out


def test_compare_lists_every_scheduler_and_queue(run_cli):
    code, out, _ = run_cli("compare", "4D-Ring_FC_Ring_SW", "--size", "1GB", "--json", "--node-limit", "20")
    d = json.loads(out)
    pairs = {(r["scheduler"], r["queue"]) for r in d["rows"]}
    assert code == 0 and len(pairs) == 10 and ("themis", "scf") in pairs and ("lp_guided", "scf") in pairs
    bound = d["bound"]["bound_ns"]
    for r in d["rows"]:  # every schedule is at or above the bound, and its gap says by how much
        assert r["time_ns"] >= bound and r["gap_to_bound"] == pytest.approx(r["time_ns"] / bound - 1)
    base = next(r for r in d["rows"] if r["scheduler"] == "baseline" and r["queue"] == "fifo")
    assert base["speedup_vs_baseline_fifo"] == 1.0
    themis = next(r for r in d["rows"] if r["scheduler"] == "themis" and r["queue"] == "scf")
    assert themis["speedup_vs_baseline_fifo"] == pytest.approx(base["time_ns"] / themis["time_ns"])
    code, out, _ = run_cli("compare", "4D-Ring_FC_Ring_SW", "--size", "1GB", "--node-limit", "20")
    assert code == 0 and "speed-up" in out and "themis" in out and "gap" in out


def test_topologies(run_cli):
    code, out, _ = run_cli("topologies")
    assert code == 0 and all(n in out for n in ("2D-SW_SW", "4D-Ring_FC_Ring_SW", "3D-FC_Ring_SW"))


@pytest.mark.parametrize(
    "args,field",
    [
        (["evaluate", "Ring(4,375", "--size", "1GB"], "topology"),
        (["evaluate", "Ring(4,375,20)_Blob(2,1,1)", "--size", "1GB"], "kind"),
        (["evaluate", "5D-nothing", "--size", "1GB"], "topology"),
        (["evaluate", "Ring(4,0,20)", "--size", "1GB"], "bandwidth"),
        (["evaluate", "Ring(4,-3,20)", "--size", "1GB"], "bandwidth"),
        (["evaluate", "Ring(4,100,20)", "--size", "lots"], "size"),
        (["evaluate", "Ring(4,100,20)", "--size", "-1GB"], "size"),
        (["evaluate", "Ring(4,100,20)", "--size", "1GB", "--scheduler", "magic"], "scheduler"),
        (["evaluate", "Ring(4,100,20)", "--size", "1GB", "--queue", "lifo"], "queue"),
        (["evaluate", "Ring(4,100,20)", "--size", "1GB", "--cost-model", "ns3"], "cost_model"),
        (["evaluate", "Ring(4,100,20)", "--size", "1GB", "--collective", "broadcast"], "collective"),
        (["evaluate", "Ring(4,100,20)", "--size", "1GB", "--chunks", "0"], "chunks"),
        (["evaluate", "Ring(4,100,20)", "--size", "1GB", "--latency-mode", "later"], "latency_mode"),
        (
            [
                "evaluate",
                "Ring(4,100,20)",
                "--size",
                "1GB",
                "--cost-model",
                "astra-sim",
                "--latency-mode",
                "overlapped",
            ],
            "latency_mode",
        ),
        (["evaluate", "SW(6,100,20)", "--size", "1GB", "--cost-model", "astra-sim"], "topology dim 0"),
        (["evaluate", "--size", "1GB"], "topology"),
        (["evaluate", "Ring(4,100,20)"], "dse evaluate"),
        (["nosuchcommand"], "dse"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(run_cli, args, field):
    code, out, err = run_cli(*args)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dse: error: ") and field in lines[0], err


def test_console_script_has_no_traceback():
    p = subprocess.run(
        [sys.executable, "-m", "dse", "evaluate", "Ring(4,0,20)", "--size", "1GB"], capture_output=True, text=True
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr and p.stdout == ""
    assert p.stderr.count("\n") == 1


# `python -m` this module with ARGS: `python -m dse ARGS`, with a Ctrl-C where {where} as the
# command imports dse.sim.evaluate (the KeyboardInterrupt is raised there, as SIGINT's handler does), and
# a thread that takes signals, as numpy's OpenBLAS pool in every command that loads numpy
CTRL_C_AS_A_MODULE_LOADS = """
import runpy, sys, threading, time

threading.Thread(target=time.sleep, args=(60,), daemon=True).start()

class Interrupt:
    def __set_name__(self, owner, name):
        raise KeyboardInterrupt

class Hook:
    def find_spec(self, name, path=None, target=None):
        if name == "dse.sim.evaluate":
            {where}

sys.meta_path.insert(0, Hook())
runpy.run_module("dse", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(
    "where",
    [
        "exec('raise KeyboardInterrupt', {})",  # a string exec: dataclasses make their methods so
        "type('C', (), {'field': Interrupt()})",  # a __set_name__: a dataclass field's, say
    ],
    ids=["string-exec", "set-name"],
)
def test_ctrl_c_inside_a_dataclass_being_made_is_one_line_and_exit_130(where, tmp_path):
    """Under `python -m dse` (as the fault suite and study workers run it), a Ctrl-C that landed in a
    string exec ended the process by SIGINT (exit -2) after `main` had handled it (CPython notes it
    as unhandled; its re-raised SIGINT reaches a thread that does not block it), and one in a
    `__set_name__` came out as a RuntimeError (a traceback, exit 1). The reproduce SIGINT fault case
    did both on a loaded machine: its signal, sent at 60 %, landed as `dse.output.plots`' dataclasses loaded."""
    (tmp_path / "ctrl_c.py").write_text(CTRL_C_AS_A_MODULE_LOADS.format(where=where))
    p = subprocess.run(
        [sys.executable, "-m", "ctrl_c", "evaluate", "Ring(4,100,10)", "--size", "1MB"],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (p.returncode, p.stderr, p.stdout) == (130, "dse: interrupted\n", "")


# `python -m` this module: `python -m dse evaluate ...` (or what the console script runs), with a
# SIGINT sent as the command line starts to load
CTRL_C_AT_START = """
import os, runpy, signal, sys

signal.signal(signal.SIGINT, signal.default_int_handler)  # as started from a shell

class Hook:
    def find_spec(self, name, path=None, target=None):
        if name == "dse.cli.main":
            os.kill(os.getpid(), signal.SIGINT)

sys.meta_path.insert(0, Hook())
{start}
"""


@pytest.mark.parametrize(
    "start",
    [
        "runpy.run_module('dse', run_name='__main__', alter_sys=True)",  # python -m dse
        "from dse.__main__ import run; sys.exit(run())",  # the console script
    ],
    ids=["python-m", "console-script"],
)
def test_ctrl_c_while_the_command_line_loads_is_one_line_and_exit_130(start, tmp_path):
    """A Ctrl-C before `main` handles it (while the command line imports, tens of ms) ended the
    process with a traceback, by SIGINT: it now waits until `main` runs."""
    (tmp_path / "ctrl_c.py").write_text(CTRL_C_AT_START.format(start=start))
    p = subprocess.run(
        [sys.executable, "-m", "ctrl_c", "evaluate", "Ring(4,100,10)", "--size", "1MB"],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (p.returncode, p.stderr, p.stdout) == (130, "dse: interrupted\n", "")


def test_every_option_of_every_command_has_help() -> None:
    """`--json` and every other option say what they do in --help (issue: `--json` had no help)."""
    import argparse

    from dse.cli.main import build_parser

    def walk(parser: argparse.ArgumentParser, path: str) -> list[str]:
        missing = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    missing += walk(sub, f"{path} {name}")
            elif action.option_strings and not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"{path} {action.option_strings[-1]}")
        return missing

    assert walk(build_parser(), "dse") == []
