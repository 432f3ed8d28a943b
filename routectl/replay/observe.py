"""Observing a real run: which catalogue ops ran, with which plans.

`OpObserver` is a torch dispatch mode: it sees every call that reaches torch's dispatcher in
namespace `namespace` (e.g. `routectl::awq_sm70_prepare`), whoever issued it, so it is
independent of routectl's recording double. Each call's arguments are bound by the op's
catalogue schema and its plan derived by the catalogue's rules
(`routectl.namespaces.ops.derive_plan`); consecutive per-expert calls are aggregated by the
recorder's own rule (`routectl.namespaces.ops.CallLog`).
Ops outside the catalogue, and calls that never reach the dispatcher (a declared-only op of a
composite namespace, a plain torch function), are not seen.

Importing this module imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from routectl.namespaces.ops import CallLog, bind_arguments, derive_plan
from routectl.project import Catalogue


@dataclass(frozen=True)
class ObservedCall:
    """One observed call, unaggregated: its op and the (element type, bytes) of each tensor
    it returned, in order."""

    op: str
    outputs: tuple[tuple[str, int], ...]

    @property
    def nbytes(self) -> int:
        return sum(size for _, size in self.outputs)


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for item in value for t in _tensors(item)]
    return []


class OpObserver(TorchDispatchMode):
    """While active (`with OpObserver(catalogue, "routectl") as seen:`), records every call of
    a catalogue op in `namespace`: `calls` as `{"op", "plan"}` records (aggregated),
    `observed` one entry per call with the tensors it returned."""

    def __init__(self, catalogue: Catalogue, namespace: str) -> None:
        super().__init__()
        self._catalogue = catalogue
        self._namespace = namespace
        self._log = CallLog()
        self.calls: list[dict[str, Any]] = self._log.calls
        self.observed: list[ObservedCall] = []

    def mark(self) -> int:
        """Close any open bank and return the position to read the next calls from."""
        self._log.close()
        return len(self.calls)

    def since(self, mark: int) -> list[dict[str, Any]]:
        return self.calls[mark:]

    def __torch_dispatch__(
        self,
        func: Any,
        types: Sequence[type],
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        kwargs = dict(kwargs or {})
        out = func(*args, **kwargs)
        if func.namespace != self._namespace:
            return out
        name = func._schema.name.partition("::")[2]
        spec = self._catalogue.ops.get(name)
        if spec is None:
            return out
        plan = derive_plan(spec, bind_arguments(spec, tuple(args), kwargs))
        self._log.add(name, plan, per_expert=spec.per_expert)
        self.observed.append(
            ObservedCall(
                name,
                tuple(
                    (str(t.dtype).removeprefix("torch."), t.numel() * t.element_size())
                    for t in _tensors(out)
                ),
            )
        )
        return out


# --- replay against execution ---------------------------------------------------------------


@dataclass(frozen=True)
class CallRecord:
    """What one layer did: its prepare calls, the calls of one apply of `m` tokens (plans
    carrying `m`, as snapshots record them), its prepared layout and resident bytes."""

    m: int
    prepare: list[dict[str, Any]]
    dispatch: list[dict[str, Any]]
    prepared_layout: str | None
    resident_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "m": self.m,
            "prepare": self.prepare,
            "dispatch": self.dispatch,
            "prepared_layout": self.prepared_layout,
            "resident_bytes": self.resident_bytes,
        }

    def differences(self, other: CallRecord) -> list[str]:
        """One line per field that differs (empty: the records are equal)."""
        mine, theirs = self.to_json(), other.to_json()
        return [
            f"{key}: {mine[key]!r} != {theirs[key]!r}" for key in mine if mine[key] != theirs[key]
        ]


def with_m(calls: Sequence[Mapping[str, Any]], m: int) -> list[dict[str, Any]]:
    return [{"op": c["op"], "plan": {"m": m, **c["plan"]}} for c in calls]


def replay_record(layer: Mapping[str, Any], m: int) -> CallRecord:
    """The record the startup report's replay of `layer` (its JSON entry) holds for M = m."""
    samples = [s for c in layer["classes"] for s in c["samples"] if s["m"] == m]
    if not samples:
        raise KeyError(f"the startup report replayed no call of {m} tokens")
    return CallRecord(
        m,
        list(layer["prepare"]),
        list(samples[0]["ops"]),
        layer["prepared_layout"],
        int(layer["bytes"]["total"]),
    )
