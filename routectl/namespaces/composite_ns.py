"""A native namespace made of implemented ops plus declared-only entries.

Admission asks "is op X here"; a process that runs only some ops for real (the CPU reference
ops) can still present a full engine build to selection by declaring the others. A declared
op answers `has_op` like a built one; calling it raises `NoImplementationError`, a clear
error naming the op, never a crash inside a kernel.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from routectl.namespaces.native_ns import NativeNamespace, run_repeated


class NoImplementationError(RuntimeError):
    """A declared-only op was called. `arguments` are the call's keyword arguments, so a
    caller can still derive the plan the call would have run."""

    def __init__(self, op: str, arguments: Mapping[str, Any]) -> None:
        super().__init__(
            f"no reference implementation for {op} (declared only: this "
            "process has no implementation of it)"
        )
        self.op = op
        self.arguments = dict(arguments)


class CompositeNamespace:
    """`implemented` serves every op it has; `declared` ops exist for admission only.

    `abi` gives the revisions of declared version getters (a declared getter without one
    raises when read: a build's revision is a fact the caller must state)."""

    def __init__(
        self,
        implemented: NativeNamespace,
        declared: Iterable[str],
        *,
        abi: Mapping[str, int] | None = None,
        name: str | None = None,
    ) -> None:
        self._implemented = implemented
        self._declared = frozenset(declared)
        self._abi = dict(abi or {})
        self._name = name or f"{implemented.name}+declared"

    @property
    def name(self) -> str:
        return self._name

    @property
    def declared(self) -> frozenset[str]:
        """Declared-only ops (those the implemented namespace lacks)."""
        return frozenset(op for op in self._declared if not self._implemented.has_op(op))

    def implements(self, op: str) -> bool:
        return self._implemented.has_op(op)

    def has_op(self, op: str) -> bool:
        return self._implemented.has_op(op) or op in self._declared

    def schema(self, op: str) -> str | None:
        """The implemented op's schema (what `routectl native probe` reads); None otherwise."""
        if not self._implemented.has_op(op):
            return None
        getter = getattr(self._implemented, "schema", None)
        return getter(op) if getter is not None else None

    def abi_revision(self, getter: str) -> int | None:
        if self._implemented.has_op(getter):
            return self._implemented.abi_revision(getter)
        if getter not in self._declared:
            return None
        if getter not in self._abi:
            raise NoImplementationError(getter, {})
        return int(self._abi[getter])

    def call(self, op: str, /, **kwargs: Any) -> Any:
        if self._implemented.has_op(op):
            return self._implemented.call(op, **kwargs)
        if op in self._declared:
            raise NoImplementationError(op, kwargs)
        raise RuntimeError(f"native op {self._name}::{op} is not available")

    def call_repeated(self, op: str, times: int, /, **kwargs: Any) -> Any:
        return run_repeated(self.call, op, times, kwargs)
