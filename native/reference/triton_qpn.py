"""Triton kernels of the AWQ QPN M1 step (CONTRACTS 6) and their launcher.

Two launches: W13 (one program per route and block of gate/up column pairs: int4 decode in
registers, the 16 K slices as a tensor axis, each slice accumulated in ascending k, slices
summed in slice order, SiLU times up into `intermediate`), then W2 (one program per block of
output columns: the 10 routes as a tensor axis, each route's dot in ascending k, then
acc = fma(weight[r], route[r], acc) for r = 0..9). Every reduction has a fixed order and no
float atomics are used, so results are bit-identical from run to run, between the layouts and
with the CPU reference op (`numerics`).

Rounding points, and why each is exact on a GPU and in Triton's interpreter alike:
- decode: q*scale is exact in FP32 (4 + 11 bits). With bias = fp16(-z*scale), z in 0..15 (the
  3-byte layout always, the 4-byte one by definition), q*scale + bias is a multiple of the
  scale's quantum below 2^16 quanta, hence exact in FP32, and one cast to FP16 is the
  contract's single rounding (an FMA contraction changes nothing). For a 4-byte record with
  any other bias the FP32 sum can round: TwoSum recovers its error and the sum is rounded to
  odd before the cast, which again rounds once (24 >= 11 + 2).
- dots: FP16 x FP16 products are exact in FP32; each step rounds once, contracted or not.
- SiLU: exp in FP64 rounded to FP32 (as the reference computes it), the division with
  `div_rn` (IEEE), never the approximate `/` or `exp`.
- the router-weighted sum: FP32 x FP16 products need 35 bits, so the FMA is done in FP64 with
  TwoSum and rounding to odd, then rounded to FP32 once (53 >= 24 + 2), which is fmaf exactly.
  (Triton's interpreter evaluates `tl.fma` as a multiply and an add.)

Validation (the shared validator) reads only tensor metadata, so a call makes no device
synchronisation and allocates nothing: it can be captured in a CUDA graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction

from native.awq_layout import PREPARED_K_NIBBLES, TILE_K, TILE_N
from native.awq_schemas import (
    GROUP_SIZE,
    NUM_EXPERTS,
    TOP_K,
    W2_K,
    W2_N,
    W13_K,
    W13_K_SLICES,
    W13_N,
)

# Logical k offset i of a prepared word sits in nibble PREPARED_K_NIBBLES[i]; the kernels
# compute that nibble as i // 2 + 4 * (i % 2), which this checks against the layout's table.
if tuple(i // 2 + 4 * (i % 2) for i in range(TILE_K)) != PREPARED_K_NIBBLES:
    raise ImportError("the kernels' nibble order disagrees with native.awq_layout")


@dataclass(frozen=True)
class QpnGeometry:
    """Shapes of one QPN M1 call. The default is the contract's; the interpreter tests use
    reduced ones that keep every code path (16 K slices of two groups each, several N tiles)."""

    experts: int = NUM_EXPERTS
    top_k: int = TOP_K
    w13_k: int = W13_K
    w13_n: int = W13_N
    w2_k: int = W2_K
    w2_n: int = W2_N
    group: int = GROUP_SIZE
    slices: int = W13_K_SLICES

    def __post_init__(self) -> None:
        slice_k = self.w13_k // self.slices
        if (
            self.w13_k % self.slices
            or slice_k % self.group
            or self.w2_k % self.group
            or self.group % TILE_K
            or self.w13_n % TILE_N
            or self.w2_n % TILE_N
            or self.w13_n != 2 * self.w2_k
            or self.slices & (self.slices - 1)
        ):
            raise ValueError(f"unsupported QPN geometry {self}")


@dataclass(frozen=True)
class QpnConfig:
    """Launch parameters: W13 gate/up pairs per program, W2 output columns per program, warps,
    and the group loop's software-pipelining stages and unroll factor (both kernels)."""

    w13_pairs: int = 8
    w13_warps: int = 4
    w2_columns: int = 32
    w2_warps: int = 4
    stages: int = 3
    unroll: int = 1


CONTRACT = QpnGeometry()
DEFAULT_CONFIG = QpnConfig()


@triton.jit
def _metadata(meta_ptr, record, COMPACT: tl.constexpr, mask):
    """(scale, bias) as FP16, for flat record indices `record`."""
    if COMPACT:
        base = record * 3
        lo = tl.load(meta_ptr + base, mask=mask, other=0).to(tl.int32)
        hi = tl.load(meta_ptr + base + 1, mask=mask, other=0).to(tl.int32)
        zero = tl.load(meta_ptr + base + 2, mask=mask, other=0).to(tl.float32)
        scale = (lo | (hi << 8)).to(tl.int16).to(tl.float16, bitcast=True)
        # -z*scale is exact in FP32; the cast is the one rounding of fp16(-zero*scale).
        bias = (-zero * scale.to(tl.float32)).to(tl.float16)
    else:
        word = tl.load(meta_ptr + record, mask=mask, other=0)
        scale = (word & 0xFFFF).to(tl.int16).to(tl.float16, bitcast=True)
        bias = (word >> 16).to(tl.int16).to(tl.float16, bitcast=True)
    return scale, bias


@triton.jit
def _decode(word, shift, scale, bias, HW_FMA: tl.constexpr, ROUND_SUM: tl.constexpr):
    """fp16 fma(q, scale, bias) of the 4-bit codes at `shift` of `word`, as FP32.

    HW_FMA (a GPU): the FP16 FMA instruction, which rounds once for any bias, on q made
    without an int-to-float conversion (0x6400 | q is the FP16 1024 + q; minus 1024 is
    exact). Otherwise (Triton's interpreter, whose `tl.fma` multiplies and adds): in FP32,
    where q*scale is exact, likewise built from 0x4B000000 | q = 2^23 + q; the sum is exact
    for a bias fp16(-z*scale), and ROUND_SUM makes any other bias round once too.
    """
    code = (word >> shift) & 0xF
    if HW_FMA:
        q16 = (code | 0x6400).to(tl.int16).to(tl.float16, bitcast=True) - 1024.0
        return tl.fma(q16, scale, bias).to(tl.float32)
    q = (code | 0x4B000000).to(tl.float32, bitcast=True) - 8388608.0
    product = q * scale.to(tl.float32)
    bias32 = bias.to(tl.float32)
    total = product + bias32
    if ROUND_SUM:
        # TwoSum error of the FP32 sum; if inexact, round the sum to odd so that the cast
        # to FP16 rounds once (24 >= 11 + 2 bits). NaN errors (infinite biases) leave it.
        partner = total - product
        err = (product - (total - partner)) + (bias32 - partner)
        bits = total.to(tl.int32, bitcast=True)
        inexact = ((err > 0) | (err < 0)) & ((bits & 1) == 0)
        step = tl.where((err > 0) == (total > 0), 1, -1)
        total = tl.where(inexact, bits + step, bits).to(tl.float32, bitcast=True)
    return total.to(tl.float16).to(tl.float32)


@triton.jit
def _pick(values, axis_index, which):
    """Row `which` of a 2-D tensor as a 1-D one, exactly (-0.0 is neutral for +, even for
    +0.0 and -0.0 themselves)."""
    return tl.sum(tl.where(axis_index == which, values, -0.0), axis=0)


@triton.jit
def _fma_fp32(a, b, c):
    """fmaf(a, b, c) for FP32 a, c and b holding FP16 values: the product is exact in FP64,
    the FP64 sum is rounded to odd with TwoSum, then once to FP32."""
    p = a.to(tl.float64) * b.to(tl.float64)
    q = c.to(tl.float64)
    s = p + q
    partner = s - p
    err = (p - (s - partner)) + (q - partner)
    bits = s.to(tl.int64, bitcast=True)
    inexact = ((err > 0) | (err < 0)) & ((bits & 1) == 0)
    step = tl.where((err > 0) == (s > 0), 1, -1).to(tl.int64)
    s = tl.where(inexact, bits + step, bits).to(tl.float64, bitcast=True)
    return s.to(tl.float32)


@triton.jit
def _w13_kernel(
    x_ptr,
    w_ptr,
    meta_ptr,
    ids_ptr,
    inter_ptr,
    EXPERTS: tl.constexpr,
    K: tl.constexpr,
    N: tl.constexpr,
    GROUP: tl.constexpr,
    SLICES: tl.constexpr,
    PAIRS: tl.constexpr,
    COMPACT: tl.constexpr,
    HW_FMA: tl.constexpr,
    STAGES: tl.constexpr,
    UNROLL: tl.constexpr,
):
    route = tl.program_id(0)
    block = tl.program_id(1)
    expert = tl.load(ids_ptr + route)
    valid = (expert >= 0) & (expert < EXPERTS)
    e = tl.where(valid, expert, 0)
    SLICE_K: tl.constexpr = K // SLICES
    slice_ = tl.arange(0, SLICES)[:, None]
    pair = block * PAIRS + tl.arange(0, PAIRS)[None, :]
    gate_col = 2 * pair
    up_col = gate_col + 1
    # Prepared word of (k, n): (tile * K/8 + k8) * 32 + c, n = 32 * tile + c.
    k8_base = slice_ * (SLICE_K // 8)
    expert_words = e * (K * N // 8)
    gate_words = w_ptr + expert_words + ((gate_col // 32) * (K // 8) + k8_base) * 32 + gate_col % 32
    up_words = w_ptr + expert_words + ((up_col // 32) * (K // 8) + k8_base) * 32 + up_col % 32
    expert_records = e * (K // GROUP) * N
    x_slice = x_ptr + slice_ * SLICE_K
    gate_acc = tl.zeros((SLICES, PAIRS), dtype=tl.float32)
    up_acc = tl.zeros((SLICES, PAIRS), dtype=tl.float32)
    for g in tl.range(0, SLICE_K // GROUP, num_stages=STAGES, loop_unroll_factor=UNROLL):
        group = slice_ * (SLICE_K // GROUP) + g
        gate_scale, gate_bias = _metadata(
            meta_ptr, expert_records + group * N + gate_col, COMPACT, valid
        )
        up_scale, up_bias = _metadata(meta_ptr, expert_records + group * N + up_col, COMPACT, valid)
        for w in tl.static_range(GROUP // 8):
            step = g * (GROUP // 8) + w
            gate_word = tl.load(gate_words + step * 32, mask=valid, other=0)
            up_word = tl.load(up_words + step * 32, mask=valid, other=0)
            for i in tl.static_range(8):
                x = tl.load(x_slice + step * 8 + i).to(tl.float32)
                shift = 4 * (i // 2 + 4 * (i % 2))
                gate_acc += x * _decode(
                    gate_word, shift, gate_scale, gate_bias, HW_FMA, not COMPACT
                )
                up_acc += x * _decode(up_word, shift, up_scale, up_bias, HW_FMA, not COMPACT)
    gate = _pick(gate_acc, slice_, 0)
    up = _pick(up_acc, slice_, 0)
    for s in tl.static_range(1, SLICES):
        gate = gate + _pick(gate_acc, slice_, s)
        up = up + _pick(up_acc, slice_, s)
    g16 = gate.to(tl.float16).to(tl.float32)
    u16 = up.to(tl.float16).to(tl.float32)
    e32 = tl.exp(-(g16.to(tl.float64))).to(tl.float32)
    silu = tl.math.div_rn(g16, 1.0 + e32).to(tl.float16).to(tl.float32)
    result = tl.where(valid, silu * u16, 0.0).to(tl.float16)
    cols = block * PAIRS + tl.arange(0, PAIRS)
    tl.store(inter_ptr + route * (N // 2) + cols, result)


@triton.jit
def _w2_kernel(
    inter_ptr,
    w_ptr,
    meta_ptr,
    ids_ptr,
    topk_ptr,
    out_ptr,
    EXPERTS: tl.constexpr,
    TOPK: tl.constexpr,
    ROUTES: tl.constexpr,
    K: tl.constexpr,
    N: tl.constexpr,
    GROUP: tl.constexpr,
    COLUMNS: tl.constexpr,
    COMPACT: tl.constexpr,
    HW_FMA: tl.constexpr,
    STAGES: tl.constexpr,
    UNROLL: tl.constexpr,
):
    block = tl.program_id(0)
    route = tl.arange(0, ROUTES)[:, None]
    in_topk = route < TOPK
    expert = tl.load(ids_ptr + route, mask=in_topk, other=-1)
    valid = in_topk & (expert >= 0) & (expert < EXPERTS)
    e = tl.where(valid, expert, 0)
    col = block * COLUMNS + tl.arange(0, COLUMNS)[None, :]
    words = w_ptr + e * (K * N // 8) + ((col // 32) * (K // 8)) * 32 + col % 32
    records = e * (K // GROUP) * N + col
    inter_row = inter_ptr + route * K
    acc = tl.zeros((ROUTES, COLUMNS), dtype=tl.float32)
    for g in tl.range(0, K // GROUP, num_stages=STAGES, loop_unroll_factor=UNROLL):
        scale, bias = _metadata(meta_ptr, records + g * N, COMPACT, valid)
        for w in tl.static_range(GROUP // 8):
            step = g * (GROUP // 8) + w
            word = tl.load(words + step * 32, mask=valid, other=0)
            for i in tl.static_range(8):
                x = tl.load(inter_row + step * 8 + i, mask=valid, other=0.0).to(tl.float32)
                shift = 4 * (i // 2 + 4 * (i % 2))
                acc += x * _decode(word, shift, scale, bias, HW_FMA, not COMPACT)
    routes = tl.where(valid, acc.to(tl.float16).to(tl.float32), 0.0)
    out = tl.zeros((COLUMNS,), dtype=tl.float32)
    for r in tl.static_range(TOPK):
        out = _fma_fp32(tl.load(topk_ptr + r), _pick(routes, route, r), out)
    tl.store(out_ptr + block * COLUMNS + tl.arange(0, COLUMNS), out.to(tl.float16))


# Compiled kernels decode with the FP16 FMA instruction; under Triton's interpreter (kernels
# defined with TRITON_INTERPRET=1) the FP32 formulation, which numpy evaluates exactly.
_HW_FMA = not isinstance(_w13_kernel, InterpretedFunction)


def launch_w13(
    intermediate: torch.Tensor,
    input: torch.Tensor,
    w13: torch.Tensor,
    s13: torch.Tensor,
    ids: torch.Tensor,
    *,
    compact: bool,
    geometry: QpnGeometry = CONTRACT,
    config: QpnConfig = DEFAULT_CONFIG,
) -> None:
    """The first launch: W13, SiLU times up, into `intermediate`."""
    if geometry.w2_k % config.w13_pairs:
        raise ValueError(f"launch config {config} does not tile {geometry}")
    _w13_kernel[(geometry.top_k, geometry.w2_k // config.w13_pairs)](
        input,
        w13,
        s13,
        ids,
        intermediate,
        EXPERTS=geometry.experts,
        K=geometry.w13_k,
        N=geometry.w13_n,
        GROUP=geometry.group,
        SLICES=geometry.slices,
        PAIRS=config.w13_pairs,
        COMPACT=compact,
        HW_FMA=_HW_FMA,
        STAGES=config.stages,
        UNROLL=config.unroll,
        num_warps=config.w13_warps,
    )


def launch_w2(
    out: torch.Tensor,
    intermediate: torch.Tensor,
    w2: torch.Tensor,
    s2: torch.Tensor,
    ids: torch.Tensor,
    topk: torch.Tensor,
    *,
    compact: bool,
    geometry: QpnGeometry = CONTRACT,
    config: QpnConfig = DEFAULT_CONFIG,
) -> None:
    """The second launch: W2 per route and the router-weighted sum into `out`."""
    if geometry.w2_n % config.w2_columns:
        raise ValueError(f"launch config {config} does not tile {geometry}")
    _w2_kernel[(geometry.w2_n // config.w2_columns,)](
        intermediate,
        w2,
        s2,
        ids,
        topk,
        out,
        EXPERTS=geometry.experts,
        TOPK=geometry.top_k,
        ROUTES=triton.next_power_of_2(geometry.top_k),
        K=geometry.w2_k,
        N=geometry.w2_n,
        GROUP=geometry.group,
        COLUMNS=config.w2_columns,
        COMPACT=compact,
        HW_FMA=_HW_FMA,
        STAGES=config.stages,
        UNROLL=config.unroll,
        num_warps=config.w2_warps,
    )


def launch_qpn_m1(
    out: torch.Tensor,
    intermediate: torch.Tensor,
    input: torch.Tensor,
    w13: torch.Tensor,
    s13: torch.Tensor,
    w2: torch.Tensor,
    s2: torch.Tensor,
    ids: torch.Tensor,
    topk: torch.Tensor,
    *,
    compact: bool,
    geometry: QpnGeometry = CONTRACT,
    config: QpnConfig = DEFAULT_CONFIG,
) -> None:
    """Enqueue the two kernels on the current stream. Arguments must already be validated
    (contiguous, of `geometry`'s shapes); nothing is synchronised or allocated."""
    launch_w13(
        intermediate, input, w13, s13, ids, compact=compact, geometry=geometry, config=config
    )
    launch_w2(
        out, intermediate, w2, s2, ids, topk, compact=compact, geometry=geometry, config=config
    )


__all__ = [
    "CONTRACT",
    "DEFAULT_CONFIG",
    "QpnConfig",
    "QpnGeometry",
    "launch_qpn_m1",
    "launch_w13",
    "launch_w2",
]
