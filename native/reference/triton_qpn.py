"""Triton kernels of the AWQ QPN M1 step (docs/contracts/core.md §6) and their launcher.

Two launches: W13 (one program per route and block of gate/up column pairs; one thread per
(pair, K slice), holding the gate and the up chain: int4 decode in registers, the slice
accumulated in ascending k; the 16 slices exchanged by one layout conversion and summed in
slice order; SiLU times up into `intermediate`), then W2 (one program per block of output
columns; one thread per (column pair, route), holding two chains, the dot in ascending k;
the routes exchanged likewise, then acc = fma(weight[r], route[r], acc) for r = 0..9). Every
sum has a fixed order and no float atomics are used, so results are bit-identical from run to
run, between the layouts and with the CPU reference op (`numerics`). (QpnConfig also keeps
the second session's one-chain-per-thread kernels, whose exchanges are 16-operand
reductions, for comparison.)

Speed (benchmarks/RESULTS.md): the step is latency-bound, so a chain's loads (its 20 words, 5
metadata records, 160 activations) are written before its first multiply, unrolled, with no
loop between them; the columns lie along a warp's lanes (a warp reads few cache lines per
load); compiled, a word's 8 weights are decoded with four FP16x2 FMAs and the activations
read 16 bytes at a time, a thread's two adjacent 3-byte metadata records as two aligned 4-byte
words; W2 is launched with programmatic dependent launch, so it loads and
decodes its weights (to FP16 pairs) while W13 runs and, after the wait, only converts,
multiplies and adds; W13 is launched with programmatic dependent launch too, so its launch
overlaps the previous kernel's end (the previous layer's W2); before its wait it asks L2 for
the ids, the input and (from the ids as they stand then, a hint only) its expert's words and
metadata, so after the wait they come from L2, not DRAM. W13 lets W2 launch before its own
wait and W2 reads the ids and router weights before its wait: sound where the kernel before
the step does not let its dependents launch before it has written them (see launch_qpn_m1;
else QpnConfig.w2_recheck or w13_trigger_first=False). Two chains per thread share
their activations' conversions and loads, and need half the registers per chain, so W2's
programs fit beside W13's and decode meanwhile. What is left on a chain's path is kept off
it: W13's chains start once all their activations are in registers (loaded together, not one
cache round trip after another), W2's router weights are loaded with its ids, before its
wait, and the router-weighted sum is one FMA instruction per route.

Rounding points, and why each is exact on a GPU and in Triton's interpreter alike:
- decode, compiled: fma.rn.f16x2 on q (exact: 1024 + q minus 1024, or 64 + q minus 64), one
  rounding, any bias.
- decode, interpreted: q*scale is exact in FP32 (4 + 11 bits). With bias = fp16(-z*scale),
  z in 0..15 (the 3-byte layout always, the 4-byte one by definition), q*scale + bias is a
  multiple of the scale's quantum below 2^16 quanta, hence exact in FP32, and one cast to FP16
  is the contract's single rounding. For a 4-byte record with any other bias the FP32 sum
  can round: TwoSum recovers its error and the sum is rounded to odd before the cast, which
  again rounds once (24 >= 11 + 2).
- dots: FP16 x FP16 products are exact in FP32; each step rounds once, contracted or not.
- SiLU: exp in FP64 rounded to FP32 (as the reference computes it), the division with
  `div_rn` (IEEE), never the approximate `/` or `exp`.
- the router-weighted sum: compiled, `tl.fma` (fma.rn.f32, fmaf). Interpreted: FP32 x FP16
  products need 35 bits and Triton's interpreter evaluates `tl.fma` as a multiply and an add,
  so the FMA is done in FP64 with TwoSum and rounding to odd, then rounded to FP32 once
  (53 >= 24 + 2), which is fmaf exactly.

Validation (the shared validator) reads only tensor metadata, so a call makes no device
synchronisation and allocates nothing: it can be captured in a CUDA graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc, num_warps
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
    reduced ones that keep every code path (16 K slices of two groups each, several N tiles).
    The kernels exchange 16 slices, resp. 16 route slots, at once (_split16, _columns16)."""

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
            or self.slices != 16
            or not 8 < self.top_k <= 16
        ):
            raise ValueError(f"unsupported QPN geometry {self}")


@dataclass(frozen=True)
class QpnConfig:
    """Launch parameters: W13 gate/up pairs per program (its columns x the 16 slices are its
    chains), W2 output columns per program (x 16 route slots), warps (a program's chains over
    its threads), and choices that change only how the compiled kernels are scheduled, never
    a result: whether W2 is launched with programmatic dependent launch (pdl) and W13 too
    (w13_pdl, with pdl), whether W13's chains wait for all their activations before the first
    multiply (w13_x_first), whether W2 decodes its weights before its grid-dependency wait
    (w2_predecode), whether a W13 thread holds a pair's gate and up chains (w13_gate_up; else
    one column's) and a W2 thread two adjacent columns' chains (w2_paired; else one), whether
    W13's chains wait for their words too (w13_words_first), and whether W13's programs ask L2
    for their words and metadata in bulk once they know their expert (w13_prefetch) and for
    their route's W2 words and metadata too (w2_prefetch; both compiled for capability 9.0
    and later only); whether the decode takes one shift a word (one_shift_decode; else
    three); W13's register cap (w13_maxnreg, none by default) and its words in batches
    each loaded before its first multiply (w13_word_batches; 0: none); whether W13 asks L2,
    before its grid-dependency wait, for the ids and the input (w13_prefetch_inputs) and
    for the words and metadata of the expert the route's id names before the wait
    (w13_speculate: a hint, the id is read again after the wait); whether W2 loads the
    router weights with its ids, before its wait (w2_weights_first; else after its
    chains); whether a thread's two adjacent 3-byte records are read as two aligned 4-byte
    words (wide_metadata; else six bytes); whether W13 lets W2 launch before its own
    grid-dependency wait (w13_trigger_first; else after it, so that W2 cannot start while
    W13's predecessor runs); whether W2 reads the ids and router weights again after its
    wait and redoes its chains from them where an id changed (w2_recheck: then the step
    never depends on when W2 started; w2_redo always redoes them, for tests); whether W2
    packs its route slots (w2_pack_pairs > 0: 32 slots holding 32 // top_k column blocks of
    that many pairs, a slot one (column block, route), instead of w2_columns columns x 16
    slots of which 6 hold no route; w2_columns is then unused) and, with one column a chain
    (w2_paired false), whether it widens its decoded weights to FP32 before its wait
    (w2_widen; else after it); whether W13's speculation asks L2 for the route's W2 words
    and metadata too (w2_speculate). By default
    W13 triggers first and W2 does not recheck, which needs launch_qpn_m1's condition on
    the kernel before the step (benchmarks/RESULTS.md: what the H200 showed, and what each
    option gave). The default: 100 W13 programs of 8
    warps (16 pairs), 160 W2 programs of 4 warps (16 columns)."""

    w13_pairs: int = 16
    w13_warps: int = 8
    w2_columns: int = 16
    w2_warps: int = 4
    pdl: bool = True
    w13_x_first: bool = True
    w2_predecode: bool = True
    w13_pdl: bool = True
    w13_gate_up: bool = True
    w2_paired: bool = True
    w13_prefetch: bool = False
    w2_prefetch: bool = False
    w13_words_first: bool = False
    one_shift_decode: bool = True
    w13_maxnreg: int | None = None
    w13_word_batches: int = 0
    w13_prefetch_inputs: bool = True
    w13_speculate: bool = True
    w2_weights_first: bool = True
    wide_metadata: bool = True
    w13_trigger_first: bool = True
    w2_recheck: bool = False
    w2_redo: bool = False
    w2_pack_pairs: int = 0
    w2_widen: bool = False
    w2_speculate: bool = False

    def __post_init__(self) -> None:
        for blocks in (self.w13_pairs, self.w2_columns // 2, self.w13_warps, self.w2_warps):
            if blocks < 1 or blocks & (blocks - 1):
                raise ValueError(f"unsupported QPN launch config {self}")
        pack = self.w2_pack_pairs
        if pack < 0 or pack & (pack - 1):
            raise ValueError(f"unsupported QPN launch config {self}")


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
def _metadata_pairs(meta_ptr, records, half, mask):
    """(scale, bias) as FP16 of the 3-byte records `records`, a tensor whose last axis (of
    two, `half` its index) holds a record and the next one, the first even and both held by
    one thread (a pair's gate and up, or two adjacent W2 columns): their 6 bytes start at a
    multiple of 6 bytes, hence of 2, so they lie in the two aligned int32 words from the
    first's byte offset rounded down to 4, each word holding at least one of the 6 bytes
    (so both lie inside the tensor, which is 4-byte aligned and a multiple of 4 bytes long).
    Two 4-byte loads a pair instead of six 1-byte ones; the values are _metadata's."""
    first = (records - half) * 3  # byte offset of the even record, in both halves
    words_ptr = meta_ptr.to(tl.pointer_type(tl.int32))
    loaded = tl.load(words_ptr + (first >> 2) + half, mask=mask, other=0)
    w0, w1 = tl.split(loaded)
    offset, _ = tl.split(first)
    # Record bytes 0..3 in `low`, 4..5 in `high` (the 6 bytes start at byte 0 or 2 of w0).
    at_two = (offset & 2) != 0
    low = tl.where(at_two, ((w0 >> 16) & 0xFFFF) | (w1 << 16), w0)
    high = tl.where(at_two, (w1 >> 16) & 0xFFFF, w1 & 0xFFFF)
    scale0 = (low & 0xFFFF).to(tl.int16).to(tl.float16, bitcast=True)
    zero0 = ((low >> 16) & 0xFF).to(tl.float32)
    scale1 = (((low >> 24) & 0xFF) | ((high & 0xFF) << 8)).to(tl.int16)
    scale1 = scale1.to(tl.float16, bitcast=True)
    zero1 = ((high >> 8) & 0xFF).to(tl.float32)
    # -z*scale is exact in FP32; the cast is the one rounding of fp16(-zero*scale).
    bias0 = (-zero0 * scale0.to(tl.float32)).to(tl.float16)
    bias1 = (-zero1 * scale1.to(tl.float32)).to(tl.float16)
    return tl.join(scale0, scale1), tl.join(bias0, bias1)


@triton.jit
def _decode(word, shift, scale, bias, ROUND_SUM: tl.constexpr):
    """fp16 fma(q, scale, bias) of the 4-bit codes at `shift` of `word`, as FP32, without an
    FMA instruction (Triton's interpreter evaluates `tl.fma` as a multiply and an add; the
    compiled kernels decode with _DECODE8_ASM): q*scale is exact in FP32, q made without an
    int-to-float conversion (0x4B000000 | q = 2^23 + q); the sum is exact for a bias
    fp16(-z*scale), and ROUND_SUM makes any other bias round once too.
    """
    code = (word >> shift) & 0xF
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
def _half(pair, HIGH: tl.constexpr):
    """One FP16 of an int32 holding two (the low one first in memory), as FP32."""
    if HIGH:
        pair = pair >> 16
    return pair.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)


# The 8 weights of a prepared word with the FP16x2 FMA instruction: (word >> 4m) & 0x000F000F
# | 0x64006400 is the FP16 pair (1024 + q, 1024 + q') of logical k 2m and 2m + 1 (nibbles m
# and m + 4); minus 1024 is exact; fma.rn.f16x2 rounds each weight once, for any bias.
_DECODE8_ASM = tl.constexpr(
    """{
.reg .b32 s2, b2, k, t, u;
.reg .b16 lo, hi;
mov.b32 s2, {$9, $9};
mov.b32 b2, {$10, $10};
mov.b32 k, 0x64006400;
lop3.b32 t, $8, 0x000F000F, k, 0xEA;
sub.rn.f16x2 t, t, k;
fma.rn.f16x2 t, t, s2, b2;
mov.b32 {lo, hi}, t;
cvt.f32.f16 $0, lo;
cvt.f32.f16 $1, hi;
shr.u32 u, $8, 4;
lop3.b32 t, u, 0x000F000F, k, 0xEA;
sub.rn.f16x2 t, t, k;
fma.rn.f16x2 t, t, s2, b2;
mov.b32 {lo, hi}, t;
cvt.f32.f16 $2, lo;
cvt.f32.f16 $3, hi;
shr.u32 u, $8, 8;
lop3.b32 t, u, 0x000F000F, k, 0xEA;
sub.rn.f16x2 t, t, k;
fma.rn.f16x2 t, t, s2, b2;
mov.b32 {lo, hi}, t;
cvt.f32.f16 $4, lo;
cvt.f32.f16 $5, hi;
shr.u32 u, $8, 12;
lop3.b32 t, u, 0x000F000F, k, 0xEA;
sub.rn.f16x2 t, t, k;
fma.rn.f16x2 t, t, s2, b2;
mov.b32 {lo, hi}, t;
cvt.f32.f16 $6, lo;
cvt.f32.f16 $7, hi;
}"""
)


# The 8 weights of a prepared word as four FP16x2 pairs (logical k 2m, 2m + 1 in pair m),
# decoded as in _DECODE8_ASM but left in FP16: W2 decodes its words this way before it
# waits for W13 (while W13 runs) and converts each weight to FP32 only after.
_DECODE4_ASM = tl.constexpr(
    """{
.reg .b32 s2, b2, k, t, u;
mov.b32 s2, {$5, $5};
mov.b32 b2, {$6, $6};
mov.b32 k, 0x64006400;
lop3.b32 t, $4, 0x000F000F, k, 0xEA;
sub.rn.f16x2 t, t, k;
fma.rn.f16x2 $0, t, s2, b2;
shr.u32 u, $4, 4;
lop3.b32 t, u, 0x000F000F, k, 0xEA;
sub.rn.f16x2 t, t, k;
fma.rn.f16x2 $1, t, s2, b2;
shr.u32 u, $4, 8;
lop3.b32 t, u, 0x000F000F, k, 0xEA;
sub.rn.f16x2 t, t, k;
fma.rn.f16x2 $2, t, s2, b2;
shr.u32 u, $4, 12;
lop3.b32 t, u, 0x000F000F, k, 0xEA;
sub.rn.f16x2 t, t, k;
fma.rn.f16x2 $3, t, s2, b2;
}"""
)


# The same weights with one shift a word instead of three: nibbles 0 and 4 (bits 0-3 of each
# half) OR 0x6400 are the FP16 1024 + q as above; nibbles 1 and 5 (bits 4-7 of each half) OR
# 0x5400 are 64 + q (64's FP16 quantum is 1/16, so bit 4 is worth 1), and minus 64 is exact
# too; the word shifted by 8 gives nibbles 2, 6 and 3, 7 likewise. The FMA and its rounding are
# unchanged, so the weights are bit for bit those of _DECODE8_ASM (two SHF a word fewer).
_DECODE8_ONE_SHIFT_ASM = tl.constexpr(
    """{
.reg .b32 s2, b2, k, k4, t, u;
.reg .b16 lo, hi;
mov.b32 s2, {$9, $9};
mov.b32 b2, {$10, $10};
mov.b32 k, 0x64006400;
mov.b32 k4, 0x54005400;
lop3.b32 t, $8, 0x000F000F, k, 0xEA;
sub.rn.f16x2 t, t, k;
fma.rn.f16x2 t, t, s2, b2;
mov.b32 {lo, hi}, t;
cvt.f32.f16 $0, lo;
cvt.f32.f16 $1, hi;
lop3.b32 t, $8, 0x00F000F0, k4, 0xEA;
sub.rn.f16x2 t, t, k4;
fma.rn.f16x2 t, t, s2, b2;
mov.b32 {lo, hi}, t;
cvt.f32.f16 $2, lo;
cvt.f32.f16 $3, hi;
shr.u32 u, $8, 8;
lop3.b32 t, u, 0x000F000F, k, 0xEA;
sub.rn.f16x2 t, t, k;
fma.rn.f16x2 t, t, s2, b2;
mov.b32 {lo, hi}, t;
cvt.f32.f16 $4, lo;
cvt.f32.f16 $5, hi;
lop3.b32 t, u, 0x00F000F0, k4, 0xEA;
sub.rn.f16x2 t, t, k4;
fma.rn.f16x2 t, t, s2, b2;
mov.b32 {lo, hi}, t;
cvt.f32.f16 $6, lo;
cvt.f32.f16 $7, hi;
}"""
)


# _DECODE4_ASM with one shift a word (as _DECODE8_ONE_SHIFT_ASM).
_DECODE4_ONE_SHIFT_ASM = tl.constexpr(
    """{
.reg .b32 s2, b2, k, k4, t, u;
mov.b32 s2, {$5, $5};
mov.b32 b2, {$6, $6};
mov.b32 k, 0x64006400;
mov.b32 k4, 0x54005400;
lop3.b32 t, $4, 0x000F000F, k, 0xEA;
sub.rn.f16x2 t, t, k;
fma.rn.f16x2 $0, t, s2, b2;
lop3.b32 t, $4, 0x00F000F0, k4, 0xEA;
sub.rn.f16x2 t, t, k4;
fma.rn.f16x2 $1, t, s2, b2;
shr.u32 u, $4, 8;
lop3.b32 t, u, 0x000F000F, k, 0xEA;
sub.rn.f16x2 t, t, k;
fma.rn.f16x2 $2, t, s2, b2;
lop3.b32 t, u, 0x00F000F0, k4, 0xEA;
sub.rn.f16x2 t, t, k4;
fma.rn.f16x2 $3, t, s2, b2;
}"""
)


@triton.jit
def _decoded(words, meta, WORDS: tl.constexpr, GROUP: tl.constexpr, ONE_SHIFT: tl.constexpr):
    """Compiled only: the WORDS words' weights as FP16x2 pairs, a tuple of 4 * WORDS int32
    (pair 4j + m: logical k 8j + 2m and 8j + 2m + 1)."""
    pairs = ()
    for j in tl.static_range(WORDS):
        scale, bias = meta[j // (GROUP // 8)]
        pairs = pairs + tl.inline_asm_elementwise(
            _DECODE4_ONE_SHIFT_ASM if ONE_SHIFT else _DECODE4_ASM,
            "=r,=r,=r,=r,r,h,h",
            [words[j], scale, bias],
            dtype=(tl.int32,) * 4,
            is_pure=True,
            pack=1,
        )
    return pairs


@triton.jit
def _wait_after(pairs, COUNT: tl.constexpr, e):
    """The grid-dependency wait, after every pair of `pairs` is computed: the wait is
    predicated on (OR of the pairs) & min(e, 0) == 0, true for every thread (the expert index
    e >= 0) but not known to the compilers, so the decode feeding it runs while the preceding
    grid still runs (unpredicated, ptxas moved the decode below the wait). Returns +0.0 bits,
    read after. min(e, 0) is taken inside the asm: computed before it (the fifth session's
    kernels), LLVM proved it zero once the wide metadata came in, and the wait went above the
    decode. (%tid.y, zero in 1-D blocks, is no help: ptxas knows the block's shape.)"""
    bits = pairs[0]
    for j in tl.static_range(1, COUNT):
        bits = bits | pairs[j]
    return tl.inline_asm_elementwise(
        """{
.reg .pred p;
.reg .b32 z;
min.s32 z, $2, 0;
and.b32 z, z, $1;
setp.eq.b32 p, z, 0;
@p griddepcontrol.wait;
mov.b32 $0, z;
}""",
        "=r,r,r",
        [bits, e],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def _chains_decoded(acc, pairs, xs, COUNT: tl.constexpr):
    """acc + the dot of the FP16x2 weight pairs `pairs` with the activation pairs `xs` (COUNT
    of each), one FP32 rounding per k, in k order."""
    for j in tl.static_range(COUNT):
        for h in tl.static_range(2):
            # FP16 x FP16 is exact in FP32: one rounding per step, fused or not.
            acc = acc + _half(xs[j], h) * _half(pairs[j], h)
    return acc


@triton.jit
def _chains(
    acc,
    words,
    meta,
    xs,
    START: tl.constexpr,
    STOP: tl.constexpr,
    GROUP: tl.constexpr,
    HW_FMA: tl.constexpr,
    ROUND_SUM: tl.constexpr,
    ONE_SHIFT: tl.constexpr,
):
    """acc + the dot of prepared words START..STOP-1 (8 k each, ascending k) with the
    activations `xs` (int32 pairs of FP16, 4 per word), one FP32 rounding per k, in k order.
    `meta` holds a (scale, bias) per group of GROUP k."""
    for j in tl.static_range(START, STOP):
        scale, bias = meta[j // (GROUP // 8)]
        if HW_FMA:
            weights = tl.inline_asm_elementwise(
                _DECODE8_ONE_SHIFT_ASM if ONE_SHIFT else _DECODE8_ASM,
                "=r,=r,=r,=r,=r,=r,=r,=r,r,h,h",
                [words[j], scale, bias],
                dtype=(tl.float32,) * 8,
                is_pure=True,
                pack=1,
            )
            for i in tl.static_range(8):
                # FP16 x FP16 is exact in FP32: one rounding per step, fused or not.
                acc = acc + _half(xs[4 * j + i // 2], i % 2) * weights[i]
        else:
            for i in tl.static_range(8):
                weight = _decode(words[j], 4 * (i // 2 + 4 * (i % 2)), scale, bias, ROUND_SUM)
                acc = acc + _half(xs[4 * j + i // 2], i % 2) * weight
    return acc


@triton.jit
def _lane_columns(block, COLUMNS: tl.constexpr):
    """The columns of a block of COLUMNS (= 2P): its P even columns first, then their odd
    partners. No pointer is then contiguous along the columns, so every load of the kernels
    takes one layout, the one the 3-byte metadata (never contiguous) gets, and nothing is
    converted between layouts: columns along a warp's lanes, slices (routes) across warps."""
    lane = tl.arange(0, COLUMNS)
    return block * COLUMNS + 2 * (lane % (COLUMNS // 2)) + lane // (COLUMNS // 2)


@triton.jit
def _add16(
    a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15,
    b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15,
):  # fmt: skip
    return (
        a0 + b0, a1 + b1, a2 + b2, a3 + b3, a4 + b4, a5 + b5, a6 + b6, a7 + b7,
        a8 + b8, a9 + b9, a10 + b10, a11 + b11, a12 + b12, a13 + b13, a14 + b14, a15 + b15,
    )  # fmt: skip


@triton.jit
def _columns16(values, index):
    """The 16 columns of a 2-D tensor `values` (index = its column index, 0..15) as 16 1-D
    tensors, exactly, in one reduction (one exchange through shared memory rather than one per
    column): each operand holds one column and -0.0 elsewhere, and -0.0 is neutral for +."""
    tl.static_assert(values.shape[1] == 16)
    parts = ()
    for c in tl.static_range(16):
        parts = parts + (tl.where(index == c, values, -0.0),)
    return tl.reduce(parts, 1, _add16)


@triton.jit
def _split16(values):
    """The 16 columns of a 2-D tensor `values` as 16 1-D tensors, by layout alone (no
    arithmetic): reshaped to (rows, 2, 2, 2, 2) and split along its last axis of two, four
    times, so the compiler moves every thread's values in one conversion through shared
    memory instead of _columns16's 16-operand reduction (shuffles, adds and a second pass
    through shared memory). The first split takes column bit 0, so the split tuple holds
    column c at the bit-reversed index of c."""
    tl.static_assert(values.shape[1] == 16)
    parts = (tl.reshape(values, (values.shape[0], 2, 2, 2, 2)),)
    for level in tl.static_range(4):
        halves = ()
        for i in tl.static_range(2**level):
            halves = halves + tl.split(parts[i])
        parts = halves
    columns = ()
    for c in tl.static_range(16):
        columns = columns + (parts[(c & 1) * 8 + (c & 2) * 2 + (c & 4) // 2 + (c & 8) // 8],)
    return columns


@triton.jit
def _split32(values):
    """The 32 columns of a 2-D tensor `values` as 32 1-D tensors, by layout alone, as
    _split16 (five splits; the split tuple holds column c at the 5-bit reversal of c)."""
    tl.static_assert(values.shape[1] == 32)
    parts = (tl.reshape(values, (values.shape[0], 2, 2, 2, 2, 2)),)
    for level in tl.static_range(5):
        halves = ()
        for i in tl.static_range(2**level):
            halves = halves + tl.split(parts[i])
        parts = halves
    columns = ()
    for c in tl.static_range(32):
        columns = columns + (
            parts[(c & 1) * 16 + (c & 2) * 4 + (c & 4) + (c & 8) // 4 + (c & 16) // 16],
        )
    return columns


@triton.jit
def _activations(at, PAIRS: tl.constexpr, HW_FMA: tl.constexpr, AFTER_WAIT: tl.constexpr):
    """PAIRS int32 pairs of FP16 from `at` on (int32 pointers, 16-byte aligned), as a tuple.
    Compiled: 16-byte loads, a quarter of the load instructions. AFTER_WAIT: the loads follow
    a grid-dependency wait and must not be moved above it (not pure, so they keep their
    place)."""
    xs = ()
    if HW_FMA:
        for j in tl.static_range(PAIRS // 4):
            xs = xs + tl.inline_asm_elementwise(
                "ld.global.v4.b32 {$0, $1, $2, $3}, [$4];",
                "=r,=r,=r,=r,l",
                [(at + 4 * j).to(tl.int64)],
                dtype=(tl.int32,) * 4,
                is_pure=not AFTER_WAIT,
                pack=1,
            )
    else:
        for j in tl.static_range(PAIRS):
            xs = xs + (tl.load(at + j),)
    return xs


@triton.jit
def _zero_after(xs, START: tl.constexpr, STOP: tl.constexpr, e):
    """+0.0 (the chains' start), computed from xs[START:STOP] (every activation loaded, or a
    batch of the words) and the expert index
    e >= 0 (min(e, 0) is a zero the compiler cannot see through): the first multiply then
    waits for all of them, so ptxas issues the activation loads together, where their
    latencies overlap, instead of each just before its use (to save registers), where each
    is one more cache round trip on the chain's path. (Made from one register of each 16-byte
    load only, which holds the same loads back, W13 ran 0.35 us slower: ptxas then schedules
    the word loads differently.)"""
    bits = xs[START]
    for j in tl.static_range(START + 1, STOP):
        bits = bits | xs[j]
    return (bits & tl.minimum(e, 0)).to(tl.float32, bitcast=True)


@triton.jit
def _prefetch_l2(start, STRIDE: tl.constexpr, SIZE: tl.constexpr, COUNT: tl.constexpr, go):
    """Asks L2 for COUNT pieces of SIZE bytes, piece i at the int64 address start + i *
    STRIDE (16-byte aligned, SIZE a multiple of 16), if `go`: cp.async.bulk.prefetch.L2
    (compute capability 9.0), served by the copy engine with no register waiting for the
    data, so the later loads of those bytes wait for L2, not DRAM (ptxas issues most of a
    chain's word loads shortly before their use, to save registers: each one DRAM round trip
    on the chain's path). Piece i is asked for by lane i % LANES of warp i // LANES (the
    warp read from %tid.x: the instruction takes a warp-uniform address, so a per-lane one
    would cost a loop over the warp's lanes). Compiled for an older GPU it asks for nothing."""
    WARPS: tl.constexpr = num_warps()
    LANES: tl.constexpr = (COUNT + WARPS - 1) // WARPS
    tl.static_assert(LANES <= 32 and SIZE % 16 == 0 and STRIDE % 16 == 0)
    if tl.target_info.cuda_capability_geq(9, 0):
        tl.inline_asm_elementwise(
            """{
.reg .u32 t, w, i;
.reg .u64 a;
.reg .pred p, q;
mov.u32 t, %tid.x;
shr.u32 w, t, 5;
and.b32 t, t, 31;
mad.lo.u32 i, w, $3, t;
setp.lt.u32 p, t, $3;
setp.lt.and.u32 p, i, $4, p;
setp.ne.and.b32 p, $5, 0, p;
cvt.u64.u32 a, i;
mad.lo.u64 a, a, $2, $1;
@p cp.async.bulk.prefetch.L2.global [a], $6;
mov.b32 $0, 0;
}""",
            "=r,l,l,r,r,r,r",
            [start, start * 0 + STRIDE, LANES, COUNT, go.to(tl.int32), SIZE],
            dtype=tl.int32,
            is_pure=False,
            pack=1,
        )


@triton.jit
def _prefetch_share(
    w_ptr,
    meta_ptr,
    e,
    block,
    go,
    K: tl.constexpr,
    N: tl.constexpr,
    GROUP: tl.constexpr,
    BLOCKS: tl.constexpr,
    RECORD: tl.constexpr,
    UNIT: tl.constexpr,
):
    """Asks L2 for a W13 block's share of expert e's words and metadata, if `go`: the route's
    blocks split the expert's words and its metadata into BLOCKS equal contiguous ranges each
    (a block's share: its own columns or its neighbours', which the route's other blocks,
    running meanwhile, ask for in turn)."""
    WORDS_SHARE: tl.constexpr = K * N // 2 // BLOCKS
    words_from = w_ptr + e * (K * N // 8) + block * (WORDS_SHARE // 4)
    _prefetch_l2(words_from.to(tl.int64), WORDS_SHARE // 16, WORDS_SHARE // 16, 16, go)
    META_SHARE: tl.constexpr = K // GROUP * N // BLOCKS * RECORD  # bytes
    # 8 pieces, or fewer where they would not be multiples of 16 bytes.
    META_PIECES: tl.constexpr = 8 if META_SHARE % 128 == 0 else 4 if META_SHARE % 64 == 0 else 1
    meta_from = meta_ptr + (e * (K // GROUP) * N + block * (META_SHARE // RECORD)) * UNIT
    _prefetch_l2(
        meta_from.to(tl.int64),
        META_SHARE // META_PIECES,
        META_SHARE // META_PIECES,
        META_PIECES,
        go,
    )


@triton.jit
def _w13_kernel(
    x_ptr,
    w_ptr,
    meta_ptr,
    ids_ptr,
    inter_ptr,
    w2_ptr,
    s2_ptr,
    EXPERTS: tl.constexpr,
    K: tl.constexpr,
    N: tl.constexpr,
    GROUP: tl.constexpr,
    SLICES: tl.constexpr,
    PAIRS: tl.constexpr,
    COMPACT: tl.constexpr,
    HW_FMA: tl.constexpr,
    PDL: tl.constexpr,
    X_FIRST: tl.constexpr,
    WAIT: tl.constexpr,
    GATE_UP: tl.constexpr,
    PREFETCH: tl.constexpr,
    PREFETCH_W2: tl.constexpr,
    WORDS_FIRST: tl.constexpr,
    W2_K: tl.constexpr,
    W2_N: tl.constexpr,
    ONE_SHIFT: tl.constexpr,
    WORD_BATCHES: tl.constexpr,
    PREFETCH_INPUTS: tl.constexpr,
    SPECULATE: tl.constexpr,
    WIDE_META: tl.constexpr,
    TRIGGER_FIRST: tl.constexpr,
    SPECULATE_W2: tl.constexpr,
):
    """W13, one (column, slice) chain per element (GATE_UP: elements (pair, slice, gate or
    up), a thread holding a pair's gate and up chains, which share its slice's activations);
    a chain's loads (its 20 words, its 5 groups' metadata, its slice's activations as int32
    pairs) are written before its first multiply, unrolled, for ptxas to schedule."""
    # The griddepcontrol instructions exist from compute capability 9.0 on (Triton's
    # compile-time target, a constexpr); compiled for an older GPU nothing overlaps.
    if PDL and (TRIGGER_FIRST or not WAIT):
        if tl.target_info.cuda_capability_geq(9, 0):
            # Lets W2 (launched with programmatic dependent launch) load its weights while
            # this kernel runs; W2 waits for this grid's completion before reading its output.
            # W2 also reads the ids and router weights before its wait: triggered here, before
            # this grid's own wait, that is sound only if W2 cannot start before this grid's
            # predecessor completes, or if W2 rechecks them (QpnConfig.w2_recheck).
            gdc.gdc_launch_dependents()
    route = tl.program_id(0)
    block = tl.program_id(1)
    SLICE_K: tl.constexpr = K // SLICES
    # Bytes of one metadata record, and the element size of meta_ptr / s2_ptr's pointers.
    RECORD: tl.constexpr = 3 if COMPACT else 4
    UNIT: tl.constexpr = 3 if COMPACT else 1
    BLOCKS: tl.constexpr = N // (2 * PAIRS)
    if WAIT:
        if tl.target_info.cuda_capability_geq(9, 0):
            if SPECULATE:
                # The route's id as it stands before the wait (read through L2 only, so no
                # stale copy stays in L1 for the load after the wait), used for nothing but
                # the addresses of a prefetch of the expert's words and metadata: where the
                # preceding kernel does not change the ids (a step after a step), they arrive
                # in L2 while that kernel ends; where it does, the hint is wasted, never wrong.
                hint = tl.load(ids_ptr + route, cache_modifier=".cg")
                hint_ok = (hint >= 0) & (hint < EXPERTS)
                _prefetch_share(
                    w_ptr,
                    meta_ptr,
                    tl.where(hint_ok, hint, 0),
                    block,
                    hint_ok,
                    K,
                    N,
                    GROUP,
                    BLOCKS,
                    RECORD,
                    UNIT,
                )
                if SPECULATE_W2:
                    # And for the route's W2 words and metadata, a BLOCKS-th each, which W2
                    # (launched before this grid's wait) then reads from L2 as it decodes.
                    hint_e = tl.where(hint_ok, hint, 0)
                    W2_SPEC: tl.constexpr = W2_K * W2_N // 2 // BLOCKS
                    w2_hint = w2_ptr + hint_e * (W2_K * W2_N // 8) + block * (W2_SPEC // 4)
                    _prefetch_l2(w2_hint.to(tl.int64), W2_SPEC // 16, W2_SPEC // 16, 16, hint_ok)
                    S2_SPEC: tl.constexpr = W2_K // GROUP * W2_N // BLOCKS
                    s2_hint = s2_ptr + (hint_e * (W2_K // GROUP) * W2_N + block * S2_SPEC) * UNIT
                    _prefetch_l2(
                        s2_hint.to(tl.int64), S2_SPEC * RECORD, S2_SPEC * RECORD, 1, hint_ok
                    )
            if PREFETCH_INPUTS:
                # Before the wait, L2 is asked for the route's id (the 16-byte granule that
                # holds it, which never crosses the end of an allocation) and the input, each
                # by one thread (the bulk prefetch of _prefetch_l2): a prefetch reads nothing
                # into a register, and L2 is where the preceding kernel's writes land, so the
                # loads after the wait see them; without it the id (then the words it
                # addresses) and the input may come from DRAM after the wait, one round trip
                # after another.
                ids_granule = (ids_ptr + route).to(tl.int64) & -16
                _prefetch_l2(ids_granule, 16, 16, 1, route >= 0)
                _prefetch_l2(x_ptr.to(tl.int64), 2 * K, 2 * K, 1, route >= 0)
            # Launched with programmatic dependent launch: this grid may be resident while
            # the preceding kernel on the stream still runs (its launch latency hidden), but
            # reads and writes nothing before that kernel has completed: it may write the
            # input or ids, or still read `intermediate` (the previous layer's W2).
            gdc.gdc_wait()
            if PDL and not TRIGGER_FIRST:
                # Triggered here, every program of this grid has seen its predecessor complete
                # before W2 can start, so the ids and router weights W2 reads before its own
                # wait are final whatever that predecessor is (1.7 us a step slower: W2's
                # decode then overlaps less, benchmarks/RESULTS.md).
                gdc.gdc_launch_dependents()
    expert = tl.load(ids_ptr + route)
    valid = (expert >= 0) & (expert < EXPERTS)
    e = tl.where(valid, expert, 0)
    if PREFETCH:
        _prefetch_share(w_ptr, meta_ptr, e, block, valid, K, N, GROUP, BLOCKS, RECORD, UNIT)
    if PREFETCH_W2:
        # The route's W2 words and metadata (contiguous per expert), a BLOCKS-th each: W2's
        # programs that are not resident yet (no room beside W13's) find them in L2.
        W2_SHARE: tl.constexpr = W2_K * W2_N // 2 // BLOCKS
        w2_from = w2_ptr + e * (W2_K * W2_N // 8) + block * (W2_SHARE // 4)
        _prefetch_l2(w2_from.to(tl.int64), W2_SHARE // 16, W2_SHARE // 16, 16, valid)
        S2_SHARE: tl.constexpr = W2_K // GROUP * W2_N // BLOCKS
        s2_from = s2_ptr + (e * (W2_K // GROUP) * W2_N + block * S2_SHARE) * UNIT
        _prefetch_l2(s2_from.to(tl.int64), S2_SHARE * RECORD, S2_SHARE * RECORD, 1, valid)
    if GATE_UP:
        pair = tl.arange(0, PAIRS)[:, None, None]
        slice_ = tl.arange(0, SLICES)[None, :, None]
        col = (block * PAIRS + pair) * 2 + tl.arange(0, 2)[None, None, :]
        # One activation per (pair, slice), broadcast over gate and up.
        x_at = x_ptr + slice_ * (SLICE_K // 2) + 0 * pair
    else:
        col = _lane_columns(block, 2 * PAIRS)[:, None]
        slice_ = tl.arange(0, SLICES)[None, :]
        x_at = x_ptr + slice_ * (SLICE_K // 2) + 0 * col
    words_at = (
        w_ptr
        + e * (K * N // 8)
        + ((col // 32) * (K // 8) + slice_ * (SLICE_K // 8)) * 32
        + col % 32
    )
    records = e * (K // GROUP) * N + slice_ * (SLICE_K // GROUP) * N + col
    words = ()
    for j in tl.static_range(SLICE_K // 8):
        words = words + (tl.load(words_at + j * 32, mask=valid, other=0),)
    meta = ()
    for g in tl.static_range(SLICE_K // GROUP):
        if COMPACT and GATE_UP and WIDE_META:
            # A pair's gate and up records are adjacent, the gate's even.
            half = tl.arange(0, 2)[None, None, :] + 0 * records
            meta = meta + (_metadata_pairs(meta_ptr, records + g * N, half, valid),)
        else:
            meta = meta + (_metadata(meta_ptr, records + g * N, COMPACT, valid),)
    xs = _activations(x_at, SLICE_K // 2, HW_FMA, False)
    acc = tl.zeros(words_at.shape, dtype=tl.float32)
    if X_FIRST:
        acc = acc + _zero_after(xs, 0, SLICE_K // 2, e)
    # WORD_BATCHES > 0: the chain's words in that many equal batches, each batch's loads
    # complete before its first multiply (1: all words first, as w13_words_first).
    BATCHES: tl.constexpr = 1 if WORDS_FIRST else WORD_BATCHES
    WORDS: tl.constexpr = SLICE_K // 8
    if BATCHES == 0:
        acc = _chains(acc, words, meta, xs, 0, WORDS, GROUP, HW_FMA, not COMPACT, ONE_SHIFT)
    else:
        tl.static_assert(WORDS % BATCHES == 0)
        PER: tl.constexpr = WORDS // BATCHES
        for b in tl.static_range(BATCHES):
            acc = acc + _zero_after(words, b * PER, (b + 1) * PER, e)
            acc = _chains(
                acc,
                words,
                meta,
                xs,
                b * PER,
                (b + 1) * PER,
                GROUP,
                HW_FMA,
                not COMPACT,
                ONE_SHIFT,
            )
    if GATE_UP:
        # Rows 2p (gate) and 2p + 1 (up) of pair p.
        slices = _split16(tl.reshape(tl.permute(acc, (0, 2, 1)), (2 * PAIRS, SLICES)))
    else:
        slices = _columns16(acc, slice_)
    total = slices[0]
    for s in tl.static_range(1, SLICES):
        total = total + slices[s]
    rounded = total.to(tl.float16).to(tl.float32)
    if GATE_UP:
        gate, up = tl.split(tl.reshape(rounded, (PAIRS, 2)))
    else:
        # The block's gates (its even columns) lie first, then their ups (_lane_columns).
        halves = tl.reshape(rounded, (2, PAIRS))
        which = tl.arange(0, 2)[:, None]
        gate = _pick(halves, which, 0)
        up = _pick(halves, which, 1)
    e32 = tl.exp(-(gate.to(tl.float64))).to(tl.float32)
    silu = tl.math.div_rn(gate, 1.0 + e32).to(tl.float16).to(tl.float32)
    result = tl.where(valid, silu * up, 0.0).to(tl.float16)
    tl.store(inter_ptr + route * (N // 2) + block * PAIRS + tl.arange(0, PAIRS), result)


@triton.jit
def _combine(weights, routes, TOPK: tl.constexpr, HW_FMA: tl.constexpr):
    """acc = fma(weights[r], routes[r], acc) for r = 0..TOPK-1 from acc = +0.0."""
    out = tl.zeros(routes[0].shape, dtype=tl.float32)
    for r in tl.static_range(TOPK):
        if HW_FMA:
            # fma.rn.f32: fmaf, one rounding (the compiled kernels' FMA is exact).
            out = tl.fma(weights[r], routes[r], out)
        else:
            out = _fma_fp32(weights[r], routes[r], out)
    return out


@triton.jit
def _w2_banks(
    w_ptr,
    meta_ptr,
    e,
    col,
    valid,
    K: tl.constexpr,
    N: tl.constexpr,
    GROUP: tl.constexpr,
    COMPACT: tl.constexpr,
    PAIRED: tl.constexpr,
    WIDE_META: tl.constexpr,
):
    """W2's words (a tuple of K/8) and metadata records (K/GROUP) of expert `e` for columns
    `col`, zero where not `valid`."""
    words_at = w_ptr + e * (K * N // 8) + ((col // 32) * (K // 8)) * 32 + col % 32
    records = e * (K // GROUP) * N + col
    words = ()
    for j in tl.static_range(K // 8):
        words = words + (tl.load(words_at + j * 32, mask=valid, other=0),)
    meta = ()
    for g in tl.static_range(K // GROUP):
        if COMPACT and PAIRED and WIDE_META:
            # A thread's two adjacent columns' records, the first's column even.
            half = tl.arange(0, 2)[None, None, :] + 0 * records
            meta = meta + (_metadata_pairs(meta_ptr, records + g * N, half, valid),)
        else:
            meta = meta + (_metadata(meta_ptr, records + g * N, COMPACT, valid),)
    return words, meta


@triton.jit
def _ids_and_weights(ids_ptr, topk_ptr, route, in_topk, TOPK: tl.constexpr, HW_FMA: tl.constexpr):
    """The route slots' ids (-1 past TOPK) and the TOPK router weights, read after W2's
    grid-dependency wait through L2 only (the ids read before the wait were too, so no stale
    copy is in L1). Compiled, as loads the compilers cannot move above the wait (not pure)."""
    at = ids_ptr + tl.minimum(route, TOPK - 1)
    weights = ()
    if HW_FMA:
        ids = tl.inline_asm_elementwise(
            "ld.global.cg.b32 $0, [$1];",
            "=r,l",
            [at.to(tl.int64)],
            dtype=tl.int32,
            is_pure=False,
            pack=1,
        )
        for r in tl.static_range(TOPK):
            # Each thread reads them all (the same lines for every thread).
            weight = tl.inline_asm_elementwise(
                "ld.global.cg.f32 $0, [$1];",
                "=f,l",
                [(topk_ptr + r).to(tl.int64)],
                dtype=tl.float32,
                is_pure=False,
                pack=1,
            )
            weights = weights + (weight,)
    else:
        ids = tl.load(at)
        for r in tl.static_range(TOPK):
            weights = weights + (tl.load(topk_ptr + r),)
    return tl.where(in_topk, ids, -1), weights


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
    PDL: tl.constexpr,
    PREDECODE: tl.constexpr,
    TRIGGER: tl.constexpr,
    PAIRED: tl.constexpr,
    ONE_SHIFT: tl.constexpr,
    WEIGHTS_FIRST: tl.constexpr,
    WIDE_META: tl.constexpr,
    RECHECK: tl.constexpr,
    REDO: tl.constexpr,
    PACK: tl.constexpr,
    WIDEN: tl.constexpr,
):
    """W2, one (column, route) chain per element of a program's COLUMNS columns x ROUTES (16)
    route slots, of which TOPK are routes (PAIRED: elements (column pair, route slot, column
    of the pair), a thread holding two adjacent columns' chains of one route, which share its
    activations); loads first as in W13; then the routes' results exchanged once and summed
    with the router weights in route order."""
    if TRIGGER:
        if tl.target_info.cuda_capability_geq(9, 0):
            # Lets the next kernel (the next layer's W13, launched with programmatic
            # dependent launch) become resident once every program of this grid has started;
            # it waits for this grid's completion before it reads or writes anything.
            gdc.gdc_launch_dependents()
    block = tl.program_id(0)
    # PACK: 32 slots of (column block, route), SLOTS // TOPK column blocks of PACK pairs each
    # (3 x 10 of 32 slots hold a route, instead of 10 of 16): fewer chains computed for
    # nothing, the same chains and sums. Slower on the H200 (benchmarks/RESULTS.md): W2's
    # time follows a thread's path, which the slot arithmetic and 32-slot exchange lengthen.
    SLOTS: tl.constexpr = 32
    BLOCKS: tl.constexpr = SLOTS // TOPK
    if PACK > 0 and PAIRED:
        slot = tl.arange(0, SLOTS)[:, None, None]
        pair = tl.arange(0, PACK)[None, :, None]
        # Slot s: route s % TOPK of column block s // TOPK of this program's BLOCKS.
        route = slot % TOPK
        col = ((block * BLOCKS + slot // TOPK) * PACK + pair) * 2 + tl.arange(0, 2)[None, None, :]
        anchor = pair
    elif PACK > 0:
        # One column a chain: 2 * PACK columns a block.
        slot = tl.arange(0, SLOTS)[:, None]
        route = slot % TOPK
        col = (block * BLOCKS + slot // TOPK) * (2 * PACK) + tl.arange(0, 2 * PACK)[None, :]
        anchor = col
    elif PAIRED:
        pair = tl.arange(0, COLUMNS // 2)[:, None, None]
        col = block * COLUMNS + 2 * pair + tl.arange(0, 2)[None, None, :]
        route = tl.arange(0, ROUTES)[None, :, None]
        # One activation per (pair, route), broadcast over the pair's two columns.
        anchor = pair
    else:
        col = _lane_columns(block, COLUMNS)[:, None]
        route = tl.arange(0, ROUTES)[None, :]
        anchor = col
    if PACK > 0:
        # Slots past BLOCKS * TOPK, and columns past N (the last program's), hold no chain.
        in_topk = (slot < BLOCKS * TOPK) & (col < N)
    else:
        in_topk = route < TOPK
    # Read through L2 only where RECHECK reads them again after the wait (no stale copy
    # left in L1 for that load).
    expert = tl.load(
        ids_ptr + route, mask=in_topk, other=-1, cache_modifier=".cg" if RECHECK else ""
    )
    # The router weights too are loaded here, with the ids (neither is written by W13): loaded
    # after the chains (WEIGHTS_FIRST false), they were one more memory round trip at the very
    # end of the step. With RECHECK they are loaded just after the wait instead.
    weights = ()
    if WEIGHTS_FIRST and not RECHECK:
        for r in tl.static_range(TOPK):
            weights = weights + (tl.load(topk_ptr + r),)
    valid = (in_topk & (expert >= 0) & (expert < EXPERTS)) & (col >= 0)
    e = tl.where(valid, expert, 0)
    # Routes past TOPK read route TOPK - 1's row (in bounds); invalid routes are zeroed below.
    x_at = inter_ptr + tl.minimum(route, TOPK - 1) * (K // 2) + 0 * anchor
    words, meta = _w2_banks(w_ptr, meta_ptr, e, col, valid, K, N, GROUP, COMPACT, PAIRED, WIDE_META)
    acc = tl.zeros(valid.shape, dtype=tl.float32)
    if HW_FMA and PREDECODE:
        # Decoded to FP16x2 while W13 runs (nothing here reads W13's output), then the wait.
        pairs = _decoded(words, meta, K // 8, GROUP, ONE_SHIFT)
        if WIDEN:
            # Each weight widened to FP32 before the wait too (twice the registers: one column
            # a thread), so that after it a k costs its activation's conversion and one FMA.
            widened = ()
            bits = ()
            for j in tl.static_range(K // 2):
                for h in tl.static_range(2):
                    w32 = _half(pairs[j], h)
                    widened = widened + (w32,)
                    bits = bits + (w32.to(tl.int32, bitcast=True),)
            if PDL and tl.target_info.cuda_capability_geq(9, 0):
                acc = acc + _wait_after(bits, K, e).to(tl.float32, bitcast=True)
        elif PDL and tl.target_info.cuda_capability_geq(9, 0):
            # +0.0, read after the wait: the chains start after it.
            acc = acc + _wait_after(pairs, K // 2, e).to(tl.float32, bitcast=True)
        xs = _activations(x_at, K // 2, HW_FMA, PDL)
        if RECHECK:
            again, weights = _ids_and_weights(ids_ptr, topk_ptr, route, in_topk, TOPK, HW_FMA)
        if WIDEN:
            for j in tl.static_range(K // 2):
                for h in tl.static_range(2):
                    # FP16 x FP16 is exact in FP32: one rounding per step, as _chains_decoded.
                    acc = acc + _half(xs[j], h) * widened[2 * j + h]
        else:
            acc = _chains_decoded(acc, pairs, xs, K // 2)
    else:
        if PDL:
            if tl.target_info.cuda_capability_geq(9, 0):
                # Launched while W13 runs: the words and metadata above (which W13 does not
                # write) are loaded meanwhile; the intermediate only once W13 has completed.
                gdc.gdc_wait()
        xs = _activations(x_at, K // 2, HW_FMA, PDL)
        if RECHECK:
            again, weights = _ids_and_weights(ids_ptr, topk_ptr, route, in_topk, TOPK, HW_FMA)
        acc = _chains(acc, words, meta, xs, 0, K // 8, GROUP, HW_FMA, not COMPACT, ONE_SHIFT)
    if RECHECK:
        # The ids read before the wait were read while the kernel before W13 may still have
        # been running (W13 lets this grid launch before its own wait): read again after the
        # wait (W13 complete, so its predecessor too), they are final. If any differs in this
        # program (or REDO, which tests ask for), its chains are redone from the final ids,
        # loaded and decoded after the wait: slow, but never a result from a stale id.
        stale = tl.max(tl.where(again != expert, 1, 0)) | REDO
        if stale != 0:
            valid = (in_topk & (again >= 0) & (again < EXPERTS)) & (col >= 0)
            final_e = tl.where(valid, again, 0)
            final_words, final_meta = _w2_banks(
                w_ptr, meta_ptr, final_e, col, valid, K, N, GROUP, COMPACT, PAIRED, WIDE_META
            )
            # The activations loaded again too: kept from above, all of them would stay live
            # through the fast chains, and ptxas then issued each load just before its use
            # (one cache round trip after another: W2 2 us slower).
            final_xs = _activations(x_at, K // 2, HW_FMA, PDL)
            acc = _chains(
                tl.zeros(valid.shape, dtype=tl.float32),
                final_words,
                final_meta,
                final_xs,
                0,
                K // 8,
                GROUP,
                HW_FMA,
                not COMPACT,
                ONE_SHIFT,
            )
    rounded = tl.where(valid, acc.to(tl.float16).to(tl.float32), 0.0)
    if not WEIGHTS_FIRST and not RECHECK:
        for r in tl.static_range(TOPK):
            weights = weights + (tl.load(topk_ptr + r),)
    if PACK > 0:
        # Row 2p + h: column 2p + h of each column block; slot 10b + r: its route r.
        if PAIRED:
            slots = _split32(tl.reshape(tl.permute(rounded, (1, 2, 0)), (2 * PACK, SLOTS)))
        else:
            slots = _split32(tl.permute(rounded, (1, 0)))
        lane = tl.arange(0, 2 * PACK)
        for b in tl.static_range(BLOCKS):
            routes = ()
            for r in tl.static_range(TOPK):
                routes = routes + (slots[b * TOPK + r],)
            out = _combine(weights, routes, TOPK, HW_FMA)
            at = (block * BLOCKS + b) * 2 * PACK + lane
            tl.store(out_ptr + at, out.to(tl.float16), mask=at < N)
    elif PAIRED:
        # Row 2c + h: the block's column 2c + h.
        routes = _split16(tl.reshape(tl.permute(rounded, (0, 2, 1)), (COLUMNS, ROUTES)))
        out = _combine(weights, routes, TOPK, HW_FMA)
        tl.store(out_ptr + block * COLUMNS + tl.arange(0, COLUMNS), out.to(tl.float16))
    else:
        routes = _columns16(rounded, route)
        out = _combine(weights, routes, TOPK, HW_FMA)
        tl.store(out_ptr + _lane_columns(block, COLUMNS), out.to(tl.float16))


# Compiled kernels decode with the FP16 FMA instruction; under Triton's interpreter (kernels
# defined with TRITON_INTERPRET=1) the FP32 formulation, which numpy evaluates exactly.
_HW_FMA = not isinstance(_w13_kernel, InterpretedFunction)


def _pdl(config: QpnConfig) -> bool:
    """Whether W2 is launched with programmatic dependent launch: asked for and compiled (not
    interpreted). The kernels' grid-dependency instructions exist from compute capability
    9.0 on; compiled for an older GPU they are left out, and nothing then overlaps."""
    return config.pdl and _HW_FMA


def _w13_pdl(config: QpnConfig) -> bool:
    """Whether W13 is launched with programmatic dependent launch (waiting, before it reads
    or writes anything, for the preceding kernel to complete) and W2 lets the next kernel
    launch early: asked for and compiled, as _pdl."""
    return config.pdl and config.w13_pdl and _HW_FMA


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
    w2_banks: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> None:
    """The first launch: W13, SiLU times up, into `intermediate`. `w2_banks` (w2, s2): the
    banks config.w2_prefetch asks L2 for (only read by the prefetch, never loaded)."""
    if geometry.w2_k % config.w13_pairs:
        raise ValueError(f"launch config {config} does not tile {geometry}")
    prefetch_w2 = config.w2_prefetch and w2_banks is not None and _HW_FMA
    w2, s2 = w2_banks if w2_banks is not None else (w13, s13)
    # The activations are read as int32 pairs of FP16 (a view: no copy, no allocation).
    _w13_kernel[(geometry.top_k, geometry.w2_k // config.w13_pairs)](
        input.view(torch.int32),
        w13,
        s13,
        ids,
        intermediate,
        w2,
        s2,
        EXPERTS=geometry.experts,
        K=geometry.w13_k,
        N=geometry.w13_n,
        GROUP=geometry.group,
        SLICES=geometry.slices,
        PAIRS=config.w13_pairs,
        COMPACT=compact,
        HW_FMA=_HW_FMA,
        PDL=_pdl(config),
        X_FIRST=config.w13_x_first,
        WAIT=_w13_pdl(config),
        GATE_UP=config.w13_gate_up,
        PREFETCH=config.w13_prefetch and _HW_FMA,
        PREFETCH_W2=prefetch_w2,
        WORDS_FIRST=config.w13_words_first,
        W2_K=geometry.w2_k,
        W2_N=geometry.w2_n,
        ONE_SHIFT=config.one_shift_decode,
        WORD_BATCHES=config.w13_word_batches,
        PREFETCH_INPUTS=config.w13_prefetch_inputs,
        SPECULATE=config.w13_speculate,
        WIDE_META=config.wide_metadata,
        TRIGGER_FIRST=config.w13_trigger_first,
        SPECULATE_W2=config.w2_speculate and w2_banks is not None,
        num_warps=config.w13_warps,
        maxnreg=config.w13_maxnreg,
        launch_pdl=_w13_pdl(config),
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
    """The second launch: W2 per route and the router-weighted sum into `out`. With
    programmatic dependent launch (config.pdl; capability 9.0 and later) it may start
    before the preceding kernel on the stream has completed and reads w2, s2, ids and topk
    meanwhile: that kernel must be launch_w13's (as in launch_qpn_m1), which writes none of
    them."""
    pack = config.w2_pack_pairs
    if pack:
        # SLOTS // top_k column blocks of `pack` pairs a program, the last one's masked.
        per_program = 32 // geometry.top_k * 2 * pack
        grid = ((geometry.w2_n + per_program - 1) // per_program,)
    elif geometry.w2_n % config.w2_columns:
        raise ValueError(f"launch config {config} does not tile {geometry}")
    else:
        grid = (geometry.w2_n // config.w2_columns,)
    pdl = _pdl(config)
    _w2_kernel[grid](
        intermediate.view(torch.int32),
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
        PDL=pdl,
        PREDECODE=config.w2_predecode,
        TRIGGER=_w13_pdl(config),
        PAIRED=config.w2_paired,
        ONE_SHIFT=config.one_shift_decode,
        WEIGHTS_FIRST=config.w2_weights_first,
        WIDE_META=config.wide_metadata,
        RECHECK=config.w2_recheck,
        REDO=config.w2_redo,
        PACK=pack,
        WIDEN=config.w2_widen,
        num_warps=config.w2_warps,
        launch_pdl=pdl,
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
    (contiguous, of `geometry`'s shapes); nothing is synchronised or allocated.

    With the default config the kernel enqueued before this step must not let its
    dependents launch early (`griddepcontrol.launch_dependents`) before it has written ids
    and topk: W13 lets W2 launch before W13's own wait, and W2 reads ids and topk before its
    wait, which covers W13 only (on the H200 a grid started early does let its dependent
    start early). No PyTorch kernel triggers early, and the previous step's W2 writes
    neither. After a kernel that does, use config.w2_recheck or w13_trigger_first=False."""
    launch_w13(
        intermediate,
        input,
        w13,
        s13,
        ids,
        compact=compact,
        geometry=geometry,
        config=config,
        w2_banks=(w2, s2),
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
