"""The JSON Schemas of routectl's own file formats (snapshot, expected changes, report, probe,
startup report): where each is found (the project's `<snapshots>/schema/` first, then the
package data in `routectl/schemas/`), loaded once per file, and the first violation of a
document phrased for one line."""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterable, Sequence
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
)
# The schemas of routectl's own file formats, package data beside this code (in a wheel, a
# checkout or a baseline worktree alike): used when the project's snapshot folder has none.
SOURCE_SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"


def schema_dirs(snapshot_dir: Path | None) -> list[Path]:
    """Where schemas are looked up, in order: the project's `<snapshots>/schema/`, then the
    package data of this routectl (`routectl/schemas/`)."""
    dirs = [snapshot_dir / "schema"] if snapshot_dir is not None else []
    if SOURCE_SCHEMA_DIR not in dirs:
        dirs.append(SOURCE_SCHEMA_DIR)
    return dirs


def schema_path(name: str, snapshot_dir: Path | None = None) -> Path:
    if name not in SCHEMA_NAMES:
        raise ValueError(f"unknown schema {name!r} (known: {', '.join(SCHEMA_NAMES)})")
    candidates = [d / f"{name}.schema.json" for d in schema_dirs(snapshot_dir)]
    for path in candidates:
        if path.is_file():
            return path
    raise InputError(
        f"schema {name}.schema.json not found in {' or '.join(str(p.parent) for p in candidates)}"
    )


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
def _load_schema(path: str) -> LoadedSchema:
    data = read_json_file(Path(path), "schema")
    if not isinstance(data, dict):
        raise InputError(f"{path} is not a valid JSON Schema: not an object")
    const = data.get("properties", {}).get("schema_version", {}).get("const")
    if const is not None and const != SCHEMA_VERSION:
        raise InputError(
            f"{path} describes schema_version {const}; this routectl reads and "
            f"writes {SCHEMA_VERSION}"
        )
    try:
        fast = jsonschema_rs.Draft202012Validator(data)
    except (jsonschema_rs.ValidationError, ValueError) as exc:
        first = str(exc).splitlines()[0]
        raise InputError(f"{path} is not a valid JSON Schema: {first}") from None
    return LoadedSchema(Path(path), data, fast)


def load_schema(name: str, snapshot_dir: Path | None = None) -> LoadedSchema:
    """Schema `name` (one of SCHEMA_NAMES), loaded once per file."""
    return _load_schema(str(schema_path(name, snapshot_dir)))


def schema(name: str, snapshot_dir: Path | None = None) -> dict[str, Any]:
    """A copy of the JSON Schema document `name`."""
    return copy.deepcopy(load_schema(name, snapshot_dir).data)


def _branch_error(error: ValidationError) -> ValidationError:
    """For a failed `oneOf`, the error of the branch the instance was meant for: one of the
    instance's type, whose required keys are present, with the fewest errors."""
    while error.validator in ("oneOf", "anyOf") and error.context:
        branches: dict[Any, list[ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(sub.schema_path[0], []).append(sub)
        ranked = sorted(
            branches.items(),
            key=lambda item: (
                any(e.validator == "type" and not e.relative_path for e in item[1]),
                any(e.validator == "required" and not e.relative_path for e in item[1]),
                len(item[1]),
                str(item[0]),
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


def schema_violation(name: str, document: Any, snapshot_dir: Path | None = None) -> str | None:
    """The first violation of schema `name`, phrased for one line; None when valid."""
    loaded = load_schema(name, snapshot_dir)
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
