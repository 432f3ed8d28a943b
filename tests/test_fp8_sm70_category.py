"""Golden rows of sm70-fp8-linear (docs/contracts/fp8.md §6): outcomes A and B at TP2 and TP4, every
edge probe of 6.4, the fp8-policy grid and routectl's own probes. Every expected value is a
literal from the contract or the issue."""

from __future__ import annotations

import copy
from collections import Counter
from functools import cache

import pytest

from policies import PROJECT
from routectl.replay.harness import find_row, replay_row

CATEGORY = "sm70-fp8-linear"
TOKENS = (1, 4, 8, 16, 4096, 8192)
ROLES = ("qkv_proj", "in_proj_qkvz", "o_proj", "gate_up_proj", "down_proj")
TM = "TurboMindFp8LinearKernel"
BLOCK = "QPN8Fp8BlockScaledMMLinearKernel"
PREFILL = "fp8_gemm_sm70_prefill_dispatch_out"
GEMM = "fp8_gemm_sm70_out"
QPN8 = "fp8_qpn8_dispatch_sm70_out"

# docs/contracts/fp8.md §6.2: local (K, N) per role and TP.
LOCAL = {
    2: {
        "qkv_proj": (5120, 7168),
        "in_proj_qkvz": (5120, 8192),
        "o_proj": (3072, 5120),
        "gate_up_proj": (5120, 17408),
        "down_proj": (8704, 5120),
    },
    4: {
        "qkv_proj": (5120, 3584),
        "in_proj_qkvz": (5120, 4096),
        "o_proj": (1536, 5120),
        "gate_up_proj": (5120, 8704),
        "down_proj": (4352, 5120),
    },
}
# 6.2: resident code bytes per role, TP2 / TP4.
CODE_BYTES = {
    2: {
        "qkv_proj": 36_700_160,
        "in_proj_qkvz": 41_943_040,
        "o_proj": 15_728_640,
        "gate_up_proj": 89_128_960,
        "down_proj": 44_564_480,
    },
    4: {
        "qkv_proj": 18_350_080,
        "in_proj_qkvz": 20_971_520,
        "o_proj": 7_864_320,
        "gate_up_proj": 44_564_480,
        "down_proj": 22_282_240,
    },
}
# 3.5: exact-dense thresholds by role.
THRESHOLD = {
    "qkv_proj": 8000,
    "in_proj_qkvz": 8000,
    "o_proj": 3920,
    "gate_up_proj": 3920,
    "down_proj": 3920,
}
# 6.5 B: (split_k, chains, prefetch) of the plain call, and of the gated call for gate_up.
TUNING = {
    4: {
        "qkv_proj": (16, 2, False),
        "in_proj_qkvz": (16, 2, False),
        "o_proj": (16, 1, False),
        "down_proj": (16, 1, False),
        "gate_up_proj": (16, 1, True),
    },
    2: {role: (16, 2, False) for role in ROLES},
}
GATED_TUNING = {4: (8, 2, True), 2: (8, 2, False)}
# 4.2 / issue: the shared exact-dense workspace, once per row.
WORKSPACE = {2: 178_257_920, 4: 89_128_960}


@cache
def route(row_id: str) -> dict:
    cat = PROJECT.category(CATEGORY)
    return replay_row(PROJECT, cat, find_row(cat, row_id))[0]["route"]


def calls(layer: dict) -> list[tuple[str, int, bool]]:
    return [(c["op"], c["plan"]["m"], c["plan"].get("gated")) for c in layer["dispatch"]]


def matrix_id(
    model: str, tp: int, spec: str, *, kv: str = "fp8_e4m3", c: int = 4, q: int = 8192
) -> str:
    return f"{model}/{kv}/tp{tp}/{spec}/c{c}/q{q}"


def assert_outcome_a(r: dict, tp: int, budget: int = 8192) -> None:
    tokens = [m for m in TOKENS if m <= budget]
    assert set(r["layers"]) == set(ROLES)
    assert r["workspaces"] == {"exact_dense": WORKSPACE[tp]}
    for role, layer in r["layers"].items():
        k, n = LOCAL[tp][role]
        gated = role == "gate_up_proj"
        assert layer["kernel"] == TM and layer["prepared_layout"] == "fp8_sm70"
        assert layer["flags"]["qpn8"] is False and layer["flags"]["gated"] is gated
        assert layer["prepare"] == [
            {"op": "fp8_sm70_prepare", "plan": {"n": n, "k": k, "group": 128, "gated": gated}}
        ]
        assert layer["bytes"]["tensors"]["fp8_codes"] == CODE_BYTES[tp][role]
        expected = []
        for m in tokens:
            expected.append((PREFILL, m, False))
            if gated:
                expected.append((PREFILL, m, True))
        assert calls(layer) == expected
        for call in layer["dispatch"]:
            plan = call["plan"]
            assert (plan["k"], plan["group"], plan["k_ld"], plan["q_ld"]) == (k, 128, k, n)
            assert plan["prefill_min_m"] == THRESHOLD[role]
        assert layer["fallbacks"] == [] and layer["status"] is None


def assert_outcome_b(r: dict, tp: int) -> None:
    assert set(r["layers"]) == set(ROLES)
    assert r["workspaces"] == {"exact_dense": WORKSPACE[tp]}
    for role, layer in r["layers"].items():
        k, n = LOCAL[tp][role]
        gated = role == "gate_up_proj"
        assert layer["kernel"] == TM and layer["prepared_layout"] == "fp8_qpn8"
        assert layer["flags"]["qpn8"] is True and layer["flags"]["gated"] is gated
        assert layer["prepare"] == [{"op": "fp8_qpn8_prepare_sm70", "plan": {"n": n, "k": k}}]
        assert layer["bytes"]["tensors"]["qpn8_codes"] == CODE_BYTES[tp][role]
        split_k, chains, prefetch = TUNING[tp][role]
        expected = []
        for m in TOKENS:
            expected.append(
                {
                    "op": QPN8,
                    "plan": {
                        "m": m,
                        "k": k,
                        "split_k": split_k,
                        "chains": chains,
                        "prefetch": prefetch,
                        "gated": False,
                    },
                }
            )
            if gated:
                g_split, g_chains, g_prefetch = GATED_TUNING[tp]
                expected.append(
                    {
                        "op": QPN8,
                        "plan": {
                            "m": m,
                            "k": k,
                            "split_k": g_split,
                            "chains": g_chains,
                            "prefetch": g_prefetch,
                            "gated": True,
                        },
                    }
                )
        assert layer["dispatch"] == expected


# --- matrix ----------------------------------------------------------------------------------


def test_matrix_and_probe_counts():
    rows = PROJECT.category(CATEGORY).rows()
    assert len(rows) == 540 + 10 + 54 + 6
    status = [r for r in rows if r.status is not None]
    assert len(status) == 324
    assert {r.model for r in status} == {
        "27b_dflash2_nvfp4",
        "flash_next_mtp4_nvfp4",
        "35b_a3b_awq",
    }
    assert all(r.status[0] == "not_applicable" for r in status)


def test_non_fp8_model_is_a_status_row():
    r = route(matrix_id("35b_a3b_awq", 4, "none"))
    assert r["kernel"] is None and r["status"]["code"] == "not_applicable"


@pytest.mark.parametrize("tp", [2, 4])
@pytest.mark.parametrize(
    "model,spec",
    [("35b_a3b_fp8", "none"), ("35b_a3b_fp8", "dflash"), ("27b_fp8", "none"), ("27b_fp8", "mtp")],
)
def test_outcome_a_turbomind_default(model, spec, tp):
    assert_outcome_a(route(matrix_id(model, tp, spec)), tp)


@pytest.mark.parametrize("tp", [2, 4])
def test_outcome_b_qpn8_for_the_qualified_dflash_target(tp):
    # 6.3: the DFlash2 verifier default reaches sm70_fp8.qpn8 through the bridge.
    assert_outcome_b(route(matrix_id("27b_fp8", tp, "dflash")), tp)


def test_budget_caps_the_token_counts():
    r = route(matrix_id("27b_fp8", 4, "none", q=4096))
    assert_outcome_a(r, 4, budget=4096)
    assert max(c["plan"]["m"] for layer in r["layers"].values() for c in layer["dispatch"]) == 4096


@pytest.mark.parametrize("kv,c", [("float16", 1), ("fp8_e5m2", 8)])
def test_kv_dtype_and_concurrency_never_reach_the_layer(kv, c):
    assert (
        route(matrix_id("27b_fp8", 2, "dflash", kv=kv, c=c))["layers"]
        == route(matrix_id("27b_fp8", 2, "dflash"))["layers"]
    )


# --- edge probes of 6.4 ----------------------------------------------------------------------


def test_qpn8_on_and_off():
    assert_outcome_b(route("edge:qpn8_on"), 4)
    assert_outcome_a(route("edge:qpn8_off"), 4)


def test_qpn8_native_missing_fails_every_layer_closed():
    r = route("edge:qpn8_native_missing")
    for layer in r["layers"].values():
        assert layer["error"]["code"] == "missing_native_ops"
        assert layer["error"]["message"] == (
            "The explicitly enabled SM70 QPN8 route requires source-built operators; "
            "missing: ['fp8_qpn8_gated_pair_sm70_out']."
        )


def test_qpn8_workspace_missing_keeps_plain_turbomind_with_fallback_records():
    r = route("edge:qpn8_workspace_missing")
    assert r["workspaces"] == {}
    for role, layer in r["layers"].items():
        gated = role == "gate_up_proj"
        assert layer["prepared_layout"] == "fp8_sm70" and layer["flags"]["gated"] is gated
        expected = []
        for m in TOKENS:
            expected.append((GEMM, m, False))
            if gated:
                expected.append((GEMM, m, True))
        assert calls(layer) == expected
        fields = {f["field"]: f for f in layer["fallbacks"]}
        assert fields["sm70_fp8.qpn8"]["reason"] == (
            "Insufficient memory for the SM70 FP8 QPN8 prefill workspace; retaining the "
            "TurboMind layout."
        )
        assert fields["sm70_fp8.qpn8"]["requested"] is True
        assert fields["sm70_fp8.qpn8"]["effective"] is False


def test_gated_silu_off_declines_the_fused_call():
    layer = route("edge:gated_silu_off")["layers"]["gate_up_proj"]
    assert layer["flags"]["gated"] is False
    assert layer["prepare"][0]["plan"]["gated"] is False
    # What runs instead of the declined fused call: the plain entry again and silu_and_mul.
    assert calls(layer)[:3] == [(PREFILL, 1, False), (PREFILL, 1, False), ("silu_and_mul", 1, None)]


def test_prefill_exact_dense_off_is_plain_turbomind_without_a_qpn8_record():
    off = route("edge:prefill_exact_dense_off")
    missing = route("edge:qpn8_workspace_missing")
    for role, layer in off["layers"].items():
        assert calls(layer) == calls(missing["layers"][role])
        assert layer["prepare"] == missing["layers"][role]["prepare"]
        assert [f["field"] for f in layer["fallbacks"]] == []


def test_pp2_tp4_fused_wqa_wkv_at_layer_tp_4_stays_turbomind():
    layer = route("edge:pp2_tp4_fused_wqa_wkv")["layers"]["fused_wqa_wkv"]
    assert layer["prepared_layout"] == "fp8_sm70"
    assert calls(layer) == [(GEMM, m, False) for m in TOKENS]


def test_pp2_tp4_wq_b_is_qpn8():
    r = route("edge:pp2_tp4_wq_b")
    layer = r["layers"]["wq_b"]
    assert layer["prepared_layout"] == "fp8_qpn8" and layer["flags"]["pp2_tp4"] is True
    assert layer["prepare"] == [{"op": "fp8_qpn8_prepare_sm70", "plan": {"n": 8192, "k": 1024}}]
    assert {
        (c["plan"]["split_k"], c["plan"]["chains"], c["plan"]["prefetch"])
        for c in layer["dispatch"]
    } == {(8, 2, False)}
    assert r["workspaces"] == {"pp2_tp4": 16_777_216}


def test_pp2_tp4_grouped_wo_a_prepares_and_dispatches_per_group():
    layer = route("edge:pp2_tp4_wo_a")["layers"]["wo_a"]
    assert layer["prepared_layout"] == "fp8_qpn8_bmm" and layer["flags"]["bmm_groups"] == 2
    assert layer["prepare"] == [{"op": "fp8_qpn8_prepare_sm70", "plan": {"n": 1024, "k": 4096}}] * 2
    assert calls(layer) == [(QPN8, m, False) for m in TOKENS for _ in range(2)]
    assert {(c["plan"]["split_k"], c["plan"]["chains"]) for c in layer["dispatch"]} == {(32, 2)}


def test_pp2_tp4_shared_gate_is_qpn8_not_gated_and_declines_the_fused_call():
    layer = route("edge:pp2_tp4_shared_gate")["layers"]["shared_experts.gate_up_proj"]
    assert layer["prepared_layout"] == "fp8_qpn8" and layer["flags"]["gated"] is False
    assert layer["prepare"] == [{"op": "fp8_qpn8_prepare_sm70", "plan": {"n": 1024, "k": 4096}}]
    assert calls(layer)[:3] == [(QPN8, 1, False), (QPN8, 1, False), ("silu_and_mul", 1, None)]
    assert {
        (c["plan"]["split_k"], c["plan"]["chains"]) for c in layer["dispatch"] if c["op"] == QPN8
    } == {(32, 2)}


# --- the fp8-policy grid -----------------------------------------------------------------------


def test_policy_grid_counts():
    outcomes: Counter[str] = Counter()
    rows = [r for r in PROJECT.category(CATEGORY).rows() if r.id.startswith("edge:policy_")]
    assert len(rows) == 54
    for row in rows:
        layer = route(row.id)["layers"]["qkv_proj"]
        assert set(route(row.id)["layers"]) == {"qkv_proj"}
        outcomes[layer["kernel"] or layer["status"]["code"]] += 1
    assert outcomes == {TM: 30, "dequant_fallback": 3, "other_backend": 21}


@pytest.mark.parametrize("backend,tm,dq", [("auto", "0", "1"), ("marlin", "unset", "0")])
def test_policy_grid_moe_switch_never_changes_the_dense_outcome(backend, tm, dq):
    layers = [
        copy.deepcopy(
            route(f"edge:policy_{backend}_tm_{tm}_moe_{moe}_dq_{dq}")["layers"]["qkv_proj"]
        )
        for moe in ("unset", "0", "1")
    ]
    assert [layer["flags"].pop("moe_dequant_requested") for layer in layers] == [False, False, True]
    assert layers[0] == layers[1] == layers[2]


def test_policy_grid_flags():
    marlin = route("edge:policy_marlin_tm_1_moe_1_dq_0")["layers"]["qkv_proj"]
    assert marlin["status"]["code"] == "other_backend"
    assert marlin["flags"] == {
        "force_marlin": True,
        "moe_dequant_requested": True,
        "admitted": True,
    }
    refused = route("edge:policy_auto_tm_0_moe_unset_dq_0")["layers"]["qkv_proj"]
    assert refused["flags"]["admitted"] is False and refused["flags"]["force_marlin"] is False
    assert "capability 75" in refused["flags"]["admission_reason"]
    dequant = route("edge:policy_auto_tm_0_moe_0_dq_1")["layers"]["qkv_proj"]
    assert dequant["kernel"] is None and dequant["status"]["code"] == "dequant_fallback"
    assert dequant["flags"]["admitted"] is True


# --- routectl's own probes -------------------------------------------------------------------


def test_block_qpn8_on_takes_every_role_without_a_turbomind_copy():
    for role, layer in route("edge:block_qpn8_on")["layers"].items():
        k, n = LOCAL[4][role]
        assert layer["kernel"] == BLOCK and layer["prepared_layout"] == "fp8_qpn8_block"
        assert layer["prepare"] == [{"op": "fp8_qpn8_prepare_sm70", "plan": {"n": n, "k": k}}]
        plain = [(c["op"], c["plan"]["m"]) for c in layer["dispatch"] if c["op"] != "silu_and_mul"]
        assert sorted(set(plain), key=lambda c: c[1]) == [
            ("fp8_qpn8_gemm_sm70_out", 1),
            ("fp8_qpn8_gemm_sm70_out", 4),
            ("fp8_qpn8_gemm_sm70_out", 8),
            ("fp8_qpn8_prefill_sm70_out", 16),
            ("fp8_qpn8_prefill_sm70_out", 4096),
            ("fp8_qpn8_prefill_sm70_out", 8192),
        ]
        assert layer["bytes"]["scratch"] == {"dense_scratch": k * n * 2}


def test_block_qpn8_copy_runs_turbomind_above_m_8():
    for role, layer in route("edge:block_qpn8_copy")["layers"].items():
        k, n = LOCAL[4][role]
        assert layer["kernel"] == BLOCK
        assert layer["prepare"][1] == {
            "op": "fp8_sm70_prepare",
            "plan": {"n": n, "k": k, "group": 128, "gated": False},
        }
        large = {
            (c["op"], c["plan"]["group"])
            for c in layer["dispatch"]
            if c["plan"]["m"] > 8 and c["op"] != "silu_and_mul"
        }
        assert large == {(GEMM, 128)}


def test_block_qpn8_yields_to_an_explicit_gated_silu():
    r = route("edge:block_qpn8_yields")
    for layer in r["layers"].values():
        assert layer["kernel"] == TM
        block = layer["verdicts"][0]
        assert block["name"] == BLOCK and block["ok"] is False
        assert block["message"].startswith(
            "retains the explicitly configured fused or prescaled variant"
        )


def test_default_rows_reject_the_block_kernel_by_policy():
    layer = route(matrix_id("27b_fp8", 4, "none"))["layers"]["qkv_proj"]
    assert [(v["name"], v["ok"], v["message"]) for v in layer["verdicts"]] == [
        (BLOCK, False, "disabled by kernel_config.sm70_fp8.block_qpn8"),
        (TM, True, None),
    ]
    assert layer["fallback"] is False


def test_visible_dense_mm_dequantizes_at_the_threshold():
    layers = route("edge:visible_dense_mm")["layers"]
    qkv = [(c["op"], c["plan"]["m"]) for c in layers["qkv_proj"]["dispatch"]]
    assert qkv[-2:] == [("fp8_sm70_dequantize_out", 8192), ("torch.mm", 8192)]
    assert (PREFILL, 4096) in qkv
    gate = [(c["op"], c["plan"]["m"]) for c in layers["gate_up_proj"]["dispatch"]]
    assert gate[-3:] == [
        ("fp8_sm70_dequantize_out", 8192),
        ("torch.mm", 8192),
        ("silu_and_mul_interleaved", 8192),
    ]


def test_pp2_tp4_prescaled_m1_decodes_on_prescaled_scales():
    layer = route("edge:pp2_tp4_prescaled_m1")["layers"]["fused_wqa_wkv"]
    assert layer["flags"]["prescaled_decode"] is True
    assert calls(layer)[0] == ("fp8_gemm_sm70_prescaled_m1_out", 1, None)
    assert calls(layer)[1:] == [(GEMM, m, False) for m in TOKENS[1:]]
    assert "prescaled_decode_scales" in layer["bytes"]["tensors"]


def test_grouped_decode_is_one_per_expert_dispatch_at_m_1():
    layer = route("edge:grouped_decode")["layers"]["wo_a"]
    assert layer["prepared_layout"] == "fp8_sm70_bmm"
    assert calls(layer)[0] == ("fp8_moe_gemm_sm70_per_expert_dispatch_out", 1, None)
    assert calls(layer)[1:] == [(GEMM, m, False) for m in TOKENS[1:] for _ in range(2)]


# --- the probed layer descriptions (6.2, 6.4) --------------------------------------------------


def described(row_id: str) -> tuple[tuple, ...]:
    from routectl.replay.harness import find_row

    row = find_row(PROJECT.category(CATEGORY), row_id)
    return tuple(
        (d["name"], d["k"], d["n"], d["tp"], d["groups"], d["e8m0"]) for d in row.layer["layers"]
    )


@pytest.mark.parametrize("tp", [2, 4])
def test_matrix_rows_probe_the_five_roles_at_their_local_shapes(tp):
    # 6.2: local (K, N) per role and TP, the layer's TP, ordinary (not UE8M0) scales, no groups.
    assert described(matrix_id("27b_fp8", tp, "none")) == tuple(
        (role, *LOCAL[tp][role], tp, 0, False) for role in ROLES
    )


def test_probe_layers_carry_their_tp_groups_and_scale_kind():
    # 6.4 and routectl's own probes: the PP2 layers at layer TP 4, the prescaled layer at TP 1
    # with UE8M0 scales, the fp8-policy grid's qkv_proj at TP 2 (5120 x 7168).
    assert described("edge:pp2_tp4_wo_a") == (("wo_a", 4096, 2048, 4, 2, False),)
    assert described("edge:pp2_tp4_shared_gate") == (
        ("shared_experts.gate_up_proj", 4096, 1024, 4, 0, False),
    )
    assert described("edge:pp2_tp4_prescaled_m1") == (("fused_wqa_wkv", 4096, 1536, 1, 0, True),)
    assert described("edge:policy_auto_tm_0_moe_0_dq_1") == (("qkv_proj", 5120, 7168, 2, 0, False),)
