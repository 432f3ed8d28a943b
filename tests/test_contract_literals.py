"""Expectations written as the contract's literals (tests/contract_literals.py), never taken
from the implementation's tables: the QPN2 tuning table, the exact-W2 slot boundary, the
variables' kinds, the deprecation warnings, precedence and warn-once, the selectors' orders.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import replace
from typing import Any

import pytest
import torch

from native.catalogue import CATALOGUE
from native.kernels import nvfp4_sm70 as nv
from native.layers import Nvfp4Layer
from policies import PROJECT
from policies.awq_moe_admission import CallFacts, TensorFacts, active_exact_w2_call
from policies.awq_moe_routes import select_route
from policies.variables import FIELDS, RETIRED
from routectl.errors import InputError
from routectl.namespaces.native_ns import InMemoryNamespace
from routectl.policy.resolve import PolicyDeprecationWarning, ResolvedPolicy
from routectl.replay.harness import RecordingNamespace
from routectl.workload import EngineConfig, Hardware, ModelFacts
from tests import contract_literals as C
from tests.policy_helpers import QWEN38_LOADED

QUALIFIED = EngineConfig(
    tp=4,
    pp=1,
    spec_method="dflash",
    spec_tokens=7,
    selector_top_k=16,
    max_num_seqs=4,
    max_num_batched_tokens=8192,
    kv_dtype="fp8_e4m3",
)


# The resolution context of the qualified NVFP4 workload without model facts (the DFlash2
# verifier unqualified, no FP8 checkpoint), as the project builds it for QUALIFIED.
CONTEXT = {
    "qualified": True,
    "dflash2_qualified": False,
    "model_quantization": None,
    "capability": 70,
    # The entries the family records add (each written in its module in tests/families/).
    **C.CONTEXT,
}


def resolve(env: dict[str, str], config: Any = None) -> ResolvedPolicy:
    return PROJECT.resolve(config, env, Hardware(70), QUALIFIED)


def deprecation_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, PolicyDeprecationWarning)]


# --- variables by kind (docs/contracts/core.md §1.1, §1.3) ----------------------------------------


def variables_of_kind(kind: str) -> set[str]:
    # Kinds compared by their string value so obsolete/removed (docs/contracts/dflash2.md §1.4) need
    # no change here when they join the Kind enum.
    return {f.variable for f in FIELDS if f.variable and str(f.kind) == kind} | {
        r.variable for r in RETIRED if str(r.kind) == kind
    }


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("deprecated", C.DEPRECATED_VARIABLES),
        ("legacy", C.LEGACY_VARIABLES),
        ("current", C.CURRENT_VARIABLES),
        ("obsolete", C.OBSOLETE_VARIABLES),
        ("removed", C.REMOVED_VARIABLES),
    ],
)
def test_exact_variable_names_of_each_kind(kind: str, expected: frozenset[str]) -> None:
    assert variables_of_kind(kind) == expected


def test_every_field_has_its_contract_variable_and_kind() -> None:
    table = {f.key: (f.variable, str(f.kind)) for f in FIELDS}
    assert table == C.FIELD_VARIABLES


def test_defaults_on_the_qualified_workload() -> None:
    policy = resolve({})
    assert dict(policy.values) == C.QUALIFIED_DEFAULTS
    assert set(dict(policy.sources).values()) == {"default"}


@pytest.mark.parametrize("name", sorted(C.NON_DEFAULT_TEXT))
def test_a_present_variable_sets_every_field_it_feeds(name: str) -> None:
    text, value = C.NON_DEFAULT_TEXT[name]
    policy = resolve({name: text})
    keys = [k for k, (variable, _) in C.FIELD_VARIABLES.items() if variable == name]
    assert keys
    for key in keys:
        assert policy.value(key) == value
        assert policy.source(key) == f"alias:{name}"


# --- warnings and warn-once -----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(C.DEPRECATED_VARIABLES))
def test_each_deprecated_variable_warns_with_the_contract_message(name: str) -> None:
    text, _ = C.NON_DEFAULT_TEXT[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        policy = resolve({name: text})
    assert deprecation_warnings(caught) == [C.DEPRECATION_MESSAGES[name]]
    assert list(policy.warnings) == [C.DEPRECATION_MESSAGES[name]]


@pytest.mark.parametrize(
    "name", sorted((C.LEGACY_VARIABLES | C.CURRENT_VARIABLES) - C.DEPRECATED_VARIABLES)
)
def test_legacy_and_current_variables_never_warn(name: str) -> None:
    text, _ = C.NON_DEFAULT_TEXT[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        policy = resolve({name: text})
    assert deprecation_warnings(caught) == []
    assert policy.warnings == ()


def test_deprecated_variables_warn_once_per_process() -> None:
    env = {name: C.NON_DEFAULT_TEXT[name][0] for name in C.NON_DEFAULT_TEXT}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = resolve(env)
        second = resolve(env)
    emitted = deprecation_warnings(caught)
    assert sorted(emitted) == sorted(C.DEPRECATION_MESSAGES[n] for n in C.DEPRECATED_VARIABLES)
    # The shared AWQ variable feeds two fields but warns once (1.1), and so does the shared
    # VLLM_SM70_FP8_QPN8 (issues 15 and 16): 36 deprecated variables.
    assert len(emitted) == 36
    # Each policy still records its own diagnostics, whatever warned before.
    for policy in (first, second):
        assert sorted(policy.warnings) == sorted(C.DEPRECATION_MESSAGES.values())


def test_resolving_without_emitting_keeps_the_warning_for_the_engine() -> None:
    from routectl.policy.resolve import resolve_fields

    name = "VLLM_SM70_NVFP4_QPN2_SHARED_SCALES"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet = resolve_fields(FIELDS, {}, {name: "0"}, CONTEXT, emit_warnings=False)
        resolve({name: "0"})
    assert quiet.warnings == (C.DEPRECATION_MESSAGES[name],)
    assert deprecation_warnings(caught) == [C.DEPRECATION_MESSAGES[name]]


def test_resolve_fields_warns_by_default() -> None:
    from routectl.policy.resolve import resolve_fields

    name = "VLLM_SM70_AWQ_MLP_ENGINE"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resolve_fields(FIELDS, {}, {name: "1"}, CONTEXT)
    assert deprecation_warnings(caught) == [C.DEPRECATION_MESSAGES[name]]


@pytest.mark.skipif(
    "MUTANT_UNDER_TEST" in os.environ,
    reason="mutmut's trampoline adds a frame between caller and resolver",
)
def test_the_warning_points_at_the_code_that_resolved_the_policy() -> None:
    # stacklevel: the engine's (here this test's) line, not routectl's internals.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        PROJECT.resolve(None, {"VLLM_SM70_NVFP4_QPN2": "1"}, Hardware(70), QUALIFIED)
    [warning] = [w for w in caught if issubclass(w.category, PolicyDeprecationWarning)]
    assert warning.filename == __file__


def test_validation_precedes_any_warning() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(InputError, match="VLLM_SM70_AWQ_QWEN38_QPN_M1"):
            resolve({"VLLM_SM70_NVFP4_QPN2": "1", "VLLM_SM70_AWQ_QWEN38_QPN_M1": "2"})
    assert deprecation_warnings(caught) == []


def test_unknown_sm70_names_are_reported_as_typos() -> None:
    policy = resolve({"VLLM_SM70_NVFP4_QPN22": "1", "VLLM_OTHER": "1", "VLLM_SM70_AWQ": "0"})
    assert policy.warnings == (
        "unknown VLLM_SM70_* variables (typos?): VLLM_SM70_AWQ, VLLM_SM70_NVFP4_QPN22",
    )


# --- precedence (docs/contracts/core.md §1.2) -----------------------------------------------------


def test_explicit_over_variable_over_default() -> None:
    name, key = "VLLM_SM70_NVFP4_QPN2_PREFILL_MIN_M", "sm70_nvfp4.prefill_min_m"
    default = resolve({})
    assert (default.value(key), default.source(key), default.ignored) == (1024, "default", ())
    assert not default.is_explicit(key)
    alias = resolve({name: "9"})
    assert (alias.value(key), alias.source(key), alias.ignored) == (9, f"alias:{name}", ())
    assert alias.is_explicit(key)
    from routectl.policy.resolve import reset_deprecation_warnings

    reset_deprecation_warnings()  # the alias resolution above used up the once-per-process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        typed = resolve({name: "9"}, {"sm70_nvfp4": {"prefill_min_m": 256}})
    assert (typed.value(key), typed.source(key)) == (256, "explicit")
    assert typed.ignored == ((name, key),)
    # A deprecated variable still warns when the explicit field wins.
    assert deprecation_warnings(caught) == [C.DEPRECATION_MESSAGES[name]]
    assert typed.warnings == (C.DEPRECATION_MESSAGES[name],)
    # Explicit and equal to the default is still explicit.
    same = resolve({}, {"sm70_nvfp4": {"prefill_min_m": 1024}})
    assert same.source(key) == "explicit" and same.is_explicit(key) and same.ignored == ()


def test_the_shared_awq_variable_is_ignored_per_field() -> None:
    name = "VLLM_SM70_AWQ_TURBOMIND"
    policy = resolve({name: "0"}, {"sm70_awq": {"enabled": True}})
    assert (policy.value("sm70_awq.enabled"), policy.source("sm70_awq.enabled")) == (
        True,
        "explicit",
    )
    assert (policy.value("sm70_turbomind.awq_moe"), policy.source("sm70_turbomind.awq_moe")) == (
        False,
        f"alias:{name}",
    )
    assert policy.ignored == ((name, "sm70_awq.enabled"),)
    assert policy.warnings == (C.DEPRECATION_MESSAGES[name],)


def test_use_turbomind_backend_override() -> None:
    # 1.3: marlin -> False, turbomind -> True (re-enables a switch set to 0), auto -> switch.
    cases = [  # (environment, sm70_awq.enabled, sm70_fp8.enabled)
        ({}, True, True),
        ({"VLLM_SM70_AWQ_TURBOMIND": "0"}, False, True),
        ({"VLLM_SM70_QUANT_BACKEND": "marlin"}, False, False),
        (
            {
                "VLLM_SM70_QUANT_BACKEND": "turbomind",
                "VLLM_SM70_AWQ_TURBOMIND": "0",
                "VLLM_SM70_FP8_TURBOMIND": "0",
            },
            True,
            True,
        ),
        (
            {
                "VLLM_SM70_QUANT_BACKEND": "auto",
                "VLLM_SM70_AWQ_TURBOMIND": "0",
                "VLLM_SM70_FP8_TURBOMIND": "0",
            },
            False,
            False,
        ),
    ]
    for env, awq_enabled, fp8_enabled in cases:
        policy = resolve(env)
        assert policy.value("sm70_awq.enabled") is awq_enabled, env
        assert policy.value("sm70_fp8.enabled") is fp8_enabled, env
    # A typed value is used as given.
    typed = resolve({"VLLM_SM70_QUANT_BACKEND": "marlin"}, {"sm70_awq": {"enabled": True}})
    assert typed.value("sm70_awq.enabled") is True
    # The legacy provider switches of the other formats keep their own values (only the
    # sections listed as use_turbomind(...) take the override at resolution).
    assert resolve({"VLLM_SM70_QUANT_BACKEND": "marlin"}).value("sm70_turbomind.nvfp4") is True


def test_disabled_kernels_merge_typed_and_variable() -> None:
    policy = resolve(
        {"VLLM_DISABLED_KERNELS": "MarlinLinearKernel, TritonAwqLinearKernel"},
        {"disabled_kernels": ["TritonAwqLinearKernel", "ExllamaLinearKernel"]},
    )
    assert policy.value("disabled_kernels") == (
        "TritonAwqLinearKernel",
        "ExllamaLinearKernel",
        "MarlinLinearKernel",
    )
    assert policy.source("disabled_kernels") == "explicit" and policy.ignored == ()


@pytest.mark.parametrize(
    "name, key",
    [
        ("VLLM_SM70_AWQ_QWEN38_MOE_COMPACT_GROUPED_DECODE", "active_grouped_decode"),
        ("VLLM_SM70_AWQ_MOE_BATCHED_ACTIVE_EXACT_W2", "active_exact_w2"),
    ],
)
def test_natively_read_fields_must_agree_with_the_environment(name: str, key: str) -> None:
    default = C.QUALIFIED_DEFAULTS[f"sm70_awq_moe.{key}"]
    assert resolve({}, {"sm70_awq_moe": {key: default}}).source(f"sm70_awq_moe.{key}") == (
        "explicit"
    )
    with pytest.raises(InputError, match=f"kernel_config.sm70_awq_moe.{key}=.*{name}"):
        resolve({}, {"sm70_awq_moe": {key: not default}})
    with pytest.raises(InputError, match=f"{name}={int(not default)}"):
        resolve({name: str(int(not default))}, {"sm70_awq_moe": {key: default}})
    agreed = resolve({name: str(int(not default))}, {"sm70_awq_moe": {key: not default}})
    assert agreed.value(f"sm70_awq_moe.{key}") is (not default)


# --- parsing boundaries (docs/contracts/core.md §1.2) ---------------------------------------------


@pytest.mark.parametrize("text, value", [("1", 1), ("1024", 1024)])
def test_prefill_min_m_accepts_positive(text: str, value: int) -> None:
    assert (
        resolve({"VLLM_SM70_NVFP4_QPN2_PREFILL_MIN_M": text}).value("sm70_nvfp4.prefill_min_m")
        == value
    )


@pytest.mark.parametrize("text", ["0", "-1"])
def test_prefill_min_m_refuses_zero_and_below(text: str) -> None:
    with pytest.raises(InputError, match="VLLM_SM70_NVFP4_QPN2_PREFILL_MIN_M"):
        resolve({"VLLM_SM70_NVFP4_QPN2_PREFILL_MIN_M": text})
    with pytest.raises(InputError, match="kernel_config.sm70_nvfp4.prefill_min_m"):
        resolve({}, {"sm70_nvfp4": {"prefill_min_m": int(text)}})


@pytest.mark.parametrize(
    "text, value", [("0", False), ("1", True), ("2", True), ("-1", True), (" 0 ", False)]
)
def test_integer_booleans(text: str, value: bool) -> None:
    assert resolve({"VLLM_SM70_NVFP4_QPN4": text}).value("sm70_nvfp4.qpn4") is value


@pytest.mark.parametrize("text", ["yes", "true", "", "1.0"])
def test_non_integer_booleans_are_input_errors(text: str) -> None:
    with pytest.raises(InputError, match="VLLM_SM70_NVFP4_QPN4"):
        resolve({"VLLM_SM70_NVFP4_QPN4": text})


@pytest.mark.parametrize(
    "text, ok", [("0", True), ("1", True), ("2", False), (" 1", False), ("", False)]
)
def test_qpn_m1_accepts_only_0_and_1(text: str, ok: bool) -> None:
    env = {"VLLM_SM70_AWQ_QWEN38_QPN_M1": text}
    if ok:
        assert resolve(env).value("sm70_awq_moe.qpn_m1") is (text == "1")
    else:
        with pytest.raises(InputError, match="VLLM_SM70_AWQ_QWEN38_QPN_M1"):
            resolve(env)


@pytest.mark.parametrize(
    "text, ok", [("0", True), ("4096", True), ("6144", True), ("4095", False), ("8192", False)]
)
def test_w2_chunk_tokens_values(text: str, ok: bool) -> None:
    env = {"VLLM_SM70_AWQ_QWEN38_MOE_W2_CHUNK_TOKENS": text}
    if ok:
        assert resolve(env).value("sm70_awq_moe.w2_chunk_tokens") == int(text)
    else:
        with pytest.raises(InputError, match="VLLM_SM70_AWQ_QWEN38_MOE_W2_CHUNK_TOKENS"):
            resolve(env)


@pytest.mark.parametrize(
    "text, ok",
    [("auto", True), ("turbomind", True), ("marlin", True), ("cutlass", False), ("", False)],
)
def test_quant_backend_values(text: str, ok: bool) -> None:
    env = {"VLLM_SM70_QUANT_BACKEND": text}
    if ok:
        assert resolve(env).value("sm70_turbomind.quant_backend") == text
    else:
        with pytest.raises(InputError, match="VLLM_SM70_QUANT_BACKEND"):
            resolve(env)


@pytest.mark.parametrize(
    "text, value", [("0,3,10-12", ("0", "3", "10-12")), ("4-4", ("4-4",)), ("", ())]
)
def test_layer_lists(text: str, value: tuple[str, ...]) -> None:
    env = {"VLLM_SM70_AWQ_MOE_BATCHED_LAYER_DENYLIST": text}
    assert resolve(env).value("sm70_awq_moe.layer_denylist") == value


@pytest.mark.parametrize("text", ["5-4", "a", "3-", "-3"])
def test_bad_layer_lists(text: str) -> None:
    with pytest.raises(InputError, match="VLLM_SM70_AWQ_MOE_BATCHED_LAYER_ALLOWLIST"):
        resolve({"VLLM_SM70_AWQ_MOE_BATCHED_LAYER_ALLOWLIST": text})


@pytest.mark.parametrize(
    "value, normal",
    [("Flashinfer-Cutlass", "flashinfer_cutlass"), (" auto ", "auto"), ("emulation", "emulation")],
)
def test_linear_backend_is_normalised(value: str, normal: str) -> None:
    assert resolve({}, {"linear_backend": value}).value("linear_backend") == normal


def test_unknown_linear_backend_and_kernel_name_are_input_errors() -> None:
    with pytest.raises(InputError, match="kernel_config.linear_backend"):
        resolve({}, {"linear_backend": "cuda"})
    with pytest.raises(InputError, match="did you mean MarlinLinearKernel"):
        resolve({"VLLM_DISABLED_KERNELS": "MarlinLinearKernal"})
    # The error names where the bad name came from: the variable or the typed field.
    with pytest.raises(InputError, match="'MarlinLinearKernal' in VLLM_DISABLED_KERNELS"):
        resolve({"VLLM_DISABLED_KERNELS": "MarlinLinearKernal"})
    with pytest.raises(InputError, match="'MarlinLinearKernal' in kernel_config.disabled_kernels"):
        resolve({}, {"disabled_kernels": ["MarlinLinearKernal"]})


# --- QPN2 tuning (docs/contracts/core.md §2.1) ----------------------------------------------------


@pytest.mark.parametrize("key", sorted(C.QPN2_TUNING))
def test_qpn2_tuning_table_entries(key: tuple[int, int, bool]) -> None:
    assert nv.qpn2_tuning(*key) == C.QPN2_TUNING[key]


@pytest.mark.parametrize(
    "k, n_padded, gated, expected",
    [
        # otherwise: split_k = 8 if gated or K % 256 else 16, nacc = 2
        (5120, 1024, False, (16, 2)),
        (5120, 1024, True, (8, 2)),
        (384, 1024, False, (8, 2)),
        (256, 32, False, (16, 2)),
        (4352, 5120, True, (8, 2)),
        (1536, 5120, True, (8, 2)),
        (1536, 4096, False, (16, 2)),
        (5120, 3584, True, (8, 2)),
        (128, 32, False, (8, 2)),
    ],
)
def test_qpn2_tuning_rule_outside_the_table(
    k: int, n_padded: int, gated: bool, expected: tuple[int, int]
) -> None:
    assert nv.qpn2_tuning(k, n_padded, gated) == expected


def dispatched_plans(k: int, n: int, prefix: str, gated_call: bool) -> list[dict[str, Any]]:
    """The recorded QPN2 plans of one prepared layer (a shape the snapshots do not carry)."""
    ns = RecordingNamespace(CATALOGUE)
    spec = Nvfp4Layer.of(prefix, k, n)
    layout = nv.plan_qpn2(spec, nv.Qpn2Options(), ns)
    prepared = nv.prepare_qpn2(spec, spec.checkpoint_tensors(), ns, layout)
    mark = ns.mark()
    x = torch.empty((4, k), dtype=torch.float16, device="meta")
    if gated_call:
        assert prepared.apply_gated is not None
        prepared.apply_gated(x)
    else:
        prepared.apply(x)
    return [c["plan"] for c in ns.since(mark)]


@pytest.mark.parametrize(
    "k, n, prefix, gated_call, split_k",
    [
        (1536, 5120, "model.layers.0.self_attn.o_proj", False, 8),
        (5120, 3584, "model.layers.0.self_attn.qkv_proj", False, 16),
        (5120, 4120, "model.layers.0.linear_attn.in_proj_qkvz", False, 16),  # N pads to 4128
        (5120, 8704, "model.layers.0.mlp.gate_up_proj", True, 8),
        (5120, 8704, "model.layers.0.mlp.gate_up_proj", False, 8),
        (4352, 5120, "model.layers.0.mlp.down_proj", False, 16),
        (1536, 4096, "model.layers.0.self_attn.o_proj", False, 16),  # untabled: K % 256 == 0
    ],
)
def test_dispatch_plans_carry_the_tuned_split_k(
    k: int, n: int, prefix: str, gated_call: bool, split_k: int
) -> None:
    plans = dispatched_plans(k, n, prefix, gated_call)
    assert [(p["split_k"], p["nacc"], p["gated"]) for p in plans] == [(split_k, 2, gated_call)]


# --- exact-W2 boundary, M * top_k vs 128 (docs/contracts/core.md §3.4) ----------------------------


@pytest.mark.parametrize(
    "m, top_k, admitted",
    [
        (16, 8, True),
        (17, 8, False),
        (15, 8, True),  # 16 * 8 == 128 exactly
        (12, 10, True),
        (13, 10, False),
        (128, 1, True),
        (129, 1, False),
        (1, 128, True),
        (1, 129, False),
    ],
)
def test_active_exact_w2_slot_boundary(m: int, top_k: int, admitted: bool) -> None:
    ok, reason = active_exact_w2_call(True, m, top_k)
    assert ok is admitted
    if not admitted:
        assert reason is not None and reason.code == "token_count"
        assert f"M*top_k = {m * top_k} above 128" in reason.message
    off_ok, off_reason = active_exact_w2_call(False, m, top_k)
    assert off_ok is False and off_reason is not None and off_reason.code == "policy"


ACTIVE = replace(QWEN38_LOADED, active_exact_w2=True)


def moe_call(m: int, top_k: int) -> CallFacts:
    return CallFacts(
        TensorFacts((m, 2560), "float16", True),
        TensorFacts((m, top_k), "int32"),
        TensorFacts((m, top_k), "float32"),
    )


@pytest.mark.parametrize(
    "m, top_k, w2",
    [
        (16, 8, "w2.active_grouped"),
        (17, 8, "w2.per_expert_dispatch"),
        (12, 10, "w2.active_grouped"),
        (13, 10, "w2.per_expert_dispatch"),
    ],
)
def test_active_exact_w2_route_at_the_boundary(m: int, top_k: int, w2: str) -> None:
    namespace = InMemoryNamespace(tuple(CATALOGUE.ops))
    chosen = select_route(moe_call(m, top_k), ACTIVE, namespace).chosen
    assert chosen == [
        "lane.routed",
        "permute.permute",
        "w13.per_expert_dispatch",
        w2,
        "reduce.unpermute",
    ]
    # Without the flag the same call takes the per-expert W2.
    plain = select_route(moe_call(m, top_k), replace(ACTIVE, active_exact_w2=False), namespace)
    assert plain.chosen[3] == "w2.per_expert_dispatch"


# --- selector priority orders (docs/contracts/core.md §2.1, §2.3) ---------------------------------


def test_kernel_tuples_are_in_contract_priority_order() -> None:
    from native.kernels.awq_dense import AWQ_DENSE_KERNELS

    assert [k.name for k in nv.NVFP4_SM70_KERNELS] == C.NVFP4_SM70_ORDER
    assert [k.name for k in AWQ_DENSE_KERNELS] == C.AWQ_DENSE_ORDER


# --- serialisation keeps what precedence decided (docs/contracts/core.md §1.5) --------------------


def test_round_trips_keep_ignored_variables_and_warnings() -> None:
    import json
    import pickle

    policy = resolve(
        {"VLLM_SM70_AWQ_TURBOMIND": "0", "VLLM_SM70_NVFP4_QPN2": "0"},
        {"sm70_awq": {"enabled": True}, "sm70_nvfp4": {"qpn2": True}},
    )
    assert policy.ignored == (
        ("VLLM_SM70_AWQ_TURBOMIND", "sm70_awq.enabled"),
        ("VLLM_SM70_NVFP4_QPN2", "sm70_nvfp4.qpn2"),
    )
    data = policy.to_json()
    assert data["ignored"] == [
        ["VLLM_SM70_AWQ_TURBOMIND", "sm70_awq.enabled"],
        ["VLLM_SM70_NVFP4_QPN2", "sm70_nvfp4.qpn2"],
    ]
    assert data["schema_version"] == 1 and "format" not in data  # as every document says it
    again = ResolvedPolicy.from_json(json.loads(json.dumps(data)))
    assert again == policy and again.ignored == policy.ignored
    assert again.warnings == policy.warnings and len(again.warnings) == 2
    unpickled = pickle.loads(pickle.dumps(policy))
    assert unpickled == policy and unpickled.ignored == policy.ignored


def test_an_unknown_policy_schema_version_is_refused() -> None:
    data = resolve({}).to_json()
    with pytest.raises(InputError, match="resolved policy schema_version 2 is not 1"):
        ResolvedPolicy.from_json({**data, "schema_version": 2})


def test_a_resolved_policy_written_with_the_old_format_key_is_read() -> None:
    policy = resolve({"VLLM_SM70_AWQ_TURBOMIND": "0"})
    data = policy.to_json()
    old = {"format": data.pop("schema_version"), **data}
    assert ResolvedPolicy.from_json(old) == policy
    with pytest.raises(InputError, match="resolved policy schema_version 2 is not 1"):
        ResolvedPolicy.from_json({**old, "format": 2})


def test_typed_values_outside_their_sets_name_the_field_and_the_accepted_values() -> None:
    with pytest.raises(
        InputError,
        match=r"invalid value 5000 for "
        r"kernel_config\.sm70_awq_moe\.w2_chunk_tokens: accepted values are "
        r"0, 4096, 6144",
    ):
        resolve({}, {"sm70_awq_moe": {"w2_chunk_tokens": 5000}})
    with pytest.raises(
        InputError,
        match=r"invalid layer id 5-4 in "
        r"kernel_config\.sm70_awq_moe\.layer_denylist",
    ):
        resolve({}, {"sm70_awq_moe": {"layer_denylist": ["5-4"]}})


def test_even_a_far_off_kernel_name_gets_the_closest_suggestion() -> None:
    # 1.3: "the closest known name suggested", however far.
    with pytest.raises(InputError, match="did you mean "):
        resolve({"VLLM_DISABLED_KERNELS": "Zq"})


@pytest.mark.parametrize(
    "m, cap, within",
    [(2, 1, False), (1, 1, True), (4, 4, True), (5, 4, False), (8192, 0, True), (8192, -1, True)],
)
def test_batched_decode_cap_boundaries(m: int, cap: int, within: bool) -> None:
    # 1.2/3.5: M <= max_batched_tokens when that is > 0; <= 0 is unbounded.
    from policies.awq_moe_admission import within_cap

    assert within_cap(m, cap) is within


# docs/contracts/core.md §5.2: the one layer each model scope's rows describe, per linear category
# and TP.
@pytest.mark.parametrize(
    "category, row, layer",
    [
        (
            "sm70-nvfp4-linear",
            "27b_dflash2_nvfp4/fp8_e4m3/tp4/dflash/c4/q8192",
            {"kind": "nvfp4", "role": "in_proj_qkvz", "k": 5120, "n": 4120},
        ),
        (
            "sm70-nvfp4-linear",
            "27b_dflash2_nvfp4/fp8_e4m3/tp2/dflash/c4/q8192",
            {"kind": "nvfp4", "role": "in_proj_qkvz", "k": 5120, "n": 8240},
        ),
        (
            "sm70-awq-linear",
            "35b_a3b_awq/fp8_e4m3/tp4/none/c4/q8192",
            {"kind": "awq", "role": "qkv_proj", "k": 2560, "n": 3584, "group": 32},
        ),
        (
            "sm75-linear",
            "27b_dflash2_nvfp4/float16/tp4/none/c1/q4096",
            {"kind": "nvfp4", "role": "in_proj_qkvz", "k": 5120, "n": 4120},
        ),
        (
            "sm75-linear",
            "flash_next_mtp4_nvfp4/float16/tp2/mtp/c8/q8192",
            {"kind": "nvfp4", "role": "in_proj_qkvz", "k": 5120, "n": 8240},
        ),
        (
            "sm75-linear",
            "27b_fp8/float16/tp2/none/c1/q4096",
            {"kind": "fp8", "role": "qkv_proj", "k": 5120, "n": 7168},
        ),
        (
            "sm75-linear",
            "27b_fp8/float16/tp4/none/c1/q4096",
            {"kind": "fp8", "role": "qkv_proj", "k": 5120, "n": 3584},
        ),
    ],
)
def test_linear_categories_describe_the_contract_layer(
    category: str, row: str, layer: dict[str, Any]
) -> None:
    (spec,) = [r for r in PROJECT.category(category).rows() if r.id == row]
    assert dict(spec.layer) == layer


# docs/contracts/core.md §5.1/§5.2: the standard matrix of each linear category (108 rows per model,
# in model x kv x tp x spec x c x budget order) and its engine double per row; the model facts
# the double carries are docs/contracts/dflash2.md §4.1's table.
LINEAR_MATRIX_ROWS = {"sm70-nvfp4-linear": 324, "sm70-awq-linear": 324, "sm75-linear": 432}
LINEAR_PROBE_ROWS = {"sm70-nvfp4-linear": 18, "sm70-awq-linear": 10}
NA = "not_applicable"
LINEAR_MODEL_STATUS = {
    "sm70-nvfp4-linear": {
        ("27b_dflash2_nvfp4", None),
        ("flash_next_mtp4_nvfp4", NA),
        ("35b_a3b_awq", NA),
    },
    "sm70-awq-linear": {
        ("27b_dflash2_nvfp4", NA),
        ("flash_next_mtp4_nvfp4", NA),
        ("35b_a3b_awq", None),
    },
    "sm75-linear": {
        ("27b_dflash2_nvfp4", None),
        ("flash_next_mtp4_nvfp4", None),
        ("35b_a3b_awq", NA),
        ("27b_fp8", None),
    },
}


@pytest.mark.parametrize("category", sorted(LINEAR_MATRIX_ROWS))
def test_linear_matrix_rows_ids_and_engine_double(category: str) -> None:
    rows = PROJECT.category(category).rows()
    matrix = [r for r in rows if not r.id.startswith("edge:")]
    assert len(matrix) == LINEAR_MATRIX_ROWS[category]
    if category in LINEAR_PROBE_ROWS:
        assert len(rows) - len(matrix) == LINEAR_PROBE_ROWS[category]
    assert [r.id for r in matrix[:3]] == [
        "27b_dflash2_nvfp4/float16/tp2/none/c1/q4096",
        "27b_dflash2_nvfp4/float16/tp2/none/c1/q8192",
        "27b_dflash2_nvfp4/float16/tp2/none/c4/q4096",
    ]
    assert [r.id for r in matrix[107:109]] == [
        "27b_dflash2_nvfp4/fp8_e5m2/tp4/dflash/c8/q8192",
        "flash_next_mtp4_nvfp4/float16/tp2/none/c1/q4096",
    ]
    assert {r.capability for r in matrix} == {75 if category == "sm75-linear" else 70}
    # docs/contracts/core.md §5.2: "not applicable" cells are rows with that status and no layer.
    statuses = {(r.model, r.status[0] if r.status else None) for r in matrix}
    assert statuses == LINEAR_MODEL_STATUS[category]
    by_id = {r.id: r for r in matrix}
    dflash = by_id["27b_dflash2_nvfp4/fp8_e4m3/tp4/dflash/c4/q8192"]
    assert dflash.model == "27b_dflash2_nvfp4"
    assert dflash.engine == EngineConfig(
        tp=4,
        pp=1,
        spec_method="dflash",
        spec_tokens=7,
        selector_top_k=16,
        max_num_seqs=4,
        max_num_batched_tokens=8192,
        dbo=False,
        ubatch=0,
        kv_dtype="fp8_e4m3",
        model=ModelFacts(("Qwen3_5ForConditionalGeneration",), "float16", 5120, 24, 4, 256),
    )
    mtp = by_id["flash_next_mtp4_nvfp4/fp8_e5m2/tp2/mtp/c8/q4096"]
    assert mtp.engine == EngineConfig(
        tp=2,
        pp=1,
        spec_method="mtp",
        spec_tokens=4,
        selector_top_k=0,
        max_num_seqs=8,
        max_num_batched_tokens=4096,
        dbo=False,
        ubatch=0,
        kv_dtype="fp8_e5m2",
        model=ModelFacts(
            ("Qwen4ExpForConditionalGeneration",),
            "float16",
            2560,
            24,
            4,
            256,
            language_model_only=True,  # docs/contracts/flashnext.md §6.1
        ),
    )
