"""Fakes against what they stand for.

- Ops with a CPU implementation (the `routectl::` reference prepare ops, `torch.mm`): the
  catalogue's fake, which replay records instead of running the op, gives outputs of the same
  shape, dtype and device kind as the implementation on sampled valid inputs, and
  `torch.library.opcheck` holds on each sample.
- Ops declared only (no implementation here): each fake's output shapes and dtypes are the
  ones the contracts document, written as literals from them (docs/contracts/core.md §2.1 and
  §6, docs/contracts/fp8.md §3.3, §4.2 and §4.5, docs/contracts/fp8moe.md §4.2).

The shared layout helper (`native.awq_layout`) gives both the reference fake and the
catalogue's, so the reference ops are also checked against the contract's literals: a change
there moves fake and implementation together and only the literals can see it.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import native.reference.ops  # noqa: F401  (registers the routectl:: ops)
from native.awq_schemas import PREPARE_COMPACT_OP, PREPARE_OP, REFERENCE_NAMESPACE
from native.catalogue import CATALOGUE
from native.reference.packing import pack_checkpoint, random_expert

OPS = getattr(torch.ops, REFERENCE_NAMESPACE)

# (K, N, group): valid AWQ geometries (K % group == 0, N % 32 == 0), of distinct K, N and
# K/group so that a transposed or mis-divided shape cannot coincide with the right one.
AWQ_SAMPLES = [(64, 32, 32), (128, 96, 64), (256, 64, 128), (384, 160, 128), (96, 256, 32)]


def meta_of(tensors: list[torch.Tensor]) -> list[tuple[tuple[int, ...], torch.dtype]]:
    return [(tuple(t.shape), t.dtype) for t in tensors]


def checkpoint(k: int, n: int, group: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    ck = pack_checkpoint(random_expert(k, n, group, torch.Generator().manual_seed(k + n)))
    return ck.qweight, ck.scales, ck.qzeros


def contract_awq_prepared(
    k: int, n: int, group: int, compact: bool
) -> list[tuple[tuple[int, ...], torch.dtype]]:
    """core.md §6: [prepared words int32 (K, N/8), metadata int32 (K/g, N) or uint8
    (K/g, N, 3)]."""
    meta = ((k // group, n, 3), torch.uint8) if compact else ((k // group, n), torch.int32)
    return [((k, n // 8), torch.int32), meta]


@pytest.mark.parametrize(("k", "n", "group"), AWQ_SAMPLES)
@pytest.mark.parametrize("op_name", [PREPARE_OP, PREPARE_COMPACT_OP])
@pytest.mark.parametrize("interleave", [False, True])
def test_awq_prepare_fake_equals_the_cpu_op_and_the_contract(
    op_name: str, k: int, n: int, group: int, interleave: bool
) -> None:
    qweight, scales, qzeros = checkpoint(k, n, group)
    real = getattr(OPS, op_name)(qweight, scales, qzeros, group, interleave)
    fake_fn = CATALOGUE.ops[op_name].fake
    assert fake_fn is not None
    fake = fake_fn(
        kernel=qweight.to("meta"),
        scaling_factors=scales.to("meta"),
        zeros=qzeros.to("meta"),
        group_size=group,
        interleave_gated_silu=interleave,
    )
    expected = contract_awq_prepared(k, n, group, op_name == PREPARE_COMPACT_OP)
    assert meta_of(real) == expected
    assert meta_of(fake) == expected
    assert all(t.device.type == "meta" for t in fake)
    assert all(t.device.type == "cpu" for t in real)
    # The registered fake (torch's own fake tensors) as well, on every sample.
    torch.library.opcheck(
        getattr(OPS, op_name).default, (qweight, scales, qzeros, group, interleave)
    )


def test_the_qwen38_expert_shapes_of_the_contract() -> None:
    # core.md §3.2: W13 K2560/N320 and W2 K160/N2560 at group 32, both layouts.
    fake = CATALOGUE.ops[PREPARE_OP].fake
    compact = CATALOGUE.ops[PREPARE_COMPACT_OP].fake
    assert fake is not None and compact is not None
    for k, n, four, three in [
        (2560, 320, (80, 320), (80, 320, 3)),
        (160, 2560, (5, 2560), (5, 2560, 3)),
    ]:
        kernel = torch.empty((k, n // 8), dtype=torch.int32, device="meta")
        args = {"scaling_factors": None, "zeros": None, "group_size": 32}
        words, meta = fake(kernel=kernel, interleave_gated_silu=False, **args)
        assert meta_of([words, meta]) == [((k, n // 8), torch.int32), (four, torch.int32)]
        words, meta = compact(kernel=kernel, interleave_gated_silu=False, **args)
        assert meta_of([words, meta]) == [((k, n // 8), torch.int32), (three, torch.uint8)]


@pytest.mark.parametrize(
    ("m", "k", "n", "dtype"),
    [(1, 64, 96, torch.float16), (7, 128, 32, torch.float16), (33, 96, 160, torch.float32)],
)
def test_torch_mm_fake_equals_torch_mm(m: int, k: int, n: int, dtype: torch.dtype) -> None:
    a = torch.ones((m, k), dtype=dtype)
    b = torch.ones((k, n), dtype=dtype)
    fake = CATALOGUE.ops["torch.mm"].fake
    assert fake is not None
    got = fake(input=a.to("meta"), mat2=b.to("meta"))
    want = torch.mm(a, b)
    assert (tuple(got.shape), got.dtype) == (tuple(want.shape), want.dtype) == ((m, n), dtype)


# --- declared-only ops: the contract's shapes as literals -----------------------------------


def meta(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device="meta")


def call_fake(op: str, **kwargs: Any) -> list[tuple[tuple[int, ...], torch.dtype]]:
    fake = CATALOGUE.ops[op].fake
    assert fake is not None, op
    out = fake(**kwargs)
    tensors = out if isinstance(out, list) else [out]
    assert all(t.device.type == "meta" for t in tensors)
    return meta_of(tensors)


E4M3 = torch.float8_e4m3fn


@pytest.mark.parametrize(("n", "k"), [(3584, 5120), (5120, 1536), (1024, 4096)])
def test_qpn8_prepare_gives_k_by_n_uint8_codes(n: int, k: int) -> None:
    # fp8.md §3.3 and §4.5: fp8_qpn8_prepare_sm70 yields codes (K, N) uint8 from the (N, K)
    # E4M3 weight (the block raster or the Turing per-tensor scale beside it).
    for scale in (meta((n // 128, k // 128), torch.float32), meta((1,), torch.float32)):
        got = call_fake("fp8_qpn8_prepare_sm70", weight=meta((n, k), E4M3), weight_scale=scale)
        assert got == [((k, n), torch.uint8)]


@pytest.mark.parametrize(("n", "k"), [(3584, 5120), (5120, 1536), (2048, 4096)])
@pytest.mark.parametrize("gated", [False, True])
def test_fp8_turbomind_prepare_gives_codes_scales_and_meta(n: int, k: int, gated: bool) -> None:
    # fp8moe.md §4.2 (from the native code): codes (K, N) uint8, meta (2,) int64 (k_ld, q_ld).
    # The scales' shape is pinned by no source the linear contract read (fp8.md §4.2):
    # routectl's stand-in keeps the checkpoint's FP32 (N/128, K/128) raster.
    raster = (n // 128, k // 128)
    got = call_fake(
        "fp8_sm70_prepare",
        weight=meta((n, k), E4M3),
        weight_scale=meta(raster, torch.float32),
        group_size=128,
        interleave_gated=gated,
    )
    assert got == [((k, n), torch.uint8), (raster, torch.float32), ((2,), torch.int64)]


@pytest.mark.parametrize(
    ("n", "k", "padded"), [(4120, 5120, 4128), (5120, 1536, 5120), (33, 256, 64)]
)
def test_nvfp4_qpn2_prepare_pads_n_to_the_given_rows(n: int, k: int, padded: int) -> None:
    # core.md §2.1: packed weight (N, K/2) uint8, block scales (N, ceil(K/16)) E4M3; QPN2 pads
    # N with zero rows to a multiple of 32 (cropped after the GEMM), each row keeping its bytes.
    weight = meta((n, k // 2), torch.uint8)
    scales = meta((n, -(-k // 16)), E4M3)
    assert call_fake(
        "nvfp4_qpn2_prepare_sm70", weight=weight, weight_scale=scales, padded_n=padded
    ) == [((padded, k // 2), torch.uint8), ((padded, -(-k // 16)), E4M3)]
    assert call_fake("nvfp4_qpn2_prepare_scales_sm70", weight_scale=scales, padded_n=padded) == [
        ((padded, -(-k // 16)), E4M3)
    ]


@pytest.mark.parametrize(("n", "k"), [(4096, 5120), (5120, 1536)])
def test_nvfp4_turbomind_and_qpn4_prepare_shapes(n: int, k: int) -> None:
    # TurboMind's NVFP4 copy: (padded N, K/2) codes; FP16 scales transposed to (groups, N), or
    # the E4M3 codes kept (N, groups) as bytes when compact (core.md §2.1, compact scales).
    weight = meta((n, k // 2), torch.uint8)
    scales = meta((n, k // 16), E4M3)
    base = {
        "weight": weight,
        "weight_scale": scales,
        "weight_global_scale": meta((1,), torch.float32),
    }
    for compact, scale_meta in [
        (False, ((k // 16, n + 32), torch.float16)),
        (True, ((n + 32, k // 16), torch.uint8)),
    ]:
        got = call_fake(
            "nvfp4_sm70_prepare",
            **base,
            padded_n=n + 32,
            interleave_gated_silu=False,
            prescale_for_batch=False,
            compact_scales=compact,
        )
        assert got == [((n + 32, k // 2), torch.uint8), scale_meta]
    assert call_fake("nvfp4_qpn4_prepare_sm70", **base, interleave_gated_silu=True) == [
        ((n, k // 2), torch.uint8),
        ((k // 16, n), torch.float16),
    ]
    assert call_fake(
        "nvfp4_qpn4_prepare_scale_code_sm70",
        weight_scale=scales,
        weight_global_scale=meta((1,), torch.float32),
        interleave_gated_silu=False,
    ) == [((n, k // 16), torch.uint8)]


def test_every_declared_fake_is_checked_here() -> None:
    # A new fake must come with its contract's shapes (or its implementation) in this file.
    checked = {
        PREPARE_OP,
        PREPARE_COMPACT_OP,
        "torch.mm",
        "fp8_qpn8_prepare_sm70",
        "fp8_sm70_prepare",
        "nvfp4_qpn2_prepare_sm70",
        "nvfp4_qpn2_prepare_scales_sm70",
        "nvfp4_sm70_prepare",
        "nvfp4_qpn4_prepare_sm70",
        "nvfp4_qpn4_prepare_scale_code_sm70",
        "awq_moe_build_strided_ptrs",
    }
    assert {name for name, spec in CATALOGUE.ops.items() if spec.fake is not None} == checked


def test_strided_pointer_table_has_one_entry_per_tensor() -> None:
    # fp8.md §3.6: the grouped decode lane's one table over its groups' codes and scales; the
    # fake gives one int64 address per tensor it is built from (the snapshot's 32 bytes for
    # two groups' codes and scales).
    tensors = [meta((4096, 1024), torch.uint8), meta((8, 32), torch.float32)] * 2
    assert call_fake("awq_moe_build_strided_ptrs", tensors=tensors) == [((4,), torch.int64)]
