"""What loading one layer produces, for the engine and for replay alike: the decision (kernel,
verdicts, flags, fallbacks, layout) and the prepared tensors the layer keeps resident."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from routectl.policy.selection import Selection


@dataclass(frozen=True)
class Fallback:
    """A per-layer outcome that differs from what the policy requested."""

    field: str
    requested: Any
    effective: Any
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "requested": self.requested,
            "effective": self.effective,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Decision:
    """Which kernel serves one layer and why: the chosen kernel (None with a status when
    the family does not serve it), every candidate's verdict, the prepared layout, its
    flags and the fallbacks taken."""

    kernel: str | None
    selection: Selection
    capability: int
    layout: str | None = None
    flags: Mapping[str, Any] = field(default_factory=dict)
    fallbacks: tuple[Fallback, ...] = ()
    # Set when the family answers "not this kernel family" without error (e.g. Turing
    # linear_backend filter): a code and message explaining why kernel is None.
    status: tuple[str, str] | None = None


def tensor_bytes(tensor: Any) -> int:
    return int(tensor.numel()) * int(tensor.element_size())


@dataclass
class PreparedLayer:
    """A loaded layer: decision, resident tensors (padding included) and the apply function.

    `apply(x)` dispatches one call of M = x.shape[0] tokens through the namespace given at
    load time; `apply_gated(x)` is the fused gate/up call where the family has one.
    """

    decision: Decision
    resident: dict[str, Any] = field(default_factory=dict)
    scratch: dict[str, int] = field(default_factory=dict)  # name -> bytes, per invocation
    apply: Callable[..., Any] | None = None
    apply_gated: Callable[[Any], Any] | None = None
    state: dict[str, Any] = field(default_factory=dict)

    def bytes_json(self) -> dict[str, Any]:
        per = {name: tensor_bytes(t) for name, t in sorted(self.resident.items())}
        return {
            "tensors": per,
            "total": sum(per.values()),
            "scratch": dict(sorted(self.scratch.items())),
        }
