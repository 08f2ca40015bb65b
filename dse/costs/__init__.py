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
    if text[:4].lower() == "nccl" and text[4:5] in (":", ","):
        return _configured_nccl(text)
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


def _configured_nccl(name: str) -> CostModel:
    """The `nccl` model with a calibration (``nccl:NAME``, `dse.costs.nccl.calibration.resolve_calibration`)
    and/or NCCL's settings (``,NCCL_ALGO=ring``..., `dse.costs.nccl.env`), one instance per label."""
    from dse.costs.nccl.calibration import resolve_calibration
    from dse.costs.nccl.env import split_settings

    base, env = split_settings(name)
    if base.lower() == "nccl" and not env.forced:
        return get_cost_model("nccl")
    calibration = None
    if base.lower() != "nccl":
        if base[:5].lower() != "nccl:":
            raise InputError(
                "cost_model", f"unknown cost model {name!r}", "nccl, nccl:CALIBRATION, each with ,NCCL_ALGO=..."
            )
        calibration = base[5:].strip()
        if not calibration:
            raise InputError("cost_model", "'nccl:' names no calibration", "nccl:NAME (a bundled machine) or nccl:FILE")
    key = ("nccl" if calibration is None else f"nccl:{calibration}") + env.suffix()
    hit = _SHARED.get(key)
    if hit is None:
        calib = None if calibration is None else resolve_calibration(calibration)
        hit = _SHARED[key] = COST_MODELS["nccl"](calib, label=key, env=env)  # type: ignore[call-arg]
    return hit


def with_calibration(models: list, calibration: object, base: Path | None, field: str) -> list:
    """Cost-model names from a file (a sweep's, a study's) with its ``calibration`` applied: ``nccl``
    becomes ``nccl:CALIBRATION`` (``nccl,NCCL_ALGO=ring`` becomes ``nccl:CALIBRATION,NCCL_ALGO=ring``),
    and a calibration file named relative to the file is read from beside it (`base`; the path from
    the working folder, as results then name it). `field` names the key in errors."""
    from dse.costs.nccl.env import split_settings

    if calibration is not None and not isinstance(calibration, str):
        raise InputError(field, f"{calibration!r} is not a string", "a bundled machine's name or a calibration file")
    split = [split_settings(m.strip()) if isinstance(m, str) else (m, None) for m in models]
    if calibration is not None and not any(isinstance(b, str) and b.lower() == "nccl" for b, _ in split):
        raise InputError(field, "given without cost_model nccl", 'cost_model = "nccl" with it')
    out = []
    for m, (b, env) in zip(models, split):
        if env is None:
            out.append(m)
            continue
        if b.lower() == "nccl" and calibration is not None:
            b = f"nccl:{calibration}"
        if b[:5].lower() == "nccl:" and base is not None:
            path = b[5:].strip()
            if not os.path.isabs(path) and (base / path).is_file():
                b = f"nccl:{os.path.relpath(base / path)}"
        out.append(b + env.suffix() if b[:4].lower() == "nccl" else m)
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
