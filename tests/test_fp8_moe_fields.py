"""The FP8 MoE family's own field tables as a typed config sees them (docs/contracts/fp8moe.md
§1.1): every switch of `sm70_fp8_moe` and `sm70_moe_single_token` is a boolean (the reports
count an integer) in the KernelConfig schema, described, and a typed value of another type is
refused; an unknown single-token W13 mode is an input error naming it and the accepted modes.
Literals from the contract."""

from __future__ import annotations

from typing import Any

import pytest

from policies import KernelConfig
from routectl.errors import InputError
from tests.policy_helpers import resolve

# §1.1: field -> JSON type, for the switches of both sections.
SINGLE_TOKEN = (
    "compact_w13",
    "indexed_stage",
    "indexed_w13",
    "indexed_w2",
    "fastpath",
    "unpermute",
    "fp8_indexed_w2",
)
FP8_MOE_BOOLEANS = (
    "batched",
    "w13_per_expert",
    "w2_per_expert",
    "legacy_compact",
    "permute_scratch",
    "compact_exact_layout",
    "compact_native_unpermute",
    "compact_decomposed",
    "compact_compare",
    "strict_compare_fail",
)


def _properties(model: str) -> dict[str, Any]:
    schema = KernelConfig.model_json_schema()
    return schema["$defs"][model]["properties"]


def _types(prop: dict[str, Any]) -> set[str]:
    return {t["type"] for t in prop["anyOf"]}


def test_the_schema_types_and_describes_every_switch():
    single = _properties("Sm70MoeSingleTokenConfig")
    assert sorted(single) == sorted(SINGLE_TOKEN)
    own = _properties("Sm70Fp8MoeConfig")
    for name, prop in [*single.items(), *((n, own[n]) for n in FP8_MOE_BOOLEANS)]:
        assert _types(prop) == {"boolean", "null"}, name
        assert prop.get("description"), name
    assert _types(own["compact_compare_reports"]) == {"integer", "null"}


@pytest.mark.parametrize(
    ("section", "name", "good", "bad"),
    [
        ("sm70_moe_single_token", "compact_w13", True, "1"),
        ("sm70_moe_single_token", "unpermute", False, 0),
        ("sm70_fp8_moe", "batched", False, "0"),
        ("sm70_fp8_moe", "compact_compare_reports", 8, "8"),
    ],
)
def test_a_typed_value_of_another_type_is_refused(section, name, good, bad):
    key = f"{section}.{name}"
    assert resolve({}, {section: {name: good}}).value(key) == good
    with pytest.raises(InputError):
        resolve({}, {section: {name: bad}})


def test_an_unknown_single_token_w13_mode_names_it_and_the_accepted_modes():
    with pytest.raises(InputError) as info:
        resolve({}, {"sm70_fp8_moe": {"single_token_w13": ["compact", "fast"]}})
    assert "'fast'" in str(info.value) and "compact, indexed, dense" in str(info.value)
