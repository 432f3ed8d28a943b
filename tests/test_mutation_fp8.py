"""Decisions of the Volta block-FP8 family that no snapshot row reaches, pinned for mutation
testing (issue 20): the QPN8 candidates on both sides of every gate (roles, alignment, the
PP2/TP4 role table, the shared-gate contract, grouped wo_a), the runtime-contract, missing-op
and workspace refusals with their fallback records, the TurboMind variants (prescaled decode,
prefill prescaled, exact-dense, visible dense MM, grouped decode), the workspace registry,
the grouped invariants, the capability classes' codes and the policy's outcomes.

Every expected value is a literal from docs/contracts/fp8.md (section cited at each test) or, for a
message whose wording the contract leaves to routectl, the message routectl records; none is
computed by calling the code under test."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from native.kernels import fp8_sm70 as fs
from native.layers import BlockFp8Layer
from policies import PROJECT
from policies.linear_fp8_sm70 import (
    block_qpn8_policy,
    block_qpn8_turbomind_copy,
    checkpoint_admission,
    route_outcome,
)
from routectl.errors import ActivationError, InputError, SelectionError
from routectl.namespaces.native_ns import InMemoryNamespace
from routectl.policy.resolve import ResolvedPolicy
from routectl.replay.harness import RecordingNamespace
from routectl.workload import EngineConfig, Hardware

PREFIX = "model.layers.0."
SHARED_GATE = "model.layers.0.mlp.shared_experts.gate_up_proj"

# docs/contracts/fp8.md §3.2: the six QPN8 layout ops, in the contract's order.
QPN8_PREPARE = "fp8_qpn8_prepare_sm70"
QPN8_DEQUANTIZE = "fp8_qpn8_dequantize_sm70_out"
QPN8_PREFILL = "fp8_qpn8_prefill_sm70_out"
QPN8_DISPATCH = "fp8_qpn8_dispatch_sm70_out"
QPN8_GEMM = "fp8_qpn8_gemm_sm70_out"
QPN8_GATED_PAIR = "fp8_qpn8_gated_pair_sm70_out"
# 4.2: the exact-dense floor (5120 x 8704 FP16 elements) and the PP2/TP4 workspace.
EXACT_DENSE_FLOOR = 44_564_480
PP2_TP4_ELEMENTS = 8_388_608
WORKSPACE_REFUSED = (
    "Insufficient memory for the SM70 FP8 QPN8 prefill workspace; retaining the TurboMind layout."
)


def layer(role: str = "qkv_proj", k: int = 5120, n: int = 3584, **changes: Any) -> BlockFp8Layer:
    prefix = changes.pop("prefix", PREFIX + role)
    built = BlockFp8Layer.of(
        prefix,
        k,
        n,
        tp=changes.pop("tp", 4),
        groups=changes.pop("groups", 0),
        is_scale_e8m0=changes.pop("e8m0", False),
    )
    return dataclasses.replace(built, **changes) if changes else built


def shared_gate(**changes: Any) -> BlockFp8Layer:
    # 3.3: prefix ends ".shared_experts.gate_up_proj", TP 4, K 4096, N 1024, parts [512, 512].
    return layer("gate_up_proj", 4096, 1024, prefix=SHARED_GATE, **changes)


def namespace(*remove: str) -> RecordingNamespace:
    return RecordingNamespace(PROJECT.catalogue, remove=remove)


def options(*explicit: str, **values: Any) -> fs.Fp8Sm70Options:
    return fs.Fp8Sm70Options(explicit_enables=frozenset(explicit), **values)


def plan(
    built: BlockFp8Layer,
    opts: fs.Fp8Sm70Options | None = None,
    *,
    remove: tuple[str, ...] = (),
    available: int | None = None,
) -> fs.Fp8Layout:
    return fs.plan_turbomind(
        built, opts or options(), namespace(*remove), fs.Fp8Workspaces(available)
    )


def flags(**changes: Any) -> dict[str, Any]:
    """The flags of a plain TurboMind layout without any variant (4.1), with `changes`."""
    base = {
        "qpn8": False,
        "gated": False,
        "pp2_tp4": False,
        "bmm_groups": 0,
        "qpn8_split_k": 0,
        "qpn8_chains": 0,
        "qpn8_prefetch": False,
        "prefill_exact_dense": False,
        "prefill_min_m": 0,
        "prefill_prescaled": False,
        "prescaled_decode": False,
        "visible_dense_mm": False,
        "grouped_decode": False,
    }
    return {**base, **changes}


def fallbacks(layout: fs.Fp8Layout) -> list[tuple[str, Any, Any, str]]:
    # The kernel names the option of sm70_fp8 it fell back on; the loader (tested through
    # load_fp8_sm70 below) qualifies it with the section.
    return [(f.field, f.requested, f.effective, f.reason) for f in layout.fallbacks]


# --- generic QPN8 (docs/contracts/fp8.md §3.2) ----------------------------------------------------

QPN8_ON = options("qpn8", qpn8=True)


@pytest.mark.parametrize(
    "role,k,n,tuning",
    [
        # 3.2 tuning table (K, N, plain call); (3072, 5120) misses it: K % 256 == 0 -> 16.
        ("qkv_proj", 5120, 3584, (16, 2, False)),
        ("in_proj_qkvz", 5120, 4096, (16, 2, False)),
        ("o_proj", 1536, 5120, (16, 1, False)),
        ("out_proj", 3072, 5120, (16, 2, False)),
        ("down_proj", 4352, 5120, (16, 1, False)),
    ],
)
def test_generic_qpn8_layout_of_each_plain_role(role, k, n, tuning):
    layout = plan(layer(role, k, n), QPN8_ON)
    assert layout.name == "fp8_qpn8"
    split_k, chains, prefetch = tuning
    assert layout.flags() == flags(
        qpn8=True, qpn8_split_k=split_k, qpn8_chains=chains, qpn8_prefetch=prefetch
    )
    assert (layout.tuning, layout.gated_tuning) == (tuning, None)
    # 4.2: the exact-dense workspace, max(44,564,480, K x N) elements.
    assert (layout.workspace, layout.workspace_elements) == ("exact_dense", EXACT_DENSE_FLOOR)
    assert (layout.fallbacks, layout.notes) == ((), ())


def test_generic_qpn8_gate_up_is_gated_with_both_tunings():
    # 3.2: (5120, 8704, plain) = (16, 1, T), (5120, 8704, gated) = (8, 2, T); 3.4 gated.
    layout = plan(layer("gate_up_proj", 5120, 8704), QPN8_ON)
    assert layout.name == "fp8_qpn8" and layout.gated is True
    assert (layout.tuning, layout.gated_tuning) == ((16, 1, True), (8, 2, True))
    assert layout.flags() == flags(
        qpn8=True, gated=True, qpn8_split_k=16, qpn8_chains=1, qpn8_prefetch=True
    )
    off = plan(layer("gate_up_proj", 5120, 8704), options("qpn8", qpn8=True, gated_silu=False))
    assert (off.name, off.gated, off.gated_tuning) == ("fp8_qpn8", False, None)


def test_generic_qpn8_workspace_grows_with_a_layer_above_the_floor():
    # 4.2: 2 x K x N bytes for a layer larger than 5120 x 8704 (TP2 gate_up_proj).
    layout = plan(layer("gate_up_proj", 5120, 17408), QPN8_ON)
    assert layout.workspace_elements == 89_128_960
    assert (layout.tuning, layout.gated_tuning) == ((16, 2, False), (8, 2, False))


@pytest.mark.parametrize(
    "built",
    [
        layer("wq_b", 5120, 3584),  # not a QPN8 role
        layer("qkv_proj", 5120 + 64, 3584),  # K % 128 != 0
        layer("qkv_proj", 5120, 3584 + 64),  # N % 128 != 0
        layer("qkv_proj", 0, 3584),  # K not positive
        layer("qkv_proj", 5120, 3584, weight_shape=(5120, 3584)),  # weight not (N, K)
        layer("qkv_proj", 5120, 3584, weight_shape=(3584, 5120, 1)),  # rank 3
        layer("qkv_proj", 5120, 3584, block_size=(1, 128)),  # not 128 x 128 blocks
        layer("qkv_proj", 5120, 3584, static_scales=False),
    ],
)
def test_generic_qpn8_refuses_a_layer_outside_its_candidate_rule(built):
    # 3.2: role, positive multiples of 128, rank 2 (N, K), block [128, 128]: else TurboMind,
    # with no fallback record (the layer never was a candidate).
    layout = plan(built, QPN8_ON)
    assert layout.name == "fp8_sm70" and layout.qpn8 is False
    assert not any(f[0] == "qpn8" for f in fallbacks(layout))


def test_generic_qpn8_needs_the_qpn8_option():
    assert plan(layer(), options()).name == "fp8_sm70"


def test_a_grouped_qkv_layer_is_never_a_generic_qpn8_candidate():
    # 3.2 candidates are rank-two, non-grouped layers; grouped: the TurboMind bmm lane (3.6).
    layout = plan(layer("qkv_proj", 5120, 3584, groups=2), QPN8_ON)
    assert layout.name == "fp8_sm70_bmm" and layout.flags()["bmm_groups"] == 2


def test_a_k_multiple_of_128_but_not_256_gets_split_k_8():
    # 3.2: otherwise (8 if gated or K % 256 else 16, 2, F).
    assert plan(layer("qkv_proj", 1152, 5120), QPN8_ON).tuning == (8, 2, False)


# --- missing ops and workspace (3.2, 5.1) ------------------------------------------------------


def test_explicit_generic_qpn8_with_missing_ops_names_them_in_contract_order():
    with pytest.raises(SelectionError) as info:
        plan(layer(), QPN8_ON, remove=(QPN8_GATED_PAIR, QPN8_DEQUANTIZE))
    assert info.value.code == "missing_native_ops"
    assert info.value.message == (
        "The explicitly enabled SM70 QPN8 route requires source-built operators; missing: "
        "['fp8_qpn8_dequantize_sm70_out', 'fp8_qpn8_gated_pair_sm70_out']."
    )


@pytest.mark.parametrize("op", [QPN8_PREPARE, QPN8_PREFILL, QPN8_DISPATCH, QPN8_GEMM])
def test_each_of_the_six_qpn8_ops_is_required(op):
    with pytest.raises(SelectionError) as info:
        plan(layer(), QPN8_ON, remove=(op,))
    assert info.value.message.endswith(f"missing: ['{op}'].")


def test_a_qpn8_enable_from_another_field_is_not_explicit_for_the_generic_route():
    # 1.2 / 5.1: the generic route is explicit only through `qpn8` itself.
    layout = plan(
        layer(),
        options("qpn8_pp2_tp4", "qpn8_shared_gate", qpn8=True),
        remove=(QPN8_GEMM, QPN8_PREFILL),
    )
    # 3.2: the warning names every missing op, in the contract's order.
    reason = (
        "missing native QPN8 operators: [fp8_qpn8_prefill_sm70_out, fp8_qpn8_gemm_sm70_out]; "
        "retaining the TurboMind layout"
    )
    assert layout.name == "fp8_sm70" and layout.exact_dense is True
    assert fallbacks(layout) == [("qpn8", True, False, reason)]
    assert layout.notes == (reason,)


def test_qpn8_workspace_fits_exactly_at_the_floor():
    # 4.2: the exact-dense workspace needs 44,564,480 FP16 elements for this layer.
    assert plan(layer(), QPN8_ON, available=EXACT_DENSE_FLOOR).name == "fp8_qpn8"
    short = plan(layer(), QPN8_ON, available=EXACT_DENSE_FLOOR - 1)
    assert short.name == "fp8_sm70" and short.exact_dense is False
    exact_dense_refused = (
        "insufficient exact-dense workspace (need 44564480 FP16 elements, have 44564479); "
        "plain TurboMind GEMM"
    )
    assert fallbacks(short) == [
        ("qpn8", True, False, WORKSPACE_REFUSED),
        ("prefill_exact_dense", True, False, exact_dense_refused),
    ]
    assert short.notes == (WORKSPACE_REFUSED, exact_dense_refused)
    assert short.flags() == flags(prefill_prescaled=True)


# --- PP2/TP4 (3.3) -------------------------------------------------------------------------------

PP2 = options("qpn8_pp2_tp4", qpn8_pp2_tp4=True, pp2_tp4_contract=True)
PP2_SHARED = options(
    "qpn8_pp2_tp4", qpn8_pp2_tp4=True, qpn8_shared_gate=True, pp2_tp4_contract=True
)


@pytest.mark.parametrize(
    "role,tp,k,n,tuning",
    [
        ("fused_wqa_wkv", 1, 4096, 1536, (32, 2, False)),
        ("wq_b", 4, 1024, 8192, (8, 2, False)),
        ("wo_b", 4, 2048, 4096, (16, 2, False)),
        ("down_proj", 4, 512, 4096, (16, 2, False)),
    ],
)
def test_pp2_tp4_role_table(role, tp, k, n, tuning):
    layout = plan(layer(role, k, n, tp=tp), PP2)
    assert layout.name == "fp8_qpn8"
    split_k, chains, prefetch = tuning
    assert layout.flags() == flags(
        qpn8=True,
        pp2_tp4=True,
        qpn8_split_k=split_k,
        qpn8_chains=chains,
        qpn8_prefetch=prefetch,
    )
    assert (layout.workspace, layout.workspace_elements) == ("pp2_tp4", PP2_TP4_ELEMENTS)
    # Another layer TP is outside the role table: TurboMind.
    assert plan(layer(role, k, n, tp=2), PP2).name == "fp8_sm70"


@pytest.mark.parametrize(
    "built",
    [
        layer("wq_b", 1024, 8192, tp=4, weight_shape=(1024, 8192)),  # weight must be (N, K)
        layer("wq_b", 1024, 8192, tp=4, block_size=(1, 128)),
        layer("wq_b", 1024, 4096, tp=4),  # (K, N) outside the table
    ],
)
def test_pp2_tp4_candidate_needs_the_exact_shape_and_block(built):
    assert plan(built, PP2).name == "fp8_sm70"


def test_pp2_tp4_needs_its_option():
    off = options("qpn8_shared_gate", qpn8_shared_gate=True, pp2_tp4_contract=True)
    assert plan(layer("wq_b", 1024, 8192, tp=4), off).name == "fp8_sm70"


def test_pp2_tp4_workspace_fits_exactly():
    built = layer("wq_b", 1024, 8192, tp=4)
    assert plan(built, PP2, available=PP2_TP4_ELEMENTS).name == "fp8_qpn8"
    short = plan(built, PP2, available=PP2_TP4_ELEMENTS - 1)
    assert short.name == "fp8_sm70"
    assert fallbacks(short)[0] == ("qpn8_pp2_tp4", True, False, WORKSPACE_REFUSED)


def test_pp2_tp4_outside_the_runtime_contract_keeps_turbomind_with_a_note():
    built = layer("wq_b", 1024, 8192, tp=4)
    layout = plan(built, options("qpn8_pp2_tp4", qpn8_pp2_tp4=True))
    assert layout.name == "fp8_sm70" and layout.fallbacks == ()
    assert layout.notes == (
        "model.layers.0.wq_b: outside the SM70 PP2 x TP4 runtime contract; "
        "retaining the TurboMind layout",
    )


@pytest.mark.parametrize("explicit", ["qpn8", "qpn8_pp2_tp4", "qpn8_shared_gate"])
def test_pp2_tp4_is_explicit_through_any_of_its_three_fields(explicit):
    # 5.1: explicit = qpn8, qpn8_pp2_tp4 or qpn8_shared_gate in explicit_enables.
    opts = options(explicit, qpn8_pp2_tp4=True, pp2_tp4_contract=True)
    with pytest.raises(SelectionError) as info:
        plan(layer("wq_b", 1024, 8192, tp=4), opts, remove=(QPN8_PREFILL,))
    assert info.value.message == (
        "The explicitly enabled SM70 PP2 x TP4 QPN8 route requires source-built operators; "
        "missing: ['fp8_qpn8_prefill_sm70_out']."
    )


def test_non_explicit_pp2_tp4_with_missing_ops_records_its_own_field():
    layout = plan(
        layer("wq_b", 1024, 8192, tp=4),
        options(qpn8_pp2_tp4=True, pp2_tp4_contract=True),
        remove=(QPN8_PREFILL,),
    )
    assert layout.name == "fp8_sm70"
    assert [f[:3] for f in fallbacks(layout)] == [("qpn8_pp2_tp4", True, False)]


def test_shared_gate_layer_is_qpn8_only_with_its_option_and_never_gated():
    layout = plan(shared_gate(), PP2_SHARED)
    assert layout.name == "fp8_qpn8" and layout.gated is False and layout.pp2_tp4 is True
    assert layout.tuning == (32, 2, False)
    # Without qpn8_shared_gate: TurboMind, still not gated (3.3: the layer is never gated).
    plain = plan(shared_gate(), PP2)
    assert plain.name == "fp8_sm70" and plain.gated is False


@pytest.mark.parametrize(
    "built",
    [
        shared_gate(tp=2),
        shared_gate(partitions=(1024,)),
        shared_gate(weight_shape=(4096, 1024)),
        shared_gate(block_size=(1, 128)),
        layer("gate_up_proj", 4096, 1024, prefix="model.layers.0.mlp.gate_up_proj"),
    ],
)
def test_a_layer_off_the_shared_gate_contract_is_not_pp2_tp4(built):
    assert plan(built, PP2_SHARED).qpn8 is False


@pytest.mark.parametrize(
    "built,gated",
    [
        (shared_gate(tp=2), True),
        (layer("gate_up_proj", 4096, 1024, prefix="model.layers.0.mlp.gate_up_proj"), True),
        (shared_gate(), False),
    ],
)
def test_only_the_shared_gate_layer_declines_the_gated_layout(built, gated):
    # 3.3 / 3.4: any other gated candidate with gated_silu gets the interleaved layout.
    assert plan(built).gated is gated


def test_a_generic_gate_up_candidate_that_is_also_the_shared_gate_is_not_gated():
    # 3.3: the shared-gate layer never gets a gated layout, on the generic route too.
    layout = plan(shared_gate(), QPN8_ON)
    assert layout.name == "fp8_qpn8" and layout.gated is False and layout.gated_tuning is None
    assert layout.pp2_tp4 is False


# --- grouped wo_a and grouped TurboMind (3.3, 3.6) -----------------------------------------


def wo_a(**changes: Any) -> BlockFp8Layer:
    return layer("wo_a", 4096, 2048, groups=changes.pop("groups", 2), **changes)


def test_grouped_wo_a_is_qpn8_bmm_with_the_per_group_tuning():
    layout = plan(wo_a(), PP2)
    assert layout.name == "fp8_qpn8_bmm"
    assert layout.flags() == flags(
        qpn8=True, pp2_tp4=True, bmm_groups=2, qpn8_split_k=32, qpn8_chains=2
    )
    assert (layout.workspace, layout.workspace_elements) == ("pp2_tp4", PP2_TP4_ELEMENTS)


@pytest.mark.parametrize("explicit", ["qpn8", "qpn8_pp2_tp4"])
def test_grouped_wo_a_is_explicit_through_qpn8_or_qpn8_pp2_tp4(explicit):
    with pytest.raises(SelectionError) as info:
        plan(
            wo_a(),
            options(explicit, qpn8_pp2_tp4=True, pp2_tp4_contract=True),
            remove=(QPN8_DISPATCH,),
        )
    assert info.value.message.startswith("The explicitly enabled SM70 PP2 x TP4 QPN8 route")


def test_grouped_wo_a_is_not_explicit_through_the_shared_gate_field():
    layout = plan(
        wo_a(),
        options("qpn8_shared_gate", qpn8_pp2_tp4=True, pp2_tp4_contract=True),
        remove=(QPN8_DISPATCH,),
    )
    assert layout.name == "fp8_sm70_bmm"
    assert [f[:3] for f in fallbacks(layout)] == [("qpn8_pp2_tp4", True, False)]


@pytest.mark.parametrize(
    "built",
    [
        wo_a(tp=2),
        wo_a(groups=4),
        wo_a(block_size=(1, 128)),
        wo_a(weight_shape=(4096, 2048)),
        layer("wo_b", 4096, 2048, groups=2),
        layer("wo_a", 4096, 4096, groups=2),
    ],
)
def test_a_grouped_layer_off_the_wo_a_contract_stays_turbomind(built):
    assert plan(built, PP2).name == "fp8_sm70_bmm"


def test_grouped_decode_lane_needs_its_shape_option_and_ops():
    # 3.6: 2 groups of 1024 rows, K 4096, grouped_bmm_decode and both ops.
    assert plan(wo_a()).flags() == flags(bmm_groups=2, grouped_decode=True)
    assert plan(wo_a(), options(grouped_bmm_decode=False)).grouped_decode is False
    for op in ("fp8_moe_gemm_sm70_per_expert_dispatch_out", "awq_moe_build_strided_ptrs"):
        assert plan(wo_a(), remove=(op,)).grouped_decode is False
    assert plan(layer("wo_a", 4096, 4096, groups=2)).grouped_decode is False
    assert plan(layer("wo_a", 2048, 2048, groups=2)).grouped_decode is False
    assert plan(layer("wo_a", 4096, 2048, groups=1)).grouped_decode is False


@pytest.mark.parametrize(
    "built,message",
    [
        (
            layer("wo_a", 4096, 2048, groups=3),
            "SM70 FP8 grouped layer model.layers.0.wo_a: group count 3 must be positive and "
            "divide the 2048 rows",
        ),
        (
            layer("wo_a", 4096, 2048, groups=0),
            "SM70 FP8 grouped layer model.layers.0.wo_a: group count 0 must be positive and "
            "divide the 2048 rows",
        ),
        (
            layer("wo_a", 4096, 384, groups=2),
            "SM70 FP8 grouped layer model.layers.0.wo_a: 192 rows per group is not a "
            "multiple of 128",
        ),
        (
            layer("wo_a", 4096, 2048, groups=2, scale_shape=(15, 32)),
            "SM70 FP8 grouped layer model.layers.0.wo_a: 15 scale rows, expected 16",
        ),
    ],
)
def test_grouped_invariants(built, message):
    # 5.8: group count positive and dividing the rows, rows per group a multiple of 128,
    # scale rows = groups x rows / 128.
    with pytest.raises(SelectionError) as info:
        fs.check_grouped(built)
    assert (info.value.code, info.value.message) == ("grouped_invariant", message)


def test_grouped_invariants_hold_at_their_boundaries():
    fs.check_grouped(layer("wo_a", 4096, 256, groups=2))  # 128 rows a group, 2 scale rows
    fs.check_grouped(layer("wo_a", 4096, 128, groups=1))


# --- preparation preconditions (5.6, 5.7) --------------------------------------------------------


def test_preparation_preconditions_in_order():
    with pytest.raises(SelectionError) as info:
        fs.check_preparable(
            layer(orig_dtype="bfloat16"),
            options(turbomind_variable="VLLM_SM70_FP8_TURBOMIND"),
            namespace("fp8_sm70_prepare"),
        )
    assert info.value.code == "original_dtype_not_fp16"
    with pytest.raises(SelectionError) as info:
        fs.check_preparable(
            layer(),
            options(turbomind_variable="VLLM_SM70_FP8_TURBOMIND"),
            namespace("fp8_sm70_prepare"),
        )
    assert (info.value.code, info.value.message) == (
        "missing_native_ops",
        "VLLM_SM70_FP8_TURBOMIND=1 requires a build with CUDA arch 7.0 and the SM70 "
        "TurboMind extension.",
    )
    assert str(info.value) == info.value.message


# --- TurboMind variants (3.5, 3.6) ----------------------------------------------------------------


@pytest.mark.parametrize(
    "role,k,n,threshold,prescaled",
    [
        # 3.5: 8000 for the exact-8K roles, 3920 for the others; 3.6 prefill prescaled on
        # exact-8K roles only.
        ("qkv_proj", 5120, 3584, 8000, True),
        ("in_proj_qkvz", 5120, 4096, 8000, True),
        ("o_proj", 1536, 5120, 3920, False),
        ("out_proj", 1536, 5120, 3920, False),
        ("down_proj", 4352, 5120, 3920, False),
    ],
)
def test_turbomind_default_variants_by_role(role, k, n, threshold, prescaled):
    layout = plan(layer(role, k, n))
    assert layout.name == "fp8_sm70"
    assert layout.flags() == flags(
        prefill_exact_dense=True, prefill_min_m=threshold, prefill_prescaled=prescaled
    )
    assert (layout.workspace, layout.workspace_elements) == ("exact_dense", EXACT_DENSE_FLOOR)


def test_exact_dense_needs_a_role_alignment_and_its_op():
    assert plan(layer("wq_b", 1024, 8192)).flags() == flags()
    assert plan(layer("qkv_proj", 5120 + 64, 3584)).exact_dense is False
    assert plan(layer("qkv_proj", 5120, 3584 + 64)).exact_dense is False
    assert plan(layer("qkv_proj", 5120, 3584, weight_shape=(5120, 3584))).exact_dense is False
    missing = plan(layer(), remove=("fp8_gemm_sm70_prefill_dispatch_out",))
    refused = (
        "missing native exact-dense operator: [fp8_gemm_sm70_prefill_dispatch_out]; "
        "plain TurboMind GEMM"
    )
    assert fallbacks(missing) == [("prefill_exact_dense", True, False, refused)]
    assert missing.notes == (refused,)
    assert (missing.threshold, missing.workspace, missing.workspace_elements) == (0, None, 0)
    off = plan(layer(), options(prefill_exact_dense=False))
    assert (off.exact_dense, off.fallbacks) == (False, ())


def test_exact_dense_workspace_fits_exactly():
    assert plan(layer(), available=EXACT_DENSE_FLOOR).exact_dense is True
    assert plan(layer(), available=EXACT_DENSE_FLOOR - 1).exact_dense is False
    assert plan(layer(), available=0).exact_dense is False


@pytest.mark.parametrize(
    "opts,remove",
    [
        (options(prefill_prescaled=False), ()),
        (options(prefill_fast_selector=False), ()),
        (options(), ("fp8_gemm_sm70_prefill_prescaled_out",)),
    ],
)
def test_prefill_prescaled_needs_both_fields_and_its_op(opts, remove):
    assert plan(layer(), opts, remove=remove).prefill_prescaled is False


def test_visible_dense_mm_needs_exact_dense_and_its_ops():
    on = options(prefill_visible_dense_mm=True)
    assert plan(layer(), on).visible_dense_mm is True
    assert plan(layer(), on, remove=("fp8_sm70_dequantize_out",)).visible_dense_mm is False
    # The interleaved SiLU op matters only to a gated layout.
    assert plan(layer(), on, remove=("silu_and_mul_interleaved",)).visible_dense_mm is True
    gate_up = layer("gate_up_proj", 5120, 8704)
    assert plan(gate_up, on).visible_dense_mm is True
    assert plan(gate_up, on, remove=("silu_and_mul_interleaved",)).visible_dense_mm is False
    assert (
        plan(layer(), options(prefill_visible_dense_mm=True, prefill_exact_dense=False)).flags()[
            "visible_dense_mm"
        ]
        is False
    )


M1 = dict(pp2_tp4_contract=True)


def fused_wqa_wkv(**changes: Any) -> BlockFp8Layer:
    # 3.6: fused_wqa_wkv with TP 1, K 4096, N 1536, weight (1536, 4096).
    return layer("fused_wqa_wkv", 4096, 1536, tp=changes.pop("tp", 1), **changes)


def test_prescaled_decode_needs_ue8m0_scales_the_contract_and_its_op():
    assert plan(fused_wqa_wkv(e8m0=True), options(**M1)).flags() == flags(prescaled_decode=True)
    assert plan(fused_wqa_wkv(), options(**M1)).prescaled_decode is False
    assert plan(fused_wqa_wkv(e8m0=True), options()).prescaled_decode is False
    assert plan(fused_wqa_wkv(e8m0=True), options(prescaled_decode=False, **M1)).flags() == flags()
    no_op = plan(
        fused_wqa_wkv(e8m0=True), options(**M1), remove=("fp8_gemm_sm70_prescaled_m1_out",)
    )
    assert no_op.prescaled_decode is False
    for other in (
        fused_wqa_wkv(e8m0=True, tp=4),
        layer("fused_wqa_wkv", 4096, 1024, tp=1, e8m0=True),
        fused_wqa_wkv(e8m0=True, weight_shape=(4096, 1536)),
        layer("wq_b", 4096, 1536, tp=1, e8m0=True),
    ):
        assert plan(other, options("prescaled_decode", **M1)).prescaled_decode is False


@pytest.mark.parametrize(
    "built,opts,code",
    [
        # 5.4: explicit, without UE8M0 scales or outside the contract.
        (fused_wqa_wkv(), options("prescaled_decode", **M1), "prescaled_decode_contract"),
        (fused_wqa_wkv(e8m0=True), options("prescaled_decode"), "prescaled_decode_contract"),
        (shared_gate(), options("prescaled_shared_gate", **M1), "prescaled_decode_contract"),
        (shared_gate(), options("prescaled_decode", **M1), "prescaled_decode_contract"),
    ],
)
def test_explicit_prescaled_decode_outside_its_contract_fails(built, opts, code):
    with pytest.raises(SelectionError) as info:
        plan(built, opts)
    assert (info.value.code, info.value.message) == (
        code,
        "Explicit SM70 FP8 prescaled decode requires UE8M0 128x128 scales and the PP2 x TP4 "
        "no-spec single-request contract.",
    )


def test_explicit_prescaled_decode_without_its_op_fails():
    with pytest.raises(SelectionError) as info:
        plan(
            fused_wqa_wkv(e8m0=True),
            options("prescaled_decode", **M1),
            remove=("fp8_gemm_sm70_prescaled_m1_out",),
        )
    assert (info.value.code, info.value.message) == (
        "prescaled_decode_operator",
        "Explicit SM70 FP8 prescaled decode requires the source-built operator and finite, "
        "reversible FP16 scales after the 256x exponent shift.",
    )


def test_prescaled_decode_of_the_shared_gate_layer_follows_its_own_field():
    assert plan(shared_gate(e8m0=True), options(**M1)).prescaled_decode is True
    off = options("prescaled_shared_gate", prescaled_shared_gate=False, **M1)
    assert plan(shared_gate(), off).prescaled_decode is False  # not a prescaled layer: no error
    # An explicit prescaled_shared_gate means nothing to fused_wqa_wkv (5.4).
    assert plan(fused_wqa_wkv(), options("prescaled_shared_gate", **M1)).prescaled_decode is False


# --- names and flags of the layouts (4.1, 6.5) ------------------------------------------------


def test_layout_names():
    assert fs.Fp8Layout().name == "fp8_sm70"
    assert fs.Fp8Layout(qpn8=True).name == "fp8_qpn8"
    assert fs.Fp8Layout(groups=2).name == "fp8_sm70_bmm"
    assert fs.Fp8Layout(qpn8=True, groups=2).name == "fp8_qpn8_bmm"
    assert fs.Fp8Layout().flags() == flags()


# --- the workspace registry (4.1, 4.2) ------------------------------------------------------------


def test_workspaces_bind_by_prefix_to_one_buffer_per_kind():
    ws = fs.Fp8Workspaces()
    assert ws.fits(10**12) is True
    assert ws.bind("a", "exact_dense", 100) == 1
    assert ws.bind("b", "exact_dense", 300) == 1
    assert ws.bind("a", "exact_dense", 200) == 1  # the same binding again
    assert ws.bind("c", "pp2_tp4", 50) == 2
    # FP16 bytes of the largest binding of each kind, kinds in sorted order.
    assert list(ws.bytes_json().items()) == [("exact_dense", 600), ("pp2_tp4", 100)]
    with pytest.raises(SelectionError) as info:
        ws.bind("a", "pp2_tp4", 1)
    assert (info.value.code, info.value.message) == (
        "workspace_rebound",
        "a is already bound to another SM70 workspace",
    )
    with pytest.raises(SelectionError) as info:
        ws.bind("", "exact_dense", 1)
    assert (info.value.code, info.value.message) == (
        "workspace_prefix",
        "SM70 workspaces are bound by layer prefix",
    )


def test_workspace_availability_bounds_what_fits():
    assert fs.Fp8Workspaces(8).fits(8) is True
    assert fs.Fp8Workspaces(8).fits(9) is False
    assert fs.Fp8Workspaces(0).fits(1) is False


def test_workspace_buffer_is_allocated_once_at_the_size_bound_and_grows():
    like = torch.empty((1,), dtype=torch.float16)
    ws = fs.Fp8Workspaces()
    ws.bind("a", "exact_dense", 12)
    first = ws.tensor("exact_dense", like)
    assert (first.numel(), first.dtype) == (12, torch.float16)
    assert ws.tensor("exact_dense", like) is first
    view = ws.view("exact_dense", (2, 3), like)
    assert tuple(view.shape) == (2, 3) and view.data_ptr() == first.data_ptr()
    ws.bind("b", "exact_dense", 20)
    assert ws.tensor("exact_dense", like).numel() == 20


# --- prescaled scales (3.6, 5.5) ------------------------------------------------------------------


def test_prescaled_copy_keeps_only_reversible_finite_non_negative_scales():
    good = torch.tensor([[0.5, 2.0**-10]], dtype=torch.float32)
    shifted = fs.prescaled_copy(good)
    assert shifted is not None and shifted.tolist() == [[128.0, 0.25]]
    assert fs.prescaled_copy(torch.tensor([[-0.5]], dtype=torch.float32)) is None
    assert fs.prescaled_copy(torch.tensor([[256.0]], dtype=torch.float32)) is None  # FP16 inf
    assert fs.prescaled_copy(torch.tensor([[1.0001]], dtype=torch.float32)) is None  # rounds
    assert fs.prescaled_copy(torch.tensor([[0.0, 255.0]], dtype=torch.float32)) is not None
    # 2^-30 x 256 = 2^-22, an FP16 subnormal, recovered exactly by x1/256 in FP32 (5.5).
    tiny = fs.prescaled_copy(torch.tensor([[2.0**-30]], dtype=torch.float32))
    assert tiny is not None and tiny.tolist() == [[2.0**-22]]


def test_prescaled_meta_scales_keep_shape_and_dtype():
    meta = torch.empty((12, 32), dtype=torch.float32, device="meta")
    copy = fs.prescaled_copy(meta)
    assert copy is not None
    assert (tuple(copy.shape), copy.dtype, copy.device.type) == ((12, 32), torch.float32, "meta")


# --- capability classes (2.2, 2.3) ----------------------------------------------------------------


def request(built: BlockFp8Layer, **values: Any) -> fs.W8A16Request:
    return fs.W8A16Request(built, fs.Fp8Sm70Options(**values))


def code(check: tuple[bool, Any]) -> str | None:
    ok, reason = check
    return None if ok else reason.code


def test_turbomind_can_implement_codes_in_order():
    tm = fs.TurboMindFp8LinearKernel
    ns = namespace()
    assert code(tm.can_implement(layer(), ns)) == "not_w8a16_layout"
    assert code(tm.can_implement(request(layer(static_scales=False)), ns)) == "not_block_scaled"
    assert (
        code(tm.can_implement(request(layer(block_size=(1, 128), act_dtype="bfloat16")), ns))
        == "not_block_scaled"
    )
    assert (
        code(tm.can_implement(request(layer(act_dtype="bfloat16")), namespace("fp8_sm70_prepare")))
        == "activation_not_fp16"
    )
    assert (
        code(tm.can_implement(request(layer()), namespace("fp8_sm70_prepare")))
        == "missing_native_ops"
    )
    assert tm.can_implement(request(layer()), ns) == (True, None)
    assert code(tm.is_supported(75)) == "requires_volta"


def test_block_kernel_policy_codes_in_order():
    blk = fs.QPN8Fp8BlockScaledMMLinearKernel
    every = ("gated_silu", "prefill_prescaled", "prescaled_decode")
    assert code(block_qpn8_policy(options(force_marlin=True))) == "block_qpn8_disabled"
    kept = block_qpn8_policy(options(*every, block_qpn8=True, force_marlin=True))
    assert kept[1].code == "explicit_variant_retained"
    # 2.3: the retained variants are named in the contract's order.
    assert kept[1].message == (
        "retains the explicitly configured fused or prescaled variant (sm70_fp8.gated_silu, "
        "sm70_fp8.prefill_prescaled, sm70_fp8.prescaled_decode)"
    )
    for variant in every:
        assert code(block_qpn8_policy(options(variant, block_qpn8=True))) == (
            "explicit_variant_retained"
        )
    assert block_qpn8_policy(options("qpn8", "enabled", block_qpn8=True)) == (True, None)
    assert code(block_qpn8_policy(options(block_qpn8=True, force_marlin=True))) == (
        "marlin_selected"
    )
    assert code(blk.is_supported(80)) == "requires_volta_or_turing"


@pytest.mark.parametrize(
    "built,expected",
    [
        (layer(), None),
        (layer("wo_a", 4096, 2048, groups=2, act_dtype="bfloat16"), "grouped_bmm"),
        (layer(act_dtype="bfloat16", weight_dtype="float8_e5m2"), "input_output_not_fp16"),
        (layer(out_dtype="bfloat16"), "input_output_not_fp16"),
        (layer(weight_dtype="float8_e5m2", weight_shape=(3584,)), "not_static_e4m3_block"),
        (layer(static_scales=False), "not_static_e4m3_block"),
        (layer(weight_shape=(3584,)), "weight_rank"),
        (layer(weight_shape=(0, 5120)), "n_k_not_multiple_of_128"),
        (layer(weight_shape=(3584, 0)), "n_k_not_multiple_of_128"),
        (layer(weight_shape=(-128, 5120)), "n_k_not_multiple_of_128"),
        (layer(weight_shape=(3584, -128)), "n_k_not_multiple_of_128"),
        (layer(weight_shape=(3584, 5120 + 64)), "n_k_not_multiple_of_128"),
        (layer(weight_shape=(128, 128)), None),
    ],
)
def test_block_kernel_can_implement_codes(built, expected):
    blk = fs.QPN8Fp8BlockScaledMMLinearKernel
    assert code(blk.can_implement(request(built, block_qpn8=True), namespace())) == expected


def test_block_kernel_policy_comes_before_the_layer():
    from policies.linear_fp8_sm70 import select_fp8_sm70

    blk = fs.QPN8Fp8BlockScaledMMLinearKernel
    # The policy is the selector's gate, checked once, before the class judges the layer:
    # a grouped layer with block_qpn8 off is refused for the policy.
    policy = PROJECT.resolve(None, {}, Hardware(70), EngineConfig(), emit_warnings=False)
    grouped = layer(groups=2)
    selection = select_fp8_sm70(grouped, policy, options(), Hardware(70), namespace())
    verdict = next(v for v in selection.verdicts if v.name == blk.name)
    assert (verdict.code, verdict.stage) == ("block_qpn8_disabled", "policy")
    # The class alone judges the layer only.
    assert code(blk.can_implement(request(grouped), namespace())) == "grouped_bmm"
    assert code(blk.can_implement(layer(), namespace())) == "not_w8a16_layout"
    missing = blk.can_implement(request(layer(), block_qpn8=True), namespace(QPN8_PREPARE))
    assert missing[0] is False and missing[1].code == "missing_native_ops"
    assert missing[1].message == "missing native operators: [fp8_qpn8_prepare_sm70]"
    # 2.3: every missing op of the three, in the order the contract lists them.
    both = blk.can_implement(
        request(layer(), block_qpn8=True), namespace(QPN8_PREFILL, QPN8_PREPARE)
    )
    assert both[1].message == (
        "missing native operators: [fp8_qpn8_prepare_sm70, fp8_qpn8_prefill_sm70_out]"
    )


@pytest.mark.parametrize("capability,copy", [(70, True), (72, True), (75, False)])
def test_block_kernel_keeps_the_turbomind_copy_on_volta_only(capability, copy):
    # 2.3: on capability 70/72 a second TurboMind copy when kept.
    setup = fs.Fp8Setup(
        fs.Fp8Sm70Options(block_qpn8=True, block_qpn8_turbomind_copy=True),
        fs.Fp8Workspaces(),
        capability,
    )
    planned = fs.QPN8Fp8BlockScaledMMLinearKernel.plan(layer(), setup, namespace())
    assert planned.layout == "fp8_qpn8_block"
    assert planned.flags == {"qpn8": True, "gated": False, "turbomind_copy": copy}
    off = dataclasses.replace(setup, options=fs.Fp8Sm70Options(block_qpn8=True))
    assert fs.QPN8Fp8BlockScaledMMLinearKernel.plan(layer(), off, namespace()).flags == {
        "qpn8": True,
        "gated": False,
        "turbomind_copy": False,
    }


# --- the policy's outcomes (2.1, 2.3) -------------------------------------------------------------


def resolve(env: dict[str, str] | None = None, config: Any = None) -> ResolvedPolicy:
    return PROJECT.resolve(config, env or {}, Hardware(70), EngineConfig(), emit_warnings=False)


@pytest.mark.parametrize(
    "seqs,spec,copy",
    [(8, 0, False), (9, 0, True), (4, 1, False), (3, 2, True), (1, 8, True), (1, 7, False)],
)
def test_block_qpn8_copy_when_unset_follows_the_decode_batch_above_8(seqs, spec, copy):
    # 2.3 (959a2305): kept when max_num_seqs * (speculative tokens + 1) > 8.
    method = "mtp" if spec else "none"
    engine = EngineConfig(max_num_seqs=seqs, spec_method=method, spec_tokens=spec)
    assert block_qpn8_turbomind_copy(resolve(), engine) is copy


def test_block_qpn8_copy_as_configured_or_kept_without_an_engine():
    small = EngineConfig(max_num_seqs=1)
    on = resolve(config={"sm70_fp8": {"block_qpn8_volta_turbomind_prefill": True}})
    off = resolve(config={"sm70_fp8": {"block_qpn8_volta_turbomind_prefill": False}})
    assert block_qpn8_turbomind_copy(on, small) is True
    assert block_qpn8_turbomind_copy(off, EngineConfig(max_num_seqs=64)) is False
    assert block_qpn8_turbomind_copy(resolve(), None) is True


OTHER = (
    "the SM70 TurboMind FP8 route does not apply ({}); the engine's generic FP8 block-kernel "
    "selection serves the layer"
)


@pytest.mark.parametrize(
    "capability,built,env,expected",
    [
        (70, layer(), {}, None),
        (74, layer(), {}, None),
        (69, layer(), {}, ("other_backend", OTHER.format("capability 69 is outside 70..74"))),
        (75, layer(), {}, ("other_backend", OTHER.format("capability 75 is outside 70..74"))),
        (
            70,
            layer(block_size=(1, 128)),
            {},
            ("other_backend", OTHER.format("block size [1, 128] is not [128, 128]")),
        ),
        (
            70,
            layer(static_scales=False),
            {},
            ("other_backend", OTHER.format("block size [128, 128] is not [128, 128]")),
        ),
        (
            70,
            layer(),
            {"VLLM_SM70_QUANT_BACKEND": "marlin"},
            ("other_backend", OTHER.format("the legacy backend is marlin")),
        ),
        (
            70,
            layer(),
            {"VLLM_SM70_FP8_TURBOMIND": "0"},
            (
                "dequant_fallback",
                "sm70_fp8.enabled is false and sm70_fp8.dequant_fallback is true: weights are "
                "dequantized to FP16 at load and run as a plain FP16 linear",
            ),
        ),
        (
            70,
            layer(),
            {"VLLM_SM70_FP8_TURBOMIND": "0", "VLLM_SM70_FP8_DEQUANT_FALLBACK": "0"},
            (
                "other_backend",
                OTHER.format("sm70_fp8.enabled and sm70_fp8.dequant_fallback are false"),
            ),
        ),
        (
            75,
            layer(),
            {"VLLM_SM70_FP8_TURBOMIND": "0"},
            ("other_backend", OTHER.format("capability 75 is outside 70..74")),
        ),
    ],
)
def test_route_outcomes(capability, built, env, expected):
    # 2.1: the SM70 route exists on 70 <= capability < 75 with [128, 128] blocks and
    # `enabled`; else dequant_fallback (dequant_fallback, not enabled, not force_marlin) or
    # other_backend.
    policy = PROJECT.resolve(None, env, Hardware(capability), EngineConfig(), emit_warnings=False)
    assert route_outcome(built, policy, Hardware(capability)) == expected


def test_a_typed_disabled_route_with_marlin_is_other_backend():
    policy = resolve({"VLLM_SM70_QUANT_BACKEND": "marlin"}, {"sm70_fp8": {"enabled": False}})
    assert route_outcome(layer(), policy, Hardware(70)) == (
        "other_backend",
        OTHER.format("the legacy backend is marlin"),
    )


@pytest.mark.parametrize("capability,checked", [(69, False), (70, True), (74, True), (75, False)])
def test_checkpoint_admission_applies_on_70_to_74_only(capability, checked):
    env = {"VLLM_SM70_FP8_TURBOMIND": "0", "VLLM_SM70_FP8_DEQUANT_FALLBACK": "0"}
    admitted, reason = checkpoint_admission(env, capability)
    assert admitted is not checked
    if checked:
        assert reason.code == "fp8_checkpoint_refused"
        assert reason.message == (
            f"FP8 checkpoint needs capability 75 on SM{capability}: "
            "VLLM_SM70_FP8_DEQUANT_FALLBACK=0, VLLM_SM70_QUANT_BACKEND=auto and "
            "use_turbomind(VLLM_SM70_FP8_TURBOMIND) is false"
        )


@pytest.mark.parametrize(
    "env",
    [
        # 2.1: use_turbomind(VLLM_SM70_FP8_TURBOMIND), its default true, admits on its own.
        {"VLLM_SM70_FP8_DEQUANT_FALLBACK": "0"},
        {"VLLM_SM70_FP8_DEQUANT_FALLBACK": "0", "VLLM_SM70_FP8_TURBOMIND": "1"},
    ],
)
def test_checkpoint_admission_by_the_turbomind_variable(env):
    assert checkpoint_admission(env, 70) == (True, None)


def test_checkpoint_admission_parse_errors_name_the_variable():
    # 1.1: anything but integer text is an input error naming the variable.
    with pytest.raises(InputError, match="VLLM_SM70_FP8_DEQUANT_FALLBACK"):
        checkpoint_admission({"VLLM_SM70_FP8_DEQUANT_FALLBACK": "yes"}, 70)
    with pytest.raises(InputError, match="VLLM_SM70_FP8_TURBOMIND"):
        checkpoint_admission({"VLLM_SM70_FP8_TURBOMIND": "on"}, 70)


def test_a_disabled_block_kernel_and_turbomind_name_both_in_the_load_error():
    from policies.linear_fp8_sm70 import load_fp8_sm70

    policy = PROJECT.resolve(
        {"sm70_fp8": {"block_qpn8": True}},
        {"VLLM_DISABLED_KERNELS": "TurboMindFp8LinearKernel,QPN8Fp8BlockScaledMMLinearKernel"},
        Hardware(70),
        EngineConfig(),
        emit_warnings=False,
    )
    with pytest.raises(SelectionError) as info:
        load_fp8_sm70(layer(), policy, Hardware(70), EngineConfig(), namespace())
    assert info.value.code == "no_kernel"
    assert info.value.message == (
        "Failed to find a kernel that can implement the ScaledMM linear layer. Reasons: "
        "QPN8Fp8BlockScaledMMLinearKernel is disabled by environment variable "
        "(VLLM_DISABLED_KERNELS). "
        "TurboMindFp8LinearKernel is disabled by environment variable (VLLM_DISABLED_KERNELS). "
        "FlashInferFp8DeepGEMMDynamicBlockScaledKernel does not consume the SM70 W8A16 layout. "
        "DeepGemmFp8BlockScaledMMKernel does not consume the SM70 W8A16 layout. "
        "CutlassFp8BlockScaledMMKernel does not consume the SM70 W8A16 layout. "
        "MarlinFP8ScaledMMLinearKernel does not consume the SM70 W8A16 layout. "
        "TritonFp8BlockScaledMMKernel does not consume the SM70 W8A16 layout."
    )
    # The stage of each refusal: the W8A16 rule is a policy refusal, not a fallback.
    assert [(v.name, v.code, v.stage) for v in info.value.verdicts] == [
        ("QPN8Fp8BlockScaledMMLinearKernel", "disabled_kernel", "disabled"),
        ("TurboMindFp8LinearKernel", "disabled_kernel", "disabled"),
        ("FlashInferFp8DeepGEMMDynamicBlockScaledKernel", "not_w8a16_consumer", "policy"),
        ("DeepGemmFp8BlockScaledMMKernel", "not_w8a16_consumer", "policy"),
        ("CutlassFp8BlockScaledMMKernel", "not_w8a16_consumer", "policy"),
        ("MarlinFP8ScaledMMLinearKernel", "not_w8a16_consumer", "policy"),
        ("TritonFp8BlockScaledMMKernel", "not_w8a16_consumer", "policy"),
    ]


# --- dispatch at the M values the category never replays (4.3, 4.4, 2.3) --------------------

PREFILL_DISPATCH = "fp8_gemm_sm70_prefill_dispatch_out"
GEMM = "fp8_gemm_sm70_out"


def prepared_turbomind(
    built: BlockFp8Layer, opts: fs.Fp8Sm70Options | None = None
) -> tuple[RecordingNamespace, Any]:
    ns = namespace()
    ws = fs.Fp8Workspaces()
    opts = opts or options()
    layout = fs.plan_turbomind(built, opts, ns, ws)
    prepared = fs.prepare_turbomind(
        built,
        built.checkpoint_tensors("meta"),
        ns,
        layout,
        ws,
        "prescaled_decode" in opts.explicit_enables,
    )
    return ns, prepared


def prepared_block(
    built: BlockFp8Layer, *, capability: int = 70, copy: bool = False
) -> tuple[RecordingNamespace, Any]:
    ns = namespace()
    prepared = fs.prepare_block_qpn8(
        built,
        built.checkpoint_tensors("meta"),
        ns,
        capability=capability,
        turbomind_copy=copy,
    )
    return ns, prepared


def activations(m: int, *tail: int, dtype: Any = torch.float16) -> Any:
    return torch.empty((m, *tail), dtype=dtype, device="meta")


def run(ns: RecordingNamespace, apply: Any, x: Any) -> tuple[list[str], tuple[int, ...]]:
    start = ns.mark()
    out = apply(x)
    return [c["op"] for c in ns.since(start)], tuple(out.shape)


def test_prefill_prescaled_runs_at_exactly_m_8000_and_only_without_exact_dense():
    # 3.6 / 4.3: exactly M = 8000, and only when no exact-dense workspace is bound.
    ns, prepared = prepared_turbomind(layer(), options(prefill_exact_dense=False))
    assert "prefill_prescaled_scales" in prepared.resident
    assert run(ns, prepared.apply, activations(8000, 5120)) == (
        ["fp8_gemm_sm70_prefill_prescaled_out"],
        (8000, 3584),
    )
    for m in (7999, 8001):
        assert run(ns, prepared.apply, activations(m, 5120)) == ([GEMM], (m, 3584))
    # o_proj is no exact-8K role: no prescaled buffer, the plain GEMM at M = 8000 too.
    ns, o_proj = prepared_turbomind(layer("o_proj", 1536, 5120), options(prefill_exact_dense=False))
    assert "prefill_prescaled_scales" not in o_proj.resident
    assert run(ns, o_proj.apply, activations(8000, 1536)) == ([GEMM], (8000, 5120))
    ns, bound = prepared_turbomind(layer())
    assert run(ns, bound.apply, activations(8000, 5120))[0] == [PREFILL_DISPATCH]


def test_visible_dense_mm_starts_at_the_threshold():
    # 3.6 / 4.3: at M >= threshold, dequantize into the workspace and a dense mm.
    ns, qkv = prepared_turbomind(layer(), options(prefill_visible_dense_mm=True))
    assert run(ns, qkv.apply, activations(8000, 5120))[0] == [
        "fp8_sm70_dequantize_out",
        "torch.mm",
    ]
    assert run(ns, qkv.apply, activations(7999, 5120))[0] == [PREFILL_DISPATCH]
    gate_up = layer("gate_up_proj", 5120, 8704)
    ns, gated = prepared_turbomind(gate_up, options(prefill_visible_dense_mm=True))
    assert run(ns, gated.apply_gated, activations(3920, 5120)) == (
        ["fp8_sm70_dequantize_out", "torch.mm", "silu_and_mul_interleaved"],
        (3920, 4352),
    )
    start = ns.mark()
    gated.apply_gated(activations(3919, 5120))
    assert [(c["op"], c["plan"]["gated"]) for c in ns.since(start)] == [(PREFILL_DISPATCH, True)]


def test_zero_tokens_launch_nothing():
    # 4.3: M = 0 launches nothing.
    ns, tm = prepared_turbomind(layer("gate_up_proj", 5120, 8704))
    assert run(ns, tm.apply, activations(0, 5120)) == ([], (0, 8704))
    assert run(ns, tm.apply_gated, activations(0, 5120)) == ([], (0, 4352))
    ns, qpn8 = prepared_turbomind(layer("gate_up_proj", 5120, 8704), QPN8_ON)
    assert run(ns, qpn8.apply, activations(0, 5120)) == ([], (0, 8704))
    assert run(ns, qpn8.apply_gated, activations(0, 5120)) == ([], (0, 4352))
    ns, block = prepared_block(layer())
    assert run(ns, block.apply, activations(0, 5120)) == ([], (0, 3584))
    ns, grouped = prepared_turbomind(wo_a())
    assert run(ns, grouped.apply, activations(0, 2, 4096)) == ([], (0, 2, 1024))


def test_block_qpn8_decodes_up_to_m_8():
    # 2.3: M <= 8 the QPN8 GEMM; above, the TurboMind copy when kept, else the prefill entry
    # with an invocation-owned K x N FP16 scratch.
    ns, block = prepared_block(layer())
    assert run(ns, block.apply, activations(8, 5120))[0] == [QPN8_GEMM]
    assert run(ns, block.apply, activations(9, 5120))[0] == [QPN8_PREFILL]
    assert block.scratch == {"dense_scratch": 36_700_160}
    ns, copy = prepared_block(layer(), copy=True)
    assert run(ns, copy.apply, activations(9, 5120))[0] == [GEMM]
    assert copy.scratch == {}
    assert {"turbomind_codes", "turbomind_scales"} <= set(copy.resident)
    # Turing keeps no TurboMind copy.
    ns, turing = prepared_block(layer(), capability=75, copy=True)
    assert run(ns, turing.apply, activations(9, 5120))[0] == [QPN8_PREFILL]
    assert "turbomind_codes" not in turing.resident


def test_block_qpn8_refuses_a_scale_raster_off_the_weight():
    # 2.3: the scale raster must be (N/128, K/128).
    built = layer()
    tensors = {
        "weight": torch.empty((3584, 5120), dtype=torch.float8_e4m3fn, device="meta"),
        "weight_scale_inv": torch.empty((27, 40), dtype=torch.float32, device="meta"),
    }
    with pytest.raises(SelectionError) as info:
        fs.prepare_block_qpn8(built, tensors, namespace(), capability=70, turbomind_copy=False)
    assert (info.value.code, info.value.message) == (
        "scale_raster",
        "QPN8: scale raster (27, 40) does not match weights 3584x5120 at block [128,128]",
    )


def test_qpn8_calls_refuse_non_fp16_activations():
    # 5.10: a QPN8 call with non-FP16 input fails (the plain and the gated wording).
    bf16 = activations(4, 5120, dtype=torch.bfloat16)
    _, qpn8 = prepared_turbomind(layer("gate_up_proj", 5120, 8704), QPN8_ON)
    with pytest.raises(ActivationError) as info:
        qpn8.apply(bf16)
    assert str(info.value) == "SM70 FP8 QPN8 requires float16 activations, got bfloat16."
    with pytest.raises(ActivationError) as info:
        qpn8.apply_gated(bf16)
    assert str(info.value) == (
        "SM70 FP8 QPN8 gated-SiLU requires float16 activations, got bfloat16."
    )
    _, block = prepared_block(layer())
    with pytest.raises(ActivationError) as info:
        block.apply(bf16)
    assert str(info.value) == "SM70 FP8 QPN8 requires float16 activations, got bfloat16."
    _, grouped = prepared_turbomind(wo_a(), PP2)
    with pytest.raises(ActivationError) as info:
        grouped.apply(activations(4, 2, 4096, dtype=torch.bfloat16))
    assert str(info.value) == "SM70 FP8 QPN8 requires float16 activations, got bfloat16."


def test_grouped_activations_must_end_in_groups_by_k():
    # 5.10: grouped input not ending in [groups, K].
    ns, grouped = prepared_turbomind(wo_a())
    with pytest.raises(ValueError) as info:
        grouped.apply(activations(4, 4096))
    assert str(info.value) == "grouped activations must end in [2, 4096], got [4, 4096]"
    assert run(ns, grouped.apply, activations(2, 2, 4096)) == ([GEMM, GEMM], (2, 2, 1024))


# --- prescaled decode scales at preparation (5.5) and the layer's notes (3.3) ---------------------


def real_scales_namespace(scales: Any) -> InMemoryNamespace:
    """A build whose fp8_sm70_prepare returns `scales` as the TurboMind scales (CPU values,
    which replay's meta tensors never have)."""

    def prepare(**_: Any) -> tuple[Any, Any, Any]:
        return torch.empty((4096, 1536), dtype=torch.uint8), scales, None

    ops = ("fp8_sm70_prepare", "fp8_gemm_sm70_prescaled_m1_out", "fp8_gemm_sm70_out")
    return InMemoryNamespace(ops, impls={"fp8_sm70_prepare": prepare})


@pytest.mark.parametrize("explicit", [True, False])
def test_unreversible_prescaled_scales_fail_only_an_explicit_request(explicit):
    # 5.5: explicit prescaled decode taken but the scales not reversible after the 256x shift
    # -> the layer fails to load; a default request simply keeps no prescaled buffer.
    built = fused_wqa_wkv(e8m0=True)
    opts = options(*(["prescaled_decode"] if explicit else []), **M1)
    negative = torch.full((12, 32), -1.0, dtype=torch.float32)
    ns = real_scales_namespace(negative)
    setup = fs.Fp8Setup(opts, fs.Fp8Workspaces(), 70)
    planned = fs.TurboMindFp8LinearKernel.plan(built, setup, ns)
    assert planned.flags["prescaled_decode"] is True
    tensors = {"weight": torch.empty((1536, 4096)), "weight_scale_inv": negative}
    if explicit:
        with pytest.raises(SelectionError) as info:
            planned.prepare(tensors)
        assert (info.value.code, info.value.message) == (
            "prescaled_decode_operator",
            "Explicit SM70 FP8 prescaled decode requires the source-built operator and finite, "
            "reversible FP16 scales after the 256x exponent shift.",
        )
    else:
        prepared = planned.prepare(tensors)
        assert "prescaled_decode_scales" not in prepared.resident
    good = torch.full((12, 32), 0.5, dtype=torch.float32)
    kept = fs.TurboMindFp8LinearKernel.plan(built, setup, real_scales_namespace(good)).prepare(
        {"weight": torch.empty((1536, 4096)), "weight_scale_inv": good}
    )
    assert kept.resident["prescaled_decode_scales"].tolist() == [[128.0] * 32] * 12


def test_the_turbomind_plan_keeps_its_layout_and_notes_for_the_engine():
    # 3.3: a PP2/TP4 candidate outside the runtime contract keeps TurboMind with an info
    # message, which the loaded layer carries for the engine to log.
    built = layer("wq_b", 1024, 8192)
    setup = fs.Fp8Setup(options("qpn8_pp2_tp4", qpn8_pp2_tp4=True), fs.Fp8Workspaces(), 70)
    planned = fs.TurboMindFp8LinearKernel.plan(built, setup, namespace())
    assert planned.state["layout"].name == "fp8_sm70"
    assert planned.state["notes"] == (
        "model.layers.0.wq_b: outside the SM70 PP2 x TP4 runtime contract; "
        "retaining the TurboMind layout",
    )


def load_default(config: Any = None, env: dict[str, str] | None = None) -> Any:
    from policies.linear_fp8_sm70 import load_fp8_sm70

    policy = PROJECT.resolve(config, env or {}, Hardware(70), EngineConfig(), emit_warnings=False)
    return load_fp8_sm70(layer(), policy, Hardware(70), EngineConfig(), namespace())


def test_a_linear_backend_without_a_kernel_is_refused_with_its_code_before_any_verdict():
    # 2.1: an empty filtered list fails before any candidate is evaluated.
    with pytest.raises(SelectionError) as info:
        load_default({"linear_backend": "torch"})
    assert (info.value.code, info.value.verdicts) == ("backend_not_available", ())


def test_the_block_kernel_is_refused_at_the_policy_stage_and_turbomind_serves():
    # 2.3: block_qpn8 off is a policy refusal, not a fallback.
    decision = load_default().decision
    assert decision.kernel == "TurboMindFp8LinearKernel" and decision.capability == 70
    verdicts = decision.selection.verdicts
    assert [(v.name, v.ok, v.code, v.stage, v.not_needed) for v in verdicts] == [
        ("QPN8Fp8BlockScaledMMLinearKernel", False, "block_qpn8_disabled", "policy", False),
        ("TurboMindFp8LinearKernel", True, None, None, False),
    ]
    assert decision.selection.fallback is False


@pytest.mark.parametrize(
    "built,remove,reason",
    [
        (layer(act_dtype="bfloat16"), (), ("activation_not_fp16", "capability")),
        (layer(), ("fp8_sm70_prepare",), ("missing_native_ops", "ops")),
    ],
)
def test_when_neither_sm70_kernel_passes_every_candidate_is_evaluated_on_this_device(
    built, remove, reason
):
    # 2.1: no candidate -> the layer fails with every reason; TurboMind's own reason, as the
    # device (capability 70) and the build see it, not a capability refusal.
    from policies.linear_fp8_sm70 import load_fp8_sm70

    policy = PROJECT.resolve(None, {}, Hardware(70), EngineConfig(), emit_warnings=False)
    with pytest.raises(SelectionError) as info:
        load_fp8_sm70(built, policy, Hardware(70), EngineConfig(), namespace(*remove))
    verdicts = [(v.name, v.code, v.stage) for v in info.value.verdicts]
    assert verdicts[:2] == [
        ("QPN8Fp8BlockScaledMMLinearKernel", "block_qpn8_disabled", "policy"),
        ("TurboMindFp8LinearKernel", *reason),
    ]
    assert [v[1] for v in verdicts[2:]] == ["not_w8a16_consumer"] * 5


def test_the_engine_workspace_budget_reaches_the_qpn8_decision():
    # 4.2: `workspace` FP16 elements the engine can lend; none -> the QPN8 workspace refusal.
    from policies.linear_fp8_sm70 import load_fp8_sm70

    policy = PROJECT.resolve(
        None, {"VLLM_SM70_FP8_QPN8": "1"}, Hardware(70), EngineConfig(), emit_warnings=False
    )
    loaded = load_fp8_sm70(layer(), policy, Hardware(70), EngineConfig(), namespace(), workspace=0)
    assert loaded.decision.layout == "fp8_sm70"
    assert [(f.field, f.reason) for f in loaded.decision.fallbacks][0] == (
        "sm70_fp8.qpn8",
        WORKSPACE_REFUSED,
    )


def test_planning_without_the_prepare_op_fails_naming_the_variable():
    # 5.7 through the planner itself (4.1: the preconditions come first).
    opts = options(qpn8=True, turbomind_variable="VLLM_SM70_FP8_TURBOMIND")
    with pytest.raises(SelectionError) as info:
        plan(layer(), opts, remove=("fp8_sm70_prepare",))
    assert info.value.message == (
        "VLLM_SM70_FP8_TURBOMIND=1 requires a build with CUDA arch 7.0 and the SM70 "
        "TurboMind extension."
    )


def test_preparation_casts_the_scales_to_fp32():
    # 4.1: scales cast to FP32 before any prepare.
    tensors = {
        "weight": torch.empty((3584, 5120), dtype=torch.float8_e4m3fn, device="meta"),
        "weight_scale_inv": torch.empty((28, 40), dtype=torch.float16, device="meta"),
    }
    prepared = fs.prepare_block_qpn8(
        layer(), tensors, namespace(), capability=70, turbomind_copy=False
    )
    assert prepared.resident["weight_scale_inv"].dtype == torch.float32


def test_a_qpn8_layer_dispatches_with_its_bound_workspace():
    # 4.1 / 4.5: a fp8_qpn8 layer binds the workspace to its prefix and every dispatch gets
    # that workspace (its address is no plan key, so replay rows cannot show it).
    seen: list[Any] = []
    ops = (*fs.QPN8_LAYOUT_OPS, "fp8_sm70_prepare")
    impls = {
        QPN8_PREPARE: lambda **_: torch.empty((5120, 3584), dtype=torch.uint8),
        QPN8_DISPATCH: lambda **kw: seen.append(kw["workspace"]),
    }
    ns = InMemoryNamespace(ops, impls=impls)
    ws = fs.Fp8Workspaces()
    built = layer()
    layout = fs.plan_turbomind(built, QPN8_ON, ns, ws)
    prepared = fs.prepare_turbomind(built, built.checkpoint_tensors("meta"), ns, layout, ws)
    prepared.apply(activations(4, 5120))
    assert ws.bytes_json() == {"exact_dense": 2 * EXACT_DENSE_FLOOR}
    (handle,) = seen
    assert isinstance(handle, int) and handle > 0


def test_a_turbomind_call_refuses_non_fp16_activations():
    # 3.1 / 2.2: TurboMind layouts run FP16 activations only.
    _, tm = prepared_turbomind(layer())
    with pytest.raises(ActivationError) as info:
        tm.apply(activations(4, 5120, dtype=torch.bfloat16))
    assert str(info.value) == "SM70 TurboMind FP8 requires float16 activations, got bfloat16"


def test_the_prescaled_m1_call_returns_the_layer_output():
    # 4.3: at M = 1 the prescaled decode entry produces the (1, N) output.
    ns, prepared = prepared_turbomind(fused_wqa_wkv(e8m0=True), options(**M1))
    assert run(ns, prepared.apply, activations(1, 4096)) == (
        ["fp8_gemm_sm70_prescaled_m1_out"],
        (1, 1536),
    )


# --- what the native calls receive (no plan key records it) --------------------------------


def capturing_namespace(*ops: str, returns: dict[str, Any]) -> tuple[InMemoryNamespace, dict]:
    """A double that returns `returns[op]` from each prepare op and keeps every dispatch
    call's keyword arguments, by op, in call order."""
    calls: dict[str, list[dict[str, Any]]] = {}

    def impl(op: str) -> Any:
        def call(**kwargs: Any) -> Any:
            calls.setdefault(op, []).append(kwargs)
            return returns.get(op)

        return call

    return InMemoryNamespace(ops, impls={op: impl(op) for op in ops}), calls


def test_the_block_qpn8_calls_receive_their_own_codes_scales_and_flag():
    # 2.3: decode (M <= 8) runs fp8_qpn8_gemm_sm70_out on the QPN8 codes and the FP32 scale
    # raster with "a literal true" as its flag; above it the TurboMind
    # copy's GEMM gets the copy's codes as weight and its scales as weight_scale.
    qpn8_codes = torch.empty((3584, 5120), dtype=torch.uint8)
    tm_codes = torch.empty((3584, 5120), dtype=torch.uint8)
    tm_scales = torch.empty((28, 40), dtype=torch.float32)
    ns, calls = capturing_namespace(
        QPN8_PREPARE,
        QPN8_GEMM,
        "fp8_sm70_prepare",
        GEMM,
        returns={QPN8_PREPARE: qpn8_codes, "fp8_sm70_prepare": (tm_codes, tm_scales, None)},
    )
    built = layer()
    prepared = fs.prepare_block_qpn8(
        built, built.checkpoint_tensors("meta"), ns, capability=70, turbomind_copy=True
    )
    prepared.apply(activations(8, 5120))
    prepared.apply(activations(9, 5120))
    (decode,) = calls[QPN8_GEMM]
    assert decode["codes"] is qpn8_codes
    assert decode["scales"] is prepared.resident["weight_scale_inv"]
    assert decode["flag"] is True
    (prefill,) = calls[GEMM]
    assert prefill["weight"] is tm_codes
    assert prefill["weight_scale"] is tm_scales


def test_each_group_of_a_pp2_tp4_wo_a_dispatches_with_the_bound_workspace():
    # 3.3 / 4.1: the grouped wo_a binds the PP2/TP4 workspace to its prefix once; every
    # group's dispatch gets that workspace.
    ops = (*fs.QPN8_LAYOUT_OPS, "fp8_sm70_prepare")
    ns, calls = capturing_namespace(
        *ops, returns={QPN8_PREPARE: torch.empty((1024, 4096), dtype=torch.uint8)}
    )
    ws = fs.Fp8Workspaces()
    built = wo_a()
    layout = fs.plan_turbomind(built, PP2, ns, ws)
    prepared = fs.prepare_turbomind(built, built.checkpoint_tensors("meta"), ns, layout, ws)
    prepared.apply(activations(4, 2, 4096))
    handles = [call["workspace"] for call in calls[QPN8_DISPATCH]]
    assert len(handles) == 2 and handles[0] == handles[1]
    assert isinstance(handles[0], int) and handles[0] > 0
    assert ws.bytes_json() == {"pp2_tp4": 2 * PP2_TP4_ELEMENTS}
