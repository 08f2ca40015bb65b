"""The `dse` command line: the top-level parser, built from each command module's `add_*_parser`,
and the error policy of `main` (bad input: one line, exit 2; Ctrl-C: one line, exit 130; a
file-system failure: one line, exit 1).

A command module registers its subcommand with ``set_defaults(func=cmd_...)``; `main` calls that
function with the parsed arguments and returns its exit code. Building the parser imports only the
command modules' argparse code: each command imports what it runs when it runs."""

from __future__ import annotations

import argparse
import signal
import sys
import warnings
from collections.abc import Sequence

from dse.cli.collective import add_bound_parser, add_compare_parser, add_evaluate_parser, add_topologies_parser
from dse.cli.compare_designs import add_compare_designs_parser
from dse.cli.iterate import add_iterate_parser
from dse.cli.libra import add_libra_parser
from dse.cli.nccl import add_nccl_parser
from dse.cli.optimal import add_optimal_parser
from dse.cli.parser import Parser
from dse.cli.plot import add_plot_parser
from dse.cli.reproduce import add_reproduce_parser
from dse.cli.study import add_study_parser
from dse.cli.sweep import add_sweep_parser
from dse.cli.validate import add_validate_parser
from dse.cli.workload import add_workload_parser
from dse.core.errors import InputError, RunError, note_swallowed_interrupt


def build_parser() -> argparse.ArgumentParser:
    """The whole `dse` parser: every subcommand, in the order --help lists them."""
    parser = Parser(prog="dse", description="Collectives on multi-dimensional networks: Themis, bounds, search.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    add_evaluate_parser(sub)
    add_compare_parser(sub)
    add_bound_parser(sub)
    add_sweep_parser(sub)
    add_plot_parser(sub)
    add_study_parser(sub)
    add_reproduce_parser(sub)
    add_iterate_parser(sub)
    add_compare_designs_parser(sub)
    add_workload_parser(sub)
    add_optimal_parser(sub)
    add_libra_parser(sub)
    add_nccl_parser(sub)
    add_validate_parser(sub)
    add_topologies_parser(sub)
    return parser


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


_warned: set[str] = set()  # the warnings this command printed: each once, however often it is raised


def _warn_one_line(message, category, filename, lineno, file=None, line=None):
    text = _one_line(message)
    if text not in _warned:
        _warned.add(text)
        print(f"dse: warning: {text}", file=sys.stderr)


def _resumable(args: argparse.Namespace | None) -> bool:
    """Whether the command's work survives an interruption (the same command resumes it)."""
    command = getattr(args, "command", None)
    return command in ("sweep", "reproduce") or (command == "study" and getattr(args, "study_command", None) == "run")


def _unraisable(args: sys.UnraisableHookArgs) -> None:
    if args.exc_type is not None and issubclass(args.exc_type, KeyboardInterrupt):
        note_swallowed_interrupt()  # raised again at the next safe point, never printed as a traceback
    else:
        sys.__unraisablehook__(args)


def _interrupted(args: argparse.Namespace | None) -> int:
    """Ctrl-C: one line on stderr (how to resume, where that applies), exit code 130."""
    if not getattr(args, "quiet", False):
        hint = "; nothing finished is lost: run the same command again to resume" if _resumable(args) else ""
        print(f"dse: interrupted{hint}", file=sys.stderr)
    return 130


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `dse` console script; returns the exit code.

    Bad input: one line on stderr, exit 2. Ctrl-C: one line (how to resume, where that applies),
    exit 130. A file-system failure no check foresaw (a full disk, say): one line, exit 1."""
    warnings.showwarning = _warn_one_line
    _warned.clear()
    sys.unraisablehook = _unraisable
    args: argparse.Namespace | None = None
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # `dse.__main__` blocks it while loading
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_help()
            return 2
        return int(args.func(args))
    except InputError as e:
        print(f"dse: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return _interrupted(args)
    except BrokenPipeError:  # e.g. `dse ... | head`
        return 0
    except RunError as e:
        print(f"dse: error: {_one_line(e)}", file=sys.stderr)
        return 1
    except RuntimeError as e:  # Python 3.11 wraps a Ctrl-C that lands in a `__set_name__` (as a dataclass is made)
        if not isinstance(e.__cause__, KeyboardInterrupt):
            raise
        return _interrupted(args)
    except MemoryError:  # a last guard: the input limits are meant to refuse such a run before it starts
        print(
            "dse: error: out of memory; what was finished is kept (allowed: a smaller input, "
            "or lower DSE_MAX_WORK and the DSE_MAX_* input limits)",
            file=sys.stderr,
        )
        return 1
    except OSError as e:
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"dse: error: {where}{_one_line(e.strerror or e)}", file=sys.stderr)
        return 1


def console_main() -> int:
    """The `dse` console script (`dse.__main__.run` calls it): `main`, then Ctrl-C is ignored while the interpreter
    shuts down (its exit handlers join worker threads; an interrupt there would end the process by
    SIGINT after the work is done and its exit code chosen).

    SIGINT is blocked before it is ignored: a Ctrl-C that arrived while `signal.signal` installed
    SIG_IGN would otherwise be raised after this function's ``try`` (Python runs the handler at a
    later instruction) and end the process by SIGINT. Blocked, it waits in the kernel and is
    discarded once ignored; one already caught is raised by `signal.signal`, inside the ``try``.
    Last, `_forget_handled_interrupt`: no Ctrl-C is left unhandled once this function returns."""
    code = 130
    try:
        try:
            code = main()
        finally:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:  # after main's return: `code` is what main chose, or 130 before it
        pass
    finally:
        _forget_handled_interrupt()
    return code


def _forget_handled_interrupt() -> None:
    """Clear CPython's note of a KeyboardInterrupt that left a string `exec` or `eval`.

    CPython notes such an interrupt as unhandled even when it is caught later, and under
    ``python -m dse`` it then ends the process by SIGINT (exit -2) in place of the exit code chosen.
    Dataclasses build their methods with a string `exec` as a module loads, so a Ctrl-C during a
    command's imports would do that. Each string `exec` clears the note as it starts."""
    exec("pass", {})


if __name__ == "__main__":  # pragma: no cover
    sys.exit(console_main())
