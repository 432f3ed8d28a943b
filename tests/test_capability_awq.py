"""AWQ dense capability classes (docs/contracts/core.md §2.3), exact-dense and fused-SiLU layout
decisions, TurboMind preparation and dispatch."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from native.catalogue import CATALOGUE
from native.kernels import awq_dense as awq
from native.layers import AwqLayer
from routectl.errors import ActivationError
from routectl.namespaces.native_ns import InMemoryNamespace
from routectl.replay.harness import RecordingNamespace

TM, TRITON = awq.TurboMindAwqLinearKernel, awq.TritonAwqLinearKernel
FULL = InMemoryNamespace(CATALOGUE.ops)
QKV = "model.layers.0.self_attn.qkv_proj"
DOWN = "model.layers.0.mlp.down_proj"
GATE_UP = "model.layers.0.mlp.gate_up_proj"


def layer(k: int = 2560, n: int = 3584, group: int = 32, prefix: str = QKV, **changes) -> AwqLayer:
    return dataclasses.replace(AwqLayer.of(prefix, k, n, group), **changes)


def code(kernel, spec, ns=FULL) -> str | None:
    ok, reason = kernel.can_implement(spec, ns)
    return None if ok else reason.code


@pytest.mark.parametrize(
    "capability, ok", [(61, False), (70, True), (72, True), (75, True), (80, True)]
)
def test_both_kernels_need_capability_70_or_newer(capability, ok):
    for kernel in (TM, TRITON):
        result, reason = kernel.is_supported(capability)
        assert result is ok
        if not ok:
            assert reason.code == "requires_sm70_or_newer" and "61" in reason.message


@pytest.mark.parametrize("group", awq.AWQ_GROUPS)
def test_supported_groups_are_capable_whatever_the_policy(group):
    # Capability takes no policy input: the same answer with the route disabled or not.
    assert TM.can_implement(layer(group=group), FULL) == (True, None)
    assert TRITON.can_implement(layer(group=group), InMemoryNamespace(())) == (True, None)


@pytest.mark.parametrize("group", [16, 256, 0])
def test_unsupported_groups(group):
    spec = layer(group=32, group_size=group)
    for kernel in (TM, TRITON):
        ok, reason = kernel.can_implement(spec, FULL)
        assert (ok, reason.code) == (False, "unsupported_group_size")
        assert reason.message == f"requires group_size 32/64/128 (group_size={group})"


@pytest.mark.parametrize(
    "changes",
    [
        dict(qweight_dtype="int8"),
        dict(qzeros_dtype="uint8"),
        dict(scales_dtype="float32"),
        dict(qweight_shape=(2560, 448, 1)),
        dict(input_size=2048),
        dict(output_size=3600),
        dict(qzeros_shape=(80, 400)),
        dict(qzeros_shape=(81, 448)),  # qzeros and scales disagree on K/g
    ],
)
def test_awq_gemm_packing_is_required(changes):
    for kernel in (TM, TRITON):
        ok, reason = kernel.can_implement(layer(**changes), FULL)
        assert (ok, reason.code) == (False, "not_awq_gemm_packing")
        assert reason.message.startswith("requires AWQ GEMM checkpoint packing")
    assert code(TM, object()) == "not_awq_gemm_packing"


def test_turbomind_only_rules():
    assert code(TM, layer(weight_type="int4")) == "not_asymmetric_uint4"
    assert code(TM, layer(has_zero_points=False)) == "not_asymmetric_uint4"
    assert code(TM, layer(act_dtype="bfloat16")) == "activation_not_fp16"
    assert (
        "requires float16 activations"
        in TM.can_implement(layer(act_dtype="bfloat16"), FULL)[1].message
    )
    # Triton has its own numerics: none of these are its rules.
    for changes in (dict(weight_type="int4"), dict(act_dtype="bfloat16")):
        assert code(TRITON, layer(**changes)) is None


@pytest.mark.parametrize(
    "k, n, group, expected",
    [
        (2560, 3584, 64, None),
        (2592, 3584, 64, "k_not_multiple_of_group"),
        (2560 + 32, 3584, 32, None),
        (2560, 3592, 32, None),
        (2560, 3588, 32, "n_not_multiple_of_8"),
        (0, 3584, 32, "k_not_positive"),
        (2560, 0, 32, "n_not_positive"),
        # K = 1 and N = 1 are positive (docs/contracts/core.md §2.3 "K > 0, N > 0"): the next rule
        # fails.
        (1, 3584, 32, "k_not_multiple_of_group"),
        (2560, 1, 32, "n_not_multiple_of_8"),
    ],
)
def test_k_n_group_boundaries(k, n, group, expected):
    assert code(TM, layer(k, n, group)) == expected
    assert code(TRITON, layer(k, n, group)) == expected


def test_k_n_reasons_carry_values_and_packing_must_hold():
    msg = TM.can_implement(layer(2592, 3584, 64), FULL)[1].message
    assert msg == (
        "requires positive K/N, complete groups and uint4 packing: "
        "K % group != 0 (K=2592, group=64)"
    )
    assert code(TM, layer(scales_shape=(81, 3584), qzeros_shape=(81, 448))) == "packing_mismatch"


CORE = "requires positive K/N, complete groups and uint4 packing"


@pytest.mark.parametrize(
    "spec, message",
    [
        (object(), "requires AWQ GEMM checkpoint packing"),
        (
            layer(qweight_dtype="int8"),
            "requires AWQ GEMM checkpoint packing: qweight int32 (K, N/8), qzeros int32 "
            "(K/g, N/8), scales float16 (K/g, N) (got qweight int8 (2560, 448), qzeros int32 "
            "(80, 448), scales float16 (80, 3584); K=2560, N=3584)",
        ),
        (layer(0, 3584, 32), f"{CORE}: K <= 0 (K=0)"),
        (layer(2560, 0, 32), f"{CORE}: N <= 0 (N=0)"),
        (layer(2560, 3588, 32), f"{CORE}: N % 8 != 0 (N=3588)"),
        (
            layer(scales_shape=(81, 3584), qzeros_shape=(81, 448)),
            f"{CORE}: qweight (2560, 448) and scales (81, 3584) do not pack K=2560, N=3584 "
            "in groups of 32",
        ),
        (layer(has_g_idx=True), "does not support activation-order group indices"),
        (
            layer(weight_type="int4"),
            "requires asymmetric uint4 AWQ weights (weight type int4, zero points True)",
        ),
    ],
)
def test_turbomind_reasons_carry_the_offending_values(spec, message):
    # docs/contracts/core.md §2: reasons carry a stable code and a message with the offending
    # values.
    ok, reason = TM.can_implement(spec, FULL)
    assert (ok, reason.message) == (False, message)


def test_capability_reason_names_the_capability():
    ok, reason = TM.is_supported(61)
    assert (ok, reason.message) == (False, "requires compute capability >= 70, got capability 61")


def test_g_idx_and_missing_prepare_op():
    assert code(TM, layer(has_g_idx=True)) == "g_idx_unsupported"
    assert code(TRITON, layer(has_g_idx=True)) == "g_idx_unsupported"
    ok, reason = TM.can_implement(layer(), FULL.without(awq.PREPARE_OP))
    assert (ok, reason.code) == (False, "missing_native_ops")
    assert reason.message == f"missing native AWQ operators: [{awq.PREPARE_OP}]"
    assert code(TRITON, layer(), InMemoryNamespace(())) is None


def test_checks_run_in_contract_order():
    everything = layer(2592, 3588, 16, weight_type="int4", act_dtype="bfloat16", has_g_idx=True)
    assert code(TM, everything, FULL.without(awq.PREPARE_OP)) == "not_asymmetric_uint4"
    assert code(TM, dataclasses.replace(everything, weight_type="uint4")) == "activation_not_fp16"
    fp16 = dataclasses.replace(everything, weight_type="uint4", act_dtype="float16")
    assert code(TM, fp16) == "unsupported_group_size"
    assert code(TM, dataclasses.replace(fp16, group_size=64)) == "k_not_multiple_of_group"
    assert code(TM, layer(has_g_idx=True), FULL.without(awq.PREPARE_OP)) == "g_idx_unsupported"


# --- layout decisions -------------------------------------------------------------------


def plan(spec: AwqLayer, ns=FULL, workspace: int | None = None, **options) -> awq.AwqLayout:
    return awq.plan_awq(spec, awq.AwqOptions(**options), ns, workspace)


def test_exact_dense_for_a_qualified_group_128_layer():
    result = plan(layer(2560, 2560, 128, DOWN))
    assert result.exact_dense and result.exact_dense_reason is None
    assert result.exact_dense_refused is False
    assert result.workspace_elements == awq.EXACT_DENSE_MIN_WORKSPACE == 44_564_480


@pytest.mark.parametrize(
    "spec, options, code_, message",
    [
        (
            layer(2560, 2560, 128, DOWN),
            dict(prefill_exact_dense=False),
            "exact_dense_disabled",
            "exact-dense prefill disabled by configuration",
        ),
        (
            layer(2560, 2560, 64, DOWN),
            {},
            "exact_dense_group",
            "exact-dense prefill needs group 128 (group=64)",
        ),
        (
            layer(2560, 2560, 128, DOWN),
            dict(exact_dense_role=False),
            "exact_dense_role",
            "role down_proj is not qualified for exact-dense prefill",
        ),
        (
            layer(2560, 2560, 128, DOWN, qweight_shape=(2560, 320, 1)),
            {},
            "exact_dense_rank",
            "exact-dense prefill needs a rank-two qweight",
        ),
        (
            layer(2560 + 64, 2560, 128, DOWN),
            {},
            "exact_dense_k",
            "exact-dense prefill needs K % 128 == 0 (K=2624)",
        ),
        (
            layer(2560, 2560 + 8, 128, DOWN),
            {},
            "exact_dense_n",
            "exact-dense prefill needs N % 128 == 0 (N=2568)",
        ),
        (
            layer(2560, 2560, 128, GATE_UP),
            dict(fused_silu=True),
            "exact_dense_gated",
            "weights prepared gated for the fused SiLU epilogue",
        ),
    ],
)
def test_each_exact_dense_condition(spec, options, code_, message):
    result = plan(spec, **options)
    assert not result.exact_dense
    assert (result.exact_dense_reason.code, result.exact_dense_reason.message) == (code_, message)
    assert not result.exact_dense_refused


def test_missing_dequantize_op_and_workspace_are_refusals():
    spec = layer(5120, 8704, 128, GATE_UP)
    missing = plan(spec, FULL.without(awq.AWQ_DEQUANTIZE_OP))
    assert missing.exact_dense_refused and missing.exact_dense_reason.code == "missing_native_ops"
    assert missing.exact_dense_reason.message == (
        "missing native exact-dense operators: [awq_sm70_dequantize_out]"
    )
    assert plan(spec, workspace=44_564_480).exact_dense
    short = plan(spec, workspace=44_564_479)
    assert short.exact_dense_refused and not short.exact_dense
    assert short.exact_dense_reason.code == "insufficient_workspace"
    assert short.exact_dense_reason.message == (
        "insufficient exact-dense workspace (need 44564480 FP16 elements, have 44564479)"
    )
    big = layer(8192, 8192, 128, DOWN)
    assert awq.exact_dense_workspace_elements(big) == 8192 * 8192
    assert not plan(big, workspace=8192 * 8192 - 1).exact_dense


@pytest.mark.parametrize(
    "tp, fused, role, gated, call",
    [
        (2, True, GATE_UP, True, True),
        (4, True, GATE_UP, True, False),
        (2, False, GATE_UP, False, False),
        (2, True, DOWN, False, False),
    ],
)
def test_fused_silu_prepares_gated_and_calls_gated_only_at_tp2(tp, fused, role, gated, call):
    result = plan(layer(2560, 2560, 128, role), fused_silu=fused, tp=tp)
    assert (result.gated, result.fused_gated_call) == (gated, call)


# --- preparation and dispatch -----------------------------------------------------------

TOKENS = (1, 4, 8, 4096, 8192)


def fp16(m: int, k: int = 2560) -> torch.Tensor:
    return torch.empty((m, k), dtype=torch.float16, device="meta")


def prepared(spec: AwqLayer, ns: RecordingNamespace, **options):
    layout = awq.plan_awq(spec, awq.AwqOptions(**options), ns)
    return awq.prepare_awq_turbomind(spec, spec.checkpoint_tensors(), ns, layout)


def test_plain_route_prepares_once_and_gemms_every_m():
    ns = RecordingNamespace(CATALOGUE)
    result = prepared(layer(), ns)
    assert ns.calls == [
        {
            "op": awq.PREPARE_OP,
            "plan": {"group": 32, "gated": False, "k": 2560, "n": 3584, "experts": 1},
        }
    ]
    mark = ns.mark()
    for m in TOKENS:
        assert tuple(result.apply(fp16(m)).shape) == (m, 3584)
    assert ns.since(mark) == [
        {
            "op": awq.AWQ_GEMM_OP,
            "plan": {"m": m, "group": 32, "k_ld": 2560, "q_ld": 2560, "gated": False},
        }
        for m in TOKENS
    ]
    assert result.resident["awq_words"].shape == (2560, 448)
    assert result.resident["awq_metadata"].shape == (80, 3584)
    assert result.apply_gated is None and result.scratch == {}


def test_exact_dense_runs_at_exactly_4096_tokens():
    ns = RecordingNamespace(CATALOGUE)
    result = prepared(layer(2560, 2560, 128, DOWN), ns)
    mark = ns.mark()
    for m in (4095, 4096, 4097):
        assert tuple(result.apply(fp16(m)).shape) == (m, 2560)
    ops = [c["op"] for c in ns.since(mark)]
    assert ops == [awq.AWQ_GEMM_OP, awq.AWQ_DEQUANTIZE_OP, awq.TORCH_MM_OP, awq.AWQ_GEMM_OP]
    assert ns.since(mark)[1:3] == [
        {"op": awq.AWQ_DEQUANTIZE_OP, "plan": {"group": 128}},
        {"op": awq.TORCH_MM_OP, "plan": {"m": 4096}},
    ]
    assert result.scratch == {"exact_dense_workspace": 44_564_480 * 2}


def test_zero_tokens_and_non_fp16_activations():
    ns = RecordingNamespace(CATALOGUE)
    result = prepared(layer(2560, 2560, 128, GATE_UP), ns, fused_silu=True, tp=2)
    mark = ns.mark()
    assert tuple(result.apply(fp16(0)).shape) == (0, 2560)
    assert tuple(result.apply_gated(fp16(0)).shape) == (0, 1280)
    assert ns.since(mark) == []
    fp32 = torch.empty((4096, 2560), dtype=torch.float32, device="meta")
    message = "^SM70 TurboMind AWQ requires float16 activations, got float32$"
    with pytest.raises(ActivationError, match=message):
        result.apply(fp32)
    with pytest.raises(ActivationError, match=message):
        result.apply_gated(fp32)
    assert ns.since(mark) == []


@pytest.mark.parametrize("tp, m, gated_call", [(2, 1, True), (2, 2, False), (4, 1, False)])
def test_gated_call_only_at_tp2_and_one_token(tp, m, gated_call):
    ns = RecordingNamespace(CATALOGUE)
    result = prepared(layer(2560, 2560, 128, GATE_UP), ns, fused_silu=True, tp=tp)
    assert ns.calls[0]["plan"]["gated"] is True
    mark = ns.mark()
    assert tuple(result.apply_gated(fp16(m)).shape) == (m, 1280)
    calls = ns.since(mark)
    assert [c["plan"]["gated"] for c in calls if c["op"] == "awq_gemm_sm70_out"] == [gated_call]
    # Unfused, the engine's silu_and_mul epilogue runs on the plain GEMM's result.
    assert [c["op"] for c in calls].count("silu_and_mul") == (0 if gated_call else 1)


def test_each_class_plans_its_layout_flags_and_keeps_its_plan():
    # docs/contracts/core.md §2.3: Triton prepares nothing gated, no exact dense, no fused call.
    spec = layer(2560, 2560, 128, DOWN)
    triton = TRITON.plan(spec, awq.AwqSetup(), FULL)
    assert (triton.layout, dict(triton.flags)) == (
        "awq_gemm",
        {"gated": False, "exact_dense": False, "fused_gated_call": False},
    )
    turbomind = TM.plan(spec, awq.AwqSetup(), FULL)
    assert (turbomind.layout, dict(turbomind.flags)) == (
        "awq_sm70",
        {"gated": False, "exact_dense": True, "fused_gated_call": False},
    )
    # The loaded layer keeps the layout it was prepared with (PreparedLayer.state).
    assert set(turbomind.state) == {"plan"} and turbomind.state["plan"].exact_dense is True


def test_triton_keeps_the_checkpoint_tensors():
    spec = layer()
    result = awq.prepare_awq_triton(spec, spec.checkpoint_tensors())
    assert set(result.resident) == {"qweight", "qzeros", "scales"}
    assert result.apply is None
