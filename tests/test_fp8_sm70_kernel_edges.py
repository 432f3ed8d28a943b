"""Edges of the Volta FP8 linear kernels (`native.kernels.fp8_sm70`) that the capability,
plan and category tests left open (benchmarks/MUTATION.md, seventh session): the block QPN8
kernel's first refusal in full (a plain layer handed where the serialized W8A16 request is
expected: fp8.md §2.3), beside the TurboMind kernel's, which says the same.
"""

from __future__ import annotations

import pytest
import torch

from native.kernels import fp8_sm70 as fs
from native.layers import BlockFp8Layer
from policies import PROJECT
from routectl.reasons import Reason
from routectl.replay.harness import RecordingNamespace

W8A16 = Reason("not_w8a16_layout", "requires the serialized SM70 weight-only FP8 layout")


def plain_layer() -> BlockFp8Layer:
    return BlockFp8Layer.of("model.layers.0.self_attn.qkv_proj", 5120, 3584, tp=4)


@pytest.mark.parametrize(
    "kernel", [fs.QPN8Fp8BlockScaledMMLinearKernel, fs.TurboMindFp8LinearKernel]
)
def test_a_plain_layer_is_not_the_serialized_request(
    kernel: type[fs.TurboMindFp8LinearKernel],
) -> None:
    ns = RecordingNamespace(PROJECT.catalogue)
    assert kernel.can_implement(plain_layer(), ns) == (False, W8A16)
    # The same layer as the serialized request passes that check.
    request = fs.W8A16Request(plain_layer(), fs.Fp8Sm70Options())
    assert kernel.can_implement(request, ns) == (True, None)


@pytest.mark.parametrize(
    ("capability", "resident", "prepare_ops", "prefill_op", "scratch"),
    [
        (
            70,
            ["qpn8_codes", "turbomind_codes", "turbomind_scales", "weight_scale_inv"],
            ["fp8_qpn8_prepare_sm70", "fp8_sm70_prepare"],
            "fp8_gemm_sm70_out",
            {},
        ),
        (
            75,
            ["qpn8_codes", "weight_scale_inv"],
            ["fp8_qpn8_prepare_sm70"],
            "fp8_qpn8_prefill_sm70_out",
            {"dense_scratch": 5120 * 3584 * 2},
        ),
    ],
)
def test_the_block_kernel_plan_prepares_the_layer_it_planned(
    capability: int,
    resident: list[str],
    prepare_ops: list[str],
    prefill_op: str,
    scratch: dict[str, int],
) -> None:
    # fp8.md §2.3: the QPN8 codes, plus on Volta the kept TurboMind copy that serves M above
    # the decode limit of 8 (without it, the QPN8 prefill entry over a dense scratch).
    built = plain_layer()
    options = fs.Fp8Sm70Options(block_qpn8=True, block_qpn8_turbomind_copy=True)
    setup = fs.Fp8Setup(options, fs.Fp8Workspaces(), capability)
    ns = RecordingNamespace(PROJECT.catalogue)
    planned = fs.QPN8Fp8BlockScaledMMLinearKernel.plan(built, setup, ns)
    prepared = planned.prepare(built.checkpoint_tensors("meta"))
    assert sorted(prepared.resident) == resident
    codes = prepared.resident["qpn8_codes"]
    assert (tuple(codes.shape), str(codes.dtype)) == ((5120, 3584), "torch.uint8")
    assert [c["op"] for c in ns.calls] == prepare_ops
    assert prepared.scratch == scratch
    start = ns.mark()
    assert prepared.apply is not None
    for m in (8, 9):
        out = prepared.apply(torch.empty((m, 5120), dtype=torch.float16, device="meta"))
        assert tuple(out.shape) == (m, 3584)
    assert [c["op"] for c in ns.since(start)] == ["fp8_qpn8_gemm_sm70_out", prefill_op]


def test_prescaled_scales_keep_their_dtype_and_shape() -> None:
    # The x256 shift keeps a tensor's shape and dtype (meta tensors: no values to shift).
    for dtype in (torch.float16, torch.float32):
        scales = torch.empty((28, 40), dtype=dtype, device="meta")
        shifted = fs.prescaled(scales)
        assert (tuple(shifted.shape), shifted.dtype, shifted.device.type) == (
            (28, 40),
            dtype,
            "meta",
        )
    real = torch.tensor([[0.5, 2.0**-8]], dtype=torch.float16)
    assert fs.prescaled(real).tolist() == [[128.0, 1.0]]
    assert fs.prescaled(real).dtype == torch.float16
