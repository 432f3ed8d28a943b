"""The two native namespace implementations answer alike: a real torch.ops namespace (through
TorchOpsNamespace) and the in-memory double."""

from __future__ import annotations

import pytest
import torch

from native.kernels.nvfp4_sm70 import Qpn2NvFp4LinearKernel
from native.layers import Nvfp4Layer
from routectl.namespaces.native_ns import InMemoryNamespace, TorchOpsNamespace, missing_ops

NS = "routectl_test_ns"
GETTER = "nvfp4_qpn2_compact_scales_version_sm70"
PRESENT = ("nvfp4_qpn2_prepare_sm70", "nvfp4_qpn2_gemm_sm70_out")

_lib = torch.library.Library(NS, "DEF")  # noqa: TOR901 - a throwaway namespace for the test
_lib.define("nvfp4_qpn2_prepare_sm70(Tensor weight) -> Tensor")
_lib.define("nvfp4_qpn2_gemm_sm70_out(Tensor(a!) out, Tensor x) -> ()")
_lib.define(f"{GETTER}() -> int")
_lib.impl("nvfp4_qpn2_prepare_sm70", lambda weight: weight * 2, "CPU")
_lib.impl("nvfp4_qpn2_gemm_sm70_out", lambda out, x: out.copy_(x), "CPU")
_lib.impl(GETTER, lambda: 3, "CompositeExplicitAutograd")


def test_availability_abi_revision_and_a_call():
    real = TorchOpsNamespace(NS)
    assert real.has_op("nvfp4_qpn2_prepare_sm70") and not real.has_op("nvfp4_qpn2_dispatch_x")
    assert real.abi_revision(GETTER) == 3
    assert real.abi_revision("absent_getter") is None
    out = real.call("nvfp4_qpn2_prepare_sm70", weight=torch.ones(2))
    assert out.tolist() == [2.0, 2.0]
    assert "nvfp4_qpn2_gemm_sm70_out(Tensor(a!) out, Tensor x) -> ()" in real.schema(
        "nvfp4_qpn2_gemm_sm70_out"
    )


def test_missing_op_reasons_are_identical_to_the_doubles():
    real = TorchOpsNamespace(NS)
    double = InMemoryNamespace((*PRESENT, GETTER), abi={GETTER: 3})
    layer = Nvfp4Layer.of("model.layers.0.linear_attn.in_proj_qkvz", 5120, 4120)
    assert missing_ops(real, Qpn2NvFp4LinearKernel.required_ops) == missing_ops(
        double, Qpn2NvFp4LinearKernel.required_ops
    )
    assert Qpn2NvFp4LinearKernel.can_implement(layer, real) == Qpn2NvFp4LinearKernel.can_implement(
        layer, double
    )
    ok, reason = Qpn2NvFp4LinearKernel.can_implement(layer, real)
    assert not ok and reason.message == (
        "missing native QPN2 operators: [nvfp4_qpn2_gated_sm70_out, nvfp4_qpn2_dispatch_sm70_out]"
    )
    assert real.abi_revision(GETTER) == double.abi_revision(GETTER)


def test_call_repeated_runs_an_executing_namespace_each_time():
    real = TorchOpsNamespace(NS)
    doubled = real.call_repeated("nvfp4_qpn2_prepare_sm70", 3, weight=torch.ones(2))
    assert doubled.tolist() == [2.0, 2.0]
    runs: list[int] = []
    double = InMemoryNamespace(PRESENT, impls={PRESENT[0]: lambda weight: runs.append(weight)})
    double.call_repeated(PRESENT[0], 4, weight=7)
    assert runs == [7, 7, 7, 7]
    with pytest.raises(ValueError, match="at least 1"):
        double.call_repeated(PRESENT[0], 0, weight=7)


def test_a_recorder_records_repeats_under_the_aggregation_rule():
    from native.catalogue import CATALOGUE
    from native.moe_layer import AwqMoeLayer, meta_checkpoint
    from routectl.replay.harness import RecordingNamespace

    layer = AwqMoeLayer.for_rank(
        {"experts": 8, "top_k": 2, "hidden": 64, "intermediate": 64, "group": 32}, 1
    )
    qweight, scales, qzeros = meta_checkpoint(layer).w2.shared()  # type: ignore[misc]
    recorder = RecordingNamespace(CATALOGUE)
    args = {
        "kernel": qweight,
        "scaling_factors": scales,
        "zeros": qzeros,
        "group_size": 32,
        "interleave_gated_silu": False,
    }
    recorder.call_repeated("awq_sm70_prepare", 5, **args)
    recorder.call("awq_sm70_prepare", **args)
    assert [c["plan"]["experts"] for c in recorder.calls] == [6]
    recorder.call_repeated("awq_sm70_prepare", 2, **{**args, "interleave_gated_silu": True})
    assert [c["plan"]["experts"] for c in recorder.calls] == [6, 2]


def test_a_recorder_refuses_a_wrong_call_after_a_right_one_of_the_same_op():
    """The recorder keeps the verdict of calls that passed its name and kind checks (per op,
    argument names and types); a call that differs in any of those is checked in full, and
    a refusal is never kept: the same wrong call is refused, with the same message, again."""
    from native.catalogue import CATALOGUE
    from native.moe_layer import AwqMoeLayer, meta_checkpoint
    from routectl.replay.harness import RecordingNamespace, ReplayError

    layer = AwqMoeLayer.for_rank(
        {"experts": 8, "top_k": 2, "hidden": 64, "intermediate": 64, "group": 32}, 1
    )
    qweight, scales, qzeros = meta_checkpoint(layer).w2.shared()  # type: ignore[misc]
    args = {
        "kernel": qweight,
        "scaling_factors": scales,
        "zeros": qzeros,
        "group_size": 32,
        "interleave_gated_silu": False,
    }
    wrong = [
        ({**args, "group_size": qweight}, "argument group_size must be a scalar"),
        ({**args, "kernel": 3}, "argument kernel must be a tensor"),
        ({**args, "kernel": None}, "argument kernel is None"),
        ({**args, "group": 32}, "unknown argument 'group'"),
        ({k: v for k, v in args.items() if k != "kernel"}, "missing argument 'kernel'"),
    ]
    for bad, message in wrong:
        recorder = RecordingNamespace(CATALOGUE)
        recorder.call("awq_sm70_prepare", **args)
        for _ in range(2):
            with pytest.raises(ReplayError, match=message):
                recorder.call("awq_sm70_prepare", **bad)
        recorder.call("awq_sm70_prepare", **args)
        assert len(recorder.calls) == 1 and recorder.calls[0]["plan"]["experts"] == 2
