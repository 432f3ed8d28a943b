"""AWQ dense capability classes (CONTRACTS 2.3), exact-dense and fused-SiLU layout
decisions, TurboMind preparation and dispatch."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from native.catalogue import CATALOGUE
from native.kernels import awq_dense as awq
from native.kernels.common import ActivationDtypeError
from native.layers import AwqLayer
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
    assert result.workspace_elements == awq.EXACT_DENSE_MIN_WORKSPACE == 44_564_480


@pytest.mark.parametrize(
    "spec, options, code_",
    [
        (layer(2560, 2560, 128, DOWN), dict(prefill_exact_dense=False), "exact_dense_disabled"),
        (layer(2560, 2560, 64, DOWN), {}, "exact_dense_group"),
        (layer(2560, 2560, 128, DOWN), dict(exact_dense_role=False), "exact_dense_role"),
        (layer(2560, 2560, 128, DOWN, qweight_shape=(2560, 320, 1)), {}, "exact_dense_rank"),
        (layer(2560 + 64, 2560, 128, DOWN), {}, "exact_dense_k"),
        (layer(2560, 2560 + 8, 128, DOWN), {}, "exact_dense_n"),
        (layer(2560, 2560, 128, GATE_UP), dict(fused_silu=True), "exact_dense_gated"),
    ],
)
def test_each_exact_dense_condition(spec, options, code_):
    result = plan(spec, **options)
    assert not result.exact_dense and result.exact_dense_reason.code == code_
    assert not result.exact_dense_refused


def test_missing_dequantize_op_and_workspace_are_refusals():
    spec = layer(5120, 8704, 128, GATE_UP)
    missing = plan(spec, FULL.without(awq.AWQ_DEQUANTIZE_OP))
    assert missing.exact_dense_refused and missing.exact_dense_reason.code == "missing_native_ops"
    assert plan(spec, workspace=44_564_480).exact_dense
    short = plan(spec, workspace=44_564_479)
    assert short.exact_dense_refused and not short.exact_dense
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
    with pytest.raises(ActivationDtypeError):
        result.apply(torch.empty((4096, 2560), dtype=torch.float32, device="meta"))
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


def test_triton_keeps_the_checkpoint_tensors():
    spec = layer()
    result = awq.prepare_awq_triton(spec, spec.checkpoint_tensors())
    assert set(result.resident) == {"qweight", "qzeros", "scales"}
    assert result.apply is None
