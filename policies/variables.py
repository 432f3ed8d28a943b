"""The policy's field table: every KernelConfig field, its environment variable, kind,
parser and default, declared once (docs/contracts/core.md §1). This module and the family
field tables it aggregates (`policies/*_variables.py`, one per family that declares its own
fields) are the only modules that spell variable names; messages and prefixes are built from
them.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from policies.flash_next_variables import FLASH_NEXT_FIELDS
from policies.v100_attention_variables import V100_ATTENTION_FIELDS
from routectl.errors import InputError
from routectl.policy.fields import (
    INT,
    INT_BOOL,
    LAYER_LIST,
    NAME_LIST,
    POSITIVE_INT,
    STRICT_01,
    Computed,
    Decided,
    Field,
    Kind,
    RetiredVariable,
    choice_validator,
)

VARIABLE_PREFIX = "VLLM_"
# Names under this prefix that are not in the table are reported as likely typos.
UNKNOWN_PREFIX = VARIABLE_PREFIX + "SM70_"

QUANT_BACKENDS = ("auto", "turbomind", "marlin")
LINEAR_BACKENDS = (
    "auto",
    "turbomind",
    "cutlass",
    "flashinfer_cutlass",
    "flashinfer_trtllm",
    "flashinfer_cudnn",
    "marlin",
    "triton",
    "deep_gemm",
    "torch",
    "aiter",
    "machete",
    "fbgemm",
    "conch",
    "exllama",
    "emulation",
)
W2_CHUNK_TOKENS = (0, 4096, 6144)
# The model-quantization fact of a serialized block-FP8 checkpoint (E4M3, 128 x 128 scales).
BLOCK_FP8 = "fp8_block"


def use_turbomind(switch: bool, values: Mapping[str, Any]) -> bool:
    """The legacy backend override: marlin forces off, turbomind forces on, auto keeps."""
    backend = values["sm70_turbomind.quant_backend"]
    if backend == "marlin":
        return False
    if backend == "turbomind":
        return True
    return bool(switch)


def _effective_turbomind(value: Any, ctx: Mapping[str, Any]) -> bool:
    return use_turbomind(value, ctx["values"])


def _qualified(ctx: Mapping[str, Any]) -> bool:
    return bool(ctx["qualified"])


def _dflash2_qualified(ctx: Mapping[str, Any]) -> bool:
    return bool(ctx["dflash2_qualified"])


def _positive(value: int, where: str) -> int:
    if value <= 0:
        raise InputError(f"invalid value {value!r} for {where}: accepted values are integers > 0")
    return value


def _linear_backend(value: str, where: str) -> str:
    return choice_validator(LINEAR_BACKENDS)(value.strip().lower().replace("-", "_"), where)


def _layer_ids(value: tuple[str, ...], where: str) -> tuple[str, ...]:
    try:
        return LAYER_LIST.parse(",".join(value))
    except ValueError as exc:
        raise InputError(
            f"invalid layer id {exc} in {where}: accepted values are {LAYER_LIST.accepted}"
        ) from None


def known_kernel_names() -> tuple[str, ...]:
    from native.catalogue import KERNEL_NAMES
    from policies.other_kernels import OTHER_KERNEL_NAMES

    return (*KERNEL_NAMES, *OTHER_KERNEL_NAMES)


def _kernel_names(value: tuple[str, ...], where: str) -> tuple[str, ...]:
    known = known_kernel_names()
    for name in value:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.0)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise InputError(f"unknown kernel name {name!r} in {where}{hint}")
    return value


def _inherit_qpn8(value: Any, ctx: Mapping[str, Any]) -> bool | Decided:
    """`sm70_fp8.qpn8_pp2_tp4` left unset (docs/contracts/fp8.md §1.2): a present generic
    variable that resolved qpn8 to false wins (a rollback beats a specific enable, and then the
    source is qpn8's, which decided it); otherwise a present generic variable or a typed
    qpn8 is copied unless the specific variable is present; else the specific variable or
    the default."""
    environ = ctx["environ"]
    qpn8 = bool(ctx["values"]["sm70_fp8.qpn8"])
    generic_present = FP8_QPN8 in environ
    specific_present = _FP8_QPN8_PP2_TP4 in environ
    if generic_present and not qpn8:
        # Only over a present specific variable: an unset one keeps source default.
        return Decided(False, ctx["sources"]["sm70_fp8.qpn8"]) if specific_present else False
    typed_qpn8 = ctx["sources"]["sm70_fp8.qpn8"] == "explicit"
    if (generic_present or typed_qpn8) and not specific_present:
        return qpn8
    return bool(value)


def _verifier_qpn8(ctx: Mapping[str, Any]) -> bool | None:
    """The verifier bridge (issue 16): an unset `sm70_fp8.qpn8` of a block-FP8 model takes
    the resolved `sm70_dflash2.target_fp8_qpn8` when the DFlash2 verifier qualification holds
    or that field is explicit (typed or its variable present); None otherwise."""
    if ctx.get("model_quantization") != BLOCK_FP8:
        return None
    key = "sm70_dflash2.target_fp8_qpn8"
    if ctx["dflash2_qualified"] or ctx["sources"][key] != "default":
        return bool(ctx["values"][key])
    return None


_QUALIFIED = Computed("= workload qualified", _qualified)
# docs/contracts/dflash2.md §1.3: every verifier option is on for the qualified model and workload.
_VERIFIER_QUALIFIED = Computed("= verifier qualified", _dflash2_qualified)
_DFLASH2 = VARIABLE_PREFIX + "SM70_DFLASH2_"
# Shared: the serialized-FP8 policy reads it too (docs/contracts/dflash2.md §1.1). A second field
# that takes it is one more Field entry naming this constant; the warning then names both paths.
FP8_QPN8 = VARIABLE_PREFIX + "SM70_FP8_QPN8"

# (field, variable, doc) in the upstream table order, which is also the edge order.
DFLASH2_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("fused_gdn_verify", _DFLASH2 + "FUSED_GDN_VERIFY", "fused GDN verify (GDN layer guard)"),
    (
        "fused_gdn_combined_split",
        _DFLASH2 + "FUSED_GDN_COMBINED_SPLIT",
        "fused GDN combined split (GDN layer guard, local-layout predicate)",
    ),
    ("context_pipeline", _DFLASH2 + "CONTEXT_PIPELINE", "verifier context pipeline"),
    ("context_kv_graph", _DFLASH2 + "CONTEXT_KV_GRAPH", "context KV graph replay"),
    ("quant_lm_head", _DFLASH2 + "QUANT_LM_HEAD", "quantized LM head"),
    ("fp32_logits", _DFLASH2 + "FP32_LOGITS", "FP32 logits"),
    ("target_fp8_qpn8", FP8_QPN8, "QPN8 for the FP8 target model"),
    ("qpn8_rerank", _DFLASH2 + "QPN8_RERANK", "QPN8 rerank"),
    ("verify_fastpath", _DFLASH2 + "VERIFY_FASTPATH", "verify fast path"),
    ("fused_gdn_metadata", _DFLASH2 + "FUSED_GDN_METADATA", "fused GDN metadata"),
    ("fused_gdn_norm", _DFLASH2 + "FUSED_GDN_NORM", "fused GDN norm (GDN layer guard)"),
    ("fused_gdn_split", _DFLASH2 + "FUSED_GDN_SPLIT", "fused GDN split (GDN layer guard)"),
    ("fused_gemma_rms", _DFLASH2 + "FUSED_GEMMA_RMS", "fused Gemma RMSNorm"),
    (
        "fixed_gemma_rms",
        _DFLASH2 + "FIXED_GEMMA_RMS",
        "fixed Gemma RMSNorm (captured by the layer at construction)",
    ),
    ("fused_smallq_metadata", _DFLASH2 + "FUSED_SMALLQ_METADATA", "fused small-query metadata"),
    (
        "grouped_smallq_metadata",
        _DFLASH2 + "GROUPED_SMALLQ_METADATA",
        "grouped small-query metadata",
    ),
    ("sparse_target_rejection", _DFLASH2 + "SPARSE_TARGET_REJECTION", "sparse target rejection"),
    ("sharded_context_fc", _DFLASH2 + "SHARDED_CONTEXT_FC", "sharded context FC"),
)
_DENSE = " for dense linear layers"
_AWQ_TURBOMIND = VARIABLE_PREFIX + "SM70_AWQ_TURBOMIND"
_FP8 = " for serialized FP8 linear layers"
_FP8_TURBOMIND = VARIABLE_PREFIX + "SM70_FP8_TURBOMIND"
_FP8_QPN8_PP2_TP4 = VARIABLE_PREFIX + "SM70_FP8_QPN8_PP2_TP4"

# --- sm70_fp8_moe (docs/contracts/fp8moe.md §1.1) ------------------------------------------
_FP8_MOE = VARIABLE_PREFIX + "SM70_FP8_MOE_"
_FP8_MOE_LEGACY = _FP8_MOE + "LEGACY_SINGLE_TOKEN_COMPACT"
# Shared upstream by the AWQ and FP8 methods; routectl's sm70_awq_moe does not read them
# (docs/contracts/fp8moe.md §1.4). One variable per input field: the field table ties a
# variable to one field, so the inputs of the three single-token plan fields are fields of
# their own section, never hashed and read only by those fields' computed defaults.
_MOE_ST = VARIABLE_PREFIX + "SM70_MOE_SINGLE_TOKEN_"
ST_INPUTS = "sm70_moe_single_token"
ST_W13_MODES = ("compact", "indexed", "dense")
ST_W2_MODES = ("indexed", "dense")
ST_REDUCE_MODES = ("weighted", "unpermute")


def _st(ctx: Mapping[str, Any], name: str) -> bool:
    return bool(ctx["values"][f"{ST_INPUTS}.{name}"])


def _st_w13(ctx: Mapping[str, Any]) -> tuple[str, ...]:
    modes = ["compact"] if _st(ctx, "compact_w13") else []
    if _st(ctx, "indexed_stage") or _st(ctx, "indexed_w13"):
        modes.append("indexed")
    return (*modes, "dense")


def _st_w2(ctx: Mapping[str, Any]) -> str:
    asked = ("fp8_indexed_w2", "indexed_stage", "indexed_w2")
    return "indexed" if any(_st(ctx, name) for name in asked) else "dense"


def _st_reduce(ctx: Mapping[str, Any]) -> str:
    return "weighted" if _st(ctx, "fastpath") or _st(ctx, "unpermute") else "unpermute"


def _st_w13_modes(value: Any, where: str) -> tuple[str, ...]:
    """Non-empty, no duplicates, known modes; reordered compact, indexed, dense."""
    items = tuple(value)
    if not items or len(set(items)) != len(items):
        raise InputError(f"{where} must be nonempty and have no duplicates")
    for item in items:
        if item not in ST_W13_MODES:
            raise InputError(
                f"invalid value {item!r} in {where}: accepted values are " + ", ".join(ST_W13_MODES)
            )
    return tuple(m for m in ST_W13_MODES if m in items)


def _st_input(name: str, suffix: str, default: bool, doc: str, prefix: str = _MOE_ST) -> Field:
    return Field(
        section=ST_INPUTS,
        name=name,
        type=bool,
        default=default,
        variable=prefix + suffix,
        kind=Kind.CURRENT,
        parser=INT_BOOL,
        doc=doc,
    )


def _fp8_moe(name: str, suffix: str, default: Any, doc: str, parser: Any = INT_BOOL) -> Field:
    return Field(
        section="sm70_fp8_moe",
        name=name,
        type=int if parser is INT else bool,
        default=default,
        variable=_FP8_MOE + suffix,
        kind=Kind.CURRENT,
        parser=parser,
        doc=doc,
    )


FP8_MOE_FIELDS: tuple[Field, ...] = (
    _st_input("compact_w13", "COMPACT_W13_FASTPATH", False, "single-token W13 compact input"),
    _st_input("indexed_stage", "INDEXED_STAGE_FASTPATH", False, "single-token indexed stages"),
    _st_input("indexed_w13", "INDEXED_W13_FASTPATH", False, "single-token indexed W13 input"),
    _st_input("indexed_w2", "INDEXED_W2_FASTPATH", False, "single-token indexed W2 input"),
    _st_input("fastpath", "FASTPATH", False, "single-token weighted reduce input"),
    _st_input("unpermute", "UNPERMUTE_FASTPATH", True, "single-token weighted reduce input"),
    _st_input(
        "fp8_indexed_w2",
        "SINGLE_TOKEN_INDEXED_W2_FASTPATH",
        True,
        "FP8-only alias of the indexed W2 input (makes FP8 default indexed)",
        prefix=_FP8_MOE,
    ),
    _fp8_moe("batched", "BATCHED_GEMM", True, "batched GEMMs (false: decomposed M = 1 lane)"),
    _fp8_moe(
        "w13_per_expert",
        "BATCHED_W13_PER_EXPERT_DISPATCH",
        False,
        "batched W13 through the per-expert dispatch entry",
    ),
    _fp8_moe(
        "w2_per_expert",
        "BATCHED_W2_PER_EXPERT_DISPATCH",
        False,
        "batched W2 through the per-expert dispatch entry",
    ),
    _fp8_moe("legacy_compact", "LEGACY_SINGLE_TOKEN_COMPACT", True, "M = 1 monolithic op"),
    _fp8_moe("permute_scratch", "PERMUTE_WITH_SCRATCH", True, "caller-owned sort scratch"),
    _fp8_moe(
        "compact_exact_layout",
        "LEGACY_SINGLE_TOKEN_COMPACT_EXACT_LAYOUT",
        True,
        "monolithic op: exact per-route layout",
    ),
    _fp8_moe(
        "compact_native_unpermute",
        "LEGACY_SINGLE_TOKEN_COMPACT_NATIVE_UNPERMUTE",
        False,
        "monolithic op followed by moe_unpermute",
    ),
    _fp8_moe(
        "compact_decomposed",
        "LEGACY_SINGLE_TOKEN_COMPACT_DECOMPOSED",
        False,
        "M = 1 batched lane: exact-layout prepare, batched GEMMs, unpermute",
    ),
    Field(
        section="sm70_fp8_moe",
        name="single_token_w13",
        type=list[str],
        default=Computed("from the VLLM_SM70_MOE_SINGLE_TOKEN_* inputs", _st_w13),
        doc="single-token W13 modes (compact, indexed, dense), not batched only",
        validate=_st_w13_modes,
    ),
    Field(
        section="sm70_fp8_moe",
        name="single_token_w2",
        type=str,
        default=Computed("from the indexed W2 inputs", _st_w2),
        doc="single-token W2 mode, not batched only",
        validate=choice_validator(ST_W2_MODES),
    ),
    Field(
        section="sm70_fp8_moe",
        name="single_token_reduce",
        type=str,
        default=Computed("from the single-token reduce inputs", _st_reduce),
        doc="single-token reduction, not batched only",
        validate=choice_validator(ST_REDUCE_MODES),
    ),
    # Diagnostics: never a route, never hashed.
    _fp8_moe(
        "compact_compare",
        "LEGACY_SINGLE_TOKEN_COMPACT_COMPARE",
        False,
        "diagnostic: compare the monolithic op with a reference (never a route)",
    ),
    _fp8_moe(
        "compact_compare_reports",
        "LEGACY_SINGLE_TOKEN_COMPACT_COMPARE_REPORTS",
        16,
        "diagnostic: compare reports kept",
        parser=INT,
    ),
    _fp8_moe(
        "strict_compare_fail",
        "COMPACT_STRICT_COMPARE_FAIL",
        False,
        "diagnostic: does nothing (upstream logs once)",
    ),
)

FIELDS: tuple[Field, ...] = (
    # Provider switches first: the other sections' effective values read quant_backend.
    Field(
        section="sm70_turbomind",
        name="quant_backend",
        type=str,
        default="auto",
        variable=VARIABLE_PREFIX + "SM70_QUANT_BACKEND",
        kind=Kind.LEGACY,
        choices=QUANT_BACKENDS,
        doc="legacy quantization backend override",
    ),
    Field(
        section="sm70_turbomind",
        name="nvfp4",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_NVFP4_TURBOMIND",
        kind=Kind.LEGACY,
        parser=INT_BOOL,
        doc="TurboMind provider for NVFP4 linears",
    ),
    Field(
        section="sm70_turbomind",
        name="awq_moe",
        type=bool,
        default=True,
        variable=_AWQ_TURBOMIND,
        kind=Kind.LEGACY,
        parser=INT_BOOL,
        doc="TurboMind provider for the AWQ MoE method",
    ),
    Field(
        section="sm70_turbomind",
        name="batch_layouts",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_BATCH_GEMM_LAYOUTS",
        kind=Kind.LEGACY,
        parser=INT_BOOL,
        doc="batch GEMM layouts (effective only on exactly SM70)",
    ),
    Field(
        section="sm70_nvfp4",
        name="qpn2",
        type=bool,
        default=_QUALIFIED,
        variable=VARIABLE_PREFIX + "SM70_NVFP4_QPN2",
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="QPN2 small-M kernels",
    ),
    Field(
        section="sm70_nvfp4",
        name="prefill",
        type=bool,
        default=_QUALIFIED,
        variable=VARIABLE_PREFIX + "SM70_NVFP4_QPN2_PREFILL",
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="bounded QPN2 prefill dispatcher",
    ),
    Field(
        section="sm70_nvfp4",
        name="shared_weight",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_NVFP4_QPN2_SHARED_WEIGHT",
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="share packed codes with TurboMind",
    ),
    Field(
        section="sm70_nvfp4",
        name="shared_scales",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_NVFP4_QPN2_SHARED_SCALES",
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="permission to use compact scales",
    ),
    Field(
        section="sm70_nvfp4",
        name="prefill_min_m",
        type=int,
        default=1024,
        variable=VARIABLE_PREFIX + "SM70_NVFP4_QPN2_PREFILL_MIN_M",
        kind=Kind.DEPRECATED,
        parser=POSITIVE_INT,
        doc="token count from which QPN2 prefill dequantizes into dense scratch",
        validate=_positive,
    ),
    Field(
        section="sm70_nvfp4",
        name="qpn4",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_NVFP4_QPN4",
        kind=Kind.LEGACY,
        parser=INT_BOOL,
        doc="QPN4 for the qualified single-sequence workload",
    ),
    Field(
        section="sm70_nvfp4",
        name="dense_gated_silu",
        type=bool,
        default=False,
        variable=VARIABLE_PREFIX + "SM70_NVFP4_DENSE_GATED_SILU",
        kind=Kind.LEGACY,
        parser=INT_BOOL,
        doc="QPN4 fused gate/up with SiLU",
    ),
    Field(
        section="sm70_nvfp4", name="dense_qpn2", type=bool, default=True, doc="Turing dense QPN2"
    ),
    Field(
        section="sm70_awq",
        name="enabled",
        type=bool,
        default=True,
        variable=_AWQ_TURBOMIND,
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="TurboMind AWQ dense linears",
        effective=_effective_turbomind,
        deprecation_scope=_DENSE,
    ),
    Field(
        section="sm70_awq",
        name="prefill_exact_dense",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_AWQ_PREFILL_EXACT_DENSE",
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="exact dense prefill at M = 4096",
        deprecation_scope=_DENSE,
    ),
    Field(
        section="sm70_awq",
        name="fused_silu",
        type=bool,
        default=False,
        variable=VARIABLE_PREFIX + "SM70_AWQ_MLP_ENGINE",
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="fused SiLU epilogue (experimental)",
        deprecation_scope=_DENSE,
    ),
    Field(
        section="sm70_awq_moe",
        name="disable",
        type=bool,
        default=False,
        variable=VARIABLE_PREFIX + "SM70_AWQ_MOE_DISABLE",
        kind=Kind.LEGACY,
        parser=INT_BOOL,
        doc="use MoeWNA16 instead of the TurboMind AWQ MoE method",
    ),
    Field(
        section="sm70_awq_moe",
        name="qpn_m1",
        type=bool,
        default=False,
        variable=VARIABLE_PREFIX + "SM70_AWQ_QWEN38_QPN_M1",
        kind=Kind.CURRENT,
        parser=STRICT_01,
        doc="QPN M1 operator for single-token decode (opt-in)",
    ),
    Field(
        section="sm70_awq_moe",
        name="active_grouped_decode",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_AWQ_QWEN38_MOE_COMPACT_GROUPED_DECODE",
        kind=Kind.CURRENT,
        parser=INT_BOOL,
        doc="grouped decode for 2..8 tokens (also read by native code)",
        native_read=True,
    ),
    Field(
        section="sm70_awq_moe",
        name="compact_metadata",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_AWQ_MOE_COMPACT_METADATA",
        kind=Kind.CURRENT,
        parser=INT_BOOL,
        doc="3-byte metadata records",
    ),
    Field(
        section="sm70_awq_moe",
        name="tune_small_shapes",
        type=bool,
        default=False,
        variable=VARIABLE_PREFIX + "SM70_AWQ_TUNE_SMALL_SHAPES",
        kind=Kind.CURRENT,
        parser=INT_BOOL,
        doc="native tactic tuning (numerics only, never a route change)",
    ),
    Field(
        section="sm70_awq_moe",
        name="batched",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_AWQ_MOE_BATCHED_GEMM",
        kind=Kind.CURRENT,
        parser=INT_BOOL,
        doc="batched per-expert GEMM",
    ),
    Field(
        section="sm70_awq_moe",
        name="layer_allowlist",
        type=list[str],
        default=(),
        variable=VARIABLE_PREFIX + "SM70_AWQ_MOE_BATCHED_LAYER_ALLOWLIST",
        kind=Kind.CURRENT,
        parser=LAYER_LIST,
        doc="layers allowed to use batched GEMM (empty = all)",
        validate=_layer_ids,
    ),
    Field(
        section="sm70_awq_moe",
        name="layer_denylist",
        type=list[str],
        default=(),
        variable=VARIABLE_PREFIX + "SM70_AWQ_MOE_BATCHED_LAYER_DENYLIST",
        kind=Kind.CURRENT,
        parser=LAYER_LIST,
        doc="layers denied batched GEMM",
        validate=_layer_ids,
    ),
    Field(
        section="sm70_awq_moe",
        name="legacy_compact",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_AWQ_MOE_LEGACY_SINGLE_TOKEN_COMPACT",
        kind=Kind.CURRENT,
        parser=INT_BOOL,
        doc="M = 1 legacy lane",
    ),
    Field(
        section="sm70_awq_moe",
        name="strict_w13",
        type=bool,
        default=False,
        variable=VARIABLE_PREFIX + "SM70_AWQ_MOE_BATCHED_SINGLE_TOKEN_DENSE_W13",
        kind=Kind.CURRENT,
        parser=INT_BOOL,
        doc="strict dense W13",
    ),
    Field(
        section="sm70_awq_moe",
        name="exact_w2",
        type=bool,
        default=False,
        variable=VARIABLE_PREFIX + "SM70_AWQ_MOE_BATCHED_EXACT_W2",
        kind=Kind.CURRENT,
        parser=INT_BOOL,
        doc="exact dense W2",
    ),
    Field(
        section="sm70_awq_moe",
        name="active_exact_w2",
        type=bool,
        default=False,
        variable=VARIABLE_PREFIX + "SM70_AWQ_MOE_BATCHED_ACTIVE_EXACT_W2",
        kind=Kind.CURRENT,
        parser=INT_BOOL,
        doc="active exact W2 (also read by native code)",
        native_read=True,
    ),
    Field(
        section="sm70_awq_moe",
        name="max_batched_tokens",
        type=int,
        default=0,
        variable=VARIABLE_PREFIX + "SM70_AWQ_MOE_BATCHED_DECODE_MAX_TOKENS",
        kind=Kind.CURRENT,
        parser=INT,
        doc="batched decode token cap (<= 0 = unbounded)",
    ),
    Field(
        section="sm70_awq_moe",
        name="indexed_prefill",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_AWQ_QWEN38_MOE_INDEXED_PREFILL",
        kind=Kind.CURRENT,
        parser=INT_BOOL,
        doc="indexed W13 prefill for M >= 128",
    ),
    Field(
        section="sm70_awq_moe",
        name="w2_chunk_tokens",
        type=int,
        default=0,
        variable=VARIABLE_PREFIX + "SM70_AWQ_QWEN38_MOE_W2_CHUNK_TOKENS",
        kind=Kind.CURRENT,
        choices=W2_CHUNK_TOKENS,
        doc="chunked W2 token count",
    ),
    # Before sm70_fp8: its qpn8 takes the verifier's resolved target_fp8_qpn8 (the bridge).
    *(
        Field(
            section="sm70_dflash2",
            name=name,
            type=bool,
            default=_VERIFIER_QUALIFIED,
            variable=variable,
            kind=Kind.DEPRECATED,
            parser=INT_BOOL,
            doc=doc,
        )
        for name, variable, doc in DFLASH2_OPTIONS
    ),
    # One object for the Turing per-tensor and the Volta block-FP8 families
    # (docs/contracts/fp8.md §1).
    Field(
        section="sm70_fp8",
        name="enabled",
        type=bool,
        default=True,
        variable=_FP8_TURBOMIND,
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="TurboMind FP8 linears (Volta block FP8, Turing QPN8)",
        effective=_effective_turbomind,
        deprecation_scope=_FP8,
    ),
    Field(
        section="sm70_fp8",
        name="dequant_fallback",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_FP8_DEQUANT_FALLBACK",
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="dequantize to FP16 at load when the TurboMind route is off",
        deprecation_scope=_FP8,
    ),
    Field(
        section="sm70_fp8",
        name="qpn8",
        type=bool,
        default=False,
        variable=FP8_QPN8,
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="generic QPN8 layout",
        deprecation_scope=_FP8,
        bridge=_verifier_qpn8,
    ),
    Field(
        section="sm70_fp8",
        name="qpn8_pp2_tp4",
        type=bool,
        default=False,
        variable=VARIABLE_PREFIX + "SM70_FP8_QPN8_PP2_TP4",
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="PP2 x TP4 QPN8 layers (unset: inherits qpn8)",
        effective=_inherit_qpn8,
        deprecation_scope=_FP8,
    ),
    Field(
        section="sm70_fp8",
        name="qpn8_shared_gate",
        type=bool,
        default=False,
        variable=VARIABLE_PREFIX + "SM70_FP8_QPN8_PP2_TP4_SHARED_GATE",
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="PP2 x TP4 QPN8 shared-expert gate/up",
        deprecation_scope=_FP8,
    ),
    Field(
        section="sm70_fp8",
        name="prescaled_decode",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_FP8_PRESCALED_M1_DECODE",
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="prescaled M = 1 decode on UE8M0 scales",
        deprecation_scope=_FP8,
    ),
    Field(
        section="sm70_fp8",
        name="prescaled_shared_gate",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_FP8_PRESCALED_M1_SHARED_GATE",
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="prescaled M = 1 decode of the shared-expert gate/up",
        deprecation_scope=_FP8,
    ),
    Field(
        section="sm70_fp8",
        name="prefill_prescaled",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_FP8_PREFILL_PRESCALED",
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="prescaled prefill at M = 8000",
        deprecation_scope=_FP8,
    ),
    Field(
        section="sm70_fp8",
        name="prefill_exact_dense",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_FP8_PREFILL_EXACT_DENSE",
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="exact-dense prefill dispatcher",
        deprecation_scope=_FP8,
    ),
    Field(
        section="sm70_fp8",
        name="prefill_visible_dense_mm",
        type=bool,
        default=False,
        variable=VARIABLE_PREFIX + "SM70_FP8_PREFILL_VISIBLE_DENSE_MM",
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="visible dense MM prefill (diagnostic)",
        deprecation_scope=_FP8,
    ),
    Field(
        section="sm70_fp8",
        name="gated_silu",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_FP8_DENSE_GATED_SILU",
        kind=Kind.DEPRECATED,
        parser=INT_BOOL,
        doc="interleaved gate/up layout with fused SiLU",
        deprecation_scope=_FP8,
    ),
    Field(
        section="sm70_fp8",
        name="prefill_fast_selector",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_FP8_PREFILL_FAST_SELECTOR",
        kind=Kind.LEGACY,
        parser=INT_BOOL,
        doc="prefill fast selector (also read by native code)",
        native_read=True,
    ),
    Field(
        section="sm70_fp8",
        name="grouped_bmm_decode",
        type=bool,
        default=True,
        variable=VARIABLE_PREFIX + "SM70_FP8_GROUPED_BMM_DECODE",
        kind=Kind.LEGACY,
        parser=INT_BOOL,
        doc="grouped BMM decode lane (also read by native code)",
        native_read=True,
    ),
    Field(
        section="sm70_fp8",
        name="moe_dequant_fallback",
        type=bool,
        default=False,
        variable=VARIABLE_PREFIX + "SM70_FP8_MOE_DEQUANT_FALLBACK",
        kind=Kind.LEGACY,
        parser=INT_BOOL,
        doc="FP8 MoE dequantize fallback (read by the FP8 MoE method, never a linear route)",
    ),
    *FP8_MOE_FIELDS,
    Field(
        section="sm70_fp8",
        name="block_qpn8",
        type=bool,
        default=False,
        doc="QPN8Fp8BlockScaledMMLinearKernel (routectl default False; later upstream True)",
    ),
    Field(
        section="sm70_fp8",
        name="block_qpn8_volta_turbomind_prefill",
        type=bool,
        default=None,
        doc="QPN8 block kernel's TurboMind copy for M > 8 on Volta (unset: auto)",
    ),
    Field(
        section=None,
        name="disabled_kernels",
        type=list[str],
        default=(),
        variable=VARIABLE_PREFIX + "DISABLED_KERNELS",
        kind=Kind.LEGACY,
        parser=NAME_LIST,
        doc="kernel class names never selected",
        merge=True,
        validate=_kernel_names,
    ),
    Field(
        section=None,
        name="linear_backend",
        type=str,
        default="auto",
        doc="engine linear backend",
        validate=_linear_backend,
    ),
    # The families that declare their own field tables, one module each (the table is still
    # this one list: parsing, the typo check and KernelConfig read it).
    *FLASH_NEXT_FIELDS,
    *V100_ATTENTION_FIELDS,
)

# Names without a field (docs/contracts/dflash2.md §1.4): known, so never reported as unknown.
RETIRED: tuple[RetiredVariable, ...] = (
    RetiredVariable(
        _DFLASH2 + "QPN8_DENSE_ORDER", Kind.OBSOLETE, "dense tie ordering is mandatory"
    ),
    RetiredVariable(
        _DFLASH2 + "QPN8_ALLOW_CANDIDATE_ORDER",
        Kind.REMOVED,
        "the candidate-order experiment is retired (dense tie ordering is mandatory)",
    ),
)

SECTIONS: tuple[str, ...] = tuple(dict.fromkeys(f.section for f in FIELDS if f.section))


def field(key: str) -> Field:
    for f in FIELDS:
        if f.key == key:
            return f
    raise KeyError(key)


def env_var(key: str) -> str:
    """The environment variable that sets field `key` (the categories' probes name fields by
    key); a field without one is a mistake in the caller."""
    variable = field(key).variable
    assert variable is not None, key
    return variable


def default_description(f: Field) -> str:
    text = f.default_text()
    return f"use_turbomind({text})" if f.effective is _effective_turbomind else text
