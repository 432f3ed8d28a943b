"""Selectors and load functions of the three linear families: priority order, verdicts of
every candidate, policy/qualification/disabled reasons before capability, linear_backend per
family, fail-closed AWQ outcomes, fallbacks and the recorded dispatch plans."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

from native.catalogue import CATALOGUE
from native.kernels import awq_dense as awq
from native.kernels import nvfp4_sm70 as nv
from native.kernels import turing as tu
from native.layers import AwqLayer, Fp8Layer, Nvfp4Layer
from policies import PROJECT
from policies.linear_awq import load_awq_dense
from policies.linear_nvfp4 import load_nvfp4_sm70
from policies.linear_turing import load_turing_fp8, load_turing_nvfp4
from policies.variables import field
from routectl.errors import InputError, SelectionError
from routectl.policy.resolve import PolicyDeprecationWarning
from routectl.replay.harness import RecordingNamespace
from routectl.workload import EngineConfig, Hardware
from tests.contract_literals import AWQ_DENSE_ORDER, NVFP4_SM70_ORDER

ROOT = Path(__file__).resolve().parents[1]
QUALIFIED = EngineConfig(
    tp=4,
    pp=1,
    spec_method="dflash",
    spec_tokens=7,
    selector_top_k=16,
    max_num_seqs=4,
    max_num_batched_tokens=8192,
    kv_dtype="fp8_e4m3",
)
SINGLE = EngineConfig(tp=4, spec_method="none", max_num_seqs=1, kv_dtype="fp8_e4m3")
PLAIN = EngineConfig(tp=4, spec_method="none", max_num_seqs=4, kv_dtype="fp8_e4m3")
QKVZ = "model.layers.0.linear_attn.in_proj_qkvz"
DOWN = "model.layers.0.mlp.down_proj"
GATE_UP = "model.layers.0.mlp.gate_up_proj"
QKV = "model.layers.0.self_attn.qkv_proj"


def var(key: str) -> str:
    variable = field(key).variable
    assert variable is not None
    return variable


BATCH_OFF = {var("sm70_turbomind.batch_layouts"): "0"}
DISABLED = var("disabled_kernels")


def policy(
    env: dict[str, str] | None = None,
    config=None,
    *,
    capability: int = 70,
    engine: EngineConfig = QUALIFIED,
):
    # Deprecation warnings are the resolver's tests' business; these tests are about routes.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyDeprecationWarning)
        return PROJECT.resolve(config, env or {}, Hardware(capability), engine)


def ns(remove: tuple[str, ...] = (), abi: dict[str, int] | None = None) -> RecordingNamespace:
    return RecordingNamespace(CATALOGUE, remove=remove, abi=abi)


def names(selection) -> list[str]:
    return [v.name for v in selection.verdicts]


def verdict(decision_or_error, name: str):
    verdicts = getattr(decision_or_error, "verdicts", None)
    if verdicts is None:
        verdicts = decision_or_error.selection.verdicts
    return next(v for v in verdicts if v.name == name)


def fp16(m: int, k: int) -> torch.Tensor:
    return torch.empty((m, k), dtype=torch.float16, device="meta")


# --- SM70 NVFP4 -------------------------------------------------------------------------


def nvfp4(
    env=None,
    layer=None,
    *,
    engine=QUALIFIED,
    capability=70,
    namespace=None,
    tensors=False,
    workspace=None,
    config=None,
):
    spec = layer or Nvfp4Layer.of(QKVZ, 5120, 4120)
    return load_nvfp4_sm70(
        spec,
        policy(env, config, capability=capability, engine=engine),
        Hardware(capability),
        engine,
        namespace or ns(),
        tensors=spec.checkpoint_tensors() if tensors else None,
        workspace=workspace,
    )


def test_golden_qualified_in_proj_qkvz_selects_shared_compact_qpn2():
    recorder = ns()
    loaded = nvfp4(BATCH_OFF, namespace=recorder, tensors=True)
    decision = loaded.decision
    assert decision.kernel == nv.Qpn2NvFp4LinearKernel.name
    assert names(decision.selection) == NVFP4_SM70_ORDER
    qpn4 = verdict(decision, nv.Qpn4NvFp4LinearKernel.name)
    assert (qpn4.ok, qpn4.stage, qpn4.not_needed) == (False, "qualification", False)
    tm = verdict(decision, nv.TurboMindNvFp4LinearKernel.name)
    assert (tm.ok, tm.not_needed) == (True, True)
    assert decision.layout == nv.LAYOUT_QPN2 and decision.fallbacks == ()
    assert dict(decision.flags) == {
        "shared_weight": True,
        "prefill_enabled": True,
        "compact_scales": True,
        "batch_prescale": False,
        "gated": False,
    }
    assert not decision.selection.fallback
    assert decision.capability == 70
    # The loaded layer keeps the QPN2 layout it was prepared with, with or without tensors.
    assert set(loaded.state) == {"plan"} and loaded.state["plan"].compact_scales is True
    assert set(nvfp4(BATCH_OFF).state) == {"plan"}
    # Prefill dequantizes into K x N-padded FP16 scratch: 5120 x 4128 x 2 bytes
    # (docs/contracts/core.md §2.1).
    assert loaded.scratch == {"qpn2_prefill_dequant": 42_270_720}
    mark = recorder.mark()
    for m in (1, 8, 32, 64, 1024):
        loaded.apply(fp16(m, 5120))
    assert recorder.since(mark) == [
        {
            "op": "nvfp4_qpn2_tm_dispatch_sm70_out",
            "plan": {"m": m, "split_k": 16, "nacc": 2, "gated": False, "prefill_min_m": 1024},
        }
        for m in (1, 8, 32, 64, 1024)
    ]
    total = loaded.bytes_json()["total"]
    assert total == sum(t.numel() * t.element_size() for t in loaded.resident.values())


def test_batch_layouts_supersede_compact_scales_with_batch_prescale():
    flags = dict(nvfp4().decision.flags)
    assert (flags["compact_scales"], flags["batch_prescale"]) == (False, True)
    assert nvfp4().decision.fallbacks == ()  # a policy interplay, not a refusal


@pytest.mark.parametrize("capability", [72, 75, 80])
def test_family_is_entered_only_on_exactly_sm70(capability):
    decision = nvfp4(capability=capability).decision
    assert decision.kernel is None and decision.status[0] == "not_sm70"
    assert str(capability) in decision.status[1]
    # Not entered: no candidate was evaluated, and the decision keeps the capability.
    assert decision.selection.verdicts == () and decision.capability == capability
    assert decision.status[1] == (
        f"the SM70 NVFP4 weight-only family needs capability exactly 70, got {capability}"
    )


@pytest.mark.parametrize(
    "env, entered",
    [
        ({var("sm70_turbomind.quant_backend"): "marlin"}, False),
        ({var("sm70_turbomind.nvfp4"): "0"}, False),
        (
            {var("sm70_turbomind.nvfp4"): "0", var("sm70_turbomind.quant_backend"): "turbomind"},
            True,
        ),
        ({var("sm70_turbomind.quant_backend"): "auto"}, True),
    ],
)
def test_family_entry_follows_use_turbomind(env, entered):
    decision = nvfp4(env).decision
    assert (decision.kernel is not None) is entered
    if not entered:
        assert decision.status[0] == "turbomind_nvfp4_off"
        assert decision.status[1].startswith("use_turbomind(sm70_turbomind.nvfp4) is false (nvfp4=")


@pytest.mark.parametrize(
    "env, engine, code, stage",
    [
        ({var("sm70_nvfp4.qpn2"): "0"}, QUALIFIED, "qpn2_disabled", "policy"),
        ({}, PLAIN, "qpn2_disabled", "policy"),  # qpn2 defaults to workload qualified
    ],
)
def test_qpn2_off_or_unqualified_workload_selects_turbomind(env, engine, code, stage):
    decision = nvfp4(env, engine=engine).decision
    assert decision.kernel == nv.TurboMindNvFp4LinearKernel.name
    qpn2 = verdict(decision, nv.Qpn2NvFp4LinearKernel.name)
    assert (qpn2.code, qpn2.stage) == (code, stage)
    assert qpn2.message == "QPN2 disabled by configuration or unqualified workload"
    assert not decision.selection.fallback and decision.fallbacks == ()


def test_unqualified_role_retains_turbomind_without_fallback():
    decision = nvfp4(
        layer=Nvfp4Layer.of("model.layers.0.unqualified_projection", 5120, 4120)
    ).decision
    qpn2 = verdict(decision, nv.Qpn2NvFp4LinearKernel.name)
    assert decision.kernel == nv.TurboMindNvFp4LinearKernel.name
    assert (qpn2.code, qpn2.stage) == ("qpn2_role_unqualified", "qualification")
    assert not decision.selection.fallback


def test_explicit_qpn2_on_an_unqualified_workload_still_loses_compact_scales():
    decision = nvfp4({var("sm70_nvfp4.qpn2"): "1", **BATCH_OFF}, engine=PLAIN).decision
    assert decision.kernel == nv.Qpn2NvFp4LinearKernel.name
    assert decision.flags["compact_scales"] is False
    assert decision.flags["prefill_enabled"] is False  # prefill defaults to qualified too


def test_misaligned_k_falls_back_to_turbomind_with_a_k_reason():
    decision = nvfp4(layer=Nvfp4Layer.of(QKVZ, 5000, 4120)).decision
    assert decision.kernel == nv.TurboMindNvFp4LinearKernel.name
    qpn2 = verdict(decision, nv.Qpn2NvFp4LinearKernel.name)
    assert (qpn2.code, qpn2.message) == ("k_not_multiple_of_128", "K % 128 != 0 (K=5000)")
    assert decision.selection.fallback
    (fallback,) = decision.fallbacks
    assert (fallback.field, fallback.requested, fallback.effective) == (
        "sm70_nvfp4.qpn2",
        True,
        False,
    )
    assert "K % 128" in fallback.reason


def test_missing_qpn2_ops_fall_back_but_compact_op_alone_does_not_matter():
    removed = (
        *nv.QPN2_REQUIRED_OPS,
        *nv.QPN4_REQUIRED_OPS,
        *nv.QPN2_SHARED_OPS,
        nv.QPN2_PREFILL_DISPATCH_OP,
    )
    decision = nvfp4(namespace=ns(removed)).decision
    assert decision.kernel == nv.TurboMindNvFp4LinearKernel.name
    assert verdict(decision, nv.Qpn2NvFp4LinearKernel.name).stage == "ops"
    assert decision.selection.fallback


def test_shared_native_missing_keeps_qpn2_with_separate_codes():
    recorder = ns(nv.QPN2_SHARED_OPS)
    loaded = nvfp4(BATCH_OFF, namespace=recorder, tensors=True)
    decision = loaded.decision
    assert decision.kernel == nv.Qpn2NvFp4LinearKernel.name
    assert decision.flags["shared_weight"] is False and decision.flags["prefill_enabled"]
    assert [f.field for f in decision.fallbacks] == ["sm70_nvfp4.shared_weight"]
    assert "qpn2_codes" in loaded.resident
    mark = recorder.mark()
    loaded.apply(fp16(8, 5120))
    assert recorder.since(mark)[0]["op"] == nv.QPN2_PREFILL_DISPATCH_OP


def test_compact_revision_zero_records_a_shared_scales_fallback():
    decision = nvfp4(BATCH_OFF, namespace=ns(abi={nv.QPN2_COMPACT_VERSION_GETTER: 0})).decision
    assert decision.flags["shared_weight"] and not decision.flags["compact_scales"]
    (fallback,) = decision.fallbacks
    assert fallback.field == "sm70_nvfp4.shared_scales" and "revision 0" in fallback.reason


@pytest.mark.parametrize(
    "env, flag, value",
    [
        ({var("sm70_nvfp4.prefill"): "0"}, "prefill_enabled", False),
        ({var("sm70_nvfp4.shared_weight"): "0"}, "shared_weight", False),
        ({var("sm70_nvfp4.shared_scales"): "0", **BATCH_OFF}, "compact_scales", False),
    ],
)
def test_deprecated_overrides_change_the_layer(env, flag, value):
    decision = nvfp4(env).decision
    assert decision.kernel == nv.Qpn2NvFp4LinearKernel.name
    assert decision.flags[flag] is value
    assert decision.fallbacks == ()


def test_prefill_min_m_reaches_the_dispatch_plan():
    recorder = ns()
    loaded = nvfp4({var("sm70_nvfp4.prefill_min_m"): "9"}, namespace=recorder, tensors=True)
    mark = recorder.mark()
    loaded.apply(fp16(1, 5120))
    assert recorder.since(mark)[0]["plan"]["prefill_min_m"] == 9


def test_gated_projection_uses_the_gated_table_entry():
    recorder = ns()
    loaded = nvfp4(
        BATCH_OFF, layer=Nvfp4Layer.of(GATE_UP, 5120, 8704), namespace=recorder, tensors=True
    )
    assert loaded.decision.kernel == nv.Qpn2NvFp4LinearKernel.name
    assert loaded.decision.flags["compact_scales"] and not loaded.decision.flags["gated"]
    mark = recorder.mark()
    loaded.apply(fp16(1, 5120))
    assert recorder.since(mark)[0]["plan"]["split_k"] == 8


QPN4_DOWN = Nvfp4Layer.of(DOWN, 4352, 5120)


def test_qpn4_serves_down_proj_for_one_sequence_without_speculation():
    decision = nvfp4(layer=QPN4_DOWN, engine=SINGLE).decision
    assert decision.kernel == nv.Qpn4NvFp4LinearKernel.name
    assert decision.layout == nv.LAYOUT_QPN4
    assert all(v.not_needed for v in decision.selection.verdicts[1:])


@pytest.mark.parametrize(
    "workspace, kernel",
    [
        (4352 * 5120, nv.Qpn4NvFp4LinearKernel.name),
        (None, nv.Qpn4NvFp4LinearKernel.name),
        (4352 * 5120 - 1, nv.TurboMindNvFp4LinearKernel.name),
    ],
)
def test_qpn4_workspace_boundary_reselects_without_qpn4(workspace, kernel):
    decision = nvfp4(layer=QPN4_DOWN, engine=SINGLE, workspace=workspace).decision
    assert decision.kernel == kernel
    if kernel != nv.Qpn4NvFp4LinearKernel.name:
        qpn4 = verdict(decision, nv.Qpn4NvFp4LinearKernel.name)
        assert (qpn4.code, qpn4.stage) == ("insufficient_qpn4_workspace", "workspace")
        assert qpn4.message.startswith("insufficient QPN4 workspace")
        assert decision.selection.fallback
        assert [f.field for f in decision.fallbacks] == ["sm70_nvfp4.qpn4"]


def test_qpn4_off_and_qpn4_native_missing():
    off = nvfp4({var("sm70_nvfp4.qpn4"): "0"}, layer=QPN4_DOWN, engine=SINGLE).decision
    qpn4 = verdict(off, nv.Qpn4NvFp4LinearKernel.name)
    assert (off.kernel, qpn4.code, qpn4.stage) == (
        nv.TurboMindNvFp4LinearKernel.name,
        "qpn4_disabled",
        "policy",
    )
    assert qpn4.message.startswith("QPN4 disabled or outside the qualified workload")
    missing = nvfp4(layer=QPN4_DOWN, engine=SINGLE, namespace=ns((nv.QPN4_DISPATCH_OP,))).decision
    assert missing.kernel == nv.TurboMindNvFp4LinearKernel.name and missing.selection.fallback


def test_qpn4_gate_needs_dense_gated_silu_and_prepares_gated():
    spec = Nvfp4Layer.of(GATE_UP, 5120, 8704)
    plain = nvfp4(layer=spec, engine=SINGLE).decision
    assert (
        verdict(plain, nv.Qpn4NvFp4LinearKernel.name).code == "qpn4_gate_up_needs_dense_gated_silu"
    )
    loaded = nvfp4(
        {var("sm70_nvfp4.dense_gated_silu"): "1"}, layer=spec, engine=SINGLE, tensors=True
    )
    assert loaded.decision.kernel == nv.Qpn4NvFp4LinearKernel.name
    assert loaded.decision.flags["gated"] is True and loaded.apply_gated is not None


def test_dense_gated_silu_never_prepares_a_down_proj_gated():
    # docs/contracts/core.md §4: dense_gated_silu concerns gate_up_proj only; a QPN4 down_proj with
    # it on is prepared plain and has no gated apply.
    loaded = nvfp4(
        {var("sm70_nvfp4.dense_gated_silu"): "1"}, layer=QPN4_DOWN, engine=SINGLE, tensors=True
    )
    assert loaded.decision.kernel == "Qpn4NvFp4LinearKernel"
    assert loaded.decision.flags["gated"] is False and loaded.apply_gated is None


def test_qpn4_qualification_reason_names_the_layer_rule():
    # docs/contracts/core.md §4: a QPN4 down_proj needs N == 5120; the reason keeps the selector's
    # core text (docs/contracts/core.md §2.1, "QPN4 off or outside the qualified workload") and the
    # rule's.
    decision = nvfp4(layer=Nvfp4Layer.of(DOWN, 4352, 4096), engine=SINGLE).decision
    qpn4 = verdict(decision, "Qpn4NvFp4LinearKernel")
    assert (qpn4.code, qpn4.stage, qpn4.message) == (
        "qpn4_down_n",
        "qualification",
        "QPN4 disabled or outside the qualified workload: QPN4 down_proj needs N == 5120 (N=4096)",
    )


def test_disabled_kernels_by_variable_and_by_config():
    by_var = nvfp4({DISABLED: nv.Qpn2NvFp4LinearKernel.name}).decision
    by_config = nvfp4(config={"disabled_kernels": [nv.Qpn2NvFp4LinearKernel.name]}).decision
    for decision in (by_var, by_config):
        qpn2 = verdict(decision, nv.Qpn2NvFp4LinearKernel.name)
        assert decision.kernel == nv.TurboMindNvFp4LinearKernel.name
        assert (qpn2.code, qpn2.stage) == ("disabled_kernel", "disabled")
        assert qpn2.message == f"disabled by {DISABLED}"
        assert not decision.selection.fallback


def test_qpn4_disabled_by_name_leaves_the_down_proj_to_the_next_candidate():
    # docs/contracts/core.md §2.1: "in disabled_kernels" is a selector reason of every candidate.
    decision = nvfp4({DISABLED: "Qpn4NvFp4LinearKernel"}, layer=QPN4_DOWN, engine=SINGLE).decision
    qpn4 = verdict(decision, "Qpn4NvFp4LinearKernel")
    assert decision.kernel == "TurboMindNvFp4LinearKernel"
    assert (qpn4.code, qpn4.stage, qpn4.message) == (
        "disabled_kernel",
        "disabled",
        f"disabled by {DISABLED}",
    )


def test_upstream_kernel_names_are_accepted_and_change_nothing():
    decision = nvfp4({DISABLED: "MarlinNvFp4LinearKernel, CutlassNvFp4LinearKernel"}).decision
    assert decision.kernel == nv.Qpn2NvFp4LinearKernel.name


@pytest.mark.parametrize(
    "typo, suggestion",
    [
        ("Qpn2NvFp4LinearKernal", "Qpn2NvFp4LinearKernel"),
        ("TurboMindAwqKernel", "TurboMindAwqLinearKernel"),
    ],
)
def test_unknown_kernel_names_are_input_errors_with_a_suggestion(typo, suggestion):
    with pytest.raises(InputError, match=f"did you mean {suggestion}"):
        policy({DISABLED: typo})
    with pytest.raises(InputError, match=typo):
        policy(config={"disabled_kernels": [typo]})


def test_nothing_can_serve_lists_every_candidate():
    every = ",".join(NVFP4_SM70_ORDER)
    with pytest.raises(SelectionError) as info:
        nvfp4({DISABLED: every})
    error = info.value
    assert error.code == "no_kernel"
    assert [v.name for v in error.verdicts] == NVFP4_SM70_ORDER
    for name in NVFP4_SM70_ORDER:
        assert name in error.message
    assert f"disabled by {DISABLED}" in error.message
    assert error.message.startswith(f"no SM70 NVFP4 weight-only kernel can serve {QKVZ}: ")


def test_nvfp4_ignores_linear_backend():
    for backend in ("marlin", "cutlass", "turbomind"):
        decision = nvfp4(config={"linear_backend": backend}).decision
        assert decision.kernel == nv.Qpn2NvFp4LinearKernel.name


# --- Turing -----------------------------------------------------------------------------

TURING_NVFP4 = Nvfp4Layer.of(QKVZ, 5120, 4120)
TURING_FP8 = Fp8Layer.of(QKV, 5120, 3584)


def turing(load, spec, env=None, config=None, *, capability=75, namespace=None, tensors=False):
    return load(
        spec,
        policy(env, config, capability=capability, engine=PLAIN),
        Hardware(capability),
        PLAIN,
        namespace or ns(),
        tensors=spec.checkpoint_tensors() if tensors else None,
    )


@pytest.mark.parametrize(
    "load, spec, kernel",
    [
        (load_turing_nvfp4, TURING_NVFP4, tu.TuringQpn2NvFp4LinearKernel),
        (load_turing_fp8, TURING_FP8, tu.TuringQpn8Fp8LinearKernel),
    ],
)
def test_turing_default_selects_the_qpn_kernel(load, spec, kernel):
    loaded = turing(load, spec, tensors=True)
    assert loaded.decision.kernel == kernel.name and loaded.apply is not None
    assert loaded.decision.status is None


@pytest.mark.parametrize(
    "load, spec", [(load_turing_nvfp4, TURING_NVFP4), (load_turing_fp8, TURING_FP8)]
)
@pytest.mark.parametrize(
    "backend, served", [("auto", True), ("turbomind", True), ("marlin", False), ("cutlass", False)]
)
def test_turing_linear_backend_is_not_an_error(load, spec, backend, served):
    kernel_name = {
        load_turing_nvfp4: "TuringQpn2NvFp4LinearKernel",
        load_turing_fp8: "TuringQpn8Fp8LinearKernel",
    }
    decision = turing(load, spec, config={"linear_backend": backend}).decision
    assert (decision.kernel is not None) is served
    if not served:
        assert decision.status[0] == "backend_not_selected"
        assert decision.selection.verdicts[0].code == "backend_not_selected"
        assert backend in decision.status[1]
        # docs/contracts/core.md §2.2: policy is checked first; the filter is a policy verdict,
        # which the startup report records by stage, and the decision keeps the capability.
        (only,) = decision.selection.verdicts
        assert (only.name, only.stage) == (kernel_name[load], "policy")
        assert decision.capability == 75
        assert (
            only.message
            == decision.status[1]
            == (
                f"linear_backend={backend} selects another backend; Turing QPN kernels serve "
                "only auto or turbomind"
            )
        )


@pytest.mark.parametrize(
    "env, config, code",
    [
        ({}, {"sm70_nvfp4": {"dense_qpn2": False}}, "dense_qpn2_disabled"),
        ({var("sm70_turbomind.nvfp4"): "0"}, None, "legacy_backend_override"),
        ({var("sm70_turbomind.quant_backend"): "marlin"}, None, "legacy_backend_override"),
    ],
)
def test_turing_nvfp4_policy_reasons_leave_it_to_upstream(env, config, code):
    decision = turing(load_turing_nvfp4, TURING_NVFP4, env, config).decision
    (only,) = decision.selection.verdicts
    assert decision.kernel is None and decision.status[0] == "upstream_kernel"
    assert (only.code, only.stage) == (code, "policy")
    assert not decision.selection.fallback


@pytest.mark.parametrize(
    "env, config",
    [
        ({}, {"sm70_fp8": {"enabled": False}}),
        ({var("sm70_fp8.enabled"): "0"}, None),
        ({var("sm70_turbomind.quant_backend"): "marlin"}, None),
        # A typed enabled=True does not beat the marlin override: QPN8 checks both.
        ({var("sm70_turbomind.quant_backend"): "marlin"}, {"sm70_fp8": {"enabled": True}}),
    ],
)
def test_turing_fp8_policy_reasons(env, config):
    decision = turing(load_turing_fp8, TURING_FP8, env, config).decision
    assert decision.kernel is None
    assert decision.selection.verdicts[0].code == "qpn8_disabled"


def test_turing_policy_precedes_capability_and_capability_is_a_fallback():
    off = turing(
        load_turing_nvfp4, TURING_NVFP4, config={"sm70_nvfp4": {"dense_qpn2": False}}, capability=70
    ).decision
    assert off.selection.verdicts[0].code == "dense_qpn2_disabled"
    volta = turing(load_turing_nvfp4, TURING_NVFP4, capability=70).decision
    assert volta.selection.verdicts[0].code == "requires_sm75"
    assert volta.selection.verdicts[0].stage == "capability" and volta.selection.fallback


def test_turing_disabled_kernel_and_missing_ops():
    disabled = turing(
        load_turing_fp8, TURING_FP8, {DISABLED: tu.TuringQpn8Fp8LinearKernel.name}
    ).decision
    assert disabled.selection.verdicts[0].stage == "disabled"
    missing = turing(load_turing_fp8, TURING_FP8, namespace=ns((tu.QPN8_PREFILL_OP,))).decision
    assert missing.kernel is None and missing.selection.verdicts[0].stage == "ops"
    assert tu.QPN8_PREFILL_OP in missing.status[1]


def test_turing_layer_rules_reach_the_verdict():
    decision = turing(load_turing_nvfp4, Nvfp4Layer.of(QKVZ, 5000, 4120)).decision
    assert decision.selection.verdicts[0].code == "k_not_multiple_of_128"


# --- AWQ dense --------------------------------------------------------------------------

AWQ_QKV = AwqLayer.of(QKV, 2560, 3584, 32)
AWQ_DOWN = AwqLayer.of(DOWN, 2560, 2560, 128)
AWQ_ENGINE = dataclasses.replace(PLAIN, tp=4)


def awq_load(
    spec=AWQ_QKV,
    env=None,
    config=None,
    *,
    capability=70,
    namespace=None,
    tensors=False,
    workspace=None,
    engine=AWQ_ENGINE,
):
    return load_awq_dense(
        spec,
        policy(env, config, capability=capability, engine=engine),
        Hardware(capability),
        engine,
        namespace or ns(),
        tensors=spec.checkpoint_tensors() if tensors else None,
        workspace=workspace,
    )


def test_awq_default_selects_turbomind_and_triton_is_not_needed():
    decision = awq_load().decision
    assert decision.kernel == awq.TurboMindAwqLinearKernel.name
    triton = verdict(decision, awq.TritonAwqLinearKernel.name)
    assert (triton.ok, triton.not_needed, triton.code) == (False, True, "turbomind_route_admitted")
    assert decision.layout == awq.LAYOUT_TURBOMIND
    assert dict(decision.flags) == {"gated": False, "exact_dense": False, "fused_gated_call": False}


def test_awq_turbomind_disabled_by_name_takes_triton():
    decision = awq_load(env={DISABLED: awq.TurboMindAwqLinearKernel.name}).decision
    tm = verdict(decision, awq.TurboMindAwqLinearKernel.name)
    assert decision.kernel == awq.TritonAwqLinearKernel.name
    assert tm.message == f"disabled by {DISABLED}" and not decision.selection.fallback
    assert decision.layout == awq.LAYOUT_TRITON


@pytest.mark.parametrize(
    "env, config",
    [
        ({var("sm70_awq.enabled"): "0"}, None),
        ({}, {"sm70_awq": {"enabled": False}}),
        ({var("sm70_turbomind.quant_backend"): "marlin"}, None),
    ],
)
def test_awq_route_disabled_by_configuration_takes_triton(env, config):
    decision = awq_load(env=env, config=config).decision
    tm = verdict(decision, awq.TurboMindAwqLinearKernel.name)
    assert decision.kernel == awq.TritonAwqLinearKernel.name
    assert tm.code == "awq_turbomind_disabled"
    assert tm.message.startswith("disabled by configuration")
    assert not decision.selection.fallback


@pytest.mark.parametrize("capability", [72, 75, 80])
def test_awq_non_sm70_takes_triton_as_a_fallback(capability):
    decision = awq_load(capability=capability).decision
    tm = verdict(decision, awq.TurboMindAwqLinearKernel.name)
    assert decision.kernel == awq.TritonAwqLinearKernel.name
    assert (tm.code, tm.message) == ("not_sm70", f"not SM70 (capability {capability})")
    assert decision.selection.fallback
    assert [f.field for f in decision.fallbacks] == ["sm70_awq.enabled"]


@pytest.mark.parametrize(
    "spec, namespace, code",
    [
        (AWQ_QKV, (awq.PREPARE_OP,), "missing_native_ops"),
        (dataclasses.replace(AWQ_QKV, group_size=16), (), "unsupported_group_size"),
        (dataclasses.replace(AWQ_QKV, has_g_idx=True), (), "g_idx_unsupported"),
        (AwqLayer.of(QKV, 2560, 3588, 32), (), "n_not_multiple_of_8"),
    ],
)
def test_awq_other_turbomind_rejections_fail_closed(spec, namespace, code):
    with pytest.raises(SelectionError) as info:
        awq_load(spec, namespace=ns(namespace))
    error = info.value
    assert error.code == code and "fails closed" in error.message
    assert [v.name for v in error.verdicts] == AWQ_DENSE_ORDER
    assert verdict(error, awq.TritonAwqLinearKernel.name).code in ("turbomind_route_admitted", code)


@pytest.mark.parametrize(
    "backend, served", [("auto", True), ("turbomind", True), ("triton", False), ("marlin", False)]
)
def test_awq_linear_backend_filters_every_candidate(backend, served):
    if served:
        assert (
            awq_load(config={"linear_backend": backend}).decision.kernel
            == awq.TurboMindAwqLinearKernel.name
        )
        return
    with pytest.raises(SelectionError) as info:
        awq_load(config={"linear_backend": backend})
    assert info.value.code == "backend_not_selected"
    assert all(v.code == "backend_not_selected" for v in info.value.verdicts)


def test_awq_nothing_can_serve_when_both_are_disabled():
    both = ",".join(AWQ_DENSE_ORDER)
    with pytest.raises(SelectionError) as info:
        awq_load(env={DISABLED: both})
    assert info.value.code == "no_kernel"
    assert all(v.stage == "disabled" for v in info.value.verdicts)
    assert [v.code for v in info.value.verdicts] == ["disabled_kernel"] * len(AWQ_DENSE_ORDER)


def test_awq_verdict_stages_name_the_policy_gates():
    # The stage the startup report records per verdict: route admission, the linear_backend
    # filter and Triton's "TurboMind route admitted" rule are policy gates
    # (docs/contracts/core.md §2.3), checked before capability and never a fallback.
    admitted = awq_load().decision
    triton = verdict(admitted, "TritonAwqLinearKernel")
    assert (triton.code, triton.stage) == ("turbomind_route_admitted", "policy")
    off = awq_load(env={var("sm70_awq.enabled"): "0"}).decision
    tm = verdict(off, "TurboMindAwqLinearKernel")
    assert (tm.code, tm.stage) == ("awq_turbomind_disabled", "policy")
    assert off.kernel == "TritonAwqLinearKernel" and off.fallbacks == ()


def test_awq_linear_backend_refusal_fails_closed_with_its_message():
    # docs/contracts/core.md §2.3: a linear_backend filter on the admitted route fails closed, with
    # the reason; the message names the backend asked for and the ones the family serves.
    with pytest.raises(SelectionError) as info:
        awq_load(config={"linear_backend": "triton"})
    error = info.value
    reason = (
        "linear_backend=triton selects another backend; SM70 AWQ dense kernels serve only "
        "auto or turbomind"
    )
    assert [(v.name, v.code, v.message, v.stage) for v in error.verdicts] == [
        ("TurboMindAwqLinearKernel", "backend_not_selected", reason, "policy"),
        ("TritonAwqLinearKernel", "backend_not_selected", reason, "policy"),
    ]
    assert error.code == "backend_not_selected"
    assert error.message == (
        f"SM70 AWQ dense layer {QKV} fails closed: TurboMindAwqLinearKernel: {reason}"
    )


def test_awq_nothing_can_serve_names_the_layer_and_every_reason():
    with pytest.raises(SelectionError) as info:
        awq_load(env={DISABLED: ",".join(AWQ_DENSE_ORDER)})
    assert info.value.message == (
        f"no SM70 AWQ dense kernel can serve {QKV}: "
        f"TurboMindAwqLinearKernel: disabled by {DISABLED}; "
        f"TritonAwqLinearKernel: disabled by {DISABLED}"
    )


def test_awq_exact_dense_layers_and_their_fallbacks():
    assert awq_load(AWQ_DOWN).decision.flags["exact_dense"] is True
    # docs/contracts/core.md §2.3: a workspace of max(44,564,480, K*N) FP16 elements, in bytes.
    exact = awq_load(AWQ_DOWN, tensors=True)
    assert exact.scratch == {"exact_dense_workspace": 89_128_960}
    assert exact.decision.capability == 70
    short = awq_load(AWQ_DOWN, workspace=awq.EXACT_DENSE_MIN_WORKSPACE - 1).decision
    assert short.flags["exact_dense"] is False
    (fallback,) = short.fallbacks
    assert (fallback.field, fallback.requested, fallback.effective) == (
        "sm70_awq.prefill_exact_dense",
        True,
        False,
    )
    renamed = awq_load(
        AwqLayer.of("model.layers.0.mlp.renamed_projection", 2560, 2560, 128)
    ).decision
    assert renamed.flags["exact_dense"] is False and renamed.fallbacks == ()
    assert renamed.kernel == awq.TurboMindAwqLinearKernel.name
    off = awq_load(AWQ_DOWN, env={var("sm70_awq.prefill_exact_dense"): "0"}).decision
    assert off.flags["exact_dense"] is False and off.fallbacks == ()


@pytest.mark.parametrize("tp, gated_call", [(2, True), (4, False)])
def test_awq_fused_silu_records_the_gated_call_only_at_tp2(tp, gated_call):
    recorder = ns()
    engine = dataclasses.replace(AWQ_ENGINE, tp=tp)
    loaded = awq_load(
        AwqLayer.of(GATE_UP, 2560, 2560, 128),
        env={var("sm70_awq.fused_silu"): "1"},
        namespace=recorder,
        tensors=True,
        engine=engine,
    )
    assert loaded.decision.flags["gated"] is True
    assert loaded.decision.flags["exact_dense"] is False
    assert recorder.calls[0]["plan"]["gated"] is True
    mark = recorder.mark()
    loaded.apply_gated(fp16(1, 2560))
    assert recorder.since(mark)[0]["plan"]["gated"] is gated_call


def test_awq_triton_route_keeps_checkpoint_bytes():
    loaded = awq_load(capability=75, tensors=True)
    assert loaded.apply is None
    assert loaded.bytes_json()["total"] == 2560 * 448 * 4 + 80 * 448 * 4 + 80 * 3584 * 2


# --- without torch ----------------------------------------------------------------------


def test_selecting_every_family_never_imports_torch():
    script = textwrap.dedent("""
        import sys
        from native.layers import AwqLayer, Fp8Layer, Nvfp4Layer
        from policies import PROJECT
        from policies.linear_awq import load_awq_dense
        from policies.linear_nvfp4 import load_nvfp4_sm70
        from policies.linear_turing import load_turing_fp8, load_turing_nvfp4
        from native.catalogue import CATALOGUE
        from routectl.namespaces.native_ns import InMemoryNamespace
        from routectl.workload import EngineConfig, Hardware
        engine = EngineConfig(tp=4, spec_method="dflash", spec_tokens=7, selector_top_k=16,
                              max_num_seqs=4)
        ns = InMemoryNamespace(CATALOGUE.ops, abi={"nvfp4_qpn2_compact_scales_version_sm70": 1})
        kernels = []
        for cc, load, layer in (
                (70, load_nvfp4_sm70, Nvfp4Layer.of("m.in_proj_qkvz", 5120, 4120)),
                (70, load_awq_dense, AwqLayer.of("m.qkv_proj", 2560, 3584, 32)),
                (75, load_turing_nvfp4, Nvfp4Layer.of("m.in_proj_qkvz", 5120, 4120)),
                (75, load_turing_fp8, Fp8Layer.of("m.qkv_proj", 5120, 3584))):
            policy = PROJECT.resolve(None, {}, Hardware(cc), engine)
            kernels.append(load(layer, policy, Hardware(cc), engine, ns).decision.kernel)
        print(",".join(kernels))
        assert "torch" not in sys.modules, "torch was imported"
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ",".join(
        [
            nv.Qpn2NvFp4LinearKernel.name,
            awq.TurboMindAwqLinearKernel.name,
            tu.TuringQpn2NvFp4LinearKernel.name,
            tu.TuringQpn8Fp8LinearKernel.name,
        ]
    )
