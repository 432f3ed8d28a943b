"""The expected-changes steps that `check --write-expected` and `check --update` take after
judging (docs/reviewing-changes.md): merging a run's changes into an existing file
(`merge_expected`: kept, new, obsolete and restated entries, `--prune`) and deciding that the
changes a run misses are already in the baseline (`already_applied`). In process, so that the
mutation run of `routectl.review.expected` reaches them (the CLI tests run a child process)."""

from __future__ import annotations

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
