"""The Flash-Next qualified batch family's literal test expectations (`sm70-flash-next-batch`),
written from docs/contracts/flashnext.md; the shared tests merge them with every other
family's (tests/families/__init__.py)."""

from __future__ import annotations

from collections.abc import Sequence

from policies.variables import FIELDS
from tests.wiring import Case, c

FAMILY = "sm70-flash-next-batch"

# docs/contracts/flashnext.md §1.3 rows 1-14: the Flash-Next controls, by variable, in order.
FLASH_NEXT_CONTROLS: tuple[str, ...] = (
    "VLLM_SM70_QWEN38_GDN_INPUT_BATCH",
    "VLLM_SM70_MTP_HC_BATCH",
    "VLLM_SM70_MTP_HC_COOPERATIVE",
    "VLLM_SM70_MTP_HC_FULL_UNROLL",
    "VLLM_SM70_MTP_ROUTER_TOP16",
    "VLLM_SM70_MTP_ROUTER_BATCH",
    "VLLM_SM70_MTP_SHARED_BATCH",
    "VLLM_SM70_MTP_PLE_CONV",
    "VLLM_SM70_QWEN38_BATCH_FASTPATH",
    "VLLM_SM70_NVFP4_MOE_GROUPED_MTP5",
    "VLLM_SM70_RMSNORM_GATED_EXACT",
    "VLLM_SM70_FUSED_SIGMOID_MIXED_QKV",
    "VLLM_SM70_MTP_MOE_FP16_EXACT",
    "VLLM_SM70_QSA_MTP_TOPK",
)

# docs/contracts/flashnext.md §1.3: field -> (variable, kind, default on an engine without
# model facts, where the decode contract fails).
FLASH_NEXT_FIELDS: dict[str, tuple[str, str, bool]] = {
    "gdn_input_batch": ("VLLM_SM70_QWEN38_GDN_INPUT_BATCH", "current", True),
    "mtp_hc_batch": ("VLLM_SM70_MTP_HC_BATCH", "current", True),
    "mtp_hc_cooperative": ("VLLM_SM70_MTP_HC_COOPERATIVE", "current", True),
    "mtp_hc_full_unroll": ("VLLM_SM70_MTP_HC_FULL_UNROLL", "current", True),
    "mtp_router_top16": ("VLLM_SM70_MTP_ROUTER_TOP16", "current", True),
    "mtp_router_batch": ("VLLM_SM70_MTP_ROUTER_BATCH", "current", True),
    "mtp_shared_batch": ("VLLM_SM70_MTP_SHARED_BATCH", "current", True),
    "mtp_ple_conv": ("VLLM_SM70_MTP_PLE_CONV", "current", True),
    "batch_fastpath": ("VLLM_SM70_QWEN38_BATCH_FASTPATH", "current", True),
    "nvfp4_moe_grouped_mtp5": ("VLLM_SM70_NVFP4_MOE_GROUPED_MTP5", "current", True),
    "rmsnorm_gated_exact": ("VLLM_SM70_RMSNORM_GATED_EXACT", "legacy", False),
    "fused_sigmoid_mixed_qkv": ("VLLM_SM70_FUSED_SIGMOID_MIXED_QKV", "current", True),
    "mtp_moe_fp16_exact": ("VLLM_SM70_MTP_MOE_FP16_EXACT", "current", True),
    "qsa_mtp_topk": ("VLLM_SM70_QSA_MTP_TOPK", "current", True),
    "fp16_gemv": ("VLLM_SM70_QWEN38_FP16_GEMV", "legacy", False),
    "fused_gdn_input": ("VLLM_SM70_QWEN38_FUSED_GDN_INPUT_FP16", "legacy", False),
    "fused_hc": ("VLLM_SM70_QWEN38_FUSED_HC_FP16", "legacy", False),
    "online_qpn8": ("VLLM_SM70_QWEN4_EXP_ONLINE_QPN8", "legacy", False),
}

# docs/contracts/flashnext.md §1.1: the RMSNorm alias and the four base-lane switches are
# legacy names; the 13 controls that default on (§1.3's fourteen less the RMSNorm alias) are
# current switches.
LEGACY_VARIABLES: frozenset[str] = frozenset(
    {
        "VLLM_SM70_RMSNORM_GATED_EXACT",
        "VLLM_SM70_QWEN38_FP16_GEMV",
        "VLLM_SM70_QWEN38_FUSED_GDN_INPUT_FP16",
        "VLLM_SM70_QWEN38_FUSED_HC_FP16",
        "VLLM_SM70_QWEN4_EXP_ONLINE_QPN8",
    }
)
CURRENT_VARIABLES: frozenset[str] = frozenset(FLASH_NEXT_CONTROLS) - {
    "VLLM_SM70_RMSNORM_GATED_EXACT"
}

FIELD_VARIABLES: dict[str, tuple[str | None, str]] = {
    f"sm70_flash_next.{name}": (variable, kind)
    for name, (variable, kind, _) in FLASH_NEXT_FIELDS.items()
}
QUALIFIED_DEFAULTS: dict[str, object] = {
    f"sm70_flash_next.{name}": d for name, (_, _, d) in FLASH_NEXT_FIELDS.items()
}
NON_DEFAULT_TEXT: dict[str, tuple[str, object]] = {
    variable: ("1", True) if not d else ("0", False)
    for variable, _, d in FLASH_NEXT_FIELDS.values()
}
# docs/contracts/flashnext.md §2.3, §2.5: the record's resolution-context entries; without
# model facts there is no decode contract.
CONTEXT: dict[str, object] = {"flash_next_qualified": False, "flash_next_base_lane": False}

# The policy section its contract names.
SECTIONS: frozenset[str] = frozenset({"sm70_flash_next"})

# The invariances its category's rows declare, written from the policy code as
# (dimensions, fields under `route`; None: the whole route) (tests/test_invariances.py).
INVARIANCES: dict[str, Sequence[tuple[tuple[str, ...], tuple[str, ...] | None]]] = {
    "sm70-flash-next-batch": [
        (("kv", "c"), None),
        (
            ("kv", "c", "q"),
            ("flash_next_route", "controls", "packed_bytes", "precision", "methods"),
        ),
    ],
}

# Its category's own route shape: (the route schema definition, a key only that shape has)
# (tests/test_route_schemas.py).
ROUTE_SHAPES: dict[str, tuple[str, str]] = {
    "sm70-flash-next-batch": ("flash_next_batch_route", "flash_next_route")
}

# The sections its own field table declares (the record's `fields`).
OWN_SECTIONS: frozenset[str] = frozenset({"sm70_flash_next"})

# One wiring case per field of its section (tests/test_wiring_fields.py): read by the
# Flash-Next route only, so no kernel option of another family moves.
WIRING_CASES: tuple[Case, ...] = tuple(
    c(f.key, not f.default if isinstance(f.default, bool) else True)
    for f in FIELDS
    if f.section == "sm70_flash_next"
)

# What its category's cells show in `routectl matrix` (tests/test_matrix.py).
MATRIX_SHOWS: dict[str, str] = {"sm70-flash-next-batch": "batch routes"}

# capability -> the sections (or `section.field` entries) its record hashes there for every
# engine, in its record's order (tests/test_dflash2_policy.py composes the hashed list).
# Hashed only under the decode contract or an explicit field (docs/contracts/flashnext.md §1.2).
ALWAYS_HASHED: dict[int, tuple[str, ...]] = {}
