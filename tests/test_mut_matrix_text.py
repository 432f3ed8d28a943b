"""The route matrix's terminal view whole (`routectl.review.matrix_text`), in process: a grid
against a baseline with every kind of change (a label changed, other fields moved, a row
added, an edge probe removed), its legend with the change marks, the probes with their marks
and reasons, and the changes section naming each transition's sides; the same in colour; cut
into column blocks and shortened at a narrow width; one column dimension with a missing cell;
column blocks at each side of a group's edge (whole groups, two to a block, a group cut by
columns); a probe name past its cap; an empty category; nothing moved; a transition with more
ids than it lists; wrapped notes under their indent.
tests/test_matrix.py checks fragments of these and the real project's view through the CLI;
this is fast enough for the mutation runs (issue 28)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from routectl.io.terminal import Painter
from routectl.review.matrix import build_matrix
from routectl.review.matrix_text import render_matrix_text
from routectl.rows import Invariance
from tests.test_matrix import against_a_baseline, kernel_route, rid, status_route


def test_the_whole_view_against_a_baseline() -> None:
    rows, baseline = against_a_baseline()
    assert render_matrix_text(build_matrix("cat", rows, baseline=baseline)) == (
        "cat: kernel per row; 19 rows (16 in the grid, 3 edge probes)\n"
        "               kv: float16    fp8_e4m3\n"
        "                c: 1    8     1    8\n"
        "model tp  spec  q: 4k   4k    4k   4k\n"
        "m1    tp2 none     B    B+    B*   B\n"
        "m1    tp4 none     A    A     A    A*\n"
        "m2    tp2 none     a    a     a    a\n"
        "m2    tp4 none     a    a     a    a\n"
        "\n"
        "legend:\n"
        "  A  FastKernel  (4 rows)\n"
        "  B  SlowKernel  (5 rows)\n"
        "  a  status not_applicable  (9 rows)\n"
        "  1  error missing_ops  (1 row)\n"
        "  * changed, + added, - removed against the baseline\n"
        "\n"
        "edge probes (3):\n"
        "  edge:odd_shape  B   over FastKernel [k_misaligned] K % 128 != 0\n"
        "  edge:broken     1   [missing_ops] no ops\n"
        "  edge:gone       a-  [not_applicable] no route here\n"
        "\n"
        "changes against the baseline (4 rows):\n"
        "  A unchanged, other fields moved: 1 row\n"
        "    m1/fp8_e4m3/tp4/none/c8/q4096\n"
        "  A -> B: 1 row\n"
        "    m1/fp8_e4m3/tp2/none/c1/q4096\n"
        "  added B: 1 row\n"
        "    m1/float16/tp2/none/c8/q4096\n"
        "  removed a: 1 row\n"
        "    edge:gone\n"
    )


def paint(code: int, text: str, bold: bool = False) -> str:
    return f"\x1b[{code}m" + ("\x1b[1m" if bold else "") + f"{text}\x1b[0m"


def test_colours_follow_the_label_kind_and_marks_are_bold_red() -> None:
    rows, baseline = against_a_baseline()
    fast, slow, status, error = (paint(32, "A"), paint(34, "B"), paint(90, "a"), paint(31, "1"))

    def mark(m: str) -> str:
        return paint(31, m, bold=True)

    lines = render_matrix_text(
        build_matrix("cat", rows, baseline=baseline), paint=Painter(True)
    ).splitlines()
    assert lines[4:8] == [
        f"m1    tp2 none     {slow}    {slow}{mark('+')}    {slow}{mark('*')}   {slow}",
        f"m1    tp4 none     {fast}    {fast}     {fast}    {fast}{mark('*')}",
        f"m2    tp2 none     {status}    {status}     {status}    {status}",
        f"m2    tp4 none     {status}    {status}     {status}    {status}",
    ]
    assert lines[9:14] == [
        "legend:",
        f"  {fast}  FastKernel  (4 rows)",
        f"  {slow}  SlowKernel  (5 rows)",
        f"  {status}  status not_applicable  (9 rows)",
        f"  {error}  error missing_ops  (1 row)",
    ]
    assert lines[16:20] == [
        "edge probes (3):",
        f"  edge:odd_shape  {slow}   over FastKernel [k_misaligned] K % 128 != 0",
        f"  edge:broken     {error}   [missing_ops] no ops",
        f"  edge:gone       {status}{mark('-')}  [not_applicable] no route here",
    ]


def test_a_narrow_view_cuts_the_grid_into_blocks_and_shortens_every_line() -> None:
    rows, baseline = against_a_baseline()
    text = render_matrix_text(build_matrix("cat", rows, baseline=baseline), width=34)
    assert text == (
        "cat: kernel per row; 19 rows (16 \u2026\n"
        "               kv: float16\n"
        "                c: 1    8\n"
        "model tp  spec  q: 4k   4k\n"
        "m1    tp2 none     B    B+\n"
        "m1    tp4 none     A    A\n"
        "m2    tp2 none     a    a\n"
        "m2    tp4 none     a    a\n"
        "\n"
        "               kv: fp8_e4m3\n"
        "                c: 1    8\n"
        "model tp  spec  q: 4k   4k\n"
        "m1    tp2 none     B*   B\n"
        "m1    tp4 none     A    A*\n"
        "m2    tp2 none     a    a\n"
        "m2    tp4 none     a    a\n"
        "\n"
        "legend:\n"
        "  A  FastKernel  (4 rows)\n"
        "  B  SlowKernel  (5 rows)\n"
        "  a  status not_applica\u2026  (9 rows)\n"
        "  1  error missing_ops  (1 row)\n"
        "  * changed, + added, - removed\n"
        "    against the baseline\n"
        "\n"
        "edge probes (3):\n"
        "  edge:odd_shape  B   over FastKe\u2026\n"
        "  edge:broken     1   [missing_op\u2026\n"
        "  edge:gone       a-  [not_applic\u2026\n"
        "\n"
        "changes against the baseline (4 r\u2026\n"
        "  A unchanged, other fields moved\u2026\n"
        "    m1/fp8_e4m3/tp4/none/c8/q4096\n"
        "  A -> B: 1 row\n"
        "    m1/fp8_e4m3/tp2/none/c1/q4096\n"
        "  added B: 1 row\n"
        "    m1/float16/tp2/none/c8/q4096\n"
        "  removed a: 1 row\n"
        "    edge:gone\n"
    )
    assert max(len(line) for line in text.splitlines()) == 34


def test_one_column_dimension_and_a_missing_cell() -> None:
    rows = against_a_baseline()[0][:-3]  # no probes, and m2/fp8_e4m3/tp4/c8 missing
    matrix = build_matrix(
        "cat", rows, cols_dims=("c",), rows_dims=("model", "kv", "tp", "spec", "q")
    )
    assert render_matrix_text(matrix, width=40) == (
        "cat: kernel per row; 15 rows (15 in the\u2026\n"
        "model kv       tp  spec q   c: 1 8\n"
        "m1    float16  tp2 none q4k    B B\n"
        "m1    float16  tp4 none q4k    A A\n"
        "m1    fp8_e4m3 tp2 none q4k    B B\n"
        "m1    fp8_e4m3 tp4 none q4k    A A\n"
        "m2    float16  tp2 none q4k    a a\n"
        "m2    float16  tp4 none q4k    a a\n"
        "m2    fp8_e4m3 tp2 none q4k    a a\n"
        "m2    fp8_e4m3 tp4 none q4k    a\n"
        "\n"
        "legend:\n"
        "  A  FastKernel  (4 rows)\n"
        "  B  SlowKernel  (4 rows)\n"
        "  a  status not_applicable  (7 rows)\n"
    )


def grid_of(text: str) -> list[str]:
    """The header and grid lines of a view (up to the blank line before the legend)."""
    return text.split("\n\n")[0].splitlines()[1:]


def test_two_column_dimensions_keep_the_gap_between_outer_groups() -> None:
    rows, baseline = against_a_baseline()
    matrix = build_matrix(
        "cat",
        rows,
        baseline=baseline,
        cols_dims=("kv", "c"),
        rows_dims=("model", "tp", "spec", "q"),
    )
    assert grid_of(render_matrix_text(matrix)) == [
        "                   kv: float16    fp8_e4m3",
        "model tp  spec q    c: 1    8     1    8",
        "m1    tp2 none q4k     B    B+    B*   B",
        "m1    tp4 none q4k     A    A     A    A*",
        "m2    tp2 none q4k     a    a     a    a",
        "m2    tp4 none q4k     a    a     a    a",
    ]


def test_cells_are_as_wide_as_a_symbol_and_its_mark_only_when_rows_moved() -> None:
    rows, baseline = against_a_baseline()
    dims = {"cols_dims": ("c",), "rows_dims": ("model", "kv", "tp", "spec", "q")}
    moved = grid_of(render_matrix_text(build_matrix("cat", rows, baseline=baseline, **dims)))
    assert moved[:4] == [
        "model kv       tp  spec q   c: 1  8",
        "m1    float16  tp2 none q4k    B  B+",
        "m1    float16  tp4 none q4k    A  A",
        "m1    fp8_e4m3 tp2 none q4k    B* B",
    ]
    same = grid_of(render_matrix_text(build_matrix("cat", rows, baseline=rows, **dims)))
    assert same[:2] == [
        "model kv       tp  spec q   c: 1 8",
        "m1    float16  tp2 none q4k    B B",
    ]


def test_a_tp_column_drops_its_prefix_in_the_header_not_in_row_labels() -> None:
    rows = against_a_baseline()[0]
    dims = {"cols_dims": ("tp",), "rows_dims": ("model", "kv", "c", "spec", "q")}
    assert grid_of(render_matrix_text(build_matrix("cat", rows, **dims)))[:2] == [
        "model kv       c  spec q   tp: 2 4",
        "m1    float16  c1 none q4k     B A",
    ]


def test_fit_and_the_colour_of_a_label_without_a_value() -> None:
    from routectl.review.matrix import Label
    from routectl.review.matrix_text import _header_value, fit, label_color

    assert (fit("abc", 3), fit("abcd", 3), fit("abc", 1), fit("abc", 0)) == (
        "abc",
        "ab\u2026",
        "\u2026",
        "\u2026",
    )
    matrix = build_matrix("cat", against_a_baseline()[0])
    assert label_color(matrix, Label("no route.x", "none")) == 90
    assert label_color(matrix, Label("status s", "status")) == 90
    assert label_color(matrix, Label("error e", "error")) == 31
    # Only tp, c and q drop their dimension's name; another value that starts with it stays.
    assert [_header_value(d, v) for d, v in (("tp", "2"), ("c", "8"), ("q", "4096"))] == [
        "2",
        "8",
        "4k",
    ]
    assert _header_value("kv", "kvx") == "kvx" and _header_value("model", "model1") == "model1"


def test_a_q_column_is_as_wide_as_its_short_header() -> None:
    rows = against_a_baseline()[0]
    longer = [
        {"id": r["id"].replace("/q4096", "/q8192"), "route": r["route"]}
        for r in rows
        if r["id"].startswith("m1/")
    ]
    dims = {"cols_dims": ("q",), "rows_dims": ("model", "kv", "tp", "c", "spec")}
    assert grid_of(render_matrix_text(build_matrix("cat", rows + longer, **dims)))[:2] == [
        "model kv       tp  c  spec q: 4k 8k",
        "m1    float16  tp2 c1 none    B  B",
    ]


def test_a_header_too_long_for_the_widest_cell_is_shortened_over_its_own_span() -> None:
    rows = [
        {"id": rid("m1", kv, 2, "none", 1), "route": kernel_route("K")}
        for kv in ("float16", "a_very_long_kv_cache_name")
    ]
    dims = {"cols_dims": ("kv", "c"), "rows_dims": ("model", "tp", "spec", "q")}
    assert render_matrix_text(build_matrix("cat", rows, **dims)) == (
        "cat: kernel per row; 2 rows (2 in the grid, 0 edge probes)\n"
        "                   kv: float16       a_very_long\u2026\n"
        "model tp  spec q    c: 1             1\n"
        "m1    tp2 none q4k     A             A\n"
        "\n"
        "legend:\n"
        "  A  K  (2 rows)\n"
    )


def test_a_category_of_edge_probes_only_has_no_grid() -> None:
    probes = [r for r in against_a_baseline()[0] if r["id"].startswith("edge:")]
    text = render_matrix_text(build_matrix("cat", probes))
    assert text.splitlines()[:2] == [
        "cat: kernel per row; 2 rows (0 in the grid, 2 edge probes)",
        "(no matrix rows)",
    ]


def one_row_per_column(groups: Sequence[tuple[str, Sequence[int]]]) -> list[dict[str, Any]]:
    """One m1 row for each (kv, c) pair: a grid one row high whose columns are `groups`."""
    return [
        {"id": rid("m1", kv, 2, "none", c), "route": kernel_route("K")}
        for kv, cs in groups
        for c in cs
    ]


KV_C = {"cols_dims": ("kv", "c"), "rows_dims": ("model", "tp", "spec", "q")}
# The row labels and the column dimensions' names take 23 columns: a view `width` wide
# leaves `width - 23` to the grid. Cells are one wide, one space apart, two between groups.
INDENT = 23


def block(kv: str, cs: str) -> list[str]:
    return [
        f"                   kv: {kv}",
        f"model tp  spec q    c: {cs}",
        "m1    tp2 none q4k     " + " ".join("A" * len(cs.split())),
    ]


def blocks_of(text: str) -> list[list[str]]:
    """The grid's blocks (each header and its row), without the title, legend and the rest."""
    parts = text.split("\n\n")
    return [p.splitlines()[-3:] for p in parts[:-1]]


def test_column_blocks_keep_whole_groups_and_cut_only_a_group_too_wide() -> None:
    two_of_four = build_matrix(
        "cat", one_row_per_column([("a", (1, 2, 4, 8)), ("b", (1, 2, 4, 8))]), **KV_C
    )
    assert grid_of(render_matrix_text(two_of_four))[:2] == [
        "                   kv: a        b",
        "model tp  spec q    c: 1 2 4 8  1 2 4 8",
    ]
    # A group exactly as wide as the room fits it (7 columns: `<=`, not `<`).
    assert blocks_of(render_matrix_text(two_of_four, width=INDENT + 7)) == [
        block("a", "1 2 4 8"),
        block("b", "1 2 4 8"),
    ]
    # One column less: each group is cut by columns, at least one a block.
    assert blocks_of(render_matrix_text(two_of_four, width=INDENT + 6)) == [
        block("a", "1 2 4"),
        block("a", "8"),
        block("b", "1 2 4"),
        block("b", "8"),
    ]
    # Room for a group and two columns of the next: the next group starts its own block
    # (a block is not filled column by column across a group's edge).
    assert blocks_of(render_matrix_text(two_of_four, width=INDENT + 12)) == [
        block("a", "1 2 4 8"),
        block("b", "1 2 4 8"),
    ]
    # Two whole groups share a block where both fit; a third starts the next.
    three_of_two = build_matrix(
        "cat", one_row_per_column([("a", (1, 2)), ("b", (1, 2)), ("c", (1, 2))]), **KV_C
    )
    assert blocks_of(render_matrix_text(three_of_two, width=INDENT + 8)) == [
        [
            "                   kv: a    b",
            "model tp  spec q    c: 1 2  1 2",
            "m1    tp2 none q4k     A A  A A",
        ],
        block("c", "1 2"),
    ]
    # A group that fits after a group that fitted, then one too wide for any block.
    narrow_then_wide = build_matrix(
        "cat", one_row_per_column([("a", (1, 2)), ("b", (1, 2, 4, 8))]), **KV_C
    )
    assert blocks_of(render_matrix_text(narrow_then_wide, width=INDENT + 5)) == [
        block("a", "1 2"),
        block("b", "1 2 4"),
        block("b", "8"),
    ]


def test_a_long_probe_name_is_cut_at_forty_columns() -> None:
    rows = [
        {"id": rid("m1"), "route": kernel_route("K")},
        {"id": "edge:" + "x" * 45, "route": kernel_route("K")},
        {"id": "edge:short", "route": status_route("not_applicable")},
    ]
    assert render_matrix_text(build_matrix("cat", rows)).split("\n\n")[-1] == (
        "edge probes (2):\n"
        "  edge:" + "x" * 34 + "\u2026  A  the first candidate in priority order was admitted\n"
        "  edge:short" + " " * 30 + "  a  [not_applicable] no route here\n"
    )


def test_an_empty_category_still_has_its_legend_head() -> None:
    assert render_matrix_text(build_matrix("cat", [])) == (
        "cat: kernel per row; 0 rows (0 in the grid, 0 edge probes)\n(no matrix rows)\n\nlegend:\n"
    )


def test_nothing_moved_against_the_baseline_says_so() -> None:
    rows = against_a_baseline()[0]
    text = render_matrix_text(build_matrix("cat", rows, baseline=rows))
    assert text.split("\n\n")[-1] == "no changes against the baseline\n"
    assert "  * changed, + added, - removed against the baseline\n" in text


def test_a_transition_lists_four_ids_then_counts_the_rest() -> None:
    before = [{"id": rid("m1", c=c), "route": kernel_route("K")} for c in (1, 2, 3, 4)]
    now = [{"id": rid("m1", c=c), "route": kernel_route("K")} for c in (5, 6, 7, 8, 9)]
    assert render_matrix_text(build_matrix("cat", now, baseline=before)).split("\n\n")[-1] == (
        "changes against the baseline (9 rows):\n"
        "  added A: 5 rows\n"
        "    m1/float16/tp2/none/c5/q4096\n"
        "    m1/float16/tp2/none/c6/q4096\n"
        "    m1/float16/tp2/none/c7/q4096\n"
        "    m1/float16/tp2/none/c8/q4096\n"
        "    and 1 more\n"
        "  removed A: 4 rows\n"
        "    m1/float16/tp2/none/c1/q4096\n"
        "    m1/float16/tp2/none/c2/q4096\n"
        "    m1/float16/tp2/none/c3/q4096\n"
        "    m1/float16/tp2/none/c4/q4096\n"
    )


def test_notes_wrap_under_their_own_indent() -> None:
    kv_free = Invariance("kv_free", ("kv",), ("route",))
    q_free = Invariance("q_free", ("q",), ("route",))
    rows = [
        {"id": rid("m1", kv, q=q), "route": kernel_route("A" if q == 64 else "B")}
        for kv in ("f16", "e8")
        for q in (64, 128)
    ]
    text = render_matrix_text(build_matrix("cat", rows, collapse=(kv_free, q_free)), width=30)
    assert text.splitlines()[:12] == [
        "cat: kernel per row; 4 rows (\u2026",
        "kv collapsed: a * cell stands",
        "  for every value, by the",
        "  declared invariance",
        "  (verified by routectl",
        "  check):",
        "  kv_free: kv never changes",
        "    route",
        "not collapsed by invariance",
        "  q_free: rows differing only",
        "  in q show different cells:",
        "  the grid keeps them",
    ]
    assert text.splitlines()[12:16] == [
        "               kv: *",
        "                c: 1",
        "model tp  spec  q: 64  128",
        "m1    tp2 none     A   B",
    ]
