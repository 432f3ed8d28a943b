"""The FP8 mixture-of-experts family's literal test expectations (`sm70-fp8-moe`), written from
docs/contracts/fp8moe.md; the shared tests merge them with every other family's
(tests/families/__init__.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from policies.fp8_moe import Fp8MoeOptions
from routectl.policy.resolve import ResolvedPolicy
from tests.wiring import Case, c

FAMILY = "sm70-fp8-moe"

# docs/contracts/fp8moe.md §1.1: the 12 variables the FP8 MoE family adds ...
FP8_MOE_VARIABLES: frozenset[str] = frozenset(
    {
        "VLLM_SM70_FP8_MOE_BATCHED_GEMM",
        "VLLM_SM70_FP8_MOE_BATCHED_W13_PER_EXPERT_DISPATCH",
        "VLLM_SM70_FP8_MOE_BATCHED_W2_PER_EXPERT_DISPATCH",
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT",
        "VLLM_SM70_FP8_MOE_PERMUTE_WITH_SCRATCH",
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_EXACT_LAYOUT",
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_NATIVE_UNPERMUTE",
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_DECOMPOSED",
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_COMPARE",
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_COMPARE_REPORTS",
        "VLLM_SM70_FP8_MOE_COMPACT_STRICT_COMPARE_FAIL",
        "VLLM_SM70_FP8_MOE_SINGLE_TOKEN_INDEXED_W2_FASTPATH",
    }
)
# ... and the 6 single-token switches it shares with the AWQ MoE family (18 in all).
MOE_SINGLE_TOKEN_VARIABLES: frozenset[str] = frozenset(
    {
        "VLLM_SM70_MOE_SINGLE_TOKEN_COMPACT_W13_FASTPATH",
        "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_STAGE_FASTPATH",
        "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_W13_FASTPATH",
        "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_W2_FASTPATH",
        "VLLM_SM70_MOE_SINGLE_TOKEN_FASTPATH",
        "VLLM_SM70_MOE_SINGLE_TOKEN_UNPERMUTE_FASTPATH",
    }
)

# docs/contracts/fp8moe.md §1.1: every FP8 MoE variable is a current switch.
CURRENT_VARIABLES: frozenset[str] = FP8_MOE_VARIABLES | MOE_SINGLE_TOKEN_VARIABLES

FIELD_VARIABLES: dict[str, tuple[str | None, str]] = {
    # docs/contracts/fp8moe.md §1.1 (the single-token inputs: a routectl decision).
    "sm70_moe_single_token.compact_w13": (
        "VLLM_SM70_MOE_SINGLE_TOKEN_COMPACT_W13_FASTPATH",
        "current",
    ),
    "sm70_moe_single_token.indexed_stage": (
        "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_STAGE_FASTPATH",
        "current",
    ),
    "sm70_moe_single_token.indexed_w13": (
        "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_W13_FASTPATH",
        "current",
    ),
    "sm70_moe_single_token.indexed_w2": (
        "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_W2_FASTPATH",
        "current",
    ),
    "sm70_moe_single_token.fastpath": ("VLLM_SM70_MOE_SINGLE_TOKEN_FASTPATH", "current"),
    "sm70_moe_single_token.unpermute": ("VLLM_SM70_MOE_SINGLE_TOKEN_UNPERMUTE_FASTPATH", "current"),
    "sm70_moe_single_token.fp8_indexed_w2": (
        "VLLM_SM70_FP8_MOE_SINGLE_TOKEN_INDEXED_W2_FASTPATH",
        "current",
    ),
    "sm70_fp8_moe.batched": ("VLLM_SM70_FP8_MOE_BATCHED_GEMM", "current"),
    "sm70_fp8_moe.w13_per_expert": ("VLLM_SM70_FP8_MOE_BATCHED_W13_PER_EXPERT_DISPATCH", "current"),
    "sm70_fp8_moe.w2_per_expert": ("VLLM_SM70_FP8_MOE_BATCHED_W2_PER_EXPERT_DISPATCH", "current"),
    "sm70_fp8_moe.legacy_compact": ("VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT", "current"),
    "sm70_fp8_moe.permute_scratch": ("VLLM_SM70_FP8_MOE_PERMUTE_WITH_SCRATCH", "current"),
    "sm70_fp8_moe.compact_exact_layout": (
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_EXACT_LAYOUT",
        "current",
    ),
    "sm70_fp8_moe.compact_native_unpermute": (
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_NATIVE_UNPERMUTE",
        "current",
    ),
    "sm70_fp8_moe.compact_decomposed": (
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_DECOMPOSED",
        "current",
    ),
    "sm70_fp8_moe.single_token_w13": (None, "config"),
    "sm70_fp8_moe.single_token_w2": (None, "config"),
    "sm70_fp8_moe.single_token_reduce": (None, "config"),
    "sm70_fp8_moe.compact_compare": (
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_COMPARE",
        "current",
    ),
    "sm70_fp8_moe.compact_compare_reports": (
        "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_COMPARE_REPORTS",
        "current",
    ),
    "sm70_fp8_moe.strict_compare_fail": (
        "VLLM_SM70_FP8_MOE_COMPACT_STRICT_COMPARE_FAIL",
        "current",
    ),
}

QUALIFIED_DEFAULTS: dict[str, object] = {
    # docs/contracts/fp8moe.md §1.1.
    "sm70_moe_single_token.compact_w13": False,
    "sm70_moe_single_token.indexed_stage": False,
    "sm70_moe_single_token.indexed_w13": False,
    "sm70_moe_single_token.indexed_w2": False,
    "sm70_moe_single_token.fastpath": False,
    "sm70_moe_single_token.unpermute": True,
    "sm70_moe_single_token.fp8_indexed_w2": True,
    "sm70_fp8_moe.batched": True,
    "sm70_fp8_moe.w13_per_expert": False,
    "sm70_fp8_moe.w2_per_expert": False,
    "sm70_fp8_moe.legacy_compact": True,
    "sm70_fp8_moe.permute_scratch": True,
    "sm70_fp8_moe.compact_exact_layout": True,
    "sm70_fp8_moe.compact_native_unpermute": False,
    "sm70_fp8_moe.compact_decomposed": False,
    "sm70_fp8_moe.single_token_w13": ("dense",),
    "sm70_fp8_moe.single_token_w2": "indexed",
    "sm70_fp8_moe.single_token_reduce": "weighted",
    "sm70_fp8_moe.compact_compare": False,
    "sm70_fp8_moe.compact_compare_reports": 16,
    "sm70_fp8_moe.strict_compare_fail": False,
}

NON_DEFAULT_TEXT: dict[str, tuple[str, object]] = {
    # docs/contracts/fp8moe.md §1.1: integer booleans (any other integer is true).
    "VLLM_SM70_MOE_SINGLE_TOKEN_COMPACT_W13_FASTPATH": ("2", True),
    "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_STAGE_FASTPATH": ("2", True),
    "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_W13_FASTPATH": ("2", True),
    "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_W2_FASTPATH": ("2", True),
    "VLLM_SM70_MOE_SINGLE_TOKEN_FASTPATH": ("2", True),
    "VLLM_SM70_MOE_SINGLE_TOKEN_UNPERMUTE_FASTPATH": ("0", False),
    "VLLM_SM70_FP8_MOE_SINGLE_TOKEN_INDEXED_W2_FASTPATH": ("0", False),
    "VLLM_SM70_FP8_MOE_BATCHED_GEMM": ("0", False),
    "VLLM_SM70_FP8_MOE_BATCHED_W13_PER_EXPERT_DISPATCH": ("2", True),
    "VLLM_SM70_FP8_MOE_BATCHED_W2_PER_EXPERT_DISPATCH": ("2", True),
    "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT": ("0", False),
    "VLLM_SM70_FP8_MOE_PERMUTE_WITH_SCRATCH": ("0", False),
    "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_EXACT_LAYOUT": ("0", False),
    "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_NATIVE_UNPERMUTE": ("2", True),
    "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_DECOMPOSED": ("2", True),
    "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_COMPARE": ("2", True),
    "VLLM_SM70_FP8_MOE_COMPACT_STRICT_COMPARE_FAIL": ("2", True),
    "VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_COMPARE_REPORTS": ("4", 4),
}

# The policy sections its contract names.
SECTIONS: frozenset[str] = frozenset({"sm70_moe_single_token", "sm70_fp8_moe"})

# The invariances its category's rows declare, written from the policy code as
# (dimensions, fields under `route`; None: the whole route) (tests/test_invariances.py).
INVARIANCES: dict[str, Sequence[tuple[tuple[str, ...], tuple[str, ...] | None]]] = {
    "sm70-fp8-moe": [
        (("kv", "spec", "c"), None),
        (("kv", "spec", "c", "q"), ("kernel", "fallback", "bytes", "prepare", "warnings")),
    ],
}

# Its category's own route shape: (the route schema definition, a key only that shape has)
# (tests/test_route_schemas.py).
ROUTE_SHAPES: dict[str, tuple[str, str]] = {"sm70-fp8-moe": ("fp8_moe_row", "stages")}

# The sections its own field table declares (the record's `fields`).
OWN_SECTIONS: frozenset[str] = frozenset({"sm70_moe_single_token", "sm70_fp8_moe"})


def _options(policy: ResolvedPolicy) -> dict[str, Any]:
    return dataclasses.asdict(Fp8MoeOptions.of(policy))


# What its kernels see of a resolved policy (tests/test_wiring_fields.py), and one case per
# field of its sections, with the options it changes (docs/contracts/fp8moe.md §1).
WIRING_MAPPINGS: dict[str, Callable[[ResolvedPolicy], dict[str, Any]]] = {"fp8_moe": _options}
WIRING_CASES: tuple[Case, ...] = (
    c(
        "sm70_moe_single_token.compact_w13",
        True,
        fp8_moe={"single_token_w13": ("compact", "dense")},
    ),
    c(
        "sm70_moe_single_token.indexed_stage",
        True,
        fp8_moe={"single_token_w13": ("indexed", "dense")},
    ),
    c(
        "sm70_moe_single_token.indexed_w13",
        True,
        fp8_moe={"single_token_w13": ("indexed", "dense")},
    ),
    # The FP8 alias already makes W2 indexed, and `unpermute` already makes the reduce
    # weighted: either input alone changes nothing.
    c("sm70_moe_single_token.indexed_w2", True),
    c("sm70_moe_single_token.fastpath", True),
    c("sm70_moe_single_token.unpermute", False, fp8_moe={"single_token_reduce": "unpermute"}),
    c("sm70_moe_single_token.fp8_indexed_w2", False, fp8_moe={"single_token_w2": "dense"}),
    c("sm70_fp8_moe.batched", False, fp8_moe={"batched": False}),
    c("sm70_fp8_moe.w13_per_expert", True, fp8_moe={"w13_per_expert": True}),
    c("sm70_fp8_moe.w2_per_expert", True, fp8_moe={"w2_per_expert": True}),
    c("sm70_fp8_moe.legacy_compact", False, fp8_moe={"legacy_compact": False}),
    c("sm70_fp8_moe.permute_scratch", False, fp8_moe={"permute_scratch": False}),
    c("sm70_fp8_moe.compact_exact_layout", False, fp8_moe={"compact_exact_layout": False}),
    c(
        "sm70_fp8_moe.compact_native_unpermute",
        True,
        fp8_moe={"compact_native_unpermute": True},
    ),
    c("sm70_fp8_moe.compact_decomposed", True, fp8_moe={"compact_decomposed": True}),
    c(
        "sm70_fp8_moe.single_token_w13",
        ["indexed", "compact", "dense"],
        fp8_moe={"single_token_w13": ("compact", "indexed", "dense")},  # reordered
    ),
    c("sm70_fp8_moe.single_token_w2", "dense", fp8_moe={"single_token_w2": "dense"}),
    c(
        "sm70_fp8_moe.single_token_reduce",
        "unpermute",
        fp8_moe={"single_token_reduce": "unpermute"},
    ),
    c("sm70_fp8_moe.compact_compare", True, fp8_moe={"compact_compare": True}),
    c("sm70_fp8_moe.compact_compare_reports", 3),  # diagnostics: never an option
    c("sm70_fp8_moe.strict_compare_fail", True),
)

# capability -> the sections (or `section.field` entries) its record hashes there for every
# engine, in its record's order (tests/test_dflash2_policy.py composes the hashed list).
# Issue 32: the 11 route fields of its own section (Volta class); the diagnostics never.
ALWAYS_HASHED: dict[int, tuple[str, ...]] = {
    70: (
        "sm70_turbomind",
        "sm70_fp8",
        *(
            f"sm70_fp8_moe.{name}"
            for name in (
                "batched",
                "w13_per_expert",
                "w2_per_expert",
                "legacy_compact",
                "permute_scratch",
                "compact_exact_layout",
                "compact_native_unpermute",
                "compact_decomposed",
                "single_token_w13",
                "single_token_w2",
                "single_token_reduce",
            )
        ),
    )
}

# Its engine case (tests/test_engine_api.py): (capability, the layer it loads, the typed
# kernel config), and whether the layer is a linear or a mixture-of-experts layer.
ENGINE_CASE: tuple[int, Any, Any] = (
    70,
    {
        "prefix": "model.layers.0.mlp.experts",
        "layer_id": 0,
        "experts": 256,
        "top_k": 8,
        "hidden": 2048,
        "intermediate": 512,
    },
    None,
)
ENGINE_LAYER: str = "moe"
