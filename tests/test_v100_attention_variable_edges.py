"""The `v100_attention` section's values given in the configuration rather than the
environment (docs/contracts/attention.md §1.2-1.3): the typed values pass the same
validators as the variables, so the decode strategy takes both its words, the partition size
only 0 (automatic), 256, 512 or 1024, and the grouped verifier's minimum model length at least
1; and each field's description names its parse kind. Written for the mutation run of issue
28 (benchmarks/MUTATION.md, seventh session): those validators are attached per field when the
table is built, at import, where the first tests of the section never looked."""

from __future__ import annotations

import pytest

from policies.v100_attention_variables import PARSE_KINDS, SECTION, V100_ATTENTION_FIELDS
from routectl.errors import InputError
from tests.policy_helpers import UNQUALIFIED, resolve


def configured(name: str, setting: object) -> object:
    config = {SECTION: {name: setting}}
    return resolve({}, config, workload=UNQUALIFIED).value(f"{SECTION}.{name}")


@pytest.mark.parametrize("strategy", ["shared", "legacy"])
def test_the_decode_strategy_takes_both_words_when_set(strategy):
    # "shared" is the default, but set explicitly it must still be accepted.
    assert configured("sm70_decode_strategy", strategy) == strategy


@pytest.mark.parametrize("size", [0, 256, 512, 1024])
def test_a_configured_partition_size_takes_automatic_and_the_three_sizes(size):
    assert configured("decode_partition_size", size) == size


@pytest.mark.parametrize("size", [128, 384, 2048])
def test_a_configured_partition_size_outside_them_is_refused(size):
    # The variable's parser refuses these texts; the configuration's value meets the same
    # list through the field's validator, with 0 named as automatic.
    with pytest.raises(InputError, match=r"accepted values are 0 \(automatic\), 256, 512, 1024"):
        configured("decode_partition_size", size)


def test_a_configured_grouped_verify_minimum_is_at_least_one():
    name = "dflash2_grouped_verify_min_model_len"
    assert configured(name, 1) == 1
    with pytest.raises(InputError, match="integers >= 1"):
        configured(name, 0)


def test_only_the_partition_size_and_the_grouped_minimum_carry_a_validator():
    validated = {f.name for f in V100_ATTENTION_FIELDS if f.validate is not None}
    assert validated == {
        "decode_partition_size",
        "dflash2_grouped_verify_min_model_len",
        "sm70_decode_strategy",
    }


def test_each_variables_description_names_its_parse_kind():
    # The configuration schema's description is where a reader learns eq1 from ne0.
    for f in V100_ATTENTION_FIELDS:
        if f.variable is not None:
            assert f.doc is not None and f.doc.endswith(f"({PARSE_KINDS[f.name]})"), f.name
