"""The injected native namespace: what kernels ask ("is op X here", "which ABI revision") and
how they call ops. The engine passes a real `torch.ops.<ns>` adapter; tests and replay pass
doubles. Kernels never import torch.ops themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from routectl.reasons import OK, Check, missing_ops_reason


@runtime_checkable
class NativeNamespace(Protocol):
    """The native ops a kernel calls, injected: `torch.ops.<ns>` in the engine
    (TorchOpsNamespace), a double in tests (InMemoryNamespace), a recorder in replay."""

    @property
    def name(self) -> str: ...

    def has_op(self, op: str) -> bool: ...

    def abi_revision(self, getter: str) -> int | None:
        """The integer a version-getter op returns, or None when the getter is absent."""
        ...

    def call(self, op: str, /, **kwargs: Any) -> Any: ...

    def call_repeated(self, op: str, times: int, /, **kwargs: Any) -> Any:
        """`op` run `times` times on the very same arguments (a bank whose experts share one
        set of checkpoint tensors); the last run's result. A recorder may check and record
        the repeats without re-running them."""
        ...


def run_repeated(call: Callable[..., Any], op: str, times: int, kwargs: Mapping[str, Any]) -> Any:
    """`call(op, **kwargs)` `times` times: `call_repeated` for namespaces that execute."""
    if times < 1:
        raise ValueError(f"{op}: times must be at least 1, got {times}")
    result = None
    for _ in range(times):
        result = call(op, **kwargs)
    return result


def missing_ops(ns: NativeNamespace, ops: Iterable[str]) -> list[str]:
    """Required ops absent from `ns`, in the order they were required."""
    return [op for op in ops if not ns.has_op(op)]


def require_ops(ns: NativeNamespace, ops: Iterable[str], label: str = "") -> Check:
    """OK, or the one missing-operator reason every kernel and stage reports."""
    missing = missing_ops(ns, ops)
    return (False, missing_ops_reason(label, missing)) if missing else OK


class InMemoryNamespace:
    """A namespace double: any subset of op names, ABI revisions, optional implementations."""

    def __init__(
        self,
        ops: Iterable[str],
        *,
        name: str = "double",
        abi: Mapping[str, int] | None = None,
        impls: Mapping[str, Callable[..., Any]] | None = None,
    ) -> None:
        self._name = name
        self._ops = frozenset(ops)
        self._abi = dict(abi or {})
        self._impls = dict(impls or {})

    @property
    def name(self) -> str:
        return self._name

    @property
    def ops(self) -> frozenset[str]:
        return self._ops

    def has_op(self, op: str) -> bool:
        return op in self._ops

    def abi_revision(self, getter: str) -> int | None:
        if getter not in self._ops:
            return None
        return int(self._abi.get(getter, 0))

    def call(self, op: str, /, **kwargs: Any) -> Any:
        if op not in self._ops:
            raise RuntimeError(f"native op {self._name}::{op} is not available")
        impl = self._impls.get(op)
        if impl is None:
            raise RuntimeError(f"no implementation for {self._name}::{op} in this double")
        return impl(**kwargs)

    def call_repeated(self, op: str, times: int, /, **kwargs: Any) -> Any:
        return run_repeated(self.call, op, times, kwargs)

    def without(self, *ops: str) -> InMemoryNamespace:
        return InMemoryNamespace(
            self._ops - set(ops), name=self._name, abi=self._abi, impls=self._impls
        )


class TorchOpsNamespace:
    """Adapter over a real `torch.ops.<namespace>` (the engine's runtime namespace)."""

    def __init__(self, namespace: str) -> None:
        import torch  # only the runtime adapter needs torch

        self._name = namespace
        self._ops = getattr(torch.ops, namespace)

    @property
    def name(self) -> str:
        return self._name

    def _packet(self, op: str) -> Any | None:
        if op.startswith("torch."):
            # Dense ATen calls (e.g. torch.mm after an exact dequantize) are recorded like
            # native ops in replay; at runtime they are plain torch functions.
            import torch

            return getattr(torch, op.removeprefix("torch."), None)
        try:
            return getattr(self._ops, op)
        except (AttributeError, RuntimeError):
            return None

    def has_op(self, op: str) -> bool:
        return self._packet(op) is not None

    def schema(self, op: str) -> str | None:
        packet = self._packet(op)
        if packet is None or not hasattr(packet, "overloads"):
            return None
        overloads = packet.overloads()
        default = "default" if "default" in overloads else overloads[0]
        return str(getattr(packet, default)._schema)

    def abi_revision(self, getter: str) -> int | None:
        packet = self._packet(getter)
        if packet is None:
            return None
        return int(packet())

    def call(self, op: str, /, **kwargs: Any) -> Any:
        packet = self._packet(op)
        if packet is None:
            raise RuntimeError(f"native op {self._name}::{op} is not available")
        return packet(**kwargs)

    def call_repeated(self, op: str, times: int, /, **kwargs: Any) -> Any:
        return run_repeated(self.call, op, times, kwargs)
