"""How `routectl.engine.startup` loads a family's layer and the startup report replays it on
meta tensors: the `LayerLoader` of a linear family (its checkpoint tensors and one activation
per call) and of the AWQ MoE family (the category's router inputs and stage summaries). The
family records (`policies.families`) name them; a family whose loader is its own keeps it in
a module of its own, beside the family's other modules."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping
from typing import Any, cast

from policies.awq_moe import load_awq_moe
from policies.categories.awq_moe import call_inputs as moe_call_inputs
from policies.categories.awq_moe import stage_summary
from routectl.policy.loaded import PreparedLayer
from routectl.policy.loaders import LayerLoader, LoadFn


def _linear_meta_tensors(layer: Any) -> Any:
    return layer.checkpoint_tensors("meta")


def _linear_inputs(layer: Any, prepared: PreparedLayer, m: int) -> tuple[Any, ...]:
    import torch

    return (
        torch.empty((m, layer.input_size), dtype=getattr(torch, layer.act_dtype), device="meta"),
    )


def _moe_inputs(layer: Any, prepared: PreparedLayer, m: int) -> tuple[Any, ...]:
    return moe_call_inputs(m, prepared.state["layer"])


def _moe_last_call(prepared: PreparedLayer) -> Mapping[str, Any] | None:
    choice = prepared.state.get("last_route")
    if choice is None:
        return None
    summary = stage_summary(choice.m, choice)
    return {"stages": summary["chosen"], "rejected": summary["rejected"]}


def _linear_shape(layer: Any, prepared: PreparedLayer) -> Hashable | None:
    # The layer with its prefix cut to its role (the role names the projection; the rest of
    # the prefix only names the copy, and no call reads it).
    role = getattr(layer, "role", None)
    if isinstance(layer, type) or not dataclasses.is_dataclass(layer) or not role:
        return None
    shaped: Any = layer  # a dataclass instance (checked above)
    return cast(Hashable, dataclasses.replace(shaped, prefix=role))


def _moe_shape(layer: Any, prepared: PreparedLayer) -> Hashable | None:
    # The expert layer's spec without its prefix and layer id, and the route it loaded
    # (`LoadedRoute`, values only): what its calls read. The route carries what the id
    # decided, such as the legacy lane's reason "batched GEMM is off for layer N".
    if not isinstance(layer, Mapping):
        return None
    kept = {k: v for k, v in layer.items() if k not in ("prefix", "layer_id")}
    shape = repr((sorted(kept.items()), prepared.state.get("loaded")))
    # A repr naming an object by its address says nothing about its value: no sharing.
    return None if " at 0x" in shape else shape


def linear_loader(load: LoadFn) -> LayerLoader:
    """The LayerLoader of a one-layer linear family: meta checkpoint tensors, one (M, K)
    activation per call, a workspace the engine may lend."""
    return LayerLoader(
        load,
        meta_tensors=_linear_meta_tensors,
        call_inputs=_linear_inputs,
        takes_workspace=True,
        call_shape=_linear_shape,
    )


AWQ_MOE_LOADER = LayerLoader(
    load_awq_moe,
    meta_tensors=lambda layer: None,
    call_inputs=_moe_inputs,
    last_call=_moe_last_call,
    call_shape=_moe_shape,
)


__all__ = ["AWQ_MOE_LOADER", "linear_loader"]
