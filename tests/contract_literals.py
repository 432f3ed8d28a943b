"""The contract's facts as literals, copied from the contracts in docs/contracts/ (file and section
cited on each).

Tests compare the implementation with these values, never with the implementation's own
tables: a changed table entry, kind or order must make a test fail. The tables below hold the
literals of the families written here before each family had its own expectations module;
every family module in tests/families/ adds its own to the table of the same name (the merge
at the end of this file), so a new family writes its names in its own module and edits
nothing here. A family's own literal (say `FLASH_NEXT_CONTROLS`) is also importable from this
module by its name.
"""

from __future__ import annotations

from typing import Any

from tests import families

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
)


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
    "disabled_kernels": ("VLLM_DISABLED_KERNELS", "legacy"),
    "linear_backend": (None, "config"),
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
    "disabled_kernels": (),
    "linear_backend": "auto",
}


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


# --- every family's own literals (tests/families/) -----------------------------------------


def _merged(base: dict[Any, Any], attribute: str) -> dict[Any, Any]:
    # A key both here and in a family module would be two statements of one fact.
    own = families.table(attribute)
    both = sorted(set(base) & set(own))
    if both:
        raise ValueError(f"{attribute}: {both} stated here and in a family module")
    return {**base, **own}


DEPRECATED_VARIABLES = DEPRECATED_VARIABLES | families.names("DEPRECATED_VARIABLES")
LEGACY_VARIABLES = LEGACY_VARIABLES | families.names("LEGACY_VARIABLES")
CURRENT_VARIABLES = CURRENT_VARIABLES | families.names("CURRENT_VARIABLES")
OBSOLETE_VARIABLES = OBSOLETE_VARIABLES | families.names("OBSOLETE_VARIABLES")
REMOVED_VARIABLES = REMOVED_VARIABLES | families.names("REMOVED_VARIABLES")
FIELD_VARIABLES = _merged(FIELD_VARIABLES, "FIELD_VARIABLES")
QUALIFIED_DEFAULTS = _merged(QUALIFIED_DEFAULTS, "QUALIFIED_DEFAULTS")
NON_DEFAULT_TEXT = _merged(NON_DEFAULT_TEXT, "NON_DEFAULT_TEXT")
DEPRECATION_MESSAGES = _merged(DEPRECATION_MESSAGES, "DEPRECATION_MESSAGES")
# The resolution-context entries the family records add (the qualified workload, no facts).
CONTEXT: dict[str, object] = families.table("CONTEXT")


def __getattr__(name: str) -> Any:
    """A family's own literal by its name (`from tests.contract_literals import X`), where
    exactly one family module states it."""
    owners = [value for _, value in families.stated(name)] if name.isupper() else []
    if len(owners) == 1:
        return owners[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
