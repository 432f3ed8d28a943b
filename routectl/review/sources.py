"""Sources of snapshots, all over the one snapshot file format: `SnapshotFiles` holds the
retained `snapshots/` folder, a baseline folder written by `routectl snapshot --all
--output-dir DIR`, or one snapshot file of any name (its one category).

Retained files are read as they are (an older `schema_version` asks to regenerate them); a
baseline's are migrated from an older `schema_version` through MIGRATIONS, or refused naming
their version and what to do (`advice`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from routectl.errors import InputError, RoutectlError
from routectl.io.jsonread import read_bytes
from routectl.io.schemas import SCHEMA_VERSION, LoadedSchema
from routectl.review.snapshot import (
    CATEGORY_NAME,
    Snapshot,
    parse_json_file,
    parse_snapshot,
    read_json,
    read_snapshot,
    retained_files,
)

Document = dict[str, Any]
# What a baseline file is called in messages (a retained one is a "snapshot").
BASELINE = "baseline snapshot"
Migration = Callable[[Document], Document]
# schema_version N -> a function turning a version-N snapshot document into version N + 1.
# Version 1 is the first: there is nothing to migrate yet.
MIGRATIONS: Mapping[int, Migration] = {}


class SnapshotSource(Protocol):
    """Where baseline rows come from."""

    def names(self) -> Sequence[str]:
        """Every category this source holds a snapshot of (for stale detection)."""
        ...

    def load(self, name: str) -> Snapshot | None:
        """The snapshot of category `name`, None when the source has none. A malformed
        snapshot is an InputError."""
        ...


def migrate_document(
    data: Any, *, source: str, advice: str, migrations: Mapping[int, Migration] = MIGRATIONS
) -> Any:
    """Bring an older snapshot document to SCHEMA_VERSION one step at a time, or refuse it.
    Current, newer (refused by parse_snapshot: upgrade routectl) and malformed documents
    (phrased by the schema) pass through unchanged."""
    version = data.get("schema_version") if isinstance(data, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or version >= SCHEMA_VERSION:
        return data
    start = version
    while version < SCHEMA_VERSION:
        step = migrations.get(version)
        if step is None:
            raise InputError(
                f"{source} has schema_version {start}, older than "
                f"{SCHEMA_VERSION}, and this routectl has no migration from "
                f"version {version}: {advice}"
            )
        data = step(data)
        reached = data.get("schema_version") if isinstance(data, dict) else None
        if reached != version + 1:
            raise RoutectlError(
                f"the migration from schema_version {version} produced "
                f"version {reached!r}, not {version + 1}"
            )
        version = reached
    return data


def read_baseline_snapshot(
    path: Path,
    *,
    advice: str,
    category: str | None = None,
    migrations: Mapping[int, Migration] = MIGRATIONS,
    schema: LoadedSchema | None = None,
    raw: bytes | None = None,
) -> Snapshot:
    """A baseline snapshot file, migrated to the current schema and validated (against
    `schema`: the project's snapshot schema); `raw`, its bytes when read already."""
    data = read_json(path, BASELINE) if raw is None else parse_json_file(raw, path, BASELINE)
    data = migrate_document(data, source=str(path), advice=advice, migrations=migrations)
    return parse_snapshot(data, source=str(path), category=category, schema=schema)


class SnapshotFiles:
    """A SnapshotSource over snapshot files by category. `advice` is None for the retained
    files (read as they are) and says what to do with a baseline file too old to migrate;
    `schema` is the project's snapshot schema the files are validated with."""

    def __init__(
        self,
        files: Mapping[str, Path],
        *,
        advice: str | None = None,
        loaded: Mapping[str, Snapshot] | None = None,
        schema: LoadedSchema | None = None,
    ) -> None:
        self.files = dict(files)
        self._advice = advice
        self._loaded = dict(loaded or {})
        self._schema = schema

    @classmethod
    def retained(cls, directory: Path, *, schema: LoadedSchema | None = None) -> SnapshotFiles:
        """The retained `<category>.json` files of a project's snapshot folder."""
        return cls(retained_files(directory), schema=schema)

    @classmethod
    def baseline_folder(
        cls, directory: Path, *, advice: str, schema: LoadedSchema | None = None
    ) -> SnapshotFiles:
        """A folder of `<category>.json` baseline files, each named by its category."""
        files = retained_files(directory)
        for name, path in files.items():
            if not CATEGORY_NAME.match(name):
                raise InputError(
                    f"baseline {path} is not a <category>.json snapshot "
                    f"(category names match {CATEGORY_NAME.pattern})"
                )
        return cls(files, advice=advice, schema=schema)

    @classmethod
    def baseline_file(
        cls, path: Path, *, advice: str, schema: LoadedSchema | None = None
    ) -> SnapshotFiles:
        """One baseline snapshot file of any name, read now: its content names its category."""
        snapshot = read_baseline_snapshot(path, advice=advice, schema=schema)
        return cls(
            {snapshot.category: path},
            advice=advice,
            loaded={snapshot.category: snapshot},
            schema=schema,
        )

    def names(self) -> Sequence[str]:
        return sorted(self.files)

    def file_of(self, name: str) -> tuple[Path, str] | None:
        """The file `load(name)` reads and how it reads it (the advice, empty for retained
        files), or None where it reads none (no such category, or loaded already)."""
        path = self.files.get(name)
        if path is None or name in self._loaded:
            return None
        return path, self._advice or ""

    def load(self, name: str) -> Snapshot | None:
        return self.load_read(name)[0]

    def load_read(self, name: str) -> tuple[Snapshot | None, bytes | None]:
        """`load(name)` and the bytes of the file it parsed (None where it read none)."""
        if name in self._loaded:
            return self._loaded[name], None
        path = self.files.get(name)
        if path is None:
            return None, None
        raw = read_bytes(path, "snapshot" if self._advice is None else BASELINE)
        if self._advice is None:
            return read_snapshot(path, category=name, schema=self._schema, data=raw), raw
        snapshot = read_baseline_snapshot(
            path, advice=self._advice, category=name, schema=self._schema, raw=raw
        )
        return snapshot, raw


CACHED_ADVICE = (
    "rebuild the cached baseline with this routectl (routectl snapshot --all "
    "--output-dir DIR at the baseline commit), or use --baseline-ref"
)


def open_baseline(path: Path, *, schema: LoadedSchema | None = None) -> SnapshotFiles:
    """A pre-built baseline: one snapshot file, or a folder of `<category>.json` files."""
    if path.is_dir():
        source = SnapshotFiles.baseline_folder(path, advice=CACHED_ADVICE, schema=schema)
        if not source.names():
            raise InputError(
                f"baseline folder {path} holds no <category>.json snapshot "
                f"(write one with routectl snapshot --all --output-dir DIR)"
            )
        return source
    if not path.exists():
        raise InputError(f"baseline {path} does not exist")
    return SnapshotFiles.baseline_file(path, advice=CACHED_ADVICE, schema=schema)
