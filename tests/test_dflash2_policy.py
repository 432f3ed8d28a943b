"""The DFlash2 verifier policy (issue 15, docs/contracts/dflash2.md): section `sm70_dflash2`, its
aliases, the obsolete and removed names, the verifier qualification, the GDN admissions and
the hash rule. Expected values are literals from the contract."""

from __future__ import annotations

import dataclasses
import json
import warnings

import pytest

from native.kernels.gdn_sm70 import GdnLayout, can_implement_combined_split
from policies import PROJECT
from policies.dflash2 import gdn_admissions
from policies.families import FAMILIES
from policies.qualification import dflash2_verifier_qualified
from policies.variables import FIELDS, RETIRED
from routectl.errors import InputError
from routectl.policy.fields import INT_BOOL, Field, Kind
from routectl.policy.resolve import PolicyDeprecationWarning, resolve_fields
from routectl.workload import EngineConfig, Hardware, ModelFacts
from tests import families

# The sections the policy hash covers, as the project derives them from its family records.
active_sections = PROJECT.hashed_sections

# docs/contracts/dflash2.md §1.3, in table order.
TABLE = (
    ("fused_gdn_verify", "VLLM_SM70_DFLASH2_FUSED_GDN_VERIFY"),
    ("fused_gdn_combined_split", "VLLM_SM70_DFLASH2_FUSED_GDN_COMBINED_SPLIT"),
    ("context_pipeline", "VLLM_SM70_DFLASH2_CONTEXT_PIPELINE"),
    ("context_kv_graph", "VLLM_SM70_DFLASH2_CONTEXT_KV_GRAPH"),
    ("quant_lm_head", "VLLM_SM70_DFLASH2_QUANT_LM_HEAD"),
    ("fp32_logits", "VLLM_SM70_DFLASH2_FP32_LOGITS"),
    ("target_fp8_qpn8", "VLLM_SM70_FP8_QPN8"),
    ("qpn8_rerank", "VLLM_SM70_DFLASH2_QPN8_RERANK"),
    ("verify_fastpath", "VLLM_SM70_DFLASH2_VERIFY_FASTPATH"),
    ("fused_gdn_metadata", "VLLM_SM70_DFLASH2_FUSED_GDN_METADATA"),
    ("fused_gdn_norm", "VLLM_SM70_DFLASH2_FUSED_GDN_NORM"),
    ("fused_gdn_split", "VLLM_SM70_DFLASH2_FUSED_GDN_SPLIT"),
    ("fused_gemma_rms", "VLLM_SM70_DFLASH2_FUSED_GEMMA_RMS"),
    ("fixed_gemma_rms", "VLLM_SM70_DFLASH2_FIXED_GEMMA_RMS"),
    ("fused_smallq_metadata", "VLLM_SM70_DFLASH2_FUSED_SMALLQ_METADATA"),
    ("grouped_smallq_metadata", "VLLM_SM70_DFLASH2_GROUPED_SMALLQ_METADATA"),
    ("sparse_target_rejection", "VLLM_SM70_DFLASH2_SPARSE_TARGET_REJECTION"),
    ("sharded_context_fc", "VLLM_SM70_DFLASH2_SHARDED_CONTEXT_FC"),
)
DENSE_ORDER = "VLLM_SM70_DFLASH2_QPN8_DENSE_ORDER"
ALLOW_CANDIDATE_ORDER = "VLLM_SM70_DFLASH2_QPN8_ALLOW_CANDIDATE_ORDER"

QWEN3_5_27B = ModelFacts(("Qwen3_5ForConditionalGeneration",), "float16", 5120, 24, 4, 256)
VERIFIER = EngineConfig(
    tp=4,
    spec_method="dflash",
    spec_tokens=7,
    selector_top_k=16,
    max_num_seqs=4,
    kv_dtype="fp8_e4m3",
    model=QWEN3_5_27B,
)
V100 = Hardware(70)
DEFAULT_GDN = GdnLayout(key_heads=16, value_heads=48, head_dim=128)


def resolve(env=None, config=None, *, engine=VERIFIER, capability=70):
    return PROJECT.resolve(config, env or {}, Hardware(capability), engine)


def section(policy):
    return {
        name: (policy.value(f"sm70_dflash2.{name}"), policy.source(f"sm70_dflash2.{name}"))
        for name, _ in TABLE
    }


# --- the field table -------------------------------------------------------------------------


def test_section_is_the_contract_table_in_order():
    fields = [f for f in FIELDS if f.section == "sm70_dflash2"]
    assert [(f.name, f.variable) for f in fields] == list(TABLE)
    for f in fields:
        assert f.type is bool and f.kind is Kind.DEPRECATED and f.parser is INT_BOOL
        assert f.default_text() == "= verifier qualified"


def test_thirty_six_deprecated_variables_and_two_retired_names():
    # 26 with the DFlash2 aliases; 36 once the eleven block-FP8 aliases are in (issue 16,
    # VLLM_SM70_FP8_QPN8 shared and counted once).
    assert len({f.variable for f in FIELDS if f.kind is Kind.DEPRECATED}) == 36
    assert [(r.variable, r.kind) for r in RETIRED] == [
        (DENSE_ORDER, Kind.OBSOLETE),
        (ALLOW_CANDIDATE_ORDER, Kind.REMOVED),
    ]


def test_every_typed_field_is_optional_bool():
    config = PROJECT.load_config({"sm70_dflash2": {"fp32_logits": False}})
    assert config.sm70_dflash2.fp32_logits is False
    assert config.sm70_dflash2.fused_gdn_verify is None
    with pytest.raises(InputError, match="sm70_dflash2.fp32_logits"):
        PROJECT.load_config({"sm70_dflash2": {"fp32_logits": 1}})


# --- resolution --------------------------------------------------------------------------------


def test_qualified_engine_turns_every_option_on_by_default():
    assert set(section(resolve()).values()) == {(True, "default")}


@pytest.mark.parametrize(
    "engine",
    [
        dataclasses.replace(VERIFIER, model=None),
        dataclasses.replace(VERIFIER, spec_method="mtp", spec_tokens=4),
        dataclasses.replace(VERIFIER, spec_method="none", spec_tokens=0, selector_top_k=0),
    ],
)
def test_unqualified_engine_keeps_every_option_off(engine):
    assert set(section(resolve(engine=engine)).values()) == {(False, "default")}


def test_capability_75_is_not_qualified():
    assert set(section(resolve(capability=75)).values()) == {(False, "default")}


@pytest.mark.parametrize("name,variable", TABLE)
@pytest.mark.parametrize(
    "text,value", [("0", False), ("1", True), ("2", True), ("-1", True), (" 0 ", False)]
)
def test_alias_beats_the_verifier_default(name, variable, text, value):
    values = section(resolve({variable: text}))
    assert values[name] == (value, f"alias:{variable}")
    assert all(v == (True, "default") for k, v in values.items() if k != name)


def test_alias_turns_an_option_on_for_an_unqualified_engine():
    policy = resolve(
        {"VLLM_SM70_DFLASH2_FP32_LOGITS": "1"}, engine=dataclasses.replace(VERIFIER, model=None)
    )
    assert section(policy)["fp32_logits"] == (True, "alias:VLLM_SM70_DFLASH2_FP32_LOGITS")


def test_typed_value_beats_the_alias_which_still_warns():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        policy = resolve(
            {"VLLM_SM70_DFLASH2_QUANT_LM_HEAD": "1"}, {"sm70_dflash2": {"quant_lm_head": False}}
        )
    assert section(policy)["quant_lm_head"] == (False, "explicit")
    assert ("VLLM_SM70_DFLASH2_QUANT_LM_HEAD", "sm70_dflash2.quant_lm_head") in policy.ignored
    assert [str(w.message) for w in caught] == [
        "VLLM_SM70_DFLASH2_QUANT_LM_HEAD is deprecated; use "
        "kernel_config.sm70_dflash2.quant_lm_head. Explicit configuration takes precedence."
    ]


@pytest.mark.parametrize("text", ["yes", "1.0", "", "true"])
@pytest.mark.parametrize("variable", ["VLLM_SM70_DFLASH2_FUSED_GDN_VERIFY", "VLLM_SM70_FP8_QPN8"])
def test_invalid_alias_value_is_an_input_error_naming_the_variable(variable, text):
    with pytest.raises(InputError) as error:
        resolve({variable: text})
    assert str(error.value) == (
        f"invalid value {text!r} for {variable}: accepted values are "
        "integers (0 = false, any other integer = true)"
    )


def test_invalid_alias_beside_a_typed_field_is_still_an_error():
    with pytest.raises(InputError, match="VLLM_SM70_DFLASH2_FP32_LOGITS"):
        resolve({"VLLM_SM70_DFLASH2_FP32_LOGITS": "yes"}, {"sm70_dflash2": {"fp32_logits": True}})


def test_resolution_never_writes_the_environment():
    env = {"VLLM_SM70_DFLASH2_FP32_LOGITS": "0"}
    resolve(env)
    assert env == {"VLLM_SM70_DFLASH2_FP32_LOGITS": "0"}


# --- obsolete and removed names ------------------------------------------------------------


@pytest.mark.parametrize("text", ["0", "1", "yes", ""])
def test_obsolete_dense_order_warns_once_is_never_parsed_and_changes_nothing(text):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = resolve({DENSE_ORDER: text})
        resolve({DENSE_ORDER: text})
    messages = [str(w.message) for w in caught if w.category is PolicyDeprecationWarning]
    assert len(messages) == 1
    assert "ignored: dense tie ordering is mandatory" in messages[0]
    assert messages[0].startswith(DENSE_ORDER)
    assert first.warnings == (messages[0],)  # not also an unknown VLLM_SM70_* variable
    assert section(first) == section(resolve())


@pytest.mark.parametrize("text", ["0", "1", "maybe"])
def test_removed_allow_candidate_order_warns_once_that_it_has_no_effect(text):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = resolve({ALLOW_CANDIDATE_ORDER: text})
        resolve({ALLOW_CANDIDATE_ORDER: text})
    messages = [str(w.message) for w in caught if w.category is PolicyDeprecationWarning]
    assert len(messages) == 1 and "has no effect" in messages[0]
    assert messages[0].startswith(ALLOW_CANDIDATE_ORDER)
    assert first.warnings == (messages[0],)  # not also an unknown VLLM_SM70_* variable
    assert section(first) == section(resolve())


# --- one variable, several deprecated fields ------------------------------------------------


def test_a_variable_feeding_two_deprecated_fields_warns_once_naming_both_paths():
    # The shape the FP8 issue gives VLLM_SM70_FP8_QPN8: declared once, two field entries.
    shared = "VLLM_SM70_FP8_QPN8"
    switch = dict(type=bool, default=False, variable=shared, kind=Kind.DEPRECATED, parser=INT_BOOL)
    fields = (
        Field(section="sm70_dflash2", name="target_fp8_qpn8", **switch),
        Field(section="sm70_fp8", name="qpn8", **switch),
    )
    policy = resolve_fields(
        fields, {"sm70_dflash2.target_fp8_qpn8": False}, {shared: "1"}, {}, emit_warnings=False
    )
    assert policy.warnings == (
        "VLLM_SM70_FP8_QPN8 is deprecated; use kernel_config.sm70_dflash2.target_fp8_qpn8 or "
        "kernel_config.sm70_fp8.qpn8. Explicit configuration takes precedence.",
    )
    # An explicit value in one section does not silence the alias for the other.
    assert policy.value("sm70_dflash2.target_fp8_qpn8") is False
    assert (policy.value("sm70_fp8.qpn8"), policy.source("sm70_fp8.qpn8")) == (
        True,
        "alias:VLLM_SM70_FP8_QPN8",
    )


# --- verifier qualification -----------------------------------------------------------------


def facts(**changes):
    return dataclasses.replace(VERIFIER, model=dataclasses.replace(QWEN3_5_27B, **changes))


@pytest.mark.parametrize(
    "capability,engine,code,words",
    [
        (75, VERIFIER, "capability_not_70", "75"),
        (72, VERIFIER, "capability_not_70", "72"),
        (70, dataclasses.replace(VERIFIER, model=None), "architecture_not_qwen3_5", "unknown"),
        (
            70,
            facts(architectures=("Qwen4ExpForConditionalGeneration",)),
            "architecture_not_qwen3_5",
            "Qwen4ExpForConditionalGeneration",
        ),
        (70, facts(dtype="bfloat16"), "dtype_not_float16", "bfloat16"),
        (70, facts(dtype=None), "dtype_not_float16", "unknown"),
        (70, facts(hidden_size=2048), "hidden_size_not_5120", "2048"),
        (70, facts(num_attention_heads=32), "attention_heads_not_24", "32"),
        (70, facts(num_key_value_heads=8), "kv_heads_not_4", "8"),
        (70, facts(head_dim=128), "head_dim_not_256", "128"),
        (70, facts(head_dim=None), "head_dim_not_256", "unknown"),
        (70, dataclasses.replace(VERIFIER, spec_method="mtp"), "spec_method_not_dflash", "mtp"),
        (70, dataclasses.replace(VERIFIER, spec_tokens=4), "spec_tokens_not_7", "4"),
        (70, dataclasses.replace(VERIFIER, selector_top_k=0), "selector_top_k_not_16", "0"),
        (70, dataclasses.replace(VERIFIER, pp=2), "pp_not_1", "2"),
        (70, dataclasses.replace(VERIFIER, dbo=True), "dbo_enabled", "dual batch"),
        (70, dataclasses.replace(VERIFIER, ubatch=2), "ubatch_above_1", "2"),
    ],
)
def test_verifier_qualification_reports_the_first_failing_rule(capability, engine, code, words):
    ok, reason = dflash2_verifier_qualified(Hardware(capability), engine)
    assert not ok and reason.code == code and words in reason.message


@pytest.mark.parametrize(
    "capability,engine,message",
    [
        (
            75,
            VERIFIER,
            "capability 75 is not exactly 70 (the verifier is qualified on Volta V100 only)",
        ),
        (
            70,
            dataclasses.replace(VERIFIER, model=None),
            "model architectures (unknown) do not include Qwen3_5ForConditionalGeneration",
        ),
        (
            70,
            facts(architectures=()),
            "model architectures (unknown) do not include Qwen3_5ForConditionalGeneration",
        ),
        (
            70,
            facts(architectures=("Qwen4A", "Qwen4B")),
            "model architectures (Qwen4A, Qwen4B) do not include Qwen3_5ForConditionalGeneration",
        ),
        (70, facts(dtype=None), "model dtype is unknown, not float16"),
        (70, facts(dtype="bfloat16"), "model dtype is bfloat16, not float16"),
        (70, facts(hidden_size=2048), "model hidden size is 2048, not 5120"),
        (70, facts(num_attention_heads=None), "model attention heads is unknown, not 24"),
        (70, facts(num_key_value_heads=8), "model KV heads is 8, not 4"),
        (70, facts(head_dim=None), "model head dim is unknown, not 256"),
    ],
)
def test_verifier_qualification_messages_literally(capability, engine, message):
    """What a refused verifier engine is told: the rule and the offending (or unknown) value."""
    assert dflash2_verifier_qualified(Hardware(capability), engine)[1].message == message


def test_verifier_qualification_order_capability_then_model_then_workload():
    everything_wrong = dataclasses.replace(VERIFIER, spec_method="none", model=None)
    assert dflash2_verifier_qualified(Hardware(75), everything_wrong)[1].code == "capability_not_70"
    assert dflash2_verifier_qualified(V100, everything_wrong)[1].code == "architecture_not_qwen3_5"
    assert (
        dflash2_verifier_qualified(V100, facts(dtype="bfloat16", hidden_size=1))[1].code
        == "dtype_not_float16"
    )


@pytest.mark.parametrize(
    "engine",
    [
        VERIFIER,
        facts(architectures=("Other", "Qwen3_5ForConditionalGeneration")),
        dataclasses.replace(
            VERIFIER,
            tp=2,
            kv_dtype="float16",
            max_num_seqs=8,
            max_num_batched_tokens=4096,
            ubatch=1,
        ),
        facts(quantization="fp8"),
    ],
)
def test_verifier_qualification_ignores_tp_kv_concurrency_budget_and_quantization(engine):
    assert dflash2_verifier_qualified(V100, engine) == (True, None)


# --- GDN admissions ---------------------------------------------------------------------------

GUARDS = [
    "enable_sm70_dflash2_fused_gdn_verify",
    "enable_sm70_dflash2_fused_gdn_norm",
    "enable_sm70_dflash2_fused_gdn_split",
    "enable_sm70_dflash2_fused_gdn_combined_split",
]


def admissions(policy=None, hardware=V100, engine=VERIFIER, layout=DEFAULT_GDN, **kwargs):
    policy = policy if policy is not None else resolve(engine=engine)
    return [
        (name, ok, reason.code if reason else None)
        for name, (ok, reason) in gdn_admissions(policy, hardware, engine, layout, **kwargs)
    ]


def test_qualified_tp4_engine_admits_all_four_guards_in_order():
    assert admissions() == [(g, True, None) for g in GUARDS]


@pytest.mark.parametrize(
    "key_heads,value_heads,tp,widths,combined",
    [
        (16, 48, 4, (2560, 1536, 12), None),
        (16, 48, 2, (5120, 3072, 24), "local_tail_layout"),
        (8, 24, 2, (2560, 1536, 12), None),
        (8, 24, 4, (1280, 768, 6), "local_tail_layout"),
    ],
)
def test_head_splits_decide_the_combined_split(key_heads, value_heads, tp, widths, combined):
    layout = GdnLayout(key_heads, value_heads, 128)
    assert layout.local_widths(tp) == widths
    engine = dataclasses.replace(VERIFIER, tp=tp)
    result = admissions(engine=engine, layout=layout)
    assert result[:3] == [(g, True, None) for g in GUARDS[:3]]
    assert result[3] == (GUARDS[3], combined is None, combined)


def test_the_recorded_gdn_layout_holds_integer_widths():
    # 16 key and 48 value heads of 128 at TP4: qkv (2*2048 + 6144) / 4, z 6144 / 4, ba 48 / 4.
    # Rows record these numbers, so 2560.0 for 2560 would change every row's text.
    assert json.dumps(GdnLayout(16, 48, 128).to_json(4)) == (
        '{"key_heads": 16, "value_heads": 48, "head_dim": 128, "qkv": 2560, "z": 1536, "ba": 12}'
    )


@pytest.mark.parametrize(
    ("rows", "dtype", "widths", "message"),
    [
        (7, "float16", (2560, 1536, 12), "combined GDN split needs exactly 8 query rows (rows=7)"),
        (8, "bfloat16", (2560, 1536, 12), "combined GDN split needs float16 (dtype bfloat16)"),
        (
            8,
            "float16",
            (5120, 3072, 24),
            "combined GDN split needs local widths (qkv, z, ba) = (2560, 1536, 12) "
            "(got (5120, 3072, 24))",
        ),
    ],
)
def test_combined_split_messages_literally(rows, dtype, widths, message):
    reason = can_implement_combined_split(rows, dtype, *widths)[1]
    assert reason is not None and reason.message == message


@pytest.mark.parametrize(
    "rows,dtype,widths,code",
    [
        (8, "float16", (2560, 1536, 12), None),
        (7, "float16", (2560, 1536, 12), "query_rows"),
        (16, "float16", (2560, 1536, 12), "query_rows"),
        (8, "bfloat16", (2560, 1536, 12), "dtype"),
        (8, "float16", (2560, 1536, 24), "local_tail_layout"),
        (8, "float16", (5120, 3072, 24), "local_tail_layout"),
        (7, "bfloat16", (1, 1, 1), "query_rows"),
        (8, "bfloat16", (1, 1, 1), "dtype"),
    ],
)
def test_combined_split_predicate_checks_rows_then_dtype_then_widths(rows, dtype, widths, code):
    ok, reason = can_implement_combined_split(rows, dtype, *widths)
    assert ok is (code is None)
    assert (reason.code if reason else None) == code


@pytest.mark.parametrize(
    "field,guard",
    [
        ("fused_gdn_verify", 0),
        ("fused_gdn_norm", 1),
        ("fused_gdn_split", 2),
        ("fused_gdn_combined_split", 3),
    ],
)
def test_a_disabled_field_removes_exactly_its_own_guard(field, guard):
    policy = resolve({}, {"sm70_dflash2": {field: False}})
    result = admissions(policy)
    assert result[guard] == (GUARDS[guard], False, "policy_disabled")
    assert [r for i, r in enumerate(result) if i != guard] == [
        (g, True, None) for i, g in enumerate(GUARDS) if i != guard
    ]
    reason = gdn_admissions(policy, V100, VERIFIER, DEFAULT_GDN)[guard][1][1]
    assert f"kernel_config.sm70_dflash2.{field}" in reason.message and "explicit" in reason.message


def test_guards_check_policy_then_capability_then_selector_engine():
    on = resolve({}, {"sm70_dflash2": {name: True for name, _ in TABLE}})
    assert {code for _, _, code in admissions(on, hardware=Hardware(75))} == {"capability_not_70"}
    mtp = dataclasses.replace(VERIFIER, spec_method="mtp")
    assert {code for _, _, code in admissions(on, engine=mtp)} == {"not_dflash_selector"}
    no_selector = dataclasses.replace(VERIFIER, selector_top_k=0)
    assert {code for _, _, code in admissions(on, engine=no_selector)} == {"not_dflash_selector"}
    off = resolve(engine=mtp)
    assert {code for _, _, code in admissions(off, hardware=Hardware(75), engine=mtp)} == {
        "policy_disabled"
    }
    combined = gdn_admissions(on, Hardware(75), VERIFIER, DEFAULT_GDN)[3][1][1]
    assert "policy_hardware_or_speculation" in combined.message


@pytest.mark.parametrize(("selector_top_k", "code"), [(1, None), (0, "not_dflash_selector")])
def test_a_selector_engine_needs_selector_top_k_above_zero(selector_top_k, code):
    # docs/contracts/dflash2.md §3 [P16]: integer selector_top_k > 0, so 1 is a selector engine.
    on = resolve({}, {"sm70_dflash2": {name: True for name, _ in TABLE}})
    engine = dataclasses.replace(VERIFIER, selector_top_k=selector_top_k)
    assert [c for _, _, c in admissions(on, engine=engine)][:3] == [code] * 3


def test_guard_messages_name_the_failed_condition_literally():
    on = resolve({}, {"sm70_dflash2": {name: True for name, _ in TABLE}})
    verify = gdn_admissions(on, Hardware(75), VERIFIER, DEFAULT_GDN)[0][1][1]
    assert verify.message == "capability 75 is not exactly 70"
    mtp = dataclasses.replace(VERIFIER, spec_method="mtp", selector_top_k=0)
    verify = gdn_admissions(on, V100, mtp, DEFAULT_GDN)[0][1][1]
    assert verify.message == (
        "not a DFlash selector engine (speculative method mtp, selector_top_k 0)"
    )


# --- hash rule -----------------------------------------------------------------------------------


# The sections every engine hashes at a capability: each family's own statement (its module
# in tests/families/, `ALWAYS_HASHED`; issue 16 made the whole sm70_fp8 section active on
# Volta too), joined in the family list's order, each once.
def always_hashed(capability: int) -> list[str]:
    out: dict[str, None] = {}
    for family in FAMILIES:
        stated = getattr(families.modules()[family.name], "ALWAYS_HASHED", {})
        out.update(dict.fromkeys(stated.get(capability, ())))
    return list(out)


ROUND_1_SECTIONS_70 = always_hashed(70)


@pytest.mark.parametrize(
    "engine",
    [
        EngineConfig(tp=4, spec_method="none", max_num_seqs=4),
        EngineConfig(tp=4, spec_method="mtp", spec_tokens=4, model=QWEN3_5_27B),
    ],
)
def test_other_engines_do_not_hash_the_section(engine):
    policy = resolve(engine=engine)
    assert active_sections(70, engine, policy) == ROUND_1_SECTIONS_70
    assert active_sections(75, engine, policy) == always_hashed(75)


def test_dflash_engines_and_explicit_fields_hash_the_section():
    policy = resolve()
    assert active_sections(70, VERIFIER, policy) == [*ROUND_1_SECTIONS_70, "sm70_dflash2"]
    off = resolve({"VLLM_SM70_DFLASH2_FP32_LOGITS": "0"})
    assert policy.compute_hash(active_sections(70, VERIFIER, policy)) != off.compute_hash(
        active_sections(70, VERIFIER, off)
    )
    mtp = EngineConfig(tp=4, spec_method="mtp", spec_tokens=4)
    for explicit in (
        resolve({"VLLM_SM70_DFLASH2_FP32_LOGITS": "1"}, engine=mtp),
        resolve(config={"sm70_dflash2": {"fp32_logits": False}}, engine=mtp),
    ):
        assert active_sections(70, mtp, explicit) == [*ROUND_1_SECTIONS_70, "sm70_dflash2"]


def test_retired_names_are_known_but_typos_are_still_reported():
    policy = resolve(
        {DENSE_ORDER: "1", ALLOW_CANDIDATE_ORDER: "1", "VLLM_SM70_DFLASH2_FUSED_GDN_VERIFYY": "1"}
    )
    assert policy.warnings[-1] == (
        "unknown VLLM_SM70_* variables (typos?): VLLM_SM70_DFLASH2_FUSED_GDN_VERIFYY"
    )
    assert len(policy.warnings) == 3


def test_a_computed_default_reads_an_earlier_fields_value_and_source():
    # What the FP8 verifier bridge needs: a later field sees target_fp8_qpn8 resolved.
    from routectl.policy.fields import Computed

    def bridged(ctx):
        explicit = ctx["sources"]["sm70_dflash2.target_fp8_qpn8"] != "default"
        return ctx["values"]["sm70_dflash2.target_fp8_qpn8"] if explicit else None

    fields = (
        Field(
            section="sm70_dflash2",
            name="target_fp8_qpn8",
            type=bool,
            default=False,
            variable="VLLM_SM70_FP8_QPN8",
            kind=Kind.DEPRECATED,
            parser=INT_BOOL,
        ),
        Field(section="sm70_fp8", name="qpn8", type=object, default=Computed("= bridged", bridged)),
    )
    unset = resolve_fields(fields, {}, {}, {}, emit_warnings=False)
    assert unset.value("sm70_fp8.qpn8") is None
    aliased = resolve_fields(fields, {}, {"VLLM_SM70_FP8_QPN8": "1"}, {}, emit_warnings=False)
    assert aliased.value("sm70_fp8.qpn8") is True
    fp8_first = tuple(reversed(fields))
    with pytest.raises(KeyError):
        resolve_fields(fp8_first, {}, {}, {}, emit_warnings=False)


def test_the_section_resolves_before_sm70_fp8():
    keys = [f.key for f in FIELDS]
    assert max(i for i, k in enumerate(keys) if k.startswith("sm70_dflash2.")) < min(
        i for i, k in enumerate(keys) if k.startswith("sm70_fp8.")
    )
