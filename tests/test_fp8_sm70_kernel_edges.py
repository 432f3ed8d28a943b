"""Edges of the Volta FP8 linear kernels (`native.kernels.fp8_sm70`) that the capability,
plan and category tests left open (benchmarks/MUTATION.md, seventh session): the first refusal
of both kernels in full (a plain layer handed where the serialized W8A16 request is expected:
fp8.md §2.3); the block kernel's plan preparing what it planned (its TurboMind copy on Volta);
the TurboMind layout's prescaled entries, gated entry and activation check at the M values on
both sides of each; and the QPN8 layouts' resident tensors and whole dispatch plans.
"""

from __future__ import annotations

import pytest
import torch

from native.kernels import fp8_sm70 as fs
from native.layers import BlockFp8Layer
from policies import PROJECT
from routectl.errors import ActivationError
from routectl.reasons import Reason
from routectl.replay.harness import RecordingNamespace
from tests.test_mutation_fp8 import activations, layer, options, prepared_turbomind, run

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


# --- TurboMind preparation and dispatch at the edges (fp8.md §3.4-3.6, §4.3-4.4) ------------

PRESCALED_M1 = "fp8_gemm_sm70_prescaled_m1_out"
PREFILL_PRESCALED = "fp8_gemm_sm70_prefill_prescaled_out"
GEMM = "fp8_gemm_sm70_out"
SILU_AND_MUL = "silu_and_mul"


def m1_layer() -> BlockFp8Layer:
    # §3.6: the prescaled-decode layer, fused_wqa_wkv at TP 1, K 4096, N 1536, UE8M0 scales.
    return layer("fused_wqa_wkv", 4096, 1536, tp=1, e8m0=True)


@pytest.mark.parametrize("m", [1, 2, 8000])
def test_a_layer_without_prescaled_scales_never_takes_the_prescaled_entries(m: int) -> None:
    # Prescaled decode and the prefill buffer off: every M, M = 1 and 8000 included, is the
    # plain GEMM (qkv_proj would bind exact-dense; off here so the plain call shows).
    opts = options(prescaled_decode=False, prefill_prescaled=False, prefill_exact_dense=False)
    ns, prepared = prepared_turbomind(layer(), opts)
    assert sorted(prepared.resident) == ["fp8_codes", "fp8_scales"]
    assert run(ns, prepared.apply, activations(m, 5120)) == ([GEMM], (m, 3584))


def test_the_prescaled_decode_scales_serve_m1_only() -> None:
    opts = options(pp2_tp4_contract=True, prefill_prescaled=False, prefill_exact_dense=False)
    ns, prepared = prepared_turbomind(m1_layer(), opts)
    assert sorted(prepared.resident) == ["fp8_codes", "fp8_scales", "prescaled_decode_scales"]
    assert run(ns, prepared.apply, activations(1, 4096)) == ([PRESCALED_M1], (1, 1536))
    assert run(ns, prepared.apply, activations(2, 4096)) == ([GEMM], (2, 1536))


def test_the_prefill_prescaled_buffer_is_resident_and_serves_m_8000() -> None:
    opts = options(prescaled_decode=False, prefill_exact_dense=False)
    ns, prepared = prepared_turbomind(layer(), opts)
    buffer = prepared.resident["prefill_prescaled_scales"]
    scales = prepared.resident["fp8_scales"]
    assert (tuple(buffer.shape), buffer.dtype) == (tuple(scales.shape), scales.dtype)
    assert run(ns, prepared.apply, activations(8000, 5120)) == ([PREFILL_PRESCALED], (8000, 3584))
    assert run(ns, prepared.apply, activations(7999, 5120)) == ([GEMM], (7999, 3584))


def gate_up() -> BlockFp8Layer:
    built = layer("gate_up_proj", 5120, 3584)
    assert built.gated_candidate
    return built


@pytest.mark.parametrize("m", [0, 4])
def test_the_gated_layout_gives_half_the_rows_fused_or_through_silu_and_mul(m: int) -> None:
    off = {"prefill_exact_dense": False, "prefill_prescaled": False}
    ns, fused = prepared_turbomind(gate_up(), options(**off))
    assert fused.apply_gated is not None
    ops = [] if m == 0 else [GEMM]
    assert run(ns, fused.apply_gated, activations(m, 5120)) == (ops, (m, 1792))
    assert ns.calls[0]["plan"]["gated"] is True
    # Gated SiLU off: the plain call and then the engine's silu_and_mul on the full result.
    ns, plain = prepared_turbomind(gate_up(), options(gated_silu=False, **off))
    assert plain.apply_gated is not None
    ops = [] if m == 0 else [GEMM, SILU_AND_MUL]
    assert run(ns, plain.apply_gated, activations(m, 5120)) == (ops, (m, 1792))


def test_a_layer_that_is_not_a_gate_up_pair_has_no_gated_entry() -> None:
    _ns, prepared = prepared_turbomind(layer(), options())
    assert prepared.apply_gated is None


def test_activations_other_than_fp16_are_refused_by_name() -> None:
    _ns, prepared = prepared_turbomind(gate_up(), options())
    assert prepared.apply_gated is not None
    for entry in (prepared.apply, prepared.apply_gated):
        with pytest.raises(ActivationError) as err:
            entry(activations(2, 5120, dtype=torch.bfloat16))
        assert str(err.value) == "SM70 TurboMind FP8 requires float16 activations, got bfloat16"


# --- the QPN8 layouts' preparation and dispatch (fp8.md §2.3, §3.2, §4.3) -------------------

QPN8_DISPATCH = "fp8_qpn8_dispatch_sm70_out"


def qpn8_call(m: int, split_k: int, gated: bool) -> dict[str, object]:
    plan = {"m": m, "k": 5120, "split_k": split_k, "chains": 2, "prefetch": False, "gated": gated}
    return {"op": QPN8_DISPATCH, "plan": plan}


@pytest.mark.parametrize("role", ["qkv_proj", "gate_up_proj"])
def test_the_qpn8_layout_holds_its_codes_and_dispatches_every_m_above_0(role: str) -> None:
    # K 5120, N 3584: the plain tuning (16, 2, no prefetch); the gated pair's is (8, 2).
    ns, prepared = prepared_turbomind(layer(role, 5120, 3584), options(qpn8=True))
    assert sorted(prepared.resident) == ["qpn8_codes", "weight_scale_inv"]
    codes = prepared.resident["qpn8_codes"]
    assert (tuple(codes.shape), codes.dtype) == ((5120, 3584), torch.uint8)
    assert ns.calls == [{"op": "fp8_qpn8_prepare_sm70", "plan": {"n": 3584, "k": 5120}}]
    for m in (0, 1, 9):
        start = ns.mark()
        out = prepared.apply(activations(m, 5120))
        assert tuple(out.shape) == (m, 3584)
        assert ns.since(start) == ([] if m == 0 else [qpn8_call(m, 16, False)])
    if role == "qkv_proj":
        assert prepared.apply_gated is None
        return
    assert prepared.apply_gated is not None
    start = ns.mark()
    assert tuple(prepared.apply_gated(activations(9, 5120)).shape) == (9, 1792)
    assert ns.since(start) == [qpn8_call(9, 8, True)]


def test_the_qpn8_layout_without_gated_silu_runs_silu_and_mul_after_the_plain_dispatch() -> None:
    opts = options(qpn8=True, gated_silu=False)
    ns, prepared = prepared_turbomind(layer("gate_up_proj", 5120, 3584), opts)
    assert prepared.apply_gated is not None
    start = ns.mark()
    assert tuple(prepared.apply_gated(activations(9, 5120)).shape) == (9, 1792)
    assert ns.since(start) == [qpn8_call(9, 16, False), {"op": SILU_AND_MUL, "plan": {"m": 9}}]


def test_the_block_kernel_s_calls_whole_with_its_turbomind_copy() -> None:
    ns = RecordingNamespace(PROJECT.catalogue)
    built = layer("gate_up_proj", 5120, 3584)
    prepared = fs.prepare_block_qpn8(
        built, built.checkpoint_tensors("meta"), ns, capability=70, turbomind_copy=True
    )
    assert ns.calls == [
        {"op": "fp8_qpn8_prepare_sm70", "plan": {"n": 3584, "k": 5120}},
        {"op": "fp8_sm70_prepare", "plan": {"n": 3584, "k": 5120, "group": 128, "gated": False}},
    ]
    shapes = {k: (tuple(v.shape), v.dtype) for k, v in prepared.resident.items()}
    assert shapes == {
        "qpn8_codes": ((5120, 3584), torch.uint8),
        "weight_scale_inv": ((28, 40), torch.float32),
        "turbomind_codes": ((5120, 3584), torch.uint8),
        "turbomind_scales": ((28, 40), torch.float32),
    }
    assert prepared.apply is not None
    start = ns.mark()
    prepared.apply(activations(1, 5120))
    prepared.apply(activations(9, 5120))
    turbomind = {"m": 9, "k": 5120, "group": 128, "k_ld": 5120, "q_ld": 3584, "gated": False}
    assert ns.since(start) == [
        {
            "op": "fp8_qpn8_gemm_sm70_out",
            "plan": {"m": 1, "k": 5120, "split_k": 16, "chains": 2, "prefetch": False},
        },
        {"op": "fp8_gemm_sm70_out", "plan": turbomind},
    ]
    # The block kernel's gate/up entry is the unfused one (the inherited fused entry declines).
    assert prepared.apply_gated is not None
    start = ns.mark()
    assert tuple(prepared.apply_gated(activations(1, 5120)).shape) == (1, 1792)
    assert [c["op"] for c in ns.since(start)] == ["fp8_qpn8_gemm_sm70_out", SILU_AND_MUL]
    plain = fs.prepare_block_qpn8(
        layer(), layer().checkpoint_tensors("meta"), ns, capability=70, turbomind_copy=False
    )
    assert plain.apply_gated is None


@pytest.mark.parametrize(
    ("k", "n", "tuning"),
    [
        # Table entries that differ from the rule (16 or 8 split-K, 2 chains, no prefetch):
        # a lookup that lost N or the plain call's `gated=False` falls back to the rule.
        (4352, 5120, (16, 1, False)),
        (5120, 8704, (16, 1, True)),
        # Off the table: the rule, on both sides of K % 256.
        (4608, 5120, (16, 2, False)),
        (4480, 5120, (8, 2, False)),
    ],
)
def test_the_block_kernel_s_decode_gemm_takes_its_shape_s_table_tuning(
    k: int, n: int, tuning: tuple[int, int, bool]
) -> None:
    ns = RecordingNamespace(PROJECT.catalogue)
    built = layer("o_proj", k, n)
    prepared = fs.prepare_block_qpn8(
        built, built.checkpoint_tensors("meta"), ns, capability=70, turbomind_copy=False
    )
    assert prepared.apply is not None
    start = ns.mark()
    prepared.apply(activations(1, k))
    split_k, chains, prefetch = tuning
    plan = {"m": 1, "k": k, "split_k": split_k, "chains": chains, "prefetch": prefetch}
    assert ns.since(start) == [{"op": "fp8_qpn8_gemm_sm70_out", "plan": plan}]
