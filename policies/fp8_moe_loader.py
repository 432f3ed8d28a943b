"""The FP8 mixture-of-experts family's `LayerLoader`: how `routectl.engine.startup` loads its
expert layer and the startup report replays it on meta tensors (the category's router
inputs, and the last call's lane and stage modes). The family record names it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.categories.fp8_moe import call_inputs as fp8_moe_call_inputs
from policies.fp8_moe import load_fp8_moe
from routectl.policy.loaded import PreparedLayer
from routectl.policy.loaders import LayerLoader


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


__all__ = ["FP8_MOE_LOADER"]
