"""What `routectl.engine.startup` loads each kernel family with, and how the startup report
replays a loaded layer on meta tensors (the categories' own inputs and stage summaries)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.awq_moe import load_awq_moe
from policies.categories.awq_moe import call_inputs as moe_call_inputs
from policies.categories.awq_moe import stage_summary
from policies.linear_awq import load_awq_dense
from policies.linear_fp8_sm70 import load_fp8_sm70
from policies.linear_nvfp4 import load_nvfp4_sm70
from policies.linear_turing import load_turing_fp8, load_turing_nvfp4
from routectl.policy.loaded import PreparedLayer
from routectl.policy.loaders import LayerLoader


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


def _linear(load: Any) -> LayerLoader:
    return LayerLoader(
        load, meta_tensors=_linear_meta_tensors, call_inputs=_linear_inputs, takes_workspace=True
    )


ENGINE_LOADERS: Mapping[str, LayerLoader] = {
    "sm70-nvfp4-linear": _linear(load_nvfp4_sm70),
    "sm70-awq-linear": _linear(load_awq_dense),
    "sm75-nvfp4-linear": _linear(load_turing_nvfp4),
    "sm70-fp8-linear": _linear(load_fp8_sm70),
    "sm75-fp8-linear": _linear(load_turing_fp8),
    "sm70-awq-moe": LayerLoader(
        load_awq_moe,
        meta_tensors=lambda layer: None,
        call_inputs=_moe_inputs,
        last_call=_moe_last_call,
    ),
}

__all__ = ["ENGINE_LOADERS"]
