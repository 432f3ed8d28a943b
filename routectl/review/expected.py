"""Expected changes that state the change: reading the file, matching stated entries to rows,
the verdict rules, and writing the actual changes back in either form.

A stated entry `{"rows": PATTERN, "fields": {PATH: [OLD, NEW]}, "reason"}` expects exactly the
rows its patterns match (`routectl.review.patterns`), and, with `fields`, exactly those field
changes in them. The rules (a row is judged with every entry that matches it):

- a changed row matched by an entry without `fields` is expected;
- a changed row matched only by entries with `fields` is expected when each of its field
  changes is covered by a stated field (path, `[*]` matching any list index, and both
  values); an uncovered change makes it unexpected and is named;
- a matched row that did not move is missing; a pattern that matches no row, and a stated
  field that covers no change, are missing items;
- two entries stating different [OLD, NEW] for one path of one row are an input error.
"""

from __future__ import annotations

import functools
import json
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from routectl.errors import InputError
from routectl.io.jsonread import QUOTE_CHARS, shorten
from routectl.io.schemas import schema_violation
from routectl.review.compare import (
    CategoryVerdict,
    Comparison,
    ExpectedEntry,
    FieldChange,
    MissingItem,
    parse_expected,
    split_id,
)
from routectl.review.groups import ChangeGroup, canonical
from routectl.review.patterns import check_pattern_size, compile_glob, is_glob
from routectl.review.snapshot import qualified, read_json

EXPECTED_VERSION = 2
# A reason written by --write-expected for the reviewer to replace; CI warns while it stays.
TODO_REASON = "TODO"


def path_regex(path: str) -> re.Pattern[str]:
    """A field path where `[*]` matches any list index."""
    return re.compile(re.escape(path).replace(r"\[\*\]", r"\[[0-9]+\]"))


@dataclass(frozen=True)
class StatedField:
    """PATH: [OLD, NEW] of a stated entry; None stands for the absent side."""

    path: str
    old: Any
    new: Any

    # Computed once per stated field, not on every `covers` call (50,000 entries call it
    # for every change of their rows). A frozen dataclass still holds a cached_property.
    @functools.cached_property
    def regex(self) -> re.Pattern[str]:
        return path_regex(self.path)

    @functools.cached_property
    def _values(self) -> tuple[str, str]:
        return canonical(self.old), canonical(self.new)

    def values(self) -> tuple[str, str]:
        return self._values

    def covers(self, change: FieldChange) -> bool:
        return (
            self.values() == (canonical(change.old), canonical(change.new))
            and self.regex.fullmatch(change.path) is not None
        )


@dataclass(frozen=True)
class StatedEntry:
    """One stated entry: `rows` as (category or None for bare, bare pattern) pairs; `fields`
    None when the entry states no fields (any change of its rows is expected)."""

    index: int
    listed: str  # the rows as written
    rows: tuple[tuple[str | None, str], ...]
    fields: tuple[StatedField, ...] | None
    reason: str


@dataclass(frozen=True)
class ExpectedChanges:
    """An expected-changes file: id entries (today's forms) and stated entries."""

    ids: tuple[ExpectedEntry, ...] = ()
    stated: tuple[StatedEntry, ...] = ()

    @property
    def reasons(self) -> tuple[str, ...]:
        return (
            *(e.reason for e in self.ids if e.reason is not None),
            *(e.reason for e in self.stated),
        )


def is_todo(reason: str) -> bool:
    return reason.strip().upper().startswith(TODO_REASON)


def document_reasons(data: Any) -> list[str]:
    """The reasons of an expected-changes document of either version, read without judging
    its ids (for the TODO warning, before the categories are known)."""
    items = data.get("changes") if isinstance(data, dict) else data
    return (
        [
            item["reason"]
            for item in items
            if isinstance(item, dict) and isinstance(item.get("reason"), str)
        ]
        if isinstance(items, list)
        else []
    )


def _split_pattern(text: str, categories: Collection[str]) -> tuple[str | None, str]:
    """(category, pattern) as `split_id` does for ids; a pattern without glob characters
    must be a well-formed id."""
    prefix, colon, rest = text.partition(":")
    if colon and prefix in categories:
        category, pattern = prefix, rest
    elif colon and prefix != "edge" and not is_glob(prefix):
        known = ", ".join(sorted(categories)) or "none"
        raise InputError(
            f"unknown category {shorten(prefix)} in row pattern {shorten(text)} (known: {known})"
        )
    else:
        category, pattern = None, text
    if not is_glob(pattern):
        split_id(pattern, ())
    compile_glob(pattern)  # refused patterns fail here, before any replay
    return category, pattern


def _stated_entry(index: int, item: Mapping[str, Any], categories: Collection[str]) -> StatedEntry:
    rows = item["rows"] if isinstance(item["rows"], list) else [item["rows"]]
    if not rows:
        raise InputError('"rows" is an empty list: name the rows this entry expects')
    fields = None
    if "fields" in item:
        for path, pair in item["fields"].items():
            if len(pair) != 2:
                raise InputError(
                    f"field {shorten(path)} states {json.dumps(pair)[:QUOTE_CHARS]}: state "
                    f"[OLD, NEW] "
                    f"(null for the absent side of an added or removed field)"
                )
        fields = tuple(
            StatedField(path, pair[0], pair[1]) for path, pair in sorted(item["fields"].items())
        )
    listed = item["rows"] if isinstance(item["rows"], str) else json.dumps(item["rows"])
    return StatedEntry(
        index, listed, tuple(_split_pattern(r, categories) for r in rows), fields, item["reason"]
    )


def _check_pattern_sizes(items: Any, source: str) -> None:
    for index, item in enumerate(items if isinstance(items, list) else ()):
        texts = item.get("rows", item.get("id")) if isinstance(item, dict) else item
        for text in texts if isinstance(texts, list) else [texts]:
            if isinstance(text, str):
                try:
                    check_pattern_size(text)
                except InputError as exc:
                    raise InputError(f"{source}: [{index}]: {exc}") from None


def parse_document(
    data: Any, categories: Collection[str], *, source: str, snapshot_dir: Path | None = None
) -> ExpectedChanges:
    """Validate an expected-changes document of either version."""
    if (
        isinstance(data, dict)
        and isinstance(data.get("schema_version"), int)
        and data["schema_version"] > EXPECTED_VERSION
    ):
        raise InputError(
            f"{source}: expected-changes schema_version {data['schema_version']} "
            f"is newer than this routectl reads ({EXPECTED_VERSION}): upgrade "
            f"routectl"
        )
    items = data.get("changes") if isinstance(data, dict) else data
    _check_pattern_sizes(items, source)  # before the schema: its regex engine overflows
    problem = schema_violation("expected-changes", data, snapshot_dir)
    if problem is not None or not isinstance(items, list):
        if isinstance(items, list):
            # The id entries' own messages read better than the schema's.
            parse_expected(
                [i for i in items if not (isinstance(i, dict) and "rows" in i)],
                categories,
                source=source,
                snapshot_dir=snapshot_dir,
            )
        raise InputError(f"{source}: {problem}")
    ids = parse_expected(
        [i for i in items if not (isinstance(i, dict) and "rows" in i)],
        categories,
        source=source,
        snapshot_dir=snapshot_dir,
    )
    stated = []
    for index, item in enumerate(items):
        if isinstance(item, dict) and "rows" in item:
            try:
                stated.append(_stated_entry(index, item, categories))
            except InputError as exc:
                raise InputError(f"{source}: [{index}]: {exc}") from None
    return ExpectedChanges(ids, tuple(stated))


def load_expected_changes(
    path: Path, categories: Collection[str], *, snapshot_dir: Path | None = None
) -> ExpectedChanges:
    return parse_document(
        read_json(path, "expected-changes file"),
        categories,
        source=str(path),
        snapshot_dir=snapshot_dir,
    )


# --- matching ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StatedMatch:
    """The rows of one category that a stated entry matches."""

    entry: StatedEntry
    rows: frozenset[str]


@dataclass(frozen=True)
class StatedResolution:
    by_category: Mapping[str, tuple[StatedMatch, ...]]
    judged: tuple[StatedEntry, ...]  # entries with a pattern in a judged category
    missing: tuple[MissingItem, ...]  # patterns that match no row


class _RowsMatching:
    """The ids of a category a pattern matches, each (category, pattern) computed once per
    run: a glob compiled once and run over the category's ids once, a plain id looked up."""

    def __init__(self, known_ids: Callable[[str], Collection[str]]) -> None:
        self._known_ids = known_ids
        self._found: dict[tuple[str, str], frozenset[str]] = {}

    def __call__(self, category: str, pattern: str) -> frozenset[str]:
        key = (category, pattern)
        found = self._found.get(key)
        if found is None:
            ids = self._known_ids(category)
            if is_glob(pattern) or "\\" in pattern:  # a backslash escapes in a glob
                found = frozenset(filter(compile_glob(pattern), ids))
            else:
                found = frozenset((pattern,)) if pattern in ids else frozenset()
            self._found[key] = found
        return found


def resolve_stated(
    entries: Sequence[StatedEntry],
    judged: Sequence[str],
    known_ids: Callable[[str], Collection[str]],
    categories: Sequence[str],
) -> StatedResolution:
    """Each pattern to its category, as `compare.attribute` does for ids: a qualified one to
    its own; a bare one to the one category with a matching row (several: InputError; none:
    the single judged category, else it matches no row)."""
    rows: dict[str, dict[int, set[str]]] = {name: {} for name in judged}
    judged_entries: list[StatedEntry] = []
    missing: list[MissingItem] = []
    matching = _RowsMatching(known_ids)
    for entry in entries:
        in_scope = False
        for category, pattern in entry.rows:
            if category is not None:
                targets = [category]
            else:
                targets = [c for c in categories if matching(c, pattern)]
                if len(targets) > 1:
                    shown = pattern if len(pattern) <= QUOTE_CHARS else "PATTERN"
                    raise InputError(
                        f"row pattern {shorten(pattern)} of expected entry "
                        f"[{entry.index}] matches rows of several categories "
                        f"({', '.join(targets)}): qualify it as "
                        f"CATEGORY:{shown}"
                    )
                if not targets and len(judged) == 1:
                    targets = [judged[0]]
            if not targets:
                in_scope = True
                missing.append(MissingItem(entry.index, pattern, None, "matches no row"))
                continue
            if targets[0] not in rows:
                continue  # a filtered run does not judge other categories
            in_scope = True
            found = matching(targets[0], pattern)
            if not found:
                missing.append(
                    MissingItem(entry.index, qualified(targets[0], pattern), None, "matches no row")
                )
            rows[targets[0]].setdefault(entry.index, set()).update(found)
        if in_scope:
            judged_entries.append(entry)
    by_index = {e.index: e for e in entries}
    return StatedResolution(
        {
            name: tuple(
                StatedMatch(by_index[i], frozenset(found)) for i, found in sorted(matched.items())
            )
            for name, matched in rows.items()
        },
        tuple(judged_entries),
        tuple(missing),
    )


def _check_conflicts(name: str, matches: Sequence[StatedMatch]) -> None:
    stating = [m for m in matches if m.entry.fields]
    if len(stating) < 2:
        return
    claims: dict[tuple[str, str], tuple[tuple[str, str], int]] = {}
    for match in stating:
        assert match.entry.fields is not None
        for row_id in sorted(match.rows):
            for stated in match.entry.fields:
                values = stated.values()
                earlier = claims.setdefault((row_id, stated.path), (values, match.entry.index))
                if earlier[0] != values:
                    raise InputError(
                        f"expected entries [{earlier[1]}] and [{match.entry.index}] state "
                        f"different changes of {stated.path} for row "
                        f"{qualified(name, row_id)}: [{', '.join(earlier[0])}] and "
                        f"[{', '.join(values)}]; keep one"
                    )


def judge_category(
    name: str,
    comparison: Comparison,
    listed: Mapping[str, ExpectedEntry],
    stated: Sequence[StatedMatch],
    groups: tuple[ChangeGroup, ...] = (),
) -> tuple[CategoryVerdict, set[tuple[int, int]]]:
    """The verdict of one category under id entries (`listed`, by row id) and stated
    matches; also the (entry index, field index) pairs of stated fields that covered a
    change here."""
    _check_conflicts(name, stated)
    moved = comparison.moved
    by_row: dict[str, list[StatedEntry]] = defaultdict(list)
    for match in stated:
        for row_id in match.rows:
            by_row[row_id].append(match.entry)
    covered: set[tuple[int, int]] = set()
    unexpected = set(moved - listed.keys() - by_row.keys())
    unexpected_fields: dict[str, tuple[FieldChange, ...]] = {}
    for row_id in sorted(moved & by_row.keys()):
        entries = by_row[row_id]
        changes = comparison.changed.get(row_id, ())
        uncovered = []
        for change in changes:
            hits = [
                (e.index, n)
                for e in entries
                if e.fields is not None
                for n, f in enumerate(e.fields)
                if f.covers(change)
            ]
            covered.update(hits)
            if not hits:
                uncovered.append(change)
        if row_id in listed or any(e.fields is None for e in entries):
            continue
        if uncovered:
            unexpected.add(row_id)
            unexpected_fields[row_id] = tuple(uncovered)
    expected_rows = listed.keys() | by_row.keys()
    missing = tuple(sorted(expected_rows - moved))
    known = comparison.fresh_ids | comparison.baseline_ids
    reasons: dict[str, tuple[str, ...]] = {}
    for row_id in sorted(moved - unexpected):
        found = [listed[row_id].reason] if row_id in listed else []
        found.extend(e.reason for e in by_row.get(row_id, ()))
        reasons[row_id] = tuple(dict.fromkeys(r for r in found if r))
    verdict = CategoryVerdict(
        name=name,
        rows=len(comparison.fresh_ids),
        comparison=comparison,
        expected=dict(listed),
        unexpected=tuple(sorted(unexpected)),
        missing=missing,
        unknown=tuple(m for m in missing if m not in known),
        unexpected_fields=unexpected_fields,
        reasons=reasons,
        groups=groups,
    )
    return verdict, covered


def unmatched_fields(
    entries: Sequence[StatedEntry], covered: Collection[tuple[int, int]]
) -> tuple[MissingItem, ...]:
    """The stated fields of judged entries that covered no change in any category."""
    out = []
    for entry in entries:
        for n, stated in enumerate(entry.fields or ()):
            if (entry.index, n) not in covered:
                out.append(
                    MissingItem(
                        entry.index,
                        entry.listed,
                        stated.path,
                        f"stated [{', '.join(stated.values())}] but no matched row changed it so",
                    )
                )
    return tuple(out)


# --- writing -------------------------------------------------------------------------------


def _stated_fields(
    group: ChangeGroup, changed: Mapping[str, Sequence[FieldChange]]
) -> dict[str, list[Any]] | None:
    """PATH: [OLD, NEW] for a changed group. A generalised path with several value pairs
    takes its concrete paths when every row of the group has the same ones; else None (the
    entry then states no fields)."""
    general: dict[str, list[Any]] = {}
    repeated = set()
    for f in group.fields:
        if f.path in general:
            repeated.add(f.path)
        general[f.path] = [f.old, f.new]
    if not repeated:
        return general
    patterns = [path_regex(g) for g in sorted(repeated)]
    concrete: dict[str, list[Any]] | None = None
    for row_id in group.row_ids:
        mine = {
            c.path: [c.old, c.new]
            for c in changed[row_id]
            if any(p.fullmatch(c.path) for p in patterns)
        }
        if concrete is None:
            concrete = mine
        elif mine != concrete:
            return None
    out = {p: v for p, v in general.items() if p not in repeated}
    out.update(concrete or {})
    return dict(sorted(out.items()))


def _group_reason(verdict: CategoryVerdict, group: ChangeGroup) -> str:
    given = {verdict.reasons.get(i) for i in group.row_ids}
    if len(given) == 1:
        only = next(iter(given))
        if only and len(only) == 1 and not is_todo(only[0]):
            return only[0]
    if group.kind == "changed":
        paths = list(dict.fromkeys(f.path for f in group.fields))
        what = ", ".join(paths[:3]) + (f" (+{len(paths) - 3} more)" if len(paths) > 3 else "")
        return f"{TODO_REASON}: say why {what} moves"
    return f"{TODO_REASON}: say why these rows are {group.kind} ({group.label})"


def stated_document(verdicts: Sequence[CategoryVerdict]) -> dict[str, Any]:
    """One stated entry per change group: its patterns (its ids when no few patterns
    describe it), its fields, and a reason for the reviewer (kept where one was given)."""
    changes: list[dict[str, Any]] = []
    for verdict in verdicts:
        for group in verdict.groups:
            patterns = group.patterns
            rows: Any = list(patterns if patterns is not None else group.qualified_ids)
            entry: dict[str, Any] = {"rows": rows[0] if len(rows) == 1 else rows}
            if group.kind == "changed":
                fields = _stated_fields(group, verdict.comparison.changed)
                if fields is not None:
                    entry["fields"] = fields
            entry["reason"] = _group_reason(verdict, group)
            changes.append(entry)
    return {"schema_version": EXPECTED_VERSION, "changes": changes}
