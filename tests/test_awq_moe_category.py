"""Category sm70-awq-moe replayed whole through `routectl.replay.harness.replay_category`: row set,
golden routes of docs/contracts/core.md §5.2/§5.3, bytes and model totals, determinism."""

from __future__ import annotations

from collections import Counter

import pytest

from policies import PROJECT
from policies.categories.awq_moe import (
    AWQ_MOE_CATEGORY,
    MODELS,
    NAME,
    PROBES,
    TOKEN_COUNTS,
    model_totals,
)
from policies.families import sections_of
from policies.variables import FIELDS
from routectl.replay.harness import find_row, replay_category
from routectl.rows import ROW_ID

DEFAULT = "qwen38_awq_moe/fp8_e4m3/tp4/none/c8/q8192"
PLAN_KEYS = {"m", "routed_slots", "group", "k", "n", "chunk_tokens", "metadata", "experts", "gated"}
PROBE_NAMES = [
    "qpn_m1_on",
    "qpn_m1_op_missing",
    "qpn_m1_legacy_op_missing",
    "qpn_m1_tp2",
    "compact_off",
    "compact_explicit_op_missing",
    "compact_default_op_missing",
    "grouped_off",
    "strict_w13",
    "exact_w2",
    "active_exact_w2",
    "max_batched_4",
    "chunk_4096",
    "chunk_6144",
    "indexed_ops_missing_default",
    "indexed_ops_missing_explicit",
    "legacy_compact_off",
    "batched_off",
    "moe_disable",
    "backend_marlin",
    "example_qpn_m1",
    "example_qpn_m1_4byte",
]
ERROR_PROBES = {
    "qpn_m1_op_missing",
    "qpn_m1_legacy_op_missing",
    "qpn_m1_tp2",
    "compact_explicit_op_missing",
    "indexed_ops_missing_explicit",
}


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    replayed = replay_category(PROJECT, AWQ_MOE_CATEGORY)
    return {r["id"]: r["route"] for r in replayed}


def ops_at(route: dict, m: int) -> list[str]:
    return [c["op"] for c in route["dispatch"] if c["plan"]["m"] == m]


def test_row_set(rows):
    assert AWQ_MOE_CATEGORY.name == NAME == "sm70-awq-moe"
    assert len(rows) == 540 + 22
    assert all(ROW_ID.match(i) for i in rows)
    assert sorted(i.removeprefix("edge:") for i in rows if i.startswith("edge:")) == sorted(
        PROBE_NAMES
    )
    per_model = Counter(i.split("/")[0] for i in rows if not i.startswith("edge:"))
    assert per_model == {m.id: 108 for m in MODELS}
    statuses = Counter(
        r["status"]["code"] for r in rows.values() if r.get("kernel") is None and r.get("status")
    )
    assert statuses == {"not_applicable": 216, "not_modelled": 108}


def test_the_example_probes_take_qpn_m1_in_both_layouts(rows):
    """The rows `routectl parity` joins examples/engine_startup.py's records with: its
    workload (FP16 KV cache, 8 sequences), QPN M1 requested in the config."""
    for probe, layout in (("example_qpn_m1", "3-byte"), ("example_qpn_m1_4byte", "4-byte")):
        route = rows[f"edge:{probe}"]
        assert route["kernel"] == "TurboMindAwqMoE" and route["prepared_layout"] == layout
        assert ops_at(route, 1) == ["awq_moe_qpn_m1_sm70_out"]


def test_qwen38_tp4_default_routes(rows):
    route = rows[DEFAULT]
    assert route["kernel"] == "TurboMindAwqMoE" and route["fallback"] is False
    assert ops_at(route, 1) == ["awq_moe_single_token_sm70_out"]  # QPN M1 is opt-in
    for m in (2, 8):
        assert ops_at(route, m) == [
            "moe_permute_with_scratch",
            "awq_moe_active_dense_stage_sm70_out",
            "awq_moe_active_dense_stage_sm70_out",
            "moe_unpermute",
        ]
    for m in (9, 127):
        assert ops_at(route, m) == [
            "moe_permute_with_scratch",
            "awq_moe_gemm_sm70_per_expert_dispatch_out",
            "awq_moe_gemm_sm70_per_expert_dispatch_out",
            "moe_unpermute",
        ]
    for m in (128, 4096, 8192):
        assert ops_at(route, m)[:2] == [
            "moe_permute_metadata_with_scratch",
            "awq_moe_indexed_dense_w13_sm70_out",
        ]
    assert ops_at(route, 0) == []
    assert [s["m"] for s in route["stages"]] == list(TOKEN_COUNTS)
    assert route["stages"][0]["chosen"] == ["lane.zero_output"]


def test_qpn_m1_on_routes_one_token_to_the_qpn_op(rows):
    assert ops_at(rows["edge:qpn_m1_on"], 1) == ["awq_moe_qpn_m1_sm70_out"]
    assert rows["edge:qpn_m1_on"]["flags"]["qpn_m1"] is True
    assert rows[DEFAULT]["flags"]["qpn_m1"] is False


def test_metadata_bytes(rows):
    default, compact_off = rows[DEFAULT]["bytes"], rows["edge:compact_off"]["bytes"]
    assert default["metadata"] == 58_982_400 and compact_off["metadata"] == 78_643_200
    assert default["weights"] == compact_off["weights"] == 314_572_800
    assert rows[DEFAULT]["prepared_layout"] == "3-byte"
    assert rows["edge:compact_off"]["prepared_layout"] == "4-byte"
    assert rows["edge:compact_default_op_missing"]["bytes"]["metadata"] == 78_643_200
    assert rows["edge:compact_default_op_missing"]["fallbacks"] == [
        {
            "field": "sm70_awq_moe.compact_metadata",
            "requested": True,
            "effective": False,
            "reason": "no compact prepare op",
        }
    ]


def test_every_expert_is_prepared_in_one_record_per_bank(rows):
    assert rows[DEFAULT]["prepare"] == [
        {
            "op": "awq_sm70_prepare_compact",
            "plan": {"group": 32, "gated": True, "k": 2560, "n": 320, "experts": 512},
        },
        {
            "op": "awq_sm70_prepare_compact",
            "plan": {"group": 32, "gated": False, "k": 160, "n": 2560, "experts": 512},
        },
    ]


def test_qwen3_30b_serves_at_tp2_and_errors_at_tp4(rows):
    for row_id, route in rows.items():
        if not row_id.startswith("qwen3_30b_a3b_awq_moe/"):
            continue
        if "/tp4/" in row_id:
            assert route["error"]["code"] == "no_moe_method"
            assert "local W2 K 192 is not a multiple of group 128" in route["error"]["message"]
            assert [v["name"] for v in route["verdicts"]] == ["TurboMindAwqMoE", "MoeWNA16"]
        else:
            assert route["kernel"] == "TurboMindAwqMoE"
            assert route["prepare"][0]["plan"] == {
                "group": 128,
                "gated": True,
                "k": 2048,
                "n": 768,
                "experts": 128,
            }
            assert route["prepared_layout"] == "4-byte"


def test_qwen38_tp2_is_not_the_contract(rows):
    route = rows["qwen38_awq_moe/float16/tp2/none/c1/q8192"]
    assert route["kernel"] == "TurboMindAwqMoE"
    assert route["flags"]["qwen38_contract"] is False
    assert "awq_moe_active_dense_stage_sm70_out" not in ops_at(route, 2)
    assert "awq_moe_indexed_dense_w13_sm70_out" not in ops_at(route, 128)


def test_error_probes_are_error_rows(rows):
    for name in PROBE_NAMES:
        route = rows[f"edge:{name}"]
        assert ("error" in route) is (name in ERROR_PROBES), name
    assert rows["edge:qpn_m1_tp2"]["error"]["message"].startswith(
        "AWQ QPN M1 requires native-g32 TP4 E512 C1"
    )
    assert rows["edge:qpn_m1_op_missing"]["error"]["message"].startswith(
        "AWQ QPN M1 requires a native build with CUDA arch 7.0"
    )
    assert rows["edge:compact_explicit_op_missing"]["error"]["message"].endswith(
        "requires an SM70 build with awq_sm70_prepare_compact."
    )


@pytest.mark.parametrize("name", ["chunk_4096", "chunk_6144"])
def test_chunk_probes_chunk_w2_at_8192(rows, name):
    route = rows[f"edge:{name}"]
    assert ops_at(route, 8192)[-1] == "awq_moe_chunked_w2_sm70_out"
    assert "awq_moe_chunked_w2_sm70_out" not in ops_at(route, 4096)
    assert "awq_moe_chunked_w2_sm70_out" not in ops_at(rows[DEFAULT], 8192)


@pytest.mark.parametrize(
    ("name", "m", "expected"),
    [
        ("grouped_off", 2, "awq_moe_gemm_sm70_per_expert_dispatch_out"),
        ("strict_w13", 2, "awq_moe_dense_stage_sm70_out"),
        ("exact_w2", 8, "awq_moe_gemm_sm70_per_expert_dispatch_out"),
        ("active_exact_w2", 9, "awq_moe_gemm_sm70_per_expert_dispatch_out"),
        ("max_batched_4", 8, "awq_moe_dense_stage_sm70_out"),
        ("indexed_ops_missing_default", 128, "awq_moe_gemm_sm70_per_expert_dispatch_out"),
        ("legacy_compact_off", 1, "awq_moe_gemm_sm70_per_expert_dispatch_out"),
        ("batched_off", 1, "awq_moe_single_token_dense_w13_sm70_out"),
    ],
)
def test_switch_probes_move_the_w13_stage(rows, name, m, expected):
    route = rows[f"edge:{name}"]
    w13 = [op for op in ops_at(route, m) if "permute" not in op][0]
    assert w13 == expected


@pytest.mark.parametrize("name", ["moe_disable", "backend_marlin"])
def test_moe_wna16_probes(rows, name):
    route = rows[f"edge:{name}"]
    assert route["kernel"] == "MoeWNA16" and route["dispatch"] == [] and route["stages"] == []
    assert route["verdicts"][0]["ok"] is False and route["fallback"] is False


def test_budgets_bound_the_replayed_token_counts(rows):
    route = rows["qwen38_awq_moe/fp8_e4m3/tp4/none/c8/q4096"]
    assert max(s["m"] for s in route["stages"]) == 4096
    assert max(c["plan"]["m"] for c in route["dispatch"]) == 4096


def test_every_recorded_plan_uses_the_declared_keys(rows):
    for route in rows.values():
        for call in route.get("dispatch", []):
            assert "m" in call["plan"] and set(call["plan"]) <= PLAN_KEYS
        for call in route.get("prepare", []):
            assert call["plan"]["experts"] in (128, 512)


def test_probes_are_data_over_known_variables():
    known = {f.variable for f in FIELDS if f.variable}
    # The example's probes take the example's own workload (FP16 KV cache) as their base.
    example_base = "qwen38_awq_moe/float16/tp4/none/c8/q8192"
    for probe in PROBES:
        assert set(probe.variables) <= known
        expected = (
            example_base
            if probe.name.startswith("example_")
            else ("qwen38_awq_moe/fp8_e4m3/tp4/none/c8/q8192")
        )
        assert probe.base == expected


def test_model_totals(rows):
    spec = find_row(AWQ_MOE_CATEGORY, DEFAULT)
    totals = model_totals(spec, rows[DEFAULT])
    assert totals == {
        "layers": 48,
        "weights": 48 * 314_572_800,
        "metadata": 48 * 58_982_400,
        "total": 48 * 373_555_200,
        "metadata_4byte": 48 * 78_643_200,
        "compact_saving": 943_718_400,
    }
    off = model_totals(find_row(AWQ_MOE_CATEGORY, "edge:compact_off"), rows["edge:compact_off"])
    assert off is not None and off["compact_saving"] == 0
    for row_id in (
        "edge:moe_disable",
        "edge:qpn_m1_tp2",
        "27b_dflash2_nvfp4/float16/tp4/none/c1/q8192",
    ):
        assert model_totals(find_row(AWQ_MOE_CATEGORY, row_id), rows[row_id]) is None
    assert AWQ_MOE_CATEGORY.model_totals(spec, rows[DEFAULT]) == totals


def test_runs_are_deterministic_and_rows_own_their_routes(rows):
    again = {r["id"]: r["route"] for r in replay_category(PROJECT, AWQ_MOE_CATEGORY)}
    assert again == rows
    a, b = again[DEFAULT], again["qwen38_awq_moe/float16/tp4/none/c8/q8192"]
    assert a == b and a is not b and a["dispatch"] is not b["dispatch"]


def test_the_category_reads_the_moe_family_sections():
    # docs/contracts/core.md §1.3/§3.1: the family is decided by sm70_turbomind.awq_moe (and the
    # legacy backend override) and the sm70_awq_moe section; `explain` shows these two sections.
    assert PROJECT.policy_sections(AWQ_MOE_CATEGORY) == ("sm70_turbomind", "sm70_awq_moe")
    assert sections_of("sm70-awq-moe") == ("sm70_turbomind", "sm70_awq_moe")
    with pytest.raises(KeyError, match="no family 'sm99-moe'"):
        sections_of("sm99-moe")


def test_the_category_prints_its_own_stage_lines(rows):
    # `routectl explain` leaves the stages to the category: each replayed M's chain, then
    # each refusal with its code, and the key is consumed (not printed again as JSON).
    route = dict(rows[DEFAULT])
    lines = AWQ_MOE_CATEGORY.explain_lines(route)
    assert "stages" not in route and lines[0] == "stages per token count:"
    first = rows[DEFAULT]["stages"][0]
    assert lines[1] == f"  M={first['m']}: {' > '.join(first['chosen'])}"
    refused = [line for line in lines if line.startswith("    refused ")]
    assert len(refused) == sum(len(s["rejected"]) for s in rows[DEFAULT]["stages"])
    assert AWQ_MOE_CATEGORY.explain_lines({"kernel": None}) == []
