"""The matrix's collapse by declared invariances against a baseline (docs/invariances.md, "What
the matrix shows"): a declaration collapses only where every cell it merges shows the same
label, after and, against a baseline, before; a merged cell is marked when any row it stands
for moved (changed, appeared or disappeared) and shows that row; a declaration that would merge
different cells leaves its dimensions whole and a note names it.

Pinned because a row new against the baseline used to stop its class from collapsing: it has
no label before, and its missing label was compared as if it were one (the product bug this
file was written with). Both sides are tested: what collapses and what must not.
"""

from __future__ import annotations

import re
from typing import Any

from routectl.review.matrix import ANY, Label, Matrix, build_matrix
from routectl.review.matrix_html import ChangeGroup, render_html
from routectl.rows import Invariance

KV = Invariance("kv_free", ("kv",), ("route",))


def route(kernel: str) -> dict[str, Any]:
    return {"kernel": kernel, "verdicts": []}


def rows(kernels: dict[str, str]) -> list[dict[str, Any]]:
    return [{"id": i, "route": route(k)} for i, k in kernels.items()]


def rid(model: str, kv: str) -> str:
    return f"{model}/{kv}/tp2/none/c1/q64"


def build(fresh: dict[str, str], baseline: dict[str, str] | None) -> Matrix:
    return build_matrix(
        "cat",
        rows(fresh),
        baseline=None if baseline is None else rows(baseline),
        collapse=(KV,),
    )


def cells(matrix: Matrix) -> dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[str, Any]]:
    return {k: (c.id, c.change) for k, c in matrix.grid.items()}


def key(model: str, kv: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return ((model, "2", "none"), (kv, "1", "64"))


NOW = {rid("m", "float16"): "A", rid("m", "fp8"): "A", rid("n", "float16"): "B"}


def test_a_row_new_against_the_baseline_still_lets_its_class_collapse() -> None:
    # m/fp8 is new; m's two rows show A now and the one that existed showed A before: the
    # merged cell hides no difference, so kv collapses, and the cell shows the row that moved.
    matrix = build(NOW, {rid("m", "float16"): "A", rid("n", "float16"): "B"})
    assert matrix.collapsed == ("kv",)
    assert cells(matrix) == {
        key("m", ANY): (rid("m", "fp8"), "added"),
        key("n", ANY): (rid("n", "float16"), None),
    }
    assert matrix.grid_rows == 3  # the title still counts the rows the grid stands for
    assert matrix.notes[0].startswith("kv collapsed")
    # The legend counts rows, not cells.
    assert [(e.label.text, e.cells) for e in matrix.legend] == [("A", 2), ("B", 1)]


def test_a_whole_category_new_against_the_baseline_collapses() -> None:
    matrix = build(NOW, {})
    assert matrix.collapsed == ("kv",)
    assert {k: c[1] for k, c in cells(matrix).items()} == {
        key("m", ANY): "added",
        key("n", ANY): "added",
    }


def test_a_new_row_with_another_label_keeps_the_class_whole() -> None:
    # The new m/fp8 row shows C where its class shows A: merging would hide it.
    fresh = {**NOW, rid("m", "fp8"): "C"}
    matrix = build(fresh, {rid("m", "float16"): "A", rid("n", "float16"): "B"})
    assert matrix.collapsed == ()
    assert matrix.notes == (
        "not collapsed by invariance kv_free: rows differing only in kv show different "
        "cells: the grid keeps them",
    )
    assert cells(matrix)[key("m", "fp8")] == (rid("m", "fp8"), "added")


def test_rows_that_differed_before_keep_the_class_whole() -> None:
    # Both m rows show A now, but one showed X before: the change would be hidden.
    matrix = build(NOW, {rid("m", "float16"): "X", rid("m", "fp8"): "A", rid("n", "float16"): "B"})
    assert matrix.collapsed == ()
    assert cells(matrix)[key("m", "float16")] == (rid("m", "float16"), "changed")
    assert matrix.grid[key("m", "float16")].old_label == Label("X", "kernel")


def test_a_removed_row_of_the_same_label_collapses_and_marks_the_cell() -> None:
    # m/fp8 is gone; it showed A, as its class does: the merged cell stands for it and is
    # marked removed (the first row of the class that moved).
    fresh = {rid("m", "float16"): "A", rid("n", "float16"): "B"}
    matrix = build(fresh, NOW)
    assert matrix.collapsed == ("kv",)
    assert cells(matrix) == {
        key("m", ANY): (rid("m", "fp8"), "removed"),
        key("n", ANY): (rid("n", "float16"), None),
    }


# --- a merged cell on the HTML page ------------------------------------------------------------


def test_every_group_of_a_merged_cells_rows_links_to_it_and_lights_it() -> None:
    # m's two rows both route to A (kv collapses) but moved differently, so the review puts
    # them in two groups: both groups link to the one merged cell, which is in both. Before,
    # the cell carried only the first moved row's id and the second group had no link.
    def row(row_id: str, total: int) -> dict[str, Any]:
        return {"id": row_id, "route": {**route("A"), "bytes": {"total": total}}}

    m16, m8 = rid("m", "float16"), rid("m", "fp8")
    matrix = build_matrix(
        "cat", [row(m16, 2), row(m8, 3)], baseline=[row(m16, 1), row(m8, 1)], collapse=(KV,)
    )
    assert matrix.collapsed == ("kv",) and matrix.shown_by == {m16: m16, m8: m16}
    groups = [
        ChangeGroup("route.bytes.total: 1 -> 2", (), (f"cat:{m16}",)),
        ChangeGroup("route.bytes.total: 1 -> 3", (), (f"cat:{m8}",)),
    ]
    page = render_html([matrix], title="t", subtitle="s", groups=groups)
    cells = re.findall(r'<td id="r(\d+)"[^>]*?(?: data-groups="([^"]*)")?>', page)
    assert cells == [("0", "g0 g1")]
    assert re.findall(r'<a href="#r(\d+)" data-group="(g\d+)">', page) == [
        ("0", "g0"),
        ("0", "g1"),
    ]
