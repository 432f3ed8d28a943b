"""Native ops of the Flash-Next qualified batch routes on SM70 (docs/contracts/flashnext.md
§2.4-9): the batched dense projection, the packed GDN input, the batched HC support getter
and the shared-expert / router batch projections, with the plan a recorded call keeps (M and
the weight's (N, K): the packed GDN weight shows its 32 padded b/a rows in N). Preparation
(`native.kernels.flash_next_sm70`) asks for them; the category's `*_native_missing` probes
remove them.

Our declared calling convention (unpinned: upstream's bindings were not read).
"""

from __future__ import annotations

from typing import Any

from routectl.namespaces.ops import OpSpec, PlanKey

DENSE_BATCH_OP = "qwen38_dense_batch_sm70_out"
GDN_INPUT_BATCH_OP = "qwen38_gdn_input_batch_sm70_out"
HC_BATCH_SUPPORT_OP = "supports_sm70_qwen38_hc_batch"
SHARED_UP_BATCH_OP = "qwen38_shared_up_batch_sm70_out"
ROUTER_BATCH_OP = "qwen38_router_batch_sm70_out"

_OUT = "Tensor(a!) out, Tensor x, Tensor weight"
# out = x @ weight.T: M from the activations, (N, K) from the weight.
_PLAN = (
    PlanKey("m", "dim:x:0"),
    PlanKey("n", "dim:weight:0"),
    PlanKey("k", "dim:weight:1"),
)


def _projection(out: Any, x: Any, weight: Any) -> None:
    if x.shape[1] != weight.shape[1]:
        raise ValueError(f"activation width {x.shape[1]} does not match weight K {weight.shape[1]}")
    if tuple(out.shape) != (x.shape[0], weight.shape[0]):
        raise ValueError(
            f"out {tuple(out.shape)} is not ({x.shape[0]}, {weight.shape[0]}) for this projection"
        )


OPS: dict[str, OpSpec] = {
    DENSE_BATCH_OP: OpSpec(
        f"{DENSE_BATCH_OP}({_OUT}) -> ()",
        plan=_PLAN,
        validate=_projection,
        doc="batched dense FP16 projection for M in 2..limit (out_proj, o_proj, the router)",
    ),
    GDN_INPUT_BATCH_OP: OpSpec(
        f"{GDN_INPUT_BATCH_OP}({_OUT}) -> ()",
        plan=_PLAN,
        validate=_projection,
        doc="batched GDN input over the packed qkvz + b/a weight (b/a zero-padded to 32 rows)",
    ),
    HC_BATCH_SUPPORT_OP: OpSpec(
        f"{HC_BATCH_SUPPORT_OP}() -> int",
        getter=True,
        doc="whether the build carries the batched HC kernels (nonzero: yes)",
    ),
    SHARED_UP_BATCH_OP: OpSpec(
        f"{SHARED_UP_BATCH_OP}({_OUT}) -> ()",
        plan=_PLAN,
        validate=_projection,
        doc="batched shared-expert gate/up projection (MTP)",
    ),
    ROUTER_BATCH_OP: OpSpec(
        f"{ROUTER_BATCH_OP}({_OUT}) -> ()",
        plan=_PLAN,
        validate=_projection,
        doc="batched router projection (MTP)",
    ),
}

# The preparation stages that need them (not kernels: `disabled_kernels` never names them).
STAGES: dict[str, tuple[str, ...]] = {
    "Sm70FlashNextDenseBatch": (DENSE_BATCH_OP,),
    "Sm70FlashNextGdnInputBatch": (GDN_INPUT_BATCH_OP,),
    "Sm70FlashNextHcBatch": (HC_BATCH_SUPPORT_OP,),
}

__all__ = [
    "DENSE_BATCH_OP",
    "GDN_INPUT_BATCH_OP",
    "HC_BATCH_SUPPORT_OP",
    "OPS",
    "ROUTER_BATCH_OP",
    "SHARED_UP_BATCH_OP",
    "STAGES",
]
