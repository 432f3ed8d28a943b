"""AWQ MoE admissions, resolutions and layer contracts at their boundaries
(docs/contracts/core.md §3.1, §3.3, §3.5) and the `sm70_awq_moe` variables' parsing and precedence
(docs/contracts/core.md §1.2, §1.3)."""

from __future__ import annotations

import itertools

import pytest
import torch

from native.moe_layer import AwqMoeLayer
from native.moe_stages import (
    compact_shape,
    grouped_contract,
    indexed_prefill_contract,
    qpn_m1_contract,
)
from policies import PROJECT
from policies.awq_moe_admission import (
    NO_COMPACT_OP,
    QPN_M1_CONTRACT_MESSAGE,
    QPN_M1_NATIVE_MESSAGE,
    UNSUPPORTED_SHAPE,
    CallFacts,
    TensorFacts,
    active_exact_w2_call,
    admit_indexed_prefill,
    admit_qpn_m1,
    chunk_scratch_bytes,
    chunked_w2_call,
    family_gate,
    full_scratch_bytes,
    grouped_decode_call,
    indexed_prefill_call,
    layer_batched,
    layer_in_list,
    qpn_m1_call,
    requested_by,
    resolve_compact_metadata,
    resolve_w2_chunk_tokens,
)
from policies.variables import field
from routectl.errors import InputError, SelectionError
from routectl.reasons import OK, reject
from routectl.workload import EngineConfig, Hardware

QWEN38 = {"experts": 512, "top_k": 10, "hidden": 2560, "intermediate": 640, "group": 32}
MIB = 1 << 20


def var(key: str) -> str:
    name = field(f"sm70_awq_moe.{key}").variable
    assert name is not None
    return name


def resolve(env: dict[str, str] | None = None, config: object = None, capability: int = 70):
    return PROJECT.resolve(config, env or {}, Hardware(capability), EngineConfig(tp=4))


def layer(tp: int = 4, **changes: object) -> AwqMoeLayer:
    return AwqMoeLayer.for_rank({**QWEN38, **changes}, tp)


def facts(shape: tuple[int, ...], dtype: str, contiguous: bool = True) -> TensorFacts:
    return TensorFacts(shape, dtype, contiguous)


def call(
    m: int = 1,
    top_k: int = 10,
    x_dtype: str = "float16",
    ids_dtype: str = "int32",
    w_dtype: str = "float32",
    x_contiguous: bool = True,
    hidden: int = 2560,
) -> CallFacts:
    return CallFacts(
        facts((m, hidden), x_dtype, x_contiguous),
        facts((m, top_k), ids_dtype),
        facts((m, top_k), w_dtype),
    )


# --- family gate ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capability", "ok"),
    [(61, False), (69, False), (70, True), (72, True), (74, True), (75, False), (80, False)],
)
def test_family_gate_capability_window(capability, ok):
    gate = family_gate(capability, resolve())
    assert gate.ok is ok
    if not ok:
        assert (gate.code, gate.stage) == ("capability", "capability")
        assert f"got capability {capability}" in (gate.message or "")


@pytest.mark.parametrize(
    ("env", "code"),
    [
        ({"sm70_awq_moe.disable": "1"}, "moe_disabled"),
        ({"sm70_turbomind.quant_backend": "marlin"}, "backend_override"),
        ({"sm70_turbomind.awq_moe": "0"}, "turbomind_off"),
    ],
)
def test_family_gate_policy_reasons_name_their_source(env, code):
    environ = {field(k).variable or "": v for k, v in env.items()}
    gate = family_gate(70, resolve(environ))
    assert (gate.ok, gate.code, gate.stage) == (False, code, "policy")
    assert next(iter(environ)) in (gate.message or "")


def test_backend_turbomind_reenables_a_provider_switch_set_to_zero():
    environ = {
        field("sm70_turbomind.awq_moe").variable or "": "0",
        field("sm70_turbomind.quant_backend").variable or "": "turbomind",
    }
    assert family_gate(70, resolve(environ)).ok


def test_disable_wins_over_a_turbomind_backend():
    environ = {
        var("disable"): "1",
        field("sm70_turbomind.quant_backend").variable or "": "turbomind",
    }
    assert family_gate(70, resolve(environ)).code == "moe_disabled"


def test_typed_disable_is_named_by_its_config_path():
    gate = family_gate(70, resolve(config={"sm70_awq_moe": {"disable": True}}))
    assert "kernel_config.sm70_awq_moe.disable" in (gate.message or "")


# The gate's message names where the value came from: the typed config path, the variable
# (docs/contracts/core.md §1.2 names), or the default. Literal messages, so a wrong source cannot
# pass.
@pytest.mark.parametrize(
    ("environ", "config", "message"),
    [
        (
            {},
            {"sm70_awq_moe": {"disable": True}},
            "disabled by kernel_config.sm70_awq_moe.disable; MoeWNA16 serves the layer",
        ),
        (
            {"VLLM_SM70_AWQ_MOE_DISABLE": "1"},
            None,
            "disabled by VLLM_SM70_AWQ_MOE_DISABLE; MoeWNA16 serves the layer",
        ),
        (
            {"VLLM_SM70_AWQ_TURBOMIND": "0"},
            None,
            "TurboMind AWQ MoE provider off (VLLM_SM70_AWQ_TURBOMIND)",
        ),
        (
            {"VLLM_SM70_QUANT_BACKEND": "marlin"},
            None,
            "disabled by the legacy quantization backend override "
            "(VLLM_SM70_QUANT_BACKEND = marlin)",
        ),
    ],
)
def test_family_gate_messages_name_the_source_literally(environ, config, message):
    assert family_gate(70, resolve(environ, config)).message == message


# --- per-layer batched ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layer_id", "allow", "deny", "expected"),
    [
        (5, (), (), True),
        (5, ("5",), (), True),
        (5, ("4",), (), False),
        (5, ("3-7",), (), True),
        (8, ("3-7",), (), False),
        (3, ("3-7",), (), True),
        (7, ("3-7",), (), True),
        (5, (), ("5",), False),
        (5, (), ("0-4", "6-9"), True),
        (5, ("0-9",), ("5-5",), False),
    ],
)
def test_layer_batched_allow_and_deny_lists(layer_id, allow, deny, expected):
    assert layer_batched(True, layer_id, allow, deny) is expected
    assert layer_batched(False, layer_id, allow, deny) is False


def test_layer_lists_come_from_the_variables_with_ranges():
    policy = resolve({var("layer_allowlist"): "0, 3,10-12", var("layer_denylist"): "11"})
    section = policy.section("sm70_awq_moe")
    assert section.layer_allowlist == ("0", "3", "10-12")
    assert [
        i
        for i in range(14)
        if layer_batched(True, i, section.layer_allowlist, section.layer_denylist)
    ] == [0, 3, 10, 12]
    assert not layer_in_list(13, section.layer_allowlist)


# --- layer contracts (3.3) -------------------------------------------------------------------


def test_qwen38_tp4_meets_every_contract():
    qwen = layer()
    assert grouped_contract(qwen) == OK
    assert qpn_m1_contract(qwen, legacy_lane=True) == OK
    assert indexed_prefill_contract(qwen, batched=True) == OK
    assert compact_shape(qwen) == OK


@pytest.mark.parametrize(
    ("tp", "changes", "why"),
    [
        (2, {}, "TP 2 (needs 4)"),
        (4, {"experts": 256}, "experts 256 (needs 512)"),
        (4, {"group": 64}, "prepared group 64 (needs 32)"),
        (4, {"group": 128}, "prepared group 128 (needs 32)"),
        (4, {"hidden": 2592}, "hidden 2592 (needs 2560)"),
        (4, {"intermediate": 768}, "W13 N 384 (needs 320)"),
        (4, {"intermediate": 768}, "W2 K 192 (needs 160)"),
    ],
)
def test_grouped_contract_rejections_name_the_value(tp, changes, why):
    ok, reason = grouped_contract(layer(tp, **changes))
    assert not ok and reason is not None
    assert reason.code == "grouped_contract" and why in reason.message


def test_grouped_contract_does_not_check_top_k():
    assert grouped_contract(layer(top_k=8)) == OK


@pytest.mark.parametrize(
    ("changes", "legacy", "why"),
    [
        ({}, False, "legacy single-token lane built False"),
        ({"prepared_group": 32, "group": 64}, True, "checkpoint group 64 (needs 32)"),
        ({"experts": 256}, True, "experts 256"),
    ],
)
def test_qpn_m1_contract(changes, legacy, why):
    ok, reason = qpn_m1_contract(layer(**changes), legacy_lane=legacy)
    assert not ok and reason is not None and why in reason.message


@pytest.mark.parametrize(
    ("tp", "changes", "batched", "why"),
    [
        (4, {}, False, "batched GEMM False"),
        (2, {}, True, "TP 2"),
        (4, {"top_k": 9}, True, "top-k 9 (needs 10)"),
        (4, {"top_k": 8}, True, "top-k 8 (needs 10)"),
        (4, {"group": 128, "prepared_group": 32}, True, "checkpoint group 128 (needs 32)"),
        (4, {"prepared_group": 128}, True, "prepared group 128 (needs 32)"),
        (4, {"experts": 256}, True, "experts 256"),
    ],
)
def test_indexed_prefill_contract(tp, changes, batched, why):
    ok, reason = indexed_prefill_contract(layer(tp, **changes), batched=batched)
    assert not ok and reason is not None and why in reason.message


@pytest.mark.parametrize(
    ("tp", "changes", "why"),
    [
        (4, {"experts": 256}, "W13 qweight (256, 2560, 40)"),
        (4, {"group": 64}, "group 64"),
        (4, {"intermediate": 768}, "W13 qweight (512, 2560, 48)"),
        (4, {"intermediate": 768}, "W2 qweight (512, 192, 320)"),
        (2, {}, "W13 qweight (512, 2560, 80)"),
    ],
)
def test_compact_shape_is_shape_only(tp, changes, why):
    ok, reason = compact_shape(layer(tp, **changes))
    assert not ok and reason is not None and why in reason.message


def test_compact_shape_ignores_top_k():
    assert compact_shape(layer(top_k=8)) == OK


@pytest.mark.parametrize(
    ("spec", "tp", "message"),
    [
        (
            {"experts": 128, "top_k": 8, "hidden": 2048, "intermediate": 768, "group": 128},
            4,
            "local W2 K 192 is not a multiple of group 128",
        ),
        (
            {"experts": 128, "top_k": 8, "hidden": 2000, "intermediate": 768, "group": 128},
            2,
            "local W13 K 2000 is not a multiple of group 128",
        ),
        ({**QWEN38, "intermediate": 642}, 4, "intermediate 642 does not split over TP 4"),
    ],
)
def test_partition_rejections(spec, tp, message):
    ok, reason = AwqMoeLayer.for_rank(spec, tp).partition_check()
    assert not ok and reason is not None and reason.message == message


def test_qwen3_30b_splits_at_tp2():
    spec = {"experts": 128, "top_k": 8, "hidden": 2048, "intermediate": 768, "group": 128}
    assert AwqMoeLayer.for_rank(spec, 2).partition_check() == OK


# --- compact metadata ---------------------------------------------------------------------

VARIABLE_REQUEST = f"{var('compact_metadata')}=1"
COMPACT_TABLE = [
    # requested, explicit, native, shape -> 3-byte, fallback reason | error code
    ((False, False, False, False), (False, None)),
    ((False, True, True, True), (False, None)),
    ((True, False, True, True), (True, None)),
    ((True, True, True, True), (True, None)),
    ((True, False, False, True), (False, NO_COMPACT_OP)),
    ((True, False, True, False), (False, UNSUPPORTED_SHAPE)),
    ((True, False, False, False), (False, NO_COMPACT_OP)),
    ((True, True, False, True), "compact_metadata_native_missing"),
    ((True, True, False, False), "compact_metadata_native_missing"),
    ((True, True, True, False), "compact_metadata_shape"),
]


@pytest.mark.parametrize(("inputs", "expected"), COMPACT_TABLE)
def test_resolve_compact_metadata_truth_table(inputs, expected):
    if isinstance(expected, str):
        with pytest.raises(SelectionError) as info:
            resolve_compact_metadata(*inputs)
        assert info.value.code == expected
        return
    outcome = resolve_compact_metadata(*inputs)
    assert (outcome.value, outcome.fallback) == expected


def test_resolve_compact_metadata_covers_every_combination():
    covered = {inputs for inputs, _ in COMPACT_TABLE}
    for combo in itertools.product((False, True), repeat=4):
        requested = combo[0]
        if requested:
            assert combo in covered, combo
        else:
            assert resolve_compact_metadata(*combo).value is False


def test_resolve_compact_metadata_messages():
    with pytest.raises(SelectionError) as info:
        resolve_compact_metadata(True, True, False, True)
    assert info.value.message == (
        f"{VARIABLE_REQUEST} requires an SM70 build with awq_sm70_prepare_compact."
    )
    with pytest.raises(SelectionError) as info:
        resolve_compact_metadata(True, True, True, False)
    assert info.value.message == (
        f"{VARIABLE_REQUEST} currently requires the exact Qwen3.8 "
        "TP4 E512 native-g32 W13/W2 shapes."
    )


def test_requested_by_names_the_variable_or_the_typed_field():
    from_variable = resolve({var("compact_metadata"): "1"})
    typed = resolve(config={"sm70_awq_moe": {"compact_metadata": True}})
    key = "sm70_awq_moe.compact_metadata"
    assert requested_by(from_variable, key) == VARIABLE_REQUEST
    assert requested_by(typed, key) == "kernel_config.sm70_awq_moe.compact_metadata=True"


# --- explicit vs default -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "config", "explicit"),
    [
        ({}, None, False),
        ({"compact_metadata": "1"}, None, True),  # equal to the default: still explicit
        ({"compact_metadata": "0"}, None, True),
        ({}, {"compact_metadata": True}, True),
    ],
)
def test_explicit_means_typed_or_variable_present(env, config, explicit):
    policy = resolve(
        {var(k): v for k, v in env.items()}, {"sm70_awq_moe": config} if config else None
    )
    assert policy.is_explicit("sm70_awq_moe.compact_metadata") is explicit


# --- QPN M1 ------------------------------------------------------------------------------------

BAD = reject("x", "why")


def test_qpn_m1_admission_outcomes():
    assert admit_qpn_m1(False, True, BAD, BAD) is False
    assert admit_qpn_m1(True, True, OK, OK) is True
    assert admit_qpn_m1(True, False, BAD, OK) is False  # default: fallback, no error
    assert admit_qpn_m1(True, False, OK, BAD) is False
    with pytest.raises(SelectionError) as info:
        admit_qpn_m1(True, True, BAD, OK)
    assert info.value.code == "qpn_m1_contract"
    assert info.value.message.startswith(QPN_M1_CONTRACT_MESSAGE)
    with pytest.raises(SelectionError) as info:
        admit_qpn_m1(True, True, OK, BAD)
    assert info.value.code == "qpn_m1_native_missing"
    assert info.value.message.startswith(QPN_M1_NATIVE_MESSAGE)
    # The contract is checked before the build.
    with pytest.raises(SelectionError, match=QPN_M1_CONTRACT_MESSAGE):
        admit_qpn_m1(True, True, BAD, BAD)


def test_qpn_m1_errors_name_the_request_literally():
    contract = reject("qpn_m1_contract", "E 128")
    with pytest.raises(SelectionError) as info:
        admit_qpn_m1(True, True, contract, OK)
    assert info.value.message == (
        "AWQ QPN M1 requires native-g32 TP4 E512 C1 (VLLM_SM70_AWQ_QWEN38_QPN_M1=1: E 128)"
    )
    with pytest.raises(SelectionError) as info:
        admit_qpn_m1(True, True, OK, contract, requested_by="kernel_config.x=True")
    assert info.value.message == (
        "AWQ QPN M1 requires a native build with CUDA arch 7.0 (kernel_config.x=True: E 128)"
    )


def test_tensor_facts_read_shape_dtype_and_contiguity():
    x = torch.empty((2560, 4), dtype=torch.float16).t()
    assert TensorFacts.of(x) == TensorFacts((4, 2560), "float16", False)
    assert TensorFacts.of(x.contiguous()) == TensorFacts((4, 2560), "float16", True)
    assert qpn_m1_call(CallFacts.of(x[:1], *_qpn_ids_and_weights()))[1].code == "call_inputs"  # type: ignore
    assert qpn_m1_call(CallFacts.of(x[:1].contiguous(), *_qpn_ids_and_weights())) == OK


def _qpn_ids_and_weights() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.zeros((1, 10), dtype=torch.int32), torch.zeros((1, 10), dtype=torch.float32)


@pytest.mark.parametrize(
    ("kwargs", "what"),
    [
        ({}, None),
        ({"m": 2}, "input float16 (2, 2560)"),
        ({"m": 0}, "input float16 (0, 2560)"),
        ({"x_dtype": "bfloat16"}, "input bfloat16"),
        ({"x_contiguous": False}, "non-contiguous"),
        ({"ids_dtype": "int64"}, "ids int64"),
        ({"w_dtype": "float16"}, "topk float16"),
        ({"w_dtype": "bfloat16"}, "topk bfloat16"),
        ({"top_k": 8}, "ids int32 (1, 8)"),
        ({"hidden": 2048}, "input float16 (1, 2048)"),
    ],
)
def test_qpn_m1_call_admission(kwargs, what):
    ok, reason = qpn_m1_call(call(**kwargs))
    if what is None:
        assert ok
    else:
        assert not ok and reason is not None and reason.code == "call_inputs"
        assert what in reason.message


# --- grouped decode ---------------------------------------------------------------------------


def grouped(m: int, **changes: object):
    args = {
        "loaded": True,
        "batched": True,
        "m": m,
        "top_k": 10,
        "cap": 0,
        "strict_w13": False,
        "exact_w2": False,
        "active_exact_w2": False,
        **changes,
    }
    return grouped_decode_call(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("m", "ok"),
    [
        (0, False),
        (1, False),
        (2, True),
        (3, True),
        (8, True),
        (9, False),
        (32, False),
        (127, False),
        (128, False),
    ],
)
def test_grouped_decode_token_window(m, ok):
    assert grouped(m)[0] is ok


@pytest.mark.parametrize("flag", ["strict_w13", "exact_w2", "active_exact_w2"])
def test_grouped_decode_each_disabling_flag(flag):
    ok, reason = grouped(4, **{flag: True})
    assert not ok and reason is not None and flag in reason.message


def test_grouped_decode_other_conditions():
    assert grouped(4, top_k=8)[1].code == "top_k"  # type: ignore[union-attr]
    assert grouped(4, batched=False)[1].code == "not_batched"  # type: ignore[union-attr]
    assert grouped(4, loaded=False)[1].code == "not_admitted"  # type: ignore[union-attr]
    assert grouped(4, cap=4) == OK
    assert grouped(8, cap=4)[1].code == "token_cap"  # type: ignore[union-attr]
    assert grouped(8, cap=-1) == OK  # <= 0 is unbounded


# Each rejection's reason code, and which one a call failing several conditions gets (the
# order of docs/contracts/core.md §3.5's conjunction: load admission, batched, 2 <= M <= 8, top-k
# 10, the cap, then strict_w13, exact_w2, active_exact_w2). Literal codes: they are what rows
# record.
@pytest.mark.parametrize(
    ("m", "changes", "code", "message"),
    [
        (2, {}, None, None),
        (8, {"cap": 8}, None, None),
        (2, {"cap": 2}, None, None),
        (8, {"cap": 0}, None, None),
        (8, {"cap": -1}, None, None),
        (1, {"loaded": False, "batched": False, "top_k": 8}, "not_admitted", None),
        (1, {"batched": False, "top_k": 8}, "not_batched", None),
        (1, {"top_k": 8, "cap": 1}, "token_count", "M = 1 outside 2..8"),
        (9, {"top_k": 8}, "token_count", "M = 9 outside 2..8"),
        (4, {"top_k": 8, "cap": 1, "strict_w13": True}, "top_k", "top-k 8 (needs 10)"),
        (4, {"top_k": 11}, "top_k", "top-k 11 (needs 10)"),
        (2, {"cap": 1, "strict_w13": True}, "token_cap", "M = 2 above the batched decode cap 1"),
        (8, {"cap": 7}, "token_cap", "M = 8 above the batched decode cap 7"),
        (
            4,
            {"strict_w13": True, "exact_w2": True, "active_exact_w2": True},
            "policy",
            "disabled by sm70_awq_moe.strict_w13",
        ),
        (
            4,
            {"exact_w2": True, "active_exact_w2": True},
            "policy",
            "disabled by sm70_awq_moe.exact_w2",
        ),
        (4, {"active_exact_w2": True}, "policy", "disabled by sm70_awq_moe.active_exact_w2"),
    ],
)
def test_grouped_decode_reason_codes_and_their_order(m, changes, code, message):
    ok, reason = grouped(m, **changes)
    assert ok is (code is None)
    assert (reason.code if reason else None) == code
    if message is not None:
        assert reason is not None and reason.message == message


def test_grouped_decode_and_indexed_prefill_are_disjoint():
    for m in (0, 1, 2, 8, 9, 127, 128, 4096):
        assert not (grouped(m)[0] and indexed_prefill_call(True, call(m), 2560)[0])


# --- indexed prefill ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"m": 128}, None),
        ({"m": 4096}, None),
        ({"m": 127}, "token_count"),
        ({"m": 128, "x_dtype": "bfloat16"}, "call_inputs"),
        ({"m": 128, "x_contiguous": False}, "call_inputs"),
        ({"m": 128, "hidden": 2048}, "call_inputs"),
        ({"m": 128, "top_k": 9}, "top_k"),
    ],
)
def test_indexed_prefill_call(kwargs, code):
    ok, reason = indexed_prefill_call(True, call(**kwargs), 2560)
    assert ok is (code is None)
    if code:
        assert reason is not None and reason.code == code


@pytest.mark.parametrize(
    ("admitted", "kwargs", "code"),
    [
        (False, {"m": 127, "x_dtype": "bfloat16", "top_k": 9}, "not_admitted"),
        (True, {"m": 127, "x_dtype": "bfloat16", "top_k": 9}, "token_count"),
        (True, {"m": 128, "x_dtype": "bfloat16", "top_k": 9}, "call_inputs"),
        (True, {"m": 128, "hidden": 2048, "top_k": 9}, "call_inputs"),
        (True, {"m": 4096, "top_k": 8}, "top_k"),
        (True, {"m": 4096, "top_k": 10}, None),
    ],
)
def test_indexed_prefill_call_reason_order(admitted, kwargs, code):
    ok, reason = indexed_prefill_call(admitted, call(**kwargs), 2560)
    assert ok is (code is None)
    assert (reason.code if reason else None) == code


@pytest.mark.parametrize("x_shape", [(128,), (128, 2560, 1)])
def test_indexed_prefill_call_refuses_an_input_that_is_not_two_dimensional(x_shape):
    facts_ = CallFacts(
        facts(x_shape, "float16"), facts((128, 10), "int32"), facts((128, 10), "float32")
    )
    assert indexed_prefill_call(True, facts_, 2560)[1].code == "call_inputs"  # type: ignore


def test_indexed_prefill_call_needs_the_load_admission():
    assert indexed_prefill_call(False, call(128), 2560)[1].code == "not_admitted"  # type: ignore


def test_indexed_prefill_admission():
    missing = ["awq_moe_indexed_dense_w13_sm70_out"]
    assert admit_indexed_prefill(True, False, OK, []).value is True
    assert admit_indexed_prefill(False, True, OK, missing).value is False
    # Off silently outside the contract, explicit or not, ops or not.
    assert admit_indexed_prefill(True, True, BAD, missing).value is False
    assert admit_indexed_prefill(True, True, BAD, missing).fallback is None
    default = admit_indexed_prefill(True, False, OK, missing)
    assert default.value is False and "materialized-input" in (default.fallback or "")
    with pytest.raises(SelectionError) as info:
        admit_indexed_prefill(True, True, OK, missing)
    assert info.value.code == "indexed_prefill_native_missing"
    assert missing[0] in info.value.message


# --- chunked W2 -----------------------------------------------------------------------------


def test_chunk_scratch_ledger():
    assert full_scratch_bytes(8192, 10, 2560) == 400 * MIB
    assert chunk_scratch_bytes(4096, 10, 2560, 512) == 200 * MIB + 333_828
    assert chunk_scratch_bytes(6144, 10, 2560, 512) == 300 * MIB + 497_668


@pytest.mark.parametrize(
    ("chunk", "m", "code"),
    [
        (4096, 4096, "token_count"),
        (4096, 4102, "scratch"),
        (4096, 4103, None),
        (4096, 8192, None),
        (6144, 6144, "token_count"),
        (6144, 6153, "scratch"),
        (6144, 6154, None),
        (6144, 6537, None),
        (6144, 8193, None),
        (6144, 16384, None),
        (0, 8192, "not_admitted"),
    ],
)
def test_chunked_w2_call_boundaries(chunk, m, code):
    ok, reason = chunked_w2_call(True, chunk, m, 10, 2560, 512)
    assert ok is (code is None)
    if code:
        assert reason is not None and reason.code == code


@pytest.mark.parametrize(
    ("indexed", "chunk", "m", "code"),
    [
        (False, 0, 4096, "not_admitted"),
        (True, -1, 8192, "not_admitted"),
        (False, 4096, 4096, "not_indexed"),
        (True, 4096, 4096, "token_count"),
        (True, 4096, 4095, "token_count"),
        (True, 1, 2, None),
    ],
)
def test_chunked_w2_call_reason_order(indexed, chunk, m, code):
    ok, reason = chunked_w2_call(indexed, chunk, m, 10, 2560, 512)
    assert ok is (code is None)
    assert (reason.code if reason else None) == code


def test_chunked_w2_scratch_uses_the_call_top_k_and_experts():
    # top-k 8, E 128, w2_n 2048 (Qwen3-30B-A3B TP2): chunk 1 at M 2 costs 1*8*(4096+8) +
    # 385*4 = 34,372 B against 2*8*2048*2 = 65,536 B; at top-k 1, 4,104 + 1,540 = 5,644 B
    # against 8,192 B; with E 1024 the table alone (12,292 B) is above the full 8,192 B.
    assert chunked_w2_call(True, 1, 2, 8, 2048, 128) == OK
    assert chunked_w2_call(True, 1, 2, 1, 2048, 128) == OK
    assert chunked_w2_call(True, 1, 2, 1, 2048, 1024)[1].code == "scratch"  # type: ignore


def test_chunked_w2_refuses_a_chunk_scratch_equal_to_the_full_output():
    # docs/contracts/core.md §3.5: the chunk scratch must be strictly below the full output. top-k
    # 1, w2_n 2, E 1: chunk 1 costs 1*1*(4+8) + 4*4 = 28 B, M 7 costs 7*1*2*2 = 28 B; M 8, 32 B.
    assert chunked_w2_call(True, 1, 7, 1, 2, 1)[1].code == "scratch"  # type: ignore
    assert chunked_w2_call(True, 1, 8, 1, 2, 1) == OK


def test_chunked_w2_needs_the_indexed_w13():
    assert chunked_w2_call(False, 4096, 8192, 10, 2560, 512)[1].code == "not_indexed"  # type: ignore


def test_resolve_w2_chunk_tokens():
    assert resolve_w2_chunk_tokens(0, True, False) == 0
    assert resolve_w2_chunk_tokens(4096, True, True) == 4096
    assert resolve_w2_chunk_tokens(6144, False, False) == 0  # indexed not admitted: silently 0
    with pytest.raises(SelectionError) as info:
        resolve_w2_chunk_tokens(4096, True, False)
    assert info.value.code == "chunked_w2_native_missing"
    assert "awq_moe_chunked_w2_sm70_out" in info.value.message


def test_a_one_token_chunk_is_stored_and_its_missing_op_named_exactly():
    assert resolve_w2_chunk_tokens(1, True, True) == 1
    assert resolve_w2_chunk_tokens(-1, True, True) == 0
    with pytest.raises(SelectionError) as info:
        resolve_w2_chunk_tokens(1, True, False)
    assert info.value.message == (
        "sm70_awq_moe.w2_chunk_tokens=1 requires the native op awq_moe_chunked_w2_sm70_out"
    )


def test_indexed_prefill_admission_messages_literally():
    missing = ["awq_moe_indexed_dense_w13_sm70_out", "moe_permute_metadata_with_scratch"]
    default = admit_indexed_prefill(True, False, OK, missing)
    assert default.fallback == (
        "missing native indexed prefill operators: [awq_moe_indexed_dense_w13_sm70_out, "
        "moe_permute_metadata_with_scratch]; using the materialized-input route"
    )
    with pytest.raises(SelectionError) as info:
        admit_indexed_prefill(True, True, OK, missing)
    assert info.value.message == (
        "VLLM_SM70_AWQ_QWEN38_MOE_INDEXED_PREFILL=1: the explicit indexed prefill route "
        "requires native operators [awq_moe_indexed_dense_w13_sm70_out, "
        "moe_permute_metadata_with_scratch]"
    )


@pytest.mark.parametrize(
    ("active", "m", "top_k", "code"),
    [
        (True, 16, 8, None),
        (True, 17, 8, "token_count"),
        (True, 128, 1, None),
        (True, 129, 1, "token_count"),
        (False, 1, 10, "policy"),
        (False, 200, 10, "policy"),
    ],
)
def test_active_exact_w2_reason_codes(active, m, top_k, code):
    ok, reason = active_exact_w2_call(active, m, top_k)
    assert ok is (code is None)
    assert (reason.code if reason else None) == code


@pytest.mark.parametrize(("m", "ok"), [(1, True), (12, True), (13, False)])
def test_active_exact_w2_slot_limit(m, ok):
    assert active_exact_w2_call(True, m, 10)[0] is ok
    assert active_exact_w2_call(False, m, 10)[0] is False


# --- variables: parsing, defaults, the natively-read rule ---------------------------------------


def test_section_defaults():
    section = resolve().section("sm70_awq_moe").as_dict()
    assert section == {
        "disable": False,
        "qpn_m1": False,
        "active_grouped_decode": True,
        "compact_metadata": True,
        "tune_small_shapes": False,
        "batched": True,
        "layer_allowlist": (),
        "layer_denylist": (),
        "legacy_compact": True,
        "strict_w13": False,
        "exact_w2": False,
        "active_exact_w2": False,
        "max_batched_tokens": 0,
        "indexed_prefill": True,
        "w2_chunk_tokens": 0,
    }


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("qpn_m1", "2"),
        ("qpn_m1", "true"),
        ("qpn_m1", ""),
        ("qpn_m1", "-1"),
        ("qpn_m1", " 1"),
        ("active_grouped_decode", "yes"),
        ("compact_metadata", ""),
        ("batched", "on"),
        ("w2_chunk_tokens", "1000"),
        ("w2_chunk_tokens", "-4096"),
        ("w2_chunk_tokens", "x"),
        ("max_batched_tokens", "four"),
        ("layer_allowlist", "3-1"),
        ("layer_denylist", "a"),
    ],
)
def test_invalid_values_are_input_errors_naming_the_variable(name, text):
    with pytest.raises(InputError) as info:
        resolve({var(name): text})
    assert var(name) in str(info.value)


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("qpn_m1", "1", True),
        ("qpn_m1", "0", False),
        ("active_grouped_decode", "2", True),
        ("w2_chunk_tokens", "6144", 6144),
        ("w2_chunk_tokens", " 4096 ", 4096),
        ("max_batched_tokens", "-3", -3),
        ("disable", "7", True),
    ],
)
def test_accepted_values(name, text, value):
    assert resolve({var(name): text}).value(f"sm70_awq_moe.{name}") == value


@pytest.mark.parametrize("name", ["active_grouped_decode", "active_exact_w2"])
def test_natively_read_fields_must_agree_with_the_environment(name):
    key = f"sm70_awq_moe.{name}"
    default = resolve().value(key)
    # A typed value that differs from the variable's default is a conflict...
    with pytest.raises(InputError) as info:
        resolve(config={"sm70_awq_moe": {name: not default}})
    assert var(name) in str(info.value) and f"kernel_config.{key}" in str(info.value)
    # ... and one that differs from the variable's value too.
    with pytest.raises(InputError):
        resolve({var(name): "1" if not default else "0"}, {"sm70_awq_moe": {name: default}})
    # Agreeing values resolve, typed wins the source.
    agreed = resolve(
        {var(name): "1" if not default else "0"}, {"sm70_awq_moe": {name: not default}}
    )
    assert agreed.value(key) is (not default) and agreed.source(key) == "explicit"
    assert resolve(config={"sm70_awq_moe": {name: default}}).value(key) is default


@pytest.mark.parametrize("name", ["compact_metadata", "qpn_m1", "batched"])
def test_other_fields_let_the_typed_value_win(name):
    key = f"sm70_awq_moe.{name}"
    default = resolve().value(key)
    policy = resolve({var(name): "1" if not default else "0"}, {"sm70_awq_moe": {name: default}})
    assert policy.value(key) is default
    assert (var(name), key) in policy.ignored
