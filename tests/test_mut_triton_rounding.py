"""The interpreter path's two rounding repairs, with inputs on which a repair that is wrong shows
in the FP16 bits (docs/contracts/core.md §6): the decode's FP32 sum of a free 4-byte bias,
rounded to odd before its cast to FP16 (`_decode`'s ROUND_SUM), and the router-weighted
sum's FP64 FMA, rounded to odd before its cast to FP32 (`_fma_fp32`).

Why: random data almost never lands an FP32 (resp. FP64) sum on the midpoint between two
FP16 (resp. FP32) neighbours with a nonzero error, so the other interpreter tests pass with
the repairs removed, made one-sided or rounded the wrong way. Here every up column of
expert 0 is such a decode (x is one-hot, the gate 16, so the intermediate is 16 times the
decoded weight), and columns 0-3 of the output end on such an FMA, with either sign of the
sum and of its error (a double rounding at route 3 shows after route 4 cancels the 1). The
literals below are what fp16 fma (resp. fmaf) gives; rounding twice gives the `TWICE` ones.

Minimal geometry (one W13 and one W2 program a route), 4-byte records only (the 3-byte
layout's biases are fp16(-z*scale), whose FP32 sum is exact). Run as a plain test, this file
runs itself in a child with TRITON_INTERPRET=1, as tests/test_mut_triton_interp.py does.
"""

from __future__ import annotations

import dataclasses
import os

import torch

from native.reference.fp64 import round_fp16_by_quantum
from native.reference.packing import ExpertWeights, pack_prepared
from native.reference.triton_qpn import QpnConfig, QpnGeometry, launch_qpn_m1
from tests.interpreter_child import run_under_interpreter
from tests.qpn_triton_helpers import expected_step

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"

GEOMETRY = QpnGeometry(experts=10, top_k=10, w13_k=128, w13_n=64, w2_k=32, w2_n=32, group=8)
CONFIG = QpnConfig(w13_pairs=32, w13_warps=1, w2_columns=32, w2_warps=1)
PAIRS = GEOMETRY.w2_k
U = 2.0**-24  # the smallest FP16 subnormal

# Decodes (q, scale, bias) at k = 0 of expert 0's up columns, each an FP32 sum q*scale + bias
# that rounds (bias far below the product's quantum) onto, or one FP32 ulp from, the midpoint
# between two FP16 neighbours: (q, scale, bias, fp16 fma, fp16 of the FP32 sum).
DECODES = (
    # Midpoint 3 + 4.5 * 2^-9 plus U: the sum rounds down onto it (err > 0), ties go to even.
    (3, 1 + 3 * 2**-10, U, 3 + 5 * 2**-9, 3 + 4 * 2**-9),
    # Midpoint 3 + 1.5 * 2^-9 minus U: onto it (err < 0), ties go up to even.
    (3, 1 + 2**-10, -U, 3 + 2**-9, 3 + 2**-8),
    # The same, negative (err < 0 with a negative sum, then err > 0).
    (3, -(1 + 3 * 2**-10), -U, -(3 + 5 * 2**-9), -(3 + 4 * 2**-9)),
    (3, -(1 + 2**-10), U, -(3 + 2**-9), -(3 + 2**-8)),
    # Midpoint plus 3U: the sum rounds up to the odd FP32 neighbour above it (err < 0), left
    # as it is; stepped down to the (even) midpoint, ties would go down.
    (3, 1 + 3 * 2**-10, 3 * U, 3 + 5 * 2**-9, 3 + 5 * 2**-9),
    (3, -(1 + 3 * 2**-10), -3 * U, -(3 + 5 * 2**-9), -(3 + 5 * 2**-9)),
    # Two FP32 ulps from the midpoint (the sum 1.75 ulps from it, err < 0, resp. > 0): one
    # step towards it keeps the side, two land on it and ties go the other way.
    (3, 1 + 3 * 2**-10, 7 * U, 3 + 5 * 2**-9, 3 + 5 * 2**-9),
    (3, 1 + 2**-10, -7 * U, 3 + 2**-9, 3 + 2**-9),
)
# Each case at scales 2^m (bias too), m = 0..3.
UP_CASES = [(q, s * 2**m, b * 2**m, want * 2**m) for m in range(4) for q, s, b, want, _ in DECODES]

# Router weights, and the values of routes 0-7 and 9 (expert r + 1 for route r < 8, expert 9
# for route 9) in output columns 0-9 (zero elsewhere and where not given); route 8 is
# expert 0's decodes, with weight 0.
W0 = float(torch.tensor((1 + 2**-11) / (1 + 2**-10)).float())  # fmaf(W0, 1 + 2^-10, 0) = 1 + 2^-11
W6 = 1 + 3 * 2**-23
ROUTER = (
    W0,
    1 + 2**-23,
    U * (1 - 2**-10 + 2**-20),
    U * (1 + 2**-10 + 2**-20),
    1.0,
    2.0**-60,
    W6,
    1 + 2**-23,
    0,
    1.0,
)
ROUTE_VALUES: tuple[dict[int, float], ...] = (
    {0: 1 + 2**-10, 1: -(1 + 2**-10), 7: 0.5 + 2**-11},  # acc = +-(1 + 2^-11); column 7 halved
    {2: 1.0, 3: -1.0, 5: 1.5},  # acc = +-(1 + 2^-23), odd; 1.5 + 1.5 * 2^-23 (see below)
    # +-2^-24 (1 + 2^-30): the FP64 sum 2^-54 past the FP32 midpoint 1 + 2^-11 + 2^-24.
    {0: 1 + 2**-10, 1: -(1 + 2**-10), 7: 0.5 + 2**-11},
    # +-2^-24 (1 - 2^-30): 2^-54 short of the FP32 midpoint 1 + 3 * 2^-24.
    {2: 1 - 2**-10, 3: -(1 - 2**-10)},
    {2: -1.0, 3: 1.0},  # cancels the 1: 2^-23 (rounded twice: 2^-22)
    # acc = 2^-60 (column 4), 3 * 2^-54 (column 6), +-7 * 2^-54 (columns 8, 9).
    {4: 1.0, 6: 192.0, 8: 448.0, 9: -448.0},
    # W6 * 1.5 is the FP32 midpoint 1.5 + 4.5 * 2^-23 (even below): its sum with 2^-60 rounds
    # onto it in FP64 (an error the FP64 sum alone hides), with 3 * 2^-54 to the odd FP64
    # neighbour above it, with 7 * 2^-54 to the even one two FP64 ulps above (one step down
    # keeps the side, two land on the midpoint). Column 5: (1 + 2^-23) * 1.5 (route 1) is an
    # exact FP64 sum on the FP32 midpoint 1.5 + 1.5 * 2^-23 (even above): ties go up.
    {4: 1.5, 6: 1.5, 8: 1.5},
    # (1 + 2^-23) * 1.5 on the FP32 midpoint (even above) plus -7 * 2^-54: two FP64 ulps below
    # it, err > 0; one step up keeps the side, two land on it and ties go up.
    {9: 1.5},
    {4: -1.5, 5: -1.5, 6: -1.5, 8: -1.5, 9: -1.5},  # route 9: cancels the 1.5
)
IDS = [1, 2, 3, 4, 5, 6, 7, 8, 0, 9]
OUT = (
    1 + 2**-10,
    -(1 + 2**-10),
    2**-23,
    -(2**-23),
    5 * 2**-23,
    2**-22,
    5 * 2**-23,
    0.5 + 2**-11,
    5 * 2**-23,
    2**-23,
)
OUT_TWICE = (1.0, -1.0, 2**-22, -(2**-22))


def _records_at(k: int, n: int, group: int, interleaved: bool = True) -> torch.Tensor:
    """Where pack_prepared (W13, interleaved; W2 not) puts the 4-byte record of (group g,
    checkpoint column c): its flat index, from an expert whose scales name their own record."""
    groups = k // group
    marks = torch.arange(1, groups * n + 1, dtype=torch.int32).to(torch.int16)
    scales = marks.view(torch.float16).reshape(groups, n)
    zeros = torch.zeros((groups, n), dtype=torch.int32)
    codes = torch.zeros((k, n), dtype=torch.int32)
    expert = ExpertWeights(codes, zeros, scales)
    meta = pack_prepared(expert, compact=False, interleave_gated_silu=interleaved).metadata
    flat = meta.reshape(-1).to(torch.int64) & 0xFFFF
    where = torch.empty(groups * n, dtype=torch.int64)
    where[flat - 1] = torch.arange(flat.numel())
    return where.reshape(groups, n)


def _fp16_bits(value: float) -> int:
    return int(torch.tensor([value], dtype=torch.float16).view(torch.int16).item()) & 0xFFFF


def _w13(ups: list[tuple[int, float, float]]) -> tuple[torch.Tensor, torch.Tensor]:
    """One W13 expert (4-byte layout, interleaved): gate p = 16 and up p = fp16 fma(q, scale,
    bias) of ups[p] at k = 0, zero weights elsewhere."""
    g = GEOMETRY
    codes = torch.zeros((g.w13_k, g.w13_n), dtype=torch.int32)
    scales = torch.ones((g.w13_k // g.group, g.w13_n), dtype=torch.float16)
    zeros = torch.zeros_like(scales, dtype=torch.int32)
    codes[0, :PAIRS], scales[0, :PAIRS] = 1, 16.0
    for p, (q, scale, _) in enumerate(ups):
        codes[0, PAIRS + p], scales[0, PAIRS + p] = q, scale
    expert = ExpertWeights(codes, zeros, scales)
    packed = pack_prepared(expert, compact=False, interleave_gated_silu=True)
    at = _records_at(g.w13_k, g.w13_n, g.group)[:, PAIRS:]
    return packed.words, _with_records(packed.metadata, at, [(s, b) for _, s, b in ups])


def _w2_identity() -> tuple[torch.Tensor, torch.Tensor]:
    """W2 with weight 1 at (k = c, column c), zero elsewhere: route column c = intermediate c."""
    g = GEOMETRY
    codes = torch.zeros((g.w2_k, g.w2_n), dtype=torch.int32)
    codes[torch.arange(g.w2_n), torch.arange(g.w2_n)] = 1
    scales = torch.ones((g.w2_k // g.group, g.w2_n), dtype=torch.float16)
    zeros = torch.zeros_like(scales, dtype=torch.int32)
    packed = pack_prepared(ExpertWeights(codes, zeros, scales), compact=False)
    return packed.words, packed.metadata


def _with_records(
    meta: torch.Tensor, at: torch.Tensor, records: list[tuple[float, float]]
) -> torch.Tensor:
    """`meta` with the 4-byte record (scale, bias) of group 0, column c = records[c]."""
    meta = meta.clone()
    flat = meta.view(-1)
    for c, (scale, bias) in enumerate(records):
        record = _fp16_bits(scale) | (_fp16_bits(bias) << 16)
        flat[at[0, c]] = record - (1 << 32) if record >= 1 << 31 else record
    return meta


def _w2_decodes(cases: list[tuple[int, float, float]]) -> tuple[torch.Tensor, torch.Tensor]:
    """W2 (4-byte layout) whose column c at k = 0 decodes to fp16 fma(q, scale, bias) of
    cases[c], zero weights elsewhere."""
    g = GEOMETRY
    codes = torch.zeros((g.w2_k, g.w2_n), dtype=torch.int32)
    scales = torch.ones((g.w2_k // g.group, g.w2_n), dtype=torch.float16)
    zeros = torch.zeros_like(scales, dtype=torch.int32)
    for c, (q, scale, _) in enumerate(cases):
        codes[0, c], scales[0, c] = q, scale
    packed = pack_prepared(ExpertWeights(codes, zeros, scales), compact=False)
    at = _records_at(g.w2_k, g.w2_n, g.group, interleaved=False)
    return packed.words, _with_records(packed.metadata, at, [(s, b) for _, s, b in cases])


def w2_banks() -> tuple[torch.Tensor, ...]:
    """The decodes of UP_CASES in W2 instead: expert 0's W13 gives intermediate 1 at k = 0
    (gate 16, up 1/16) and 0 elsewhere, so route column c is W2's decoded weight c itself;
    the other experts are zero. The W13 cases above never reach W2's own decode, whose
    records carry no free bias anywhere else in the interpreter tests."""
    one = _w13([(1, 1 / 16, 0.0)] + [(0, 1.0, 0.0)] * (PAIRS - 1))
    w2, s2 = _w2_decodes([(q, s, b) for q, s, b, _ in UP_CASES])
    w2_zero, s2_zero = _w2_decodes([])
    experts = GEOMETRY.experts
    return (
        torch.stack([one[0]] * experts),
        torch.stack([one[1]] * experts),
        torch.stack([w2] + [w2_zero] * (experts - 1)),
        torch.stack([s2] + [s2_zero] * (experts - 1)),
    )


def w2_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x one-hot, route 0 (expert 0) weighted 1 and the rest 0 (experts 1-9: zero routes),
    so the output is route 0 exactly: the decodes."""
    x = torch.zeros((1, GEOMETRY.w13_k), dtype=torch.float16)
    x[0, 0] = 1.0
    topk = torch.tensor([[1.0] + [0.0] * 9], dtype=torch.float32)
    return x, topk, torch.tensor([list(range(10))], dtype=torch.int32)


def banks() -> tuple[torch.Tensor, ...]:
    experts = [_w13([(q, s, b) for q, s, b, _ in UP_CASES])]
    for values in ROUTE_VALUES:
        ups = [(1, values[c] / 16, 0.0) if c in values else (0, 1.0, 0.0) for c in range(PAIRS)]
        experts.append(_w13(ups))
    w2, s2 = _w2_identity()
    return (
        torch.stack([w for w, _ in experts]),
        torch.stack([m for _, m in experts]),
        torch.stack([w2] * GEOMETRY.experts),
        torch.stack([s2] * GEOMETRY.experts),
    )


def test_the_crafted_cases_round_twice_otherwise() -> None:
    # The data can fail a wrong repair: rounding twice gives other bits in every case.
    for q, s, b, want, twice in DECODES:
        exact = torch.tensor([q * s + b], dtype=torch.float64)  # exact in FP64
        assert round_fp16_by_quantum(exact).item() == want
        assert exact.float().half().item() == twice
    assert sum(twice != want for *_, want, twice in DECODES) == 4
    assert all(a != b for a, b in zip(OUT, OUT_TWICE, strict=False))
    x, topk, ids = crafted_inputs()
    w13, s13, w2, s2 = banks()
    want_out, want_intermediate = expected_step(x, w13, s13, w2, s2, ids, topk)
    assert want_out[0, : len(OUT)].tolist() == list(OUT)
    assert want_intermediate[8].tolist() == [16 * w for *_, w in UP_CASES]
    x, topk, ids = w2_inputs()
    want_out, _ = expected_step(x, *w2_banks(), ids, topk)
    assert want_out[0].tolist() == [w for *_, w in UP_CASES]
    assert sum(w != t for (*_, w, t) in DECODES) * 4 == sum(
        w != float(torch.tensor([q * s + b], dtype=torch.float64).float().half())
        for q, s, b, w in UP_CASES
    )


def crafted_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = torch.zeros((1, GEOMETRY.w13_k), dtype=torch.float16)
    x[0, 0] = 1.0
    topk = torch.tensor([ROUTER], dtype=torch.float32)
    return x, topk, torch.tensor([IDS], dtype=torch.int32)


if INTERPRETED:

    def launched(
        x: torch.Tensor,
        banks: tuple[torch.Tensor, ...],
        ids: torch.Tensor,
        topk: torch.Tensor,
        config: QpnConfig,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(out, intermediate) of one step under the interpreter, both NaN-filled first."""
        out = torch.full((1, GEOMETRY.w2_n), float("nan"), dtype=torch.float16)
        shape = (len(IDS), GEOMETRY.w2_k)
        intermediate = torch.full(shape, float("nan"), dtype=torch.float16)
        launch_qpn_m1(
            out, intermediate, x, *banks, ids, topk,
            compact=False, geometry=GEOMETRY, config=config,
        )  # fmt: skip
        return out, intermediate

    def test_the_interpreted_repairs_round_once() -> None:
        x, topk, ids = crafted_inputs()
        w13, s13, w2, s2 = banks()
        # W13's chains in one go, and in batches of words (a call of _chains of its own).
        for config in (CONFIG, dataclasses.replace(CONFIG, w13_words_first=True)):
            out, intermediate = launched(x, (w13, s13, w2, s2), ids, topk, config)
            want_decodes = [16 * w for *_, w in UP_CASES]
            assert intermediate[8].tolist() == want_decodes, (config, intermediate[8])
            assert out[0, : len(OUT)].tolist() == list(OUT), (config, out[0, : len(OUT)])
            want_out, want_intermediate = expected_step(x, w13, s13, w2, s2, ids, topk)
            assert torch.equal(intermediate, want_intermediate)
            assert torch.equal(out, want_out)

    def test_w2_interpreted_decode_rounds_once() -> None:
        x, topk, ids = w2_inputs()
        w13, s13, w2, s2 = w2_banks()
        # W2's chains, and its recheck's redo (a call of _chains of its own).
        for config in (CONFIG, dataclasses.replace(CONFIG, w2_recheck=True, w2_redo=True)):
            out, intermediate = launched(x, (w13, s13, w2, s2), ids, topk, config)
            assert out[0].tolist() == [w for *_, w in UP_CASES], (config, out[0])

else:

    def test_the_cases_under_the_triton_interpreter() -> None:
        run_under_interpreter(__file__, 3, timeout=600)
