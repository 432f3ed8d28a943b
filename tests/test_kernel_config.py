from __future__ import annotations

import json

import pytest

from policies import PROJECT, KernelConfig
from policies.families import FAMILIES
from policies.variables import FIELDS, SECTIONS, SHARED_FIELDS, field
from routectl.errors import InputError
from tests import families
from tests.policy_helpers import resolve

# The sections the contracts name, typed out in each family's expectations module
# (tests/families/, `SECTIONS`), so a lost or renamed section fails. The table may hold more
# only where a family record declares them (a new family's).
CONTRACT_SECTIONS = families.names("SECTIONS")


def test_sections_and_fields_come_from_the_table():
    assert CONTRACT_SECTIONS <= set(SECTIONS)
    declared = {f.section for family in PROJECT.families for f in family.fields}
    assert set(SECTIONS) - CONTRACT_SECTIONS <= declared
    # The families' own tables follow the shared one, in list order.
    assert FIELDS == (*SHARED_FIELDS, *(f for family in FAMILIES for f in family.fields))
    # The sections the families' own tables declare, as their modules state them.
    assert families.names("OWN_SECTIONS") == declared
    assert declared.isdisjoint({f.section for f in SHARED_FIELDS})
    config = KernelConfig()
    for f in FIELDS:
        holder = config if f.section is None else getattr(config, f.section)
        assert getattr(holder, f.name) is None  # every field starts unset


def test_kwargs_json_and_file_forms(tmp_path):
    from_kwargs = PROJECT.load_config({"sm70_nvfp4": {"qpn2": False}})
    from_json = PROJECT.load_config('{"sm70_nvfp4": {"qpn2": false}}')
    path = tmp_path / "kc.json"
    path.write_text(json.dumps({"sm70_nvfp4": {"qpn2": False}}))
    from_file = PROJECT.load_config(f"@{path}")
    assert from_kwargs == from_json == from_file
    assert from_file.sm70_nvfp4.qpn2 is False


@pytest.mark.parametrize(
    "value, fragment",
    [
        ({"sm70_nvfp4": {"qpn3": True}}, "kernel_config.sm70_nvfp4.qpn3"),
        ({"sm70_nvfp5": {}}, "kernel_config.sm70_nvfp5"),
        ({"sm70_nvfp4": {"qpn2": "yes"}}, "kernel_config.sm70_nvfp4.qpn2"),
        ({"sm70_nvfp4": {"prefill_min_m": "9"}}, "kernel_config.sm70_nvfp4.prefill_min_m"),
        ({"sm70_awq_moe": {"batched": 1}}, "kernel_config.sm70_awq_moe.batched"),
        ({"disabled_kernels": "TritonAwqLinearKernel"}, "kernel_config.disabled_kernels"),
    ],
)
def test_unknown_fields_and_wrong_types_name_the_field(value, fragment):
    with pytest.raises(InputError, match=fragment.replace(".", r"\.")):
        PROJECT.load_config(value)


def test_malformed_json_and_missing_file(tmp_path):
    with pytest.raises(InputError, match="not valid JSON"):
        PROJECT.load_config("{nope")
    with pytest.raises(InputError, match="cannot read"):
        PROJECT.load_config(f"@{tmp_path / 'missing.json'}")


def test_disabled_kernels_accepts_catalogue_and_upstream_names():
    var = field("disabled_kernels").variable
    policy = resolve(
        {var: "MarlinLinearKernel"}, {"disabled_kernels": ["TurboMindAwqLinearKernel"]}
    )
    assert policy.disabled_kernels == ("TurboMindAwqLinearKernel", "MarlinLinearKernel")


@pytest.mark.parametrize("where", ["typed", "variable"])
def test_unknown_kernel_name_suggests_the_closest(where):
    var = field("disabled_kernels").variable
    env, config = (
        ({}, {"disabled_kernels": ["Qpn2NvFp4LinearKernal"]})
        if where == "typed"
        else ({var: "Qpn2NvFp4LinearKernal"}, None)
    )
    with pytest.raises(InputError, match="did you mean Qpn2NvFp4LinearKernel"):
        resolve(env, config)


def test_linear_backend_is_normalised_and_checked():
    assert (
        resolve({}, {"linear_backend": "FlashInfer-Cutlass"}).linear_backend == "flashinfer_cutlass"
    )
    assert resolve({}).linear_backend == "auto"
    with pytest.raises(InputError, match="linear_backend"):
        resolve({}, {"linear_backend": "cudnn"})


def test_layer_lists_parse_ids_and_ranges():
    var = field("sm70_awq_moe.layer_allowlist").variable
    assert resolve({var: "1, 4-6"}).sm70_awq_moe.layer_allowlist == ("1", "4-6")
    with pytest.raises(InputError):
        resolve({var: "6-4"})
    with pytest.raises(InputError):
        resolve({}, {"sm70_awq_moe": {"layer_denylist": ["x"]}})
