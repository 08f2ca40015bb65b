"""The `dse` command line: `dse.cli.main` builds the parser and runs a command; one module per
group of subcommands."""

from dse import _lazy_submodules

__getattr__ = _lazy_submodules(__name__)
