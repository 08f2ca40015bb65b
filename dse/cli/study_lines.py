"""The line `dse study run` prints per study: trials, storage and the best design or Pareto front,
objectives named with their units. Imported by `dse.cli.study.cmd_study_run` when it runs."""

from __future__ import annotations

from typing import Any

from dse.explore.study.units import shown


def _best_text(res: dict[str, Any]) -> str:
    """A study's best trial, its objective named with its unit, or its Pareto front's size."""
    if "best_value" in res:
        s = shown(res.get("best_metric") or "")
        name = res.get("best_name", s.name)
        return f"best {name} = {s.text(res['best_value'])} (trial {res['best_trial']}): {res['best_topology']}"
    if "pareto_size" in res:
        return f"Pareto front of {res['pareto_size']} designs over {' and '.join(res.get('objectives', []))}"
    return ""


def run_line(res: dict[str, Any]) -> str:
    """The line `dse study run` prints for one study (one that needed no trial says so)."""
    if res["complete_before"] >= res["asked"]:
        return (
            f"{res['study']}: already {res['complete']} complete trials (asked for {res['asked']}); nothing to run "
            f"on {res['storage']}; {_best_text(res)}"
        )
    trials = f"{res['complete']} complete trials ({res['failed']} failed)"
    return f"{res['study']}: {trials} on {res['storage']}; {_best_text(res)}"
