"""Cost models: the time of one chunk-phase on one dimension (docs/model.md §4)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.registry import LazyRegistry
from dse.costs.astra_sim import AstraSimModel
from dse.costs.astra_sim1 import AstraSim1Model
from dse.costs.base import ChunkPlan, CostModel, Phase, SimRules
from dse.costs.paper import PaperModel

#: The cost models by name. `nccl` (its tables, log reader and calibrations) loads on its first lookup:
#: the module registers `NcclModel` here, so `dse evaluate` under another model does not import it.
COST_MODELS: LazyRegistry[type[CostModel]] = LazyRegistry(
    ((cls.name, cls) for cls in (PaperModel, AstraSimModel, AstraSim1Model)),
    {"nccl": "dse.costs.nccl.cost_model"},
)


def __getattr__(name: str) -> Any:
    """`NcclModel`, imported on first use (the module's other names are plain attributes)."""
    if name == "NcclModel":
        return COST_MODELS["nccl"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_cost_model(model: str | CostModel) -> CostModel:
    """A cost-model instance from its name (`paper`, `astra-sim`, `astra-sim-1`, `nccl`), from
    ``nccl:CALIBRATION`` (a bundled machine's name or a calibration file, `dse calibrate nccl-tests`),
    or an instance (as is)."""
    if isinstance(model, CostModel):
        return model
    text = str(model).strip()
    if text[:5].lower() == "nccl:":
        return _calibrated_nccl(text[5:].strip())
    key = text.lower().replace("_", "-")
    if key in ("astra-sim-2", "astrasim"):
        key = "astra-sim"
    elif key in ("astra-sim-1.0", "astrasim1", "astrasim-1"):
        key = "astra-sim-1"
    if key not in COST_MODELS:
        raise InputError("cost_model", f"unknown cost model {model!r}", ", ".join(COST_MODELS))
    hit = _SHARED.get(key)
    if hit is None or type(hit) is not COST_MODELS[key]:  # one immutable instance per name
        hit = _SHARED[key] = COST_MODELS[key]()
    return hit


_SHARED: dict[str, CostModel] = {}


def _calibrated_nccl(calibration: str) -> CostModel:
    """The `nccl` model with a calibration (`dse.costs.nccl.calibration.resolve_calibration`)."""
    from dse.costs.nccl.calibration import resolve_calibration

    key = f"nccl:{calibration}"
    hit = _SHARED.get(key)
    if hit is None:
        if not calibration:
            raise InputError("cost_model", "'nccl:' names no calibration", "nccl:NAME (a bundled machine) or nccl:FILE")
        hit = _SHARED[key] = COST_MODELS["nccl"](resolve_calibration(calibration), label=key)  # type: ignore[call-arg]
    return hit


def with_calibration(models: list, calibration: object, base: Path | None, field: str) -> list:
    """Cost-model names from a file (a sweep's, a study's) with its ``calibration`` applied: ``nccl``
    becomes ``nccl:CALIBRATION``, and a calibration file named relative to the file is read from
    beside it (`base`; the path from the working folder, as results then name it). `field` names
    the key in errors."""
    if calibration is not None and not isinstance(calibration, str):
        raise InputError(field, f"{calibration!r} is not a string", "a bundled machine's name or a calibration file")
    if calibration is not None and not any(isinstance(m, str) and m.strip().lower() == "nccl" for m in models):
        raise InputError(field, "given without cost_model nccl", 'cost_model = "nccl" with it')
    out = []
    for m in models:
        if isinstance(m, str) and m.strip().lower() == "nccl" and calibration is not None:
            m = f"nccl:{calibration}"
        if isinstance(m, str) and m[:5].lower() == "nccl:" and base is not None:
            path = m[5:].strip()
            if not os.path.isabs(path) and (base / path).is_file():
                m = f"nccl:{os.path.relpath(base / path)}"
        out.append(m)
    return out


__all__ = [
    "COST_MODELS",
    "ChunkPlan",
    "CostModel",
    "Phase",
    "SimRules",
    "get_cost_model",
    "PaperModel",
    "AstraSimModel",
    "AstraSim1Model",
    "NcclModel",
    "with_calibration",
]
