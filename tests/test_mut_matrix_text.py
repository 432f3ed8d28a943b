"""The route matrix's terminal view whole (`routectl.review.matrix_text`), in process: a grid
against a baseline with every kind of change (a label changed, other fields moved, a row
added, an edge probe removed), its legend with the change marks, the probes with their marks
and reasons, and the changes section naming each transition's sides; the same in colour; cut
into column blocks and shortened at a narrow width; one column dimension with a missing cell.
tests/test_matrix.py checks fragments of these and the real project's view through the CLI;
this is fast enough for the mutation runs (issue 28)."""

from __future__ import annotations

from typing import Any

from routectl.io.terminal import Painter
from routectl.review.matrix import build_matrix
from routectl.review.matrix_text import render_matrix_text
from tests.test_matrix import grid_rows, kernel_route, rid, status_route


def against_a_baseline() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows = grid_rows()
    baseline = [dict(r) for r in rows if r["id"] != rid("m1", "float16", 2, "none", 8)]
    moved = next(r for r in baseline if r["id"] == rid("m1", "fp8_e4m3", 2, "none", 1))
    moved["route"] = kernel_route("FastKernel")
    plan = next(r for r in baseline if r["id"] == rid("m1", "fp8_e4m3", 4, "none", 8))
    plan["route"] = kernel_route("FastKernel", total=5)
    baseline.append({"id": "edge:gone", "route": status_route("not_applicable")})
    return rows, baseline


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
