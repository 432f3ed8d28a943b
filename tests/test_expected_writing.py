"""The stated entries `check --write-expected` writes for change groups
(docs/reviewing-changes.md): a path that changes at several places with different values is
stated at each place when every row of the group has the same ones; a group is written as
its patterns, or as its ids when no few patterns describe it. Each written document is
judged again: it must expect exactly the run's changes."""

from __future__ import annotations

from routectl.io.schemas import schema_violation
from routectl.review.compare import CategoryVerdict, compare_rows
from routectl.review.expected import (
    judge_category,
    parse_document,
    resolve_stated,
    stated_document,
    unmatched_fields,
)
from routectl.review.groups import group_changes

CATS = ("cat-a",)
A1 = "m/float16/tp2/none/c1/q4096"
A2 = "m/float16/tp4/none/c1/q4096"
A3 = "m/float16/tp2/none/c4/q4096"
AT_1 = "route.dispatch[M=1,0].plan.split_k"
AT_8 = "route.dispatch[M=8,0].plan.split_k"


def row(row_id: str, split: tuple[int, int] = (4, 4), kernel: str = "K", last: int = 2) -> dict:
    return {
        "id": row_id,
        "route": {
            "kernel": kernel,
            "dispatch": [
                {"op": "mm", "plan": {"m": m, "split_k": s}}
                for m, s in zip((1, 8), split, strict=True)
            ],
            "chain": ["a", "b", last],
        },
    }


def verdict_of(old: list[dict], new: list[dict]) -> CategoryVerdict:
    comparison = compare_rows(old, new)
    verdict, _ = judge_category("cat-a", comparison, (), group_changes("cat-a", comparison, {}, {}))
    return verdict


def judged_again(old: list[dict], new: list[dict], document: dict) -> tuple[CategoryVerdict, tuple]:
    comparison = compare_rows(old, new)
    ids = comparison.fresh_ids | comparison.baseline_ids
    entries = parse_document(document, CATS, source="written.json").entries
    stated = resolve_stated(entries, ["cat-a"], lambda _n: ids, list(CATS))
    verdict, covered = judge_category("cat-a", comparison, stated.by_category["cat-a"])
    return verdict, (*stated.missing, *unmatched_fields(stated.judged, covered))


def written(old: list[dict], new: list[dict]) -> dict:
    document = stated_document([verdict_of(old, new)])
    assert schema_violation("expected-changes", document) is None
    verdict, missing = judged_again(old, new, document)
    assert verdict.ok and missing == ()
    return document


def test_a_path_changing_at_two_places_alike_in_every_row_is_stated_at_each_place() -> None:
    # A1 and A2: split_k 4 -> 8 at M=1 and 4 -> 16 at M=8 (one generalised path, two value
    # pairs), the kernel, and the chain's last item; A3 does not move.
    old = [row(A1), row(A2), row(A3)]
    new = [row(A1, (8, 16), "L", 3), row(A2, (8, 16), "L", 3), row(A3)]
    (entry,) = written(old, new)["changes"]
    assert entry["rows"] == "cat-a:m/float16/tp{2,4}/none/c1/q4096"
    assert entry["fields"] == {
        "route.chain[2]": [2, 3],
        AT_1: [4, 8],
        AT_8: [4, 16],
        "route.kernel": ["K", "L"],
    }


def test_a_path_changing_at_two_places_in_one_row_is_stated_at_them() -> None:
    old, new = [row(A1), row(A2)], [row(A1, (8, 16)), row(A2)]
    (entry,) = written(old, new)["changes"]
    assert entry == {
        "rows": f"cat-a:{A1}",
        "fields": {AT_1: [4, 8], AT_8: [4, 16]},
        "reason": entry["reason"],
    }


def test_rows_changing_one_path_at_different_places_get_no_fields_but_a_note() -> None:
    # A1 moves 4 -> 8 at M=1 and 4 -> 16 at M=8, A2 the other way round: one signature,
    # no place common to both.
    old = [row(A1), row(A2)]
    new = [row(A1, (8, 16)), row(A2, (16, 8))]
    (entry,) = written(old, new)["changes"]
    assert "fields" not in entry and entry["note"].startswith("no field is common to all 2 rows")


def diagonal(count: int) -> list[str]:
    """Ids no box of two covers (tpK with cK only): one pattern each."""
    return [f"m/float16/tp{k}/none/c{k}/q4096" for k in range(1, count + 1)]


def test_a_group_of_two_patterns_is_written_as_the_list_of_both() -> None:
    ids = diagonal(2)
    old, new = [row(i) for i in ids], [row(i, kernel="L") for i in ids]
    (entry,) = written(old, new)["changes"]
    assert entry["rows"] == [f"cat-a:{i}" for i in ids]


def test_a_group_no_few_patterns_describe_is_written_as_its_ids() -> None:
    # Seven diagonal ids need seven patterns, more than a group is given (six).
    ids = diagonal(7)
    old, new = [row(i) for i in ids], [row(i, kernel="L") for i in ids]
    (entry,) = written(old, new)["changes"]
    assert entry["rows"] == [f"cat-a:{i}" for i in sorted(ids)]
    assert entry["fields"] == {"route.kernel": ["K", "L"]}
