"""AWQ dense linears on SM70 (docs/contracts/core.md §2.3): route admission, the TurboMind -> Triton
selector and its fail-closed outcomes, and the load function.

Outcomes: TurboMind when admitted (sm70_awq.enabled and capability exactly 70) and capable;
Triton when the route is not admitted ("not SM70" / "disabled by configuration") or
TurboMind is in disabled_kernels; any other TurboMind rejection (missing op, group, K/N,
g_idx, linear_backend filter) fails closed: the layer does not load (SelectionError).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from native.kernels import awq_dense as awq
from native.layers import AwqLayer
from policies.linear_common import (
    KernelLoader,
    backend_reason,
    backend_selects_turbomind,
    candidate,
    disabled_gate,
    no_kernel_error,
)
from policies.qualification import awq_exact_dense_role_qualified
from routectl.errors import SelectionError
from routectl.namespaces.native_ns import NativeNamespace
from routectl.policy.loaded import PreparedLayer
from routectl.policy.resolve import ResolvedPolicy
from routectl.policy.selection import Selection, select
from routectl.reasons import OK, Check, reject
from routectl.workload import EngineConfig, Hardware

FAMILY = "SM70 AWQ dense"
SECTION = "sm70_awq"
TURBOMIND = awq.TurboMindAwqLinearKernel
TRITON = awq.TritonAwqLinearKernel
PRIORITY = awq.AWQ_DENSE_KERNELS
REQUESTED_BY = {TURBOMIND.name: "sm70_awq.enabled"}
LOADER = KernelLoader(PRIORITY, SECTION, REQUESTED_BY)
# TurboMind rejections that do not fail closed: the Triton route is the intended outcome.
NOT_FAIL_CLOSED_STAGES = ("disabled",)


def _backend(policy: ResolvedPolicy) -> Check:
    if backend_selects_turbomind(policy):
        return OK
    reason = backend_reason(policy, FAMILY)
    return (False, reason)


def _enabled(policy: ResolvedPolicy) -> Check:
    if policy.sm70_awq.enabled:
        return OK
    return reject("awq_turbomind_disabled", "disabled by configuration (sm70_awq.enabled is false)")


def _exactly_sm70(hardware: Hardware) -> Check:
    if hardware.capability == 70:
        return OK
    return reject("not_sm70", f"not SM70 (capability {hardware.capability})")


def route_admitted(policy: ResolvedPolicy, hardware: Hardware) -> Check:
    """The loader's TurboMind route admission: enabled, then exactly SM70."""
    ok, reason = _enabled(policy)
    if not ok:
        return (ok, reason)
    return _exactly_sm70(hardware)


def _triton_admission(policy: ResolvedPolicy, hardware: Hardware) -> Check:
    turbomind_disabled = TURBOMIND.name in policy.disabled_kernels
    if route_admitted(policy, hardware)[0] and not turbomind_disabled:
        return reject(
            "turbomind_route_admitted",
            "the SM70 TurboMind AWQ route is admitted; Triton serves only when that "
            "route is not admitted or TurboMind is disabled by kernel name",
        )
    return OK


def select_awq_dense(
    layer: AwqLayer, policy: ResolvedPolicy, hardware: Hardware, ns: NativeNamespace
) -> Selection:
    cc = hardware.capability
    return select(
        [
            candidate(
                TURBOMIND,
                cc,
                layer,
                ns,
                pre=[
                    ("policy", lambda: _backend(policy)),
                    disabled_gate(TURBOMIND.name, policy),
                    ("policy", lambda: _enabled(policy)),
                    ("capability", lambda: _exactly_sm70(hardware)),
                ],
            ),
            candidate(
                TRITON,
                cc,
                layer,
                ns,
                pre=[
                    ("policy", lambda: _backend(policy)),
                    disabled_gate(TRITON.name, policy),
                    ("policy", lambda: _triton_admission(policy, hardware)),
                ],
            ),
        ]
    )


def awq_options(layer: AwqLayer, policy: ResolvedPolicy, engine: EngineConfig) -> awq.AwqOptions:
    section = policy.sm70_awq
    return awq.AwqOptions(
        prefill_exact_dense=bool(section.prefill_exact_dense),
        exact_dense_role=awq_exact_dense_role_qualified(layer.role)[0],
        fused_silu=bool(section.fused_silu),
        tp=engine.tp,
    )


def _fail_closed(
    layer: AwqLayer, policy: ResolvedPolicy, hardware: Hardware, selection: Selection
) -> SelectionError:
    """On an admitted route, a TurboMind rejection other than disabled_kernels fails closed
    (code: TurboMind's reason); otherwise nothing could serve (every reason listed)."""
    first = selection.verdicts[0]
    if route_admitted(policy, hardware)[0] and first.stage not in NOT_FAIL_CLOSED_STAGES:
        return SelectionError(
            first.code or "awq_fail_closed",
            f"{FAMILY} layer {layer.prefix} fails closed: {TURBOMIND.name}: {first.message}",
            selection.verdicts,
        )
    return no_kernel_error(FAMILY, layer.prefix, selection)


def load_awq_dense(
    layer: AwqLayer,
    policy: ResolvedPolicy,
    hardware: Hardware,
    engine: EngineConfig,
    ns: NativeNamespace,
    *,
    tensors: Mapping[str, Any] | None = None,
    workspace: int | None = None,
) -> PreparedLayer:
    """Select, decide exact-dense prefill and fused SiLU, and (with `tensors`) prepare.
    `workspace`: FP16 elements the engine can give the exact-dense prefill (None =
    unlimited); too little keeps plain TurboMind and records a fallback."""
    cc = hardware.capability
    selection = select_awq_dense(layer, policy, hardware, ns)
    if selection.chosen is None:
        raise _fail_closed(layer, policy, hardware, selection)
    setup = awq.AwqSetup(awq_options(layer, policy, engine), workspace)
    return LOADER.load(selection, layer, setup, ns, policy, cc, tensors)
