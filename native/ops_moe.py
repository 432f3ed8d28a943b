"""Catalogue entries of the AWQ mixture-of-experts ops (docs/contracts/core.md §3.4, §3.5, §6) and
the required ops of the MoE method and of each route stage.

Only `awq_moe_qpn_m1_sm70_out` (and the AWQ prepare ops, declared once in
`native.ops_linear`) have pinned schemas; the others are our declared calling convention,
named by argument so that plans never depend on positions.

Plan keys. Every MoE op records a subset of `{m, routed_slots, group, k, n, chunk_tokens,
metadata}`:
- `m` is always present: the token count of the apply call that issued the op (the
  `num_tokens` argument, or the activation rows for ops that receive the activations);
- `routed_slots` = M * top_k rows the op works on; `group`, `k`, `n` the prepared bank's
  group size and one expert's (K, N); `chunk_tokens` the chunked W2 size; `metadata` the
  layout of the metadata bank the op reads ("4-byte" or "3-byte", from its element type).
Omission rule (declared here, applied by `routectl.namespaces.ops.derive_plan`): a key is
declared for an op only when the op's schema carries its source argument, and every key but `m` is
declared `optional`, so a key is omitted from a record when its argument does not apply to
the op or is passed as None. `_spec` checks at import that every source names an argument.

Torch-free at import: validators read shapes and element types only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from native.awq_layout import (
    FOUR_BYTE,
    THREE_BYTE,
    layout_of_metadata_dtype,
    metadata_dtype,
    prepared_shapes,
    qpn_m1_arguments,
)
from native.awq_schemas import PREPARE_COMPACT_OP, PREPARE_OP, QPN_M1_OP, QPN_M1_SCHEMA
from routectl.namespaces.ops import OpSpec, PlanKey

SINGLE_TOKEN_OP = "awq_moe_single_token_sm70_out"
SINGLE_TOKEN_DENSE_W13_OP = "awq_moe_single_token_dense_w13_sm70_out"
SINGLE_TOKEN_DENSE_STAGE_OP = "awq_moe_single_token_dense_stage_sm70_out"
WEIGHTED_REDUCE_OP = "awq_moe_single_token_weighted_reduce_out"
PERMUTE_OP = "moe_permute_with_scratch"
PERMUTE_METADATA_OP = "moe_permute_metadata_with_scratch"
INDEXED_W13_OP = "awq_moe_indexed_dense_w13_sm70_out"
ACTIVE_DENSE_STAGE_OP = "awq_moe_active_dense_stage_sm70_out"
PER_EXPERT_DISPATCH_OP = "awq_moe_gemm_sm70_per_expert_dispatch_out"
DENSE_STAGE_OP = "awq_moe_dense_stage_sm70_out"
CHUNKED_W2_OP = "awq_moe_chunked_w2_sm70_out"
UNPERMUTE_OP = "moe_unpermute"

FP16 = "float16"
METADATA_LABELS: Mapping[str, str] = {
    metadata_dtype(False): FOUR_BYTE,
    metadata_dtype(True): THREE_BYTE,
}


def _dtype(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


# --- plan keys -----------------------------------------------------------------------------


def _key(key: str, source: str) -> PlanKey:
    return PlanKey(key, source, optional=True)


def _metadata(tensor: str) -> PlanKey:
    return PlanKey("metadata", f"dtype:{tensor}", optional=True, labels=METADATA_LABELS)


M_ARG = PlanKey("m", "arg:num_tokens")
SLOTS = _key("routed_slots", "arg:total_slots")
GROUP = _key("group", "arg:group_size")
K = _key("k", "arg:k")
N = _key("n", "arg:n")
STAGE_PLAN = (M_ARG, SLOTS, GROUP, K, N, _metadata("scales"))


# --- validators (meta-safe: shapes and element types only) ---------------------------------


def _check(condition: bool, op: str, message: str) -> None:
    if not condition:
        raise ValueError(f"{op}: {message}")


def _bank_check(op: str, weights: Any, scales: Any, k: int, n: int, group_size: int) -> None:
    """A prepared bank (E, K, N/8) int32 with its metadata (E, K/g, N[, 3])."""
    layout = layout_of_metadata_dtype(_dtype(scales))
    _check(layout is not None, op, f"metadata must be int32 or uint8, got {_dtype(scales)}")
    words, meta = prepared_shapes(k, n, group_size, layout == THREE_BYTE)
    _check(_dtype(weights) == "int32", op, f"weights must be int32, got {_dtype(weights)}")
    _check(
        tuple(weights.shape[1:]) == words,
        op,
        f"weights {tuple(weights.shape)} do not hold ({k}, {n}) experts",
    )
    _check(
        tuple(scales.shape[1:]) == meta and scales.shape[0] == weights.shape[0],
        op,
        f"metadata {tuple(scales.shape)} does not match weights {tuple(weights.shape)} "
        f"at group {group_size}",
    )


def _stage_validate(op: str) -> Any:
    def validate(
        out: Any,
        input: Any,
        weights: Any,
        scales: Any,
        total_slots: int,
        k: int,
        n: int,
        group_size: int,
        **_: Any,
    ) -> None:
        _check(_dtype(input) == FP16 and _dtype(out) == FP16, op, "activations must be float16")
        _check(input.shape[-1] == k, op, f"input width {input.shape[-1]} is not K={k}")
        _check(
            tuple(out.shape) == (total_slots, n),
            op,
            f"out {tuple(out.shape)} is not ({total_slots}, {n})",
        )
        _bank_check(op, weights, scales, k, n, group_size)

    return validate


def _qpn_m1_validate(
    out: Any,
    intermediate: Any,
    input: Any,
    w13: Any,
    s13: Any,
    w2: Any,
    s2: Any,
    ids: Any,
    topk: Any,
) -> None:
    """Exact dtype, shape and contiguity of docs/contracts/core.md §6 (alignment and overlap need
    storage: the reference op checks them on real tensors)."""
    layout = layout_of_metadata_dtype(_dtype(s13))
    _check(layout is not None, QPN_M1_OP, f"s13 must be int32 or uint8, got {_dtype(s13)}")
    args = {
        "out": out,
        "intermediate": intermediate,
        "input": input,
        "w13": w13,
        "s13": s13,
        "w2": w2,
        "s2": s2,
        "ids": ids,
        "topk": topk,
    }
    for name, spec in qpn_m1_arguments(layout == THREE_BYTE).items():
        t = args[name]
        _check(
            _dtype(t) == spec.dtype and tuple(t.shape) == spec.shape and t.is_contiguous(),
            QPN_M1_OP,
            f"{name} dtype/shape/contiguity mismatch: expected {spec.dtype} "
            f"{spec.shape}, got {_dtype(t)} {tuple(t.shape)}",
        )


def _legacy_validate(
    out: Any,
    input: Any,
    w13: Any,
    s13: Any,
    w2: Any,
    s2: Any,
    w13_k: int,
    w13_n: int,
    w2_k: int,
    w2_n: int,
    group_size: int,
    **_: Any,
) -> None:
    op = SINGLE_TOKEN_OP
    _check(_dtype(input) == FP16 and _dtype(out) == FP16, op, "activations must be float16")
    _check(tuple(input.shape) == (1, w13_k), op, f"input {tuple(input.shape)} is not one token")
    _bank_check(op, w13, s13, w13_k, w13_n, group_size)
    _bank_check(op, w2, s2, w2_k, w2_n, group_size)
    _check(_dtype(s13) == _dtype(s2), op, "s13 and s2 must share one metadata layout")


def _chunked_validate(
    out: Any,
    weights: Any,
    scales: Any,
    k: int,
    n: int,
    group_size: int,
    chunk_tokens: int,
    num_tokens: int,
    **_: Any,
) -> None:
    op = CHUNKED_W2_OP
    _check(
        0 < chunk_tokens < num_tokens,
        op,
        f"chunk_tokens {chunk_tokens} must lie in (0, {num_tokens})",
    )
    _check(tuple(out.shape[:1]) == (num_tokens,), op, f"out {tuple(out.shape)} rows != M")
    _bank_check(op, weights, scales, k, n, group_size)


# --- specs -------------------------------------------------------------------------------


def _spec(schema: str, plan: tuple[PlanKey, ...], **kwargs: Any) -> OpSpec:
    spec = OpSpec(schema, plan=plan, **kwargs)
    for key in spec.plan:
        kind, _, rest = key.source.partition(":")
        argument = rest.rpartition(":")[0] if kind == "dim" else rest
        if argument not in spec.arg_names:
            raise ValueError(f"{spec.name}: plan key {key.key!r} reads absent {argument!r}")
    return spec


_STAGE_ARGS = (
    "Tensor(a!) out, Tensor input, {extra}Tensor weights, Tensor scales, "
    "{scalars}int num_tokens, int total_slots, int k, int n, int group_size"
)

OPS: dict[str, OpSpec] = {
    QPN_M1_OP: _spec(
        QPN_M1_SCHEMA,
        plan=(PlanKey("m", "dim:input:0"), _key("routed_slots", "dim:ids:1"), _metadata("s13")),
        pinned=True,
        validate=_qpn_m1_validate,
        doc="QPN M1: W13 + SiLU + W2 + weighted reduction of one token over the prepared "
        "banks (Qwen3.8 TP4 E512 top-k 10 g32 only)",
    ),
    SINGLE_TOKEN_OP: _spec(
        f"{SINGLE_TOKEN_OP}(Tensor(a!) out, Tensor input, Tensor topk_weights, "
        "Tensor topk_ids, Tensor w13, Tensor s13, Tensor w2, Tensor s2, "
        "Tensor(b!) intermediate, Tensor(c!) scratch, int num_tokens, int total_slots, "
        "int w13_k, int w13_n, int w2_k, int w2_n, int group_size, "
        "int hidden_logical_size) -> ()",
        plan=(M_ARG, SLOTS, GROUP, _metadata("s13")),
        validate=_legacy_validate,
        doc="legacy monolithic single-token route (interleaved W13)",
    ),
    SINGLE_TOKEN_DENSE_W13_OP: _spec(
        f"{SINGLE_TOKEN_DENSE_W13_OP}(Tensor(a!) out, Tensor input, Tensor topk_ids, "
        "Tensor weights, Tensor scales, int num_tokens, int total_slots, int k, int n, "
        "int group_size) -> ()",
        plan=STAGE_PLAN,
        validate=_stage_validate(SINGLE_TOKEN_DENSE_W13_OP),
        doc="decomposed single-token W13 over the routed experts",
    ),
    SINGLE_TOKEN_DENSE_STAGE_OP: _spec(
        f"{SINGLE_TOKEN_DENSE_STAGE_OP}(Tensor(a!) out, Tensor input, Tensor topk_ids, "
        "Tensor weights, Tensor scales, int num_tokens, int total_slots, int k, int n, "
        "int group_size) -> ()",
        plan=STAGE_PLAN,
        validate=_stage_validate(SINGLE_TOKEN_DENSE_STAGE_OP),
        doc="decomposed single-token W2 over the routed experts",
    ),
    WEIGHTED_REDUCE_OP: _spec(
        f"{WEIGHTED_REDUCE_OP}(Tensor(a!) out, Tensor input, Tensor topk_weights, "
        "int num_tokens, int total_slots) -> ()",
        plan=(M_ARG, SLOTS),
        doc="single-token weighted reduction of the routed rows",
    ),
    PERMUTE_OP: _spec(
        f"{PERMUTE_OP}(Tensor input, Tensor topk_ids, Tensor(a!) permuted_input, "
        "Tensor(b!) expert_offsets, Tensor(c!) permuted_idx, Tensor(d!) inv_permuted_idx, "
        "int num_experts, int num_tokens, int total_slots) -> ()",
        plan=(M_ARG, SLOTS),
        doc="route rows by expert, materializing the permuted input",
    ),
    PERMUTE_METADATA_OP: _spec(
        f"{PERMUTE_METADATA_OP}(Tensor topk_ids, Tensor(a!) input_row_indices, "
        "Tensor(b!) expert_offsets, Tensor(c!) permuted_idx, Tensor(d!) inv_permuted_idx, "
        "int num_experts, int num_tokens, int total_slots) -> ()",
        plan=(M_ARG, SLOTS),
        doc="route metadata only: input row indices, no materialized copy",
    ),
    INDEXED_W13_OP: _spec(
        f"{INDEXED_W13_OP}("
        + _STAGE_ARGS.format(
            extra="Tensor input_row_indices, Tensor expert_offsets, ", scalars="int num_experts, "
        )
        + ") -> ()",
        plan=STAGE_PLAN,
        validate=_stage_validate(INDEXED_W13_OP),
        doc="indexed-A W13 prefill: reads activations through input_row_indices",
    ),
    ACTIVE_DENSE_STAGE_OP: _spec(
        f"{ACTIVE_DENSE_STAGE_OP}("
        + _STAGE_ARGS.format(
            extra="Tensor permuted_experts_id, Tensor(b!) active_expert_offsets, "
            "Tensor(c!) active_expert_ids, ",
            scalars="",
        )
        + ") -> ()",
        plan=STAGE_PLAN,
        validate=_stage_validate(ACTIVE_DENSE_STAGE_OP),
        doc="active-expert grouped dense stage (grouped decode, active exact W2)",
    ),
    PER_EXPERT_DISPATCH_OP: _spec(
        f"{PER_EXPERT_DISPATCH_OP}("
        + _STAGE_ARGS.format(extra="Tensor expert_offsets, ", scalars="int num_experts, ")
        + ", bool gated_silu) -> ()",
        plan=STAGE_PLAN,
        validate=_stage_validate(PER_EXPERT_DISPATCH_OP),
        doc="batched TurboMind GEMM, one dispatch per active expert",
    ),
    DENSE_STAGE_OP: _spec(
        f"{DENSE_STAGE_OP}("
        + _STAGE_ARGS.format(
            extra="Tensor expert_offsets, Tensor dense_expert_ids, ", scalars="int num_experts, "
        )
        + ") -> ()",
        plan=STAGE_PLAN,
        validate=_stage_validate(DENSE_STAGE_OP),
        doc="CUDA-graph-safe dense stage over all experts",
    ),
    CHUNKED_W2_OP: _spec(
        f"{CHUNKED_W2_OP}(Tensor(a!) out, Tensor(b!) sorted_output, Tensor intermediate, "
        "Tensor expert_offsets, Tensor permuted_idx, Tensor topk_weights, "
        "Tensor(c!) chunk_scratch, Tensor weights, Tensor scales, int num_experts, "
        "int num_tokens, int top_k, int total_slots, int k, int n, int hidden_logical_size, "
        "int group_size, int chunk_tokens) -> ()",
        plan=(*STAGE_PLAN[:5], _key("chunk_tokens", "arg:chunk_tokens"), _metadata("scales")),
        validate=_chunked_validate,
        doc="W2 and the weighted reduction in token chunks (indexed prefill only)",
    ),
    UNPERMUTE_OP: _spec(
        f"{UNPERMUTE_OP}(Tensor permuted_hidden_states, Tensor topk_weights, "
        "Tensor inv_permuted_idx, Tensor? expert_first_token_offset, int topk, "
        "Tensor(a!) hidden_states) -> ()",
        plan=(
            PlanKey("m", "dim:hidden_states:0"),
            _key("routed_slots", "dim:permuted_hidden_states:0"),
        ),
        doc="weighted reduction of the routed rows back to token order",
    ),
}
MOE_OPS = OPS

# The MoE method's own ops: preparation and the routed lane's always-available floor
# (materialized permute, dense stage, unpermute). Every other stage is optional.
METHOD_NAME = "TurboMindAwqMoE"
METHOD_REQUIRED_OPS = (PREPARE_OP, PERMUTE_OP, DENSE_STAGE_OP, UNPERMUTE_OP)

# Route stages of docs/contracts/core.md §3.4 -> the ops each needs. Neither the method nor the
# stages are kernels: `disabled_kernels` never names them (they follow `sm70_awq_moe`).
STAGES: dict[str, tuple[str, ...]] = {
    METHOD_NAME: METHOD_REQUIRED_OPS,
    "awq_moe.zero_output": (),
    "awq_moe.qpn_m1": (QPN_M1_OP,),
    "awq_moe.legacy_single_token": (SINGLE_TOKEN_OP,),
    "awq_moe.single_token_dense_w13": (SINGLE_TOKEN_DENSE_W13_OP,),
    "awq_moe.single_token_dense_w2": (SINGLE_TOKEN_DENSE_STAGE_OP,),
    "awq_moe.weighted_reduce": (WEIGHTED_REDUCE_OP,),
    "awq_moe.permute": (PERMUTE_OP,),
    "awq_moe.permute_metadata": (PERMUTE_METADATA_OP,),
    "awq_moe.indexed_prefill_w13": (INDEXED_W13_OP, PERMUTE_METADATA_OP),
    "awq_moe.active_grouped": (ACTIVE_DENSE_STAGE_OP,),
    "awq_moe.per_expert_dispatch": (PER_EXPERT_DISPATCH_OP,),
    "awq_moe.dense_stage": (DENSE_STAGE_OP,),
    "awq_moe.chunked_w2": (CHUNKED_W2_OP,),
    "awq_moe.unpermute": (UNPERMUTE_OP,),
    "awq_moe.single_token_decomposed": (SINGLE_TOKEN_DENSE_W13_OP, SINGLE_TOKEN_DENSE_STAGE_OP),
    "awq_moe.routed": (),
    "awq_moe.prepare_compact": (PREPARE_COMPACT_OP,),
}
MOE_STAGES = STAGES

__all__ = ["MOE_OPS", "MOE_STAGES", "OPS", "STAGES"]
