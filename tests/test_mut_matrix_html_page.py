"""What the HTML route-matrix page says, exactly: every heading, sentence, table cell,
attribute, colour rule, change-panel row and script-data key, for matrices built by hand (so
that each expected text is typed out here from the module's docstrings and the rules it
states, never copied from the program's output). Written for issue 28's mutation run of
`routectl/review/matrix_html.py`, for the survivors that change the page's content: the
escape test (test_mut_matrix_html_escapes.py) compares two pages built alike, so a text
changed on both pages passes it.

Pages are read back with `html.parser` into a tree of (tag, attributes, children), each
checked to write its tag names in lower case (the parser reads either case alike); the row
data the script reads is read as JSON.
"""

from __future__ import annotations

import dataclasses
import html.parser
import json
import re
from collections.abc import Mapping
from typing import Any, Union

from routectl.review import groups as review
from routectl.review.compare import CategoryVerdict, CheckOutcome, Comparison
from routectl.review.matrix import CellRow, Label, LegendEntry, Matrix, Transition
from routectl.review.matrix_html import (
    CSS,
    SCRIPT,
    ChangeGroup,
    render_html,
    render_report_page,
    review_groups,
    transition_groups,
)

Node = Union[str, "Element"]


@dataclasses.dataclass
class Element:
    tag: str
    attrs: dict[str, str | None]
    children: list[Node]


def E(tag: str, attrs: Mapping[str, str | None] | None = None, *children: Node) -> Element:
    return Element(tag, dict(attrs or {}), list(children))


VOID = frozenset({"meta", "br"})


class Tree(html.parser.HTMLParser):
    """The page as a tree; adjacent texts joined, character references decoded; the
    doctype a `!doctype` element holding its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#root", {}, [])
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, dict(attrs), [])
        assert len(element.attrs) == len(attrs), attrs  # no attribute written twice
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack[-1].tag == tag, (tag, self.stack[-1].tag)
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        children = self.stack[-1].children
        if children and isinstance(children[-1], str):
            children[-1] += data
        else:
            children.append(data)

    def handle_decl(self, decl: str) -> None:
        self.stack[-1].children.append(Element("!doctype", {}, [decl]))

    def handle_comment(self, data: str) -> None:
        raise AssertionError(f"comment in the page: {data!r}")


def tree(text: str) -> Element:
    # The markup is written in lower case (the parser reads either case alike, the bytes
    # differ); the script's code and the JSON hold no "<" followed by a letter.
    assert [t for t in re.findall(r"</?([A-Za-z][A-Za-z0-9]*)", text) if not t.islower()] == []
    parser = Tree()
    parser.feed(text)
    parser.close()
    assert parser.stack == [parser.root], "an element left open"
    return parser.root


def find(node: Element, tag: str, **attrs: str) -> Element:
    """The one element below `node` with that tag and those attribute values."""
    found: list[Element] = []

    def walk(n: Element) -> None:
        for child in n.children:
            if isinstance(child, Element):
                if child.tag == tag and all(child.attrs.get(k) == v for k, v in attrs.items()):
                    found.append(child)
                walk(child)

    walk(node)
    assert len(found) == 1, (tag, attrs, len(found))
    return found[0]


def script_rows(page: Element) -> list[dict[str, Any]]:
    data = find(page, "script", id="routectl-data")
    assert data.attrs == {"type": "application/json", "id": "routectl-data"}
    (text,) = data.children
    assert isinstance(text, str)
    parsed = json.loads(text)
    assert list(parsed) == ["rows"]
    rows: list[dict[str, Any]] = parsed["rows"]
    return rows


# --- the matrices -----------------------------------------------------------------------------

FAST = Label("FastKernel", "kernel")
MID = Label("MidKernel", "kernel")
SLOW = Label("SlowKernel", "kernel")
NOT_APPLICABLE = Label("not_applicable", "status")
BROKEN = Label("missing_ops", "error")
NOTHING = Label("nothing", "none")

M1_C1 = "m1/float16/tp2/none/c1/q64"
M1_TP4 = "m1/float16/tp4/none/c1/q64"
M2_C1 = "m2/float16/tp2/none/c1/q64"
M2_C8 = "m2/float16/tp2/none/c8/q64"
M2_TP4 = "m2/float16/tp4/none/c1/q64"
M9 = "m9/float16/tp2/none/c1/q64"

FAST_ROUTE = {"kernel": "FastKernel"}
SLOW_ROUTE = {"kernel": "SlowKernel"}
MID_ROUTE = {"kernel": "MidKernel"}
STATUS_ROUTE = {"kernel": None, "status": {"code": "not_applicable", "message": "no"}}
ERROR_ROUTE = {"error": {"code": "missing_ops", "message": "no ops"}}
ODD_BEFORE = {"kernel": "FastKernel", "bytes": {"total": 1}}
ODD_NOW = {"kernel": "FastKernel", "bytes": {"total": 2}}

# Grid cells: kept, changed, added, removed (its route gone, its label the one before) and
# one labelled as routing nowhere; row m1 has no c8 cell (an empty cell mid-row). The
# probes: one changed in other fields only, one added.
CELLS = {
    M1_C1: CellRow(M1_C1, FAST, FAST_ROUTE, reason="fastest"),
    M1_TP4: CellRow(M1_TP4, SLOW, SLOW_ROUTE, "changed", FAST, FAST_ROUTE, "slow wins"),
    M2_C1: CellRow(M2_C1, NOT_APPLICABLE, STATUS_ROUTE, "added", reason="not here"),
    M2_C8: CellRow(M2_C8, BROKEN, None, "removed", BROKEN, ERROR_ROUTE, "ops gone"),
    M2_TP4: CellRow(M2_TP4, NOTHING, {}, reason=""),
}
ODD = CellRow("edge:odd", FAST, ODD_NOW, "changed", FAST, ODD_BEFORE, "K % 128 != 0")
NEW = CellRow("edge:new", MID, MID_ROUTE, "added", reason="new probe")


def category_matrix() -> Matrix:
    """Category `cat`, compared: rows by model, columns by tp then c (two header rows, tp2
    spanning two columns), one grid position empty, two probes, two notes. Its legend:
    three kernels (colour indexes 0-2), a status, an error and a route to nothing."""
    legend = (
        LegendEntry("A", FAST, 3, 0),
        LegendEntry("B", MID, 1, 1),
        LegendEntry("C", SLOW, 1, 2),
        LegendEntry("a", NOT_APPLICABLE, 1, 3),
        LegendEntry("1", BROKEN, 1, 4),
        LegendEntry("-", NOTHING, 1, 5),
    )
    return Matrix(
        category="cat",
        field_path=None,
        rows_dims=("model",),
        cols_dims=("tp", "c"),
        row_keys=(("m1",), ("m2",)),
        col_keys=(("2", "1"), ("2", "8"), ("4", "1")),
        grid={
            (("m1",), ("2", "1")): CELLS[M1_C1],
            (("m1",), ("4", "1")): CELLS[M1_TP4],
            (("m2",), ("2", "1")): CELLS[M2_C1],
            (("m2",), ("2", "8")): CELLS[M2_C8],
            (("m2",), ("4", "1")): CELLS[M2_TP4],
        },
        probes=(ODD, NEW),
        legend=legend,
        transitions=(
            Transition(FAST, SLOW, "changed", (M1_TP4,)),
            Transition(FAST, FAST, "changed", ("edge:odd",)),
            Transition(None, NOT_APPLICABLE, "added", (M2_C1,)),
            Transition(None, MID, "added", ("edge:new",)),
            Transition(BROKEN, None, "removed", (M2_C8,)),
        ),
        compared=True,
        symbols={e.label: e.symbol for e in legend},
        notes=("kv collapsed: one", "  two  "),
        grid_rows=5,
    )


OTHER = Label("OtherKernel", "kernel")


def second_matrix() -> Matrix:
    """Category `two`, not compared: one cell, rows by model and tp, one header row, no
    probes, a field shown."""
    return Matrix(
        category="two",
        field_path="route.kernel",
        rows_dims=("model", "tp"),
        cols_dims=("c",),
        row_keys=(("m9", "2"),),
        col_keys=(("1",),),
        grid={(("m9", "2"), ("1",)): CellRow(M9, OTHER, {"kernel": "OtherKernel"}, reason="r")},
        probes=(),
        legend=(LegendEntry("A", OTHER, 1, 0),),
        symbols={OTHER: "A"},
        grid_rows=1,
    )


def solo_matrix(compared: bool = False) -> Matrix:
    """Category `solo`: no grid, one probe."""
    probe = CellRow("edge:p", FAST, FAST_ROUTE, reason="only one")
    return Matrix(
        category="solo",
        field_path=None,
        rows_dims=("model",),
        cols_dims=("c",),
        row_keys=(),
        col_keys=(),
        grid={},
        probes=(probe,),
        legend=(LegendEntry("A", FAST, 1, 0),),
        compared=compared,
        symbols={FAST: "A"},
        subject="policy",
    )


def kernel_style(hue: int) -> str:
    return f"background:hsl({hue},65%,78%);color:#111"


GREY = "background:#e6e6e6;color:#555"
RED = "background:#f4b4b4;color:#5a0000"
HINT = "Hover over or click a cell or probe to see its candidates, bytes and native calls."


def cell(n: int, cls: str, title: str, text: str, groups: str | None = None) -> Element:
    attrs: dict[str, str | None] = {
        "id": f"r{n}",
        "class": cls,
        "data-row": str(n),
        "title": title,
    }
    if groups is not None:
        attrs["data-groups"] = groups
    return E("td", attrs, text)


def row_data(
    row_id: str,
    label: Label,
    symbol: str,
    route: Any,
    reason: str,
    change: str | None = None,
    old_label: Label | None = None,
    old_route: Any = None,
) -> dict[str, Any]:
    return {
        "id": row_id,
        "label": label.text,
        "symbol": symbol,
        "change": change,
        "old_label": None if old_label is None else old_label.text,
        "reason": reason,
        "route": route,
        "old_route": old_route,
    }


# --- a page with no grid and no baseline: the whole document ----------------------------------


def test_a_page_without_baseline_is_exactly_this_document() -> None:
    page = render_html([solo_matrix()], title="Routes", subtitle="one probe")
    assert page.startswith("<!DOCTYPE html>\n") and page.endswith("</html>\n")
    section = E(
        "section",
        {"class": "category", "id": "cat-solo"},
        E("h2", {}, "solo"),
        E("p", {"class": "basis"}),
        E(
            "p",
            {},
            "1 row: 0 in the grid (rows model, columns c; each cell the policy), 1 edge probe.",
        ),
        E("p", {}, "No matrix rows."),
        E(
            "table",
            {"class": "legend"},
            E(
                "thead",
                {},
                E("tr", {}, E("th", {}, "symbol"), E("th", {}, "policy"), E("th", {}, "rows")),
            ),
            E(
                "tbody",
                {},
                E(
                    "tr",
                    {},
                    E("td", {}, E("span", {"class": "sym k0-0"}, "A")),
                    E("td", {}, "FastKernel"),
                    E("td", {}, "1"),
                ),
            ),
        ),
        E("h3", {}, "Edge probes (1)"),
        E(
            "table",
            {"class": "probes"},
            E(
                "thead",
                {},
                E(
                    "tr",
                    {},
                    E("th", {}, "probe"),
                    E("th", {}),
                    E("th", {}, "selected"),
                    E("th", {}, "deciding reason"),
                ),
            ),
            E(
                "tbody",
                {},
                E(
                    "tr",
                    {},
                    E("td", {}, "edge:p"),
                    cell(0, "k0-0", "edge:p: FastKernel", "A"),
                    E("td", {}, "FastKernel"),
                    E("td", {}, "only one"),
                ),
            ),
        ),
    )
    data = json.dumps(
        {"rows": [row_data("solo:edge:p", FAST, "A", FAST_ROUTE, "only one")]},
        sort_keys=True,
        separators=(",", ":"),
    )
    want = E(
        "#root",
        {},
        E("!doctype", {}, "DOCTYPE html"),
        "\n",
        E(
            "html",
            {"lang": "en"},
            E(
                "head",
                {},
                E("meta", {"charset": "utf-8"}),
                E("meta", {"name": "viewport", "content": "width=device-width, initial-scale=1"}),
                E("title", {}, "Routes"),
                E("style", {}, CSS + ".k0-0{" + kernel_style(200) + "}"),
            ),
            "\n",
            E(
                "body",
                {},
                E(
                    "header",
                    {},
                    E("h1", {}, "Routes"),
                    E("p", {}, "one probe"),
                    E("nav", {}, E("a", {"href": "#cat-solo"}, "solo")),
                ),
                "\n",
                E(
                    "div",
                    {"class": "layout"},
                    E("main", {"class": "content"}, section),
                    E(
                        "aside",
                        {"id": "details"},
                        E("h2", {}, "Row details"),
                        E("div", {"id": "detail-body"}, E("p", {}, HINT)),
                    ),
                ),
                "\n",
                E("script", {"type": "application/json", "id": "routectl-data"}, data),
                "\n",
                E("script", {}, SCRIPT),
                "\n",
            ),
        ),
        "\n",
    )
    assert tree(page) == want


# --- a compared page: every part ---------------------------------------------------------------


def compared_page(groups: list[ChangeGroup] | None = None) -> Element:
    return tree(
        render_html(
            [category_matrix(), second_matrix()],
            title="Routes",
            subtitle="against base",
            basis={"cat": "cat basis", "elsewhere": "unused"},
            groups=groups,
        )
    )


def test_each_legend_index_has_its_colour_rule() -> None:
    style = find(compared_page(), "style")
    # Kernels: golden-angle hues from 200 degrees, (200 + 137 n) mod 360; statuses and
    # routes to nothing grey, errors red; the second category's classes k1-.
    rules = [
        (".k0-0", kernel_style(200)),
        (".k0-1", kernel_style(337)),
        (".k0-2", kernel_style(114)),
        (".k0-3", GREY),
        (".k0-4", RED),
        (".k0-5", GREY),
        (".k1-0", kernel_style(200)),
    ]
    assert style == E("style", {}, CSS + "".join(f"{c}{{{s}}}" for c, s in rules))


def test_header_nav_and_details_panel() -> None:
    page = compared_page()
    assert find(page, "title") == E("title", {}, "Routes")
    assert find(page, "header") == E(
        "header",
        {},
        E("h1", {}, "Routes"),
        E("p", {}, "against base"),
        E("nav", {}, E("a", {"href": "#cat-cat"}, "cat"), " ", E("a", {"href": "#cat-two"}, "two")),
    )
    main = find(page, "main")
    assert [c if isinstance(c, str) else (c.tag, c.attrs.get("id")) for c in main.children] == [
        ("section", "cat-cat"),
        ("section", "cat-two"),
        ("details", "changes"),
    ]


def test_the_compared_category_section() -> None:
    section = find(compared_page(), "section", id="cat-cat")
    mark = {"class": "mark"}
    want = E(
        "section",
        {"class": "category", "id": "cat-cat"},
        E("h2", {}, "cat"),
        E("p", {"class": "basis"}, "cat basis"),
        E(
            "p",
            {},
            "7 rows: 5 in the grid (rows model, columns tp \u00d7 c; each cell the kernel), "
            "2 edge probes.",
        ),
        E("p", {"class": "note"}, "kv collapsed: one", E("br"), "two"),
        E(
            "div",
            {"class": "grid-wrap"},
            E(
                "table",
                {"class": "grid"},
                E(
                    "thead",
                    {},
                    E(
                        "tr",
                        {},
                        E("th", {"rowspan": "2", "scope": "col"}, "model"),
                        E("th", {"colspan": "2", "scope": "colgroup"}, "tp2"),
                        E("th", {"scope": "col"}, "tp4"),
                    ),
                    E(
                        "tr",
                        {},
                        E("th", {"scope": "col"}, "c1"),
                        E("th", {"scope": "col"}, "c8"),
                        E("th", {"scope": "col"}, "c1"),
                    ),
                ),
                E(
                    "tbody",
                    {},
                    E(
                        "tr",
                        {},
                        E("th", {"scope": "row"}, "m1"),
                        cell(0, "k0-0", f"{M1_C1}: FastKernel", "A"),
                        E("td", {}),
                        cell(1, "k0-2 changed", f"{M1_TP4}: SlowKernel (changed)", "C*", "g0"),
                    ),
                    E(
                        "tr",
                        {},
                        E("th", {"scope": "row"}, "m2"),
                        cell(2, "k0-3 added", f"{M2_C1}: not_applicable (added)", "a+", "g2"),
                        cell(3, "k0-4 removed", f"{M2_C8}: missing_ops (removed)", "1-", "g4"),
                        cell(4, "k0-5", f"{M2_TP4}: nothing", "-"),
                    ),
                ),
            ),
        ),
        E(
            "table",
            {"class": "legend"},
            E(
                "thead",
                {},
                E("tr", {}, E("th", {}, "symbol"), E("th", {}, "kernel"), E("th", {}, "rows")),
            ),
            E(
                "tbody",
                {},
                *(
                    E(
                        "tr",
                        {},
                        E("td", {}, E("span", {"class": f"sym k0-{n}"}, symbol)),
                        E("td", {}, text),
                        E("td", {}, count),
                    )
                    for n, (symbol, text, count) in enumerate(
                        [
                            ("A", "FastKernel", "3"),
                            ("B", "MidKernel", "1"),
                            ("C", "SlowKernel", "1"),
                            ("a", "not_applicable", "1"),
                            ("1", "missing_ops", "1"),
                            ("-", "nothing", "1"),
                        ]
                    )
                ),
            ),
        ),
        E(
            "p",
            {},
            E("span", mark, "*"),
            " changed, ",
            E("span", mark, "+"),
            " added, ",
            E("span", mark, "-"),
            " removed against the baseline (outlined cells).",
        ),
        E("h3", {}, "Edge probes (2)"),
        E(
            "table",
            {"class": "probes"},
            E(
                "thead",
                {},
                E(
                    "tr",
                    {},
                    E("th", {}, "probe"),
                    E("th", {}),
                    E("th", {}, "selected"),
                    E("th", {}, "deciding reason"),
                ),
            ),
            E(
                "tbody",
                {},
                E(
                    "tr",
                    {},
                    E("td", {}, "edge:odd"),
                    cell(5, "k0-0 changed", "edge:odd: FastKernel (changed)", "A*", "g1"),
                    E("td", {}, "FastKernel"),
                    E("td", {}, "K % 128 != 0"),
                ),
                E(
                    "tr",
                    {},
                    E("td", {}, "edge:new"),
                    cell(6, "k0-1 added", "edge:new: MidKernel (added)", "B+", "g3"),
                    E("td", {}, "MidKernel"),
                    E("td", {}, "new probe"),
                ),
            ),
        ),
    )
    assert section == want


def test_the_uncompared_category_section() -> None:
    # No baseline paragraph in its legend, no probes table, the field shown in the header
    # and the sentence, its classes k1-, no basis given.
    section = find(compared_page(), "section", id="cat-two")
    assert section == E(
        "section",
        {"class": "category", "id": "cat-two"},
        E("h2", {}, "two"),
        E("p", {"class": "basis"}),
        E(
            "p",
            {},
            "1 row: 1 in the grid (rows model \u00d7 tp, columns c; each cell the route.kernel), "
            "0 edge probes.",
        ),
        E(
            "div",
            {"class": "grid-wrap"},
            E(
                "table",
                {"class": "grid"},
                E(
                    "thead",
                    {},
                    E(
                        "tr",
                        {},
                        E("th", {"rowspan": "1", "scope": "col"}, "model"),
                        E("th", {"rowspan": "1", "scope": "col"}, "tp"),
                        E("th", {"scope": "col"}, "c1"),
                    ),
                ),
                E(
                    "tbody",
                    {},
                    E(
                        "tr",
                        {},
                        E("th", {"scope": "row"}, "m9"),
                        E("th", {"scope": "row"}, "tp2"),
                        cell(7, "k1-0", f"{M9}: OtherKernel", "A"),
                    ),
                ),
            ),
        ),
        E(
            "table",
            {"class": "legend"},
            E(
                "thead",
                {},
                E(
                    "tr",
                    {},
                    E("th", {}, "symbol"),
                    E("th", {}, "route.kernel"),
                    E("th", {}, "rows"),
                ),
            ),
            E(
                "tbody",
                {},
                E(
                    "tr",
                    {},
                    E("td", {}, E("span", {"class": "sym k1-0"}, "A")),
                    E("td", {}, "OtherKernel"),
                    E("td", {}, "1"),
                ),
            ),
        ),
    )


def test_the_script_data_of_every_cell() -> None:
    # Grid cells in row order, then the probes, then the next category; a removed row's
    # route is None, its label and old label the one before; only a changed row carries
    # its route before.
    assert script_rows(compared_page()) == [
        row_data("cat:" + M1_C1, FAST, "A", FAST_ROUTE, "fastest"),
        row_data("cat:" + M1_TP4, SLOW, "C", SLOW_ROUTE, "slow wins", "changed", FAST, FAST_ROUTE),
        row_data("cat:" + M2_C1, NOT_APPLICABLE, "a", STATUS_ROUTE, "not here", "added"),
        row_data("cat:" + M2_C8, BROKEN, "1", None, "ops gone", "removed", BROKEN),
        row_data("cat:" + M2_TP4, NOTHING, "-", {}, ""),
        row_data("cat:edge:odd", FAST, "A", ODD_NOW, "K % 128 != 0", "changed", FAST, ODD_BEFORE),
        row_data("cat:edge:new", MID, "B", MID_ROUTE, "new probe", "added"),
        row_data("two:" + M9, OTHER, "A", {"kernel": "OtherKernel"}, "r"),
    ]


def change_row(title: Node, count: str, *codes: Node) -> Element:
    return E("tr", {}, E("td", {}, title), E("td", {}, count), E("td", {}, *codes))


def code(text: str) -> Element:
    return E("code", {}, text)


def changes_panel(summary: str, *rows: Element) -> Element:
    return E(
        "details",
        {"id": "changes"},
        E("summary", {}, summary),
        E(
            "table",
            {"class": "changes"},
            E(
                "thead",
                {},
                E("tr", {}, E("th", {}, "change"), E("th", {}, "rows"), E("th", {}, "row pattern")),
            ),
            E("tbody", {}, *rows),
        ),
    )


def link(n: int, group: int, title: str) -> Element:
    return E("a", {"href": f"#r{n}", "data-group": f"g{group}"}, title)


def test_without_groups_the_panel_lists_the_label_transitions() -> None:
    assert find(compared_page(), "details") == changes_panel(
        "Change groups: 5, 5 rows",
        change_row(link(1, 0, "cat: FastKernel -> SlowKernel"), "1", code("cat:" + M1_TP4)),
        change_row(link(5, 1, "cat: FastKernel (other fields moved)"), "1", code("cat:edge:odd")),
        change_row(link(2, 2, "cat: added (not_applicable)"), "1", code("cat:" + M2_C1)),
        change_row(link(6, 3, "cat: added (MidKernel)"), "1", code("cat:edge:new")),
        change_row(link(3, 4, "cat: removed (missing_ops)"), "1", code("cat:" + M2_C8)),
    )


def test_transition_groups_name_the_category_and_qualify_the_ids() -> None:
    assert transition_groups([category_matrix(), second_matrix()]) == [
        ChangeGroup("cat: FastKernel -> SlowKernel", (), ("cat:" + M1_TP4,)),
        ChangeGroup("cat: FastKernel (other fields moved)", (), ("cat:edge:odd",)),
        ChangeGroup("cat: added (not_applicable)", (), ("cat:" + M2_C1,)),
        ChangeGroup("cat: added (MidKernel)", (), ("cat:edge:new",)),
        ChangeGroup("cat: removed (missing_ops)", (), ("cat:" + M2_C8,)),
    ]


def test_a_transition_missing_a_label_says_none() -> None:
    # build_matrix gives every changed row both labels; a Matrix built otherwise may not.
    matrix = dataclasses.replace(
        category_matrix(),
        transitions=(
            Transition(None, SLOW, "changed", ("a",)),
            Transition(FAST, None, "changed", ("b",)),
            Transition(None, None, "changed", ("c",)),
        ),
    )
    assert [g.title for g in transition_groups([matrix])] == [
        "cat: none -> SlowKernel",
        "cat: FastKernel -> none",
        "cat: none (other fields moved)",
    ]


def test_given_groups_link_to_their_first_shown_cell_and_list_patterns_or_ids() -> None:
    many = ("cat:x0", "cat:x1", "cat:" + M1_TP4, "cat:" + M2_C1, *(f"cat:y{n}" for n in range(6)))
    groups = [
        ChangeGroup("kernel moved", ("cat:m1/*/tp2", "cat:m2/*"), ("cat:" + M1_TP4,)),
        ChangeGroup("ten rows", (), many),
        ChangeGroup("no cell", (), ("cat:nowhere",)),
    ]
    page = compared_page(groups)
    # Eleven distinct rows; the ten-row group links to its third id, the first with a cell,
    # and shows its first eight ids; the last group has no cell to link to.
    assert find(page, "details") == changes_panel(
        "Change groups: 3, 11 rows",
        change_row(
            link(1, 0, "kernel moved"), "1", code("cat:m1/*/tp2"), E("br"), code("cat:m2/*")
        ),
        change_row(
            link(1, 1, "ten rows"),
            "10",
            code("cat:x0"),
            E("br"),
            code("cat:x1"),
            E("br"),
            code("cat:" + M1_TP4),
            E("br"),
            code("cat:" + M2_C1),
            *(n for i in range(4) for n in (E("br"), code(f"cat:y{i}"))),
            E("br"),
            "and 2 more",
        ),
        change_row("no cell", "1", code("cat:nowhere")),
    )
    # A cell in two groups names both; the others none (the transitions are not used).
    grid = find(find(page, "section", id="cat-cat"), "table", **{"class": "grid"})
    shown = {
        c.attrs["id"]: c.attrs.get("data-groups")
        for tr in find(grid, "tbody").children
        if isinstance(tr, Element)
        for c in tr.children
        if isinstance(c, Element) and "id" in c.attrs
    }
    assert shown == {"r0": None, "r1": "g0 g1", "r2": "g1", "r3": None, "r4": None}


def test_a_group_of_eight_ids_lists_them_all_of_nine_all_but_one() -> None:
    ids = tuple(f"cat:y{n}" for n in range(9))
    page = compared_page([ChangeGroup("eight", (), ids[:8]), ChangeGroup("nine", (), ids)])
    rows = find(find(page, "details"), "tbody").children
    codes: list[Node] = [code(ids[0])]
    for i in ids[1:8]:
        codes += [E("br"), code(i)]
    assert rows == [
        change_row("eight", "8", *codes),
        change_row("nine", "9", *codes, E("br"), "and 1 more"),
    ]


def test_one_row_is_counted_singular_and_no_groups_say_so() -> None:
    one = render_html(
        [solo_matrix(compared=True)],
        title="t",
        subtitle="s",
        groups=[ChangeGroup("solo: one", (), ("solo:edge:p",))],
    )
    assert find(tree(one), "summary") == E("summary", {}, "Change groups: 1, 1 row")
    none = tree(render_html([solo_matrix(compared=True)], title="t", subtitle="s", groups=[]))
    assert find(none, "section", id="changes") == E(
        "section",
        {"id": "changes"},
        E("h2", {}, "Changes"),
        E("p", {}, "No changes against the baseline."),
    )
    # Compared with no transitions: the same panel.
    plain = tree(render_html([solo_matrix(compared=True)], title="t", subtitle="s"))
    assert find(plain, "section", id="changes") == find(none, "section", id="changes")


# --- the review's groups and `routectl report --html` -------------------------------------------


# A value longer than the terminal shows: HTML shows it whole.
LONG = "L" * 150
FIELDS = (
    'route.kernel: "FastKernel" -> "SlowKernel"; route.bytes.total: 1 -> 2; '
    f'route.note: null -> "{LONG}"'
)


def outcome() -> CheckOutcome:
    changed = review.ChangeGroup(
        "cat",
        "changed",
        (M1_TP4,),
        fields=(
            review.SignatureField("route.kernel", "changed", "FastKernel", "SlowKernel"),
            review.SignatureField("route.bytes.total", "changed", 1, 2),
            review.SignatureField("route.note", "changed", None, LONG),
        ),
    )
    added = review.ChangeGroup("cat", "added", (M2_C1,), label="not_applicable")
    verdict = CategoryVerdict("cat", 5, Comparison((), (), {}), groups=(changed, added))
    return CheckOutcome({"cat": verdict})


def test_review_groups_are_titled_as_check_prints_them() -> None:
    assert review_groups(outcome()) == [
        ChangeGroup(
            "cat: changed 1 row: " + FIELDS,
            ("cat:" + M1_TP4,),
            ("cat:" + M1_TP4,),
        ),
        ChangeGroup("cat: added 1 row, not_applicable", ("cat:" + M2_C1,), ("cat:" + M2_C1,)),
    ]


def header_texts(page: Element) -> tuple[Node, ...]:
    return (
        *find(page, "title").children,
        *find(page, "h1").children,
        *find(find(page, "header"), "p").children,
    )


def test_the_report_page_names_project_categories_rows_and_baseline() -> None:
    one = tree(render_report_page("proj", [solo_matrix()], basis={}, against=None, outcome=None))
    title = "routectl route report: proj"
    assert header_texts(one) == (
        title,
        title,
        "1 category, 1 row, replayed on CPU with native doubles",
    )
    two = tree(
        render_report_page(
            "proj",
            [category_matrix(), second_matrix()],
            basis={"cat": "cat basis"},
            against="base.json",
            outcome=outcome(),
        )
    )
    assert header_texts(two) == (
        title,
        title,
        "2 categories, 8 rows, replayed on CPU with native doubles; changes against base.json",
    )
    assert find(find(two, "section", id="cat-cat"), "p", **{"class": "basis"}) == E(
        "p", {"class": "basis"}, "cat basis"
    )
    # The review's groups, not the transitions.
    assert find(two, "summary") == E("summary", {}, "Change groups: 2, 2 rows")
    links = [find(two, "a", **{"data-group": f"g{n}"}) for n in range(2)]
    assert [(a.attrs["href"], a.children) for a in links] == [
        ("#r1", ["cat: changed 1 row: " + FIELDS]),
        ("#r2", ["cat: added 1 row, not_applicable"]),
    ]
    # Without an outcome a compared report lists its transitions.
    plain = tree(
        render_report_page("proj", [category_matrix()], basis={}, against="base.json", outcome=None)
    )
    assert find(plain, "summary") == E("summary", {}, "Change groups: 5, 5 rows")
