"""Catalogue entries of the ops only the Volta block-FP8 MoE method calls
(docs/contracts/fp8moe.md §5.2, §5.3), and the stages it requires.

Our declared calling convention, named by argument (unpinned: routectl has not pinned the
fork's bindings). The ops it shares with the AWQ MoE family (`moe_permute_with_scratch`,
`moe_unpermute`, the weighted reduce) and with the FP8 linears (`fp8_sm70_prepare`, the
strided pointer builder, `silu_and_mul`) keep the declarations of `native.ops_moe`,
`native.ops_fp8` and `native.ops_linear` (the per-expert dispatch entry is the FP8 linears'
grouped-decode declaration: one pointer table, the rows as (slots, 1, K)); `moe_permute`,
absent there, follows the scratch variant's convention (docs/contracts/fp8moe.md §9, open
question 5).

Torch-free at import.
"""

from __future__ import annotations

from native.kernels import fp8_moe as fm
from routectl.namespaces.ops import OpSpec, PlanKey


def _key(key: str, source: str) -> PlanKey:
    return PlanKey(key, source, optional=True)


SLOTS_IN = _key("routed_slots", "dim:sorted_input:0")
EXPERTS = _key("experts", "arg:num_experts")
K = _key("k", "arg:k")
N = _key("n", "arg:n")
GROUP = _key("group", "arg:group_size")
ST_SLOTS = _key("routed_slots", "arg:total_slots")
HIDDEN = _key("hidden", "arg:hidden_logical_size")

_GEMM = (
    "Tensor(a!) out, Tensor sorted_input, Tensor expert_offsets, {extra}Tensor strided_ptrs_w, "
    "Tensor strided_ptrs_s, int num_experts, int k, int n, int group_size{tail}"
)
_ST_W13 = (
    "(Tensor(a!) out, Tensor input, Tensor topk_ids, Tensor strided_ptrs_w, "
    "Tensor strided_ptrs_s, int total_slots, int k, int n, int group_size, "
    "int hidden_logical_size) -> ()"
)
_ST_W2 = (
    "(Tensor(a!) out, Tensor input, Tensor topk_ids, Tensor strided_ptrs_w, "
    "Tensor strided_ptrs_s, int total_slots, int k, int n, int group_size) -> ()"
)
LEGACY_FLAGS = (
    "fused_gated_silu",
    "fused_weighted_reduce",
    "broadcast_input",
    "w2_direct_reduce",
    "indexed_expert_ptrs",
    "exact_per_route",
)

OPS: dict[str, OpSpec] = {
    fm.GEMM_OP: OpSpec(
        f"{fm.GEMM_OP}(" + _GEMM.format(extra="", tail=", bool gated_silu") + ") -> ()",
        plan=(SLOTS_IN, EXPERTS, K, N, GROUP, _key("gated", "arg:gated_silu")),
        doc="batched TurboMind W8A16 MoE GEMM over the permuted rows",
    ),
    fm.DENSE_STAGE_OP: OpSpec(
        f"{fm.DENSE_STAGE_OP}("
        + _GEMM.format(extra="Tensor dense_expert_ids, ", tail="")
        + ") -> ()",
        plan=(SLOTS_IN, EXPERTS, K, N, GROUP),
        doc="dense FP8 MoE stage over every expert (the not-batched routed lane)",
    ),
    fm.LEGACY_OP: OpSpec(
        f"{fm.LEGACY_OP}(Tensor(a!) out, Tensor input, Tensor topk_weights, Tensor topk_ids, "
        "Tensor w13_ptrs_w, Tensor w13_ptrs_s, Tensor w2_ptrs_w, Tensor w2_ptrs_s, "
        "Tensor(b!) workspace, int total_slots, int group_size, int w13_k, int w13_n, "
        "int w2_k, int w2_n, int hidden_logical_size, "
        + ", ".join(f"bool {flag}" for flag in LEGACY_FLAGS)
        + ") -> ()",
        plan=(
            ST_SLOTS,
            GROUP,
            *(_key(name, f"arg:{name}") for name in ("w13_k", "w13_n", "w2_k", "w2_n")),
            HIDDEN,
            *(_key(flag, f"arg:{flag}") for flag in LEGACY_FLAGS),
        ),
        doc="monolithic single-token FP8 MoE: W13, SiLU, W2 and the reduction of one token",
    ),
    **{
        op: OpSpec(
            f"{op}{_ST_W13}",
            plan=(ST_SLOTS, K, N, GROUP, HIDDEN),
            doc=f"single-token {mode} W13 over the routed experts",
        )
        for op, mode in (
            (fm.ST_DENSE_W13_OP, "dense"),
            (fm.ST_INDEXED_W13_OP, "indexed"),
            (fm.ST_COMPACT_W13_OP, "compact"),
        )
    },
    **{
        op: OpSpec(
            f"{op}{_ST_W2}",
            plan=(ST_SLOTS, K, N, GROUP),
            doc=f"single-token {mode} W2 stage over the routed experts",
        )
        for op, mode in ((fm.ST_DENSE_STAGE_OP, "dense"), (fm.ST_INDEXED_STAGE_OP, "indexed"))
    },
    fm.PERMUTE_OP: OpSpec(
        f"{fm.PERMUTE_OP}(Tensor input, Tensor topk_ids, Tensor(a!) permuted_input, "
        "Tensor(b!) expert_offsets, Tensor(c!) permuted_idx, Tensor(d!) inv_permuted_idx, "
        "int num_experts, int num_tokens, int total_slots) -> ()",
        plan=(PlanKey("m", "arg:num_tokens"), _key("routed_slots", "arg:total_slots")),
        doc="route rows by expert with the op's own sort workspace",
    ),
    fm.EXACT_LAYOUT_OP: OpSpec(
        f"{fm.EXACT_LAYOUT_OP}(Tensor topk_ids, Tensor(a!) expert_offsets, "
        "Tensor(b!) sorted_ids, int num_experts, int num_tokens) -> ()",
        plan=(PlanKey("m", "arg:num_tokens"), EXPERTS),
        doc="single-token exact layout: offsets and sorted ids of one token's routes",
    ),
}

# The method's load-time ops; every dispatch op is checked at the first call needing it.
STAGES: dict[str, tuple[str, ...]] = {
    fm.METHOD_NAME: fm.LOAD_OPS,
    "fp8_moe.legacy_single_token": (fm.LEGACY_OP,),
    "fp8_moe.batched": (fm.GEMM_OP,),
    "fp8_moe.per_expert_dispatch": (fm.PER_EXPERT_OP,),
    "fp8_moe.dense_stage": (fm.DENSE_STAGE_OP,),
    "fp8_moe.permute": (fm.PERMUTE_OP,),
    "fp8_moe.permute_scratch": (fm.PERMUTE_SCRATCH_OP,),
    "fp8_moe.unpermute": (fm.UNPERMUTE_OP,),
    "fp8_moe.single_token_w13": (fm.ST_DENSE_W13_OP,),
    "fp8_moe.single_token_w2": (fm.ST_DENSE_STAGE_OP,),
    "fp8_moe.weighted_reduce": (fm.WEIGHTED_REDUCE_OP,),
}

__all__ = ["OPS", "STAGES"]
