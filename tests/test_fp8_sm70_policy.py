"""The sm70_fp8 policy of Volta block-FP8 linears (docs/contracts/fp8.md §1, §2, §5) and the
verifier bridge (issue 16): fields, aliases, inheritance, explicit_enables, the bridge, the
capability classes, selection, admission and load errors. Expected values are literals from the
contract or the issue."""

from __future__ import annotations

import warnings

import pytest

from native.kernels import fp8_sm70 as fs
from native.layers import BlockFp8Layer
from policies import PROJECT
from policies.categories.matrix import engine as matrix_engine
from policies.linear_fp8_sm70 import (
    block_qpn8_policy,
    checkpoint_admission,
    explicit_enables,
    load_fp8_sm70,
    select_fp8_sm70,
)
from policies.variables import FIELDS
from routectl.errors import InputError, SelectionError
from routectl.policy.fields import Kind
from routectl.policy.resolve import PolicyDeprecationWarning
from routectl.replay.harness import RecordingNamespace
from routectl.workload import EngineConfig, Hardware

HW = Hardware(70)
PLAIN = EngineConfig(tp=4, max_num_seqs=4)  # no model facts: the bridge never applies
QPN8 = "VLLM_SM70_FP8_QPN8"
PP2 = "VLLM_SM70_FP8_QPN8_PP2_TP4"
TM = "TurboMindFp8LinearKernel"
BLOCK = "QPN8Fp8BlockScaledMMLinearKernel"

# docs/contracts/fp8.md §1.1: (field, variable, kind, default).
TABLE = [
    ("enabled", "VLLM_SM70_FP8_TURBOMIND", Kind.DEPRECATED, True),
    ("dequant_fallback", "VLLM_SM70_FP8_DEQUANT_FALLBACK", Kind.DEPRECATED, True),
    ("qpn8", "VLLM_SM70_FP8_QPN8", Kind.DEPRECATED, False),
    ("qpn8_pp2_tp4", "VLLM_SM70_FP8_QPN8_PP2_TP4", Kind.DEPRECATED, False),
    ("qpn8_shared_gate", "VLLM_SM70_FP8_QPN8_PP2_TP4_SHARED_GATE", Kind.DEPRECATED, False),
    ("prescaled_decode", "VLLM_SM70_FP8_PRESCALED_M1_DECODE", Kind.DEPRECATED, True),
    ("prescaled_shared_gate", "VLLM_SM70_FP8_PRESCALED_M1_SHARED_GATE", Kind.DEPRECATED, True),
    ("prefill_prescaled", "VLLM_SM70_FP8_PREFILL_PRESCALED", Kind.DEPRECATED, True),
    ("prefill_exact_dense", "VLLM_SM70_FP8_PREFILL_EXACT_DENSE", Kind.DEPRECATED, True),
    ("prefill_visible_dense_mm", "VLLM_SM70_FP8_PREFILL_VISIBLE_DENSE_MM", Kind.DEPRECATED, False),
    ("gated_silu", "VLLM_SM70_FP8_DENSE_GATED_SILU", Kind.DEPRECATED, True),
    ("prefill_fast_selector", "VLLM_SM70_FP8_PREFILL_FAST_SELECTOR", Kind.LEGACY, True),
    ("grouped_bmm_decode", "VLLM_SM70_FP8_GROUPED_BMM_DECODE", Kind.LEGACY, True),
    ("moe_dequant_fallback", "VLLM_SM70_FP8_MOE_DEQUANT_FALLBACK", Kind.LEGACY, False),
    ("block_qpn8", None, Kind.CONFIG, False),
    ("block_qpn8_volta_turbomind_prefill", None, Kind.CONFIG, None),
]
VARIABLES = [(name, variable) for name, variable, _, _ in TABLE if variable]


def resolve(env=None, config=None, *, engine: EngineConfig = PLAIN, capability: int = 70):
    return PROJECT.resolve(config, env or {}, Hardware(capability), engine, emit_warnings=False)


def fp8(policy, name: str):
    key = f"sm70_fp8.{name}"
    return (policy.value(key), policy.source(key))


# --- the field table -------------------------------------------------------------------------


def test_section_fields_variables_kinds_and_defaults():
    fields = {f.name: f for f in FIELDS if f.section == "sm70_fp8"}
    assert [(n, fields[n].variable, fields[n].kind) for n, *_ in TABLE] == [
        (n, v, k) for n, v, k, _ in TABLE
    ]
    policy = resolve()
    for name, _, _, default in TABLE:
        assert fp8(policy, name) == (default, "default")


def test_eleven_deprecated_fp8_aliases_with_the_fp8_scope():
    deprecated = [f for f in FIELDS if f.section == "sm70_fp8" and f.kind is Kind.DEPRECATED]
    assert len(deprecated) == 11
    policy = resolve({"VLLM_SM70_FP8_DEQUANT_FALLBACK": "0"})
    assert policy.warnings == (
        "VLLM_SM70_FP8_DEQUANT_FALLBACK is deprecated for serialized FP8 linear layers; use "
        "kernel_config.sm70_fp8.dequant_fallback. Explicit configuration takes precedence.",
    )


def test_shared_qpn8_variable_warns_once_naming_both_paths():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        PROJECT.resolve(None, {QPN8: "1"}, HW, PLAIN)
    messages = [str(w.message) for w in caught if issubclass(w.category, PolicyDeprecationWarning)]
    assert messages == [
        "VLLM_SM70_FP8_QPN8 is deprecated; use "
        "kernel_config.sm70_dflash2.target_fp8_qpn8 or "
        "kernel_config.sm70_fp8.qpn8. Explicit configuration takes precedence."
    ]


@pytest.mark.parametrize("name,variable", VARIABLES)
@pytest.mark.parametrize("text", ["yes", "true", "", "1.5"])
def test_invalid_values_are_input_errors_naming_the_variable(name, variable, text):
    with pytest.raises(InputError, match=variable):
        resolve({variable: text})


@pytest.mark.parametrize(
    "name,variable", [(n, v) for n, v in VARIABLES if n not in ("enabled", "qpn8_pp2_tp4")]
)
@pytest.mark.parametrize("text,value", [("0", False), ("1", True), ("7", True)])
def test_integer_booleans(name, variable, text, value):
    # enabled (use_turbomind) and qpn8_pp2_tp4 (inheritance) have their own tests below.
    assert fp8(resolve({variable: text}), name) == (value, f"alias:{variable}")


def test_enabled_goes_through_use_turbomind_unless_typed():
    backend = "VLLM_SM70_QUANT_BACKEND"
    assert fp8(resolve({"VLLM_SM70_FP8_TURBOMIND": "0"}), "enabled")[0] is False
    assert (
        fp8(resolve({"VLLM_SM70_FP8_TURBOMIND": "0", backend: "turbomind"}), "enabled")[0] is True
    )
    assert fp8(resolve({backend: "marlin"}), "enabled")[0] is False
    assert fp8(resolve({backend: "marlin"}, {"sm70_fp8": {"enabled": True}}), "enabled") == (
        True,
        "explicit",
    )


def test_natively_read_mirrors_cannot_disagree_with_the_environment():
    with pytest.raises(InputError, match="VLLM_SM70_FP8_PREFILL_FAST_SELECTOR"):
        resolve(config={"sm70_fp8": {"prefill_fast_selector": False}})
    with pytest.raises(InputError, match="VLLM_SM70_FP8_GROUPED_BMM_DECODE"):
        resolve(
            {"VLLM_SM70_FP8_GROUPED_BMM_DECODE": "0"}, {"sm70_fp8": {"grouped_bmm_decode": True}}
        )
    assert fp8(
        resolve(config={"sm70_fp8": {"grouped_bmm_decode": True}}), "grouped_bmm_decode"
    ) == (True, "explicit")


def test_moe_dequant_switch_is_a_known_legacy_variable():
    policy = resolve({"VLLM_SM70_FP8_MOE_DEQUANT_FALLBACK": "1"})
    assert fp8(policy, "moe_dequant_fallback") == (True, "alias:VLLM_SM70_FP8_MOE_DEQUANT_FALLBACK")
    assert policy.warnings == ()


def test_block_qpn8_fields_are_config_only():
    policy = resolve(
        config={"sm70_fp8": {"block_qpn8": True, "block_qpn8_volta_turbomind_prefill": False}}
    )
    assert fp8(policy, "block_qpn8") == (True, "explicit")
    assert fp8(policy, "block_qpn8_volta_turbomind_prefill") == (False, "explicit")


# --- qpn8_pp2_tp4 inheritance (docs/contracts/fp8.md §1.2, the upstream test table) ---------------


@pytest.mark.parametrize(
    "generic,specific,expected",
    [
        (None, None, False),
        (None, "0", False),
        (None, "1", True),
        ("0", None, False),
        ("0", "0", False),
        ("0", "1", False),
        ("1", None, True),
        ("1", "0", False),
        ("1", "1", True),
    ],
)
def test_pp2_tp4_inherits_by_the_upstream_table(generic, specific, expected):
    env = {k: v for k, v in ((QPN8, generic), (PP2, specific)) if v is not None}
    assert fp8(resolve(env), "qpn8_pp2_tp4")[0] is expected


def test_pp2_tp4_copies_a_typed_qpn8_unless_its_own_variable_is_present():
    assert fp8(resolve(config={"sm70_fp8": {"qpn8": True}}), "qpn8_pp2_tp4") == (True, "default")
    assert fp8(resolve({PP2: "0"}, {"sm70_fp8": {"qpn8": True}}), "qpn8_pp2_tp4") == (
        False,
        f"alias:{PP2}",
    )
    # A typed qpn8_pp2_tp4 wins over the rollback.
    assert fp8(resolve({QPN8: "0"}, {"sm70_fp8": {"qpn8_pp2_tp4": True}}), "qpn8_pp2_tp4") == (
        True,
        "explicit",
    )


def test_explicit_enables():
    assert explicit_enables(resolve()) == frozenset()
    assert explicit_enables(resolve({"VLLM_SM70_FP8_DENSE_GATED_SILU": "1"})) == {"gated_silu"}
    assert explicit_enables(resolve(config={"sm70_fp8": {"prescaled_decode": True}})) == {
        "prescaled_decode"
    }
    # An inherited true does not enter as qpn8_pp2_tp4; a false value never enters.
    assert explicit_enables(resolve({QPN8: "1"})) == {"qpn8"}
    assert explicit_enables(resolve({"VLLM_SM70_FP8_PREFILL_EXACT_DENSE": "0"})) == frozenset()


# --- the verifier bridge -----------------------------------------------------------------------


def model_engine(model: str, spec: str = "dflash") -> EngineConfig:
    return matrix_engine("fp8_e4m3", 4, spec, 1, 8192, model)


def test_bridge_takes_the_qualified_verifier_default_as_explicit():
    policy = resolve(engine=model_engine("27b_fp8"))
    assert fp8(policy, "qpn8") == (True, "explicit")
    assert fp8(policy, "qpn8_pp2_tp4") == (True, "default")
    assert "qpn8" in explicit_enables(policy)


def test_bridge_leaves_an_unqualified_model_alone():
    policy = resolve(engine=model_engine("35b_a3b_fp8"))
    assert policy.value("sm70_dflash2.target_fp8_qpn8") is False
    assert fp8(policy, "qpn8") == (False, "default")


def test_bridge_needs_the_block_fp8_quantization_fact():
    policy = resolve(engine=model_engine("27b_dflash2_nvfp4"))
    assert policy.value("sm70_dflash2.target_fp8_qpn8") is True
    assert fp8(policy, "qpn8") == (False, "default")


def test_bridge_carries_the_shared_variable_and_records_it_ignored():
    off = resolve({QPN8: "0"}, engine=model_engine("27b_fp8"))
    assert fp8(off, "qpn8") == (False, "explicit")
    assert fp8(off, "qpn8_pp2_tp4")[0] is False
    assert (QPN8, "sm70_fp8.qpn8") in off.ignored
    # Unqualified, an explicit target (its variable present) still bridges.
    on = resolve({QPN8: "1"}, engine=model_engine("27b_fp8", "mtp"))
    assert fp8(on, "qpn8") == (True, "explicit")


def test_typed_target_false_beats_the_shared_variable_for_both_fields():
    policy = resolve(
        {QPN8: "1"}, {"sm70_dflash2": {"target_fp8_qpn8": False}}, engine=model_engine("27b_fp8")
    )
    assert policy.value("sm70_dflash2.target_fp8_qpn8") is False
    assert fp8(policy, "qpn8") == (False, "explicit")
    assert set(policy.ignored) == {(QPN8, "sm70_dflash2.target_fp8_qpn8"), (QPN8, "sm70_fp8.qpn8")}


def test_typed_qpn8_wins_over_the_bridge():
    policy = resolve(config={"sm70_fp8": {"qpn8": False}}, engine=model_engine("27b_fp8"))
    assert fp8(policy, "qpn8") == (False, "explicit")


# --- hash ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("capability", [70, 75])
def test_the_whole_section_is_hashed_on_volta_and_turing(capability):
    base = resolve(capability=capability)
    changed = resolve(config={"sm70_fp8": {"block_qpn8": True}}, capability=capability)
    active = PROJECT.active_sections(capability, PLAIN, base)
    assert "sm70_fp8" in active
    assert base.compute_hash(active) != changed.compute_hash(active)
    assert "sm70_fp8" not in PROJECT.active_sections(80, PLAIN, base)


# --- capability classes ------------------------------------------------------------------------


def layer(role: str = "qkv_proj", k: int = 5120, n: int = 3584, **changes) -> BlockFp8Layer:
    import dataclasses

    built = BlockFp8Layer.of(
        f"model.layers.0.{role}",
        k,
        n,
        tp=changes.pop("tp", 4),
        groups=changes.pop("groups", 0),
        is_scale_e8m0=changes.pop("e8m0", False),
    )
    return dataclasses.replace(built, **changes) if changes else built


def request(built: BlockFp8Layer, **options) -> fs.W8A16Request:
    return fs.W8A16Request(built, fs.Fp8Sm70Options(**options))


def namespace(*remove: str) -> RecordingNamespace:
    return RecordingNamespace(PROJECT.catalogue, remove=remove)


@pytest.mark.parametrize("capability,ok", [(70, True), (72, True), (75, False), (80, False)])
def test_turbomind_is_volta_only(capability, ok):
    result, reason = fs.TurboMindFp8LinearKernel.is_supported(capability)
    assert result is ok
    if not ok:
        assert reason.message.startswith("requires Volta SM70 or SM72")


@pytest.mark.parametrize("capability,ok", [(70, True), (72, True), (75, True), (80, False)])
def test_block_kernel_is_volta_or_turing(capability, ok):
    result, reason = fs.QPN8Fp8BlockScaledMMLinearKernel.is_supported(capability)
    assert result is ok
    if not ok:
        assert reason.message.startswith("requires a Volta or Turing CUDA device")


@pytest.mark.parametrize(
    "built,message",
    [
        (layer(block_size=(1, 128)), "requires 128 x 128 block weight scales"),
        (layer(act_dtype="bfloat16"), "requires float16 activations"),
    ],
)
def test_turbomind_can_implement_reasons(built, message):
    ok, reason = fs.TurboMindFp8LinearKernel.can_implement(request(built), namespace())
    assert ok is False and reason.message.startswith(message)


def test_turbomind_needs_its_prepare_op_and_the_w8a16_layout():
    ok, reason = fs.TurboMindFp8LinearKernel.can_implement(
        request(layer()), namespace("fp8_sm70_prepare")
    )
    assert reason.message == "native fp8_sm70_prepare operator is unavailable"
    ok, reason = fs.TurboMindFp8LinearKernel.can_implement(layer(), namespace())
    assert reason.message == "requires the serialized SM70 weight-only FP8 layout"


@pytest.mark.parametrize(
    "built,options,message",
    [
        (layer(), {}, "disabled by kernel_config.sm70_fp8.block_qpn8"),
        (
            layer(),
            {"block_qpn8": True, "explicit_enables": frozenset({"prefill_prescaled"})},
            "retains the explicitly configured fused or prescaled variant",
        ),
        (
            layer(),
            {"block_qpn8": True, "force_marlin": True},
            "Marlin selected by legacy backend compatibility policy",
        ),
        (
            layer("wo_a", 4096, 2048, groups=2),
            {"block_qpn8": True},
            "grouped BMM retains its existing grouped implementation",
        ),
        (layer(out_dtype="bfloat16"), {"block_qpn8": True}, "requires FP16 activations and output"),
        (
            layer(weight_dtype="float8_e5m2"),
            {"block_qpn8": True},
            "requires static E4M3 weights with 128 x 128 block scales",
        ),
        (
            layer(weight_shape=(1, 3584, 5120)),
            {"block_qpn8": True},
            "requires a rank-two weight matrix",
        ),
        (
            layer(k=5120, n=3600),
            {"block_qpn8": True},
            "requires positive N,K divisible by 128, got (3600,5120)",
        ),
    ],
)
def test_block_kernel_can_implement_reasons_in_order(built, options, message):
    # The selector's order: the policy gate (checked once), then the class's own layer rules.
    block = fs.QPN8Fp8BlockScaledMMLinearKernel
    policy = PROJECT.resolve(None, {}, Hardware(70), EngineConfig(), emit_warnings=False)
    selection = select_fp8_sm70(
        built, policy, fs.Fp8Sm70Options(**options), Hardware(70), namespace()
    )
    verdict = next(v for v in selection.verdicts if v.name == block.name)
    assert verdict.ok is False and verdict.message.startswith(message)
    policy_refusal = block_qpn8_policy(fs.Fp8Sm70Options(**options))
    if policy_refusal[0]:
        # Past the gate the class alone gives the same reason.
        ok, reason = block.can_implement(request(built, **options), namespace())
        assert ok is False and reason.message == verdict.message
    else:
        assert verdict.stage == "policy" and policy_refusal[1].message == verdict.message


def test_block_kernel_names_its_missing_ops():
    ok, reason = fs.QPN8Fp8BlockScaledMMLinearKernel.can_implement(
        request(layer(), block_qpn8=True), namespace("fp8_qpn8_gemm_sm70_out")
    )
    assert reason.message == "missing native operators: [fp8_qpn8_gemm_sm70_out]"


def test_tuning_tables():
    assert fs.qpn8_tuning(5120, 8704, False) == (16, 1, True)
    assert fs.qpn8_tuning(5120, 8704, True) == (8, 2, True)
    assert fs.qpn8_tuning(5120, 17408, True) == (8, 2, False)
    assert fs.qpn8_tuning(3072, 5120, False) == (16, 2, False)
    assert fs.qpn8_tuning(1152, 5120, False) == (8, 2, False)  # K % 256 != 0


# --- outcomes, selection and load errors ---------------------------------------------------


def load(
    built: BlockFp8Layer,
    env=None,
    config=None,
    *,
    engine: EngineConfig = PLAIN,
    capability: int = 70,
    remove: tuple[str, ...] = (),
):
    policy = resolve(env, config, engine=engine, capability=capability)
    return load_fp8_sm70(built, policy, Hardware(capability), engine, namespace(*remove))


def test_dequant_and_other_backend_outcomes():
    dequant = load(layer(), {"VLLM_SM70_FP8_TURBOMIND": "0"}).decision
    assert dequant.kernel is None and dequant.status[0] == "dequant_fallback"
    other = load(
        layer(), {"VLLM_SM70_FP8_TURBOMIND": "0", "VLLM_SM70_FP8_DEQUANT_FALLBACK": "0"}
    ).decision
    assert other.kernel is None and other.status[0] == "other_backend"
    assert load(layer(), capability=80).decision.status[0] == "other_backend"
    assert load(layer(block_size=(1, 128))).decision.status[0] == "other_backend"


def test_linear_backend_turbomind_keeps_both_kernels():
    assert load(layer(), config={"linear_backend": "turbomind"}).decision.kernel == TM


def test_linear_backend_without_a_kernel_fails_to_load():
    with pytest.raises(SelectionError) as info:
        load(layer(), config={"linear_backend": "torch"})
    assert info.value.message == (
        "--linear-backend=torch was requested but no 'torch' kernel exists for this layer type."
    )


def test_linear_backend_with_a_foreign_kernel_fails_through_the_w8a16_rule():
    with pytest.raises(SelectionError) as info:
        load(layer(), config={"linear_backend": "cutlass"})
    assert info.value.message == (
        "Failed to find a kernel that can implement the ScaledMM linear layer. Reasons: "
        "CutlassFp8BlockScaledMMKernel does not consume the SM70 W8A16 layout."
    )


def test_disabled_turbomind_fails_with_every_reason():
    with pytest.raises(SelectionError) as info:
        load(layer(), {"VLLM_DISABLED_KERNELS": TM})
    message = info.value.message
    assert message.startswith(
        "Failed to find a kernel that can implement the ScaledMM linear layer. Reasons: "
    )
    assert f"{TM} is disabled by environment variable" in message
    assert f"{BLOCK} disabled by kernel_config.sm70_fp8.block_qpn8." in message
    assert "TritonFp8BlockScaledMMKernel does not consume the SM70 W8A16 layout." in message
    assert len(info.value.verdicts) == 7


def test_original_dtype_must_be_fp16():
    with pytest.raises(SelectionError) as info:
        load(layer(orig_dtype="bfloat16"))
    assert info.value.message == (
        "SM70 TurboMind FP8 dense path currently requires fp16 original weights, got bfloat16."
    )


PP2_ENGINE = EngineConfig(tp=4, pp=2, max_num_seqs=1)


def test_explicit_pp2_grouped_wo_a_with_missing_ops_fails_closed():
    with pytest.raises(SelectionError) as info:
        load(
            layer("wo_a", 4096, 2048, groups=2),
            {PP2: "1"},
            engine=PP2_ENGINE,
            remove=("fp8_qpn8_dequantize_sm70_out",),
        )
    assert info.value.message == (
        "The explicitly enabled SM70 PP2 x TP4 QPN8 route requires source-built operators; "
        "missing: ['fp8_qpn8_dequantize_sm70_out']."
    )


def test_non_explicit_qpn8_with_missing_ops_keeps_turbomind_with_a_fallback():
    # Not reachable from resolved policies (a true qpn8 is always explicit); the layout
    # decision itself keeps the contract's non-explicit rule.
    options = fs.Fp8Sm70Options(qpn8=True)
    layout = fs.plan_turbomind(
        layer(), options, namespace("fp8_qpn8_gemm_sm70_out"), fs.Fp8Workspaces()
    )
    assert layout.name == "fp8_sm70" and layout.exact_dense is True
    # The kernel names the option; the loader qualifies it with the section.
    assert [(f.field, f.requested, f.effective) for f in layout.fallbacks] == [
        ("qpn8", True, False)
    ]
    assert layout.fallbacks[0].reason.startswith(
        "missing native QPN8 operators: [fp8_qpn8_gemm_sm70_out]"
    )


def test_pp2_candidate_outside_the_runtime_contract_keeps_turbomind():
    loaded = load(
        layer("wq_b", 1024, 8192), {PP2: "1"}, engine=EngineConfig(tp=4, pp=2, max_num_seqs=4)
    )
    assert loaded.decision.layout == "fp8_sm70" and loaded.decision.flags["qpn8"] is False


def test_explicit_prescaled_decode_outside_the_contract_fails():
    with pytest.raises(SelectionError) as info:
        load(
            layer("fused_wqa_wkv", 4096, 1536, tp=1),
            {"VLLM_SM70_FP8_PRESCALED_M1_DECODE": "1"},
            engine=PP2_ENGINE,
        )
    assert info.value.message == (
        "Explicit SM70 FP8 prescaled decode requires UE8M0 128x128 scales and the PP2 x TP4 "
        "no-spec single-request contract."
    )


def test_explicit_prescaled_decode_without_its_op_fails():
    with pytest.raises(SelectionError) as info:
        load(
            layer("fused_wqa_wkv", 4096, 1536, tp=1, e8m0=True),
            {"VLLM_SM70_FP8_PRESCALED_M1_DECODE": "1"},
            engine=PP2_ENGINE,
            remove=("fp8_gemm_sm70_prescaled_m1_out",),
        )
    assert info.value.code == "prescaled_decode_operator"


def test_default_prescaled_decode_outside_the_contract_is_simply_off():
    loaded = load(layer("fused_wqa_wkv", 4096, 1536, tp=1), engine=PP2_ENGINE)
    assert loaded.decision.flags["prescaled_decode"] is False


# --- checkpoint admission (2.1) --------------------------------------------------------------


@pytest.mark.parametrize(
    "env,admitted",
    [
        ({}, True),
        ({"VLLM_SM70_FP8_TURBOMIND": "0"}, True),  # the dequant fallback variable defaults to 1
        ({"VLLM_SM70_FP8_TURBOMIND": "0", "VLLM_SM70_FP8_DEQUANT_FALLBACK": "0"}, False),
        (
            {
                "VLLM_SM70_FP8_TURBOMIND": "0",
                "VLLM_SM70_FP8_DEQUANT_FALLBACK": "0",
                "VLLM_SM70_QUANT_BACKEND": "marlin",
            },
            True,
        ),
        (
            {
                "VLLM_SM70_FP8_TURBOMIND": "0",
                "VLLM_SM70_FP8_DEQUANT_FALLBACK": "0",
                "VLLM_SM70_QUANT_BACKEND": "turbomind",
            },
            True,
        ),
    ],
)
def test_checkpoint_admission_reads_the_variables(env, admitted):
    assert checkpoint_admission(env, 70)[0] is admitted
    assert checkpoint_admission(env, 75)[0] is True
