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
from dataclasses import dataclass, replace
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
    row_values,
    split_id,
)
from routectl.review.groups import ChangeGroup, canonical, outside_quoted_keys
from routectl.review.patterns import check_pattern_size, compile_glob, describe, is_glob
from routectl.review.snapshot import qualified, read_json
from routectl.suggest import ID_CUTOFF, did_you_mean

EXPECTED_VERSION = 4
# Version 4 is version 3 with the row-id grammar of the attention category (docs/contracts/
# attention.md §6.1: `-` in the first slot, digits in the spec): every version-3 file reads the
# same. Field paths name list items by identity since version 3.
IDENTITY_PATHS_VERSION = 3
# Before version 3 a field path named a list item by its position (`route.stages[6]`); lists
# are compared by identity since, so such a path would state a change no longer reported.
POSITIONAL = re.compile(r"\[[0-9]+\]")


def _positional_path(path: str) -> bool:
    """Whether a field path names a list item by position (a quoted key's text aside)."""
    return POSITIONAL.search(outside_quoted_keys(path, str, key=lambda _key: "")) is not None


# A reason written by --write-expected for the reviewer to replace; CI warns while it stays.
TODO_REASON = "TODO"


# Any list item, by position or item key; never a quoted mapping key (`["a b"]`).
_ANY_ITEM = r'\[(?!")[^\]]+\]'


def path_regex(path: str) -> re.Pattern[str]:
    """A field path where `[*]` matches any list item, by position or key. Inside a quoted
    mapping key (`["x[*]"]`) the text is the key's own and matches only itself."""
    return re.compile(
        outside_quoted_keys(
            path, lambda part: re.escape(part).replace(r"\[\*\]", _ANY_ITEM), key=re.escape
        )
        if '"' in path
        else re.escape(path).replace(r"\[\*\]", _ANY_ITEM)
    )


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
    """One entry of an expected-changes file: `rows` as (category or None for bare, bare
    pattern) pairs; `fields` None when the entry states no fields (any change of its rows is
    expected). An id entry (`"row-id"` or `{"id", "reason"}`) is an entry of one id without
    fields (`from_id`: it may give no reason, and names one row at most once)."""

    index: int
    listed: str  # the rows as written
    rows: tuple[tuple[str | None, str], ...]
    fields: tuple[StatedField, ...] | None
    reason: str | None
    from_id: bool = False


def id_entry(index: int, entry: ExpectedEntry) -> StatedEntry:
    """An id entry as the entry of its one row, without fields."""
    return StatedEntry(
        index, entry.listed, ((entry.category, entry.row_id),), None, entry.reason, True
    )


@dataclass(frozen=True)
class ExpectedChanges:
    """An expected-changes file: its entries in file order, id entries among them."""

    entries: tuple[StatedEntry, ...] = ()

    @classmethod
    def of_ids(cls, ids: Sequence[ExpectedEntry]) -> ExpectedChanges:
        return cls(tuple(id_entry(i, e) for i, e in enumerate(ids)))

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(e.reason for e in self.entries if e.reason is not None)


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


def _check_ids(items: Any, categories: Collection[str], source: str) -> None:
    """Each id entry's id, named by its place in the file: `parse_expected` reads the id
    entries alone, so its own message would number them among themselves."""
    for index, item in enumerate(items if isinstance(items, list) else ()):
        listed = item.get("id") if isinstance(item, dict) and not _is_stated(item) else item
        if isinstance(listed, str):
            try:
                split_id(listed, categories)
            except InputError as exc:
                raise InputError(f"{source}: [{index}]: {exc}") from None


def parse_document(data: Any, categories: Collection[str], *, source: str) -> ExpectedChanges:
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
    _check_ids(items, categories, source)  # the id entries' own messages read better
    problem = schema_violation("expected-changes", data)
    version = data.get("schema_version") if isinstance(data, dict) else 1
    if problem is None and isinstance(items, list) and version in (1, 2):
        _refuse_positional(items, version, source)
    if problem is not None or not isinstance(items, list):
        raise InputError(f"{source}: {problem}")
    id_places = [i for i, item in enumerate(items) if not _is_stated(item)]
    ids = parse_expected([items[i] for i in id_places], categories, source=source)
    by_place = dict(zip(id_places, ids, strict=True))
    entries = []
    for index, item in enumerate(items):
        if index in by_place:
            entries.append(id_entry(index, by_place[index]))
            continue
        try:
            entries.append(_stated_entry(index, item, categories))
        except InputError as exc:
            raise InputError(f"{source}: [{index}]: {exc}") from None
    return ExpectedChanges(tuple(entries))


def _refuse_positional(items: Sequence[Any], version: Any, source: str) -> None:
    """A document before version 3 is read as it is (its `[*]` matches any item, by position
    or key) unless a stated field names a list item by position: then a hint to restate it."""
    for index, item in enumerate(items):
        for path in item.get("fields", {}) if _is_stated(item) else ():
            if _positional_path(path):
                raise InputError(
                    f"{source}: [{index}]: field {shorten(path)} names a list item by its "
                    f"position (expected-changes schema_version {version}); lists are compared "
                    f"by identity since version {IDENTITY_PATHS_VERSION} (route.stages[M=128], "
                    f"route.verdicts[KERNEL]): restate the file with --write-expected "
                    f"{source} (reviewed reasons are kept), or write the place as [*]"
                )


def _is_stated(item: Any) -> bool:
    return isinstance(item, dict) and "rows" in item


def load_expected_changes(path: Path, categories: Collection[str]) -> ExpectedChanges:
    return parse_document(
        read_json(path, "expected-changes file"),
        categories,
        source=str(path),
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
    unattributed: tuple[str, ...] = ()  # bare ids naming no row, several categories judged


def _targets(
    entry: StatedEntry,
    category: str | None,
    pattern: str,
    matching: _RowsMatching,
    known_ids: Callable[[str], Collection[str]],
    categories: Sequence[str],
) -> list[str]:
    """The category a pattern names: its own when qualified; else every category holding a
    matching row (an id: holding it)."""
    if category is not None:
        return [category]
    if entry.from_id:
        return [c for c in categories if pattern in known_ids(c)]
    return [c for c in categories if matching(c, pattern)]


def _refuse_typo(entry: StatedEntry, row_id: str, known: Collection[str]) -> None:
    """An id naming no row but close to one is a typo: refused, naming the row meant. (One
    close to none stays a missing unknown id: the check fails on it.)"""
    hint = did_you_mean(row_id, known, ID_CUTOFF)
    if hint:
        raise InputError(
            f"expected-changes entry [{entry.index}] names row {shorten(row_id)}, which no "
            f"category has{hint}"
        )


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
    """Each pattern to its category: a qualified one to its own; a bare one to the one
    category with a matching row (several: InputError; none: the single judged category,
    else it matches no row). An id entry's row is its own even when no category has it (it
    is then missing, as an unknown id), and one row is named by one id entry at most."""
    rows: dict[str, dict[int, set[str]]] = {name: {} for name in judged}
    judged_entries: list[StatedEntry] = []
    missing: list[MissingItem] = []
    unattributed: list[str] = []
    named: dict[tuple[str, str], StatedEntry] = {}
    matching = _RowsMatching(known_ids)
    for entry in entries:
        in_scope = False
        for category, pattern in entry.rows:
            targets = _targets(entry, category, pattern, matching, known_ids, categories)
            if len(targets) > 1:
                what = (
                    f"expected id {shorten(entry.listed)} is a row"
                    if entry.from_id
                    else (
                        f"row pattern {shorten(pattern)} of expected entry [{entry.index}] "
                        "matches rows"
                    )
                )
                shown = pattern if len(pattern) <= QUOTE_CHARS else "PATTERN"
                raise InputError(
                    f"{what} of several categories ({', '.join(targets)}): qualify it as "
                    f"CATEGORY:{shown}"
                )
            if not targets and len(judged) == 1:
                targets = [judged[0]]
            if not targets:
                in_scope = True
                if not is_glob(pattern):
                    _refuse_typo(entry, pattern, [i for c in categories for i in known_ids(c)])
                if entry.from_id:
                    unattributed.append(entry.listed)
                else:
                    missing.append(MissingItem(entry.index, pattern, None, "matches no row"))
                continue
            if targets[0] not in rows:
                continue  # a filtered run does not judge other categories
            in_scope = True
            if not is_glob(pattern) and pattern not in known_ids(targets[0]):
                _refuse_typo(entry, pattern, known_ids(targets[0]))
            if entry.from_id:
                earlier = named.setdefault((targets[0], pattern), entry)
                if earlier is not entry:
                    raise InputError(
                        f"expected id {shorten(entry.listed)} repeats {shorten(earlier.listed)}"
                    )
                found = {pattern}
            else:
                found = set(matching(targets[0], pattern))
                if not found:
                    missing.append(
                        MissingItem(
                            entry.index, qualified(targets[0], pattern), None, "matches no row"
                        )
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
        tuple(sorted(unattributed)),
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
    stated: Sequence[StatedMatch],
    groups: tuple[ChangeGroup, ...] = (),
) -> tuple[CategoryVerdict, set[tuple[int, int]]]:
    """The verdict of one category under the entries that match its rows (id entries among
    them); also the (entry index, field index) pairs of stated fields that covered a change
    here."""
    _check_conflicts(name, stated)
    moved = comparison.moved
    by_row: dict[str, list[StatedEntry]] = defaultdict(list)
    for match in stated:
        for row_id in match.rows:
            by_row[row_id].append(match.entry)
    covered: set[tuple[int, int]] = set()
    unexpected = set(moved - by_row.keys())
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
        if any(e.fields is None for e in entries):
            continue
        if uncovered:
            unexpected.add(row_id)
            unexpected_fields[row_id] = tuple(uncovered)
    missing = tuple(sorted(by_row.keys() - moved))
    known = comparison.fresh_ids | comparison.baseline_ids
    reasons: dict[str, tuple[str, ...]] = {}
    for row_id in sorted(moved - unexpected):
        found = [e.reason for e in by_row.get(row_id, ())]
        reasons[row_id] = tuple(dict.fromkeys(r for r in found if r))
    verdict = CategoryVerdict(
        name=name,
        rows=len(comparison.fresh_ids),
        comparison=comparison,
        unexpected=tuple(sorted(unexpected)),
        missing=missing,
        unknown=tuple(m for m in missing if m not in known),
        unexpected_fields=unexpected_fields,
        reasons=reasons,
        groups=groups,
    )
    return verdict, covered


def already_applied(
    verdicts: Sequence[CategoryVerdict],
    matches: Mapping[str, Sequence[StatedMatch]],
    missing_stated: Sequence[MissingItem],
    rows: Callable[[str, str], Any],
) -> bool:
    """Whether the changes an outcome misses are in the baseline already: nothing moved
    unexpectedly, and every row that was expected to move but did not is matched by entries
    with fields whose every NEW value it holds (an absent NEW: no such path). Entries
    without fields say no value, so they never prove it. `rows(category, id)` is the row."""
    if any(v.unexpected for v in verdicts) or any(m.field is None for m in missing_stated):
        return False
    if not any(v.missing for v in verdicts):
        return False
    for verdict in verdicts:
        by_row: dict[str, list[StatedEntry]] = defaultdict(list)
        for match in matches.get(verdict.name, ()):
            for row_id in match.rows:
                by_row[row_id].append(match.entry)
        for row_id in verdict.missing:
            entries = by_row.get(row_id, [])
            row = rows(verdict.name, row_id) if row_id not in verdict.unknown else None
            if row is None or not entries or any(e.fields is None for e in entries):
                return False
            values = row_values(row)
            for entry in entries:
                for stated in entry.fields or ():
                    found = [p for p in values if stated.regex.fullmatch(p)]
                    if stated.new is None:
                        if found:
                            return False
                    elif not any(canonical(values[p]) == canonical(stated.new) for p in found):
                        return False
    return True


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
    # A change at one place in every row is stated there (`route.stages[M=128]...`).
    concrete_of = {f.path: f.concrete for f in group.fields if f.path not in repeated}
    if not repeated:
        return dict(sorted((concrete_of[p] or p, v) for p, v in general.items()))
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
    out = {concrete_of[p] or p: v for p, v in general.items() if p not in repeated}
    out.update(concrete or {})
    return dict(sorted(out.items()))


def _group_reason(verdict: CategoryVerdict, group: ChangeGroup) -> str:
    given = {verdict.reasons.get(i) for i in group.row_ids}
    if len(given) == 1:
        only = next(iter(given))
        if only and len(only) == 1 and not is_todo(only[0]):
            return only[0]
    if group.kind == "changed":
        paths = list(dict.fromkeys(f.shown_path for f in group.fields))
        what = ", ".join(paths[:3]) + (f" (+{len(paths) - 3} more)" if len(paths) > 3 else "")
        return f"{TODO_REASON}: say why {what} moves"
    return f"{TODO_REASON}: say why these rows are {group.kind} ({group.label})"


def _no_fields_note(group: ChangeGroup, changed: Mapping[str, Sequence[FieldChange]]) -> str:
    """Why a changed group's entry states no fields, and the split that would state them:
    its rows by the places their repeated changes have."""
    repeated = sorted(
        {f.path for f in group.fields if sum(g.path == f.path for g in group.fields) > 1}
    )
    patterns = [path_regex(g) for g in repeated]
    parts: dict[tuple[tuple[str, str, str], ...], list[str]] = {}
    for row_id in group.row_ids:
        places = tuple(
            sorted(
                (c.path, canonical(c.old), canonical(c.new))
                for c in changed[row_id]
                if any(p.fullmatch(c.path) for p in patterns)
            )
        )
        parts.setdefault(places, []).append(row_id)
    shown = []
    for ids in sorted(parts.values(), key=len, reverse=True):
        found = describe(ids).patterns
        rows = (
            ", ".join(qualified(group.category, p) for p in found)
            if found
            else qualified(group.category, ids[0])
            + (f" and {len(ids) - 1} more" if len(ids) > 1 else "")
        )
        shown.append(f"{rows} ({len(ids)} rows)" if len(ids) != 1 else rows)
    more = f"; +{len(shown) - 3} more parts" if len(shown) > 3 else ""
    return (
        f"no field is common to all {len(group.row_ids)} rows: {', '.join(repeated)} "
        f"changes at different places in them; split the entry into {len(parts)} to state "
        f"each its fields: {'; '.join(shown[:3])}{more}"
    )


def stated_entry(
    verdict: CategoryVerdict, group: ChangeGroup, reason: str | None = None
) -> dict[str, Any]:
    """The stated entry of one change group: its patterns (its ids when no few patterns
    describe it), its fields (or a note saying why none), and a reason for the reviewer
    (`reason`, else the one given to its rows, else TODO)."""
    patterns = group.patterns
    rows: Any = list(patterns if patterns is not None else group.qualified_ids)
    entry: dict[str, Any] = {"rows": rows[0] if len(rows) == 1 else rows}
    if group.kind == "changed":
        fields = _stated_fields(group, verdict.comparison.changed)
        if fields is not None:
            entry["fields"] = fields
        else:
            entry["note"] = _no_fields_note(group, verdict.comparison.changed)
    entry["reason"] = reason or _group_reason(verdict, group)
    return entry


def stated_document(verdicts: Sequence[CategoryVerdict]) -> dict[str, Any]:
    """One stated entry per change group (`stated_entry`)."""
    changes = [stated_entry(v, g) for v in verdicts for g in v.groups]
    return {"schema_version": EXPECTED_VERSION, "changes": changes}


# --- merging into an existing file ---------------------------------------------------------


@dataclass(frozen=True)
class Merge:
    """An existing expected-changes file merged with the actual changes. `document` is None
    when there is nothing to write. `kept`: entries written back as they were (reasons and
    all); `new`: entries for changes the file did not expect; `obsolete`: the entries that
    describe no change of this run (dropped only when `pruned`); `restated`: entries that
    named list items by position, replaced by new ones."""

    document: dict[str, Any] | None
    kept: int
    new: int
    obsolete: tuple[tuple[int, str, str], ...]  # (entry index, its rows as written, why)
    pruned: bool
    restated: int = 0

    @property
    def dropped(self) -> int:
        return self.restated + (len(self.obsolete) if self.pruned else 0)


def _positional(item: Any) -> bool:
    return _is_stated(item) and any(_positional_path(p) for p in item.get("fields") or {})


def merge_expected(
    data: Any,
    verdicts: Sequence[CategoryVerdict],
    categories: Sequence[str],
    known_ids: Callable[[str], Collection[str]],
    *,
    source: str,
    prune: bool = False,
) -> Merge:
    """Merge the actual changes (`verdicts`) into an expected-changes document `data`
    (any version): its entries are judged against this run's changes; an entry that still
    describes a change is kept as written, one that describes none is obsolete (kept unless
    `prune`), and a change group with a row no kept entry expects gets a new entry. An entry
    of an older file naming list items by position is replaced: the new entries for the
    rows it matched take its reason."""
    items = list((data.get("changes") if isinstance(data, dict) else data) or ())
    restated = [i for i, item in enumerate(items) if _positional(item)]
    current = [item for i, item in enumerate(items) if i not in restated]
    # Judged as one document of this version, each entry at its own index.
    places = [i for i in range(len(items)) if i not in restated]
    parsed = parse_document(
        {"schema_version": EXPECTED_VERSION, "changes": current}, categories, source=source
    )
    entries = [replace(e, index=places[e.index]) for e in parsed.entries]
    names = [v.name for v in verdicts]
    resolution = resolve_stated(entries, names, known_ids, categories)
    why: dict[int, str] = {}
    covered: set[tuple[int, int]] = set()
    unexpected: dict[str, frozenset[str]] = {}
    for verdict in verdicts:
        judged, hits = judge_category(
            verdict.name, verdict.comparison, resolution.by_category[verdict.name]
        )
        covered |= hits
        unexpected[verdict.name] = judged.unexpected_set
        for match in resolution.by_category[verdict.name]:
            still = match.rows - verdict.comparison.moved
            if still:
                why.setdefault(match.entry.index, f"{len(still)} of its rows did not move")
    for item in (*resolution.missing, *unmatched_fields(resolution.judged, covered)):
        why.setdefault(item.entry, item.text().split(": ", 1)[-1])
    for entry in entries:
        if entry.from_id and entry.listed in resolution.unattributed:
            why.setdefault(entry.index, "names no row")
    # The reasons of restated entries, by the rows they matched.
    old_reasons: dict[tuple[str, str], set[str]] = defaultdict(set)
    if restated:
        loose = [{k: v for k, v in items[i].items() if k != "fields"} for i in restated]
        again = parse_document(
            {"schema_version": EXPECTED_VERSION, "changes": loose}, categories, source=source
        )
        found = resolve_stated(again.entries, names, known_ids, categories)
        for name, matches in found.by_category.items():
            for match in matches:
                for row_id in match.rows:
                    if match.entry.reason and not is_todo(match.entry.reason):
                        old_reasons[(name, row_id)].add(match.entry.reason)
    fresh = []
    for verdict in verdicts:
        for group in verdict.groups:
            if not any(i in unexpected[verdict.name] for i in group.row_ids):
                continue
            given = [old_reasons.get((verdict.name, i), set()) for i in group.row_ids]
            first = given[0]
            one = len(first) == 1 and all(g == first for g in given)
            reason = next(iter(first)) if one else None
            fresh.append(stated_entry(verdict, group, reason))
    listed = {e.index: e.listed for e in entries}
    obsolete = tuple((i, listed[i], text) for i, text in sorted(why.items()))
    dropped = {i for i, _, _ in obsolete} if prune else set()
    kept = [item for i, item in enumerate(items) if i not in restated and i not in dropped]
    if not fresh and not dropped and not restated:
        return Merge(None, len(kept), 0, obsolete, prune)
    document = {"schema_version": EXPECTED_VERSION, "changes": [*kept, *fresh]}
    return Merge(document, len(kept), len(fresh), obsolete, prune, len(restated))
