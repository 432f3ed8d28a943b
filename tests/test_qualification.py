"""Model qualification (docs/contracts/core.md §4): whole-model rules as pure functions."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from native.layers import Nvfp4Layer
from policies import qualification as q
from routectl.workload import EngineConfig, Hardware

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
QPN4_WORKLOAD = EngineConfig(tp=4, spec_method="none", max_num_seqs=1)


def test_the_dflash_workload_is_qualified():
    assert q.nvfp4_workload_qualified(QUALIFIED) == (True, None)


@pytest.mark.parametrize(
    "changes, code, shown",
    [
        (dict(spec_method="mtp", spec_tokens=4, selector_top_k=0), "spec_method_not_dflash", "mtp"),
        (dict(spec_method="none", spec_tokens=0), "spec_method_not_dflash", "none"),
        (dict(spec_tokens=5), "spec_tokens_not_7", "5"),
        (dict(spec_tokens=8), "spec_tokens_not_7", "8"),
        (dict(selector_top_k=8), "selector_top_k_not_16", "8"),
        (dict(pp=2), "pp_not_1", "2"),
        (dict(dbo=True), "dbo_enabled", "dual batch overlap"),
        (dict(ubatch=2), "ubatch_above_1", "2"),
    ],
)
def test_each_workload_rule_rejects_with_its_value(changes, code, shown):
    ok, reason = q.nvfp4_workload_qualified(dataclasses.replace(QUALIFIED, **changes))
    assert (ok, reason.code) == (False, code)
    assert shown in reason.message


@pytest.mark.parametrize("ubatch", [0, 1])
def test_ubatch_up_to_one_is_qualified(ubatch):
    assert q.nvfp4_workload_qualified(dataclasses.replace(QUALIFIED, ubatch=ubatch))[0]


@given(
    tp=st.sampled_from([1, 2, 4, 8]),
    kv=st.sampled_from(["float16", "fp8_e4m3", "fp8_e5m2"]),
    seqs=st.integers(1, 64),
    budget=st.integers(1, 65536),
)
def test_tp_kv_and_concurrency_are_not_part_of_the_workload(tp, kv, seqs, budget):
    engine = dataclasses.replace(
        QUALIFIED, tp=tp, kv_dtype=kv, max_num_seqs=seqs, max_num_batched_tokens=budget
    )
    assert q.nvfp4_workload_qualified(engine) == (True, None)


@pytest.mark.parametrize("role", q.QPN2_ROLES)
def test_qpn2_roles(role):
    assert q.qpn2_role_qualified(role) == (True, None)


@pytest.mark.parametrize(
    "role", ["unqualified_projection", "renamed_projection", "lm_head", "QKV_PROJ", ""]
)
def test_other_roles_are_not_qpn2_qualified(role):
    ok, reason = q.qpn2_role_qualified(role)
    assert (ok, reason.code) == (False, "qpn2_role_unqualified")
    assert "projection role not yet quality-qualified for QPN2" in reason.message


def test_qpn4_workload_is_one_sequence_without_speculation():
    assert q.qpn4_workload_qualified(QPN4_WORKLOAD) == (True, None)
    ok, reason = q.qpn4_workload_qualified(dataclasses.replace(QPN4_WORKLOAD, max_num_seqs=2))
    assert (ok, reason.code) == (False, "qpn4_concurrency") and "max_num_seqs=2" in reason.message
    for method, tokens in (("mtp", 4), ("dflash", 7)):
        engine = dataclasses.replace(QPN4_WORKLOAD, spec_method=method, spec_tokens=tokens)
        assert q.qpn4_workload_qualified(engine)[1].code == "qpn4_speculation"


def down(k: int = 4352, n: int = 5120) -> Nvfp4Layer:
    return Nvfp4Layer.of("model.layers.3.mlp.down_proj", k, n)


def gate_up(k: int = 5120, n: int = 8704, **changes) -> Nvfp4Layer:
    return dataclasses.replace(Nvfp4Layer.of("model.layers.3.mlp.gate_up_proj", k, n), **changes)


@pytest.mark.parametrize(
    "k, n, code",
    [
        (4352, 5120, None),
        (128, 5120, None),
        (4350, 5120, "qpn4_down_k"),
        (0, 5120, "qpn4_down_k"),
        (4352, 5121, "qpn4_down_n"),
        (4352, 4096, "qpn4_down_n"),
    ],
)
def test_qpn4_down_proj_rules(k, n, code):
    ok, reason = q.qpn4_layer_qualified(down(k, n), dense_gated_silu=False)
    assert (reason.code if reason else None) == code and ok is (code is None)


def test_qpn4_gate_up_rules():
    assert q.qpn4_layer_qualified(gate_up(), True) == (True, None)
    assert q.qpn4_layer_qualified(gate_up(), False)[1].code == "qpn4_gate_up_needs_dense_gated_silu"
    assert q.qpn4_layer_qualified(gate_up(4096), True)[1].code == "qpn4_gate_up_k"
    assert q.qpn4_layer_qualified(gate_up(n=8736), True)[1].code == "qpn4_gate_up_n"
    assert q.qpn4_layer_qualified(gate_up(n=64), True) == (True, None)
    assert q.qpn4_layer_qualified(gate_up(n=0), True)[1].code == "qpn4_gate_up_n"
    uneven = gate_up(logical_widths=(4096, 4608))
    ok, reason = q.qpn4_layer_qualified(uneven, True)
    assert reason.code == "qpn4_gate_up_widths" and "[4096, 4608]" in reason.message


def test_qpn4_other_roles():
    layer = Nvfp4Layer.of("model.layers.0.linear_attn.in_proj_qkvz", 5120, 4120)
    ok, reason = q.qpn4_layer_qualified(layer, True)
    assert reason.code == "qpn4_role_unqualified" and "in_proj_qkvz" in reason.message


@pytest.mark.parametrize(
    "role, ok",
    [
        ("gate_up_proj", True),
        ("down_proj", True),
        ("in_proj_qkvz", True),
        ("out_proj", True),
        ("o_proj", True),
        ("qkv_proj", False),
        ("renamed_projection", False),
    ],
)
def test_awq_exact_dense_roles(role, ok):
    result, reason = q.awq_exact_dense_role_qualified(role)
    assert result is ok
    if not ok:
        assert reason.code == "exact_dense_role_unqualified" and role in reason.message


def test_qualification_verdicts_name_every_engine_rule():
    verdicts = q.qualification_verdicts(Hardware(70), QUALIFIED)
    assert [name for name, _ in verdicts] == [
        "nvfp4_workload",
        "qpn4_workload",
        "dflash2_verifier",
        "fp8_pp2_tp4",
    ]
    assert verdicts[0][1] == (True, None)
    assert verdicts[1][1][1].code == "qpn4_concurrency"
    single = dataclasses.replace(QUALIFIED, spec_method="none", spec_tokens=0, max_num_seqs=1)
    assert dict(q.qualification_verdicts(Hardware(70), single))["qpn4_workload"] == (True, None)


# --- the SM70 FP8 PP2 x TP4 runtime contract (docs/contracts/fp8.md §3.3) -------------------------
# "PP == 2, TP == 4, max_num_seqs == 1, no DBO, ubatch <= 1, no speculative config", checked in
# that order; the codes are the stable ones the FP8 rows record.
PP2_TP4 = EngineConfig(tp=4, pp=2, max_num_seqs=1, spec_method="none", dbo=False, ubatch=0)


@pytest.mark.parametrize("ubatch", [0, 1])
def test_the_pp2_tp4_runtime_contract_is_met(ubatch):
    engine = dataclasses.replace(PP2_TP4, ubatch=ubatch)
    assert q.fp8_pp2_tp4_contract(engine) == (True, None)


@pytest.mark.parametrize(
    "changes, code, message",
    [
        (dict(pp=1), "fp8_pp_not_2", "PP2 x TP4 needs pipeline parallel size 2 (PP=1)"),
        (dict(pp=4), "fp8_pp_not_2", "PP2 x TP4 needs pipeline parallel size 2 (PP=4)"),
        (dict(tp=2), "fp8_tp_not_4", "PP2 x TP4 needs tensor parallel size 4 (TP=2)"),
        (dict(tp=8), "fp8_tp_not_4", "PP2 x TP4 needs tensor parallel size 4 (TP=8)"),
        (
            dict(max_num_seqs=2),
            "fp8_pp2_tp4_concurrency",
            "PP2 x TP4 needs max_num_seqs == 1 (max_num_seqs=2)",
        ),
        (dict(dbo=True), "fp8_pp2_tp4_dbo", "PP2 x TP4 needs dual batch overlap off"),
        (dict(ubatch=2), "fp8_pp2_tp4_ubatch", "PP2 x TP4 needs ubatch <= 1 (ubatch=2)"),
        (
            dict(spec_method="mtp", spec_tokens=4),
            "fp8_pp2_tp4_speculation",
            "PP2 x TP4 needs no speculation (speculative method mtp)",
        ),
    ],
)
def test_each_pp2_tp4_rule_rejects_with_its_code_and_message(changes, code, message):
    ok, reason = q.fp8_pp2_tp4_contract(dataclasses.replace(PP2_TP4, **changes))
    assert (ok, reason.code, reason.message) == (False, code, message)


def test_pp2_tp4_rules_apply_in_contract_order():
    # Every rule broken at once: PP is named first, then TP, then concurrency, DBO, ubatch and
    # speculation (docs/contracts/fp8.md §3.3 order).
    broken = dict(pp=1, tp=2, max_num_seqs=2, dbo=True, ubatch=2, spec_method="mtp")
    order = ["pp", "tp", "max_num_seqs", "dbo", "ubatch", "spec_method"]
    codes = []
    for fixed in range(len(order) + 1):
        changes = {k: v for k, v in broken.items() if k not in order[:fixed]}
        codes.append(q.fp8_pp2_tp4_contract(dataclasses.replace(PP2_TP4, **changes))[1])
    assert [r.code if r else None for r in codes] == [
        "fp8_pp_not_2",
        "fp8_tp_not_4",
        "fp8_pp2_tp4_concurrency",
        "fp8_pp2_tp4_dbo",
        "fp8_pp2_tp4_ubatch",
        "fp8_pp2_tp4_speculation",
        None,
    ]


# --- reason messages, literally: a refused engine or layer is told which value broke which rule


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(spec_method="mtp"), "speculative method is mtp, not dflash"),
        (dict(spec_tokens=5), "5 speculative tokens, not 7"),
        (dict(selector_top_k=8), "draft selector_top_k is 8, not 16"),
        (dict(pp=2), "pipeline parallel size is 2, not 1"),
        (dict(dbo=True), "dual batch overlap is enabled"),
        (dict(ubatch=2), "ubatch size is 2, above 1"),
    ],
)
def test_workload_messages_literally(changes, message):
    assert q.nvfp4_workload_qualified(dataclasses.replace(QUALIFIED, **changes))[1].message == (
        message
    )


def test_qpn4_workload_messages_literally():
    seqs = q.qpn4_workload_qualified(dataclasses.replace(QPN4_WORKLOAD, max_num_seqs=3))[1]
    assert seqs.message == "QPN4 needs max_num_seqs == 1 (max_num_seqs=3)"
    spec = dataclasses.replace(QPN4_WORKLOAD, spec_method="mtp", spec_tokens=4)
    assert q.qpn4_workload_qualified(spec)[1].message == (
        "QPN4 needs no speculation (speculative method mtp)"
    )


@pytest.mark.parametrize(
    "layer, gated, code, message",
    [
        (down(4350), False, "qpn4_down_k", "QPN4 down_proj needs K > 0 and K % 128 == 0 (K=4350)"),
        (down(-128), False, "qpn4_down_k", "QPN4 down_proj needs K > 0 and K % 128 == 0 (K=-128)"),
        (down(n=4096), False, "qpn4_down_n", "QPN4 down_proj needs N == 5120 (N=4096)"),
        (
            gate_up(),
            False,
            "qpn4_gate_up_needs_dense_gated_silu",
            "QPN4 gate_up_proj needs dense_gated_silu",
        ),
        (gate_up(4096), True, "qpn4_gate_up_k", "QPN4 gate_up_proj needs K == 5120 (K=4096)"),
        (
            gate_up(n=-64, logical_widths=(-32, -32)),
            True,
            "qpn4_gate_up_n",
            "QPN4 gate_up_proj needs N > 0 and N % 64 == 0 (N=-64)",
        ),
        (
            gate_up(logical_widths=(4096, 4608)),
            True,
            "qpn4_gate_up_widths",
            "QPN4 gate_up_proj needs logical widths [N/2, N/2] (widths [4096, 4608], N=8704)",
        ),
        (
            Nvfp4Layer.of("model.layers.0.self_attn.o_proj", 5120, 5120),
            True,
            "qpn4_role_unqualified",
            "QPN4 qualifies only down_proj and gate_up_proj (role o_proj)",
        ),
    ],
)
def test_qpn4_layer_codes_and_messages_literally(layer, gated, code, message):
    assert q.qpn4_layer_qualified(layer, gated) == (False, (code, message))


def test_role_messages_literally():
    assert q.qpn2_role_qualified("lm_head")[1].message == (
        "projection role not yet quality-qualified for QPN2 (role lm_head)"
    )
    assert q.awq_exact_dense_role_qualified("qkv_proj")[1].message == (
        "role qkv_proj is not qualified for AWQ exact-dense prefill"
    )
