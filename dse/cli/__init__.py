"""The `dse` command line: `dse.cli.main` builds the parser from every command module and holds the
error policy (exit codes, one-line errors); `dse.cli.parser` holds the argparse pieces several
commands share.

A command module (`collective`, `study`, `iterate`, ...) registers its subcommands with
``add_*_parser(sub)`` and ``set_defaults(func=cmd_...)``; it imports only argparse code at its top,
and each `cmd_*` imports what it runs in one block at its start, so `dse --help` loads none of the
simulator. What a command prints or computes beyond a few lines lives in a companion module that
imports at its top and is imported by the command (`comparison`, `iterate_report`, `nccl_tests`,
...). A new command: a module with ``add_NAME_parser`` and ``cmd_NAME``, hooked in
`dse.cli.main.build_parser`."""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
