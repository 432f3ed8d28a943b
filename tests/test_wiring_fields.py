"""Wiring both ways, over the whole field table: for every policy field, one case sets it
alone to a value its resolved default is not, and every mapping from the resolved policy to
what a kernel sees (`fp8_options`, the NVFP4, AWQ and Turing options, `Fp8MoeOptions.of`,
the AWQ MoE load-time route) is compared whole with the default's, changed exactly where the
case says. A swapped pair of switches, an option read from the wrong field, or a field that
reaches an option it should not, each changes some case's whole comparison.

The expected changes are written from the contracts (docs/contracts/fp8.md §1, core.md §2-4,
fp8moe.md §1); the fields that reach none of these mappings (selection gates, diagnostics,
other families' sections) have a case with no change, so a new wire from them is caught too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from native.catalogue import CATALOGUE
from native.layers import AwqLayer, Nvfp4Layer
from policies import PROJECT, linear_awq, linear_fp8_sm70, linear_nvfp4, linear_turing
from policies.awq_moe import decide_awq_moe
from policies.variables import FIELDS, field
from routectl.namespaces.native_ns import InMemoryNamespace
from routectl.policy.resolve import ResolvedPolicy
from routectl.workload import Hardware
from tests import families
from tests.policy_helpers import QUALIFIED, QWEN38_AWQ_MOE
from tests.wiring import Case, c, env

HARDWARE = Hardware(70)
ENGINE = QUALIFIED
# A gated gate/up layer: the NVFP4 QPN4 `gated` option and the AWQ role qualification read it.
NVFP4_LAYER = Nvfp4Layer.of("model.layers.0.mlp.gate_up_proj", 2560, 1280)
AWQ_LAYER = AwqLayer.of("model.layers.0.mlp.gate_up_proj", 2560, 1280, 128)
# Layer 3, so that an allow list without it and a deny list with it both show.
MOE_SPEC = {**QWEN38_AWQ_MOE, "layer_id": 3, "prefix": "model.layers.3.mlp.experts"}
EVERY_OP = InMemoryNamespace(tuple(CATALOGUE.ops))


def _awq_moe(policy: ResolvedPolicy) -> dict[str, Any]:
    plan = decide_awq_moe(MOE_SPEC, policy, HARDWARE, ENGINE, EVERY_OP)
    route = dataclasses.asdict(plan.route) if plan.route is not None else {}
    flags = {f"flags.{k}": v for k, v in plan.decision.flags.items()}
    return {"method": plan.decision.kernel, **route, **flags}


def _options(build: Callable[[ResolvedPolicy], Any]) -> Callable[[ResolvedPolicy], dict[str, Any]]:
    return lambda policy: dataclasses.asdict(build(policy))


# Every mapping from a resolved policy to what the kernels (or the MoE method) see.
MAPPINGS: Mapping[str, Callable[[ResolvedPolicy], dict[str, Any]]] = {
    "fp8": _options(lambda p: linear_fp8_sm70.fp8_options(p, ENGINE)),
    "nvfp4_qpn2": _options(lambda p: linear_nvfp4.qpn2_options(p, HARDWARE, ENGINE)),
    "nvfp4_qpn4": _options(lambda p: linear_nvfp4.qpn4_options(NVFP4_LAYER, p)),
    "awq": _options(lambda p: linear_awq.awq_options(AWQ_LAYER, p, ENGINE)),
    "turing_qpn2": _options(linear_turing.qpn2_options),
    "turing_qpn8": _options(linear_turing.qpn8_options),
    "awq_moe": _awq_moe,
    # The mappings of the families that state their own (tests/families/, `WIRING_MAPPINGS`).
    **families.table("WIRING_MAPPINGS"),
}

# Options no field sets alone: they come from the engine, the layer or a constant.
NOT_FROM_A_FIELD: Mapping[str, frozenset[str]] = {
    "fp8": frozenset({"pp2_tp4_contract", "turbomind_variable"}),
    "nvfp4_qpn2": frozenset({"qualified"}),
    "awq": frozenset({"exact_dense_role", "tp"}),
    "awq_moe": frozenset({"capability", "hidden", "w2_n", "experts", "flags.qwen38_contract"}),
}


# The batched lane off for layer 3, as the route and the flags record it.
UNBATCHED = {
    "batched": False,
    "legacy_lane": False,
    "legacy_lane_reason": "batched GEMM is off for layer 3",
    "indexed_prefill": False,
    "flags.batched": False,
    "flags.legacy_lane": False,
    "flags.w13_interleaved": False,
    "flags.indexed_prefill": False,
}
# The engine's own MoE method: no route and no flags of this family.
WNA16 = {"method": "MoeWNA16"}


CASES: tuple[Case, ...] = (
    # --- sm70_turbomind: the provider switches (core.md §2) ---
    c(
        "sm70_turbomind.quant_backend",
        "marlin",
        fp8={"force_marlin": True},
        turing_qpn2={"backend_enabled": False},
        turing_qpn8={"enabled": False, "force_marlin": True},
        awq_moe=WNA16,
    ),
    # Forcing TurboMind on where every provider is already on changes nothing.
    c("sm70_turbomind.quant_backend", "turbomind"),
    c("sm70_turbomind.nvfp4", False, turing_qpn2={"backend_enabled": False}),
    c("sm70_turbomind.awq_moe", False, awq_moe=WNA16),
    c("sm70_turbomind.batch_layouts", False, nvfp4_qpn2={"batch_layouts": False}),
    # --- sm70_nvfp4 ---
    c("sm70_nvfp4.qpn2", False),  # a selection gate, no option
    c("sm70_nvfp4.prefill", False, nvfp4_qpn2={"prefill": False}),
    c("sm70_nvfp4.shared_weight", False, nvfp4_qpn2={"shared_weight": False}),
    c("sm70_nvfp4.shared_scales", False, nvfp4_qpn2={"shared_scales": False}),
    c("sm70_nvfp4.prefill_min_m", 1031, nvfp4_qpn2={"prefill_min_m": 1031}),
    c("sm70_nvfp4.qpn4", False),  # a selection gate
    c("sm70_nvfp4.dense_gated_silu", True, nvfp4_qpn4={"gated": True}),
    c("sm70_nvfp4.dense_qpn2", False, turing_qpn2={"dense_qpn2": False}),
    # --- sm70_awq ---
    c("sm70_awq.enabled", False),  # a selection gate
    c("sm70_awq.prefill_exact_dense", False, awq={"prefill_exact_dense": False}),
    c("sm70_awq.fused_silu", True, awq={"fused_silu": True}),
    # --- sm70_awq_moe: the load-time route facts (core.md §3) ---
    c("sm70_awq_moe.disable", True, awq_moe=WNA16),
    c("sm70_awq_moe.qpn_m1", True, awq_moe={"qpn_m1": True, "flags.qpn_m1": True}),
    env(
        "sm70_awq_moe.active_grouped_decode",
        "0",
        awq_moe={"grouped_decode": False, "flags.grouped_decode": False},
    ),
    c(
        "sm70_awq_moe.compact_metadata",
        False,
        awq_moe={"flags.compact_metadata": False, "flags.prepare_op": "awq_sm70_prepare"},
    ),
    c("sm70_awq_moe.tune_small_shapes", True),  # hashed only (policies/families.py)
    c("sm70_awq_moe.batched", False, awq_moe=UNBATCHED),
    c("sm70_awq_moe.layer_allowlist", ["5"], awq_moe=UNBATCHED),
    c("sm70_awq_moe.layer_allowlist", ["0-3"]),  # the layer is allowed: no change
    c("sm70_awq_moe.layer_denylist", ["3"], awq_moe=UNBATCHED),
    c("sm70_awq_moe.layer_denylist", ["4-9"]),
    c(
        "sm70_awq_moe.legacy_compact",
        False,
        awq_moe={
            "legacy_lane": False,
            "legacy_lane_reason": "sm70_awq_moe.legacy_compact is off",
            "flags.legacy_lane": False,
            "flags.w13_interleaved": False,
        },
    ),
    c("sm70_awq_moe.strict_w13", True, awq_moe={"strict_w13": True}),
    c("sm70_awq_moe.exact_w2", True, awq_moe={"exact_w2": True}),
    env("sm70_awq_moe.active_exact_w2", "1", awq_moe={"active_exact_w2": True}),
    c(
        "sm70_awq_moe.max_batched_tokens",
        7,
        awq_moe={"token_cap": 7, "flags.token_cap": 7},
    ),
    c(
        "sm70_awq_moe.indexed_prefill",
        False,
        awq_moe={"indexed_prefill": False, "flags.indexed_prefill": False},
    ),
    c(
        "sm70_awq_moe.w2_chunk_tokens",
        4096,
        awq_moe={"chunk_tokens": 4096, "flags.w2_chunk_tokens": 4096},
    ),
    c(
        "sm70_awq_moe.w2_chunk_tokens",
        6144,
        awq_moe={"chunk_tokens": 6144, "flags.w2_chunk_tokens": 6144},
    ),
    # --- sm70_dflash2: read by the DFlash2 guards and rows, by none of these mappings ---
    *(
        c(f.key, True)
        for f in FIELDS
        if f.section == "sm70_dflash2" and f.name != "target_fp8_qpn8"
    ),
    # The verifier bridge takes it for a block-FP8 model only; this engine names none.
    c("sm70_dflash2.target_fp8_qpn8", True),
    # --- sm70_fp8 (fp8.md §1) ---
    c("sm70_fp8.enabled", False, turing_qpn8={"enabled": False}),
    c("sm70_fp8.dequant_fallback", False),  # admission and selection, no option
    # A typed qpn8 is copied into the unset qpn8_pp2_tp4 (fp8.md §1.2).
    c(
        "sm70_fp8.qpn8",
        True,
        fp8={"qpn8": True, "qpn8_pp2_tp4": True, "explicit_enables": frozenset({"qpn8"})},
    ),
    c(
        "sm70_fp8.qpn8_pp2_tp4",
        True,
        fp8={"qpn8_pp2_tp4": True, "explicit_enables": frozenset({"qpn8_pp2_tp4"})},
    ),
    c(
        "sm70_fp8.qpn8_shared_gate",
        True,
        fp8={"qpn8_shared_gate": True, "explicit_enables": frozenset({"qpn8_shared_gate"})},
    ),
    c("sm70_fp8.prescaled_decode", False, fp8={"prescaled_decode": False}),
    c("sm70_fp8.prescaled_shared_gate", False, fp8={"prescaled_shared_gate": False}),
    c("sm70_fp8.prefill_prescaled", False, fp8={"prefill_prescaled": False}),
    c("sm70_fp8.prefill_exact_dense", False, fp8={"prefill_exact_dense": False}),
    c(
        "sm70_fp8.prefill_visible_dense_mm",
        True,
        fp8={
            "prefill_visible_dense_mm": True,
            "explicit_enables": frozenset({"prefill_visible_dense_mm"}),
        },
    ),
    c("sm70_fp8.gated_silu", False, fp8={"gated_silu": False}),
    env("sm70_fp8.prefill_fast_selector", "0", fp8={"prefill_fast_selector": False}),
    env("sm70_fp8.grouped_bmm_decode", "0", fp8={"grouped_bmm_decode": False}),
    c(
        "sm70_fp8.moe_dequant_fallback",
        True,
        fp8={"explicit_enables": frozenset({"moe_dequant_fallback"})},
    ),
    c(
        "sm70_fp8.block_qpn8",
        True,
        fp8={"block_qpn8": True, "explicit_enables": frozenset({"block_qpn8"})},
    ),
    # Unset, the copy follows the engine: 4 sequences x 8 tokens > 8 keeps it (fp8.md §2.3).
    c(
        "sm70_fp8.block_qpn8_volta_turbomind_prefill",
        False,
        fp8={"block_qpn8_turbomind_copy": False},
    ),
    c(
        "sm70_fp8.block_qpn8_volta_turbomind_prefill",
        True,
        fp8={"explicit_enables": frozenset({"block_qpn8_volta_turbomind_prefill"})},
    ),
    # --- engine-wide: selection filters (tests/test_backend_filters.py), no option ---
    c("disabled_kernels", ["MarlinLinearKernel"]),
    c("linear_backend", "marlin"),
    c("linear_backend", "turbomind"),
    # --- the cases of the families that state their own (tests/families/, `WIRING_CASES`)
    *families.rows("WIRING_CASES"),
)


def resolve(case: Case | None) -> ResolvedPolicy:
    if case is None:
        return PROJECT.resolve(None, {}, HARDWARE, ENGINE)
    f = field(case.key)
    if case.variable:
        assert f.variable is not None
        return PROJECT.resolve(None, {f.variable: case.value}, HARDWARE, ENGINE)
    typed = {f.section: {f.name: case.value}} if f.section else {f.name: case.value}
    return PROJECT.resolve(typed, {}, HARDWARE, ENGINE)


DEFAULT = resolve(None)
DEFAULT_OPTIONS = {name: build(DEFAULT) for name, build in MAPPINGS.items()}


def test_every_field_of_the_table_has_a_case() -> None:
    assert {case.key for case in CASES} == {f.key for f in FIELDS}
    assert len({case.id for case in CASES}) == len(CASES)


def test_every_choice_of_a_choice_field_is_a_case() -> None:
    for f in FIELDS:
        if f.choices is None:
            continue
        asked = {case.value for case in CASES if case.key == f.key}
        assert asked == set(f.choices) - {f.default}, f.key


def test_the_mappings_see_the_whole_of_each_options_object() -> None:
    # A new option must be either wired to a field by a case or declared as not a field's.
    for name, options in DEFAULT_OPTIONS.items():
        reached = {option for case in CASES for option in case.changes.get(name, {})}
        assert reached | NOT_FROM_A_FIELD.get(name, frozenset()) >= set(options) - {"method"}, (
            name,
            set(options) - reached - NOT_FROM_A_FIELD.get(name, frozenset()),
        )
        assert not reached & NOT_FROM_A_FIELD.get(name, frozenset()), name


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_one_field_set_alone_changes_exactly_its_options(case: Case) -> None:
    policy = resolve(case)
    given = policy.value(case.key)
    assert given != DEFAULT.value(case.key), "the case must set a non-default value"
    assert set(case.changes) <= set(MAPPINGS)
    for name, build in MAPPINGS.items():
        changes = dict(case.changes.get(name, {}))
        if changes.get("method") == WNA16["method"]:
            # The engine's method replaces the whole route: nothing of it is left.
            expected = dict(changes)
        else:
            expected = {**DEFAULT_OPTIONS[name], **changes}
        assert build(policy) == expected, name
