"""Kernel classes carry their lifecycle (issue 19): the chosen class plans its prepared
layout and prepares it, so no family loader branches on the chosen class's name."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from native.catalogue import CATALOGUE
from native.kernels import awq_dense as awq
from native.kernels import nvfp4_sm70 as nv
from native.layers import AwqLayer, Nvfp4Layer
from policies import linear_awq, linear_fp8_sm70, linear_nvfp4
from policies.linear_common import KernelLoader
from routectl.namespaces.native_ns import InMemoryNamespace
from routectl.policy.selection import Selection
from routectl.replay.harness import RecordingNamespace
from tests.policy_helpers import resolve

ROOT = Path(__file__).resolve().parents[1]
FULL = InMemoryNamespace(CATALOGUE.ops, abi={nv.QPN2_COMPACT_VERSION_GETTER: 1})
QKVZ = "model.layers.0.linear_attn.in_proj_qkvz"
GATE_UP = "model.layers.0.mlp.gate_up_proj"
NVFP4_FLAGS = {"shared_weight", "prefill_enabled", "compact_scales", "batch_prescale", "gated"}


def nvfp4_layer(prefix: str = QKVZ, **changes) -> Nvfp4Layer:
    return dataclasses.replace(Nvfp4Layer.of(prefix, 5120, 4128), **changes)


def awq_layer(prefix: str = GATE_UP) -> AwqLayer:
    return AwqLayer.of(prefix, 5120, 8704, 128)


@pytest.mark.parametrize(
    "kernel, layout",
    [
        (nv.TurboMindNvFp4LinearKernel, nv.LAYOUT_TURBOMIND),
        (nv.Qpn2NvFp4LinearKernel, nv.LAYOUT_QPN2),
        (nv.Qpn4NvFp4LinearKernel, nv.LAYOUT_QPN4),
    ],
)
def test_each_nvfp4_class_plans_its_own_layout_with_the_same_flags(kernel, layout):
    plan = kernel.plan(nvfp4_layer(), nv.Nvfp4Setup(), FULL)
    assert plan.layout == layout
    assert set(plan.flags) == NVFP4_FLAGS
    assert plan.refused == () and plan.fallbacks == ()


def test_qpn2_keeps_its_plan_and_reports_what_the_build_refused():
    ns = FULL.without(nv.QPN2_PREPARE_SCALES_OP)
    plan = nv.Qpn2NvFp4LinearKernel.plan(nvfp4_layer(), nv.Nvfp4Setup(), ns)
    assert isinstance(plan.state["plan"], nv.Qpn2Layout)
    assert [(option, reason.code) for option, reason in plan.refused] == [
        ("shared_weight", "missing_native_ops")
    ]
    assert plan.flags["shared_weight"] is False


def test_qpn4_reads_only_its_own_options():
    setup = nv.Nvfp4Setup(qpn2=nv.Qpn2Options(prefill=False), qpn4=nv.Qpn4Options(gated=True))
    plan = nv.Qpn4NvFp4LinearKernel.plan(nvfp4_layer(GATE_UP, gated=True), setup, FULL)
    assert dict(plan.flags) == {name: name == "gated" for name in NVFP4_FLAGS}


def test_the_plan_prepares_the_layout_it_announced():
    spec = nvfp4_layer()
    ns = RecordingNamespace(CATALOGUE)
    plan = nv.Qpn4NvFp4LinearKernel.plan(spec, nv.Nvfp4Setup(), ns)
    prepared = plan.prepare(spec.checkpoint_tensors())
    assert set(prepared.resident) >= {"qpn4_codes", "qpn4_scales", "qpn4_scale_codes"}
    assert [c["op"] for c in ns.calls] == [nv.QPN4_PREPARE_OP, nv.QPN4_PREPARE_SCALE_CODE_OP]


def test_awq_classes_plan_their_layouts_and_the_refused_exact_dense_prefill():
    short = awq.AwqSetup(awq.AwqOptions(), workspace=1)
    turbomind = awq.TurboMindAwqLinearKernel.plan(awq_layer(), short, FULL)
    assert turbomind.layout == awq.LAYOUT_TURBOMIND
    assert [(o, r.code) for o, r in turbomind.refused] == [
        ("prefill_exact_dense", "insufficient_workspace")
    ]
    assert turbomind.state["plan"].exact_dense is False
    triton = awq.TritonAwqLinearKernel.plan(awq_layer(), short, FULL)
    assert triton.layout == awq.LAYOUT_TRITON
    assert triton.refused == () and not any(triton.flags.values())


def test_the_loader_turns_a_refusal_into_a_fallback_on_the_section_field():
    policy = resolve()
    selection = Selection(awq.TurboMindAwqLinearKernel.name, ())
    setup = awq.AwqSetup(awq.AwqOptions(), workspace=1)
    loaded = linear_awq.LOADER.load(selection, awq_layer(), setup, FULL, policy, 70, None)
    assert loaded.decision.kernel == awq.TurboMindAwqLinearKernel.name
    assert loaded.decision.layout == awq.LAYOUT_TURBOMIND
    [fallback] = loaded.decision.fallbacks
    assert fallback.field == "sm70_awq.prefill_exact_dense"
    assert fallback.requested == policy.value("sm70_awq.prefill_exact_dense")
    assert fallback.effective is False
    assert "insufficient exact-dense workspace" in fallback.reason


@pytest.mark.parametrize("loader", [linear_nvfp4.LOADER, linear_awq.LOADER, linear_fp8_sm70.LOADER])
def test_every_loader_finds_each_of_its_classes_by_the_recorded_name(loader: KernelLoader):
    for kernel in loader.kernels:
        assert loader.chosen(Selection(kernel.name, ())) is kernel


def _branches_on_chosen(node: ast.AST) -> bool:
    """`<...>.chosen == <name>`: a branch on which class won (a lookup of the chosen
    candidate among several, `name == selection.chosen`, is not one)."""
    return (
        isinstance(node, ast.Compare)
        and isinstance(node.left, ast.Attribute)
        and node.left.attr == "chosen"
        and any(isinstance(op, ast.Eq | ast.NotEq) for op in node.ops)
    )


def test_no_policy_branches_on_the_name_of_the_chosen_kernel():
    offenders = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted((ROOT / "policies").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if _branches_on_chosen(node)
    ]
    assert offenders == []
