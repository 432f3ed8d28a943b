"""Turing (SM75) QPN linears (docs/contracts/core.md §2.2): one candidate each, its policy the
gate before capability (checked once), the chosen class planned and prepared through the
family's KernelLoader like every other family's. `linear_backend` other than auto/turbomind leaves
the layer to another backend: kernel None with status `backend_not_selected`, not an error.
A layer the Turing kernel cannot serve is not an error either: the engine's upstream kernels
take it (status `upstream_kernel`, every reason in the verdicts).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from native.kernels import turing as tu
from native.layers import Fp8Layer, Nvfp4Layer
from policies.linear_common import (
    KernelLoader,
    backend_reason,
    backend_selects_turbomind,
    candidate,
    disabled_gate,
    nvfp4_turbomind,
    unselected,
)
from routectl.namespaces.native_ns import NativeNamespace
from routectl.policy.loaded import PreparedLayer
from routectl.policy.resolve import ResolvedPolicy
from routectl.policy.selection import Selection, select
from routectl.reasons import Verdict
from routectl.workload import EngineConfig, Hardware

FAMILY = "Turing QPN"
UPSTREAM_CODE = "upstream_kernel"


def qpn2_options(policy: ResolvedPolicy) -> tu.TuringQpn2Options:
    return tu.TuringQpn2Options(
        dense_qpn2=bool(policy.sm70_nvfp4.dense_qpn2), backend_enabled=nvfp4_turbomind(policy)
    )


def qpn8_options(policy: ResolvedPolicy) -> tu.TuringQpn8Options:
    return tu.TuringQpn8Options(
        enabled=bool(policy.sm70_fp8.enabled),
        force_marlin=policy.value("sm70_turbomind.quant_backend") == "marlin",
    )


# One class each; the options are the policy gate's (no field requests a Turing class).
NVFP4_LOADER = KernelLoader((tu.TuringQpn2NvFp4LinearKernel,), "sm70_nvfp4", {})
FP8_LOADER = KernelLoader((tu.TuringQpn8Fp8LinearKernel,), "sm70_fp8", {})


def _select(
    kernel: Any,
    layer: Any,
    options: Any,
    policy: ResolvedPolicy,
    hardware: Hardware,
    ns: NativeNamespace,
) -> Selection:
    return select(
        [
            candidate(
                kernel,
                hardware.capability,
                layer,
                ns,
                pre=[
                    disabled_gate(kernel.name, policy),
                    ("policy", lambda: kernel.policy_check(options)),
                ],
            )
        ]
    )


def select_turing_nvfp4(
    layer: Nvfp4Layer, policy: ResolvedPolicy, hardware: Hardware, ns: NativeNamespace
) -> Selection:
    kernel = tu.TuringQpn2NvFp4LinearKernel
    return _select(kernel, layer, qpn2_options(policy), policy, hardware, ns)


def select_turing_fp8(
    layer: Fp8Layer, policy: ResolvedPolicy, hardware: Hardware, ns: NativeNamespace
) -> Selection:
    kernel = tu.TuringQpn8Fp8LinearKernel
    return _select(kernel, layer, qpn8_options(policy), policy, hardware, ns)


def _not_this_backend(kernel: Any, policy: ResolvedPolicy, capability: int) -> PreparedLayer:
    reason = backend_reason(policy, FAMILY)
    verdict = Verdict(kernel.name, False, reason.code, reason.message, stage="policy")
    return unselected(capability, reason.code, reason.message, Selection(None, (verdict,)))


def _upstream(selection: Selection, capability: int) -> PreparedLayer:
    return unselected(
        capability,
        UPSTREAM_CODE,
        f"no {FAMILY} kernel serves this layer; the engine's upstream kernels "
        f"do ({selection.reasons_text()})",
        selection,
    )


def load_turing_nvfp4(
    layer: Nvfp4Layer,
    policy: ResolvedPolicy,
    hardware: Hardware,
    engine: EngineConfig,
    ns: NativeNamespace,
    *,
    tensors: Mapping[str, Any] | None = None,
    workspace: int | None = None,
) -> PreparedLayer:
    """TuringQpn2NvFp4LinearKernel, layout nvfp4_qpn2_dense. Its scratch is owned by each
    invocation, so `workspace` does not bound it."""
    kernel = tu.TuringQpn2NvFp4LinearKernel
    if not backend_selects_turbomind(policy):
        return _not_this_backend(kernel, policy, hardware.capability)
    selection = select_turing_nvfp4(layer, policy, hardware, ns)
    if selection.chosen is None:
        return _upstream(selection, hardware.capability)
    options = qpn2_options(policy)
    return NVFP4_LOADER.load(selection, layer, options, ns, policy, hardware.capability, tensors)


def load_turing_fp8(
    layer: Fp8Layer,
    policy: ResolvedPolicy,
    hardware: Hardware,
    engine: EngineConfig,
    ns: NativeNamespace,
    *,
    tensors: Mapping[str, Any] | None = None,
    workspace: int | None = None,
) -> PreparedLayer:
    """TuringQpn8Fp8LinearKernel, layout fp8_qpn8 (per-invocation scratch for M > 8)."""
    kernel = tu.TuringQpn8Fp8LinearKernel
    if not backend_selects_turbomind(policy):
        return _not_this_backend(kernel, policy, hardware.capability)
    selection = select_turing_fp8(layer, policy, hardware, ns)
    if selection.chosen is None:
        return _upstream(selection, hardware.capability)
    options = qpn8_options(policy)
    return FP8_LOADER.load(selection, layer, options, ns, policy, hardware.capability, tensors)
