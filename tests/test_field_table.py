"""The field table reads by keyword and declares each field's choices once (issue 19)."""

from __future__ import annotations

import pytest

from policies.variables import QUANT_BACKENDS, W2_CHUNK_TOKENS, field
from routectl.errors import InputError
from routectl.policy.fields import INT_BOOL, Field, Kind, RetiredVariable
from routectl.policy.resolve import merge_sources, parse_variables, validate_typed
from tests.policy_helpers import resolve

MODE = dict(section="toy", name="mode", type=str, default="a", variable="TOY_MODE")


def test_a_positional_field_is_refused():
    with pytest.raises(TypeError):
        Field("toy", "fast", bool, True)


def test_choices_give_both_the_parser_and_the_validator():
    f = Field(**MODE, kind=Kind.CURRENT, choices=("a", "b"))
    assert f.parser is not None and f.validate is not None
    assert f.parser("TOY_MODE", " b ") == "b"
    with pytest.raises(
        InputError, match="invalid value 'c' for TOY_MODE: accepted values are one of a, b"
    ):
        f.parser("TOY_MODE", "c")
    assert f.validate("b", f.config_path) == "b"
    with pytest.raises(
        InputError, match="invalid value 'c' for kernel_config.toy.mode: accepted values are a, b"
    ):
        f.validate("c", f.config_path)


@pytest.mark.parametrize("given", [dict(parser=INT_BOOL), dict(validate=lambda v, where: v)])
def test_choices_are_declared_once_not_beside_a_parser_or_validator(given):
    with pytest.raises(ValueError, match="toy.mode: choices give the parser and the validator"):
        Field(**MODE, choices=("a", "b"), **given)


@pytest.mark.parametrize(
    "key, choices",
    [
        ("sm70_turbomind.quant_backend", QUANT_BACKENDS),
        ("sm70_awq_moe.w2_chunk_tokens", W2_CHUNK_TOKENS),
    ],
)
def test_the_project_declares_its_choice_fields_once(key, choices):
    f = field(key)
    assert f.choices == choices
    assert f.parser is not None and f.parser.accepted == "one of " + ", ".join(map(str, choices))


def test_a_typed_value_outside_the_choices_is_refused_and_one_inside_kept():
    kept = resolve(config={"sm70_awq_moe": {"w2_chunk_tokens": 4096}})
    assert kept.value("sm70_awq_moe.w2_chunk_tokens") == 4096
    with pytest.raises(
        InputError,
        match=r"invalid value 4097 for kernel_config.sm70_awq_moe.w2_chunk_tokens: "
        r"accepted values are 0, 4096, 6144",
    ):
        resolve(config={"sm70_awq_moe": {"w2_chunk_tokens": 4097}})


# --- resolve_fields' phases -----------------------------------------------------------------

MODE_FIELD = Field(**MODE, kind=Kind.CURRENT, choices=("a", "b"))
LIMIT = Field(section="toy", name="limit", type=int, default=4, validate=lambda v, where: v * 2)


def test_parse_reads_every_present_variable_and_nothing_else():
    assert parse_variables((MODE_FIELD, LIMIT), {"TOY_MODE": " b ", "OTHER": "1"}) == {
        ("toy.mode", "TOY_MODE"): "b"
    }
    assert parse_variables((MODE_FIELD, LIMIT), {}) == {}
    with pytest.raises(InputError, match="invalid value 'c' for TOY_MODE"):
        parse_variables((MODE_FIELD,), {"TOY_MODE": "c"})


def test_validate_keeps_set_typed_values_through_their_validator():
    assert validate_typed((MODE_FIELD, LIMIT), {"toy.mode": None, "toy.limit": 3}) == {
        "toy.limit": 6
    }


def test_merge_applies_explicit_over_variable_over_default():
    environ = {"TOY_MODE": "b"}
    parsed = parse_variables((MODE_FIELD, LIMIT), environ)
    merged = merge_sources((MODE_FIELD, LIMIT), parsed, {}, environ, {})
    assert merged.values == {"toy.mode": "b", "toy.limit": 4}
    assert merged.sources == {"toy.mode": "alias:TOY_MODE", "toy.limit": "default"}
    explicit = merge_sources((MODE_FIELD, LIMIT), parsed, {"toy.mode": "a"}, environ, {})
    assert explicit.values["toy.mode"] == "a" and explicit.sources["toy.mode"] == "explicit"
    assert explicit.ignored == [("TOY_MODE", "toy.mode")]


@pytest.mark.parametrize("kind", [Kind.CONFIG, Kind.CURRENT, Kind.LEGACY, Kind.DEPRECATED])
def test_a_retired_variable_of_another_kind_is_refused_naming_it(kind):
    # Only obsolete and removed names are retired (docs/contracts/dflash2.md §1.4); a table that
    # declares another kind there is a maintainer's slip, named with the variable.
    with pytest.raises(ValueError) as info:
        RetiredVariable("VLLM_DEMO_GONE", kind, "no longer read")
    assert str(info.value) == (
        f"VLLM_DEMO_GONE: a retired variable is obsolete or removed, not {kind}"
    )


@pytest.mark.parametrize(
    ("default", "text"),
    [(("qpn4", "qpn2"), "qpn4,qpn2"), ((), "(empty)"), (False, "False"), (8, "8")],
)
def test_a_default_is_documented_as_the_variable_would_spell_it(default, text):
    # The README's variable table and `routectl config` show defaults this way: a list as
    # the comma-separated value its variable takes.
    demo = Field(section="demo", name="names", type=tuple, default=default, variable="VLLM_DEMO")
    assert demo.default_text() == text
