"""`dse compare` under a closed-form cost model (`nccl`): NCCL's algorithms and protocols, not schedules.
Imported by `dse.cli.collective.cmd_compare` when it runs."""

from __future__ import annotations

import argparse
import json
from typing import Any

from dse.core.topology import Topology
from dse.costs import get_cost_model
from dse.output.nccl_report import candidates_text, nccl_candidates
from dse.output.report import utilization_note
from dse.sim.evaluate import evaluate


def compare_closed_form(args: argparse.Namespace, topo: Topology, spec: dict[str, Any]) -> int:
    """`dse compare` under a closed-form model (`nccl`): print NCCL's algorithms and protocols, its
    pick marked, or one JSON object; `spec` holds the collective's keywords. Exit code 0."""
    res = evaluate(topo, seed=args.seed, **spec)
    rows = nccl_candidates(res, topo, get_cost_model(spec["cost_model"]))
    if args.json:
        out = {
            "topology": res.topology,
            "notation": topo.notation(),
            "collective": res.collective,
            "size_bytes": res.size_bytes,
            "cost_model": res.cost_model,
            "time_ns": res.time_ns,
            "algbw_GBps": res.algbw_GBps,
            "busbw_GBps": res.busbw_GBps,
            "candidates": [r.to_dict() for r in rows],
            "bw_utilization_note": utilization_note(res.cost_model),
        }
        print(json.dumps(out))
    else:
        print(candidates_text(rows, res, topo))
    return 0
