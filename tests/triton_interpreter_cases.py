"""The Triton QPN M1 kernels under Triton's interpreter, at reduced shapes that keep every code
path: 16 W13 K slices of two groups each, several 32-column tiles and program blocks, both
metadata layouts, invalid and duplicate ids, adversarial scales and zero points, and (4-byte)
stored biases that are not fp16(-z*scale).

Run by tests/test_triton_interpreter.py in a child process with TRITON_INTERPRET=1 (Triton
reads it when the kernels are defined); not collected by a plain pytest run.
"""

from __future__ import annotations

import os

import pytest
import torch

from native.reference.triton_qpn import QpnConfig, QpnGeometry, launch_qpn_m1
from tests.qpn_triton_helpers import (
    adversarial_expert,
    build_banks,
    double_rounding_exposed,
    expected_step,
    with_free_biases,
)

if os.environ.get("TRITON_INTERPRET") != "1":
    raise RuntimeError("run under TRITON_INTERPRET=1 (see tests/test_triton_interpreter.py)")

GEOMETRY = QpnGeometry(experts=6, w13_k=16 * 64, w13_n=64, w2_k=32, w2_n=128)
ADVERSARIAL = (2, 5)
FREE_BIAS_EXPERT = 4
# Route ids: duplicates (2, 5), invalid ones (-1 and experts = 6), every expert reachable.
IDS = [2, 5, -1, 0, 2, 6, 1, 3, 5, 4]
# One config is the default's kernels (a thread holds a pair's gate and up chains, resp. two
# adjacent columns' chains; exchanges by layout conversion) and tiles the blocks (two W13
# blocks per route, two W2 blocks); the other is the one-chain-per-thread kernels (exchanges by
# reduction) with one block each, which keeps the slower 4-byte case short, starts the W13
# chains without waiting for all their activations (both values of w13_x_first), takes W13's
# words in two batches and takes W2's recheck's slow path (its ids and router weights read again
# after the wait, its chains redone from them as if an id had changed).
CONFIGS = {
    True: QpnConfig(w13_pairs=16, w13_warps=4, w2_columns=64),
    False: QpnConfig(
        w13_pairs=32,
        w2_columns=128,
        w13_x_first=False,
        w13_gate_up=False,
        w2_paired=False,
        w13_word_batches=2,
        w2_weights_first=False,
        w2_recheck=True,
        w2_redo=True,
    ),
}


@pytest.fixture(scope="module")
def banks() -> dict[bool, tuple[torch.Tensor, ...]]:
    g = GEOMETRY
    return build_banks(
        g.experts, g.w13_k, g.w13_n, g.w2_k, g.w2_n, g.group, seed=17, adversarial=ADVERSARIAL
    )


def run(
    banks: tuple[torch.Tensor, ...], compact: bool, x: torch.Tensor, topk: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.full((1, GEOMETRY.w2_n), float("nan"), dtype=torch.float16)
    intermediate = torch.full((10, GEOMETRY.w2_k), float("nan"), dtype=torch.float16)
    launch_qpn_m1(
        out,
        intermediate,
        x,
        *banks,
        torch.tensor([IDS], dtype=torch.int32),
        topk,
        compact=compact,
        geometry=GEOMETRY,
        config=CONFIGS[compact],
    )
    return out, intermediate


def inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    # Small activations keep the adversarial experts' large weights finite.
    x = (torch.randn((1, GEOMETRY.w13_k), generator=gen) * 0.05).half()
    return x, torch.rand((1, 10), generator=gen)


def test_adversarial_data_can_expose_a_double_rounding() -> None:
    g = GEOMETRY
    expert = adversarial_expert(g.w13_k, g.w13_n, g.group, torch.Generator().manual_seed(1))
    assert double_rounding_exposed(expert)


@pytest.mark.parametrize("compact", [True, False], ids=["3-byte", "4-byte"])
def test_kernels_equal_the_reference_arithmetic(
    banks: dict[bool, tuple[torch.Tensor, ...]], compact: bool
) -> None:
    layout = banks[compact]
    if not compact:
        w13, s13, w2, s2 = layout
        layout = (w13, with_free_biases(s13, FREE_BIAS_EXPERT, seed=3), w2, s2)
    x, topk = inputs(5)
    out, intermediate = run(layout, compact, x, topk)
    want_out, want_intermediate = expected_step(x, *layout, torch.tensor([IDS]), topk)
    assert torch.equal(intermediate, want_intermediate)
    assert torch.equal(out, want_out)
    assert not intermediate[2].any() and not intermediate[5].any()  # invalid ids
    assert torch.equal(intermediate[0], intermediate[4])  # duplicates, same expert
    assert out.abs().max() > 0


def test_layouts_give_identical_outputs(banks: dict[bool, tuple[torch.Tensor, ...]]) -> None:
    x, topk = inputs(9)
    four = run(banks[False], False, x, topk)
    three = run(banks[True], True, x, topk)
    assert torch.equal(four[0], three[0]) and torch.equal(four[1], three[1])


# W2's route slots packed (32 slots holding 3 column blocks' 10 routes; with 4 pairs a block
# the reduced W2's 64 pairs take 6 programs, the last one's columns past the end masked): a
# thread holding two adjacent columns' chains, or one column's with the recheck's slow path.
PACKED = {
    "paired": QpnConfig(w13_pairs=16, w13_warps=4, w2_pack_pairs=4),
    "unpaired-redo": QpnConfig(
        w13_pairs=16,
        w13_warps=4,
        w2_pack_pairs=4,
        w2_paired=False,
        w2_warps=8,
        w2_recheck=True,
        w2_redo=True,
    ),
}


@pytest.mark.parametrize("name", sorted(PACKED))
def test_packed_route_slots_equal_the_reference_arithmetic(
    banks: dict[bool, tuple[torch.Tensor, ...]], name: str
) -> None:
    x, topk = inputs(11)
    out = torch.full((1, GEOMETRY.w2_n), float("nan"), dtype=torch.float16)
    intermediate = torch.full((10, GEOMETRY.w2_k), float("nan"), dtype=torch.float16)
    ids = torch.tensor([IDS], dtype=torch.int32)
    launch_qpn_m1(
        out,
        intermediate,
        x,
        *banks[True],
        ids,
        topk,
        compact=True,
        geometry=GEOMETRY,
        config=PACKED[name],
    )
    want_out, want_intermediate = expected_step(x, *banks[True], ids, topk)
    assert torch.equal(intermediate, want_intermediate)
    assert torch.equal(out, want_out)
    assert out.abs().max() > 0
