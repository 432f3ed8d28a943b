"""The `sm70_flash_next` section's field table (docs/contracts/flashnext.md §1.3), declared by
the family itself: the 14 controls tagged "Flash-Next qualified batch" and the four base-lane
switches, each `bool | None` with integer-text parsing (`INT_BOOL`), and the variable of the
one engine fact the family reads (`VLLM_BATCH_INVARIANT`, no field).

The family record (`policies/families.py`) names this table (`Family.fields`), and the
project appends it to the shared table of `policies/variables.py`; like that module, this one
may spell variable names (tests/test_source_rules.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routectl.policy.fields import INT_BOOL, Computed, Field, Kind

SECTION = "sm70_flash_next"
_PREFIX = "VLLM_SM70_"
_QWEN38 = _PREFIX + "QWEN38_"
# docs/contracts/flashnext.md §1.3, last row: engine-wide, read into EngineConfig.batch_invariant.
BATCH_INVARIANT_VARIABLE = "VLLM_BATCH_INVARIANT"

# Context keys the computed defaults read (the family's `context`, policies/flash_next.py).
QUALIFIED_KEY = "flash_next_qualified"
BASE_LANE_KEY = "flash_next_base_lane"


# A project built without the family (a test's one-family project) gives no entry: what is
# not known never qualifies.
def _qualified(ctx: Mapping[str, Any]) -> bool:
    return bool(ctx.get(QUALIFIED_KEY, False))


def _base_lane(ctx: Mapping[str, Any]) -> bool:
    return bool(ctx.get(BASE_LANE_KEY, False))


# §2.3: the decode contract and batch-qualified speculation (no capability term).
RMSNORM_DEFAULT = Computed("= Flash-Next qualified", _qualified)
# §2.5 without its compile-graph precondition, which routectl cannot see (a routectl decision,
# docs/contracts/flashnext.md §8.11).
BASE_LANE_DEFAULT = Computed("= capability 70 and the decode contract", _base_lane)

# (field, variable, kind, default, doc) in the contract's table order.
_TABLE: tuple[tuple[str, str, Kind, Any, str], ...] = (
    ("gdn_input_batch", _QWEN38 + "GDN_INPUT_BATCH", Kind.CURRENT, True, "GDN input packing"),
    ("mtp_hc_batch", _PREFIX + "MTP_HC_BATCH", Kind.CURRENT, True, "HC batch tag on MTP"),
    ("mtp_hc_cooperative", _PREFIX + "MTP_HC_COOPERATIVE", Kind.CURRENT, True, "MTP HC dispatch"),
    ("mtp_hc_full_unroll", _PREFIX + "MTP_HC_FULL_UNROLL", Kind.CURRENT, True, "MTP HC unroll"),
    ("mtp_router_top16", _PREFIX + "MTP_ROUTER_TOP16", Kind.CURRENT, True, "router top-16"),
    ("mtp_router_batch", _PREFIX + "MTP_ROUTER_BATCH", Kind.CURRENT, True, "router pack tag"),
    ("mtp_shared_batch", _PREFIX + "MTP_SHARED_BATCH", Kind.CURRENT, True, "shared-expert tag"),
    ("mtp_ple_conv", _PREFIX + "MTP_PLE_CONV", Kind.CURRENT, True, "MTP PLE convolution"),
    (
        "batch_fastpath",
        _QWEN38 + "BATCH_FASTPATH",
        Kind.CURRENT,
        True,
        "dense batch, GDN packing, concurrent HC, dense dispatch",
    ),
    (
        "nvfp4_moe_grouped_mtp5",
        _PREFIX + "NVFP4_MOE_GROUPED_MTP5",
        Kind.CURRENT,
        True,
        "grouped NVFP4 MoE at MTP5",
    ),
    (
        "rmsnorm_gated_exact",
        _PREFIX + "RMSNORM_GATED_EXACT",
        Kind.LEGACY,
        RMSNORM_DEFAULT,
        "exact gated RMSNorm",
    ),
    (
        "fused_sigmoid_mixed_qkv",
        _PREFIX + "FUSED_SIGMOID_MIXED_QKV",
        Kind.CURRENT,
        True,
        "fused sigmoid mixed QKV (GDN decode)",
    ),
    ("mtp_moe_fp16_exact", _PREFIX + "MTP_MOE_FP16_EXACT", Kind.CURRENT, True, "draft MoE FP16"),
    ("qsa_mtp_topk", _PREFIX + "QSA_MTP_TOPK", Kind.CURRENT, True, "QSA indexer MTP top-k"),
    ("fp16_gemv", _QWEN38 + "FP16_GEMV", Kind.LEGACY, BASE_LANE_DEFAULT, "SM70 FP16 GEMV lane"),
    (
        "fused_gdn_input",
        _QWEN38 + "FUSED_GDN_INPUT_FP16",
        Kind.LEGACY,
        BASE_LANE_DEFAULT,
        "fused GDN input",
    ),
    ("fused_hc", _QWEN38 + "FUSED_HC_FP16", Kind.LEGACY, BASE_LANE_DEFAULT, "HC loader"),
    (
        "online_qpn8",
        _PREFIX + "QWEN4_EXP_ONLINE_QPN8",
        Kind.LEGACY,
        False,
        "online QPN8 (rejects the whole FP16 lane)",
    ),
)

FLASH_NEXT_FIELDS: tuple[Field, ...] = tuple(
    Field(
        section=SECTION,
        name=name,
        type=bool,
        default=default,
        variable=variable,
        kind=kind,
        parser=INT_BOOL,
        doc=doc,
    )
    for name, variable, kind, default, doc in _TABLE
)
FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in FLASH_NEXT_FIELDS)
# Rows 1-14 of §1.3: the controls a row records (all but the four base-lane switches).
CONTROL_NAMES: tuple[str, ...] = FIELD_NAMES[:14]
VARIABLES: dict[str, str] = {f.name: f.variable or "" for f in FLASH_NEXT_FIELDS}

__all__ = [
    "BATCH_INVARIANT_VARIABLE",
    "CONTROL_NAMES",
    "FIELD_NAMES",
    "FLASH_NEXT_FIELDS",
    "SECTION",
    "VARIABLES",
]
