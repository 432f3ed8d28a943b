"""Category sm70-dflash2-policy: golden rows of docs/contracts/dflash2.md §4.5 and the reference's
one intended change (4.6), with literals from the contract and issue 15."""

from __future__ import annotations

import itertools

import pytest

from native.kernels.gdn_sm70 import GdnLayout
from policies import PROJECT
from policies.categories.dflash2_policy import DFLASH2_POLICY_CATEGORY
from policies.dflash2 import gdn_admissions
from routectl.reasons import OK, Check, reject
from routectl.replay.harness import find_row, replay_category, replay_row, resolve_row
from routectl.review.snapshot import validate_rows
from routectl.workload import EngineConfig, Hardware
from tests.test_dflash2_policy import ALLOW_CANDIDATE_ORDER, DENSE_ORDER, TABLE

GUARDS = [
    "enable_sm70_dflash2_fused_gdn_verify",
    "enable_sm70_dflash2_fused_gdn_norm",
    "enable_sm70_dflash2_fused_gdn_split",
    "enable_sm70_dflash2_fused_gdn_combined_split",
]
GUARD_OF = {
    "fused_gdn_verify": 0,
    "fused_gdn_norm": 1,
    "fused_gdn_split": 2,
    "fused_gdn_combined_split": 3,
}
MODELS = ("27b_dflash2_nvfp4", "flash_next_mtp4_nvfp4", "35b_a3b_awq")
EDGE_VALUES = {"0": "0", "1": "1", "2": "2", "-1": "m1"}


@pytest.fixture(scope="module")
def rows():
    return {row["id"]: row["route"] for row in replay_category(PROJECT, DFLASH2_POLICY_CATEGORY)}


def matrix_ids(model):
    return [
        f"{model}/{kv}/tp{tp}/{spec}/c{c}/q{q}"
        for kv, tp, spec, c, q in itertools.product(
            ("float16", "fp8_e4m3", "fp8_e5m2"),
            (2, 4),
            ("none", "mtp", "dflash"),
            (1, 4, 8),
            (4096, 8192),
        )
    ]


def values(route):
    return {name: (item["value"], item["source"]) for name, item in route["policy"].items()}


def guards(route):
    return [(g["name"], g["ok"], g["code"]) for g in route["gdn_admission"]]


ALL_ADMITTED = [(g, True, None) for g in GUARDS]
ALL_ON = {name: (True, "default") for name, _ in TABLE}
ALL_OFF = {name: (False, "default") for name, _ in TABLE}


def test_406_rows_324_matrix_and_82_edges(rows):
    assert len(rows) == 406
    assert sorted(i for i in rows if not i.startswith("edge:")) == sorted(
        i for m in MODELS for i in matrix_ids(m)
    )
    edges = {i for i in rows if i.startswith("edge:")}
    expected = {f"edge:{name}_{v}" for name, _ in TABLE for v in EDGE_VALUES.values()}
    expected |= {
        f"edge:{n}_{v}"
        for n in ("dense_order", "allow_candidate_order")
        for v in EDGE_VALUES.values()
    }
    expected |= {"edge:retired_order_pair", "edge:gdn_k8_v24_tp2"}
    assert len(expected) == 82 and edges == expected


def test_36_qualified_matrix_rows(rows):
    qualified = [
        i for i, r in rows.items() if not i.startswith("edge:") and r["qualification"]["ok"]
    ]
    assert sorted(qualified) == sorted(
        i for i in matrix_ids("27b_dflash2_nvfp4") if "/dflash/" in i
    )
    for row_id in qualified:
        route = rows[row_id]
        assert route["qualification"] == {"ok": True, "code": None, "message": None}
        assert values(route) == ALL_ON and route["warnings"] == []
        if "/tp4/" in row_id:
            assert guards(route) == ALL_ADMITTED
            assert route["gdn_layout"] == {
                "key_heads": 16,
                "value_heads": 48,
                "head_dim": 128,
                "qkv": 2560,
                "z": 1536,
                "ba": 12,
            }
        else:
            assert guards(route) == [*ALL_ADMITTED[:3], (GUARDS[3], False, "local_tail_layout")]
            assert route["gdn_layout"] == {
                "key_heads": 16,
                "value_heads": 48,
                "head_dim": 128,
                "qkv": 5120,
                "z": 3072,
                "ba": 24,
            }


@pytest.mark.parametrize(
    "model,code,count",
    [
        ("flash_next_mtp4_nvfp4", "architecture_not_qwen3_5", 108),
        ("35b_a3b_awq", "hidden_size_not_5120", 108),
        ("27b_dflash2_nvfp4", "spec_method_not_dflash", 72),
    ],
)
def test_the_other_288_rows_are_off_with_their_first_failing_code(rows, model, code, count):
    ids = [i for i in matrix_ids(model) if not rows[i]["qualification"]["ok"]]
    assert len(ids) == count
    for row_id in ids:
        route = rows[row_id]
        assert route["qualification"]["code"] == code
        assert route["capability"] == 70
        assert values(route) == ALL_OFF
        assert [(n, ok, c) for n, ok, c in guards(route)] == [
            (g, False, "policy_disabled") for g in GUARDS
        ]
    if code == "hidden_size_not_5120":
        assert "2048" in rows[ids[0]]["qualification"]["message"]


def test_kv_concurrency_and_budget_never_change_a_row(rows):
    by_cell: dict[tuple[str, str, str], set[str]] = {}
    for row_id, route in rows.items():
        if row_id.startswith("edge:"):
            continue
        model, _, tp, spec, _, _ = row_id.split("/")
        by_cell.setdefault((model, tp, spec), set()).add(repr(sorted(route.items())))
    assert len(by_cell) == 18 and all(len(contents) == 1 for contents in by_cell.values())


@pytest.mark.parametrize("name,variable", TABLE)
@pytest.mark.parametrize("text", ["0", "1", "2", "-1"])
def test_alias_edges(rows, name, variable, text):
    route = rows[f"edge:{name}_{EDGE_VALUES[text]}"]
    assert route["qualification"]["ok"] is True
    expected = dict(ALL_ON)
    expected[name] = (text != "0", f"alias:{variable}")
    assert values(route) == expected
    assert route["warnings"] == [{"variable": variable, "kind": "deprecated"}]
    admitted = list(ALL_ADMITTED)
    if text == "0" and name in GUARD_OF:
        admitted[GUARD_OF[name]] = (GUARDS[GUARD_OF[name]], False, "policy_disabled")
    assert guards(route) == admitted


@pytest.mark.parametrize(
    "label,variable,kind",
    [
        ("dense_order", DENSE_ORDER, "obsolete"),
        ("allow_candidate_order", ALLOW_CANDIDATE_ORDER, "removed"),
    ],
)
@pytest.mark.parametrize("suffix", ["0", "1", "2", "m1"])
def test_retired_name_edges_change_no_field(rows, label, variable, kind, suffix):
    route = rows[f"edge:{label}_{suffix}"]
    assert values(route) == ALL_ON and guards(route) == ALL_ADMITTED
    assert route["warnings"] == [{"variable": variable, "kind": kind}]


def test_retired_order_pair(rows):
    route = rows["edge:retired_order_pair"]
    assert values(route) == ALL_ON and guards(route) == ALL_ADMITTED
    assert route["warnings"] == [
        {"variable": DENSE_ORDER, "kind": "obsolete"},
        {"variable": ALLOW_CANDIDATE_ORDER, "kind": "removed"},
    ]


def test_gdn_k8_v24_tp2_admits_all_four_guards(rows):
    route = rows["edge:gdn_k8_v24_tp2"]
    assert route["qualification"]["ok"] is True and values(route) == ALL_ON
    assert guards(route) == ALL_ADMITTED
    assert route["gdn_layout"] == {
        "key_heads": 8,
        "value_heads": 24,
        "head_dim": 128,
        "qkv": 2560,
        "z": 1536,
        "ba": 12,
    }


# --- the reference's intended change ---------------------------------------------------------


def older_combined_rule(engine: EngineConfig, layout: GdnLayout) -> Check:
    """Before the layout change: TP exactly 4 and model hidden size 5120, no layout
    predicate (docs/contracts/dflash2.md §3, the bullet on the rule before the layout
    change). A variant for this test only."""
    if engine.tp != 4:
        return reject("tp_not_4", f"combined split needs TP 4 (TP {engine.tp})")
    if engine.model is None or engine.model.hidden_size != 5120:
        return reject("hidden_size_not_5120", "combined split needs hidden size 5120")
    return OK


def test_the_older_combined_split_rule_flips_exactly_the_head_split_edge():
    changed_ok, changed_reason = set(), set()
    for spec in DFLASH2_POLICY_CATEGORY.rows():
        policy = resolve_row(PROJECT, spec)
        hardware, layout = Hardware(spec.capability), GdnLayout(**spec.layer)
        new = gdn_admissions(policy, hardware, spec.engine, layout)
        old = gdn_admissions(
            policy, hardware, spec.engine, layout, combined_rule=older_combined_rule
        )
        assert new[:3] == old[:3]
        if new[3][1][0] != old[3][1][0]:
            changed_ok.add(f"sm70-dflash2-policy:{spec.id}")
        elif new[3][1] != old[3][1]:
            changed_reason.add(spec.id)
    # As ../shared/reference-golden/sm70_dflash2_capability_changes.json records upstream.
    assert changed_ok == {"sm70-dflash2-policy:edge:gdn_k8_v24_tp2"}
    # The 18 qualified TP2 rows keep "not admitted", only its code and message change.
    assert changed_reason == {i for i in matrix_ids("27b_dflash2_nvfp4") if "/tp2/dflash/" in i}
    assert len(changed_reason) == 18


# The project's snapshot schema: the policy route is the category's own shape, composed in.
SCHEMA = PROJECT.snapshot_schema


def test_policy_rows_are_strict_in_the_snapshot_schema(rows):
    base = {"id": "edge:gdn_k8_v24_tp2", "route": rows["edge:gdn_k8_v24_tp2"]}
    # routectl's generic schema alone admits no policy route: the shape is the category's.
    assert validate_rows("sm70-dflash2-policy", "basis", [base]) is not None
    assert validate_rows("sm70-dflash2-policy", "basis", [base], SCHEMA) is None
    route = base["route"]
    broken = [
        {**route, "extra": 1},
        {**route, "policy": {k: v for k, v in route["policy"].items() if k != "fp32_logits"}},
        {**route, "policy": {**route["policy"], "fp32_logits": {"value": 1, "source": "default"}}},
        {**route, "policy": {**route["policy"], "fp32_logits": {"value": True, "source": "typed"}}},
        {**route, "warnings": ["VLLM_SM70_FP8_QPN8 is deprecated"]},
        {**route, "warnings": [{"variable": "VLLM_SM70_FP8_QPN8", "kind": "legacy"}]},
        {**route, "gdn_admission": [{**route["gdn_admission"][0], "name": "other_guard"}]},
        {**route, "gdn_layout": {**route["gdn_layout"], "head_k_dim": 128}},
        {**route, "qualification": {"ok": True}},
    ]
    for bad in broken:
        assert validate_rows("sm70-dflash2-policy", "basis", [{**base, "route": bad}], SCHEMA), bad


# --- the route matrix's cells and reasons (what a reviewer reads) ------------------------------
# Outcomes from docs/contracts/dflash2.md §4.5: qualified TP4 rows admit all four guards, TP2 rows
# all but the combined split (`local_tail_layout`); unqualified rows have all 18 options off and no
# guard; an alias "0" turns its field off and removes its own guard; the retired names warn as
# obsolete / removed (1.4).
MATRIX_CELLS = {
    "27b_dflash2_nvfp4/fp8_e4m3/tp4/dflash/c4/q8192": (
        ("qualified; 18/18 on; guards admitted: verify, norm, split, combined_split", "value"),
        "qualified defaults, every guard admitted",
    ),
    "27b_dflash2_nvfp4/fp8_e4m3/tp2/dflash/c4/q8192": (
        ("qualified; 18/18 on; guards admitted: verify, norm, split", "value"),
        "guard combined_split refused [local_tail_layout]",
    ),
    "27b_dflash2_nvfp4/fp8_e4m3/tp4/mtp/c4/q8192": (
        ("not qualified (spec_method_not_dflash); 0/18 on; guards admitted: none", "status"),
        "[spec_method_not_dflash] speculative method is mtp, not dflash",
    ),
    "edge:fused_gdn_verify_0": (
        ("qualified; 17/18 on; guards admitted: norm, split, combined_split", "value"),
        "fused_gdn_verify off (alias:VLLM_SM70_DFLASH2_FUSED_GDN_VERIFY); "
        "guard verify refused [policy_disabled]; "
        "warns VLLM_SM70_DFLASH2_FUSED_GDN_VERIFY (deprecated)",
    ),
    "edge:retired_order_pair": (
        ("qualified; 18/18 on; guards admitted: verify, norm, split, combined_split", "value"),
        "warns VLLM_SM70_DFLASH2_QPN8_DENSE_ORDER (obsolete); "
        "warns VLLM_SM70_DFLASH2_QPN8_ALLOW_CANDIDATE_ORDER (removed)",
    ),
}


@pytest.mark.parametrize("row_id", sorted(MATRIX_CELLS))
def test_matrix_cells_show_qualification_options_and_guards(row_id):
    # One row replayed alone (not the category's module fixture): cheap enough to run per
    # mutant.
    spec = find_row(DFLASH2_POLICY_CATEGORY, row_id)
    route = replay_row(PROJECT, DFLASH2_POLICY_CATEGORY, spec)[0]["route"]
    label, reason = MATRIX_CELLS[row_id]
    assert DFLASH2_POLICY_CATEGORY.matrix_label(route) == label
    assert DFLASH2_POLICY_CATEGORY.matrix_reason(route) == reason
