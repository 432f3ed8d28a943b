"""The V100 attention family's literal test expectations (`sm70-attention`), written from
docs/contracts/attention.md; the shared tests merge them with every other family's
(tests/families/__init__.py). The family's own reference literals are in
tests/attention_literals.py."""

from __future__ import annotations

from collections.abc import Sequence

from policies.variables import FIELDS
from tests.wiring import Case, c

FAMILY = "sm70-attention"

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


def _attention_text(kind: str, default: object) -> tuple[str, object]:
    if kind in ("eq1", "ne0", "int_bool"):
        return ("0", False) if default else ("1", True)
    if kind == "partition":
        return ("512", 512)
    if kind == "text":
        return ("routing", "routing")
    return ("5", 5)  # int and threshold


# docs/contracts/attention.md §1: every FLASH_ATTN_V100 variable is a current switch.
CURRENT_VARIABLES: frozenset[str] = ATTENTION_VARIABLES

FIELD_VARIABLES: dict[str, tuple[str | None, str]] = {
    **{
        f"v100_attention.{name}": (variable, "current")
        for name, (variable, _, _) in ATTENTION_FIELDS.items()
    },
    "v100_attention.sm70_decode_strategy": (None, "config"),
}
QUALIFIED_DEFAULTS: dict[str, object] = {
    **{f"v100_attention.{name}": d for name, (_, _, d) in ATTENTION_FIELDS.items()},
    "v100_attention.sm70_decode_strategy": "shared",
}
# docs/contracts/attention.md §1.1: one non-default text per parse kind.
NON_DEFAULT_TEXT: dict[str, tuple[str, object]] = {
    variable: _attention_text(kind, d) for variable, kind, d in ATTENTION_FIELDS.values()
}

# The policy section its contract names.
SECTIONS: frozenset[str] = frozenset({"v100_attention"})

# The invariances its category's rows declare, written from the policy code as
# (dimensions, fields under `route`; None: the whole route) (tests/test_invariances.py).
INVARIANCES: dict[str, Sequence[tuple[tuple[str, ...], tuple[str, ...] | None]]] = {
    # The attention rows' kv, spec and the other slots are the trace's case keys: every one
    # of them moves some route, so the category declares no invariance.
    "sm70-attention": [],
}

# Its category's own route shape: (the route schema definition, a key only that shape has)
# (tests/test_route_schemas.py).
ROUTE_SHAPES: dict[str, tuple[str, str]] = {"sm70-attention": ("v100_attention_route", "forwards")}

# The sections its own field table declares (the record's `fields`).
OWN_SECTIONS: frozenset[str] = frozenset({"v100_attention"})


def _attention_value(name: str, default: object) -> object:
    """A valid non-default value of an attention variable."""
    if name == "decode_partition_size":
        return 512  # one of 256, 512, 1024 (0: automatic)
    if name == "sm70_decode_strategy":
        return "legacy"
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 1
    return "/tmp/routectl-wiring"  # the free-text diagnostics (dump folders, debug names)


# One wiring case per field of its section (tests/test_wiring_fields.py): read by the
# attention routing only (its category's rows prove each switch's routes); here, that no
# kernel option of another family moves.
WIRING_CASES: tuple[Case, ...] = tuple(
    c(f.key, _attention_value(f.name, f.default)) for f in FIELDS if f.section == "v100_attention"
)

# What its category's cells show in `routectl matrix` (tests/test_matrix.py).
MATRIX_SHOWS: dict[str, str] = {"sm70-attention": "routes"}

# capability -> the sections (or `section.field` entries) its record hashes there for every
# engine, in its record's order (tests/test_dflash2_policy.py composes the hashed list).
# Issue 35: the attention section, hashed on capability 70 for every engine.
ALWAYS_HASHED: dict[int, tuple[str, ...]] = {70: ("v100_attention",)}

# Its test files whose names do not start with a module stem of its own (tests/test_doorway.py).
OWN_FILES: tuple[str, ...] = (
    "tests/attention_literals.py",
    "tests/test_attention_contract_literals.py",
    "tests/test_row_id_grammar.py",
    "tests/test_mut_kernels_attention_rest.py",
    "tests/test_mut_v100_attention_survivors.py",
    "tests/fixtures/reference/attention/flash_v100_trace_cases.jsonl",
    "tests/fixtures/reference/attention/sm70_kv_path_matrix.json",
)
