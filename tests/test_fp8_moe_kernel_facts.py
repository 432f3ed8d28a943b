"""The Volta block-FP8 MoE kernel's facts called directly (`native.kernels.fp8_moe`), each
literal from docs/contracts/fp8moe.md: a rank's layer from a model description (§3.1), the
resident bytes of the prepared banks and the persistent workspace by type (§4.2-4.4, the
contract's tables), and the capability, construction and native prepare checks with their codes
and messages (§2.2, §3.2, §6), on both sides of each boundary and in the contract's order.

The category tests see these through replayed rows; these pin each figure and verdict alone.
"""

from __future__ import annotations

from typing import Any

import pytest

from native.catalogue import CATALOGUE
from native.kernels.fp8_moe import Fp8MoeLayer, TurboMindFp8MoE, missing_op
from routectl.namespaces.native_ns import InMemoryNamespace
from routectl.reasons import Reason

# 35b_a3b_fp8 (§4.3): E 256, top-k 8, H 2048, I 512 in total.
MODEL = {"prefix": "model.layers.3.mlp.experts", "layer_id": 3, "experts": 256, "top_k": 8}
MODEL_35B = {**MODEL, "hidden": 2048, "intermediate": 512}


def layer(**fields: Any) -> Fp8MoeLayer:
    base: dict[str, Any] = {
        "prefix": "p",
        "layer_id": 0,
        "experts": 256,
        "top_k": 8,
        "hidden": 2048,
        "intermediate": 128,
    }
    return Fp8MoeLayer(**{**base, **fields})


def test_a_rank_s_layer_from_the_model_description() -> None:
    assert Fp8MoeLayer.for_rank(MODEL_35B, 4) == Fp8MoeLayer(
        prefix="model.layers.3.mlp.experts",
        layer_id=3,
        experts=256,
        top_k=8,
        hidden=2048,
        intermediate=128,
        block=(128, 128),
        bias=False,
        activation="silu",
    )
    assert Fp8MoeLayer.for_rank(MODEL_35B, 2).intermediate == 256
    # `local_intermediate` is already one rank's: TP does not divide it again.
    local = Fp8MoeLayer.for_rank({**MODEL_35B, "local_intermediate": 96}, 4)
    assert local.intermediate == 96
    # The description's own block (None: per-tensor FP8), bias and activation are kept.
    stated = Fp8MoeLayer.for_rank(
        {**MODEL_35B, "block": [64, 128], "bias": True, "activation": "gelu"}, 4
    )
    assert (stated.block, stated.bias, stated.activation) == ((64, 128), True, "gelu")
    assert Fp8MoeLayer.for_rank({**MODEL_35B, "block": None}, 4).block is None


# (layer, W13 codes, W2 codes, W13 scales, W2 scales) from §4.2-4.3: codes (K, N) uint8 and
# scales (ceil(K/128), N) FP16 per expert, W13 K = H, N = 2I and W2 K = I, N = H.
BANKS = [
    (layer(intermediate=128), 134_217_728, 67_108_864, 2_097_152, 1_048_576),
    (layer(intermediate=256), 268_435_456, 134_217_728, 4_194_304, 2_097_152),
    (layer(experts=128, intermediate=96), 50_331_648, 25_165_824, 786_432, 524_288),
]


@pytest.mark.parametrize(("moe", "w13", "w2", "w13_scales", "w2_scales"), BANKS)
def test_bank_bytes_of_the_contract_table(
    moe: Fp8MoeLayer, w13: int, w2: int, w13_scales: int, w2_scales: int
) -> None:
    pointers = moe.experts * 16
    assert moe.bank_bytes() == {
        "w13_codes": w13,
        "w13_scales": w13_scales,
        "w13_weight_ptrs": pointers,
        "w13_scale_ptrs": pointers,
        "w2_codes": w2,
        "w2_scales": w2_scales,
        "w2_weight_ptrs": pointers,
        "w2_scale_ptrs": pointers,
    }
    # The dequant fallback's FP16 banks: twice the code bytes (§2.3).
    assert moe.dequant_bytes() == {"w13_fp16": 2 * w13, "w2_fp16": 2 * w2}


def test_the_table_totals() -> None:
    # §4.3's totals: codes + scales per layer per rank (TP2, TP4, the partial_96_tp4 probe).
    totals = [
        sum(v for k, v in m.bank_bytes().items() if k.endswith(("codes", "scales")))
        for m, *_ in BANKS
    ]
    assert totals == [204_472_320, 408_944_640, 76_808_192]


def workspace(e: int, k: int, h: int, i: int) -> dict[str, int]:
    """§4.4's table, buffer by buffer (P = 32 tokens, S = 32 x top_k slots)."""
    p, s = 32, 32 * k
    fp16 = {
        "output": p * h,
        "permuted_input": s * h,
        "sorted_output": s * h,
        "intermediate": s * i,
        "gate_up": s * 2 * i,
    }
    int32 = {
        "expert_offsets": e + 1,
        "inv_permuted_idx": p * k,
        "topk_ids": p * k,
        "index_buffers": 6 * s,
        "active_expert_offsets": s + 1,
        "broadcast_input_indices": k,
        "dense_expert_ids": e,
    }
    return {
        "fp16": 2 * sum(fp16.values()),
        "int32": 4 * sum(int32.values()),
        "int64": 8 * (e + 1),
        "fp32": 4 * k,
        "pointer_scratch": 6 * k * 16,
    }


@pytest.mark.parametrize(
    ("moe", "total"),
    [
        (layer(intermediate=128), 2_438_992),  # 35b_a3b_fp8 TP4 (§4.4)
        (layer(intermediate=256), 2_635_600),  # TP2
        (layer(experts=128, top_k=4, hidden=1024, intermediate=96), None),
        (layer(experts=60, top_k=6, hidden=3584, intermediate=320), None),
    ],
)
def test_the_persistent_workspace_by_type(moe: Fp8MoeLayer, total: int | None) -> None:
    got = moe.workspace_bytes()
    assert got == workspace(moe.experts, moe.top_k, moe.hidden, moe.intermediate)
    if total is not None:
        assert sum(got.values()) == total


def test_missing_op_reason() -> None:
    assert missing_op("fp8_sm70_prepare") == Reason(
        "missing_native_ops", "SM70 TurboMind op _C::fp8_sm70_prepare is not available"
    )


@pytest.mark.parametrize(
    ("capability", "ok"),
    [(61, False), (69, False), (70, True), (72, True), (74, True), (75, False)],
)
def test_capability_is_the_volta_class(capability: int, ok: bool) -> None:
    got = TurboMindFp8MoE.is_supported(capability)
    want = (
        (True, None)
        if ok
        else (False, Reason("capability", f"capability {capability} is outside 70..74"))
    )
    assert got == want


SILU = "activation 'gelu' is not SiLU: the SM70 FP8 MoE method always computes SiLU(gate) * up"


@pytest.mark.parametrize(
    ("fields", "code", "message"),
    [
        ({"block": None}, "block_quant_required", "requires block-wise FP8 weights"),
        # The first failing check in §2.2's order wins.
        (
            {"block": None, "bias": True, "activation": "gelu"},
            "block_quant_required",
            "requires block-wise FP8 weights",
        ),
        (
            {"block": (64, 128)},
            "fp8_block_size",
            "only supports FP8 block size [128, 128], got [64, 128]",
        ),
        (
            {"block": (128, 64), "bias": True},
            "fp8_block_size",
            "only supports FP8 block size [128, 128], got [128, 64]",
        ),
        ({"bias": True}, "expert_bias", "SM70 FP8 MoE does not support bias yet"),
        (
            {"bias": True, "activation": "gelu"},
            "expert_bias",
            "SM70 FP8 MoE does not support bias yet",
        ),
        ({"activation": "gelu"}, "activation_not_silu", SILU),
    ],
)
def test_construction_checks_in_order(fields: dict[str, Any], code: str, message: str) -> None:
    assert TurboMindFp8MoE.construction_check(layer(**fields)) == (False, Reason(code, message))


def test_a_block_fp8_silu_layer_without_bias_is_constructed() -> None:
    assert TurboMindFp8MoE.construction_check(layer(block=[128, 128])) == (True, None)


SHAPE = "fp8_sm70_prepare: K and N must be multiples of 8"
SCALES = "fp8_sm70_prepare: output scale block mismatch"


@pytest.mark.parametrize(
    ("hidden", "intermediate", "reason"),
    [
        (2048, 128, None),
        # W2 loads with partial blocks for I % 128 in 65..127, W13 fails for 1..64 (§3.2).
        (2048, 96, None),
        (2048, 200, None),
        (
            2048,
            192,
            Reason("fp8_prepare_scales", f"{SCALES} (W13: 4 scale rows for N 384, expected 3)"),
        ),
        (
            2048,
            64,
            Reason("fp8_prepare_scales", f"{SCALES} (W13: 2 scale rows for N 128, expected 1)"),
        ),
        (
            2048,
            136,
            Reason("fp8_prepare_scales", f"{SCALES} (W13: 4 scale rows for N 272, expected 3)"),
        ),
        # Only K of W2 off the multiple of 8 (N of W13 = 2I is a multiple): refused at W2.
        (2048, 100, Reason("fp8_prepare_shape", f"{SHAPE} (W2 K 100, N 2048)")),
        (2052, 128, Reason("fp8_prepare_shape", f"{SHAPE} (W13 K 2052, N 256)")),
    ],
)
def test_the_native_prepare_checks(hidden: int, intermediate: int, reason: Reason | None) -> None:
    got = TurboMindFp8MoE.prepare_check(layer(hidden=hidden, intermediate=intermediate))
    assert got == ((True, None) if reason is None else (False, reason))


def test_can_implement_checks_construction_then_ops_then_prepare() -> None:
    full = InMemoryNamespace(CATALOGUE.ops)
    bad_shape = layer(intermediate=192)
    assert TurboMindFp8MoE.can_implement(bad_shape, full) == TurboMindFp8MoE.prepare_check(
        bad_shape
    )
    assert TurboMindFp8MoE.prepare_check(bad_shape)[0] is False
    no_ptrs = full.without("awq_moe_build_strided_ptrs")
    assert TurboMindFp8MoE.can_implement(bad_shape, no_ptrs) == (
        False,
        missing_op("awq_moe_build_strided_ptrs"),
    )
    neither = no_ptrs.without("fp8_sm70_prepare")
    assert TurboMindFp8MoE.can_implement(bad_shape, neither) == (
        False,
        missing_op("fp8_sm70_prepare"),
    )
    assert TurboMindFp8MoE.can_implement(layer(bias=True), neither) == (
        False,
        Reason("expert_bias", "SM70 FP8 MoE does not support bias yet"),
    )
    assert TurboMindFp8MoE.can_implement(layer(), full) == (True, None)
