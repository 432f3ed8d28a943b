"""Policy resolution: explicit config > environment variable > default, resolved once into a
frozen, hashable, serialisable `ResolvedPolicy`.

Pure: the environment arrives as a mapping; nothing here reads or writes `os.environ`. The
one process-wide state is the set of deprecated variables already warned about.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple, cast

from routectl.errors import InputError
from routectl.io.jsonread import name_list
from routectl.policy.fields import Computed, Decided, Field, Kind, RetiredVariable

POLICY_FORMAT = 1


class PolicyDeprecationWarning(FutureWarning):
    """A deprecated, obsolete or removed variable was present (FutureWarning: visible by
    default)."""


_WARNED: set[str] = set()


def reset_deprecation_warnings() -> None:
    """Forget which deprecated variables already warned (tests only)."""
    _WARNED.clear()


def _freeze(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    import json  # here: `import routectl` (the engine's start-up) writes no JSON

    return json.dumps(_thaw(value), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class SectionView:
    """Attribute access to one section's resolved values."""

    section: str
    items: tuple[tuple[str, Any], ...]

    def __getattr__(self, name: str) -> Any:
        for key, value in self.items:
            if key == name:
                return value
        raise AttributeError(f"section {self.section} has no field {name!r}")

    def as_dict(self) -> dict[str, Any]:
        return dict(self.items)


@dataclass(frozen=True)
class ResolvedPolicy:
    """The policy resolved once (explicit config > variable > default): every field's value
    and source, the warnings and the ignored variables; frozen, hashable by section."""

    values: tuple[tuple[str, Any], ...]  # (field key, value), sorted by key
    sources: tuple[tuple[str, str], ...]  # (field key, "explicit" | "alias:<NAME>" | "default")
    warnings: tuple[str, ...] = ()
    ignored: tuple[tuple[str, str], ...] = ()  # (variable, field key) an explicit field overrode

    @cached_property
    def _index(self) -> tuple[dict[str, Any], dict[str, str], dict[str, SectionView]]:
        # Lookups by key and section, built once per policy (not a dataclass field: it never
        # enters equality, hashing or serialisation).
        sections: dict[str, list[tuple[str, Any]]] = {}
        for k, v in self.values:
            section, dot, name = k.partition(".")
            if dot:
                sections.setdefault(section, []).append((name, v))
        return (
            dict(self.values),
            dict(self.sources),
            {n: SectionView(n, tuple(items)) for n, items in sections.items()},
        )

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_index"}

    def value(self, key: str) -> Any:
        return self._index[0][key]

    def source(self, key: str) -> str:
        return self._index[1][key]

    def is_explicit(self, key: str) -> bool:
        """Explicit for fail-closed purposes: typed in the config or its variable present."""
        return self.source(key) != "default"

    def section(self, name: str) -> SectionView:
        try:
            return self._index[2][name]
        except KeyError:
            raise KeyError(f"no section {name!r}") from None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        values, _, sections = self._index
        if name in values:
            return values[name]
        if name in sections:
            return sections[name]
        raise AttributeError(name)

    def hash_input(self, active: Iterable[str]) -> dict[str, Any]:
        """What `compute_hash` digests: the used sections' values plus engine-wide values."""
        chosen: dict[str, dict[str, Any]] = {}
        engine: dict[str, Any] = {}
        wanted = set(active)
        for key, value in self.values:
            section, dot, name = key.partition(".")
            if not dot:
                engine[key] = value
            elif section in wanted or key in wanted:
                chosen.setdefault(section, {})[name] = value
        # `format`, not `schema_version`: this is the hashed payload, and renaming its key
        # would change every policy hash (the documents say schema_version).
        return {"format": POLICY_FORMAT, "engine": engine, "sections": chosen}

    def compute_hash(self, active_sections: Iterable[str]) -> str:
        """sha256 of canonical JSON of the active sections (or `section.field` entries)."""
        import hashlib  # for the hash only: off the start-up import

        payload = canonical_json(self.hash_input(active_sections))
        return hashlib.sha256(payload.encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": POLICY_FORMAT,
            "values": {k: _thaw(v) for k, v in self.values},
            "sources": dict(self.sources),
            "warnings": list(self.warnings),
            "ignored": [list(p) for p in self.ignored],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ResolvedPolicy:
        # `schema_version` as every document says it; a document written before the rename
        # says `format` (the same numbering), and is read as well.
        version = data.get("schema_version", data.get("format"))
        if version != POLICY_FORMAT:
            raise InputError(f"resolved policy schema_version {version!r} is not {POLICY_FORMAT}")
        return cls(
            values=tuple(sorted((k, _freeze(v)) for k, v in data["values"].items())),
            sources=tuple(sorted(data["sources"].items())),
            warnings=tuple(data["warnings"]),
            ignored=tuple(tuple(p) for p in data["ignored"]),
        )


def deprecation_message(field: Field, *others: Field) -> str:
    """The warning of a deprecated variable; one variable that feeds several deprecated
    fields names every path in one message."""
    group = (field, *others)
    paths = " or ".join(f.config_path for f in group)
    # A scope ("for dense linear layers") is said only when it holds for every path.
    scopes = {f.deprecation_scope for f in group}
    scope = scopes.pop() if len(scopes) == 1 else ""
    return (
        f"{field.variable} is deprecated{scope}; use {paths}. "
        f"Explicit configuration takes precedence."
    )


def variable_notices(
    fields: Sequence[Field], retired: Sequence[RetiredVariable], environ: Mapping[str, str]
) -> list[tuple[str, Kind, str]]:
    """(variable, kind, message) of every present variable that warns: deprecated aliases in
    table order (once per variable, naming each deprecated field it feeds), then obsolete
    and removed names."""
    if not environ:  # most replayed rows: no overlay, nothing to scan
        return []
    deprecated: dict[str, list[Field]] = {}
    for f in fields:
        if f.kind is Kind.DEPRECATED and f.variable and f.variable in environ:
            deprecated.setdefault(f.variable, []).append(f)
    out = [
        (variable, Kind.DEPRECATED, deprecation_message(*group))
        for variable, group in deprecated.items()
    ]
    out.extend((r.variable, r.kind, r.message()) for r in retired if r.variable in environ)
    return out


def parse_variables(
    fields: Sequence[Field], environ: Mapping[str, str]
) -> dict[tuple[str, str | None], Any]:
    """Phase 1, parse: every present variable of the table, used or not, parsed and
    validated, so that an invalid value is an input error before any warning is emitted."""
    parsed: dict[tuple[str, str | None], Any] = {}
    for f in fields if environ else ():
        if f.variable and f.variable in environ:
            assert f.parser is not None, f.key
            value = _freeze(f.parser(f.variable, environ[f.variable]))
            if f.validate is not None:
                value = f.validate(value, f.variable)
            parsed[(f.key, f.variable)] = value
    return parsed


def validate_typed(fields: Sequence[Field], typed: Mapping[str, Any]) -> dict[str, Any]:
    """Phase 2, validate: the typed (explicit) values that are set, frozen and validated."""
    typed_values: dict[str, Any] = {}
    for f in fields if typed else ():
        value = typed.get(f.key)
        if value is not None:
            value = _freeze(value)
            if f.validate is not None:
                value = f.validate(value, f.config_path)
            typed_values[f.key] = value
    return typed_values


class Merged(NamedTuple):
    """What merging gives: each field's value and source, and the variables a typed or
    bridged value overrode as (variable, field key)."""

    values: dict[str, Any]
    sources: dict[str, str]
    ignored: list[tuple[str, str]]


def _explicit_value(
    f: Field, value: Any, env_value: Any, var_present: bool, environ: Mapping[str, str]
) -> Any:
    """A typed value against the variable's: native-read fields must agree, merge fields
    join both lists."""
    if f.native_read and value != env_value:
        shown = (
            f"{f.variable}={environ[cast(str, f.variable)]}"
            if var_present
            else f"the default {env_value!r} of {f.variable}"
        )
        raise InputError(
            f"{f.config_path}={value!r} conflicts with {shown}: native code reads "
            f"the environment, so both must agree"
        )
    if f.merge and var_present:
        return tuple(dict.fromkeys((*value, *env_value)))
    return value


def merge_sources(
    fields: Sequence[Field],
    parsed: Mapping[tuple[str, str | None], Any],
    typed_values: Mapping[str, Any],
    environ: Mapping[str, str],
    context: Mapping[str, Any],
) -> Merged:
    """Phase 3, merge: explicit > variable > default, field by field in table order (a
    later field's default, effective value or bridge reads the earlier ones)."""
    merged = Merged({}, {}, [])
    values, sources, ignored = merged
    # `values` and `sources` fill in as fields resolve, in order; `environ` lets a field's
    # effective value depend on which variables are present (an inheritance rule).
    ctx = {**context, "values": values, "sources": sources, "environ": environ}
    for f in fields:
        var_present = (f.key, f.variable) in parsed
        env_value: Any
        if var_present:
            env_value = parsed[(f.key, f.variable)]
            env_source = f"alias:{f.variable}"
        else:
            env_value = f.default.compute(ctx) if isinstance(f.default, Computed) else f.default
            env_source = "default"
        if f.effective is not None:
            env_value = f.effective(env_value, ctx)
            if isinstance(env_value, Decided):
                env_value, env_source = env_value.value, env_value.source
        if f.key in typed_values:
            value = _explicit_value(f, typed_values[f.key], env_value, var_present, environ)
            if var_present and not f.merge:
                ignored.append((f.variable or "", f.key))
            values[f.key] = value
            sources[f.key] = "explicit"
        else:
            bridged = f.bridge(ctx) if f.bridge is not None else None
            if bridged is not None:
                if var_present:
                    ignored.append((f.variable or "", f.key))
                values[f.key] = _freeze(bridged)
                sources[f.key] = "explicit"
            else:
                values[f.key] = env_value
                sources[f.key] = env_source
    return merged


def report_notices(
    fields: Sequence[Field],
    retired: Sequence[RetiredVariable],
    environ: Mapping[str, str],
    unknown_prefix: str | None,
    emit_warnings: bool,
) -> list[str]:
    """Phase 4, report: the messages of present deprecated, retired and unknown variables;
    with `emit_warnings`, each deprecated or retired variable warns once per process."""
    messages: list[str] = []
    for variable, _, message in variable_notices(fields, retired, environ):
        messages.append(message)
        if emit_warnings and variable not in _WARNED:
            _WARNED.add(variable)
            # 4: past this function and resolve_fields, the code that resolved the policy.
            warnings.warn(message, PolicyDeprecationWarning, stacklevel=4)
    if unknown_prefix and environ:
        known = {f.variable for f in fields if f.variable} | {r.variable for r in retired}
        unknown = sorted(n for n in environ if n.startswith(unknown_prefix) and n not in known)
        if unknown:
            messages.append(f"unknown {unknown_prefix}* variables (typos?): {name_list(unknown)}")
    return messages


def resolve_fields(
    fields: Sequence[Field],
    typed: Mapping[str, Any],
    environ: Mapping[str, str],
    context: Mapping[str, Any],
    *,
    unknown_prefix: str | None = None,
    emit_warnings: bool = True,
    retired: Sequence[RetiredVariable] = (),
) -> ResolvedPolicy:
    """Resolve every field. `typed` maps field keys to explicit values (None = unset).
    Four phases, in this order: parse the variables, validate the typed values, merge them
    with the defaults, report the notices.

    `emit_warnings=False` records the messages without touching the once-per-process
    registry: replay resolves each row's own overlay and must not use up the engine's
    warnings.
    """
    parsed = parse_variables(fields, environ)
    typed_values = validate_typed(fields, typed)
    values, sources, ignored = merge_sources(fields, parsed, typed_values, environ, context)
    messages = report_notices(fields, retired, environ, unknown_prefix, emit_warnings)
    return ResolvedPolicy(
        values=tuple(sorted(values.items())),
        sources=tuple(sorted(sources.items())),
        warnings=tuple(messages),
        ignored=tuple(sorted(ignored)),
    )
