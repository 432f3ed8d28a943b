"""The snapshot file format as `routectl.review.snapshot` and docs/architecture.md state it.

`{"schema_version": 1, "category", "basis", "rows"}`, rows sorted by id, ids unique and
well-formed, schema-valid; reading a bad file is an InputError (the user's input), building a
bad snapshot from fresh rows a SnapshotError (a bug of the producing code); the text is two-
space indented, keys sorted, one trailing newline. Pinned here with the generic snapshot
schema and whole messages, in process (tests/test_snapshot_files.py drives most of these
through the CLI and matches fragments): each refusal's whole line, the version rule both
ways, the id checks' order before the schema, the category a file name implies, the sort of
unsorted or unhashable ids, `validated` and what writing does with it, the category-name
rule and the folder listings (`retained_files`, `stale_new_files`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from routectl.errors import InputError
from routectl.io.schemas import (
    LoadedSchema,
    compose_snapshot_schema,
    load_schema,
    schema_of,
    violation,
)
from routectl.review.snapshot import (
    Snapshot,
    SnapshotError,
    build_snapshot,
    check_category_names,
    dump_json,
    parse_json_file,
    parse_snapshot,
    plain_rows,
    qualified,
    read_json,
    read_snapshot,
    retained_files,
    snapshot_schema,
    stale_new_files,
    validate_rows,
    write_snapshot,
)

A = "alpha/float16/tp1/none/c1/q8192"
B = "beta/float16/tp2/none/c1/q8192"


def status_row(row_id: str, message: str = "not modelled here") -> dict[str, Any]:
    """A row of the generic status shape (kernel null, no verdicts, a status code)."""
    return {
        "id": row_id,
        "route": {
            "kernel": None,
            "verdicts": [],
            "status": {"code": "not_modelled", "message": message},
        },
    }


def document(*rows: dict[str, Any], **top: Any) -> dict[str, Any]:
    doc = {"schema_version": 1, "category": "toy-a", "basis": "what it proves", "rows": list(rows)}
    doc.update(top)
    return doc


def parse_refusal(data: Any, **kwargs: Any) -> str:
    with pytest.raises(InputError) as caught:
        parse_snapshot(data, source="snap.json", **kwargs)
    return str(caught.value)


# --- reading -------------------------------------------------------------------------------


def test_parse_sorts_rows_by_id_and_marks_the_snapshot_validated() -> None:
    snap = parse_snapshot(document(status_row(B), status_row(A)), source="snap.json")
    assert snap == Snapshot("toy-a", "what it proves", (status_row(A), status_row(B)))
    assert snap.validated is True
    assert snap.ids() == [A, B]
    assert snap.by_id() == {A: status_row(A), B: status_row(B)}
    assert snap.to_json() == document(status_row(A), status_row(B))


def test_the_schema_version_is_checked_both_ways() -> None:
    assert parse_refusal(document(schema_version=2)) == (
        "snap.json has schema_version 2, written by a newer routectl (this one reads 1): "
        "upgrade routectl"
    )
    assert parse_refusal(document(schema_version=0)) == (
        "snap.json has schema_version 0, older than 1: regenerate it (routectl snapshot, "
        "or routectl check --update)"
    )
    # Not an integer (a boolean is none): the schema phrases it.
    for version in (True, "1", None):
        data = document(schema_version=version)
        assert parse_refusal(data) == f"snap.json: {violation(load_schema('snapshot'), data)}"


def test_malformed_and_duplicate_ids_are_named_before_the_schema_is_asked() -> None:
    # The second row also breaks the schema (no route): the id problem is reported.
    bad = {"id": "Alpha/x", "extra": 1}
    assert parse_refusal(document(status_row(A), bad)) == (
        "snap.json: rows[1]: malformed row id 'Alpha/x'"
    )
    assert parse_refusal(document(status_row(A), status_row(B), status_row(A, "again"))) == (
        f"snap.json: duplicate row id {A!r}"
    )
    # A missing or non-text id, or a row that is no object, is the schema's to phrase.
    rows: list[Any]
    for rows in ([{"route": {}}], [{"id": 7, "route": {}}], ["row"]):
        data: Any = document(*rows)
        assert parse_refusal(data) == f"snap.json: {violation(load_schema('snapshot'), data)}"
    for data in ([], {"rows": {}}, "text"):
        assert parse_refusal(data) == f"snap.json: {violation(load_schema('snapshot'), data)}"


def test_a_file_must_declare_the_category_its_name_says() -> None:
    data = document(status_row(A))
    assert parse_snapshot(data, source="snap.json", category="toy-a").category == "toy-a"
    assert parse_refusal(data, category="toy-b") == (
        "snap.json declares category 'toy-a', but its file name says 'toy-b'"
    )


def test_read_snapshot_from_the_file_or_from_bytes_already_read(tmp_path: Path) -> None:
    path = tmp_path / "toy-a.json"
    path.write_text(json.dumps(document(status_row(B), status_row(A))))
    expected = Snapshot("toy-a", "what it proves", (status_row(A), status_row(B)))
    assert read_snapshot(path, category="toy-a") == expected
    assert read_snapshot(path, data=path.read_bytes()) == expected
    # The bytes given are what is parsed, not the file; errors name the file.
    with pytest.raises(InputError, match=f"^{path}: duplicate row id"):
        read_snapshot(path, data=json.dumps(document(status_row(A), status_row(A))).encode())
    with pytest.raises(InputError, match="declares category 'toy-a'"):
        read_snapshot(path, category="toy-b")


def test_unparsable_bytes_name_what_and_which_file(tmp_path: Path) -> None:
    path = tmp_path / "toy-a.json"
    with pytest.raises(InputError) as default:
        parse_json_file(b"{", path)
    with pytest.raises(InputError) as named:
        parse_json_file(b"{", path, "baseline snapshot")
    assert f"snapshot {path}" in str(default.value)
    assert f"baseline snapshot {path}" in str(named.value)
    path.write_bytes(b"{")
    with pytest.raises(InputError) as read:
        read_json(path, "expected-changes file")
    assert f"expected-changes file {path}" in str(read.value)
    assert parse_json_file(b'{"a": [1]}', path) == {"a": [1]}


# --- building, validating, writing ---------------------------------------------------------


def test_build_sorts_normalises_and_validates() -> None:
    fresh = [dict(reversed(list(status_row(B).items()))), status_row(A)]
    snap = build_snapshot("toy-a", "what it proves", fresh)
    assert snap == Snapshot("toy-a", "what it proves", (status_row(A), status_row(B)))
    assert snap.validated is True
    # Keys sorted, as the rows read from a file are.
    assert [list(r) for r in snap.rows] == [["id", "route"], ["id", "route"]]
    assert list(snap.rows[0]["route"]) == ["kernel", "status", "verdicts"]
    # A copy: the producer's rows are not the snapshot's.
    assert snap.rows[1] is not fresh[0]


def test_build_refuses_bad_ids_and_schema_violations_as_a_bug() -> None:
    with pytest.raises(SnapshotError) as dup:
        build_snapshot("toy-a", "b", [status_row(A), status_row(A)])
    assert str(dup.value) == (
        f"category toy-a produced an invalid snapshot: duplicate row id {A!r}"
    )
    # Sorted before the ids are checked: the place named is the sorted one.
    with pytest.raises(SnapshotError) as malformed:
        build_snapshot("toy-a", "b", [status_row(B), status_row(A), {"id": "Zeta", "route": {}}])
    assert str(malformed.value) == (
        "category toy-a produced an invalid snapshot: rows[0]: malformed row id 'Zeta'"
    )
    broken = [{"id": A, "route": {"kernel": None}}]
    problem = validate_rows("toy-a", "b", broken)
    assert problem is not None
    with pytest.raises(SnapshotError) as invalid:
        build_snapshot("toy-a", "b", broken)
    assert str(invalid.value) == f"category toy-a produced an invalid snapshot: {problem}"
    # An empty basis breaks the schema too (the basis says what the rows prove).
    assert validate_rows("toy-a", "", [status_row(A)]) is not None
    assert validate_rows("toy-a", "b", [status_row(A)]) is None
    assert validate_rows("Toy", "b", [status_row(A)]) is not None


def test_without_validation_ids_are_still_checked_and_the_snapshot_says_unvalidated() -> None:
    broken = [{"id": B, "route": {}}, {"id": A, "route": {"kernel": None}}]
    snap = build_snapshot("toy-a", "b", broken, validate=False)
    assert snap.validated is False and snap.ids() == [A, B]
    with pytest.raises(SnapshotError, match="duplicate row id"):
        build_snapshot("toy-a", "b", [status_row(A), status_row(A)], validate=False)


def test_rows_without_a_text_id_are_sorted_as_text_and_left_to_the_schema() -> None:
    # None and 3 cannot be compared with a text id; the sort is by str(id), never raises.
    rows = [status_row(B), {"id": None, "route": {}}, {"id": 3, "route": {}}]
    snap = build_snapshot("toy-a", "b", rows, validate=False)
    assert [r["id"] for r in snap.rows] == [3, None, B]  # "3" < "None" < "beta/..."
    with pytest.raises(SnapshotError, match="^category toy-a produced an invalid snapshot: "):
        build_snapshot("toy-a", "b", rows)


def test_plain_rows_are_taken_as_given() -> None:
    # `plain`: already parsed from canonical text, so not normalised again (but sorted).
    given = [status_row(B), status_row(A)]
    snap = build_snapshot("toy-a", "b", given, plain=True)
    assert snap.rows[0] is given[1] and snap.rows[1] is given[0]


def test_a_row_that_is_not_json_is_named() -> None:
    with pytest.raises(SnapshotError) as caught:
        plain_rows([status_row(A), {"id": "edge:bad", "route": {"v": float("nan")}}])
    assert str(caught.value).startswith("row 'edge:bad' is not JSON: ")
    with pytest.raises(SnapshotError) as caught:
        plain_rows([status_row(A), ["no", "id", {1, 2}]])  # type: ignore[list-item]
    assert str(caught.value).startswith("row None is not JSON: ")


def test_write_validates_an_unvalidated_snapshot_and_writes_canonical_text(tmp_path: Path) -> None:
    target = tmp_path / "toy-a.json"
    broken = Snapshot("toy-a", "b", ({"id": A, "route": {}},))
    problem = violation(load_schema("snapshot"), broken.to_json())
    with pytest.raises(SnapshotError) as caught:
        write_snapshot(target, broken)
    assert str(caught.value) == f"refusing to write an invalid snapshot to {target}: {problem}"
    duplicate = Snapshot("toy-a", "b", (status_row(A), status_row(A)))
    with pytest.raises(SnapshotError) as caught:
        write_snapshot(target, duplicate)
    assert str(caught.value) == (
        f"refusing to write an invalid snapshot to {target}: duplicate row id {A!r}"
    )
    assert not target.exists()
    # A valid snapshot made by hand (not validated yet) is written after the check.
    made = Snapshot("toy-a", "b", (status_row(A),))
    write_snapshot(target, made)
    text = target.read_text()
    assert text == json.dumps(made.to_json(), indent=2, sort_keys=True) + "\n"
    assert text == dump_json(made.to_json())
    assert parse_snapshot(json.loads(text), source="t") == made


def test_a_validated_snapshot_is_written_without_a_second_check(tmp_path: Path) -> None:
    # `validated` is set only by build and parse, which checked; writing trusts it.
    target = tmp_path / "toy-a.json"
    trusted = Snapshot("toy-a", "b", ({"id": A, "route": {}},), validated=True)
    write_snapshot(target, trusted)
    assert json.loads(target.read_text()) == trusted.to_json()


def test_dump_json_is_the_canonical_text() -> None:
    data = {"b": [1, {"d": None, "c": 1.5}], "a": "é"}
    assert dump_json(data) == '{\n  "a": "é",\n  "b": [\n    1,\n    {\n      "c": 1.5,\n' + (
        '      "d": null\n    }\n  ]\n}\n'
    )
    with pytest.raises(ValueError):
        dump_json({"v": float("nan")})


# --- names and folders ---------------------------------------------------------------------


def test_qualified_ids() -> None:
    assert qualified("toy-a", A) == f"toy-a:{A}"


@pytest.mark.parametrize("name", ["a", "0", "sm70-awq_moe", "a-", "a_"])
def test_category_names_a_file_and_an_id_can_carry(name: str) -> None:
    check_category_names([name, "other"])


@pytest.mark.parametrize("name", ["", "-a", "_a", "A", "a.b", "a b", "a:b", "a\n", "é", 3, None])
def test_other_category_names_are_refused_with_the_rule(name: Any) -> None:
    with pytest.raises(InputError) as caught:
        check_category_names(["fine", name])
    assert str(caught.value) == (
        f"the project's category name {name!r} must match ^(?:[a-z0-9][a-z0-9_-]*)$(?!\\n) "
        "(lower-case letters, digits, _ and -)"
    )


def test_a_long_bad_category_name_is_quoted_short() -> None:
    with pytest.raises(InputError) as caught:
        check_category_names(["X" * 500])
    assert "... (500 characters)" in str(caught.value) and "X" * 200 not in str(caught.value)


def test_category_names_listed_twice_are_named_once_each_sorted() -> None:
    with pytest.raises(InputError) as caught:
        check_category_names(["b", "a", "c", "b", "a", "b"])
    assert str(caught.value) == "the project lists category names twice: a, b"
    check_category_names([])


def test_retained_files_by_category(tmp_path: Path) -> None:
    assert retained_files(tmp_path / "absent") == {}
    (tmp_path / "b.json").write_text("{}")
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "a.json.new").write_text("{}")
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / "c.json").mkdir()  # not a file: listed, so that reading it fails loudly
    found = retained_files(tmp_path)
    assert found == {"a": tmp_path / "a.json", "b": tmp_path / "b.json", "c": tmp_path / "c.json"}
    assert list(found) == ["a", "b", "c"]
    # A file, not a folder: nothing retained there.
    assert retained_files(tmp_path / "a.json") == {}


def test_stale_new_files(tmp_path: Path) -> None:
    assert stale_new_files(tmp_path / "absent") == []
    assert stale_new_files(tmp_path / "absent", ["a"]) == []
    for name in ("b.json.new", "a.json.new", "a.json", "a.new"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "c.json.new").mkdir()  # a folder is no stale file
    assert stale_new_files(tmp_path) == [tmp_path / "a.json.new", tmp_path / "b.json.new"]
    assert stale_new_files(tmp_path, ["b", "c", "z"]) == [tmp_path / "b.json.new"]
    assert stale_new_files(tmp_path, []) == []
    assert stale_new_files(tmp_path / "a.json") == []


# --- a project's composed schema -----------------------------------------------------------


def toy_route_row(row_id: str) -> dict[str, Any]:
    """A row of a shape only the toy category's route fragment admits."""
    return {"id": row_id, "route": {"toy_kernel": "k1"}}


def composed() -> LoadedSchema:
    fragment = {
        "route": {
            "type": "object",
            "additionalProperties": False,
            "required": ["toy_kernel"],
            "properties": {"toy_kernel": {"type": "string"}},
        }
    }
    return schema_of(compose_snapshot_schema({"toy-a": fragment}), Path("composed.json"))


def test_the_schema_given_is_the_one_every_step_validates_with(tmp_path: Path) -> None:
    # The category's own route shape: valid under the composed schema, not the generic one
    # (`snapshot_schema`: the generic one only when none is given).
    schema = composed()
    rows = [toy_route_row(A)]
    data = document(*rows)
    assert snapshot_schema(schema) is schema
    assert snapshot_schema(None).path == load_schema("snapshot").path
    assert parse_snapshot(data, source="s", schema=schema).rows == tuple(rows)
    with pytest.raises(InputError):
        parse_snapshot(data, source="s")
    path = tmp_path / "toy-a.json"
    path.write_text(json.dumps(data))
    assert read_snapshot(path, schema=schema).rows == tuple(rows)
    assert read_snapshot(path, schema=schema, data=path.read_bytes()).rows == tuple(rows)
    with pytest.raises(InputError):
        read_snapshot(path)
    assert validate_rows("toy-a", "b", rows, schema) is None
    assert validate_rows("toy-a", "b", rows) is not None
    assert build_snapshot("toy-a", "b", rows, schema=schema).rows == tuple(rows)
    with pytest.raises(SnapshotError):
        build_snapshot("toy-a", "b", rows)
    made = Snapshot("toy-a", "b", tuple(rows))
    write_snapshot(tmp_path / "out.json", made, schema=schema)
    assert json.loads((tmp_path / "out.json").read_text()) == made.to_json()
    with pytest.raises(SnapshotError):
        write_snapshot(tmp_path / "refused.json", made)
    assert not (tmp_path / "refused.json").exists()


def test_write_snapshot_hands_its_callback_the_complete_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "toy-a.json"
    snap = build_snapshot("toy-a", "b", [status_row(A)])
    seen: list[str] = []
    write_snapshot(target, snap, before_replace=lambda temp: seen.append(temp.read_text()))
    assert seen == [dump_json(snap.to_json())] and target.read_text() == seen[0]


def test_a_row_without_a_text_id_does_not_end_the_id_checks() -> None:
    # The row with id 7 is the schema's to phrase; the duplicate after it is still named here.
    assert parse_refusal(document({"id": 7, "route": {}}, status_row(A), status_row(A))) == (
        f"snap.json: duplicate row id {A!r}"
    )
    not_a_row: Any = ["row"]
    assert parse_refusal(document(not_a_row, status_row(B), {"id": "Bad"})) == (
        "snap.json: rows[2]: malformed row id 'Bad'"
    )


def test_an_unparsable_snapshot_is_named_as_a_snapshot_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "toy-a.json"
    path.write_bytes(b"{")
    for data in (None, b"{"):
        with pytest.raises(InputError) as caught:
            read_snapshot(path, data=data)
        assert str(caught.value).startswith(f"snapshot {path} is not valid JSON: ")


def test_plain_rows_sorts_keys_and_lists_tuples_at_every_depth() -> None:
    rows = [{"b": (1, 2), "a": {"d": (3,), "c": 1}, "id": A}]
    plain = plain_rows(rows)
    assert plain == [{"a": {"c": 1, "d": [3]}, "b": [1, 2], "id": A}]
    assert list(plain[0]) == ["a", "b", "id"] and list(plain[0]["a"]) == ["c", "d"]
    # A float orjson writes unlike json (1e-05) takes the slow path: the same rows.
    slow = plain_rows([{"v": 1e-05, "b": (1,), "a": 1}])
    assert slow == [{"a": 1, "b": [1], "v": 1e-05}] and list(slow[0]) == ["a", "b", "v"]
    assert type(plain_rows([{"a": True}])[0]["a"]) is bool


def test_a_row_whose_keys_cannot_be_sorted_is_named() -> None:
    # Keys of mixed types: json cannot sort them (TypeError); the row is named, not the list.
    with pytest.raises(SnapshotError) as caught:
        mixed: Any = {"id": "edge:mixed", 1: "x", "b": "y"}
        plain_rows([status_row(A), mixed])
    assert str(caught.value).startswith("row 'edge:mixed' is not JSON: ")
    assert "'<' not supported" in str(caught.value)


def test_values_orjson_cannot_write_are_made_plain_by_json() -> None:
    import enum

    class Size(enum.IntEnum):
        BIG = 7

    # An integer beyond 64 bits (orjson refuses it) and an IntEnum (json writes its value):
    # the slow path's copy, keys sorted, every value of an exact JSON type.
    plain = plain_rows([{"v": 2**70, "id": A, "e": Size.BIG}])
    assert plain == [{"e": 7, "id": A, "v": 2**70}]
    assert list(plain[0]) == ["e", "id", "v"]
    assert type(plain[0]["e"]) is int and type(plain[0]["v"]) is int
