"""A check outcome as a Markdown summary (`--format markdown`, `--summary FILE`): a table of
the categories, the change groups as a table, then every unexpected and missing item. Text
taken from rows (ids, values, messages) is escaped, so a value never becomes markup; values
are whole, a long one folded in a `<details>` element."""

from __future__ import annotations

import html
import re

from routectl.review.compare import CheckOutcome
from routectl.review.groups import ChangeGroup, SignatureField
from routectl.review.report import (
    group_rows_text,
    group_title,
    group_verdict,
    problems,
    show_field,
    summary_line,
)

# Longer texts are folded (`<details>`): a table stays readable, nothing is cut.
FOLD_CHARS = 120

# The punctuation that can start inline markup, HTML or an entity, or split a table cell
# (CommonMark lets a backslash escape any ASCII punctuation).
MARKUP = re.compile(r"([\\`*_\[\]<>|~!#&])")


def escape(text: str) -> str:
    """`text` as literal Markdown inline text (newlines become spaces)."""
    return MARKUP.sub(r"\\\1", " ".join(text.splitlines()))


def code(text: str) -> str:
    """`text` as a code span: a fence longer than any backtick run in it, and `|` escaped
    (GitHub splits table cells on it even inside code spans)."""
    text = " ".join(text.splitlines())
    run = max((len(m) for m in re.findall(r"`+", text)), default=0)
    pad = " " if run else ""
    fence = "`" * (run + 1)
    return f"{fence}{pad}{text.replace('|', chr(92) + '|')}{pad}{fence}"


def html_text(text: str) -> str:
    """`text` as HTML text that also survives a table cell (`|`) and one line."""
    return html.escape(" ".join(text.splitlines())).replace("|", "&#124;")


def _head(text: str, limit: int = FOLD_CHARS) -> str:
    cut = text[:limit].rsplit(" ", 1)[0] if len(text) > limit else text
    return f"{cut} (continued)"


def field_cell(field: SignatureField) -> str:
    """A field change, whole: a code span, or folded in `<details>` when long (inside an
    HTML element Markdown is not read, so it is escaped as HTML)."""
    text = show_field(field, full=True)
    if len(text) <= FOLD_CHARS:
        return code(text)
    return (
        f"<details><summary><code>{html_text(field.shown_path)}</code> "
        f"({len(text):,} characters)</summary><code>{html_text(text)}</code></details>"
    )


def problem_item(text: str) -> str:
    """One unexpected or missing item as a list item, folded when long."""
    if len(text) <= 2 * FOLD_CHARS:  # a list item has the page's width
        return f"- {escape(text)}"
    return f"- <details><summary>{html_text(_head(text))}</summary>{html_text(text)}</details>"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def _rows(group: ChangeGroup) -> list[str]:
    return list(group.patterns) if group.patterns is not None else [group_rows_text(group)]


def render_markdown(outcome: CheckOutcome, *, command: str = "check") -> str:
    """The summary of one run of `routectl <command>`."""
    verdict_word = "ok" if outcome.ok else "FAILED"
    lines = [f"## routectl {command}: {verdict_word}", "", escape(summary_line(outcome)), ""]
    lines.extend(
        _table(
            ["category", "rows", "changed", "added", "removed", "verdict"],
            [
                [
                    escape(v.name),
                    str(v.rows),
                    str(len(v.comparison.changed)),
                    str(len(v.comparison.added)),
                    str(len(v.comparison.removed)),
                    "ok" if v.ok else "**FAILED**",
                ]
                for v in outcome.categories.values()
            ],
        )
    )
    groups = [(v, g) for v in outcome.categories.values() for g in v.groups]
    if groups:
        lines.extend(["", "### Change groups", ""])
        lines.extend(
            _table(
                ["change", "rows", "pattern", "verdict"],
                [
                    [
                        "<br>".join(field_cell(f) for f in g.fields) or escape(group_title(g)),
                        str(len(g.row_ids)),
                        "<br>".join(code(p) for p in _rows(g)),
                        escape(group_verdict(v, g)),
                    ]
                    for v, g in groups
                ],
            )
        )
    found = problems(outcome)
    if found:
        lines.extend(["", "### Unexpected and missing", ""])
        lines.extend(problem_item(p) for p in found)
    return "\n".join(lines) + "\n"
