"""Pinned schemas and geometry of the SM70 AWQ QPN M1 operator and its prepare ops.

The schema strings are the engine's own (docs/contracts/core.md §6); routectl's reference ops
register the same strings in namespace `routectl`, so one catalogue describes both. Torch-free.
"""

from __future__ import annotations

REFERENCE_NAMESPACE = "routectl"

QPN_M1_OP = "awq_moe_qpn_m1_sm70_out"
PREPARE_OP = "awq_sm70_prepare"
PREPARE_COMPACT_OP = "awq_sm70_prepare_compact"

QPN_M1_SCHEMA = (
    "awq_moe_qpn_m1_sm70_out(Tensor(a!) out, Tensor(b!) intermediate, Tensor input, "
    "Tensor w13, Tensor s13, Tensor w2, Tensor s2, Tensor ids, Tensor topk) -> ()"
)
PREPARE_SCHEMA = (
    "awq_sm70_prepare(Tensor kernel, Tensor scaling_factors, Tensor zeros, int group_size, "
    "bool interleave_gated_silu) -> Tensor[]"
)
PREPARE_COMPACT_SCHEMA = (
    "awq_sm70_prepare_compact(Tensor kernel, Tensor scaling_factors, Tensor zeros, "
    "int group_size, bool interleave_gated_silu) -> Tensor[]"
)

# Op name -> pinned schema, in catalogue order.
PINNED_SCHEMAS: dict[str, str] = {
    QPN_M1_OP: QPN_M1_SCHEMA,
    PREPARE_OP: PREPARE_SCHEMA,
    PREPARE_COMPACT_OP: PREPARE_COMPACT_SCHEMA,
}

# Qwen3.8 per TP4 rank (docs/contracts/core.md §3.2 / §3.3).
NUM_EXPERTS = 512
TOP_K = 10
TOKENS = 1  # the QPN M1 route serves exactly one token
HIDDEN = 2560
GROUP_SIZE = 32  # checkpoint and prepared group
W13_K = HIDDEN
W13_N = 320  # gate 160 + up 160, interleaved when prepared for QPN
W2_K = 160  # intermediate per rank
W2_N = HIDDEN
# The engine's W13 reduction: 16 warps each own one K slice, summed in slice order.
W13_K_SLICES = 16
W13_K_SLICE = W13_K // W13_K_SLICES
