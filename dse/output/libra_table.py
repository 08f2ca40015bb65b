"""`dse libra-compare`'s table: one row per case, computed in `libra_rows`, drawn in `libra_markdown`."""

from __future__ import annotations

from typing import Any

from dse.explore.libra.compare import LibraComparison


def _bw(bandwidths: tuple[float, ...]) -> str:
    return "/".join(f"{b:.0f}" for b in bandwidths)


def libra_rows(results: list[LibraComparison]) -> list[dict[str, Any]]:
    """Each comparison's figures (times in ms, allocations in GB/s per dimension, innermost first)."""
    return [
        {
            "case": r.case,
            "libra_bw": list(r.libra.bandwidths),
            "libra_predicted_ms": r.libra.predicted_ns / 1e6,
            "libra_certified_gap": r.libra.gap,
            "libra_themis_ms": r.libra_simulated.themis_ns / 1e6,
            "libra_baseline_ms": r.libra_simulated.baseline_ns / 1e6,
            "dse_bw": list(r.dse.bandwidths),
            "dse_themis_ms": r.dse.themis_ns / 1e6,
            "dse_baseline_ms": r.dse.baseline_ns / 1e6,
            "dse_gain": r.dse_gain,
            "libra_prediction_error": r.prediction_error,
            "trials": r.trials,
        }
        for r in results
    ]


def libra_markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a markdown table."""
    out = [
        "| case | LIBRA's allocation (GB/s) | LIBRA predicts | dse simulates it: Themis+SCF / baseline | "
        "dse's allocation (GB/s) | dse simulates it: Themis+SCF / baseline | dse's gain | LIBRA's error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['case']} | {_bw(r['libra_bw'])} | {r['libra_predicted_ms']:.3f} ms | "
            f"{r['libra_themis_ms']:.3f} / {r['libra_baseline_ms']:.3f} ms | {_bw(r['dse_bw'])} | "
            f"{r['dse_themis_ms']:.3f} / {r['dse_baseline_ms']:.3f} ms | {100 * r['dse_gain']:+.3f} % | "
            f"{100 * r['libra_prediction_error']:+.2f} % |"
        )
    return "\n".join(out)
