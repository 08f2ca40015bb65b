"""`python -m dse`: the same as the `dse` command."""

import sys

from .cli import run

sys.exit(run())
