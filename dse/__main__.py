"""`python -m dse` and the `dse` console script: `dse.cli.main.run`, with Ctrl-C held back while it loads.

Loading the command line takes tens of ms, more on a loaded machine; a Ctrl-C then ended the
process with a traceback, by SIGINT (exit -2). SIGINT is blocked first, so such a Ctrl-C waits in
the kernel until `dse.cli.main.main` unblocks it inside its handling: one line, exit 130."""

import signal
import sys


def run() -> int:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    from dse.cli.main import run as cli_run

    return cli_run()


if __name__ == "__main__":
    sys.exit(run())
