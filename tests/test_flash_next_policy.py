"""The `sm70_flash_next` section (issue 31, docs/contracts/flashnext.md §1-2): its 18 fields
and kinds, INT_BOOL parsing, explicitness, the computed defaults, the engine fact
`batch_invariant`, the hash rule and the CLI surfaces. Expected values are literals from the
contract."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from policies import PROJECT
from policies.categories.matrix import MODEL_FACTS
from policies.flash_next import (
    batch_qualified,
    decode_contract,
    engine_environment,
    flash_next_hashed,
    mtp_batch,
)
from routectl.errors import InputError
from routectl.policy.fields import INT_BOOL, Kind
from routectl.workload import EngineConfig, Hardware, ModelFacts
from tests.fixtures.toy import invoke, ok

ROOT = Path(__file__).resolve().parents[1]
SECTION = "sm70_flash_next"
# docs/contracts/flashnext.md §1.3: (field, variable, kind) in table order.
TABLE = (
    ("gdn_input_batch", "VLLM_SM70_QWEN38_GDN_INPUT_BATCH", Kind.CURRENT),
    ("mtp_hc_batch", "VLLM_SM70_MTP_HC_BATCH", Kind.CURRENT),
    ("mtp_hc_cooperative", "VLLM_SM70_MTP_HC_COOPERATIVE", Kind.CURRENT),
    ("mtp_hc_full_unroll", "VLLM_SM70_MTP_HC_FULL_UNROLL", Kind.CURRENT),
    ("mtp_router_top16", "VLLM_SM70_MTP_ROUTER_TOP16", Kind.CURRENT),
    ("mtp_router_batch", "VLLM_SM70_MTP_ROUTER_BATCH", Kind.CURRENT),
    ("mtp_shared_batch", "VLLM_SM70_MTP_SHARED_BATCH", Kind.CURRENT),
    ("mtp_ple_conv", "VLLM_SM70_MTP_PLE_CONV", Kind.CURRENT),
    ("batch_fastpath", "VLLM_SM70_QWEN38_BATCH_FASTPATH", Kind.CURRENT),
    ("nvfp4_moe_grouped_mtp5", "VLLM_SM70_NVFP4_MOE_GROUPED_MTP5", Kind.CURRENT),
    ("rmsnorm_gated_exact", "VLLM_SM70_RMSNORM_GATED_EXACT", Kind.LEGACY),
    ("fused_sigmoid_mixed_qkv", "VLLM_SM70_FUSED_SIGMOID_MIXED_QKV", Kind.CURRENT),
    ("mtp_moe_fp16_exact", "VLLM_SM70_MTP_MOE_FP16_EXACT", Kind.CURRENT),
    ("qsa_mtp_topk", "VLLM_SM70_QSA_MTP_TOPK", Kind.CURRENT),
    ("fp16_gemv", "VLLM_SM70_QWEN38_FP16_GEMV", Kind.LEGACY),
    ("fused_gdn_input", "VLLM_SM70_QWEN38_FUSED_GDN_INPUT_FP16", Kind.LEGACY),
    ("fused_hc", "VLLM_SM70_QWEN38_FUSED_HC_FP16", Kind.LEGACY),
    ("online_qpn8", "VLLM_SM70_QWEN4_EXP_ONLINE_QPN8", Kind.LEGACY),
)
BATCH_INVARIANT = "VLLM_BATCH_INVARIANT"
FLASH_NEXT = MODEL_FACTS["flash_next_mtp4_nvfp4"]
V100 = Hardware(70)


def engine(spec: str = "none", **kw) -> EngineConfig:
    return EngineConfig(
        **{"tp": 4, "spec_method": spec, "max_num_seqs": 4, "model": FLASH_NEXT, **kw}
    )


def resolve(environ=None, config=None, hardware=V100, workload=None):
    return PROJECT.resolve(config, environ or {}, hardware, workload or engine())


def test_the_18_fields_their_variables_kinds_and_parser():
    fields = [f for f in PROJECT.fields if f.section == SECTION]
    assert [(f.name, f.variable, f.kind) for f in fields] == list(TABLE)
    assert all(f.type is bool and f.parser is INT_BOOL for f in fields)
    # The engine fact has no field.
    assert all(f.variable != BATCH_INVARIANT for f in PROJECT.fields)


def test_defaults_on_the_qualified_engine():
    policy = resolve()
    values = policy.section(SECTION).as_dict()
    assert values == {name: name != "online_qpn8" for name, _, _ in TABLE}
    assert all(policy.source(f"{SECTION}.{name}") == "default" for name, _, _ in TABLE)


def test_computed_defaults_follow_the_contract():
    # dflash: not batch-qualified, so RMSNorm is off; the base lane needs no speculation rule.
    dflash = resolve(workload=engine("dflash")).section(SECTION)
    assert (dflash.rmsnorm_gated_exact, dflash.fp16_gemv) == (False, True)
    # Capability 75: RMSNorm has no capability term; the base lane does (§2.5).
    turing = resolve(hardware=Hardware(75)).section(SECTION)
    assert (turing.rmsnorm_gated_exact, turing.fp16_gemv, turing.fused_hc) == (True, False, False)
    # Another model: neither.
    other = resolve(workload=engine(model=MODEL_FACTS["35b_a3b_awq"])).section(SECTION)
    assert (other.rmsnorm_gated_exact, other.fused_gdn_input) == (False, False)


@pytest.mark.parametrize(("text", "value"), [("0", False), ("1", True), ("2", True), ("-1", True)])
def test_int_bool_parsing(text, value):
    policy = resolve({"VLLM_SM70_MTP_HC_BATCH": text})
    assert policy.value(f"{SECTION}.mtp_hc_batch") is value
    assert policy.source(f"{SECTION}.mtp_hc_batch") == "alias:VLLM_SM70_MTP_HC_BATCH"


@pytest.mark.parametrize("variable", [v for _, v, _ in TABLE])
def test_invalid_text_is_an_input_error_naming_the_variable(variable):
    with pytest.raises(InputError, match=variable):
        resolve({variable: "yes"})


def test_an_explicit_rmsnorm_beats_the_default_both_ways():
    off = resolve(config={SECTION: {"rmsnorm_gated_exact": False}})
    assert off.value(f"{SECTION}.rmsnorm_gated_exact") is False
    on = resolve({"VLLM_SM70_RMSNORM_GATED_EXACT": "1"}, workload=engine("dflash"))
    assert on.value(f"{SECTION}.rmsnorm_gated_exact") is True


def test_the_legacy_switches_never_warn():
    environ = {v: "1" for _, v, _ in TABLE}
    assert resolve(environ).warnings == ()


def test_decode_contract_and_qualifications():
    assert decode_contract(engine()) == (True, None)
    causal = dataclasses.replace(FLASH_NEXT, architectures=("Qwen4ExpForCausalLM",))
    assert decode_contract(engine(model=causal))[0] is True
    lm_false = dataclasses.replace(FLASH_NEXT, language_model_only=False)
    assert decode_contract(engine(model=lm_false))[1].code == "language_model_only_not_true"
    bf16 = dataclasses.replace(FLASH_NEXT, dtype="bfloat16")
    assert decode_contract(engine(model=bf16))[1].code == "dtype_not_float16"
    for other in ("27b_dflash2_nvfp4", "35b_a3b_awq"):
        assert decode_contract(engine(model=MODEL_FACTS[other]))[1].code == (
            "architecture_not_qwen4exp"
        )
    assert decode_contract(EngineConfig())[1].code == "model_unknown"
    # §2.2: mtp admitted; ubatching and batch invariance rejected.
    assert batch_qualified(engine("mtp"))[0] is True
    assert batch_qualified(engine(ubatch=2))[1].code == "ubatching"
    assert batch_qualified(engine(batch_invariant=True))[1].code == "batch_invariant"
    assert mtp_batch(engine("mtp"))[0] is True
    assert mtp_batch(engine())[1].code == "spec_not_mtp"


def test_batch_invariant_is_read_from_the_given_environment():
    assert engine_environment(engine(), {}).batch_invariant is False
    assert engine_environment(engine(), {BATCH_INVARIANT: "1"}).batch_invariant is True
    assert engine_environment(engine(), {BATCH_INVARIANT: "0"}).batch_invariant is False
    with pytest.raises(InputError, match=BATCH_INVARIANT):
        engine_environment(engine(), {BATCH_INVARIANT: "on"})


def _hashed(workload: EngineConfig, environ=None) -> bool:
    policy = resolve(environ, workload=workload)
    return SECTION in PROJECT.hashed_sections(70, workload, policy)


def test_hash_rule_both_sides():
    # Hashed: the decode contract on capability 70, or an explicit field.
    assert _hashed(engine()) is True
    assert flash_next_hashed(engine(), resolve()) is True
    other = engine(model=MODEL_FACTS["35b_a3b_awq"])
    assert _hashed(other) is False
    assert _hashed(other, {"VLLM_SM70_QWEN38_BATCH_FASTPATH": "1"}) is True
    # Not hashed on Turing, where the family is not enabled.
    turing = PROJECT.hashed_sections(75, engine(), resolve(hardware=Hardware(75)))
    assert SECTION not in turing
    # Hashed means a value moves the hash on the qualified engine.
    on, off = resolve(), resolve({"VLLM_SM70_MTP_PLE_CONV": "0"})
    assert on.compute_hash(PROJECT.hashed_sections(70, engine(), on)) != off.compute_hash(
        PROJECT.hashed_sections(70, engine(), off)
    )


# --- the CLI ------------------------------------------------------------------------------


def test_config_prints_the_section_with_sources():
    result = ok(
        invoke(
            ["config", "--model", "flash_next_mtp4_nvfp4", "--tp", "4"],
            environ={"VLLM_SM70_QWEN38_BATCH_FASTPATH": "0"},
            cwd=ROOT,
        )
    )
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index("[sm70_flash_next]")
    section = lines[start + 1 : start + 19]
    assert any(
        line.split() == ["batch_fastpath", "=", "false", "(alias:VLLM_SM70_QWEN38_BATCH_FASTPATH)"]
        for line in section
    )
    assert any(line.split() == ["fp16_gemv", "=", "true", "(default)"] for line in section)
    assert "sm70_flash_next" in lines[-1] and lines[-1].startswith("hash (")


@pytest.mark.parametrize("variable", [*(v for _, v, _ in TABLE), BATCH_INVARIANT])
def test_config_invalid_value_exits_2_with_one_line(variable):
    result = ok(invoke(["config"], environ={variable: "maybe"}, cwd=ROOT))
    assert result.code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and variable in lines[0], result.stderr


def test_explain_batch_fastpath_off_names_the_variable_and_the_route():
    result = ok(invoke(["explain", "sm70-flash-next-batch:edge:batch_fastpath_off"], cwd=ROOT))
    assert result.code == 0, result.stderr
    dense = [
        line
        for line in result.stdout.splitlines()
        if line.strip().startswith("dense_batch_prepared")
    ]
    assert dense and "VLLM_SM70_QWEN38_BATCH_FASTPATH" in dense[0] and "no" in dense[0]
    assert "dense dispatch at M: none" in result.stdout


def test_list_shows_the_category():
    result = ok(invoke(["list"], cwd=ROOT))
    line = next(x for x in result.stdout.splitlines() if x.startswith("sm70-flash-next-batch"))
    assert "350 rows (324 + 26 probes)" in line


def test_models_other_than_flash_next_keep_their_facts():
    # Only the Flash-Next scope gains language_model_only (the other categories' rows stay).
    assert MODEL_FACTS["flash_next_mtp4_nvfp4"].language_model_only is True
    assert all(
        facts.language_model_only is None
        for name, facts in MODEL_FACTS.items()
        if name != "flash_next_mtp4_nvfp4"
    )
    assert ModelFacts().language_model_only is None


# --- the doorway: a family carries its own context and engine facts -----------------------


def test_the_family_record_carries_its_context_and_engine_facts():
    family = next(f for f in PROJECT.families if f.name == "sm70-flash-next-batch")
    assert family.context is not None and family.engine_environment is not None
    context = PROJECT.resolution_context(V100, engine())
    assert {k: context[k] for k in family.context(V100, engine())} == family.context(V100, engine())
    # The project's own entries stay.
    assert context["capability"] == 70
    assert PROJECT.engine_from(engine(), {BATCH_INVARIANT: "2"}).batch_invariant is True


def test_a_context_key_declared_twice_is_refused():
    family = next(f for f in PROJECT.families if f.name == "sm70-flash-next-batch")
    twice = dataclasses.replace(family, name="sm70-flash-next-copy", categories=())
    project = dataclasses.replace(PROJECT, families=(*PROJECT.families, twice))
    with pytest.raises(ValueError, match="redeclares context key"):
        project.resolution_context(V100, engine())
    shadow = dataclasses.replace(
        family, name="sm70-shadow", categories=(), context=lambda h, e: {"capability": 0}
    )
    project = dataclasses.replace(PROJECT, families=(*PROJECT.families, shadow))
    with pytest.raises(ValueError, match="declared twice"):
        project.resolution_context(V100, engine())


def test_config_prints_the_family_qualification_verdicts():
    result = ok(
        invoke(
            ["config", "--model", "flash_next_mtp4_nvfp4", "--tp", "4", "--spec", "dflash"],
            cwd=ROOT,
        )
    )
    lines = [line.strip() for line in result.stdout.splitlines()]
    assert "flash_next_decode_contract: yes" in lines
    assert any(
        line.startswith("flash_next_batch: no [speculation_not_batch_qualified]") for line in lines
    )
    assert any(line.startswith("flash_next_mtp_batch: no [spec_not_mtp]") for line in lines)
