"""The `nccl` cost model: a collective's time on a dse topology is what NCCL would take, in closed form.

Unlike the chunk-phase models (`paper`, `astra-sim`), `nccl` has no phases: `collective_time` gives
the whole collective's time from `dse.costs.nccl.model.predict`, with NCCL's own choice of algorithm
and protocol, on the GPU system the topology describes (`dse.costs.nccl.system.system_of`: dimension
0 the node's fabric, the others the network). `evaluate` and `iterate` ask `closed_form` and take
that time as it is: schedulers, queues, chunks, latency modes and active chunks do not apply.

A `Calibration` (`dse.costs.nccl.calibration`) holds what a topology does not say (GPU generation,
NVLS, network kind, CPU) and the fitted parameters: they were fitted on one system, and each tier
they calibrate is carried onto the defaults of the system a topology describes
(`Calibration.params_for`), so one calibration serves any node count. Without one: NCCL's own
parameters on `DEFAULT_MACHINE`.

An `NcclEnv` (`dse.costs.nccl.env`) forces NCCL's algorithm, protocol or channel cap like NCCL_ALGO,
NCCL_PROTO and NCCL_MAX_NCHANNELS for every collective NCCL tunes (`predict`'s `algo`, `proto` and
`max_channels`); all-to-all and point-to-point messages (send/receive in NCCL) keep NCCL's own. A
collective the forced algorithm or protocol cannot run on a topology is an `InputError` when the
model is checked against it, as NCCL fails such a call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, TypeVar

from dse.core.collectives import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, BROADCAST, REDUCE, REDUCE_SCATTER
from dse.core.errors import InputError
from dse.core.topology import Dim, Topology
from dse.costs import COST_MODELS
from dse.costs.base import CostModel
from dse.costs.nccl.calibration import Calibration
from dse.costs.nccl.env import NcclEnv
from dse.costs.nccl.model import NcclParams, NcclPrediction, NcclSystem, predict, predict_time
from dse.costs.nccl.system import DEFAULT_MACHINE, network_system_of, system_of

_T = TypeVar("_T")

#: dse's collective names as the NCCL model's
NCCL_COLLECTIVE = {
    ALL_REDUCE: "all_reduce",
    REDUCE_SCATTER: "reduce_scatter",
    ALL_GATHER: "all_gather",
    ALL_TO_ALL: "alltoall",
    BROADCAST: "broadcast",
    REDUCE: "reduce",
}


class NcclModel(CostModel):
    """NCCL's collective times (module docstring). `label` is how results name the model: ``nccl``,
    ``nccl:NAME`` for a calibration, either followed by `env`'s settings (``nccl,NCCL_ALGO=ring``;
    `get_cost_model` parses it back)."""

    name = "nccl"
    description = (
        "NCCL on GPU machines: the time of NCCL's algorithm and protocol in closed form, as nccl-tests reports it "
        "(calibrate: dse calibrate nccl-tests; --calibration NAME or FILE)"
    )
    closed_form: ClassVar[bool] = True
    rooted_collectives: ClassVar[bool] = True
    latency_modes: ClassVar[tuple[str, ...]] = ("overlapped",)

    def __init__(self, calibration: Calibration | None = None, label: str = "nccl", env: NcclEnv | None = None) -> None:
        if calibration is not None and not isinstance(calibration, Calibration):
            raise InputError(
                "calibration", f"{type(calibration).__name__} is not a Calibration", "a Calibration or None"
            )
        if env is not None and not isinstance(env, NcclEnv):
            raise InputError("env", f"{type(env).__name__} is not an NcclEnv", "an NcclEnv or None")
        self.calibration = calibration
        self.env = NcclEnv() if env is None else env
        self._label = label
        self._systems: dict[tuple[tuple[Dim, ...], bool], tuple[NcclSystem, NcclParams | None]] = {}

    def __repr__(self) -> str:
        return f"NcclModel(label={self._label!r})"

    @property
    def label(self) -> str:
        """``nccl`` with NCCL's own parameters, ``nccl:NAME`` with a calibration (the name it was given
        by), then the forced settings (``,NCCL_ALGO=ring``)."""
        return self._label

    def system(self, topology: Topology, *, fabric: bool = True) -> tuple[NcclSystem, NcclParams | None]:
        """The GPU system `topology` describes and the parameters to predict it with. `fabric`: the
        topology's first dimension is the node's GPU fabric; False for a collective on outer
        dimensions only (one GPU a node in the group, each with its own share of the network)."""
        key = (topology.dims, fabric)
        hit = self._systems.get(key)
        if hit is None:
            c = self.calibration
            if not fabric:
                system = network_system_of(topology, **(DEFAULT_MACHINE if c is None else c.machine()))
            else:
                system = c.system(topology) if c is not None else system_of(topology, **DEFAULT_MACHINE)
            hit = (system, None if c is None else c.params_for(system))
            if len(self._systems) >= 1024:
                self._systems.clear()
            self._systems[key] = hit
        return hit

    def collective_time(self, topology: Topology, collective: str, size: int, *, fabric: bool = True) -> NcclPrediction:
        """What nccl-tests would report for `collective` (dse's name) of `size` bytes per GPU (the
        nccl-tests size: all-gather's output, reduce-scatter's input) on `topology`."""
        return self._call(predict, topology, collective, size, fabric)

    def message_ns(self, topology: Topology, differ: list[int], size: int) -> float:
        """A point-to-point message of `size` bytes between GPUs whose coordinates differ in the
        dimensions `differ`, as NCCL's send/receive: a broadcast between those two GPUs alone, over
        the node's fabric when only dimension 0 differs, else over the slowest differing network
        dimension's per-GPU share (`dse.costs.p2p.message_ns`)."""
        if differ == [0]:
            fabric = topology.dims[0]
            pair = Topology((Dim(fabric.kind, 2, fabric.bandwidth, 0.0, links=fabric.links),))
            system, params = self.system(pair)
        else:
            slowest = min((topology.dims[d] for d in differ if d > 0), key=lambda d: d.bandwidth)
            system, params = self.system(Topology((Dim("switch", 2, slowest.bandwidth, 0.0),)), fabric=False)
        return predict(system, "broadcast", int(size), params=params).time_ns

    def collective_timing(
        self, topology: Topology, collective: str, size: int, *, fabric: bool = True
    ) -> tuple[float, float, str, str]:
        """`collective_time`'s (time_ns, latency_ns, algo, proto) of NCCL's pick (or the forced one),
        without the other candidates (`predict_time`: what `evaluate` and `iterate` call)."""
        return self._call(predict_time, topology, collective, size, fabric)

    def _call(self, fn: Callable[..., _T], topology: Topology, collective: str, size: int, fabric: bool) -> _T:
        """`fn` (`predict` or `predict_time`) on the topology's system with the forced settings
        (none for all-to-all), a setting the system cannot run named as the user wrote it."""
        system, params = self.system(topology, fabric=fabric)
        name, env = NCCL_COLLECTIVE[collective], self.env
        if name == "alltoall" or not env.forced:
            return fn(system, name, int(size), params=params)
        try:
            return fn(
                system, name, int(size), params=params, algo=env.algo, proto=env.proto, max_channels=env.max_channels
            )
        except InputError as e:
            field = {"algo": "NCCL_ALGO", "proto": "NCCL_PROTO", "max_channels": "NCCL_MAX_NCHANNELS"}.get(
                e.field, e.field
            )
            raise InputError(field, e.problem, e.allowed) from None

    def _check(self, topology: Topology, collective: str) -> None:
        if collective not in NCCL_COLLECTIVE:
            raise InputError("collective", f"{collective!r} has no NCCL model", ", ".join(NCCL_COLLECTIVE))
        self.system(topology)
        if self.env.forced:  # a forced algorithm or protocol the topology cannot run: one InputError now
            self.collective_timing(topology, collective, 0)

    def _phase_cost(self, dim: Dim, kind: str, c: float, latency_mode: str) -> tuple[float, float]:
        raise InputError(
            "cost_model", "nccl has no chunk phases (it is closed form)", "paper, astra-sim or astra-sim-1"
        )

    def bandwidth_time(self, dim: Dim, kind: str, c: float) -> float:
        """Refused (`InputError`): a closed-form model has no per-phase bandwidth time."""
        raise InputError(
            "cost_model", "nccl has no chunk phases (it is closed form)", "paper, astra-sim or astra-sim-1"
        )

    def bytes_per_ns(self, dim: Dim, collective: str | None = None) -> float:
        """The dimension's line rate per GPU: GB/s = bytes per ns."""
        return dim.bandwidth


COST_MODELS[NcclModel.name] = NcclModel  # the registry's lazy entry for "nccl" (dse.costs)
