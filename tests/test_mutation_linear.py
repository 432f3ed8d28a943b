"""Fresh replays of sm70-awq-linear rows through the category's own route (what
`LinearCategory.route` adds to the loader: the engine's workspace, the prepare calls and the
fused gate/up call), with expectations written from docs/contracts/core.md §2.3 and §5.3."""

from __future__ import annotations

from typing import Any

from policies import PROJECT
from routectl.replay.harness import find_row, replay_row

CATEGORY = "sm70-awq-linear"


def route(row_id: str) -> dict[str, Any]:
    category = PROJECT.category(CATEGORY)
    return replay_row(PROJECT, category, find_row(category, row_id))[0]["route"]


def test_the_engine_workspace_reaches_the_loader():
    # docs/contracts/core.md §2.3: too little exact-dense workspace keeps plain TurboMind with a
    # fallback.
    r = route("edge:workspace_missing")
    assert r["kernel"] == "TurboMindAwqLinearKernel"
    assert r["flags"] == {"exact_dense": False, "fused_gated_call": False, "gated": False}
    assert [(f["field"], f["requested"], f["effective"]) for f in r["fallbacks"]] == [
        ("sm70_awq.prefill_exact_dense", True, False)
    ]
    # The prepare call is recorded apart from the dispatch: awq_sm70_prepare {group, gated}.
    assert [(c["op"], c["plan"]["group"], c["plan"]["gated"]) for c in r["prepare"]] == [
        ("awq_sm70_prepare", 128, False)
    ]


def test_the_fused_gate_up_call_is_replayed_once_at_one_token():
    # docs/contracts/core.md §2.3: replay at M in {1, 4, 8, 4096, 8192}, then one fused gate/up call
    # at M = 1 for gated layers; at TP 2 it is awq_gemm_sm70_out(gated=true).
    r = route("edge:fused_tp2")
    plans = [(c["op"], c["plan"]["m"], c["plan"]["gated"]) for c in r["dispatch"]]
    assert plans == [
        ("awq_gemm_sm70_out", 1, False),
        ("awq_gemm_sm70_out", 4, False),
        ("awq_gemm_sm70_out", 8, False),
        ("awq_gemm_sm70_out", 4096, False),
        ("awq_gemm_sm70_out", 8192, False),
        ("awq_gemm_sm70_out", 1, True),
    ]
