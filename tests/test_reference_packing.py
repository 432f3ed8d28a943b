"""Layouts, packers, unpackers and the prepare ops (round trips against each other)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import native.reference  # noqa: F401  (registers the ops)
from native.awq_layout import (
    CHECKPOINT_NIBBLE_COLUMNS,
    PREPARED_K_NIBBLES,
    fake_prepare_outputs,
    metadata_dtype,
    metadata_layout,
    prepared_shapes,
    prepared_word_index,
    qpn_m1_arguments,
)
from native.awq_schemas import GROUP_SIZE, W2_K, W2_N, W13_K, W13_N
from native.reference.fp64 import round_fp16_by_quantum
from native.reference.packing import (
    ExpertWeights,
    PreparedExpert,
    deinterleave,
    interleave,
    pack_checkpoint,
    pack_prepared,
    random_expert,
    unpack_checkpoint,
    unpack_prepared,
)

OPS = torch.ops.routectl
REPO = Path(__file__).resolve().parents[1]


def prepare_op(compact: bool):
    return OPS.awq_sm70_prepare_compact if compact else OPS.awq_sm70_prepare


def assert_same_logical(a: ExpertWeights, b: ExpertWeights) -> None:
    assert torch.equal(a.codes.to(torch.int32), b.codes.to(torch.int32))
    assert torch.equal(a.zeros.to(torch.int32), b.zeros.to(torch.int32))
    assert torch.equal(a.scales.view(torch.int16), b.scales.view(torch.int16))


# --- the contract's layouts, worked by hand ----------------------------------------------


def test_nibble_orders_and_word_index_from_the_contract() -> None:
    assert CHECKPOINT_NIBBLE_COLUMNS == (0, 2, 4, 6, 1, 3, 5, 7)
    assert PREPARED_K_NIBBLES == (0, 4, 1, 5, 2, 6, 3, 7)
    # n = 33 is tile 1, c 1; k = 8 is k8 1; K = 16 has 2 k8 rows: (1*2 + 1)*32 + 1.
    assert prepared_word_index(8, 33, 16) == 97
    assert prepared_word_index(0, 0, 16) == 0 and prepared_word_index(7, 31, 16) == 31


def _as_uint32(v: int) -> int:
    return v & 0xFFFFFFFF


def test_hand_packed_words() -> None:
    codes = torch.zeros((16, 64), dtype=torch.int32)
    codes[8:16, 33] = torch.arange(1, 9)  # k 8..15 of column 33 hold 1..8
    codes[0, 0:8] = torch.arange(1, 9)  # row 0, columns 0..7 hold 1..8
    weights = ExpertWeights(
        codes, torch.zeros((1, 64), dtype=torch.int32), torch.ones((1, 64), dtype=torch.float16)
    )
    # Prepared: logical i in nibble (0,4,1,5,2,6,3,7)[i] -> nibbles 7..0 read 8 6 4 2 7 5 3 1.
    flat = pack_prepared(weights, compact=False).words.reshape(-1)
    assert _as_uint32(int(flat[97])) == 0x86427531
    # Row 0's codes sit at k = 0 of columns 0..7: one code per word, nibble 0 each.
    assert [int(flat[c]) for c in range(8)] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert int(torch.count_nonzero(flat)) == 9
    # AutoAWQ: nibble i holds column (0,2,4,6,1,3,5,7)[i] -> nibbles 7..0 read 8 6 4 2 7 5 3 1.
    qweight = pack_checkpoint(weights).qweight
    assert _as_uint32(int(qweight[0, 0])) == 0x86427531
    assert int(torch.count_nonzero(qweight[8:16])) == 8  # one code per row in word 4


def test_metadata_records() -> None:
    scales = torch.tensor([[0.5, 0.001]], dtype=torch.float16)
    zeros = torch.tensor([[3, 15]], dtype=torch.int32)
    weights = ExpertWeights(
        torch.zeros((32, 32), dtype=torch.int32), zeros.repeat(1, 16), scales.repeat(1, 16)
    )
    four = pack_prepared(weights, compact=False).metadata
    three = pack_prepared(weights, compact=True).metadata
    scale_bits = [int(b) & 0xFFFF for b in scales.view(torch.int16)[0]]
    bias = round_fp16_by_quantum(
        torch.tensor([-1.5, -15 * float(scales[0, 1])], dtype=torch.float64)
    )
    bias_bits = [int(b) & 0xFFFF for b in bias.view(torch.int16)]
    assert bias[0].item() == -1.5
    for n in range(2):
        assert _as_uint32(int(four[0, n])) == scale_bits[n] | (bias_bits[n] << 16)
        assert three[0, n].tolist() == [scale_bits[n] & 0xFF, scale_bits[n] >> 8, int(zeros[0, n])]


def test_qpn_argument_bytes_match_contract() -> None:
    # docs/contracts/core.md §3.2: bytes per layer per rank over all 512 experts.
    def nbytes(compact: bool, names: tuple[str, ...]) -> int:
        specs = qpn_m1_arguments(compact)
        size = {"int32": 4, "uint8": 1}
        total = 0
        for name in names:
            count = 1
            for d in specs[name].shape:
                count *= d
            total += count * size[specs[name].dtype]
        return total

    assert nbytes(False, ("w13", "w2")) == 314_572_800
    assert nbytes(False, ("s13", "s2")) == 78_643_200
    assert nbytes(True, ("s13", "s2")) == 58_982_400
    assert qpn_m1_arguments(False)["s13"].shape == (512, 80, 320)
    assert qpn_m1_arguments(True)["s2"].shape == (512, 5, 2560, 3)
    assert (metadata_layout(True), metadata_dtype(True)) == ("3-byte", "uint8")
    assert (metadata_layout(False), metadata_dtype(False)) == ("4-byte", "int32")


def test_prepared_shapes_and_fake_outputs() -> None:
    assert prepared_shapes(2560, 320, 32, False) == ((2560, 40), (80, 320))
    assert prepared_shapes(160, 2560, 32, True) == ((160, 320), (5, 2560, 3))
    with pytest.raises(ValueError, match="N"):
        prepared_shapes(64, 48, 32, False)
    words, meta = fake_prepare_outputs(
        torch.empty((160, 320), dtype=torch.int32, device="meta"), 32, True
    )
    assert (words.shape, words.dtype, words.device.type) == ((160, 320), torch.int32, "meta")
    assert (meta.shape, meta.dtype) == ((5, 2560, 3), torch.uint8)


def test_layout_modules_import_without_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import native.awq_layout, native.awq_schemas\n"
        "print(native.awq_layout.prepared_shapes(2560, 320, 32, True))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "((2560, 40), (80, 320, 3))"


# --- round trips -----------------------------------------------------------------------------


@st.composite
def experts(draw: st.DrawFn) -> ExpertWeights:
    group = draw(st.sampled_from([8, 16, 32, 64]))
    k = draw(st.integers(1, 4)) * max(group, 8)
    n = draw(st.integers(1, 3)) * 32
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    return random_expert(k, n, group, gen)


@settings(max_examples=25, deadline=None)
@given(experts(), st.booleans(), st.booleans())
def test_checkpoint_prepare_unpack_round_trip(
    weights: ExpertWeights, compact: bool, interleave_gated_silu: bool
) -> None:
    checkpoint = pack_checkpoint(weights)
    assert_same_logical(unpack_checkpoint(checkpoint), weights)
    words, meta = prepare_op(compact)(
        checkpoint.qweight,
        checkpoint.scales,
        checkpoint.qzeros,
        weights.group_size,
        interleave_gated_silu,
    )
    packed = pack_prepared(weights, compact=compact, interleave_gated_silu=interleave_gated_silu)
    assert torch.equal(words, packed.words) and torch.equal(meta, packed.metadata)
    unpacked = unpack_prepared(packed, weights.group_size, interleaved=interleave_gated_silu)
    assert_same_logical(unpacked.logical(), weights)


@pytest.mark.parametrize("compact", [False, True], ids=["4-byte", "3-byte"])
@pytest.mark.parametrize(
    ("k", "n", "interleaved"), [(W13_K, W13_N, True), (W2_K, W2_N, False)], ids=["w13", "w2"]
)
def test_full_geometry_prepare_equals_packer(
    compact: bool, k: int, n: int, interleaved: bool
) -> None:
    weights = random_expert(k, n, GROUP_SIZE, torch.Generator().manual_seed(k + n))
    checkpoint = pack_checkpoint(weights)
    words, meta = prepare_op(compact)(
        checkpoint.qweight, checkpoint.scales, checkpoint.qzeros, GROUP_SIZE, interleaved
    )
    packed = pack_prepared(weights, compact=compact, interleave_gated_silu=interleaved)
    assert torch.equal(words, packed.words) and torch.equal(meta, packed.metadata)
    unpacked = unpack_prepared(PreparedExpert(words, meta), GROUP_SIZE, interleaved=interleaved)
    assert_same_logical(unpacked.logical(), weights)


def test_interleave_puts_gate_on_even_and_up_on_odd_columns() -> None:
    weights = random_expert(32, 64, 32, torch.Generator().manual_seed(4))
    mixed = interleave(weights)
    assert torch.equal(mixed.codes[:, 0::2], weights.codes[:, :32])
    assert torch.equal(mixed.codes[:, 1::2], weights.codes[:, 32:])
    assert torch.equal(mixed.scales[:, 5], weights.scales[:, 32 + 2])
    assert_same_logical(deinterleave(mixed), weights)


def test_layouts_hold_the_same_biases() -> None:
    weights = random_expert(64, 64, 32, torch.Generator().manual_seed(8))
    four = unpack_prepared(pack_prepared(weights, compact=False), 32)
    three = unpack_prepared(pack_prepared(weights, compact=True), 32)
    assert torch.equal(four.biases.view(torch.int16), three.biases.view(torch.int16))
    assert torch.equal(four.zeros, three.zeros)
