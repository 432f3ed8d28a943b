"""Category sm70-awq-moe: AWQ mixture-of-experts layers on Volta (docs/contracts/core.md §3, §5).

One MoE layer per row, loaded through `policies.awq_moe.load_awq_moe` (every expert of both
banks prepared through the recording namespace), then dispatched at each token count of
`TOKEN_COUNTS` within the row's budget with router ids/weights on meta. A row's route is the
standard loaded-layer content plus `stages`: per replayed M, the chosen stages and every
stage verdict in docs/contracts/core.md §3.4 order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from native import meta_tensors, ops_moe
from native.awq_schemas import PREPARE_COMPACT_OP, PREPARE_OP, QPN_M1_OP
from native.moe_layer import AwqMoeLayer
from native.ops_moe import INDEXED_W13_OP, PERMUTE_METADATA_OP, SINGLE_TOKEN_OP
from policies.awq_moe import (
    MOE_WNA16,
    TURBOMIND,
    TURBOMIND_CODES,
    WNA16_CODES,
    bank_bytes,
    load_awq_moe,
)
from policies.awq_moe_admission import TOKEN_COUNT_CODE
from policies.categories.basis import MOE_BASIS
from policies.categories.matrix import (
    KV_NEVER_READ,
    NOT_APPLICABLE,
    NOT_MODELLED,
    ModelScope,
    matrix_rows,
    row_id,
    with_probes,
)
from policies.categories.route_schemas import route_fragment
from policies.categories.sites import field_keys
from policies.variables import SHARED_FIELDS
from policies.variables import env_var as var
from routectl.category import Category
from routectl.reasons import refusal_text
from routectl.replay.harness import ReplayContext, route_from_prepared
from routectl.rows import Invariance, Probe, RowSpec
from routectl.sites import (
    DecisionSites,
    Site,
    candidate_sites,
    fallback_sites,
    op_sites,
    recorded_only,
    variable_sites,
)

NAME = "sm70-awq-moe"
CAPABILITY = 70
TOKEN_COUNTS = (0, 1, 2, 8, 9, 127, 128, 4096, 8192)
PREFIX = "model.layers.0.mlp.experts"

# Model-level geometry (intermediate is the total; a rank holds intermediate / TP).
QWEN38 = {
    "prefix": PREFIX,
    "layer_id": 0,
    "experts": 512,
    "top_k": 10,
    "hidden": 2560,
    "intermediate": 640,
    "group": 32,
}
QWEN3_30B = {
    "prefix": PREFIX,
    "layer_id": 0,
    "experts": 128,
    "top_k": 8,
    "hidden": 2048,
    "intermediate": 768,
    "group": 128,
}
# MoE layers per model: what `model_totals` multiplies a row's per-layer bytes by.
MOE_LAYERS = {"qwen38_awq_moe": 48, "qwen3_30b_a3b_awq_moe": 48}

MODELS = (
    ModelScope(
        "27b_dflash2_nvfp4", status=(NOT_APPLICABLE, "CT NVFP4 dense checkpoint: no AWQ MoE layer")
    ),
    ModelScope(
        "flash_next_mtp4_nvfp4",
        status=(NOT_APPLICABLE, "ModelOpt NVFP4 checkpoint: no AWQ MoE layer"),
    ),
    ModelScope("35b_a3b_awq", status=(NOT_MODELLED, "AWQ 35B-A3B: no pinned expert geometry")),
    ModelScope("qwen38_awq_moe", layer=lambda tp: QWEN38),
    ModelScope("qwen3_30b_a3b_awq_moe", layer=lambda tp: QWEN3_30B),
)

BASE = row_id("qwen38_awq_moe", "fp8_e4m3", 4, "none", 8, 8192)
# The workload of examples/engine_startup.py (TP4, 8 sequences, 8192 tokens, FP16 KV cache):
# its two configurations are the `example_*` probes, the rows `routectl parity` joins the
# example's observation records with.
EXAMPLE_BASE = row_id("qwen38_awq_moe", "float16", 4, "none", 8, 8192)


def moe(name: str, value: str) -> dict[str, str]:
    return {var(f"sm70_awq_moe.{name}"): value}


QPN_ON = moe("qpn_m1", "1")
INDEXED_OPS = (INDEXED_W13_OP, PERMUTE_METADATA_OP)

PROBES = (
    Probe("qpn_m1_on", BASE, variables=QPN_ON, doc="opt-in QPN M1: M = 1 takes the QPN op"),
    Probe(
        "qpn_m1_op_missing",
        BASE,
        variables=QPN_ON,
        remove_ops=(QPN_M1_OP,),
        doc="explicit QPN M1 without its op: error row",
    ),
    Probe(
        "qpn_m1_legacy_op_missing",
        BASE,
        variables=QPN_ON,
        remove_ops=(SINGLE_TOKEN_OP,),
        doc="explicit QPN M1 without the legacy lane: error row",
    ),
    Probe(
        "qpn_m1_tp2",
        BASE,
        variables=QPN_ON,
        engine={"tp": 2},
        doc="explicit QPN M1 outside the TP4 contract: error row",
    ),
    Probe("compact_off", BASE, variables=moe("compact_metadata", "0"), doc="4-byte metadata"),
    Probe(
        "compact_explicit_op_missing",
        BASE,
        variables=moe("compact_metadata", "1"),
        remove_ops=(PREPARE_COMPACT_OP,),
        doc="explicit compact without its op: error row",
    ),
    Probe(
        "compact_default_op_missing",
        BASE,
        remove_ops=(PREPARE_COMPACT_OP,),
        doc="default compact without its op: 4-byte fallback",
    ),
    Probe("grouped_off", BASE, variables=moe("active_grouped_decode", "0")),
    Probe("strict_w13", BASE, variables=moe("strict_w13", "1")),
    Probe("exact_w2", BASE, variables=moe("exact_w2", "1")),
    Probe("active_exact_w2", BASE, variables=moe("active_exact_w2", "1")),
    Probe("max_batched_4", BASE, variables=moe("max_batched_tokens", "4")),
    Probe("chunk_4096", BASE, variables=moe("w2_chunk_tokens", "4096")),
    Probe("chunk_6144", BASE, variables=moe("w2_chunk_tokens", "6144")),
    Probe(
        "indexed_ops_missing_default",
        BASE,
        remove_ops=INDEXED_OPS,
        doc="default indexed prefill without its ops: materialized-input fallback",
    ),
    Probe(
        "indexed_ops_missing_explicit",
        BASE,
        variables=moe("indexed_prefill", "1"),
        remove_ops=INDEXED_OPS,
        doc="explicit indexed prefill without its ops: error row",
    ),
    Probe("legacy_compact_off", BASE, variables=moe("legacy_compact", "0")),
    Probe("batched_off", BASE, variables=moe("batched", "0")),
    Probe("moe_disable", BASE, variables=moe("disable", "1"), doc="MoeWNA16"),
    Probe(
        "example_qpn_m1",
        EXAMPLE_BASE,
        config={"sm70_awq_moe": {"qpn_m1": True}},
        doc="examples/engine_startup.py, 3-byte metadata: QPN M1 requested in the config",
    ),
    Probe(
        "example_qpn_m1_4byte",
        EXAMPLE_BASE,
        config={"sm70_awq_moe": {"qpn_m1": True, "compact_metadata": False}},
        doc="examples/engine_startup.py, 4-byte metadata: QPN M1 requested, compact off",
    ),
    Probe(
        "backend_marlin",
        BASE,
        variables={var("sm70_turbomind.quant_backend"): "marlin"},
        doc="the legacy backend override turns TurboMind off: MoeWNA16",
    ),
)


def call_inputs(m: int, layer: AwqMoeLayer) -> tuple[Any, Any, Any]:
    """Activations and the router's outputs of one call, on meta."""
    return (
        meta_tensors.empty((m, layer.hidden), "float16", "meta"),
        meta_tensors.empty((m, layer.top_k), "int32", "meta"),
        meta_tensors.empty((m, layer.top_k), "float32", "meta"),
    )


def stage_summary(m: int, choice: Any) -> dict[str, Any]:
    """The chosen stages of one call and the candidates refused for a reason other than the
    token count (policy, admission, missing ops): what a reviewer needs to see move. The
    full per-stage verdict list stays available from the route selector (`explain`)."""
    full = choice.to_json()
    rejected = [
        v
        for v in full["verdicts"]
        if not v["ok"] and not v["not_needed"] and v["code"] != TOKEN_COUNT_CODE
    ]
    return {"m": m, "chosen": full["chosen"], "rejected": rejected}


INVARIANCES = (
    Invariance(
        "moe_route_ignores_kv_spec_c",
        ("kv", "spec", "c"),
        ("route",),
        why=f"{KV_NEVER_READ}; the AWQ MoE admission and lanes read the TP size and the "
        "token count only, never speculation or concurrency",
    ),
    Invariance(
        "moe_kernel_ignores_q",
        ("kv", "spec", "c", "q"),
        (
            "route.kernel",
            "route.prepared_layout",
            "route.fallbacks",
            "route.bytes",
            "route.prepare",
        ),
        why="the budget only drops the token counts above it from route.stages and "
        "route.dispatch; selection and the prepared banks never read it",
    ),
)
# The method candidates (policies/awq_moe.py select_method), every op the family prepares or
# dispatches, the fallbacks it records and the fields it reads. The stage lanes (lane.*,
# w13.*, w2.*, reduce.*) are recorded as `stages`, not yet declared as sites.
OPS = (PREPARE_OP, PREPARE_COMPACT_OP, *ops_moe.OPS)
FALLBACKS = (
    "sm70_turbomind.awq_moe",
    "sm70_awq_moe.compact_metadata",
    "sm70_awq_moe.indexed_prefill",
)
# tune_small_shapes is native tactic tuning, numerics only: it decides no route.
VARIABLES = (
    # sm70_awq_moe is a shared section (no family record owns its table).
    *(
        f.key
        for f in SHARED_FIELDS
        if f.section == "sm70_awq_moe" and f.name != "tune_small_shapes"
    ),
    "sm70_turbomind.awq_moe",
    "sm70_turbomind.quant_backend",
)
PINNED = (
    "the row count is pinned at 562 (tests/test_review_moe_change.py, the README), so a "
    "resolution test proves it"
)
ROUTES = "tests/test_awq_moe_routes.py::"
LAYER_REFUSALS = ROUTES + "test_method_selection_names_each_layer_refusal"
# (candidate, code) -> the test that proves it.
RECORDED = {
    (TURBOMIND, "turbomind_off"): "tests/test_awq_moe_admission.py::"
    "test_family_gate_policy_reasons_name_their_source",
    (TURBOMIND, "capability"): "tests/test_awq_moe_admission.py::"
    "test_family_gate_capability_window",
    (TURBOMIND, "weight_bits"): LAYER_REFUSALS,
    (TURBOMIND, "zero_points"): LAYER_REFUSALS,
    (TURBOMIND, "bias"): LAYER_REFUSALS,
    (TURBOMIND, "group_size"): LAYER_REFUSALS,
    (TURBOMIND, "missing_native_ops"): ROUTES + "test_missing_method_ops_fall_back_to_moe_wna16",
    (MOE_WNA16, "weight_bits"): ROUTES + "test_bits_neither_method_serves_is_a_load_error",
    (MOE_WNA16, "group_size"): LAYER_REFUSALS,
}


def decision_sites() -> DecisionSites:
    sites = [
        *candidate_sites(TURBOMIND, TURBOMIND_CODES),
        *candidate_sites(MOE_WNA16, WNA16_CODES),
        *fallback_sites(FALLBACKS),
        *op_sites(OPS),
        *variable_sites(field_keys(*VARIABLES)),
    ]
    declarations = {
        Site("reason", name, code): recorded_only(PINNED, test)
        for (name, code), test in RECORDED.items()
    }
    provider = ROUTES + "test_a_turbomind_refusal_by_hardware_build_or_layer_is_a_recorded_fallback"
    declarations[Site("set", "sm70_turbomind.awq_moe")] = recorded_only(PINNED, provider)
    declarations[Site("fallback", "sm70_turbomind.awq_moe")] = recorded_only(PINNED, provider)
    switches = ROUTES + "test_each_switch_reaches_the_decision"
    for name in ("layer_allowlist", "layer_denylist"):
        declarations[Site("set", f"sm70_awq_moe.{name}")] = recorded_only(PINNED, switches)
    return DecisionSites(tuple(sites), declarations)


class AwqMoeCategory(Category):
    name = NAME
    basis = MOE_BASIS
    description = (
        "AWQ mixture-of-experts layers on SM70: QPN M1, grouped decode, "
        "per-expert dispatch, indexed prefill, compact 3-byte metadata"
    )

    def __init__(self) -> None:
        self._rows = tuple(with_probes(matrix_rows(MODELS, CAPABILITY), PROBES))

    def rows(self) -> Sequence[RowSpec]:
        return self._rows

    def invariances(self) -> Sequence[Invariance]:
        return INVARIANCES

    def decision_sites(self) -> DecisionSites:
        return decision_sites()

    def route(self, ctx: ReplayContext) -> dict[str, Any]:
        """Load the row's layer (every expert of both banks) and dispatch each token count
        within the budget; a fail-closed load raises SelectionError (an error row)."""
        ns = ctx.namespace
        mark = ns.mark()
        prepared = load_awq_moe(ctx.row.layer, ctx.policy, ctx.hardware, ctx.row.engine, ns)
        prepare_calls = ns.since(mark)
        dispatch: list[dict[str, Any]] = []
        stages: list[dict[str, Any]] = []
        if prepared.apply is not None:
            layer: AwqMoeLayer = prepared.state["layer"]
            for m in ctx.token_counts(TOKEN_COUNTS):
                x, ids, weights = call_inputs(m, layer)
                mark = ns.mark()
                prepared.apply(x, ids, weights)
                dispatch.extend(ns.since(mark))
                stages.append(stage_summary(m, prepared.state["last_route"]))
        route = route_from_prepared(prepared, prepare_calls, dispatch)
        route["bytes"] = bank_bytes(prepared)
        route["stages"] = stages
        return route

    def model_totals(self, row: RowSpec, route: Mapping[str, Any]) -> dict[str, int] | None:
        return model_totals(row, route)

    def route_schema(self) -> Mapping[str, Any]:
        """`moe_route`: the selected-route keys plus `stages` per replayed token count."""
        return route_fragment(__name__)

    def explain_lines(self, route: dict[str, Any]) -> list[str]:
        """Per replayed token count: the stages chosen and the stages refused (popped)."""
        if "stages" not in route:
            return []
        lines = ["stages per token count:"]
        for entry in route.pop("stages"):
            lines.append(f"  M={entry['m']}: {' > '.join(entry['chosen'])}")
            lines.extend(
                f"    refused {refusal_text(v['name'], v['code'], v['message'])}"
                for v in entry["rejected"]
            )
        return lines


def model_totals(row: RowSpec, route: Mapping[str, Any]) -> dict[str, int] | None:
    """Per-rank bytes over the model's MoE layers (every layer has the row's geometry):
    weights, metadata, total, the 4-byte metadata and the compact layout's saving. None for
    rows without a TurboMind AWQ MoE layer (status, error, MoeWNA16)."""
    layers = MOE_LAYERS.get(row.model)
    if layers is None or route.get("kernel") != TURBOMIND:
        return None
    size = route["bytes"]
    layer = AwqMoeLayer.for_rank(row.layer, row.engine.tp)
    four_byte = sum(b["metadata"] for b in layer.bank_bytes(compact=False).values())
    return {
        "layers": layers,
        "weights": layers * size["weights"],
        "metadata": layers * size["metadata"],
        "total": layers * size["total"],
        "metadata_4byte": layers * four_byte,
        "compact_saving": layers * (four_byte - size["metadata"]),
    }


AWQ_MOE_CATEGORY = AwqMoeCategory()

__all__ = [
    "AWQ_MOE_CATEGORY",
    "MODELS",
    "NAME",
    "PROBES",
    "TOKEN_COUNTS",
    "AwqMoeCategory",
    "model_totals",
]
