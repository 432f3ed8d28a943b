"""The two native namespace implementations answer alike: a real torch.ops namespace (through
TorchOpsNamespace) and the in-memory double."""

from __future__ import annotations

import torch

from native.kernels.nvfp4_sm70 import Qpn2NvFp4LinearKernel
from native.layers import Nvfp4Layer
from routectl.native_ns import InMemoryNamespace, TorchOpsNamespace, missing_ops

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
        "nvfp4_qpn2_gemm_sm70_out")


def test_missing_op_reasons_are_identical_to_the_doubles():
    real = TorchOpsNamespace(NS)
    double = InMemoryNamespace((*PRESENT, GETTER), abi={GETTER: 3})
    layer = Nvfp4Layer.of("model.layers.0.linear_attn.in_proj_qkvz", 5120, 4120)
    assert missing_ops(real, Qpn2NvFp4LinearKernel.required_ops) == missing_ops(
        double, Qpn2NvFp4LinearKernel.required_ops)
    assert Qpn2NvFp4LinearKernel.can_implement(layer, real) == \
        Qpn2NvFp4LinearKernel.can_implement(layer, double)
    ok, reason = Qpn2NvFp4LinearKernel.can_implement(layer, real)
    assert not ok and reason.message == ("missing native QPN2 operators: "
                                         "[nvfp4_qpn2_gated_sm70_out, "
                                         "nvfp4_qpn2_dispatch_sm70_out]")
    assert real.abi_revision(GETTER) == double.abi_revision(GETTER)
