"""`python -m dse` and the `dse` console script: `dse.cli.main.console_main`, with Ctrl-C held back
while it loads.

A Ctrl-C while the command line loads would end the process with a traceback, by SIGINT (exit -2).
SIGINT is blocked first, so such a Ctrl-C waits in the kernel until `dse.cli.main.main` unblocks it
inside its handling: one line, exit 130."""

import signal
import sys


def run() -> int:
    """Block SIGINT, load the command line and run it (`dse.cli.main.console_main`); the exit code.
    The name is the console script's entry point (pyproject.toml)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    from dse.cli.main import console_main

    return console_main()


if __name__ == "__main__":
    sys.exit(run())
