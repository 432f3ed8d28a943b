"""SM70 NVFP4 capability classes (docs/contracts/core.md §2.1), QPN2/QPN4 layout decisions,
preparation and dispatch through recording doubles."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from native.catalogue import CATALOGUE, KERNEL_NAMES
from native.kernels import LINEAR_KERNELS
from native.kernels import nvfp4_sm70 as nv
from native.layers import Nvfp4Layer
from routectl.errors import ActivationError
from routectl.namespaces.native_ns import InMemoryNamespace
from routectl.policy.selection import evaluate_kernel
from routectl.replay.harness import RecordingNamespace
from tests.contract_literals import QPN2_TUNING

QKVZ = "model.layers.0.linear_attn.in_proj_qkvz"
GATE_UP = "model.layers.0.mlp.gate_up_proj"
FULL = InMemoryNamespace(CATALOGUE.ops, abi={nv.QPN2_COMPACT_VERSION_GETTER: 1})
TM, QPN2, QPN4 = nv.TurboMindNvFp4LinearKernel, nv.Qpn2NvFp4LinearKernel, nv.Qpn4NvFp4LinearKernel


def layer(k: int = 5120, n: int = 4120, prefix: str = QKVZ, **changes) -> Nvfp4Layer:
    return dataclasses.replace(Nvfp4Layer.of(prefix, k, n), **changes)


def fp16(m: int, k: int) -> torch.Tensor:
    return torch.empty((m, k), dtype=torch.float16, device="meta")


# --- capability -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "capability, ok", [(70, True), (72, True), (75, False), (80, False), (61, False)]
)
def test_turbomind_capability_is_volta_only(capability, ok):
    for kernel in (TM, QPN2, QPN4):
        result, reason = kernel.is_supported(capability)
        assert result is ok
        if not ok:
            assert reason.code == "requires_sm70_or_sm72"
            # docs/contracts/core.md §2.1 quotes the core; the capability follows it.
            assert reason.message == (f"requires SM70 or SM72 (Volta), got capability {capability}")


def test_non_nvfp4_layers_are_refused_by_every_volta_class():
    for kernel in (TM, QPN2, QPN4):
        ok, reason = kernel.can_implement(object(), FULL)
        assert not ok and reason.code == "not_ct_nvfp4_layout"
        assert reason.message == "requires weight-only compressed-tensors NVFP4 layout"


def test_qpn2_admits_the_contract_layer_and_padding_shapes():
    for k, n in ((5120, 4120), (128, 1), (128, 33), (4352, 5120)):
        assert QPN2.can_implement(layer(k, n), FULL) == (True, None)


@pytest.mark.parametrize("k, ok", [(128, True), (256, True), (5000, False), (5120 + 64, False)])
def test_qpn2_k_alignment_boundary(k, ok):
    result, reason = QPN2.can_implement(layer(k, 4120), FULL)
    assert result is ok
    if not ok:
        assert reason.code == "k_not_multiple_of_128"
        assert reason.message == f"K % 128 != 0 (K={k})"


def test_qpn2_rank_k_and_n_rules():
    ok, reason = QPN2.can_implement(layer(weight_shape=(4120,)), FULL)
    assert (ok, reason.code) == (False, "packed_weight_rank") and "rank two" in reason.message
    ok, reason = QPN2.can_implement(layer(0, 4120), FULL)
    assert (ok, reason.code) == (False, "k_not_positive") and "K=0" in reason.message
    ok, reason = QPN2.can_implement(layer(5120, 0), FULL)
    assert (ok, reason.code) == (False, "n_not_positive") and "N=0" in reason.message


def test_qpn2_local_dimensions_must_match_the_packed_weight():
    ok, reason = QPN2.can_implement(layer(input_size=4096), FULL)
    assert (ok, reason.code) == (False, "local_dims_mismatch")
    assert "disagree" in reason.message and "input_size=4096" in reason.message
    ok, reason = QPN2.can_implement(layer(output_size=4128), FULL)
    assert (ok, reason.code) == (False, "local_dims_mismatch")


@pytest.mark.parametrize("n, ok", [(8704, True), (4096, True), (4128, False), (4120, False)])
def test_qpn2_gated_layers_need_n_multiple_of_64(n, ok):
    result, reason = QPN2.can_implement(layer(5120, n, GATE_UP), FULL)
    assert result is ok
    if not ok:
        assert reason.code == "gated_n_not_multiple_of_64"
        assert reason.message == f"fused gate/up requires N % 64 == 0 (N={n})"
    # The same width is fine for a plain projection: the rule is about fused gate/up calls.
    assert QPN2.can_implement(layer(5120, n), FULL) == (True, None)


def test_qpn2_checks_run_in_contract_order():
    # rank before K; K before local dimensions; local dimensions before gated; gated before ops
    bad_everything = layer(5000, 4128, GATE_UP, input_size=1)
    assert (
        QPN2.can_implement(dataclasses.replace(bad_everything, weight_shape=(1,)), FULL)[1].code
        == "packed_weight_rank"
    )
    assert QPN2.can_implement(bad_everything, FULL)[1].code == "k_not_multiple_of_128"
    bad_dims = layer(5120, 4128, GATE_UP, input_size=1)
    assert QPN2.can_implement(bad_dims, FULL)[1].code == "local_dims_mismatch"
    gated = layer(5120, 4128, GATE_UP)
    assert (
        QPN2.can_implement(gated, FULL.without(nv.QPN2_GEMM_OP))[1].code
        == "gated_n_not_multiple_of_64"
    )


@pytest.mark.parametrize("op", nv.QPN2_REQUIRED_OPS)
def test_qpn2_reports_each_missing_operator(op):
    ok, reason = QPN2.can_implement(layer(), FULL.without(op))
    assert not ok
    assert reason.code == "missing_native_ops"
    assert reason.message == f"missing native QPN2 operators: [{op}]"


def test_missing_operators_are_listed_in_required_order():
    ns = FULL.without(*nv.QPN2_REQUIRED_OPS)
    assert (
        QPN2.can_implement(layer(), ns)[1].message
        == "missing native QPN2 operators: [" + ", ".join(nv.QPN2_REQUIRED_OPS) + "]"
    )
    # Optional QPN2 ops (shared, prefill, compact) are preparation choices, not capability.
    optional = FULL.without(
        *nv.QPN2_SHARED_OPS, nv.QPN2_PREFILL_DISPATCH_OP, nv.QPN2_COMPACT_GEMM_OP
    )
    assert QPN2.can_implement(layer(), optional) == (True, None)


@pytest.mark.parametrize("op", nv.QPN4_REQUIRED_OPS)
def test_qpn4_reports_each_missing_operator(op):
    ok, reason = QPN4.can_implement(layer(4352, 5120), FULL.without(op))
    assert not ok and reason.message == f"missing native QPN4 operators: [{op}]"
    assert QPN4.can_implement(layer(4352, 5120), FULL) == (True, None)


def test_missing_operators_are_staged_as_ops_and_capability_first():
    assert evaluate_kernel(QPN2, 70, layer(), FULL.without(nv.QPN2_GATED_OP)).stage == "ops"
    assert evaluate_kernel(QPN2, 70, layer(5000, 4120), FULL).stage == "capability"
    result = evaluate_kernel(QPN2, 80, layer(5000, 4120), FULL)
    assert result.reason.code == "requires_sm70_or_sm72"


def test_turbomind_needs_no_native_operator_to_be_capable():
    assert TM.required_ops == ()
    assert TM.can_implement(layer(5000, 7), InMemoryNamespace(())) == (True, None)


# --- catalogue --------------------------------------------------------------------------


def test_catalogue_knows_every_kernel_and_op():
    assert KERNEL_NAMES == tuple(k.name for k in LINEAR_KERNELS)
    assert len(set(KERNEL_NAMES)) == len(KERNEL_NAMES)
    for kernel in LINEAR_KERNELS:
        assert CATALOGUE.kernels[kernel.name] == kernel.required_ops
        for op in kernel.required_ops:
            assert op in CATALOGUE.ops
    for name, spec in CATALOGUE.ops.items():
        assert spec.name == name
        if spec.getter:
            assert spec.returns == "int" and spec.fake is None
        elif spec.returns != "()":
            assert spec.fake is not None, name
    assert CATALOGUE.abi_getters == {QPN2.name: nv.QPN2_COMPACT_VERSION_GETTER}


def test_every_qpn2_dispatch_entry_takes_prefill_min_m_and_records_the_plan():
    for op in (nv.QPN2_DISPATCH_OP, nv.QPN2_PREFILL_DISPATCH_OP, nv.QPN2_TM_DISPATCH_OP):
        spec = CATALOGUE.op(op)
        assert "prefill_min_m" in spec.arg_names
        assert [k.key for k in spec.plan] == ["m", "split_k", "nacc", "gated", "prefill_min_m"]


# --- tuning table -----------------------------------------------------------------------


# The contract's table (2.1), not the implementation's: a changed entry must fail here.
@pytest.mark.parametrize("key, expected", sorted(QPN2_TUNING.items()))
def test_tabled_shapes_use_their_measured_configuration(key, expected):
    assert nv.qpn2_tuning(*key) == expected


@pytest.mark.parametrize(
    "k, n, gated, split_k",
    [
        (5120, 1024, False, 16),
        (5120, 1024, True, 8),
        (384, 1024, False, 8),
        (256, 32, False, 16),
        (4352, 5120, True, 8),
    ],
)
def test_untabled_shapes_use_the_rule(k, n, gated, split_k):
    assert (k, n, gated) not in QPN2_TUNING
    assert nv.qpn2_tuning(k, n, gated) == (split_k, 2)


# --- QPN2 layout decisions --------------------------------------------------------------


def plan(options: nv.Qpn2Options | None = None, ns=FULL, **layer_changes) -> nv.Qpn2Layout:
    return nv.plan_qpn2(layer(**layer_changes), options or nv.Qpn2Options(), ns)


@pytest.mark.parametrize("shared_native", [True, False])
@pytest.mark.parametrize("revision", [0, 1, 2])
@pytest.mark.parametrize("batch", [True, False])
def test_shared_weight_compact_scales_and_batch_prescale_rules(shared_native, revision, batch):
    ops = set(CATALOGUE.ops) - (set() if shared_native else set(nv.QPN2_SHARED_OPS))
    ns = InMemoryNamespace(ops, abi={nv.QPN2_COMPACT_VERSION_GETTER: revision})
    result = plan(nv.Qpn2Options(batch_layouts=batch), ns)
    assert result.shared_weight is shared_native
    assert result.compact_scales is (shared_native and revision >= 1 and not batch)
    assert result.batch_prescale is (shared_native and batch)
    assert result.padded_n == 4128


def test_missing_shared_ops_fall_back_to_separate_codes_with_a_reason():
    result = plan(ns=FULL.without(nv.QPN2_TM_DISPATCH_OP))
    assert not result.shared_weight and not result.compact_scales
    assert (
        dict(result.refusals)["shared_weight"].message
        == f"missing native shared QPN2 operators: [{nv.QPN2_TM_DISPATCH_OP}]"
    )
    assert result.entry == nv.QPN2_PREFILL_DISPATCH_OP


def test_shared_weight_off_by_policy_is_not_a_refusal():
    result = plan(nv.Qpn2Options(shared_weight=False))
    assert not result.shared_weight and result.refusals == ()
    assert result.compact_reason.code == "compact_needs_shared_weight"


@pytest.mark.parametrize(
    "options, ns, code, refused, message",
    [
        (
            nv.Qpn2Options(batch_layouts=True),
            FULL,
            "batch_layouts_supersede_compact",
            False,
            "batch GEMM layouts supersede compact scales",
        ),
        (
            nv.Qpn2Options(shared_scales=False),
            FULL,
            "shared_scales_off",
            False,
            "shared_scales is off",
        ),
        (
            nv.Qpn2Options(),
            FULL.without(nv.QPN2_COMPACT_GEMM_OP),
            "missing_native_ops",
            True,
            "missing native compact-scale operators: [nvfp4_qpn2_compact_tm_gemm_sm70_out]",
        ),
        (
            nv.Qpn2Options(),
            FULL.without(nv.QPN2_COMPACT_VERSION_GETTER),
            "missing_native_ops",
            True,
            "missing native compact-scale operators: [nvfp4_qpn2_compact_scales_version_sm70]",
        ),
        (
            nv.Qpn2Options(),
            InMemoryNamespace(CATALOGUE.ops, abi={nv.QPN2_COMPACT_VERSION_GETTER: 0}),
            "compact_abi_revision",
            True,
            "compact-scale ABI revision 0 < 1",
        ),
        (
            nv.Qpn2Options(qualified=False),
            FULL,
            "workload_unqualified",
            False,
            "compact scales need the qualified workload",
        ),
        (
            nv.Qpn2Options(shared_weight=False),
            FULL,
            "compact_needs_shared_weight",
            False,
            "compact scales need the shared packed weight",
        ),
    ],
)
def test_each_compact_scale_condition(options, ns, code, refused, message):
    # docs/contracts/core.md §2.1 "Compact scales: only when ...": each condition's code and
    # message; the build's refusals (op, ABI revision) become the shared_scales fallback's reason.
    result = plan(options, ns)
    assert not result.compact_scales
    assert (result.compact_reason.code, result.compact_reason.message) == (code, message)
    assert ("shared_scales" in dict(result.refusals)) is refused


@pytest.mark.parametrize(
    "prefill, shared, prefill_op, enabled",
    [
        (True, True, True, True),
        (True, True, False, True),
        (True, False, True, True),
        (True, False, False, False),
        (False, True, True, False),
        (False, False, True, False),
    ],
)
def test_prefill_enabled_rule(prefill, shared, prefill_op, enabled):
    ns = FULL if prefill_op else FULL.without(nv.QPN2_PREFILL_DISPATCH_OP)
    result = plan(nv.Qpn2Options(prefill=prefill, shared_weight=shared), ns)
    assert result.prefill_enabled is enabled
    assert ("prefill" in dict(result.refusals)) is (prefill and not enabled)
    if prefill and not enabled:
        # The reason the sm70_nvfp4.prefill fallback records.
        assert dict(result.refusals)["prefill"].message == (
            "missing native QPN2 prefill operators: [nvfp4_qpn2_prefill_dispatch_sm70_out]"
        )


@pytest.mark.parametrize(
    "shared, prefill, entry, min_m",
    [
        (True, True, nv.QPN2_TM_DISPATCH_OP, 777),
        (True, False, nv.QPN2_TM_DISPATCH_OP, 0),
        (False, True, nv.QPN2_PREFILL_DISPATCH_OP, 777),
        (False, False, nv.QPN2_DISPATCH_OP, 0),
    ],
)
def test_dispatch_entry_and_prefill_min_m(shared, prefill, entry, min_m):
    result = plan(nv.Qpn2Options(shared_weight=shared, prefill=prefill, prefill_min_m=777))
    assert (result.entry, result.dispatch_prefill_min_m) == (entry, min_m)


# --- QPN2 preparation and dispatch ------------------------------------------------------


def prepared_qpn2(options: nv.Qpn2Options, ns: RecordingNamespace, **layer_changes):
    spec = layer(**layer_changes)
    result = nv.plan_qpn2(spec, options, ns)
    return spec, result, nv.prepare_qpn2(spec, spec.checkpoint_tensors(), ns, result)


@pytest.mark.parametrize(
    "shared, prefill", [(True, True), (True, False), (False, True), (False, False)]
)
def test_qpn2_dispatch_records_the_entry_and_plan(shared, prefill):
    ns = RecordingNamespace(CATALOGUE)
    options = nv.Qpn2Options(shared_weight=shared, prefill=prefill, prefill_min_m=1024)
    _, result, prepared = prepared_qpn2(options, ns)
    mark = ns.mark()
    for m in (1, 8, 32, 64, 1024):
        out = prepared.apply(fp16(m, 5120))
        assert tuple(out.shape) == (m, 4120) and out.dtype == torch.float16
        # Outputs are allocated where the activations live (meta in replay, the GPU in use).
        assert out.device.type == "meta"
    calls = ns.since(mark)
    assert [c["op"] for c in calls] == [result.entry] * 5
    assert [c["plan"] for c in calls] == [
        {
            "m": m,
            "split_k": 16,
            "nacc": 2,
            "gated": False,
            "prefill_min_m": result.dispatch_prefill_min_m,
        }
        for m in (1, 8, 32, 64, 1024)
    ]


def test_qpn2_gated_call_uses_the_gated_tuning_and_half_width():
    ns = RecordingNamespace(CATALOGUE)
    _, result, prepared = prepared_qpn2(nv.Qpn2Options(), ns, k=5120, n=8704, prefix=GATE_UP)
    mark = ns.mark()
    out = prepared.apply_gated(fp16(3, 5120))
    assert tuple(out.shape) == (3, 4352)
    prepared.apply(fp16(3, 5120))
    assert [c["plan"]["gated"] for c in ns.since(mark)] == [True, False]
    assert ns.since(mark)[0]["plan"]["split_k"] == 8  # (5120, 8704, gated) = (8, 2)
    assert prepared_qpn2(nv.Qpn2Options(), RecordingNamespace(CATALOGUE))[2].apply_gated is None


def test_an_untabled_gated_shape_takes_the_gated_rule_and_a_half_width_output():
    # docs/contracts/core.md §2.1: (5120, 4096) is untabled: split_k = 8 if gated or K % 256 else
    # 16, so the fused gate/up call takes 8 and the plain call 16; the gated call writes N/2
    # columns.
    seen: list[tuple[str, dict]] = []

    def dispatch(**kwargs):
        seen.append((nv.QPN2_TM_DISPATCH_OP, kwargs))

    impls = {op: CATALOGUE.op(op).fake for op in (nv.TM_PREPARE_OP, nv.QPN2_PREPARE_SCALES_OP)}
    impls[nv.QPN2_TM_DISPATCH_OP] = dispatch
    ns = InMemoryNamespace(CATALOGUE.ops, impls=impls, abi={nv.QPN2_COMPACT_VERSION_GETTER: 1})
    spec = layer(5120, 4096, GATE_UP)
    result = nv.plan_qpn2(spec, nv.Qpn2Options(), ns)
    prepared = nv.prepare_qpn2(spec, spec.checkpoint_tensors(), ns, result)
    assert tuple(prepared.apply_gated(fp16(3, 5120)).shape) == (3, 2048)
    assert tuple(prepared.apply(fp16(3, 5120)).shape) == (3, 4096)
    assert [(op, kw["gated"], kw["split_k"], kw["nacc"]) for op, kw in seen] == [
        ("nvfp4_qpn2_tm_dispatch_sm70_out", True, 8, 2),
        ("nvfp4_qpn2_tm_dispatch_sm70_out", False, 16, 2),
    ]
    assert [tuple(kw["out"].shape) for _, kw in seen] == [(3, 2048), (3, 4096)]


@pytest.mark.parametrize(
    "prefill, scratch", [(True, {"qpn2_prefill_dequant": 42_270_720}), (False, {})]
)
def test_prefill_scratch_is_a_k_by_padded_n_fp16_buffer(prefill, scratch):
    # docs/contracts/core.md §2.1: M >= prefill_min_m dequantizes into invocation-owned FP16 scratch
    # of K x N padded to 32: 5120 x 4128 x 2 bytes; none when prefill is off.
    _, result, prepared = prepared_qpn2(
        nv.Qpn2Options(prefill=prefill), RecordingNamespace(CATALOGUE)
    )
    assert result.prefill_enabled is prefill
    assert prepared.scratch == scratch


def test_turbomind_preparation_records_its_plan_unprescaled_and_plain():
    # A TurboMind-only layer and a QPN2 layer without batch layouts or compact scales prepare
    # TurboMind state plain: not gated, not prescaled, not compact (docs/contracts/core.md §2.1).
    plain = {"n": 4128, "gated": False, "batch_prescale": False, "compact_scales": False}
    ns = RecordingNamespace(CATALOGUE)
    spec = layer()
    nv.prepare_turbomind(spec, spec.checkpoint_tensors(), ns)
    assert ns.calls == [{"op": "nvfp4_sm70_prepare", "plan": plain}]
    ns = RecordingNamespace(CATALOGUE)
    prepared_qpn2(nv.Qpn2Options(shared_scales=False), ns, k=5120, n=4096, prefix=GATE_UP)
    assert ns.calls[0] == {"op": "nvfp4_sm70_prepare", "plan": {**plain, "n": 4096}}


def test_zero_tokens_launch_nothing_and_non_fp16_is_an_error():
    ns = RecordingNamespace(CATALOGUE)
    _, _, prepared = prepared_qpn2(nv.Qpn2Options(), ns)
    mark = ns.mark()
    assert tuple(prepared.apply(fp16(0, 5120)).shape) == (0, 4120)
    assert ns.since(mark) == []
    with pytest.raises(
        ActivationError, match="^SM70 NVFP4 QPN2 requires float16 activations, got bfloat16$"
    ):
        prepared.apply(torch.empty((4, 5120), dtype=torch.bfloat16, device="meta"))
    assert ns.since(mark) == []


def test_leading_dimensions_are_flattened_into_tokens():
    ns = RecordingNamespace(CATALOGUE)
    _, _, prepared = prepared_qpn2(nv.Qpn2Options(), ns)
    mark = ns.mark()
    out = prepared.apply(torch.empty((2, 3, 5120), dtype=torch.float16, device="meta"))
    assert tuple(out.shape) == (2, 3, 4120)
    assert ns.since(mark)[0]["plan"]["m"] == 6


def test_separate_codes_count_a_second_copy_padding_included():
    shared = prepared_qpn2(nv.Qpn2Options(), RecordingNamespace(CATALOGUE))[2]
    separate = prepared_qpn2(nv.Qpn2Options(shared_weight=False), RecordingNamespace(CATALOGUE))[2]
    padded_codes = 4128 * 5120 // 2
    assert "qpn2_codes" not in shared.resident
    assert separate.resident["qpn2_codes"].numel() == padded_codes
    assert separate.resident["tm_codes"].numel() == padded_codes


def test_compact_scales_shrink_the_turbomind_scales():
    compact = prepared_qpn2(nv.Qpn2Options(), RecordingNamespace(CATALOGUE))[2]
    wide = prepared_qpn2(nv.Qpn2Options(batch_layouts=True), RecordingNamespace(CATALOGUE))[2]
    for prepared, size in ((compact, 1), (wide, 2)):
        scales = prepared.resident["tm_scales"]
        assert scales.numel() == 4128 * 320 and scales.element_size() == size


def test_preparation_records_shared_or_separate_ops():
    for shared, op in ((True, nv.QPN2_PREPARE_SCALES_OP), (False, nv.QPN2_PREPARE_OP)):
        ns = RecordingNamespace(CATALOGUE)
        prepared_qpn2(nv.Qpn2Options(shared_weight=shared), ns)
        assert [c["op"] for c in ns.calls] == [nv.TM_PREPARE_OP, op]
        assert ns.calls[1]["plan"] == {"n": 4128}


# --- QPN4 -------------------------------------------------------------------------------


def test_qpn4_dispatch_passes_a_k_by_n_fp16_workspace():
    seen: list[dict] = []

    def record(**kwargs):
        seen.append(kwargs)

    ns = InMemoryNamespace(
        CATALOGUE.ops,
        impls={
            nv.QPN4_PREPARE_OP: CATALOGUE.op(nv.QPN4_PREPARE_OP).fake,
            nv.QPN4_PREPARE_SCALE_CODE_OP: CATALOGUE.op(nv.QPN4_PREPARE_SCALE_CODE_OP).fake,
            nv.QPN4_DISPATCH_OP: record,
        },
    )
    spec = layer(4352, 5120, "model.layers.0.mlp.down_proj")
    prepared = nv.prepare_qpn4(spec, spec.checkpoint_tensors(), ns, nv.Qpn4Options())
    assert prepared.apply_gated is None
    out = prepared.apply(fp16(5, 4352))
    assert tuple(out.shape) == (5, 5120)
    (call,) = seen
    assert call["workspace"].numel() == nv.qpn4_workspace_elements(spec) == 4352 * 5120
    assert call["workspace"].dtype == torch.float16 and call["gated"] is False
    assert prepared.scratch == {"qpn4_dense_workspace": 4352 * 5120 * 2}
    assert set(prepared.resident) == {
        "qpn4_codes",
        "qpn4_scales",
        "qpn4_scale_codes",
        "weight_global_scale",
    }
    with pytest.raises(
        ActivationError, match="^SM70 NVFP4 QPN4 requires float16 activations, got float32$"
    ):
        prepared.apply(torch.empty((5, 4352), dtype=torch.float32, device="meta"))


def test_qpn4_gated_layout_prepares_interleaved_and_serves_half_width():
    ns = RecordingNamespace(CATALOGUE)
    spec = layer(5120, 8704, GATE_UP)
    prepared = nv.prepare_qpn4(spec, spec.checkpoint_tensors(), ns, nv.Qpn4Options(gated=True))
    assert [c["plan"]["gated"] for c in ns.calls] == [True, True]
    mark = ns.mark()
    assert tuple(prepared.apply_gated(fp16(1, 5120)).shape) == (1, 4352)
    assert ns.since(mark) == [{"op": nv.QPN4_DISPATCH_OP, "plan": {"m": 1, "gated": True}}]
    assert prepared.apply(fp16(0, 5120)).shape[0] == 0
    assert len(ns.since(mark)) == 1


def test_each_class_plans_its_layout_and_every_flag():
    # The decision's five flags (docs/contracts/core.md §2.1): a TurboMind-only layer has none of
    # them on; QPN2 keeps the layout it planned for the loaded layer.
    off = {
        "shared_weight": False,
        "prefill_enabled": False,
        "compact_scales": False,
        "batch_prescale": False,
        "gated": False,
    }
    turbomind = TM.plan(layer(), nv.Nvfp4Setup(), RecordingNamespace(CATALOGUE))
    assert (turbomind.layout, dict(turbomind.flags)) == ("nvfp4", off)
    prepared = turbomind.prepare(layer().checkpoint_tensors())
    assert set(prepared.resident) == {"tm_codes", "tm_scales", "weight_global_scale"}
    qpn4 = QPN4.plan(layer(), nv.Nvfp4Setup(), FULL)
    assert (qpn4.layout, dict(qpn4.flags)) == ("nvfp4_qpn4", off)
    qpn2 = QPN2.plan(layer(), nv.Nvfp4Setup(), FULL)
    assert qpn2.layout == "nvfp4_qpn2"
    on = {"shared_weight": True, "prefill_enabled": True, "compact_scales": True}
    assert dict(qpn2.flags) == {**off, **on}
    assert set(qpn2.state) == {"plan"} and qpn2.state["plan"].compact_scales is True


def test_turbomind_only_preparation_has_no_dispatch():
    ns = RecordingNamespace(CATALOGUE)
    spec = layer(5000, 4120)
    prepared = nv.prepare_turbomind(spec, spec.checkpoint_tensors(), ns)
    assert prepared.apply is None
    assert [c["op"] for c in ns.calls] == [nv.TM_PREPARE_OP]
    assert set(prepared.resident) == {"tm_codes", "tm_scales", "weight_global_scale"}
