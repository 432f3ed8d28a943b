"""Comparison by row id and the verdict against an expected-changes list.

Rows are matched by id; `added`, `removed` and `changed` are set algebra. Only changed rows
go through DeepDiff (`threshold_to_diff_deeper=0`, so a field that moved is named, not the
whole route), which makes comparing identical snapshots cost one equality test per row.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from routectl.errors import InputError
from routectl.io.jsonread import shorten
from routectl.io.schemas import format_path, schema_violation
from routectl.review.snapshot import Row, qualified, read_json
from routectl.rows import ROW_ID
from routectl.suggest import did_you_mean

CHANGE_KINDS = ("changed", "added", "removed")


@dataclass(frozen=True)
class FieldChange:
    """One moved field of a changed row. `kind` is "added"/"removed" for a key or list item
    present on one side only; the absent side is None."""

    path: str
    kind: str
    old: Any
    new: Any

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "old": self.old, "new": self.new}


Differ = Callable[[Row, Row], list[FieldChange]]


def _path_key(parts: Sequence[Any]) -> list[tuple[int, Any]]:
    return [(0, p) if isinstance(p, int) else (1, str(p)) for p in parts]


def field_changes(old: Row, new: Row) -> list[FieldChange]:
    """What moved between two versions of one row, from DeepDiff's tree view, sorted by path.
    DeepDiff sees only the parts that differ (`_differing_parts`), each with its path from
    the row prefixed: walking a whole row costs it about 6 ms, most of it in equal fields."""
    from deepdiff import DeepDiff  # only changed rows reach here: keep it off the pass path

    found: list[tuple[list[tuple[int, Any]], FieldChange]] = []
    for prefix, a, b in _differing_parts(old, new, []):
        tree = DeepDiff(a, b, threshold_to_diff_deeper=0, verbose_level=2, view="tree")
        for report_type, levels in tree.items():
            kind = (
                "added"
                if report_type.endswith("_added")
                else "removed"
                if report_type.endswith("_removed")
                else "changed"
            )
            for level in levels:
                parts = [*prefix, *level.path(output_format="list")]
                change = FieldChange(
                    format_path(parts),
                    kind,
                    None if kind == "added" else level.t1,
                    None if kind == "removed" else level.t2,
                )
                found.append((_path_key(parts), change))
    found.sort(key=lambda item: item[0])
    changes = [c for _, c in found]
    if not changes:
        # Rows differ only in what DeepDiff treats as equal: show the whole row.
        changes = [FieldChange("", "changed", old, new)]
    return changes


def _differing_parts(a: Any, b: Any, prefix: list[Any]) -> Iterator[tuple[list[Any], Any, Any]]:
    """(path, old, new) of the smallest parts of two unequal values that DeepDiff reports
    alike whether given them or the whole rows: each differing value of two dicts with the
    same keys, and each differing item of two lists of one length that hold a dict or a list
    (DeepDiff pairs those items by index), recursively; otherwise the two values. A list of
    scalars goes to DeepDiff whole: it matches those by hash (so [true] equals [1])."""
    if type(a) is dict and type(b) is dict and a.keys() == b.keys():
        for key, value in a.items():
            if not _same(value, b[key]):
                yield from _differing_parts(value, b[key], [*prefix, key])
        return
    if (
        type(a) is list
        and type(b) is list
        and len(a) == len(b)
        and any(type(x) in _CONTAINERS for x in (*a, *b))
    ):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if not _same(x, y):
                yield from _differing_parts(x, y, [*prefix, i])
        return
    yield prefix, a, b


_CONTAINERS = (dict, list)


def _same(a: Row, b: Row) -> bool:
    """Equal as JSON: `==` alone equates 1, 1.0 and true (and 0.0 with -0.0), which JSON
    text does not, so equal rows are then held to the exact types. A fresh row equal as
    text to its baseline row is that very object (`check.snapshot_from_texts`)."""
    return a is b or (a == b and _same_text(a, b))


def _same_text(a: Row, b: Row) -> bool:
    """Given `a == b` of plain JSON rows: `_same_types`, as orjson's texts with sorted keys
    (1, 1.0 and true, 0.0 and -0.0 written apart; a float as the shortest text that reads
    back as its bits), two passes in C instead of a walk in Python. What orjson does not
    write (integers outside 64 bits, deep nesting, non-string keys) is walked."""
    try:
        return orjson.dumps(a, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
            b, option=orjson.OPT_SORT_KEYS
        )
    except orjson.JSONEncodeError:
        return _same_types(a, b)


def _same_types(a: Any, b: Any) -> bool:
    """Given `a == b`: the same type at every node, and floats with the same bits. Cheaper
    than encoding both rows: a fresh row's keys are in insertion order, a retained row's
    sorted, so no byte-level encoding of the two agrees without sorting."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        return all(map(_same_types, a.values(), map(b.__getitem__, a)))
    if kind is list:
        return all(map(_same_types, a, b))
    if kind is float:
        return a.hex() == b.hex()
    return True


@dataclass(frozen=True)
class Comparison:
    """Baseline rows against fresh rows of one category. Lists are sorted row ids."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: Mapping[str, tuple[FieldChange, ...]]  # row id -> its field changes, sorted by id
    fresh_ids: frozenset[str] = frozenset()
    baseline_ids: frozenset[str] = frozenset()
    baseline_present: bool = True

    @property
    def moved(self) -> frozenset[str]:
        return frozenset((*self.added, *self.removed, *self.changed))

    @property
    def identical(self) -> bool:
        return not (self.added or self.removed or self.changed) and self.baseline_present


def compare_rows(
    baseline: Sequence[Row] | None, fresh: Sequence[Row], *, differ: Differ = field_changes
) -> Comparison:
    """Compare by id; `baseline` None means there is no baseline file (every row is added).
    `differ` runs once per changed row and never for equal rows."""
    old = {r["id"]: r for r in baseline or ()}
    new = {r["id"]: r for r in fresh}
    changed: dict[str, tuple[FieldChange, ...]] = {}
    for row_id in sorted(old.keys() & new.keys()):
        if not _same(old[row_id], new[row_id]):
            changed[row_id] = tuple(differ(old[row_id], new[row_id]))
    return Comparison(
        added=tuple(sorted(new.keys() - old.keys())),
        removed=tuple(sorted(old.keys() - new.keys())),
        changed=changed,
        fresh_ids=frozenset(new),
        baseline_ids=frozenset(old),
        baseline_present=baseline is not None,
    )


# --- expected changes ----------------------------------------------------------------------


@dataclass(frozen=True)
class ExpectedEntry:
    listed: str  # as written in the file
    category: str | None  # None for a bare id
    row_id: str
    reason: str | None = None


def split_id(text: str, categories: Collection[str]) -> tuple[str | None, str]:
    """(category, row id) of a qualified id, (None, row id) of a bare one. An id is
    qualified when the text before its first ':' is a known category (`edge` is not one).
    A malformed id is an InputError."""
    prefix, colon, rest = text.partition(":")
    if colon and prefix in categories:
        if not ROW_ID.match(rest):
            raise InputError(f"malformed row id {shorten(rest)} in {shorten(text)}")
        return prefix, rest
    known = ", ".join(sorted(categories)) or "none"
    if colon and prefix != "edge" and ROW_ID.match(rest):
        raise InputError(
            f"unknown category {shorten(prefix)} in {shorten(text)}"
            f"{did_you_mean(prefix, categories)} (known: {known})"
        )
    if not ROW_ID.match(text):
        raise InputError(
            f"malformed row id {shorten(text)} (a row id is "
            f"model/kv/tpN/spec/cN/qN or edge:name, optionally qualified by a "
            f"category: {known})"
        )
    return None, text


def parse_expected(
    data: Any, categories: Collection[str], *, source: str
) -> tuple[ExpectedEntry, ...]:
    """Validate an expected-changes document: schema, well-formed ids, no duplicates."""
    for index, item in enumerate(data if isinstance(data, list) else ()):
        listed = item.get("id") if isinstance(item, dict) else item
        if isinstance(listed, str):  # a malformed id reads better named than as a pattern
            try:
                split_id(listed, categories)
            except InputError as exc:
                raise InputError(f"{source}: [{index}]: {exc}") from None
    problem = schema_violation("expected-changes", data)
    if problem is not None:
        raise InputError(f"{source}: {problem}")
    entries: list[ExpectedEntry] = []
    seen: set[tuple[str | None, str]] = set()
    for item in data:
        listed, reason = (item, None) if isinstance(item, str) else (item["id"], item["reason"])
        try:
            category, row_id = split_id(listed, categories)
        except InputError as exc:
            raise InputError(f"{source}: {exc}") from None
        if (category, row_id) in seen:
            raise InputError(f"{source}: {shorten(listed)} is listed twice")
        seen.add((category, row_id))
        entries.append(ExpectedEntry(listed, category, row_id, reason))
    return tuple(entries)


def load_expected(path: Path, categories: Collection[str]) -> tuple[ExpectedEntry, ...]:
    return parse_expected(
        read_json(path, "expected-changes file"),
        categories,
        source=str(path),
    )


@dataclass(frozen=True)
class Attribution:
    """Expected entries assigned to the judged categories."""

    by_category: Mapping[str, Mapping[str, ExpectedEntry]]  # category -> row id -> entry
    unattributed: tuple[str, ...]  # bare ids naming no row, with several categories judged


def attribute(
    entries: Sequence[ExpectedEntry],
    judged: Sequence[str],
    known_ids: Callable[[str], Collection[str]],
    categories: Sequence[str],
) -> Attribution:
    """Assign each entry to its category. A qualified entry of a category outside `judged`
    is not judged (filtered run). A bare id belongs to the one category holding it
    (`known_ids(name)`: fresh and baseline ids of a judged category, declared ids of any
    other); several holders is an InputError; none: the single judged category, else it is
    unattributed (and fails as missing)."""
    by_category: dict[str, dict[str, ExpectedEntry]] = {name: {} for name in judged}
    unattributed: list[str] = []
    for entry in entries:
        if entry.category is not None:
            target: str | None = entry.category
        else:
            holders = [c for c in categories if entry.row_id in known_ids(c)]
            if len(holders) > 1:
                raise InputError(
                    f"expected id {shorten(entry.listed)} is a row of several "
                    f"categories ({', '.join(holders)}): qualify it as "
                    f"CATEGORY:{entry.row_id}"
                )
            if holders:
                target = holders[0]
            elif len(judged) == 1:
                target = judged[0]
            else:
                unattributed.append(entry.listed)
                continue
        if target not in by_category:
            continue
        if entry.row_id in by_category[target]:
            raise InputError(
                f"expected id {shorten(entry.listed)} repeats "
                f"{shorten(by_category[target][entry.row_id].listed)}"
            )
        by_category[target][entry.row_id] = entry
    return Attribution(by_category, tuple(sorted(unattributed)))


# --- verdict -------------------------------------------------------------------------------


@dataclass(frozen=True)
class MissingItem:
    """A stated expected-changes entry (or one of its fields) that matched no change.
    `entry` is its position in the file's list of changes, `rows` its rows as written."""

    entry: int
    rows: str
    field: str | None
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"entry": self.entry, "rows": self.rows, "field": self.field, "why": self.why}

    def text(self) -> str:
        what = (
            f"field {self.field} of entry [{self.entry}]" if self.field else f"entry [{self.entry}]"
        )
        return f"{what} (rows {self.rows}): {self.why}"


@dataclass(frozen=True)
class CategoryVerdict:
    """`unexpected` holds every moved row that is not expected, including changed rows
    matched by a stated entry whose fields do not cover all their changes
    (`unexpected_fields`: those changes). `reasons` gives an expected row the reasons of
    the entries that expect it; `groups` are the category's change groups
    (`routectl.review.groups.ChangeGroup`)."""

    name: str
    rows: int  # fresh rows
    comparison: Comparison
    expected: Mapping[str, ExpectedEntry] = field(default_factory=dict)
    unexpected: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()  # the missing ids that name no row
    unexpected_fields: Mapping[str, tuple[FieldChange, ...]] = field(default_factory=dict)
    reasons: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    groups: tuple[Any, ...] = ()

    @property
    def ok(self) -> bool:
        return not (self.unexpected or self.missing)

    @functools.cached_property
    def unexpected_set(self) -> frozenset[str]:
        return frozenset(self.unexpected)

    def q(self, row_id: str) -> str:
        return qualified(self.name, row_id)


@dataclass(frozen=True)
class CheckOutcome:
    """The verdict of a whole run. `stale` names baseline categories no longer listed (only
    judged in complete runs); `unattributed` are bare expected ids naming no row;
    `missing_stated` the stated entries and fields that matched no change."""

    categories: Mapping[str, CategoryVerdict]
    stale: tuple[str, ...] = ()
    unattributed: tuple[str, ...] = ()
    complete: bool = True
    missing_stated: tuple[MissingItem, ...] = ()

    @property
    def ok(self) -> bool:
        return (
            all(v.ok for v in self.categories.values())
            and not self.stale
            and not self.unattributed
            and not self.missing_stated
        )

    @property
    def rows(self) -> int:
        return sum(v.rows for v in self.categories.values())
