"""The route matrix model of routectl/review/matrix.py, compared whole: the layout of rows and
columns and its errors, a dimension value as a header shows it, the deciding reason of each
route shape, the symbols of every label kind (and of more labels than one-character
symbols), and what `build_matrix` holds (ids in declared order, grid keys and cells, probes,
legend with its counts, transitions in their order, the collapse by declared invariances and
its notes, which row each merged cell shows), `build_matrices` and `collapsible` over
categories given as plain objects, and `transition_patterns`.

Written for issue 28's mutation run of `review.matrix` (benchmarks/mutation/matrix-report.md):
each test pins one part of the model so that a change to a label, a cell, a key, a symbol, a
legend entry or its count, a note, a collapse decision, a transition or a reason fails it.
Rows are plain dicts `{"id": ..., "route": {...}}` with ids of the grammar
`model/kv/tpN/spec/cN/qN`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from routectl.errors import InputError
from routectl.review.matrix import (
    ANY,
    CellRow,
    Label,
    LegendEntry,
    Matrix,
    Transition,
    build_matrices,
    build_matrix,
    check_field,
    collapsible,
    deciding_reason,
    kernel_label,
    layout,
    split_matrix_id,
    transition_patterns,
    value_text,
)
from routectl.rows import Invariance

FIRST = "the first candidate in priority order was admitted"
Key = tuple[tuple[str, ...], tuple[str, ...]]


def rid(
    model: str = "m", kv: str = "f16", tp: int = 2, spec: str = "none", c: int = 1, q: int = 64
) -> str:
    return f"{model}/{kv}/tp{tp}/{spec}/c{c}/q{q}"


def kr(kernel: str | None, **extra: Any) -> dict[str, Any]:
    return {"kernel": kernel, "verdicts": [], **extra}


def status(code: str, message: str = "m") -> dict[str, Any]:
    return {"kernel": None, "status": {"code": code, "message": message}, "verdicts": []}


def error(code: str, message: str = "no ops") -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def row(row_id: str, route: dict[str, Any]) -> dict[str, Any]:
    return {"id": row_id, "route": route}


def verdict(name: str, ok: bool, code: str | None = None, message: str | None = None) -> Any:
    return {"name": name, "ok": ok, "code": code, "message": message}


def K(text: str) -> Label:  # noqa: N802 - a kernel label, as the legend shows it
    return Label(text, "kernel")


def key(model: str, tp: str, kv: str, c: str, q: str = "64") -> Key:
    return ((model, tp, "none"), (kv, c, q))


# --- LegendEntry, layout, value_text, split_matrix_id ----------------------------------------


def test_a_legend_entry_as_json_names_symbol_label_kind_and_rows() -> None:
    entry = LegendEntry("a", Label("status x", "status"), 3, 7)
    assert entry.to_json() == {"symbol": "a", "label": "status x", "kind": "status", "rows": 3}


def test_layout_of_each_side_given_or_not() -> None:
    assert layout(None, None) == (("model", "tp", "spec"), ("kv", "c", "q"))
    # Rows given: the columns are their default less the rows; the rest join the rows.
    assert layout("kv,model", None) == (("kv", "model", "tp", "spec"), ("c", "q"))
    assert layout("model", None) == (("model", "tp", "spec"), ("kv", "c", "q"))
    # Columns given: the rows are their default less the columns, then the rest in order.
    assert layout(None, "tp,c") == (("model", "spec", "kv", "q"), ("tp", "c"))
    assert layout(None, "model,tp,spec") == (("kv", "c", "q"), ("model", "tp", "spec"))
    # Both given: the rest joins the rows, in DIMENSIONS order.
    assert layout("c", "q") == (("c", "model", "kv", "tp", "spec"), ("q",))
    assert layout("q,kv", "model") == (("q", "kv", "tp", "spec", "c"), ("model",))


def test_layout_errors() -> None:
    with pytest.raises(InputError) as raised:
        layout("kv,c,q", None)
    assert str(raised.value) == (
        "every matrix dimension is named for the rows: leave one for --cols"
    )
    # Two named for both sides: the first in sorted order is named.
    with pytest.raises(InputError) as raised:
        layout("model,tp,kv", "tp,kv")
    assert str(raised.value) == "matrix dimension 'kv' is named for both rows and columns"
    with pytest.raises(InputError) as raised:
        layout("q", "q")
    assert str(raised.value) == "matrix dimension 'q' is named for both rows and columns"


@pytest.mark.parametrize(
    ("dim", "value", "text"),
    [
        ("q", "1024", "q1k"),
        ("q", "1023", "q1023"),
        ("q", "1025", "q1025"),
        ("q", "2048", "q2k"),
        ("q", "1536", "q1536"),
        ("q", "8192", "q8k"),
        ("q", "64", "q64"),
        ("q", "0", "q0"),
        ("q", ANY, "*"),
        ("tp", "2", "tp2"),
        ("tp", ANY, "*"),
        ("c", "16", "c16"),
        ("model", "m1", "m1"),
        ("kv", "fp8", "fp8"),
        ("spec", "none", "none"),
    ],
)
def test_value_text(dim: str, value: str, text: str) -> None:
    assert value_text(dim, value) == text


def test_split_matrix_id() -> None:
    assert split_matrix_id("m-1_a/f8_e4m3/tp16/eagle3/c8/q8192") == {
        "model": "m-1_a",
        "kv": "f8_e4m3",
        "tp": "16",
        "spec": "eagle3",
        "c": "8",
        "q": "8192",
    }
    for other in (
        "edge:x",
        "M/f16/tp2/none/c1/q64",
        "m/f16/tp2/none/c1/q64/x",
        "m/f16/2/none/c1/q64",
    ):
        assert split_matrix_id(other) is None


# --- labels and reasons --------------------------------------------------------------------


def test_kernel_label_of_a_status_without_code_and_of_layers_not_a_map() -> None:
    assert kernel_label({"kernel": None, "status": {}}) == Label("status None", "status")
    assert kernel_label({"kernel": "K", "layers": ["a"]}) == K("K")
    # The first M = 1 stage decides, even when it chose nothing.
    stages = [{"m": 1, "chosen": None}, {"m": 1, "chosen": ["late"]}]
    assert kernel_label({"kernel": "K", "stages": stages}) == K("K")
    assert kernel_label({"kernel": "K", "stages": None}) == K("K")


def test_check_field_reads_past_a_route_whose_layers_are_none() -> None:
    check_field("y", [{"layers": None}, {"y": 1}])
    with pytest.raises(InputError) as raised:
        check_field("yy", [{"layers": None, "x": {"yz": 1}}])
    assert str(raised.value) == "no route has a field 'yy'"


def test_deciding_reason_of_an_error() -> None:
    assert deciding_reason(error("missing_ops", "no ops")) == "[missing_ops] no ops"
    assert deciding_reason({"error": {"code": "c"}}) == "[c] "
    assert deciding_reason({"error": {"message": "m"}}) == "[None] m"


def test_deciding_reason_of_layers_names_each_distinct_reason_once_in_order() -> None:
    layers = {"a": error("x", "y"), "b": kr("K"), "c": error("x", "y"), "d": status("s", "t")}
    assert deciding_reason({"layers": layers}) == f"[x] y; {FIRST}; [s] t"
    # An empty layer map is no multi-layer route.
    assert deciding_reason({"kernel": "K", "verdicts": [], "layers": {}}) == FIRST


def test_deciding_reason_of_a_row_without_kernel() -> None:
    verdicts = [
        verdict("A", True),
        verdict("B", False, "c1", "m1"),
        verdict("C", False, "c2", "m2"),
    ]
    refused = {"kernel": None, "verdicts": verdicts, "status": {"code": "s", "message": "t"}}
    assert deciding_reason(refused) == "refused: B [c1] m1; C [c2] m2"
    assert deciding_reason(status("not_applicable", "no route")) == "[not_applicable] no route"
    assert deciding_reason({"kernel": None, "status": {"code": "s"}}) == "[s] "
    assert deciding_reason({"kernel": None}) == ""
    assert deciding_reason({"kernel": "", "verdicts": None, "status": None}) == ""


def test_deciding_reason_of_a_kernel_names_the_refusals_ahead_nearest_first() -> None:
    verdicts = [
        verdict("X", False, "cx", "mx"),
        verdict("W", True),
        verdict("Y", False, "cy", "my"),
        verdict("K", True),
        verdict("Z", False, "cz", "mz"),
    ]
    stages = [
        {"m": 8, "rejected": [verdict("P", False, "cp", "mp")]},
        {"m": 1, "rejected": [verdict("Q", False, "cq", "mq"), verdict("R", True)]},
        {"m": 1, "rejected": [verdict("S", False, "cs", "ms")]},
    ]
    route = {"kernel": "K", "verdicts": verdicts, "stages": stages}
    assert deciding_reason(route) == ("over Y [cy] my; over X [cx] mx; M=1 over Q [cq] mq")
    only_m1 = {"kernel": "K", "verdicts": [verdict("K", True)], "stages": stages}
    assert deciding_reason(only_m1) == "M=1 over Q [cq] mq"
    none_rejected = {"kernel": "K", "verdicts": None, "stages": [{"m": 1, "rejected": None}]}
    assert deciding_reason(none_rejected) == FIRST
    assert deciding_reason(kr("K")) == FIRST


# --- symbols -------------------------------------------------------------------------------


def legend(matrix: Matrix) -> list[tuple[str, str, str, int, int]]:
    return [(e.symbol, e.label.text, e.label.kind, e.cells, e.index) for e in matrix.legend]


def test_every_kind_has_its_symbols_in_legend_order() -> None:
    def hook(route: Mapping[str, Any]) -> tuple[str, str] | None:
        return None if "own" not in route else (route["own"], "value")

    routes = [
        kr(None),
        kr("Z"),
        error("e2"),
        kr("x", own="v2"),
        status("s2"),
        kr("Y"),
        error("e1"),
        status("s1"),
        kr("x", own="v1"),
        kr("Z"),
    ]
    matrix = build_matrix("cat", [row(f"edge:{n}", r) for n, r in enumerate(routes)], hook=hook)
    assert legend(matrix) == [
        ("A", "Y", "kernel", 1, 0),
        ("B", "Z", "kernel", 2, 1),
        ("A", "v1", "value", 1, 2),
        ("B", "v2", "value", 1, 3),
        ("a", "status s1", "status", 1, 4),
        ("b", "status s2", "status", 1, 5),
        ("1", "error e1", "error", 1, 6),
        ("2", "error e2", "error", 1, 7),
        ("-", "nothing selected", "none", 1, 8),
    ]
    assert matrix.symbols == {e.label: e.symbol for e in matrix.legend}
    assert matrix.symbol(Label("v2", "value")) == "B"
    assert matrix.entry(Label("status s2", "status")) == LegendEntry(
        "b", Label("status s2", "status"), 1, 5
    )


KERNEL_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"


@pytest.mark.parametrize(
    ("count", "symbols"),
    [
        (24, list(KERNEL_LETTERS)),
        (25, [f"A{s}" for s in KERNEL_LETTERS] + ["BA"]),
    ],
)
def test_more_kernels_than_letters_take_two_letters_each(count: int, symbols: list[str]) -> None:
    rows = [row(f"edge:{n:02}", kr(f"K{n:02}")) for n in range(count)]
    matrix = build_matrix("cat", rows)
    assert [(e.symbol, e.label.text) for e in matrix.legend] == [
        (s, f"K{n:02}") for n, s in enumerate(symbols)
    ]


@pytest.mark.parametrize(
    ("count", "symbols"),
    [
        (9, list("123456789")),
        (10, ["11", "12", "13", "14", "15", "16", "17", "18", "19", "21"]),
    ],
)
def test_more_errors_than_digits_take_two_digits_each(count: int, symbols: list[str]) -> None:
    matrix = build_matrix("cat", [row(f"edge:{n}", error(f"e{n}")) for n in range(count)])
    assert [(e.symbol, e.label.text) for e in matrix.legend] == [
        (s, f"error e{n}") for n, s in enumerate(symbols)
    ]


def test_statuses_take_the_lower_case_letters() -> None:
    letters = "abcdefghjkmnpqrstuvwxyz"
    matrix = build_matrix("cat", [row(f"edge:{n:02}", status(f"s{n:02}")) for n in range(23)])
    assert [(e.symbol, e.label.text) for e in matrix.legend] == [
        (s, f"status s{n:02}") for n, s in enumerate(letters)
    ]


# --- build_matrix: order, keys, grid, probes, legend ----------------------------------------


def test_rows_in_declared_order_values_by_appearance_numbers_by_value() -> None:
    z16, a2, z8, a16 = (
        rid("zeta", "fp8", 16, c=4),
        rid("alpha", tp=2),
        rid("zeta", tp=8),
        rid("alpha", tp=16),
    )
    routes = {
        a16: kr("B"),
        "edge:later": error("missing_ops"),
        z8: kr("A"),
        "edge:first": kr("A"),
        a2: status("na"),
        z16: kr("B"),
    }
    order = [z16, a2, "edge:first", rid("nope"), z8]
    matrix = build_matrix("cat", [row(i, r) for i, r in routes.items()], order=order)
    assert matrix.category == "cat"
    assert matrix.field_path is None
    assert (matrix.rows_dims, matrix.cols_dims) == (("model", "tp", "spec"), ("kv", "c", "q"))
    # Models by appearance (zeta first), tp by value (2, 8, 16), not as text nor by appearance.
    assert matrix.row_keys == (
        ("zeta", "8", "none"),
        ("zeta", "16", "none"),
        ("alpha", "2", "none"),
        ("alpha", "16", "none"),
    )
    # Only the keys some row has: fp8 only at c4, f16 only at c1.
    assert matrix.col_keys == (("fp8", "4", "64"), ("f16", "1", "64"))
    assert matrix.grid == {
        key("zeta", "16", "fp8", "4"): CellRow(z16, K("B"), routes[z16], reason=FIRST),
        key("alpha", "2", "f16", "1"): CellRow(
            a2, Label("status na", "status"), routes[a2], reason="[na] m"
        ),
        key("zeta", "8", "f16", "1"): CellRow(z8, K("A"), routes[z8], reason=FIRST),
        key("alpha", "16", "f16", "1"): CellRow(a16, K("B"), routes[a16], reason=FIRST),
    }
    assert [c.id for c in matrix.cells] == [z16, a2, z8, a16]
    assert matrix.probes == (
        CellRow("edge:first", K("A"), routes["edge:first"], reason=FIRST),
        CellRow(
            "edge:later",
            Label("error missing_ops", "error"),
            routes["edge:later"],
            reason="[missing_ops] no ops",
        ),
    )
    assert legend(matrix) == [
        ("A", "A", "kernel", 2, 0),
        ("B", "B", "kernel", 2, 1),
        ("a", "status na", "status", 1, 2),
        ("1", "error missing_ops", "error", 1, 3),
    ]
    assert (matrix.transitions, matrix.compared, matrix.changed()) == ((), False, [])
    assert (matrix.collapsed, matrix.notes) == ((), ())
    assert (matrix.grid_rows, matrix.total_rows) == (4, 6)
    assert matrix.shown_by == {z16: z16, a2: a2, z8: z8, a16: a16}
    assert (matrix.subject, matrix.shows) == ("kernel", "kernel")


def test_a_field_view_names_its_field_and_ignores_the_label_hook() -> None:
    def hook(route: Mapping[str, Any]) -> tuple[str, str] | None:
        return ("own", "status")

    routes = [row(rid(c=1), kr("K", bytes={"total": 1500})), row(rid(c=2), kr("K"))]
    matrix = build_matrix(
        "cat",
        routes,
        field_path="bytes.total",
        hook=hook,
        subject="routes",
        rows_dims=("model",),
        cols_dims=("c", "kv", "tp", "spec", "q"),
    )
    assert (matrix.field_path, matrix.subject, matrix.shows) == (
        "bytes.total",
        "routes",
        "bytes.total",
    )
    assert matrix.row_keys == (("m",),)
    assert matrix.col_keys == (("1", "f16", "2", "none", "64"), ("2", "f16", "2", "none", "64"))
    assert {k: c.label for k, c in matrix.grid.items()} == {
        (("m",), ("1", "f16", "2", "none", "64")): Label("bytes.total 1,500", "value"),
        (("m",), ("2", "f16", "2", "none", "64")): Label("no bytes.total", "none"),
    }
    plain = build_matrix("cat", routes, hook=hook, subject="routes")
    assert [c.label for c in plain.cells] == [Label("own", "status")] * 2
    assert plain.shows == "routes"


def test_a_baseline_marks_every_change_counts_rows_and_orders_the_transitions() -> None:
    r1, r6, r2, r3 = rid("m", c=1), rid("n", c=1), rid("m", c=2), rid("m", c=4)
    r5, r4, r7 = rid("m", "e8", c=2), rid("m", c=8), rid("n", c=8)
    fresh = {
        r1: kr("A", why="own"),
        r6: kr("B"),
        r2: kr("B"),
        r3: kr("A", why=""),
        "edge:p": kr("A", x=2),
        r5: kr("B"),
    }
    old = {
        r1: kr("A", why="own"),
        r2: kr("C"),
        r5: kr("C"),
        "edge:p": kr("A", x=1),
        r4: kr("D"),
        r7: kr("D"),
        "edge:gone": status("x", "gone"),
    }

    def reason_hook(route: Mapping[str, Any]) -> str | None:
        return route.get("why")

    matrix = build_matrix(
        "cat",
        [row(i, r) for i, r in fresh.items()],
        baseline=[row(i, r) for i, r in old.items()],
        reason_hook=reason_hook,
    )
    gone = Label("status x", "status")
    assert matrix.grid == {
        key("m", "2", "f16", "1"): CellRow(r1, K("A"), fresh[r1], None, K("A"), old[r1], "own"),
        key("n", "2", "f16", "1"): CellRow(r6, K("B"), fresh[r6], "added", None, None, FIRST),
        key("m", "2", "f16", "2"): CellRow(
            r2, K("B"), fresh[r2], "changed", K("C"), old[r2], FIRST
        ),
        key("m", "2", "f16", "4"): CellRow(r3, K("A"), fresh[r3], "added", None, None, ""),
        key("m", "2", "e8", "2"): CellRow(r5, K("B"), fresh[r5], "changed", K("C"), old[r5], FIRST),
        key("m", "2", "f16", "8"): CellRow(r4, K("D"), None, "removed", K("D"), old[r4], FIRST),
        key("n", "2", "f16", "8"): CellRow(r7, K("D"), None, "removed", K("D"), old[r7], FIRST),
    }
    assert matrix.probes == (
        CellRow("edge:p", K("A"), fresh["edge:p"], "changed", K("A"), old["edge:p"], FIRST),
        CellRow("edge:gone", gone, None, "removed", gone, old["edge:gone"], "[x] gone"),
    )
    assert matrix.row_keys == (("m", "2", "none"), ("n", "2", "none"))
    assert matrix.col_keys == (
        ("f16", "1", "64"),
        ("f16", "2", "64"),
        ("f16", "4", "64"),
        ("f16", "8", "64"),
        ("e8", "2", "64"),
    )
    # A label only before is in the legend with no rows; a removed row counts its old label.
    assert legend(matrix) == [
        ("A", "A", "kernel", 3, 0),
        ("B", "B", "kernel", 3, 1),
        ("C", "C", "kernel", 0, 2),
        ("D", "D", "kernel", 2, 3),
        ("a", "status x", "status", 1, 4),
    ]
    # Changed, added, removed; more rows first; then by old and new label; ids sorted.
    assert matrix.transitions == (
        Transition(K("C"), K("B"), "changed", (r5, r2)),
        Transition(K("A"), K("A"), "changed", ("edge:p",)),
        Transition(None, K("A"), "added", (r3,)),
        Transition(None, K("B"), "added", (r6,)),
        Transition(K("D"), None, "removed", (r4, r7)),
        Transition(gone, None, "removed", ("edge:gone",)),
    )
    assert [c.id for c in matrix.changed()] == [r6, r2, r3, r5, r4, r7, "edge:p", "edge:gone"]
    assert (matrix.compared, matrix.grid_rows, matrix.total_rows) == (True, 7, 9)
    assert matrix.shown_by == {i: i for i in (r1, r6, r2, r3, r5, r4, r7)}


def test_an_empty_baseline_compares_and_marks_every_row_added() -> None:
    matrix = build_matrix("cat", [row(rid(), kr("A"))], baseline=[])
    assert matrix.compared is True
    assert matrix.cells == [CellRow(rid(), K("A"), kr("A"), "added", None, None, FIRST)]
    assert matrix.transitions == (Transition(None, K("A"), "added", (rid(),)),)


def test_transitions_of_more_removed_rows_still_follow_the_added() -> None:
    # Two removed rows, one added: the change kind orders before the number of rows.
    fresh = [row(rid("m", c=1), kr("A")), row(rid("n", c=1), kr("B"))]
    old = [row(rid("n", c=1), kr("B")), row(rid("m", c=2), kr("A")), row(rid("m", c=4), kr("A"))]
    matrix = build_matrix("cat", fresh, baseline=old)
    assert matrix.transitions == (
        Transition(None, K("A"), "added", (rid("m", c=1),)),
        Transition(K("A"), None, "removed", (rid("m", c=2), rid("m", c=4))),
    )
    # Two added, one changed: the changed still come first.
    old = [row(rid("n", c=1), kr("Z"))]
    matrix = build_matrix("cat", [*fresh, row(rid("m", c=2), kr("A"))], baseline=old)
    assert matrix.transitions == (
        Transition(K("Z"), K("B"), "changed", (rid("n", c=1),)),
        Transition(None, K("A"), "added", (rid("m", c=1), rid("m", c=2))),
    )


# --- the collapse -----------------------------------------------------------------------------


KV = Invariance("kv_free", ("kv",), ("route",))
C_FREE = Invariance("c_free", ("c",), ("route",))
KV_AGAIN = Invariance("kv_again", ("kv",), ("route.kernel",))
Q_FREE = Invariance("q_free", ("q",), ("route",))


def test_invariances_collapse_together_in_dimension_order_and_a_failing_one_is_noted() -> None:
    # c alone merges nothing (a1 and a2 differ in kv too); with kv they agree; kv_again
    # declares nothing new; q would merge A with B.
    a3, a1, a2 = rid(c=1, q=128), rid(c=1, q=64), rid("m", "e8", c=2, q=64)
    routes = [row(a3, kr("B")), row(a1, kr("A")), row(a2, kr("A"))]
    matrix = build_matrix("cat", routes, collapse=(C_FREE, KV, KV_AGAIN, Q_FREE))
    assert matrix.collapsed == ("kv", "c")
    assert matrix.notes == (
        "kv, c collapsed: a * cell stands for every value, by the declared invariances "
        "(verified by routectl check):",
        "  c_free: c never changes route",
        "  kv_free: kv never changes route",
        "  kv_again: kv never changes route.kernel",
        "not collapsed by invariance q_free: rows differing only in q show different cells: "
        "the grid keeps them",
    )
    assert matrix.row_keys == (("m", "2", "none"),)
    assert matrix.col_keys == (("*", "*", "64"), ("*", "*", "128"))
    assert matrix.grid == {
        key("m", "2", "*", "*", "128"): CellRow(a3, K("B"), kr("B"), reason=FIRST),
        key("m", "2", "*", "*", "64"): CellRow(a1, K("A"), kr("A"), reason=FIRST),
    }
    assert matrix.shown_by == {a3: a3, a1: a1, a2: a1}
    assert (matrix.grid_rows, matrix.total_rows) == (3, 3)
    assert legend(matrix) == [("A", "A", "kernel", 2, 0), ("B", "B", "kernel", 1, 1)]


def test_one_invariance_is_named_singular_two_plural() -> None:
    routes = [row(rid("m", "f16"), kr("A")), row(rid("m", "e8"), kr("A"))]
    one = build_matrix("cat", routes, collapse=(KV,))
    assert one.notes == (
        "kv collapsed: a * cell stands for every value, by the declared invariance "
        "(verified by routectl check):",
        "  kv_free: kv never changes route",
    )
    two = build_matrix("cat", routes, collapse=(KV, C_FREE))
    assert (two.collapsed, two.notes) == (
        ("kv", "c"),
        (
            "kv, c collapsed: a * cell stands for every value, by the declared invariances "
            "(verified by routectl check):",
            "  kv_free: kv never changes route",
            "  c_free: c never changes route",
        ),
    )
    assert two.col_keys == (("*", "*", "64"),)
    assert (build_matrix("cat", routes).collapsed, build_matrix("cat", routes).notes) == ((), ())


def test_a_tp_collapse_leaves_the_other_numbers_sorted() -> None:
    tp = Invariance("tp_free", ("tp",), ("route",))
    routes = [
        row(rid(tp=4, q=128), kr("A")),
        row(rid(tp=2, q=128), kr("A")),
        row(rid(q=64), kr("B")),
    ]
    matrix = build_matrix("cat", routes, collapse=(tp,))
    assert matrix.collapsed == ("tp",)
    assert matrix.row_keys == (("m", "*", "none"),)
    assert matrix.col_keys == (("f16", "1", "64"), ("f16", "1", "128"))
    assert matrix.shown_by == {
        rid(tp=4, q=128): rid(tp=4, q=128),
        rid(tp=2, q=128): rid(tp=4, q=128),
        rid(q=64): rid(q=64),
    }


def test_a_merged_cell_shows_the_first_row_that_moved() -> None:
    b1, b2, b3, b4 = rid("m", "f16"), rid("m", "e8"), rid("m", "g8"), rid("m", "h8")
    fresh = [row(b1, kr("A")), row(b2, kr("A", x=1)), row(b3, kr("A")), row(b4, kr("A", x=1))]
    old = [row(b1, kr("A")), row(b2, kr("A", x=0)), row(b4, kr("A", x=0))]
    matrix = build_matrix("cat", fresh, baseline=old, collapse=(KV,))
    assert matrix.collapsed == ("kv",)
    assert matrix.grid == {
        key("m", "2", "*", "1"): CellRow(
            b2, K("A"), kr("A", x=1), "changed", K("A"), kr("A", x=0), FIRST
        )
    }
    assert matrix.shown_by == {b1: b2, b2: b2, b3: b2, b4: b2}
    # Nothing moved: the first row shows.
    still = build_matrix("cat", fresh, baseline=fresh, collapse=(KV,))
    assert [c.id for c in still.cells] == [b1]
    assert still.shown_by == {b1: b1, b2: b1, b3: b1, b4: b1}


def test_rows_differing_in_the_other_dimensions_keep_their_own_class() -> None:
    # m and n differ in model, not only in kv: their labels may differ and kv still collapses.
    routes = [
        row(rid("m", "f16"), kr("A")),
        row(rid("n", "f16"), kr("B")),
        row(rid("m", "e8"), kr("A")),
        row(rid("n", "e8"), kr("B")),
    ]
    matrix = build_matrix("cat", routes, collapse=(KV,))
    assert matrix.collapsed == ("kv",)
    assert {k: c.id for k, c in matrix.grid.items()} == {
        key("m", "2", "*", "1"): rid("m", "f16"),
        key("n", "2", "*", "1"): rid("n", "f16"),
    }
    # A baseline where n's two rows had different labels: kv stays whole.
    old = [*routes[:3], row(rid("n", "e8"), kr("C"))]
    whole = build_matrix("cat", routes, baseline=old, collapse=(KV,))
    assert whole.collapsed == ()
    assert len(whole.grid) == 4


# --- build_matrices, collapsible, transition_patterns -----------------------------------------


@dataclass(frozen=True)
class Spec:
    id: str


@dataclass
class Snap:
    rows: list[dict[str, Any]]


@dataclass
class Cat:
    """A category as build_matrices reads one: name, rows, invariances, hooks and subject."""

    name: str
    order: tuple[str, ...]
    declared: tuple[Invariance, ...] = ()
    matrix_subject: str = "kernel"
    own_label: bool = False

    def rows(self) -> Sequence[Spec]:
        return [Spec(i) for i in self.order]

    def invariances(self) -> tuple[Invariance, ...]:
        return self.declared

    def matrix_label(self, route: Mapping[str, Any]) -> tuple[str, str] | None:
        return (f"own {route['kernel']}", "value") if self.own_label else None

    def matrix_reason(self, route: Mapping[str, Any]) -> str | None:
        return f"why {route['kernel']}" if self.own_label else None


KERNEL_KV = Invariance("kernel_kv", ("kv",), ("route.kernel",))
BYTES_KV = Invariance("bytes_kv", ("kv",), ("route.bytes",))


def categories() -> tuple[list[Cat], dict[str, Snap]]:
    one_rows = [
        row(rid("m", "f16"), kr("A", bytes={"total": 1})),
        row(rid("m", "e8"), kr("A", bytes={"total": 2})),
        row("edge:p", kr("A")),
    ]
    two_rows = [row(rid("n", "f16"), kr("B")), row(rid("n", "e8"), kr("B"))]
    cats = [
        Cat("one", ("edge:p", rid("m", "e8"), rid("m", "f16")), (KERNEL_KV, BYTES_KV)),
        Cat("two", (rid("n", "f16"), rid("n", "e8")), (KERNEL_KV,), "routes", own_label=True),
    ]
    return cats, {"one": Snap(one_rows), "two": Snap(two_rows)}


def test_collapsible_takes_every_invariance_or_those_declaring_the_field() -> None:
    cat = Cat("one", (), (KERNEL_KV, BYTES_KV))
    assert collapsible(cat, None) == (KERNEL_KV, BYTES_KV)
    assert collapsible(cat, "bytes.total") == (BYTES_KV,)
    assert collapsible(cat, "kernel") == (KERNEL_KV,)
    assert collapsible(cat, "status") == ()


def test_build_matrices_lays_out_each_category_with_its_order_hooks_and_invariances() -> None:
    cats, fresh = categories()
    dims = {"rows_dims": ("model", "tp", "spec"), "cols_dims": ("kv", "c", "q")}
    one, two = build_matrices(cats, fresh, None, field_path=None, **dims)
    assert one == build_matrix(
        "one", fresh["one"].rows, order=cats[0].order, collapse=(KERNEL_KV, BYTES_KV), **dims
    )
    assert (one.category, one.compared, one.collapsed) == ("one", False, ("kv",))
    assert [c.id for c in one.probes] == ["edge:p"]
    assert one.shown_by == {rid("m", "e8"): rid("m", "e8"), rid("m", "f16"): rid("m", "e8")}
    assert (two.category, two.subject, two.collapsed) == ("two", "routes", ("kv",))
    assert [(c.id, c.label, c.reason) for c in two.cells] == [
        (rid("n", "f16"), Label("own B", "value"), "why B")
    ]
    # Without the collapse, every row its own cell.
    whole = build_matrices(cats, fresh, None, field_path=None, collapse=False, **dims)
    assert [(m.collapsed, m.notes, len(m.grid)) for m in whole] == [((), (), 2), ((), (), 2)]


def test_build_matrices_against_a_baseline_and_for_a_field() -> None:
    cats, fresh = categories()
    dims = {"rows_dims": ("model", "tp", "spec"), "cols_dims": ("kv", "c", "q")}
    base = {"one": Snap([row(rid("m", "f16"), kr("A", bytes={"total": 1}))])}
    one, two = build_matrices(cats, fresh, base, field_path=None, **dims)
    assert (one.compared, two.compared) == (True, True)
    assert [(c.id, c.change) for c in (*one.grid.values(), *one.probes)] == [
        (rid("m", "e8"), "added"),
        ("edge:p", "added"),
    ]
    # The baseline lacks category two: every row new.
    assert {c.id: c.change for c in two.cells} == {rid("n", "f16"): "added"}
    assert two.transitions == (
        Transition(None, Label("own B", "value"), "added", (rid("n", "e8"), rid("n", "f16"))),
    )
    # A field view collapses by the invariances declaring it only: one's two rows differ in
    # bytes.total, so kv stays whole; two's kernel_kv does not declare it.
    one, two = build_matrices(cats, fresh, None, field_path="bytes.total", **dims)
    assert (one.field_path, one.collapsed) == ("bytes.total", ())
    assert one.notes == (
        "not collapsed by invariance bytes_kv: rows differing only in kv show different "
        "cells: the grid keeps them",
    )
    assert (two.collapsed, two.notes) == ((), ())
    assert [c.label for c in two.cells] == [Label("no bytes.total", "none")] * 2


def test_build_matrices_checks_the_field_over_every_category() -> None:
    cats, fresh = categories()
    dims = {"rows_dims": ("model", "tp", "spec"), "cols_dims": ("kv", "c", "q")}
    fresh["two"] = Snap([row(rid("n", "f16"), kr("B", only={"two": 1}))])
    (_, two) = build_matrices(cats, fresh, None, field_path="only.two", **dims)
    assert [c.label for c in two.cells] == [Label("only.two 1", "value")]
    with pytest.raises(InputError) as raised:
        build_matrices(cats, fresh, None, field_path="bytes.totl", **dims)
    assert str(raised.value) == "no route has a field 'bytes.totl'; did you mean bytes.total?"


def test_transition_patterns_of_every_matrix_where_patterns_describe_the_ids() -> None:
    first = build_matrix(
        "a",
        [row(rid(c=1), kr("B")), row(rid(c=2), kr("B")), row("odd", kr("B"))],
        baseline=[row(rid(c=1), kr("A")), row(rid(c=2), kr("A")), row("odd", kr("C"))],
    )
    second = build_matrix("b", [row("edge:x", kr("B")), row("edge:y", kr("B"))], baseline=[])
    assert transition_patterns([first, second]) == {
        (rid(c=1), rid(c=2)): ["m/f16/tp2/none/c{1,2}/q64"],
        ("edge:x", "edge:y"): ["edge:{x,y}"],
    }
    assert transition_patterns([]) == {}


def test_the_label_before_is_read_as_the_label_now_is() -> None:
    # A field view reads the field before too; a category's own label names the row before.
    fresh = [row(rid(), kr("K", bytes={"total": 2}))]
    old = [row(rid(), kr("J", bytes={"total": 1}))]
    field = build_matrix("cat", fresh, baseline=old, field_path="bytes.total")
    assert field.transitions == (
        Transition(
            Label("bytes.total 1", "value"), Label("bytes.total 2", "value"), "changed", (rid(),)
        ),
    )

    def hook(route: Mapping[str, Any]) -> tuple[str, str] | None:
        return (f"own {route['kernel']}", "status")

    own = build_matrix("cat", fresh, baseline=old, hook=hook)
    assert own.cells == [
        CellRow(
            rid(),
            Label("own K", "status"),
            fresh[0]["route"],
            "changed",
            Label("own J", "status"),
            old[0]["route"],
            FIRST,
        )
    ]


def test_transitions_of_as_many_rows_follow_their_label_before() -> None:
    # Two changed groups of one row each, the later label before listed first.
    fresh = [row(rid(c=1), kr("A")), row(rid(c=2), kr("A"))]
    old = [row(rid(c=1), kr("X")), row(rid(c=2), kr("W"))]
    assert build_matrix("cat", fresh, baseline=old).transitions == (
        Transition(K("W"), K("A"), "changed", (rid(c=2),)),
        Transition(K("X"), K("A"), "changed", (rid(c=1),)),
    )


def test_the_note_of_an_invariance_over_two_dimensions_lists_both() -> None:
    kv_c = Invariance("kv_c", ("kv", "c"), ("route",))
    routes = [row(rid("m", "f16", c=1), kr("A")), row(rid("m", "e8", c=2), kr("B"))]
    matrix = build_matrix("cat", routes, collapse=(kv_c,))
    assert (matrix.collapsed, matrix.notes) == (
        (),
        (
            "not collapsed by invariance kv_c: rows differing only in kv, c show different "
            "cells: the grid keeps them",
        ),
    )
