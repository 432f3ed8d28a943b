"""Shared builders of the Triton QPN M1 tests: banks of any geometry (random and adversarial
experts) and the expected results from the CPU reference arithmetic (`numerics`), which is
itself checked against the FP64 oracle in tests/test_reference_numerics.py."""

from __future__ import annotations

import math

import torch

from native.reference import numerics
from native.reference.fp64 import round_fp16_by_quantum
from native.reference.packing import ExpertWeights, pack_prepared, random_expert

# Scales around which an FP16 rounding of q*scale, of (q - z)*scale or of the bias lands on a
# tie or far below the bias's quantum: a decode that rounds twice differs from fp16 fma here.
ADVERSARIAL_SCALES = (
    1 + 2**-10,
    1 - 2**-11,
    0.5 + 2**-11,
    3 + 2**-9,
    2**-24,
    3 * 2**-24,
    2**-14 + 2**-24,
    2**-15 + 2**-23,
    1023 / 1024 * 2**-14,
    0.1,
    7.0e-4,
)


def adversarial_expert(k: int, n: int, group: int, generator: torch.Generator) -> ExpertWeights:
    """Random codes; scales drawn from ADVERSARIAL_SCALES (either sign), zeros 0..15."""
    table = torch.tensor(ADVERSARIAL_SCALES, dtype=torch.float64)
    pick = torch.randint(0, len(ADVERSARIAL_SCALES), (k // group, n), generator=generator)
    sign = torch.where(torch.rand((k // group, n), generator=generator) < 0.25, -1.0, 1.0)
    scales = (table[pick] * sign).half()
    codes = torch.randint(0, 16, (k, n), generator=generator, dtype=torch.int32)
    zeros = torch.randint(0, 16, (k // group, n), generator=generator, dtype=torch.int32)
    return ExpertWeights(codes, zeros, scales)


def double_rounding_exposed(w: ExpertWeights) -> bool:
    """True when fp16(fp16(q*s) + bias) or fp16((q - z)*s) differ from fp16 fma(q, s, bias)
    somewhere in `w`: the data can tell a correct decode from a twice-rounded one."""
    group = w.codes.shape[0] // w.scales.shape[0]
    s = w.scales.double().repeat_interleave(group, 0)
    z = w.zeros.double().repeat_interleave(group, 0)
    q = w.codes.double()
    bias = round_fp16_by_quantum(-z * s).double()
    exact = round_fp16_by_quantum(q * s + bias)
    twice = round_fp16_by_quantum(round_fp16_by_quantum(q * s).double() + bias)
    shifted = round_fp16_by_quantum((q - z) * s)
    return bool((exact != twice).any()) and bool((exact != shifted).any())


def build_banks(
    experts: int,
    w13_k: int,
    w13_n: int,
    w2_k: int,
    w2_n: int,
    group: int,
    *,
    seed: int,
    adversarial: tuple[int, ...] = (),
) -> dict[bool, tuple[torch.Tensor, ...]]:
    """{compact: (w13, s13, w2, s2)}: both layouts of the same logical experts (W13
    interleaved), random except the `adversarial` ones."""
    gen = torch.Generator().manual_seed(seed)
    logical = []
    for e in range(experts):
        make = adversarial_expert if e in adversarial else random_expert
        logical.append((make(w13_k, w13_n, group, gen), make(w2_k, w2_n, group, gen)))
    banks: dict[bool, tuple[torch.Tensor, ...]] = {}
    for compact in (False, True):
        w13 = [pack_prepared(a, compact=compact, interleave_gated_silu=True) for a, _ in logical]
        w2 = [pack_prepared(b, compact=compact) for _, b in logical]
        banks[compact] = (
            torch.stack([p.words for p in w13]),
            torch.stack([p.metadata for p in w13]),
            torch.stack([p.words for p in w2]),
            torch.stack([p.metadata for p in w2]),
        )
    return banks


def with_free_biases(s13: torch.Tensor, expert: int, seed: int) -> torch.Tensor:
    """4-byte metadata whose `expert` records carry arbitrary finite FP16 biases (not
    fp16(-z*scale)): the decode's FP32 sum then rounds and must still round once overall."""
    gen = torch.Generator().manual_seed(seed)
    out = s13.clone()
    exponents = torch.randint(-24, 6, out[expert].shape, generator=gen).double()
    mantissas = torch.rand(out[expert].shape, generator=gen, dtype=torch.float64) + 1
    bias = round_fp16_by_quantum(-(mantissas * torch.exp2(exponents)))
    bias_bits = bias.view(torch.int16).to(torch.int64) & 0xFFFF
    records = (out[expert].to(torch.int64) & 0xFFFF) | (bias_bits << 16)
    records = torch.where(records >= 2**31, records - 2**32, records)
    out[expert] = records.to(torch.int32)
    return out


def expected_routes(
    x: torch.Tensor,
    w13: torch.Tensor,
    s13: torch.Tensor,
    w2: torch.Tensor,
    s2: torch.Tensor,
    ids: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(routes (top-k, N2): each route's W2 output as FP16, zero for an invalid id;
    intermediate (top-k, K2)) by the CPU reference arithmetic, any geometry with 16 W13 K
    slices."""
    compact = s13.dtype == torch.uint8
    experts = w13.shape[0]
    route_ids = ids.reshape(-1).long()
    valid = (route_ids >= 0) & (route_ids < experts)
    k2, n2 = w2.shape[1], w2.shape[2] * 8
    intermediate = torch.zeros((route_ids.numel(), k2), dtype=torch.float16)
    routes = torch.zeros((route_ids.numel(), n2), dtype=torch.float16)
    chosen = route_ids[valid]

    def decoded(words: torch.Tensor, meta: torch.Tensor) -> torch.Tensor:
        k, n = words.shape[1], words.shape[2] * 8
        codes = numerics.unpack_prepared_words(words, k, n)
        scales, biases = numerics.decode_metadata(meta, compact)
        return numerics.dequantize(codes, scales, biases, k // scales.shape[1])

    inter = numerics.w13_stage(x.reshape(-1), decoded(w13[chosen], s13[chosen]))
    intermediate[valid] = inter
    routes[valid] = numerics.w2_stage(inter, decoded(w2[chosen], s2[chosen]))
    return routes, intermediate


def expected_step(
    x: torch.Tensor,
    w13: torch.Tensor,
    s13: torch.Tensor,
    w2: torch.Tensor,
    s2: torch.Tensor,
    ids: torch.Tensor,
    topk: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(out (1, N2), intermediate (top-k, K2)) by the CPU reference arithmetic."""
    routes, intermediate = expected_routes(x, w13, s13, w2, s2, ids)
    out = numerics.combine_routes(topk.reshape(-1), routes)
    return out.reshape(1, routes.shape[1]), intermediate


def balanced_weights(routes: torch.Tensor, topk: torch.Tensor) -> torch.Tensor:
    """`topk` with each route's weight times the power of two that brings its route's
    largest output near 1. With the weights as drawn, the adversarial expert's routes (outputs
    near 10^3) hide the others' (near 10^-3) in the FP16 sum: a kernel that dropped such a
    route, or gave it another expert's, would still be exact. Powers of two keep the drawn
    weights' mantissas, so every product still rounds as before."""
    scaled = topk.clone().reshape(-1)
    for r in range(routes.shape[0]):
        peak = float(routes[r].abs().max())
        if peak > 0:
            scaled[r] = scaled[r] * 2.0 ** -round(math.log2(peak))
    return scaled.reshape(topk.shape)


def hidden_routes(routes: torch.Tensor, topk: torch.Tensor) -> list[int]:
    """The routes (non-zero ones) whose loss leaves the combined FP16 output unchanged: those
    a test on these weights cannot see."""
    weights = topk.reshape(-1)
    out = numerics.combine_routes(weights, routes)
    hidden = []
    for r in range(routes.shape[0]):
        if routes[r].any():
            without = routes.clone()
            without[r] = 0
            if torch.equal(numerics.combine_routes(weights, without), out):
                hidden.append(r)
    return hidden


# Elements behind each output buffer that no store may reach.
GUARD = 64


def guarded(rows: int, cols: int, device: torch.device | None = None) -> torch.Tensor:
    """A NaN FP16 (rows, cols) tensor at the front of a NaN buffer GUARD elements longer: a
    store past its end (a masked last program whose mask is lost) lands in the guard, where
    `spilled` sees it, instead of in memory nobody checks."""
    buffer = torch.full((rows * cols + GUARD,), float("nan"), dtype=torch.float16, device=device)
    return buffer[: rows * cols].view(rows, cols)


def spilled(tensor: torch.Tensor) -> int:
    """How many elements of the guard behind `guarded`'s `tensor` a store reached."""
    behind = tensor.as_strided((GUARD,), (1,), tensor.storage_offset() + tensor.numel())
    return int((~behind.isnan()).sum())
