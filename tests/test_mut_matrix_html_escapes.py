"""Every text of the HTML route report that comes from rows, categories, invariances, the basis,
the title or the change groups is escaped, at every place the page shows it, in element text
and in attribute values alike (issue 28: no mutant that changes an escape left alive).

The method is differential, so that no expected page is copied from the program's output: the
same report is rendered twice, once with plain tokens (`T03tok`) and once with hostile text in
their place (`T03` followed by markup, quotes, an entity, a script end, a comment opener and
characters HTML forbids). Read back with a real HTML parser, the two pages must be the same
sequence of tags, attributes and texts once each hostile text, as the HTML standard says it must
read back (the forbidden characters replaced by U+FFFD, docs/commands.md and the module
docstring), is replaced by its token; the row data the script reads must be the same JSON with
the raw hostile values. One escape left out, done twice, or the attribute quote not escaped
changes the parse of the hostile page only. The token page is checked for where each token
appears, so that a text dropped from both pages is caught too.
"""

from __future__ import annotations

import html.parser
import json
from collections.abc import Mapping
from typing import Any

from routectl.review.matrix import Matrix, build_matrix
from routectl.review.matrix_html import ChangeGroup, render_html, script_json
from routectl.rows import Invariance

# Markup, both quotes, an entity that must not be decoded, the script element's end, a
# comment opener, a NUL, an escape character, a C1 control, a lone surrogate and a
# noncharacter: each is a way a value could change the page's structure or its bytes.
HOSTILE = "<b class=\"x\" title='y'>&amp;&lt;</b></script><!-- -->\t\x00\x1b\x85\ud800\ufffe."


def forbidden(code: int) -> bool:
    """Whether HTML forbids a code point in a document (the HTML standard's input-stream
    parse errors): NUL and the C0 controls but tab, line feed, form feed and carriage return,
    DELETE and the C1 controls, surrogates, the noncharacters."""
    return (
        (code < 0x20 and code not in (0x09, 0x0A, 0x0C, 0x0D))
        or 0x7F <= code <= 0x9F
        or 0xD800 <= code <= 0xDFFF
        or 0xFDD0 <= code <= 0xFDEF
        or code & 0xFFFE == 0xFFFE
    )


def cleaned(text: str) -> str:
    """What a text reads back as from a valid page: every character HTML forbids replaced by
    U+FFFD (computed from the standard's classes, not by the product's own function)."""
    return "".join("\ufffd" if forbidden(ord(ch)) else ch for ch in text)


class Texts:
    """Tokens and their hostile counterparts. A hostile text starts with its token's prefix
    so that every sort the report does (labels by text, transitions, ids) orders both pages
    alike."""

    def __init__(self, hostile: bool) -> None:
        self.hostile = hostile
        self.made: dict[str, str] = {}

    def __call__(self, n: int) -> str:
        key = f"T{n:02d}"
        text = key + (HOSTILE if self.hostile else "tok")
        self.made[key] = text
        return text


def hook(route: Mapping[str, Any]) -> tuple[str, str] | None:
    return (route["label"], route["kind"]) if "label" in route else None


def why(route: Mapping[str, Any]) -> str | None:
    return route.get("why")


def routes(t: Texts) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Fresh rows and a baseline: rows of one label along kv (the first invariance collapses
    kv), labels that differ along c (the second leaves c whole and a note says so), a changed,
    an added and a removed row, and two edge probes."""

    def route(label: int, kind: str = "kernel", reason: int = 30) -> dict[str, Any]:
        return {"label": t(label), "kind": kind, "why": t(reason), "kernel": t(label)}

    fresh: list[dict[str, Any]] = []
    for kv in ("float16", "fp8"):
        for c in (1, 8):
            fresh.append(
                {"id": f"m1/{kv}/tp2/none/c{c}/q64", "route": route(1 if c == 1 else 2, reason=31)}
            )
    fresh.append({"id": "m2/float16/tp4/none/c1/q64", "route": route(3, "status", 32)})
    fresh.append({"id": "m3/float16/tp4/none/c1/q64", "route": route(4, "error", 33)})
    fresh.append({"id": f"edge:{t(5)}", "route": route(6, reason=34)})
    fresh.append({"id": f"edge:{t(7)}", "route": route(8, "none", 35)})
    baseline = [dict(r) for r in fresh if not r["id"].startswith("m3/")]
    baseline[4] = {"id": baseline[4]["id"], "route": route(9, reason=36)}  # m2: changed
    baseline.append({"id": "m4/float16/tp4/none/c1/q64", "route": route(10, reason=37)})
    return fresh, baseline


def matrices(t: Texts) -> list[Matrix]:
    fresh, baseline = routes(t)
    invariances = (
        Invariance(t(11), ("kv",), (f"route.{t(12)}",)),
        Invariance(t(13), ("c",), ("route",)),
    )
    first = build_matrix(
        t(14),
        fresh,
        baseline=baseline,
        hook=hook,
        reason_hook=why,
        subject=t(15),
        collapse=invariances,
    )
    # A second category, not compared, for the second colour class (k1-...).
    second = build_matrix(t(16), fresh[:1], hook=hook, reason_hook=why, subject=t(17))
    return [first, second]


def page(t: Texts, groups: bool) -> str:
    built = matrices(t)
    change_groups = (
        [
            ChangeGroup(t(20), (t(21), t(22)), (f"{t(14)}:m2/float16/tp4/none/c1/q64",)),
            ChangeGroup(t(23), (), tuple(f"{t(14)}:{t(24)}{n}" for n in range(10))),
        ]
        if groups
        else None
    )
    return render_html(
        built,
        title=t(25),
        subtitle=t(26),
        basis={t(14): t(27), t(16): t(28)},
        groups=change_groups,
    )


class Events(html.parser.HTMLParser):
    """The page as the parser reads it: every tag with its attributes, every text (the
    character references decoded), every comment and declaration."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.events: list[tuple[Any, ...]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.events.append(("start", tag, tuple(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.events.append(("startend", tag, tuple(attrs)))

    def handle_endtag(self, tag: str) -> None:
        self.events.append(("end", tag))

    def handle_data(self, data: str) -> None:
        if self.events and self.events[-1][0] == "data":
            self.events[-1] = ("data", self.events[-1][1] + data)
        else:
            self.events.append(("data", data))

    def handle_comment(self, data: str) -> None:
        self.events.append(("comment", data))

    def handle_decl(self, decl: str) -> None:
        self.events.append(("decl", decl))

    def unknown_decl(self, data: str) -> None:
        self.events.append(("unknown", data))


def read(text: str) -> list[tuple[Any, ...]]:
    parser = Events()
    parser.feed(text)
    parser.close()
    return parser.events


def undo(value: Any, pairs: Mapping[str, str]) -> Any:
    """`value` with every hostile text replaced by its token (strings inside lists, tuples
    and mappings, keys included)."""
    if isinstance(value, str):
        for hostile, token in pairs.items():
            value = value.replace(hostile, token)
        return value
    if isinstance(value, tuple):
        return tuple(undo(v, pairs) for v in value)
    if isinstance(value, list):
        return [undo(v, pairs) for v in value]
    if isinstance(value, dict):
        return {undo(k, pairs): undo(v, pairs) for k, v in value.items()}
    return value


def with_data(events: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The JSON element's text read as JSON (its escapes are JSON's, not HTML's)."""
    out: list[tuple[Any, ...]] = []
    in_data = False
    for event in events:
        if event[0] == "data" and in_data:
            out.append(("json", json.loads(event[1])))
            continue
        in_data = event[0] == "start" and ("id", "routectl-data") in event[2]
        out.append(event)
    return out


def both(groups: bool) -> tuple[str, list[tuple[Any, ...]], list[tuple[Any, ...]], Texts]:
    plain, hostile = Texts(False), Texts(True)
    plain_page, hostile_page = page(plain, groups), page(hostile, groups)
    assert plain.made.keys() == hostile.made.keys()
    raw = {hostile.made[k]: plain.made[k] for k in sorted(hostile.made, reverse=True)}
    # Attribute and element text reads back cleaned; the script's JSON holds the raw value.
    clean = {cleaned(h): p for h, p in raw.items()}
    got: list[tuple[Any, ...]] = []
    for event in with_data(read(hostile_page)):
        got.append(("json", undo(event[1], raw)) if event[0] == "json" else undo(event, clean))
    return hostile_page, got, with_data(read(plain_page)), plain


def test_a_hostile_page_parses_as_the_token_page_with_review_groups() -> None:
    hostile_page, got, want, _ = both(groups=True)
    assert got == want
    hostile_page.encode("utf-8")  # no lone surrogate: the page can be written


def test_a_hostile_page_parses_as_the_token_page_with_transition_groups() -> None:
    # No groups given: the compared report lists the label transitions, whose titles hold
    # the category's name and its labels.
    _, got, want, _ = both(groups=False)
    assert got == want


def test_the_hostile_page_holds_no_comment_no_extra_tag_and_no_forbidden_character() -> None:
    hostile_page, _, _, _ = both(groups=True)
    events = read(hostile_page)
    assert [e for e in events if e[0] in ("comment", "unknown")] == []
    assert [e[1] for e in events if e[0] == "start" and e[1] == "b"] == []
    assert hostile_page.count("</script>") == 2  # the data element's and the code's own
    assert [hex(ord(ch)) for ch in hostile_page if forbidden(ord(ch))] == []


def texts_of(events: list[tuple[Any, ...]], tag: str) -> list[str]:
    """The text inside each `tag` element (nested tags' texts joined)."""
    found: list[str] = []
    depth = 0
    for event in events:
        if event[0] == "start" and event[1] == tag:
            if depth == 0:
                found.append("")
            depth += 1
        elif event[0] == "end" and event[1] == tag:
            depth -= 1
        elif event[0] == "data" and depth:
            found[-1] += event[1]
    return found


def attrs_of(events: list[tuple[Any, ...]], tag: str) -> list[dict[str, str | None]]:
    return [dict(e[2]) for e in events if e[0] == "start" and e[1] == tag]


def test_the_token_page_shows_every_text_where_the_docs_place_it() -> None:
    # Each text the differential tests compare must be there in the first place: a text
    # dropped or replaced on both pages alike would leave them equal.
    _, _, want, t = both(groups=True)
    m = t.made
    assert texts_of(want, "title") == [m["T25"]]
    assert texts_of(want, "h1") == [m["T25"]]
    assert texts_of(want, "h2")[:2] == [m["T14"], m["T16"]]
    assert [a["id"] for a in attrs_of(want, "section")] == [f"cat-{m['T14']}", f"cat-{m['T16']}"]
    links = attrs_of(want, "a")
    assert [a["href"] for a in links[:2]] == [f"#cat-{m['T14']}", f"#cat-{m['T16']}"]
    paragraphs = texts_of(want, "p")
    assert m["T26"] in paragraphs  # the subtitle
    assert m["T27"] in paragraphs and m["T28"] in paragraphs  # each category's basis
    note = next(p for p in paragraphs if p.startswith("kv collapsed"))
    assert f"{m['T11']}: kv never changes route.{m['T12']}" in note
    assert f"not collapsed by invariance {m['T13']}" in note
    # The legend's header names what the cells show; its rows name every label.
    headers = texts_of(want, "th")
    assert m["T15"] in headers and m["T17"] in headers
    cells = texts_of(want, "td")
    for n in (1, 2, 3, 4, 6, 8, 9, 10):
        assert m[f"T{n:02d}"] in cells, n
    # The probes' rows: the id, the label, the deciding reason.
    assert [m["T05"], m["T07"]] == [c.removeprefix("edge:") for c in cells if "edge:" in c]
    assert m["T34"] in cells and m["T35"] in cells
    titles = [a["title"] for a in attrs_of(want, "td") if "title" in a]
    assert f"edge:{m['T05']}: {m['T06']}" in titles
    assert f"m2/float16/tp4/none/c1/q64: {m['T03']} (changed)" in titles
    # The change groups: the titles link to their cells, the patterns are code.
    group_links = [a for a in links if "data-group" in a]
    assert [a["data-group"] for a in group_links] == ["g0"]
    assert texts_of(want, "code")[:2] == [m["T21"], m["T22"]]
    assert m["T20"] in texts_of(want, "a") and m["T23"] in cells
    assert f"{m['T14']}:{m['T24']}0" in texts_of(want, "code")  # ids where a group has no patterns
    data = next(e[1] for e in want if e[0] == "json")
    reasons = {r["id"]: r["reason"] for r in data["rows"]}
    assert reasons[f"{m['T14']}:edge:{m['T05']}"] == m["T34"]


def test_script_json_writes_every_markup_character_as_a_json_escape() -> None:
    data = {"a<b": "</script><!--&>", "n": [1, None, True], "u": "\u2028é"}
    text = script_json(data)
    # Sorted keys, no spaces, ASCII only, and <, > and & only as \\u escapes.
    assert text == (
        '{"a\\u003cb":"\\u003c/script\\u003e\\u003c!--\\u0026\\u003e",'
        '"n":[1,null,true],"u":"\\u2028\\u00e9"}'
    )
    assert json.loads(text) == data
