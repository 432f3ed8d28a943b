"""The AWQ MoE route selector (docs/contracts/core.md §3.4) and the loader (3.2, 3.5): stages per
token count in the contract's order, load-time decisions, prepared banks and their bytes."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from native import moe_stages
from native.catalogue import CATALOGUE
from native.moe_layer import AwqMoeLayer, ExpertBank, MoeCheckpoint
from native.ops_moe import OPS as MOE_OPS
from native.ops_moe import STAGES
from policies import PROJECT
from policies.awq_moe import (
    MOE_WNA16,
    TURBOMIND,
    bank_bytes,
    decide_awq_moe,
    load_awq_moe,
    select_awq_moe,
)
from policies.awq_moe_admission import CallFacts, TensorFacts
from policies.awq_moe_routes import LoadedRoute, select_route
from policies.variables import field
from routectl.errors import SelectionError
from routectl.namespaces.native_ns import InMemoryNamespace
from routectl.replay.harness import RecordingNamespace
from routectl.workload import EngineConfig, Hardware
from tests.policy_helpers import QWEN38_LOADED

QWEN38 = {"experts": 512, "top_k": 10, "hidden": 2560, "intermediate": 640, "group": 32}
QWEN3_30B = {"experts": 128, "top_k": 8, "hidden": 2048, "intermediate": 768, "group": 128}
ALL_OPS = tuple(CATALOGUE.ops)
DEFAULT = QWEN38_LOADED


def var(key: str) -> str:
    name = field(key).variable
    assert name is not None
    return name


def moe_env(**values: str) -> dict[str, str]:
    return {var(f"sm70_awq_moe.{k}"): v for k, v in values.items()}


def call(m: int, top_k: int = 10, **x: object) -> CallFacts:
    x_facts = TensorFacts(
        (m, 2560), str(x.get("dtype", "float16")), bool(x.get("contiguous", True))
    )
    return CallFacts(
        x_facts,
        TensorFacts((m, top_k), str(x.get("ids", "int32"))),
        TensorFacts((m, top_k), str(x.get("weights", "float32"))),
    )


def ns(*removed: str) -> InMemoryNamespace:
    return InMemoryNamespace(ALL_OPS).without(*removed)


def route(
    m: int, loaded: LoadedRoute = DEFAULT, namespace: InMemoryNamespace | None = None, **x: object
) -> list[str]:
    return select_route(call(m, **x), loaded, namespace or ns()).chosen


ROUTED = "lane.routed"


def routed(permute: str, w13: str, w2: str, reduce: str = "reduce.unpermute") -> list[str]:
    return [ROUTED, f"permute.{permute}", f"w13.{w13}", f"w2.{w2}", reduce]


# --- the selector on the Qwen3.8 TP4 defaults ------------------------------------------------


@pytest.mark.parametrize(
    ("m", "expected"),
    [
        (0, ["lane.zero_output"]),
        (1, ["lane.legacy_single_token"]),
        (2, routed("permute", "active_grouped", "active_grouped")),
        (8, routed("permute", "active_grouped", "active_grouped")),
        (9, routed("permute", "per_expert_dispatch", "per_expert_dispatch")),
        (127, routed("permute", "per_expert_dispatch", "per_expert_dispatch")),
        (128, routed("permute_metadata", "indexed_prefill_w13", "per_expert_dispatch")),
        (8192, routed("permute_metadata", "indexed_prefill_w13", "per_expert_dispatch")),
    ],
)
def test_default_routes_by_token_count(m, expected):
    assert route(m) == expected


def test_every_lane_is_evaluated_in_contract_order():
    choice = select_route(call(1), DEFAULT, ns())
    assert [v.name for v in choice.verdicts] == [
        "lane.zero_output",
        "lane.qpn_m1",
        "lane.legacy_single_token",
        "lane.single_token_decomposed",
        "lane.routed",
    ]
    assert [v.not_needed for v in choice.verdicts] == [False, False, False, True, True]
    choice = select_route(call(128), DEFAULT, ns())
    assert [v.name for v in choice.verdicts][5:] == [
        "permute.permute_metadata",
        "permute.permute",
        "w13.indexed_prefill_w13",
        "w13.active_grouped",
        "w13.per_expert_dispatch",
        "w13.dense_stage",
        "w2.chunked_w2",
        "w2.active_grouped",
        "w2.per_expert_dispatch",
        "w2.dense_stage",
        "reduce.chunked_w2",
        "reduce.unpermute",
    ]


QPN = replace(DEFAULT, qpn_m1=True)


def test_qpn_m1_serves_exactly_one_token_with_contract_inputs():
    assert route(1, QPN) == ["lane.qpn_m1"]
    for m in (0, 2, 4, 5, 8, 128, 8192):
        assert "lane.qpn_m1" not in route(m, QPN)


@pytest.mark.parametrize(
    "x",
    [
        {"dtype": "bfloat16"},
        {"contiguous": False},
        {"ids": "int64"},
        {"weights": "float16"},
        {"weights": "bfloat16"},
    ],
)
def test_qpn_m1_call_inputs_fall_back_to_the_legacy_op(x):
    choice = select_route(call(1, **x), QPN, ns())
    assert choice.chosen == ["lane.legacy_single_token"]
    assert choice.verdicts[1].code == "call_inputs"


def test_qpn_m1_needs_sm70_exactly_and_its_op_per_call():
    assert route(1, replace(QPN, capability=72)) == ["lane.legacy_single_token"]
    assert route(1, QPN, ns("awq_moe_qpn_m1_sm70_out")) == ["lane.legacy_single_token"]


def test_strict_w13_does_not_preempt_the_legacy_lane():
    strict = replace(DEFAULT, strict_w13=True)
    assert route(1, strict) == ["lane.legacy_single_token"]
    assert route(2, strict) == routed("permute", "dense_stage", "dense_stage")
    # Indexed prefill ignores strict_w13 and the cap.
    assert route(128, strict) == routed("permute_metadata", "indexed_prefill_w13", "dense_stage")
    assert route(128, replace(DEFAULT, token_cap=4)) == routed(
        "permute_metadata", "indexed_prefill_w13", "dense_stage"
    )


def test_decomposed_lane_when_not_batched_or_strict_without_the_legacy_lane():
    lane = [
        "lane.single_token_decomposed",
        "w13.single_token_dense_w13",
        "w2.single_token_dense_w2",
    ]
    not_batched = replace(
        DEFAULT,
        batched=False,
        legacy_lane=False,
        legacy_lane_reason="batched GEMM is off for layer 0",
    )
    assert route(1, not_batched) == [*lane, "reduce.weighted_reduce"]
    assert route(1, not_batched, ns("awq_moe_single_token_weighted_reduce_out")) == [
        *lane,
        "reduce.unpermute",
    ]
    strict = replace(DEFAULT, strict_w13=True, legacy_lane=False, legacy_lane_reason="off")
    assert route(1, strict)[0] == "lane.single_token_decomposed"
    # Without its ops the decomposed lane gives way to the routed lane.
    assert route(1, not_batched, ns("awq_moe_single_token_dense_w13_sm70_out"))[0] == ROUTED
    assert route(2, not_batched) == routed("permute", "dense_stage", "dense_stage")


def test_batched_without_the_legacy_lane_routes_one_token():
    legacy_off = replace(DEFAULT, legacy_lane=False, legacy_lane_reason="legacy off")
    assert route(1, legacy_off) == routed("permute", "per_expert_dispatch", "per_expert_dispatch")


def test_exact_w2_flags():
    exact = replace(DEFAULT, exact_w2=True)
    assert route(2, exact) == routed("permute", "per_expert_dispatch", "dense_stage")
    active = replace(DEFAULT, active_exact_w2=True)
    assert route(2, active) == routed("permute", "per_expert_dispatch", "active_grouped")
    assert route(12, active) == routed("permute", "per_expert_dispatch", "active_grouped")
    assert route(13, active) == routed("permute", "per_expert_dispatch", "per_expert_dispatch")


@pytest.mark.parametrize(
    ("m", "w13", "w2"),
    [
        (2, "active_grouped", "active_grouped"),
        (4, "active_grouped", "active_grouped"),
        (5, "dense_stage", "dense_stage"),
        (9, "dense_stage", "dense_stage"),
    ],
)
def test_the_batched_decode_cap(m, w13, w2):
    assert route(m, replace(DEFAULT, token_cap=4)) == routed("permute", w13, w2)


# The per-expert dispatch stages' verdicts at M 16 (routed, neither grouped nor indexed):
# docs/contracts/core.md §3.4 "batched, not strict, M within the cap"; rows record each verdict's
# code.
@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({}, None),
        ({"batched": False, "strict_w13": True, "token_cap": 4}, "not_batched"),
        ({"strict_w13": True, "token_cap": 4}, "policy"),
        ({"token_cap": 15}, "token_cap"),
        ({"token_cap": 16}, None),
    ],
)
def test_per_expert_dispatch_verdict_codes(changes, code):
    choice = select_route(call(16), replace(DEFAULT, **changes), ns())
    codes = {v.name: v.code for v in choice.verdicts}
    assert codes["w13.per_expert_dispatch"] == code
    assert codes["w2.per_expert_dispatch"] == code
    assert choice.to_json()["m"] == 16


def test_w2_and_reduce_verdict_codes_at_m_16_with_exact_w2():
    # docs/contracts/core.md §3.4 W2: grouped decode or (active_exact_w2 and M*top_k <= 128) ->
    # active stage; batched, not strict, not exact_w2, within the cap -> per-expert dispatch.
    choice = select_route(call(16), replace(DEFAULT, exact_w2=True), ns())
    verdicts = {v.name: v for v in choice.verdicts}
    assert verdicts["w13.per_expert_dispatch"].code is None
    per_expert = verdicts["w2.per_expert_dispatch"]
    assert (per_expert.code, per_expert.message) == ("policy", "disabled by sm70_awq_moe.exact_w2")
    # The active stage refuses with grouped decode's code (M 16 is outside 2..8) and names
    # both reasons.
    active = verdicts["w2.active_grouped"]
    assert (active.code, active.message) == (
        "token_count",
        "grouped decode: M = 16 outside 2..8; active exact W2: sm70_awq_moe.active_exact_w2 is off",
    )
    assert (verdicts["reduce.chunked_w2"].code, verdicts["reduce.chunked_w2"].message) == (
        "not_chunked",
        "W2 is not the chunked W2 stage",
    )
    assert choice.chosen[3:] == ["w2.dense_stage", "reduce.unpermute"]
    # Every refusal here is a policy-stage one (the startup report records the stage).
    refused = {v.name: v.stage for v in choice.verdicts if not v.ok and "." in v.name}
    assert {k: v for k, v in refused.items() if not k.startswith("lane.")} == {
        "permute.permute_metadata": "policy",
        "w13.indexed_prefill_w13": "policy",
        "w13.active_grouped": "policy",
        "w2.chunked_w2": "policy",
        "w2.active_grouped": "policy",
        "w2.per_expert_dispatch": "policy",
        "reduce.chunked_w2": "policy",
    }


def test_lane_and_per_expert_refusals_carry_their_codes_and_stages():
    choice = select_route(call(16), replace(DEFAULT, batched=False), ns())
    verdicts = {v.name: v for v in choice.verdicts}
    zero = verdicts["lane.zero_output"]
    assert (zero.code, zero.message, zero.stage) == ("token_count", "M = 16 is not 0", "policy")
    per_expert = verdicts["w13.per_expert_dispatch"]
    assert (per_expert.code, per_expert.stage) == ("not_batched", "policy")
    capped = select_route(call(16), replace(DEFAULT, token_cap=15), ns()).verdicts
    message = next(v.message for v in capped if v.name == "w13.per_expert_dispatch")
    assert message == "M = 16 above the batched decode cap 15"


def _lane(choice, name):
    v = next(v for v in choice.verdicts if v.name == name)
    return (v.ok, v.code, v.message, v.stage)


def test_one_token_lane_refusals_with_code_message_and_stage():
    choice = select_route(call(1), DEFAULT, ns())
    assert _lane(choice, "lane.zero_output") == (False, "token_count", "M = 1 is not 0", "policy")
    assert _lane(choice, "lane.qpn_m1") == (
        False,
        "not_admitted",
        "QPN M1 not admitted at load (opt-in)",
        "policy",
    )
    unbuilt = replace(DEFAULT, legacy_lane=False, legacy_lane_reason="no single-token op")
    choice = select_route(call(1), unbuilt, ns())
    assert _lane(choice, "lane.legacy_single_token") == (
        False,
        "legacy_lane_off",
        "legacy single-token lane not built: no single-token op",
        "policy",
    )
    # docs/contracts/core.md §3.4: M = 1, batched and legacy lane off -> the routed lane, not the
    # decomposed.
    assert _lane(choice, "lane.single_token_decomposed")[1] == "policy"
    assert choice.chosen[0] == "lane.routed"


def test_the_decomposed_lane_reduces_with_either_op():
    # docs/contracts/core.md §3.4: reduce with awq_moe_single_token_weighted_reduce_out when
    # present, else moe_unpermute: either one is enough for the decomposed lane.
    unbatched = replace(DEFAULT, batched=False, legacy_lane=False, legacy_lane_reason="off")
    for missing in ("moe_unpermute", "awq_moe_single_token_weighted_reduce_out"):
        assert select_route(call(1), unbatched, ns(missing)).chosen[0] == (
            "lane.single_token_decomposed"
        )


def test_one_token_lanes_refuse_other_token_counts_with_their_message():
    choice = select_route(call(2), QPN, ns())
    for name in ("lane.qpn_m1", "lane.legacy_single_token", "lane.single_token_decomposed"):
        assert _lane(choice, name) == (False, "token_count", "M = 2 is not 1", "policy")


def test_qpn_m1_refusals_by_capability_and_call_inputs_carry_their_stages():
    # docs/contracts/core.md §3.5: the engine op needs capability exactly 70; 3.4: the call's
    # inputs.
    sm72 = select_route(call(1), replace(QPN, capability=72), ns())
    assert _lane(sm72, "lane.qpn_m1")[0::3] == (False, "capability")
    bf16 = select_route(call(1, dtype="bfloat16"), QPN, ns())
    assert _lane(bf16, "lane.qpn_m1")[1::2] == ("call_inputs", "call")


def test_the_decomposed_lane_without_either_reduce_op_is_refused_at_the_ops_stage():
    unbatched = replace(DEFAULT, batched=False, legacy_lane=False, legacy_lane_reason="off")
    both = ns("moe_unpermute", "awq_moe_single_token_weighted_reduce_out")
    # The routed lane then has no reduce either: the call is refused, every verdict kept.
    with pytest.raises(SelectionError) as info:
        select_route(call(1), unbatched, both)
    verdicts = {v.name: v for v in info.value.verdicts}
    decomposed = verdicts["lane.single_token_decomposed"]
    # The reduce the contract falls back to (moe_unpermute) is the one named.
    assert (decomposed.ok, decomposed.code, decomposed.message, decomposed.stage) == (
        False,
        "missing_native_ops",
        "missing native AWQ MoE operators: [moe_unpermute]",
        "ops",
    )


def test_per_expert_dispatch_refusal_messages_name_the_switch():
    unbatched = select_route(call(16), replace(DEFAULT, batched=False), ns())
    assert _lane(unbatched, "w13.per_expert_dispatch") == (
        False,
        "not_batched",
        "batched GEMM is off for this layer",
        "policy",
    )
    strict = select_route(call(16), replace(DEFAULT, strict_w13=True), ns())
    assert _lane(strict, "w13.per_expert_dispatch") == (
        False,
        "policy",
        "disabled by sm70_awq_moe.strict_w13",
        "policy",
    )


def test_no_stage_for_a_slot_is_a_selection_error_with_every_verdict_so_far():
    missing = ns("awq_moe_gemm_sm70_per_expert_dispatch_out", "awq_moe_dense_stage_sm70_out")
    with pytest.raises(SelectionError) as info:
        select_route(call(9), DEFAULT, missing)
    error = info.value
    assert error.code == "no_moe_stage"
    assert error.message.startswith("no AWQ MoE stage can serve w13 at M = 9: ")
    assert [v.name for v in error.verdicts] == [
        "lane.zero_output",
        "lane.qpn_m1",
        "lane.legacy_single_token",
        "lane.single_token_decomposed",
        "lane.routed",
        "permute.permute_metadata",
        "permute.permute",
        "w13.indexed_prefill_w13",
        "w13.active_grouped",
        "w13.per_expert_dispatch",
        "w13.dense_stage",
    ]


@pytest.mark.parametrize(
    ("missing", "reduce_op"),
    [
        ((), "awq_moe_single_token_weighted_reduce_out"),
        (("awq_moe_single_token_weighted_reduce_out",), "moe_unpermute"),
    ],
)
def test_the_decomposed_lane_runs_w13_w2_and_a_reduce(missing, reduce_op):
    # docs/contracts/core.md §3.4: M = 1, decomposed lane: W13
    # awq_moe_single_token_dense_w13_sm70_out, SiLU (inside the engine), W2
    # awq_moe_single_token_dense_stage_sm70_out, reduce awq_moe_single_token_weighted_reduce_out
    # when present else moe_unpermute.
    unbatched = replace(DEFAULT, batched=False, legacy_lane=False, legacy_lane_reason="off")
    choice = select_route(call(1), unbatched, ns(*missing))
    assert (choice.m, choice.plan.lane, choice.plan.permute) == (1, "decomposed", None)
    assert [stage.op for stage in choice.plan.stages()] == [
        "awq_moe_single_token_dense_w13_sm70_out",
        "awq_moe_single_token_dense_stage_sm70_out",
        reduce_op,
    ]
    routed_lane = _lane(
        select_route(call(1), DEFAULT, ns("awq_moe_single_token_sm70_out")),
        "lane.single_token_decomposed",
    )
    assert routed_lane == (False, "policy", "batched GEMM on and strict_w13 off", "policy")


@pytest.mark.parametrize(("m", "lane"), [(0, "zero"), (1, "legacy"), (2, "routed")])
def test_every_lane_records_the_calls_token_count(m, lane):
    choice = select_route(call(m), DEFAULT, ns())
    assert (choice.m, choice.plan.lane, choice.to_json()["m"]) == (m, lane, m)
    assert select_route(call(1), QPN, ns()).m == 1


def test_the_routed_lane_refuses_no_call_of_one_or_more_tokens():
    zero = select_route(call(0), DEFAULT, ns())
    assert _lane(zero, "lane.routed") == (False, "token_count", "M = 0 is not at least 1", "policy")
    assert _lane(zero, "lane.single_token_decomposed") == (
        False,
        "token_count",
        "M = 0 is not 1",
        "policy",
    )


def test_a_missing_stage_op_is_refused_at_the_ops_stage():
    choice = select_route(call(16), DEFAULT, ns("awq_moe_gemm_sm70_per_expert_dispatch_out"))
    verdict = next(v for v in choice.verdicts if v.name == "w13.per_expert_dispatch")
    assert (verdict.ok, verdict.code, verdict.stage) == (False, "missing_native_ops", "ops")


def test_the_routed_plan_names_its_lane_and_leaves_the_reduce_to_chunked_w2():
    chunked = select_route(call(8192), replace(DEFAULT, chunk_tokens=4096), ns()).plan
    assert (chunked.lane, chunked.w2, chunked.reduce) == ("routed", moe_stages.ChunkedW2, None)
    plain = select_route(call(16), DEFAULT, ns()).plan
    assert (plain.lane, plain.reduce) == ("routed", moe_stages.Unpermute)


def test_grouped_decode_needs_top_k_10_and_the_load_admission():
    assert route(2, top_k=8) == routed("permute", "per_expert_dispatch", "per_expert_dispatch")
    assert route(2, replace(DEFAULT, grouped_decode=False)) == routed(
        "permute", "per_expert_dispatch", "per_expert_dispatch"
    )


def test_chunked_w2_replaces_w2_and_the_reduction():
    chunked = replace(DEFAULT, chunk_tokens=4096)
    assert route(8192, chunked) == routed(
        "permute_metadata", "indexed_prefill_w13", "chunked_w2", "reduce.chunked_w2"
    )
    assert route(4096, chunked) == routed(
        "permute_metadata", "indexed_prefill_w13", "per_expert_dispatch"
    )
    assert route(8192, chunked, ns("awq_moe_chunked_w2_sm70_out"))[3] == "w2.per_expert_dispatch"
    # Without the indexed W13 there is no chunking.
    assert route(8192, replace(chunked, indexed_prefill=False)) == routed(
        "permute", "per_expert_dispatch", "per_expert_dispatch"
    )


def test_missing_stage_ops_fall_to_the_next_stage():
    assert route(9, DEFAULT, ns("awq_moe_gemm_sm70_per_expert_dispatch_out")) == routed(
        "permute", "dense_stage", "dense_stage"
    )
    assert route(2, DEFAULT, ns("awq_moe_active_dense_stage_sm70_out")) == routed(
        "permute", "per_expert_dispatch", "per_expert_dispatch"
    )
    with pytest.raises(SelectionError) as info:
        select_route(
            call(9),
            DEFAULT,
            ns("awq_moe_gemm_sm70_per_expert_dispatch_out", "awq_moe_dense_stage_sm70_out"),
        )
    assert info.value.code == "no_moe_stage"


def test_indexed_prefill_and_grouped_decode_never_share_a_token_count():
    for m in (1, 2, 8, 9, 127, 128):
        chosen = route(m)
        assert not ("w13.indexed_prefill_w13" in chosen and "w13.active_grouped" in chosen)


# --- the loader ---------------------------------------------------------------------------


def resolve(env: dict[str, str] | None = None, config: object = None, tp: int = 4):
    return PROJECT.resolve(config, env or {}, Hardware(70), EngineConfig(tp=tp))


def recorder(*removed: str) -> RecordingNamespace:
    return RecordingNamespace(CATALOGUE, remove=removed)


def decide(spec=QWEN38, env=None, config=None, tp=4, capability=70, removed=()):
    return decide_awq_moe(
        spec,
        resolve(env, config, tp),
        Hardware(capability),
        EngineConfig(tp=tp),
        recorder(*removed),
    )


def test_default_decision_for_the_qwen38_tp4_layer():
    plan = decide()
    d = plan.decision
    assert d.kernel == TURBOMIND and d.layout == "3-byte" and d.fallbacks == ()
    assert dict(d.flags) == {
        "batched": True,
        "legacy_lane": True,
        "w13_interleaved": True,
        "qpn_m1": False,
        "grouped_decode": True,
        "qwen38_contract": True,
        "indexed_prefill": True,
        "w2_chunk_tokens": 0,
        "compact_metadata": True,
        "prepare_op": "awq_sm70_prepare_compact",
        "token_cap": 0,
    }
    assert [v.name for v in d.selection.verdicts] == [TURBOMIND, MOE_WNA16]
    assert d.selection.verdicts[1].not_needed


@pytest.mark.parametrize(
    ("env", "flag", "value"),
    [
        (moe_env(qpn_m1="1"), "qpn_m1", True),
        (moe_env(active_grouped_decode="0"), "grouped_decode", False),
        (moe_env(legacy_compact="0"), "w13_interleaved", False),
        (moe_env(batched="0"), "legacy_lane", False),
        (moe_env(batched="0"), "indexed_prefill", False),
        (moe_env(layer_denylist="0-3"), "batched", False),
        (moe_env(layer_allowlist="1,2"), "batched", False),
        (moe_env(layer_allowlist="0"), "batched", True),
        (moe_env(w2_chunk_tokens="6144"), "w2_chunk_tokens", 6144),
        (moe_env(compact_metadata="0"), "compact_metadata", False),
        (moe_env(max_batched_tokens="4"), "token_cap", 4),
    ],
)
def test_each_switch_reaches_the_decision(env, flag, value):
    assert decide(env=env).decision.flags[flag] == value


@pytest.mark.parametrize(
    ("env", "removed", "code"),
    [
        (moe_env(qpn_m1="1"), ("awq_moe_qpn_m1_sm70_out",), "qpn_m1_native_missing"),
        (moe_env(qpn_m1="1"), ("awq_moe_single_token_sm70_out",), "qpn_m1_contract"),
        (moe_env(qpn_m1="1", legacy_compact="0"), (), "qpn_m1_contract"),
        (moe_env(qpn_m1="1", batched="0"), (), "qpn_m1_contract"),
        (
            moe_env(compact_metadata="1"),
            ("awq_sm70_prepare_compact",),
            "compact_metadata_native_missing",
        ),
        (
            moe_env(indexed_prefill="1"),
            ("awq_moe_indexed_dense_w13_sm70_out",),
            "indexed_prefill_native_missing",
        ),
        (
            moe_env(w2_chunk_tokens="4096"),
            ("awq_moe_chunked_w2_sm70_out",),
            "chunked_w2_native_missing",
        ),
    ],
)
def test_explicit_requests_that_cannot_be_served_fail_the_load(env, removed, code):
    with pytest.raises(SelectionError) as info:
        decide(env=env, removed=removed)
    assert info.value.code == code
    assert [v.name for v in info.value.verdicts] == [TURBOMIND, MOE_WNA16]


def test_explicit_qpn_m1_outside_the_contract():
    for spec, tp in (
        (QWEN38, 2),
        ({**QWEN38, "experts": 256}, 4),
        ({**QWEN38, "group": 64, "intermediate": 1024}, 4),
    ):
        with pytest.raises(SelectionError, match="requires native-g32 TP4 E512 C1"):
            decide(spec, env=moe_env(qpn_m1="1"), tp=tp)


def test_typed_requests_are_named_by_their_config_path():
    with pytest.raises(SelectionError) as info:
        decide(spec=QWEN3_30B, tp=2, config={"sm70_awq_moe": {"compact_metadata": True}})
    assert info.value.message.startswith("kernel_config.sm70_awq_moe.compact_metadata=True")


@pytest.mark.parametrize(
    ("spec", "tp", "switch", "removed", "code", "message"),
    [
        # docs/contracts/core.md §3.5: explicit QPN M1 outside its contract is a load error
        (
            QWEN3_30B,
            2,
            "qpn_m1",
            (),
            "qpn_m1_contract",
            "AWQ QPN M1 requires native-g32 TP4 E512 C1 (kernel_config.sm70_awq_moe.qpn_m1=True: ",
        ),
        # explicit indexed prefill with its ops missing is a load error
        (
            QWEN38,
            4,
            "indexed_prefill",
            ("awq_moe_indexed_dense_w13_sm70_out",),
            "indexed_prefill_native_missing",
            "kernel_config.sm70_awq_moe.indexed_prefill=True: the explicit indexed prefill "
            "route requires native operators [awq_moe_indexed_dense_w13_sm70_out]",
        ),
    ],
)
def test_typed_qpn_m1_and_indexed_prefill_refusals_name_the_config_path(
    spec, tp, switch, removed, code, message
):
    # The maintainer must see which request to drop: the typed field, not a variable that
    # was never set.
    with pytest.raises(SelectionError) as info:
        decide(spec=spec, tp=tp, config={"sm70_awq_moe": {switch: True}}, removed=removed)
    assert info.value.code == code
    assert info.value.message.startswith(message)


@pytest.mark.parametrize(
    ("removed", "field_key", "reason"),
    [
        (("awq_sm70_prepare_compact",), "sm70_awq_moe.compact_metadata", "no compact prepare op"),
        (
            ("moe_permute_metadata_with_scratch",),
            "sm70_awq_moe.indexed_prefill",
            "missing native indexed prefill operators",
        ),
    ],
)
def test_defaults_that_cannot_be_served_are_fallbacks(removed, field_key, reason):
    d = decide(removed=removed).decision
    assert [(f.field, f.requested, f.effective) for f in d.fallbacks] == [(field_key, True, False)]
    assert d.fallbacks[0].reason.startswith(reason)


def test_non_contract_layers_keep_the_4_byte_layout_through_the_fallback():
    for spec, tp in ((QWEN38, 2), (QWEN3_30B, 2)):
        d = decide(spec, tp=tp).decision
        assert d.kernel == TURBOMIND and d.layout == "4-byte"
        assert [(f.field, f.reason) for f in d.fallbacks] == [
            ("sm70_awq_moe.compact_metadata", "unsupported layer shape")
        ]
        assert not d.flags["grouped_decode"] and not d.flags["indexed_prefill"]
    # Explicit grouped/indexed/chunk requests are silently off there.
    d = decide(
        QWEN3_30B,
        env=moe_env(indexed_prefill="1", active_grouped_decode="1", w2_chunk_tokens="4096"),
        tp=2,
    ).decision
    assert (d.flags["indexed_prefill"], d.flags["grouped_decode"], d.flags["w2_chunk_tokens"]) == (
        False,
        False,
        0,
    )


@pytest.mark.parametrize(
    ("env", "capability", "code", "fallback"),
    [
        (moe_env(disable="1"), 70, "moe_disabled", False),
        ({var("sm70_turbomind.quant_backend"): "marlin"}, 70, "backend_override", False),
        ({var("sm70_turbomind.awq_moe"): "0"}, 70, "turbomind_off", False),
        ({}, 75, "capability", True),
        ({}, 80, "capability", True),
    ],
)
def test_moe_wna16_outside_the_family(env, capability, code, fallback):
    d = decide(env=env, capability=capability).decision
    assert d.kernel == MOE_WNA16
    assert d.selection.verdicts[0].code == code
    assert d.selection.fallback is fallback
    assert bool(d.fallbacks) is fallback


def test_a_rank_layer_is_decided_as_its_model_level_spec():
    # decide_awq_moe takes the model-level description or the rank's AwqMoeLayer itself.
    rank = AwqMoeLayer.for_rank(QWEN38, 4)
    assert decide(rank).decision == decide(QWEN38).decision
    assert decide(rank).layer is rank


@pytest.mark.parametrize(
    ("env", "removed", "reason"),
    [
        # docs/contracts/core.md §3.4: the legacy lane is built when the layer is batched,
        # legacy_compact is on and awq_moe_single_token_sm70_out is present; the M = 1 refusal names
        # which.
        (moe_env(batched="0"), (), "batched GEMM is off for layer 0"),
        (moe_env(legacy_compact="0"), (), "sm70_awq_moe.legacy_compact is off"),
        (
            {},
            ("awq_moe_single_token_sm70_out",),
            "missing native legacy single-token operators: [awq_moe_single_token_sm70_out]",
        ),
    ],
)
def test_the_legacy_lane_not_built_names_why(env, removed, reason):
    route = decide(env=env, removed=removed).route
    assert (route.legacy_lane, route.legacy_lane_reason) == (False, reason)


def test_sm72_is_inside_the_family_but_not_qpn_m1():
    assert decide(capability=72).decision.kernel == TURBOMIND
    with pytest.raises(SelectionError, match="CUDA arch 7.0"):
        decide(env=moe_env(qpn_m1="1"), capability=72)


def test_missing_method_ops_fall_back_to_moe_wna16():
    d = decide(removed=("awq_sm70_prepare",)).decision
    assert d.kernel == MOE_WNA16 and d.selection.fallback
    assert d.selection.verdicts[0].code == "missing_native_ops"


def test_a_checkpoint_that_cannot_split_is_an_error():
    with pytest.raises(SelectionError) as info:
        decide(QWEN3_30B, tp=4)
    assert info.value.code == "no_moe_method"
    assert "local W2 K 192 is not a multiple of group 128" in info.value.message


@pytest.mark.parametrize(
    ("changes", "code"),
    [({"group": 256, "intermediate": 1024}, "group_size"), ({"bits": 8}, "weight_bits")],
)
def test_layers_turbomind_cannot_load_go_to_moe_wna16(changes, code):
    d = decide({**QWEN38, **changes}).decision
    assert d.kernel == MOE_WNA16 and d.selection.verdicts[0].code == code


# A layer that splits into whole groups of 32, 64 and 128 at TP 4 (local W2 K 256).
SPLITS = {"experts": 64, "top_k": 8, "hidden": 2048, "intermediate": 1024, "group": 128}


@pytest.mark.parametrize(
    ("changes", "turbomind", "wna16", "chosen"),
    [
        # docs/contracts/core.md §2.3/§3.1: TurboMind AWQ is asymmetric uint4 with zero points,
        # group in {32, 64, 128}; anything else goes to MoeWNA16 with the reason named.
        ({"group": 32}, (True, None, None, None), (True, None, None, True), TURBOMIND),
        ({"group": 64}, (True, None, None, None), (True, None, None, True), TURBOMIND),
        ({"group": 128}, (True, None, None, None), (True, None, None, True), TURBOMIND),
        (
            {"bits": 8},
            (False, "weight_bits", "only 4-bit AWQ, got 8-bit", "capability"),
            (True, None, None, False),
            MOE_WNA16,
        ),
        (
            {"zero_points": False},
            (False, "zero_points", "requires zero points", "capability"),
            (True, None, None, False),
            MOE_WNA16,
        ),
        (
            {"bias": True},
            (False, "bias", "MoE bias is not supported", "capability"),
            (True, None, None, False),
            MOE_WNA16,
        ),
        (
            {"group": 16},
            (False, "group_size", "checkpoint group 16 not in 32, 64, 128", "capability"),
            (True, None, None, False),
            MOE_WNA16,
        ),
        (
            {"prepared_group": 256},
            (False, "group_size", "prepared group 256 not in 32, 64, 128", "capability"),
            (True, None, None, False),
            MOE_WNA16,
        ),
    ],
)
def test_method_selection_names_each_layer_refusal(changes, turbomind, wna16, chosen):
    selection = decide({**SPLITS, **changes}).decision.selection
    (tm, wn) = selection.verdicts
    assert (tm.name, wn.name) == (TURBOMIND, MOE_WNA16)
    assert (tm.ok, tm.code, tm.message, tm.stage) == turbomind
    # MoeWNA16's verdict: (ok, code, message, not needed after an earlier choice).
    assert (wn.ok, wn.code, wn.message, wn.not_needed) == wna16
    assert selection.chosen == chosen


@pytest.mark.parametrize(
    ("kwargs", "stage", "code", "message"),
    [
        # docs/contracts/core.md §3.1: the family exists only when 70 <= capability < 75.
        (
            {"capability": 75},
            "capability",
            "capability",
            "requires 70 <= capability < 75 (Volta), got capability 75",
        ),
        (
            {"removed": ("awq_sm70_prepare",)},
            "ops",
            "missing_native_ops",
            "missing native AWQ MoE operators: [awq_sm70_prepare]",
        ),
        ({"spec": {**QWEN38, "bits": 8}}, "capability", "weight_bits", "only 4-bit AWQ, got 8-bit"),
    ],
)
def test_a_turbomind_refusal_by_hardware_build_or_layer_is_a_recorded_fallback(
    kwargs, stage, code, message
):
    """The policy asked for TurboMind (sm70_turbomind.awq_moe) and got MoeWNA16: the
    decision records that as a fallback of the family switch with TurboMind's reason."""
    d = decide(**kwargs).decision
    first = d.selection.verdicts[0]
    assert (first.name, first.ok, first.stage, first.code, first.message) == (
        TURBOMIND,
        False,
        stage,
        code,
        message,
    )
    assert d.kernel == MOE_WNA16 and d.selection.fallback
    assert [f.to_json() for f in d.fallbacks] == [
        {
            "field": "sm70_turbomind.awq_moe",
            "requested": True,
            "effective": False,
            "reason": message,
        }
    ]


def test_a_policy_refusal_is_no_fallback():
    d = decide(env=moe_env(disable="1")).decision
    assert (d.kernel, d.selection.verdicts[0].stage, d.fallbacks) == (MOE_WNA16, "policy", ())
    assert not d.selection.fallback


@pytest.mark.parametrize("bits", [3, 2])
def test_bits_neither_method_serves_is_a_load_error(bits):
    with pytest.raises(SelectionError) as info:
        decide({**SPLITS, "bits": bits})
    assert info.value.code == "no_moe_method"
    assert info.value.message == (
        "no AWQ MoE method can load model.layers.0.mlp.experts: "
        f"TurboMindAwqMoE: only 4-bit AWQ, got {bits}-bit; "
        f"MoeWNA16: MoeWNA16 serves 4- or 8-bit weights, got {bits}"
    )
    # Both refusals are the layer's (capability stage), so the error row shows no fallback.
    assert [(v.name, v.code, v.stage) for v in info.value.verdicts] == [
        (TURBOMIND, "weight_bits", "capability"),
        (MOE_WNA16, "weight_bits", "capability"),
    ]


# --- preparation ----------------------------------------------------------------------------


def load(env=None, spec=QWEN38, tp=4, removed=()):
    ns_ = recorder(*removed)
    prepared = load_awq_moe(spec, resolve(env, tp=tp), Hardware(70), EngineConfig(tp=tp), ns_)
    return prepared, ns_


def test_every_expert_of_both_banks_is_prepared_once_per_bank():
    prepared, ns_ = load()
    assert ns_.calls == [
        {
            "op": "awq_sm70_prepare_compact",
            "plan": {"group": 32, "gated": True, "k": 2560, "n": 320, "experts": 512},
        },
        {
            "op": "awq_sm70_prepare_compact",
            "plan": {"group": 32, "gated": False, "k": 160, "n": 2560, "experts": 512},
        },
    ]
    shapes = {name: (tuple(t.shape), str(t.dtype)) for name, t in prepared.resident.items()}
    assert shapes == {
        "w13_weights": ((512, 2560, 40), "torch.int32"),
        "w13_metadata": ((512, 80, 320, 3), "torch.uint8"),
        "w2_weights": ((512, 160, 320), "torch.int32"),
        "w2_metadata": ((512, 5, 2560, 3), "torch.uint8"),
    }


@pytest.mark.parametrize(
    ("env", "metadata"), [({}, 58_982_400), (moe_env(compact_metadata="0"), 78_643_200)]
)
def test_qwen38_tp4_bytes(env, metadata):
    prepared, _ = load(env)
    size = bank_bytes(prepared)
    assert size["weights"] == 314_572_800
    assert size["metadata"] == metadata
    assert size["total"] == 314_572_800 + metadata
    assert size["w13"]["weights"] + size["w2"]["weights"] == size["weights"]
    assert size["w13"]["metadata"] + size["w2"]["metadata"] == size["metadata"]
    assert size["w13"]["total"] + size["w2"]["total"] == size["total"]
    layer = prepared.state["layer"]
    assert {k: size[k] for k in ("w13", "w2")} == layer.bank_bytes(compact=not env)


def test_w13_is_interleaved_only_with_the_legacy_lane():
    _, ns_ = load(moe_env(legacy_compact="0"))
    assert [c["plan"]["gated"] for c in ns_.calls] == [False, False]
    assert [c["op"] for c in ns_.calls] == ["awq_sm70_prepare_compact"] * 2


def test_moe_wna16_prepares_nothing_and_selection_only_prepares_nothing():
    prepared, ns_ = load(moe_env(disable="1"))
    assert prepared.apply is None and prepared.resident == {} and ns_.calls == []
    ns_ = recorder()
    decision = select_awq_moe(QWEN38, resolve(), Hardware(70), EngineConfig(tp=4), ns_).decision
    assert decision.kernel == TURBOMIND and ns_.calls == []


def test_a_layer_loaded_without_banks_carries_its_rank_layer():
    """MoeWNA16 and selection-only loads prepare nothing, but the engine (and the startup
    report's replay) still gets the rank's layer: 512 experts, W2 K 160 at TP 4 (3.2)."""
    rank = AwqMoeLayer.for_rank(QWEN38, 4)
    assert (rank.num_experts, rank.w2_k) == (512, 160)
    wna16, _ = load(moe_env(disable="1"))
    assert wna16.state == {"layer": rank}
    assert wna16.decision.capability == 70
    selected = select_awq_moe(QWEN38, resolve(), Hardware(70), EngineConfig(tp=4), recorder())
    assert selected.state == {"layer": rank}


def meta_inputs(m: int, top_k: int = 10):
    return (
        torch.empty((m, 2560), dtype=torch.float16, device="meta"),
        torch.empty((m, top_k), dtype=torch.int32, device="meta"),
        torch.empty((m, top_k), dtype=torch.float32, device="meta"),
    )


def dispatched(prepared, ns_, m: int) -> list[dict]:
    mark = ns_.mark()
    out = prepared.apply(*meta_inputs(m))
    assert tuple(out.shape) == (m, 2560) and out.dtype == torch.float16
    return ns_.since(mark)


def test_apply_dispatches_what_the_selector_chose_with_plans():
    prepared, ns_ = load()
    assert dispatched(prepared, ns_, 0) == []
    assert dispatched(prepared, ns_, 1) == [
        {
            "op": "awq_moe_single_token_sm70_out",
            "plan": {"m": 1, "routed_slots": 10, "group": 32, "metadata": "3-byte"},
        }
    ]
    calls = dispatched(prepared, ns_, 128)
    assert [c["op"] for c in calls] == [
        "moe_permute_metadata_with_scratch",
        "awq_moe_indexed_dense_w13_sm70_out",
        "awq_moe_gemm_sm70_per_expert_dispatch_out",
        "moe_unpermute",
    ]
    assert calls[1]["plan"] == {
        "m": 128,
        "routed_slots": 1280,
        "group": 32,
        "k": 2560,
        "n": 320,
        "metadata": "3-byte",
    }
    assert calls[2]["plan"] == {
        "m": 128,
        "routed_slots": 1280,
        "group": 32,
        "k": 160,
        "n": 2560,
        "metadata": "3-byte",
    }
    for m in (2, 8, 9, 127, 4096):
        choice = prepared.state["route"](*meta_inputs(m))
        ops = [c["op"] for c in dispatched(prepared, ns_, m)]
        assert ops == [stage.op for stage in choice.plan.stages()]


def test_qpn_m1_dispatch_and_chunked_w2_plans():
    prepared, ns_ = load(moe_env(qpn_m1="1", compact_metadata="0", w2_chunk_tokens="6144"))
    assert dispatched(prepared, ns_, 1) == [
        {
            "op": "awq_moe_qpn_m1_sm70_out",
            "plan": {"m": 1, "routed_slots": 10, "metadata": "4-byte"},
        }
    ]
    calls = dispatched(prepared, ns_, 8192)
    assert calls[-1] == {
        "op": "awq_moe_chunked_w2_sm70_out",
        "plan": {
            "m": 8192,
            "routed_slots": 81920,
            "group": 32,
            "k": 160,
            "n": 2560,
            "chunk_tokens": 6144,
            "metadata": "4-byte",
        },
    }


@pytest.mark.parametrize("given", [(), ("ids",), ("weights",)])
def test_apply_needs_the_router_outputs(given):
    # Either router output missing is the caller's error, named before any route is chosen.
    prepared, ns_ = load()
    x, ids, weights = meta_inputs(1)
    mark = ns_.mark()
    with pytest.raises(TypeError) as info:
        prepared.apply(
            x,
            topk_ids=ids if "ids" in given else None,
            topk_weights=weights if "weights" in given else None,
        )
    assert str(info.value) == "AWQ MoE apply needs the router's topk_ids and topk_weights"
    assert ns_.since(mark) == [] and prepared.state["last_route"] is None


def test_the_loaded_moe_layer_keeps_its_banks_and_the_last_route_for_the_engine():
    """What readers of the loaded layer take from its state: the resident banks (the
    engine's start-up checks, examples/engine_startup.py) and the last call's route choice
    (the startup report and the snapshot), None before any call."""
    prepared, _ = load()
    banks = prepared.state["banks"]
    assert banks.w13 is prepared.resident["w13_weights"]
    assert banks.s2 is prepared.resident["w2_metadata"]
    assert prepared.state["last_route"] is None
    prepared.apply(*meta_inputs(1))
    choice = prepared.state["last_route"]
    # QPN M1 is opt-in (docs/contracts/core.md §3.5)
    assert (choice.m, choice.plan.lane) == (1, "legacy")


def test_plan_keys_are_declared_from_the_contract_set():
    allowed = {"m", "routed_slots", "group", "k", "n", "chunk_tokens", "metadata"}
    for spec in MOE_OPS.values():
        keys = [k.key for k in spec.plan]
        assert keys[0] == "m" and not spec.plan[0].optional
        assert set(keys) <= allowed
        assert all(k.optional for k in spec.plan[1:])
    assert set(STAGES) <= set(CATALOGUE.kernels)


def test_real_tensors_are_prepared_into_real_banks():
    """With storage, every expert's prepared output is copied into the bank (reference ops)."""
    import native.reference  # noqa: F401  (registers routectl::awq_sm70_prepare)

    prepare = torch.ops.routectl.awq_sm70_prepare
    spec = {"experts": 3, "top_k": 2, "hidden": 64, "intermediate": 64, "group": 32}
    layer = AwqMoeLayer.for_rank(spec, 1)
    gen = torch.Generator().manual_seed(0)

    def bank(name: str) -> ExpertBank:
        qweight, qzeros, scales = layer.checkpoint_shapes(name)
        e = layer.num_experts
        return ExpertBank.from_stacked(
            torch.randint(-(2**31), 2**31 - 1, (e, *qweight), dtype=torch.int32, generator=gen),
            torch.randint(-(2**31), 2**31 - 1, (e, *qzeros), dtype=torch.int32, generator=gen),
            (torch.rand((e, *scales), generator=gen) * 0.01).half(),
        )

    checkpoint = MoeCheckpoint(bank("w13"), bank("w2"))
    namespace = InMemoryNamespace(ALL_OPS, impls={"awq_sm70_prepare": prepare})
    prepared = load_awq_moe(
        spec, resolve(tp=1), Hardware(70), EngineConfig(tp=1), namespace, tensors=checkpoint
    )
    assert prepared.decision.layout == "4-byte"
    for name, interleave in (("w13", True), ("w2", False)):
        source = checkpoint.bank(name)
        for e in range(3):
            words, meta = prepare(
                source.qweight[e], source.scales[e], source.qzeros[e], 32, interleave
            )
            assert torch.equal(prepared.resident[f"{name}_weights"][e], words)
            assert torch.equal(prepared.resident[f"{name}_metadata"][e], meta)


SMALL = {"experts": 3, "top_k": 2, "hidden": 64, "intermediate": 64, "group": 32}


def small_checkpoint(experts: int) -> MoeCheckpoint:
    """Distinct per-expert tensors of the SMALL layer at TP 1 (W13 K 64 / N 128, W2 K 64 /
    N 64), `experts` of them in each bank."""
    layer = AwqMoeLayer.for_rank(SMALL, 1)
    gen = torch.Generator().manual_seed(2)

    def bank(name: str) -> ExpertBank:
        qweight, qzeros, scales = layer.checkpoint_shapes(name)
        return ExpertBank.from_stacked(
            torch.randint(0, 2**31 - 1, (experts, *qweight), dtype=torch.int32, generator=gen),
            torch.randint(0, 2**31 - 1, (experts, *qzeros), dtype=torch.int32, generator=gen),
            (torch.rand((experts, *scales), generator=gen) * 0.01).half(),
        )

    return MoeCheckpoint(bank("w13"), bank("w2"))


def load_small(checkpoint: MoeCheckpoint, prepare: object) -> object:
    namespace = InMemoryNamespace(ALL_OPS, impls={"awq_sm70_prepare": prepare})
    return load_awq_moe(
        SMALL, resolve(tp=1), Hardware(70), EngineConfig(tp=1), namespace, tensors=checkpoint
    )


def test_a_checkpoint_with_another_expert_count_is_refused():
    import native.reference  # noqa: F401  (registers routectl::awq_sm70_prepare)

    with pytest.raises(ValueError) as info:
        load_small(small_checkpoint(2), torch.ops.routectl.awq_sm70_prepare)
    assert str(info.value) == "w13 checkpoint has 2 experts, the layer 3"


def test_a_bank_whose_tensor_lists_disagree_is_refused():
    """3 qweights but 2 scales: refused before any bank slot is left unprepared (stacked
    banks are allocated uninitialised, so a silently shorter loop would serve garbage)."""
    import native.reference  # noqa: F401  (registers routectl::awq_sm70_prepare)

    full = small_checkpoint(3)
    short = ExpertBank(full.w13.qweight, full.w13.qzeros, full.w13.scales[:2])
    with pytest.raises(ValueError, match="zip\\(\\) argument 2 is shorter than argument 1"):
        load_small(MoeCheckpoint(short, full.w2), torch.ops.routectl.awq_sm70_prepare)


@pytest.mark.parametrize(
    ("trim", "message"),
    [
        # Expert 1's prepared words one column short: (K, N/8) = (64, 16) for W13 of K 64,
        # N 128; metadata (K/g, N) = (2, 128) (docs/contracts/core.md §3.2 shapes at group 32).
        ("words", "(64, 15)/(2, 128) for expert 1 of w13, expert 0 gave (64, 16)/(2, 128)"),
        ("meta", "(64, 16)/(2, 127) for expert 1 of w13, expert 0 gave (64, 16)/(2, 128)"),
    ],
)
def test_a_prepare_op_whose_shapes_change_between_experts_is_refused(trim, message):
    """Every expert must prepare to expert 0's shapes (they are stacked into one bank)."""
    import native.reference  # noqa: F401  (registers routectl::awq_sm70_prepare)

    prepare = torch.ops.routectl.awq_sm70_prepare
    calls: list[int] = []

    def uneven(**kwargs: object) -> object:
        words, meta = prepare(**kwargs)
        calls.append(1)
        if len(calls) == 2:  # the second expert of W13
            return (words[:, :-1], meta) if trim == "words" else (words, meta[:, :-1])
        return words, meta

    with pytest.raises(ValueError) as info:
        load_small(small_checkpoint(3), uneven)
    assert str(info.value) == f"awq_sm70_prepare returned {message}"


def test_a_shared_checkpoint_runs_the_prepare_op_once_per_expert():
    """Experts holding one set of tensors: the executing namespace still prepares each
    expert (E runs) and every bank slot holds that expert's prepared tensors."""
    import native.reference  # noqa: F401  (registers routectl::awq_sm70_prepare)

    prepare = torch.ops.routectl.awq_sm70_prepare
    spec = {"experts": 3, "top_k": 2, "hidden": 64, "intermediate": 64, "group": 32}
    layer = AwqMoeLayer.for_rank(spec, 1)
    gen = torch.Generator().manual_seed(1)
    runs: list[int] = []

    def counted(**kwargs: object) -> object:
        runs.append(1)
        return prepare(**kwargs)

    def bank(name: str) -> ExpertBank:
        qweight, qzeros, scales = layer.checkpoint_shapes(name)
        one = (
            torch.randint(-(2**31), 2**31 - 1, qweight, dtype=torch.int32, generator=gen),
            torch.randint(-(2**31), 2**31 - 1, qzeros, dtype=torch.int32, generator=gen),
            (torch.rand(scales, generator=gen) * 0.01).half(),
        )
        return ExpertBank.repeated(*one, 3)

    checkpoint = MoeCheckpoint(bank("w13"), bank("w2"))
    assert checkpoint.w13.shared() is not None
    namespace = InMemoryNamespace(ALL_OPS, impls={"awq_sm70_prepare": counted})
    prepared = load_awq_moe(
        spec, resolve(tp=1), Hardware(70), EngineConfig(tp=1), namespace, tensors=checkpoint
    )
    assert len(runs) == 6  # 3 experts x 2 banks
    for name, interleave in (("w13", True), ("w2", False)):
        source = checkpoint.bank(name)
        words, meta = prepare(source.qweight[0], source.scales[0], source.qzeros[0], 32, interleave)
        for e in range(3):
            assert torch.equal(prepared.resident[f"{name}_weights"][e], words)
            assert torch.equal(prepared.resident[f"{name}_metadata"][e], meta)


def test_distinct_meta_tensors_per_expert_record_what_a_shared_checkpoint_records():
    """The per-expert loop and the shared-bank path agree call for call (experts: E)."""
    from native.moe_layer import BANKS, meta_checkpoint

    layer = AwqMoeLayer.for_rank(QWEN38, 4)
    banks = []
    for name in BANKS:
        shapes = layer.checkpoint_shapes(name)
        dtypes = (torch.int32, torch.int32, torch.float16)
        fields = [
            tuple(torch.empty(shape, dtype=dtype, device="meta") for _ in range(layer.num_experts))
            for shape, dtype in zip(shapes, dtypes, strict=True)
        ]
        banks.append(ExpertBank(*fields))
    distinct = MoeCheckpoint(*banks)
    assert distinct.w13.shared() is None and meta_checkpoint(layer).w13.shared() is not None
    recorded = []
    for tensors in (distinct, None):
        namespace = recorder()
        load_awq_moe(
            QWEN38, resolve(), Hardware(70), EngineConfig(tp=4), namespace, tensors=tensors
        )
        recorded.append(namespace.calls)
    assert recorded[0] == recorded[1]
    assert [c["plan"]["experts"] for c in recorded[0]] == [512, 512]


def test_stage_classes_and_the_catalogue_agree():
    from native.moe_stages import MOE_STAGE_CLASSES, QpnM1

    assert {cls.name for cls in MOE_STAGE_CLASSES} == set(STAGES) - {TURBOMIND}
    for cls in MOE_STAGE_CLASSES:
        assert cls.required_ops == STAGES[cls.name]
        assert not cls.op or cls.op in cls.required_ops
    ok, reason = QpnM1.can_run(70, ns("awq_moe_qpn_m1_sm70_out"))
    assert not ok and reason is not None
    assert reason.message == "missing native QPN M1 operators: [awq_moe_qpn_m1_sm70_out]"
    assert QpnM1.can_run(75, ns())[1].code == "capability"  # type: ignore[union-attr]


@pytest.mark.parametrize("interleaved", [True, False])
def test_prepared_banks_keep_the_w13_layout_and_the_checkpoints_device(interleaved):
    """The SiLU step splits W13's output by the layout the banks were prepared in
    (interleaved gate/up when the legacy lane is built, docs/contracts/core.md §3.2): the banks must
    say which.
    Banks of a meta checkpoint stay on meta: (E, ...) stacks of every expert, no storage."""
    from native.moe_layer import meta_checkpoint
    from policies.awq_moe import prepare_banks

    layer = AwqMoeLayer.for_rank(SMALL, 1)
    namespace = recorder()
    banks = prepare_banks(namespace, layer, meta_checkpoint(layer), False, interleaved)
    assert banks.w13_interleaved is interleaved
    # W13 (K 64, N 128) and W2 (K 64, N 64) at group 32, 3 experts (docs/contracts/core.md §3.2
    # shapes)
    for tensor, shape in (
        (banks.w13, (3, 64, 16)),
        (banks.s13, (3, 2, 128)),
        (banks.w2, (3, 64, 8)),
        (banks.s2, (3, 2, 64)),
    ):
        assert tensor.device.type == "meta"
        assert tuple(tensor.shape) == shape
    assert [c["op"] for c in namespace.calls] == ["awq_sm70_prepare", "awq_sm70_prepare"]
