"""CPU reference arithmetic against the FP64 oracle and the seed's acceptance rules."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

import native.reference  # noqa: F401  (registers the ops)
from native.awq_schemas import GROUP_SIZE, W2_K, W2_N, W13_K, W13_N
from native.reference import numerics
from native.reference.fp64 import round_fp16_by_quantum
from native.reference.oracle import (
    BoundCheck,
    check_bounds,
    fp16_ulp_distance,
    oracle_qpn_m1,
    silu32_fp16,
)
from native.reference.packing import ExpertWeights, QpnBanks, pack_qpn_banks, random_expert

QPN = torch.ops.routectl.awq_moe_qpn_m1_sm70_out
SEED_EXPERTS = (0, 1, 257, 511)
DISTINCT_IDS = [3, 100, 200, 300, 400, 500, 0, 1, 257, 511]
SEED_IDS = [511, 0, 257, 1, 511, 1, 0, 257, 0, 511]
ONE_HOT_K = (0, 31, 32, 2559)


@pytest.fixture(scope="module")
def logical() -> tuple[dict[int, ExpertWeights], dict[int, ExpertWeights]]:
    gen = torch.Generator().manual_seed(731)
    return (
        {e: random_expert(W13_K, W13_N, GROUP_SIZE, gen) for e in DISTINCT_IDS},
        {e: random_expert(W2_K, W2_N, GROUP_SIZE, gen) for e in DISTINCT_IDS},
    )


@pytest.fixture(scope="module")
def both_layouts(
    logical: tuple[dict[int, ExpertWeights], dict[int, ExpertWeights]],
) -> dict[str, QpnBanks]:
    return {
        name: pack_qpn_banks(*logical, compact=compact)
        for name, compact in (("4-byte", False), ("3-byte", True))
    }


def run(
    banks: QpnBanks,
    x: torch.Tensor,
    ids: list[int],
    topk: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.empty((1, 2560), dtype=torch.float16).fill_(float("nan"))
    intermediate = torch.empty((10, 160), dtype=torch.float16).fill_(float("nan"))
    QPN(
        out,
        intermediate,
        x,
        banks.w13,
        banks.s13,
        banks.w2,
        banks.s2,
        torch.tensor([ids], dtype=torch.int32),
        topk,
    )
    return out, intermediate


def distinct_weights() -> torch.Tensor:
    return torch.linspace(0.05, 0.5, 10, dtype=torch.float32).reshape(1, 10)


def oracle_for(
    banks: QpnBanks, x: torch.Tensor, ids: list[int], topk: torch.Tensor, **kwargs: torch.Tensor
):
    return oracle_qpn_m1(
        x,
        banks.w13,
        banks.s13,
        banks.w2,
        banks.s2,
        torch.tensor([ids], dtype=torch.int32),
        topk,
        **kwargs,
    )


def decoded_from_logical(w: ExpertWeights, k: int, columns: torch.Tensor) -> torch.Tensor:
    """fp16 fma(q, s, fp16(-z*s)) at row k, straight from the logical weights."""
    group = k // GROUP_SIZE
    s = w.scales[group, columns].double()
    bias = round_fp16_by_quantum(-w.zeros[group, columns].double() * s).double()
    return round_fp16_by_quantum(w.codes[k, columns].double() * s + bias)


@pytest.mark.parametrize("layout", ["4-byte", "3-byte"])
@pytest.mark.parametrize("k", ONE_HOT_K)
def test_one_hot_seed_acceptance(
    both_layouts: dict[str, QpnBanks], logical, layout: str, k: int
) -> None:
    banks = both_layouts[layout]
    w13_experts, _ = logical
    x = torch.zeros((1, 2560), dtype=torch.float16)
    x[0, k] = 1
    topk = distinct_weights()
    out, intermediate = run(banks, x, SEED_IDS, topk)

    half = W13_N // 2
    gate_cols, up_cols = torch.arange(half), torch.arange(half) + half
    expected = torch.stack(
        [
            round_fp16_by_quantum(
                silu32_fp16(decoded_from_logical(w13_experts[e], k, gate_cols)).double()
                * decoded_from_logical(w13_experts[e], k, up_cols).double()
            )
            for e in SEED_IDS
        ]
    )
    assert torch.equal(intermediate, expected)
    oracle = oracle_for(banks, x, SEED_IDS, topk, intermediate=intermediate)
    assert torch.equal(oracle.intermediate, expected)
    check = check_bounds(out, oracle.out)
    assert check.passed, check


@pytest.mark.parametrize("layout", ["4-byte", "3-byte"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_inputs_within_bounds(
    both_layouts: dict[str, QpnBanks], layout: str, seed: int
) -> None:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn((1, 2560), generator=gen).half()
    topk = torch.rand((1, 10), generator=gen)
    ids = [SEED_EXPERTS[int(i)] for i in torch.randint(0, len(SEED_EXPERTS), (10,), generator=gen)]
    out, _ = run(both_layouts[layout], x, ids, topk)
    check = check_bounds(out, oracle_for(both_layouts[layout], x, ids, topk).out)
    assert check.passed, check
    assert 0 < check.max_abs_margin <= 1 and 0 < check.l2_margin <= 1


def test_layouts_give_identical_outputs(both_layouts: dict[str, QpnBanks]) -> None:
    gen = torch.Generator().manual_seed(5)
    x = torch.randn((1, 2560), generator=gen).half()
    topk = torch.rand((1, 10), generator=gen)
    four = run(both_layouts["4-byte"], x, SEED_IDS, topk)
    three = run(both_layouts["3-byte"], x, SEED_IDS, topk)
    assert torch.equal(four[0], three[0]) and torch.equal(four[1], three[1])
    assert four[0].abs().max() > 0


def test_duplicate_ids_keep_their_own_weights(both_layouts: dict[str, QpnBanks]) -> None:
    banks = both_layouts["4-byte"]
    gen = torch.Generator().manual_seed(9)
    x = torch.randn((1, 2560), generator=gen).half()
    topk = distinct_weights()
    out, intermediate = run(banks, x, SEED_IDS, topk)
    oracle = oracle_for(banks, x, SEED_IDS, topk, intermediate=intermediate)
    check = check_bounds(out, oracle.out)
    assert check.passed, check
    # Rows of one expert agree, and the second occurrence's own weight counts.
    assert torch.equal(intermediate[0], intermediate[4]) and torch.equal(
        intermediate[0], intermediate[9]
    )
    heavier = topk.clone()
    heavier[0, 4] *= 4
    out_heavier, _ = run(banks, x, SEED_IDS, heavier)
    assert not torch.equal(out_heavier, out)
    assert check_bounds(out_heavier, oracle_for(banks, x, SEED_IDS, heavier).out).passed


@pytest.mark.parametrize("layout", ["4-byte", "3-byte"])
@pytest.mark.parametrize("bad", [-1, 512, -(2**31), 2**31 - 1, 1000, -512], ids=lambda v: f"id{v}")
def test_invalid_ids_give_zero_rows(
    both_layouts: dict[str, QpnBanks], layout: str, bad: int
) -> None:
    banks = both_layouts[layout]
    x = torch.randn((1, 2560), generator=torch.Generator().manual_seed(3)).half()
    out, intermediate = run(banks, x, [bad] * 10, torch.rand(1, 10))
    assert torch.equal(out, torch.zeros_like(out))
    assert torch.equal(intermediate, torch.zeros_like(intermediate))


def test_invalid_ids_contribute_exactly_zero(both_layouts: dict[str, QpnBanks]) -> None:
    banks = both_layouts["3-byte"]
    x = torch.randn((1, 2560), generator=torch.Generator().manual_seed(4)).half()
    ids = [0, -1, 257, 512, 1, 511, -7, 0, 4096, 257]
    topk = distinct_weights()
    out, intermediate = run(banks, x, ids, topk)
    invalid = torch.tensor([not 0 <= i < 512 for i in ids])
    assert torch.equal(intermediate[invalid], torch.zeros((4, 160), dtype=torch.float16))
    # Same result with the invalid routes' weights zeroed and their ids made valid.
    zeroed = topk.clone()
    zeroed[0, invalid] = 0
    valid_ids = [i if 0 <= i < 512 else 1 for i in ids]
    expected_out, expected_inter = run(banks, x, valid_ids, zeroed)
    assert torch.equal(out, expected_out)
    assert torch.equal(intermediate[~invalid], expected_inter[~invalid])
    assert check_bounds(out, oracle_for(banks, x, ids, topk).out).passed


def test_ten_distinct_experts_match_the_oracle(both_layouts: dict[str, QpnBanks]) -> None:
    banks = both_layouts["3-byte"]
    gen = torch.Generator().manual_seed(21)
    x = torch.randn((1, 2560), generator=gen).half()
    topk = torch.rand((1, 10), generator=gen)
    out, intermediate = run(banks, x, DISTINCT_IDS, topk)
    oracle = oracle_for(banks, x, DISTINCT_IDS, topk)
    assert check_bounds(out, oracle.out).passed
    # FP32 vs FP64 dots: the intermediate may differ from the oracle's by an fp16 ulp or so.
    assert int(fp16_ulp_distance(intermediate, oracle.intermediate).max()) <= 2


# --- checker -------------------------------------------------------------------------------


def test_checker_bounds_and_margins() -> None:
    ref = torch.ones(2560, dtype=torch.float64)
    ref[0], ref[1] = 4.0, 0.0
    bound = 2e-3 * 4.0 + 2.0**-24
    at_bound = ref.clone()
    at_bound[1] = bound
    just_over = ref.clone()
    just_over[1] = bound * 1.01
    passing = check_bounds(at_bound, ref)
    assert passing.passed and passing.max_abs_margin == pytest.approx(1.0)
    failing = check_bounds(just_over, ref)
    assert not failing.passed and failing.max_abs_margin == pytest.approx(1.01)
    assert failing.l2_margin < 1  # one coordinate off: the L2 bound alone would pass
    spread = ref + 4e-3  # every coordinate a little off: only the L2 bound fails
    spread_check = check_bounds(spread, ref)
    assert spread_check.max_abs_margin < 1 < spread_check.l2_margin
    assert not spread_check.passed
    nan = ref.clone()
    nan[5] = float("nan")
    assert not check_bounds(nan, ref).passed
    assert isinstance(passing, BoundCheck)


# --- exact rounding helpers ----------------------------------------------------------------


def _near_ties(gen: torch.Generator) -> torch.Tensor:
    x = torch.randn(200_000, generator=gen, dtype=torch.float64) * torch.exp2(
        torch.randint(-26, 17, (200_000,), generator=gen).double()
    )
    h = x.half()
    up = torch.nextafter(h, torch.full_like(h, float("inf"))).double()
    tie = (h.double() + up) / 2
    tiny = tie.abs() * 2.0**-40
    return torch.cat(
        [x, tie, tie + tiny, tie - tiny, torch.tensor([0.0, -0.0, 65519.99, 65520.0, 2.0**-25])]
    )


def test_fp16_rounding_is_single_and_both_methods_agree() -> None:
    x = _near_ties(torch.Generator().manual_seed(1))
    a, b = numerics.round_fp16(x), round_fp16_by_quantum(x)
    assert torch.equal(a.view(torch.int16), b.view(torch.int16))
    one = torch.tensor([1 + 2.0**-11 + 2.0**-40], dtype=torch.float64)
    assert numerics.round_fp16(one).item() == 1 + 2.0**-10  # torch's own cast gives 1.0
    with np.errstate(over="ignore"):
        expected = torch.from_numpy(x.numpy().astype(np.float16))
    assert torch.equal(a.view(torch.int16), expected.view(torch.int16))


def _exact_fp32(value: Fraction) -> float:
    """Nearest float32 to an exact rational, ties to even (brute force over neighbours)."""
    f = torch.tensor([float(value)], dtype=torch.float32)
    candidates = [
        torch.nextafter(f, torch.tensor([-float("inf")])),
        f,
        torch.nextafter(f, torch.tensor([float("inf")])),
    ]
    return min(
        candidates,
        key=lambda c: (abs(Fraction(c.item()) - value), int(c.view(torch.int32).item()) & 1),
    ).item()


def _double_rounding_cases() -> list[tuple[float, float, float]]:
    """(w fp32, route fp16, acc fp32) where w*route + acc lies just above an fp32 midpoint
    M by far less than a float64 ulp: float64 arithmetic lands on M and ties to even."""
    cases = []
    for a in range(1025, 2048, 2):
        for t in range(0, 512, 2):
            p = (2**24 + 2 * t + 1) * 1024 + 1  # M*2^34 + 1 with M a midpoint
            if p % a == 0 and p // a < 2**24:
                cases.append((p // a * 2.0**-24, a * 2.0**-10, -(2.0**-34 - 2.0**-58)))
                break
        if len(cases) == 4:
            break
    return cases


def test_fma_fp32_rounds_once() -> None:
    cases = _double_rounding_cases()
    gen = torch.Generator().manual_seed(2)
    w = torch.rand(64, generator=gen) * 2 - 1
    route = (torch.randn(64, generator=gen) * 8).half().float()
    acc = torch.randn(64, generator=gen) * torch.exp2(
        torch.randint(-30, 30, (64,), generator=gen).float()
    )
    w = torch.cat([w, torch.tensor([c[0] for c in cases])])
    route = torch.cat([route, torch.tensor([c[1] for c in cases])])
    acc = torch.cat([acc, torch.tensor([c[2] for c in cases])])
    got = numerics.fma_fp32(w, route, acc)
    for i in range(w.numel()):
        exact = Fraction(w[i].item()) * Fraction(route[i].item()) + Fraction(acc[i].item())
        assert got[i].item() == _exact_fp32(exact), i
    naive = (w.double() * route.double() + acc.double()).float()
    assert len(cases) == 4 and not torch.equal(naive[-4:], got[-4:])


def test_silu_matches_the_oracle_on_every_finite_fp16() -> None:
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16)
    values = bits.view(torch.float16)
    values = values[torch.isfinite(values)]
    assert torch.equal(
        numerics.silu_fp16(values).view(torch.int16), silu32_fp16(values).view(torch.int16)
    )


# --- reduction orders --------------------------------------------------------------------------
# Values whose FP32 sum depends on the order: 2^-14 + 2048 rounds back to 2048 (the float32
# ulp there is 2^-12), so [2^-14, 2048, -2048] sums to 0 in this order and to 2^-14 reversed.
ORDER_PROBE = (2.0**-14, 2048.0, -2048.0)


def test_w13_sums_slices_in_slice_order_and_k_in_ascending_order() -> None:
    w = torch.zeros((1, W13_K, W13_N), dtype=torch.float16)
    x = torch.zeros(W13_K, dtype=torch.float16)
    for position, value in enumerate(ORDER_PROBE):
        across = position * 160  # first row of slices 0, 1, 2: gate column 0
        x[across] = 1
        w[0, across, 0] = value
        within = 480 + position  # rows 480..482 of slice 3: gate column 1
        x[within] = 1
        w[0, within, 2] = value
    w[0, 480 + 3, 1] = w[0, 480 + 3, 3] = 1  # up columns 0 and 1 read 1 from x[483]
    x[480 + 3] = 1
    w[0, 480 + 3, 0] = w[0, 480 + 3, 2] = 0
    intermediate = numerics.w13_stage(x, w)
    assert intermediate[0, 0].item() == 0 and intermediate[0, 1].item() == 0
    reversed_w = w.flip(1)
    flipped = numerics.w13_stage(x.flip(0), reversed_w)
    assert flipped[0, 0].item() != 0 and flipped[0, 1].item() != 0


def test_routes_accumulate_in_router_order() -> None:
    routes = torch.zeros((10, 4), dtype=torch.float16)
    routes[:3, 0] = torch.tensor(ORDER_PROBE, dtype=torch.float16)
    ones = torch.ones(10, dtype=torch.float32)
    assert numerics.combine_routes(ones, routes)[0].item() == 0
    assert numerics.combine_routes(ones, routes.flip(0))[0].item() == 2.0**-14


def test_dequantize_rounds_once_over_the_fp16_range() -> None:
    gen = torch.Generator().manual_seed(6)
    groups, n = 64, 64
    exponents = torch.randint(-24, 10, (groups, n), generator=gen).double()
    scales = (
        torch.rand((groups, n), generator=gen, dtype=torch.float64) * torch.exp2(exponents)
    ).half()
    zeros = torch.randint(0, 16, (groups, n), generator=gen)
    codes = torch.randint(0, 16, (groups * 32, n), generator=gen)
    biases = round_fp16_by_quantum(-zeros.double() * scales.double())
    biases[::3] = (torch.randn((biases[::3].shape), generator=gen) * 1000).half()  # far apart
    got = numerics.dequantize(codes, scales, biases, 32)
    s64 = scales.double().repeat_interleave(32, dim=0)
    b64 = biases.double().repeat_interleave(32, dim=0)
    expected = round_fp16_by_quantum(codes.double() * s64 + b64)
    assert torch.equal(got.view(torch.int16), expected.view(torch.int16))
