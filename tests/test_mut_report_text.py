"""A check outcome's text, GitHub and JSON renderings, whole, in process
(`routectl.review.report`): nested change clusters in terminal text (what each child adds,
its verdict only where it is not its parent's, a one-line child, a child's rows by id, by
pattern, cut by `max_rows`, its fields cut by `max_fields`), every kind of problem line of a
failing outcome and the GitHub annotations on both sides of their cap, the renderer table's
options reaching each format, and a report that breaks its schema refused. The CLI tests
check the same through a toy project and match fragments; these are fast enough for the
mutation runs (issue 28)."""

# ruff: noqa: E501  (the expected text is a literal, one line per line of the output)
from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from routectl.review.compare import (
    CategoryVerdict,
    CheckOutcome,
    FieldChange,
    MissingItem,
    compare_rows,
    parse_expected,
)
from routectl.review.expected import (
    ExpectedChanges,
    judge_category,
    parse_document,
    resolve_stated,
)
from routectl.review.groups import group_changes
from routectl.review.invariances import InvarianceBreak
from routectl.review.markdown import render_markdown
from routectl.review.report import (
    RenderOptions,
    build_report,
    problems,
    render,
    render_github,
    render_json,
    render_text,
)
from routectl.review.snapshot import SnapshotError
from routectl.rows import Invariance

Row = dict[str, Any]


def rid(tp: int = 2, c: int = 1, q: int = 4096) -> str:
    return f"m/float16/tp{tp}/none/c{c}/q{q}"


def route_row(row_id: str, kernel: str = "K") -> Row:
    return {"id": row_id, "route": {"kernel": kernel, "flags": {"gated": False}, "status": None}}


def verdict_of(
    name: str, old: list[Row], new: list[Row], document: dict[str, Any] | None = None
) -> CategoryVerdict:
    comparison = compare_rows(old, new)
    groups = group_changes(name, comparison, {r["id"]: r for r in new}, {r["id"]: r for r in old})
    if document is None:
        return judge_category(name, comparison, (), groups)[0]
    entries = parse_document(document, [name], source="f").entries
    ids = comparison.fresh_ids | comparison.baseline_ids
    stated = resolve_stated(entries, [name], lambda _name: ids, [name])
    return judge_category(name, comparison, stated.by_category[name], groups)[0]


# --- clusters in text ----------------------------------------------------------------------


def five_rows() -> tuple[list[Row], list[Row]]:
    """Four rows change their kernel; two of them also gated, one of those its status too;
    a fourth the status alone; a fifth row only gated (linked to the kernel rows through it)."""
    old = [route_row(i) for i in (rid(c=1), rid(c=4), rid(c=8), rid(tp=4), rid(q=8192))]
    new = copy.deepcopy(old)
    for r in new[:4]:
        r["route"]["kernel"] = "K2"
    for r in new[1:3]:
        r["route"]["flags"]["gated"] = True
    new[2]["route"]["status"] = "slow"
    new[3]["route"]["status"] = "fast"
    new[4]["route"]["flags"]["gated"] = True
    return old, new


def test_a_child_shows_its_verdict_only_where_it_differs_from_its_parents() -> None:
    old, new = five_rows()
    # c4 is stated whole; c8 states its kernel only (its gated and status are not stated).
    document = {
        "schema_version": 3,
        "changes": [
            {
                "rows": rid(c=4),
                "fields": {"route.kernel": ["K", "K2"], "route.flags.gated": [False, True]},
                "reason": "r1",
            },
            {"rows": rid(c=8), "fields": {"route.kernel": ["K", "K2"]}, "reason": "r1"},
        ],
    }
    outcome = CheckOutcome({"cat-a": verdict_of("cat-a", old, new, document)})
    assert render_text(outcome) == (
        "cat-a: FAILED: 5 rows, 5 changed, 0 added, 0 removed, 1 expected\n"
        "  changed 4 rows in 4 groups (1 expected, 3 unexpected)\n"
        '    route.kernel: "K" -> "K2"\n'
        "    + 1 row (unexpected)\n"
        "      row cat-a:m/float16/tp2/none/c1/q4096\n"
        "    + 2 rows in 2 groups (1 expected, 1 unexpected), also:\n"
        "      route.flags.gated: false -> true <- not stated\n"
        "      + 1 row (expected: r1)\n"
        "        row cat-a:m/float16/tp2/none/c4/q4096\n"
        '      + row cat-a:m/float16/tp2/none/c8/q4096 (unexpected): route.status: null -> "slow" <- not stated\n'
        '    + row cat-a:m/float16/tp4/none/c1/q4096 (unexpected): route.status: null -> "fast"\n'
        "  changed 1 row (unexpected)\n"
        "    route.flags.gated: false -> true\n"
        "    rows cat-a:m/float16/tp2/none/c1/q8192\n"
        "FAILED: 4 unexpected, 0 missing (1 category, 5 rows)\n"
    )


def seven_rows(*, extra: bool = False) -> tuple[list[Row], list[Row]]:
    """Gated is shared by six rows; five of them change the kernel too, among them two ids
    outside the row grammar (`extra`: those two also change the status and add a flag)."""
    old, new = five_rows()
    new[2]["route"]["status"] = None
    new[3]["route"]["flags"]["gated"] = True
    new[3]["route"]["status"] = "slow"
    old += [route_row("alpha"), route_row("beta")]
    new += [route_row("alpha", "K2"), route_row("beta", "K2")]
    for r in new[-2:]:
        r["route"]["flags"]["gated"] = True
        if extra:
            r["route"]["status"] = "x"
            r["route"]["flags"]["fast"] = True
    return old, new


SEVEN_HEAD = (
    "cat-b: FAILED: 7 rows, 7 changed, 0 added, 0 removed\n"
    "  changed 6 rows in 3 groups (unexpected)\n"
    "    route.flags.gated: false -> true\n"
    "    + 5 rows in 2 groups, also:\n"
    '      route.kernel: "K" -> "K2"\n'
    "      + 4 rows\n"
)
SEVEN_TAIL = (
    '      + row cat-b:m/float16/tp4/none/c1/q4096: route.status: null -> "slow"\n'
    "    + 1 row\n"
    "      row cat-b:m/float16/tp2/none/c1/q8192\n"
    "  changed 1 row (unexpected)\n"
    '    route.kernel: "K" -> "K2"\n'
    "    rows cat-b:m/float16/tp2/none/c1/q4096\n"
    "FAILED: 7 unexpected, 0 missing (1 category, 7 rows)\n"
)


def test_children_of_one_verdict_list_their_rows_all_or_cut() -> None:
    outcome = CheckOutcome({"cat-b": verdict_of("cat-b", *seven_rows())})
    assert render_text(outcome) == (
        SEVEN_HEAD + "        row cat-b:alpha\n"
        "        row cat-b:beta\n"
        "        row cat-b:m/float16/tp2/none/c4/q4096\n"
        "        row cat-b:m/float16/tp2/none/c8/q4096\n" + SEVEN_TAIL
    )
    assert render_text(outcome, max_rows=1, max_fields=1) == (
        SEVEN_HEAD + "        row cat-b:alpha\n        ... and 3 more\n" + SEVEN_TAIL
    )


def test_a_child_group_cuts_its_fields_and_names_rows_by_pattern() -> None:
    outcome = CheckOutcome({"cat-b": verdict_of("cat-b", *seven_rows(extra=True))})
    assert render_text(outcome, max_fields=1, max_rows=0) == (
        "cat-b: FAILED: 7 rows, 7 changed, 0 added, 0 removed\n"
        "  changed 6 rows in 4 groups (unexpected)\n"
        "    route.flags.gated: false -> true\n"
        "    + 5 rows in 3 groups, also:\n"
        '      route.kernel: "K" -> "K2"\n'
        "      + 2 rows\n"
        "        route.flags.fast: added true\n"
        "        ... 1 more field change\n"
        "        row cat-b:alpha\n"
        "        row cat-b:beta\n"
        "      + 2 rows\n"
        "        rows cat-b:m/float16/tp2/none/c{4,8}/q4096\n" + SEVEN_TAIL
    )


# --- every problem, and the GitHub annotations ---------------------------------------------


def kernel_row(row_id: str, kernel: str = "K") -> Row:
    return {"id": row_id, "route": {"kernel": kernel}}


def failing_outcome() -> CheckOutcome:
    """One of each problem: a stale category, a broken invariance, a group partly expected, an
    added row, a stated row that did not change and one that names no row, groups of ids no
    pattern describes (seven rows) and one row, a listed id no category has and a stated field
    that matched nothing."""
    names = ["cat-a", "cat-b", "cat-c"]
    old = [kernel_row(f"edge:{n}") for n in ("alpha", "beta", "gamma", "delta")]
    new = [kernel_row(f"edge:{n}", "K2") for n in ("alpha", "beta", "gamma")]
    new += [kernel_row("edge:delta"), kernel_row("edge:new")]
    comparison = compare_rows(old, new)
    groups = group_changes(
        "cat-a", comparison, {r["id"]: r for r in new}, {r["id"]: r for r in old}
    )
    listed = ["cat-a:edge:beta", "cat-a:edge:delta", "cat-a:edge:zzqq_far"]
    entries = ExpectedChanges.of_ids(parse_expected(listed, names, source="f.json")).entries
    ids = comparison.fresh_ids | comparison.baseline_ids
    stated = resolve_stated(entries, ["cat-a"], lambda _name: ids, ["cat-a"])
    verdict, _ = judge_category("cat-a", comparison, stated.by_category["cat-a"], groups)
    a, b = rid(tp=2), rid(tp=4)
    broken = InvarianceBreak(
        "cat-a",
        Invariance("tp-free", ("tp",), ("route.kernel",), "why"),
        (a, b),
        FieldChange("route.kernel", "changed", "K", "x" * 130),
        1,
        frozenset({a, b}),
    )
    verdict = dataclasses.replace(verdict, broken=(broken,))
    scattered = [f"model{i}/float16/tp{i}/none/c{i}/q{i}" for i in range(7)]
    many = verdict_of(
        "cat-b", [kernel_row(i) for i in scattered], [kernel_row(i, "L") for i in scattered]
    )
    one = verdict_of("cat-c", [kernel_row(rid())], [kernel_row(rid(), "L")])
    return CheckOutcome(
        {"cat-a": verdict, "cat-b": many, "cat-c": one},
        stale=("gone",),
        unattributed=("edge:lost",),
        missing_stated=(MissingItem(0, "edge:beta", "route.kernel", "stated but no"),),
    )


PROBLEMS = [
    "stale snapshot category gone: it is no longer listed",
    "invariance tp-free broken (tp never changes route.kernel): cat-a:m/float16/tp2/none/c1/q4096 and cat-a:m/float16/tp4/none/c1/q4096 differ: "
    f'route.kernel: "K" -> "{"x" * 130}"',
    '2 rows (of 3) changed unexpectedly: route.kernel: "K" -> "K2": cat-a:edge:{alpha,beta,gamma}',
    "1 row added unexpectedly (kernel K): cat-a:edge:new",
    "cat-a:edge:delta is listed as an expected change but did not change",
    "cat-a:edge:zzqq_far is listed as an expected change but names no row (unknown id)",
    '7 rows changed unexpectedly: route.kernel: "K" -> "L": cat-b:model0/float16/tp0/none/c0/q0 and 6 more',
    '1 row changed unexpectedly: route.kernel: "K" -> "L": cat-c:m/float16/tp2/none/c1/q4096',
    "edge:lost is listed as an expected change but names no row (unknown id)",
    "expected-changes field route.kernel of entry [0] (rows edge:beta): stated but no",
]
SUMMARY = "FAILED: 11 unexpected, 4 missing, 1 broken invariance, 1 stale category (3 categories, 13 rows)"


def test_every_problem_is_one_whole_line_values_never_cut() -> None:
    assert problems(failing_outcome()) == PROBLEMS


@pytest.mark.parametrize("cap", [10, 11, 9, 1])
def test_github_annotations_up_to_the_cap_then_a_notice_counting_the_rest(cap: int) -> None:
    lines = render_github(failing_outcome(), command="diff", max_errors=cap).splitlines()
    shown = PROBLEMS[:cap]
    assert lines[:-1] == [f"::error title=routectl diff::{p}" for p in shown]
    rest = len(PROBLEMS) - len(shown)
    more = f"; {rest} more not shown (see the JSON report)" if rest else ""
    assert lines[-1] == f"::notice title=routectl diff::{SUMMARY}{more}"


def test_the_renderer_table_hands_each_format_its_options() -> None:
    outcome = failing_outcome()
    diff = RenderOptions(command="diff", max_rows=1, max_fields=1, quiet=True)
    assert render(outcome, "github", diff) == render_github(outcome, command="diff")
    assert render(outcome, "github") == render_github(outcome, command="check")
    assert render(outcome, "markdown", diff) == render_markdown(outcome, command="diff")
    assert render(outcome, "markdown", diff).startswith("## routectl diff: FAILED\n")
    assert render(outcome, "text", diff) == render_text(outcome, quiet=True, command="diff")
    assert render(outcome, "json", diff) == render_json(build_report(outcome))
    with pytest.raises(
        ValueError, match="^unknown format 'yaml' \\(known: text, json, github, markdown\\)$"
    ):
        render(outcome, "yaml")


def test_a_report_that_breaks_its_schema_is_refused_not_written() -> None:
    report = build_report(failing_outcome())
    assert render_json(report).endswith("\n")
    report["ok"] = "no"
    with pytest.raises(SnapshotError) as caught:
        render_json(report)
    assert str(caught.value).startswith("the report violates its schema: ")
    assert "'no' is not of type 'boolean'" in str(caught.value)


def test_full_shows_a_lone_groups_long_value_whole() -> None:
    old, new = [kernel_row(rid())], [kernel_row(rid(), "x" * 130)]
    outcome = CheckOutcome({"cat-c": verdict_of("cat-c", old, new)})
    cut = f'    route.kernel: "K" -> "{"x" * 116}...'  # 117 characters, then ...
    whole = f'    route.kernel: "K" -> "{"x" * 130}"'
    assert render_text(outcome).splitlines()[2] == cut
    assert render_text(outcome, full=True).splitlines()[2] == whole
    assert render(outcome, "text", RenderOptions(full=True)).splitlines()[2] == whole


# --- whole text of every section, plain and in colour ---------------------------------------


def red(text: str) -> str:
    return f"\x1b[31m\x1b[1m{text}\x1b[0m"


def green(text: str) -> str:
    return f"\x1b[32m{text}\x1b[0m"


def bold(text: str) -> str:
    return f"\x1b[1m{text}\x1b[0m"


BROKEN_VALUE = f'"{"x" * 116}...'
FAILING_TEXT = [
    ("cat-a", "FAILED", ": 5 rows, 3 changed, 1 added, 0 removed, 1 expected, 1 broken invariance"),
    (
        "  ",
        "broken",
        " invariance tp-free (tp never changes route.kernel): cat-a:m/float16/tp2/none/c1/q4096 and cat-a:m/float16/tp4/none/c1/q4096 differ",
    ),
    ("    ", None, f'route.kernel: "K" -> {BROKEN_VALUE}'),
    ("  changed 3 rows (", "1 expected, 2 unexpected", ")"),
    ("    ", None, 'route.kernel: "K" -> "K2"'),
    ("    ", None, "rows cat-a:edge:{alpha,beta,gamma}"),
    ("  added 1 row, kernel K (", "unexpected", ")"),
    ("    ", None, "rows cat-a:edge:new"),
    ("  ", "missing", " 1 row (expected to move, did not change)"),
    ("    ", None, "rows cat-a:edge:delta"),
    ("  ", "missing", " cat-a:edge:zzqq_far (unknown id)"),
    ("cat-b", "FAILED", ": 7 rows, 7 changed, 0 added, 0 removed"),
    ("  changed 7 rows (", "unexpected", ")"),
    ("    ", None, 'route.kernel: "K" -> "L"'),
    *[("    ", None, f"row cat-b:model{i}/float16/tp{i}/none/c{i}/q{i}") for i in range(7)],
    ("cat-c", "FAILED", ": 1 row, 1 changed, 0 added, 0 removed"),
    ("  changed 1 row (", "unexpected", ")"),
    ("    ", None, 'route.kernel: "K" -> "L"'),
    ("    ", None, "rows cat-c:m/float16/tp2/none/c1/q4096"),
    ("", "stale", " gone: a baseline snapshot of a category that is no longer listed"),
    ("", "missing", " edge:lost (unknown id: no category has this row)"),
    ("", "missing", " field route.kernel of entry [0] (rows edge:beta): stated but no"),
    ("", SUMMARY, ""),
]


def failing_text(color: bool) -> str:
    lines = []
    for before, alarm, after in FAILING_TEXT:
        if alarm is None:
            lines.append(before + after)
        elif before.startswith("cat-"):  # a category line: its name bold, FAILED alarmed
            lines.append(
                f"{bold(before) if color else before}: {red(alarm) if color else alarm}{after}"
            )
        else:
            lines.append(before + (red(alarm) if color else alarm) + after)
    return "\n".join(lines) + "\n"


def test_a_failing_outcome_text_whole_plain_and_in_colour() -> None:
    outcome = failing_outcome()
    assert render_text(outcome) == failing_text(False)
    assert render_text(outcome, color=True) == failing_text(True)


def test_quiet_text_keeps_the_category_lines_and_the_stale_file_note_per_command() -> None:
    applied = dataclasses.replace(failing_outcome(), applied=True)
    heads = [
        "cat-a: FAILED: 5 rows, 3 changed, 1 added, 0 removed, 1 expected, 1 broken invariance",
        "cat-b: FAILED: 7 rows, 7 changed, 0 added, 0 removed",
        "cat-c: FAILED: 1 row, 1 changed, 0 added, 0 removed",
    ]
    assert render_text(applied, quiet=True, command="diff").splitlines() == [
        *heads,
        "stale expected changes: every missing change is already in the baseline: remove the "
        "file or its entries (--write-expected FILE --prune drops them)",
        SUMMARY,
    ]
    check = render_text(applied, quiet=True).splitlines()
    assert check[3].startswith(
        "stale expected changes: every missing change is already in the retained snapshots (the file was applied"
    )
    cut = render_text(applied, max_rows=2).splitlines()
    assert cut[14:18] == [
        "    row cat-b:model0/float16/tp0/none/c0/q0",
        "    row cat-b:model1/float16/tp1/none/c1/q1",
        "    ... and 5 more",
        "cat-c: FAILED: 1 row, 1 changed, 0 added, 0 removed",
    ]


def keyed_row(row_id: str, order: list[str], extra: int | None = None) -> Row:
    route: dict[str, Any] = {"kernel": "K", "order": order}
    if extra is not None:
        route["extra"] = extra
    return {"id": row_id, "route": route}


def mixed_outcome() -> CheckOutcome:
    """Expected groups with their reasons, breaking one or two invariances; a category
    without a baseline file; one without changes."""
    old = [
        keyed_row(rid(tp=2), ["a", "b"]),
        keyed_row(rid(tp=4), ["a"], 1),
        keyed_row(rid(c=8), ["a"]),
    ]
    new = [
        keyed_row(rid(tp=2), ["b", "a"]),
        keyed_row(rid(tp=4), ["a"]),
        keyed_row(rid(c=8), ["a"], 2),
    ]
    comparison = compare_rows(old, new)
    groups = group_changes(
        "cat-a", comparison, {r["id"]: r for r in new}, {r["id"]: r for r in old}
    )
    groups = tuple(
        dataclasses.replace(g, breaks=("one",) if n == 0 else ("one", "two"))
        for n, g in enumerate(groups)
    )
    document = {
        "schema_version": 3,
        "changes": [
            {"rows": "m/float16/tp{2,4}/none/c1/q4096", "reason": "r1"},
            {"rows": rid(c=8), "reason": "r2"},
        ],
    }
    entries = parse_document(document, ["cat-a"], source="f").entries
    ids = comparison.fresh_ids | comparison.baseline_ids
    stated = resolve_stated(entries, ["cat-a"], lambda _name: ids, ["cat-a"])
    expected = judge_category("cat-a", comparison, stated.by_category["cat-a"], groups)[0]
    fresh = [kernel_row(rid())]
    first = compare_rows(None, fresh)
    unborn = judge_category(
        "cat-n", first, (), group_changes("cat-n", first, {rid(): fresh[0]}, {})
    )[0]
    quiet = judge_category("cat-q", compare_rows(fresh, fresh), ())[0]
    return CheckOutcome({"cat-a": expected, "cat-n": unborn, "cat-q": quiet})


def test_expected_groups_name_their_reason_and_the_invariances_they_break() -> None:
    text = render_text(mixed_outcome(), color=True)
    assert text == (
        f"{bold('cat-a')}: {green('ok')}: 3 rows, 3 changed, 0 added, 0 removed, 3 expected\n"
        f"  changed 1 row, breaks invariance one ({green('expected: r1')})\n"
        '    route.order[0]: "a" -> "b"\n'
        '    route.order[1]: "b" -> "a"\n'
        "    rows cat-a:m/float16/tp2/none/c1/q4096\n"
        f"  changed 1 row, breaks invariances one, two ({green('expected: r2')})\n"
        "    route.extra: added 2\n"
        "    rows cat-a:m/float16/tp2/none/c8/q4096\n"
        f"  changed 1 row, breaks invariances one, two ({green('expected: r1')})\n"
        "    route.extra: removed 1\n"
        "    rows cat-a:m/float16/tp4/none/c1/q4096\n"
        f"{bold('cat-n')}: {red('FAILED')}: 1 row, 0 changed, 1 added, 0 removed\n"
        "  no baseline snapshot of this category: every row is added\n"
        f"  added 1 row, kernel K ({red('unexpected')})\n"
        "    rows cat-n:m/float16/tp2/none/c1/q4096\n"
        f"{bold('cat-q')}: {green('ok')}: 1 row, no changes\n"
        f"{red('FAILED: 1 unexpected, 0 missing (3 categories, 5 rows)')}\n"
    )
    passing = CheckOutcome({"cat-a": mixed_outcome().categories["cat-a"]})
    assert render_text(passing, color=True).splitlines()[-1] == green(
        "ok: 1 category, 3 rows, 3 expected changes"
    )


def test_values_are_json_text_sorted_unescaped_and_cut_after_120_characters() -> None:
    from routectl.review.report import show_change, show_value

    assert show_value({"b": 1, "a": "é≤"}) == '{"a": "é≤", "b": 1}'
    exact = "y" * 118  # 120 characters with its quotes: whole
    assert show_value(exact) == f'"{exact}"'
    longer = "y" * 119  # 121: cut to 117 and "..."
    assert show_value(longer) == f'"{"y" * 116}...'
    assert show_value(longer, full=True) == f'"{longer}"'
    assert show_change(FieldChange("", "changed", 1, 2)) == "(row): 1 -> 2"
    assert show_change(FieldChange("route.a", "added", None, [1])) == "route.a: added [1]"
    assert show_change(FieldChange("route.a", "removed", {"k": 1}, None)) == (
        'route.a: removed {"k": 1}'
    )
    assert show_change(FieldChange("route.a", "changed", longer, None), full=True) == (
        f'route.a: "{longer}" -> null'
    )


def split_rows(ms: tuple[int, ...], places: tuple[int, ...]) -> tuple[list[Row], list[Row]]:
    """Two rows whose plans' split_k moves from 4 to 8 at `places[i]` of their dispatches."""
    old = [
        {"id": rid(tp=tp), "route": {"dispatch": [{"plan": {"m": m, "split_k": 4}} for m in ms]}}
        for tp in (2, 4)
    ]
    new = copy.deepcopy(old)
    for r, n in zip(new, places, strict=True):
        for d in r["route"]["dispatch"][:n]:
            d["plan"]["split_k"] = 8
    return old, new


@pytest.mark.parametrize(
    ("places", "shown"),
    [((2, 2), " (2 places per row)"), ((1, 2), " (1-2 places per row)"), ((1, 1), "")],
)
def test_a_field_says_how_many_places_per_row_it_moved(places: tuple[int, int], shown: str) -> None:
    old, new = split_rows((1, 8), places)
    text = render_text(CheckOutcome({"cat": verdict_of("cat", old, new)})).splitlines()
    path = (
        "route.dispatch[*].plan.split_k" if places != (1, 1) else "route.dispatch[0].plan.split_k"
    )
    assert text[2] == f"    {path}: 4 -> 8{shown}"


def test_an_expected_group_names_its_reason_only_when_it_has_exactly_one() -> None:
    old = [kernel_row(rid(tp=tp)) for tp in (2, 4)]
    new = [kernel_row(rid(tp=tp), "K2") for tp in (2, 4)]

    def heading(*changes: dict[str, Any]) -> str:
        document = {"schema_version": 3, "changes": list(changes)}
        outcome = CheckOutcome({"cat": verdict_of("cat", old, new, document)})
        return render_text(outcome).splitlines()[1]

    both = "m/float16/tp{2,4}/none/c1/q4096"
    assert heading({"rows": both, "reason": "r"}) == "  changed 2 rows (expected: r)"
    assert heading({"rows": rid(tp=2), "reason": "r"}, {"rows": rid(tp=4), "reason": "s"}) == (
        "  changed 2 rows (expected)"
    )
    # Listed by id (no reason): expected, no reason to name.
    comparison = compare_rows(old, new)
    groups = group_changes("cat", comparison, {r["id"]: r for r in new}, {r["id"]: r for r in old})
    listed = [f"cat:{rid(tp=2)}", f"cat:{rid(tp=4)}"]
    entries = ExpectedChanges.of_ids(parse_expected(listed, ["cat"], source="f.json")).entries
    ids = comparison.fresh_ids | comparison.baseline_ids
    stated = resolve_stated(entries, ["cat"], lambda _name: ids, ["cat"])
    verdict, _ = judge_category("cat", comparison, stated.by_category["cat"], groups)
    assert render_text(CheckOutcome({"cat": verdict})).splitlines()[1] == (
        "  changed 2 rows (expected)"
    )


def test_the_json_report_of_a_category_qualifies_every_id() -> None:
    old = [kernel_row(rid(tp=2)), kernel_row(rid(tp=4)), kernel_row("edge:gone")]
    new = [kernel_row(rid(tp=2), "K2"), kernel_row(rid(tp=4)), kernel_row("edge:new")]
    report = build_report(CheckOutcome({"cat": verdict_of("cat", old, new)}))
    category = report["categories"]["cat"]
    changed = f"cat:{rid(tp=2)}"
    assert {k: category[k] for k in ("rows", "changed", "added", "removed", "unexpected")} == {
        "rows": 3,
        "changed": [changed],
        "added": ["cat:edge:new"],
        "removed": ["cat:edge:gone"],
        "unexpected": sorted([changed, "cat:edge:new", "cat:edge:gone"]),
    }
    assert category["diffs"] == {
        changed: [{"path": "route.kernel", "kind": "changed", "old": "K", "new": "K2"}]
    }
    assert category["missing"] == [] and category["unstated"] == {}


def test_full_shows_every_kind_of_change_whole() -> None:
    from routectl.review.compare import REORDERED
    from routectl.review.report import show_change

    long = ["z" * 130]
    whole = f'["{"z" * 130}"]'
    assert show_change(FieldChange("route.a", "added", None, long), True) == (
        f"route.a: added {whole}"
    )
    assert show_change(FieldChange("route.a", "removed", long, None), True) == (
        f"route.a: removed {whole}"
    )
    assert show_change(FieldChange("route.a", REORDERED, long, [1]), True) == (
        f"order of route.a changed: {whole} -> [1]"
    )
    assert show_change(FieldChange("route.a", REORDERED, [1], long), True) == (
        f"order of route.a changed: [1] -> {whole}"
    )
    assert show_change(FieldChange("route.a", REORDERED, [1], long)) == "order of route.a changed"


def test_the_json_report_lists_unstated_changes_by_qualified_id() -> None:
    old, new = five_rows()
    document = {
        "schema_version": 3,
        "changes": [{"rows": rid(c=8), "fields": {"route.kernel": ["K", "K2"]}, "reason": "r"}],
    }
    report = build_report(CheckOutcome({"cat-a": verdict_of("cat-a", old, new, document)}))
    assert report["categories"]["cat-a"]["unstated"] == {
        f"cat-a:{rid(c=8)}": [
            {"path": "route.flags.gated", "kind": "changed", "old": False, "new": True},
            {"path": "route.status", "kind": "changed", "old": None, "new": "slow"},
        ]
    }


def unstated_outcome() -> CheckOutcome:
    """Every row stated in part: long unstated values in a child group of two fields and in
    a lone group."""
    old, new = five_rows()
    new[2]["route"]["status"] = LONG
    new[2]["route"]["flags"]["extra"] = LONG
    new[4]["route"]["note"] = LONG
    document = {
        "schema_version": 3,
        "changes": [
            {"rows": rid(c=4), "fields": {"route.kernel": ["K", "K2"]}, "reason": "r1"},
            {"rows": rid(c=8), "fields": {"route.kernel": ["K", "K2"]}, "reason": "r1"},
            {"rows": rid(q=8192), "fields": {"route.flags.gated": [False, True]}, "reason": "r2"},
        ],
    }
    return CheckOutcome({"cat-a": verdict_of("cat-a", old, new, document)})


LONG = "s" * 130
UNSTATED_HEAD = [
    "  changed 4 rows in 4 groups (unexpected)",
    '    route.kernel: "K" -> "K2"',
    "    + 1 row",
    "      row cat-a:m/float16/tp2/none/c1/q4096",
    "    + 2 rows in 2 groups, also:",
]


def test_unstated_fields_are_flagged_at_every_level_cut_or_whole() -> None:
    whole = render_text(unstated_outcome(), full=True, max_fields=1).splitlines()
    assert whole[1:] == [
        *UNSTATED_HEAD,
        "      route.flags.gated: false -> true <- not stated",
        "      + 1 row",
        "        row cat-a:m/float16/tp2/none/c4/q4096",
        "      + 1 row",
        f'        route.flags.extra: added "{LONG}" <- not stated',
        "        ... 1 more field change",
        "        row cat-a:m/float16/tp2/none/c8/q4096",
        '    + row cat-a:m/float16/tp4/none/c1/q4096: route.status: null -> "fast"',
        "  changed 1 row (unexpected)",
        "    route.flags.gated: false -> true",
        "    ... 1 more field change",
        "    rows cat-a:m/float16/tp2/none/c1/q8192",
        "FAILED: 5 unexpected, 0 missing (1 category, 5 rows)",
    ]
    flag = "\x1b[31m<- not stated\x1b[0m"
    cut = f'"{"s" * 116}...'
    colour = render_text(unstated_outcome(), color=True).splitlines()
    assert colour[6:17] == [
        f"      route.flags.gated: false -> true {flag}",
        "      + 1 row",
        "        row cat-a:m/float16/tp2/none/c4/q4096",
        "      + 1 row",
        f"        route.flags.extra: added {cut} {flag}",
        f"        route.status: null -> {cut} {flag}",
        "        row cat-a:m/float16/tp2/none/c8/q4096",
        '    + row cat-a:m/float16/tp4/none/c1/q4096: route.status: null -> "fast"',
        f"  changed 1 row ({red('unexpected')})",
        "    route.flags.gated: false -> true",
        f"    route.note: added {cut} {flag}",
    ]


def test_a_one_line_child_and_a_broken_invariance_show_long_values_whole_with_full() -> None:
    old, new = five_rows()
    new[3]["route"]["status"] = LONG
    outcome = CheckOutcome({"cat-a": verdict_of("cat-a", old, new)})
    one_line = f'    + row cat-a:m/float16/tp4/none/c1/q4096: route.status: null -> "{LONG}"'
    assert one_line in render_text(outcome, full=True).splitlines()
    broken = failing_outcome()
    lines = render_text(broken, full=True).splitlines()
    assert lines[2] == f'    route.kernel: "K" -> "{"x" * 130}"'
    old, new = five_rows()
    for r in (new[1], new[2], new[4]):
        r["route"]["flags"]["gated"] = LONG
    new[2]["route"]["status"] = LONG
    nested = render_text(CheckOutcome({"cat-a": verdict_of("cat-a", old, new)}), full=True)
    assert nested.splitlines()[5:9] == [
        "    + 2 rows in 2 groups, also:",
        f'      route.flags.gated: false -> "{LONG}"',
        "      + 1 row",
        "        row cat-a:m/float16/tp2/none/c4/q4096",
    ]
    assert (
        f'      + row cat-a:m/float16/tp2/none/c8/q4096: route.status: null -> "{LONG}"'
        in nested.splitlines()
    )


def test_only_the_first_broken_is_dropped_from_an_invariances_line() -> None:
    # A field whose quoted key holds " broken (" keeps it: the line drops the word once.
    field = 'route.layers["x broken (y"]'
    invariance = Invariance("odd", ("tp",), (field,), "why")
    a, b = rid(tp=2), rid(tp=4)
    change = FieldChange(field, "changed", 1, 2)
    brk = InvarianceBreak("cat-a", invariance, (a, b), change, 1, frozenset({a, b}))
    quiet = judge_category("cat-a", compare_rows([], []), ())[0]
    outcome = CheckOutcome({"cat-a": dataclasses.replace(quiet, broken=(brk,))})
    assert render_text(outcome).splitlines()[1:3] == [
        f"  broken invariance odd (tp never changes {field}): cat-a:{a} and cat-a:{b} differ",
        f"    {field}: 1 -> 2",
    ]


def test_a_nested_clusters_shared_fields_are_cut_and_a_one_line_childs_flag_is_red() -> None:
    old, new = five_rows()
    for r in (new[1], new[2], new[4]):
        r["route"]["flags"]["more"] = 1  # a second change the gated rows share
    document = {
        "schema_version": 3,
        "changes": [{"rows": rid(c=8), "fields": {"route.kernel": ["K", "K2"]}, "reason": "r"}],
    }
    outcome = CheckOutcome({"cat-a": verdict_of("cat-a", old, new, document)})
    lines = render_text(outcome, max_fields=1).splitlines()
    assert lines[5:8] == [
        "    + 2 rows in 2 groups, also:",
        "      route.flags.gated: false -> true <- not stated",
        "      ... 1 more field change",
    ]
    flag = "\x1b[31m<- not stated\x1b[0m"
    one_line = f'      + row cat-a:m/float16/tp2/none/c8/q4096: route.status: null -> "slow" {flag}'
    assert one_line in render_text(outcome, color=True).splitlines()


def test_a_top_clusters_shared_fields_are_flagged_cut_and_shown_whole() -> None:
    old, new = five_rows()
    for r in new[:4]:
        r["route"]["kernel"] = LONG
        r["route"]["flags"]["shared"] = 1
    document = {
        "schema_version": 3,
        "changes": [{"rows": rid(c=4), "fields": {"route.kernel": ["K", LONG]}, "reason": "r"}],
    }
    outcome = CheckOutcome({"cat-a": verdict_of("cat-a", old, new, document)})
    assert render_text(outcome, max_fields=1).splitlines()[1:5] == [
        "  changed 4 rows in 4 groups (unexpected)",
        "    route.flags.shared: added 1 <- not stated",
        "    ... 1 more field change",
        "    + 1 row",
    ]
    assert render_text(outcome, full=True).splitlines()[3] == f'    route.kernel: "K" -> "{LONG}"'
    assert render_text(outcome, color=True).splitlines()[2:4] == [
        "    route.flags.shared: added 1 \x1b[31m<- not stated\x1b[0m",
        f'    route.kernel: "K" -> "{"s" * 116}...',
    ]


def test_missing_rows_no_pattern_describes_are_listed_by_id_and_cut() -> None:
    scattered = [f"model{i}/float16/tp{i}/none/c{i}/q{i}" for i in range(7)]
    rows = [kernel_row(i) for i in scattered]
    comparison = compare_rows(rows, rows)
    listed = [f"cat:{i}" for i in scattered]
    entries = ExpectedChanges.of_ids(parse_expected(listed, ["cat"], source="f.json")).entries
    stated = resolve_stated(entries, ["cat"], lambda _name: comparison.fresh_ids, ["cat"])
    verdict = judge_category("cat", comparison, stated.by_category["cat"], ())[0]
    assert render_text(CheckOutcome({"cat": verdict}), max_rows=3) == (
        "cat: FAILED: 7 rows, 0 changed, 0 added, 0 removed\n"
        "  missing 7 rows (expected to move, did not change)\n"
        "    row cat:model0/float16/tp0/none/c0/q0\n"
        "    row cat:model1/float16/tp1/none/c1/q1\n"
        "    row cat:model2/float16/tp2/none/c2/q2\n"
        "    ... and 4 more\n"
        "FAILED: 0 unexpected, 7 missing (1 category, 7 rows)\n"
    )


def test_text_options_reach_the_text_through_the_renderer_table() -> None:
    for outcome in (failing_outcome(), unstated_outcome()):
        for options in (
            RenderOptions(color=True),
            RenderOptions(max_rows=1),
            RenderOptions(max_fields=1),
            RenderOptions(full=True),
            RenderOptions(command="diff"),
        ):
            assert render(outcome, "text", options) == render_text(
                outcome,
                color=options.color,
                max_rows=options.max_rows,
                max_fields=options.max_fields,
                full=options.full,
                command=options.command,
            )
    # Each option changes these outcomes' text (so the comparison above can fail).
    plain = render(failing_outcome(), "text")
    assert render(failing_outcome(), "text", RenderOptions(color=True)) != plain
    assert render(failing_outcome(), "text", RenderOptions(max_rows=1)) != plain
    assert render(failing_outcome(), "text", RenderOptions(full=True)) != plain
    wide = render(unstated_outcome(), "text")
    assert render(unstated_outcome(), "text", RenderOptions(max_fields=1)) != wide


def test_an_added_group_of_rows_no_pattern_describes_is_cut_by_max_rows() -> None:
    scattered = [f"model{i}/float16/tp{i}/none/c{i}/q{i}" for i in range(7)]
    verdict = verdict_of("cat", [], [kernel_row(i) for i in scattered])
    lines = render_text(CheckOutcome({"cat": verdict}), max_rows=2).splitlines()
    assert lines[1:5] == [
        "  added 7 rows, kernel K (unexpected)",
        "    row cat:model0/float16/tp0/none/c0/q0",
        "    row cat:model1/float16/tp1/none/c1/q1",
        "    ... and 5 more",
    ]


def test_two_stale_categories_and_two_row_patterns() -> None:
    outcome = dataclasses.replace(failing_outcome(), stale=("gone", "lost"))
    assert render_text(outcome).splitlines()[-1] == (
        "FAILED: 11 unexpected, 4 missing, 1 broken invariance, 2 stale categories "
        "(3 categories, 13 rows)"
    )
    old = [kernel_row(i) for i in (rid(tp=2), rid(tp=4, c=8))]
    new = [kernel_row(i, "K2") for i in (rid(tp=2), rid(tp=4, c=8))]
    (problem,) = problems(CheckOutcome({"cat": verdict_of("cat", old, new)}))
    assert problem == (
        '2 rows changed unexpectedly: route.kernel: "K" -> "K2": '
        "cat:m/float16/tp2/none/c1/q4096, cat:m/float16/tp4/none/c8/q4096"
    )


def test_the_stale_file_note_follows_the_command_through_the_renderer_table() -> None:
    applied = dataclasses.replace(failing_outcome(), applied=True)
    check = render(applied, "text").splitlines()[-2]
    diff = render(applied, "text", RenderOptions(command="diff")).splitlines()[-2]
    assert "already in the retained snapshots" in check
    assert "already in the baseline:" in diff
