"""LIBRA's allocation against dse's, both simulated by dse (`dse libra-compare`, docs/model.md §13).

For one LIBRA case (a workload with its placement, a network, a constraint set):

1. LIBRA's answer: the exact optimum of LIBRA's own model (`dse.explore.libra.model.libra_optimum`:
   no latency, the hierarchical collective, nothing overlapping), and the time LIBRA predicts.
2. dse's answer: a study (`dse.explore.study.workload`; TPE, `trials` trials, seeded) over the same
   constraint set, minimising the iteration time dse simulates with Themis+SCF, compute overlapping
   communication, latency included (`paper` model by default). Its journal lives in `out`, so an
   interrupted comparison resumes with no trial lost or run twice.
3. Both allocations simulated by dse, with Themis+SCF and with the baseline (FIFO).

Latencies: LIBRA has none; dse gives each dimension the latency of its price tier in the Themis
paper's machines (`TIER_LATENCY_NS`: 20 ns between chiplets, 700 ns in a package or a node, 1.7 us
between pods). Every bandwidth is at least `MINIMUM_GBPS` in both answers (LIBRA's optimum is
taken over the same polytope as the study's).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.topology import Topology
from dse.explore.hwcost import HardwareCost
from dse.explore.libra.bw_constraints import LIBRA_CONSTRAINTS, BandwidthPolytope
from dse.explore.libra.files import LibraNetwork, read_libra_cost_model, read_libra_network
from dse.explore.libra.model import LibraOptimum, libra_optimum
from dse.explore.study.objectives import Objective
from dse.explore.study.spaces import SearchSpace
from dse.explore.study.storage import load_study, trial_record
from dse.explore.study.studies import StudySpec
from dse.explore.study.workers import run_study
from dse.explore.study.workload import WorkloadTarget, measure_workload
from dse.training.libra_read import read_libra_workload
from dse.training.workload_load import load_workload
from dse.training.workloads import Workload

BUNDLED = Path(__file__).resolve().parents[2] / "data" / "libra"
#: the workloads compared by default, and every workload LIBRA ships a communicator for
DEFAULT_WORKLOADS = ("GPT_3", "MSFT_1T", "Turing_NLG")
ALL_WORKLOADS = (*DEFAULT_WORKLOADS, "ResNet_50")
#: LIBRA's communicator file of each workload, per network (its file names differ in case)
COMMUNICATORS = {
    ("GPT_3", "4d"): "GPT_3_4d.yml",
    ("GPT_3", "3d"): "GPT_3_3d.yml",
    ("MSFT_1T", "4d"): "MSFT_1T_4d.yml",
    ("MSFT_1T", "3d"): "MSFT_1T_3d.yml",
    ("Turing_NLG", "4d"): "Turing_NLG_4D.yml",
    ("Turing_NLG", "3d"): "Turing_NLG_3D.yml",
    ("ResNet_50", "4d"): "ResNet_50_4d.yml",
    ("ResNet_50", "3d"): "ResNet_50_3d.yml",
}
TIER_LATENCY_NS = {"InterChiplet": 20.0, "InterPackage": 700.0, "InterNode": 700.0, "InterPod": 1700.0}
MINIMUM_GBPS = 1.0


@dataclass(frozen=True)
class LibraCase:
    """One comparison's inputs: a workload (with its placement), a network, its prices, a constraint set."""

    workload: Workload
    network: LibraNetwork
    prices: HardwareCost
    constraint_set: str
    constraints: tuple[str, ...]

    @property
    def name(self) -> str:
        """The case's name: ``WORKLOAD_<n>d_<constraint set>``."""
        return f"{self.workload.name}_{self.network.ndims}d_{self.constraint_set}"

    def latencies(self) -> tuple[float, ...]:
        """Each dimension's latency (ns), its price tier's in `TIER_LATENCY_NS` (0 for an unknown tier)."""
        return tuple(TIER_LATENCY_NS.get(t, 0.0) for t in self.network.tiers)

    def topology(self, bandwidths: tuple[float, ...]) -> Topology:
        """The case's network as a dse topology with these per-NPU bandwidths (GB/s) and `latencies`."""
        return self.network.topology(bandwidths, self.latencies())

    def polytope(self) -> BandwidthPolytope:
        """The allocations the case's constraints allow, every bandwidth at least `MINIMUM_GBPS`."""
        return BandwidthPolytope.parse(list(self.constraints), self.network.ndims, minimum=MINIMUM_GBPS)


@dataclass(frozen=True)
class Simulated:
    """An allocation and dse's simulated iteration with Themis+SCF and with the baseline (FIFO)."""

    bandwidths: tuple[float, ...]
    themis_ns: float
    baseline_ns: float
    cost_usd: float

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Simulated:
        """From a workload study's trial record (`dse.explore.study.workload.measure_workload`)."""
        return cls(
            tuple(float(b) for b in record["bandwidths_GBps"]),
            record["iteration_themis_ns"],
            record["iteration_baseline_ns"],
            record["cost_usd"],
        )


@dataclass(frozen=True)
class LibraComparison:
    """One case: LIBRA's optimum (and its predicted time), both allocations simulated, the study's size."""

    case: str
    libra: LibraOptimum
    libra_simulated: Simulated
    dse: Simulated
    trials: int

    @property
    def dse_gain(self) -> float:
        """How much faster dse's allocation runs than LIBRA's, both with Themis+SCF (0.02: 2 %)."""
        return self.libra_simulated.themis_ns / self.dse.themis_ns - 1.0

    @property
    def prediction_error(self) -> float:
        """LIBRA's predicted time against dse's baseline simulation of LIBRA's own allocation."""
        return self.libra.predicted_ns / self.libra_simulated.baseline_ns - 1.0


def load_cases(
    network: str = "4d",
    workloads: tuple[str, ...] = DEFAULT_WORKLOADS,
    constraint_sets: tuple[str, ...] = tuple(LIBRA_CONSTRAINTS),
    libra_dir: str | Path | None = None,
) -> list[LibraCase]:
    """The cases: bundled data (converted from LIBRA by scripts/convert_libra.py), or LIBRA's own
    files in `libra_dir` (its ``inputs`` folder, or ../shared/workloads/libra), read as they are."""
    if network not in ("3d", "4d"):
        raise InputError("network", f"{network!r}", "4d, 3d (LIBRA's two networks)")
    for w in workloads:
        if w not in ALL_WORKLOADS:
            raise InputError("workload", f"{w!r}", ", ".join(ALL_WORKLOADS))
    for c in constraint_sets:
        if c not in LIBRA_CONSTRAINTS:
            raise InputError("constraints", f"{c!r}", ", ".join(LIBRA_CONSTRAINTS))
    net, prices = _network(network, libra_dir)
    out = []
    for w in workloads:
        wl = _workload(w, network, libra_dir)
        out += [LibraCase(wl, net, prices, c, LIBRA_CONSTRAINTS[c]) for c in constraint_sets]
    return out


def _network(network: str, libra_dir: str | Path | None) -> tuple[LibraNetwork, HardwareCost]:
    if libra_dir is not None:
        d = Path(libra_dir)
        net = read_libra_network(d / "network" / f"{network}_network.yml")
        return net, read_libra_cost_model(d / "cost_model" / f"{network}_cost_model.yml", net)
    t = tomllib.loads((BUNDLED / "networks.toml").read_text())[network]
    net = LibraNetwork(tuple(t["kinds"]), tuple(t["npus"]), tuple(t["tiers"]))
    return net, HardwareCost.from_table({k: t[k] for k in ("link", "switch_port", "nic")})


def _workload(name: str, network: str, libra_dir: str | Path | None) -> Workload:
    if libra_dir is not None:
        d = Path(libra_dir)
        return read_libra_workload(d / "workload" / f"{name}.txt", d / "communicator" / COMMUNICATORS[name, network])
    wl = load_workload(str(BUNDLED / f"{name.lower()}_{network}.toml"))
    assert isinstance(wl, Workload)
    return wl


def simulate(case: LibraCase, target: WorkloadTarget, bandwidths: tuple[float, ...]) -> Simulated:
    """One allocation simulated by dse with Themis+SCF and the baseline, as a study's trial is."""
    return Simulated.from_record(measure_workload(target, case.topology(bandwidths), case.prices))


def study_spec(case: LibraCase, target: WorkloadTarget, trials: int, seed: int, out: Path) -> StudySpec:
    """The study of one case: its network's one shape, the constraint set's polytope, Themis+SCF."""
    net = case.network
    table = {
        "npus": net.total_npus,
        "shapes": ["x".join(map(str, net.npus))],
        "kinds": [[k] for k in net.kinds],
        "bandwidth": {"constraints": list(case.constraints), "minimum": MINIMUM_GBPS},
        "latency": {"tiers": list(case.latencies())},
    }
    space = SearchSpace.from_table(table)
    objective = (Objective("iteration_time", "minimize", "themis", "scf"),)
    return StudySpec(
        f"libra.{case.name}", space, "", 0, target.cost_model, objective, (), "tpe", seed, trials, case.prices,
        "", str(out), target,
    )  # fmt: skip


def compare(
    case: LibraCase, *, trials: int = 300, seed: int = 0, out: str | Path, cost_model: str = "paper", chunks: int = 64
) -> LibraComparison:
    """LIBRA's allocation and dse's best after `trials` study trials, both simulated (module docstring)."""
    target = WorkloadTarget(case.workload, cost_model, chunks)
    optimum = libra_optimum(case.workload, case.network, case.polytope(), prices=case.prices)
    spec = study_spec(case, target, trials, seed, Path(out))
    url = str(Path(out) / f"{spec.name}.journal")
    run_study(spec, storage=url)
    mine = Simulated.from_record(trial_record(load_study(spec.name, url).best_trial))
    return LibraComparison(case.name, optimum, simulate(case, target, optimum.bandwidths), mine, trials)
