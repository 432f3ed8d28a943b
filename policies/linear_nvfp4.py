"""SM70 NVFP4 weight-only linears (docs/contracts/core.md §2.1): the family entry, the selector over
Qpn4 -> Qpn2 -> TurboMind with policy and qualification reasons before capability, and the
load function the engine and the replay harness both run. `linear_backend` is ignored here:
the CT weight-only path keeps its precedence (docs/contracts/core.md §1.3).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from native.kernels import nvfp4_sm70 as nv
from native.layers import Nvfp4Layer
from policies.linear_common import (
    KernelLoader,
    candidate,
    disabled_gate,
    no_kernel_error,
    nvfp4_turbomind,
    unselected,
)
from policies.qualification import (
    nvfp4_workload_qualified,
    qpn2_role_qualified,
    qpn4_layer_qualified,
    qpn4_workload_qualified,
)
from routectl.namespaces.native_ns import NativeNamespace
from routectl.policy.loaded import PreparedLayer
from routectl.policy.resolve import ResolvedPolicy
from routectl.policy.selection import Selection, select
from routectl.reasons import OK, Check, Reason, reject
from routectl.workload import EngineConfig, Hardware

FAMILY = "SM70 NVFP4 weight-only"
SECTION = "sm70_nvfp4"
PRIORITY = nv.NVFP4_SM70_KERNELS
# The policy field that requests each kernel (for fallback records).
REQUESTED_BY = {
    nv.Qpn4NvFp4LinearKernel.name: "sm70_nvfp4.qpn4",
    nv.Qpn2NvFp4LinearKernel.name: "sm70_nvfp4.qpn2",
}
LOADER = KernelLoader(PRIORITY, SECTION, REQUESTED_BY)
QPN4_CORE = "QPN4 disabled or outside the qualified workload"
QPN2_CORE = "QPN2 disabled by configuration or unqualified workload"


def family_entry(policy: ResolvedPolicy, hardware: Hardware) -> Check:
    """A CT NVFP4 weight-only linear reaches this family only on exactly SM70 with
    use_turbomind(sm70_turbomind.nvfp4)."""
    if hardware.capability != 70:
        return reject(
            "not_sm70",
            "the SM70 NVFP4 weight-only family needs capability "
            f"exactly 70, got {hardware.capability}",
        )
    if not nvfp4_turbomind(policy):
        return reject(
            "turbomind_nvfp4_off",
            "use_turbomind(sm70_turbomind.nvfp4) is false (nvfp4="
            f"{policy.value('sm70_turbomind.nvfp4')}, quant_backend="
            f"{policy.value('sm70_turbomind.quant_backend')})",
        )
    return OK


def batch_layouts(policy: ResolvedPolicy, hardware: Hardware) -> bool:
    """Batch GEMM layouts are effective only on exactly SM70."""
    return bool(policy.value("sm70_turbomind.batch_layouts")) and hardware.capability == 70


def qpn2_options(
    policy: ResolvedPolicy, hardware: Hardware, engine: EngineConfig
) -> nv.Qpn2Options:
    section = policy.sm70_nvfp4
    return nv.Qpn2Options(
        shared_weight=section.shared_weight,
        shared_scales=section.shared_scales,
        prefill=section.prefill,
        prefill_min_m=section.prefill_min_m,
        batch_layouts=batch_layouts(policy, hardware),
        qualified=nvfp4_workload_qualified(engine)[0],
    )


def qpn4_options(layer: Nvfp4Layer, policy: ResolvedPolicy) -> nv.Qpn4Options:
    return nv.Qpn4Options(
        gated=bool(policy.sm70_nvfp4.dense_gated_silu)
        and layer.gated
        and layer.role == "gate_up_proj"
    )


def nvfp4_setup(
    layer: Nvfp4Layer, policy: ResolvedPolicy, hardware: Hardware, engine: EngineConfig
) -> nv.Nvfp4Setup:
    """The policy's options for whichever kernel serves the layer."""
    return nv.Nvfp4Setup(
        qpn2=qpn2_options(policy, hardware, engine), qpn4=qpn4_options(layer, policy)
    )


def _qpn4_policy(policy: ResolvedPolicy) -> Check:
    if not policy.sm70_nvfp4.qpn4:
        return reject("qpn4_disabled", f"{QPN4_CORE}: sm70_nvfp4.qpn4 is off")
    return OK


def _qpn4_qualification(layer: Nvfp4Layer, policy: ResolvedPolicy, engine: EngineConfig) -> Check:
    for ok, reason in (
        qpn4_workload_qualified(engine),
        qpn4_layer_qualified(layer, bool(policy.sm70_nvfp4.dense_gated_silu)),
    ):
        if not ok:
            assert reason is not None
            return (False, Reason(reason.code, f"{QPN4_CORE}: {reason.message}"))
    return OK


def _qpn4_workspace(layer: Nvfp4Layer, workspace: int | None) -> Check:
    needed = nv.qpn4_workspace_elements(layer)
    if workspace is not None and workspace < needed:
        return reject(
            "insufficient_qpn4_workspace",
            f"insufficient QPN4 workspace (need {needed} FP16 elements, have {workspace})",
        )
    return OK


def _qpn2_policy(policy: ResolvedPolicy) -> Check:
    if not policy.sm70_nvfp4.qpn2:
        return reject("qpn2_disabled", QPN2_CORE)
    return OK


def select_nvfp4_sm70(
    layer: Nvfp4Layer,
    policy: ResolvedPolicy,
    hardware: Hardware,
    engine: EngineConfig,
    ns: NativeNamespace,
    *,
    workspace: int | None = None,
) -> Selection:
    """Every candidate's verdict in priority order. QPN4 needs a K*N FP16 workspace: when
    the engine cannot give it, QPN4 is rejected ("insufficient QPN4 workspace") and the
    next candidate serves, exactly as a rerun without QPN4 would."""
    cc = hardware.capability
    qpn4, qpn2, turbomind = PRIORITY
    return select(
        [
            candidate(
                qpn4,
                cc,
                layer,
                ns,
                pre=[
                    disabled_gate(qpn4.name, policy),
                    ("policy", lambda: _qpn4_policy(policy)),
                    ("qualification", lambda: _qpn4_qualification(layer, policy, engine)),
                ],
                post=[("workspace", lambda: _qpn4_workspace(layer, workspace))],
            ),
            candidate(
                qpn2,
                cc,
                layer,
                ns,
                pre=[
                    disabled_gate(qpn2.name, policy),
                    ("policy", lambda: _qpn2_policy(policy)),
                    ("qualification", lambda: qpn2_role_qualified(layer.role)),
                ],
            ),
            candidate(turbomind, cc, layer, ns, pre=[disabled_gate(turbomind.name, policy)]),
        ]
    )


def load_nvfp4_sm70(
    layer: Nvfp4Layer,
    policy: ResolvedPolicy,
    hardware: Hardware,
    engine: EngineConfig,
    ns: NativeNamespace,
    *,
    tensors: Mapping[str, Any] | None = None,
    workspace: int | None = None,
) -> PreparedLayer:
    """Select, decide the layout and (with `tensors`) prepare one layer. Without tensors it
    only selects and never imports torch. Raises SelectionError when nothing can serve."""
    cc = hardware.capability
    ok, reason = family_entry(policy, hardware)
    if not ok:
        assert reason is not None
        return unselected(cc, reason.code, reason.message)
    selection = select_nvfp4_sm70(layer, policy, hardware, engine, ns, workspace=workspace)
    if selection.chosen is None:
        raise no_kernel_error(FAMILY, layer.prefix, selection)
    setup = nvfp4_setup(layer, policy, hardware, engine)
    return LOADER.load(selection, layer, setup, ns, policy, cc, tensors)
