"""Shared pieces of the linear kernel classes: the class shape, op checks, the plan a chosen
class makes of its layer (`KernelPlan`: layout, flags, how to prepare) and the dispatch
helpers every family uses (FP16 activations, token flattening, padding).

Torch is imported only inside the dispatch helpers, never at import time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from native import meta_tensors
from routectl.errors import ActivationError
from routectl.namespaces.native_ns import NativeNamespace, require_ops
from routectl.policy.loaded import Fallback
from routectl.reasons import OK, Check, Reason, reject

FP16 = "float16"


class LinearKernel:
    """Base of every capability class: `name` is the class name (an interface: it is what
    `disabled_kernels` lists), `required_ops` what `can_implement` checks last."""

    name: ClassVar[str] = "LinearKernel"
    required_ops: ClassVar[tuple[str, ...]] = ()
    # Label in the missing-operator reason ("missing native <label> operators: [...]").
    ops_label: ClassVar[str] = ""
    # Every reason code is_supported and can_implement can return (`routectl coverage`
    # declares a site for each; selection refuses a code not listed). None: undeclared.
    reason_codes: ClassVar[tuple[str, ...] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = cls.__name__

    @classmethod
    def check_ops(cls, ns: NativeNamespace) -> Check:
        return require_ops(ns, cls.required_ops, cls.ops_label)


def padded(n: int, tile: int) -> int:
    """n rounded up to a multiple of `tile` (zero stays zero)."""
    return -(-n // tile) * tile


def capability_check(
    capability: int, allowed: Callable[[int], bool], code: str, core: str
) -> Check:
    if allowed(capability):
        return OK
    return reject(code, f"{core}, got capability {capability}")


def dtype_name(tensor: Any) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def require_fp16(x: Any, what: str, *, end: str = "") -> None:
    """Refuse non-FP16 activations with routectl's ActivationError; `end` closes the
    message where the contract's wording has a full stop (the FP8 QPN8 calls)."""
    if dtype_name(x) != FP16:
        raise ActivationError(f"{what} requires float16 activations, got {dtype_name(x)}{end}")


def fp16_tokens(x: Any, k: int, what: str, *, end: str = "") -> tuple[Any, int]:
    """The apply prologue every linear layout shares: FP16 activations checked (`what`
    names the layout in the error), flattened to a contiguous (M, K) matrix, and M."""
    require_fp16(x, what, end=end)
    x2 = tokens(x, k)
    return x2, x2.shape[0]


def tokens(x: Any, k: int) -> Any:
    """The activations as a contiguous (M, K) matrix: M = every leading dimension."""
    if x.shape[-1] != k:
        raise ValueError(f"activation width {x.shape[-1]} does not match K={k}")
    if x.dim() == 2 and x.is_contiguous():
        return x  # already (M, K): replay issues thousands of these calls
    return x.reshape(-1, k).contiguous()


def restore_leading(y: Any, x: Any) -> Any:
    """Give the (M, N) result the leading dimensions of the original activations."""
    if x.dim() == 2:
        return y
    return y.reshape(*x.shape[:-1], y.shape[-1])


def empty_fp16(shape: tuple[int, ...], like: Any) -> Any:
    """An FP16 result buffer on `like`'s device (on meta: shared, `native.meta_tensors`)."""
    return meta_tensors.empty_beside(shape, "float16", like)


def owned_fp16(shape: tuple[int, ...], like: Any) -> Any:
    """An FP16 buffer that belongs to one invocation (scratch, docs/contracts/core.md §2.2) or one
    binding (a workspace): its own allocation on every device, meta included, so that who owns
    which buffer stays visible in replay and to the tests."""
    import torch

    return torch.empty(shape, dtype=torch.float16, device=like.device)


SILU_AND_MUL_OP = "silu_and_mul"


def silu_and_mul(ns: NativeNamespace, y: Any) -> Any:
    """SiLU(gate) * up on a (M, 2H) [gate | up] result: the unfused gate/up epilogue.

    Runs as the engine's `silu_and_mul` op rather than torch arithmetic: the call is then
    recorded like every other launch, and replay on meta tensors stays free of torch's
    Python meta kernels (their first use imports sympy, about a second).
    """
    out = empty_fp16((*y.shape[:-1], y.shape[-1] // 2), y)
    ns.call(SILU_AND_MUL_OP, result=out, input=y)
    return out


@dataclass
class Prepared:
    """What a kernel's preparation leaves on the layer: resident tensors (padding included),
    per-invocation scratch in bytes, and the dispatch functions."""

    resident: dict[str, Any]
    apply: Callable[[Any], Any] | None = None
    apply_gated: Callable[[Any], Any] | None = None
    scratch: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class KernelPlan:
    """What the chosen kernel class decided for one layer before any tensor is touched
    (torch-free), and how it prepares the tensors: the second and third steps of a kernel's
    lifecycle (capability, preparation, apply), so the loader never asks which class won."""

    layout: str
    flags: Mapping[str, Any]
    # Prepares the checkpoint tensors as planned; called only when there are tensors.
    prepare: Callable[[dict[str, Any]], Prepared]
    # Requested options the build or the engine refused, as (option, reason): the policy
    # names the field and its requested value in the fallback it records.
    refused: tuple[tuple[str, Reason], ...] = ()
    # Fallbacks the kernel records itself, each by option name (a field of the family's
    # policy section: the loader qualifies it with the section; native never names a key).
    fallbacks: tuple[Fallback, ...] = ()
    # What the loaded layer keeps beside its tensors (`PreparedLayer.state`).
    state: Mapping[str, Any] = field(default_factory=dict)


class PreparingKernel(Protocol):
    """A capability class that also plans and prepares its layers; `setup` is its family's
    bundle of policy options and engine resources (built by policies/)."""

    name: ClassVar[str]

    @classmethod
    def plan(cls, layer: Any, setup: Any, ns: NativeNamespace) -> KernelPlan: ...
