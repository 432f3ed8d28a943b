"""The Triton QPN M1 launchers and kernels under Triton's interpreter at the smallest geometry that
keeps every code path, so that one launch takes seconds (docs/contracts/core.md §6): 16 W13 K
slices of two groups of 8, two 32-column tiles in each stage, two W13 and two W2 programs per
route or packed route slots with a masked last program, top-k 10 and 16, both metadata
layouts, invalid and duplicate ids, adversarial scales and free 4-byte biases. Every output
and intermediate element is compared with the CPU reference arithmetic (`numerics`, itself
checked against the FP64 oracle), the buffers starting as NaN so an element no program writes
shows.

Why: the launchers' grids and constexprs (which program covers which columns, routes and
experts) and the kernels' bodies change no result only when right; tests/
triton_interpreter_cases.py checks them at a larger shape in minutes, too slow to run once per
mutant. Run as a plain test, this file runs itself in a child with TRITON_INTERPRET=1 (Triton
reads it when the kernels are defined); in that child, or in a process that set it, the cases
run in-process.
"""

from __future__ import annotations

import dataclasses
import os

import torch

from native.reference.triton_qpn import QpnConfig, QpnGeometry, launch_qpn_m1
from tests.interpreter_child import run_under_interpreter
from tests.qpn_triton_helpers import (
    balanced_weights,
    build_banks,
    expected_routes,
    expected_step,
    guarded,
    hidden_routes,
    spilled,
    with_free_biases,
)

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"

# 16 slices of 16 (two groups of 8), W13 two tiles of 32 columns (32 pairs), W2 two tiles.
GEOMETRY = QpnGeometry(experts=3, w13_k=16 * 16, w13_n=64, w2_k=32, w2_n=64, group=8)
WIDE_TOP_K = QpnGeometry(experts=3, top_k=16, w13_k=16 * 16, w13_n=64, w2_k=32, w2_n=64, group=8)
ADVERSARIAL = (1,)
FREE_BIAS_EXPERT = 2
# Duplicates (1 three times, 2 and 0 twice), invalid ids (-1, -5 and experts = 3).
IDS = [1, 2, -1, 0, 1, 3, 2, 0, -5, 1]
WIDE_IDS = [*IDS, 2, 0, 3, 1, -1, 2]


def _banks() -> dict[bool, tuple[torch.Tensor, ...]]:
    g = GEOMETRY
    return build_banks(
        g.experts, g.w13_k, g.w13_n, g.w2_k, g.w2_n, g.group, seed=23, adversarial=ADVERSARIAL
    )


def _inputs(seed: int, routes: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    # Small activations keep the adversarial expert's large weights finite.
    x = (torch.randn((1, GEOMETRY.w13_k), generator=gen) * 0.05).half()
    return x, torch.rand((1, routes), generator=gen) * 2 - 0.5


def _check(
    banks: tuple[torch.Tensor, ...],
    compact: bool,
    config: QpnConfig,
    geometry: QpnGeometry = GEOMETRY,
    ids: list[int] = IDS,
    seed: int = 5,
) -> None:
    """launch_qpn_m1 against the reference arithmetic, whole buffers compared: once with the
    router weights as drawn (the adversarial expert's routes dominate the sum, so the combine's
    order and roundings show), once with them balanced (every route shows in the output)."""
    x, drawn = _inputs(seed, len(ids))
    id_tensor = torch.tensor([ids], dtype=torch.int32)
    w13, s13, w2, s2 = banks
    routes, _ = expected_routes(x, w13, s13, w2, s2, id_tensor)
    balanced = balanced_weights(routes, drawn)
    assert hidden_routes(routes, balanced) == [], "a route the balanced output cannot show"
    for topk in (drawn, balanced):
        out = guarded(1, geometry.w2_n)
        intermediate = guarded(len(ids), geometry.w2_k)
        launch_qpn_m1(
            out, intermediate, x, w13, s13, w2, s2, id_tensor, topk,
            compact=compact, geometry=geometry, config=config,
        )  # fmt: skip
        want_out, want_intermediate = expected_step(x, w13, s13, w2, s2, id_tensor, topk)
        assert torch.equal(intermediate, want_intermediate), intermediate - want_intermediate
        assert torch.equal(out, want_out), out - want_out
        # Invalid ids give zero rows; every valid route's row is not zero (the data is random).
        for r, e in enumerate(ids):
            assert bool(intermediate[r].any()) is (0 <= e < geometry.experts), (r, e)
        assert out.abs().min() > 0
        assert spilled(out) == 0, "a store past the output's end"
        assert spilled(intermediate) == 0, "a store past the intermediate's end"


if INTERPRETED:
    # Importable only under the interpreter (it refuses to load otherwise).
    from tests.triton_interpreter_cases import CONFIGS

    def test_pairs_in_two_programs_per_route_and_two_w2_programs() -> None:
        # The default kernels (a W13 thread holds a pair's gate and up chains, a W2 thread two
        # adjacent columns'), 16 of the 32 pairs a W13 program, 32 of the 64 columns a W2 one.
        config = QpnConfig(w13_pairs=16, w13_warps=1, w2_columns=32, w2_warps=1)
        _check(_banks()[True], True, config)

    def test_one_chain_a_thread_with_free_biases_and_the_recheck() -> None:
        # One chain a thread (exchanges by reduction), one program per route and one W2
        # program, W13 chains not waiting for their activations, words in two batches, W2's
        # weights after its chains and its recheck's slow path; 4-byte records with biases
        # that are not fp16(-z*scale), so the decode's FP32 sum rounds.
        w13, s13, w2, s2 = _banks()[False]
        banks = (w13, with_free_biases(s13, FREE_BIAS_EXPERT, seed=3), w2, s2)
        # The interpreter cases' second config, its warps and W2 columns halved, its decode
        # in two shifts and its metadata narrow.
        config = dataclasses.replace(
            CONFIGS[False],
            w13_warps=2,
            w2_columns=64,
            w2_warps=2,
            one_shift_decode=False,
            wide_metadata=False,
        )
        _check(banks, False, config, seed=7)

    def test_packed_slots_with_a_masked_last_program() -> None:
        # 32 slots hold 3 column blocks of top-k 10; 2 pairs a block: 12 columns a program,
        # 6 programs for 64 columns, the last one's 8 past the end masked.
        config = QpnConfig(w13_pairs=8, w13_warps=1, w2_pack_pairs=2, w2_warps=1)
        _check(_banks()[True], True, config, seed=9)

    def test_packed_unpaired_slots_at_top_k_16() -> None:
        # Top-k 16 fills W2's 16 route slots; packed, 32 slots hold 2 column blocks of 4
        # pairs: 16 columns a program, 4 programs, none masked; one column a chain, widened
        # before the wait, with the recheck's slow path; the 4-byte layout.
        config = QpnConfig(
            w13_pairs=32,
            w13_warps=1,
            w2_pack_pairs=4,
            w2_paired=False,
            w2_widen=True,
            w2_warps=2,
            w2_recheck=True,
            w2_redo=True,
        )
        _check(_banks()[False], False, config, geometry=WIDE_TOP_K, ids=WIDE_IDS, seed=11)

    def test_three_byte_records_a_byte_at_a_time() -> None:
        # The 3-byte records read a byte at a time (wide_metadata false; the 4-byte layout of
        # the second test never reads them so): scale bytes, zero and fp16(-z*scale) of
        # every record, adversarial scales included.
        config = QpnConfig(
            w13_pairs=16, w13_warps=1, w2_columns=32, w2_warps=1, wide_metadata=False
        )
        _check(_banks()[True], True, config, seed=13)

    def test_packed_slots_of_one_pair_a_block() -> None:
        # w2_pack_pairs=1, the smallest packing QpnConfig admits: 32 slots hold 3 column
        # blocks of one pair (2 columns), 11 programs for 64 columns, the last one's 2 past
        # the end masked. At 1 the packed branches must still be taken (`PACK > 0`), not the
        # unpacked ones, whose slot layout the packed stores do not read.
        config = QpnConfig(w13_pairs=8, w13_warps=1, w2_pack_pairs=1, w2_warps=1)
        _check(_banks()[True], True, config, seed=9)

    def test_packed_unpaired_slots_of_one_pair_a_block() -> None:
        # The same packing with one column a chain (w2_paired false), the 4-byte layout.
        config = QpnConfig(w13_pairs=8, w13_warps=1, w2_pack_pairs=1, w2_paired=False, w2_warps=1)
        _check(_banks()[False], False, config, seed=9)

    def test_the_recheck_redo_with_three_byte_records() -> None:
        # The recheck's slow path (redone from the ids read after the wait) on the compact
        # layout: the redo reads the banks again, and must read them as 3-byte records (the
        # other recheck cases use the 4-byte layout, where any reading of COMPACT is false).
        config = QpnConfig(
            w13_pairs=16, w13_warps=1, w2_columns=32, w2_warps=1, w2_recheck=True, w2_redo=True
        )
        _check(_banks()[True], True, config, seed=15)

else:

    def test_the_cases_under_the_triton_interpreter() -> None:
        run_under_interpreter(__file__, 8, timeout=600)
