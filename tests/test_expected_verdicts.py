"""The verdict of one category under stated entries (docs/reviewing-changes.md): what it
records beside its rows (the row count, the fields named for unexpected rows, the unknown
ids), entries of both kinds over several rows, stated paths through quoted keys, conflicts,
typos of qualified ids, and the already-applied test of `check --update`. In process, so
that the mutation run of `routectl.review.expected` reaches them."""

from __future__ import annotations

import copy

import pytest

from routectl.errors import InputError
from routectl.review.compare import compare_rows
from routectl.review.expected import (
    already_applied,
    judge_category,
    parse_document,
    resolve_stated,
    unmatched_fields,
)
from tests.test_expected import A1, A2, A3, CATS, SPLIT, base, doc, judge, moved_split, row


def test_a_verdict_counts_the_fresh_rows() -> None:
    verdict, _ = judge(moved_split(A1), doc({"rows": A1, "reason": "r"}))
    assert verdict.rows == 3
    added = [*moved_split(A1), row("edge:new")]
    assert judge(added, doc({"rows": A1, "reason": "r"}))[0].rows == 4


def test_fields_are_named_only_for_stated_rows_an_unstated_row_is_wholly_unexpected() -> None:
    # A2 moved with no entry matching it: unexpected, with no field list (every change of
    # it is unexpected); A1's entry states a value it does not reach: its change is named.
    entry = {"rows": A1, "fields": {SPLIT: [4, 16]}, "reason": "r"}
    verdict, _ = judge(moved_split(A1, A2), doc(entry))
    assert verdict.unexpected == (A1, A2)
    assert list(verdict.unexpected_fields) == [A1]
    assert {c.path for c in verdict.unexpected_fields[A1]} == {
        "route.dispatch[M=1,0].plan.split_k",
        "route.dispatch[M=8,0].plan.split_k",
    }


def test_a_row_expected_whole_does_not_end_the_judging_of_the_rows_after_it() -> None:
    # A1 (first in id order) is expected by an entry without fields; A2, after it, by an
    # entry whose fields do not cover its change; A3's stated field covers its change.
    entries = (
        {"rows": A1, "reason": "any"},
        {"rows": A2, "fields": {SPLIT: [4, 16]}, "reason": "wrong"},
        {"rows": A3, "fields": {SPLIT: [4, 8]}, "reason": "right"},
    )
    verdict, missing = judge(moved_split(A1, A2, A3), doc(*entries))
    assert verdict.unexpected == (A2,)
    assert set(verdict.unexpected_fields) == {A2}
    assert verdict.reasons == {A1: ("any",), A3: ("right",)}
    # A2's stated [4, 16] covered nothing; A3's [4, 8] did, so it is not listed.
    assert [(m.entry, m.field) for m in missing] == [(1, SPLIT)]


def test_an_id_entry_naming_a_row_of_neither_side_is_missing_and_unknown() -> None:
    far = "z/bfloat16/tp1/x/c9/q1"
    verdict, _ = judge(moved_split(A1), doc(A1, f"cat-a:{far}"))
    assert verdict.missing == (far,) and verdict.unknown == (far,)
    # A row that exists but did not move is missing, not unknown.
    verdict, _ = judge(moved_split(A1), doc(A1, f"cat-a:{A2}"))
    assert (verdict.missing, verdict.unknown) == ((A2,), ())


def test_two_entries_stating_different_paths_of_one_row_do_not_conflict() -> None:
    new = moved_split(A1, A2)
    new[0]["route"]["kernel"] = "L"
    entries = (
        {"rows": "m/*/tp{2,4}/none/c1/q4096", "fields": {SPLIT: [4, 8]}, "reason": "split"},
        {"rows": A1, "fields": {"route.kernel": ["K", "L"]}, "reason": "kernel"},
        # The same path of other rows, other values: no conflict either (A3 did not move).
        {"rows": A3, "fields": {SPLIT: [4, 16]}, "reason": "other row"},
    )
    verdict, missing = judge(new, doc(*entries))
    assert verdict.unexpected == () and verdict.reasons[A1] == ("split", "kernel")
    assert [(m.entry, m.field) for m in missing] == [(2, SPLIT)]


def test_a_stated_wildcard_after_a_quoted_key_matches_any_list_item() -> None:
    def flagged(row_id: str, ms: list[int]) -> dict:
        return {"id": row_id, "route": {"flags": {"a b": {"ms": ms}}}}

    old = [flagged(A1, [1, 2]), flagged(A2, [1, 2])]
    new = [flagged(A1, [1, 3]), flagged(A2, [1, 2])]
    stated = {"rows": A1, "fields": {'route.flags["a b"].ms[*]': [2, 3]}, "reason": "r"}
    verdict, missing = judge(new, doc(stated), old=old)
    assert verdict.ok and missing == ()
    # The key is a name: a wildcard inside it matches only itself.
    inside = {"rows": A1, "fields": {'route.flags["a[*]"].ms[*]': [2, 3]}, "reason": "r"}
    assert judge(new, doc(inside), old=old)[0].unexpected == (A1,)


def test_a_qualified_id_close_to_a_row_of_its_category_is_a_typo() -> None:
    near = A1.replace("q4096", "q4097")
    with pytest.raises(InputError) as caught:
        judge(moved_split(A1), doc({"rows": f"cat-a:{near}", "reason": "r"}))
    assert str(caught.value) == (
        f"expected-changes entry [0] names row '{near}', which no category has; did you mean {A1}?"
    )


def test_two_id_entries_naming_two_rows_are_both_judged() -> None:
    verdict, missing = judge(
        moved_split(A1, A2),
        doc({"id": A1, "reason": "one"}, {"id": f"cat-a:{A2}", "reason": "two"}),
    )
    assert verdict.ok and missing == ()
    assert verdict.reasons == {A1: ("one",), A2: ("two",)}


# --- already applied -----------------------------------------------------------------------


def _applied_in(tables: dict[str, list[dict]], document: dict) -> bool:
    """check's already-applied test for two judged categories whose rows are `tables`
    (unchanged: both sides the same), rows looked up by category as check does."""
    by_id = {name: {r["id"]: r for r in rows} for name, rows in tables.items()}
    parsed = parse_document(document, CATS, source="f.json")
    stated = resolve_stated(
        parsed.entries, list(tables), lambda n: set(by_id.get(n, {})), list(CATS)
    )
    verdicts, covered = [], set()
    for name, rows in tables.items():
        verdict, hits = judge_category(name, compare_rows(rows, rows), stated.by_category[name])
        verdicts.append(verdict)
        covered |= hits
    missing = (*stated.missing, *unmatched_fields(stated.judged, covered))
    return already_applied(
        verdicts, stated.by_category, missing, lambda name, row_id: by_id[name].get(row_id)
    )


def test_already_applied_reads_each_row_in_its_own_category() -> None:
    # One id in both categories, at split_k 8 in cat-a only: an entry stating 4 -> 8 for
    # cat-a's row is applied; for cat-b's, not.
    tables = {"cat-a": [row(A1, 8)], "cat-b": [row(A1, 4)]}
    stated = {"fields": {SPLIT: [4, 8]}, "reason": "r"}
    assert _applied_in(tables, doc({"rows": f"cat-a:{A1}", **stated})) is True
    assert _applied_in(tables, doc({"rows": f"cat-b:{A1}", **stated})) is False


@pytest.mark.parametrize("new", [8, None], ids=["value", "removed"])
def test_a_missing_row_the_lookup_does_not_find_is_never_applied(new: int | None) -> None:
    # The row stated, missing from this run (it already holds the NEW side), and absent from
    # the rows handed in (a lookup of other rows): nothing shows its NEW value, nor that
    # the path is gone.
    done = [row(A1, 8), row(A2, 8), row(A3, 8)]
    if new is None:
        for r in done:
            for item in r["route"]["dispatch"]:
                del item["plan"]["split_k"]
    comparison = compare_rows(done, done)
    parsed = parse_document(
        doc({"rows": f"cat-a:{A1}", "fields": {SPLIT: [4, new]}, "reason": "r"}),
        CATS,
        source="f.json",
    )
    ids = comparison.fresh_ids
    stated = resolve_stated(parsed.entries, ["cat-a"], lambda _n: ids, list(CATS))
    verdict, _ = judge_category("cat-a", comparison, stated.by_category["cat-a"])
    assert verdict.missing == (A1,)
    others = {r["id"]: r for r in copy.deepcopy(base()) if r["id"] != A1}
    assert already_applied([verdict], stated.by_category, (), lambda _n, i: others.get(i)) is False
    by_id = {r["id"]: r for r in done}
    assert already_applied([verdict], stated.by_category, (), lambda _n, i: by_id.get(i)) is True
