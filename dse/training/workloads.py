"""Training workloads: layers with compute times and the collectives they issue (docs/model.md §9).

A `Workload` is what one training iteration runs on every NPU: per layer a forward compute, an
input-gradient (``ig``) compute and a weight-gradient (``wg``) compute, each optionally followed
by a collective, and a weight update. `dse.training.iteration` turns it into a timeline. This
module is the model only: `dse.training.workload_load.load_workload` picks the reader for a file,
a bundled name or a generator spec, and its docstring describes the formats.

Size: every front-end refuses a workload before it reads or builds its layers when it would take
more than the work limit (`dse.core.limits.check_work`, ``DSE_MAX_WORK``) or have more than
`MAX_LAYERS` layers: `check_layers` charges `READ_STEPS_PER_LAYER` steps per layer, counted from
the layer count line, the tables or the generator's options; compiling the graph is checked by
`dse.training.workload_graph`.

Where the collectives run (`Workload.scope`): in ``DATA``, ``MODEL``, ``MICRO`` and
``HYBRID_DLRM`` every collective spans all dimensions; in the other hybrid strategies the fwd and
ig collectives are model-parallel (the first dims whose NPU counts multiply to the group) and the
wg collective is data-parallel (the remaining dims).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dse.core.errors import InputError
from dse.core.limits import MAX_BYTES, MAX_LAYERS, MAX_NS, check_work
from dse.training.placement import PartScope, Placement

#: The three collective slots of a layer, in the order the fields appear.
SLOTS = ("fwd", "ig", "wg")
MP, DP, ALL = "mp", "dp", "all"

#: The parallelism strategies (ASTRA-sim 1.0's names).
STRATEGIES = (
    "DATA",
    "MODEL",
    "MICRO",
    "HYBRID_DLRM",
    "HYBRID_DATA_MODEL",
    "HYBRID_MODEL_DATA",
    "HYBRID_TRANSFORMER",
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
    "HYBRID",
)
#: The strategies whose collectives all span every dimension (`Workload.scope`).
ALL_DIMS_STRATEGIES = ("DATA", "MODEL", "MICRO", "HYBRID_DLRM")
#: ASTRA-sim 1.0's loops that compute layer 0's input gradient (`Workload.layer0_input_gradient`)
LAYER0_IG_STRATEGIES = (
    "MODEL",
    "HYBRID_DATA_MODEL",
    "HYBRID_MODEL_DATA",
    "HYBRID_TRANSFORMER",
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
)
_TEXT_NAMES = {"model_parallel_group": "model_parallel_NPU_group"}
#: Work to read or generate one layer (module docstring), in steps of `check_work`.
READ_STEPS_PER_LAYER = 64


def check_layers(n: int, what: str) -> None:
    """Refuse, before reading or generating them, `n` layers of `what` (a file, a generator): more
    than `MAX_LAYERS`, or more than the work limit allows (module docstring)."""
    if n > MAX_LAYERS:
        raise InputError(f"{what}: layers", f"{n:,} layers", f"at most {MAX_LAYERS:,}")
    check_work(n * READ_STEPS_PER_LAYER, f"reading {n:,} layers of {what}")


@dataclass(frozen=True)
class Layer:
    """One layer: compute ns and (collective, bytes per NPU) per slot; collective None = none."""

    name: str
    fwd_compute: float = 0.0
    fwd_comm: str | None = None
    fwd_bytes: int = 0
    ig_compute: float = 0.0
    ig_comm: str | None = None
    ig_bytes: int = 0
    wg_compute: float = 0.0
    wg_comm: str | None = None
    wg_bytes: int = 0
    wg_update: float = 0.0
    dependency: int = -1

    def comm(self, slot: str) -> tuple[str, int] | None:
        """The slot's (collective, bytes) or None when it has none (or zero bytes)."""
        coll = getattr(self, f"{slot}_comm")
        nbytes = getattr(self, f"{slot}_bytes")
        return (coll, nbytes) if coll and nbytes > 0 else None

    def __post_init__(self) -> None:
        """Every time finite, 0 to 1e15 ns, every byte count a whole number, 0 to 2^53 (`dse.core.limits`),
        whichever front-end built the layer."""
        for f in ("fwd_compute", "ig_compute", "wg_compute", "wg_update"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= MAX_NS:
                raise InputError(f"layer {self.name}: {f}", f"{v!r} ns is out of range", f"0 to {MAX_NS:g} ns")
        for f in ("fwd_bytes", "ig_bytes", "wg_bytes"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_BYTES:
                raise InputError(
                    f"layer {self.name}: {f}", f"{v!r} is out of range", "a whole number of bytes, 0 to 2^53"
                )

    @property
    def compute_ns(self) -> float:
        """Forward, input-gradient and weight-gradient compute (the update is a delay, not compute)."""
        return self.fwd_compute + self.ig_compute + self.wg_compute


@dataclass(frozen=True)
class Workload:
    """A training iteration's layers and parallelism (`model_parallel_group` for hybrids)."""

    name: str
    parallelism: str
    layers: tuple[Layer, ...]
    model_parallel_group: int | None = None
    source: str = field(default="", compare=False)
    #: ``HYBRID_DLRM k``: the last bottom-MLP layer; the embedding (layer 0) collectives overlap
    #: the bottom MLP (layers 1..k), see `fwd_consumer` and `ig_source`
    dlrm_last_bottom: int | None = None
    #: activation recompute (ASTRA-sim 1.0's ``checkpoints:`` / ``checkpoint_initiates:``): layer
    #: indices whose outputs are kept, and the layers whose backward first re-runs the forward
    #: from the preceding checkpoint
    checkpoints: tuple[int, ...] = ()
    checkpoint_initiates: tuple[int, ...] = ()
    #: where the figures come from (free text; a converted file's line of origin)
    origin: str = field(default="", compare=False)
    #: a converted file's check of its figures: `dse.training.workload_formats.figures_sha256` of the source
    source_sha256: str = field(default="", compare=False)
    #: the workload is a slice of a model whose layer 0 is not the model's input: its input
    #: gradient is computed (and its ig collective run). ASTRA-sim 1.0's model-parallel loops
    #: (``MODEL``, ``HYBRID_*`` but DLRM) do so, and its text front-end sets this for them.
    layer0_input_gradient: bool = False
    #: where the parallelism options were read (``file:line`` of a text file's first line), for errors
    header_at: str = field(default="", compare=False)
    #: explicit groups per slot on the physical dimensions (LIBRA's communicator files); replaces
    #: `parallelism`'s scopes and `model_parallel_group`
    placement: Placement | None = None

    def __post_init__(self) -> None:
        """Checkpoint lists name existing layers, and every recompute has a checkpoint below it
        (whichever front-end built the workload); a placement replaces the model-parallel group."""
        if self.placement is not None and self.model_parallel_group:
            raise InputError(
                self.field("placement"),
                "given with a model_parallel_group",
                "one of them: a placement names every group itself",
            )
        for what in ("checkpoints", "checkpoint_initiates"):
            for li in getattr(self, what):
                if isinstance(li, bool) or not isinstance(li, int) or not 0 <= li < len(self.layers):
                    raise InputError(self.field(what), f"{li!r} is not a layer index", f"0 to {len(self.layers) - 1}")
        lowest = min(self.checkpoints, default=None)
        for li in self.checkpoint_initiates:
            if lowest is None or not lowest < li:
                below = f"checkpoints {list(self.checkpoints)}" if self.checkpoints else "no checkpoints"
                raise InputError(
                    self.field("checkpoint_initiates"),
                    f"layer {li} re-runs the forward from a checkpoint below it, but the workload has {below}",
                    "a checkpoint layer below every checkpoint_initiates layer",
                )

    def field(self, name: str) -> str:
        """An error's field: the file (and line, for a text file's options) and the option's name."""
        if self.header_at:
            return f"{self.header_at}: {_TEXT_NAMES.get(name, name)}"
        return f"{self.source or self.name}: {name}"

    def scope(self, slot: str) -> str | PartScope:
        """Where a slot's collectives run: ``all`` dims, the model-parallel or data-parallel dims,
        or the placement's groups."""
        if self.placement is not None:
            return self.placement.parts(slot)
        if self.parallelism in ALL_DIMS_STRATEGIES or not self.model_parallel_group:
            return ALL
        return DP if slot == "wg" else MP

    def fwd_consumer(self, li: int) -> int:
        """The layer whose forward compute waits for layer `li`'s fwd collective (n: the backward).

        Layer li+1 (it consumes li's output); in ``HYBRID_DLRM k`` the embedding's (layer 0)
        all-to-all is first needed by layer k+1 (the interaction/top MLP), so it overlaps the
        bottom MLP.
        """
        k = self.dlrm_last_bottom
        if li == 0 and k is not None and 0 <= k < len(self.layers) - 1:
            return k + 1
        return li + 1

    def ig_source(self, li: int) -> int:
        """The layer whose input-gradient compute issues layer `li`'s ig collective.

        Layer li itself; in ``HYBRID_DLRM k`` the embedding's backward all-to-all carries the
        gradient of its output, ready once layer k+1's input gradient is computed.
        """
        k = self.dlrm_last_bottom
        if li == 0 and k is not None and 0 <= k < len(self.layers) - 1:
            return k + 1
        return li

    def ig_consumer(self, li: int) -> int:
        """The layer whose input-gradient compute waits for layer `li`'s ig collective (-1: none).

        Layer li-1 (back-propagation continues through it); the DLRM embedding's own (layer 0).
        """
        if self.ig_source(li) != li:
            return li
        return li - 1

    @property
    def compute_ns(self) -> float:
        """Compute of one pass on one NPU as `dse.training.iteration` runs it: every layer's compute, but
        layer 0's input gradient only for a slice (`layer0_input_gradient`), plus the recomputed
        forwards (`checkpoint_initiates`); a ``MICRO`` workload only communicates."""
        if self.parallelism == "MICRO":
            return 0.0
        total = sum(layer.compute_ns for layer in self.layers)
        if not self.layer0_input_gradient:
            total -= self.layers[0].ig_compute
        for li in self.checkpoint_initiates:
            start = max(c for c in self.checkpoints if c < li)
            total += sum(layer.fwd_compute for layer in self.layers[start:li])
        return total
