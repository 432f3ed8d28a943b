"""The contract's facts as literals, copied from the contracts in docs/contracts/ (file and section
cited on each).

Tests compare the implementation with these values, never with the implementation's own
tables: a changed table entry, kind or order must make a test fail. When a new family lands
(docs/contracts/fp8.md §1.1, docs/contracts/dflash2.md §1.3/§1.4), its names are added HERE, to the
set of their kind; nothing else in the tests spells variable names by kind.
"""

from __future__ import annotations

# --- docs/contracts/core.md §1.1 and §1.3: environment variables by kind --------------------------

# 1.1 "deprecated": the five NVFP4 QPN2 names and the three AWQ dense names (eight in round 1).
DEPRECATED_VARIABLES: frozenset[str] = (
    frozenset(
        {
            "VLLM_SM70_NVFP4_QPN2",
            "VLLM_SM70_NVFP4_QPN2_PREFILL",
            "VLLM_SM70_NVFP4_QPN2_SHARED_WEIGHT",
            "VLLM_SM70_NVFP4_QPN2_SHARED_SCALES",
            "VLLM_SM70_NVFP4_QPN2_PREFILL_MIN_M",
            "VLLM_SM70_AWQ_TURBOMIND",  # as read for sm70_awq.enabled (dense linears)
            "VLLM_SM70_AWQ_PREFILL_EXACT_DENSE",
            "VLLM_SM70_AWQ_MLP_ENGINE",
        }
    )
    | frozenset(
        {
            # docs/contracts/fp8.md §1.1: the eleven sm70_fp8 aliases (VLLM_SM70_FP8_TURBOMIND moved
            # here from legacy; VLLM_SM70_FP8_QPN8 is also the DFlash2 alias of target_fp8_qpn8).
            "VLLM_SM70_FP8_TURBOMIND",
            "VLLM_SM70_FP8_DEQUANT_FALLBACK",
            "VLLM_SM70_FP8_QPN8",
            "VLLM_SM70_FP8_QPN8_PP2_TP4",
            "VLLM_SM70_FP8_QPN8_PP2_TP4_SHARED_GATE",
            "VLLM_SM70_FP8_PRESCALED_M1_DECODE",
            "VLLM_SM70_FP8_PRESCALED_M1_SHARED_GATE",
            "VLLM_SM70_FP8_PREFILL_PRESCALED",
            "VLLM_SM70_FP8_PREFILL_EXACT_DENSE",
            "VLLM_SM70_FP8_PREFILL_VISIBLE_DENSE_MM",
            "VLLM_SM70_FP8_DENSE_GATED_SILU",
        }
    )
    | frozenset(
        {
            # docs/contracts/dflash2.md §1.3: the 18 verifier aliases (#7 is the shared
            # VLLM_SM70_FP8_QPN8).
            "VLLM_SM70_DFLASH2_FUSED_GDN_VERIFY",
            "VLLM_SM70_DFLASH2_FUSED_GDN_COMBINED_SPLIT",
            "VLLM_SM70_DFLASH2_CONTEXT_PIPELINE",
            "VLLM_SM70_DFLASH2_CONTEXT_KV_GRAPH",
            "VLLM_SM70_DFLASH2_QUANT_LM_HEAD",
            "VLLM_SM70_DFLASH2_FP32_LOGITS",
            "VLLM_SM70_FP8_QPN8",
            "VLLM_SM70_DFLASH2_QPN8_RERANK",
            "VLLM_SM70_DFLASH2_VERIFY_FASTPATH",
            "VLLM_SM70_DFLASH2_FUSED_GDN_METADATA",
            "VLLM_SM70_DFLASH2_FUSED_GDN_NORM",
            "VLLM_SM70_DFLASH2_FUSED_GDN_SPLIT",
            "VLLM_SM70_DFLASH2_FUSED_GEMMA_RMS",
            "VLLM_SM70_DFLASH2_FIXED_GEMMA_RMS",
            "VLLM_SM70_DFLASH2_FUSED_SMALLQ_METADATA",
            "VLLM_SM70_DFLASH2_GROUPED_SMALLQ_METADATA",
            "VLLM_SM70_DFLASH2_SPARSE_TARGET_REJECTION",
            "VLLM_SM70_DFLASH2_SHARDED_CONTEXT_FC",
        }
    )
)

# 1.1 "legacy switch" (read, never warns), plus docs/contracts/fp8.md §1.1's two natively read
# mirrors and the FP8 MoE dequantize switch issue 16 registers as legacy.
LEGACY_VARIABLES: frozenset[str] = frozenset(
    {
        "VLLM_SM70_QUANT_BACKEND",
        "VLLM_SM70_NVFP4_TURBOMIND",
        "VLLM_SM70_AWQ_TURBOMIND",  # as read for the AWQ MoE method (sm70_turbomind.awq_moe)
        "VLLM_SM70_BATCH_GEMM_LAYOUTS",
        "VLLM_SM70_NVFP4_QPN4",
        "VLLM_SM70_NVFP4_DENSE_GATED_SILU",
        "VLLM_SM70_AWQ_MOE_DISABLE",
        "VLLM_DISABLED_KERNELS",
        "VLLM_SM70_FP8_PREFILL_FAST_SELECTOR",
        "VLLM_SM70_FP8_GROUPED_BMM_DECODE",
        "VLLM_SM70_FP8_MOE_DEQUANT_FALLBACK",
    }
    # docs/contracts/flashnext.md §1.1: the RMSNorm alias and the four base-lane switches.
    | {
        "VLLM_SM70_RMSNORM_GATED_EXACT",
        "VLLM_SM70_QWEN38_FP16_GEMV",
        "VLLM_SM70_QWEN38_FUSED_GDN_INPUT_FP16",
        "VLLM_SM70_QWEN38_FUSED_HC_FP16",
        "VLLM_SM70_QWEN4_EXP_ONLINE_QPN8",
    }
)

# docs/contracts/fp8moe.md §1.1: the 12 variables the FP8 MoE family adds ...
FP8_MOE_VARIABLES: frozenset[str] = frozenset(
    {
        "VLLM_SM70_FP8_MOE_BATCHED_GEMM",
        "VLLM_SM70_FP8_MOE_BATCHED_W13_PER_EXPERT_DISPATCH",
        "VLLM_SM70_FP8_MOE_BATCHED_W2_PER_EXPERT_DISPATCH",
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT",
        "VLLM_SM70_FP8_MOE_PERMUTE_WITH_SCRATCH",
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_EXACT_LAYOUT",
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_NATIVE_UNPERMUTE",
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_DECOMPOSED",
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_COMPARE",
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_COMPARE_REPORTS",
        "VLLM_SM70_FP8_MOE_COMPACT_STRICT_COMPARE_FAIL",
        "VLLM_SM70_FP8_MOE_SINGLE_TOKEN_INDEXED_W2_FASTPATH",
    }
)
# ... and the 6 single-token switches it shares with the AWQ MoE family (18 in all).
MOE_SINGLE_TOKEN_VARIABLES: frozenset[str] = frozenset(
    {
        "VLLM_SM70_MOE_SINGLE_TOKEN_COMPACT_W13_FASTPATH",
        "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_STAGE_FASTPATH",
        "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_W13_FASTPATH",
        "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_W2_FASTPATH",
        "VLLM_SM70_MOE_SINGLE_TOKEN_FASTPATH",
        "VLLM_SM70_MOE_SINGLE_TOKEN_UNPERMUTE_FASTPATH",
    }
)

# docs/contracts/flashnext.md §1.3 rows 1-14: the Flash-Next controls, by variable, in order.
FLASH_NEXT_CONTROLS: tuple[str, ...] = (
    "VLLM_SM70_QWEN38_GDN_INPUT_BATCH",
    "VLLM_SM70_MTP_HC_BATCH",
    "VLLM_SM70_MTP_HC_COOPERATIVE",
    "VLLM_SM70_MTP_HC_FULL_UNROLL",
    "VLLM_SM70_MTP_ROUTER_TOP16",
    "VLLM_SM70_MTP_ROUTER_BATCH",
    "VLLM_SM70_MTP_SHARED_BATCH",
    "VLLM_SM70_MTP_PLE_CONV",
    "VLLM_SM70_QWEN38_BATCH_FASTPATH",
    "VLLM_SM70_NVFP4_MOE_GROUPED_MTP5",
    "VLLM_SM70_RMSNORM_GATED_EXACT",
    "VLLM_SM70_FUSED_SIGMOID_MIXED_QKV",
    "VLLM_SM70_MTP_MOE_FP16_EXACT",
    "VLLM_SM70_QSA_MTP_TOPK",
)

# docs/contracts/attention.md §1.2-1.3: the FLASH_ATTN_V100 variables.
ATTENTION_VARIABLES: frozenset[str] = frozenset(
    {
        "VLLM_FLASH_V100_ENABLE_PAGED_PREFILL",
        "VLLM_FLASH_V100_DISABLE_PAGED_PREFILL",
        "VLLM_FLASH_V100_FP8_PREFILL_BRIDGE",
        "VLLM_FLASH_V100_PREFILL_SPLIT_KV",
        "VLLM_FLASH_V100_PREFILL_SPLIT_KV_TOKENS",
        "VLLM_FLASH_V100_PREFILL_SPLIT_KV_MIN_Q",
        "VLLM_FLASH_V100_PREFILL_SPLIT_KV_MAX_Q",
        "VLLM_FLASH_V100_PREFILL_SPLIT_KV_MIN_KV",
        "VLLM_FLASH_V100_BFLA_PREFILL",
        "VLLM_FLASH_V100_BFLA_MIN_Q",
        "VLLM_FLASH_V100_BFLA_MIN_KV",
        "VLLM_FLASH_V100_BFLA_MASK_BLOCK_N",
        "VLLM_FLASH_V100_PREFILL_CONTIG_DENSE",
        "VLLM_FLASH_V100_PREFILL_CONTIG_DENSE_MIN_Q",
        "VLLM_FLASH_V100_PREFILL_CONTIG_DENSE_MIN_KV",
        "VLLM_FLASH_V100_PREFILL_CONTIG_DENSE_ALLOW_COPY",
        "VLLM_FLASH_V100_PREFILL_GATHER_DENSE",
        "VLLM_FLASH_V100_PREFILL_GATHER_DENSE_MIN_Q",
        "VLLM_FLASH_V100_PREFILL_GATHER_DENSE_MIN_KV",
        "VLLM_FLASH_V100_PREFILL_USE_PAGED_CACHE",
        "VLLM_FLASH_V100_PREFILL_USE_TRITON",
        "VLLM_FLASH_V100_ALLOW_TRITON_FALLBACK",
        "VLLM_FLASH_V100_SMALLQ_DECODE_MAX_Q",
        "VLLM_FLASH_V100_SMALLQ_DECODE_MAX_MODEL_LEN",
        "VLLM_FLASH_V100_DECODE_DENSE_REFERENCE",
        "VLLM_FLASH_V100_DECODE_DENSE_CACHE",
        "VLLM_FLASH_V100_DECODE_USE_PAGED_PREFILL",
        "VLLM_FLASH_V100_DECODE_USE_BHMD_OUT",
        "VLLM_FLASH_V100_DECODE_USE_WMMA_WRAPPER",
        "VLLM_FLASH_V100_DECODE_USE_XQA",
        "VLLM_FLASH_V100_SMALLQ_DECODE_USE_XQA",
        "VLLM_FLASH_V100_DECODE_USE_SCALAR_PAGED",
        "VLLM_FLASH_V100_E4M3_GROUPED_FP32",
        "VLLM_FLASH_V100_DFLASH2_GROUPED_VERIFY",
        "VLLM_FLASH_V100_DFLASH2_BATCHED_GROUPED_VERIFY",
        "VLLM_FLASH_V100_DFLASH2_GROUPED_VERIFY_MIN_MODEL_LEN",
        "VLLM_FLASH_V100_FA2_D256_PREFILL",
        "VLLM_FLASH_V100_PREFILL_D256_GQA_V37",
        "VLLM_FLASH_V100_PREFILL_D256_GQA_ARCH_128K_EXPERIMENTAL",
        "VLLM_FLASH_V100_PREFILL_DENSE_SPLITKV3",
        "VLLM_FLASH_V100_PREFILL_DENSE_SPLITKV3_MIN_KV",
        "VLLM_FLASH_V100_PREFILL_PREFIX_DECODE_ROWS",
        "VLLM_FLASH_V100_E4M3_BATCH_XQA",
        "VLLM_FLASH_V100_SMALLQ_DECODE_XQA_MIN_SEQ_LEN",
        "VLLM_FLASH_V100_DECODE_XQA_Q4_MIN_SEQ_LEN",
        "VLLM_FLASH_V100_DECODE_FP8_XQA_MIN_SEQ_LEN",
        "VLLM_FLASH_V100_DECODE_PARTITION_SIZE",
        "VLLM_FLASH_V100_XQA_G6_P1024_SAWTOOTH",
        "VLLM_FLASH_V100_XQA_E4M3_G6_P64_P256_AUTO",
        "VLLM_FLASH_V100_DECODE_DYNAMIC_PARTITIONS",
        "VLLM_DFLASH_DDTREE_TRITON_BRANCH_ATTN",
        "VLLM_DFLASH_DDTREE_TRITON_BRANCH_ATTN_STRICT",
        "VLLM_SM70_FLASH_ATTN_V100",
        "VLLM_FLASH_V100_COMPARE_BHMD_OUT_DIR",
        "VLLM_FLASH_V100_COMPARE_BHMD_OUT_MAX_CALLS",
        "VLLM_FLASH_V100_COMPARE_TRITON_OUT_DIR",
        "VLLM_FLASH_V100_COMPARE_TRITON_OUT_MAX_CALLS",
        "VLLM_FLASH_V100_COMPARE_TRITON_TENSOR_DUMP_DIR",
        "VLLM_FLASH_V100_COMPARE_TRITON_TENSOR_DUMP_MAX_TOKENS",
        "VLLM_FLASH_V100_PREFILL_DENSE_SPLITKV3_Q8000_EXPERIMENTAL",
        "VLLM_FLASH_V100_PREFILL_CHUNK_PROFILE",
        "VLLM_FLASH_V100_DEBUG_PREFILL_COMPARE",
        "VLLM_FLASH_V100_TRACE_DECODE_ACTIVE",
        "VLLM_FLASH_V100_ROUTE_SUMMARY",
        "VLLM_FLASH_V100_DEBUG_ROUTE_SUMMARY",
        "VLLM_SM70_DEBUG",
    }
)

# 1.1 "current switch": every sm70_awq_moe variable except VLLM_SM70_AWQ_MOE_DISABLE (1.3).
CURRENT_VARIABLES: frozenset[str] = frozenset(
    {
        "VLLM_SM70_AWQ_QWEN38_QPN_M1",
        "VLLM_SM70_AWQ_QWEN38_MOE_COMPACT_GROUPED_DECODE",
        "VLLM_SM70_AWQ_MOE_COMPACT_METADATA",
        "VLLM_SM70_AWQ_TUNE_SMALL_SHAPES",
        "VLLM_SM70_AWQ_MOE_BATCHED_GEMM",
        "VLLM_SM70_AWQ_MOE_BATCHED_LAYER_ALLOWLIST",
        "VLLM_SM70_AWQ_MOE_BATCHED_LAYER_DENYLIST",
        "VLLM_SM70_AWQ_MOE_LEGACY_SINGLE_TOKEN_COMPACT",
        "VLLM_SM70_AWQ_MOE_BATCHED_SINGLE_TOKEN_DENSE_W13",
        "VLLM_SM70_AWQ_MOE_BATCHED_EXACT_W2",
        "VLLM_SM70_AWQ_MOE_BATCHED_ACTIVE_EXACT_W2",
        "VLLM_SM70_AWQ_MOE_BATCHED_DECODE_MAX_TOKENS",
        "VLLM_SM70_AWQ_QWEN38_MOE_INDEXED_PREFILL",
        "VLLM_SM70_AWQ_QWEN38_MOE_W2_CHUNK_TOKENS",
    }
    # docs/contracts/fp8moe.md §1.1: every FP8 MoE variable is a current switch.
    | FP8_MOE_VARIABLES
    | MOE_SINGLE_TOKEN_VARIABLES
    # docs/contracts/flashnext.md §1.1: the 13 Flash-Next controls that default on (§1.3's
    # fourteen less the RMSNorm alias, a legacy name).
    | (frozenset(FLASH_NEXT_CONTROLS) - {"VLLM_SM70_RMSNORM_GATED_EXACT"})
    # docs/contracts/attention.md §1: every FLASH_ATTN_V100 variable (ATTENTION_FIELDS below).
    | ATTENTION_VARIABLES
)

# docs/contracts/flashnext.md §1.3: field -> (variable, kind, default on an engine without
# model facts, where the decode contract fails).
FLASH_NEXT_FIELDS: dict[str, tuple[str, str, bool]] = {
    "gdn_input_batch": ("VLLM_SM70_QWEN38_GDN_INPUT_BATCH", "current", True),
    "mtp_hc_batch": ("VLLM_SM70_MTP_HC_BATCH", "current", True),
    "mtp_hc_cooperative": ("VLLM_SM70_MTP_HC_COOPERATIVE", "current", True),
    "mtp_hc_full_unroll": ("VLLM_SM70_MTP_HC_FULL_UNROLL", "current", True),
    "mtp_router_top16": ("VLLM_SM70_MTP_ROUTER_TOP16", "current", True),
    "mtp_router_batch": ("VLLM_SM70_MTP_ROUTER_BATCH", "current", True),
    "mtp_shared_batch": ("VLLM_SM70_MTP_SHARED_BATCH", "current", True),
    "mtp_ple_conv": ("VLLM_SM70_MTP_PLE_CONV", "current", True),
    "batch_fastpath": ("VLLM_SM70_QWEN38_BATCH_FASTPATH", "current", True),
    "nvfp4_moe_grouped_mtp5": ("VLLM_SM70_NVFP4_MOE_GROUPED_MTP5", "current", True),
    "rmsnorm_gated_exact": ("VLLM_SM70_RMSNORM_GATED_EXACT", "legacy", False),
    "fused_sigmoid_mixed_qkv": ("VLLM_SM70_FUSED_SIGMOID_MIXED_QKV", "current", True),
    "mtp_moe_fp16_exact": ("VLLM_SM70_MTP_MOE_FP16_EXACT", "current", True),
    "qsa_mtp_topk": ("VLLM_SM70_QSA_MTP_TOPK", "current", True),
    "fp16_gemv": ("VLLM_SM70_QWEN38_FP16_GEMV", "legacy", False),
    "fused_gdn_input": ("VLLM_SM70_QWEN38_FUSED_GDN_INPUT_FP16", "legacy", False),
    "fused_hc": ("VLLM_SM70_QWEN38_FUSED_HC_FP16", "legacy", False),
    "online_qpn8": ("VLLM_SM70_QWEN4_EXP_ONLINE_QPN8", "legacy", False),
}

# docs/contracts/attention.md §1.2-1.3: field -> (variable, parse kind, default); every one a
# current switch of the `v100_attention` section.
ATTENTION_FIELDS: dict[str, tuple[str, str, object]] = {
    "enable_paged_prefill": ("VLLM_FLASH_V100_ENABLE_PAGED_PREFILL", "ne0", True),
    "disable_paged_prefill": ("VLLM_FLASH_V100_DISABLE_PAGED_PREFILL", "eq1", False),
    "fp8_prefill_bridge": ("VLLM_FLASH_V100_FP8_PREFILL_BRIDGE", "ne0", True),
    "prefill_split_kv": ("VLLM_FLASH_V100_PREFILL_SPLIT_KV", "int_bool", False),
    "prefill_split_kv_tokens": ("VLLM_FLASH_V100_PREFILL_SPLIT_KV_TOKENS", "int", 32768),
    "prefill_split_kv_min_q": ("VLLM_FLASH_V100_PREFILL_SPLIT_KV_MIN_Q", "int", 1),
    "prefill_split_kv_max_q": ("VLLM_FLASH_V100_PREFILL_SPLIT_KV_MAX_Q", "int", 2048),
    "prefill_split_kv_min_kv": ("VLLM_FLASH_V100_PREFILL_SPLIT_KV_MIN_KV", "int", 32768),
    "bfla_prefill": ("VLLM_FLASH_V100_BFLA_PREFILL", "int_bool", False),
    "bfla_min_q": ("VLLM_FLASH_V100_BFLA_MIN_Q", "int", 4096),
    "bfla_min_kv": ("VLLM_FLASH_V100_BFLA_MIN_KV", "int", 32768),
    "bfla_mask_block_n": ("VLLM_FLASH_V100_BFLA_MASK_BLOCK_N", "int", 256),
    "prefill_contig_dense": ("VLLM_FLASH_V100_PREFILL_CONTIG_DENSE", "int_bool", True),
    "prefill_contig_dense_min_q": ("VLLM_FLASH_V100_PREFILL_CONTIG_DENSE_MIN_Q", "int", 1536),
    "prefill_contig_dense_min_kv": ("VLLM_FLASH_V100_PREFILL_CONTIG_DENSE_MIN_KV", "int", 8192),
    "prefill_contig_dense_allow_copy": (
        "VLLM_FLASH_V100_PREFILL_CONTIG_DENSE_ALLOW_COPY",
        "int_bool",
        False,
    ),
    "prefill_gather_dense": ("VLLM_FLASH_V100_PREFILL_GATHER_DENSE", "int_bool", True),
    "prefill_gather_dense_min_q": ("VLLM_FLASH_V100_PREFILL_GATHER_DENSE_MIN_Q", "int", 4096),
    "prefill_gather_dense_min_kv": ("VLLM_FLASH_V100_PREFILL_GATHER_DENSE_MIN_KV", "int", 8192),
    "prefill_use_paged_cache": ("VLLM_FLASH_V100_PREFILL_USE_PAGED_CACHE", "eq1", False),
    "prefill_use_triton": ("VLLM_FLASH_V100_PREFILL_USE_TRITON", "ne0", False),
    "allow_triton_fallback": ("VLLM_FLASH_V100_ALLOW_TRITON_FALLBACK", "eq1", False),
    "smallq_decode_max_q": ("VLLM_FLASH_V100_SMALLQ_DECODE_MAX_Q", "int", 16),
    "smallq_decode_max_model_len": ("VLLM_FLASH_V100_SMALLQ_DECODE_MAX_MODEL_LEN", "int", 0),
    "decode_dense_reference": ("VLLM_FLASH_V100_DECODE_DENSE_REFERENCE", "eq1", False),
    "decode_dense_cache": ("VLLM_FLASH_V100_DECODE_DENSE_CACHE", "eq1", False),
    "decode_use_paged_prefill": ("VLLM_FLASH_V100_DECODE_USE_PAGED_PREFILL", "eq1", False),
    "decode_use_bhmd_out": ("VLLM_FLASH_V100_DECODE_USE_BHMD_OUT", "ne0", True),
    "decode_use_wmma_wrapper": ("VLLM_FLASH_V100_DECODE_USE_WMMA_WRAPPER", "eq1", False),
    "decode_use_xqa": ("VLLM_FLASH_V100_DECODE_USE_XQA", "eq1", True),
    "smallq_decode_use_xqa": ("VLLM_FLASH_V100_SMALLQ_DECODE_USE_XQA", "eq1", True),
    "decode_use_scalar_paged": ("VLLM_FLASH_V100_DECODE_USE_SCALAR_PAGED", "ne0", True),
    "e4m3_grouped_fp32": ("VLLM_FLASH_V100_E4M3_GROUPED_FP32", "int_bool", True),
    "dflash2_grouped_verify": ("VLLM_FLASH_V100_DFLASH2_GROUPED_VERIFY", "int_bool", True),
    "dflash2_batched_grouped_verify": (
        "VLLM_FLASH_V100_DFLASH2_BATCHED_GROUPED_VERIFY",
        "int_bool",
        False,
    ),
    "dflash2_grouped_verify_min_model_len": (
        "VLLM_FLASH_V100_DFLASH2_GROUPED_VERIFY_MIN_MODEL_LEN",
        "int",
        32768,
    ),
    "fa2_d256_prefill": ("VLLM_FLASH_V100_FA2_D256_PREFILL", "int_bool", True),
    "prefill_d256_gqa_v37": ("VLLM_FLASH_V100_PREFILL_D256_GQA_V37", "int_bool", False),
    "prefill_d256_gqa_arch_128k_experimental": (
        "VLLM_FLASH_V100_PREFILL_D256_GQA_ARCH_128K_EXPERIMENTAL",
        "int_bool",
        True,
    ),
    "prefill_dense_splitkv3": ("VLLM_FLASH_V100_PREFILL_DENSE_SPLITKV3", "int_bool", True),
    "prefill_dense_splitkv3_min_kv": (
        "VLLM_FLASH_V100_PREFILL_DENSE_SPLITKV3_MIN_KV",
        "int",
        32768,
    ),
    "prefill_prefix_decode_rows": ("VLLM_FLASH_V100_PREFILL_PREFIX_DECODE_ROWS", "int_bool", True),
    "e4m3_batch_xqa": ("VLLM_FLASH_V100_E4M3_BATCH_XQA", "int_bool", True),
    "smallq_decode_xqa_min_seq_len": ("VLLM_FLASH_V100_SMALLQ_DECODE_XQA_MIN_SEQ_LEN", "int", 4096),
    "decode_xqa_q4_min_seq_len": ("VLLM_FLASH_V100_DECODE_XQA_Q4_MIN_SEQ_LEN", "threshold", 32768),
    "decode_fp8_xqa_min_seq_len": (
        "VLLM_FLASH_V100_DECODE_FP8_XQA_MIN_SEQ_LEN",
        "threshold",
        16384,
    ),
    "decode_partition_size": ("VLLM_FLASH_V100_DECODE_PARTITION_SIZE", "partition", 0),
    "xqa_g6_p1024_sawtooth": ("VLLM_FLASH_V100_XQA_G6_P1024_SAWTOOTH", "ne0", True),
    "xqa_e4m3_g6_p64_p256_auto": ("VLLM_FLASH_V100_XQA_E4M3_G6_P64_P256_AUTO", "ne0", True),
    "decode_dynamic_partitions": ("VLLM_FLASH_V100_DECODE_DYNAMIC_PARTITIONS", "ne0", True),
    "ddtree_triton_branch_attn": ("VLLM_DFLASH_DDTREE_TRITON_BRANCH_ATTN", "int_bool", True),
    "ddtree_triton_branch_attn_strict": (
        "VLLM_DFLASH_DDTREE_TRITON_BRANCH_ATTN_STRICT",
        "int_bool",
        False,
    ),
    "enabled": ("VLLM_SM70_FLASH_ATTN_V100", "int_bool", True),
    "compare_bhmd_out_dir": ("VLLM_FLASH_V100_COMPARE_BHMD_OUT_DIR", "text", ""),
    "compare_bhmd_out_max_calls": ("VLLM_FLASH_V100_COMPARE_BHMD_OUT_MAX_CALLS", "int", 0),
    "compare_triton_out_dir": ("VLLM_FLASH_V100_COMPARE_TRITON_OUT_DIR", "text", ""),
    "compare_triton_out_max_calls": ("VLLM_FLASH_V100_COMPARE_TRITON_OUT_MAX_CALLS", "int", 0),
    "compare_triton_tensor_dump_dir": (
        "VLLM_FLASH_V100_COMPARE_TRITON_TENSOR_DUMP_DIR",
        "text",
        "",
    ),
    "compare_triton_tensor_dump_max_tokens": (
        "VLLM_FLASH_V100_COMPARE_TRITON_TENSOR_DUMP_MAX_TOKENS",
        "int",
        64,
    ),
    "prefill_dense_splitkv3_q8000_experimental": (
        "VLLM_FLASH_V100_PREFILL_DENSE_SPLITKV3_Q8000_EXPERIMENTAL",
        "int_bool",
        False,
    ),
    "prefill_chunk_profile": ("VLLM_FLASH_V100_PREFILL_CHUNK_PROFILE", "int_bool", False),
    "debug_prefill_compare": ("VLLM_FLASH_V100_DEBUG_PREFILL_COMPARE", "eq1", False),
    "trace_decode_active": ("VLLM_FLASH_V100_TRACE_DECODE_ACTIVE", "int_bool", False),
    "route_summary": ("VLLM_FLASH_V100_ROUTE_SUMMARY", "eq1", False),
    "debug_route_summary": ("VLLM_FLASH_V100_DEBUG_ROUTE_SUMMARY", "eq1", False),
    "sm70_debug": ("VLLM_SM70_DEBUG", "text", ""),
}

# docs/contracts/dflash2.md §1.4: retired names, no field.
OBSOLETE_VARIABLES: frozenset[str] = frozenset({"VLLM_SM70_DFLASH2_QPN8_DENSE_ORDER"})
REMOVED_VARIABLES: frozenset[str] = frozenset({"VLLM_SM70_DFLASH2_QPN8_ALLOW_CANDIDATE_ORDER"})

# docs/contracts/dflash2.md §1.3, in table order: field -> alias (every one deprecated, INT_BOOL,
# default = verifier qualified).
DFLASH2_FIELDS: dict[str, str] = {
    "fused_gdn_verify": "VLLM_SM70_DFLASH2_FUSED_GDN_VERIFY",
    "fused_gdn_combined_split": "VLLM_SM70_DFLASH2_FUSED_GDN_COMBINED_SPLIT",
    "context_pipeline": "VLLM_SM70_DFLASH2_CONTEXT_PIPELINE",
    "context_kv_graph": "VLLM_SM70_DFLASH2_CONTEXT_KV_GRAPH",
    "quant_lm_head": "VLLM_SM70_DFLASH2_QUANT_LM_HEAD",
    "fp32_logits": "VLLM_SM70_DFLASH2_FP32_LOGITS",
    "target_fp8_qpn8": "VLLM_SM70_FP8_QPN8",
    "qpn8_rerank": "VLLM_SM70_DFLASH2_QPN8_RERANK",
    "verify_fastpath": "VLLM_SM70_DFLASH2_VERIFY_FASTPATH",
    "fused_gdn_metadata": "VLLM_SM70_DFLASH2_FUSED_GDN_METADATA",
    "fused_gdn_norm": "VLLM_SM70_DFLASH2_FUSED_GDN_NORM",
    "fused_gdn_split": "VLLM_SM70_DFLASH2_FUSED_GDN_SPLIT",
    "fused_gemma_rms": "VLLM_SM70_DFLASH2_FUSED_GEMMA_RMS",
    "fixed_gemma_rms": "VLLM_SM70_DFLASH2_FIXED_GEMMA_RMS",
    "fused_smallq_metadata": "VLLM_SM70_DFLASH2_FUSED_SMALLQ_METADATA",
    "grouped_smallq_metadata": "VLLM_SM70_DFLASH2_GROUPED_SMALLQ_METADATA",
    "sparse_target_rejection": "VLLM_SM70_DFLASH2_SPARSE_TARGET_REJECTION",
    "sharded_context_fc": "VLLM_SM70_DFLASH2_SHARDED_CONTEXT_FC",
}

# 1.3: every field with its variable and kind ("config" = no variable), by field key.
FIELD_VARIABLES: dict[str, tuple[str | None, str]] = {
    "sm70_nvfp4.qpn2": ("VLLM_SM70_NVFP4_QPN2", "deprecated"),
    "sm70_nvfp4.prefill": ("VLLM_SM70_NVFP4_QPN2_PREFILL", "deprecated"),
    "sm70_nvfp4.shared_weight": ("VLLM_SM70_NVFP4_QPN2_SHARED_WEIGHT", "deprecated"),
    "sm70_nvfp4.shared_scales": ("VLLM_SM70_NVFP4_QPN2_SHARED_SCALES", "deprecated"),
    "sm70_nvfp4.prefill_min_m": ("VLLM_SM70_NVFP4_QPN2_PREFILL_MIN_M", "deprecated"),
    "sm70_nvfp4.qpn4": ("VLLM_SM70_NVFP4_QPN4", "legacy"),
    "sm70_nvfp4.dense_gated_silu": ("VLLM_SM70_NVFP4_DENSE_GATED_SILU", "legacy"),
    "sm70_nvfp4.dense_qpn2": (None, "config"),
    "sm70_turbomind.quant_backend": ("VLLM_SM70_QUANT_BACKEND", "legacy"),
    "sm70_turbomind.nvfp4": ("VLLM_SM70_NVFP4_TURBOMIND", "legacy"),
    "sm70_turbomind.awq_moe": ("VLLM_SM70_AWQ_TURBOMIND", "legacy"),
    "sm70_turbomind.batch_layouts": ("VLLM_SM70_BATCH_GEMM_LAYOUTS", "legacy"),
    "sm70_awq.enabled": ("VLLM_SM70_AWQ_TURBOMIND", "deprecated"),
    "sm70_awq.prefill_exact_dense": ("VLLM_SM70_AWQ_PREFILL_EXACT_DENSE", "deprecated"),
    "sm70_awq.fused_silu": ("VLLM_SM70_AWQ_MLP_ENGINE", "deprecated"),
    "sm70_awq_moe.disable": ("VLLM_SM70_AWQ_MOE_DISABLE", "legacy"),
    "sm70_awq_moe.qpn_m1": ("VLLM_SM70_AWQ_QWEN38_QPN_M1", "current"),
    "sm70_awq_moe.active_grouped_decode": (
        "VLLM_SM70_AWQ_QWEN38_MOE_COMPACT_GROUPED_DECODE",
        "current",
    ),
    "sm70_awq_moe.compact_metadata": ("VLLM_SM70_AWQ_MOE_COMPACT_METADATA", "current"),
    "sm70_awq_moe.tune_small_shapes": ("VLLM_SM70_AWQ_TUNE_SMALL_SHAPES", "current"),
    "sm70_awq_moe.batched": ("VLLM_SM70_AWQ_MOE_BATCHED_GEMM", "current"),
    "sm70_awq_moe.layer_allowlist": ("VLLM_SM70_AWQ_MOE_BATCHED_LAYER_ALLOWLIST", "current"),
    "sm70_awq_moe.layer_denylist": ("VLLM_SM70_AWQ_MOE_BATCHED_LAYER_DENYLIST", "current"),
    "sm70_awq_moe.legacy_compact": ("VLLM_SM70_AWQ_MOE_LEGACY_SINGLE_TOKEN_COMPACT", "current"),
    "sm70_awq_moe.strict_w13": ("VLLM_SM70_AWQ_MOE_BATCHED_SINGLE_TOKEN_DENSE_W13", "current"),
    "sm70_awq_moe.exact_w2": ("VLLM_SM70_AWQ_MOE_BATCHED_EXACT_W2", "current"),
    "sm70_awq_moe.active_exact_w2": ("VLLM_SM70_AWQ_MOE_BATCHED_ACTIVE_EXACT_W2", "current"),
    "sm70_awq_moe.max_batched_tokens": ("VLLM_SM70_AWQ_MOE_BATCHED_DECODE_MAX_TOKENS", "current"),
    "sm70_awq_moe.indexed_prefill": ("VLLM_SM70_AWQ_QWEN38_MOE_INDEXED_PREFILL", "current"),
    "sm70_awq_moe.w2_chunk_tokens": ("VLLM_SM70_AWQ_QWEN38_MOE_W2_CHUNK_TOKENS", "current"),
    # docs/contracts/fp8.md §1.1
    "sm70_fp8.enabled": ("VLLM_SM70_FP8_TURBOMIND", "deprecated"),
    "sm70_fp8.dequant_fallback": ("VLLM_SM70_FP8_DEQUANT_FALLBACK", "deprecated"),
    "sm70_fp8.qpn8": ("VLLM_SM70_FP8_QPN8", "deprecated"),
    "sm70_fp8.qpn8_pp2_tp4": ("VLLM_SM70_FP8_QPN8_PP2_TP4", "deprecated"),
    "sm70_fp8.qpn8_shared_gate": ("VLLM_SM70_FP8_QPN8_PP2_TP4_SHARED_GATE", "deprecated"),
    "sm70_fp8.prescaled_decode": ("VLLM_SM70_FP8_PRESCALED_M1_DECODE", "deprecated"),
    "sm70_fp8.prescaled_shared_gate": ("VLLM_SM70_FP8_PRESCALED_M1_SHARED_GATE", "deprecated"),
    "sm70_fp8.prefill_prescaled": ("VLLM_SM70_FP8_PREFILL_PRESCALED", "deprecated"),
    "sm70_fp8.prefill_exact_dense": ("VLLM_SM70_FP8_PREFILL_EXACT_DENSE", "deprecated"),
    "sm70_fp8.prefill_visible_dense_mm": ("VLLM_SM70_FP8_PREFILL_VISIBLE_DENSE_MM", "deprecated"),
    "sm70_fp8.gated_silu": ("VLLM_SM70_FP8_DENSE_GATED_SILU", "deprecated"),
    "sm70_fp8.prefill_fast_selector": ("VLLM_SM70_FP8_PREFILL_FAST_SELECTOR", "legacy"),
    "sm70_fp8.grouped_bmm_decode": ("VLLM_SM70_FP8_GROUPED_BMM_DECODE", "legacy"),
    "sm70_fp8.moe_dequant_fallback": ("VLLM_SM70_FP8_MOE_DEQUANT_FALLBACK", "legacy"),
    "sm70_fp8.block_qpn8": (None, "config"),
    "sm70_fp8.block_qpn8_volta_turbomind_prefill": (None, "config"),
    **{
        f"sm70_dflash2.{name}": (variable, "deprecated")
        for name, variable in DFLASH2_FIELDS.items()
    },
    # docs/contracts/fp8moe.md §1.1 (the single-token inputs: a routectl decision).
    "sm70_moe_single_token.compact_w13": (
        "VLLM_SM70_MOE_SINGLE_TOKEN_COMPACT_W13_FASTPATH",
        "current",
    ),
    "sm70_moe_single_token.indexed_stage": (
        "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_STAGE_FASTPATH",
        "current",
    ),
    "sm70_moe_single_token.indexed_w13": (
        "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_W13_FASTPATH",
        "current",
    ),
    "sm70_moe_single_token.indexed_w2": (
        "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_W2_FASTPATH",
        "current",
    ),
    "sm70_moe_single_token.fastpath": ("VLLM_SM70_MOE_SINGLE_TOKEN_FASTPATH", "current"),
    "sm70_moe_single_token.unpermute": ("VLLM_SM70_MOE_SINGLE_TOKEN_UNPERMUTE_FASTPATH", "current"),
    "sm70_moe_single_token.fp8_indexed_w2": (
        "VLLM_SM70_FP8_MOE_SINGLE_TOKEN_INDEXED_W2_FASTPATH",
        "current",
    ),
    "sm70_fp8_moe.batched": ("VLLM_SM70_FP8_MOE_BATCHED_GEMM", "current"),
    "sm70_fp8_moe.w13_per_expert": ("VLLM_SM70_FP8_MOE_BATCHED_W13_PER_EXPERT_DISPATCH", "current"),
    "sm70_fp8_moe.w2_per_expert": ("VLLM_SM70_FP8_MOE_BATCHED_W2_PER_EXPERT_DISPATCH", "current"),
    "sm70_fp8_moe.legacy_compact": ("VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT", "current"),
    "sm70_fp8_moe.permute_scratch": ("VLLM_SM70_FP8_MOE_PERMUTE_WITH_SCRATCH", "current"),
    "sm70_fp8_moe.compact_exact_layout": (
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_EXACT_LAYOUT",
        "current",
    ),
    "sm70_fp8_moe.compact_native_unpermute": (
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_NATIVE_UNPERMUTE",
        "current",
    ),
    "sm70_fp8_moe.compact_decomposed": (
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_DECOMPOSED",
        "current",
    ),
    "sm70_fp8_moe.single_token_w13": (None, "config"),
    "sm70_fp8_moe.single_token_w2": (None, "config"),
    "sm70_fp8_moe.single_token_reduce": (None, "config"),
    "sm70_fp8_moe.compact_compare": (
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_COMPARE",
        "current",
    ),
    "sm70_fp8_moe.compact_compare_reports": (
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_COMPARE_REPORTS",
        "current",
    ),
    "sm70_fp8_moe.strict_compare_fail": (
        "VLLM_SM70_FP8_MOE_COMPACT_STRICT_COMPARE_FAIL",
        "current",
    ),
    "disabled_kernels": ("VLLM_DISABLED_KERNELS", "legacy"),
    "linear_backend": (None, "config"),
    **{
        f"sm70_flash_next.{name}": (variable, kind)
        for name, (variable, kind, _) in FLASH_NEXT_FIELDS.items()
    },
    **{
        f"v100_attention.{name}": (variable, "current")
        for name, (variable, _, _) in ATTENTION_FIELDS.items()
    },
    "v100_attention.sm70_decode_strategy": (None, "config"),
}

# 1.3: defaults with no variable set, on the qualified workload of 4.1 (qpn2/prefill follow
# qualification) and quant_backend auto (use_turbomind(True) = True).
QUALIFIED_DEFAULTS: dict[str, object] = {
    "sm70_nvfp4.qpn2": True,
    "sm70_nvfp4.prefill": True,
    "sm70_nvfp4.shared_weight": True,
    "sm70_nvfp4.shared_scales": True,
    "sm70_nvfp4.prefill_min_m": 1024,
    "sm70_nvfp4.qpn4": True,
    "sm70_nvfp4.dense_gated_silu": False,
    "sm70_nvfp4.dense_qpn2": True,
    "sm70_turbomind.quant_backend": "auto",
    "sm70_turbomind.nvfp4": True,
    "sm70_turbomind.awq_moe": True,
    "sm70_turbomind.batch_layouts": True,
    "sm70_awq.enabled": True,
    "sm70_awq.prefill_exact_dense": True,
    "sm70_awq.fused_silu": False,
    "sm70_awq_moe.disable": False,
    "sm70_awq_moe.qpn_m1": False,
    "sm70_awq_moe.active_grouped_decode": True,
    "sm70_awq_moe.compact_metadata": True,
    "sm70_awq_moe.tune_small_shapes": False,
    "sm70_awq_moe.batched": True,
    "sm70_awq_moe.layer_allowlist": (),
    "sm70_awq_moe.layer_denylist": (),
    "sm70_awq_moe.legacy_compact": True,
    "sm70_awq_moe.strict_w13": False,
    "sm70_awq_moe.exact_w2": False,
    "sm70_awq_moe.active_exact_w2": False,
    "sm70_awq_moe.max_batched_tokens": 0,
    "sm70_awq_moe.indexed_prefill": True,
    "sm70_awq_moe.w2_chunk_tokens": 0,
    # docs/contracts/fp8.md §1.1 defaults (routectl's block_qpn8 default is False: issue 16).
    "sm70_fp8.enabled": True,
    "sm70_fp8.dequant_fallback": True,
    "sm70_fp8.qpn8": False,
    "sm70_fp8.qpn8_pp2_tp4": False,
    "sm70_fp8.qpn8_shared_gate": False,
    "sm70_fp8.prescaled_decode": True,
    "sm70_fp8.prescaled_shared_gate": True,
    "sm70_fp8.prefill_prescaled": True,
    "sm70_fp8.prefill_exact_dense": True,
    "sm70_fp8.prefill_visible_dense_mm": False,
    "sm70_fp8.gated_silu": True,
    "sm70_fp8.prefill_fast_selector": True,
    "sm70_fp8.grouped_bmm_decode": True,
    "sm70_fp8.moe_dequant_fallback": False,
    "sm70_fp8.block_qpn8": False,
    "sm70_fp8.block_qpn8_volta_turbomind_prefill": None,
    # docs/contracts/dflash2.md §1.3/§1.5: the test's engine has no model facts, so the verifier is
    # not qualified and every verifier default is false.
    **{f"sm70_dflash2.{name}": False for name in DFLASH2_FIELDS},
    # docs/contracts/fp8moe.md §1.1.
    "sm70_moe_single_token.compact_w13": False,
    "sm70_moe_single_token.indexed_stage": False,
    "sm70_moe_single_token.indexed_w13": False,
    "sm70_moe_single_token.indexed_w2": False,
    "sm70_moe_single_token.fastpath": False,
    "sm70_moe_single_token.unpermute": True,
    "sm70_moe_single_token.fp8_indexed_w2": True,
    "sm70_fp8_moe.batched": True,
    "sm70_fp8_moe.w13_per_expert": False,
    "sm70_fp8_moe.w2_per_expert": False,
    "sm70_fp8_moe.legacy_compact": True,
    "sm70_fp8_moe.permute_scratch": True,
    "sm70_fp8_moe.compact_exact_layout": True,
    "sm70_fp8_moe.compact_native_unpermute": False,
    "sm70_fp8_moe.compact_decomposed": False,
    "sm70_fp8_moe.single_token_w13": ("dense",),
    "sm70_fp8_moe.single_token_w2": "indexed",
    "sm70_fp8_moe.single_token_reduce": "weighted",
    "sm70_fp8_moe.compact_compare": False,
    "sm70_fp8_moe.compact_compare_reports": 16,
    "sm70_fp8_moe.strict_compare_fail": False,
    "disabled_kernels": (),
    "linear_backend": "auto",
    **{f"sm70_flash_next.{name}": d for name, (_, _, d) in FLASH_NEXT_FIELDS.items()},
    **{f"v100_attention.{name}": d for name, (_, _, d) in ATTENTION_FIELDS.items()},
    "v100_attention.sm70_decode_strategy": "shared",
}


def _attention_text(kind: str, default: object) -> tuple[str, object]:
    if kind in ("eq1", "ne0", "int_bool"):
        return ("0", False) if default else ("1", True)
    if kind == "partition":
        return ("512", 512)
    if kind == "text":
        return ("routing", "routing")
    return ("5", 5)  # int and threshold


# A valid text per variable whose value differs from the default (1.2 parsing rules), with
# the value it parses to.
NON_DEFAULT_TEXT: dict[str, tuple[str, object]] = {
    "VLLM_SM70_NVFP4_QPN2": ("0", False),
    "VLLM_SM70_NVFP4_QPN2_PREFILL": ("0", False),
    "VLLM_SM70_NVFP4_QPN2_SHARED_WEIGHT": ("0", False),
    "VLLM_SM70_NVFP4_QPN2_SHARED_SCALES": ("0", False),
    "VLLM_SM70_NVFP4_QPN2_PREFILL_MIN_M": ("9", 9),
    "VLLM_SM70_NVFP4_QPN4": ("0", False),
    "VLLM_SM70_NVFP4_DENSE_GATED_SILU": ("1", True),
    "VLLM_SM70_QUANT_BACKEND": ("turbomind", "turbomind"),
    "VLLM_SM70_NVFP4_TURBOMIND": ("0", False),
    "VLLM_SM70_AWQ_TURBOMIND": ("0", False),
    "VLLM_SM70_BATCH_GEMM_LAYOUTS": ("0", False),
    "VLLM_SM70_AWQ_PREFILL_EXACT_DENSE": ("0", False),
    "VLLM_SM70_AWQ_MLP_ENGINE": ("1", True),
    "VLLM_SM70_AWQ_MOE_DISABLE": ("1", True),
    "VLLM_SM70_AWQ_QWEN38_QPN_M1": ("1", True),
    "VLLM_SM70_AWQ_QWEN38_MOE_COMPACT_GROUPED_DECODE": ("0", False),
    "VLLM_SM70_AWQ_MOE_COMPACT_METADATA": ("0", False),
    "VLLM_SM70_AWQ_TUNE_SMALL_SHAPES": ("1", True),
    "VLLM_SM70_AWQ_MOE_BATCHED_GEMM": ("0", False),
    "VLLM_SM70_AWQ_MOE_BATCHED_LAYER_ALLOWLIST": ("0,3,10-12", ("0", "3", "10-12")),
    "VLLM_SM70_AWQ_MOE_BATCHED_LAYER_DENYLIST": ("5", ("5",)),
    "VLLM_SM70_AWQ_MOE_LEGACY_SINGLE_TOKEN_COMPACT": ("0", False),
    "VLLM_SM70_AWQ_MOE_BATCHED_SINGLE_TOKEN_DENSE_W13": ("1", True),
    "VLLM_SM70_AWQ_MOE_BATCHED_EXACT_W2": ("1", True),
    "VLLM_SM70_AWQ_MOE_BATCHED_ACTIVE_EXACT_W2": ("1", True),
    "VLLM_SM70_AWQ_MOE_BATCHED_DECODE_MAX_TOKENS": ("-3", -3),
    "VLLM_SM70_AWQ_QWEN38_MOE_INDEXED_PREFILL": ("0", False),
    "VLLM_SM70_AWQ_QWEN38_MOE_W2_CHUNK_TOKENS": ("6144", 6144),
    "VLLM_SM70_FP8_TURBOMIND": ("0", False),
    "VLLM_SM70_FP8_DEQUANT_FALLBACK": ("0", False),
    "VLLM_SM70_FP8_QPN8": ("1", True),
    "VLLM_SM70_FP8_QPN8_PP2_TP4": ("1", True),
    "VLLM_SM70_FP8_QPN8_PP2_TP4_SHARED_GATE": ("1", True),
    "VLLM_SM70_FP8_PRESCALED_M1_DECODE": ("0", False),
    "VLLM_SM70_FP8_PRESCALED_M1_SHARED_GATE": ("0", False),
    "VLLM_SM70_FP8_PREFILL_PRESCALED": ("0", False),
    "VLLM_SM70_FP8_PREFILL_EXACT_DENSE": ("0", False),
    "VLLM_SM70_FP8_PREFILL_VISIBLE_DENSE_MM": ("1", True),
    "VLLM_SM70_FP8_DENSE_GATED_SILU": ("0", False),
    "VLLM_SM70_FP8_PREFILL_FAST_SELECTOR": ("0", False),
    "VLLM_SM70_FP8_GROUPED_BMM_DECODE": ("0", False),
    "VLLM_SM70_FP8_MOE_DEQUANT_FALLBACK": ("1", True),
    **{
        variable: ("1", True)
        for name, variable in DFLASH2_FIELDS.items()
        if variable != "VLLM_SM70_FP8_QPN8"
    },
    "VLLM_DISABLED_KERNELS": (
        " TritonW4A16LinearKernel, ,MarlinLinearKernel ",
        ("TritonW4A16LinearKernel", "MarlinLinearKernel"),
    ),
    **{
        variable: ("1", True) if not d else ("0", False)
        for variable, _, d in FLASH_NEXT_FIELDS.values()
    },
    # docs/contracts/attention.md §1.1: one non-default text per parse kind.
    **{variable: _attention_text(kind, d) for variable, kind, d in ATTENTION_FIELDS.values()},
    # docs/contracts/fp8moe.md §1.1: integer booleans (any other integer is true).
    "VLLM_SM70_MOE_SINGLE_TOKEN_COMPACT_W13_FASTPATH": ("2", True),
    "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_STAGE_FASTPATH": ("2", True),
    "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_W13_FASTPATH": ("2", True),
    "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_W2_FASTPATH": ("2", True),
    "VLLM_SM70_MOE_SINGLE_TOKEN_FASTPATH": ("2", True),
    "VLLM_SM70_MOE_SINGLE_TOKEN_UNPERMUTE_FASTPATH": ("0", False),
    "VLLM_SM70_FP8_MOE_SINGLE_TOKEN_INDEXED_W2_FASTPATH": ("0", False),
    "VLLM_SM70_FP8_MOE_BATCHED_GEMM": ("0", False),
    "VLLM_SM70_FP8_MOE_BATCHED_W13_PER_EXPERT_DISPATCH": ("2", True),
    "VLLM_SM70_FP8_MOE_BATCHED_W2_PER_EXPERT_DISPATCH": ("2", True),
    "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT": ("0", False),
    "VLLM_SM70_FP8_MOE_PERMUTE_WITH_SCRATCH": ("0", False),
    "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_EXACT_LAYOUT": ("0", False),
    "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_NATIVE_UNPERMUTE": ("2", True),
    "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_DECOMPOSED": ("2", True),
    "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_COMPARE": ("2", True),
    "VLLM_SM70_FP8_MOE_COMPACT_STRICT_COMPARE_FAIL": ("2", True),
    "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_COMPARE_REPORTS": ("4", 4),
}

# 1.1: the warning text; " for dense linear layers" for the three AWQ dense names.
DEPRECATION_MESSAGES: dict[str, str] = {
    "VLLM_SM70_NVFP4_QPN2": "VLLM_SM70_NVFP4_QPN2 is deprecated; use "
    "kernel_config.sm70_nvfp4.qpn2. Explicit configuration takes "
    "precedence.",
    "VLLM_SM70_NVFP4_QPN2_PREFILL": "VLLM_SM70_NVFP4_QPN2_PREFILL is deprecated; use "
    "kernel_config.sm70_nvfp4.prefill. Explicit configuration "
    "takes precedence.",
    "VLLM_SM70_NVFP4_QPN2_SHARED_WEIGHT": "VLLM_SM70_NVFP4_QPN2_SHARED_WEIGHT is deprecated; "
    "use kernel_config.sm70_nvfp4.shared_weight. "
    "Explicit configuration takes precedence.",
    "VLLM_SM70_NVFP4_QPN2_SHARED_SCALES": "VLLM_SM70_NVFP4_QPN2_SHARED_SCALES is deprecated; "
    "use kernel_config.sm70_nvfp4.shared_scales. "
    "Explicit configuration takes precedence.",
    "VLLM_SM70_NVFP4_QPN2_PREFILL_MIN_M": "VLLM_SM70_NVFP4_QPN2_PREFILL_MIN_M is deprecated; "
    "use kernel_config.sm70_nvfp4.prefill_min_m. "
    "Explicit configuration takes precedence.",
    "VLLM_SM70_AWQ_TURBOMIND": "VLLM_SM70_AWQ_TURBOMIND is deprecated for dense linear "
    "layers; use kernel_config.sm70_awq.enabled. Explicit "
    "configuration takes precedence.",
    "VLLM_SM70_AWQ_PREFILL_EXACT_DENSE": "VLLM_SM70_AWQ_PREFILL_EXACT_DENSE is deprecated for "
    "dense linear layers; use "
    "kernel_config.sm70_awq.prefill_exact_dense. "
    "Explicit configuration takes precedence.",
    "VLLM_SM70_AWQ_MLP_ENGINE": "VLLM_SM70_AWQ_MLP_ENGINE is deprecated for dense linear "
    "layers; use kernel_config.sm70_awq.fused_silu. Explicit "
    "configuration takes precedence.",
    # docs/contracts/fp8.md §1.1: the scope "for serialized FP8 linear layers",
    # docs/contracts/core.md §1.1's ending.
    **{
        name: f"{name} is deprecated for serialized FP8 linear layers; use "
        f"kernel_config.sm70_fp8.{field}. Explicit configuration takes precedence."
        for name, field in (
            ("VLLM_SM70_FP8_TURBOMIND", "enabled"),
            ("VLLM_SM70_FP8_DEQUANT_FALLBACK", "dequant_fallback"),
            ("VLLM_SM70_FP8_QPN8_PP2_TP4", "qpn8_pp2_tp4"),
            ("VLLM_SM70_FP8_QPN8_PP2_TP4_SHARED_GATE", "qpn8_shared_gate"),
            ("VLLM_SM70_FP8_PRESCALED_M1_DECODE", "prescaled_decode"),
            ("VLLM_SM70_FP8_PRESCALED_M1_SHARED_GATE", "prescaled_shared_gate"),
            ("VLLM_SM70_FP8_PREFILL_PRESCALED", "prefill_prescaled"),
            ("VLLM_SM70_FP8_PREFILL_EXACT_DENSE", "prefill_exact_dense"),
            ("VLLM_SM70_FP8_PREFILL_VISIBLE_DENSE_MM", "prefill_visible_dense_mm"),
            ("VLLM_SM70_FP8_DENSE_GATED_SILU", "gated_silu"),
        )
    },
    # Issue 15/16: the shared variable warns once, naming both paths (no scope: the DFlash2
    # path is not an FP8 linear layer).
    "VLLM_SM70_FP8_QPN8": "VLLM_SM70_FP8_QPN8 is deprecated; use "
    "kernel_config.sm70_dflash2.target_fp8_qpn8 or "
    "kernel_config.sm70_fp8.qpn8. Explicit configuration takes "
    "precedence.",
    # Issue 15: the messages name kernel_config.sm70_dflash2.<field>.
    **{
        variable: f"{variable} is deprecated; use kernel_config.sm70_dflash2.{name}. "
        f"Explicit configuration takes precedence."
        for name, variable in DFLASH2_FIELDS.items()
        if variable != "VLLM_SM70_FP8_QPN8"
    },
}

# --- docs/contracts/core.md §2.1: QPN2 (split_k, nacc) by (K, N padded to 32, gated call) ---------
QPN2_TUNING: dict[tuple[int, int, bool], tuple[int, int]] = {
    (1536, 5120, False): (8, 2),
    (5120, 3584, False): (16, 2),
    (5120, 4128, False): (16, 2),
    (5120, 8704, False): (8, 2),
    (5120, 8704, True): (8, 2),
    (4352, 5120, False): (16, 2),
}

# --- selector priority orders (docs/contracts/core.md §2.1, §2.3, §3.1) ---------------------------
NVFP4_SM70_ORDER: list[str] = [
    "Qpn4NvFp4LinearKernel",
    "Qpn2NvFp4LinearKernel",
    "TurboMindNvFp4LinearKernel",
]
AWQ_DENSE_ORDER: list[str] = ["TurboMindAwqLinearKernel", "TritonAwqLinearKernel"]
AWQ_MOE_METHOD_ORDER: list[str] = ["TurboMindAwqMoE", "MoeWNA16"]

# --- docs/contracts/core.md §3.2: Qwen3.8 per layer per rank, bytes -------------------------------
QWEN38_PREPARED_WEIGHT_BYTES = 314_572_800
QWEN38_METADATA_4BYTE = 78_643_200
QWEN38_METADATA_3BYTE = 58_982_400
QWEN38_COMPACT_SAVING_PER_LAYER = 19_660_800
QWEN38_COMPACT_SAVING_48_LAYERS = 943_718_400

# --- docs/contracts/core.md §3.4: active exact W2 admits M * top_k <= 128 -------------------------
ACTIVE_EXACT_W2_MAX_SLOTS = 128
