"""Whole plans of the literal rows: every recorded dispatch of a row, op and plan (all keys),
compared with a list built from the contract's route rules, not a few keys of it.

sm70-awq-moe: the Qwen3.8 TP4 layer (docs/contracts/core.md §3.2-3.5) on the default row and
each probe that moves a lane; the rules of §3.4 are restated here, call by call, as the
expected list. A changed plan key (group, k, n, metadata, routed_slots, chunk_tokens), a
swapped W13/W2 geometry or a route taken at the wrong M changes the whole comparison.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from policies import PROJECT
from policies.categories.awq_moe import AWQ_MOE_CATEGORY, TOKEN_COUNTS
from routectl.replay.harness import find_row, replay_row

BASE = "qwen38_awq_moe/fp8_e4m3/tp4/none/c8/q8192"
TOP_K = 10
GROUP = 32
W13 = {"k": 2560, "n": 320}  # §3.2: W13 K2560/N320, W2 K160/N2560 per TP4 rank
W2 = {"k": 160, "n": 2560}

SINGLE_TOKEN = "awq_moe_single_token_sm70_out"
QPN_M1 = "awq_moe_qpn_m1_sm70_out"
ST_W13 = "awq_moe_single_token_dense_w13_sm70_out"
ST_STAGE = "awq_moe_single_token_dense_stage_sm70_out"
ST_REDUCE = "awq_moe_single_token_weighted_reduce_out"
PERMUTE = "moe_permute_with_scratch"
PERMUTE_METADATA = "moe_permute_metadata_with_scratch"
INDEXED_W13 = "awq_moe_indexed_dense_w13_sm70_out"
ACTIVE = "awq_moe_active_dense_stage_sm70_out"
PER_EXPERT = "awq_moe_gemm_sm70_per_expert_dispatch_out"
DENSE = "awq_moe_dense_stage_sm70_out"
CHUNKED = "awq_moe_chunked_w2_sm70_out"
UNPERMUTE = "moe_unpermute"


@cache
def route(row_id: str) -> dict[str, Any]:
    return replay_row(PROJECT, AWQ_MOE_CATEGORY, find_row(AWQ_MOE_CATEGORY, row_id))[0]["route"]


def call(op: str, m: int, **plan: Any) -> dict[str, Any]:
    return {"op": op, "plan": {"m": m, "routed_slots": m * TOP_K, **plan}}


def stage(op: str, m: int, weights: dict[str, int], metadata: str, **more: Any) -> dict[str, Any]:
    return call(op, m, group=GROUP, metadata=metadata, **weights, **more)


def expected_dispatch(
    *,
    metadata: str = "3-byte",
    qpn_m1: bool = False,
    grouped: bool = True,
    strict_w13: bool = False,
    exact_w2: bool = False,
    active_exact_w2: bool = False,
    cap: int = 0,
    chunk: int = 0,
    batched: bool = True,
    legacy: bool = True,
) -> list[dict[str, Any]]:
    """§3.4, in its order, for the replayed token counts."""
    out: list[dict[str, Any]] = []
    for m in TOKEN_COUNTS:
        if m == 0:
            continue  # nothing is launched
        within_cap = cap == 0 or m <= cap
        if m == 1 and batched and legacy:
            # The legacy lane; strict_w13 does not take precedence over it.
            if qpn_m1:
                out.append(call(QPN_M1, m, metadata=metadata))
            else:
                out.append(call(SINGLE_TOKEN, m, group=GROUP, metadata=metadata))
            continue
        if m == 1 and (not batched or strict_w13):
            out += [
                stage(ST_W13, m, W13, metadata),
                stage(ST_STAGE, m, W2, metadata),
                call(ST_REDUCE, m),
            ]
            continue
        indexed = m >= 128 and batched
        group_decode = (
            grouped
            and batched
            and 2 <= m <= 8
            and within_cap
            and not (strict_w13 or exact_w2 or active_exact_w2)
        )
        out.append(call(PERMUTE_METADATA if indexed else PERMUTE, m))
        if indexed:
            out.append(stage(INDEXED_W13, m, W13, metadata))
        elif group_decode:
            out.append(stage(ACTIVE, m, W13, metadata))
        elif batched and not strict_w13 and within_cap:
            out.append(stage(PER_EXPERT, m, W13, metadata))
        else:
            out.append(stage(DENSE, m, W13, metadata))
        chunked = indexed and chunk > 0 and chunk < m and _chunk_fits(m, chunk)
        if chunked:
            out.append(stage(CHUNKED, m, W2, metadata, chunk_tokens=chunk))
            continue  # replaces W2 and the reduction
        if group_decode or (active_exact_w2 and m * TOP_K <= 128):
            out.append(stage(ACTIVE, m, W2, metadata))
        elif batched and not strict_w13 and not exact_w2 and within_cap:
            out.append(stage(PER_EXPERT, m, W2, metadata))
        else:
            out.append(stage(DENSE, m, W2, metadata))
        out.append(call(UNPERMUTE, m))
    return out


def _chunk_fits(m: int, chunk: int) -> bool:
    # §3.5: chunk*top_k*(2*w2_n + 8) + (3E+1)*4 < M*top_k*w2_n*2 bytes.
    experts, w2_n = 512, W2["n"]
    return chunk * TOP_K * (2 * w2_n + 8) + (3 * experts + 1) * 4 < m * TOP_K * w2_n * 2


CASES: list[tuple[str, dict[str, Any]]] = [
    (BASE, {}),
    ("edge:qpn_m1_on", {"qpn_m1": True}),
    ("edge:compact_off", {"metadata": "4-byte"}),
    ("edge:compact_default_op_missing", {"metadata": "4-byte"}),
    ("edge:grouped_off", {"grouped": False}),
    ("edge:strict_w13", {"strict_w13": True}),
    ("edge:exact_w2", {"exact_w2": True}),
    ("edge:active_exact_w2", {"active_exact_w2": True}),
    ("edge:max_batched_4", {"cap": 4}),
    ("edge:chunk_4096", {"chunk": 4096}),
    ("edge:chunk_6144", {"chunk": 6144}),
    ("edge:legacy_compact_off", {"legacy": False}),
    ("edge:batched_off", {"batched": False}),
]


@pytest.mark.parametrize(("row_id", "facts"), CASES, ids=[c[0] for c in CASES])
def test_awq_moe_rows_record_the_whole_plan_of_every_dispatch(
    row_id: str, facts: dict[str, Any]
) -> None:
    assert route(row_id)["dispatch"] == expected_dispatch(**facts)


def test_the_chunk_rule_discriminates_at_the_replayed_token_counts() -> None:
    # The chunked W2 appears only where chunk < M: 4096 chunks at M 8192, not at M 4096.
    assert [c["plan"]["m"] for c in route("edge:chunk_4096")["dispatch"] if c["op"] == CHUNKED] == [
        8192
    ]
    assert not [
        c
        for c in route("edge:chunk_6144")["dispatch"]
        if c["op"] == CHUNKED and c["plan"]["m"] < 6144
    ]
