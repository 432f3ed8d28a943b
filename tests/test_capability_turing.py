"""Turing QPN capability classes (docs/contracts/core.md §2.2): the policy gate first (checked
once, by the selector), then capability and every layer rule at its boundary; the plan through the
family's KernelLoader; dispatch with invocation-owned scratch."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from native.catalogue import CATALOGUE
from native.kernels import turing as tu
from native.layers import Fp8Layer, Nvfp4Layer
from policies import PROJECT
from policies.linear_turing import (
    FP8_LOADER,
    NVFP4_LOADER,
    load_turing_fp8,
    load_turing_nvfp4,
    select_turing_fp8,
    select_turing_nvfp4,
)
from routectl.errors import ActivationError
from routectl.namespaces.native_ns import InMemoryNamespace
from routectl.policy.selection import evaluate_kernel
from routectl.replay.harness import RecordingNamespace
from routectl.workload import EngineConfig, Hardware

QPN2, QPN8 = tu.TuringQpn2NvFp4LinearKernel, tu.TuringQpn8Fp8LinearKernel
FULL = InMemoryNamespace(CATALOGUE.ops)
QKVZ = "model.layers.0.linear_attn.in_proj_qkvz"
QKV = "model.layers.0.self_attn.qkv_proj"


def nvfp4(k: int = 5120, n: int = 4120, **changes) -> Nvfp4Layer:
    return dataclasses.replace(Nvfp4Layer.of(QKVZ, k, n), **changes)


def fp8(k: int = 5120, n: int = 3584, **changes) -> Fp8Layer:
    return dataclasses.replace(Fp8Layer.of(QKV, k, n), **changes)


def turing_policy(environ: dict[str, str] | None = None, config=None):
    return PROJECT.resolve(config, environ or {}, Hardware(75), EngineConfig(), emit_warnings=False)


def code(kernel, request, ns=FULL) -> str | None:
    ok, reason = kernel.can_implement(request, ns)
    return None if ok else reason.code


@pytest.mark.parametrize("capability, ok", [(70, False), (72, False), (75, True), (80, False)])
def test_turing_kernels_need_exactly_sm75(capability, ok):
    for kernel in (QPN2, QPN8):
        result, reason = kernel.is_supported(capability)
        assert result is ok
        if not ok:
            assert reason.code == "requires_sm75"
            assert reason.message == (
                "requires Turing SM75; Volta retains its existing kernel, "
                f"got capability {capability}"
            )


# --- TuringQpn2NvFp4LinearKernel --------------------------------------------------------


@pytest.mark.parametrize("n, k", [(1, 128), (40, 384), (97, 768), (1024, 2048), (4120, 5120)])
def test_qpn2_admits_padding_and_aligned_shapes(n, k):
    assert QPN2.can_implement(nvfp4(k, n), FULL) == (True, None)


def test_qpn2_policy_reasons_come_first():
    ok, reason = QPN2.policy_check(tu.TuringQpn2Options(dense_qpn2=False))
    assert (ok, reason.code) == (False, "dense_qpn2_disabled")
    assert reason.message == "dense QPN2 disabled by KernelConfig"
    ok, reason = QPN2.policy_check(tu.TuringQpn2Options(backend_enabled=False))
    assert (ok, reason.code) == (False, "legacy_backend_override")
    assert reason.message == "disabled by the legacy quantization backend override"
    assert QPN2.policy_check(tu.TuringQpn2Options()) == (True, None)
    # Through the selector the policy is the gate: its reason precedes the capability's and
    # the layer's, and the class itself never checks the policy again.
    bad_layer = nvfp4(act_dtype="bfloat16", weight_shape=(1,))
    off = turing_policy(config={"sm70_nvfp4": {"dense_qpn2": False}})
    for capability in (70, 75):
        selection = select_turing_nvfp4(bad_layer, off, Hardware(capability), FULL)
        (verdict,) = selection.verdicts
        assert (verdict.code, verdict.stage) == ("dense_qpn2_disabled", "policy")
    assert code(QPN2, bad_layer) == "activation_not_fp16"
    assert evaluate_kernel(QPN2, 70, nvfp4(), FULL).reason.code == "requires_sm75"


def test_qpn2_layer_rules_in_order():
    assert code(QPN2, nvfp4(act_dtype="bfloat16", weight_shape=(1,))) == "activation_not_fp16"
    assert code(QPN2, nvfp4(weight_shape=(4120, 2560, 1))) == "packed_weight_rank"
    assert code(QPN2, nvfp4(5120, 0)) == "n_not_positive"
    assert code(QPN2, nvfp4(0, 4120, weight_shape=(4120, 0))) == "k_not_positive"
    assert code(QPN2, nvfp4(5000, 4120, weight_dtype="int8")) == "k_not_multiple_of_128"
    assert code(QPN2, nvfp4(weight_dtype="int8")) == "nvfp4_dtypes"
    assert code(QPN2, nvfp4(scale_dtype="float16")) == "nvfp4_dtypes"
    assert code(QPN2, nvfp4(scale_shape=(4120, 160))) == "scale_shape"
    assert code(QPN2, nvfp4(scale_shape=(4120, 320))) is None


@pytest.mark.parametrize("k, ok", [(128, True), (5120, True), (5000, False), (192, False)])
def test_qpn2_k_boundary(k, ok):
    ok_, reason = QPN2.can_implement(nvfp4(k, 4120), FULL)
    assert ok_ is ok
    if not ok:
        assert reason.code == "k_not_multiple_of_128"
        assert reason.message.startswith("requires N > 0 and positive K divisible by 128")
        assert f"K={k}" in reason.message


def test_qpn2_reason_messages_name_the_rule():
    msg = QPN2.can_implement(nvfp4(act_dtype="float32"), FULL)[1].message
    assert msg.startswith("requires FP16 activations") and "float32" in msg
    msg = QPN2.can_implement(nvfp4(scale_shape=(4120, 100)), FULL)[1].message
    assert "one E4M3 scale per 16 weight values" in msg and "(4120, 320)" in msg
    msg = QPN2.can_implement(nvfp4(weight_shape=(4120,)), FULL)[1].message
    assert "rank-two packed weights" in msg


QPN2_CORE = "requires N > 0 and positive K divisible by 128"
QPN8_CORE = "requires positive N divisible by 32 and K divisible by 128"


@pytest.mark.parametrize(
    "kernel, request_, message",
    [
        (QPN2, fp8(), "requires checkpoint-native NVFP4 metadata"),
        (QPN2, nvfp4(5120, 0), f"{QPN2_CORE}: N <= 0 (N=0)"),
        (QPN2, nvfp4(0, 4120, weight_shape=(4120, 0)), f"{QPN2_CORE}: K <= 0 (K=0)"),
        (
            QPN2,
            nvfp4(weight_dtype="int8"),
            "requires NVFP4 bytes and E4M3 block scales (weight int8, scales float8_e4m3fn)",
        ),
        (
            QPN2,
            nvfp4(scale_shape=(4120, 160)),
            "requires one E4M3 scale per 16 weight values (scales (4120, 160), expected "
            "(4120, 320))",
        ),
        (QPN8, nvfp4(), "requires a per-tensor FP8 layer"),
        (
            QPN8,
            fp8(out_dtype="bfloat16"),
            "requires FP16 input and output (input float16, output bfloat16)",
        ),
        (
            QPN8,
            fp8(weight_dtype="float8_e5m2"),
            "requires static per-tensor E4M3 weights (weight float8_e5m2, static_per_tensor)",
        ),
        (QPN8, fp8(weight_shape=(3584,)), "requires rank-two weights (shape (3584,))"),
        (QPN8, fp8(weight_shape=(0, 5000)), f"{QPN8_CORE}: N <= 0 (N=0)"),
        (QPN8, fp8(weight_shape=(96, 0)), f"{QPN8_CORE}: K <= 0 (K=0)"),
        (QPN8, fp8(weight_shape=(96, 5000)), f"{QPN8_CORE}: K % 128 != 0 (K=5000)"),
    ],
)
def test_layer_reasons_carry_the_offending_values(kernel, request_, message):
    # docs/contracts/core.md §2: a reason is a stable code and a message with the offending values.
    ok, reason = kernel.can_implement(request_, FULL)
    assert (ok, reason.message) == (False, message)


@pytest.mark.parametrize("op", tu.TURING_QPN2_REQUIRED_OPS)
def test_qpn2_missing_operators(op):
    ok, reason = QPN2.can_implement(nvfp4(), FULL.without(op))
    assert (ok, reason.code, reason.message) == (
        False,
        "missing_native_ops",
        f"missing native operators: [{op}]",
    )
    # The SM70 dispatchers are not Turing requirements.
    assert QPN2.can_implement(nvfp4(), InMemoryNamespace(tu.TURING_QPN2_REQUIRED_OPS)) == (
        True,
        None,
    )


# --- TuringQpn8Fp8LinearKernel ----------------------------------------------------------


@pytest.mark.parametrize(
    "options", [tu.TuringQpn8Options(enabled=False), tu.TuringQpn8Options(force_marlin=True)]
)
def test_qpn8_policy_reason_comes_first(options):
    ok, reason = QPN8.policy_check(options)
    assert (ok, reason.code) == (False, "qpn8_disabled")
    assert reason.message == "QPN8 disabled by KernelConfig or legacy backend override"
    assert QPN8.policy_check(tu.TuringQpn8Options()) == (True, None)


@pytest.mark.parametrize(
    "environ", [{"VLLM_SM70_FP8_TURBOMIND": "0"}, {"VLLM_SM70_QUANT_BACKEND": "marlin"}]
)
def test_qpn8_policy_gate_precedes_the_layer_rules(environ):
    bad_layer = fp8(act_dtype="bfloat16")
    selection = select_turing_fp8(bad_layer, turing_policy(environ), Hardware(75), FULL)
    (verdict,) = selection.verdicts
    assert (verdict.code, verdict.stage) == ("qpn8_disabled", "policy")
    assert code(QPN8, bad_layer) == "input_output_not_fp16"


def test_qpn8_layer_rules_in_order():
    assert (
        code(QPN8, fp8(act_dtype="bfloat16", weight_scheme="static_128_block"))
        == "input_output_not_fp16"
    )
    assert code(QPN8, fp8(out_dtype="bfloat16")) == "input_output_not_fp16"
    assert (
        code(QPN8, fp8(weight_scheme="static_128_block", weight_shape=(1,)))
        == "not_static_per_tensor_e4m3"
    )
    assert code(QPN8, fp8(weight_dtype="float8_e5m2")) == "not_static_per_tensor_e4m3"
    assert code(QPN8, fp8(weight_shape=(3584,))) == "weight_rank"
    assert code(QPN8, fp8(weight_shape=(0, 5000))) == "n_not_positive"
    assert code(QPN8, fp8(weight_shape=(100, 0))) == "k_not_positive"
    assert code(QPN8, fp8(weight_shape=(100, 5000))) == "n_not_multiple_of_32"
    assert code(QPN8, fp8(weight_shape=(96, 5000))) == "k_not_multiple_of_128"
    assert code(QPN8, fp8(weight_shape=(96, 128))) is None
    # N = 1 and K = 1 are positive (docs/contracts/core.md §2.2 "N > 0, K > 0"): the alignment rule
    # fails.
    assert code(QPN8, fp8(weight_shape=(1, 5120))) == "n_not_multiple_of_32"
    assert code(QPN8, fp8(weight_shape=(96, 1))) == "k_not_multiple_of_128"


@pytest.mark.parametrize("n, ok", [(32, True), (3584, True), (100, False), (3600, False)])
def test_qpn8_n_boundary(n, ok):
    ok_, reason = QPN8.can_implement(fp8(5120, n), FULL)
    assert ok_ is ok
    if not ok:
        assert reason.message == (
            f"requires positive N divisible by 32 and K divisible by 128: N % 32 != 0 (N={n})"
        )


@pytest.mark.parametrize("op", tu.QPN8_REQUIRED_OPS)
def test_qpn8_missing_operators(op):
    ok, reason = QPN8.can_implement(fp8(), FULL.without(op))
    assert (ok, reason.message) == (False, f"missing native operators: [{op}]")


def test_layers_of_the_other_kernel_are_refused():
    assert code(QPN2, fp8()) == "not_turing_nvfp4_layer"
    assert code(QPN8, nvfp4()) == "not_turing_fp8_layer"


def test_the_turing_classes_plan_through_the_family_loader():
    # The same lifecycle as the Volta classes: the loader asks the chosen class for its plan
    # (layout, flags, how to prepare) and builds the Decision from it.
    nvfp4_plan = QPN2.plan(nvfp4(5120, 4120), None, FULL)
    assert (nvfp4_plan.layout, dict(nvfp4_plan.flags)) == (
        tu.LAYOUT_TURING_QPN2,
        {"padded_n": 4128, "scratch_above_m": tu.TURING_QPN2_DECODE_MAX_M},
    )
    assert (nvfp4_plan.refused, nvfp4_plan.fallbacks) == ((), ())
    fp8_plan = QPN8.plan(fp8(), None, FULL)
    assert (fp8_plan.layout, dict(fp8_plan.flags)) == (
        tu.LAYOUT_QPN8,
        {"scratch_above_m": tu.QPN8_DECODE_MAX_M},
    )
    assert NVFP4_LOADER.kernels == (QPN2,) and FP8_LOADER.kernels == (QPN8,)
    layer = nvfp4(5120, 4120)
    loaded = load_turing_nvfp4(
        layer, turing_policy(), Hardware(75), EngineConfig(), FULL, tensors=None
    )
    decision = loaded.decision
    assert (decision.kernel, decision.layout, dict(decision.flags), decision.fallbacks) == (
        QPN2.name,
        nvfp4_plan.layout,
        dict(nvfp4_plan.flags),
        (),
    )
    ns = RecordingNamespace(CATALOGUE)
    prepared = load_turing_fp8(
        fp8(), turing_policy(), Hardware(75), EngineConfig(), ns, tensors=fp8().checkpoint_tensors()
    )
    assert prepared.decision.layout == tu.LAYOUT_QPN8
    assert set(prepared.resident) == {"qpn8_weight", "weight_scale"}
    assert ns.calls[0]["op"] == tu.QPN8_PREPARE_OP


# --- dispatch ---------------------------------------------------------------------------

TOKENS = (0, 1, 8, 9, 32, 33, 64, 1024)


def meta_fp16(m: int, k: int) -> torch.Tensor:
    return torch.empty((m, k), dtype=torch.float16, device="meta")


def test_turing_qpn2_passes_scratch_above_32_rows():
    ns = RecordingNamespace(CATALOGUE)
    spec = Nvfp4Layer.of(QKVZ, 5120, 4120)
    prepared = tu.prepare_turing_qpn2(spec, spec.checkpoint_tensors(), ns)
    assert ns.calls == [{"op": tu.QPN2_PREPARE_OP, "plan": {"n": 4128}}]
    mark = ns.mark()
    for m in TOKENS:
        assert tuple(prepared.apply(meta_fp16(m, 5120)).shape) == (m, 4120)
    calls = ns.since(mark)
    assert [c["plan"]["m"] for c in calls] == [m for m in TOKENS if m > 0]
    assert all(c["op"] == tu.QPN2_GEMM_OP for c in calls)
    assert [c["plan"].get("scratch", False) for c in calls] == [
        m > tu.TURING_QPN2_DECODE_MAX_M for m in TOKENS if m > 0
    ]
    assert prepared.resident["qpn2_codes"].numel() == 4128 * 2560
    with pytest.raises(
        ActivationError, match="^Turing NVFP4 QPN2 requires float16 activations, got float32$"
    ):
        prepared.apply(torch.empty((1, 5120), dtype=torch.float32, device="meta"))
    # The QPN2 GEMM of a plain (not gated) layer, tuned by (K, N padded to 32, gated call):
    # docs/contracts/core.md §2.1 (5120, 4128, F) = (16, 2); scratch only above 32 rows
    # (docs/contracts/core.md §2.2).
    assert [c["plan"] for c in calls[:2]] == [
        {"m": 1, "split_k": 16, "nacc": 2, "gated": False},
        {"m": 8, "split_k": 16, "nacc": 2, "gated": False},
    ]
    assert calls[4]["plan"] == {"m": 33, "split_k": 16, "nacc": 2, "gated": False, "scratch": True}
    assert set(prepared.resident) == {"qpn2_codes", "qpn2_scales", "weight_global_scale"}
    # Invocation-owned (K, N padded) FP16 scratch: 5120 x 4128 x 2 bytes.
    assert prepared.scratch == {"dense_scratch": 42_270_720}


def test_turing_qpn2_uses_the_tuning_table_entry_of_its_shape():
    # docs/contracts/core.md §2.1: (1536, 5120, F) = (8, 2), where the untabled rule would give 16.
    ns = RecordingNamespace(CATALOGUE)
    spec = Nvfp4Layer.of(QKVZ, 1536, 5120)
    prepared = tu.prepare_turing_qpn2(spec, spec.checkpoint_tensors(), ns)
    mark = ns.mark()
    prepared.apply(meta_fp16(1, 1536))
    assert ns.since(mark) == [
        {
            "op": "nvfp4_qpn2_gemm_sm70_out",
            "plan": {"m": 1, "split_k": 8, "nacc": 2, "gated": False},
        }
    ]


def test_qpn8_scratch_is_a_fresh_k_by_n_fp16_buffer_per_invocation():
    seen: list[dict] = []
    ns = InMemoryNamespace(
        CATALOGUE.ops,
        impls={
            tu.QPN8_PREPARE_OP: CATALOGUE.op(tu.QPN8_PREPARE_OP).fake,
            tu.QPN8_DISPATCH_OP: lambda **kw: seen.append(kw),
        },
    )
    spec = Fp8Layer.of(QKV, 5120, 3584)
    prepared = tu.prepare_turing_qpn8(spec, spec.checkpoint_tensors(), ns)
    for m in TOKENS:
        assert tuple(prepared.apply(meta_fp16(m, 5120)).shape) == (m, 3584)
    assert len(seen) == len(TOKENS) - 1  # M = 0 launches nothing
    with_scratch = [kw["scratch"] for kw in seen if kw["scratch"] is not None]
    assert len(with_scratch) == sum(1 for m in TOKENS if m > tu.QPN8_DECODE_MAX_M)
    assert all(tuple(s.shape) == (5120, 3584) and s.dtype == torch.float16 for s in with_scratch)
    assert len({id(s) for s in with_scratch}) == len(with_scratch)
    assert seen[1]["x"].shape[0] == 8 and seen[1]["scratch"] is None
    with pytest.raises(
        ActivationError, match="^Turing FP8 QPN8 requires float16 activations, got bfloat16$"
    ):
        prepared.apply(torch.empty((9, 5120), dtype=torch.bfloat16, device="meta"))
    assert set(prepared.resident) == {"qpn8_weight", "weight_scale"}
    # docs/contracts/core.md §2.2: a (K, N) FP16 scratch, 5120 x 3584 x 2 bytes.
    assert prepared.scratch == {"dense_scratch": 36_700_160}


def test_qpn8_records_scratch_in_the_plan():
    ns = RecordingNamespace(CATALOGUE)
    spec = Fp8Layer.of(QKV, 5120, 3584)
    prepared = tu.prepare_turing_qpn8(spec, spec.checkpoint_tensors(), ns)
    mark = ns.mark()
    prepared.apply(meta_fp16(8, 5120))
    prepared.apply(meta_fp16(9, 5120))
    assert ns.since(mark) == [
        {"op": tu.QPN8_DISPATCH_OP, "plan": {"m": 8}},
        {"op": tu.QPN8_DISPATCH_OP, "plan": {"m": 9, "scratch": True}},
    ]
