"""Observing a real run: which catalogue ops ran, with which plans.

`OpObserver` is a torch dispatch mode: it sees every call that reaches torch's dispatcher in
namespace `namespace` (e.g. `routectl::awq_sm70_prepare`), whoever issued it, so it is
independent of routectl's recording double. Each call's arguments are bound by the op's
catalogue schema and its plan derived by the catalogue's rules
(`routectl.namespaces.ops.derive_plan`); consecutive per-expert calls are aggregated by the
recorder's own rule (`routectl.namespaces.ops.CallLog`).
Ops outside the catalogue, and calls that never reach the dispatcher (a declared-only op of a
composite namespace, a plain torch function), are not seen.

`RouteObserver` is the session-long observer an engine installs at start-up
(`EngineSession.observe`): the same dispatcher boundary and plan rules, but counted per
(layer, op, plan, token count M, captured in a CUDA graph or eager) for an observation record
(`routectl.replay.observed`), with the layer and M the engine's layer call declares.

Importing this module imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from routectl.namespaces.ops import CallLog, OpSpec, bind_arguments, derive_plan
from routectl.project import Catalogue
from routectl.replay.observed import EntryKey, Header, ObservationRecord


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


def _catalogued(catalogue: Catalogue, namespace: str, func: Any) -> tuple[str, OpSpec] | None:
    """The (op name, spec) of dispatcher op `func` when it is a catalogue op of `namespace`;
    None for any other op (both observers ignore those)."""
    if func.namespace != namespace:
        return None
    name = func._schema.name.partition("::")[2]
    spec = catalogue.ops.get(name)
    return None if spec is None else (name, spec)


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
        found = _catalogued(self._catalogue, self._namespace, func)
        if found is None:
            return out
        name, spec = found
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


# --- the session's observer ---------------------------------------------------------------

# The layer name of a catalogue call made outside any layer's load or call.
UNATTRIBUTED = "(outside any layer)"

_Plan = tuple[tuple[str, Any], ...]


class _InLayer:
    """The context of one layer's load (m None) or call of m tokens (a class, not
    contextlib: it is entered on every layer call)."""

    __slots__ = ("_m", "_name", "_observer", "_saved")

    def __init__(self, observer: RouteObserver, name: str, m: int | None) -> None:
        self._observer, self._name, self._m = observer, name, m
        self._saved: tuple[str, int | None] = (UNATTRIBUTED, None)

    def __enter__(self) -> None:
        observer = self._observer
        observer.flush()
        self._saved = (observer.layer_name, observer.m)
        observer.layer_name, observer.m = self._name, self._m

    def __exit__(self, *exc: object) -> None:
        observer = self._observer
        observer.flush()
        observer.layer_name, observer.m = self._saved


def never_capturing() -> bool:
    """The capture predicate of an engine that captures no CUDA graph."""
    return False


class RouteObserver(TorchDispatchMode):
    """Counts every catalogue call in `namespace` that reaches the dispatcher, keyed by the
    layer and M set by `in_layer` (the engine's layer call), the op, the plan derived from
    the call's own arguments (`derive_plan`; never a kernel class's prediction) and whether
    `is_capturing()` said a CUDA graph was being captured (the engine passes its
    predicate, e.g. torch's `cuda.is_current_stream_capturing`: routectl never asks the host
    about a GPU; without one, no call is marked captured). Consecutive per-expert calls with
    equal plans are one call of `experts: E`, as `CallLog` aggregates them.

    The mode only reads arguments on the host: no device synchronisation, no device
    allocation, so a step can be captured in a CUDA graph under it. A graph's replays do not
    reach the dispatcher: the captured calls are counted once, when captured."""

    def __init__(
        self,
        catalogue: Catalogue,
        namespace: str,
        *,
        is_capturing: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__()
        self._catalogue = catalogue
        self._namespace = namespace
        self._capturing = is_capturing if is_capturing is not None else never_capturing
        # OpOverload -> (op name, spec), or None outside the catalogue: one lookup a call.
        self._specs: dict[Any, tuple[str, OpSpec] | None] = {}
        self.counts: dict[EntryKey, int] = {}
        self.layer_name = UNATTRIBUTED
        self.m: int | None = None
        self._bank: EntryKey | None = None  # the open per-expert bank (experts counted apart)
        self._bank_experts = 0

    def in_layer(self, name: str, m: int | None) -> _InLayer:
        """`with observer.in_layer(name, m):` around one layer's load (m None) or call."""
        return _InLayer(self, name, m)

    def flush(self) -> None:
        """Close the open per-expert bank into the counts."""
        bank = self._bank
        if bank is None:
            return
        layer, m, captured, op, plan = bank
        key = (layer, m, captured, op, tuple(sorted((*plan, ("experts", self._bank_experts)))))
        self.counts[key] = self.counts.get(key, 0) + 1
        self._bank = None

    def record(self, header: Header) -> ObservationRecord:
        """What was observed so far, under `header` (observation goes on)."""
        self.flush()
        return ObservationRecord(header, dict(self.counts))

    def _spec(self, func: Any) -> tuple[str, OpSpec] | None:
        found = _catalogued(self._catalogue, self._namespace, func)
        self._specs[func] = found
        return found

    def __torch_dispatch__(
        self,
        func: Any,
        types: Sequence[type],
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        try:
            found = self._specs[func]
        except KeyError:
            found = self._spec(func)
        if found is None:
            return out
        name, spec = found
        plan = derive_plan(spec, bind_arguments(spec, tuple(args), kwargs))
        m = self.m
        if m is not None:
            plan.setdefault("m", m)  # as rows hold dispatch plans: {"m": m, **plan}
        key = (self.layer_name, m, bool(self._capturing()), name, tuple(sorted(plan.items())))
        if spec.per_expert:
            if self._bank == key:
                self._bank_experts += 1
            else:
                self.flush()
                self._bank, self._bank_experts = key, 1
            return out
        if self._bank is not None:
            self.flush()
        self.counts[key] = self.counts.get(key, 0) + 1
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
