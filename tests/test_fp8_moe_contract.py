"""The block-FP8 MoE family against docs/contracts/fp8moe.md, its expected outcomes written
here as literals (never read back from the family's tables): the section and its variables
(§1.1), the probes of §7.2, the policy grid of §7.3, the lanes of §5.1 and §5.4, the bytes of
§4.3 and §4.4 and the reference rows of §8.1. Rows are replayed, not read from snapshots/."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from native.catalogue import CATALOGUE
from policies import PROJECT
from policies.categories.fp8_moe import FP8_MOE_CATEGORY, QWEN36_35B
from policies.fp8_moe import load_fp8_moe
from policies.variables import FIELDS
from routectl.errors import SelectionError
from routectl.replay.harness import replay_category
from routectl.workload import Hardware
from tests.families.sm70_fp8_moe import FP8_MOE_VARIABLES, MOE_SINGLE_TOKEN_VARIABLES
from tests.fixtures.toy import invoke, ok
from tests.policy_helpers import resolve

ROOT = Path(__file__).resolve().parents[1]
BASE = "35b_a3b_fp8/fp8_e4m3/tp4/none/c8/q8192"
TP2 = "35b_a3b_fp8/fp8_e4m3/tp2/none/c8/q8192"
TM = "TurboMindFp8MoE"
GEMM = "fp8_moe_gemm_sm70_out"
DENSE = "fp8_moe_dense_stage_sm70_out"
PER_EXPERT = "fp8_moe_gemm_sm70_per_expert_dispatch_out"
LEGACY = "fp8_moe_single_token_sm70_out"

# docs/contracts/fp8moe.md §1.1: the 18 variables the family adds (its own and the shared
# single-token switches), as tests/contract_literals.py writes them.
FP8_VARIABLES = FP8_MOE_VARIABLES
SHARED_VARIABLES = MOE_SINGLE_TOKEN_VARIABLES


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, Any]]:
    return {r["id"]: r["route"] for r in replay_category(PROJECT, FP8_MOE_CATEGORY)}


def edge(rows: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    return rows[f"edge:{name}"]


def lane(route: dict[str, Any], m: int) -> dict[str, Any]:
    return next(s for s in route["stages"] if s["m"] == m)


def ops_at(route: dict[str, Any], m: int) -> list[str]:
    return [c["op"] for c in route["dispatch"] if c["plan"]["m"] == m]


# --- §1.1 the section ----------------------------------------------------------------------


def test_section_has_11_route_fields_3_diagnostics_and_18_new_variables():
    section = [f for f in FIELDS if f.section == "sm70_fp8_moe"]
    assert len(section) == 14
    families = {f.name: f for f in PROJECT.families}
    hashed = [s for s in families["sm70-fp8-moe"].sections if s.startswith("sm70_fp8_moe.")]
    assert len(hashed) == 11
    assert not {"compact_compare", "compact_compare_reports", "strict_compare_fail"} & {
        s.split(".")[1] for s in hashed
    }
    variables = {f.variable for f in FIELDS if f.variable}
    assert FP8_VARIABLES | SHARED_VARIABLES <= variables
    # Declared once: one field per variable.
    named = Counter(f.variable for f in FIELDS if f.variable in FP8_VARIABLES | SHARED_VARIABLES)
    assert set(named.values()) == {1} and len(named) == 18
    # sm70_awq_moe does not adopt the shared single-token variables (docs/contracts/fp8moe.md §1.4).
    assert not any(f.variable in SHARED_VARIABLES for f in FIELDS if f.section == "sm70_awq_moe")


def test_defaults_and_the_single_token_inputs():
    policy = resolve({})
    assert policy.value("sm70_fp8_moe.single_token_w13") == ("dense",)
    assert policy.value("sm70_fp8_moe.single_token_w2") == "indexed"
    assert policy.value("sm70_fp8_moe.single_token_reduce") == "weighted"
    assert policy.value("sm70_fp8_moe.compact_compare_reports") == 16
    both = resolve(
        {
            "VLLM_SM70_MOE_SINGLE_TOKEN_INDEXED_W13_FASTPATH": "7",
            "VLLM_SM70_MOE_SINGLE_TOKEN_COMPACT_W13_FASTPATH": "1",
            "VLLM_SM70_FP8_MOE_SINGLE_TOKEN_INDEXED_W2_FASTPATH": "0",
            "VLLM_SM70_MOE_SINGLE_TOKEN_UNPERMUTE_FASTPATH": "0",
        }
    )
    assert both.value("sm70_fp8_moe.single_token_w13") == ("compact", "indexed", "dense")
    assert both.value("sm70_fp8_moe.single_token_w2") == "dense"
    assert both.value("sm70_fp8_moe.single_token_reduce") == "unpermute"
    typed = resolve({}, {"sm70_fp8_moe": {"single_token_w13": ["dense", "compact"]}})
    assert typed.value("sm70_fp8_moe.single_token_w13") == ("compact", "dense")


@pytest.mark.parametrize("bad", [[], ["dense", "dense"]])
def test_single_token_w13_must_be_nonempty_without_duplicates(bad):
    with pytest.raises(Exception, match="must be nonempty and have no duplicates"):
        resolve({}, {"sm70_fp8_moe": {"single_token_w13": bad}})


def test_diagnostics_never_enter_the_hash():
    base = resolve({})
    diag = resolve({"VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_COMPARE": "1"})
    route = resolve({"VLLM_SM70_FP8_MOE_BATCHED_GEMM": "0"})
    sections = next(f for f in PROJECT.families if f.name == "sm70-fp8-moe").sections
    assert base.compute_hash(list(sections)) == diag.compute_hash(list(sections))
    assert base.compute_hash(list(sections)) != route.compute_hash(list(sections))


@pytest.mark.parametrize("variable", sorted(FP8_VARIABLES | SHARED_VARIABLES))
def test_an_invalid_value_of_each_variable_exits_2_with_one_line(variable):
    result = ok(invoke(["config"], cwd=ROOT, environ={variable: "yes"}))
    assert result.code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and variable in lines[0], result.stderr


# --- §7.1 the rows -------------------------------------------------------------------------


def test_row_counts(rows):
    assert len(rows) == 632
    matrix = [k for k in rows if not k.startswith("edge:")]
    assert len(matrix) == 540
    applicable = [k for k in matrix if k.startswith("35b_a3b_fp8/")]
    assert len(applicable) == 108
    statuses = Counter(rows[k]["status"]["code"] for k in matrix if rows[k].get("status"))
    assert statuses == {"not_applicable": 432}
    assert {rows[k]["kernel"] for k in applicable} == {TM}
    edges = [k for k in rows if k.startswith("edge:")]
    assert len([k for k in edges if k.startswith("edge:moe_policy_")]) == 54
    assert len(edges) - 54 == 38


def test_kv_spec_and_concurrency_do_not_move_the_layer(rows):
    base = rows[BASE]
    for other in ("float16/tp4/mtp/c1/q8192", "fp8_e5m2/tp4/dflash/c4/q8192"):
        assert rows[f"35b_a3b_fp8/{other}"] == base


# --- §5.1 and §5.4 the lanes on the base row ----------------------------------------------


def test_base_row_lanes(rows):
    base = rows[BASE]
    assert lane(base, 0) == {
        "m": 0, "lane": "none", "w13": None, "w2": None, "reduce": None, "buffers": "persistent"
    }  # fmt: skip
    assert ops_at(base, 0) == []
    assert lane(base, 1)["lane"] == "legacy"
    (legacy,) = [c for c in base["dispatch"] if c["plan"]["m"] == 1]
    assert legacy["op"] == LEGACY and legacy["plan"]["exact_per_route"] is True
    assert legacy["plan"]["routed_slots"] == 8
    for m in (2, 8, 32, 33, 64, 65, 4096, 8192):
        assert lane(base, m)["lane"] == "routed"
        assert (lane(base, m)["w13"], lane(base, m)["w2"]) == ("batched", "batched")
        assert ops_at(base, m) == [
            "moe_permute_with_scratch", GEMM, "silu_and_mul", GEMM, "moe_unpermute"
        ]  # fmt: skip
        gemms = [c["plan"] for c in base["dispatch"] if c["plan"]["m"] == m and c["op"] == GEMM]
        assert [(p["k"], p["n"]) for p in gemms] == [(2048, 256), (128, 2048)]
        assert gemms[0]["routed_slots"] == 8 * m
    # Persistent buffers serve up to M = 32.
    assert lane(base, 32)["buffers"] == "persistent" and lane(base, 33)["buffers"] == "temporary"


def test_budget_caps_the_token_counts(rows):
    low = rows["35b_a3b_fp8/fp8_e4m3/tp4/none/c8/q4096"]
    assert [s["m"] for s in low["stages"]] == [0, 1, 2, 8, 32, 33, 64, 65, 4096]


# --- §4.3 and §4.4 the bytes, by hand ------------------------------------------------------


def test_bytes_of_a_tp4_and_a_tp2_row(rows):
    # TP4: E 256, H 2048, I 512 / 4 = 128.
    e, h, i = 256, 2048, 128
    codes = e * 3 * h * i
    scales = 2 * e * ((h // 128) * 2 * i + 1 * h)
    assert (codes, scales) == (201_326_592, 3_145_728)
    tp4 = rows[BASE]["bytes"]
    assert (tp4["codes"], tp4["scales"], tp4["banks"]) == (codes, scales, 204_472_320)
    assert tp4["pointer_tables"] == 64 * e
    assert tp4["workspace"] == 2_438_992
    assert tp4["sort_workspace"] is None
    # TP2: I 256.
    i = 256
    codes = e * 3 * h * i
    scales = 2 * e * ((h // 128) * 2 * i + 2 * h)
    tp2 = rows[TP2]["bytes"]
    assert (tp2["codes"], tp2["scales"], tp2["banks"]) == (codes, scales, 408_944_640)
    assert tp2["workspace"] == 2_635_600
    row = next(r for r in FP8_MOE_CATEGORY.rows() if r.id == TP2)
    totals = FP8_MOE_CATEGORY.model_totals(row, rows[TP2])
    assert totals is not None and totals["banks"] == 16_357_785_600


def test_prepare_order_and_plans(rows):
    prepare = rows[BASE]["prepare"]
    assert [c["op"] for c in prepare] == ["fp8_sm70_prepare"] * 2 + [
        "awq_moe_build_strided_ptrs"
    ] * 4
    assert prepare[0]["plan"] == {"n": 256, "k": 2048, "group": 128, "gated": False, "experts": 256}
    assert prepare[1]["plan"] == {"n": 2048, "k": 128, "group": 128, "gated": False, "experts": 256}


# --- §7.2 the probes -----------------------------------------------------------------------


def test_batched_off(rows):
    r = edge(rows, "batched_off")
    assert (lane(r, 1)["w13"], lane(r, 1)["w2"], lane(r, 1)["reduce"]) == (
        "active_dense", "indexed", "weighted"
    )  # fmt: skip
    assert ops_at(r, 1) == [
        "fp8_moe_single_token_dense_w13_sm70_out",
        "silu_and_mul",
        "fp8_moe_single_token_indexed_dense_stage_sm70_out",
        "awq_moe_single_token_weighted_reduce_out",
    ]
    assert ops_at(r, 2) == [
        "moe_permute_with_scratch",
        DENSE,
        "silu_and_mul",
        DENSE,
        "moe_unpermute",
    ]


@pytest.mark.parametrize("name", ["legacy_compact_off", "legacy_op_missing"])
def test_legacy_lane_off_routes_m1(rows, name):
    r = edge(rows, name)
    assert "error" not in r
    assert lane(r, 1)["lane"] == "routed"
    assert ops_at(r, 1) == ["moe_permute_with_scratch", GEMM, "silu_and_mul", GEMM, "moe_unpermute"]


def test_legacy_variants(rows):
    r = edge(rows, "legacy_top_k_descriptor")
    assert [c["plan"]["exact_per_route"] for c in r["dispatch"] if c["op"] == LEGACY] == [False]
    assert ops_at(edge(rows, "legacy_native_unpermute"), 1) == [LEGACY, "moe_unpermute"]
    assert ops_at(edge(rows, "legacy_decomposed"), 1) == [
        "awq_moe_single_token_exact_layout_prepare", GEMM, "silu_and_mul", GEMM, "moe_unpermute"
    ]  # fmt: skip


def test_per_expert_dispatch(rows):
    assert ops_at(edge(rows, "w13_per_expert"), 2)[1:4] == [PER_EXPERT, "silu_and_mul", GEMM]
    assert ops_at(edge(rows, "w2_per_expert"), 2)[1:4] == [GEMM, "silu_and_mul", PER_EXPERT]
    assert ops_at(edge(rows, "w13_per_expert"), 1) == [LEGACY]


@pytest.mark.parametrize("name", ["permute_scratch_off", "permute_scratch_op_missing"])
def test_plain_permute(rows, name):
    r = edge(rows, name)
    assert ops_at(r, 2)[0] == "moe_permute"
    assert r["bytes"]["sort_workspace"] == 0


@pytest.mark.parametrize(
    ("name", "w13", "w2", "reduce"),
    [
        ("st_w2_dense", "active_dense", "active_dense", "weighted"),
        ("st_indexed", "indexed", "indexed", "weighted"),
        ("st_compact_w13", "compact", "indexed", "weighted"),
        ("st_compact_op_missing", "indexed", "indexed", "weighted"),
        ("st_unpermute", "active_dense", "indexed", "unpermute"),
        ("st_reduce_op_missing", "active_dense", "indexed", "unpermute"),
    ],
)
def test_single_token_probes(rows, name, w13, w2, reduce):
    s = lane(edge(rows, name), 1)
    assert (s["lane"], s["w13"], s["w2"], s["reduce"]) == ("single_token", w13, w2, reduce)
    ops = ops_at(edge(rows, name), 1)
    assert ops[-1] == (
        "awq_moe_single_token_weighted_reduce_out" if reduce == "weighted" else "moe_unpermute"
    )


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("turbo_off", "other_backend"),
        ("moe_dequant", "dequant_fallback"),
        ("backend_marlin", "other_backend"),
        ("capability_75", "other_backend"),
    ],
)
def test_outcomes_without_turbomind(rows, name, code):
    r = edge(rows, name)
    assert r["kernel"] is None and r["status"]["code"] == code
    assert r["dispatch"] == [] and r["prepare"] == []


def test_dequant_fallback_holds_fp16_banks(rows):
    # §4.3: twice the FP8 code bytes of the TP4 layer.
    assert edge(rows, "moe_dequant")["bytes"]["total"] == 2 * 201_326_592


def test_identical_to_the_base(rows):
    assert edge(rows, "moe_dequant_alone") == rows[BASE]
    r72 = dict(edge(rows, "capability_72"))
    assert r72.pop("capability") == 72
    base = dict(rows[BASE])
    base.pop("capability")
    assert r72 == base


@pytest.mark.parametrize(
    ("name", "core"),
    [
        ("per_tensor_weights", "requires block-wise FP8 weights"),
        ("block_64", "only supports FP8 block size [128, 128]"),
        ("expert_bias", "SM70 FP8 MoE does not support bias yet"),
        ("prepare_op_missing", "SM70 TurboMind op _C::fp8_sm70_prepare is not available"),
        ("partial_block_tp4", "fp8_sm70_prepare: output scale block mismatch (W13"),
        ("flash_next_geometry_tp4", "fp8_sm70_prepare: output scale block mismatch (W13"),
    ],
)
def test_load_errors(rows, name, core):
    r = edge(rows, name)
    assert r["phase"] == "load" and r["m"] is None
    message = r["error"]["message"]
    assert core in message and "model.layers.0.mlp.experts" in message
    assert "\n" not in message


def test_gemm_op_missing_fails_at_the_first_dispatch_that_needs_it(rows):
    r = edge(rows, "gemm_op_missing")
    assert (r["phase"], r["m"], r["error"]["code"]) == ("dispatch", 2, "missing_native_ops")
    assert "_C::fp8_moe_gemm_sm70_out is not available" in r["error"]["message"]


def test_partial_96_loads_flagged_and_warned(rows):
    r = edge(rows, "partial_96_tp4")
    assert r["kernel"] == TM
    assert r["flags"]["partial_n_block"] is True and r["flags"]["partial_k_block"] is True
    assert [w["code"] for w in r["warnings"]] == ["partial_scale_block"]
    assert (r["bytes"]["codes"], r["bytes"]["scales"]) == (75_497_472, 1_310_720)
    assert r["bytes"]["banks"] == 76_808_192
    assert rows[BASE]["warnings"] == [] and rows[BASE]["flags"]["partial_n_block"] is False


# --- §8.1 the reference's 56 FP8 rows -------------------------------------------------------


@pytest.mark.parametrize(
    ("b", "i", "n"), [(b, i, n) for b in (0, 1) for i in (0, 1) for n in (0, 1)]
)
def test_reference_rows(rows, b, i, n):
    r = edge(rows, f"ref_b{b}_i{i}_n{n}")
    assert ops_at(r, 0) == []
    m1 = lane(r, 1)
    if b == 0:
        assert m1["w13"] == ("indexed" if i and n else "active_dense")
        assert m1["w2"] == ("indexed" if n else "active_dense")
    for t in (1, 2, 32, 33, 64, 65) if b else (2, 32, 33, 64, 65):
        stage_ops = [op for op in ops_at(r, t) if op in (GEMM, DENSE)]
        assert stage_ops == ([GEMM, GEMM] if b else [DENSE, DENSE]), (t, stage_ops)


# --- §7.3 the grid -------------------------------------------------------------------------


def outcome(route: dict[str, Any]) -> str:
    return route["kernel"] or route["status"]["code"]


def test_policy_grid(rows):
    cells = {k.removeprefix("edge:moe_policy_"): v for k, v in rows.items() if "moe_policy_" in k}
    counts = Counter(outcome(v) for v in cells.values())
    assert counts == {TM: 30, "other_backend": 20, "not_admitted": 3, "dequant_fallback": 1}
    assert [k for k, v in cells.items() if outcome(v) == "dequant_fallback"] == [
        "auto_tm_0_moe_1_dq_1"
    ]
    assert sorted(k for k, v in cells.items() if outcome(v) == "not_admitted") == [
        "auto_tm_0_moe_0_dq_0", "auto_tm_0_moe_1_dq_0", "auto_tm_0_moe_unset_dq_0"
    ]  # fmt: skip
    assert all(outcome(v) == "other_backend" for k, v in cells.items() if k.startswith("marlin"))
    assert all(outcome(v) == TM for k, v in cells.items() if k.startswith("turbomind"))
    for k, v in cells.items():
        assert v["flags"]["admitted"] is (outcome(v) != "not_admitted")
        assert v["flags"]["force_marlin"] is k.startswith("marlin")
        assert v["flags"]["moe_dequant_requested"] is ("_moe_1_" in k)
    # The MoE variable changes a single cell.
    moved = 0
    for k, v in cells.items():
        if "_moe_1_" in k:
            moved += outcome(v) != outcome(cells[k.replace("_moe_1_", "_moe_0_")])
    assert moved == 1


# --- deviation: non-SiLU layers -------------------------------------------------------------


def test_non_silu_layer_is_refused():
    from routectl.replay.harness import RecordingNamespace

    policy = resolve({})
    engine = next(r for r in FP8_MOE_CATEGORY.rows() if r.id == BASE).engine
    ns = RecordingNamespace(CATALOGUE)
    with pytest.raises(SelectionError) as info:
        load_fp8_moe({**QWEN36_35B, "activation": "gelu"}, policy, Hardware(70), engine, ns)
    assert info.value.code == "activation_not_silu"
    assert info.value.message.startswith("model.layers.0.mlp.experts: ")


# --- the command line shows the family -------------------------------------------------------


def test_config_shows_the_section():
    result = ok(invoke(["config"], cwd=ROOT, environ={"VLLM_SM70_FP8_MOE_BATCHED_GEMM": "0"}))
    assert result.code == 0, result.stderr
    assert "[sm70_fp8_moe]" in result.stdout
    assert "alias:VLLM_SM70_FP8_MOE_BATCHED_GEMM" in result.stdout


def test_explain_prints_the_lanes_and_the_failure_phase():
    base = ok(invoke(["explain", f"sm70-fp8-moe:{BASE}"], cwd=ROOT))
    assert base.code == 0, base.stderr
    assert "  M=1: legacy (w13 fused" in base.stdout
    assert "  M=2: routed (w13 batched, w2 batched, reduce unpermute, persistent buffers)" in (
        base.stdout
    )
    failed = ok(invoke(["explain", "sm70-fp8-moe:edge:gemm_op_missing"], cwd=ROOT))
    assert "failed at dispatch, M=2" in failed.stdout
    warned = ok(invoke(["explain", "sm70-fp8-moe:edge:partial_96_tp4"], cwd=ROOT))
    assert "warning [partial_scale_block]" in warned.stdout


def test_matrix_and_html_report_show_the_category(tmp_path):
    matrix = ok(invoke(["matrix", "-c", "sm70-fp8-moe"], cwd=ROOT))
    assert matrix.code == 0 and "sm70-fp8-moe: kernel per row; 632 rows" in matrix.stdout
    assert "edge:moe_dequant " in matrix.stdout and "[dequant_fallback]" in matrix.stdout
    page = tmp_path / "r.html"
    report = ok(invoke(["report", "--html", page, "-c", "sm70-fp8-moe"], cwd=ROOT))
    assert report.code == 0, report.stderr
    assert "sm70-fp8-moe" in page.read_text()


# --- where each missing op fails (docs/contracts/fp8moe.md §6, item 5) -----------------------


def _load(remove: tuple[str, ...], env: dict[str, str] | None = None):
    from routectl.replay.harness import RecordingNamespace

    engine = next(r for r in FP8_MOE_CATEGORY.rows() if r.id == BASE).engine
    ns = RecordingNamespace(CATALOGUE, remove=remove)
    return load_fp8_moe(QWEN36_35B, resolve(env or {}), Hardware(70), engine, ns)


def _call(layer, m: int) -> None:
    from policies.categories.fp8_moe import call_inputs

    layer.apply(*call_inputs(m, layer.state["layer"]))


def test_a_missing_pointer_op_fails_at_load():
    with pytest.raises(SelectionError, match=r"_C::awq_moe_build_strided_ptrs is not available"):
        _load(("awq_moe_build_strided_ptrs",))


@pytest.mark.parametrize(
    ("op", "env", "m"),
    [
        (DENSE, {"VLLM_SM70_FP8_MOE_BATCHED_GEMM": "0"}, 2),
        ("fp8_moe_single_token_dense_w13_sm70_out", {"VLLM_SM70_FP8_MOE_BATCHED_GEMM": "0"}, 1),
        ("moe_unpermute", {}, 2),
        (PER_EXPERT, {"VLLM_SM70_FP8_MOE_BATCHED_W2_PER_EXPERT_DISPATCH": "1"}, 2),
    ],
)
def test_a_missing_stage_op_fails_at_the_first_call_that_needs_it(op, env, m):
    layer = _load((op,), env)  # loads: the op is not needed yet
    for earlier in range(m):
        _call(layer, earlier)
    with pytest.raises(SelectionError) as info:
        _call(layer, m)
    assert info.value.code == "missing_native_ops"
    assert info.value.message == (
        f"model.layers.0.mlp.experts: SM70 TurboMind op _C::{op} is not available (dispatch, M {m})"
    )
