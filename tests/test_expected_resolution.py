"""How stated entries reach their categories (`resolve_stated`, docs/reviewing-changes.md):
a qualified pattern to its own, a bare one to the one category holding a matching row, to
the single judged category when none does, else it matches no row; an id entry keeps its row
even when no category has it, and one row is named by one id entry at most. Each branch with
two judged categories and with one, both sides of the quoted-pattern length."""

from __future__ import annotations

import pytest

from routectl.errors import InputError
from routectl.io.jsonread import QUOTE_CHARS
from routectl.review.compare import MissingItem
from routectl.review.expected import StatedResolution, parse_document, resolve_stated

CATS = ("cat-a", "cat-b")
A1 = "m/float16/tp2/none/c1/q4096"
A2 = "m/float16/tp4/none/c1/q4096"
B1 = "m/float16/tp8/none/c1/q4096"
# cat-a holds A1 and A2; cat-b holds A2 too (one id in two categories) and B1.
IDS = {"cat-a": {A1, A2}, "cat-b": {A2, B1}}


def resolve(*entries: object, judged: tuple[str, ...] = CATS) -> StatedResolution:
    document = {"schema_version": 4, "changes": list(entries)}
    parsed = parse_document(document, CATS, source="f.json")
    return resolve_stated(parsed.entries, list(judged), lambda c: IDS.get(c, set()), list(CATS))


def rows_of(resolution: StatedResolution) -> dict[str, list[tuple[int, list[str]]]]:
    return {
        name: [(m.entry.index, sorted(m.rows)) for m in matches]
        for name, matches in resolution.by_category.items()
    }


def test_bare_patterns_go_to_the_category_holding_their_rows() -> None:
    found = resolve(
        {"rows": "m/float16/tp8/none/c1/*", "reason": "b"},
        {"rows": "cat-a:m/*/tp4/none/c1/*", "reason": "a"},
        {"rows": A1, "reason": "a1"},
    )
    assert rows_of(found) == {"cat-a": [(1, [A2]), (2, [A1])], "cat-b": [(0, [B1])]}
    assert [e.index for e in found.judged] == [0, 1, 2]
    assert (found.missing, found.unattributed) == ((), ())


def test_a_bare_pattern_matching_rows_of_two_categories_is_refused() -> None:
    with pytest.raises(InputError) as caught:
        resolve({"rows": "m/float16/tp4/none/*/*", "reason": "r"})
    assert str(caught.value) == (
        "row pattern 'm/float16/tp4/none/*/*' of expected entry [0] matches rows of several "
        "categories (cat-a, cat-b): qualify it as CATEGORY:m/float16/tp4/none/*/*"
    )
    with pytest.raises(InputError) as caught:
        resolve({"id": A2, "reason": "r"})
    assert str(caught.value) == (
        f"expected id '{A2}' is a row of several categories (cat-a, cat-b): qualify it as "
        f"CATEGORY:{A2}"
    )


@pytest.mark.parametrize("extra", [QUOTE_CHARS, QUOTE_CHARS + 1])
def test_a_refused_pattern_is_quoted_up_to_its_length_limit(extra: int) -> None:
    # A pattern of A2's slots whose last one is padded with `*` to the length.
    head = "m/float16/tp4/none/c1/"
    pattern = head + "*" * (extra - len(head))
    assert len(pattern) == extra
    with pytest.raises(InputError) as caught:
        resolve({"rows": pattern, "reason": "r"})
    shown = pattern if extra <= QUOTE_CHARS else "PATTERN"
    assert str(caught.value).endswith(f": qualify it as CATEGORY:{shown}")


def test_a_bare_pattern_matching_nothing_with_two_categories_judged_matches_no_row() -> None:
    found = resolve({"rows": "q/*", "reason": "r"}, {"rows": A1, "reason": "a1"})
    assert found.missing == (MissingItem(0, "q/*", None, "matches no row"),)
    assert rows_of(found) == {"cat-a": [(1, [A1])], "cat-b": []}
    assert [e.index for e in found.judged] == [0, 1]  # judged: it fails the check


def test_with_one_category_judged_a_bare_unmatched_pattern_is_that_categorys() -> None:
    found = resolve({"rows": "q/*", "reason": "r"}, judged=("cat-b",))
    assert found.missing == (MissingItem(0, "cat-b:q/*", None, "matches no row"),)
    assert rows_of(found) == {"cat-b": [(0, [])]}
    assert [e.index for e in found.judged] == [0]


def test_an_id_of_no_category_is_unattributed_and_a_near_one_a_typo() -> None:
    far = "z/bfloat16/tp1/x/c9/q1"
    found = resolve({"id": far, "reason": "r"})
    assert found.unattributed == (far,) and found.missing == ()
    assert [e.index for e in found.judged] == [0]
    near = A1.replace("q4096", "q4097")
    with pytest.raises(InputError) as caught:
        resolve({"id": near, "reason": "r"})
    message = str(caught.value)
    assert message.startswith(f"expected-changes entry [0] names row '{near}', which no category")
    assert A1 in message
    with pytest.raises(InputError) as caught:
        resolve({"rows": near, "reason": "r"})
    assert str(caught.value).startswith(f"expected-changes entry [0] names row '{near}'")


def test_a_category_the_run_does_not_judge_is_left_alone() -> None:
    found = resolve(
        {"rows": "cat-b:m/**", "reason": "r"},
        {"rows": "cat-a:q/*", "reason": "q"},
        judged=("cat-a",),
    )
    assert rows_of(found) == {"cat-a": [(1, [])]}
    assert [e.index for e in found.judged] == [1]
    assert found.missing == (MissingItem(1, "cat-a:q/*", None, "matches no row"),)


def test_one_row_named_by_two_id_entries_is_refused() -> None:
    with pytest.raises(InputError) as caught:
        resolve({"id": f"cat-a:{A1}", "reason": "r"}, {"id": A1, "reason": "again"})
    assert str(caught.value) == f"expected id '{A1}' repeats 'cat-a:{A1}'"


def test_every_pattern_of_a_list_entry_is_resolved_past_an_unjudged_or_unmatched_one() -> None:
    # The first pattern names a category the run does not judge (or matches no row); the
    # entry's later patterns still reach their rows.
    entry = {"rows": ["cat-b:m/**", "cat-a:m/*/tp2/none/c1/*"], "reason": "r"}
    found = resolve(entry, judged=("cat-a",))
    assert rows_of(found) == {"cat-a": [(0, [A1])]}
    unmatched = {"rows": ["q/*", "m/float16/tp8/none/c1/*"], "reason": "r"}
    found = resolve(unmatched)
    assert found.missing == (MissingItem(0, "q/*", None, "matches no row"),)
    assert rows_of(found) == {"cat-a": [], "cat-b": [(0, [B1])]}
