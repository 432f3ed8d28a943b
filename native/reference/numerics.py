"""CPU reference arithmetic of the AWQ QPN M1 operator and its prepare ops
(docs/contracts/core.md §6).

Vectorised over the selected experts; Python loops only run over the fixed reduction orders
(160 K steps, 16 slices, 10 routes), never over elements. The prepare functions run on the
device of their inputs (the CUDA prepare ops are these same functions). Every rounding boundary is
explicit: where the contract rounds once, this module rounds once.
"""

from __future__ import annotations

import torch

from native.awq_layout import (
    CHECKPOINT_NIBBLE_COLUMNS,
    CODE_BITS,
    CODE_MASK,
    CODES_PER_WORD,
    PREPARED_K_NIBBLES,
    TILE_K,
    TILE_N,
)
from native.awq_schemas import HIDDEN, NUM_EXPERTS, W2_K, W13_K_SLICES

_U16 = 0xFFFF


# --- exact rounding -------------------------------------------------------------------------


def _round_to_odd_fp32(x: torch.Tensor) -> torch.Tensor:
    """float64 -> float32 rounded to odd: truncate toward zero, set the last bit if inexact.

    Rounding to odd at >= p+2 bits and then to nearest at p bits equals one rounding to
    nearest at p bits; float32 keeps 24 bits, fp16 at most 11, so RN16(RO32(x)) == RN16(x).
    torch's own float64 -> float16 cast goes through a round-to-nearest float32 and can round
    twice (1 + 2^-11 + 2^-40 becomes 1.0).
    """
    nearest = x.to(torch.float32)
    exact = nearest.to(torch.float64) == x
    overshoot = nearest.to(torch.float64).abs() > x.abs()
    truncated = torch.where(overshoot, torch.nextafter(nearest, torch.zeros_like(nearest)), nearest)
    odd = (truncated.view(torch.int32) | 1).view(torch.float32)
    return torch.where(exact, nearest, odd)


def round_fp16(x: torch.Tensor) -> torch.Tensor:
    """Round float64 values once, to nearest even, to float16."""
    return _round_to_odd_fp32(x.to(torch.float64)).to(torch.float16)


def fma_fp32(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """fmaf(a, b, c) elementwise: a*b + c rounded once to float32.

    a (float32) times b (float32 holding fp16 values) has at most 24 + 11 bits, so the product
    is exact in float64. The float64 sum may round; TwoSum recovers its error exactly, and
    with it the sum rounded to odd at 53 bits, which then rounds to float32 correctly
    (53 >= 24 + 2). No assumption on magnitudes is needed.
    """
    p = a.to(torch.float64) * b.to(torch.float64)
    q = c.to(torch.float64)
    s = p + q
    bp = s - p
    err = (p - (s - bp)) + (q - bp)
    odd_bits = (s.view(torch.int64) & 1) == 1
    away = torch.where(err > 0, torch.full_like(s, torch.inf), torch.full_like(s, -torch.inf))
    to_odd = torch.where((err != 0) & ~odd_bits, torch.nextafter(s, away), s)
    return to_odd.to(torch.float32)


# --- bit fields ------------------------------------------------------------------------------


def _fp16_from_bits(bits: torch.Tensor) -> torch.Tensor:
    """Reinterpret the low 16 bits of an integer tensor as float16 (endian-independent)."""
    b = bits.to(torch.int32) & _U16
    return (b - ((b >> 15) << 16)).to(torch.int16).view(torch.float16)


def _fp16_bits(h: torch.Tensor) -> torch.Tensor:
    return h.contiguous().view(torch.int16).to(torch.int32) & _U16


def _wrap_int32(v: torch.Tensor) -> torch.Tensor:
    """An int64 holding a 32-bit pattern -> the int32 with that pattern."""
    v = v & 0xFFFFFFFF
    return (v - ((v >> 31) << 32)).to(torch.int32)


def _shifts(nibbles: tuple[int, ...], device: torch.device) -> torch.Tensor:
    return torch.tensor([CODE_BITS * p for p in nibbles], dtype=torch.int32, device=device)


# Column 8j + c of a checkpoint word j's codes sits in nibble _NIBBLE_OF_COLUMN[c].
_NIBBLE_OF_COLUMN = tuple(CHECKPOINT_NIBBLE_COLUMNS.index(c) for c in range(CODES_PER_WORD))


def unpack_checkpoint_words(packed: torch.Tensor) -> torch.Tensor:
    """AutoAWQ (R, N/8) int32 -> (R, N) codes 0..15 (int32)."""
    rows, words = packed.shape
    # Each output column shifts its own nibble down: the codes come out in column order,
    # with no scatter of nibble-ordered codes into place.
    codes = (packed.unsqueeze(-1) >> _shifts(_NIBBLE_OF_COLUMN, packed.device)) & CODE_MASK
    return codes.reshape(rows, words * CODES_PER_WORD)


# The k offset whose code lands in a word's top nibble (bits 28..31, the sign bit's nibble).
_TOP_K_OFFSET = PREPARED_K_NIBBLES.index(CODES_PER_WORD - 1)


def pack_prepared_words(codes: torch.Tensor) -> torch.Tensor:
    """Codes (K, N) -> prepared words (K, N/8) int32: N32 tiles of K/8 rows of 32 words.

    Built in int32 directly: the nibbles are disjoint bit fields ORed together; the top one
    is its code read as a signed 4-bit value times 2^28, which is exactly that nibble's
    contribution to the word's two's complement pattern (no shift into the sign bit)."""
    k, n = codes.shape
    # (i, tile, k8, c): one contiguous plane per k offset i (one copy; strided planes make
    # each of the per-plane operations below several times slower).
    planes = codes.to(torch.int32).reshape(k // TILE_K, TILE_K, n // TILE_N, TILE_N)
    planes = planes.permute(1, 2, 0, 3).contiguous()
    words = torch.zeros(planes.shape[1:], dtype=torch.int32, device=codes.device)
    for i in range(TILE_K):
        plane = planes[i]
        if i == _TOP_K_OFFSET:
            signed = plane - ((plane >> (CODE_BITS - 1)) << CODE_BITS)
            words.bitwise_or_(signed * (1 << (CODE_BITS * (CODES_PER_WORD - 1))))
        else:
            words.bitwise_or_(plane << (CODE_BITS * PREPARED_K_NIBBLES[i]))
    return words.reshape(k, n // CODES_PER_WORD)


def unpack_prepared_words(words: torch.Tensor, k: int, n: int) -> torch.Tensor:
    """Prepared words (E, K, N/8) -> codes (E, K, N) int32."""
    e = words.shape[0]
    # (e, tile, k8, c) -> (e, k8, 1, tile, c): the nibble axis then lands between k8 and
    # tile, which is row-major (K, N) order once flattened.
    tiled = words.reshape(e, n // TILE_N, k // TILE_K, TILE_N).permute(0, 2, 1, 3)
    shifts = _shifts(PREPARED_K_NIBBLES, words.device).reshape(1, 1, TILE_K, 1, 1)
    return ((tiled.unsqueeze(2) >> shifts) & CODE_MASK).reshape(e, k, n)


def bias_fp16(zeros: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """fp16(-zero * scale), one rounding (the product is exact in float64)."""
    return round_fp16(-zeros.to(torch.float64) * scales.to(torch.float64))


def encode_metadata(scales: torch.Tensor, zeros: torch.Tensor, compact: bool) -> torch.Tensor:
    """(G, N) scales fp16 and zero codes -> 4-byte int32 (G, N) or 3-byte uint8 (G, N, 3)."""
    scale_bits = _fp16_bits(scales)
    if compact:
        return torch.stack(
            [scale_bits & 0xFF, scale_bits >> 8, zeros.to(torch.int32) & 0xFF], dim=-1
        ).to(torch.uint8)
    bias_bits = _fp16_bits(bias_fp16(zeros, scales))
    return _wrap_int32(scale_bits.to(torch.int64) | (bias_bits.to(torch.int64) << 16))


def decode_metadata(meta: torch.Tensor, compact: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Metadata records -> (scales fp16, biases fp16), same leading shape."""
    if compact:
        m = meta.to(torch.int32)
        scales = _fp16_from_bits(m[..., 0] | (m[..., 1] << 8))
        return scales, bias_fp16(m[..., 2], scales)
    return _fp16_from_bits(meta), _fp16_from_bits(meta >> 16)


def dequantize(
    codes: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor, group: int
) -> torch.Tensor:
    """fp16 fma(q, scale, bias) of codes (..., K, N) with per-group (..., K/g, N) metadata.

    One rounding of the exact q*scale + bias, never fp16((q - zero) * scale). q*scale is
    exact in float32 (4 + 11 bits); the float32 sum usually is too, and TwoSum tells exactly
    where it is not: those few elements are redone from the float64 value, which is exact
    (both fp16 operands are multiples of 2^-24 below 2^20).
    """
    *lead, k, n = codes.shape
    grouped = (*lead, k // group, group, n)
    q = codes.reshape(grouped).to(torch.float32)
    scale = scales.to(torch.float32).unsqueeze(-2)
    bias = biases.to(torch.float32).unsqueeze(-2).expand(grouped)
    product = q * scale
    total = product + bias
    partner = total - product
    err = (product - (total - partner)) + (bias - partner)
    result = total.to(torch.float16)
    inexact = err != 0
    if bool(inexact.any()):
        exact = product[inexact].to(torch.float64) + bias[inexact].to(torch.float64)
        result[inexact] = round_fp16(exact)
    return result.reshape(codes.shape)


# --- prepare ---------------------------------------------------------------------------------


def interleave_columns(t: torch.Tensor) -> torch.Tensor:
    """Prepared column 2j <- column j, 2j+1 <- column N/2 + j (along dim 1)."""
    half = t.shape[1] // 2
    return torch.stack([t[:, :half], t[:, half:]], dim=2).reshape(t.shape)


def prepare_expert(
    kernel: torch.Tensor,
    scaling_factors: torch.Tensor,
    zeros: torch.Tensor,
    group_size: int,
    interleave: bool,
    compact: bool,
) -> list[torch.Tensor]:
    del group_size  # the group is implied by the shapes, which the validator has checked
    codes = unpack_checkpoint_words(kernel)
    zero_codes = unpack_checkpoint_words(zeros)
    scales = scaling_factors
    if interleave:
        codes, zero_codes, scales = (interleave_columns(t) for t in (codes, zero_codes, scales))
    return [pack_prepared_words(codes), encode_metadata(scales, zero_codes, compact)]


# --- QPN M1 ----------------------------------------------------------------------------------


def _decode_experts(words: torch.Tensor, meta: torch.Tensor, compact: bool) -> torch.Tensor:
    """Selected experts' prepared words and metadata -> decoded fp16 weights (E, K, N)."""
    k = words.shape[1]
    n = words.shape[2] * CODES_PER_WORD
    codes = unpack_prepared_words(words, k, n)
    scales, biases = decode_metadata(meta, compact)
    return dequantize(codes, scales, biases, k // scales.shape[1])


def _fp32_dot_in_k_order(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """sum_k x[..., k] * w[..., k, n] accumulated in FP32 in ascending k.

    x (..., K) and w (..., K, N) hold fp16 values; each product is exact in float32 (22 bits),
    so every step rounds exactly once, as the engine's FP32 MMA accumulators do.
    """
    x32 = x.to(torch.float32).movedim(-1, 0).unsqueeze(-1)  # (K, ..., 1)
    w32 = w.to(torch.float32).movedim(-2, 0).contiguous()  # (K, ..., N)
    acc = torch.zeros(w32.shape[1:], dtype=torch.float32)
    for step in range(w32.shape[0]):
        acc.addcmul_(x32[step], w32[step])
    return acc


def silu_fp16(gate: torch.Tensor) -> torch.Tensor:
    """fp16(g / (1 + exp(-g))) computed in FP32 from the FP16 gate.

    exp is evaluated in float64 and rounded to float32: a correctly rounded FP32 exp except
    where exp(-g) lies within ~2^-29 relative of a float32 tie.
    """
    g = gate.to(torch.float32)
    e = torch.exp(-g.to(torch.float64)).to(torch.float32)
    return (g / (1 + e)).to(torch.float16)


def w13_stage(x: torch.Tensor, w13: torch.Tensor) -> torch.Tensor:
    """Input (K,) fp16, decoded interleaved W13 (E, K, 320) -> intermediate (E, 160) fp16.

    The engine reduces W13 as 16 K slices of 160 (one warp each), summed in slice order in
    FP32; each slice is an FP32 dot accumulated here in ascending k.
    """
    e, k, n = w13.shape
    slice_k = k // W13_K_SLICES
    partials = _fp32_dot_in_k_order(
        x.reshape(W13_K_SLICES, 1, slice_k).expand(W13_K_SLICES, e, slice_k),
        w13.reshape(e, W13_K_SLICES, slice_k, n).transpose(0, 1),
    )  # (slice, E, N)
    total = partials[0]
    for s in range(1, W13_K_SLICES):
        total = total + partials[s]
    columns = total.to(torch.float16)
    gate, up = columns[:, 0::2], columns[:, 1::2]
    return (silu_fp16(gate).to(torch.float32) * up.to(torch.float32)).to(torch.float16)


def w2_stage(intermediate: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """Intermediate (E, 160) fp16, decoded W2 (E, 160, 2560) -> per-route fp16 (E, 2560)."""
    return _fp32_dot_in_k_order(intermediate, w2).to(torch.float16)


def combine_routes(topk: torch.Tensor, routes: torch.Tensor) -> torch.Tensor:
    """acc = fmaf(topk[r], route[r], acc) for r in router order from 0, rounded to fp16."""
    acc = torch.zeros(routes.shape[1], dtype=torch.float32)
    for r in range(routes.shape[0]):
        acc = fma_fp32(topk[r].expand_as(acc), routes[r].to(torch.float32), acc)
    return acc.to(torch.float16)


def qpn_m1(
    input: torch.Tensor,
    w13: torch.Tensor,
    s13: torch.Tensor,
    w2: torch.Tensor,
    s2: torch.Tensor,
    ids: torch.Tensor,
    topk: torch.Tensor,
    compact: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(out (1, 2560) fp16, intermediate (10, 160) fp16) for validated arguments.

    An invalid id (< 0 or >= 512) gets a zero intermediate row and a zero route, so its
    weight multiplies zero, as in the engine's W2 kernel. Duplicate ids are separate routes.
    """
    route_ids = ids.reshape(-1).to(torch.int64)
    valid = (route_ids >= 0) & (route_ids < NUM_EXPERTS)
    intermediate = torch.zeros((route_ids.numel(), W2_K), dtype=torch.float16)
    routes = torch.zeros((route_ids.numel(), HIDDEN), dtype=torch.float16)
    if bool(valid.any()):
        # With one token, a route's intermediate and output depend on its expert alone, so
        # each distinct expert is computed once and shared by its duplicate routes.
        experts, route_of = torch.unique(route_ids[valid], return_inverse=True)
        w13_decoded = _decode_experts(
            w13.index_select(0, experts), s13.index_select(0, experts), compact
        )
        w2_decoded = _decode_experts(
            w2.index_select(0, experts), s2.index_select(0, experts), compact
        )
        inter = w13_stage(input.reshape(-1), w13_decoded)
        intermediate[valid] = inter[route_of]
        routes[valid] = w2_stage(inter, w2_decoded)[route_of]
    out = combine_routes(topk.reshape(-1), routes)
    return out.reshape(1, HIDDEN), intermediate
