"""The `dse` command line: `dse.cli.main` builds the parser and runs a command; one module per
group of subcommands."""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
