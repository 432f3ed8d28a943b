"""Stated expected changes: the file's forms and versions, and every verdict rule."""

from __future__ import annotations

import copy
import re
from dataclasses import replace

import pytest

from routectl.errors import InputError
from routectl.io.schemas import schema_violation
from routectl.review.compare import MissingItem, compare_rows
from routectl.review.expected import (
    judge_category,
    parse_document,
    resolve_stated,
    stated_document,
    unmatched_fields,
)
from routectl.review.groups import group_changes

CATS = ("cat-a", "cat-b")
A1, A2, A3 = (
    "m/float16/tp2/none/c1/q4096",
    "m/float16/tp4/none/c1/q4096",
    "m/float16/tp2/none/c4/q4096",
)
SPLIT = "route.dispatch[*].plan.split_k"


def row(row_id: str, split_k: int = 4, kernel: str = "K") -> dict:
    return {
        "id": row_id,
        "route": {
            "kernel": kernel,
            "dispatch": [{"op": "mm", "plan": {"m": m, "split_k": split_k}} for m in (1, 8)],
        },
    }


def base() -> list[dict]:
    return [row(A1), row(A2), row(A3)]


def judge(new: list[dict], document, *, old=None, categories=CATS, judged=("cat-a",), known=None):
    """Judge category cat-a (its rows: `old` against `new`) under an expected document."""
    old = base() if old is None else old
    changes = parse_document(document, categories, source="f.json")
    comparison = compare_rows(old, new)
    ids = {"cat-a": comparison.fresh_ids | comparison.baseline_ids, **(known or {})}
    stated = resolve_stated(
        changes.entries, list(judged), lambda n: ids.get(n, set()), list(categories)
    )
    groups = group_changes("cat-a", comparison, {}, {})
    verdict, covered = judge_category("cat-a", comparison, stated.by_category["cat-a"], groups)
    missing = (*stated.missing, *unmatched_fields(stated.judged, covered))
    return verdict, missing


def moved_split(*ids: str, to: int = 8) -> list[dict]:
    return [row(r[0], to if r[0] in ids else 4) for r in ((A1,), (A2,), (A3,))]


def doc(*entries) -> dict:
    return {"schema_version": 3, "changes": list(entries)}


def test_a_pattern_without_fields_expects_any_change_of_its_rows():
    verdict, missing = judge(
        moved_split(A1, A2), doc({"rows": "cat-a:m/float16/tp{2,4}/none/c1/*", "reason": "r"})
    )
    assert verdict.ok and not missing
    assert verdict.reasons == {A1: ("r",), A2: ("r",)}


def test_stated_fields_that_cover_every_change_are_expected():
    entry = {"rows": "m/*/tp{2,4}/none/c1/q4096", "fields": {SPLIT: [4, 8]}, "reason": "r"}
    verdict, missing = judge(moved_split(A1, A2), doc(entry))
    assert verdict.ok and not missing and verdict.unexpected_fields == {}


def test_an_extra_field_in_a_stated_row_is_unexpected_and_named():
    new = moved_split(A1, A2)
    new[0]["route"]["kernel"] = "Other"
    entry = {"rows": "m/*/tp{2,4}/none/c1/q4096", "fields": {SPLIT: [4, 8]}, "reason": "r"}
    verdict, missing = judge(new, doc(entry))
    assert verdict.unexpected == (A1,)
    assert [(c.path, c.old, c.new) for c in verdict.unexpected_fields[A1]] == [
        ("route.kernel", "K", "Other")
    ]
    assert not missing


def test_other_values_of_a_stated_path_are_not_covered():
    entry = {"rows": [f"cat-a:{A1}", f"cat-a:{A2}"], "fields": {SPLIT: [4, 16]}, "reason": "r"}
    verdict, missing = judge(moved_split(A1, A2), doc(entry))
    assert verdict.unexpected == (A1, A2)
    assert missing == (
        MissingItem(
            0,
            f'["cat-a:{A1}", "cat-a:{A2}"]',
            SPLIT,
            "stated [4, 16] but no matched row changed it so",
        ),
    )


def test_a_stated_field_that_does_not_move_is_missing():
    entry = {"rows": A1, "fields": {SPLIT: [4, 8], "route.kernel": ["K", "L"]}, "reason": "r"}
    verdict, missing = judge(moved_split(A1), doc(entry))
    assert verdict.ok
    assert missing == (
        MissingItem(0, A1, "route.kernel", 'stated ["K", "L"] but no matched row changed it so'),
    )


def test_every_matched_row_that_did_not_move_is_missing():
    verdict, _ = judge(moved_split(A1), doc({"rows": "m/float16/tp2/none/*/q4096", "reason": "r"}))
    assert verdict.unexpected == () and verdict.missing == (A1.replace("c1", "c4"),)
    assert verdict.missing == (A3,) and verdict.unknown == ()


def test_a_pattern_that_matches_no_row_is_missing():
    _, missing = judge(
        moved_split(A1), doc({"rows": A1, "reason": "r"}, {"rows": "cat-a:x/**", "reason": "r"})
    )
    assert missing == (MissingItem(1, "cat-a:x/**", None, "matches no row"),)


def test_a_null_side_states_an_added_field():
    new = copy.deepcopy(base())
    new[0]["route"]["flags"] = {"compact": True}
    entry = {"rows": A1, "fields": {"route.flags": [None, {"compact": True}]}, "reason": "r"}
    verdict, missing = judge(new, doc(entry))
    assert verdict.ok and not missing


def test_two_entries_stating_different_values_for_one_row_path_are_an_input_error():
    first = {"rows": "m/**", "fields": {SPLIT: [4, 8]}, "reason": "r"}
    second = {"rows": A1, "fields": {SPLIT: [4, 16]}, "reason": "s"}
    with pytest.raises(
        InputError,
        match=r"entries \[0\] and \[1\] state different changes "
        r"of route.dispatch\[\*\].plan.split_k for row "
        r"cat-a:m/float16/tp2/none/c1/q4096",
    ):
        judge(moved_split(A1, A2, A3), doc(first, second))
    same = {"rows": A1, "fields": {SPLIT: [4, 8]}, "reason": "s"}
    assert judge(moved_split(A1, A2, A3), doc(first, same))[0].ok


def test_a_bare_pattern_must_resolve_to_one_category():
    with pytest.raises(InputError, match="several categories .cat-a, cat-b.: qualify it"):
        judge(moved_split(A1), doc({"rows": "m/**", "reason": "r"}), known={"cat-b": {A2}})
    # Qualified, it judges its own category only.
    assert judge(
        moved_split(A1), doc({"rows": f"cat-a:{A1}", "reason": "r"}), known={"cat-b": {A1}}
    )[0].ok


def test_file_forms_versions_and_rejections():
    old_style = ["cat-a:edge:x", {"id": "edge:y", "reason": "why"}]
    assert schema_violation("expected-changes", old_style) is None
    parsed = parse_document(old_style, CATS, source="f.json")
    # An id entry is an entry of its one row without fields; its reason may be absent.
    assert [(e.rows, e.fields, e.reason, e.from_id) for e in parsed.entries] == [
        ((("cat-a", "edge:x"),), None, None, True),
        (((None, "edge:y"),), None, "why", True),
    ]
    mixed = doc("cat-a:edge:x", {"rows": ["edge:*", "cat-b:m/**"], "reason": "r"})
    _, stated = parse_document(mixed, CATS, source="f.json").entries
    assert stated.index == 1 and not stated.from_id
    assert stated.rows == ((None, "edge:*"), ("cat-b", "m/**")) and stated.fields is None
    for data, message in [
        ({"schema_version": 5, "changes": []}, "newer than this routectl reads (4)"),
        (
            doc({"rows": "m/**", "fields": {SPLIT: [1]}, "reason": "r"}),
            "f.json: [0]: field 'route.dispatch[*].plan.split_k' states [1]: state [OLD, NEW]",
        ),
        (doc({"rows": [], "reason": "r"}), 'f.json: [0]: "rows" is an empty list'),
        (doc({"rows": "m/**"}), "'reason' is a required property"),
        (doc({"rows": "cat-q:m/**", "reason": "r"}), "unknown category 'cat-q'"),
        (doc({"rows": "m/x", "reason": "r"}), "malformed row id 'm/x'"),
    ]:
        with pytest.raises(InputError, match=re.escape(message)):
            parse_document(data, CATS, source="f.json")


def test_the_stated_document_of_a_verdict_passes_schema_and_states_each_group():
    new = moved_split(A1, A2)
    new.append(row("edge:new", kernel="Z"))
    verdict, _ = judge(new, [])
    verdict = replace(
        verdict, groups=group_changes("cat-a", verdict.comparison, {"edge:new": new[-1]}, {})
    )
    document = stated_document([verdict])
    assert schema_violation("expected-changes", document) is None
    assert document == {
        "schema_version": 4,
        "changes": [
            {
                "rows": "cat-a:m/float16/tp{2,4}/none/c1/q4096",
                "fields": {SPLIT: [4, 8]},
                "reason": f"TODO: say why {SPLIT} moves",
            },
            {"rows": "cat-a:edge:new", "reason": "TODO: say why these rows are added (kernel Z)"},
        ],
    }


def test_an_id_entry_is_judged_as_an_entry_of_its_row_without_fields():
    moved = moved_split(A1, A2)
    for listed, stated in [
        (f"cat-a:{A1}", {"rows": f"cat-a:{A1}", "reason": "r"}),
        (A3, {"rows": A3, "reason": "r"}),
        ({"id": A1, "reason": "r"}, {"rows": A1, "reason": "r"}),
    ]:
        by_id, missing_id = judge(moved, doc(listed))
        by_rows, missing_rows = judge(moved, doc(stated))
        assert (by_id.unexpected, by_id.missing) == (by_rows.unexpected, by_rows.missing)
        assert missing_id == missing_rows == ()
    # An id beside a stated entry with fields expects its row whatever else moved in it.
    verdict, _ = judge(
        moved_split(A1, to=16),
        doc(A1, {"rows": A1, "fields": {SPLIT: [4, 8]}, "reason": "r"}),
    )
    assert verdict.ok and verdict.reasons[A1] == ("r",)


def test_an_older_file_is_read_unless_a_field_names_a_list_item_by_position():
    stated = {"rows": "m/**", "fields": {SPLIT: [4, 8]}, "reason": "r"}
    for older in ({"schema_version": 2, "changes": [stated]}, [stated]):
        # `[*]` meant any position; it now matches any item, by position or key.
        assert judge(moved_split(A1, A2, A3), older)[0].ok
    positional = {"rows": "m/**", "fields": {"route.dispatch[0].plan.split_k": [4, 8]}}
    with pytest.raises(InputError) as refused:
        parse_document(
            {"schema_version": 2, "changes": [dict(positional, reason="r")]}, CATS, source="f.json"
        )
    assert str(refused.value).startswith(
        "f.json: [0]: field 'route.dispatch[0].plan.split_k' names a list item by its position "
        "(expected-changes schema_version 2)"
    )
    assert "--write-expected f.json (reviewed reasons are kept)" in str(refused.value)
    # In version 3 a position is a place in an ordered list (a chain of chosen stages).
    chosen = {"rows": "m/**", "fields": {"route.stages[M=8].chosen[1]": ["a", "b"]}}
    assert parse_document(doc(dict(chosen, reason="r")), CATS, source="f.json").entries


def test_a_group_without_common_fields_says_why_and_offers_the_split():
    def chained(row_id: str, chain: list[str]) -> dict:
        return {"id": row_id, "route": {"chain": chain}}

    # The same two changes of an ordered list, at swapped places in the two rows.
    old = [chained(A1, ["a", "b", "c"]), chained(A2, ["a", "c", "b"])]
    new = [chained(A1, ["a", "x", "y"]), chained(A2, ["a", "y", "x"])]
    verdict, _ = judge(new, [], old=old)
    verdict = replace(verdict, groups=group_changes("cat-a", verdict.comparison, {}, {}))
    document = stated_document([verdict])
    assert schema_violation("expected-changes", document) is None
    (entry,) = document["changes"]
    assert "fields" not in entry
    assert entry["note"] == (
        "no field is common to all 2 rows: route.chain[*] changes at different places in "
        f"them; split the entry into 2 to state each its fields: cat-a:{A1}; cat-a:{A2}"
    )
