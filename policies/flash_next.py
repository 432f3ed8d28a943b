"""The Flash-Next qualified batch routes on SM70 (docs/contracts/flashnext.md §2): the decode
contract, the batch qualifications, and the loader's admissions for the FP16 projections of
one `model.layers.0.` layer (out_proj, the GDN input pair, the HC module), with the dense
and packed-GDN dispatch admissions per token count (§4). Preparation and the batch calls
themselves run in `native.kernels.flash_next_sm70`, driven by the category.

Pure: every decision reads the resolved `sm70_flash_next` section, the hardware, the engine
(its model, parallelism, speculation and precision facts) and the layer description. `Rules`
holds the one rule the contract's history changed (which speculation is batch-qualified), so
that a test can evaluate the historical settings of §6.4.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from native.kernels.flash_next_sm70 import GDN_PAD_ROWS
from policies.flash_next_variables import (
    BASE_LANE_KEY,
    BATCH_INVARIANT_VARIABLE,
    QUALIFIED_KEY,
    SECTION,
    VARIABLES,
)
from routectl.errors import SelectionError
from routectl.policy.fields import INT_BOOL
from routectl.policy.resolve import ResolvedPolicy
from routectl.reasons import OK, Check, reject
from routectl.workload import EngineConfig, Hardware

CAPABILITY = 70
CAUSAL_LM = "Qwen4ExpForCausalLM"
CONDITIONAL_GENERATION = "Qwen4ExpForConditionalGeneration"
FP16 = "float16"
UNQUANTIZED = "unquantized"
SM70_FP16 = "sm70_fp16"
HC_TP = 4

# §2.4-3 / §2.7: the exact TP4 local shapes (N, K) the batch routes need.
QKVZ_TP4 = (4096, 2560)
BA_TP4 = (24, 2560)
OUT_PROJ_TP4 = (2560, 1536)
DENSE_LIMIT = 8  # out_proj at exactly OUT_PROJ_TP4 (§2.4-4)
# §2.7: the HC pack per target layer, 2 x (96 x 10240 + 2560 x 320) fp16 values.
HC_PACK_BYTES = 2 * (96 * 10240 + 2560 * 320) * 2
# §4: the token counts the dense dispatch is asked about.
DENSE_M = (1, 2, 4, 5, 8, 10, 16, 8192)
REDUCED_PRECISION_MIN_M = 8
# §4 "other M windows": the packed GDN input serves M in 2..16 (no reduced-precision rule).
GDN_BATCH_M = (2, 16)

ROUTE_FIELDS = (
    "decode_contract",
    "batch_qualified",
    "mtp_batch",
    "dense_batch_prepared",
    "dense_limit",
    "fused_input",
    "gdn_packed",
    "fused_hc",
    "hc_packed",
    "hc_fp32_partials",
    "reassociated_down",
    "rmsnorm_gated_exact",
)


@dataclass(frozen=True)
class Rules:
    """The rules that changed with upstream's default flip (§2.2): the speculative methods
    that are batch-qualified."""

    batch_spec_methods: tuple[str, ...] = ("none", "mtp")


SHIPPED = Rules()


def decode_contract(engine: EngineConfig) -> Check:
    """§2.1: a Qwen4Exp causal LM (or the conditional-generation architecture with
    `language_model_only` true) in float16; an unknown model fails."""
    model = engine.model
    if model is None:
        return reject("model_unknown", "the served model's config is unknown")
    if CAUSAL_LM not in model.architectures:
        if CONDITIONAL_GENERATION not in model.architectures:
            return reject(
                "architecture_not_qwen4exp",
                f"architectures {list(model.architectures)} name neither {CAUSAL_LM} nor "
                f"{CONDITIONAL_GENERATION}",
            )
        if model.language_model_only is not True:
            return reject(
                "language_model_only_not_true",
                f"{CONDITIONAL_GENERATION} with language_model_only {model.language_model_only}",
            )
    if model.dtype != FP16:
        return reject("dtype_not_float16", f"model dtype is {model.dtype}, not {FP16}")
    return OK


def speculation_qualified(engine: EngineConfig, rules: Rules = SHIPPED) -> Check:
    """§2.2 `sm70_flash_next_batch_qualified`: no speculation or MTP (any token count)."""
    if engine.spec_method in rules.batch_spec_methods:
        return OK
    return reject(
        "speculation_not_batch_qualified",
        f"speculative method {engine.spec_method} is not one of "
        f"{', '.join(rules.batch_spec_methods)}",
    )


def flash_next_qualified(engine: EngineConfig, rules: Rules = SHIPPED) -> bool:
    """§2.3 `qualified`: the decode contract and batch-qualified speculation (the RMSNorm
    default; no capability, batch-invariance or ubatching term)."""
    return decode_contract(engine)[0] and speculation_qualified(engine, rules)[0]


def base_lane_default(hardware: Hardware, engine: EngineConfig) -> bool:
    """§2.5 without its compile-graph precondition (a routectl decision): capability 70 and
    the decode contract."""
    return hardware.capability == CAPABILITY and decode_contract(engine)[0]


def flash_next_context(hardware: Hardware, engine: EngineConfig) -> dict[str, bool]:
    """The family's resolution context: what the computed defaults of §2.3 and §2.5 read."""
    return {
        QUALIFIED_KEY: flash_next_qualified(engine),
        BASE_LANE_KEY: base_lane_default(hardware, engine),
    }


def flash_next_verdicts(hardware: Hardware, engine: EngineConfig) -> list[tuple[str, Check]]:
    """The family's qualification verdicts for `routectl config`: the decode contract and
    the two batch contracts (§2.1, §2.2)."""
    return [
        ("flash_next_decode_contract", decode_contract(engine)),
        ("flash_next_batch", batch_qualified(engine)),
        ("flash_next_mtp_batch", mtp_batch(engine)),
    ]


def _runtime(engine: EngineConfig, speculation: Check) -> Check:
    contract = decode_contract(engine)
    if not contract[0]:
        return contract
    if engine.batch_invariant:
        return reject("batch_invariant", "the engine is batch-invariant")
    if not speculation[0]:
        return speculation
    if engine.dbo or engine.ubatch > 1:
        return reject(
            "ubatching", f"ubatching is on (dbo {engine.dbo}, ubatch size {engine.ubatch})"
        )
    return OK


def batch_qualified(engine: EngineConfig, rules: Rules = SHIPPED) -> Check:
    """§2.2 `_batch_runtime_contract` (capability is no part of it)."""
    return _runtime(engine, speculation_qualified(engine, rules))


def mtp_batch(engine: EngineConfig) -> Check:
    """§2.2 `_mtp_batch_runtime_contract`."""
    spec = (
        OK
        if engine.spec_method == "mtp"
        else reject("spec_not_mtp", f"speculative method {engine.spec_method} is not mtp")
    )
    return _runtime(engine, spec)


def flash_next_hashed(engine: EngineConfig, policy: ResolvedPolicy) -> bool:
    """The section's hash rule (docs/contracts/flashnext.md §1.2, on capability 70 where the
    family is enabled): the decode contract holds, or a field of the section is explicit."""
    if decode_contract(engine)[0]:
        return True
    prefix = SECTION + "."
    return any(source != "default" for key, source in policy.sources if key.startswith(prefix))


def engine_environment(engine: EngineConfig, environ: Mapping[str, str]) -> EngineConfig:
    """The engine with `batch_invariant` read from the given environment when its variable is
    present (docs/contracts/flashnext.md §1.3: an engine fact, `INT_BOOL`; other text is an
    input error naming the variable)."""
    if BATCH_INVARIANT_VARIABLE not in environ:
        return engine
    value = INT_BOOL(BATCH_INVARIANT_VARIABLE, environ[BATCH_INVARIANT_VARIABLE])
    return dataclasses.replace(engine, batch_invariant=value)


def _off(name: str) -> Check:
    return reject(f"{name}_off", f"{VARIABLES[name]} is off (sm70_flash_next.{name})")


def _shape(layer: Mapping[str, Any], key: str) -> tuple[int, int]:
    n, k = layer[key]
    return (int(n), int(k))


def _verdict(check: Check) -> dict[str, Any]:
    ok, reason = check
    return {"ok": ok, "code": reason.code if reason else None}


def _all(*checks: Check) -> Check:
    for check in checks:
        if not check[0]:
            return check
    return OK


def precision(hardware: Hardware, engine: EngineConfig) -> dict[str, bool]:
    """The process-wide matmul precision flags as the loader leaves them (§2.4-1): the
    engine's facts (reduced precision on for `mtp` unless stated), forced off on capability
    70 under the decode contract with no speculation."""
    reduced = (
        engine.reduced_precision_reduction
        if engine.reduced_precision_reduction is not None
        else engine.spec_method == "mtp"
    )
    accumulation = engine.fp16_accumulation
    if (
        hardware.capability == CAPABILITY
        and decode_contract(engine)[0]
        and engine.spec_method == "none"
    ):
        reduced = accumulation = False
    return {
        "reduced_precision_reduction": reduced,
        "fp16_accumulation": accumulation,
        "batch_invariant": engine.batch_invariant,
    }


@dataclass(frozen=True)
class FlashNextDecision:
    """One row's loader decision: the recorded route, the routes preparation tags (§2.4-9)
    and the batch calls per token count (§4): `steps` holds (M, packed GDN at M, dense
    out_proj at M) for each M of `DENSE_M` within the budget that makes a batch call."""

    route: dict[str, Any]
    dense: bool
    gdn: bool
    hc: bool
    steps: tuple[tuple[int, bool, bool], ...]


def flash_next_route(
    policy: ResolvedPolicy,
    hardware: Hardware,
    engine: EngineConfig,
    layer: Mapping[str, Any],
    *,
    rules: Rules = SHIPPED,
) -> dict[str, Any]:
    """The route of one row: the §3 verdicts, `dense_by_m`, the packed bytes, the methods."""
    return flash_next_decision(policy, hardware, engine, layer, rules=rules).route


def flash_next_decision(
    policy: ResolvedPolicy,
    hardware: Hardware,
    engine: EngineConfig,
    layer: Mapping[str, Any],
    *,
    rules: Rules = SHIPPED,
) -> FlashNextDecision:
    """The loader's admissions for one row (§2.4-1..8) and the dispatch admissions per M."""
    section = policy.section(SECTION)
    on = section.as_dict()
    cap70 = hardware.capability == CAPABILITY
    contract = decode_contract(engine)
    qualified = batch_qualified(engine, rules)
    mtp = mtp_batch(engine)
    dtype_ok = (
        OK
        if engine.model is not None and engine.model.dtype == FP16
        else reject("dtype_not_float16", "the model dtype is not float16")
    )
    capability = (
        OK
        if cap70
        else reject("capability_not_70", f"capability {hardware.capability} is not exactly 70")
    )
    online = reject("online_qpn8", "online QPN8 rejects the FP16 lane") if on["online_qpn8"] else OK

    # §2.4-2/3: the FP16 lane replaces every projection with a plan (any positive shape).
    lane = _all(
        OK if on["fp16_gemv"] else _off("fp16_gemv"), online, dtype_ok, capability, contract
    )
    out_shape = _shape(layer, "out_proj")
    qkvz_shape = _shape(layer, "in_proj_qkvz")
    ba_shape = _shape(layer, "in_proj_ba")
    limit = DENSE_LIMIT if out_shape == OUT_PROJ_TP4 else 0
    limit_check = (
        OK
        if limit > 0
        else reject("dense_limit_zero", f"out_proj {out_shape} is not exactly {OUT_PROJ_TP4}")
    )
    fastpath = OK if on["batch_fastpath"] else _off("batch_fastpath")
    dense = _all(lane, fastpath, qualified, limit_check)

    # §2.4-6/7: the fused GDN input, then its packing (the OR rule with the explicit opt-in).
    layout = (
        OK
        if not layer.get("gqa_interleaved_layout", True)
        and not layer.get("disable_tp_for_ba_proj", True)
        else reject(
            "gdn_layout_not_fusable", "gqa_interleaved_layout or disable_tp_for_ba_proj is set"
        )
    )
    shapes = (
        OK
        if (qkvz_shape, ba_shape) == (QKVZ_TP4, BA_TP4)
        else reject(
            "gdn_shape_not_tp4",
            f"in_proj_qkvz {qkvz_shape} / in_proj_ba {ba_shape} are not {QKVZ_TP4} / {BA_TP4}",
        )
    )
    fused_input = _all(
        OK if on["fused_gdn_input"] else _off("fused_gdn_input"), lane, shapes, layout
    )
    gdn_key = f"{SECTION}.gdn_input_batch"
    opt_in = on["gdn_input_batch"] and (qualified[0] or policy.is_explicit(gdn_key))
    if not fused_input[0]:
        gdn = fused_input
    elif opt_in or (on["batch_fastpath"] and qualified[0]):
        gdn = OK
    elif not on["gdn_input_batch"] and not on["batch_fastpath"]:
        gdn = reject("gdn_input_batch_off", "both GDN packing switches are off")
    elif not qualified[0] and on["gdn_input_batch"]:
        gdn = reject(
            "speculation_not_quality_qualified",
            f"{qualified[1].message if qualified[1] else ''}; "
            f"{VARIABLES['gdn_input_batch']} is not set",
        )
    else:
        gdn = qualified if not qualified[0] else fastpath

    # §2.4-8: the HC loader and its batch tags.
    fused_hc = _all(OK if on["fused_hc"] else _off("fused_hc"), online, dtype_ok, capability)
    fused_hc = _all(fused_hc, contract)
    reassociated = _all(
        fused_hc,
        OK
        if engine.spec_method == "none"
        else reject("speculation", f"speculative method {engine.spec_method}"),
        OK if not engine.batch_invariant else reject("batch_invariant", "batch-invariant"),
    )
    tp4 = OK if engine.tp == HC_TP else reject("tp_not_4", f"tensor parallel size {engine.tp}")
    concurrent = _all(fastpath, qualified, tp4, reject("mtp_batch", "MTP batch") if mtp[0] else OK)
    mtp_tag = _all(OK if on["mtp_hc_batch"] else _off("mtp_hc_batch"), mtp)
    hc = _all(fused_hc, tp4, concurrent if concurrent[0] or not mtp[0] else mtp_tag)
    if hc[0] and layer.get("hc_method", UNQUANTIZED) not in (UNQUANTIZED, SM70_FP16):
        raise SelectionError(
            "hc_projection_not_fp16",
            f"Batched HC requires checkpoint-FP16 linears (HC projections use "
            f"{layer['hc_method']})",
        )
    partials = _all(hc, concurrent)

    precision_flags = precision(hardware, engine)
    counts = [m for m in DENSE_M if m <= engine.max_num_batched_tokens]
    dense_by_m = {
        str(m): dense[0] and _dense_dispatch(m, limit, out_shape, on, cap70, precision_flags)
        for m in counts
    }
    steps: list[tuple[int, bool, bool]] = []
    for m in counts:
        at_gdn = gdn[0] and _gdn_dispatch(m, cap70, precision_flags)
        if at_gdn or dense_by_m[str(m)]:
            steps.append((m, at_gdn, dense_by_m[str(m)]))
    rmsnorm_key = f"{SECTION}.rmsnorm_gated_exact"
    if policy.value(rmsnorm_key):
        rmsnorm = OK
    elif policy.is_explicit(rmsnorm_key):
        rmsnorm = _off("rmsnorm_gated_exact")
    else:
        # §5: upstream's report code for the computed default (not Flash-Next qualified).
        rmsnorm = reject("resolved_policy_disabled", "the engine is not Flash-Next qualified")
    method = SM70_FP16 if lane[0] else UNQUANTIZED
    verdicts = {
        "decode_contract": contract,
        "batch_qualified": qualified,
        "mtp_batch": mtp,
        "dense_batch_prepared": dense,
        "dense_limit": limit_check,
        "fused_input": fused_input,
        "gdn_packed": gdn,
        "fused_hc": fused_hc,
        "hc_packed": hc,
        "hc_fp32_partials": partials,
        "reassociated_down": reassociated,
        "rmsnorm_gated_exact": rmsnorm,
    }
    route = {
        "flash_next_route": {name: _verdict(verdicts[name]) for name in ROUTE_FIELDS},
        "dense_by_m": dense_by_m,
        "methods": {"out_proj": method, "in_proj_qkvz": method, "in_proj_ba": method},
        "packed_bytes": {
            "gdn": (qkvz_shape[0] + GDN_PAD_ROWS) * qkvz_shape[1] * 2 if gdn[0] else None,
            "hc": HC_PACK_BYTES if hc[0] else None,
        },
        "precision": precision_flags,
    }
    return FlashNextDecision(route, dense[0], gdn[0], hc[0], tuple(steps))


def _dense_dispatch(
    m: int,
    limit: int,
    shape: tuple[int, int],
    on: Mapping[str, Any],
    cap70: bool,
    flags: Mapping[str, bool],
) -> bool:
    """§4 `_can_use_dense_batch` with the row's doubles (row-major, fp16, aligned)."""
    if not on["batch_fastpath"] or flags["batch_invariant"] or flags["fp16_accumulation"]:
        return False
    reduced = flags["reduced_precision_reduction"]
    if reduced and shape == OUT_PROJ_TP4 and m < REDUCED_PRECISION_MIN_M:
        return False
    return cap70 and 2 <= m <= limit


def _gdn_dispatch(m: int, cap70: bool, flags: Mapping[str, bool]) -> bool:
    """§4's packed GDN window (2..16) with the dispatch guards every batch route shares: no
    FP16 accumulation, not batch-invariant, capability 70; no reduced-precision rule."""
    low, high = GDN_BATCH_M
    if flags["batch_invariant"] or flags["fp16_accumulation"]:
        return False
    return cap70 and low <= m <= high


__all__ = [
    "DENSE_M",
    "ROUTE_FIELDS",
    "SHIPPED",
    "FlashNextDecision",
    "Rules",
    "base_lane_default",
    "batch_qualified",
    "decode_contract",
    "engine_environment",
    "flash_next_context",
    "flash_next_decision",
    "flash_next_hashed",
    "flash_next_qualified",
    "flash_next_route",
    "flash_next_verdicts",
    "mtp_batch",
    "precision",
]
