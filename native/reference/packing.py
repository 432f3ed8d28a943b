"""Packers and unpackers of AWQ checkpoint tensors and SM70 prepared banks.

Written from docs/contracts/core.md §6's index formulas (scatter/gather by flat index),
independently of the reshape/permute code in `numerics` that the reference ops run, so that each
checks the other. Logical weights: codes (K, N) and zeros (K/g, N) in 0..15, scales (K/g, N) fp16.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from native.awq_layout import (
    CODE_BITS,
    CODE_MASK,
    CODES_PER_WORD,
    checkpoint_nibble,
    checkpoint_shapes,
    interleaved_source_column,
    metadata_index,
    prepared_nibble,
    prepared_shapes,
    prepared_word_index,
    qpn_m1_arguments,
)
from native.awq_schemas import GROUP_SIZE, W2_K, W2_N, W13_K, W13_N
from native.reference.fp64 import round_fp16_by_quantum


@dataclass(frozen=True)
class ExpertWeights:
    """One expert's logical AWQ weights, columns in checkpoint order."""

    codes: torch.Tensor  # (K, N) integers 0..15
    zeros: torch.Tensor  # (K/g, N) integers 0..15
    scales: torch.Tensor  # (K/g, N) float16

    @property
    def group_size(self) -> int:
        return self.codes.shape[0] // self.scales.shape[0]


@dataclass(frozen=True)
class AwqCheckpoint:
    """AutoAWQ GEMM tensors of one expert."""

    qweight: torch.Tensor  # (K, N/8) int32
    qzeros: torch.Tensor  # (K/g, N/8) int32
    scales: torch.Tensor  # (K/g, N) float16


@dataclass(frozen=True)
class PreparedExpert:
    words: torch.Tensor  # (K, N/8) int32, N32/K8 tiles
    metadata: torch.Tensor  # (K/g, N) int32 or (K/g, N, 3) uint8

    @property
    def compact(self) -> bool:
        return self.metadata.dtype == torch.uint8


@dataclass(frozen=True)
class UnpackedExpert:
    """What a prepared expert holds, in its prepared column order.

    `biases` are what the kernel adds (stored for 4-byte, fp16(-zero*scale) for 3-byte);
    `zeros` are stored for 3-byte and recovered as round(-bias/scale) for 4-byte, which is
    exact for zeros 0..15 while zero*scale stays in fp16's normal range.
    """

    codes: torch.Tensor
    zeros: torch.Tensor
    scales: torch.Tensor
    biases: torch.Tensor

    def logical(self) -> ExpertWeights:
        return ExpertWeights(self.codes, self.zeros, self.scales)


def random_expert(k: int, n: int, group: int, generator: torch.Generator) -> ExpertWeights:
    """Random codes and zeros 0..15, scales rand*0.01 + 0.001 (the seed test's choice)."""
    codes = torch.randint(0, 16, (k, n), generator=generator, dtype=torch.int32)
    zeros = torch.randint(0, 16, (k // group, n), generator=generator, dtype=torch.int32)
    scales = (torch.rand((k // group, n), generator=generator) * 0.01 + 0.001).half()
    return ExpertWeights(codes, zeros, scales)


def _to_int32_bits(v: torch.Tensor) -> torch.Tensor:
    v = v & 0xFFFFFFFF
    return torch.where(v >= 2**31, v - 2**32, v).to(torch.int32)


def _fp16_bits(h: torch.Tensor) -> torch.Tensor:
    return h.contiguous().view(torch.int16).to(torch.int64) & 0xFFFF


def _fp16_of_bits(bits: torch.Tensor) -> torch.Tensor:
    b = bits.to(torch.int64) & 0xFFFF
    return torch.where(b >= 2**15, b - 2**16, b).to(torch.int16).view(torch.float16)


# --- AutoAWQ checkpoint ----------------------------------------------------------------------


def _checkpoint_positions(rows: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat word index (rows, N) and bit shift (N,) of each code in a (rows, N/8) tensor."""
    columns = torch.arange(n, dtype=torch.int64)
    index = torch.arange(rows, dtype=torch.int64)[:, None] * (n // CODES_PER_WORD) + (
        columns // CODES_PER_WORD
    )
    shift = torch.tensor([CODE_BITS * checkpoint_nibble(c) for c in range(n)], dtype=torch.int64)
    return index, shift


def _pack_checkpoint_codes(codes: torch.Tensor) -> torch.Tensor:
    rows, n = codes.shape
    index, shift = _checkpoint_positions(rows, n)
    flat = torch.zeros(rows * n // CODES_PER_WORD, dtype=torch.int64)
    flat.index_add_(0, index.flatten(), (codes.to(torch.int64) << shift).flatten())
    return _to_int32_bits(flat).reshape(rows, n // CODES_PER_WORD)


def _unpack_checkpoint_codes(packed: torch.Tensor) -> torch.Tensor:
    rows, n = packed.shape[0], packed.shape[1] * CODES_PER_WORD
    index, shift = _checkpoint_positions(rows, n)
    return ((packed.reshape(-1).to(torch.int64)[index] >> shift) & CODE_MASK).to(torch.int32)


def pack_checkpoint(weights: ExpertWeights) -> AwqCheckpoint:
    k, n = weights.codes.shape
    checkpoint_shapes(k, n, weights.group_size)  # raises on shapes AutoAWQ cannot hold
    return AwqCheckpoint(
        _pack_checkpoint_codes(weights.codes),
        _pack_checkpoint_codes(weights.zeros),
        weights.scales.to(torch.float16).contiguous(),
    )


def unpack_checkpoint(checkpoint: AwqCheckpoint) -> ExpertWeights:
    return ExpertWeights(
        _unpack_checkpoint_codes(checkpoint.qweight),
        _unpack_checkpoint_codes(checkpoint.qzeros),
        checkpoint.scales,
    )


# --- prepared banks --------------------------------------------------------------------------


def _interleave_order(n: int) -> torch.Tensor:
    return torch.tensor([interleaved_source_column(p, n) for p in range(n)], dtype=torch.int64)


def interleave(weights: ExpertWeights) -> ExpertWeights:
    """Gate/up interleave of W13 columns: prepared column p <- checkpoint column."""
    order = _interleave_order(weights.codes.shape[1])
    return ExpertWeights(weights.codes[:, order], weights.zeros[:, order], weights.scales[:, order])


def deinterleave(weights: ExpertWeights) -> ExpertWeights:
    inverse = torch.argsort(_interleave_order(weights.codes.shape[1]))
    return ExpertWeights(
        weights.codes[:, inverse], weights.zeros[:, inverse], weights.scales[:, inverse]
    )


def _prepared_positions(k: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat word index (K, N) and bit shift (K,) of each code in a prepared expert."""
    rows = torch.arange(k, dtype=torch.int64)[:, None]
    columns = torch.arange(n, dtype=torch.int64)[None, :]
    index = prepared_word_index(rows, columns, k)
    shift = torch.tensor([CODE_BITS * prepared_nibble(r) for r in range(k)], dtype=torch.int64)
    return index, shift[:, None]


def _metadata_flat_index(groups: int, n: int) -> torch.Tensor:
    return metadata_index(
        torch.arange(groups, dtype=torch.int64)[:, None],
        torch.arange(n, dtype=torch.int64)[None, :],
        n,
    )


def pack_prepared(
    weights: ExpertWeights, *, compact: bool, interleave_gated_silu: bool = False
) -> PreparedExpert:
    """Logical weights -> one prepared expert, as the engine's prepare ops lay it out."""
    if interleave_gated_silu:
        weights = interleave(weights)
    k, n = weights.codes.shape
    groups = weights.scales.shape[0]
    words_shape, meta_shape = prepared_shapes(k, n, weights.group_size, compact)
    index, shift = _prepared_positions(k, n)
    flat = torch.zeros(k * n // CODES_PER_WORD, dtype=torch.int64)
    flat.index_add_(0, index.flatten(), (weights.codes.to(torch.int64) << shift).flatten())
    words = _to_int32_bits(flat).reshape(words_shape)

    scale_bits = _fp16_bits(weights.scales)
    zeros = weights.zeros.to(torch.int64)
    meta_index = _metadata_flat_index(groups, n).flatten()
    if compact:
        records = torch.stack([scale_bits & 0xFF, scale_bits >> 8, zeros], dim=-1)
        meta = torch.zeros((groups * n, 3), dtype=torch.int64)
        meta[meta_index] = records.reshape(-1, 3)
        return PreparedExpert(words, meta.to(torch.uint8).reshape(meta_shape))
    bias = round_fp16_by_quantum(-zeros.to(torch.float64) * weights.scales.to(torch.float64))
    records = scale_bits | (_fp16_bits(bias) << 16)
    meta = torch.zeros(groups * n, dtype=torch.int64)
    meta[meta_index] = records.flatten()
    return PreparedExpert(words, _to_int32_bits(meta).reshape(meta_shape))


def unpack_prepared(
    prepared: PreparedExpert, group_size: int, *, interleaved: bool = False
) -> UnpackedExpert:
    """One prepared expert -> codes, zeros, scales, biases (checkpoint order if `interleaved`)."""
    k, n = prepared.words.shape[0], prepared.words.shape[1] * CODES_PER_WORD
    groups = k // group_size
    index, shift = _prepared_positions(k, n)
    flat = prepared.words.reshape(-1).to(torch.int64)
    codes = ((flat[index] >> shift) & CODE_MASK).to(torch.int32)
    meta_index = _metadata_flat_index(groups, n)
    if prepared.compact:
        records = prepared.metadata.reshape(-1, 3).to(torch.int64)[meta_index]
        scales = _fp16_of_bits(records[..., 0] | (records[..., 1] << 8))
        zeros = records[..., 2].to(torch.int32)
        biases = round_fp16_by_quantum(-zeros.to(torch.float64) * scales.to(torch.float64))
    else:
        records = prepared.metadata.reshape(-1).to(torch.int64)[meta_index]
        scales = _fp16_of_bits(records)
        biases = _fp16_of_bits(records >> 16)
        s64 = scales.to(torch.float64)
        ratio = torch.where(s64 != 0, -biases.to(torch.float64) / s64, torch.zeros_like(s64))
        zeros = torch.round(ratio).to(torch.int32)
    unpacked = UnpackedExpert(codes, zeros, scales, biases)
    if not interleaved:
        return unpacked
    order = torch.argsort(_interleave_order(n))
    return UnpackedExpert(codes[:, order], zeros[:, order], scales[:, order], biases[:, order])


@dataclass(frozen=True)
class QpnBanks:
    """Full (512-expert) prepared banks of one MoE layer for the QPN M1 op."""

    w13: torch.Tensor
    s13: torch.Tensor
    w2: torch.Tensor
    s2: torch.Tensor

    @property
    def compact(self) -> bool:
        return self.s13.dtype == torch.uint8


def pack_qpn_banks(
    w13_experts: Mapping[int, ExpertWeights],
    w2_experts: Mapping[int, ExpertWeights],
    *,
    compact: bool,
) -> QpnBanks:
    """Zero banks with the given experts packed in (W13 interleaved, as the QPN lane needs).

    An expert left out has zero scales and biases, so its weights decode to zero.
    """
    specs = qpn_m1_arguments(compact)
    banks = {
        name: torch.zeros(specs[name].shape, dtype=getattr(torch, specs[name].dtype))
        for name in ("w13", "s13", "w2", "s2")
    }
    for expert, weights in w13_experts.items():
        _require_shape(weights, W13_K, W13_N, "W13")
        p = pack_prepared(weights, compact=compact, interleave_gated_silu=True)
        banks["w13"][expert], banks["s13"][expert] = p.words, p.metadata
    for expert, weights in w2_experts.items():
        _require_shape(weights, W2_K, W2_N, "W2")
        p = pack_prepared(weights, compact=compact)
        banks["w2"][expert], banks["s2"][expert] = p.words, p.metadata
    return QpnBanks(**banks)


def _require_shape(weights: ExpertWeights, k: int, n: int, what: str) -> None:
    if tuple(weights.codes.shape) != (k, n) or weights.group_size != GROUP_SIZE:
        raise ValueError(
            f"{what} expert must be K {k} x N {n} with group {GROUP_SIZE}, got codes "
            f"{tuple(weights.codes.shape)} and scales {tuple(weights.scales.shape)}"
        )


def bank_expert(banks: QpnBanks, stage: str, expert: int) -> PreparedExpert:
    """One expert's prepared tensors out of a bank; stage is "w13" or "w2"."""
    words, meta = (banks.w13, banks.s13) if stage == "w13" else (banks.w2, banks.s2)
    return PreparedExpert(words[expert], meta[expert])
