"""Selection framework: walk candidates in priority order, evaluate every one, choose the
first that can run, keep every verdict. Priority lists and policy reasons live in the
project (`policies/`); capability lives in `native/`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from routectl.errors import RoutectlError
from routectl.namespaces.native_ns import NativeNamespace
from routectl.reasons import Check, Reason, Verdict

# Rejections at these stages mean "the policy wanted it, the build or the hardware could not":
# a lower candidate then serves as a fallback. Policy, qualification and disabled_kernels
# rejections are decisions, not fallbacks.
FALLBACK_STAGES = frozenset({"capability", "ops", "workspace", "abi"})
MISSING_OPS_CODE = "missing_native_ops"


class Evaluation(NamedTuple):
    """A candidate's gates: passed, or the first failing one's reason and stage."""

    ok: bool
    reason: Reason | None = None
    stage: str | None = None

    @classmethod
    def passed(cls) -> Evaluation:
        return PASSED

    @classmethod
    def failed(cls, reason: Reason, stage: str) -> Evaluation:
        return cls(False, reason, stage)


PASSED = Evaluation(True)  # immutable: one instance serves every passing candidate


# A named check at one stage ("policy", "qualification", "ops", ...).
Gate = tuple[str, Callable[[], Check]]


def run_gates(gates: Sequence[Gate]) -> Evaluation:
    """The first failing gate's reason at its stage, or a pass: the one order every
    selector entry (kernel or MoE stage) applies its checks in."""
    for stage, gate in gates:
        ok, reason = gate()
        if not ok:
            assert reason is not None
            return Evaluation.failed(reason, stage)
    return Evaluation.passed()


class KernelClass(Protocol):
    name: str
    required_ops: tuple[str, ...]

    @classmethod
    def is_supported(cls, capability: int) -> Check: ...

    @classmethod
    def can_implement(cls, layer: Any, ns: NativeNamespace) -> Check: ...


class UndeclaredReason(RoutectlError):
    """A capability class returned a reason code it does not declare (`reason_codes`): the
    declaration `routectl coverage` reads is out of date, a bug of the class (exit 3)."""


def declared_reason(kernel: Any, reason: Reason) -> Reason:
    """`reason`, after checking that `kernel` declares its code when it declares any (a
    class's `reason_codes`; None: the class declares none and nothing is checked)."""
    declared = getattr(kernel, "reason_codes", None)
    if declared is not None and reason.code not in declared:
        name = getattr(kernel, "name", kernel)
        raise UndeclaredReason(
            f"{name} returned reason code {reason.code!r}, which its reason_codes do not "
            f"declare (declared: {', '.join(declared) or 'none'})"
        )
    return reason


def evaluate_kernel(
    kernel: type[KernelClass] | KernelClass, capability: int, layer: Any, ns: NativeNamespace
) -> Evaluation:
    """is_supported, then can_implement; a missing-ops reason is staged as `ops`. A class
    that declares its `reason_codes` is held to them (`declared_reason`)."""
    ok, reason = kernel.is_supported(capability)
    if not ok:
        assert reason is not None
        return Evaluation.failed(declared_reason(kernel, reason), "capability")
    ok, reason = kernel.can_implement(layer, ns)
    if not ok:
        assert reason is not None
        reason = declared_reason(kernel, reason)
        stage = "ops" if reason.code == MISSING_OPS_CODE else getattr(reason, "stage", None)
        return Evaluation.failed(reason, stage or "capability")
    return Evaluation.passed()


@dataclass(frozen=True)
class Selection:
    chosen: str | None
    verdicts: tuple[Verdict, ...]

    @property
    def fallback(self) -> bool:
        """A higher-priority candidate passed policy but the build/hardware refused it."""
        for v in self.verdicts:
            if v.name == self.chosen:
                return False
            if not v.ok and v.stage in FALLBACK_STAGES:
                return True
        return False

    def reasons_text(self) -> str:
        return "; ".join(f"{v.name}: {v.message}" for v in self.verdicts if not v.ok)

    def verdicts_json(self) -> list[dict[str, Any]]:
        return [v.to_json() for v in self.verdicts]


def select(candidates: Sequence[tuple[str, Callable[[], Evaluation]]]) -> Selection:
    chosen: str | None = None
    verdicts: list[Verdict] = []
    for name, evaluate in candidates:
        result = evaluate()
        reason = result.reason
        if reason is None:
            verdicts.append(Verdict(name, result.ok, None, None, chosen is not None, result.stage))
        else:
            verdicts.append(
                Verdict(
                    name, result.ok, reason.code, reason.message, chosen is not None, result.stage
                )
            )
        if result.ok and chosen is None:
            chosen = name
    return Selection(chosen, tuple(verdicts))
