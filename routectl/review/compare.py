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

# A list item's identity, by the item's shape (the first rule every item of both versions
# of a list fits, with no key repeated on either side): a candidate, verdict or stage by its
# name, a fallback by its field, a warning by its variable, a stage plan by its M, a
# dispatch record by its M and its position among the records of that M. Other lists (a
# chain of chosen stages, prepare records, plain values) are ordered data: compared by
# position.
NAME_KEYS = ("name", "field", "variable")
REORDERED = "reordered"  # the kind of a change of order of a keyed list (old, new: the keys)


@dataclass(frozen=True)
class ItemKey:
    """The identity of one item of a keyed list: shown `[text]` in a path, sorted by
    `order` (M numerically, then position)."""

    text: str
    order: tuple[Any, ...]


class Keyed(dict[ItemKey, Any]):
    """A keyed list: its items by key, in list order (for DeepDiff, a mapping)."""


def _name_rule(field_name: str) -> Callable[[Any, dict[Any, int]], ItemKey | None]:
    def rule(item: Any, _seen: dict[Any, int]) -> ItemKey | None:
        value = item.get(field_name) if type(item) is dict else None
        return ItemKey(value, (value,)) if type(value) is str and value else None

    return rule


def _m_of(item: Any, *keys: str) -> int | None:
    for key in keys:
        item = item.get(key) if type(item) is dict else None
    return item if type(item) is int else None


def _stage_rule(item: Any, _seen: dict[Any, int]) -> ItemKey | None:
    m = _m_of(item, "m")
    return None if m is None or "chosen" not in item else ItemKey(f"M={m}", (m,))


def _dispatch_rule(item: Any, seen: dict[Any, int]) -> ItemKey | None:
    m = _m_of(item, "plan", "m")
    if m is None or "op" not in item:
        return None
    n = seen.get(m, 0)
    seen[m] = n + 1
    return ItemKey(f"M={m},{n}", (m, n))


KEY_RULES = (*map(_name_rule, NAME_KEYS), _stage_rule, _dispatch_rule)


def _keys(
    items: list[Any], rule: Callable[[Any, dict[Any, int]], ItemKey | None]
) -> list[ItemKey] | None:
    # `seen`: what the rule has keyed so far in this list (the dispatch rule counts calls).
    seen: dict[Any, int] = {}
    keys = []
    for item in items:
        key = rule(item, seen)
        if key is None:
            return None
        keys.append(key)
    return keys if len(set(keys)) == len(keys) else None


def item_keys(*versions: list[Any]) -> list[list[ItemKey]] | None:
    """The keys of each version of one list by the first rule all of them fit, or None (the
    list is compared by position). Lists without items decide nothing."""
    if not any(versions):
        return None
    for rule in KEY_RULES:
        found = [_keys(v, rule) for v in versions]
        if all(k is not None for k in found):
            return found  # type: ignore[return-value]
    return None


def keyed_pair(
    a: Any,
    b: Any,
    prefix: list[Any],
    orders: list[tuple[list[Any], Any, Any]],
    *,
    whole: bool = False,
) -> tuple[Any, Any]:
    """Two versions of one value with their keyed lists as `Keyed` mappings, walked
    together so that both versions of a list are keyed alike (or neither); each keyed list
    whose common items changed order is appended to `orders` as (path, old keys, new
    keys)."""
    if not whole and _same(a, b):
        # Equal parts report nothing and are handed to DeepDiff only inside a part that
        # differs: they stay as they are (keying them would cost a walk of every row).
        return a, b
    if type(a) is dict and type(b) is dict:
        out_a: dict[Any, Any] = {}
        out_b: dict[Any, Any] = {}
        for key, value in a.items():
            if key in b:
                out_a[key], out_b[key] = keyed_pair(
                    value, b[key], [*prefix, key], orders, whole=whole
                )
            else:
                out_a[key] = keyed(value)
        for key, value in b.items():
            if key not in out_b:
                out_b[key] = keyed(value)
        return out_a, out_b
    if type(a) is list and type(b) is list:
        found = item_keys(a, b)
        if found is None:
            if len(a) != len(b):
                return [keyed(x) for x in a], [keyed(y) for y in b]
            pairs = [
                keyed_pair(x, y, [*prefix, i], orders, whole=whole)
                for i, (x, y) in enumerate(zip(a, b, strict=True))
            ]
            return [p[0] for p in pairs], [p[1] for p in pairs]
        keys_a, keys_b = found
        by_a, by_b = dict(zip(keys_a, a, strict=True)), dict(zip(keys_b, b, strict=True))
        common_a = [k for k in keys_a if k in by_b]
        common_b = [k for k in keys_b if k in by_a]
        if common_a != common_b:
            orders.append((prefix, [k.text for k in common_a], [k.text for k in common_b]))
        kept_a, kept_b = Keyed(), Keyed()
        for key in keys_a:
            if key in by_b:
                kept_a[key], kept_b[key] = keyed_pair(
                    by_a[key], by_b[key], [*prefix, key], orders, whole=whole
                )
            else:
                kept_a[key] = keyed(by_a[key])
        for key in keys_b:
            if key not in kept_b:
                kept_b[key] = keyed(by_b[key])
        return kept_a, kept_b
    return _keyed_alone(a), _keyed_alone(b)


def _keyed_alone(value: Any) -> Any:
    if type(value) not in (dict, list):
        return value
    return keyed_pair(value, value, [], [], whole=True)[0]


def keyed(value: Any) -> Any:
    """One version of a value with its keyed lists as `Keyed` mappings."""
    return _keyed_alone(value)


def unkeyed(value: Any) -> Any:
    """The plain JSON value of a `keyed` one."""
    if type(value) is Keyed:
        return [unkeyed(v) for v in value.values()]
    if type(value) is dict:
        return {k: unkeyed(v) for k, v in value.items()}
    if type(value) is list:
        return [unkeyed(v) for v in value]
    return value


def row_values(row: Row) -> dict[str, Any]:
    """Every value of a row (containers too) by its path as `field_changes` names it."""
    out: dict[str, Any] = {}

    def walk(value: Any, parts: list[Any]) -> None:
        if parts:
            out[change_path(parts)] = unkeyed(value)
        if type(value) in _MAPPINGS:
            for key, item in value.items():
                walk(item, [*parts, key])
        elif type(value) is list:
            for index, item in enumerate(value):
                walk(item, [*parts, index])

    walk(keyed(row), [])
    return out


def change_path(parts: Sequence[Any]) -> str:
    """`route.stages[M=128].rejected[w2.chunked_w2].code`: keys as `[text]`, indexes and
    other keys as `format_path` writes them."""
    out = ""
    for part in parts:
        if isinstance(part, ItemKey):
            out += f"[{part.text}]"
        else:  # format_path's spelling of one part after another ("_" stands for it)
            out += format_path(["_", part])[1:] if out else format_path([part])
    return out


def path_sort_key(parts: Sequence[Any]) -> list[tuple[int, Any]]:
    return [
        (0, p) if isinstance(p, int) else (2, p.order) if isinstance(p, ItemKey) else (1, str(p))
        for p in parts
    ]


def field_changes(old: Row, new: Row) -> list[FieldChange]:
    """What moved between two versions of one row, sorted by path: lists of items with an
    identity (`item_keys`) matched by key, a change of their order one `reordered` change,
    the rest from DeepDiff's tree view. DeepDiff sees only the parts that differ
    (`_differing_parts`), each with its path from the row prefixed: walking a whole row
    costs it about 6 ms, most of it in equal fields."""
    from deepdiff import DeepDiff  # only changed rows reach here: keep it off the pass path

    orders: list[tuple[list[Any], Any, Any]] = []
    keyed_old, keyed_new = keyed_pair(old, new, [], orders)
    found: list[tuple[list[tuple[int, Any]], FieldChange]] = [
        (path_sort_key(parts), FieldChange(change_path(parts), REORDERED, was, now))
        for parts, was, now in orders
    ]
    for prefix, a, b in _differing_parts(keyed_old, keyed_new, []):
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
                    change_path(parts),
                    kind,
                    None if kind == "added" else unkeyed(level.t1),
                    None if kind == "removed" else unkeyed(level.t2),
                )
                found.append((path_sort_key(parts), change))
    found.sort(key=lambda item: item[0])
    changes = [c for _, c in found]
    if not changes:
        # Rows differ only in what DeepDiff treats as equal: show the whole row.
        changes = [FieldChange("", "changed", old, new)]
    return changes


def _differing_parts(a: Any, b: Any, prefix: list[Any]) -> Iterator[tuple[list[Any], Any, Any]]:
    """(path, old, new) of the smallest parts of two unequal values that DeepDiff reports
    alike whether given them or the whole rows: each differing value of two dicts (or keyed
    lists) with the same keys, and each differing item of two lists of one length that hold
    a dict or a list (DeepDiff pairs those items by index), recursively; otherwise the two
    values. A list of scalars goes to DeepDiff whole: it matches those by hash (so [true]
    equals [1])."""
    if type(a) in _MAPPINGS and type(a) is type(b) and a.keys() == b.keys():
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


_MAPPINGS = (dict, Keyed)
_CONTAINERS = (dict, list, Keyed)


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
    if kind in _MAPPINGS:
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
    unexpected: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()  # the missing ids that name no row
    unexpected_fields: Mapping[str, tuple[FieldChange, ...]] = field(default_factory=dict)
    reasons: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    groups: tuple[Any, ...] = ()
    # The declared invariances the fresh rows break (`routectl.review.invariances`): each
    # fails the check, whatever the expected changes say.
    broken: tuple[Any, ...] = ()

    @property
    def ok(self) -> bool:
        return not (self.unexpected or self.missing or self.broken)

    @functools.cached_property
    def unexpected_set(self) -> frozenset[str]:
        return frozenset(self.unexpected)

    def q(self, row_id: str) -> str:
        return qualified(self.name, row_id)


@dataclass(frozen=True)
class CheckOutcome:
    """The verdict of a whole run. `stale` names baseline categories no longer listed (only
    judged in complete runs); `unattributed` are bare expected ids naming no row;
    `missing_stated` the stated entries and fields that matched no change; `applied` says
    every missing change is already in the baseline."""

    categories: Mapping[str, CategoryVerdict]
    stale: tuple[str, ...] = ()
    unattributed: tuple[str, ...] = ()
    complete: bool = True
    missing_stated: tuple[MissingItem, ...] = ()
    # Every missing change is already in the baseline: the expected changes were applied
    # (by `check --update`) and the file now describes what the snapshots hold.
    applied: bool = False

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
