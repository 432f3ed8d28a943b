"""Rendering a check outcome: text for people (one block per change group), JSON (schema'd,
stable) for machines, GitHub workflow commands for CI annotations (one per group); Markdown
summaries live in `routectl.review.markdown`. Renderers return text; the CLI prints it."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from routectl.io.schemas import SCHEMA_VERSION, schema_violation
from routectl.io.terminal import ERROR_COLOR, OK_COLOR, Painter, counted
from routectl.review.compare import REORDERED, CategoryVerdict, CheckOutcome, FieldChange
from routectl.review.groups import (
    ChangeCluster,
    ChangeGroup,
    SignatureField,
    cluster_groups,
    general_path,
)
from routectl.review.patterns import describe
from routectl.review.snapshot import SnapshotError, dump_json

MAX_FIELD_CHANGES = 20  # default --max-fields: per change group, in text
MAX_ROWS = 50  # default --max-rows: ids shown per group no patterns describe, in text
MAX_ANNOTATIONS = 10  # GitHub shows 10 annotations of a kind per step
MAX_VALUE_CHARS = 120
APPLIED = (
    "stale expected changes: every missing change is already in the retained snapshots (the "
    "file was applied, e.g. by check --update): remove the file or its entries "
    "(--write-expected FILE --prune drops them)"
)
# diff's baseline is another ref's own rows, not the retained snapshots.
APPLIED_IN_BASELINE = (
    "stale expected changes: every missing change is already in the baseline: remove the "
    "file or its entries (--write-expected FILE --prune drops them)"
)


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
        "unstated": {
            q(i): [f.to_json() for f in changes]
            for i, changes in sorted(verdict.unexpected_fields.items())
        },
        "groups": [g.to_json() for g in verdict.groups],
        "invariances": [b.to_json() for b in verdict.broken],
    }


def build_report(outcome: CheckOutcome) -> dict[str, Any]:
    unknown = [v.q(i) for v in outcome.categories.values() for i in v.unknown]
    return {
        "schema_version": SCHEMA_VERSION,
        "ok": outcome.ok,
        "categories": {name: category_report(v) for name, v in outcome.categories.items()},
        "stale": sorted(outcome.stale),
        "unknown": sorted([*unknown, *outcome.unattributed]),
        "missing_stated": [m.to_json() for m in outcome.missing_stated],
    }


def render_json(report: Mapping[str, Any]) -> str:
    problem = schema_violation("report", report)
    if problem is not None:
        raise SnapshotError(f"the report violates its schema: {problem}")
    return dump_json(report)


# --- text ----------------------------------------------------------------------------------


def show_value(value: Any, full: bool = False) -> str:
    """A value as JSON text; in terminal text (not `full`) cut to MAX_VALUE_CHARS (`--full`
    shows it whole; JSON, Markdown, annotations and HTML always do)."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if full or len(text) <= MAX_VALUE_CHARS:
        return text
    return text[: MAX_VALUE_CHARS - 3] + "..."


def show_change(change: FieldChange, full: bool = False) -> str:
    path = change.path or "(row)"
    if change.kind == REORDERED:
        order = f": {show_value(change.old, full)} -> {show_value(change.new, full)}"
        return f"order of {path} changed" + (order if full else "")
    if change.kind == "added":
        return f"{path}: added {show_value(change.new, full)}"
    if change.kind == "removed":
        return f"{path}: removed {show_value(change.old, full)}"
    return f"{path}: {show_value(change.old, full)} -> {show_value(change.new, full)}"


def _alarm(s: Painter, text: str) -> str:
    """A word that fails the run: bold red."""
    return s(text, color=ERROR_COLOR, bold=True)


def group_verdict(verdict: CategoryVerdict, group: ChangeGroup | ChangeCluster) -> str:
    """`unexpected`, `expected` (with the reasons given, when one), or the split."""
    ids = group.row_ids
    bad = sum(1 for i in ids if i in verdict.unexpected_set)
    if bad == len(ids):
        return "unexpected"
    if bad:
        return f"{len(ids) - bad} expected, {bad} unexpected"
    reasons = {r for i in ids for r in verdict.reasons.get(i, ())}
    return "expected" + (f": {next(iter(reasons))}" if len(reasons) == 1 else "")


def unstated_paths(verdict: CategoryVerdict, group: ChangeGroup | ChangeCluster) -> set[str]:
    """The generalised paths of a group's changes no stated field covers."""
    return {
        general_path(c.path) for i in group.row_ids for c in verdict.unexpected_fields.get(i, ())
    }


def show_field(field: SignatureField, full: bool = False) -> str:
    low, high = field.places
    where = (
        ""
        if high == 1
        else (f" ({high} places per row)" if low == high else f" ({low}-{high} places per row)")
    )
    change = FieldChange(field.shown_path, field.kind, field.old, field.new)
    return show_change(change, full) + where


def group_title(group: ChangeGroup) -> str:
    rows = counted(len(group.row_ids), "row")
    return f"{group.kind} {rows}" + (f", {group.label}" if group.label else "") + _breaks(group)


def _breaks(group: ChangeGroup) -> str:
    """`, breaks invariance NAME`: the declared invariances the group's change breaks."""
    if not group.breaks:
        return ""
    word = "invariance" if len(group.breaks) == 1 else "invariances"
    return f", breaks {word} {', '.join(group.breaks)}"


def break_lines(verdict: CategoryVerdict, s: Painter, full: bool = False) -> list[str]:
    """Each broken invariance of a category: what it states, its first pair of rows and
    the declared field that differs between them (`InvarianceBreak.change`)."""
    lines = []
    for b in verdict.broken:
        lines.append(f"  {_alarm(s, 'broken')} {b.text().replace(' broken (', ' (', 1)}")
        lines.append(f"    {show_change(b.change, full)}")
    return lines


def row_lines(ids: Sequence[str], patterns: Sequence[str] | None, max_rows: int) -> list[str]:
    """The rows of a group: its patterns, else its ids (the first `max_rows`, 0 = all)."""
    if patterns is not None:
        return [f"rows {p}" for p in patterns]
    shown = ids if not max_rows else ids[:max_rows]
    lines = [f"row {i}" for i in shown]
    if len(ids) > len(shown):
        lines.append(f"... and {len(ids) - len(shown)} more")
    return lines


def _styled(s: Painter, mark: str) -> str:
    return _alarm(s, mark) if "unexpected" in mark else s(mark, color=OK_COLOR)


def _field_lines(
    fields: Sequence[SignatureField],
    unstated: set[str],
    s: Painter,
    max_fields: int,
    indent: str,
    full: bool = False,
) -> list[str]:
    shown = fields if not max_fields else fields[:max_fields]
    lines = []
    for f in shown:
        flag = f" {s('<- not stated', color=ERROR_COLOR)}" if f.path in unstated else ""
        lines.append(f"{indent}{show_field(f, full)}{flag}")
    if len(fields) > len(shown):
        lines.append(f"{indent}... {counted(len(fields) - len(shown), 'more field change')}")
    return lines


def _group_text(
    verdict: CategoryVerdict,
    group: ChangeGroup,
    s: Painter,
    max_fields: int,
    max_rows: int,
    full: bool = False,
) -> list[str]:
    lines = [f"  {group_title(group)} ({_styled(s, group_verdict(verdict, group))})"]
    unstated = unstated_paths(verdict, group)
    lines.extend(_field_lines(group.fields, unstated, s, max_fields, "    ", full))
    lines.extend(f"    {line}" for line in row_lines(group.qualified_ids, group.patterns, max_rows))
    return lines


def _child_text(
    verdict: CategoryVerdict,
    cluster: ChangeCluster,
    above: str,
    s: Painter,
    max_fields: int,
    max_rows: int,
    indent: str,
    full: bool = False,
) -> list[str]:
    """One cluster below another: `+ ...` with what it adds; its verdict only when it is
    not the verdict `above`."""
    mark = group_verdict(verdict, cluster)
    said = "" if mark == above else f" ({_styled(s, mark)})"
    unstated = unstated_paths(verdict, cluster)
    group = cluster.group
    if group is not None:
        rows = (
            [f"row {group.qualified_ids[0]}"]
            if len(group.row_ids) == 1
            else row_lines(group.qualified_ids, group.patterns, max_rows)
        )
        if len(rows) == 1 and len(cluster.fields) == 1:  # one line says it all
            (f,) = cluster.fields
            flag = f" {s('<- not stated', color=ERROR_COLOR)}" if f.path in unstated else ""
            return [f"{indent}+ {rows[0]}{said}{_breaks(group)}: {show_field(f, full)}{flag}"]
        lines = [f"{indent}+ {counted(len(group.row_ids), 'row')}{_breaks(group)}{said}"]
        lines.extend(_field_lines(cluster.fields, unstated, s, max_fields, indent + "  ", full))
        lines.extend(f"{indent}  {line}" for line in rows)
        return lines
    head = f"{counted(len(cluster.row_ids), 'row')} in {len(cluster.groups)} groups"
    lines = [f"{indent}+ {head}{said}, also:"]
    lines.extend(_field_lines(cluster.fields, unstated, s, max_fields, indent + "  ", full))
    for child in cluster.children:
        lines.extend(
            _child_text(verdict, child, mark, s, max_fields, max_rows, indent + "  ", full)
        )
    return lines


def _cluster_text(
    verdict: CategoryVerdict,
    cluster: ChangeCluster,
    s: Painter,
    max_fields: int,
    max_rows: int,
    full: bool = False,
) -> list[str]:
    """A cluster of groups: the changes they share once, then what each adds."""
    if cluster.group is not None:
        return _group_text(verdict, cluster.group, s, max_fields, max_rows, full)
    mark = group_verdict(verdict, cluster)
    rows = counted(len(cluster.row_ids), "row")
    lines = [f"  changed {rows} in {len(cluster.groups)} groups ({_styled(s, mark)})"]
    unstated = unstated_paths(verdict, cluster)
    lines.extend(_field_lines(cluster.fields, unstated, s, max_fields, "    ", full))
    for child in cluster.children:
        lines.extend(_child_text(verdict, child, mark, s, max_fields, max_rows, "    ", full))
    return lines


def _missing_text(verdict: CategoryVerdict, s: Painter, max_rows: int) -> list[str]:
    lines = []
    listed = [i for i in verdict.missing if i not in verdict.unknown]
    if listed:
        found = describe(listed).patterns
        patterns = None if found is None else [verdict.q(p) for p in found]
        lines.append(
            f"  {_alarm(s, 'missing')} "
            f"{counted(len(listed), 'row')} (expected to move, did not change)"
        )
        lines.extend(
            f"    {line}" for line in row_lines([verdict.q(i) for i in listed], patterns, max_rows)
        )
    for row_id in verdict.unknown:
        lines.append(f"  {_alarm(s, 'missing')} {verdict.q(row_id)} (unknown id)")
    return lines


def category_line(verdict: CategoryVerdict, s: Painter) -> str:
    c = verdict.comparison
    parts = [f"{len(c.changed)} changed", f"{len(c.added)} added", f"{len(c.removed)} removed"]
    expected = len(c.moved) - len(verdict.unexpected)
    if expected:
        parts.append(f"{expected} expected")
    status = s("ok", color=OK_COLOR) if verdict.ok else _alarm(s, "FAILED")
    summary = ", ".join(parts) if (c.moved or verdict.missing) else "no changes"
    if verdict.broken:
        summary += ", " + counted(len(verdict.broken), "broken invariance")
    return f"{s(verdict.name, bold=True)}: {status}: {counted(verdict.rows, 'row')}, {summary}"


def _category_text(
    verdict: CategoryVerdict, s: Painter, max_fields: int, max_rows: int, full: bool = False
) -> list[str]:
    lines = [category_line(verdict, s), *break_lines(verdict, s, full)]
    if not verdict.comparison.baseline_present:
        lines.append("  no baseline snapshot of this category: every row is added")
    for cluster in cluster_groups(verdict.groups):
        lines.extend(_cluster_text(verdict, cluster, s, max_fields, max_rows, full))
    for group in verdict.groups:
        if group.kind != "changed":
            lines.extend(_group_text(verdict, group, s, max_fields, max_rows, full))
    lines.extend(_missing_text(verdict, s, max_rows))
    return lines


def summary_line(outcome: CheckOutcome) -> str:
    unexpected = sum(len(v.unexpected) for v in outcome.categories.values())
    missing = (
        sum(len(v.missing) for v in outcome.categories.values())
        + len(outcome.unattributed)
        + len(outcome.missing_stated)
    )
    expected = sum(len(v.comparison.moved) - len(v.unexpected) for v in outcome.categories.values())
    scope = (
        f"{counted(len(outcome.categories), 'category', 'categories')}, "
        f"{counted(outcome.rows, 'row')}"
    )
    if outcome.ok:
        return f"ok: {scope}, {counted(expected, 'expected change')}"
    problems = [f"{unexpected} unexpected", f"{missing} missing"]
    broken = sum(len(v.broken) for v in outcome.categories.values())
    if broken:
        problems.append(counted(broken, "broken invariance"))
    if outcome.stale:
        problems.append(counted(len(outcome.stale), "stale category", "stale categories"))
    return f"FAILED: {', '.join(problems)} ({scope})"


def render_text(
    outcome: CheckOutcome,
    *,
    color: bool = False,
    max_fields: int = MAX_FIELD_CHANGES,
    max_rows: int = MAX_ROWS,
    quiet: bool = False,
    full: bool = False,
    command: str = "check",
) -> str:
    """Per category its verdict line and (unless `quiet`) its change groups and missing
    items; then the run's problems and its final line. `max_fields` caps the fields shown
    per group, `max_rows` the ids of a group no patterns describe (0 = no cap); `full` shows
    long values whole; `command` names the run (a stale file is explained by its baseline)."""
    s = Painter(color)
    lines: list[str] = []
    for verdict in outcome.categories.values():
        lines.extend(
            [category_line(verdict, s)]
            if quiet
            else _category_text(verdict, s, max_fields, max_rows, full)
        )
    if not quiet:
        for name in outcome.stale:
            lines.append(
                f"{_alarm(s, 'stale')} {name}: a baseline snapshot of a "
                f"category that is no longer listed"
            )
        for listed in outcome.unattributed:
            lines.append(f"{_alarm(s, 'missing')} {listed} (unknown id: no category has this row)")
        lines.extend(f"{_alarm(s, 'missing')} {item.text()}" for item in outcome.missing_stated)
    if outcome.applied:
        lines.append(APPLIED if command == "check" else APPLIED_IN_BASELINE)
    last = summary_line(outcome)
    lines.append(s(last, color=OK_COLOR if outcome.ok else ERROR_COLOR, bold=not outcome.ok))
    return "\n".join(lines) + "\n"


# --- GitHub --------------------------------------------------------------------------------


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def group_rows_text(group: ChangeGroup) -> str:
    """A group's rows in one phrase: its patterns, else its first id and how many more."""
    if group.patterns is not None:
        return ", ".join(group.patterns)
    ids = group.qualified_ids
    return ids[0] + (f" and {len(ids) - 1} more" if len(ids) > 1 else "")


def group_problem(verdict: CategoryVerdict, group: ChangeGroup) -> str | None:
    """One line for a group with unexpected rows (None when every row is expected)."""
    bad = [i for i in group.row_ids if i in verdict.unexpected_set]
    if not bad:
        return None
    rows = counted(len(bad), "row")
    scope = "" if len(bad) == len(group.row_ids) else f" (of {len(group.row_ids)})"
    if group.kind != "changed":
        return f"{rows}{scope} {group.kind} unexpectedly ({group.label}): {group_rows_text(group)}"
    unstated = unstated_paths(verdict, group)
    shown = [f for f in group.fields if not unstated or f.path in unstated]
    more = f" (+{len(shown) - 1} more)" if len(shown) > 1 else ""
    what = "not stated" if unstated else "changed unexpectedly"
    return (
        f"{rows}{scope} {what}: {show_field(shown[0], True)}{more}: {group_rows_text(group)}"
        + _breaks(group)
    )


def problems(outcome: CheckOutcome) -> list[str]:
    """Every problem of a failing outcome, one line each: a group once, not once per row."""
    out = [f"stale snapshot category {name}: it is no longer listed" for name in outcome.stale]
    for v in outcome.categories.values():
        out.extend(f"{b.text()}: {show_change(b.change, True)}" for b in v.broken)
        out.extend(p for p in (group_problem(v, g) for g in v.groups) if p is not None)
        for row_id in v.missing:
            why = "names no row (unknown id)" if row_id in v.unknown else "did not change"
            out.append(f"{v.q(row_id)} is listed as an expected change but {why}")
    out.extend(
        f"{listed} is listed as an expected change but names no row (unknown id)"
        for listed in outcome.unattributed
    )
    out.extend(f"expected-changes {item.text()}" for item in outcome.missing_stated)
    return out


def render_github(
    outcome: CheckOutcome, *, command: str = "check", max_errors: int = MAX_ANNOTATIONS
) -> str:
    """At most `max_errors` `::error` lines (one per change group), then one `::notice`
    summary, titled with the command that produced them."""
    found = problems(outcome)
    title = f"routectl {command}"
    lines = [f"::error title={title}::{escape_data(p)}" for p in found[:max_errors]]
    shown = (
        f"; {len(found) - max_errors} more not shown (see the JSON report)"
        if len(found) > max_errors
        else ""
    )
    lines.append(f"::notice title={title}::{escape_data(summary_line(outcome) + shown)}")
    return "\n".join(lines) + "\n"


class Format(StrEnum):
    """The output formats of a verdict (`--format`): each has one renderer in RENDERERS."""

    TEXT = "text"
    JSON = "json"
    GITHUB = "github"
    MARKDOWN = "markdown"


FORMATS = tuple(f.value for f in Format)


@dataclass(frozen=True)
class RenderOptions:
    """What a renderer may read besides the outcome; each format reads what it needs."""

    command: str = "check"
    color: bool = False
    quiet: bool = False
    max_rows: int = MAX_ROWS
    max_fields: int = MAX_FIELD_CHANGES
    full: bool = False


def _text(outcome: CheckOutcome, o: RenderOptions) -> str:
    return render_text(
        outcome,
        color=o.color,
        quiet=o.quiet,
        max_rows=o.max_rows,
        max_fields=o.max_fields,
        full=o.full,
        command=o.command,
    )


def _json(outcome: CheckOutcome, o: RenderOptions) -> str:
    return render_json(build_report(outcome))


def _github(outcome: CheckOutcome, o: RenderOptions) -> str:
    return render_github(outcome, command=o.command)


def _markdown(outcome: CheckOutcome, o: RenderOptions) -> str:
    # Imported here: the Markdown renderer builds on this module's phrases.
    from routectl.review.markdown import render_markdown

    return render_markdown(outcome, command=o.command)


# One entry per format: a new format is a new entry.
RENDERERS: dict[Format, Callable[[CheckOutcome, RenderOptions], str]] = {
    Format.TEXT: _text,
    Format.JSON: _json,
    Format.GITHUB: _github,
    Format.MARKDOWN: _markdown,
}


def render(outcome: CheckOutcome, fmt: str, options: RenderOptions | None = None) -> str:
    """The outcome in format `fmt` (json is validated against report.schema.json)."""
    try:
        renderer = RENDERERS[Format(fmt)]
    except ValueError:
        raise ValueError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})") from None
    return renderer(outcome, options or RenderOptions())
