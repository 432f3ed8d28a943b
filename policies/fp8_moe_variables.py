"""The field table of the FP8 mixture-of-experts family's own sections (docs/contracts/fp8moe.md
§1.1), declared by the family itself: `sm70_fp8_moe` (the lane switches, the three
single-token plan fields and the diagnostics) and `sm70_moe_single_token` (the upstream
single-token inputs those plan fields read; never hashed).

The family record (`policies/families.py`) names `FP8_MOE_FIELDS`; the project appends it to
the shared table of `policies/variables.py`. Like that module, this one may spell variable
names (tests/test_source_rules.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.variables import VARIABLE_PREFIX
from routectl.errors import InputError
from routectl.policy.fields import INT, INT_BOOL, Computed, Field, Kind, choice_validator

_FP8_MOE = VARIABLE_PREFIX + "SM70_FP8_MOE_"
# Shared upstream by the AWQ and FP8 methods; routectl's sm70_awq_moe does not read them
# (docs/contracts/fp8moe.md §1.4). One variable per input field: the field table ties a
# variable to one field, so the inputs of the three single-token plan fields are fields of
# their own section, never hashed and read only by those fields' computed defaults.
_MOE_ST = VARIABLE_PREFIX + "SM70_MOE_SINGLE_TOKEN_"
ST_INPUTS = "sm70_moe_single_token"
ST_W13_MODES = ("compact", "indexed", "dense")
ST_W2_MODES = ("indexed", "dense")
ST_REDUCE_MODES = ("weighted", "unpermute")


def _st(ctx: Mapping[str, Any], name: str) -> bool:
    return bool(ctx["values"][f"{ST_INPUTS}.{name}"])


def _st_w13(ctx: Mapping[str, Any]) -> tuple[str, ...]:
    modes = ["compact"] if _st(ctx, "compact_w13") else []
    if _st(ctx, "indexed_stage") or _st(ctx, "indexed_w13"):
        modes.append("indexed")
    return (*modes, "dense")


def _st_w2(ctx: Mapping[str, Any]) -> str:
    asked = ("fp8_indexed_w2", "indexed_stage", "indexed_w2")
    return "indexed" if any(_st(ctx, name) for name in asked) else "dense"


def _st_reduce(ctx: Mapping[str, Any]) -> str:
    return "weighted" if _st(ctx, "fastpath") or _st(ctx, "unpermute") else "unpermute"


def _st_w13_modes(value: Any, where: str) -> tuple[str, ...]:
    """Non-empty, no duplicates, known modes; reordered compact, indexed, dense."""
    items = tuple(value)
    if not items or len(set(items)) != len(items):
        raise InputError(f"{where} must be nonempty and have no duplicates")
    for item in items:
        if item not in ST_W13_MODES:
            raise InputError(
                f"invalid value {item!r} in {where}: accepted values are " + ", ".join(ST_W13_MODES)
            )
    return tuple(m for m in ST_W13_MODES if m in items)


def _st_input(name: str, suffix: str, default: bool, doc: str, prefix: str = _MOE_ST) -> Field:
    return Field(
        section=ST_INPUTS,
        name=name,
        type=bool,
        default=default,
        variable=prefix + suffix,
        kind=Kind.CURRENT,
        parser=INT_BOOL,
        doc=doc,
    )


def _fp8_moe(name: str, suffix: str, default: Any, doc: str, parser: Any = INT_BOOL) -> Field:
    return Field(
        section="sm70_fp8_moe",
        name=name,
        type=int if parser is INT else bool,
        default=default,
        variable=_FP8_MOE + suffix,
        kind=Kind.CURRENT,
        parser=parser,
        doc=doc,
    )


FP8_MOE_FIELDS: tuple[Field, ...] = (
    _st_input("compact_w13", "COMPACT_W13_FASTPATH", False, "single-token W13 compact input"),
    _st_input("indexed_stage", "INDEXED_STAGE_FASTPATH", False, "single-token indexed stages"),
    _st_input("indexed_w13", "INDEXED_W13_FASTPATH", False, "single-token indexed W13 input"),
    _st_input("indexed_w2", "INDEXED_W2_FASTPATH", False, "single-token indexed W2 input"),
    _st_input("fastpath", "FASTPATH", False, "single-token weighted reduce input"),
    _st_input("unpermute", "UNPERMUTE_FASTPATH", True, "single-token weighted reduce input"),
    _st_input(
        "fp8_indexed_w2",
        "SINGLE_TOKEN_INDEXED_W2_FASTPATH",
        True,
        "FP8-only alias of the indexed W2 input (makes FP8 default indexed)",
        prefix=_FP8_MOE,
    ),
    _fp8_moe("batched", "BATCHED_GEMM", True, "batched GEMMs (false: decomposed M = 1 lane)"),
    _fp8_moe(
        "w13_per_expert",
        "BATCHED_W13_PER_EXPERT_DISPATCH",
        False,
        "batched W13 through the per-expert dispatch entry",
    ),
    _fp8_moe(
        "w2_per_expert",
        "BATCHED_W2_PER_EXPERT_DISPATCH",
        False,
        "batched W2 through the per-expert dispatch entry",
    ),
    _fp8_moe("legacy_compact", "LEGACY_SINGLE_TOKEN_COMPACT", True, "M = 1 monolithic op"),
    _fp8_moe("permute_scratch", "PERMUTE_WITH_SCRATCH", True, "caller-owned sort scratch"),
    _fp8_moe(
        "compact_exact_layout",
        "LEGACY_SINGLE_TOKEN_COMPACT_EXACT_LAYOUT",
        True,
        "monolithic op: exact per-route layout",
    ),
    _fp8_moe(
        "compact_native_unpermute",
        "LEGACY_SINGLE_TOKEN_COMPACT_NATIVE_UNPERMUTE",
        False,
        "monolithic op followed by moe_unpermute",
    ),
    _fp8_moe(
        "compact_decomposed",
        "LEGACY_SINGLE_TOKEN_COMPACT_DECOMPOSED",
        False,
        "M = 1 batched lane: exact-layout prepare, batched GEMMs, unpermute",
    ),
    Field(
        section="sm70_fp8_moe",
        name="single_token_w13",
        type=list[str],
        default=Computed("from the VLLM_SM70_MOE_SINGLE_TOKEN_* inputs", _st_w13),
        doc="single-token W13 modes (compact, indexed, dense), not batched only",
        validate=_st_w13_modes,
    ),
    Field(
        section="sm70_fp8_moe",
        name="single_token_w2",
        type=str,
        default=Computed("from the indexed W2 inputs", _st_w2),
        doc="single-token W2 mode, not batched only",
        validate=choice_validator(ST_W2_MODES),
    ),
    Field(
        section="sm70_fp8_moe",
        name="single_token_reduce",
        type=str,
        default=Computed("from the single-token reduce inputs", _st_reduce),
        doc="single-token reduction, not batched only",
        validate=choice_validator(ST_REDUCE_MODES),
    ),
    # Diagnostics: never a route, never hashed.
    _fp8_moe(
        "compact_compare",
        "LEGACY_SINGLE_TOKEN_COMPACT_COMPARE",
        False,
        "diagnostic: compare the monolithic op with a reference (never a route)",
    ),
    _fp8_moe(
        "compact_compare_reports",
        "LEGACY_SINGLE_TOKEN_COMPACT_COMPARE_REPORTS",
        16,
        "diagnostic: compare reports kept",
        parser=INT,
    ),
    _fp8_moe(
        "strict_compare_fail",
        "COMPACT_STRICT_COMPARE_FAIL",
        False,
        "diagnostic: does nothing (upstream logs once)",
    ),
)


def field_of(key: str) -> Field:
    """The field of this table whose key is `key` (the category's probes name fields by key
    while the project's whole table is still being assembled)."""
    for f in FP8_MOE_FIELDS:
        if f.key == key:
            return f
    raise KeyError(key)


__all__ = ["FP8_MOE_FIELDS", "ST_INPUTS", "field_of"]
