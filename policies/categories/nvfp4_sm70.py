"""Category sm70-nvfp4-linear: CT NVFP4 weight-only linears on Volta (docs/contracts/core.md §5)."""

from __future__ import annotations

from typing import Any

from native.kernels import nvfp4_sm70 as nv
from policies import qualification as q
from policies.categories.basis import LINEAR_BASIS
from policies.categories.linear import LinearCategory, layer
from policies.categories.matrix import KV_NEVER_READ, NOT_APPLICABLE, ModelScope, row_id
from policies.categories.sites import DISABLED_CODE, field_keys, kernel_sites
from policies.variables import env_var as var
from routectl.rows import Invariance, Probe
from routectl.sites import (
    DecisionSites,
    Declaration,
    Site,
    fallback_sites,
    op_sites,
    recorded_only,
    unreachable,
    variable_sites,
)

NAME = "sm70-nvfp4-linear"
TOKEN_COUNTS = (1, 8, 32, 64, 1024)

QPN2_OPS = (
    "nvfp4_qpn2_prepare_sm70",
    "nvfp4_qpn2_gemm_sm70_out",
    "nvfp4_qpn2_gated_sm70_out",
    "nvfp4_qpn2_dispatch_sm70_out",
)
QPN4_OPS = (
    "nvfp4_qpn4_prepare_sm70",
    "nvfp4_qpn4_prepare_scale_code_sm70",
    "nvfp4_qpn4_dequantize_sm70_out",
    "nvfp4_qpn4_prefill_sm70_out",
    "nvfp4_qpn4_dispatch_sm70_out",
)
SHARED_OPS = ("nvfp4_qpn2_prepare_scales_sm70", "nvfp4_qpn2_tm_dispatch_sm70_out")
PREFILL_OP = "nvfp4_qpn2_prefill_dispatch_sm70_out"
COMPACT_VERSION = "nvfp4_qpn2_compact_scales_version_sm70"

GDN = "in_proj_qkvz"


def gdn_layer(tp: int) -> dict[str, Any]:
    """The 27B GDN in_proj_qkvz: N 4120 per rank at TP4, 8240 at TP2 (padded to 32 natively)."""
    return layer("nvfp4", GDN, 5120, 4120 if tp == 4 else 8240)


MODELS = (
    ModelScope("27b_dflash2_nvfp4", layer=gdn_layer),
    ModelScope(
        "flash_next_mtp4_nvfp4",
        status=(
            NOT_APPLICABLE,
            "ModelOpt NVFP4 checkpoint: not a compressed-tensors weight-only NVFP4 linear",
        ),
    ),
    ModelScope("35b_a3b_awq", status=(NOT_APPLICABLE, "AWQ checkpoint: no NVFP4 linear")),
)

BASE = row_id("27b_dflash2_nvfp4", "fp8_e4m3", 4, "dflash", 4, 8192)
QPN4_ENGINE = {"spec_method": "none", "spec_tokens": 0, "selector_top_k": 0, "max_num_seqs": 1}
DOWN = layer("nvfp4", "down_proj", 4352, 5120)
GATE_UP = layer("nvfp4", "gate_up_proj", 5120, 8704)


def probe(
    name: str,
    *,
    batch_layouts: bool = False,
    qpn4: bool = False,
    variables: dict[str, str] | None = None,
    **changes: Any,
) -> Probe:
    """Probes run with batch layouts off unless stated; the qpn4_* probes use spec none, c1."""
    overlay = dict(variables or {})
    if not batch_layouts:
        overlay[var("sm70_turbomind.batch_layouts")] = "0"
    return Probe(name, BASE, variables=overlay, engine=QPN4_ENGINE if qpn4 else {}, **changes)


PROBES = (
    probe(
        "native_missing",
        remove_ops=(*QPN2_OPS, *QPN4_OPS, *SHARED_OPS, PREFILL_OP),
        doc="no QPN2/QPN4/prefill/shared ops; compact op and its version getter kept",
    ),
    probe("shared_native_missing", remove_ops=SHARED_OPS),
    probe("compact_revision_zero", abi={COMPACT_VERSION: 0}),
    probe("compact_enabled", doc="the base itself: compact scales on"),
    probe("batch_supersedes_compact", batch_layouts=True),
    probe("new_role_retains_fallback", layer={"role": "unqualified_projection"}),
    probe("misaligned_k", layer={"k": 5000}),
    probe("gated_projection", layer=GATE_UP),
    probe("qpn2_off", variables={var("sm70_nvfp4.qpn2"): "0"}),
    probe("prefill_off", variables={var("sm70_nvfp4.prefill"): "0"}),
    probe("separate_codes", variables={var("sm70_nvfp4.shared_weight"): "0"}),
    probe("persistent_scales", variables={var("sm70_nvfp4.shared_scales"): "0"}),
    probe("legacy_threshold", variables={var("sm70_nvfp4.prefill_min_m"): "9"}),
    probe("qpn4_down", qpn4=True, layer=DOWN),
    probe(
        "qpn4_gate", qpn4=True, layer=GATE_UP, variables={var("sm70_nvfp4.dense_gated_silu"): "1"}
    ),
    probe("qpn4_native_missing", qpn4=True, layer=DOWN, remove_ops=QPN4_OPS),
    probe("qpn4_workspace_missing", qpn4=True, layer=DOWN, engine_facts={"workspace_elements": 0}),
    probe("qpn4_off", qpn4=True, layer=DOWN, variables={var("sm70_nvfp4.qpn4"): "0"}),
)


INVARIANCES = (
    Invariance("kv_never_changes_a_route", ("kv",), ("route",), why=KV_NEVER_READ),
    Invariance(
        "linear_route_ignores_kv_c_q",
        ("kv", "c", "q"),
        ("route.kernel", "route.prepared_layout", "route.fallbacks", "route.dispatch"),
        why="the matrix layer (the GDN in_proj_qkvz) is no QPN4 role, so QPN4's C1 limit "
        "never decides (only its verdict's message names max_num_seqs); every token count "
        "(at most 1024) fits every budget",
    ),
)

# The family's policy gates, per candidate (policies/linear_nvfp4.py), before the class's own.
POLICY_CODES = {
    nv.Qpn4NvFp4LinearKernel.name: (
        DISABLED_CODE,
        "qpn4_disabled",
        *q.QPN4_WORKLOAD_CODES,
        *q.QPN4_LAYER_CODES,
        "insufficient_qpn4_workspace",
    ),
    nv.Qpn2NvFp4LinearKernel.name: (DISABLED_CODE, "qpn2_disabled", *q.QPN2_ROLE_CODES),
    nv.TurboMindNvFp4LinearKernel.name: (DISABLED_CODE,),
}
# Every op the family's Python code prepares or dispatches; the ops the native dispatchers
# call inside (QPN2 GEMM and gated GEMM, the compact-scale GEMM, QPN4 dequantize and
# prefill) are required ops, never recorded calls.
OPS = (
    nv.TM_PREPARE_OP,
    nv.QPN2_PREPARE_OP,
    *nv.QPN2_SHARED_OPS,
    nv.QPN2_DISPATCH_OP,
    nv.QPN2_PREFILL_DISPATCH_OP,
    nv.QPN4_PREPARE_OP,
    nv.QPN4_PREPARE_SCALE_CODE_OP,
    nv.QPN4_DISPATCH_OP,
)
FALLBACKS = ("qpn4", "qpn2", "shared_weight", "shared_scales")
# The fields the SM70 family reads (dense_qpn2 of the section is the Turing family's).
VARIABLES = (
    *(f"sm70_nvfp4.{name}" for name in ("qpn2", "qpn4", "dense_gated_silu", "prefill")),
    *(f"sm70_nvfp4.{name}" for name in ("prefill_min_m", "shared_weight", "shared_scales")),
    "sm70_turbomind.nvfp4",
    "sm70_turbomind.quant_backend",
    "sm70_turbomind.batch_layouts",
)

QPN4 = nv.Qpn4NvFp4LinearKernel.name
QPN2 = nv.Qpn2NvFp4LinearKernel.name
TURBOMIND = nv.TurboMindNvFp4LinearKernel.name
ENTRY = (
    "the family is entered only on exactly SM70 (family_entry), where every Volta class "
    "is supported"
)
LAYOUT = "every row describes a compressed-tensors NVFP4 layer, the only one this family loads"
LAST = (
    "TurboMind is the last candidate and is refused only by disabled_kernels or capability: "
    "neither is in a row, as 342 rows are pinned (docs/contracts/core.md)"
)
PINNED = "the row count is pinned at 342 (docs/contracts/core.md), so a test proves it"
CAPABILITY = "tests/test_capability_nvfp4.py::"
SELECTORS = "tests/test_selectors.py::"


def _declarations() -> dict[Site, Declaration]:
    out: dict[Site, Declaration] = {}
    for kernel in (QPN4, QPN2, TURBOMIND):
        out[Site("reason", kernel, "requires_sm70_or_sm72")] = unreachable(ENTRY)
        out[Site("reason", kernel, "not_ct_nvfp4_layout")] = unreachable(LAYOUT)
    disabled = f"{PINNED}: disabling by name"
    for kernel in (QPN4, QPN2):
        test = "test_qpn4_disabled_by_name_leaves_the_down_proj_to_the_next_candidate"
        if kernel == QPN2:
            test = "test_disabled_kernels_by_variable_and_by_config"
        out[Site("reason", kernel, DISABLED_CODE)] = recorded_only(disabled, SELECTORS + test)
    out[Site("reason", TURBOMIND, DISABLED_CODE)] = unreachable(LAST)
    out[Site("rejected", TURBOMIND)] = unreachable(LAST)
    shapes = {
        "packed_weight_rank": "test_qpn2_rank_k_and_n_rules",
        "k_not_positive": "test_qpn2_rank_k_and_n_rules",
        "n_not_positive": "test_qpn2_rank_k_and_n_rules",
        "local_dims_mismatch": "test_qpn2_local_dimensions_must_match_the_packed_weight",
        "gated_n_not_multiple_of_64": "test_qpn2_gated_layers_need_n_multiple_of_64",
    }
    for code, test in shapes.items():
        out[Site("reason", QPN2, code)] = recorded_only(
            f"{PINNED}: a layer shape no row has", CAPABILITY + test
        )
    qualification = {
        "qpn4_down_k": "test_qpn4_down_proj_rules",
        "qpn4_down_n": "test_qpn4_down_proj_rules",
        "qpn4_gate_up_needs_dense_gated_silu": "test_qpn4_gate_up_rules",
        "qpn4_gate_up_k": "test_qpn4_gate_up_rules",
        "qpn4_gate_up_n": "test_qpn4_gate_up_rules",
        "qpn4_gate_up_widths": "test_qpn4_gate_up_rules",
    }
    for code, test in qualification.items():
        out[Site("reason", QPN4, code)] = recorded_only(
            f"{PINNED}: a QPN4 layer rule no row breaks", "tests/test_qualification.py::" + test
        )
    entry = f"{PINNED}: rows outside the family are status rows"
    for key in ("sm70_turbomind.nvfp4", "sm70_turbomind.quant_backend"):
        out[Site("set", key)] = recorded_only(
            entry, SELECTORS + "test_family_entry_follows_use_turbomind"
        )
    out[Site("op", nv.QPN2_DISPATCH_OP)] = recorded_only(
        f"{PINNED}: the plain entry needs shared weight and prefill both off",
        CAPABILITY + "test_dispatch_entry_and_prefill_min_m",
    )
    return out


def decision_sites() -> DecisionSites:
    sites: list[Site] = []
    for kernel in nv.NVFP4_SM70_KERNELS:
        sites += kernel_sites(kernel, POLICY_CODES[kernel.name])
    sites += fallback_sites(f"sm70_nvfp4.{f}" for f in FALLBACKS)
    sites += op_sites(OPS)
    sites += variable_sites(field_keys(*VARIABLES))
    return DecisionSites(tuple(sites), _declarations())


def category(loaders: dict[str, Any]) -> LinearCategory:
    return LinearCategory(
        name=NAME,
        basis=LINEAR_BASIS,
        capability=70,
        models=MODELS,
        probes=PROBES,
        loaders=loaders,
        token_counts=TOKEN_COUNTS,
        description="CT NVFP4 weight-only linears on SM70: Qpn4, Qpn2, TurboMind",
        declared_invariances=INVARIANCES,
        sites=decision_sites,
    )
