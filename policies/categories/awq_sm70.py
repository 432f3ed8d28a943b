"""Category sm70-awq-linear: AWQ dense linears on Volta (docs/contracts/core.md §2.3, §5)."""

from __future__ import annotations

from typing import Any

from policies.categories.basis import LINEAR_BASIS
from policies.categories.linear import LinearCategory, layer
from policies.categories.matrix import KV_NEVER_READ, NOT_APPLICABLE, ModelScope, row_id
from policies.variables import env_var as var
from routectl.rows import Invariance, Probe

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
    )
