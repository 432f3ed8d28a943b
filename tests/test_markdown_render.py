"""The Markdown summary of a check outcome, whole (`render_markdown`, the `--format markdown`
and `--summary` text), in process: the category table, the change groups (a short change as a
code span whose fence outgrows the value's backticks, a long one folded in `<details>` and
escaped as HTML), added and removed groups, and every unexpected and missing item (a long one
folded), each value escaped. The CLI tests (tests/test_review_cli.py) check the same text
through a toy project; this one is fast enough for mutation runs."""

# ruff: noqa: E501  (the expected text is a literal, one line per line of the summary)
from __future__ import annotations

from routectl.review.compare import CheckOutcome, MissingItem, compare_rows
from routectl.review.expected import judge_category, parse_document, resolve_stated
from routectl.review.groups import group_changes
from routectl.review.markdown import render_markdown

A = "m/float16/tp2/none/c1/q4096"
B = "m/float16/tp4/none/c1/q4096"
C = "edge:new"


def outcome() -> CheckOutcome:
    old = [
        {"id": A, "route": {"kernel": "Old|*K*", "note": "x"}},
        {"id": B, "route": {"kernel": "K", "note": "y"}},
        {"id": "edge:gone", "route": {"kernel": None, "error": {"code": "e<1>"}}},
    ]
    new = [
        {"id": A, "route": {"kernel": "K`2", "note": "x"}},
        {"id": B, "route": {"kernel": "K", "note": "long " * 40}},
        {"id": C, "route": {"kernel": "K"}},
    ]
    comparison = compare_rows(old, new)
    groups = group_changes(
        "cat-a", comparison, {r["id"]: r for r in new}, {r["id"]: r for r in old}
    )
    document = {
        "schema_version": 3,
        "changes": [{"rows": B, "fields": {"route.note": ["y", "other"]}, "reason": "r"}],
    }
    entries = parse_document(document, ["cat-a", "cat_b"], source="f").entries
    ids = comparison.fresh_ids | comparison.baseline_ids
    stated = resolve_stated(entries, ["cat-a"], lambda _name: ids, ["cat-a"])
    changed, _ = judge_category("cat-a", comparison, stated.by_category["cat-a"], groups)
    quiet, _ = judge_category("cat_b", compare_rows(new[:1], new[:1]), ())
    missing = MissingItem(
        0, B, "route.note", 'stated ["y", "other"] but no matched row changed it so'
    )
    return CheckOutcome({"cat-a": changed, "cat_b": quiet}, missing_stated=(missing,))


EXPECTED = (
    "## routectl check: FAILED\n"
    "\n"
    "FAILED: 4 unexpected, 1 missing (2 categories, 4 rows)\n"
    "\n"
    "| category | rows | changed | added | removed | verdict |\n"
    "|---|---|---|---|---|---|\n"
    "| cat-a | 3 | 2 | 1 | 1 | **FAILED** |\n"
    "| cat\\_b | 1 | 0 | 0 | 0 | ok |\n"
    "\n"
    "### Change groups\n"
    "\n"
    "| change | rows | pattern | verdict |\n"
    "|---|---|---|---|\n"
    '| `` route.kernel: "Old\\|*K*" -> "K`2" `` | 1 | `cat-a:m/float16/tp2/none/c1/q4096` | unexpected |\n'
    "| <details><summary><code>route.note</code> (221 characters)</summary><code>route.note: &quot;y&quot; -&gt; &quot;long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long &quot;</code></details> | 1 | `cat-a:m/float16/tp4/none/c1/q4096` | unexpected |\n"
    "| added 1 row, kernel K | 1 | `cat-a:edge:new` | unexpected |\n"
    "| removed 1 row, error e\\<1\\> | 1 | `cat-a:edge:gone` | unexpected |\n"
    "\n"
    "### Unexpected and missing\n"
    "\n"
    '- 1 row changed unexpectedly: route.kernel: "Old\\|\\*K\\*" -\\> "K\\`2": cat-a:m/float16/tp2/none/c1/q4096\n'
    "- <details><summary>1 row not stated: route.note: &quot;y&quot; -&gt; &quot;long long long long long long long long long long long long long long long long (continued)</summary>1 row not stated: route.note: &quot;y&quot; -&gt; &quot;long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long long &quot;: cat-a:m/float16/tp4/none/c1/q4096</details>\n"
    "- 1 row added unexpectedly (kernel K): cat-a:edge:new\n"
    "- 1 row removed unexpectedly (error e\\<1\\>): cat-a:edge:gone\n"
    '- expected-changes field route.note of entry \\[0\\] (rows m/float16/tp4/none/c1/q4096): stated \\["y", "other"\\] but no matched row changed it so\n'
)


def test_the_markdown_summary_whole() -> None:
    assert render_markdown(outcome()) == EXPECTED


def test_an_ok_outcome_has_no_group_or_problem_section() -> None:
    row = {"id": A, "route": {"kernel": "K"}}
    verdict, _ = judge_category("cat-a", compare_rows([row], [row]), ())
    assert render_markdown(CheckOutcome({"cat-a": verdict}), command="diff") == (
        "## routectl diff: ok\n\n"
        + "ok: 1 category, 1 row, 0 expected changes\n\n"
        + "| category | rows | changed | added | removed | verdict |\n"
        + "|---|---|---|---|---|---|\n"
        + "| cat-a | 1 | 0 | 0 | 0 | ok |\n"
    )
