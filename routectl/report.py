"""Rendering a check outcome: text for people, JSON (schema'd, stable) for machines, GitHub
workflow commands for CI annotations. Renderers return text; the CLI prints it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from routectl.compare import CategoryVerdict, CheckOutcome, FieldChange
from routectl.snapshot import SCHEMA_VERSION, SnapshotError, dump_json, schema_violation

MAX_FIELD_CHANGES = 20  # per changed row, in text
MAX_ROWS = 50  # per list (changed, added, removed, missing) and category, in text
MAX_ANNOTATIONS = 10  # GitHub shows 10 annotations of a kind per step
MAX_VALUE_CHARS = 120
COLOR_CHOICES = ("auto", "always", "never")
FORMATS = ("text", "json", "github")


def use_color(choice: str, environ: Mapping[str, str], isatty: bool) -> bool:
    """`always`/`never` win over everything; `auto` = a terminal and NO_COLOR empty or
    unset."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    return isatty and not environ.get("NO_COLOR")


# --- JSON ----------------------------------------------------------------------------------

def category_report(verdict: CategoryVerdict) -> dict[str, Any]:
    c = verdict.comparison
    q = verdict.q
    return {
        "rows": verdict.rows,
        "changed": sorted(q(i) for i in c.changed),
        "added": sorted(q(i) for i in c.added),
        "removed": sorted(q(i) for i in c.removed),
        "unexpected": sorted(q(i) for i in verdict.unexpected),
        "missing": sorted(q(i) for i in verdict.missing),
        "diffs": {q(i): [f.to_json() for f in changes] for i, changes in c.changed.items()},
    }


def build_report(outcome: CheckOutcome) -> dict[str, Any]:
    unknown = [v.q(i) for v in outcome.categories.values() for i in v.unknown]
    return {
        "schema_version": SCHEMA_VERSION,
        "ok": outcome.ok,
        "categories": {name: category_report(v) for name, v in outcome.categories.items()},
        "stale": sorted(outcome.stale),
        "unknown": sorted([*unknown, *outcome.unattributed]),
    }


def render_json(report: Mapping[str, Any], snapshot_dir: Path | None = None) -> str:
    problem = schema_violation("report", report, snapshot_dir)
    if problem is not None:
        raise SnapshotError(f"the report violates its schema: {problem}")
    return dump_json(report)


# --- text ----------------------------------------------------------------------------------

def show_value(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 3] + "..."


def show_change(change: FieldChange) -> str:
    path = change.path or "(row)"
    if change.kind == "added":
        return f"{path}: added {show_value(change.new)}"
    if change.kind == "removed":
        return f"{path}: removed {show_value(change.old)}"
    return f"{path}: {show_value(change.old)} -> {show_value(change.new)}"


class _Style:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, **style: Any) -> str:
        return click.style(text, **style) if self.color else text


def _counted(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {plural or word + 's'}"


def _mark(verdict: CategoryVerdict, row_id: str, s: _Style) -> str:
    entry = verdict.expected.get(row_id)
    if entry is None:
        return s("unexpected", fg="red", bold=True)
    return s("expected", fg="green") + (f": {entry.reason}" if entry.reason else "")


def _category_text(verdict: CategoryVerdict, s: _Style, max_fields: int, max_rows: int
                   ) -> list[str]:
    c = verdict.comparison
    parts = [f"{len(c.changed)} changed", f"{len(c.added)} added", f"{len(c.removed)} removed"]
    if verdict.expected:
        parts.append(f"{len(verdict.expected)} expected")
    status = s("ok", fg="green") if verdict.ok else s("FAILED", fg="red", bold=True)
    summary = ", ".join(parts) if (c.moved or verdict.missing) else "no changes"
    lines = [f"{s(verdict.name, bold=True)}: {status}: {_counted(verdict.rows, 'row')}, "
             f"{summary}"]
    if not c.baseline_present:
        lines.append("  no baseline snapshot of this category: every row is added")
    for n, row_id in enumerate(c.changed):
        if n == max_rows:
            lines.append(f"  ... {_counted(len(c.changed) - max_rows, 'more changed row')}")
            break
        lines.append(f"  changed {verdict.q(row_id)} ({_mark(verdict, row_id, s)})")
        changes = c.changed[row_id]
        lines.extend(f"    {show_change(f)}" for f in changes[:max_fields])
        if len(changes) > max_fields:
            lines.append(f"    ... {_counted(len(changes) - max_fields, 'more field change')}")
    for word, ids in (("added", c.added), ("removed", c.removed)):
        for n, row_id in enumerate(ids):
            if n == max_rows:
                lines.append(f"  ... {_counted(len(ids) - max_rows, f'more {word} row')}")
                break
            lines.append(f"  {word} {verdict.q(row_id)} ({_mark(verdict, row_id, s)})")
    for n, row_id in enumerate(verdict.missing):
        if n == max_rows:
            lines.append(f"  ... {_counted(len(verdict.missing) - max_rows, 'more missing id')}")
            break
        why = ("unknown id" if row_id in verdict.unknown
               else "listed as expected but did not change")
        lines.append(f"  {s('missing', fg='red', bold=True)} {verdict.q(row_id)} ({why})")
    return lines


def summary_line(outcome: CheckOutcome) -> str:
    unexpected = sum(len(v.unexpected) for v in outcome.categories.values())
    missing = (sum(len(v.missing) for v in outcome.categories.values())
               + len(outcome.unattributed))
    expected = sum(len(v.comparison.moved & v.expected.keys())
                   for v in outcome.categories.values())
    scope = (f"{_counted(len(outcome.categories), 'category', 'categories')}, "
             f"{_counted(outcome.rows, 'row')}")
    if outcome.ok:
        return f"ok: {scope}, {_counted(expected, 'expected change')}"
    problems = [f"{unexpected} unexpected", f"{missing} missing"]
    if outcome.stale:
        problems.append(_counted(len(outcome.stale), "stale category", "stale categories"))
    return f"FAILED: {', '.join(problems)} ({scope})"


def render_text(outcome: CheckOutcome, *, color: bool = False,
                max_fields: int = MAX_FIELD_CHANGES, max_rows: int = MAX_ROWS) -> str:
    s = _Style(color)
    lines: list[str] = []
    for verdict in outcome.categories.values():
        lines.extend(_category_text(verdict, s, max_fields, max_rows))
    for name in outcome.stale:
        lines.append(f"{s('stale', fg='red', bold=True)} {name}: a baseline snapshot of a "
                     f"category that is no longer listed")
    for listed in outcome.unattributed:
        lines.append(f"{s('missing', fg='red', bold=True)} {listed} (unknown id: no category "
                     f"has this row)")
    last = summary_line(outcome)
    lines.append(s(last, fg="green" if outcome.ok else "red", bold=not outcome.ok))
    return "\n".join(lines) + "\n"


# --- GitHub --------------------------------------------------------------------------------

def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _problems(outcome: CheckOutcome) -> list[str]:
    out = [f"stale snapshot category {name}: it is no longer listed" for name in outcome.stale]
    for v in outcome.categories.values():
        c = v.comparison
        for row_id in v.unexpected:
            if row_id in c.changed:
                changes = c.changed[row_id]
                more = f" (+{len(changes) - 1} more)" if len(changes) > 1 else ""
                out.append(f"{v.q(row_id)} changed unexpectedly: {show_change(changes[0])}"
                           f"{more}")
            else:
                word = "added" if row_id in c.added else "removed"
                out.append(f"{v.q(row_id)} {word} unexpectedly")
        for row_id in v.missing:
            why = ("names no row (unknown id)" if row_id in v.unknown
                   else "did not change")
            out.append(f"{v.q(row_id)} is listed as an expected change but {why}")
    out.extend(f"{listed} is listed as an expected change but names no row (unknown id)"
               for listed in outcome.unattributed)
    return out


def render_github(outcome: CheckOutcome, *, max_errors: int = MAX_ANNOTATIONS) -> str:
    """At most `max_errors` `::error` lines, then one `::notice` summary."""
    problems = _problems(outcome)
    lines = [f"::error title=routectl check::{escape_data(p)}" for p in problems[:max_errors]]
    shown = (f"; {len(problems) - max_errors} more not shown (see the JSON report)"
             if len(problems) > max_errors else "")
    lines.append(f"::notice title=routectl check::{escape_data(summary_line(outcome) + shown)}")
    return "\n".join(lines) + "\n"



def render(outcome: CheckOutcome, fmt: str, *, color: bool = False,
           snapshot_dir: Path | None = None) -> str:
    """The outcome in one of FORMATS (json is validated against report.schema.json)."""
    if fmt == "json":
        return render_json(build_report(outcome), snapshot_dir)
    if fmt == "github":
        return render_github(outcome)
    if fmt == "text":
        return render_text(outcome, color=color)
    raise ValueError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
