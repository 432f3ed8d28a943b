"""The expected-changes steps that `check --write-expected` and `check --update` take after
judging (docs/reviewing-changes.md): merging a run's changes into an existing file
(`merge_expected`: kept, new, obsolete and restated entries, `--prune`) and deciding that the
changes a run misses are already in the baseline (`already_applied`). In process, so that the
mutation run of `routectl.review.expected` reaches them (the CLI tests run a child process)."""

from __future__ import annotations

import pytest

from routectl.errors import InputError
from routectl.review.compare import CategoryVerdict, compare_rows
from routectl.review.expected import (
    EXPECTED_VERSION,
    already_applied,
    is_todo,
    judge_category,
    merge_expected,
    parse_document,
    resolve_stated,
    unmatched_fields,
)
from routectl.review.groups import group_changes

# The same two categories, rows and stated path as the judge's own tests.
from tests.test_expected import A1, A2, A3, CATS, SPLIT


def row(row_id: str, split_k: int = 4) -> dict:
    return {
        "id": row_id,
        "route": {"dispatch": [{"op": "mm", "plan": {"m": m, "split_k": split_k}} for m in (1, 8)]},
    }


def rows(**split: int) -> list[dict]:
    """A1..A3 at split_k 4 unless named (A1=8 ...)."""
    return [row(r, split.get(name, 4)) for name, r in (("A1", A1), ("A2", A2), ("A3", A3))]


def doc(*entries: dict) -> dict:
    return {"schema_version": EXPECTED_VERSION, "changes": list(entries)}


def known(old: list[dict], new: list[dict]):
    ids = {r["id"] for r in (*old, *new)}
    return lambda name: ids if name == "cat-a" else set()


def verdict_of(old: list[dict], new: list[dict], document: dict) -> tuple[CategoryVerdict, tuple]:
    """What `check` computes for category cat-a under `document`: its verdict, the stated
    matches and the stated items that matched nothing."""
    comparison = compare_rows(old, new)
    stated = resolve_stated(
        parse_document(document, CATS, source="f.json").entries,
        ["cat-a"],
        known(old, new),
        list(CATS),
    )
    groups = group_changes("cat-a", comparison, {}, {})
    verdict, covered = judge_category("cat-a", comparison, stated.by_category["cat-a"], groups)
    return verdict, (stated, (*stated.missing, *unmatched_fields(stated.judged, covered)))


def run_verdict(old: list[dict], new: list[dict]) -> CategoryVerdict:
    return verdict_of(old, new, doc())[0]


KEPT = {"rows": f"cat-a:{A1}", "fields": {SPLIT: [4, 8]}, "reason": "retuned"}
STALE = {"rows": f"cat-a:{A3}", "reason": "old change"}


def test_merge_keeps_live_entries_marks_stale_ones_and_adds_the_unstated_change() -> None:
    old, new = rows(), rows(A1=8, A2=16)
    verdict = run_verdict(old, new)
    merge = merge_expected(doc(KEPT, STALE), [verdict], list(CATS), known(old, new), source="f")
    counts = (merge.kept, merge.new, merge.pruned, merge.restated, merge.dropped)
    assert counts == (2, 1, False, 0, 0)
    assert merge.obsolete == ((1, f"cat-a:{A3}", "1 of its rows did not move"),)
    assert merge.document is not None
    changes = merge.document["changes"]
    assert merge.document["schema_version"] == EXPECTED_VERSION == 4
    assert changes[:2] == [KEPT, STALE]
    # The new entry: A2 alone, its field 4 -> 16, a reason left for the reviewer.
    assert changes[2:] == [
        {
            "rows": f"cat-a:{A2}",
            "fields": {SPLIT: [4, 16]},
            "reason": f"TODO: say why {SPLIT} moves",
        }
    ]
    assert is_todo(changes[2]["reason"]) and not is_todo(KEPT["reason"])


def test_prune_drops_the_stale_entry_and_counts_it() -> None:
    old, new = rows(), rows(A1=8)
    verdict = run_verdict(old, new)
    merge = merge_expected(
        doc(KEPT, STALE), [verdict], list(CATS), known(old, new), source="f", prune=True
    )
    assert (merge.kept, merge.new, merge.dropped) == (1, 0, 1)
    assert merge.document == doc(KEPT)


def test_a_file_that_states_every_change_is_not_rewritten() -> None:
    old, new = rows(), rows(A1=8)
    verdict = run_verdict(old, new)
    merge = merge_expected(doc(KEPT), [verdict], list(CATS), known(old, new), source="f")
    assert (merge.document, merge.kept, merge.new, merge.obsolete) == (None, 1, 0, ())


def test_a_positional_entry_is_restated_with_its_reason() -> None:
    # An older file's entry naming a list item by position ([0]) is replaced by the new
    # entries of the rows it matched, which take its reason.
    positional = {
        "rows": f"cat-a:{A1}",
        "fields": {"route.dispatch[0].plan.split_k": [4, 8]},
        "reason": "retuned",
    }
    old, new = rows(), rows(A1=8)
    verdict = run_verdict(old, new)
    merge = merge_expected(
        {"schema_version": 2, "changes": [positional]},
        [verdict],
        list(CATS),
        known(old, new),
        source="f",
    )
    assert (merge.kept, merge.new, merge.restated, merge.dropped) == (0, 1, 1, 1)
    assert merge.document is not None
    [entry] = merge.document["changes"]
    assert entry["fields"] == {SPLIT: [4, 8]} and entry["reason"] == "retuned"


def _applied(baseline: list[dict], fresh: list[dict], document: dict) -> bool:
    verdict, (stated, missing) = verdict_of(baseline, fresh, document)
    by_id = {r["id"]: r for r in fresh}
    return already_applied(
        [verdict], stated.by_category, missing, lambda _name, row_id: by_id.get(row_id)
    )


def test_a_change_already_in_the_baseline_is_recognised_by_its_new_value() -> None:
    # The baseline already holds split_k 8 for A1: the stated 4 -> 8 is missing, applied.
    done = rows(A1=8)
    assert _applied(done, done, doc(KEPT)) is True
    # A different NEW value, an entry without fields, or nothing missing: not applied.
    other = {**KEPT, "fields": {SPLIT: [4, 16]}}
    assert _applied(done, done, doc(other)) is False
    assert _applied(done, done, doc({"rows": f"cat-a:{A1}", "reason": "r"})) is False
    assert _applied(rows(), rows(A1=8), doc(KEPT)) is False  # it moved: nothing missing
    # Something unexpected moved beside it: not applied either.
    assert _applied(done, rows(A1=8, A2=16), doc(KEPT)) is False


def test_an_absent_new_value_is_applied_only_when_the_path_is_gone() -> None:
    gone = {"rows": f"cat-a:{A1}", "fields": {SPLIT: [4, None]}, "reason": "dropped"}
    without = [
        {"id": A1, "route": {"dispatch": [{"op": "mm", "plan": {"m": m}} for m in (1, 8)]}},
        row(A2),
        row(A3),
    ]
    assert _applied(without, without, doc(gone)) is True
    assert _applied(rows(), rows(), doc(gone)) is False


# --- what makes an entry obsolete, and where it is -----------------------------------------


def two_verdicts(tables: dict[str, tuple[list[dict], list[dict]]]) -> tuple[list, object]:
    """The verdicts of several judged categories (no entries), and their ids as check
    knows them."""
    verdicts = []
    ids: dict[str, set[str]] = {}
    for name, (old, new) in tables.items():
        comparison = compare_rows(old, new)
        groups = group_changes(name, comparison, {}, {})
        verdicts.append(judge_category(name, comparison, (), groups)[0])
        ids[name] = set(comparison.fresh_ids | comparison.baseline_ids)
    return verdicts, lambda name: ids.get(name, set())


def merged(document: object, old: list[dict], new: list[dict], **kw: bool):
    verdict = run_verdict(old, new)
    return merge_expected(document, [verdict], list(CATS), known(old, new), source="f", **kw)


def test_a_version_1_list_is_merged_as_its_entries() -> None:
    merge = merged([f"cat-a:{A1}", {"id": f"cat-a:{A3}", "reason": "gone"}], rows(), rows(A1=8))
    assert (merge.kept, merge.new) == (2, 0)
    assert merge.obsolete == ((1, f"cat-a:{A3}", "1 of its rows did not move"),)


def test_an_obsolete_entry_after_a_restated_one_keeps_its_place_and_is_pruned() -> None:
    positional = {
        "rows": f"cat-a:{A1}",
        "fields": {"route.dispatch[0].plan.split_k": [4, 8]},
        "reason": "retuned",
    }
    document = {"schema_version": 2, "changes": [positional, STALE]}
    merge = merged(document, rows(), rows(A1=8))
    assert merge.obsolete == ((1, f"cat-a:{A3}", "1 of its rows did not move"),)
    pruned = merged(document, rows(), rows(A1=8), prune=True)
    assert pruned.document is not None
    assert [e["rows"] for e in pruned.document["changes"]] == [f"cat-a:{A1}"]
    assert (pruned.restated, pruned.dropped) == (1, 2)


def test_bare_patterns_are_merged_and_restated_in_their_category() -> None:
    bare = {"rows": A1, "fields": {SPLIT: [4, 8]}, "reason": "retuned"}
    assert merged(doc(bare), rows(), rows(A1=8)).document is None
    positional = {**bare, "fields": {"route.dispatch[0].plan.split_k": [4, 8]}}
    merge = merged({"schema_version": 2, "changes": [positional]}, rows(), rows(A1=8))
    assert merge.document is not None
    [entry] = merge.document["changes"]
    assert entry == {"rows": f"cat-a:{A1}", "fields": {SPLIT: [4, 8]}, "reason": "retuned"}


def test_a_restated_entry_whose_reason_is_still_todo_gives_the_new_entry_a_fresh_todo() -> None:
    positional = {
        "rows": f"cat-a:{A1}",
        "fields": {"route.dispatch[0].plan.split_k": [4, 8]},
        "reason": "TODO",
    }
    merge = merged({"schema_version": 2, "changes": [positional]}, rows(), rows(A1=8))
    assert merge.document is not None
    [entry] = merge.document["changes"]
    assert entry["reason"] == f"TODO: say why {SPLIT} moves"


def test_merging_refuses_entries_stating_different_changes_of_one_row() -> None:
    other = {"rows": "cat-a:m/**", "fields": {SPLIT: [4, 16]}, "reason": "other"}
    with pytest.raises(InputError) as caught:
        merged(doc(KEPT, other), rows(), rows(A1=8))
    assert f"different changes of {SPLIT} for row cat-a:{A1}: " in str(caught.value)


def test_a_pattern_matching_no_row_is_obsolete_with_why() -> None:
    nothing = {"rows": "cat-a:x/**", "reason": "r"}
    merge = merged(doc(KEPT, nothing), rows(), rows(A1=8))
    assert merge.obsolete == ((1, "cat-a:x/**", "matches no row"),)
    unmoved = {"rows": f"cat-a:{A1}", "fields": {SPLIT: [4, 8], "route.kernel": ["K", "L"]}}
    merge = merged(doc(dict(unmoved, reason="r")), rows(), rows(A1=8))
    assert merge.obsolete == (
        (0, f"cat-a:{A1}", 'stated ["K", "L"] but no matched row changed it so'),
    )


def test_with_two_categories_each_entry_is_judged_by_its_own_category() -> None:
    # A1 moves in both categories; each has its own stated entry, and an id of neither
    # category names no row; an id that names a moved row stays.
    verdicts, ids = two_verdicts({"cat-a": (rows(), rows(A1=8)), "cat-b": (rows(), rows(A1=8))})
    entries = (
        {"rows": f"cat-a:{A1}", "fields": {SPLIT: [4, 8]}, "reason": "a"},
        {"rows": f"cat-b:{A1}", "fields": {SPLIT: [4, 8]}, "reason": "b"},
        "z/bfloat16/tp1/x/c9/q1",
        f"cat-a:{A1}",
    )
    merge = merge_expected(doc(*entries), verdicts, list(CATS), ids, source="f")
    assert (merge.kept, merge.new) == (4, 0)
    assert merge.obsolete == ((2, "z/bfloat16/tp1/x/c9/q1", "names no row"),)
    assert merge.document is None
    pruned = merge_expected(doc(*entries), verdicts, list(CATS), ids, source="f", prune=True)
    assert pruned.document == doc(*entries[:2], entries[3])
    assert (pruned.dropped, pruned.pruned) == (1, True)


def test_prune_on_a_file_stating_every_change_writes_nothing_and_says_it_pruned() -> None:
    merge = merged(doc(KEPT), rows(), rows(A1=8), prune=True)
    assert (merge.document, merge.pruned, merge.dropped, merge.obsolete) == (None, True, 0, ())
