"""Properties of the review logic over generated rows and hostile text (hypothesis).

- The expected-changes judge accepts exactly the stated changes: for any generated pair of
  row versions, the entry stating every field change of the row expects it with nothing
  missing; without one of them the row is unexpected and that change is named; a stated
  value that differs, or a stated path that is only a prefix of the changed one, covers
  nothing; two overlapping entries that split the changes between them expect the row.
- Change groups never merge two distinct changes: rows that change different mapping keys
  (hostile keys too, holding brackets, dots, quotes and `[3]`/`[M=8]` look-alikes) are in
  different groups; rows changing the same field at different list places share one.
- The writers escape every hostile class: Markdown inline text and code spans read back, by
  a CommonMark parser, as the literal one-line text in a paragraph and a table cell; HTML text
  and attribute values read back, by an HTML parser, as the text with forbidden characters
  replaced; the script JSON reads back whole and holds no `<`, `>` or `&`.
"""

from __future__ import annotations

import html
import html.parser
import json
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from routectl.review.compare import compare_rows
from routectl.review.expected import (
    judge_category,
    parse_document,
    resolve_stated,
    unmatched_fields,
)
from routectl.review.groups import group_changes
from routectl.review.markdown import code, escape
from routectl.review.markdown import html_text as md_html_text
from routectl.review.matrix_html import esc, html_text, script_json

CATEGORY = "cat-a"
ROW = "m/float16/tp2/none/c1/q4096"
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Keys an engine could give a mapping: identifiers, and names that need quoting in a path.
KEYS = st.sampled_from(
    ["a", "b", "split_k", "x[3]", "x[4]", "y[M=8]", "a.b", 'q"t', "sp ace", "[*]", "0", "é"]
)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["s", "t", "x[3]", ""])
)


def _values(depth: int = 2) -> st.SearchStrategy[Any]:
    if depth == 0:
        return SCALARS
    inner = _values(depth - 1)
    return st.one_of(
        SCALARS,
        st.dictionaries(KEYS, inner, max_size=3),
        st.lists(inner, max_size=3),
    )


ROUTES = st.fixed_dictionaries(
    {
        "kernel": st.sampled_from(["K", "L"]),
        "flags": st.dictionaries(KEYS, _values(1), max_size=4),
        "dispatch": st.lists(
            st.fixed_dictionaries(
                {
                    "op": st.sampled_from(["mm", "mv"]),
                    "plan": st.fixed_dictionaries(
                        {"m": st.sampled_from([1, 8, 64]), "split_k": st.integers(1, 3)}
                    ),
                }
            ),  # fmt: skip
            max_size=3,
        ),
        "extra": _values(2),
    }
)


def judge(old: dict[str, Any], new: dict[str, Any], entries: list[dict[str, Any]]) -> Any:
    document = {"schema_version": 3, "changes": entries}
    changes = parse_document(document, [CATEGORY], source="f.json")
    comparison = compare_rows([{"id": ROW, "route": old}], [{"id": ROW, "route": new}])
    ids = comparison.fresh_ids | comparison.baseline_ids
    stated = resolve_stated(changes.entries, [CATEGORY], lambda _n: ids, [CATEGORY])
    verdict, covered = judge_category(CATEGORY, comparison, stated.by_category[CATEGORY])
    return comparison, verdict, (*stated.missing, *unmatched_fields(stated.judged, covered))


def entry(fields: dict[str, list[Any]]) -> dict[str, Any]:
    return {"rows": ROW, "fields": fields, "reason": "stated"}


def stated_fields(changes: Any) -> dict[str, list[Any]]:
    return {c.path: [c.old, c.new] for c in changes}


@SETTINGS
@given(old=ROUTES, new=ROUTES)
def test_the_judge_accepts_exactly_the_stated_changes(old: Any, new: Any) -> None:
    comparison, _, _ = judge(old, new, [])
    changes = comparison.changed.get(ROW, ())
    if not changes:
        return
    paths = [c.path for c in changes]
    if len(set(paths)) != len(paths) or any(c.path == "" for c in changes):
        return  # one path twice (a reorder beside its items): stated once, not the point
    fields = stated_fields(changes)

    _, verdict, missing = judge(old, new, [entry(fields)])
    assert verdict.unexpected == () and missing == (), (verdict.unexpected_fields, missing)

    # Overlapping entries that split the changes between them expect the row.
    first, rest = dict(list(fields.items())[:1]), dict(list(fields.items())[1:])
    if rest:
        _, verdict, missing = judge(old, new, [entry(first), entry(rest)])
        assert verdict.unexpected == () and missing == ()

    # One change left out: the row is unexpected and exactly that change is named.
    dropped = changes[-1]
    partial = {p: v for p, v in fields.items() if p != dropped.path}
    if partial:
        _, verdict, _ = judge(old, new, [entry(partial)])
        assert verdict.unexpected == (ROW,)
        assert verdict.unexpected_fields[ROW] == (dropped,)

    # Another value, or a prefix path with the same values, covers nothing.
    for other in ([dropped.old, {"not": dropped.new}], [{"not": dropped.old}, dropped.new]):
        _, verdict, missing = judge(old, new, [entry({**fields, dropped.path: other})])
        assert verdict.unexpected == (ROW,) and [m.field for m in missing] == [dropped.path]
    parent = dropped.path.rsplit(".", 1)[0] if "." in dropped.path.removeprefix("route.") else None
    if parent and parent not in fields:
        prefixed = {**partial, parent: [dropped.old, dropped.new]}
        _, verdict, missing = judge(old, new, [entry(prefixed)])
        assert verdict.unexpected == (ROW,)
        assert parent in [m.field for m in missing]


def _row(row_id: str, flags: dict[str, Any], ms: tuple[int, ...] = (1, 8), split: int = 1) -> Any:
    dispatch = [{"op": "mm", "plan": {"m": m, "split_k": split}} for m in ms]
    return {"id": row_id, "route": {"kernel": "K", "flags": flags, "dispatch": dispatch}}


@SETTINGS
@given(keys=st.lists(KEYS, min_size=2, max_size=6), before=SCALARS, after=SCALARS)
def test_change_groups_never_merge_changes_of_different_keys(
    keys: list[str], before: Any, after: Any
) -> None:
    if before == after or type(before) is type(after) and json.dumps(before) == json.dumps(after):
        return
    ids = [f"m/float16/tp{2 * (i + 1)}/none/c1/q4096" for i in range(len(keys))]
    old = [_row(i, {k: before}) for i, k in zip(ids, keys, strict=True)]
    new = [_row(i, {k: after}) for i, k in zip(ids, keys, strict=True)]
    groups = group_changes(CATEGORY, compare_rows(old, new), {}, {})
    by_row = {row_id: g for g in groups for row_id in g.row_ids}
    for a, ka in zip(ids, keys, strict=True):
        for b, kb in zip(ids, keys, strict=True):
            assert (by_row[a] is by_row[b]) == (ka == kb), (ka, kb)


def test_change_groups_share_one_change_at_different_list_places() -> None:
    # The same plan field changing in the M = 1 item of one row and the M = 8 item of
    # another is one change (`[*]`); a changed quoted key is not a list place.
    old = [_row("a/x", {}, (1,)), _row("b/x", {}, (8,))]
    new = [_row("a/x", {}, (1,), 2), _row("b/x", {}, (8,), 2)]
    (group,) = group_changes(CATEGORY, compare_rows(old, new), {}, {})
    assert group.row_ids == ("a/x", "b/x")
    assert [f.path for f in group.fields] == ["route.dispatch[*].plan.split_k"]


# --- writers -------------------------------------------------------------------------------

# Every class a value can bring: Markdown and HTML punctuation, entity starts, quotes, line
# breaks of every kind Python splits on, tabs, controls and characters HTML forbids.
HOSTILE = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("\\`*_[]<>|~!#&;'\"()=+-.:/ ")),
        st.sampled_from(["\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\t"]),
        st.sampled_from(["\x00", "\x01", "\x1b", "\x7f", "\ufdd0", "\uffff", "\ud800"]),
        st.characters(codec="utf-8", categories=["L", "N"]),
    ),
    min_size=1,
    max_size=40,
)
MD = MarkdownIt("commonmark").enable("table")
# One of each class, always tried besides the generated texts.
EVERY_CLASS = (
    "a\\b`c*d_e[f]g<h>i|j~k!l#m&amp;n;o'p\"q(r)s\nt\ru\x0bv\x85w\u2028x\ty\x00z\x1b\ud800\uffff"
)


def one_line(text: str) -> str:
    return " ".join(text.splitlines())


def md_expected(text: str) -> str:
    # What a CommonMark renderer writes for literal text: NUL replaced, HTML-escaped.
    return html.escape(text.replace("\x00", "\ufffd"), quote=True).replace("&#x27;", "'")


def md_render(text: str) -> str:
    return MD.render(text).replace("&#x27;", "'")


@SETTINGS
@given(text=HOSTILE)
@example(text=EVERY_CLASS)
def test_markdown_text_reads_back_as_the_literal_one_line_text(text: str) -> None:
    escaped = escape(text)
    assert not any(ch in escaped for ch in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
    flat = one_line(text).strip(" \t")
    if not flat or flat[0] in "=-+0123456789" or flat[-1] == "\\":
        return  # a block marker at the start of a paragraph: the writers never start one so
    assert md_render(f"x {escaped} x") == f"<p>x {md_expected(one_line(text))} x</p>\n"


@SETTINGS
@given(text=HOSTILE)
@example(text=EVERY_CLASS)
def test_markdown_code_spans_read_back_whole_in_a_table_cell(text: str) -> None:
    flat = one_line(text)
    if not flat.strip():
        return
    rendered = md_render(f"| h |\n|---|\n| {code(text)} |\n")
    cell = rendered.split("<td>", 1)[1].split("</td>", 1)[0]
    # CommonMark strips one space each side of a padded span and reads tabs as spaces only
    # at block level: the span's content is the one-line text.
    inner = cell.removeprefix("<code>").removesuffix("</code>")
    assert cell.startswith("<code>") and cell.endswith("</code>"), rendered
    assert inner.strip(" ") == md_expected(flat).strip(" ")


@SETTINGS
@given(text=HOSTILE)
@example(text=EVERY_CLASS)
def test_markdown_html_text_is_one_line_and_cell_safe(text: str) -> None:
    out = md_html_text(text)
    assert "\n" not in out and "|" not in out and "<" not in out and '"' not in out
    assert html.unescape(out) == one_line(text)


class Reader(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.attrs: list[tuple[str, str | None]] = []
        self.data: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)

    def handle_data(self, data: str) -> None:
        self.data.append(data)


@SETTINGS
@given(text=HOSTILE)
@example(text=EVERY_CLASS)
def test_html_text_and_attributes_read_back_as_the_cleaned_text(text: str) -> None:
    page = f"<p title=\"{esc(text)}\" data-x='{esc(text)}'>{esc(text)}</p>"
    reader = Reader()
    reader.feed(page)
    reader.close()
    assert reader.tags == ["p"]
    assert reader.attrs == [("title", html_text(text)), ("data-x", html_text(text))]
    assert "".join(reader.data) == html_text(text)


@SETTINGS
@given(
    data=st.recursive(
        SCALARS | HOSTILE,
        lambda inner: st.lists(inner) | st.dictionaries(HOSTILE, inner),
        max_leaves=8,
    )
)
def test_script_json_reads_back_and_cannot_close_its_element(data: Any) -> None:
    text = script_json(data)
    assert not any(ch in text for ch in "<>&")
    assert json.loads(text) == data


def test_a_stated_list_place_wildcard_never_covers_a_mapping_key() -> None:
    plan = {"m": 8, "split_k": 1}
    old = {"flags": {"x[3]": 1, "sp ace": 1}, "dispatch": [{"op": "mm", "plan": plan}]}
    new = {
        "flags": {"x[3]": 2, "sp ace": 2},
        "dispatch": [{"op": "mm", "plan": {**plan, "split_k": 2}}],
    }
    wild = {"route.flags[*]": [1, 2], "route.dispatch[*].plan.split_k": [1, 2]}
    _, verdict, missing = judge(old, new, [entry(wild)])
    assert verdict.unexpected == (ROW,)
    assert [c.path for c in verdict.unexpected_fields[ROW]] == [
        'route.flags["sp ace"]',
        'route.flags["x[3]"]',
    ]
    assert [m.field for m in missing] == ["route.flags[*]"]
    # A quoted key's own brackets are its text: `["x[*]"]` names that key only.
    _, verdict, missing = judge(old, new, [entry({'route.flags["x[*]"]': [1, 2]})])
    assert [m.field for m in missing] == ['route.flags["x[*]"]']
