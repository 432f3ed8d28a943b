"""Category sm70-fp8-moe: block-FP8 mixture-of-experts layers on Volta
(docs/contracts/fp8moe.md §7).

One routed-expert layer per row, loaded through `policies.fp8_moe.load_fp8_moe` (both banks
prepared expert by expert through the recording namespace), then dispatched at each token
count of `TOKEN_COUNTS` within the row's budget with router ids and weights on meta. A row
records the kernel or the status, the verdicts, the construction flags, resident bytes,
prepare and dispatch calls with their plans, per-M `stages` and the load's `warnings`; a
layer that fails records its error with the phase (load, or dispatch and M).

Rows: the 540-row matrix (only 35b_a3b_fp8 has FP8 MoE layers), the 38 edge probes of §7.2
and the 54-cell policy grid of §7.3.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from native import meta_tensors
from native.kernels import fp8_moe as fm
from native.kernels import fp8_sm70 as fp8_kernels
from native.kernels.common import SILU_AND_MUL_OP
from native.kernels.fp8_sm70 import FP8_PREPARE_OP
from policies.categories.basis import MOE_BASIS
from policies.categories.matrix import (
    KV_NEVER_READ,
    NOT_APPLICABLE,
    ModelScope,
    matrix_rows,
    row_id,
)
from policies.categories.route_schemas import route_fragment
from policies.categories.sites import field_keys
from policies.fp8_moe import TURBOMIND, load_fp8_moe
from policies.fp8_moe_variables import FP8_MOE_FIELDS, field_of
from policies.linear_fp8_sm70 import checkpoint_admission, force_marlin
from policies.variables import env_var as var
from routectl.category import Category
from routectl.errors import SelectionError
from routectl.replay.harness import ReplayContext, route_from_prepared
from routectl.rows import Invariance, Probe, RowSpec
from routectl.sites import (
    DecisionSites,
    Site,
    candidate_sites,
    op_sites,
    recorded_only,
    variable_sites,
)

NAME = "sm70-fp8-moe"
CAPABILITY = 70
TOKEN_COUNTS = (0, 1, 2, 8, 32, 33, 64, 65, 4096, 8192)
PREFIX = "model.layers.0.mlp.experts"

# docs/contracts/fp8moe.md §7.1 and §9 (open question 2): E, top-k, hidden and the total
# intermediate from the fork's NVFP4 MoE contract row for Qwen3.6-35B-A3B and its migration
# record; the 40 MoE layers from a third-party article only.
QWEN36_35B = {
    "prefix": PREFIX,
    "layer_id": 0,
    "experts": 256,
    "top_k": 8,
    "hidden": 2048,
    "intermediate": 512,
    "block": [128, 128],
}
MOE_LAYERS = {"35b_a3b_fp8": 40}

MODELS = (
    ModelScope(
        "27b_dflash2_nvfp4", status=(NOT_APPLICABLE, "CT NVFP4 dense checkpoint: no FP8 MoE layer")
    ),
    ModelScope(
        "flash_next_mtp4_nvfp4",
        status=(NOT_APPLICABLE, "ModelOpt NVFP4 MoE checkpoint: the NVFP4 family's layers"),
    ),
    ModelScope(
        "35b_a3b_awq", status=(NOT_APPLICABLE, "AWQ MoE checkpoint: the AWQ MoE family's layers")
    ),
    ModelScope("27b_fp8", status=(NOT_APPLICABLE, "dense block-FP8 checkpoint: no MoE layer")),
    ModelScope("35b_a3b_fp8", layer=lambda tp: QWEN36_35B),
)

BASE = row_id("35b_a3b_fp8", "fp8_e4m3", 4, "none", 8, 8192)
GRID_BASE = row_id("35b_a3b_fp8", "fp8_e4m3", 2, "none", 4, 8192)
GRID_FLAG = "policy_grid"


def _own(key: str) -> str:
    # The family's own fields: looked up in its table (the project's whole table is
    # assembled from the family list, which imports this module).
    variable = field_of(key).variable
    assert variable is not None, key
    return variable


def moe(name: str, value: str) -> dict[str, str]:
    return {_own(f"sm70_fp8_moe.{name}"): value}


def st(name: str, value: str) -> dict[str, str]:
    return {_own(f"sm70_moe_single_token.{name}"): value}


BATCHED_OFF = moe("batched", "0")


def geometry(experts: int, top_k: int, hidden: int, intermediate: int) -> dict[str, Any]:
    return {"experts": experts, "top_k": top_k, "hidden": hidden, "intermediate": intermediate}


def _ref_probe(b: int, i: int, n: int) -> Probe:
    """The reference tool's FP8 rows `fp8:M*:B{b}:I{i}:S0:N{n}` (docs/contracts/fp8moe.md
    §8.1): its generic E4 top-k 2 layer with H = I = 128 on one rank."""
    removed = [fm.ST_COMPACT_W13_OP, fm.WEIGHTED_REDUCE_OP, fm.LEGACY_OP]
    if not n:
        removed += [fm.ST_INDEXED_W13_OP, fm.ST_INDEXED_STAGE_OP]
    return Probe(
        f"ref_b{b}_i{i}_n{n}",
        BASE,
        variables={
            **moe("batched", str(b)),
            **moe("legacy_compact", "0"),
            **st("indexed_stage", str(i)),
        },
        layer={**geometry(4, 2, 128, 128), "local_intermediate": 128},
        remove_ops=tuple(removed),
        doc=f"reference FP8 rows B{b} I{i} N{n}",
    )


PROBES: tuple[Probe, ...] = (
    Probe("batched_off", BASE, variables=BATCHED_OFF),
    Probe("legacy_compact_off", BASE, variables=moe("legacy_compact", "0")),
    Probe("legacy_op_missing", BASE, remove_ops=(fm.LEGACY_OP,)),
    Probe("legacy_top_k_descriptor", BASE, variables=moe("compact_exact_layout", "0")),
    Probe("legacy_native_unpermute", BASE, variables=moe("compact_native_unpermute", "1")),
    Probe("legacy_decomposed", BASE, variables=moe("compact_decomposed", "1")),
    Probe("w13_per_expert", BASE, variables=moe("w13_per_expert", "1")),
    Probe("w2_per_expert", BASE, variables=moe("w2_per_expert", "1")),
    Probe("permute_scratch_off", BASE, variables=moe("permute_scratch", "0")),
    Probe("permute_scratch_op_missing", BASE, remove_ops=(fm.PERMUTE_SCRATCH_OP,)),
    Probe("st_w2_dense", BASE, variables={**BATCHED_OFF, **st("fp8_indexed_w2", "0")}),
    Probe("st_indexed", BASE, variables={**BATCHED_OFF, **st("indexed_stage", "1")}),
    Probe("st_compact_w13", BASE, variables={**BATCHED_OFF, **st("compact_w13", "1")}),
    Probe(
        "st_compact_op_missing",
        BASE,
        variables={**BATCHED_OFF, **st("compact_w13", "1"), **st("indexed_stage", "1")},
        remove_ops=(fm.ST_COMPACT_W13_OP,),
    ),
    Probe("st_unpermute", BASE, variables={**BATCHED_OFF, **st("unpermute", "0")}),
    Probe("st_reduce_op_missing", BASE, variables=BATCHED_OFF, remove_ops=(fm.WEIGHTED_REDUCE_OP,)),
    Probe("turbo_off", BASE, variables={var("sm70_fp8.enabled"): "0"}),
    Probe(
        "moe_dequant",
        BASE,
        variables={var("sm70_fp8.enabled"): "0", var("sm70_fp8.moe_dequant_fallback"): "1"},
    ),
    Probe("moe_dequant_alone", BASE, variables={var("sm70_fp8.moe_dequant_fallback"): "1"}),
    Probe("backend_marlin", BASE, variables={var("sm70_turbomind.quant_backend"): "marlin"}),
    Probe("capability_72", BASE, capability=72),
    Probe("capability_75", BASE, capability=75),
    Probe("per_tensor_weights", BASE, layer={"block": None}, doc="no block size: error"),
    Probe("block_64", BASE, layer={"block": [64, 64]}),
    Probe("expert_bias", BASE, layer={"bias": True}),
    Probe("prepare_op_missing", BASE, remove_ops=(FP8_PREPARE_OP,)),
    Probe("gemm_op_missing", BASE, remove_ops=(fm.GEMM_OP,), doc="error at dispatch, M 2"),
    Probe(
        "partial_block_tp4",
        BASE,
        layer=geometry(128, 8, 2048, 768),
        doc="Qwen3-30B-A3B, local I 192: W13 scale rows mismatch at load",
    ),
    Probe(
        "flash_next_geometry_tp4",
        BASE,
        layer=geometry(512, 10, 2560, 640),
        doc="Qwen3.8 Flash-Next, local I 160: W13 scale rows mismatch at load",
    ),
    Probe(
        "partial_96_tp4",
        BASE,
        layer=geometry(128, 8, 2048, 384),
        doc="local I 96: loads with partial 128-blocks, flagged and warned",
    ),
    *(_ref_probe(b, i, n) for b, i, n in itertools.product((0, 1), repeat=3)),
)

GRID_BACKENDS = ("auto", "turbomind", "marlin")
GRID_SWITCH = ("unset", "0", "1")
GRID_DEQUANT = ("0", "1")


def _grid_probe(backend: str, tm: str, moe_dq: str, dq: str) -> Probe:
    variables = {var("sm70_turbomind.quant_backend"): backend, var("sm70_fp8.dequant_fallback"): dq}
    for key, value in (("sm70_fp8.enabled", tm), ("sm70_fp8.moe_dequant_fallback", moe_dq)):
        if value != "unset":
            variables[var(key)] = value
    return Probe(
        f"moe_policy_{backend}_tm_{tm}_moe_{moe_dq}_dq_{dq}",
        GRID_BASE,
        variables=variables,
        engine_facts={GRID_FLAG: True},
    )


GRID_PROBES = tuple(
    _grid_probe(*cell)
    for cell in itertools.product(GRID_BACKENDS, GRID_SWITCH, GRID_SWITCH, GRID_DEQUANT)
)


def call_inputs(m: int, layer: fm.Fp8MoeLayer) -> tuple[Any, Any, Any]:
    """Activations and the router's outputs of one call, on meta."""
    return (
        meta_tensors.empty((m, layer.hidden), "float16", "meta"),
        meta_tensors.empty((m, layer.top_k), "int32", "meta"),
        meta_tensors.empty((m, layer.top_k), "float32", "meta"),
    )


def collapse_banks(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive equal prepare calls of one bank as one record with `experts: E`
    (docs/contracts/fp8moe.md §4.1): the prepare op is shared with the FP8 linears, whose
    catalogue entry records every call."""
    out: list[dict[str, Any]] = []
    for call in calls:
        if call["op"] == FP8_PREPARE_OP:
            last = out[-1] if out else None
            if last is not None and last["op"] == FP8_PREPARE_OP:
                plan = {k: v for k, v in last["plan"].items() if k != "experts"}
                if plan == call["plan"]:
                    last["plan"]["experts"] += 1
                    continue
            out.append({"op": call["op"], "plan": {**call["plan"], "experts": 1}})
        else:
            out.append(call)
    return out


def resident_bytes(tensors: Mapping[str, int], scratch_permute: bool) -> dict[str, Any]:
    """Banks, pointer tables, persistent workspace; the native sort workspace is unknown
    (null) with the scratch permute and 0 without it."""
    banks = {
        k: v
        for k, v in tensors.items()
        if not k.startswith("workspace_") and k.endswith(("_codes", "_scales", "_fp16"))
    }
    tables = {k: v for k, v in tensors.items() if k.endswith("_ptrs")}
    workspace = {
        k.removeprefix("workspace_"): v for k, v in tensors.items() if k.startswith("workspace_")
    }
    return {
        "banks": sum(banks.values()),
        "codes": sum(v for k, v in banks.items() if k.endswith("_codes")),
        "scales": sum(v for k, v in banks.items() if k.endswith("_scales")),
        "pointer_tables": sum(tables.values()),
        "workspace": sum(workspace.values()),
        "sort_workspace": None if scratch_permute else 0,
        "tensors": dict(sorted(tensors.items())),
        "total": sum(tensors.values()),
        "scratch": {},
    }


def grid_flags(ctx: ReplayContext) -> dict[str, Any]:
    admitted, _ = checkpoint_admission(dict(ctx.row.variables), ctx.hardware.capability)
    return {
        "force_marlin": force_marlin(ctx.policy),
        "moe_dequant_requested": bool(ctx.policy.value("sm70_fp8.moe_dequant_fallback")),
        "admitted": admitted,
    }


INVARIANCES = (
    Invariance(
        "fp8_moe_route_ignores_kv_spec_c",
        ("kv", "spec", "c"),
        ("route",),
        why=f"{KV_NEVER_READ}; the FP8 MoE lanes read the TP size and the token count "
        "only, never speculation or concurrency",
    ),
    Invariance(
        "fp8_moe_kernel_ignores_q",
        ("kv", "spec", "c", "q"),
        ("route.kernel", "route.fallback", "route.bytes", "route.prepare", "route.warnings"),
        why="the budget only drops the token counts above it from route.stages and "
        "route.dispatch; selection and preparation never read it",
    ),
)


# The method candidate (policies/fp8_moe.py), every op the family prepares or dispatches,
# and the fields it reads. The lanes per token count are recorded as `stages`, not yet
# declared as sites; construction and prepare refusals fail closed (error rows).
FP8_MOE_CODES = ("capability", "turbomind_off")
OPS = (
    fp8_kernels.FP8_PREPARE_OP,
    fp8_kernels.STRIDED_PTRS_OP,
    fm.LEGACY_OP,
    fm.ST_DENSE_W13_OP,
    fm.ST_INDEXED_W13_OP,
    fm.ST_COMPACT_W13_OP,
    fm.ST_DENSE_STAGE_OP,
    fm.ST_INDEXED_STAGE_OP,
    fm.GEMM_OP,
    fm.PER_EXPERT_OP,
    fm.DENSE_STAGE_OP,
    fm.PERMUTE_OP,
    fm.PERMUTE_SCRATCH_OP,
    fm.UNPERMUTE_OP,
    fm.EXACT_LAYOUT_OP,
    fm.WEIGHTED_REDUCE_OP,
    SILU_AND_MUL_OP,
)


def fm_fields() -> list[str]:
    return [f.name for f in FP8_MOE_FIELDS if f.section == "sm70_fp8_moe"]


# The section's three diagnostics never decide a route (policies/variables.py).
DIAGNOSTICS = ("compact_compare", "compact_compare_reports", "strict_compare_fail")
VARIABLES = (
    "sm70_fp8.enabled",
    "sm70_fp8.dequant_fallback",
    "sm70_fp8.moe_dequant_fallback",
    "sm70_turbomind.quant_backend",
    *(f"sm70_fp8_moe.{name}" for name in fm_fields() if name not in DIAGNOSTICS),
)
PINNED = "the row count is pinned at 632 (docs/contracts/fp8moe.md), so a resolution test proves it"
SINGLE_TOKEN_TEST = "tests/test_fp8_moe_contract.py::test_defaults_and_the_single_token_inputs"


def decision_sites() -> DecisionSites:
    sites = [
        *candidate_sites(fm.TurboMindFp8MoE.name, FP8_MOE_CODES),
        *op_sites(OPS),
        *variable_sites(field_keys(*VARIABLES)),
    ]
    declarations = {
        Site("set", f"sm70_fp8_moe.single_token_{name}"): recorded_only(
            f"{PINNED}: the single-token inputs resolve the decomposed lane's stages",
            SINGLE_TOKEN_TEST,
        )
        for name in ("w13", "w2", "reduce")
    }
    return DecisionSites(tuple(sites), declarations)


class Fp8MoeCategory(Category):
    name = NAME
    basis = MOE_BASIS
    description = (
        "block-FP8 mixture-of-experts layers on SM70: TurboMind FP8 MoE lanes per token "
        "count, the dequant fallback and the FP8 MoE policy grid"
    )

    def __init__(self) -> None:
        rows = matrix_rows(MODELS, CAPABILITY)
        by_id = {r.id: r for r in rows}
        self._rows = (*rows, *(p.apply(by_id[p.base]) for p in (*PROBES, *GRID_PROBES)))

    def rows(self) -> Sequence[RowSpec]:
        return self._rows

    def invariances(self) -> Sequence[Invariance]:
        return INVARIANCES

    def decision_sites(self) -> DecisionSites:
        return decision_sites()

    def route(self, ctx: ReplayContext) -> dict[str, Any]:
        ns = ctx.namespace
        row = ctx.row
        mark = ns.mark()
        try:
            prepared = load_fp8_moe(
                row.layer,
                ctx.policy,
                ctx.hardware,
                row.engine,
                ns,
                environ=dict(row.variables),
            )
        except SelectionError as exc:
            return _error(exc, "load", None)
        prepare_calls = collapse_banks(ns.since(mark))
        layer: fm.Fp8MoeLayer = prepared.state["layer"]
        dispatch: list[dict[str, Any]] = []
        stages: list[dict[str, Any]] = []
        if prepared.apply is not None:
            dispatcher = prepared.state["dispatcher"]
            for m in ctx.token_counts(TOKEN_COUNTS):
                x, ids, weights = call_inputs(m, layer)
                mark = ns.mark()
                try:
                    prepared.apply(x, ids, weights)
                except SelectionError as exc:
                    return _error(exc, "dispatch", m)
                for call, stage in zip(ns.since(mark), dispatcher.tags, strict=True):
                    plan = {**call["plan"], "m": m, "stage": stage}
                    dispatch.append({"op": call["op"], "plan": plan})
                stages.append(dispatcher.last)
        route = route_from_prepared(prepared, prepare_calls, dispatch)
        scratch = route["flags"].get("permute") == fm.PERMUTE_SCRATCH_OP
        route["bytes"] = resident_bytes(route["bytes"]["tensors"], scratch)
        route["stages"] = stages
        route["warnings"] = list(prepared.state.get("warnings", ()))
        if row.engine_facts.get(GRID_FLAG):
            route["flags"] = dict(sorted({**route["flags"], **grid_flags(ctx)}.items()))
        del route["fallbacks"], route["prepared_layout"]
        return route

    def route_schema(self) -> Mapping[str, Any]:
        """`fp8_moe_route` (loaded or status) and `fp8_moe_error` (with its phase)."""
        return route_fragment(__name__)

    def model_totals(self, row: RowSpec, route: Mapping[str, Any]) -> dict[str, int] | None:
        layers = MOE_LAYERS.get(row.model)
        if layers is None or route.get("kernel") != TURBOMIND:
            return None
        size = route["bytes"]
        return {
            "layers": layers,
            "banks": layers * size["banks"],
            "total": layers * size["total"],
        }

    def matrix_reason(self, route: Mapping[str, Any]) -> str | None:
        """A probe's deciding line: the status the family gave it, or the load warning."""
        status = route.get("status")
        if status:
            return f"[{status['code']}] {status['message']}"
        warnings = route.get("warnings") or []
        if warnings:
            return f"loads with warning [{warnings[0]['code']}] {warnings[0]['message']}"
        return None

    def explain_lines(self, route: dict[str, Any]) -> list[str]:
        """Per-M lanes, the load warnings and the failure phase (popped)."""
        lines: list[str] = []
        if "phase" in route:
            phase = route.pop("phase")
            m = route.pop("m")
            lines.append(f"failed at {phase}" + (f", M={m}" if m is not None else ""))
        for warning in route.pop("warnings", []):
            lines.append(f"warning [{warning['code']}] {warning['message']}")
        if "stages" in route:
            entries = route.pop("stages")
            if entries:
                lines.append("lanes per token count:")
            for e in entries:
                lines.append(
                    f"  M={e['m']}: {e['lane']} (w13 {e['w13']}, w2 {e['w2']}, "
                    f"reduce {e['reduce']}, {e['buffers']} buffers)"
                )
        return lines


def _error(exc: SelectionError, phase: str, m: int | None) -> dict[str, Any]:
    return {
        "error": {"code": exc.code, "message": exc.message},
        "verdicts": [v.to_json() for v in exc.verdicts],
        "phase": phase,
        "m": m,
    }


FP8_MOE_CATEGORY = Fp8MoeCategory()

__all__ = [
    "BASE",
    "FP8_MOE_CATEGORY",
    "GRID_BASE",
    "GRID_PROBES",
    "MODELS",
    "NAME",
    "PROBES",
    "TOKEN_COUNTS",
    "Fp8MoeCategory",
    "collapse_banks",
]
