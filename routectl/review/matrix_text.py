"""The route matrix as terminal text: the grid with stacked column headers, the legend,
the edge probes with their deciding reasons and, against a baseline, the changes.

Every line fits `width` columns (100 by default): labels and reasons that would not are
shortened with an ellipsis; the grid is sized by its symbols, not by its labels, and a grid
wider than `width` is cut into blocks of whole columns, one under the other, each with its
own headers and every row (the row labels too wide for one column stay as they are).
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Sequence

from routectl.io.terminal import (
    DEFAULT_WIDTH,
    ERROR_COLOR,
    MUTED_COLOR,
    PALETTE,
    Painter,
    counted,
)
from routectl.review.matrix import CHANGE_MARKS, Label, Matrix, Transition, value_text

WIDTH = DEFAULT_WIDTH
MAX_TRANSITION_IDS = 4
MAX_CELL = 12


def fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def label_color(matrix: Matrix, label: Label) -> int:
    if label.kind == "error":
        return ERROR_COLOR
    if label.kind in ("status", "none"):
        return MUTED_COLOR
    return PALETTE[matrix.entry(label).index % len(PALETTE)]


def _header_value(dim: str, value: str) -> str:
    """Inside the grid a column value drops its prefix: `4k`, not `q4k`."""
    text = value_text(dim, value)
    return text[len(dim) :] if dim in ("tp", "c", "q") and text.startswith(dim) else text


def _cell_width(matrix: Matrix) -> int:
    marks = 1 if matrix.compared and matrix.changed() else 0
    widths = [len(e.symbol) + marks for e in matrix.legend]
    if matrix.cols_dims:
        inner = matrix.cols_dims[-1]
        widths.extend(len(_header_value(inner, k[-1])) for k in matrix.col_keys)
    return max(widths, default=1)


def _headers_fit(matrix: Matrix, cell: int) -> bool:
    starts = _column_starts(matrix, cell)
    for level, dim in enumerate(matrix.cols_dims):
        begin = 0
        for n, key in enumerate(matrix.col_keys):
            last = (
                n + 1 == len(matrix.col_keys)
                or matrix.col_keys[n + 1][: level + 1] != key[: level + 1]
            )
            if last:
                if len(_header_value(dim, key[level])) > starts[n] + cell - starts[begin]:
                    return False
                begin = n + 1
    return True


def _row_label_widths(matrix: Matrix) -> list[int]:
    return [
        max([len(dim), *(len(value_text(dim, k[i])) for k in matrix.row_keys)])
        for i, dim in enumerate(matrix.rows_dims)
    ]


def _row_label(matrix: Matrix, key: Sequence[str], widths: Sequence[int]) -> str:
    return " ".join(
        f"{value_text(d, v):<{w}}" for d, v, w in zip(matrix.rows_dims, key, widths, strict=True)
    )


def _column_starts(matrix: Matrix, cell: int) -> list[int]:
    """Each column's offset in the grid: one space between cells, two between groups of
    the outermost column dimension."""
    starts: list[int] = []
    at = 0
    for n, key in enumerate(matrix.col_keys):
        if n:
            at += 1 + (
                1 if len(matrix.cols_dims) > 1 and key[0] != matrix.col_keys[n - 1][0] else 0
            )
        starts.append(at)
        at += cell
    return starts


def _header_lines(
    matrix: Matrix, indent: int, cell: int, starts: Sequence[int], row_names: str
) -> list[str]:
    lines: list[str] = []
    depth = len(matrix.cols_dims)
    for level, dim in enumerate(matrix.cols_dims):
        spans: list[tuple[int, int, str]] = []  # (start, end, text)
        for n, key in enumerate(matrix.col_keys):
            prefix = key[: level + 1]
            if spans and matrix.col_keys[n - 1][: level + 1] == prefix:
                start, _, text = spans[-1]
                spans[-1] = (start, starts[n] + cell, text)
            else:
                spans.append((starts[n], starts[n] + cell, _header_value(dim, key[level])))
        row = [" "] * (starts[-1] + cell if starts else 0)
        for start, end, text in spans:
            shown = fit(text, end - start)
            row[start : start + len(shown)] = shown
        left = row_names if level == depth - 1 else ""
        names = max(len(d) for d in matrix.cols_dims) + 1
        lines.append(f"{left:<{indent - names - 2}} {dim + ':':>{names}} {''.join(row)}".rstrip())
    return lines


def _cell_text(
    matrix: Matrix, key: tuple[tuple[str, ...], tuple[str, ...]], cell: int, paint: Painter
) -> str:
    found = matrix.grid.get(key)
    if found is None:
        return " " * cell
    symbol = matrix.symbol(found.label)
    mark = CHANGE_MARKS[found.change] if found.change else ""
    text = paint(symbol, color=label_color(matrix, found.label))
    if mark:
        text += paint(mark, color=ERROR_COLOR, bold=True)
    return text + " " * (cell - len(symbol) - len(mark))


def _grid_lines(matrix: Matrix, paint: Painter, width: int = WIDTH) -> list[str]:
    if not matrix.row_keys or not matrix.col_keys:
        return ["(no matrix rows)"]
    cell = _cell_width(matrix)
    # Wider cells where a column group's name would not fit over its columns.
    while cell < MAX_CELL and not _headers_fit(matrix, cell):
        cell += 1
    widths = _row_label_widths(matrix)
    row_names = " ".join(f"{d:<{w}}" for d, w in zip(matrix.rows_dims, widths, strict=True))
    # Row labels, then the column dimensions' names ("kv:"), then the grid.
    indent = len(row_names) + 1 + max(len(d) for d in matrix.cols_dims) + 1 + 1
    blocks = _column_blocks(matrix, cell, width - indent)
    lines: list[str] = []
    for n, keys in enumerate(blocks):
        block = matrix if len(blocks) == 1 else dataclasses.replace(matrix, col_keys=keys)
        lines += ([""] if n else []) + _block_lines(block, paint, cell, widths, indent, row_names)
    return lines


def _column_blocks(matrix: Matrix, cell: int, room: int) -> list[tuple[tuple[str, ...], ...]]:
    """The column keys cut, in order, into blocks whose grid fits `room` columns: whole
    groups of the outermost column dimension where they fit, a group too wide for one
    block cut by columns (at least one column a block)."""

    def fits(keys: list[tuple[str, ...]]) -> bool:
        trial = dataclasses.replace(matrix, col_keys=tuple(keys))
        return _column_starts(trial, cell)[-1] + cell <= room

    groups: list[list[tuple[str, ...]]] = []
    for key in matrix.col_keys:
        if groups and len(matrix.cols_dims) > 1 and groups[-1][-1][0] == key[0]:
            groups[-1].append(key)
        else:
            groups.append([key])
    blocks: list[tuple[tuple[str, ...], ...]] = []
    current: list[tuple[str, ...]] = []
    for group in groups:
        if fits(current + group):
            current += group
            continue
        if current:
            blocks.append(tuple(current))
            current = []
        for key in group:
            if current and not fits([*current, key]):
                blocks.append(tuple(current))
                current = []
            current.append(key)
    blocks.append(tuple(current))
    return blocks


def _block_lines(
    matrix: Matrix,
    paint: Painter,
    cell: int,
    widths: Sequence[int],
    indent: int,
    row_names: str,
) -> list[str]:
    starts = _column_starts(matrix, cell)
    lines = _header_lines(matrix, indent, cell, starts, row_names)
    for rkey in matrix.row_keys:
        row: list[str] = []
        at = 0
        for n, ckey in enumerate(matrix.col_keys):
            row.append(" " * (starts[n] - at))
            row.append(_cell_text(matrix, (rkey, ckey), cell, paint))
            at = starts[n] + cell
        label = _row_label(matrix, rkey, widths)
        lines.append(f"{label:<{indent}}{''.join(row)}".rstrip())
    return lines


def _legend_lines(matrix: Matrix, paint: Painter, width: int) -> list[str]:
    lines = ["legend:"]
    symbol_width = max((len(e.symbol) for e in matrix.legend), default=1)
    for entry in matrix.legend:
        count = f"({counted(entry.cells, 'row')})"
        room = width - 2 - symbol_width - 2 - len(count) - 2
        symbol = paint(f"{entry.symbol:<{symbol_width}}", color=label_color(matrix, entry.label))
        lines.append(f"  {symbol}  {fit(entry.label.text, room)}  {count}")
    if matrix.compared:
        marks = ", ".join(f"{mark} {change}" for change, mark in CHANGE_MARKS.items())
        # Wrapped, not cut: each mark's meaning stays whole in a narrow view.
        lines += textwrap.wrap(
            f"{marks} against the baseline",
            width,
            initial_indent="  ",
            subsequent_indent="    ",
            break_on_hyphens=False,
        )
    return lines


def _probe_lines(matrix: Matrix, paint: Painter, width: int) -> list[str]:
    if not matrix.probes:
        return []
    name_width = min(max(len(p.id) for p in matrix.probes), 40)
    symbol_width = max(len(matrix.symbol(p.label)) for p in matrix.probes) + (
        1 if matrix.compared else 0
    )
    lines = [f"edge probes ({len(matrix.probes)}):"]
    for probe in matrix.probes:
        symbol = matrix.symbol(probe.label)
        mark = CHANGE_MARKS[probe.change] if probe.change else ""
        head = f"  {fit(probe.id, name_width):<{name_width}}  "
        pad = " " * (symbol_width - len(symbol) - len(mark))
        room = width - len(head) - symbol_width - 2
        styled = paint(symbol, color=label_color(matrix, probe.label)) + (
            paint(mark, color=ERROR_COLOR, bold=True) if mark else ""
        )
        lines.append(f"{head}{styled}{pad}  {fit(probe.reason, room)}")
    return lines


def _transition_text(matrix: Matrix, t: Transition) -> str:
    def side(label: Label | None) -> str:
        return "none" if label is None else matrix.symbol(label)

    if t.change == "changed" and t.old == t.new:
        head = f"{side(t.new)} unchanged, other fields moved"
    elif t.change == "changed":
        head = f"{side(t.old)} -> {side(t.new)}"
    else:
        head = f"{t.change} {side(t.new if t.change == 'added' else t.old)}"
    return head


def _change_lines(
    matrix: Matrix, width: int, patterns: dict[tuple[str, ...], list[str]] | None
) -> list[str]:
    if not matrix.compared:
        return []
    moved = matrix.changed()
    if not moved:
        return ["no changes against the baseline"]
    lines = [fit(f"changes against the baseline ({counted(len(moved), 'row')}):", width)]
    for t in matrix.transitions:
        head = f"  {_transition_text(matrix, t)}: {counted(len(t.ids), 'row')}"
        lines.append(fit(head, width))
        shown = (patterns or {}).get(t.ids) or [*t.ids[:MAX_TRANSITION_IDS]]
        more = len(t.ids) - MAX_TRANSITION_IDS if patterns is None or t.ids not in patterns else 0
        for item in shown:
            lines.append(fit(f"    {item}", width))
        if more > 0:
            lines.append(f"    and {more} more")
    return lines


def _note_lines(matrix: Matrix, width: int) -> list[str]:
    """What the declared invariances collapsed (or left whole), wrapped to `width`."""
    lines: list[str] = []
    for note in matrix.notes:
        indent = " " * (len(note) - len(note.lstrip()))
        lines += textwrap.wrap(note, width, initial_indent="", subsequent_indent=indent + "  ")
    return lines


def render_matrix_text(
    matrix: Matrix,
    *,
    paint: Painter | None = None,
    width: int = WIDTH,
    patterns: dict[tuple[str, ...], list[str]] | None = None,
) -> str:
    """The whole view of one category. `patterns` maps a transition's ids to the row
    patterns that describe them (the review's pattern synthesis), else ids are listed."""
    paint = paint or Painter()
    title = (
        f"{matrix.category}: {matrix.shows} per row; {counted(matrix.total_rows, 'row')} "
        f"({matrix.grid_rows} in the grid, {counted(len(matrix.probes), 'edge probe')})"
    )
    lines = [
        fit(title, width),
        *_note_lines(matrix, width),
        *_grid_lines(matrix, paint, width),
        "",
        *_legend_lines(matrix, paint, width),
    ]
    probes = _probe_lines(matrix, paint, width)
    if probes:
        lines += ["", *probes]
    changes = _change_lines(matrix, width, patterns)
    if changes:
        lines += ["", *changes]
    return "\n".join(lines) + "\n"
