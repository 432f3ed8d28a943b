"""The `v100_attention` policy section (docs/contracts/attention.md §1): every variable's
parse kind and default, resolution once per engine, a bad value of each registered, integer,
threshold or partition variable exiting 2 with one line, and `routectl config` showing it."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.v100_attention_variables import (
    FIELD_NAMES,
    PARSE_KINDS,
    SECTION,
    V100_ATTENTION_FIELDS,
    VARIABLES,
)
from routectl.errors import InputError
from tests.contract_literals import ATTENTION_FIELDS
from tests.fixtures.toy import invoke, ok
from tests.policy_helpers import UNQUALIFIED, resolve

ROOT = Path(__file__).resolve().parents[1]
KEY = {f.name: f"{SECTION}.{f.name}" for f in V100_ATTENTION_FIELDS}


def value(name, env=None, config=None):
    return resolve(env or {}, config, workload=UNQUALIFIED).value(KEY[name])


# §1.2/1.3 literals: (field, variable, parse kind, default), from the contract.
LITERALS = [(name, *rest) for name, rest in ATTENTION_FIELDS.items()]


@pytest.mark.parametrize(("name", "variable", "kind", "default"), LITERALS, ids=lambda v: str(v))
def test_each_variable_has_the_contracts_name_kind_and_default(name, variable, kind, default):
    assert VARIABLES[name] == variable
    assert PARSE_KINDS[name] == kind
    assert value(name) == default


def test_every_field_is_in_the_one_table_and_the_decode_strategy_is_config_only():
    assert len(FIELD_NAMES) == len(set(FIELD_NAMES)) == len(ATTENTION_FIELDS) + 1
    assert "sm70_decode_strategy" in FIELD_NAMES and "sm70_decode_strategy" not in VARIABLES
    assert value("sm70_decode_strategy") == "shared"
    legacy = value("sm70_decode_strategy", config={SECTION: {"sm70_decode_strategy": "legacy"}})
    assert legacy == "legacy"
    with pytest.raises(InputError, match="shared, legacy"):
        value("sm70_decode_strategy", config={SECTION: {"sm70_decode_strategy": "fast"}})


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [
        ("eq1", "1", True),
        ("eq1", "true", False),  # only the exact "1"
        ("eq1", " 1", False),
        ("eq1", "0", False),
        ("ne0", "0", False),
        ("ne0", "off", True),  # anything but the exact "0"
        ("ne0", "", True),
    ],
)
def test_raw_kinds_read_the_text_exactly(kind, text, expected):
    name = "decode_use_xqa" if kind == "eq1" else "decode_use_scalar_paged"
    assert value(name, {VARIABLES[name]: text}) is expected


def test_registered_switches_and_integers_parse_as_integers():
    assert value("prefill_split_kv", {VARIABLES["prefill_split_kv"]: "2"}) is True
    assert value("prefill_split_kv", {VARIABLES["prefill_split_kv"]: "0"}) is False
    assert value("bfla_min_q", {VARIABLES["bfla_min_q"]: "-3"}) == -3


@pytest.mark.parametrize(("text", "expected"), [("0", 1), ("-5", 1), ("1", 1), ("2", 2)])
def test_a_threshold_clamps_to_one(text, expected):
    assert value("decode_xqa_q4_min_seq_len", {VARIABLES["decode_xqa_q4_min_seq_len"]: text}) == (
        expected
    )


@pytest.mark.parametrize("text", ["256", "512", "1024"])
def test_the_partition_size_takes_its_three_values(text):
    assert value("decode_partition_size", {VARIABLES["decode_partition_size"]: text}) == int(text)


def test_the_grouped_verify_minimum_is_at_least_one():
    name = "dflash2_grouped_verify_min_model_len"
    assert value(name, {VARIABLES[name]: "1"}) == 1
    with pytest.raises(InputError, match=">= 1"):
        value(name, {VARIABLES[name]: "0"})


# Every variable whose kind can refuse a text: one bad text each (exit 2, one line).
REFUSING = [
    (f.name, f.variable, bad)
    for f in V100_ATTENTION_FIELDS
    if f.variable is not None and f.parser is not None
    for bad in (("300", "x") if f.parser.name == "partition" else ("x",))
    if f.parser.name in ("int_bool", "int", "threshold", "partition")
]


def test_every_refusing_kind_is_covered():
    kinds = {PARSE_KINDS[name] for name, _, _ in REFUSING}
    assert kinds == {"int_bool", "int", "threshold", "partition"}
    assert len({name for name, _, _ in REFUSING}) == 42


@pytest.mark.parametrize(("name", "variable", "bad"), REFUSING, ids=lambda v: str(v))
def test_a_bad_value_exits_2_with_one_line(name, variable, bad):
    result = ok(invoke(["config"], cwd=ROOT, environ={variable: bad}))
    assert result.code == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert variable in lines[0]
    if PARSE_KINDS[name] == "partition":
        assert "must be one of (256, 512, 1024)" in lines[0]
    if PARSE_KINDS[name] == "threshold":
        assert "must be an integer" in lines[0]


def test_config_shows_the_section_with_sources():
    result = ok(
        invoke(
            ["config", "--capability", "70"],
            cwd=ROOT,
            environ={VARIABLES["decode_use_xqa"]: "0"},
        )
    )
    assert result.code == 0, result.stderr
    assert f"[{SECTION}]" in result.stdout
    assert "decode_use_xqa" in result.stdout
    assert f"alias:{VARIABLES['decode_use_xqa']}" in result.stdout
