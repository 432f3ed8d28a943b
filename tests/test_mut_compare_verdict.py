"""Row ids of an expected-changes list and the verdict types of `routectl.review.compare`.

Pins what `split_id`, `parse_expected` and `load_expected` accept and the whole one-line
message of each refusal (exit 2 names the file, the entry's place and the id; an unknown
category offers the closest known one and lists them all), and the verdict types: which
fields make a category or a run fail (`ok`), the qualified ids, the row count, and the JSON
and text forms of a missing stated entry that reports print. tests/test_compare.py checks
these messages by fragments only; a refactor that dropped the place, the known list or the
"did you mean" would pass there.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from routectl.errors import InputError
from routectl.io.schemas import schema_violation
from routectl.review.compare import (
    CategoryVerdict,
    CheckOutcome,
    Comparison,
    ExpectedEntry,
    FieldChange,
    MissingItem,
    load_expected,
    parse_expected,
    split_id,
)

CATEGORIES = ("sm70-awq", "sm70-fp8")
ROW = "qwen/float16/tp2/none/c1/q8192"


# --- row ids -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        (f"sm70-awq:{ROW}", ("sm70-awq", ROW)),
        ("sm70-fp8:edge:tiny", ("sm70-fp8", "edge:tiny")),
        (ROW, (None, ROW)),
        ("edge:tiny", (None, "edge:tiny")),  # `edge` is no category
    ],
)
def test_split_id_of_qualified_and_bare_ids(text: str, expected: tuple[str | None, str]) -> None:
    assert split_id(text, CATEGORIES) == expected


def refusal(text: str, categories: tuple[str, ...] = CATEGORIES) -> str:
    with pytest.raises(InputError) as caught:
        split_id(text, categories)
    return str(caught.value)


def test_a_known_category_with_a_malformed_id_names_both() -> None:
    assert refusal("sm70-awq:qwen/x") == "malformed row id 'qwen/x' in 'sm70-awq:qwen/x'"


def test_an_unknown_category_offers_the_closest_and_lists_the_known_ones() -> None:
    assert refusal(f"sm70-awx:{ROW}") == (
        f"unknown category 'sm70-awx' in 'sm70-awx:{ROW}'; did you mean sm70-awq? "
        "(known: sm70-awq, sm70-fp8)"
    )
    # Nothing close: no suggestion; the known list is sorted whatever the given order.
    assert refusal("zzz:edge:x", ("b-cat", "a-cat")) == (
        "unknown category 'zzz' in 'zzz:edge:x' (known: a-cat, b-cat)"
    )


def test_a_malformed_id_explains_the_grammar_and_the_known_categories() -> None:
    grammar = (
        "(a row id is model/kv/tpN/spec/cN/qN or edge:name, optionally qualified by a category: "
    )
    assert refusal("qwen/x") == f"malformed row id 'qwen/x' {grammar}sm70-awq, sm70-fp8)"
    assert refusal("qwen/x", ()) == f"malformed row id 'qwen/x' {grammar}none)"
    # A prefix that is no category before a malformed rest: the whole text is the id.
    assert refusal("zzz:qwen") == f"malformed row id 'zzz:qwen' {grammar}sm70-awq, sm70-fp8)"
    # `edge:` with a malformed name is a malformed id, never an unknown category `edge`.
    assert refusal("edge:Tiny") == f"malformed row id 'edge:Tiny' {grammar}sm70-awq, sm70-fp8)"
    # Nor when the rest is a well-formed id: `edge` is never read as a category.
    assert refusal("edge:edge:tiny") == (
        f"malformed row id 'edge:edge:tiny' {grammar}sm70-awq, sm70-fp8)"
    )
    # An id ends at its last character: a trailing newline is not one.
    assert refusal(ROW + "\n").startswith(f"malformed row id {ROW + chr(10)!r} ")


# --- expected-changes lists ----------------------------------------------------------------


def parse_refusal(data: object) -> str:
    with pytest.raises(InputError) as caught:
        parse_expected(data, CATEGORIES, source="exp.json")
    return str(caught.value)


def test_parse_expected_keeps_each_entry_as_written() -> None:
    entries = parse_expected(
        [f"sm70-fp8:{ROW}", {"id": "edge:tiny", "reason": "why"}, ROW],
        CATEGORIES,
        source="exp.json",
    )
    assert entries == (
        ExpectedEntry(f"sm70-fp8:{ROW}", "sm70-fp8", ROW, None),
        ExpectedEntry("edge:tiny", None, "edge:tiny", "why"),
        # The bare id and the qualified one are two entries (resolution attributes them).
        ExpectedEntry(ROW, None, ROW, None),
    )
    assert parse_expected([], CATEGORIES, source="exp.json") == ()


def test_a_bad_id_is_named_by_its_place_in_the_list() -> None:
    assert parse_refusal(["edge:tiny", {"id": "qwen/x", "reason": "r"}]) == (
        "exp.json: [1]: malformed row id 'qwen/x' (a row id is model/kv/tpN/spec/cN/qN or "
        "edge:name, optionally qualified by a category: sm70-awq, sm70-fp8)"
    )
    assert parse_refusal([ROW, f"sm70-awx:{ROW}"]).startswith(
        "exp.json: [1]: unknown category 'sm70-awx'"
    )


def test_an_id_listed_twice_is_refused() -> None:
    assert parse_refusal([f"sm70-awq:{ROW}", {"id": f"sm70-awq:{ROW}", "reason": "r"}]) == (
        f"exp.json: 'sm70-awq:{ROW}' is listed twice"
    )
    assert parse_refusal(["edge:tiny", "edge:tiny"]) == "exp.json: 'edge:tiny' is listed twice"


@pytest.mark.parametrize(
    "data",
    [{"ids": []}, [{"id": "edge:x"}], [{"id": "edge:x", "reason": "r", "more": 1}], [3]],
)
def test_a_schema_violation_is_the_files_problem(data: object) -> None:
    # The schema's own phrasing, after the file's name: one line, exit 2.
    assert parse_refusal(data) == f"exp.json: {schema_violation('expected-changes', data)}"


def test_load_expected_reads_the_file_and_names_it(tmp_path: Path) -> None:
    path = tmp_path / "expected.json"
    path.write_text(json.dumps([f"sm70-awq:{ROW}"]))
    assert load_expected(path, CATEGORIES) == (
        ExpectedEntry(f"sm70-awq:{ROW}", "sm70-awq", ROW, None),
    )
    path.write_text(json.dumps(["edge:tiny", "edge:tiny"]))
    with pytest.raises(InputError, match=re.escape(f"{path}: 'edge:tiny' is listed twice")):
        load_expected(path, CATEGORIES)
    path.write_text("[")
    with pytest.raises(InputError) as caught:
        load_expected(path, CATEGORIES)
    # One line saying what the file is for, which file, and why it is unreadable.
    assert str(caught.value).startswith(f"expected-changes file {path} is not valid JSON: ")


# --- verdict types -------------------------------------------------------------------------


def test_a_missing_item_as_json_and_as_text() -> None:
    field = MissingItem(2, "sm70-awq:qwen/**", "route.kernel", "no matched row changed it")
    assert field.to_json() == {
        "entry": 2,
        "rows": "sm70-awq:qwen/**",
        "field": "route.kernel",
        "why": "no matched row changed it",
    }
    assert field.text() == (
        "field route.kernel of entry [2] (rows sm70-awq:qwen/**): no matched row changed it"
    )
    whole = MissingItem(0, "edge:x", None, "matches no row")
    assert whole.to_json()["field"] is None
    assert whole.text() == "entry [0] (rows edge:x): matches no row"


SAME = Comparison((), (), {})


@pytest.mark.parametrize(
    "verdict,ok",
    [
        (CategoryVerdict("sm70-awq", 3, SAME), True),
        (CategoryVerdict("sm70-awq", 3, SAME, unexpected=(ROW,)), False),
        (CategoryVerdict("sm70-awq", 3, SAME, missing=(ROW,)), False),
        (CategoryVerdict("sm70-awq", 3, SAME, broken=("invariance",)), False),
        # Reasons, groups and the fields of an expected row decide nothing by themselves.
        (
            CategoryVerdict(
                "sm70-awq",
                3,
                SAME,
                reasons={ROW: ("why",)},
                groups=("g",),
                unexpected_fields={ROW: (FieldChange("route.k", "changed", 1, 2),)},
            ),
            True,
        ),
    ],
)
def test_a_category_fails_on_unexpected_missing_or_broken(
    verdict: CategoryVerdict, ok: bool
) -> None:
    assert verdict.ok is ok


def test_a_category_verdict_qualifies_its_ids() -> None:
    verdict = CategoryVerdict("sm70-fp8", 2, SAME, unexpected=(ROW, "edge:x"))
    assert verdict.q(ROW) == f"sm70-fp8:{ROW}"
    assert verdict.unexpected_set == frozenset({ROW, "edge:x"})


def test_a_run_fails_on_any_failing_category_stale_unattributed_or_missing_stated() -> None:
    good = CategoryVerdict("sm70-awq", 3, SAME)
    bad = CategoryVerdict("sm70-fp8", 4, SAME, missing=(ROW,))
    assert CheckOutcome({"sm70-awq": good}).ok
    assert CheckOutcome({}).ok
    assert not CheckOutcome({"sm70-awq": good, "sm70-fp8": bad}).ok
    assert not CheckOutcome({"sm70-awq": good}, stale=("old-cat",)).ok
    assert not CheckOutcome({"sm70-awq": good}, unattributed=("edge:x",)).ok
    missing = MissingItem(0, "edge:x", None, "matches no row")
    assert not CheckOutcome({"sm70-awq": good}, missing_stated=(missing,)).ok
    # An incomplete or applied run is judged the same way.
    assert CheckOutcome({"sm70-awq": good}, complete=False, applied=True).ok


def test_a_runs_rows_are_the_fresh_rows_of_its_categories() -> None:
    outcome = CheckOutcome({"a": CategoryVerdict("a", 3, SAME), "b": CategoryVerdict("b", 4, SAME)})
    assert outcome.rows == 7
    assert CheckOutcome({}).rows == 0
