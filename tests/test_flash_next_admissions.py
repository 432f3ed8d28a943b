"""The Flash-Next loader admissions where the 350 rows cannot tell (docs/contracts/flashnext.md
§2.2-2.5): the reason code of each refused verdict when more than one rule fails (the
contract's order: the switch, online QPN8, the dtype, capability 70, the decode contract),
the base-lane switches set explicitly on an engine outside the lane, the GDN layout flags
one at a time and missing, both GDN packing switches off, the historical speculation rule
threaded through every entry point, and the ubatch boundary. Expected values are literals
written from the contract; a row's verdicts are `{ok, code}` (the route records no
message)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from policies import PROJECT, project_of
from policies.categories.matrix import MODEL_FACTS
from policies.families import FAMILIES
from policies.flash_next import (
    Rules,
    batch_qualified,
    flash_next_decision,
    flash_next_qualified,
    flash_next_route,
    speculation_qualified,
)
from routectl.workload import EngineConfig, Hardware

SECTION = "sm70_flash_next"
FLASH_NEXT = MODEL_FACTS["flash_next_mtp4_nvfp4"]
OTHER = MODEL_FACTS["35b_a3b_awq"]  # a float16 model outside the decode contract
BF16 = dataclasses.replace(FLASH_NEXT, dtype="bfloat16")
# §2.7 / §3: the TP4 layer double, both GDN flags false, HC projections unquantized.
TP4_LAYER: dict[str, Any] = {
    "out_proj": (2560, 1536),
    "in_proj_qkvz": (4096, 2560),
    "in_proj_ba": (24, 2560),
    "gqa_interleaved_layout": False,
    "disable_tp_for_ba_proj": False,
    "hc_method": "unquantized",
}
# The three base-lane switches (§1.3 rows 15-17) set, as a user outside the lane would.
BASE_LANE_ON = {"fp16_gemv": True, "fused_gdn_input": True, "fused_hc": True}
HISTORICAL = Rules(batch_spec_methods=("none",))


def engine(spec: str = "none", model: Any = FLASH_NEXT, **kw: Any) -> EngineConfig:
    return EngineConfig(**{"tp": 4, "spec_method": spec, "max_num_seqs": 4, "model": model, **kw})


def route(
    workload: EngineConfig,
    *,
    capability: int = 70,
    config: Mapping[str, Any] | None = None,
    layer: Mapping[str, Any] = TP4_LAYER,
    rules: Rules | None = None,
) -> dict[str, Any]:
    hardware = Hardware(capability)
    policy = PROJECT.resolve({SECTION: dict(config or {})}, {}, hardware, workload)
    if rules is None:
        return flash_next_route(policy, hardware, workload, layer)
    return flash_next_route(policy, hardware, workload, layer, rules=rules)


def codes(r: dict[str, Any], *names: str) -> dict[str, str | None]:
    verdicts = r["flash_next_route"]
    return {name: verdicts[name]["code"] for name in names}


LANE = ("dense_batch_prepared", "fused_input", "fused_hc")


def test_a_bfloat16_model_off_capability_70_is_refused_for_its_dtype_first() -> None:
    # §2.4-2 / §2.4-8: the dtype rule comes before capability 70 and the decode contract.
    r = route(engine(model=BF16), capability=75, config=BASE_LANE_ON)
    assert codes(r, *LANE) == dict.fromkeys(LANE, "dtype_not_float16")
    assert r["flash_next_route"]["decode_contract"] == {"ok": False, "code": "dtype_not_float16"}
    assert set(r["methods"].values()) == {"unquantized"}


def test_an_explicit_lane_on_capability_75_is_refused_for_capability() -> None:
    # The decode contract and batch qualification have no capability term (§2.2); the lane
    # and the HC loader do (§2.4-2, §2.4-8): "capability" is exactly 70.
    r = route(engine(), capability=75, config=BASE_LANE_ON)
    verdicts = r["flash_next_route"]
    assert verdicts["decode_contract"]["ok"] is True
    assert verdicts["batch_qualified"]["ok"] is True
    assert codes(r, *LANE, "gdn_packed", "hc_packed") == dict.fromkeys(
        (*LANE, "gdn_packed", "hc_packed"), "capability_not_70"
    )
    assert set(r["methods"].values()) == {"unquantized"}
    assert r["dense_by_m"] == dict.fromkeys(("1", "2", "4", "5", "8", "10", "16", "8192"), False)
    assert r["packed_bytes"] == {"gdn": None, "hc": None}


def test_an_explicit_lane_outside_the_decode_contract_is_refused_for_the_contract() -> None:
    r = route(engine(model=OTHER), config=BASE_LANE_ON)
    assert codes(r, *LANE) == dict.fromkeys(LANE, "architecture_not_qwen4exp")
    # The lane is rejected, so no projection takes the FP16 method (§2.4-2/3).
    assert set(r["methods"].values()) == {"unquantized"}


def test_a_model_of_unknown_config_fails_closed_on_each_lane() -> None:
    r = route(engine(model=None), config=BASE_LANE_ON)
    verdicts = r["flash_next_route"]
    assert verdicts["decode_contract"] == {"ok": False, "code": "model_unknown"}
    # Without model facts the dtype is unknown: refused for it, in the contract's order.
    assert codes(r, *LANE) == dict.fromkeys(LANE, "dtype_not_float16")


def test_online_qpn8_refuses_the_lane_and_the_hc_loader_by_its_own_code() -> None:
    r = route(engine(), config={"online_qpn8": True})
    assert codes(r, *LANE) == dict.fromkeys(LANE, "online_qpn8")


@pytest.mark.parametrize("flag", ["gqa_interleaved_layout", "disable_tp_for_ba_proj"])
@pytest.mark.parametrize("value", [True, None])
def test_each_gdn_layout_flag_set_or_missing_refuses_the_fused_input(
    flag: str, value: bool | None
) -> None:
    # §2.4-6: both flags false; a missing attribute counts as true and rejects.
    layer = {k: v for k, v in TP4_LAYER.items() if k != flag}
    if value is not None:
        layer[flag] = value
    r = route(engine(), layer=layer)
    assert codes(r, "fused_input", "gdn_packed") == {
        "fused_input": "gdn_layout_not_fusable",
        "gdn_packed": "gdn_layout_not_fusable",
    }
    assert r["packed_bytes"]["gdn"] is None
    # The dense route and HC do not read the GDN layout.
    assert r["flash_next_route"]["dense_batch_prepared"]["ok"] is True
    assert r["flash_next_route"]["hc_packed"]["ok"] is True


def test_both_layout_flags_false_fuse_the_input() -> None:
    r = route(engine())
    assert r["flash_next_route"]["fused_input"] == {"ok": True, "code": None}
    assert r["packed_bytes"]["gdn"] == 4128 * 2560 * 2


def test_both_gdn_packing_switches_off_on_a_qualified_engine() -> None:
    # §2.4-7 / §6.3: on a qualified engine packing goes away only with both switches off.
    r = route(engine(), config={"gdn_input_batch": False, "batch_fastpath": False})
    assert codes(r, "gdn_packed") == {"gdn_packed": "gdn_input_batch_off"}
    assert r["packed_bytes"]["gdn"] is None
    # Either one alone keeps it (the OR rule).
    for on in ("gdn_input_batch", "batch_fastpath"):
        off = "batch_fastpath" if on == "gdn_input_batch" else "gdn_input_batch"
        kept = route(engine(), config={off: False})
        assert kept["flash_next_route"]["gdn_packed"] == {"ok": True, "code": None}, off


def test_gdn_packing_on_unqualified_speculation_without_the_variable() -> None:
    # §5: upstream's report code for GDN on unqualified speculation without the variable.
    r = route(engine("dflash"))
    assert codes(r, "gdn_packed") == {"gdn_packed": "speculation_not_quality_qualified"}
    # Only the fast path asked for: the batch qualification's own code.
    r = route(engine("dflash"), config={"gdn_input_batch": False})
    assert codes(r, "gdn_packed") == {"gdn_packed": "speculation_not_batch_qualified"}


def test_an_explicit_hc_loader_outside_the_decode_contract_is_refused() -> None:
    r = route(engine(model=OTHER), config={"fused_hc": True})
    assert codes(r, "fused_hc", "hc_packed", "reassociated_down") == dict.fromkeys(
        ("fused_hc", "hc_packed", "reassociated_down"), "architecture_not_qwen4exp"
    )
    assert r["packed_bytes"]["hc"] is None


def test_a_layer_description_without_an_hc_method_is_unquantized() -> None:
    # The HC projections default to the unquantized method: tagged, no error (§2.4-8, §5.1).
    layer = {k: v for k, v in TP4_LAYER.items() if k != "hc_method"}
    r = route(engine(), layer=layer)
    assert r["flash_next_route"]["hc_packed"] == {"ok": True, "code": None}
    assert r["packed_bytes"]["hc"] == 2 * (96 * 10240 + 2560 * 320) * 2


def test_ubatch_size_one_is_no_ubatching() -> None:
    # §2.2: ubatching means DBO on or ubatch size > 1.
    assert batch_qualified(engine(ubatch=1)) == (True, None)
    assert batch_qualified(engine(ubatch=2))[1].code == "ubatching"
    one = route(engine(ubatch=1))["flash_next_route"]
    assert one["batch_qualified"]["ok"] is True and one["dense_batch_prepared"]["ok"] is True


def test_the_historical_rule_reaches_every_entry_point() -> None:
    # §2.2 / §6.4: before the flip MTP was not batch-qualified.
    mtp = engine("mtp")
    assert speculation_qualified(mtp, HISTORICAL)[1].code == "speculation_not_batch_qualified"
    assert batch_qualified(mtp, HISTORICAL)[1].code == "speculation_not_batch_qualified"
    assert batch_qualified(mtp)[0] is True
    assert flash_next_qualified(mtp, HISTORICAL) is False
    assert flash_next_qualified(mtp) is True
    old = route(mtp, rules=HISTORICAL)
    assert codes(old, "batch_qualified", "dense_batch_prepared") == dict.fromkeys(
        ("batch_qualified", "dense_batch_prepared"), "speculation_not_batch_qualified"
    )
    assert route(mtp)["flash_next_route"]["batch_qualified"] == {"ok": True, "code": None}
    # The decision the category uses reads the same rule.
    hardware = Hardware(70)
    policy = PROJECT.resolve(None, {}, hardware, mtp)
    decision = flash_next_decision(policy, hardware, mtp, TP4_LAYER, rules=HISTORICAL)
    assert decision.dense is False


def test_a_project_whose_family_gives_no_context_never_qualifies() -> None:
    # policies/flash_next_variables.py: what the context does not say never qualifies, so the
    # computed defaults of RMSNorm (§2.3) and the base lane (§2.5) are false without it.
    family = next(f for f in FAMILIES if f.name == "sm70-flash-next-batch")
    silent = dataclasses.replace(family, context=None)
    project = project_of(tuple(silent if f is family else f for f in FAMILIES))
    policy = project.resolve(None, {}, Hardware(70), engine())
    values = policy.section(SECTION).as_dict()
    assert {k: values[k] for k in ("rmsnorm_gated_exact", *BASE_LANE_ON)} == {
        "rmsnorm_gated_exact": False,
        "fp16_gemv": False,
        "fused_gdn_input": False,
        "fused_hc": False,
    }
    # With the family's context, the qualified engine has them all on.
    values = PROJECT.resolve(None, {}, Hardware(70), engine()).section(SECTION).as_dict()
    assert all(values[k] for k in ("rmsnorm_gated_exact", *BASE_LANE_ON))
