"""Inputs of the QPN M1 step built so that the contract's order of operations and its single
roundings show in the FP16 bits (docs/contracts/core.md §6): any other summation order, or a
rounding more, gives other bits. Shared by tests/test_numerics_order.py (the CPU reference
arithmetic) and tests/triton_order_cases.py (the Triton kernels under the interpreter).

One expert, every route to it. With S = K/16 the slice size:
- pair 1 (gate column 1): products +2^24 in slice 3, +3 in slice 9, (+7, -2^24, -5) in
  ascending k in slice 10 and +7 in slice 13. Slices each summed in ascending k, then the 16
  in slice order, in FP32: 13. A single chain over K gives 14, the slices in reverse or as a
  pairwise tree 12, the exact sum 12, each slice summed downwards 14. Up 1, so the
  intermediate is fp16(silu(g)), 13.0 for g = 13 (12.0 and 14.0 otherwise).
- pair 0: gate 16, up 1, so intermediate 16.0; W2 column 0 reads it with weight 2^-5 + 2^-15,
  so every route is 0.5 + 2^-11 (exact). The router weights below make the chain
  acc = fma(weight[r], route[r], acc) end on an FP32 value whose FP16 rounding differs from
  the unfused chain's, the reversed chain's and the exactly rounded sum's.
- W2 column 1 reads pair 1's intermediate with weight 1, so `out[1]` carries the W13 order.
"""

from __future__ import annotations

import numpy as np
import torch

from native.reference.packing import ExpertWeights, pack_prepared
from native.reference.triton_qpn import QpnGeometry

# Reduced geometry of the interpreter tests: 16 slices of 64 (two groups of 32 each).
GEOMETRY = QpnGeometry(experts=1, w13_k=16 * 64, w13_n=64, w2_k=32, w2_n=128)
IDS = [0] * 10
# float32 router weights; found by search, see the module docstring.
ROUTER_WEIGHTS = (
    -1048577.0,
    1048577.0,
    1 / 3,
    0.1,
    1 / 3,
    -0.00024414065410383046,
    0.1,
    -0.9999999403953552,
    1.500000238418579,
    1 / 3,
)
ROUTE = 0.5 + 2**-11
# (slice, offset in the slice, x, q, scale) of pair 1's gate products, in ascending k.
GATE_PRODUCTS = (
    (3, 0, 1024.0, 8, 2048.0),  # +2^24
    (9, 0, 3.0, 1, 1.0),  # +3
    (10, 0, 7 / 1024, 1, 1024.0),  # +7
    (10, 1, -2048.0, 8, 1024.0),  # -2^24
    (10, 2, -5 / 1024, 1, 1024.0),  # -5
    (13, 0, 7.0, 1, 1.0),  # +7
)
# The FP16 results of the contract's arithmetic, and what the other orders give.
GATE = 13.0
GATE_OTHER_ORDERS = {"one chain": 14.0, "reversed": 12.0, "tree": 12.0, "exact": 12.0}


def _expert(k: int, n: int, group: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    codes = torch.zeros((k, n), dtype=torch.int32)
    zeros = torch.zeros((k // group, n), dtype=torch.int32)
    scales = torch.ones((k // group, n), dtype=torch.float16)
    return codes, zeros, scales


def crafted(geometry: QpnGeometry = GEOMETRY) -> tuple[torch.Tensor, ...]:
    """(x, topk, ids, and per layout w13, s13, w2, s2 as {compact: tuple})."""
    g = geometry
    slice_k = g.w13_k // 16
    x = torch.zeros((1, g.w13_k), dtype=torch.float16)
    codes, zeros, scales = _expert(g.w13_k, g.w13_n, g.group)
    up = g.w13_n // 2  # checkpoint columns: gates first, then ups
    # Pair 0: gate 16 and up 1 from x[0] = 1.
    x[0, 0] = 1.0
    codes[0, 0], scales[0, 0] = 1, 16.0
    codes[0, up + 0] = 1
    codes[0, up + 1] = 1  # pair 1's up: 1
    for s, offset, value, q, scale in GATE_PRODUCTS:
        k = s * slice_k + offset
        x[0, k] = value
        codes[k, 1], scales[k // g.group, 1] = q, scale
    w13 = ExpertWeights(codes, zeros, scales)
    codes2, zeros2, scales2 = _expert(g.w2_k, g.w2_n, g.group)
    codes2[0, 0], scales2[0, 0] = 1, 2**-5 + 2**-15
    codes2[1, 1] = 1
    w2 = ExpertWeights(codes2, zeros2, scales2)
    banks = {}
    for compact in (False, True):
        a = pack_prepared(w13, compact=compact, interleave_gated_silu=True)
        b = pack_prepared(w2, compact=compact)
        banks[compact] = (a.words[None], a.metadata[None], b.words[None], b.metadata[None])
    topk = torch.tensor([ROUTER_WEIGHTS], dtype=torch.float32)
    return x, topk, torch.tensor([IDS], dtype=torch.int32), banks  # type: ignore[return-value]


def fp16_bits(value: float) -> int:
    return int(np.array(value, dtype=np.float16).view(np.uint16))


def out_literals() -> dict[str, float]:
    """out[0] by the contract's chain and by the other ways; computed exactly (fractions)."""
    from fractions import Fraction

    def round32(exact: Fraction) -> np.float32:
        near = np.float32(float(exact))
        candidates = [
            near,
            np.nextafter(near, np.float32(np.inf)),
            np.nextafter(near, np.float32(-np.inf)),
        ]
        return min(
            candidates,
            key=lambda c: (abs(Fraction(float(c)) - exact), int(c.view(np.uint32)) & 1),
        )

    weights = [np.float32(w) for w in ROUTER_WEIGHTS]
    route = Fraction(ROUTE)

    def fused(order: list[np.float32]) -> float:
        acc = np.float32(0)
        for w in order:
            acc = round32(Fraction(float(w)) * route + Fraction(float(acc)))
        return float(np.float16(acc))

    unfused = np.float32(0)
    for w in weights:
        unfused = np.float32(unfused + np.float32(w * np.float32(ROUTE)))
    return {
        "fma chain": fused(weights),
        "reversed": fused(weights[::-1]),
        "unfused": float(np.float16(unfused)),
        "exact": float(np.float16(round32(sum(Fraction(float(w)) * route for w in weights)))),
    }
