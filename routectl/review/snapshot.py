"""Snapshot files: one category's rows as `{"schema_version", "category", "basis", "rows"}`.

Reading validates (JSON, schema version both ways, ids, JSON Schema) and raises InputError:
a bad file is the user's input. Building a snapshot from fresh rows validates the same way
but raises SnapshotError: rows that break the schema are a bug in the code that made them.
Writing is atomic (temp file in the same folder, then os.replace) and deterministic.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from routectl.errors import InputError, RoutectlError
from routectl.io import jsonwrite, output
from routectl.io.jsonread import parse_json, read_json_file, shorten
from routectl.io.schemas import SCHEMA_VERSION, LoadedSchema, load_schema, violation
from routectl.rows import ROW_ID
from routectl.runtime import checkpoints

CATEGORY_NAME = re.compile(r"^(?:[a-z0-9][a-z0-9_-]*)$(?!\n)")  # full-match: see rows.ROW_ID
NEW_SUFFIX = ".new"

Row = dict[str, Any]
# Called with the temp file's path after it is complete and before it replaces the target.
BeforeReplace = Callable[[Path], None]


class SnapshotError(RoutectlError):
    """Fresh rows do not make a valid snapshot (exit 3: the producing code is wrong)."""


# --- JSON text -----------------------------------------------------------------------------


def dump_json(data: Any) -> str:
    """The text of every file routectl writes (`routectl.io.jsonwrite`): 2-space indent, sorted
    keys, trailing newline, NaN refused."""
    return jsonwrite.dumps(data)


def read_json(path: Path, what: str) -> Any:
    """Parse a JSON file through the one bounded reader (`routectl.io.jsonread`); every
    failure is one InputError line naming the file."""
    return read_json_file(path, what)


# Every temporary file routectl writes: `.<target name>.routectl-<pid>-<random>.tmp`, beside
# its target. The pid tells a stale one (its process is gone, e.g. killed mid-write) from a
# concurrent run's; .gitignore ignores the pattern.
TEMP_GLOB = ".*.routectl-*-*.tmp"
TEMP_NAME = re.compile(r"^\..+\.routectl-(?P<pid>[0-9]+)-[0-9a-f]+\.tmp$")


# The target's name as the temporary name holds it, in bytes: a file name is at most 255 bytes
# (NAME_MAX) and the rest of the temporary name up to 36 (a 7-digit pid), so a target named
# near the limit, which is valid, still gets a temporary file (its name cut, still unique).
TEMP_NAME_PART_MAX = 200


def temp_path(path: Path) -> Path:
    # os.urandom, as secrets.token_hex reads it: `secrets` would import hmac and OpenSSL's
    # hashlib (about 20 ms) into every command for one name.
    name = os.fsdecode(os.fsencode(path.name)[:TEMP_NAME_PART_MAX])
    return path.with_name(f".{name}.routectl-{os.getpid()}-{os.urandom(6).hex()}.tmp")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process (or a pid no process can have): leave it
    return True


def remove_stale_temp_files(directory: Path) -> list[Path]:
    """Remove this pattern's temporary files in `directory` whose process is gone; the
    removed paths. A live process's file (a concurrent run) is never touched."""
    removed = []
    try:
        candidates = sorted(directory.glob(TEMP_GLOB))
    except OSError:
        return []
    for candidate in candidates:
        match = TEMP_NAME.match(candidate.name)
        if match is None or _alive(int(match["pid"])) or not candidate.is_file():
            continue
        try:
            candidate.unlink()
        except OSError:
            continue
        removed.append(candidate)
    return removed


def write_text_atomic(
    path: Path, text: str | bytes, *, before_replace: BeforeReplace | None = None
) -> None:
    """Write `text` (str, written as UTF-8, or its bytes) to a temp file beside `path`, then
    rename it over `path`: readers see the old file or the new one, never a part. The temp
    file is removed on any failure; stale ones left in the folder by a killed process go
    first. Only a regular file (or nothing) is replaced: a device or FIFO is written in place
    and a socket refused (`routectl.io.output`); a symbolic link's file is replaced."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    kind = output.special_kind(path)
    if kind is not None:
        output.write_in_place(path, data, kind)
        return
    path = output.atomic_target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_files(path.parent)
    temp = temp_path(path)
    try:
        output.write_new_synced(temp, data)
        if before_replace is not None:
            before_replace(temp)
        checkpoints.reach("write")
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def write_text(
    path: Path, text: str | bytes, *, before_replace: BeforeReplace | None = None
) -> None:
    """`write_text_atomic`, a failing file system being an InputError naming the file."""
    try:
        write_text_atomic(path, text, before_replace=before_replace)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_json(
    path: Path, data: Any, *, before_replace: BeforeReplace | None = None, plain: bool = False
) -> None:
    """`data` written atomically by the one serialiser (`plain`: see `jsonwrite`)."""
    write_text(path, jsonwrite.dumps_bytes(data, plain=plain), before_replace=before_replace)


# --- the snapshot model --------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """One category's rows, sorted by id, ids unique and well-formed, schema-valid."""

    category: str
    basis: str
    rows: tuple[Row, ...]
    # Set by build_snapshot and parse_snapshot, which validate: writing skips a second pass.
    # Their rows are plain JSON values (exact JSON types, finite numbers): parsed, or made
    # plain by `plain_rows`.
    validated: bool = field(default=False, compare=False, repr=False)

    def ids(self) -> list[str]:
        return [r["id"] for r in self.rows]

    def by_id(self) -> dict[str, Row]:
        return {r["id"]: r for r in self.rows}

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "category": self.category,
            "basis": self.basis,
            "rows": list(self.rows),
        }


def _id_problem(rows: Any) -> str | None:
    """Malformed or duplicate ids, checked in code: a pattern failure inside a schema error
    would not name the id, and uniqueness by key is not expressible in JSON Schema."""
    if not isinstance(rows, list):
        return None
    seen: set[str] = set()
    for index, row in enumerate(rows):
        row_id = row.get("id") if isinstance(row, dict) else None
        if not isinstance(row_id, str):
            continue  # the schema phrases a missing or non-string id
        if not ROW_ID.match(row_id):
            return f"rows[{index}]: malformed row id {shorten(row_id)}"
        if row_id in seen:
            return f"duplicate row id {shorten(row_id)}"
        seen.add(row_id)
    return None


def _check_version(data: Any, source: str) -> None:
    version = data.get("schema_version") if isinstance(data, dict) else None
    if not isinstance(version, int) or isinstance(version, bool):
        return  # the schema phrases it
    if version > SCHEMA_VERSION:
        raise InputError(
            f"{source} has schema_version {version}, written by a newer routectl "
            f"(this one reads {SCHEMA_VERSION}): upgrade routectl"
        )
    if version < SCHEMA_VERSION:
        raise InputError(
            f"{source} has schema_version {version}, older than "
            f"{SCHEMA_VERSION}: regenerate it (routectl snapshot, or routectl "
            f"check --update)"
        )


def snapshot_schema(schema: LoadedSchema | None) -> LoadedSchema:
    """`schema` (a project's composed snapshot schema, `Project.snapshot_schema`), or
    routectl's generic one, which admits the generic route shapes only."""
    return schema if schema is not None else load_schema("snapshot")


def parse_snapshot(
    data: Any,
    *,
    source: str,
    category: str | None = None,
    schema: LoadedSchema | None = None,
) -> Snapshot:
    """Validate a parsed snapshot document against `schema` (see `snapshot_schema`);
    `category`, when given, is the name the file must declare (its file name)."""
    _check_version(data, source)
    problem = _id_problem(data.get("rows") if isinstance(data, dict) else None)
    if problem is None:
        problem = violation(snapshot_schema(schema), data)
    if problem is not None:
        raise InputError(f"{source}: {problem}")
    if category is not None and data["category"] != category:
        raise InputError(
            f"{source} declares category {shorten(data['category'])}, but its file "
            f"name says {shorten(category)}"
        )
    rows = sorted(data["rows"], key=lambda r: r["id"])
    return Snapshot(data["category"], data["basis"], tuple(rows), validated=True)


def read_snapshot(
    path: Path,
    *,
    category: str | None = None,
    schema: LoadedSchema | None = None,
    data: bytes | None = None,
) -> Snapshot:
    """The snapshot file `path` (`data`: its bytes, read already under the size limit)."""
    document = read_json(path, "snapshot") if data is None else parse_json_file(data, path)
    return parse_snapshot(document, source=str(path), category=category, schema=schema)


def parse_json_file(data: bytes, path: Path, what: str = "snapshot") -> Any:
    """`read_json(path, what)` of bytes read from `path` already."""
    return parse_json(data, f"{what} {path}")


def plain_rows(rows: Sequence[Row]) -> list[Row]:
    """Rows as JSON will hold them (a copy, keys sorted, tuples as lists); non-JSON values
    raise."""
    listed = list(rows)
    try:
        # Sorted keys: rows then compare as JSON text cheaply with rows read from files.
        plain = orjson.loads(orjson.dumps(listed, option=orjson.OPT_SORT_KEYS))
    except orjson.JSONEncodeError:
        plain = None  # integers beyond 64 bits, deep nesting, non-string keys: json decides
    # Equal to what orjson read back: every value is one JSON holds as is, which orjson and
    # json write alike (NaN, infinity, a tuple, an Enum, a UUID or a dataclass would come back
    # as another value). One comparison in C instead of a walk of every value in Python.
    if plain is not None and plain == listed:
        return plain
    floats = jsonwrite.json_floats(rows)
    if floats is not None and all(math.isfinite(f) for f in floats):
        try:
            # Sorted keys: rows then compare as JSON text cheaply with rows read from files.
            return orjson.loads(orjson.dumps(list(rows), option=orjson.OPT_SORT_KEYS))
        except orjson.JSONEncodeError:
            pass  # integers beyond 64 bits, deep nesting, non-string keys: json decides
    try:
        return json.loads(json.dumps(list(rows), allow_nan=False, sort_keys=True))
    except (TypeError, ValueError) as exc:
        problem = str(exc)
    for item in rows:  # name the first offending row (sorted keys: mixed key types fail)
        try:
            json.dumps(item, allow_nan=False, sort_keys=True)
        except (TypeError, ValueError) as exc:
            row_id = item.get("id") if isinstance(item, dict) else None
            raise SnapshotError(f"row {row_id!r} is not JSON: {exc}") from None
    raise SnapshotError(f"rows are not JSON: {problem}")


def build_snapshot(
    category: str,
    basis: str,
    rows: Sequence[Row],
    *,
    validate: bool = True,
    plain: bool = False,
    schema: LoadedSchema | None = None,
) -> Snapshot:
    """A snapshot of freshly produced rows: normalised (unless `plain`: already parsed from
    canonical JSON text), sorted by id, ids checked and (with `validate`) schema-validated.
    Without it the caller validates the rows it uses (`validate_rows`); writing validates an
    unvalidated snapshot first."""
    plain_list = list(rows) if plain else plain_rows(rows)
    plain_list.sort(key=lambda r: str(r.get("id")))
    problem = _id_problem(plain_list)
    if problem is None and validate:
        problem = validate_rows(category, basis, plain_list, schema)
    if problem is not None:
        raise SnapshotError(f"category {category} produced an invalid snapshot: {problem}")
    return Snapshot(category, basis, tuple(plain_list), validated=validate)


def validate_rows(
    category: str, basis: str, rows: Sequence[Row], schema: LoadedSchema | None = None
) -> str | None:
    """The first schema violation of `rows` as a snapshot of `category`; None when valid."""
    document = {
        "schema_version": SCHEMA_VERSION,
        "category": category,
        "basis": basis,
        "rows": list(rows),
    }
    return violation(snapshot_schema(schema), document)


def write_snapshot(
    path: Path,
    snapshot: Snapshot,
    *,
    before_replace: BeforeReplace | None = None,
    schema: LoadedSchema | None = None,
) -> None:
    """Validate against `schema` (unless built or parsed here, which validated), then write
    atomically."""
    document = snapshot.to_json()
    problem = (
        None
        if snapshot.validated
        else (_id_problem(document["rows"]) or violation(snapshot_schema(schema), document))
    )
    if problem is not None:
        raise SnapshotError(f"refusing to write an invalid snapshot to {path}: {problem}")
    # A validated snapshot's rows are plain JSON values (`Snapshot.validated`).
    write_json(path, document, before_replace=before_replace, plain=snapshot.validated)


def retained_files(directory: Path) -> dict[str, Path]:
    """`<category>.json` entries of a snapshot folder, by category name (an entry that is
    not a readable file fails when it is read, never silently)."""
    if not directory.is_dir():
        return {}
    return {p.name.removesuffix(".json"): p for p in sorted(directory.glob("*.json"))}


def qualified(category: str, row_id: str) -> str:
    return f"{category}:{row_id}"


def check_category_names(names: Sequence[Any]) -> None:
    """The project's category names: each a name a snapshot file and a row id can carry,
    none twice. They are the project's input, so a bad one is an InputError (exit 2) naming
    it, markup and all (quoted, cut to 80 characters)."""
    for name in names:
        if not isinstance(name, str) or not CATEGORY_NAME.match(name):
            raise InputError(
                f"the project's category name {shorten(name)} must match "
                f"{CATEGORY_NAME.pattern} (lower-case letters, digits, _ and -)"
            )
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(f"the project lists category names twice: {', '.join(dupes)}")


def stale_new_files(directory: Path, names: Iterable[str] | None = None) -> list[Path]:
    """`<category>.json.new` files in `directory` (of `names` only, when given)."""
    if not directory.is_dir():
        return []
    found = sorted(directory.glob("*.json" + NEW_SUFFIX))
    if names is None:
        return [p for p in found if p.is_file()]
    wanted = set(names)
    return [p for p in found if p.is_file() and p.name.removesuffix(".json.new") in wanted]
