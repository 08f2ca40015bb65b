"""The options of `dse iterate` on a per-rank trace: ASTRA-sim 2.x's files as they are
(dse.training.chakra.ranks_run; `dse.cli.ranks_run` runs it).

A trace runs per rank when it has a file per rank (``PREFIX.1.et`` beside ``PREFIX.0.et``) or when
an option only a per-rank run has is given (`RANK_OPTIONS`); a single rank file is then every
rank's, as ASTRA-sim runs copies of it. The text output is the run's summary, then one row per
class of alike ranks (its ranks, finish, compute and exposed time); ``--json`` gives every field of
`RanksResult`, ``finish_ns_by_rank``, ``exposed_ns_by_rank`` and ``compute_ns_by_rank`` among them
(``--timeline`` adds the spans); ``--trace FILE.json`` writes Chrome / Perfetto trace events.
"""

from __future__ import annotations

import argparse

#: the options of a per-rank run (their argparse destinations)
RANK_OPTIONS = ("system", "comm_groups", "remote_memory", "peak_tflops", "mem_bw", "trace")


def add_rank_options(p: argparse.ArgumentParser) -> None:
    """The per-rank options of `dse iterate`."""
    p.add_argument(
        "--system",
        default=None,
        metavar="SYS.json",
        help="an ASTRA-sim 2.x system configuration: sets the scheduler, queue, chunks, endpoint delay, roofline",
    )
    p.add_argument(
        "--comm-groups",
        default=None,
        metavar="GROUPS.json",
        help='ASTRA-sim\'s communicator-group file ({"<pg_name>": [ranks]}) for collectives with a pg_name',
    )
    p.add_argument(
        "--remote-memory",
        default=None,
        metavar="MEM.json",
        help="ASTRA-sim's remote-memory configuration, for MEM_LOAD/MEM_STORE nodes",
    )
    p.add_argument("--peak-tflops", default=None, help="roofline without --system: peak compute in TFLOP/s")
    p.add_argument("--mem-bw", default=None, help="roofline without --system: memory bandwidth, GB/s (10^9 B/s)")
    p.add_argument(
        "--trace", default=None, metavar="FILE.json", help="per-rank runs: write Chrome / Perfetto trace events"
    )
