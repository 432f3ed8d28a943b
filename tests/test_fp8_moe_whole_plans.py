"""Whole plans of the FP8 MoE family's literal rows (docs/contracts/fp8moe.md §5.1, §5.2 and
§8's recorded-plan decisions): every recorded dispatch of a row, op and plan (all keys),
compared with a list built from the contract's route rules, as tests/test_category_whole_plans.py
does for the AWQ MoE family."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from policies import PROJECT
from routectl.replay.harness import find_row, replay_row

FP8_MOE_BASE = "35b_a3b_fp8/fp8_e4m3/tp4/none/c8/q8192"
FP8_MOE_TP2 = "35b_a3b_fp8/fp8_e4m3/tp2/none/c8/q8192"
FP8_TOKENS = (0, 1, 2, 8, 32, 33, 64, 65, 4096, 8192)
FP8_TOP_K, FP8_EXPERTS, FP8_HIDDEN, FP8_GROUP = 8, 256, 2048, 128


@cache
def fp8_moe_route(row_id: str) -> dict[str, Any]:
    from policies.categories.fp8_moe import FP8_MOE_CATEGORY

    return replay_row(PROJECT, FP8_MOE_CATEGORY, find_row(FP8_MOE_CATEGORY, row_id))[0]["route"]


def fp8_call(op: str, m: int, stage_name: str, **plan: Any) -> dict[str, Any]:
    return {"op": op, "plan": {"m": m, "stage": stage_name, **plan}}


def fp8_moe_dispatch(
    *,
    intermediate: int = 128,
    batched: bool = True,
    legacy: bool = True,
    exact_per_route: bool = True,
    native_unpermute: bool = False,
    decomposed: bool = False,
    w13_per_expert: bool = False,
    w2_per_expert: bool = False,
    permute: str = "moe_permute_with_scratch",
) -> list[dict[str, Any]]:
    """§5.1 for the replayed token counts. W13 k = H, n = 2I; W2 k = I, n = H (§5.2)."""
    w13 = {"k": FP8_HIDDEN, "n": 2 * intermediate}
    w2 = {"k": intermediate, "n": FP8_HIDDEN}
    out: list[dict[str, Any]] = []

    def gemm(m: int, name: str, weights: dict[str, int], per_expert: bool) -> dict[str, Any]:
        slots = m * FP8_TOP_K
        if not batched:
            return fp8_call(
                "fp8_moe_dense_stage_sm70_out",
                m,
                name,
                routed_slots=slots,
                experts=FP8_EXPERTS,
                group=FP8_GROUP,
                **weights,
            )
        if per_expert:
            # Recorded through the FP8 linears' grouped-decode entry (k_ld = K, q_ld = N; §8):
            # the sorted rows go in as one (slots, 1, K) group, so `groups` is 1.
            return fp8_call(
                "fp8_moe_gemm_sm70_per_expert_dispatch_out",
                m,
                name,
                group=FP8_GROUP,
                groups=1,
                k=weights["k"],
                k_ld=weights["k"],
                q_ld=weights["n"],
            )
        return fp8_call(
            "fp8_moe_gemm_sm70_out",
            m,
            name,
            routed_slots=slots,
            experts=FP8_EXPERTS,
            gated=False,
            group=FP8_GROUP,
            **weights,
        )

    for m in FP8_TOKENS:
        slots = m * FP8_TOP_K
        if m == 0:
            continue
        if m == 1 and batched and legacy and not decomposed:
            out.append(
                fp8_call(
                    "fp8_moe_single_token_sm70_out",
                    m,
                    "legacy",
                    routed_slots=slots,
                    group=FP8_GROUP,
                    hidden=FP8_HIDDEN,
                    w13_k=w13["k"],
                    w13_n=w13["n"],
                    w2_k=w2["k"],
                    w2_n=w2["n"],
                    exact_per_route=exact_per_route,
                    fused_gated_silu=False,
                    fused_weighted_reduce=False,
                    broadcast_input=False,
                    w2_direct_reduce=False,
                    indexed_expert_ptrs=False,
                )
            )
            if native_unpermute:
                out.append(fp8_call("moe_unpermute", m, "reduce", routed_slots=slots))
            continue
        if m == 1 and batched and legacy and decomposed:
            out += [
                fp8_call(
                    "awq_moe_single_token_exact_layout_prepare", m, "prepare", experts=FP8_EXPERTS
                ),
                gemm(m, "w13", w13, w13_per_expert),
                fp8_call("silu_and_mul", m, "silu"),
                gemm(m, "w2", w2, w2_per_expert),
                fp8_call("moe_unpermute", m, "reduce", routed_slots=slots),
            ]
            continue
        if m == 1 and not batched:
            # The single-token plan of the defaults: dense W13, indexed W2, weighted reduce.
            out += [
                fp8_call(
                    "fp8_moe_single_token_dense_w13_sm70_out",
                    m,
                    "w13",
                    routed_slots=slots,
                    group=FP8_GROUP,
                    hidden=FP8_HIDDEN,
                    **w13,
                ),
                fp8_call("silu_and_mul", m, "silu"),
                fp8_call(
                    "fp8_moe_single_token_indexed_dense_stage_sm70_out",
                    m,
                    "w2",
                    routed_slots=FP8_TOP_K,
                    group=FP8_GROUP,
                    **w2,
                ),
                fp8_call(
                    "awq_moe_single_token_weighted_reduce_out", m, "reduce", routed_slots=slots
                ),
            ]
            continue
        out += [
            fp8_call(permute, m, "permute", routed_slots=slots),
            gemm(m, "w13", w13, w13_per_expert),
            fp8_call("silu_and_mul", m, "silu"),
            gemm(m, "w2", w2, w2_per_expert),
            fp8_call("moe_unpermute", m, "reduce", routed_slots=slots),
        ]
    return out


FP8_CASES: list[tuple[str, dict[str, Any]]] = [
    (FP8_MOE_BASE, {}),
    (FP8_MOE_TP2, {"intermediate": 256}),
    ("edge:batched_off", {"batched": False}),
    ("edge:legacy_compact_off", {"legacy": False}),
    ("edge:legacy_top_k_descriptor", {"exact_per_route": False}),
    ("edge:legacy_native_unpermute", {"native_unpermute": True}),
    ("edge:legacy_decomposed", {"decomposed": True}),
    ("edge:w13_per_expert", {"w13_per_expert": True}),
    ("edge:w2_per_expert", {"w2_per_expert": True}),
    ("edge:permute_scratch_off", {"permute": "moe_permute"}),
]


@pytest.mark.parametrize(("row_id", "facts"), FP8_CASES, ids=[c[0] for c in FP8_CASES])
def test_fp8_moe_rows_record_the_whole_plan_of_every_dispatch(
    row_id: str, facts: dict[str, Any]
) -> None:
    assert fp8_moe_route(row_id)["dispatch"] == fp8_moe_dispatch(**facts)
