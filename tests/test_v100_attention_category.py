"""The category sm70-attention (docs/contracts/attention.md §6): its ids (§6.1), the case
each row stands for against the reference trace's case list, the KV path matrix, every
declared route reached or declared unreachable, both sides of each threshold, each refusal,
the contract's sampled [G] outcomes, and the CLI showing the category. Expected values are
literals from the contract; the reference data is read as expected values only."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from native.kernels.v100_attention import ROUTE_FAMILIES, ROUTE_SPECS
from policies import PROJECT
from policies.categories.v100_attention import (
    MANIFEST,
    NAME,
    OWN_PROBES,
    UNREACHABLE,
)
from policies.categories.v100_attention import (
    V100_ATTENTION_CATEGORY as CATEGORY,
)
from policies.v100_attention import Case, Layout, simulate
from policies.v100_attention_variables import V100_ATTENTION_FIELDS
from routectl.replay.harness import replay_category
from tests.fixtures.toy import invoke, ok

ROOT = Path(__file__).resolve().parents[1]
# The reference's case list and KV path matrix, copied as test fixtures (expected values
# only, never a source of rows; CI has no ../shared), each pinned by its sha256.
REFERENCE = ROOT / "tests" / "fixtures" / "reference" / "attention"
REFERENCE_SHA256 = {
    "flash_v100_trace_cases.jsonl": (
        "0a2b2d007f8e32954fa5fc8f59ac21b45c85f9640175e2b2c6fda6d212a2f799"
    ),
    "sm70_kv_path_matrix.json": "48e844ac00451bc12b46d6a2be13460b6f71c1a418cac81760a2551ffb7deecb",
}


def test_the_reference_fixtures_are_the_reference_files():
    for name, digest in REFERENCE_SHA256.items():
        assert hashlib.sha256((REFERENCE / name).read_bytes()).hexdigest() == digest, name


KV_FORMATS = {"fp16": "float16", "e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2"}
# The KV path matrix's statuses a row can show; `review`, `pending` and the rest are not
# compared (the acceptance).
COMPARED = ("native", "bridge", "fallback", "unsupported")


@pytest.fixture(scope="module")
def routes() -> dict[str, dict[str, Any]]:
    return {r["id"]: r["route"] for r in replay_category(PROJECT, CATEGORY)}


def first_routes(route: dict[str, Any]) -> list[str]:
    return route["forwards"][0]["routes"]


def first_ops(route: dict[str, Any]) -> list[str]:
    return [op["name"] for op in route["forwards"][0]["ops"]]


def rid(stage, kv, head, gqa, mask, mode, spec, c, q):
    return f"{stage}-h{head}g{gqa}-{mask}-{mode}/{kv}/tp1/{spec}/c{c}/q{q}"


# --- ids and cases (§6.1, §7) ------------------------------------------------------------


def test_the_contracts_example_id_and_the_row_count(routes):
    assert "decode-h256g6-none-eager/float16/tp1/none/c1/q1" in routes
    ids = [r.id for r in CATEGORY.rows()]
    assert len(ids) == len(set(ids)) == 768 + len(MANIFEST) + len(OWN_PROBES)
    assert len(MANIFEST) == 45
    matrix = [i for i in ids if not i.startswith("edge:")]
    assert len(matrix) == 768
    # c: sequences (3 for mixed); q: the largest query length (32, 4 with a spec, 1).
    assert "mixed-h128g1-swa-graph/fp8_e4m3/tp1/ddtree/c3/q4" in routes
    assert "mixed-h128g1-swa-graph/fp8_e4m3/tp1/none/c3/q32" in routes
    assert "prefill-h256g6-anchor-eager/float16/tp1/mtp/c1/q4" in routes


def test_matrix_rows_follow_the_trace_product_order():
    rows = [r for r in CATEGORY.rows() if not r.id.startswith("edge:")]
    # §7: decode/auto/256/6/eager/none/none is line 457, matrix index 456.
    assert rows[456].id == "decode-h256g6-none-eager/float16/tp1/none/c1/q1"
    axes = itertools.product(
        ("prefill", "prefix", "decode", "mixed"),
        ("auto", "fp8_e4m3"),
        (128, 256),
        (1, 6),
        (False, True),
        ("none", "dflash2", "ddtree", "mtp"),
        ("none", "swa", "anchor"),
    )
    keys = ("stage", "codec", "head", "gqa", "capture", "spec", "mask")
    assert [r.layer["case"] for r in rows] == [dict(zip(keys, a, strict=True)) for a in axes]


def test_the_rows_cases_are_exactly_the_traces_813_cases(routes):
    matrix = [
        dict(zip(("stage", "codec", "head", "gqa", "capture", "spec", "mask"), a, strict=True))
        for a in itertools.product(
            ("prefill", "prefix", "decode", "mixed"),
            ("auto", "fp8_e4m3"),
            (128, 256),
            (1, 6),
            (False, True),
            ("none", "dflash2", "ddtree", "mtp"),
            ("none", "swa", "anchor"),
        )
    ]
    manifest = [
        json.loads(line)
        for line in (REFERENCE / "flash_v100_trace_cases.jsonl").read_text().splitlines()
    ]
    expected = matrix + manifest
    assert len(expected) == 813
    cases = [route["case"] for route in routes.values() if route["case"] is not None]
    canonical = sorted(json.dumps(c, sort_keys=True) for c in cases)
    assert canonical == sorted(json.dumps(c, sort_keys=True) for c in expected)
    # The manifest probes are in file order, each under its §6.3 name.
    by_name = {p.name: p for p in MANIFEST}
    assert [dict(by_name[p.name].case) for p in MANIFEST] == manifest
    assert [p.name for p in MANIFEST][:4] == [
        "decode_diagnostics_all",
        "decode_diagnostics_all_graph",
        "decode_dense_cache_reference",
        "decode_dense_cache_reference_graph",
    ]
    assert [p.name for p in MANIFEST][33] == "decode_xqa_off_after_init"
    assert [p.name for p in MANIFEST][-1] == "decode_e4m3_rev1_page832_graph"
    # routectl's own probes stand for no trace case.
    assert all(routes[p.id]["case"] is None for p in OWN_PROBES)


# --- routes reached (§2) -----------------------------------------------------------------


def reached(routes: dict[str, dict[str, Any]]) -> dict[str, set[str]]:
    """Route name -> the KV spellings of the rows whose forwards record it."""
    out: dict[str, set[str]] = {}
    for route in routes.values():
        kv = route["inputs"]["case"]["codec"]
        kv = {"auto": "float16"}.get(kv, kv)
        names = [n for f in route["forwards"] for n in f["routes"]] + route["construction"]
        for name in names:
            out.setdefault(name, set()).add(kv)
    return out


def test_every_declared_route_is_reached_or_declared_unreachable(routes):
    seen = reached(routes)
    declared = set(ROUTE_SPECS)
    unreachable = set(UNREACHABLE)
    assert unreachable <= declared
    assert declared - unreachable <= set(seen), sorted(declared - unreachable - set(seen))
    assert not unreachable & set(seen), sorted(unreachable & set(seen))
    # Only the two FlashInfer SM70 routes (another backend) and the Split-D default name
    # (the FA2 candidate always names its route) stay unreachable: the architecture routes
    # and the contiguous dense Split-D route are reached by rows declaring their inputs.
    assert unreachable == {
        "flashinfer_sm70_fixed_entry",
        "flashinfer_sm70_splitkv3_fast_visible",
        "prefill_prefix_splitd_d256",
    }
    assert "another" not in UNREACHABLE["flashinfer_sm70_fixed_entry"]
    assert "FlashInfer" in UNREACHABLE["flashinfer_sm70_fixed_entry"]
    # Every recorded name is declared (the table, then the families).
    for name in seen:
        assert name in ROUTE_SPECS or any(p.fullmatch(name) for p in ROUTE_FAMILIES.values())


def test_the_kv_path_matrix_agrees_with_the_rows(routes):
    matrix = json.loads((REFERENCE / "sm70_kv_path_matrix.json").read_text())
    seen = reached(routes)
    compared = 0
    for entry in matrix["literal_routes"]:
        name = entry["legacy_route"]
        spec = ROUTE_SPECS[name]
        for short, status in entry["formats"].items():
            if short not in KV_FORMATS or status not in COMPARED:
                continue
            kv = KV_FORMATS[short]
            compared += 1
            if status in ("native", "bridge"):
                assert kv in seen.get(name, set()), (name, kv, status)
                # `native` names a native entry: a selector's declared fallback may be one.
                assert kv in spec.codecs, (name, kv)
            elif status == "unsupported":
                assert kv not in seen.get(name, set()), (name, kv)
            elif name == "prefill_ddtree_triton":
                # Documented difference: not a fallback (the routing code's truth).
                assert not spec.fallback and kv in spec.codecs
            else:
                assert spec.fallback and kv in spec.codecs, (name, kv)
    assert compared == 51


def test_matrix_route_names_are_aliases_of_the_counter_names():
    matrix = json.loads((REFERENCE / "sm70_kv_path_matrix.json").read_text())
    legacy = {e["legacy_route"] for e in matrix["literal_routes"]}
    assert legacy <= set(ROUTE_SPECS) and len(legacy) == 44
    assert {e["route"] for e in matrix["literal_routes"]} - set(ROUTE_SPECS) == {
        "decode_compact_scalar_tail",
        "prefill_prefix_decode_rows_grouped_fp32",
        "prefill_prefix_kv_bridge_exact_d256",
        "prefill_prefix_kv_bridge_exact_d256_tailpad",
        "prefill_prefix_kv_bridge_exact_dense_d256",
        "prefill_prefix_kv_bridge_exact_dense_d256_tailpad",
        "verify_decode_scalar",
        "verify_decode_xqa",
        "verify_dflash2_grouped_verify",
        "verify_grouped_fp32",
    }


# --- the contract's sampled outcomes (§4.4, §4.6 [G]) ------------------------------------

SAMPLED = [
    (rid("decode", "float16", 256, 6, "none", "eager", "none", 1, 1), ["decode_xqa_paged"]),
    (rid("decode", "float16", 256, 6, "swa", "eager", "none", 1, 1), ["decode_scalar_paged"]),
    (rid("decode", "float16", 256, 6, "anchor", "eager", "none", 1, 1), ["decode_scalar_paged"]),
    (rid("decode", "float16", 128, 6, "none", "eager", "none", 1, 1), ["decode_scalar_paged"]),
    (rid("decode", "float16", 256, 1, "none", "eager", "none", 1, 1), ["decode_scalar_paged"]),
    (
        "edge:decode_e4m3_rev1_page784",
        ["fp8_kv_decode", "fp8_kv_decode_xqa_paged", "decode_xqa_p256_page784", "decode_xqa_paged"],
    ),
    (
        "edge:decode_e4m3_rev1_page832",
        ["fp8_kv_decode", "fp8_kv_decode_xqa_paged", "decode_xqa_paged"],
    ),
    (rid("prefix", "float16", 256, 6, "none", "eager", "none", 1, 32), ["prefill_prefix_flash"]),
    (
        rid("prefix", "float16", 256, 6, "none", "eager", "dflash2", 1, 4),
        ["prefill_smallq_decode_scalar", "prefill_prefix_flash"],
    ),
    (
        rid("prefix", "fp8_e4m3", 128, 6, "none", "eager", "dflash2", 1, 4),
        [
            "fp8_kv_prefill",
            "fp8_kv_prefill_prefix",
            "prefill_smallq_decode_scalar",
            "prefill_prefix_flash",
        ],
    ),
    (
        rid("prefix", "fp8_e4m3", 128, 6, "none", "eager", "ddtree", 1, 4),
        ["fp8_kv_prefill", "fp8_kv_prefill_prefix", "prefill_ddtree_dense", "prefill_prefix_flash"],
    ),
    (
        rid("mixed", "float16", 256, 6, "none", "graph", "ddtree", 3, 4),
        [
            "prefill_capture_smallq",
            "prefill_capture_smallq_ddtree_metadata",
            "prefill_ddtree_triton",
        ],
    ),
    (
        rid("mixed", "float16", 256, 6, "none", "graph", "mtp", 3, 4),
        [
            "prefill_capture_smallq",
            "prefill_capture_smallq_no_ddtree_metadata",
            "prefill_smallq_decode_scalar",
        ],
    ),
]


@pytest.mark.parametrize(("row", "expected"), SAMPLED, ids=[r for r, _ in SAMPLED])
def test_the_contracts_sampled_outcomes(routes, row, expected):
    route = routes[row]
    assert route["rejected"] is None
    assert [f["routes"] for f in route["forwards"]] == [expected, expected]


def test_decline_cases_show_a_splitd_entry_then_null_then_dense_or_paged(routes):
    for name in ("prefill_q1024_declined", "prefix_q1024_declined", "prefix_gather_dense_declined"):
        fw = routes[f"edge:{name}"]["forwards"][0]
        ops = [op["name"] for op in fw["ops"]]
        assert ops[0].startswith("splitd_") and ops[1] in ("dense", "paged"), (name, ops)
        assert ["_try_sm70_fa2_d256_prefill", None] in fw["checks"]
        assert not any("splitd" in r for r in fw["routes"]), name


def test_captured_decode_with_diagnostics_never_records_the_diagnostic_routes(routes):
    diagnostic = {"decode_dense_cache", "decode_dense_reference", "decode_paged_prefill"}
    for probe in MANIFEST:
        route = routes[probe.id]
        if probe.case["stage"] == "decode" and probe.case["capture"] and probe.case.get("env"):
            assert not diagnostic & {n for f in route["forwards"] for n in f["routes"]}
    assert first_routes(routes["edge:decode_diagnostics_all"]) == ["decode_paged_prefill"]
    assert first_routes(routes["edge:decode_diagnostics_all_graph"]) == ["decode_xqa_paged"]


# --- refusals (§5.1) ---------------------------------------------------------------------


def refused(routes):
    return {i: r["rejected"] for i, r in routes.items() if r["rejected"] is not None}


def test_anchor_with_an_fp8_cache_is_refused_at_construction(routes):
    for stage, head, gqa, mode, spec in itertools.product(
        ("prefill", "prefix", "decode", "mixed"),
        (128, 256),
        (1, 6),
        ("eager", "graph"),
        ("none", "mtp"),
    ):
        c, q = (3 if stage == "mixed" else 1), (32 if spec == "none" else 4)
        if stage == "decode":
            q = 1
        route = routes[rid(stage, "fp8_e4m3", head, gqa, "anchor", mode, spec, c, q)]
        assert route["rejected"] == {
            "type": "ValueError",
            "message": "prefix-anchored SWA requires",
        }
        assert route["forwards"] == []


def test_anchor_with_ddtree_is_refused_where_the_tree_verifier_runs(routes):
    for stage, c in (("prefix", 1), ("mixed", 3)):
        for mode in ("eager", "graph"):
            route = routes[rid(stage, "float16", 256, 6, "anchor", mode, "ddtree", c, 4)]
            assert route["rejected"] == {
                "type": "RuntimeError",
                "message": "does not support ddtree",
            }
            assert len(route["forwards"]) == 1 and route["forwards"][0]["routes"] == []
    # No tree verifier in a no-prefix prefill or a decode: no refusal.
    assert (
        routes[rid("prefill", "float16", 256, 6, "anchor", "eager", "ddtree", 1, 4)]["rejected"]
        is None
    )
    assert (
        routes[rid("decode", "float16", 256, 6, "anchor", "graph", "ddtree", 1, 1)]["rejected"]
        is None
    )


def test_ddtree_with_fp8_under_capture_is_refused_and_eager_falls_back(routes):
    for stage, c in (("prefill", 1), ("prefix", 1), ("mixed", 3)):
        graph = routes[rid(stage, "fp8_e4m3", 128, 1, "none", "graph", "ddtree", c, 4)]
        assert graph["rejected"] == {"type": "ValueError", "message": "unsupported key cache dtype"}
        assert graph["forwards"][0]["routes"][:2] == [
            "prefill_capture_smallq",
            "prefill_capture_smallq_ddtree_metadata",
        ]
    eager = routes[rid("prefix", "fp8_e4m3", 128, 1, "none", "eager", "ddtree", 1, 4)]
    assert eager["rejected"] is None and "prefill_ddtree_dense" in first_routes(eager)
    assert (
        routes[rid("decode", "fp8_e4m3", 128, 1, "none", "graph", "ddtree", 1, 1)]["rejected"]
        is None
    )


def test_the_matrix_refuses_only_the_three_accepted_cores(routes):
    matrix = {i: r for i, r in refused(routes).items() if not i.startswith("edge:")}
    assert {r["message"] for r in matrix.values()} == {
        "prefix-anchored SWA requires",
        "does not support ddtree",
        "unsupported key cache dtype",
    }
    # Anchor x FP8: every stage, head, GQA, capture and method (4 x 2 x 2 x 2 x 4); anchor x
    # ddtree on FP16 where the tree verifier runs (prefix, mixed x head x GQA x capture).
    counts = {
        m: sum(r["message"] == m for r in matrix.values())
        for m in {r["message"] for r in matrix.values()}
    }
    assert counts["prefix-anchored SWA requires"] == 128
    assert counts["does not support ddtree"] == 16
    # ddtree x FP8 x capture x (prefill, prefix, mixed) x head x GQA x (none, swa); anchor is
    # refused before.
    assert counts["unsupported key cache dtype"] == 24


def test_the_fail_closed_refusals_without_a_triton_fallback(routes):
    assert (
        refused(routes)["edge:decode_op_missing_strict"]["message"]
        == "paged decode op is unavailable"
    )
    assert (
        refused(routes)["edge:decode_scalar_off_strict"]["message"]
        == "decode has no enabled Flash route"
    )
    assert refused(routes)["edge:prefix_dense_op_missing_strict"]["message"] == (
        "FLASH_ATTN_V100 cannot run this layer/config"
    )
    assert first_routes(routes["edge:decode_op_missing"]) == ["decode_triton_no_flash_decode"]
    assert first_routes(routes["edge:decode_scalar_off"]) == ["decode_triton_scalar_disabled"]
    assert first_routes(routes["edge:prefix_dense_op_missing"]) == ["unsupported_triton_fallback"]
    assert first_routes(routes["edge:prefix_dense_op_missing_draft"]) == [
        "dflash_draft_triton_fallback"
    ]
    assert first_ops(routes["edge:prefix_triton_forced"]) == ["triton_unified"]


# --- thresholds, both sides (§3.3 through rows) -------------------------------------------


@pytest.mark.parametrize(
    ("low", "high", "xqa"),
    [
        ("verify_min_seq_4095", "verify_min_seq_4096", "prefill_smallq_decode_xqa"),
        (
            "verify_capture_workspace_4095",
            "verify_capture_workspace_4096",
            "prefill_smallq_decode_xqa",
        ),
        ("decode_e5m2_min_seq_16383", "decode_e5m2_min_seq_16384", "decode_xqa_paged"),
        (
            "decode_e5m2_capture_static_16383",
            "decode_e5m2_capture_static_16384",
            "decode_xqa_paged",
        ),
        ("decode_gqa4_min_seq_32767", "decode_gqa4_min_seq_32768", "decode_xqa_paged"),
        ("decode_gqa4_workspace_32767", "decode_gqa4_workspace_32768", "decode_xqa_paged"),
        ("e5m2_verify_xqa_16383", "e5m2_verify_xqa_16384", "prefill_smallq_decode_xqa"),
        ("decode_e4m3_rows2_batch_off", "decode_e4m3_rows2_batch_on", "decode_xqa_paged"),
        ("decode_e4m3_rows32_batch_off", "decode_e4m3_rows32_batch_on", "decode_xqa_paged"),
        ("verify_e4m3_rows2_batch_off", "verify_e4m3_rows2_batch_on", "prefill_smallq_decode_xqa"),
        (
            "verify_e4m3_rows32_batch_off",
            "verify_e4m3_rows32_batch_on",
            "prefill_smallq_decode_xqa",
        ),
        ("verify_min_seq_4095", "verify_min_seq_variable_68", "prefill_smallq_decode_xqa"),
        ("decode_gqa4", "decode_gqa4_min_variable_1", "decode_xqa_paged"),
    ],
)
def test_each_threshold_on_both_sides(routes, low, high, xqa):
    assert xqa not in first_routes(routes[f"edge:{low}"])
    assert xqa in first_routes(routes[f"edge:{high}"])


def test_the_g6_partition_hint_and_its_family_counters(routes):
    assert first_routes(routes["edge:decode_page784"])[0] == "decode_xqa_p256_page784"
    for page in (832, 848, 1616, 1648):
        assert first_routes(routes[f"edge:decode_page{page}"]) == ["decode_xqa_paged"]
    assert "decode_xqa_p256_page1648" in first_routes(routes["edge:decode_e5m2_page1648"])
    assert "decode_xqa_e4m3_dynamic_page784" in first_routes(
        routes["edge:decode_e4m3_rev0_page784"]
    )
    assert "decode_xqa_p64_page784" in first_routes(
        routes["edge:decode_e4m3_rev0_page784_p64_p256_off"]
    )
    assert "decode_xqa_e4m3_dynamic_page784" in first_routes(
        routes["edge:decode_e4m3_strategy_legacy_rev1_page784"]
    )
    # A partition-size setting, or the sawtooth off: no hint, no counter.
    assert first_routes(routes["edge:decode_partition_size_page784"]) == ["decode_xqa_paged"]
    assert first_routes(routes["edge:decode_sawtooth_off_page784"]) == ["decode_xqa_paged"]
    hinted = routes["edge:decode_page784"]["forwards"][0]["ops"][0]
    assert hinted["name"] == "xqa" and hinted["partition_size_hint"] == 256


def test_the_legacy_strategy_counter_sits_outside_the_forwards(routes):
    e4m3 = routes[rid("decode", "fp8_e4m3", 256, 6, "none", "eager", "none", 1, 1)]
    assert e4m3["construction"] == ["decode_strategy_legacy_revision"]
    assert all("decode_strategy_legacy_revision" not in f["routes"] for f in e4m3["forwards"])
    assert routes["edge:decode_e4m3_rev1_page784"]["construction"] == []
    assert (
        routes[rid("decode", "fp8_e4m3", 128, 6, "none", "eager", "none", 1, 1)]["construction"]
        == []
    )


def test_grouped_fp32_codes_through_rows(routes):
    assert "prefill_smallq_fp16_grouped_fp32" in first_routes(routes["edge:prefix_dflash2_page832"])
    # FP16 grouped needs page 832 (kv_shape_or_unmeasured_page at page 16).
    assert "prefill_smallq_fp16_grouped_fp32" not in first_routes(
        routes[rid("prefix", "float16", 256, 6, "none", "eager", "mtp", 1, 4)]
    )
    e4m3 = rid("prefix", "fp8_e4m3", 256, 6, "none", "eager", "mtp", 1, 4)
    assert "prefill_smallq_e4m3_grouped_fp32" in first_routes(routes[e4m3])
    # causal_or_window, head_shape, kv_shape (GQA 1), decode_policy, operator_missing.
    for row in (
        rid("prefix", "fp8_e4m3", 256, 6, "swa", "eager", "mtp", 1, 4),
        rid("prefix", "fp8_e4m3", 128, 6, "none", "eager", "mtp", 1, 4),
        rid("prefix", "fp8_e4m3", 256, 1, "none", "eager", "mtp", 1, 4),
        "edge:verify_e4m3_partition_size",
        "edge:grouped_operator_missing",
    ):
        assert "prefill_smallq_e4m3_grouped_fp32" not in first_routes(routes[row]), row
    assert "prefill_prefix_decode_rows_e4m3_grouped_fp32" in first_routes(
        routes["edge:grouped_rows_revision6"]
    )
    assert "prefill_prefix_decode_rows_scalar" in first_routes(
        routes["edge:grouped_rows_batch_revision"]
    )


def test_after_init_changes_nothing_resolve_once(routes):
    assert first_routes(routes["edge:decode_xqa_off_after_init"]) == ["decode_xqa_paged"]
    assert first_routes(routes["edge:decode_xqa_off"]) == ["decode_scalar_paged"]


def test_both_forwards_route_alike_in_the_matrix(routes):
    for i, route in routes.items():
        if len(route["forwards"]) == 2 and not i.startswith("edge:"):
            assert route["forwards"][0]["routes"] == route["forwards"][1]["routes"], i


# --- the CLI shows the category ----------------------------------------------------------


def test_list_matrix_explain_and_report_show_the_category(tmp_path):
    listed = ok(invoke(["list"], cwd=ROOT))
    assert listed.code == 0 and NAME in listed.stdout
    explained = ok(invoke(["explain", f"{NAME}:edge:decode_e4m3_rev1_page784"], cwd=ROOT))
    assert explained.code == 0, explained.stderr
    assert "decode_xqa_p256_page784" in explained.stdout and "forward 1:" in explained.stdout
    matrix = ok(invoke(["matrix", "-c", NAME, "--color", "never"], cwd=ROOT))
    assert matrix.code == 0, matrix.stderr
    assert "decode_xqa_paged" in matrix.stdout
    html = tmp_path / "report.html"
    report = ok(invoke(["report", "--html", html, "-c", NAME], cwd=ROOT))
    assert report.code == 0, report.stderr
    assert NAME in html.read_text()


def test_a_layout_entry_outside_the_known_ops_is_refused():
    # A misspelt op would otherwise leave the row's routes silently unchanged.
    for inputs in ({"present": ("archh",)}, {"unavailable": ("xqa2",)}, {"declines": ("arch",)}):
        with pytest.raises(ValueError, match="unknown entries"):
            Layout(**inputs)
    assert Layout(present=("arch", "arch_q8192"), declines=("splitd_paged",)).present == (
        "arch",
        "arch_q8192",
    )


def test_the_architecture_entry_needs_its_switch_and_no_capture():
    base = Case("prefill", "auto", 256, 6, False, "none", "none", qlen=8000)
    on = simulate(base, _values(), Layout(present=("arch",)))
    assert on["forwards"][0]["routes"][:2] == [
        "prefill_dense_d256_gqa_arch_long",
        "prefill_dense_d256_gqa_79t_fp32",
    ]
    off = simulate(
        base, _values(prefill_d256_gqa_arch_128k_experimental=False), Layout(present=("arch",))
    )
    assert off["forwards"][0]["routes"] == [
        "prefill_dense_splitd_d256",
        "prefill_no_prefix_dense_flash",
    ]
    # v37 needs KV > q: the no-prefix call (KV == q) falls back to plain Split-D.
    v37 = simulate(base, _values(prefill_d256_gqa_v37=True), Layout(present=("arch",)))
    assert v37["forwards"][0]["routes"] == [
        "prefill_dense_splitd_d256",
        "prefill_no_prefix_dense_flash",
    ]
    # 8100 is no multiple of 32: neither the architecture entry nor plain Split-D.
    odd = simulate(
        Case("prefill", "auto", 256, 6, False, "none", "none", qlen=8100),
        _values(),
        Layout(present=("arch",)),
    )
    assert odd["forwards"][0]["routes"] == ["prefill_no_prefix_dense_flash"]


def test_an_absent_grouped_op_answers_operator_missing_without_moving_the_route():
    case = Case("prefix", "auto", 256, 6, False, "mtp", "none", page=832)
    loaded = simulate(case, _values(), Layout())
    missing = simulate(case, _values(), Layout(unavailable=("grouped_fp16",)))
    assert "prefill_smallq_fp16_grouped_fp32" in loaded["forwards"][0]["routes"]
    assert missing["forwards"][0]["routes"] == [
        "prefill_smallq_decode_scalar",
        "prefill_prefix_flash",
    ]
    assert ["prefill_smallq_fp16_grouped_fp32", "operator_missing:sm70_grouped_fp16_fwd"] in (
        missing["forwards"][0]["verdicts"]
    )


def _values(**changes: Any) -> dict[str, Any]:
    """The section's defaults (each field's declared default), with the given changes."""
    values: dict[str, Any] = {f.name: f.default for f in V100_ATTENTION_FIELDS}
    unknown = set(changes) - set(values)
    assert not unknown, unknown
    values.update(changes)
    return values
