"""Category sm70-awq-linear: AWQ dense linears on Volta (docs/contracts/core.md §2.3, §5)."""

from __future__ import annotations

from typing import Any

from native import awq_schemas
from native.kernels import awq_dense as awq
from native.kernels.common import SILU_AND_MUL_OP
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

NAME = "sm70-awq-linear"
TOKEN_COUNTS = (1, 4, 8, 4096, 8192)
AWQ_OPS = ("awq_sm70_prepare", "awq_gemm_sm70_out", "awq_sm70_dequantize_out")
HIDDEN = 2560
QKV_N = 3584


def awq_layer(role: str, group: int) -> dict[str, Any]:
    return layer("awq", role, HIDDEN, QKV_N if role == "qkv_proj" else HIDDEN, group=group)


MODELS = (
    ModelScope("27b_dflash2_nvfp4", status=(NOT_APPLICABLE, "NVFP4 checkpoint: no AWQ linear")),
    ModelScope("flash_next_mtp4_nvfp4", status=(NOT_APPLICABLE, "NVFP4 checkpoint: no AWQ linear")),
    ModelScope("35b_a3b_awq", layer=lambda tp: awq_layer("qkv_proj", 32)),
)

BASE = row_id("35b_a3b_awq", "fp8_e4m3", 4, "none", 4, 8192)


FUSED = {var("sm70_awq.fused_silu"): "1"}

PROBES = (
    Probe("group64", BASE, layer=awq_layer("qkv_proj", 64)),
    Probe("group128_prefill", BASE, layer=awq_layer("down_proj", 128)),
    Probe("unqualified_role", BASE, layer=awq_layer("renamed_projection", 128)),
    Probe("native_missing", BASE, remove_ops=AWQ_OPS),
    Probe(
        "workspace_missing",
        BASE,
        layer=awq_layer("down_proj", 128),
        engine_facts={"workspace_elements": 0},
    ),
    Probe("turbo_off", BASE, variables={var("sm70_awq.enabled"): "0"}),
    Probe(
        "prefill_off",
        BASE,
        layer=awq_layer("down_proj", 128),
        variables={var("sm70_awq.prefill_exact_dense"): "0"},
    ),
    Probe(
        "fused_tp2", BASE, layer=awq_layer("gate_up_proj", 32), variables=FUSED, engine={"tp": 2}
    ),
    Probe("fused_tp4", BASE, layer=awq_layer("gate_up_proj", 32), variables=FUSED),
    Probe("non_sm70", BASE, capability=75),
)


INVARIANCES = (
    Invariance(
        "awq_route_ignores_kv_spec_c",
        ("kv", "spec", "c"),
        ("route",),
        why=f"{KV_NEVER_READ}; the AWQ policy reads the TP size only (the fused gate/up "
        "call), no qualification rule reads speculation or concurrency",
    ),
    Invariance(
        "awq_kernel_ignores_q",
        ("kv", "spec", "c", "q"),
        (
            "route.kernel",
            "route.prepared_layout",
            "route.fallbacks",
            "route.bytes",
            "route.prepare",
        ),
        why="the budget only drops the token counts above it from route.dispatch "
        "(M <= max_num_batched_tokens); selection and preparation never read it",
    ),
)
TURBOMIND = awq.TurboMindAwqLinearKernel.name
TRITON = awq.TritonAwqLinearKernel.name
BACKEND_CODE = "backend_not_selected"
# The family's policy gates, per candidate (policies/linear_awq.py), before the class's own.
POLICY_CODES = {
    TURBOMIND: (BACKEND_CODE, DISABLED_CODE, "awq_turbomind_disabled", "not_sm70"),
    TRITON: (BACKEND_CODE, DISABLED_CODE, "turbomind_route_admitted"),
}
OPS = (
    awq_schemas.PREPARE_OP,
    awq.AWQ_GEMM_OP,
    awq.AWQ_DEQUANTIZE_OP,
    awq.TORCH_MM_OP,
    SILU_AND_MUL_OP,
)
FALLBACKS = ("sm70_awq.enabled", "sm70_awq.prefill_exact_dense")
VARIABLES = ("sm70_awq", "linear_backend", "disabled_kernels")
PINNED = "the row count is pinned at 334 (docs/contracts/core.md), so a test proves it"
SELECTORS = "tests/test_selectors.py::"
CAPABILITY = "tests/test_capability_awq.py::"


# Capability codes of the shared checks -> the test that proves each on both classes.
SHAPE_TESTS = {
    "requires_sm70_or_newer": "test_both_kernels_need_capability_70_or_newer",
    "not_awq_gemm_packing": "test_awq_gemm_packing_is_required",
    "unsupported_group_size": "test_unsupported_groups",
    "k_not_positive": "test_k_n_group_boundaries",
    "n_not_positive": "test_k_n_group_boundaries",
    "k_not_multiple_of_group": "test_k_n_group_boundaries",
    "n_not_multiple_of_8": "test_k_n_group_boundaries",
    "packing_mismatch": "test_k_n_reasons_carry_values_and_packing_must_hold",
    "g_idx_unsupported": "test_g_idx_and_missing_prepare_op",
}
TURBOMIND_TESTS = {
    "not_asymmetric_uint4": "test_turbomind_only_rules",
    "activation_not_fp16": "test_turbomind_only_rules",
}


def _declarations() -> dict[Site, Declaration]:
    out: dict[Site, Declaration] = {}
    for code, test in SHAPE_TESTS.items():
        for kernel in (TURBOMIND, TRITON):
            out[Site("reason", kernel, code)] = recorded_only(
                f"{PINNED}: a checkpoint no row has", CAPABILITY + test
            )
    for code, test in TURBOMIND_TESTS.items():
        out[Site("reason", TURBOMIND, code)] = recorded_only(
            f"{PINNED}: a checkpoint no row has", CAPABILITY + test
        )
    # Overrides the shared entry above: TurboMind's capability check is behind not_sm70.
    out[Site("reason", TURBOMIND, "requires_sm70_or_newer")] = unreachable(
        "the TurboMind route is admitted only on exactly SM70 (not_sm70, a policy gate "
        "before capability), so its capability check never refuses"
    )
    backend = SELECTORS + "test_awq_linear_backend_filters_every_candidate"
    for kernel in (TURBOMIND, TRITON):
        out[Site("reason", kernel, BACKEND_CODE)] = recorded_only(
            f"{PINNED}: a linear_backend other than auto or turbomind", backend
        )
    out[Site("set", "linear_backend")] = recorded_only(
        f"{PINNED}: a linear_backend other than auto or turbomind", backend
    )
    disabled = SELECTORS + "test_awq_nothing_can_serve_when_both_are_disabled"
    for kernel in (TURBOMIND, TRITON):
        out[Site("reason", kernel, DISABLED_CODE)] = recorded_only(
            f"{PINNED}: disabling a kernel by name", disabled
        )
    out[Site("set", "disabled_kernels")] = recorded_only(
        f"{PINNED}: disabling a kernel by name", disabled
    )
    return out


def decision_sites() -> DecisionSites:
    sites: list[Site] = []
    for kernel in awq.AWQ_DENSE_KERNELS:
        sites += kernel_sites(kernel, POLICY_CODES[kernel.name])
    sites += fallback_sites(FALLBACKS)
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
        gated_call_m=1,
        description="AWQ dense linears on SM70: TurboMind, Triton, fail-closed",
        declared_invariances=INVARIANCES,
        sites=decision_sites,
    )
