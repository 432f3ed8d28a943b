"""Row-id patterns as `describe` writes them (routectl.review.patterns, docs/reviewing-changes.md):
exact (each pattern denotes ids of the set only, together all of them), numbers in numeric
order with the prefix outside the braces, a budget of MAX_PATTERNS counting the edge pattern,
and the same ids always giving the same patterns in the same order (ties go to the earlier
seed), since they are written into expected-changes files. Also the pattern-size limit at
its boundary."""

from __future__ import annotations

import pytest

from routectl.errors import InputError
from routectl.io.jsonread import shorten
from routectl.review.patterns import (
    MAX_PATTERN_CHARS,
    MAX_PATTERNS,
    check_pattern_size,
    describe,
    matching,
)


def mid(tp: int = 2, c: int = 1, q: int = 4096) -> str:
    return f"m/float16/tp{tp}/none/c{c}/q{q}"


def exact(ids: list[str], patterns: tuple[str, ...]) -> bool:
    """Whether the patterns together match exactly `ids` within a universe around them."""
    universe = {mid(t, c, q) for t in (0, 1, 2, 4, 8, 10) for c in (0, 1, 4) for q in (1, 2, 4096)}
    found = set().union(*(matching(p, universe | set(ids)) for p in patterns))
    return found == set(ids)


def test_numbers_sort_as_numbers_with_the_prefix_outside_the_braces() -> None:
    ids = [mid(tp=10), mid(tp=2), mid(tp=4)]
    assert describe(ids).patterns == ("m/float16/tp{2,4,10}/none/c1/q4096",)
    # 0 is a number like any other.
    assert describe([mid(c=0), mid(c=1)]).patterns == ("m/float16/tp2/none/c{0,1}/q4096",)


def test_ids_differing_in_two_dimensions_are_two_patterns_not_their_product() -> None:
    ids = [mid(tp=2, q=1), mid(tp=4, q=2)]
    found = describe(ids)
    assert found.patterns == (mid(tp=2, q=1), mid(tp=4, q=2))
    assert exact(ids, found.patterns)


def test_an_l_shape_is_covered_by_two_overlapping_boxes_in_a_fixed_order() -> None:
    ids = [mid(tp=2, c=1), mid(tp=2, c=4), mid(tp=4, c=1)]
    found = describe(ids)
    # The first seed's box grows along tp first; the rest along c. Ordered by first id.
    assert found.patterns == (
        "m/float16/tp{2,4}/none/c1/q4096",
        "m/float16/tp2/none/c{1,4}/q4096",
    )
    assert exact(ids, found.patterns)


def test_boxes_of_equal_gain_go_to_the_earlier_seed() -> None:
    cells = [(2, 1, 1), (2, 4, 2), (4, 1, 1), (4, 1, 2), (4, 4, 1), (8, 1, 1), (8, 1, 2), (8, 4, 1)]
    ids = [mid(t, c, q) for t, c, q in cells]
    found = describe(ids)
    assert found.patterns == (
        "m/float16/tp{2,4,8}/none/c1/q1",
        "m/float16/tp2/none/c4/q2",
        "m/float16/tp{4,8}/none/c1/q{1,2}",
        "m/float16/tp{4,8}/none/c{1,4}/q1",
    )
    assert exact(ids, found.patterns)
    assert describe(list(reversed(ids))) == found


def diagonal(count: int) -> list[str]:
    """Ids no box of two covers: one pattern each."""
    return [mid(tp=k, c=k) for k in range(1, count + 1)]


def test_the_edge_pattern_counts_in_the_budget() -> None:
    edges = ["edge:slow", "edge:fast"]
    fits = describe([*diagonal(MAX_PATTERNS - 1), *edges])
    assert fits.patterns is not None and len(fits.patterns) == MAX_PATTERNS
    assert fits.patterns[-1] == "edge:{fast,slow}"
    assert describe([*diagonal(MAX_PATTERNS), *edges]).patterns is None
    assert describe(diagonal(MAX_PATTERNS)).patterns is not None


def test_a_budget_is_never_exceeded_even_when_one_box_covers_the_matrix() -> None:
    # One box covers these ids; with the edge pattern that is two patterns, so a budget of
    # one has no room for them, and a budget of none has no room for the box alone.
    square = [mid(tp, c) for tp in (2, 4) for c in (1, 4)]
    edges = ["edge:slow"]
    for budget, ids in ((0, square), (1, [*square, *edges]), (0, edges)):
        assert describe(ids, max_patterns=budget).patterns is None, (budget, ids)
    assert describe(square, max_patterns=1).patterns == ("m/float16/tp{2,4}/none/c{1,4}/q4096",)
    both = describe([*square, *edges], max_patterns=2).patterns
    assert both == ("m/float16/tp{2,4}/none/c{1,4}/q4096", "edge:slow")


def test_a_description_keeps_its_ids_sorted_patterns_or_not() -> None:
    ids = [mid(tp=4), mid(tp=2), "edge:x"]
    assert describe(ids).ids == tuple(sorted(ids))
    odd = ["m/x", "m/a"]  # not matrix ids: nothing to factor
    assert describe(odd).ids == ("m/a", "m/x") and describe(odd).patterns is None


def test_a_pattern_at_the_limit_is_read_and_one_past_it_refused_quoting_it() -> None:
    check_pattern_size("*" * MAX_PATTERN_CHARS)
    over = "m/" + "x" * (MAX_PATTERN_CHARS - 1)
    with pytest.raises(InputError) as caught:
        check_pattern_size(over)
    assert str(caught.value) == (
        f"row pattern too large: {len(over):,} characters (the limit is "
        f"{MAX_PATTERN_CHARS:,}): {shorten(over)}"
    )
