"""Category sm70-flash-next-batch: the Flash-Next qualified batch routes of Qwen3.8's FP16
projections on SM70 (docs/contracts/flashnext.md §6).

The standard 324-row matrix over three models plus the contract's 26 edge probes (§6.3). A row
is one `model.layers.0.` layer at the row's real local shapes (§2.7: TP2 shapes take no batch
route): the decode contract and batch qualifications, the loader's admissions for out_proj,
the GDN input pair and the HC module, the dense dispatch per token count, the 14 tagged
controls and the four base-lane switches with their sources, the precision facts, and the
packed bytes where packing happens, and the loader's preparation (§2.4-9) and batch calls
per token count through the recording native namespace, with their plans (meta weights stand
for the device weights, as in every category).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from native import meta_tensors
from native.kernels.flash_next_sm70 import dispatch_batch, prepare_batch
from native.ops_flash_next import DENSE_BATCH_OP, GDN_INPUT_BATCH_OP, HC_BATCH_SUPPORT_OP
from policies.categories.matrix import (
    KV_NEVER_READ,
    MODEL_FACTS,
    ModelScope,
    matrix_rows,
    row_id,
    with_probes,
)
from policies.categories.route_schemas import route_fragment
from policies.categories.sites import field_keys
from policies.flash_next import ROUTE_FIELDS, flash_next_decision
from policies.flash_next_variables import CONTROL_NAMES, FIELD_NAMES, SECTION, VARIABLES
from routectl.category import Category
from routectl.replay.harness import ReplayContext
from routectl.rows import Invariance, Probe, RowSpec
from routectl.sites import (
    DecisionSites,
    Site,
    recorded_only,
    rule_outcomes,
    rule_sites,
    variable_sites,
)

NAME = "sm70-flash-next-batch"
CAPABILITY = 70
FLASH_NEXT = "flash_next_mtp4_nvfp4"
MODEL_IDS = ("27b_dflash2_nvfp4", FLASH_NEXT, "35b_a3b_awq")

# §2.7: the per-rank shapes (N, K) of the three projections the routes read.
LOCAL_SHAPES: Mapping[int, Mapping[str, list[int]]] = {
    4: {"in_proj_qkvz": [4096, 2560], "in_proj_ba": [24, 2560], "out_proj": [2560, 1536]},
    2: {"in_proj_qkvz": [8192, 2560], "in_proj_ba": [48, 2560], "out_proj": [2560, 3072]},
}
# The layer double's flags (§3: both GDN flags false; HC projections unquantized).
LAYER_FLAGS: Mapping[str, Any] = {
    "gqa_interleaved_layout": False,
    "disable_tp_for_ba_proj": False,
    "hc_method": "unquantized",
}

BASIS = (
    "CPU evaluation of the Flash-Next decode contract, the batch qualifications and the SM70 "
    "FP16 loader's admissions for one layer's out_proj, GDN input pair and HC module at the "
    "row's local shapes, with the dense dispatch admission per token count: proves which "
    "batch routes, packings and RMSNorm choice a configuration gets and which switch decided "
    "them, and which native batch ops the loader needs and calls at each token count (with "
    "their plans). Does not prove a kernel launch, numerics, the compile-graph lane, the HC "
    "batch dispatch (its kernels are not catalogued) or a request-time route hit."
)


def layer(tp: int) -> Mapping[str, Any]:
    return {**LOCAL_SHAPES[tp], **LAYER_FLAGS}


MODELS = tuple(ModelScope(model, layer=layer) for model in MODEL_IDS)

B0 = row_id(FLASH_NEXT, "float16", 4, "none", 4, 8192)
B1 = row_id(FLASH_NEXT, "float16", 4, "mtp", 4, 8192)
B2 = row_id(FLASH_NEXT, "float16", 4, "dflash", 4, 4096)
TP2_BASE = row_id(FLASH_NEXT, "float16", 2, "none", 4, 8192)
_FACTS = MODEL_FACTS[FLASH_NEXT]
PROJECTIONS = ("out_proj", "in_proj_qkvz", "in_proj_ba")


def _var(name: str) -> str:
    return VARIABLES[name]


PROBES = (
    Probe("batch_fastpath_off", B0, variables={_var("batch_fastpath"): "0"}),
    Probe("batch_fastpath_off_mtp", B1, variables={_var("batch_fastpath"): "0"}),
    Probe("gdn_input_batch_off", B0, variables={_var("gdn_input_batch"): "0"}),
    Probe(
        "dflash_gdn_opt_in",
        B2,
        variables={_var("gdn_input_batch"): "1"},
        doc="a present GDN input variable admits packing on unqualified speculation",
    ),
    Probe(
        "dflash_gdn_opt_in_zero",
        B2,
        variables={_var("gdn_input_batch"): "0"},
        doc="present but false: no packing",
    ),
    Probe("mtp_hc_batch_off", B1, variables={_var("mtp_hc_batch"): "0"}),
    Probe("mtp_hc_batch_off_none", B0, variables={_var("mtp_hc_batch"): "0"}),
    Probe("rmsnorm_off", B0, variables={_var("rmsnorm_gated_exact"): "0"}),
    Probe("rmsnorm_on_dflash", B2, variables={_var("rmsnorm_gated_exact"): "1"}),
    Probe("fp16_gemv_off", B0, variables={_var("fp16_gemv"): "0"}),
    Probe("fused_gdn_input_off", B0, variables={_var("fused_gdn_input"): "0"}),
    Probe("fused_hc_off", B0, variables={_var("fused_hc"): "0"}),
    Probe("online_qpn8_on", B0, variables={_var("online_qpn8"): "1"}),
    Probe("batch_invariant_on", B0, engine={"batch_invariant": True}),
    Probe("dbo_on", B0, engine={"dbo": True}),
    Probe(
        "reduced_precision_off_mtp",
        B1,
        engine={"reduced_precision_reduction": False},
        doc="MTP with reduced-precision reduction off: dense dispatch below M 8",
    ),
    Probe("fp16_accumulation_on", B0, engine={"fp16_accumulation": True}),
    Probe("fp16_accumulation_on_mtp", B1, engine={"fp16_accumulation": True}),
    Probe("non_sm70", B0, capability=75),
    Probe(
        "tp4_shapes_at_tp2",
        TP2_BASE,
        layer=LOCAL_SHAPES[4],
        doc="the reference double's fixed TP4 shapes at TP2 (its quirk, as a probe)",
    ),
    Probe("gdn_interleaved_layout", B0, layer={"gqa_interleaved_layout": True}),
    Probe(
        "conditional_generation_lm_only_false",
        B0,
        engine={"model": replace(_FACTS, language_model_only=False)},
    ),
    Probe("dense_native_missing", B0, remove_ops=(DENSE_BATCH_OP,)),
    Probe("gdn_native_missing", B0, remove_ops=(GDN_INPUT_BATCH_OP,)),
    Probe("hc_native_missing", B0, remove_ops=(HC_BATCH_SUPPORT_OP,)),
    Probe(
        "hc_quantized_projection",
        B0,
        layer={"hc_method": "awq"},
        doc="HC projections on a quantized method: batched HC fails closed",
    ),
)


def _sourced(policy: Any, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        key = f"{SECTION}.{name}"
        out[VARIABLES[name]] = {"value": policy.value(key), "source": policy.source(key)}
    return out


BASE_LANE_NAMES = tuple(n for n in FIELD_NAMES if n not in CONTROL_NAMES)


INVARIANCES = (
    Invariance(
        "batch_route_ignores_kv_c",
        ("kv", "c"),
        ("route",),
        why=f"{KV_NEVER_READ}; the Flash-Next batch routes never read concurrency",
    ),
    Invariance(
        "batch_lanes_ignore_q",
        ("kv", "c", "q"),
        (
            "route.flash_next_route",
            "route.controls",
            "route.packed_bytes",
            "route.precision",
            "route.methods",
        ),
        why="the budget only drops the token counts above it from route.dense_by_m",
    ),
)


RECORDED_CONTROLS = (
    "fused_sigmoid_mixed_qkv",
    "mtp_hc_cooperative",
    "mtp_hc_full_unroll",
    "mtp_moe_fp16_exact",
    "mtp_ple_conv",
    "mtp_router_batch",
    "mtp_router_top16",
    "mtp_shared_batch",
    "nvfp4_moe_grouped_mtp5",
    "qsa_mtp_topk",
)


def decision_sites() -> DecisionSites:
    """Each rule of the Flash-Next route (policies/flash_next.py ROUTE_FIELDS) passing and
    failing, and the section's 18 switches at their default and set. The rules' reason
    codes are recorded with each verdict but not yet declared as sites."""
    sites = [*rule_sites(ROUTE_FIELDS), *variable_sites(field_keys(SECTION))]
    # Ten of the fourteen controls only travel with the row (`controls`); no probe sets them,
    # as the 350 rows are pinned (docs/contracts/flashnext.md). The historical-settings test
    # resolves every control off and compares the routes with the reference.
    historical = "tests/test_flash_next_category.py::" + (
        "test_historical_settings_change_exactly_the_reference_ids"
    )
    declarations = {
        Site("set", f"{SECTION}.{name}"): recorded_only(
            "a control the route records but no rule reads; the 350 rows are pinned "
            "(docs/contracts/flashnext.md)",
            historical,
        )
        for name in RECORDED_CONTROLS
    }
    return DecisionSites(tuple(sites), declarations)


class FlashNextBatchCategory(Category):
    name = NAME
    basis = BASIS
    description = "Flash-Next qualified batch on SM70: dense batch, GDN packing, HC, RMSNorm"
    matrix_subject = "batch routes"

    def __init__(self) -> None:
        self._rows = tuple(with_probes(matrix_rows(MODELS, CAPABILITY), PROBES))

    def rows(self) -> Sequence[RowSpec]:
        return self._rows

    def invariances(self) -> Sequence[Invariance]:
        return INVARIANCES

    def decision_sites(self) -> DecisionSites:
        return decision_sites()

    def reached_sites(self, route: Mapping[str, Any]) -> set[Site]:
        verdicts = route.get("flash_next_route", {})
        return rule_outcomes((name, bool(v["ok"])) for name, v in verdicts.items())

    def route(self, ctx: ReplayContext) -> dict[str, Any]:
        row = ctx.row
        decision = flash_next_decision(ctx.policy, ctx.hardware, row.engine, row.layer)
        ns = ctx.namespace
        weights = {
            name: meta_tensors.empty(tuple(row.layer[name]), "float16", "meta")
            for name in PROJECTIONS
        }
        mark = ns.mark()
        prepared = prepare_batch(
            ns, **weights, dense=decision.dense, gdn=decision.gdn, hc=decision.hc
        )
        prepare = ns.since(mark)
        mark = ns.mark()
        for m, gdn, dense in decision.steps:
            dispatch_batch(ns, prepared, m, dense=dense, gdn=gdn)
        return {
            "capability": ctx.hardware.capability,
            **decision.route,
            "prepare": prepare,
            "dispatch": ns.since(mark),
            "controls": _sourced(ctx.policy, CONTROL_NAMES),
            "base_lane": _sourced(ctx.policy, BASE_LANE_NAMES),
        }

    def matrix_label(self, route: Mapping[str, Any]) -> tuple[str, str] | None:
        """The batch routes a row takes (or why none), e.g. `dense+gdn+hc(fp32)`; an error
        row keeps the generic label."""
        if "flash_next_route" not in route:
            return None
        verdicts = route["flash_next_route"]
        taken = [
            label
            for key, label in (
                ("dense_batch_prepared", "dense"),
                ("gdn_packed", "gdn"),
                ("hc_packed", "hc"),
            )
            if verdicts[key]["ok"]
        ]
        if verdicts["hc_fp32_partials"]["ok"]:
            taken[-1] = "hc(fp32)"
        rms = "rmsnorm" if verdicts["rmsnorm_gated_exact"]["ok"] else "no rmsnorm"
        if taken:
            return ("+".join(taken) + f"; {rms}", "value")
        code = verdicts["batch_qualified"]["code"] or verdicts["dense_batch_prepared"]["code"]
        return (f"no batch route ({code}); {rms}", "status")

    def matrix_reason(self, route: Mapping[str, Any]) -> str | None:
        """The refused routes with their codes, in the contract's order (an error row: the
        generic reason)."""
        if "flash_next_route" not in route:
            return None
        verdicts = route["flash_next_route"]
        refused = [f"{k} [{v['code']}]" for k, v in verdicts.items() if not v["ok"]]
        return "; ".join(refused) or "every batch route admitted"

    def route_schema(self) -> Mapping[str, Any]:
        """`flash_next_route`: verdicts, dense_by_m, methods, packed bytes, controls."""
        return route_fragment(__name__)

    def explain_lines(self, route: dict[str, Any]) -> list[str]:
        """The route verdicts (a `<field>_off` code names its variable), the dense dispatch
        per M, the precision facts, the packed bytes and the switches with their sources."""
        lines: list[str] = []
        if isinstance(route.get("flash_next_route"), dict):
            verdicts = route.pop("flash_next_route")
            lines.append("Flash-Next batch routes:")
            width = max(len(k) for k in verdicts)
            for key, verdict in verdicts.items():
                lines.append(f"  {key:<{width}}  {_verdict_text(verdict)}")
        if isinstance(route.get("dense_by_m"), dict):
            by_m = route.pop("dense_by_m")
            on = [m for m, ok in by_m.items() if ok]
            lines.append(
                f"dense dispatch at M: {', '.join(on) or 'none'} (asked: {', '.join(by_m)})"
            )
        if isinstance(route.get("methods"), dict):
            methods = route.pop("methods")
            lines.append("methods: " + ", ".join(f"{k}={v}" for k, v in methods.items()))
        if isinstance(route.get("precision"), dict):
            flags = route.pop("precision")
            lines.append("precision: " + ", ".join(f"{k}={v}" for k, v in flags.items()))
        if isinstance(route.get("packed_bytes"), dict):
            packed = route.pop("packed_bytes")
            lines.append(
                "packed bytes: "
                + ", ".join(f"{k}={'-' if v is None else f'{v:,}'}" for k, v in packed.items())
            )
        for key, title in (("controls", "controls"), ("base_lane", "base-lane switches")):
            if isinstance(route.get(key), dict):
                values = route.pop(key)
                lines.append(f"{title} (value, source):")
                lines.extend(
                    f"  {variable}={item['value']} ({item['source']})"
                    for variable, item in values.items()
                )
        return lines


_OFF_SUFFIX = "_off"


def _verdict_text(verdict: Mapping[str, Any]) -> str:
    if verdict["ok"]:
        return "yes"
    code = verdict["code"]
    name = code.removesuffix(_OFF_SUFFIX) if code.endswith(_OFF_SUFFIX) else None
    if name in VARIABLES:
        return f"no [{code}: {VARIABLES[name]} is off]"
    return f"no [{code}]"


FLASH_NEXT_BATCH_CATEGORY = FlashNextBatchCategory()

__all__ = [
    "B0",
    "B1",
    "B2",
    "FLASH_NEXT_BATCH_CATEGORY",
    "LOCAL_SHAPES",
    "MODELS",
    "NAME",
    "PROBES",
    "FlashNextBatchCategory",
]
