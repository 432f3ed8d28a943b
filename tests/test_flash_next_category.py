"""The category sm70-flash-next-batch (issue 31, docs/contracts/flashnext.md §6): the matrix
outcomes of §6.2, every probe's stated difference from its base (§6.3) and the reference's
default change (§6.4). Expected values are literals written from the contract."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from native.catalogue import CATALOGUE
from native.kernels.flash_next_sm70 import prepare_batch
from policies import PROJECT
from policies.categories.flash_next_batch import FLASH_NEXT_BATCH_CATEGORY as CATEGORY
from policies.flash_next import Rules, flash_next_route
from routectl.errors import SelectionError
from routectl.replay.harness import RecordingNamespace, find_row, replay_category, resolve_row
from routectl.workload import Hardware
from tests.families.sm70_flash_next_batch import FLASH_NEXT_CONTROLS
from tests.fixtures.toy import invoke, ok

# The reference's expected-change file, copied unchanged (docs/contracts/flashnext.md §6.4):
# upstream abcd19886/1Cat-vLLM @ 0e4384ec, tests/models/qwen4_exp/data/, 4,251 bytes.
ROOT = Path(__file__).resolve().parents[1]
REFERENCE = (
    Path(__file__).parent / "fixtures" / "reference" / "flash_next_batch_default_changes.json"
)
REFERENCE_SHA256 = "33b69ce41f7d052e7b9528f7395f8e3bfbb0a17d747e0fc442bbd5d31d5395bb"
FN = "flash_next_mtp4_nvfp4"
B0 = f"{FN}/float16/tp4/none/c4/q8192"
B1 = f"{FN}/float16/tp4/mtp/c4/q8192"
B2 = f"{FN}/float16/tp4/dflash/c4/q4096"
KVS = ("float16", "fp8_e4m3", "fp8_e5m2")
CS = (1, 4, 8)
BUDGETS = (4096, 8192)
# docs/contracts/flashnext.md §1.3 rows 1-14, by variable.
CONTROLS = FLASH_NEXT_CONTROLS
RMSNORM = "VLLM_SM70_RMSNORM_GATED_EXACT"


@pytest.fixture(scope="module")
def routes() -> dict[str, dict[str, Any]]:
    return {r["id"]: r["route"] for r in replay_category(PROJECT, CATEGORY)}


def summary(route: dict[str, Any]) -> dict[str, Any]:
    """The §6.2 columns of one route."""
    v = route["flash_next_route"]
    return {
        "batch_qualified": v["batch_qualified"]["ok"],
        "dense": v["dense_batch_prepared"]["ok"],
        "gdn": v["gdn_packed"]["ok"],
        "hc": v["hc_packed"]["ok"],
        "fp32": v["hc_fp32_partials"]["ok"],
        "rmsnorm": v["rmsnorm_gated_exact"]["ok"],
        "dense_by_m": sorted(int(m) for m, ok in route["dense_by_m"].items() if ok),
    }


def expect(bq: bool, dense: bool, gdn: bool, hc: bool, fp32: bool, rms: bool, ms: list[int]):
    return {
        "batch_qualified": bq,
        "dense": dense,
        "gdn": gdn,
        "hc": hc,
        "fp32": fp32,
        "rmsnorm": rms,
        "dense_by_m": ms,
    }


ALL_FALSE = expect(False, False, False, False, False, False, [])
# docs/contracts/flashnext.md §6.2, the Flash-Next table (tp, spec) -> columns.
TABLE_6_2 = {
    (4, "none"): expect(True, True, True, True, True, True, [2, 4, 5, 8]),
    (4, "mtp"): expect(True, True, True, True, False, True, [8]),
    (2, "none"): expect(True, False, False, False, False, True, []),
    (2, "mtp"): expect(True, False, False, False, False, True, []),
    (2, "dflash"): ALL_FALSE,
    (4, "dflash"): ALL_FALSE,
}


def ids(model: str, tp: int, spec: str) -> list[str]:
    return [f"{model}/{kv}/tp{tp}/{spec}/c{c}/q{b}" for kv in KVS for c in CS for b in BUDGETS]


def test_350_rows(routes):
    assert len(routes) == 350
    assert sum(1 for i in routes if i.startswith("edge:")) == 26


@pytest.mark.parametrize(("tp", "spec"), sorted(TABLE_6_2))
def test_flash_next_matrix_rows(routes, tp, spec):
    for row_id in ids(FN, tp, spec):
        route = routes[row_id]
        assert summary(route) == TABLE_6_2[(tp, spec)], row_id
        # 13 controls true and RMSNorm equal to the rmsnorm column.
        controls = {k: v["value"] for k, v in route["controls"].items()}
        assert sorted(controls) == sorted(CONTROLS)
        assert controls[RMSNORM] is TABLE_6_2[(tp, spec)]["rmsnorm"]
        assert sum(controls[k] for k in CONTROLS if k != RMSNORM) == 13


def test_other_models_216_rows_all_false(routes):
    others = [
        i
        for model in ("27b_dflash2_nvfp4", "35b_a3b_awq")
        for tp in (2, 4)
        for spec in ("none", "mtp", "dflash")
        for i in ids(model, tp, spec)
    ]
    assert len(others) == 216
    for row_id in others:
        assert summary(routes[row_id]) == ALL_FALSE, row_id
        assert routes[row_id]["flash_next_route"]["decode_contract"] == {
            "ok": False,
            "code": "architecture_not_qwen4exp",
        }


def test_tp2_projections_take_the_fp16_method_without_batch_routes(routes):
    route = routes[f"{FN}/float16/tp2/none/c4/q8192"]
    assert set(route["methods"].values()) == {"sm70_fp16"}
    assert route["flash_next_route"]["dense_limit"]["ok"] is False
    assert route["flash_next_route"]["fused_input"]["ok"] is False


def test_dense_by_m_never_above_the_budget(routes):
    assert "8192" not in routes[f"{FN}/float16/tp4/none/c4/q4096"]["dense_by_m"]
    assert sorted(routes[B0]["dense_by_m"], key=int) == [
        "1", "2", "4", "5", "8", "10", "16", "8192"
    ]  # fmt: skip


def changed(base: dict[str, Any], probe: dict[str, Any]) -> dict[str, Any]:
    a, b = summary(base), summary(probe)
    return {k: b[k] for k in b if a[k] != b[k]}


# docs/contracts/flashnext.md §6.3: probe -> (base, what differs from the base).
PROBES_6_3 = {
    "batch_fastpath_off": (B0, {"dense": False, "dense_by_m": [], "hc": False, "fp32": False}),
    "batch_fastpath_off_mtp": (B1, {"dense": False, "dense_by_m": []}),
    "gdn_input_batch_off": (B0, {}),
    "dflash_gdn_opt_in": (B2, {"gdn": True}),
    "dflash_gdn_opt_in_zero": (B2, {}),
    "mtp_hc_batch_off": (B1, {"hc": False}),
    "mtp_hc_batch_off_none": (B0, {}),
    "rmsnorm_off": (B0, {"rmsnorm": False}),
    "rmsnorm_on_dflash": (B2, {"rmsnorm": True}),
    "fp16_gemv_off": (B0, {"dense": False, "dense_by_m": [], "gdn": False}),
    "fused_gdn_input_off": (B0, {"gdn": False}),
    "fused_hc_off": (B0, {"hc": False, "fp32": False}),
    "online_qpn8_on": (
        B0,
        {"dense": False, "dense_by_m": [], "gdn": False, "hc": False, "fp32": False},
    ),
    "batch_invariant_on": (
        B0,
        {
            "batch_qualified": False,
            "dense": False,
            "dense_by_m": [],
            "gdn": False,
            "hc": False,
            "fp32": False,
        },
    ),
    "dbo_on": (
        B0,
        {
            "batch_qualified": False,
            "dense": False,
            "dense_by_m": [],
            "gdn": False,
            "hc": False,
            "fp32": False,
        },
    ),
    "reduced_precision_off_mtp": (B1, {"dense_by_m": [2, 4, 5, 8]}),
    "fp16_accumulation_on": (B0, {}),
    "fp16_accumulation_on_mtp": (B1, {"dense_by_m": []}),
    "non_sm70": (
        B0,
        {"dense": False, "dense_by_m": [], "gdn": False, "hc": False, "fp32": False},
    ),
    "tp4_shapes_at_tp2": (
        f"{FN}/float16/tp2/none/c4/q8192",
        {"dense": True, "dense_by_m": [2, 4, 5, 8], "gdn": True},
    ),
    "gdn_interleaved_layout": (B0, {"gdn": False}),
    "conditional_generation_lm_only_false": (
        B0,
        {
            "batch_qualified": False,
            "dense": False,
            "dense_by_m": [],
            "gdn": False,
            "hc": False,
            "fp32": False,
            "rmsnorm": False,
        },
    ),
}
# §6.3: the probes whose row fails closed, with the contract's error (§5).
ERROR_PROBES = {
    "dense_native_missing": "Rebuild the SM70 extension for batched dense projections",
    "gdn_native_missing": "Rebuild the SM70 extension for batched GDN input",
    "hc_native_missing": "Rebuild the SM70 extension for batched HC",
    "hc_quantized_projection": "Batched HC requires checkpoint-FP16 linears",
}


def test_every_probe_is_listed():
    assert len(PROBES_6_3) + len(ERROR_PROBES) == 26
    assert {r.id for r in CATEGORY.rows() if r.id.startswith("edge:")} == {
        f"edge:{n}" for n in (*PROBES_6_3, *ERROR_PROBES)
    }


@pytest.mark.parametrize("name", sorted(PROBES_6_3))
def test_probe_differs_from_its_base_as_stated(routes, name):
    base, difference = PROBES_6_3[name]
    assert changed(routes[base], routes[f"edge:{name}"]) == difference


def test_probe_details(routes):
    # The OR rule keeps packing; the controls entry records the alias.
    entry = routes["edge:gdn_input_batch_off"]["controls"]["VLLM_SM70_QWEN38_GDN_INPUT_BATCH"]
    assert entry == {"value": False, "source": "alias:VLLM_SM70_QWEN38_GDN_INPUT_BATCH"}
    assert routes["edge:batch_fastpath_off"]["flash_next_route"]["gdn_packed"]["ok"] is True
    assert routes["edge:batch_fastpath_off_mtp"]["flash_next_route"]["hc_packed"]["ok"] is True
    invariant = routes["edge:batch_invariant_on"]["flash_next_route"]
    assert invariant["reassociated_down"]["ok"] is False
    assert invariant["rmsnorm_gated_exact"]["ok"] is True
    assert routes["edge:fused_gdn_input_off"]["flash_next_route"]["fused_input"]["ok"] is False
    assert routes["edge:fused_hc_off"]["flash_next_route"]["fused_hc"]["ok"] is False
    assert routes["edge:fp16_gemv_off"]["flash_next_route"]["fused_hc"]["ok"] is True
    assert routes["edge:tp4_shapes_at_tp2"]["flash_next_route"]["hc_packed"]["ok"] is False
    decode = routes["edge:conditional_generation_lm_only_false"]["flash_next_route"]
    assert decode["decode_contract"] == {"ok": False, "code": "language_model_only_not_true"}


@pytest.mark.parametrize("name", sorted(ERROR_PROBES))
def test_error_probes_fail_closed(routes, name):
    route = routes[f"edge:{name}"]
    assert ERROR_PROBES[name] in route["error"]["message"], route


def test_packed_bytes_of_the_reference_layout(routes):
    # docs/contracts/flashnext.md §2.7: GDN 4128 x 2560 x 2 per layer (725.625 MiB over 36
    # layers), HC 330 MiB over 48 target layers.
    packed = routes[B0]["packed_bytes"]
    assert packed["gdn"] * 36 == int(725.625 * 2**20)
    assert packed["hc"] * 48 == 330 * 2**20
    assert routes[f"{FN}/float16/tp4/dflash/c4/q8192"]["packed_bytes"] == {"gdn": None, "hc": None}


# --- docs/contracts/flashnext.md §6.4: the reference's default change ----------------------

HISTORICAL = Rules(batch_spec_methods=("none",))
SHORT = {"27b_dflash2": "27b_dflash2_nvfp4", "flash_next": FN, "35b_awq": "35b_a3b_awq"}
SHORT_KV = {"fp16": "float16", "e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2"}


def reference_id(key: str) -> str:
    """§6.1's mapping of a reference key onto a routectl id."""
    model, kv, tp, spec, c, p = key.split("/")
    assert p.startswith("p")
    return f"{SHORT[model]}/{SHORT_KV[kv]}/{tp}/{spec}/{c}/q{p[1:]}"


def historical_route(row_id: str) -> dict[str, Any]:
    """A matrix row under §6.4's historical settings: the 14 controls off, batch
    qualification without MTP, RMSNorm = Flash-Next and spec none."""
    row = find_row(CATEGORY, row_id)
    rms = row.model == FN and row.engine.spec_method == "none"
    historical = dataclasses.replace(
        row,
        variables=tuple(sorted((v, "0") for v in CONTROLS if v != RMSNORM)),
        config={"sm70_flash_next": {"rmsnorm_gated_exact": rms}},
    )
    policy = resolve_row(PROJECT, historical)
    route = flash_next_route(
        policy, Hardware(row.capability), row.engine, row.layer, rules=HISTORICAL
    )
    controls = {f.variable: policy.value(f.key) for f in PROJECT.fields if f.variable in CONTROLS}
    return {**route, "controls": controls}


def compared(route: dict[str, Any], model: str) -> Any:
    """What the reference compares: the route fields and dense_by_m, and the controls on
    Flash-Next rows only (docs/contracts/flashnext.md §7)."""
    out: dict[str, Any] = {"route": summary(route)}
    if model == FN:
        out["controls"] = {
            k: (v["value"] if isinstance(v, dict) else v) for k, v in route["controls"].items()
        }
    return out


def test_historical_settings_change_exactly_the_reference_ids(routes):
    matrix = [i for i in routes if not i.startswith("edge:")]
    assert len(matrix) == 324
    differing = {
        i
        for i in matrix
        if compared(routes[i], i.split("/")[0]) != compared(historical_route(i), i.split("/")[0])
    }
    data = REFERENCE.read_bytes()
    assert hashlib.sha256(data).hexdigest() == REFERENCE_SHA256
    reference = {reference_id(k) for k in json.loads(data)}
    assert len(reference) == 108
    assert differing == reference


# --- docs/contracts/flashnext.md §2.4-9 and §4: preparation and the batch calls -------------
# Written from the contract: the dense route calls its op on out_proj's TP4 weight
# (2560, 1536); the packed GDN weight is in_proj_qkvz (4096, 2560) over in_proj_ba zero-padded
# to 32 rows, so (4128, 2560); the HC route asks the build's support query at preparation.
DENSE_OP = "qwen38_dense_batch_sm70_out"
GDN_OP = "qwen38_gdn_input_batch_sm70_out"
HC_QUERY = [{"op": "supports_sm70_qwen38_hc_batch", "plan": {}}]


def dense_call(m: int) -> dict[str, Any]:
    return {"op": DENSE_OP, "plan": {"m": m, "n": 2560, "k": 1536}}


def gdn_call(m: int) -> dict[str, Any]:
    return {"op": GDN_OP, "plan": {"m": m, "n": 4096 + 32, "k": 2560}}


# §4: the dense route at M 2, 4, 5, 8 with reduced precision off, at 8 only with it on; the
# packed GDN input at every asked M in 2..16 (no reduced-precision rule). One forward step per
# M: the input projection (GDN), then out_proj.
GDN_ONLY = [gdn_call(m) for m in (2, 4, 5, 8, 10, 16)]
NONE_TP4 = [
    *(call for m in (2, 4, 5, 8) for call in (gdn_call(m), dense_call(m))),
    gdn_call(10),
    gdn_call(16),
]
MTP_TP4 = [gdn_call(2), gdn_call(4), gdn_call(5), gdn_call(8), dense_call(8)]
MTP_TP4 += [gdn_call(10), gdn_call(16)]
TP2_NONE = f"{FN}/float16/tp2/none/c4/q8192"
# row -> (prepare, dispatch), whole lists.
CALLS = {
    B0: (HC_QUERY, NONE_TP4),
    f"{FN}/fp8_e5m2/tp4/none/c1/q4096": (HC_QUERY, NONE_TP4),
    B1: (HC_QUERY, MTP_TP4),
    B2: ([], []),
    TP2_NONE: ([], []),
    f"{FN}/float16/tp2/mtp/c4/q8192": ([], []),
    "27b_dflash2_nvfp4/float16/tp4/none/c4/q8192": ([], []),
    "35b_a3b_awq/float16/tp4/mtp/c4/q8192": ([], []),
    "edge:batch_fastpath_off": ([], GDN_ONLY),
    "edge:batch_fastpath_off_mtp": (HC_QUERY, GDN_ONLY),
    "edge:gdn_input_batch_off": (HC_QUERY, NONE_TP4),
    "edge:dflash_gdn_opt_in": ([], GDN_ONLY),
    "edge:dflash_gdn_opt_in_zero": ([], []),
    "edge:mtp_hc_batch_off": ([], MTP_TP4),
    "edge:mtp_hc_batch_off_none": (HC_QUERY, NONE_TP4),
    "edge:rmsnorm_off": (HC_QUERY, NONE_TP4),
    "edge:fp16_gemv_off": (HC_QUERY, []),
    "edge:fused_gdn_input_off": (HC_QUERY, [dense_call(m) for m in (2, 4, 5, 8)]),
    "edge:fused_hc_off": ([], NONE_TP4),
    "edge:online_qpn8_on": ([], []),
    "edge:batch_invariant_on": ([], []),
    "edge:dbo_on": ([], []),
    "edge:reduced_precision_off_mtp": (HC_QUERY, NONE_TP4),
    "edge:fp16_accumulation_on": (HC_QUERY, NONE_TP4),
    "edge:fp16_accumulation_on_mtp": (HC_QUERY, []),
    "edge:non_sm70": ([], []),
    "edge:tp4_shapes_at_tp2": ([], NONE_TP4),
    "edge:gdn_interleaved_layout": (HC_QUERY, [dense_call(m) for m in (2, 4, 5, 8)]),
    "edge:conditional_generation_lm_only_false": ([], []),
}


@pytest.mark.parametrize("row_id", sorted(CALLS))
def test_prepare_and_dispatch_calls_are_the_whole_plans(routes, row_id):
    route = routes[row_id]
    assert (route["prepare"], route["dispatch"]) == CALLS[row_id]


def test_every_row_records_calls_that_agree_with_its_verdicts(routes):
    for row_id, route in routes.items():
        if "error" in route:
            assert set(route) == {"error", "verdicts"}, row_id
            continue
        verdicts = route["flash_next_route"]
        assert route["prepare"] == (HC_QUERY if verdicts["hc_packed"]["ok"] else []), row_id
        dense_ms = [c["plan"]["m"] for c in route["dispatch"] if c["op"] == DENSE_OP]
        assert dense_ms == sorted(int(m) for m, ok in route["dense_by_m"].items() if ok), row_id
        gdn = [c for c in route["dispatch"] if c["op"] == GDN_OP]
        assert not gdn or verdicts["gdn_packed"]["ok"], row_id
        assert all(2 <= c["plan"]["m"] <= 16 for c in gdn), row_id


def test_the_native_missing_probes_fail_at_preparation_with_the_op_named(routes):
    assert routes["edge:dense_native_missing"]["error"]["code"] == "dense_batch_op_missing"
    assert DENSE_OP in routes["edge:dense_native_missing"]["error"]["message"]
    assert routes["edge:gdn_native_missing"]["error"]["code"] == "gdn_input_batch_op_missing"
    assert routes["edge:hc_native_missing"]["error"]["code"] == "hc_batch_unsupported"


def test_an_hc_support_query_answering_zero_fails_closed():
    shapes = {"out_proj": (2560, 1536), "in_proj_qkvz": (4096, 2560), "in_proj_ba": (24, 2560)}
    weights = {k: torch_meta(v) for k, v in shapes.items()}
    ns = RecordingNamespace(CATALOGUE, abi={"supports_sm70_qwen38_hc_batch": 0})
    with pytest.raises(SelectionError, match="answers 0") as err:
        prepare_batch(ns, **weights, dense=True, gdn=True, hc=True)
    assert err.value.code == "hc_batch_unsupported"
    # Answering 1, the same layer prepares and the query is the one recorded call.
    ns = RecordingNamespace(CATALOGUE, abi={"supports_sm70_qwen38_hc_batch": 1})
    prepared = prepare_batch(ns, **weights, dense=True, gdn=True, hc=True)
    assert ns.calls == HC_QUERY
    assert tuple(prepared.gdn.shape) == (4128, 2560) and prepared.dense is weights["out_proj"]


@pytest.mark.parametrize(
    ("role", "shape"), [("in_proj_qkvz", (8192, 2560)), ("in_proj_ba", (24, 3072))]
)
def test_gdn_packing_refuses_other_shapes(role, shape):
    shapes = {"out_proj": (2560, 1536), "in_proj_qkvz": (4096, 2560), "in_proj_ba": (24, 2560)}
    weights = {k: torch_meta(shape if k == role else v) for k, v in shapes.items()}
    ns = RecordingNamespace(CATALOGUE)
    with pytest.raises(SelectionError, match="Unsupported packed GDN input weight") as err:
        prepare_batch(ns, **weights, dense=False, gdn=True, hc=False)
    assert role in err.value.message and err.value.code == "gdn_pack_unsupported"


def torch_meta(shape: tuple[int, int]) -> Any:
    return torch.empty(shape, dtype=torch.float16, device="meta")


def test_explain_shows_the_preparation_and_the_batch_calls():
    result = ok(invoke(["explain", f"sm70-flash-next-batch:{B1}"], cwd=ROOT))
    lines = result.stdout.splitlines()
    prepare = lines.index("prepare:")
    assert lines[prepare + 1].split() == ["supports_sm70_qwen38_hc_batch"]
    dispatch = lines.index("dispatch:")
    assert [line.split() for line in lines[dispatch + 1 : dispatch + 8]] == [
        [call["op"], *(f"{k}={v}" for k, v in sorted(call["plan"].items()))] for call in MTP_TP4
    ]
