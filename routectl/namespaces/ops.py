"""Generic description of a native operator: its schema, its plan keys and its fake.

The project's catalogue (in `native/`) instantiates these; the recording double and the
probe read them. Plans are taken from named scalar arguments and tensor shapes only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

_ARG = re.compile(
    r"^(?P<type>[A-Za-z]+(?:\([a-z]!?\))?(?:\[\])?\??)\s+(?P<name>[A-Za-z_]\w*)"
    r"(?:\s*=\s*(?P<default>.+))?$"
)


@dataclass(frozen=True)
class Arg:
    name: str
    type: str  # schema type: "Tensor", "Tensor(a!)", "int", "bool", "float", "Tensor[]"
    default: str | None = None

    @property
    def is_tensor(self) -> bool:
        return self.type.startswith("Tensor") and not self.type.endswith("[]")

    @property
    def is_mutated(self) -> bool:
        return "!" in self.type


def parse_schema(schema: str) -> tuple[str, tuple[Arg, ...], str]:
    """Split `name(Type arg, ...) -> ret` into its parts (the subset of torch's grammar we use)."""
    match = re.fullmatch(r"\s*([\w.:]+)\((.*)\)\s*->\s*(.+?)\s*", schema)
    if match is None:
        raise ValueError(f"malformed operator schema: {schema!r}")
    name, body, ret = match.groups()
    args: list[Arg] = []
    for part in (p.strip() for p in body.split(",")):
        if not part or part == "*":
            continue
        m = _ARG.match(part)
        if m is None:
            raise ValueError(f"malformed argument {part!r} in schema {schema!r}")
        args.append(Arg(m["name"], m["type"], m["default"]))
    return name.split("::")[-1], tuple(args), ret


@dataclass(frozen=True)
class PlanKey:
    """One recorded plan value.

    `source` is `"arg:NAME"` (a scalar argument) or `"dim:NAME:I"` (dimension I of tensor
    argument NAME) or `"dtype:NAME"` (the element type of tensor NAME, as a layout label via
    `labels`). `optional` keys are omitted when their argument is absent: that is the
    catalogue's declared rule for keys that do not apply to a call. `when` names an argument
    that must be present for the key to be recorded at all: one op called in two calling
    conventions (e.g. by two hardware families) keeps each convention's own keys.
    """

    key: str
    source: str
    optional: bool = False
    labels: Mapping[str, Any] | None = None
    when: str | None = None
    # The source split once: (kind, argument name, dimension index or -1).
    parsed: tuple[str, str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kind, _, rest = self.source.partition(":")
        index = -1
        if kind == "dim":
            rest, _, dim = rest.rpartition(":")
            index = int(dim)
        elif kind not in ("arg", "dtype"):
            raise ValueError(f"unknown plan source {self.source!r}")
        object.__setattr__(self, "parsed", (kind, rest, index))


@dataclass(frozen=True)
class OpSpec:
    schema: str
    plan: tuple[PlanKey, ...] = ()
    pinned: bool = False
    # Produces the op's outputs from its keyword arguments (meta tensors in replay).
    fake: Callable[..., Any] | None = None
    # Per-expert preparation: calls within one bank are recorded once with `experts: E`.
    per_expert: bool = False
    # A scalar getter (ABI revision): its value in replay comes from the namespace double.
    getter: bool = False
    # Checks a call's arguments beyond names (dtypes, shapes) on meta tensors; raises.
    validate: Callable[..., None] | None = None
    doc: str = ""
    name: str = field(init=False)
    args: tuple[Arg, ...] = field(init=False)
    returns: str = field(init=False)
    # (name, kind, optional) per argument, kind "tensor" | "scalar" | "other": what the
    # recording double checks on every call, computed once.
    arg_kinds: tuple[tuple[str, str, bool], ...] = field(init=False, repr=False)
    arg_names: tuple[str, ...] = field(init=False, repr=False)
    arg_name_set: frozenset[str] = field(init=False, repr=False)
    # Arguments a call must name (no default in the schema).
    required_names: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        name, args, returns = parse_schema(self.schema)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "returns", returns)
        kinds = tuple(
            (
                a.name,
                "tensor" if a.is_tensor else "other" if a.type.startswith("Tensor") else "scalar",
                a.type.endswith("?") or a.default is not None,
            )
            for a in args
        )
        object.__setattr__(self, "arg_kinds", kinds)
        object.__setattr__(self, "arg_names", tuple(a.name for a in args))
        object.__setattr__(self, "arg_name_set", frozenset(self.arg_names))
        object.__setattr__(self, "required_names", tuple(a.name for a in args if a.default is None))

    def arg(self, name: str) -> Arg:
        for a in self.args:
            if a.name == name:
                return a
        raise KeyError(name)


def plan_value(key: PlanKey, kwargs: Mapping[str, Any]) -> tuple[bool, Any]:
    """Evaluate one plan key against a call's keyword arguments: (present, value)."""
    kind, name, index = key.parsed
    value = kwargs.get(name)
    if value is None:
        return (False, None)
    if kind == "arg":
        return (True, value if not isinstance(value, bool) else bool(value))
    if kind == "dim":
        return (True, int(value.shape[index]))
    dtype = str(value.dtype).removeprefix("torch.")
    labels = key.labels or {}
    return (True, labels.get(dtype, dtype))


def derive_plan(spec: OpSpec, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The plan of one call, by the catalogue's rules (used by replay and by observers)."""
    plan: dict[str, Any] = {}
    # `plan_value` inlined, with each tensor's shape read once per call: on the replay path
    # this runs for every recorded call, and a meta tensor's `.shape` builds a new Size.
    shapes: dict[str, Any] = {}
    for key in spec.plan:
        if key.when is not None and kwargs.get(key.when) is None:
            continue
        kind, name, index = key.parsed
        value = kwargs.get(name)
        if value is None:
            if not key.optional:
                raise ValueError(f"{spec.name}: plan key {key.key!r} needs {key.source}")
            continue
        if kind == "dim":
            shape = shapes.get(name)
            if shape is None:
                shape = shapes[name] = value.shape
            plan[key.key] = int(shape[index])
        elif kind == "arg":
            plan[key.key] = value if not isinstance(value, bool) else bool(value)
        else:
            plan[key.key] = plan_value(key, kwargs)[1]
    return plan


def bind_arguments(
    spec: OpSpec, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """Name every argument of a call by the schema (positional calls from torch included)."""
    names = spec.arg_names
    if len(args) > len(names):
        raise TypeError(f"{spec.name}: {len(args)} positional arguments, schema has {len(names)}")
    bound = dict(zip(names, args, strict=False))
    if not spec.arg_name_set.issuperset(kwargs):
        unknown = next(key for key in kwargs if key not in spec.arg_name_set)
        raise TypeError(f"{spec.name}: unknown argument {unknown!r} (schema: {spec.schema})")
    if bound:
        twice = bound.keys() & kwargs.keys()
        if twice:
            raise TypeError(f"{spec.name}: argument {min(twice)!r} given twice")
        bound.update(kwargs)
    else:
        bound = dict(kwargs)
    for name in spec.required_names:
        if name not in bound:
            raise TypeError(f"{spec.name}: missing argument {name!r}")
    return bound


class CallLog:
    """Calls in order as `{"op", "plan"}` records, under the one aggregation rule that the
    recording double and observers of real runs share: consecutive calls of a per-expert op
    with equal plans are one record with `experts: E` (a bank is prepared one expert at a
    time). Any other call, or `close()`, ends the open bank."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self._open: tuple[str, tuple[tuple[str, Any], ...]] | None = None

    def add(self, op: str, plan: Mapping[str, Any], *, per_expert: bool, times: int = 1) -> None:
        """`times` identical calls of `op` with `plan`, in order."""
        if times < 1:
            raise ValueError(f"{op}: a call is recorded at least once, got times={times}")
        if not per_expert:
            self._open = None
            if times == 1:  # nearly every call
                self.calls.append({"op": op, "plan": dict(plan)})
            else:
                self.calls.extend({"op": op, "plan": dict(plan)} for _ in range(times))
            return
        key = (op, tuple(sorted(plan.items())))
        if self._open == key:
            self.calls[-1]["plan"]["experts"] += times
        else:
            self.calls.append({"op": op, "plan": {**plan, "experts": times}})
            self._open = key

    def close(self) -> None:
        self._open = None
