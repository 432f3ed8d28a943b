"""The policy's field table: every KernelConfig field, its environment variable, kind,
parser and default, declared once (CONTRACTS section 1). This is the only module that spells
variable names; messages and prefixes are built from it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from routectl.errors import InputError
from routectl.fields import (
    INT,
    INT_BOOL,
    LAYER_LIST,
    NAME_LIST,
    POSITIVE_INT,
    STRICT_01,
    Computed,
    Field,
    Kind,
    choice_parser,
)

VARIABLE_PREFIX = "VLLM_"
# Names under this prefix that are not in the table are reported as likely typos.
UNKNOWN_PREFIX = VARIABLE_PREFIX + "SM70_"

QUANT_BACKENDS = ("auto", "turbomind", "marlin")
LINEAR_BACKENDS = (
    "auto", "turbomind", "cutlass", "flashinfer_cutlass", "flashinfer_trtllm", "flashinfer_cudnn",
    "marlin", "triton", "deep_gemm", "torch", "aiter", "machete", "fbgemm", "conch", "exllama",
    "emulation",
)
W2_CHUNK_TOKENS = (0, 4096, 6144)


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


def _in(choices: tuple[Any, ...]) -> Callable[[Any, str], Any]:
    def check(value: Any, where: str) -> Any:
        if value not in choices:
            raise InputError(f"invalid value {value!r} for {where}: accepted values are "
                             + ", ".join(str(c) for c in choices))
        return value
    return check


def _positive(value: int, where: str) -> int:
    if value <= 0:
        raise InputError(f"invalid value {value!r} for {where}: accepted values are integers > 0")
    return value


def _linear_backend(value: str, where: str) -> str:
    return _in(LINEAR_BACKENDS)(value.strip().lower().replace("-", "_"), where)


def _layer_ids(value: tuple[str, ...], where: str) -> tuple[str, ...]:
    try:
        return LAYER_LIST.parse(",".join(value))
    except ValueError as exc:
        raise InputError(f"invalid layer id {exc} in {where}: accepted values are "
                         f"{LAYER_LIST.accepted}") from None


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


_QUALIFIED = Computed("= workload qualified", _qualified)
_DENSE = " for dense linear layers"
_AWQ_TURBOMIND = VARIABLE_PREFIX + "SM70_AWQ_TURBOMIND"

FIELDS: tuple[Field, ...] = (
    # Provider switches first: the other sections' effective values read quant_backend.
    Field("sm70_turbomind", "quant_backend", str, "auto", VARIABLE_PREFIX + "SM70_QUANT_BACKEND",
          Kind.LEGACY, choice_parser(*QUANT_BACKENDS), "legacy quantization backend override",
          validate=_in(QUANT_BACKENDS)),
    Field("sm70_turbomind", "nvfp4", bool, True, VARIABLE_PREFIX + "SM70_NVFP4_TURBOMIND",
          Kind.LEGACY, INT_BOOL, "TurboMind provider for NVFP4 linears"),
    Field("sm70_turbomind", "awq_moe", bool, True, _AWQ_TURBOMIND, Kind.LEGACY, INT_BOOL,
          "TurboMind provider for the AWQ MoE method"),
    Field("sm70_turbomind", "batch_layouts", bool, True,
          VARIABLE_PREFIX + "SM70_BATCH_GEMM_LAYOUTS", Kind.LEGACY, INT_BOOL,
          "batch GEMM layouts (effective only on exactly SM70)"),

    Field("sm70_nvfp4", "qpn2", bool, _QUALIFIED, VARIABLE_PREFIX + "SM70_NVFP4_QPN2",
          Kind.DEPRECATED, INT_BOOL, "QPN2 small-M kernels"),
    Field("sm70_nvfp4", "prefill", bool, _QUALIFIED, VARIABLE_PREFIX + "SM70_NVFP4_QPN2_PREFILL",
          Kind.DEPRECATED, INT_BOOL, "bounded QPN2 prefill dispatcher"),
    Field("sm70_nvfp4", "shared_weight", bool, True,
          VARIABLE_PREFIX + "SM70_NVFP4_QPN2_SHARED_WEIGHT", Kind.DEPRECATED, INT_BOOL,
          "share packed codes with TurboMind"),
    Field("sm70_nvfp4", "shared_scales", bool, True,
          VARIABLE_PREFIX + "SM70_NVFP4_QPN2_SHARED_SCALES", Kind.DEPRECATED, INT_BOOL,
          "permission to use compact scales"),
    Field("sm70_nvfp4", "prefill_min_m", int, 1024,
          VARIABLE_PREFIX + "SM70_NVFP4_QPN2_PREFILL_MIN_M", Kind.DEPRECATED, POSITIVE_INT,
          "token count from which QPN2 prefill dequantizes into dense scratch",
          validate=_positive),
    Field("sm70_nvfp4", "qpn4", bool, True, VARIABLE_PREFIX + "SM70_NVFP4_QPN4", Kind.LEGACY,
          INT_BOOL, "QPN4 for the qualified single-sequence workload"),
    Field("sm70_nvfp4", "dense_gated_silu", bool, False,
          VARIABLE_PREFIX + "SM70_NVFP4_DENSE_GATED_SILU", Kind.LEGACY, INT_BOOL,
          "QPN4 fused gate/up with SiLU"),
    Field("sm70_nvfp4", "dense_qpn2", bool, True, doc="Turing dense QPN2"),

    Field("sm70_awq", "enabled", bool, True, _AWQ_TURBOMIND, Kind.DEPRECATED, INT_BOOL,
          "TurboMind AWQ dense linears", effective=_effective_turbomind,
          deprecation_scope=_DENSE),
    Field("sm70_awq", "prefill_exact_dense", bool, True,
          VARIABLE_PREFIX + "SM70_AWQ_PREFILL_EXACT_DENSE", Kind.DEPRECATED, INT_BOOL,
          "exact dense prefill at M = 4096", deprecation_scope=_DENSE),
    Field("sm70_awq", "fused_silu", bool, False, VARIABLE_PREFIX + "SM70_AWQ_MLP_ENGINE",
          Kind.DEPRECATED, INT_BOOL, "fused SiLU epilogue (experimental)",
          deprecation_scope=_DENSE),

    Field("sm70_awq_moe", "disable", bool, False, VARIABLE_PREFIX + "SM70_AWQ_MOE_DISABLE",
          Kind.LEGACY, INT_BOOL, "use MoeWNA16 instead of the TurboMind AWQ MoE method"),
    Field("sm70_awq_moe", "qpn_m1", bool, False, VARIABLE_PREFIX + "SM70_AWQ_QWEN38_QPN_M1",
          Kind.CURRENT, STRICT_01, "QPN M1 operator for single-token decode (opt-in)"),
    Field("sm70_awq_moe", "active_grouped_decode", bool, True,
          VARIABLE_PREFIX + "SM70_AWQ_QWEN38_MOE_COMPACT_GROUPED_DECODE", Kind.CURRENT, INT_BOOL,
          "grouped decode for 2..8 tokens (also read by native code)", native_read=True),
    Field("sm70_awq_moe", "compact_metadata", bool, True,
          VARIABLE_PREFIX + "SM70_AWQ_MOE_COMPACT_METADATA", Kind.CURRENT, INT_BOOL,
          "3-byte metadata records"),
    Field("sm70_awq_moe", "tune_small_shapes", bool, False,
          VARIABLE_PREFIX + "SM70_AWQ_TUNE_SMALL_SHAPES", Kind.CURRENT, INT_BOOL,
          "native tactic tuning (numerics only, never a route change)"),
    Field("sm70_awq_moe", "batched", bool, True, VARIABLE_PREFIX + "SM70_AWQ_MOE_BATCHED_GEMM",
          Kind.CURRENT, INT_BOOL, "batched per-expert GEMM"),
    Field("sm70_awq_moe", "layer_allowlist", list[str], (),
          VARIABLE_PREFIX + "SM70_AWQ_MOE_BATCHED_LAYER_ALLOWLIST", Kind.CURRENT, LAYER_LIST,
          "layers allowed to use batched GEMM (empty = all)", validate=_layer_ids),
    Field("sm70_awq_moe", "layer_denylist", list[str], (),
          VARIABLE_PREFIX + "SM70_AWQ_MOE_BATCHED_LAYER_DENYLIST", Kind.CURRENT, LAYER_LIST,
          "layers denied batched GEMM", validate=_layer_ids),
    Field("sm70_awq_moe", "legacy_compact", bool, True,
          VARIABLE_PREFIX + "SM70_AWQ_MOE_LEGACY_SINGLE_TOKEN_COMPACT", Kind.CURRENT, INT_BOOL,
          "M = 1 legacy lane"),
    Field("sm70_awq_moe", "strict_w13", bool, False,
          VARIABLE_PREFIX + "SM70_AWQ_MOE_BATCHED_SINGLE_TOKEN_DENSE_W13", Kind.CURRENT,
          INT_BOOL, "strict dense W13"),
    Field("sm70_awq_moe", "exact_w2", bool, False,
          VARIABLE_PREFIX + "SM70_AWQ_MOE_BATCHED_EXACT_W2", Kind.CURRENT, INT_BOOL,
          "exact dense W2"),
    Field("sm70_awq_moe", "active_exact_w2", bool, False,
          VARIABLE_PREFIX + "SM70_AWQ_MOE_BATCHED_ACTIVE_EXACT_W2", Kind.CURRENT, INT_BOOL,
          "active exact W2 (also read by native code)", native_read=True),
    Field("sm70_awq_moe", "max_batched_tokens", int, 0,
          VARIABLE_PREFIX + "SM70_AWQ_MOE_BATCHED_DECODE_MAX_TOKENS", Kind.CURRENT, INT,
          "batched decode token cap (<= 0 = unbounded)"),
    Field("sm70_awq_moe", "indexed_prefill", bool, True,
          VARIABLE_PREFIX + "SM70_AWQ_QWEN38_MOE_INDEXED_PREFILL", Kind.CURRENT, INT_BOOL,
          "indexed W13 prefill for M >= 128"),
    Field("sm70_awq_moe", "w2_chunk_tokens", int, 0,
          VARIABLE_PREFIX + "SM70_AWQ_QWEN38_MOE_W2_CHUNK_TOKENS", Kind.CURRENT,
          choice_parser(*W2_CHUNK_TOKENS), "chunked W2 token count", validate=_in(W2_CHUNK_TOKENS)),

    Field("sm70_fp8", "enabled", bool, True, VARIABLE_PREFIX + "SM70_FP8_TURBOMIND", Kind.LEGACY,
          INT_BOOL, "Turing QPN8 FP8 linears", effective=_effective_turbomind),

    Field(None, "disabled_kernels", list[str], (), VARIABLE_PREFIX + "DISABLED_KERNELS",
          Kind.LEGACY, NAME_LIST, "kernel class names never selected", merge=True,
          validate=_kernel_names),
    Field(None, "linear_backend", str, "auto", doc="engine linear backend",
          validate=_linear_backend),
)

SECTIONS: tuple[str, ...] = tuple(dict.fromkeys(f.section for f in FIELDS if f.section))


def field(key: str) -> Field:
    for f in FIELDS:
        if f.key == key:
            return f
    raise KeyError(key)


def default_description(f: Field) -> str:
    text = f.default_text()
    return f"use_turbomind({text})" if f.effective is _effective_turbomind else text
