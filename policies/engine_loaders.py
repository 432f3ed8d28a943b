"""How `routectl.engine.startup` loads a family's layer and the startup report replays it on
meta tensors: the `LayerLoader` of a linear family (its checkpoint tensors and one activation
per call) and of the AWQ MoE family (the category's router inputs and stage summaries). The
family records (`policies.families`) name them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.awq_moe import load_awq_moe
from policies.categories.awq_moe import call_inputs as moe_call_inputs
from policies.categories.awq_moe import stage_summary
from policies.categories.fp8_moe import call_inputs as fp8_moe_call_inputs
from policies.fp8_moe import load_fp8_moe
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


def linear_loader(load: LoadFn) -> LayerLoader:
    """The LayerLoader of a one-layer linear family: meta checkpoint tensors, one (M, K)
    activation per call, a workspace the engine may lend."""
    return LayerLoader(
        load, meta_tensors=_linear_meta_tensors, call_inputs=_linear_inputs, takes_workspace=True
    )


AWQ_MOE_LOADER = LayerLoader(
    load_awq_moe,
    meta_tensors=lambda layer: None,
    call_inputs=_moe_inputs,
    last_call=_moe_last_call,
)


def _fp8_moe_inputs(layer: Any, prepared: PreparedLayer, m: int) -> tuple[Any, ...]:
    return fp8_moe_call_inputs(m, prepared.state["layer"])


def _fp8_moe_last_call(prepared: PreparedLayer) -> Mapping[str, Any] | None:
    """The last call's lane and stage modes as the startup report's stage names."""
    dispatcher = prepared.state.get("dispatcher")
    last = None if dispatcher is None else dispatcher.last
    if last is None:
        return None
    names = [f"{key}={last[key]}" for key in ("lane", "w13", "w2", "reduce", "buffers")]
    return {"stages": names, "rejected": []}


FP8_MOE_LOADER = LayerLoader(
    load_fp8_moe,
    meta_tensors=lambda layer: None,
    call_inputs=_fp8_moe_inputs,
    last_call=_fp8_moe_last_call,
)

__all__ = ["AWQ_MOE_LOADER", "FP8_MOE_LOADER", "linear_loader"]
