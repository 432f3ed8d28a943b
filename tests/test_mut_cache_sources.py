"""The sources of snapshots (`routectl.review.sources`), pinned from its docstrings: the
retained folder is read as it is, a baseline folder or file is migrated through the
migrations or refused naming its version and the advice, the reader's wording ("snapshot"
or "baseline snapshot") and the schema each source is given reach the reader, and
`file_of` / `load_read` say exactly which file a load reads.

Why: the check, `diff --baseline` and the retained-file memo of the replay cache
(`retained_shortcut` keys a memo by `file_of`'s advice) all read through these; a source
that read a file another way (unmigrated, unvalidated by the project's schema, under
another category) would compare rows that are not the file's. Every document here is built
in the test (the generic schema's status route), so the file runs in well under a second.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from routectl.errors import InputError, RoutectlError
from routectl.io.schemas import SCHEMA_VERSION, LoadedSchema, load_schema, load_schema_file
from routectl.review.snapshot import CATEGORY_NAME, Snapshot
from routectl.review.sources import (
    BASELINE,
    CACHED_ADVICE,
    MIGRATIONS,
    SnapshotFiles,
    migrate_document,
    open_baseline,
    read_baseline_snapshot,
)

ADVICE = "rebuild it, please"


def row(row_id: str) -> dict[str, Any]:
    """A row the generic snapshot schema admits: a matrix cell the category does not route."""
    return {
        "id": row_id,
        "route": {
            "kernel": None,
            "verdicts": [],
            "status": {"code": "not_applicable", "message": row_id},
        },
    }


def document(category: str, *ids: str, version: int = SCHEMA_VERSION) -> dict[str, Any]:
    # Rows written out of order: a snapshot holds them sorted by id.
    return {
        "schema_version": version,
        "category": category,
        "basis": f"basis of {category}",
        "rows": [row(i) for i in ids],
    }


def save(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, indent=1))
    return path


def expected(data: dict[str, Any]) -> Snapshot:
    """The snapshot a valid current document reads as: its rows sorted by id."""
    rows = tuple(sorted(data["rows"], key=lambda r: r["id"]))
    return Snapshot(data["category"], data["basis"], rows)


MISNAMED = "declares category 'other', but its file name says 'misnamed'"
IDS = ("edge:zeta", "edge:alpha", "m/float16/tp1/none/c1/q64")


@pytest.fixture
def strict(tmp_path: Path) -> LoadedSchema:
    """The generic snapshot schema with no row allowed: a file the default schema admits
    and this one refuses shows which schema a reader used."""
    data = copy.deepcopy(load_schema("snapshot").data)
    data["properties"]["rows"]["maxItems"] = 0
    return load_schema_file(str(save(tmp_path / "strict.schema.json", data)))


# --- migrate_document ------------------------------------------------------------------------


def test_there_is_no_migration_yet() -> None:
    # Version 1 is the first schema_version: nothing to migrate from.
    assert SCHEMA_VERSION == 1 and dict(MIGRATIONS) == {}


@pytest.mark.parametrize(
    "data",
    [
        document("cat", "edge:a"),  # current
        document("cat", "edge:a", version=SCHEMA_VERSION + 1),  # newer: parse_snapshot refuses
        {"category": "cat"},  # no version: the schema phrases it
        {"schema_version": "0"},  # not an integer
        {"schema_version": False},  # a bool is no version, although False == 0
        {"schema_version": None},
        [{"schema_version": 0}],  # not an object
        "text",
    ],
)
def test_documents_that_pass_through_unchanged(data: Any) -> None:
    def never(document: Any) -> Any:
        raise AssertionError(f"migrated {document!r}")

    steps = {v: never for v in range(-3, SCHEMA_VERSION + 2)}
    assert migrate_document(data, source="s", advice="a", migrations=steps) is data


def test_an_older_document_is_migrated_one_step_at_a_time_in_order() -> None:
    calls: list[int] = []

    def step(version: int) -> Any:
        def apply(document: dict[str, Any]) -> dict[str, Any]:
            assert document["schema_version"] == version  # each step sees its own version
            calls.append(version)
            return {**document, "schema_version": version + 1, f"by{version}": True}

        return apply

    old = {"schema_version": -1, "category": "cat"}
    out = migrate_document(old, source="s", advice="a", migrations={-1: step(-1), 0: step(0)})
    assert calls == [-1, 0]
    assert out == {"schema_version": 1, "category": "cat", "by-1": True, "by0": True}
    assert old == {"schema_version": -1, "category": "cat"}  # the input is not edited


def test_a_missing_step_names_the_start_the_step_and_the_advice() -> None:
    steps = {-1: lambda d: {**d, "schema_version": 0}}
    with pytest.raises(InputError) as raised:
        migrate_document({"schema_version": -1}, source="SRC", advice=ADVICE, migrations=steps)
    assert str(raised.value) == (
        f"SRC has schema_version -1, older than {SCHEMA_VERSION}, and this routectl has no "
        f"migration from version 0: {ADVICE}"
    )
    # With the default (no) migrations, version 0 is refused at once.
    with pytest.raises(InputError) as raised:
        migrate_document({"schema_version": 0}, source="SRC", advice=ADVICE)
    assert str(raised.value) == (
        f"SRC has schema_version 0, older than {SCHEMA_VERSION}, and this routectl has no "
        f"migration from version 0: {ADVICE}"
    )


@pytest.mark.parametrize(
    "result,reached",
    [
        ({"schema_version": 0}, "0"),  # no progress: it would loop forever
        ({"schema_version": 2}, "2"),  # a step that skips a version
        ({"schema_version": "1"}, "'1'"),  # the right number as text
        ({}, "None"),
        ([1], "None"),  # not an object
    ],
)
def test_a_step_that_does_not_reach_the_next_version_is_a_routectl_error(
    result: Any, reached: str
) -> None:
    # A bug of routectl's own migrations, not the user's input: not an InputError.
    with pytest.raises(RoutectlError) as raised:
        migrate_document(
            {"schema_version": 0}, source="s", advice="a", migrations={0: lambda d: result}
        )
    assert not isinstance(raised.value, InputError)
    assert str(raised.value) == (
        f"the migration from schema_version 0 produced version {reached}, not 1"
    )


# --- read_baseline_snapshot ------------------------------------------------------------------


def test_a_baseline_file_is_migrated_then_validated(tmp_path: Path) -> None:
    current = document("cat", *IDS)
    old = {**current, "schema_version": 0, "rows": [{"key": r["id"]} for r in current["rows"]]}
    path = save(tmp_path / "any-name.txt", old)

    def from_v0(data: dict[str, Any]) -> dict[str, Any]:
        return {**data, "schema_version": 1, "rows": [row(r["key"]) for r in data["rows"]]}

    snapshot = read_baseline_snapshot(path, advice=ADVICE, migrations={0: from_v0})
    assert snapshot == expected(current) and snapshot.validated
    with pytest.raises(InputError, match=f"no migration from version 0: {ADVICE}$"):
        read_baseline_snapshot(path, advice=ADVICE)


def test_given_bytes_are_read_instead_of_the_file(tmp_path: Path) -> None:
    path = save(tmp_path / "cat.json", document("other", "edge:x"))
    raw = json.dumps(document("cat", *IDS)).encode()
    assert read_baseline_snapshot(path, advice="a", raw=raw) == expected(document("cat", *IDS))
    # Bytes that do not parse are named as the baseline file's.
    with pytest.raises(InputError) as raised:
        read_baseline_snapshot(path, advice="a", raw=b"{")
    assert str(raised.value).startswith(f"{BASELINE} {path} is not valid JSON")


def test_a_baseline_file_is_checked_against_its_category_and_schema(
    tmp_path: Path, strict: LoadedSchema
) -> None:
    path = save(tmp_path / "cat.json", document("cat", *IDS))
    assert read_baseline_snapshot(path, advice="a", category="cat") == expected(
        document("cat", *IDS)
    )
    with pytest.raises(InputError, match="declares category 'cat', but its file name says 'dog'"):
        read_baseline_snapshot(path, advice="a", category="dog")
    with pytest.raises(InputError, match=f"^{path}: "):
        read_baseline_snapshot(path, advice="a", schema=strict)
    with pytest.raises(InputError) as raised:
        read_baseline_snapshot(tmp_path / "gone.json", advice="a")
    assert str(raised.value).startswith(f"cannot read {BASELINE} {tmp_path / 'gone.json'}")


# --- SnapshotFiles ---------------------------------------------------------------------------


def folder(tmp_path: Path, *categories: str) -> Path:
    where = tmp_path / "snaps"
    where.mkdir()
    for name in categories:
        save(where / f"{name}.json", document(name, *IDS))
    return where


def test_the_retained_folder(tmp_path: Path) -> None:
    where = folder(tmp_path, "b-cat", "a_cat")
    (where / "notes.txt").write_text("not a snapshot")
    source = SnapshotFiles.retained(where)
    assert source.names() == ["a_cat", "b-cat"]
    assert source.file_of("a_cat") == (where / "a_cat.json", "")  # read as it is
    assert source.file_of("notes") is None and source.file_of("c") is None
    snapshot, raw = source.load_read("b-cat")
    assert snapshot == expected(document("b-cat", *IDS)) and snapshot is not None
    assert snapshot.validated
    assert raw == (where / "b-cat.json").read_bytes()  # the very bytes that were parsed
    assert source.load("a_cat") == expected(document("a_cat", *IDS))
    assert source.load("c") is None and source.load_read("c") == (None, None)
    assert SnapshotFiles.retained(tmp_path / "none").names() == []


def test_a_retained_file_is_read_as_it_is(tmp_path: Path) -> None:
    # Never migrated: an older one asks to regenerate it; it must declare its file's name.
    where = folder(tmp_path)
    save(where / "old.json", document("old", "edge:a", version=0))
    save(where / "misnamed.json", document("other", "edge:a"))
    (where / "folder.json").mkdir()
    source = SnapshotFiles.retained(where)
    with pytest.raises(InputError, match="older than 1: regenerate it"):
        source.load("old")
    with pytest.raises(InputError, match=MISNAMED):
        source.load("misnamed")
    with pytest.raises(InputError) as raised:
        source.load("folder")
    assert str(raised.value).startswith(f"cannot read snapshot {where / 'folder.json'}")


def test_a_baseline_folder(tmp_path: Path) -> None:
    where = folder(tmp_path, "cat", "dog")
    save(where / "old.json", document("old", "edge:a", version=0))
    save(where / "misnamed.json", document("other", "edge:a"))
    (where / "folder.json").mkdir()
    source = SnapshotFiles.baseline_folder(where, advice=ADVICE)
    assert source.names() == ["cat", "dog", "folder", "misnamed", "old"]
    assert source.file_of("dog") == (where / "dog.json", ADVICE)
    snapshot, raw = source.load_read("dog")
    assert snapshot == expected(document("dog", *IDS))
    assert raw == (where / "dog.json").read_bytes()
    assert source.load("cat") == expected(document("cat", *IDS))
    assert source.load("bird") is None
    with pytest.raises(InputError, match=f"no migration from version 0: {ADVICE}$"):
        source.load("old")
    with pytest.raises(InputError, match=MISNAMED):
        source.load("misnamed")
    with pytest.raises(InputError) as raised:
        source.load("folder")
    assert str(raised.value).startswith(f"cannot read {BASELINE} {where / 'folder.json'}")


@pytest.mark.parametrize("name", ["Cat", "-cat", "ca t", "cat.v2"])
def test_a_baseline_folder_refuses_a_file_not_named_by_a_category(
    tmp_path: Path, name: str
) -> None:
    where = folder(tmp_path, "cat")
    save(where / f"{name}.json", document("cat", "edge:a"))
    with pytest.raises(InputError) as raised:
        SnapshotFiles.baseline_folder(where, advice=ADVICE)
    assert str(raised.value) == (
        f"baseline {where / (name + '.json')} is not a <category>.json snapshot "
        f"(category names match {CATEGORY_NAME.pattern})"
    )


def test_a_baseline_file_of_any_name_is_read_at_once(tmp_path: Path) -> None:
    path = save(tmp_path / "cached.snapshot", document("cat", *IDS))
    source = SnapshotFiles.baseline_file(path, advice=ADVICE)
    assert source.names() == ["cat"]
    assert source.files == {"cat": path}
    path.unlink()  # read already: its content named the category
    assert source.file_of("cat") is None  # no file is read for it any more
    assert source.load_read("cat") == (expected(document("cat", *IDS)), None)
    assert source.load("dog") is None
    old = save(tmp_path / "old.snapshot", document("cat", "edge:a", version=0))
    with pytest.raises(InputError, match=f"no migration from version 0: {ADVICE}$"):
        SnapshotFiles.baseline_file(old, advice=ADVICE)


def test_every_source_validates_with_the_schema_it_is_given(
    tmp_path: Path, strict: LoadedSchema
) -> None:
    where = folder(tmp_path, "cat")
    single = save(tmp_path / "single.json", document("cat", *IDS))
    for source in (
        SnapshotFiles.retained(where, schema=strict),
        SnapshotFiles.baseline_folder(where, advice=ADVICE, schema=strict),
        open_baseline(where, schema=strict),
    ):
        with pytest.raises(InputError, match=f"^{where / 'cat.json'}: "):
            source.load("cat")
    # The default schema admits the same files.
    assert SnapshotFiles.retained(where).load("cat") == expected(document("cat", *IDS))
    assert open_baseline(where).load("cat") == expected(document("cat", *IDS))
    assert open_baseline(single).load("cat") == expected(document("cat", *IDS))
    for make in (
        lambda: SnapshotFiles.baseline_file(single, advice=ADVICE, schema=strict),
        lambda: open_baseline(single, schema=strict),
    ):
        with pytest.raises(InputError, match=f"^{single}: "):
            make()


def test_a_source_given_loaded_snapshots_reads_no_file_for_them(tmp_path: Path) -> None:
    snapshot = expected(document("cat", "edge:a"))
    source = SnapshotFiles({"cat": tmp_path / "gone.json"}, advice=ADVICE, loaded={"cat": snapshot})
    assert source.load_read("cat") == (snapshot, None) and source.file_of("cat") is None
    # The mappings are copied: a caller's later edit changes nothing.
    files = {"cat": tmp_path / "cat.json"}
    copied = SnapshotFiles(files)
    files["dog"] = tmp_path / "dog.json"
    assert copied.names() == ["cat"]


# --- open_baseline ---------------------------------------------------------------------------


def test_open_baseline(tmp_path: Path) -> None:
    where = folder(tmp_path, "cat", "dog")
    source = open_baseline(where)
    assert source.names() == ["cat", "dog"]
    assert source.file_of("cat") == (where / "cat.json", CACHED_ADVICE)
    assert source.load("dog") == expected(document("dog", *IDS))
    single = save(tmp_path / "one.snapshot", document("cat", *IDS))
    source = open_baseline(single)
    assert source.names() == ["cat"] and source.file_of("cat") is None
    assert source.load("cat") == expected(document("cat", *IDS))
    # A baseline too old to migrate is told what to do with a cached baseline.
    save(where / "dog.json", document("dog", "edge:a", version=0))
    with pytest.raises(InputError) as raised:
        open_baseline(where).load("dog")
    assert str(raised.value).endswith(f"no migration from version 0: {CACHED_ADVICE}")
    # So is one baseline file (read at once).
    with pytest.raises(InputError) as raised:
        open_baseline(save(tmp_path / "old.snapshot", document("cat", "edge:a", version=0)))
    assert str(raised.value).endswith(f"no migration from version 0: {CACHED_ADVICE}")
    assert CACHED_ADVICE.startswith("rebuild the cached baseline with this routectl")


def test_open_baseline_refusals(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("no snapshot")
    with pytest.raises(InputError) as raised:
        open_baseline(empty)
    assert str(raised.value) == (
        f"baseline folder {empty} holds no <category>.json snapshot "
        f"(write one with routectl snapshot --all --output-dir DIR)"
    )
    with pytest.raises(InputError) as raised:
        open_baseline(tmp_path / "missing")
    assert str(raised.value) == f"baseline {tmp_path / 'missing'} does not exist"
