"""Category sm70-fp8-linear: Volta block-FP8 W8A16 linears (docs/contracts/fp8.md §6).

A row loads up to five layers of one model through the family's loader on meta tensors,
sharing the device's workspaces, and dispatches each at the category's token counts (the
fused gate/up call after each plain gate_up_proj call). Its route is `{"layers": {name:
layer route}, "workspaces": {kind: bytes}}`: each layer route in the linear shape or an error
route, keyed by the layer name after `model.layers.0.`; the shared workspaces once per row.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from native import meta_tensors, ops_fp8
from native.kernels import fp8_sm70 as fs
from native.kernels import turing
from native.kernels.common import SILU_AND_MUL_OP
from native.layers import BlockFp8Layer
from policies import linear_fp8_sm70 as lf
from policies.categories.basis import LINEAR_BASIS
from policies.categories.matrix import (
    KV_NEVER_READ,
    NOT_APPLICABLE,
    ModelScope,
    matrix_rows,
    row_id,
)
from policies.categories.route_schemas import route_fragment
from policies.categories.sites import field_keys, kernel_sites
from policies.linear_fp8_sm70 import checkpoint_admission, force_marlin, load_fp8_sm70
from policies.variables import env_var as var
from routectl.category import Category
from routectl.errors import SelectionError
from routectl.replay.harness import ReplayContext, error_route, route_from_prepared
from routectl.rows import Invariance, Probe, RowSpec
from routectl.sites import (
    DecisionSites,
    Declaration,
    Site,
    candidate_sites,
    fallback_sites,
    op_sites,
    recorded_only,
    unreachable,
    variable_sites,
)

NAME = "sm70-fp8-linear"
CAPABILITY = 70
TOKEN_COUNTS = (1, 4, 8, 16, 4096, 8192)
LAYER_PREFIX = "model.layers.0."
FUSED_ROLE = "gate_up_proj"

# The five probed roles of a 27B-shaped FP8 model (docs/contracts/fp8.md §6.2): global (K, N) and
# which dimension tensor parallelism splits.
ROLES: tuple[tuple[str, int, int, str], ...] = (
    ("qkv_proj", 5120, 14336, "n"),
    ("in_proj_qkvz", 5120, 16384, "n"),
    ("o_proj", 6144, 5120, "k"),
    ("gate_up_proj", 5120, 34816, "n"),
    ("down_proj", 17408, 5120, "k"),
)


def layer(
    name: str, k: int, n: int, *, tp: int, groups: int = 0, e8m0: bool = False
) -> dict[str, Any]:
    """One probed layer: its name after `model.layers.0.`, local (K, N), layer TP."""
    return {"name": name, "k": k, "n": n, "tp": tp, "groups": groups, "e8m0": e8m0}


def model_layers(tp: int) -> dict[str, Any]:
    return {
        "layers": tuple(
            layer(role, k // tp if split == "k" else k, n // tp if split == "n" else n, tp=tp)
            for role, k, n, split in ROLES
        )
    }


def build_layer(description: Mapping[str, Any]) -> BlockFp8Layer:
    return BlockFp8Layer.of(
        LAYER_PREFIX + description["name"],
        description["k"],
        description["n"],
        tp=description["tp"],
        groups=description["groups"],
        is_scale_e8m0=description["e8m0"],
    )


_NOT_FP8 = "not a serialized block-FP8 checkpoint: no SM70 FP8 linear"
MODELS = (
    ModelScope("27b_dflash2_nvfp4", status=(NOT_APPLICABLE, f"NVFP4 checkpoint, {_NOT_FP8}")),
    ModelScope("flash_next_mtp4_nvfp4", status=(NOT_APPLICABLE, f"NVFP4 checkpoint, {_NOT_FP8}")),
    ModelScope("35b_a3b_awq", status=(NOT_APPLICABLE, f"AWQ checkpoint, {_NOT_FP8}")),
    ModelScope("27b_fp8", layer=model_layers),
    ModelScope("35b_a3b_fp8", layer=model_layers),
)


QPN8 = var("sm70_fp8.qpn8")
PP2_TP4 = {var("sm70_fp8.qpn8_pp2_tp4"): "1", var("sm70_fp8.qpn8_shared_gate"): "1"}
PP2_ENGINE = {"pp": 2}
BASE = row_id("27b_fp8", "fp8_e4m3", 4, "none", 1, 8192)


def _layers(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"layers": tuple(entries)}


PROBES: tuple[Probe, ...] = (
    Probe("qpn8_on", BASE, variables={QPN8: "1"}),
    Probe("qpn8_off", BASE, variables={QPN8: "0"}),
    Probe("qpn8_native_missing", BASE, variables={QPN8: "1"}, remove_ops=(fs.QPN8_GATED_PAIR_OP,)),
    Probe(
        "qpn8_workspace_missing",
        BASE,
        variables={QPN8: "1"},
        engine_facts={"workspace_elements": 0},
        doc="neither the exact-dense nor the PP2/TP4 workspace is available",
    ),
    Probe("gated_silu_off", BASE, variables={var("sm70_fp8.gated_silu"): "0"}),
    Probe("prefill_exact_dense_off", BASE, variables={var("sm70_fp8.prefill_exact_dense"): "0"}),
    Probe(
        "pp2_tp4_fused_wqa_wkv",
        BASE,
        variables=PP2_TP4,
        engine=PP2_ENGINE,
        layer=_layers(layer("fused_wqa_wkv", 4096, 1536, tp=4)),
    ),
    Probe(
        "pp2_tp4_wq_b",
        BASE,
        variables=PP2_TP4,
        engine=PP2_ENGINE,
        layer=_layers(layer("wq_b", 1024, 8192, tp=4)),
    ),
    Probe(
        "pp2_tp4_wo_a",
        BASE,
        variables=PP2_TP4,
        engine=PP2_ENGINE,
        layer=_layers(layer("wo_a", 4096, 2048, tp=4, groups=2)),
    ),
    Probe(
        "pp2_tp4_shared_gate",
        BASE,
        variables=PP2_TP4,
        engine=PP2_ENGINE,
        layer=_layers(layer("shared_experts.gate_up_proj", 4096, 1024, tp=4)),
    ),
)

# routectl's own probes: what the golden never exercises.
BLOCK_QPN8 = {"block_qpn8": True}
OWN_PROBES: tuple[Probe, ...] = (
    Probe(
        "block_qpn8_on",
        BASE,
        config={"sm70_fp8": BLOCK_QPN8},
        doc="QPN8Fp8BlockScaledMMLinearKernel on every role, no TurboMind copy at c1",
    ),
    Probe(
        "block_qpn8_copy",
        BASE,
        config={"sm70_fp8": {**BLOCK_QPN8, "block_qpn8_volta_turbomind_prefill": True}},
    ),
    Probe("block_qpn8_yields", BASE, config={"sm70_fp8": {**BLOCK_QPN8, "gated_silu": True}}),
    Probe("visible_dense_mm", BASE, variables={var("sm70_fp8.prefill_visible_dense_mm"): "1"}),
    Probe(
        "pp2_tp4_prescaled_m1",
        BASE,
        engine=PP2_ENGINE,
        layer=_layers(layer("fused_wqa_wkv", 4096, 1536, tp=1, e8m0=True)),
    ),
    Probe("grouped_decode", BASE, layer=_layers(layer("wo_a", 4096, 2048, tp=4, groups=2))),
)

# The fp8-policy grid (the reference's `fp8-policy` category) on one 35B FP8 row, qkv_proj
# only: legacy backend x VLLM_SM70_FP8_TURBOMIND x the MoE dequant switch x the dense one.
GRID_BASE = row_id("35b_a3b_fp8", "fp8_e4m3", 2, "none", 4, 8192)
GRID_BACKENDS = ("auto", "turbomind", "marlin")
GRID_SWITCH = ("unset", "0", "1")
GRID_DEQUANT = ("0", "1")
GRID_FLAG = "policy_grid"


def _grid_probe(backend: str, tm: str, moe: str, dq: str) -> Probe:
    variables = {var("sm70_turbomind.quant_backend"): backend, var("sm70_fp8.dequant_fallback"): dq}
    for key, value in (("sm70_fp8.enabled", tm), ("sm70_fp8.moe_dequant_fallback", moe)):
        if value != "unset":
            variables[var(key)] = value
    return Probe(
        f"policy_{backend}_tm_{tm}_moe_{moe}_dq_{dq}",
        GRID_BASE,
        variables=variables,
        layer=_layers(layer("qkv_proj", 5120, 14336 // 2, tp=2)),
        engine_facts={GRID_FLAG: True},
    )


GRID_PROBES = tuple(
    _grid_probe(*cell)
    for cell in itertools.product(GRID_BACKENDS, GRID_SWITCH, GRID_SWITCH, GRID_DEQUANT)
)


INVARIANCES = (
    Invariance(
        "fp8_route_ignores_kv_c",
        ("kv", "c"),
        ("route",),
        why=f"{KV_NEVER_READ}; concurrency reaches only the block-QPN8 decode limit and "
        "the PP2 x TP4 qualification, which no matrix row (PP 1, block QPN8 unset) reaches",
    ),
    Invariance(
        "fp8_kernels_ignore_q",
        ("kv", "c", "q"),
        (
            "route.layers.*.kernel",
            "route.layers.*.prepared_layout",
            "route.layers.*.fallbacks",
            "route.layers.*.bytes",
            "route.workspaces",
        ),
        why="the budget only drops the token counts above it from each layer's dispatch; "
        "selection, preparation and the shared workspace never read it",
    ),
)
# The block-FP8 priority list (policies/linear_fp8_sm70.py): every candidate passes the W8A16
# rule and disabled_kernels first; QPN8 then its own policy gate, both SM70 classes then
# their capability (`reason_codes`). The foreign kernels never consume the W8A16 layout.
POLICY_CODES = {
    lf.QPN8_BLOCK.name: (*lf.DISABLED_CODES, *lf.BLOCK_QPN8_POLICY_CODES),
    lf.TURBOMIND.name: lf.DISABLED_CODES,
}
FALLBACKS = ("block_qpn8", "qpn8", "qpn8_pp2_tp4", "prefill_exact_dense")
# Every op the Python code prepares or dispatches: the QPN8 dequantize and gated-pair ops
# are required ops the native dispatchers call inside, never recorded calls.
INSIDE = (fs.QPN8_DEQUANTIZE_OP, fs.QPN8_GATED_PAIR_OP)
OPS = (
    *(op for op in ops_fp8.OPS if op not in INSIDE),
    *turing.QPN8_REQUIRED_OPS,
    SILU_AND_MUL_OP,
    fs.TORCH_MM_OP,
)
PINNED = (
    "the rows are the FP8 contract's (docs/contracts/fp8.md §6: 540 + 70 = 610, in "
    "docs/commands.md and the README), so a resolution test proves it"
)
MUTATION = "tests/test_mutation_fp8.py::"
POLICY = "tests/test_fp8_sm70_policy.py::"
QPN8 = lf.QPN8_BLOCK.name
TURBOMIND = lf.TURBOMIND.name
NEITHER = (
    MUTATION + "test_when_neither_sm70_kernel_passes_every_candidate_is_evaluated_on_this_device"
)
# (kind, subject, code) -> the test that proves the site.
RECORDED: dict[tuple[str, str, str], str] = {
    ("reason", QPN8, "disabled_kernel"): MUTATION
    + "test_a_disabled_block_kernel_and_turbomind_name_both_in_the_load_error",
    ("reason", TURBOMIND, "disabled_kernel"): MUTATION
    + "test_a_disabled_block_kernel_and_turbomind_name_both_in_the_load_error",
    ("reason", QPN8, "marlin_selected"): MUTATION + "test_block_kernel_policy_codes_in_order",
    ("reason", QPN8, "requires_volta_or_turing"): MUTATION
    + "test_block_kernel_policy_codes_in_order",
    ("reason", QPN8, "grouped_bmm"): MUTATION + "test_block_kernel_can_implement_codes",
    ("reason", QPN8, "input_output_not_fp16"): MUTATION + "test_block_kernel_can_implement_codes",
    ("reason", QPN8, "not_static_e4m3_block"): MUTATION + "test_block_kernel_can_implement_codes",
    ("reason", QPN8, "weight_rank"): MUTATION + "test_block_kernel_can_implement_codes",
    ("reason", QPN8, "n_k_not_multiple_of_128"): MUTATION + "test_block_kernel_can_implement_codes",
    ("reason", QPN8, "missing_native_ops"): "tests/test_coverage.py::"
    "test_block_qpn8_refused_by_the_build_is_a_recorded_fallback",
    ("reason", TURBOMIND, "requires_volta"): MUTATION
    + "test_turbomind_can_implement_codes_in_order",
    ("reason", TURBOMIND, "not_block_scaled"): MUTATION
    + "test_turbomind_can_implement_codes_in_order",
    ("reason", TURBOMIND, "activation_not_fp16"): MUTATION
    + "test_turbomind_can_implement_codes_in_order",
    ("reason", TURBOMIND, "missing_native_ops"): MUTATION
    + "test_turbomind_can_implement_codes_in_order",
    ("rejected", TURBOMIND, ""): NEITHER,
    ("set", "disabled_kernels", ""): MUTATION
    + "test_a_disabled_block_kernel_and_turbomind_name_both_in_the_load_error",
    ("set", "linear_backend", ""): POLICY
    + "test_linear_backend_with_a_foreign_kernel_fails_through_the_w8a16_rule",
    ("set", "sm70_fp8.grouped_bmm_decode", ""): MUTATION
    + "test_grouped_decode_lane_needs_its_shape_option_and_ops",
    ("set", "sm70_fp8.prefill_fast_selector", ""): MUTATION
    + "test_prefill_prescaled_needs_both_fields_and_its_op",
    ("set", "sm70_fp8.prefill_prescaled", ""): MUTATION
    + "test_prefill_prescaled_needs_both_fields_and_its_op",
    ("op", fs.FP8_PREFILL_PRESCALED_OP, ""): MUTATION
    + "test_prefill_prescaled_runs_at_exactly_m_8000_and_only_without_exact_dense",
    ("set", "sm70_fp8.prescaled_decode", ""): POLICY + "test_explicit_enables",
    ("fallback", "sm70_fp8.block_qpn8", ""): "tests/test_coverage.py::"
    "test_block_qpn8_refused_by_the_build_is_a_recorded_fallback",
    ("fallback", "sm70_fp8.qpn8_pp2_tp4", ""): MUTATION
    + "test_non_explicit_pp2_tp4_with_missing_ops_records_its_own_field",
    ("set", "sm70_fp8.prescaled_shared_gate", ""): MUTATION
    + "test_prescaled_decode_of_the_shared_gate_layer_follows_its_own_field",
}
WRAPPER = (
    "the layer reaches the list wrapped as the W8A16 request (policies/linear_fp8_sm70.py), "
    "which is all either SM70 class is ever given"
)
VARIABLES = ("sm70_fp8", "sm70_turbomind.quant_backend", "linear_backend", "disabled_kernels")


def decision_sites() -> DecisionSites:
    sites: list[Site] = []
    for kernel in fs.FP8_SM70_KERNELS:
        sites += kernel_sites(kernel, POLICY_CODES[kernel.name])
    for name in lf.FOREIGN:
        sites += candidate_sites(name, (*lf.W8A16_RULE_CODES, *lf.DISABLED_CODES))
    sites += fallback_sites(f"sm70_fp8.{f}" for f in FALLBACKS)
    sites += op_sites(OPS)
    sites += variable_sites(field_keys(*VARIABLES))
    declarations: dict[Site, Declaration] = {
        Site(kind, subject, code): recorded_only(PINNED, test)
        for (kind, subject, code), test in RECORDED.items()
    }
    for name in (QPN8, TURBOMIND):
        declarations[Site("reason", name, "not_w8a16_layout")] = unreachable(WRAPPER)
    for name in lf.FOREIGN:
        # Evaluated only when neither SM70 kernel passes; never chosen for a W8A16 layer.
        declarations[Site("rejected", name)] = recorded_only(PINNED, NEITHER)
        declarations[Site("reason", name, "not_w8a16_consumer")] = recorded_only(PINNED, NEITHER)
        declarations[Site("chosen", name)] = unreachable(
            "a foreign kernel never consumes the SM70 W8A16 layout (not_w8a16_consumer is "
            "its first gate), so it is never chosen for this layer"
        )
        declarations[Site("reason", name, "disabled_kernel")] = unreachable(
            "the W8A16 rule refuses a foreign kernel before disabled_kernels is asked"
        )
    return DecisionSites(tuple(sites), declarations)


@dataclass(frozen=True)
class Fp8LinearCategory(Category):
    name: str = NAME
    basis: str = LINEAR_BASIS
    description = (
        "Volta block-FP8 linears (five layers a row): TurboMind FP8, QPN8 "
        "layouts, the fp8-policy grid"
    )

    @cached_property
    def _rows(self) -> tuple[RowSpec, ...]:
        # 6.3: the DFlash2 verifier default reaches the 27b_fp8 dflash rows through the
        # model facts and the verifier bridge of sm70_fp8.qpn8, not an overlay.
        rows = matrix_rows(MODELS, CAPABILITY)
        by_id = {r.id: r for r in rows}
        probes = (*PROBES, *GRID_PROBES, *OWN_PROBES)
        return (*rows, *(p.apply(by_id[p.base]) for p in probes))

    def rows(self) -> Sequence[RowSpec]:
        return self._rows

    def invariances(self) -> Sequence[Invariance]:
        return INVARIANCES

    def decision_sites(self) -> DecisionSites:
        return decision_sites()

    def route_schema(self) -> Mapping[str, Any]:
        """`layers_route`: each layer's linear or error route by name, shared workspaces."""
        return route_fragment(__name__)

    def route(self, ctx: ReplayContext) -> dict[str, Any]:
        row = ctx.row
        workspaces = fs.Fp8Workspaces(row.engine_facts.get("workspace_elements"))
        layers: dict[str, Any] = {}
        for description in row.layer["layers"]:
            layers[description["name"]] = self._layer_route(ctx, description, workspaces)
        if row.engine_facts.get(GRID_FLAG):
            for route in layers.values():
                if "flags" in route:
                    route["flags"] = dict(sorted({**route["flags"], **_grid_flags(ctx)}.items()))
        return {"layers": layers, "workspaces": workspaces.bytes_json()}

    def _layer_route(
        self, ctx: ReplayContext, description: Mapping[str, Any], workspaces: fs.Fp8Workspaces
    ) -> dict[str, Any]:
        built = build_layer(description)
        ns = ctx.namespace
        mark = ns.mark()
        try:
            prepared = load_fp8_sm70(
                built,
                ctx.policy,
                ctx.hardware,
                ctx.row.engine,
                ns,
                tensors=built.checkpoint_tensors("meta"),
                workspaces=workspaces,
            )
        except SelectionError as exc:
            return error_route(exc)
        prepare_calls = ns.since(mark)
        dispatch: list[dict[str, Any]] = []

        def issue(apply: Any, x: Any, m: int) -> None:
            start = ns.mark()
            apply(x)
            dispatch.extend({"op": c["op"], "plan": {"m": m, **c["plan"]}} for c in ns.since(start))

        fused = built.role == FUSED_ROLE and not built.grouped
        if prepared.apply is not None:
            for m in ctx.token_counts(TOKEN_COUNTS):
                x = _activations(built, m)
                issue(prepared.apply, x, m)
                if fused and prepared.apply_gated is not None:
                    issue(prepared.apply_gated, x, m)
        return route_from_prepared(prepared, prepare_calls, dispatch)


def _activations(layer: BlockFp8Layer, m: int) -> Any:
    shape = (m, layer.groups, layer.input_size) if layer.grouped else (m, layer.input_size)
    return meta_tensors.empty(shape, layer.act_dtype, "meta")


def _grid_flags(ctx: ReplayContext) -> dict[str, Any]:
    """What the fp8-policy grid records beside the route: the legacy marlin force, the MoE
    dequant request (never a dense route change) and the checkpoint admission (2.1)."""
    admitted, reason = checkpoint_admission(dict(ctx.row.variables), ctx.hardware.capability)
    flags: dict[str, Any] = {
        "force_marlin": force_marlin(ctx.policy),
        "moe_dequant_requested": bool(ctx.policy.value("sm70_fp8.moe_dequant_fallback")),
        "admitted": admitted,
    }
    if reason is not None:
        flags["admission_reason"] = reason.message
    return flags


FP8_CATEGORY = Fp8LinearCategory()
