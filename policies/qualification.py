"""Model qualification (docs/contracts/core.md §4, docs/contracts/dflash2.md §1.5): whole-model
quality boundaries, not operator capability. Pure functions of the hardware, the engine
configuration (with its model facts) and the layer description, returning Checks whose reasons name
the rule and the offending value.
"""

from __future__ import annotations

from native.layers import Nvfp4Layer
from routectl.reasons import OK, Check, reject
from routectl.workload import EngineConfig, Hardware

# 4.1: the retained DFlash2 workload (TP, KV dtype and concurrency are deliberately absent).
NVFP4_SPEC_METHOD = "dflash"
NVFP4_SPEC_TOKENS = 7
NVFP4_SELECTOR_TOP_K = 16

QPN2_ROLES = ("in_proj_qkvz", "qkv_proj", "out_proj", "o_proj", "gate_up_proj", "down_proj")
AWQ_EXACT_DENSE_ROLES = ("gate_up_proj", "down_proj", "in_proj_qkvz", "out_proj", "o_proj")

# docs/contracts/dflash2.md §1.5: the verifier's model (TP, KV dtype, quantization and concurrency
# are deliberately absent). (fact, required value, code, label) in check order.
DFLASH2_CAPABILITY = 70
DFLASH2_ARCHITECTURE = "Qwen3_5ForConditionalGeneration"
DFLASH2_DTYPE = "float16"
DFLASH2_DIMENSIONS: tuple[tuple[str, int, str, str], ...] = (
    ("hidden_size", 5120, "hidden_size_not_5120", "hidden size"),
    ("num_attention_heads", 24, "attention_heads_not_24", "attention heads"),
    ("num_key_value_heads", 4, "kv_heads_not_4", "KV heads"),
    ("head_dim", 256, "head_dim_not_256", "head dim"),
)

# The SM70 FP8 PP2 x TP4 runtime contract: (PP, TP).
FP8_PP2_TP4 = (2, 4)

QPN4_DOWN_N = 5120
QPN4_GATE_UP_K = 5120

# The reason codes each rule can return, declared once (`routectl coverage` declares a site
# for each; tests/test_coverage.py holds every code a rule returns to its tuple).
NVFP4_WORKLOAD_CODES = (
    "spec_method_not_dflash",
    "spec_tokens_not_7",
    "selector_top_k_not_16",
    "pp_not_1",
    "dbo_enabled",
    "ubatch_above_1",
)
DFLASH2_VERIFIER_CODES = (
    "capability_not_70",
    "architecture_not_qwen3_5",
    "dtype_not_float16",
    *(code for _, _, code, _ in DFLASH2_DIMENSIONS),
    *NVFP4_WORKLOAD_CODES,
)
QPN2_ROLE_CODES = ("qpn2_role_unqualified",)
QPN4_WORKLOAD_CODES = ("qpn4_concurrency", "qpn4_speculation")
QPN4_LAYER_CODES = (
    "qpn4_down_k",
    "qpn4_down_n",
    "qpn4_gate_up_needs_dense_gated_silu",
    "qpn4_gate_up_k",
    "qpn4_gate_up_n",
    "qpn4_gate_up_widths",
    "qpn4_role_unqualified",
)
AWQ_EXACT_DENSE_ROLE_CODES = ("exact_dense_role_unqualified",)
FP8_PP2_TP4_CODES = (
    "fp8_pp_not_2",
    "fp8_tp_not_4",
    "fp8_pp2_tp4_concurrency",
    "fp8_pp2_tp4_dbo",
    "fp8_pp2_tp4_ubatch",
    "fp8_pp2_tp4_speculation",
)


def nvfp4_workload_qualified(engine: EngineConfig) -> Check:
    """DFlash with 7 speculative tokens and selector top-k 16, PP 1, no DBO, ubatch <= 1."""
    if engine.spec_method != NVFP4_SPEC_METHOD:
        return reject(
            "spec_method_not_dflash", f"speculative method is {engine.spec_method}, not dflash"
        )
    if engine.spec_tokens != NVFP4_SPEC_TOKENS:
        return reject(
            "spec_tokens_not_7", f"{engine.spec_tokens} speculative tokens, not {NVFP4_SPEC_TOKENS}"
        )
    if engine.selector_top_k != NVFP4_SELECTOR_TOP_K:
        return reject(
            "selector_top_k_not_16",
            f"draft selector_top_k is {engine.selector_top_k}, not {NVFP4_SELECTOR_TOP_K}",
        )
    if engine.pp != 1:
        return reject("pp_not_1", f"pipeline parallel size is {engine.pp}, not 1")
    if engine.dbo:
        return reject("dbo_enabled", "dual batch overlap is enabled")
    if engine.ubatch > 1:
        return reject("ubatch_above_1", f"ubatch size is {engine.ubatch}, above 1")
    return OK


def dflash2_verifier_qualified(hardware: Hardware, engine: EngineConfig) -> Check:
    """The DFlash2 verifier contract: capability exactly 70, the Qwen3.5 27B model facts
    (architecture, float16, 5120 hidden, 24/4 heads, head dim 256), then the NVFP4 workload
    rule. An unknown fact fails its rule."""
    if hardware.capability != DFLASH2_CAPABILITY:
        return reject(
            "capability_not_70",
            f"capability {hardware.capability} is not exactly "
            f"{DFLASH2_CAPABILITY} (the verifier is qualified on Volta V100 only)",
        )
    model = engine.model
    if model is None or DFLASH2_ARCHITECTURE not in model.architectures:
        shown = ", ".join(model.architectures) if model and model.architectures else "unknown"
        return reject(
            "architecture_not_qwen3_5",
            f"model architectures ({shown}) do not include {DFLASH2_ARCHITECTURE}",
        )
    if model.dtype != DFLASH2_DTYPE:
        return reject(
            "dtype_not_float16", f"model dtype is {model.dtype or 'unknown'}, not {DFLASH2_DTYPE}"
        )
    for fact, wanted, code, label in DFLASH2_DIMENSIONS:
        value = getattr(model, fact)
        if value != wanted:
            shown = "unknown" if value is None else str(value)
            return reject(code, f"model {label} is {shown}, not {wanted}")
    return nvfp4_workload_qualified(engine)


def qpn2_role_qualified(role: str) -> Check:
    if role in QPN2_ROLES:
        return OK
    return reject(
        "qpn2_role_unqualified", f"projection role not yet quality-qualified for QPN2 (role {role})"
    )


def qpn4_workload_qualified(engine: EngineConfig) -> Check:
    """The QPN4 C1/no-speculation limit: max_num_seqs == 1 and no speculation."""
    if engine.max_num_seqs != 1:
        return reject(
            "qpn4_concurrency", f"QPN4 needs max_num_seqs == 1 (max_num_seqs={engine.max_num_seqs})"
        )
    if engine.spec_method != "none":
        return reject(
            "qpn4_speculation",
            f"QPN4 needs no speculation (speculative method {engine.spec_method})",
        )
    return OK


def qpn4_layer_qualified(layer: Nvfp4Layer, dense_gated_silu: bool) -> Check:
    """down_proj: K > 0, K % 128 == 0, N == 5120; gate_up_proj (only with dense_gated_silu):
    K == 5120, N > 0, N % 64 == 0, logical widths [N/2, N/2]."""
    k, n = layer.input_size, layer.output_size
    if layer.role == "down_proj":
        if k <= 0 or k % 128:
            return reject("qpn4_down_k", f"QPN4 down_proj needs K > 0 and K % 128 == 0 (K={k})")
        if n != QPN4_DOWN_N:
            return reject("qpn4_down_n", f"QPN4 down_proj needs N == {QPN4_DOWN_N} (N={n})")
        return OK
    if layer.role == "gate_up_proj":
        if not dense_gated_silu:
            return reject(
                "qpn4_gate_up_needs_dense_gated_silu", "QPN4 gate_up_proj needs dense_gated_silu"
            )
        if k != QPN4_GATE_UP_K:
            return reject(
                "qpn4_gate_up_k", f"QPN4 gate_up_proj needs K == {QPN4_GATE_UP_K} (K={k})"
            )
        if n <= 0 or n % 64:
            return reject(
                "qpn4_gate_up_n", f"QPN4 gate_up_proj needs N > 0 and N % 64 == 0 (N={n})"
            )
        widths = tuple(layer.logical_widths)
        if widths != (n // 2, n // 2):
            return reject(
                "qpn4_gate_up_widths",
                f"QPN4 gate_up_proj needs logical widths [N/2, N/2] (widths {list(widths)}, N={n})",
            )
        return OK
    return reject(
        "qpn4_role_unqualified",
        f"QPN4 qualifies only down_proj and gate_up_proj (role {layer.role})",
    )


def awq_exact_dense_role_qualified(role: str) -> Check:
    if role in AWQ_EXACT_DENSE_ROLES:
        return OK
    return reject(
        "exact_dense_role_unqualified", f"role {role} is not qualified for AWQ exact-dense prefill"
    )


def fp8_pp2_tp4_contract(engine: EngineConfig) -> Check:
    """The SM70 FP8 PP2 x TP4 runtime contract (docs/contracts/fp8.md §3.3): PP 2, TP 4, one
    sequence, no DBO, ubatch <= 1, no speculation. Also gates prescaled decode (3.6)."""
    if engine.pp != FP8_PP2_TP4[0]:
        return reject("fp8_pp_not_2", f"PP2 x TP4 needs pipeline parallel size 2 (PP={engine.pp})")
    if engine.tp != FP8_PP2_TP4[1]:
        return reject("fp8_tp_not_4", f"PP2 x TP4 needs tensor parallel size 4 (TP={engine.tp})")
    if engine.max_num_seqs != 1:
        return reject(
            "fp8_pp2_tp4_concurrency",
            f"PP2 x TP4 needs max_num_seqs == 1 (max_num_seqs={engine.max_num_seqs})",
        )
    if engine.dbo:
        return reject("fp8_pp2_tp4_dbo", "PP2 x TP4 needs dual batch overlap off")
    if engine.ubatch > 1:
        return reject("fp8_pp2_tp4_ubatch", f"PP2 x TP4 needs ubatch <= 1 (ubatch={engine.ubatch})")
    if engine.spec_method != "none":
        return reject(
            "fp8_pp2_tp4_speculation",
            f"PP2 x TP4 needs no speculation (speculative method {engine.spec_method})",
        )
    return OK


def qualification_verdicts(hardware: Hardware, engine: EngineConfig) -> list[tuple[str, Check]]:
    """The whole-model rules an engine configuration decides (per-layer role and dimension
    rules apply at selection and are not listed here)."""
    return [
        ("nvfp4_workload", nvfp4_workload_qualified(engine)),
        ("qpn4_workload", qpn4_workload_qualified(engine)),
        ("dflash2_verifier", dflash2_verifier_qualified(hardware, engine)),
        ("fp8_pp2_tp4", fp8_pp2_tp4_contract(engine)),
    ]
