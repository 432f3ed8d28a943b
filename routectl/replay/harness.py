"""The replay harness: one row = resolve the row's own policy, build its layer on meta tensors,
load it (select + prepare) and dispatch the category's token counts through a recording
native namespace. The family code that runs here is the code the engine runs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from routectl.category import Category
from routectl.errors import InputError, SelectionError
from routectl.io.jsonread import shorten
from routectl.io.jsonwrite import json_floats
from routectl.namespaces.ops import CallLog, OpSpec, bind_arguments, derive_plan
from routectl.policy.loaded import PreparedLayer
from routectl.policy.resolve import ResolvedPolicy
from routectl.project import Catalogue, Project
from routectl.rows import RowSpec
from routectl.runtime import checkpoints, interrupt
from routectl.runtime.workers import run_shared
from routectl.suggest import did_you_mean
from routectl.workload import EngineConfig, Hardware

FULL_BUILD_ABI_REVISION = 1
PLAIN_SCALARS = (bool, int, float, str)
M = TypeVar("M")


class ReplayError(RuntimeError):
    """A call did not match the catalogue: a bug in family code, never a route."""


# Argument types whose tensor-or-scalar kind (`RecordingNamespace._check_kinds`) follows from
# the type alone; values of any other type (duck-typed doubles, lists) are checked per call.
_TYPE_DECIDED: dict[type, bool] = {type(None): True}

# (op, argument names, argument types) -> the OpSpec whose name and kind checks such a call
# passed. The spec is held and compared by identity, so another catalogue's op of the same
# name (a toy project's) never reuses a verdict. Only passes of calls whose every kind follows
# from its type are kept; a refused call is checked in full each time and refused with the
# same message.
_PASSED: dict[tuple[str, tuple[str, ...], tuple[type, ...]], OpSpec] = {}


def _type_decided(kind: type, tensor: type) -> bool:
    decided = _TYPE_DECIDED.get(kind)
    if decided is None:
        decided = issubclass(kind, tensor) or issubclass(kind, PLAIN_SCALARS)
        _TYPE_DECIDED[kind] = decided
    return decided


class RecordingNamespace:
    """Native double that checks every call against the catalogue, produces meta outputs and
    records `{"op", "plan"}`. Consecutive per-expert calls with equal plans become one record
    with `experts: E` (`routectl.namespaces.ops.CallLog`, the rule observers of real runs share)."""

    def __init__(
        self,
        catalogue: Catalogue,
        *,
        remove: Iterable[str] = (),
        abi: Mapping[str, int] | None = None,
        name: str = "replay",
    ) -> None:
        import torch  # replay records meta tensors

        self._tensor_type = torch.Tensor
        self._catalogue = catalogue
        self._available = frozenset(catalogue.ops) - set(remove)
        self._abi = dict(abi or {})
        self._name = name
        self._log = CallLog()
        self.calls: list[dict[str, Any]] = self._log.calls

    @property
    def name(self) -> str:
        return self._name

    def has_op(self, op: str) -> bool:
        return op in self._available

    def abi_revision(self, getter: str) -> int | None:
        if getter not in self._available:
            return None
        return int(self._abi.get(getter, FULL_BUILD_ABI_REVISION))

    def mark(self) -> int:
        self._log.close()
        return len(self.calls)

    def since(self, mark: int) -> list[dict[str, Any]]:
        return self.calls[mark:]

    def call(self, op: str, /, **kwargs: Any) -> Any:
        return self._record(op, 1, kwargs)

    def call_repeated(self, op: str, times: int, /, **kwargs: Any) -> Any:
        """Checked once: the arguments are the same objects each time, so are the plan and
        the meta outputs. Recorded `times` times under the CallLog rule."""
        return self._record(op, times, kwargs)

    def _record(self, op: str, times: int, kwargs: dict[str, Any]) -> Any:
        # `kwargs` is the caller's own keyword dict (keyword-only calls): not copied again.
        spec = self._catalogue.ops.get(op)
        if spec is None:
            raise ReplayError(f"{op} is not in the native catalogue")
        if op not in self._available:
            raise ReplayError(f"{op} was called but is absent from this build")
        # Cheap to build (no per-argument Python loop), unlike the checks it stands for.
        signature = (op, tuple(kwargs), tuple(map(type, kwargs.values())))
        if _PASSED.get(signature) is spec:
            # Same op spec, same argument names and same argument types as a call that
            # passed: the name and kind checks would pass again. `kwargs` is this call's
            # own dict (keyword-only), so it serves as the bound arguments as is.
            bound = kwargs
        else:
            try:
                bound = bind_arguments(spec, (), kwargs)
            except TypeError as exc:
                raise ReplayError(str(exc)) from None
            self._check_kinds(spec, bound)
            tensor = self._tensor_type
            if all(_type_decided(kind, tensor) for kind in signature[2]):
                _PASSED[signature] = spec
        if spec.validate is not None:
            spec.validate(**bound)
        plan = derive_plan(spec, bound)
        self._log.add(op, plan, per_expert=spec.per_expert, times=times)
        if spec.getter:
            # A getter called as an op (a support query): recorded like any call, and
            # answering what `abi_revision` answers for this build.
            return self.abi_revision(op)
        if spec.returns == "()":
            return None
        if spec.fake is None:
            raise ReplayError(f"{op} returns {spec.returns} but the catalogue has no fake")
        return spec.fake(**bound)

    def _check_kinds(self, spec: OpSpec, bound: Mapping[str, Any]) -> None:
        tensor = self._tensor_type
        for name, kind, optional in spec.arg_kinds:
            value = bound.get(name)
            if value is None:
                if optional:
                    continue
                raise ReplayError(f"{spec.name}: argument {name} is None")
            if kind == "other":
                continue
            # Duck-typed: doubles of tensors (a toy project's) count as tensors too.
            is_tensor = isinstance(value, tensor) or (
                not isinstance(value, PLAIN_SCALARS)
                and hasattr(value, "shape")
                and hasattr(value, "dtype")
            )
            if kind == "tensor" and not is_tensor:
                raise ReplayError(f"{spec.name}: argument {name} must be a tensor")
            if kind == "scalar" and is_tensor:
                raise ReplayError(
                    f"{spec.name}: argument {name} must be a scalar "
                    f"({spec.arg(name).type}), got a tensor"
                )


@dataclass
class ReplayContext:
    project: Project
    row: RowSpec
    policy: ResolvedPolicy
    namespace: RecordingNamespace
    hardware: Hardware

    def token_counts(self, counts: Sequence[int]) -> list[int]:
        """Token counts to replay: never above the row's budget."""
        return [m for m in counts if m <= self.row.engine.max_num_batched_tokens]


def resolve_row(project: Project, row: RowSpec) -> ResolvedPolicy:
    """The row's policy, from its own variables overlay (never the caller's environment)."""
    return project.resolve(
        dict(row.config) or None,
        dict(row.variables),
        Hardware(row.capability),
        row.engine,
        emit_warnings=False,
    )


def _typed_key(value: Any) -> Hashable | None:
    """`value` as a hashable key that tells apart whatever resolution could tell apart (the
    type of every item is in it: `1`, `1.0` and `True` are equal and hash alike in Python);
    None when it holds a value of another kind (such a row is resolved afresh)."""
    kind = type(value)
    if kind is dict:
        items = []
        for k, v in value.items():
            key = _typed_key(v)
            if type(k) is not str or key is None:
                return None
            items.append((k, key))
        return (dict, tuple(sorted(items)))
    if kind is list or kind is tuple:
        keys = tuple(_typed_key(v) for v in value)
        return None if None in keys else (kind, keys)
    if kind in PLAIN_SCALARS or value is None:
        return (kind, value)
    return None


_NO_CONFIG = _typed_key({})


class PolicyMemo:
    """The resolved policies of one replay run, each computed once. `Project.resolve` is pure
    in the config, the variables and the context computed from (hardware, engine); rows mostly
    differ in what that context does not read (today about 190 policies for 1,500 replayed
    rows), so a policy is keyed by exactly those three. Kept for one run only."""

    def __init__(self, project: Project) -> None:
        self._project = project
        self._policies: dict[Hashable, ResolvedPolicy] = {}
        # (hardware, engine) -> the key of their context (`Project.context` is pure too).
        self._contexts: dict[tuple[Hardware, EngineConfig], Hashable | None] = {}

    def _context_key(self, hardware: Hardware, engine: EngineConfig) -> Hashable | None:
        pair = (hardware, engine)
        if pair not in self._contexts:
            self._contexts[pair] = _typed_key(self._project.resolution_context(hardware, engine))
        return self._contexts[pair]

    def resolve(self, row: RowSpec) -> ResolvedPolicy:
        config = _typed_key(dict(row.config)) if row.config else _NO_CONFIG
        context = self._context_key(Hardware(row.capability), row.engine)
        if config is None or context is None:  # not plain data: no key stands for it
            return resolve_row(self._project, row)
        key = (config, row.variables, context)
        policy = self._policies.get(key)
        if policy is None:
            policy = self._policies[key] = resolve_row(self._project, row)
        return policy


def status_route(code: str, message: str) -> dict[str, Any]:
    return {"kernel": None, "verdicts": [], "status": {"code": code, "message": message}}


def error_route(error: SelectionError) -> dict[str, Any]:
    return {
        "error": {"code": error.code, "message": error.message},
        "verdicts": [v.to_json() for v in error.verdicts],
    }


def replay_row(
    project: Project, category: Category, row: RowSpec, *, policies: PolicyMemo | None = None
) -> tuple[dict[str, Any], ResolvedPolicy | None]:
    if row.status is not None:
        return {"id": row.id, "route": status_route(*row.status)}, None
    policy = resolve_row(project, row) if policies is None else policies.resolve(row)
    namespace = RecordingNamespace(
        project.catalogue, remove=row.native.remove, abi=dict(row.native.abi)
    )
    ctx = ReplayContext(project, row, policy, namespace, Hardware(row.capability))
    try:
        route = category.route(ctx)
    except SelectionError as exc:
        route = error_route(exc)
    return {"id": row.id, "route": route}, policy


def row_text(row: Mapping[str, Any]) -> str:
    """A row as canonical JSON text (sorted keys, no NaN): what a snapshot file holds, and
    how a worker process hands a row back. Equal texts are equal JSON values; the text is
    compared only with other `row_text`s (`routectl.check.known_rows`), never written."""
    # orjson writes JSON values as `json.dumps` does (the texts differ: no spaces, UTF-8,
    # 1e-05 as 0.00001), several times faster. Reading its text back equal to the row proves
    # the row held nothing else: NaN, infinity, a tuple, an Enum, a UUID or a dataclass would
    # come back as another value.
    try:
        text = orjson.dumps(row, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        pass  # integers outside 64 bits, nesting deeper than 255, non-string keys, surrogates
    else:
        if orjson.loads(text) == row:
            return text.decode("utf-8")
    floats = json_floats(row)
    if floats is not None and all(map(math.isfinite, floats)):
        # Only exact JSON types (tuples too) and finite floats: orjson writes them alike.
        try:
            return orjson.dumps(row, option=orjson.OPT_SORT_KEYS).decode("utf-8")
        except orjson.JSONEncodeError:
            pass
    try:
        return json.dumps(row, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ReplayError(f"row {row.get('id')!r} is not JSON: {exc}") from None


def plain_row_text(row: Mapping[str, Any]) -> str:
    """`row_text` of a row known to hold JSON's own types and finite numbers only (read from
    a JSON text, or made plain), without the walk that proves it for fresh rows."""
    try:
        return orjson.dumps(row, option=orjson.OPT_SORT_KEYS).decode("utf-8")
    except orjson.JSONEncodeError:
        return row_text(row)


RowText = tuple[str, str]  # a row's id and its canonical JSON text


def _nothing() -> Any:
    return None


def replay_texts(
    project: Project,
    categories: Sequence[Category],
    *,
    jobs: int = 1,
    meanwhile: Callable[[], M] = _nothing,
) -> tuple[dict[str, list[RowText]], M]:
    """Every row of every category replayed (no row cache; each distinct policy is resolved
    once, `PolicyMemo`), shared by up to `jobs` processes (`routectl.runtime.workers`), as
    (id, canonical text) sorted by id; and what `meanwhile()` returned. The output does not
    depend on `jobs`."""
    tasks = [(category, spec) for category in categories for spec in category.rows()]
    if tasks:
        # Imported once, before workers fork, so they share it; a Ctrl-C meanwhile is acted
        # on after the import (see `deferred_interrupt`).
        with interrupt.deferred_interrupt():
            import torch  # noqa: F401

    policies = PolicyMemo(project)

    def work(i: int) -> RowText:
        category, spec = tasks[i]
        row = replay_row(project, category, spec, policies=policies)[0]
        return (row["id"], row_text(row))

    def meanwhile_here() -> M:
        checkpoints.reach("replay")  # workers forked, this process about to replay
        return meanwhile()

    texts, extra = run_shared(len(tasks), work, jobs, meanwhile_here)
    out: dict[str, list[RowText]] = {}
    start = 0
    for category in categories:
        count = len(category.rows())
        rows = sorted(texts[start : start + count], key=lambda r: r[0])
        start += count
        ids = [row_id for row_id, _ in rows]
        if len(set(ids)) != len(ids):
            dupes = sorted({i for i in ids if ids.count(i) > 1})
            raise ReplayError(f"category {category.name} declares duplicate row ids: {dupes}")
        out[category.name] = rows
    return out, extra


def replay_category(project: Project, category: Category) -> list[dict[str, Any]]:
    """Every row of one category as plain JSON values (sorted keys), sorted by id."""
    texts, _ = replay_texts(project, [category])
    return json.loads("[" + ",".join(text for _, text in texts[category.name]) + "]")


def find_row(category: Category, row_id: str) -> RowSpec:
    for spec in category.rows():
        if spec.id == row_id:
            return spec
    hint = did_you_mean(row_id, [spec.id for spec in category.rows()])
    raise InputError(f"unknown row id {shorten(row_id)} in category {category.name}{hint}")


def route_from_prepared(
    prepared: PreparedLayer,
    prepare_calls: list[dict[str, Any]],
    dispatch_calls: list[dict[str, Any]],
) -> dict[str, Any]:
    """The standard row content of a loaded layer."""
    decision = prepared.decision
    status = (
        {"code": decision.status[0], "message": decision.status[1]} if decision.status else None
    )
    return {
        "kernel": decision.kernel,
        "verdicts": decision.selection.verdicts_json(),
        "capability": decision.capability,
        "prepared_layout": decision.layout,
        "flags": dict(sorted(decision.flags.items())),
        "fallbacks": [f.to_json() for f in decision.fallbacks],
        "bytes": prepared.bytes_json(),
        "prepare": prepare_calls,
        "dispatch": dispatch_calls,
        "fallback": decision.selection.fallback,
        "status": status,
    }


def replay_calls(
    ctx: ReplayContext,
    prepared: PreparedLayer,
    token_counts: Sequence[int],
    make_input: Any,
    *,
    gated_m: int | None = None,
) -> list[dict[str, Any]]:
    """Dispatch each token count (within budget) and, if the layer has one, the fused gate/up
    call at `gated_m`; returns the recorded calls in order."""
    calls: list[dict[str, Any]] = []

    def issue(apply: Any, m: int) -> None:
        mark = ctx.namespace.mark()
        apply(make_input(m))
        for call in ctx.namespace.since(mark):
            # Every dispatch plan carries the token count of the apply call that issued it,
            # also for ops whose arguments do not show it (a weight dequantize).
            calls.append({"op": call["op"], "plan": {"m": m, **call["plan"]}})

    if prepared.apply is None:
        return calls
    for m in ctx.token_counts(token_counts):
        issue(prepared.apply, m)
    if (
        gated_m is not None
        and prepared.apply_gated is not None
        and gated_m in ctx.token_counts([gated_m])
    ):
        issue(prepared.apply_gated, gated_m)
    return calls
