"""`routectl native probe`: is a real op namespace a build the catalogue can serve?

For each probed kernel or stage, every required op is `present` or `missing`; present pinned
ops are compared with their pinned schema (`schema match` / `schema mismatch`), unpinned ones
report `schema unpinned`. Where the catalogue names an ABI getter, its revision is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from routectl.errors import InputError
from routectl.io.jsonread import QUOTE_CHARS, shorten
from routectl.namespaces.ops import parse_schema
from routectl.project import Catalogue
from routectl.suggest import did_you_mean


class ProbedNamespace(Protocol):
    @property
    def name(self) -> str: ...

    def has_op(self, op: str) -> bool: ...

    def schema(self, op: str) -> str | None: ...

    def abi_revision(self, getter: str) -> int | None: ...


@dataclass(frozen=True)
class OpStatus:
    op: str
    present: bool
    schema: str  # "schema match" | "schema mismatch" | "schema unpinned" | "" when missing
    expected: str | None = None
    found: str | None = None

    @property
    def ok(self) -> bool:
        return self.present and self.schema != "schema mismatch"

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "status": "present" if self.present else "missing",
            "schema": self.schema or None,
            "expected": self.expected,
            "found": self.found,
        }


@dataclass(frozen=True)
class KernelProbe:
    name: str
    ops: tuple[OpStatus, ...]
    abi_getter: str | None
    abi_revision: int | None

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.ops)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "ops": [s.to_json() for s in self.ops],
            "abi_getter": self.abi_getter,
            "abi_revision": self.abi_revision,
        }


def same_schema(pinned: str, found: str) -> bool:
    """Equal up to the namespace prefix torch adds (`ns::name(...)`)."""
    try:
        return parse_schema(pinned) == parse_schema(found)
    except ValueError:
        return False


def probe_op(catalogue: Catalogue, ns: ProbedNamespace, op: str) -> OpStatus:
    if not ns.has_op(op):
        return OpStatus(op, False, "")
    spec = catalogue.ops.get(op)
    if spec is None or not spec.pinned:
        return OpStatus(op, True, "schema unpinned")
    found = ns.schema(op)
    if found is not None and same_schema(spec.schema, found):
        return OpStatus(op, True, "schema match")
    return OpStatus(op, True, "schema mismatch", expected=spec.schema, found=found)


def probe(
    catalogue: Catalogue, ns: ProbedNamespace, kernels: Sequence[str] = ()
) -> list[KernelProbe]:
    names = list(kernels) or list(catalogue.kernels)
    unknown = [n for n in names if n not in catalogue.kernels]
    if unknown:
        known = ", ".join(catalogue.kernels)
        shown = ", ".join(n if len(n) <= QUOTE_CHARS else shorten(n) for n in unknown[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        hint = did_you_mean(unknown[0], catalogue.kernels)
        raise InputError(f"unknown kernel or stage {shown}{more}{hint} (known: {known})")
    results = []
    for name in names:
        getter = catalogue.abi_getters.get(name)
        revision = ns.abi_revision(getter) if getter and ns.has_op(getter) else None
        results.append(
            KernelProbe(
                name,
                tuple(probe_op(catalogue, ns, op) for op in catalogue.kernels[name]),
                getter,
                revision,
            )
        )
    return results


def render_text(namespace: str, results: Iterable[KernelProbe]) -> list[str]:
    lines = []
    for result in results:
        abi = ""
        if result.abi_getter:
            shown = "absent" if result.abi_revision is None else result.abi_revision
            abi = f"  (ABI revision {shown} via {result.abi_getter})"
        lines.append(f"{result.name}: {'ok' if result.ok else 'NOT SERVED'}{abi}")
        for s in result.ops:
            detail = f", {s.schema}" if s.schema else ""
            lines.append(f"  {namespace}::{s.op}: {'present' if s.present else 'missing'}{detail}")
            if s.schema == "schema mismatch":
                lines.append(f"    expected {s.expected}")
                lines.append(f"    found    {s.found}")
    return lines
