"""What the linear family selectors share: candidate evaluation with policy gates before
capability, the disabled-kernels and linear-backend rules, fallbacks, loading the chosen
kernel class (`KernelLoader`) and the load result."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from native.kernels.common import Prepared, PreparingKernel
from policies.variables import field, use_turbomind
from routectl.errors import SelectionError
from routectl.namespaces.native_ns import NativeNamespace
from routectl.policy.loaded import Decision, Fallback, PreparedLayer
from routectl.policy.resolve import ResolvedPolicy
from routectl.policy.selection import (
    FALLBACK_STAGES,
    Evaluation,
    Gate,
    Selection,
    evaluate_kernel,
    run_gates,
)
from routectl.reasons import OK, Check, Reason

DISABLED_VARIABLE = field("disabled_kernels").variable or ""
TURBOMIND_BACKENDS = ("auto", "turbomind")

# (stage, check): evaluated lazily, in order, before (pre) or after (post) capability.


def disabled_gate(name: str, policy: ResolvedPolicy) -> Gate:
    def check() -> Check:
        if name in policy.disabled_kernels:
            return (False, Reason("disabled_kernel", f"disabled by {DISABLED_VARIABLE}"))
        return OK

    return ("disabled", check)


def backend_selects_turbomind(policy: ResolvedPolicy) -> bool:
    return policy.linear_backend in TURBOMIND_BACKENDS


def backend_reason(policy: ResolvedPolicy, family: str) -> Reason:
    return Reason(
        "backend_not_selected",
        f"linear_backend={policy.linear_backend} selects another backend; {family} "
        f"kernels serve only {' or '.join(TURBOMIND_BACKENDS)}",
    )


def nvfp4_turbomind(policy: ResolvedPolicy) -> bool:
    """use_turbomind(sm70_turbomind.nvfp4): the legacy backend override applied."""
    return use_turbomind(policy.value("sm70_turbomind.nvfp4"), dict(policy.values))


def candidate(
    kernel: Any,
    capability: int,
    layer: Any,
    ns: NativeNamespace,
    pre: Sequence[Gate] = (),
    post: Sequence[Gate] = (),
) -> tuple[str, Callable[[], Evaluation]]:
    """One selector entry: policy-like gates, then is_supported/can_implement, then gates
    that need a capable kernel (workspace)."""

    def evaluate() -> Evaluation:
        result = run_gates(pre)
        if not result.ok:
            return result
        result = evaluate_kernel(kernel, capability, layer, ns)
        if not result.ok:
            return result
        return run_gates(post)

    return (kernel.name, evaluate)


def kernel_fallbacks(
    selection: Selection, fields: Mapping[str, str], policy: ResolvedPolicy
) -> list[Fallback]:
    """A candidate above the chosen one whose policy field asked for it but that the build,
    the hardware or the workspace refused."""
    out: list[Fallback] = []
    for verdict in selection.verdicts:
        if verdict.name == selection.chosen:
            break
        key = fields.get(verdict.name)
        if key and not verdict.ok and verdict.stage in FALLBACK_STAGES:
            out.append(
                Fallback(key, policy.value(key), False, f"{verdict.name}: {verdict.message}")
            )
    return out


def no_kernel_error(
    family: str, prefix: str, selection: Selection, code: str = "no_kernel"
) -> SelectionError:
    return SelectionError(
        code,
        f"no {family} kernel can serve {prefix}: {selection.reasons_text()}",
        selection.verdicts,
    )


def unselected(
    capability: int, code: str, message: str, selection: Selection | None = None
) -> PreparedLayer:
    """A layer this family does not serve, without error (kernel None plus a status)."""
    return PreparedLayer(
        Decision(None, selection or Selection(None, ()), capability, status=(code, message))
    )


def loaded(decision: Decision, prepared: Prepared | None, **state: Any) -> PreparedLayer:
    if prepared is None:
        return PreparedLayer(decision, state=dict(state))
    return PreparedLayer(
        decision,
        resident=dict(prepared.resident),
        scratch=dict(prepared.scratch),
        apply=prepared.apply,
        apply_gated=prepared.apply_gated,
        state=dict(state),
    )


@dataclass(frozen=True)
class KernelLoader:
    """What loading a family's chosen kernel needs to know: its kernel classes, the policy
    section that names their options, and the field that requests each kernel."""

    kernels: Sequence[type[PreparingKernel]]
    section: str
    requested_by: Mapping[str, str]

    def chosen(self, selection: Selection) -> type[PreparingKernel]:
        """The class of the selection's chosen candidate (selections keep names)."""
        return next(kernel for kernel in self.kernels if kernel.name == selection.chosen)

    def load(
        self,
        selection: Selection,
        layer: Any,
        setup: Any,
        ns: NativeNamespace,
        policy: ResolvedPolicy,
        capability: int,
        tensors: Mapping[str, Any] | None,
    ) -> PreparedLayer:
        """Let the chosen class plan the layer and (with `tensors`) prepare it; a refused
        option becomes a fallback on the section's field of that name."""
        kernel = self.chosen(selection)
        fallbacks = kernel_fallbacks(selection, self.requested_by, policy)
        plan = kernel.plan(layer, setup, ns)
        for option, reason in plan.refused:
            key = f"{self.section}.{option}"
            fallbacks.append(Fallback(key, policy.value(key), False, reason.message))
        # The kernel names the option; the fallback names the policy field.
        fallbacks.extend(
            dataclasses.replace(f, field=f"{self.section}.{f.field}") for f in plan.fallbacks
        )
        decision = Decision(
            kernel.name, selection, capability, plan.layout, plan.flags, tuple(fallbacks)
        )
        prepared = plan.prepare(dict(tensors)) if tensors is not None else None
        return loaded(decision, prepared, **plan.state)
