"""Cost models: the time of one chunk-phase on one dimension (docs/model.md §4)."""

from __future__ import annotations

from dse.core.errors import InputError
from dse.costs.astra_sim import AstraSimModel
from dse.costs.astra_sim1 import AstraSim1Model
from dse.costs.base import ChunkPlan, CostModel, Phase, SimRules
from dse.costs.paper import PaperModel

COST_MODELS: dict[str, type[CostModel]] = {
    PaperModel.name: PaperModel,
    AstraSimModel.name: AstraSimModel,
    AstraSim1Model.name: AstraSim1Model,
}


def get_cost_model(model: str | CostModel) -> CostModel:
    """A cost-model instance from its name (`paper`, `astra-sim`, `astra-sim-1`) or an instance (as is)."""
    if isinstance(model, CostModel):
        return model
    key = str(model).strip().lower().replace("_", "-")
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
]
