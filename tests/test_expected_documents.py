"""Reading an expected-changes document (docs/reviewing-changes.md): where its errors point,
the pattern-size guard that runs before the schema, the older versions, the reasons read
for the TODO warning before any judging, and the id list `check --expected-ids` gives. In
process, so that the mutation run of `routectl.review.expected` reaches every step."""

from __future__ import annotations

import pytest

from routectl.errors import InputError
from routectl.review.compare import parse_expected
from routectl.review.expected import (
    ExpectedChanges,
    StatedEntry,
    document_reasons,
    parse_document,
)
from routectl.review.patterns import MAX_PATTERN_CHARS

CATS = ("cat-a", "cat-b")
A1 = "m/float16/tp2/none/c1/q4096"
A2 = "m/float16/tp4/none/c1/q4096"
# A pattern one character over the limit, and the start of the message refusing it.
HUGE = "m/" + "*" * (MAX_PATTERN_CHARS - 1)
TOO_LARGE = f"row pattern too large: {len(HUGE):,} characters (the limit is {MAX_PATTERN_CHARS:,})"


def doc(*entries: object, version: int = 4) -> dict:
    return {"schema_version": version, "changes": list(entries)}


def refusal(data: object) -> str:
    with pytest.raises(InputError) as caught:
        parse_document(data, CATS, source="f.json")
    return str(caught.value)


# --- where an error points -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("m/x", "malformed row id 'm/x'"),
        (f"cat-q:{A1}", "unknown category 'cat-q'"),
        ({"id": f"cat-q:{A1}", "reason": "r"}, "unknown category 'cat-q'"),
    ],
)
def test_a_bad_id_entry_after_a_stated_one_is_named_by_its_place_in_the_file(
    bad: object, message: str
) -> None:
    # The id entry is the file's second: [1], though it is the first id entry. (It was
    # numbered among the id entries alone, [0], which names the stated entry.)
    text = refusal(doc({"rows": A2, "reason": "r"}, bad))
    assert text.startswith(f"f.json: [1]: {message}")


def test_a_schema_problem_of_a_mixed_file_is_the_files_own() -> None:
    # The id entry without its reason: the schema's message, at the entry's place.
    text = refusal(doc({"rows": A2, "reason": "r"}, {"id": A1}))
    assert text == "f.json: changes[1]: 'reason' is a required property"


# --- the pattern-size guard ----------------------------------------------------------------


@pytest.mark.parametrize(
    "entry",
    [
        HUGE,  # a bare id entry (version 1 and 2 lists)
        {"id": HUGE, "reason": "r"},
        {"rows": HUGE, "reason": "r"},
        {"rows": [f"cat-a:{A1}", HUGE], "reason": "r"},
    ],
    ids=["id", "id-entry", "rows", "rows-list"],
)
def test_a_pattern_over_the_limit_is_refused_at_its_entry_in_every_form(entry: object) -> None:
    for data in (doc({"rows": A1, "reason": "r"}, entry), [f"cat-a:{A2}", entry]):
        assert refusal(data).startswith(f"f.json: [1]: {TOO_LARGE}: ")


@pytest.mark.parametrize("form", ["rows", "rows-list"])
def test_a_megabyte_pattern_is_refused_by_the_guard_not_the_schemas_regex_engine(form: str) -> None:
    # The schema's regex engine runs out of stack on a pattern this long: the guard must
    # see every form of `rows` first.
    mega = "m/" + "*" * 1_000_000
    rows: object = mega if form == "rows" else [f"cat-a:{A1}", mega]
    text = refusal(doc({"rows": rows, "reason": "r"}))
    assert text.startswith(f"f.json: [0]: row pattern too large: {len(mega):,} characters")


def test_a_document_without_a_change_list_is_a_schema_problem() -> None:
    for data in ({"schema_version": 4}, {"schema_version": 4, "changes": "m/**"}):
        assert refusal(data).startswith("f.json: ")


def test_an_entry_without_rows_or_id_is_a_schema_problem() -> None:
    assert refusal(doc({"reason": "r"})).startswith("f.json: changes[0]: ")


# --- older versions ------------------------------------------------------------------------


def test_a_version_1_list_naming_a_list_item_by_position_is_refused_as_version_1() -> None:
    positional = {"rows": "m/**", "fields": {"route.dispatch[0].plan.split_k": [4, 8]}}
    text = refusal([dict(positional, reason="r")])
    assert text.startswith(
        "f.json: [0]: field 'route.dispatch[0].plan.split_k' names a list item by its position "
        "(expected-changes schema_version 1)"
    )


def test_an_older_stated_entry_without_fields_is_read() -> None:
    for older in (
        doc({"rows": "m/**", "reason": "r"}, version=2),
        [{"rows": "m/**", "reason": "r"}],
    ):
        (entry,) = parse_document(older, CATS, source="f.json").entries
        assert (entry.rows, entry.fields) == (((None, "m/**"),), None)


def test_a_quoted_key_holding_brackets_is_a_name_not_a_position_in_an_older_file() -> None:
    # `["x[3]"]` is a mapping key: no position to restate, in version 2 as in 4.
    path = 'route.flags["x[3]"]'
    for data in (
        doc({"rows": "m/**", "fields": {path: [1, 2]}, "reason": "r"}, version=2),
        doc(
            {"rows": "m/**", "fields": {'route.flags["x[3]"].ms[*]': [1, 2]}, "reason": "r"},
            version=2,
        ),
    ):
        (entry,) = parse_document(data, CATS, source="f.json").entries
        assert entry.fields is not None and len(entry.fields) == 1
    # A position beside a quoted key is still refused.
    assert "names a list item by its position" in refusal(
        doc(
            {"rows": "m/**", "fields": {'route.flags["x"].ms[3]': [1, 2]}, "reason": "r"}, version=2
        )
    )


def test_a_qualified_pattern_may_name_edge_rows_of_its_category() -> None:
    # The category is the text before the first colon; `edge:` is the rest's.
    (entry,) = parse_document(
        doc({"rows": "cat-a:edge:*", "reason": "r"}), CATS, source="f.json"
    ).entries
    assert entry.rows == (("cat-a", "edge:*"),)


# --- reasons read before judging, and the id list of --expected-ids ------------------------


def test_the_reasons_of_a_document_of_either_version_are_read_without_judging() -> None:
    items = [
        f"cat-a:{A1}",
        {"id": A2, "reason": "tuned"},
        {"rows": "m/**", "reason": "TODO: say why"},
        {"id": "edge:x"},
        {"rows": "q/*", "reason": 5},
    ]
    assert document_reasons(items) == ["tuned", "TODO: say why"]
    assert document_reasons(doc(*items)) == ["tuned", "TODO: say why"]
    # Nothing to read: no reasons, and no error (the schema says what is wrong later).
    for data in ({"schema_version": 4}, {"changes": "x"}, "x", None, 5):
        assert document_reasons(data) == []


def test_an_id_list_is_entries_of_one_row_each_without_fields_in_list_order() -> None:
    ids = parse_expected([f"cat-a:{A1}", {"id": A2, "reason": "r"}], CATS, source="ids")
    changes = ExpectedChanges.of_ids(ids)
    assert changes.entries == (
        StatedEntry(0, f"cat-a:{A1}", (("cat-a", A1),), None, None, True),
        StatedEntry(1, A2, ((None, A2),), None, "r", True),
    )
    assert changes.reasons == ("r",)
    # The same entries as the file holding those ids reads to.
    read = parse_document([f"cat-a:{A1}", {"id": A2, "reason": "r"}], CATS, source="ids")
    assert read == changes
