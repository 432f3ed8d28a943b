from __future__ import annotations

import json
import os
import pickle
import warnings

import pytest

from policies.variables import FIELDS, UNKNOWN_PREFIX
from routectl.errors import InputError
from routectl.policy.fields import Field, Kind
from routectl.policy.resolve import PolicyDeprecationWarning, deprecation_message
from tests.contract_literals import DEPRECATED_VARIABLES, DEPRECATION_MESSAGES
from tests.policy_helpers import QUALIFIED, UNQUALIFIED, resolve, sample, typed_config

VARIABLE_FIELDS = [f for f in FIELDS if f.variable]
NATIVE_READ = [f for f in FIELDS if f.native_read]


def test_exactly_the_contract_deprecated_variables():
    names = {f.variable for f in FIELDS if f.kind is Kind.DEPRECATED}
    assert names == DEPRECATED_VARIABLES


@pytest.mark.parametrize("field", VARIABLE_FIELDS, ids=lambda f: f.key)
def test_variable_unset_gives_default_source(field):
    policy = resolve({})
    assert policy.source(field.key) == "default"


@pytest.mark.parametrize("field", VARIABLE_FIELDS, ids=lambda f: f.key)
def test_variable_set_is_used_with_alias_source(field):
    text, expected = sample(field)
    policy = resolve({field.variable: text})
    assert policy.value(field.key) == expected
    assert policy.source(field.key) == f"alias:{field.variable}"
    assert policy.is_explicit(field.key)


@pytest.mark.parametrize(
    "field", [f for f in VARIABLE_FIELDS if not f.native_read], ids=lambda f: f.key
)
def test_explicit_field_wins_and_variable_is_ignored(field):
    text, env_value = sample(field)
    explicit = policy_default = resolve({}).value(field.key)
    if field.merge:
        explicit = ("TritonAwqLinearKernel",)
    policy = resolve({field.variable: text}, typed_config(field, explicit))
    assert policy.source(field.key) == "explicit"
    if field.merge:
        assert policy.value(field.key) == tuple(dict.fromkeys((*explicit, *env_value)))
        assert (field.variable, field.key) not in policy.ignored
    else:
        assert policy.value(field.key) == policy_default
        assert (field.variable, field.key) in policy.ignored


@pytest.mark.parametrize("field", NATIVE_READ, ids=lambda f: f.key)
def test_natively_read_field_conflict_is_an_input_error(field):
    text, env_value = sample(field)
    default = resolve({}).value(field.key)
    # Agreeing with the default or with the variable is fine.
    assert resolve({}, typed_config(field, default)).source(field.key) == "explicit"
    assert (
        resolve({field.variable: text}, typed_config(field, env_value)).value(field.key)
        == env_value
    )
    with pytest.raises(InputError, match=field.variable):
        resolve({}, typed_config(field, not default))
    with pytest.raises(InputError, match=field.variable):
        resolve({field.variable: text}, typed_config(field, default))


# An empty text is a valid (empty) layer list; every other parser refuses it. The attention
# section's raw kinds (docs/contracts/attention.md §1.1: eq1, ne0 and free text) accept any
# text by contract; tests/test_v100_attention_policy.py proves their reading.
ANY_TEXT_PARSERS = ("name_list", "eq1", "ne0", "text")
INVALID_TEXTS = [
    (f, bad)
    for f in VARIABLE_FIELDS
    if f.parser.name not in ANY_TEXT_PARSERS
    for bad in ("yes", "", "1.5", "-x")
    if not (bad == "" and f.parser.name == "layer_list")
]


@pytest.mark.parametrize(
    "field, bad", INVALID_TEXTS, ids=[f"{f.key}-{bad!r}" for f, bad in INVALID_TEXTS]
)
def test_invalid_values_name_the_variable_and_accepted_values(field, bad):
    with pytest.raises(InputError) as info:
        resolve({field.variable: bad})
    message = str(info.value)
    assert field.variable in message and "accepted" in message


def test_qpn_m1_accepts_only_0_and_1():
    field = next(f for f in FIELDS if f.key == "sm70_awq_moe.qpn_m1")
    assert resolve({field.variable: "1"}).value(field.key) is True
    with pytest.raises(InputError):
        resolve({field.variable: "2"})
    other = next(f for f in FIELDS if f.key == "sm70_awq_moe.batched")
    assert resolve({other.variable: "2"}).value(other.key) is True  # any non-zero int = true


def test_integer_rules():
    by_key = {f.key: f for f in FIELDS}
    pm = by_key["sm70_nvfp4.prefill_min_m"]
    with pytest.raises(InputError):
        resolve({pm.variable: "0"})
    with pytest.raises(InputError):
        resolve({}, {"sm70_nvfp4": {"prefill_min_m": 0}})
    mbt = by_key["sm70_awq_moe.max_batched_tokens"]
    assert resolve({mbt.variable: "-3"}).value(mbt.key) == -3
    chunk = by_key["sm70_awq_moe.w2_chunk_tokens"]
    assert resolve({chunk.variable: "6144"}).value(chunk.key) == 6144
    with pytest.raises(InputError, match="4096"):
        resolve({chunk.variable: "5000"})


def test_validation_precedes_any_warning():
    deprecated = next(f for f in FIELDS if f.kind is Kind.DEPRECATED)
    bad = next(f for f in FIELDS if f.parser is not None and f.parser.name == "strict_01")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(InputError):
            resolve({deprecated.variable: "1", bad.variable: "maybe"})
    assert caught == []


def test_deprecated_variables_warn_once_per_process_and_others_never():
    env = {f.variable: sample(f)[0] for f in VARIABLE_FIELDS}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = resolve(env)
        resolve(env)
    emitted = [str(w.message) for w in caught if issubclass(w.category, PolicyDeprecationWarning)]
    # The names come from the contract (tests/contract_literals.py), not the field table.
    assert sorted(emitted) == sorted(DEPRECATION_MESSAGES[n] for n in DEPRECATED_VARIABLES)
    # Each policy still records its own diagnostics, whatever warned before.
    assert sorted(m for m in first.warnings if "deprecated" in m) == sorted(emitted)
    awq = next(m for m in first.warnings if "AWQ_TURBOMIND" in m)
    assert "for dense linear layers" in awq and "kernel_config.sm70_awq.enabled" in awq
    assert "Explicit configuration takes precedence." in awq


def test_deprecation_warning_is_visible_by_default():
    assert issubclass(PolicyDeprecationWarning, FutureWarning)


def test_deprecated_variable_still_warns_when_explicit_field_wins():
    field = next(f for f in FIELDS if f.key == "sm70_nvfp4.shared_weight")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        policy = resolve({field.variable: "0"}, {"sm70_nvfp4": {"shared_weight": True}})
    assert policy.value(field.key) is True
    assert any(field.variable in str(w.message) for w in caught)


def test_unknown_sm70_variables_are_reported():
    policy = resolve({UNKNOWN_PREFIX + "NVFP4_QPN22": "1", UNKNOWN_PREFIX + "ZZ": "0"})
    line = next(m for m in policy.warnings if "typos" in m)
    assert UNKNOWN_PREFIX + "NVFP4_QPN22" in line and UNKNOWN_PREFIX + "ZZ" in line


def test_environ_is_never_written():
    before = dict(os.environ)
    env = {f.variable: sample(f)[0] for f in VARIABLE_FIELDS}
    resolve(env)
    assert dict(os.environ) == before


def test_workload_qualification_feeds_computed_defaults():
    assert resolve({}, workload=QUALIFIED).value("sm70_nvfp4.qpn2") is True
    assert resolve({}, workload=UNQUALIFIED).value("sm70_nvfp4.qpn2") is False
    assert resolve({}, workload=UNQUALIFIED).value("sm70_nvfp4.prefill") is False


def test_use_turbomind_override():
    backend = next(f for f in FIELDS if f.key == "sm70_turbomind.quant_backend").variable
    awq = next(f for f in FIELDS if f.key == "sm70_awq.enabled").variable
    assert resolve({backend: "marlin"}).value("sm70_awq.enabled") is False
    assert resolve({backend: "turbomind", awq: "0"}).value("sm70_awq.enabled") is True
    assert resolve({awq: "0"}).value("sm70_awq.enabled") is False
    # A typed value is used as given.
    assert (
        resolve({backend: "marlin"}, {"sm70_awq": {"enabled": True}}).value("sm70_awq.enabled")
        is True
    )


def test_two_policies_in_one_process_are_independent():
    field = next(f for f in FIELDS if f.key == "sm70_nvfp4.prefill_min_m")
    a = resolve({field.variable: "9"})
    b = resolve({})
    assert a.value(field.key) == 9 and b.value(field.key) == 1024
    assert a.compute_hash(["sm70_nvfp4"]) != b.compute_hash(["sm70_nvfp4"])


def test_hash_changes_exactly_when_a_used_value_changes():
    base = resolve({})
    moe = next(f for f in FIELDS if f.key == "sm70_awq_moe.batched")
    other = resolve({moe.variable: "0"})
    assert base.compute_hash(["sm70_nvfp4"]) == other.compute_hash(["sm70_nvfp4"])
    assert base.compute_hash(["sm70_awq_moe"]) != other.compute_hash(["sm70_awq_moe"])
    # Sources never enter the hash: the same values typed explicitly hash the same.
    explicit = resolve({}, {"sm70_nvfp4": {"qpn2": True, "prefill_min_m": 1024}})
    assert explicit.compute_hash(["sm70_nvfp4"]) == base.compute_hash(["sm70_nvfp4"])


def test_pinned_hash_of_qualified_dflash_defaults():
    policy = resolve({}, workload=QUALIFIED)
    assert policy.compute_hash(["sm70_nvfp4"]) == PINNED_HASH


# sha256 of {"engine":{"disabled_kernels":[],"linear_backend":"auto"},"format":1,
#  "sections":{"sm70_nvfp4":{...the eight defaults, qpn2/prefill true (qualified)...}}}
PINNED_HASH = "1eef248f7afb7cb25645b3689456f78a76e47985d04f8f7fc367b9edaa3e6f0c"


def test_json_and_pickle_round_trips():
    env = {f.variable: sample(f)[0] for f in VARIABLE_FIELDS}
    policy = resolve(env)
    again = type(policy).from_json(json.loads(json.dumps(policy.to_json())))
    assert again == policy and hash(again) == hash(policy)
    assert again.compute_hash(["sm70_awq_moe"]) == policy.compute_hash(["sm70_awq_moe"])
    unpickled = pickle.loads(pickle.dumps(policy))
    assert unpickled == policy
    assert unpickled.compute_hash(["sm70_nvfp4"]) == policy.compute_hash(["sm70_nvfp4"])


def test_resolved_policy_is_frozen():
    policy = resolve({})
    with pytest.raises(AttributeError):
        policy.values = ()  # type: ignore[misc]


@pytest.mark.parametrize("seed", ["0", "4242"])
def test_hash_is_identical_across_processes_and_hash_seeds(seed):
    import subprocess
    import sys

    code = (
        "from tests.policy_helpers import resolve, QUALIFIED;"
        "print(resolve({}, workload=QUALIFIED).compute_hash(['sm70_nvfp4']))"
    )
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=os.path.dirname(os.path.dirname(__file__)),
    )
    assert out.stdout.strip() == PINNED_HASH


@pytest.mark.parametrize("field", VARIABLE_FIELDS[::7], ids=lambda f: f.key)
def test_no_config_resolves_like_an_empty_kernel_config(field):
    from policies.config import KernelConfig

    env = {field.variable: sample(field)[0]}
    for config in ({}, "{}", KernelConfig()):
        assert resolve(env, config) == resolve(env, None)


def _deprecated(name: str, scope: str) -> Field:
    return Field(
        section="demo",
        name=name,
        type=bool,
        default=False,
        variable="VLLM_DEMO_OLD",
        kind=Kind.DEPRECATED,
        deprecation_scope=scope,
    )


@pytest.mark.parametrize(
    ("scopes", "message"),
    [
        (
            (" for dense layers", " for dense layers"),
            "VLLM_DEMO_OLD is deprecated for dense layers; use kernel_config.demo.a or "
            "kernel_config.demo.b. Explicit configuration takes precedence.",
        ),
        # A scope true of one path only would mislead about the other: none is said.
        (
            (" for dense layers", " for MoE layers"),
            "VLLM_DEMO_OLD is deprecated; use kernel_config.demo.a or kernel_config.demo.b. "
            "Explicit configuration takes precedence.",
        ),
    ],
)
def test_one_variable_feeding_two_deprecated_fields_says_a_scope_only_if_shared(scopes, message):
    first, second = (_deprecated(n, s) for n, s in zip("ab", scopes, strict=True))
    assert deprecation_message(first, second) == message
