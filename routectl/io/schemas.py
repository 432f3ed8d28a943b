"""The JSON Schemas of routectl's own file formats (snapshot, expected changes, report, probe,
startup report), package data in `routectl/schemas/`, each loaded once, and the first
violation of a document phrased for one line."""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema_rs

from routectl.errors import InputError
from routectl.io.jsonread import read_json_file, shorten

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

# The schema_version every file format of this routectl reads and writes.
SCHEMA_VERSION = 1
SCHEMA_NAMES = (
    "snapshot",
    "expected-changes",
    "report",
    "probe",
    "startup-report",
    "observed",
    "profile",
    "coverage",
)
# The schemas of routectl's own file formats, package data beside this code (in a wheel, a
# checkout or a baseline worktree alike).
SOURCE_SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"


def schema_path(name: str) -> Path:
    """The package-data file of schema `name` (one of SCHEMA_NAMES)."""
    if name not in SCHEMA_NAMES:
        raise ValueError(f"unknown schema {name!r} (known: {', '.join(SCHEMA_NAMES)})")
    path = SOURCE_SCHEMA_DIR / f"{name}.schema.json"
    if not path.is_file():
        raise InputError(f"schema {name}.schema.json not found in {SOURCE_SCHEMA_DIR}")
    return path


@dataclass(frozen=True)
class LoadedSchema:
    path: Path
    data: dict[str, Any]
    fast: jsonschema_rs.Validator  # the authority: decides valid or not

    @functools.cached_property
    def validator(self) -> Any:
        """jsonschema's validator, built only to phrase an error (its messages and its
        branch context name the field a user must fix): importing jsonschema costs more than
        validating a valid file."""
        from jsonschema import Draft202012Validator

        return Draft202012Validator(self.data)


@functools.lru_cache(maxsize=16)
def load_schema_file(path: str) -> LoadedSchema:
    """A schema file, loaded once per path: a JSON Schema for this schema_version."""
    data = read_json_file(Path(path), "schema")
    if not isinstance(data, dict):
        raise InputError(f"{path} is not a valid JSON Schema: not an object")
    const = data.get("properties", {}).get("schema_version", {}).get("const")
    if const is not None and const != SCHEMA_VERSION:
        raise InputError(
            f"{path} describes schema_version {const}; this routectl reads and "
            f"writes {SCHEMA_VERSION}"
        )
    return schema_of(data, Path(path))


def schema_of(data: dict[str, Any], path: Path) -> LoadedSchema:
    """`data` as a LoadedSchema (`path` names it in messages); an InputError when it is no
    valid JSON Schema."""
    try:
        fast = jsonschema_rs.Draft202012Validator(data)
    except (jsonschema_rs.ValidationError, ValueError) as exc:
        first = str(exc).splitlines()[0]
        raise InputError(f"{path} is not a valid JSON Schema: {first}") from None
    return LoadedSchema(path, data, fast)


# The slot of the snapshot schema that a project's own route shapes fill.
CATEGORY_ROUTE = "category_route"


def compose_snapshot_schema(fragments: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """routectl's snapshot schema with the route shapes of a project's categories composed
    in: each fragment (category name -> `{"route": SCHEMA, "$defs": {...}}`) adds its
    `$defs` and its route to `category_route`. A `$defs` name two fragments define
    differently, or one the generic schema defines, is a ValueError naming both."""
    data = copy.deepcopy(load_schema("snapshot").data)
    defs: dict[str, Any] = data["$defs"]
    owner = dict.fromkeys(defs, "routectl")
    routes = []
    for category, fragment in fragments.items():
        for name, schema in fragment.get("$defs", {}).items():
            if name in defs and defs[name] != schema:
                raise ValueError(
                    f"route schema of {category}: $defs/{name} is defined differently by "
                    f"{owner[name]}"
                )
            defs[name], owner[name] = copy.deepcopy(schema), owner.get(name, category)
        routes.append(copy.deepcopy(fragment["route"]))
    if routes:
        slot = defs[CATEGORY_ROUTE]
        defs[CATEGORY_ROUTE] = {"description": slot["description"], "oneOf": routes}
    return data


def load_schema(name: str) -> LoadedSchema:
    """Schema `name` (one of SCHEMA_NAMES), loaded once per file."""
    return load_schema_file(str(schema_path(name)))


def schema(name: str) -> dict[str, Any]:
    """A copy of the JSON Schema document `name`."""
    return copy.deepcopy(load_schema(name).data)


def _branch_error(error: ValidationError) -> ValidationError:
    """For a failed `oneOf`, the error of the branch the instance was meant for: one of the
    instance's type, whose required keys are present, with the fewest errors; of branches
    alike, the first."""
    while error.validator in ("oneOf", "anyOf") and error.context:
        branches: dict[Any, list[ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(sub.schema_path[0], []).append(sub)
        # jsonschema lists a branch's errors in branch order and sorted() is stable, so
        # branches alike stay in position order (a key of str(index) put 10 before 2).
        ranked = sorted(
            branches.items(),
            key=lambda item: (
                any(e.validator == "type" and not e.relative_path for e in item[1]),
                any(e.validator == "required" and not e.relative_path for e in item[1]),
                len(item[1]),
            ),
        )
        errors = ranked[0][1]
        error = max(errors, key=lambda e: len(e.path))
    return error


def _where(path: Sequence[Any], document: Any) -> str:
    parts = list(path)
    label = ""
    if len(parts) >= 2 and parts[0] == "rows" and isinstance(parts[1], int):
        row = document["rows"][parts[1]] if isinstance(document, dict) else None
        row_id = row.get("id") if isinstance(row, dict) else None
        label = f"row {shorten(row_id)}" if isinstance(row_id, str) else f"rows[{parts[1]}]"
        parts = parts[2:]
    rest = format_path(parts)
    return ": ".join(p for p in (label, rest) if p)


def schema_violation(name: str, document: Any) -> str | None:
    """The first violation of schema `name`, phrased for one line; None when valid."""
    return violation(load_schema(name), document)


def violation(loaded: LoadedSchema, document: Any) -> str | None:
    """The first violation of `loaded` by `document`, phrased for one line; None when
    valid."""
    try:
        if loaded.fast.is_valid(document):
            return None
    except ValueError as exc:  # a value JSON cannot hold (jsonschema-rs names its type)
        return str(exc)
    errors = sorted(loaded.validator.iter_errors(document), key=lambda e: [str(p) for p in e.path])
    if errors:
        error = _branch_error(errors[0])
        where, message = _where(error.absolute_path, document), error.message
    else:  # jsonschema accepts what jsonschema-rs refuses: the authority's words
        fast_error = next(iter(loaded.fast.iter_errors(document)))
        where, message = _where(fast_error.instance_path, document), fast_error.message
    message = message if len(message) <= 200 else message[:197] + "..."
    return f"{where}: {message}" if where else message


def format_path(parts: Iterable[Any]) -> str:
    """`route.dispatch[0].plan.m` from ["route", "dispatch", 0, "plan", "m"]."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{json.dumps(str(part))}]"
    return out
