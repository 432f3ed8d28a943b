"""The `v100_attention` section's field table (docs/contracts/attention.md §1.2-1.3): every
construction-time and per-call variable of the FLASH_ATTN_V100 backend with its parse kind
(§1.1) and default, resolved once per engine (the issue's decision: the captured era's
semantics), plus the one config-only field, `sm70_decode_strategy` (§1.2).

Parse kinds: `eq1` (on only for "1"), `ne0` (on unless "0"), `registered` (the typed getter:
an integer, `bool(int(raw))` for switches), `int`, `threshold` (an integer clamped to >= 1)
and `partition` (one of 256, 512, 1024; unset is automatic). A value the kind refuses is an
input error at resolution (one line, exit 2); `eq1` and `ne0` accept any text.

`policies/variables.py` aggregates this table into the project's one variable table; like
that module, this one may spell variable names (tests/test_source_rules.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routectl.errors import InputError
from routectl.policy.fields import INT, INT_BOOL, Field, Kind, Parser

SECTION = "v100_attention"
_V100 = "VLLM_FLASH_V100_"


def _eq1(text: str) -> bool:
    return text == "1"


def _ne0(text: str) -> bool:
    return text != "0"


def _threshold(text: str) -> int:
    return max(1, int(text.strip()))


PARTITION_SIZES = (256, 512, 1024)


def _partition(text: str) -> int:
    value = int(text.strip())
    if value not in PARTITION_SIZES:
        raise ValueError(text)
    return value


def _text(text: str) -> str:
    return text


# §1.1: the message cores of the threshold and partition kinds are the upstream ones.
EQ1 = Parser("eq1", 'any text ("1" = on, anything else = off)', _eq1)
NE0 = Parser("ne0", 'any text ("0" = off, anything else = on)', _ne0)
THRESHOLD = Parser("threshold", "integers (must be an integer; clamped to >= 1)", _threshold)
PARTITION = Parser("partition", "256, 512 or 1024 (must be one of (256, 512, 1024))", _partition)
TEXT = Parser("text", "any text", _text)


def _at_least_one(value: Any, where: str) -> Any:
    # [A21]: the grouped verifier's minimum model length below 1 raises upstream.
    if value < 1:
        raise InputError(f"invalid value {value!r} for {where}: accepted values are integers >= 1")
    return value


# The partition size's value when unset: automatic (256, or 1024 from a 32768 hint).
AUTOMATIC_PARTITION = 0


def _partition_value(value: Any, where: str) -> Any:
    if value != AUTOMATIC_PARTITION and value not in PARTITION_SIZES:
        raise InputError(
            f"invalid value {value!r} for {where}: accepted values are 0 (automatic), "
            "256, 512, 1024"
        )
    return value


def _strategy(value: Any, where: str) -> Any:
    if value not in ("shared", "legacy"):
        raise InputError(f"invalid value {value!r} for {where}: accepted values are shared, legacy")
    return value


# (field, variable suffix or full name, parser, type, default, doc) in the contract's order.
_Row = tuple[str, str, Parser, Any, Any, str]
_CONSTRUCTION: tuple[_Row, ...] = (
    ("enable_paged_prefill", "ENABLE_PAGED_PREFILL", NE0, bool, True, "paged prefill"),
    ("disable_paged_prefill", "DISABLE_PAGED_PREFILL", EQ1, bool, False, "no paged prefill"),
    ("fp8_prefill_bridge", "FP8_PREFILL_BRIDGE", NE0, bool, True, "FP8 prefix bridge"),
    ("prefill_split_kv", "PREFILL_SPLIT_KV", INT_BOOL, bool, False, "split-KV prefix prefill"),
    ("prefill_split_kv_tokens", "PREFILL_SPLIT_KV_TOKENS", INT, int, 32768, "split-KV size"),
    ("prefill_split_kv_min_q", "PREFILL_SPLIT_KV_MIN_Q", INT, int, 1, "split-KV minimum q"),
    ("prefill_split_kv_max_q", "PREFILL_SPLIT_KV_MAX_Q", INT, int, 2048, "<= 0 unbounded"),
    ("prefill_split_kv_min_kv", "PREFILL_SPLIT_KV_MIN_KV", INT, int, 32768, "split-KV min KV"),
    ("bfla_prefill", "BFLA_PREFILL", INT_BOOL, bool, False, "BFLA sparse prefix prefill"),
    ("bfla_min_q", "BFLA_MIN_Q", INT, int, 4096, "BFLA minimum q"),
    ("bfla_min_kv", "BFLA_MIN_KV", INT, int, 32768, "BFLA minimum KV"),
    ("bfla_mask_block_n", "BFLA_MASK_BLOCK_N", INT, int, 256, "BFLA block; <= 0 refuses"),
    ("prefill_contig_dense", "PREFILL_CONTIG_DENSE", INT_BOOL, bool, True, "contiguous dense"),
    ("prefill_contig_dense_min_q", "PREFILL_CONTIG_DENSE_MIN_Q", INT, int, 1536, "its min q"),
    ("prefill_contig_dense_min_kv", "PREFILL_CONTIG_DENSE_MIN_KV", INT, int, 8192, "its min KV"),
    (
        "prefill_contig_dense_allow_copy",
        "PREFILL_CONTIG_DENSE_ALLOW_COPY",
        INT_BOOL,
        bool,
        False,
        "contiguous BHMD copy",
    ),
    ("prefill_gather_dense", "PREFILL_GATHER_DENSE", INT_BOOL, bool, True, "gather Split-D"),
    ("prefill_gather_dense_min_q", "PREFILL_GATHER_DENSE_MIN_Q", INT, int, 4096, "its min q"),
    ("prefill_gather_dense_min_kv", "PREFILL_GATHER_DENSE_MIN_KV", INT, int, 8192, "its min KV"),
    ("prefill_use_paged_cache", "PREFILL_USE_PAGED_CACHE", EQ1, bool, False, "no-prefix paged"),
    ("prefill_use_triton", "PREFILL_USE_TRITON", NE0, bool, False, "all prefill to Triton"),
    ("allow_triton_fallback", "ALLOW_TRITON_FALLBACK", EQ1, bool, False, "refusals to Triton"),
    ("smallq_decode_max_q", "SMALLQ_DECODE_MAX_Q", INT, int, 16, "verifier cap; 0 disables"),
    (
        "smallq_decode_max_model_len",
        "SMALLQ_DECODE_MAX_MODEL_LEN",
        INT,
        int,
        0,
        "verifier model-length cap; <= 0 none",
    ),
    ("decode_dense_reference", "DECODE_DENSE_REFERENCE", EQ1, bool, False, "diagnostic decode"),
    ("decode_dense_cache", "DECODE_DENSE_CACHE", EQ1, bool, False, "diagnostic decode"),
    ("decode_use_paged_prefill", "DECODE_USE_PAGED_PREFILL", EQ1, bool, False, "diagnostic"),
    ("decode_use_bhmd_out", "DECODE_USE_BHMD_OUT", NE0, bool, True, "paged_bhmd variant"),
    ("decode_use_wmma_wrapper", "DECODE_USE_WMMA_WRAPPER", EQ1, bool, False, "wmma variant"),
    ("decode_use_xqa", "DECODE_USE_XQA", EQ1, bool, True, "XQA decode"),
    ("smallq_decode_use_xqa", "SMALLQ_DECODE_USE_XQA", EQ1, bool, True, "verify XQA"),
    ("decode_use_scalar_paged", "DECODE_USE_SCALAR_PAGED", NE0, bool, True, "scalar decode"),
    ("e4m3_grouped_fp32", "E4M3_GROUPED_FP32", INT_BOOL, bool, True, "E4M3 grouped op"),
    ("dflash2_grouped_verify", "DFLASH2_GROUPED_VERIFY", INT_BOOL, bool, True, "grouped verify"),
    (
        "dflash2_batched_grouped_verify",
        "DFLASH2_BATCHED_GROUPED_VERIFY",
        INT_BOOL,
        bool,
        False,
        "batched grouped verify",
    ),
    (
        "dflash2_grouped_verify_min_model_len",
        "DFLASH2_GROUPED_VERIFY_MIN_MODEL_LEN",
        INT,
        int,
        32768,
        "grouped verify minimum model length (>= 1)",
    ),
    ("compare_bhmd_out_dir", "COMPARE_BHMD_OUT_DIR", TEXT, str, "", "diagnostics only"),
    ("compare_bhmd_out_max_calls", "COMPARE_BHMD_OUT_MAX_CALLS", INT, int, 0, "diagnostics"),
    ("compare_triton_out_dir", "COMPARE_TRITON_OUT_DIR", TEXT, str, "", "diagnostics only"),
    ("compare_triton_out_max_calls", "COMPARE_TRITON_OUT_MAX_CALLS", INT, int, 0, "diagnostics"),
    (
        "compare_triton_tensor_dump_dir",
        "COMPARE_TRITON_TENSOR_DUMP_DIR",
        TEXT,
        str,
        "",
        "diagnostics only",
    ),
    (
        "compare_triton_tensor_dump_max_tokens",
        "COMPARE_TRITON_TENSOR_DUMP_MAX_TOKENS",
        INT,
        int,
        64,
        "diagnostics only",
    ),
)
# §1.3: read on every call in the env era; resolved once here like the rest.
_PER_CALL: tuple[_Row, ...] = (
    ("fa2_d256_prefill", "FA2_D256_PREFILL", INT_BOOL, bool, True, "Split-D D256"),
    ("prefill_d256_gqa_v37", "PREFILL_D256_GQA_V37", INT_BOOL, bool, False, "v37 family"),
    (
        "prefill_d256_gqa_arch_128k_experimental",
        "PREFILL_D256_GQA_ARCH_128K_EXPERIMENTAL",
        INT_BOOL,
        bool,
        True,
        "architecture-op admission",
    ),
    ("prefill_dense_splitkv3", "PREFILL_DENSE_SPLITKV3", INT_BOOL, bool, True, "split-KV3"),
    (
        "prefill_dense_splitkv3_min_kv",
        "PREFILL_DENSE_SPLITKV3_MIN_KV",
        INT,
        int,
        32768,
        "split-KV3 minimum KV",
    ),
    (
        "prefill_dense_splitkv3_q8000_experimental",
        "PREFILL_DENSE_SPLITKV3_Q8000_EXPERIMENTAL",
        INT_BOOL,
        bool,
        False,
        "split-KV3 at Q8000",
    ),
    (
        "prefill_prefix_decode_rows",
        "PREFILL_PREFIX_DECODE_ROWS",
        INT_BOOL,
        bool,
        True,
        "mixed-batch decode rows (the typed list's default)",
    ),
    ("e4m3_batch_xqa", "E4M3_BATCH_XQA", INT_BOOL, bool, True, "E4M3 XQA for rows > 1"),
    (
        "smallq_decode_xqa_min_seq_len",
        "SMALLQ_DECODE_XQA_MIN_SEQ_LEN",
        INT,
        int,
        4096,
        "verify XQA minimum",
    ),
    (
        "decode_xqa_q4_min_seq_len",
        "DECODE_XQA_Q4_MIN_SEQ_LEN",
        THRESHOLD,
        int,
        32768,
        "GQA4 XQA minimum",
    ),
    (
        "decode_fp8_xqa_min_seq_len",
        "DECODE_FP8_XQA_MIN_SEQ_LEN",
        THRESHOLD,
        int,
        16384,
        "E5M2 XQA minimum",
    ),
    (
        "decode_partition_size",
        "DECODE_PARTITION_SIZE",
        PARTITION,
        int,
        0,
        "partition size (0: automatic); set, it also removes the G6 hint and grouped FP32",
    ),
    ("xqa_g6_p1024_sawtooth", "XQA_G6_P1024_SAWTOOTH", NE0, bool, True, "G6 partition hint"),
    (
        "xqa_e4m3_g6_p64_p256_auto",
        "XQA_E4M3_G6_P64_P256_AUTO",
        NE0,
        bool,
        True,
        "which G6 family counter",
    ),
    (
        "decode_dynamic_partitions",
        "DECODE_DYNAMIC_PARTITIONS",
        NE0,
        bool,
        True,
        "metadata builder",
    ),
    ("prefill_chunk_profile", "PREFILL_CHUNK_PROFILE", INT_BOOL, bool, False, "logs only"),
    ("debug_prefill_compare", "DEBUG_PREFILL_COMPARE", EQ1, bool, False, "logs only"),
    ("trace_decode_active", "TRACE_DECODE_ACTIVE", INT_BOOL, bool, False, "logs only"),
    ("route_summary", "ROUTE_SUMMARY", EQ1, bool, False, "route counters (§4.7)"),
    ("debug_route_summary", "DEBUG_ROUTE_SUMMARY", EQ1, bool, False, "route counters (§4.7)"),
    (
        "sm70_debug",
        "VLLM_SM70_DEBUG",
        TEXT,
        str,
        "",
        "route counters when it contains `routing` (§4.7)",
    ),
    (
        "ddtree_triton_branch_attn",
        "VLLM_DFLASH_DDTREE_TRITON_BRANCH_ATTN",
        INT_BOOL,
        bool,
        True,
        "DDTree Triton branch verifier",
    ),
    (
        "ddtree_triton_branch_attn_strict",
        "VLLM_DFLASH_DDTREE_TRITON_BRANCH_ATTN_STRICT",
        INT_BOOL,
        bool,
        False,
        "DDTree strict: a Triton failure raises",
    ),
    (
        "enabled",
        "VLLM_SM70_FLASH_ATTN_V100",
        INT_BOOL,
        bool,
        True,
        "the backend's master alias",
    ),
)


def _variable(suffix: str) -> str:
    return suffix if suffix.startswith("VLLM_") else _V100 + suffix


def _field(row: _Row) -> Field:
    name, suffix, parser, kind_type, default, doc = row
    validate = {
        "dflash2_grouped_verify_min_model_len": _at_least_one,
        "decode_partition_size": _partition_value,
    }.get(name)
    return Field(
        section=SECTION,
        name=name,
        type=kind_type,
        default=default,
        variable=_variable(suffix),
        kind=Kind.CURRENT,
        parser=parser,
        doc=f"{doc} ({parser.name})",
        validate=validate,
    )


V100_ATTENTION_FIELDS: tuple[Field, ...] = (
    *(_field(row) for row in (*_CONSTRUCTION, *_PER_CALL)),
    # §1.2: a KernelConfig field of the engine, not a variable.
    Field(
        section=SECTION,
        name="sm70_decode_strategy",
        type=str,
        default="shared",
        doc="requested decode strategy (shared | legacy); E4M3 resolves it against XQA",
        validate=_strategy,
    ),
)
FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in V100_ATTENTION_FIELDS)
VARIABLES: Mapping[str, str] = {
    f.name: f.variable for f in V100_ATTENTION_FIELDS if f.variable is not None
}
PARSE_KINDS: Mapping[str, str] = {
    f.name: f.parser.name for f in V100_ATTENTION_FIELDS if f.parser is not None
}

__all__ = [
    "AUTOMATIC_PARTITION",
    "FIELD_NAMES",
    "PARSE_KINDS",
    "PARTITION_SIZES",
    "SECTION",
    "V100_ATTENTION_FIELDS",
    "VARIABLES",
]
