"""Change groups: the moved rows of one category, grouped by what moved.

A changed row's signature is the set of its field changes with list indexes generalised to
`[*]` (path, kind, old value, new value); rows with the same signature form one group, which a
reviewer reads once. Added rows group by what they route to (kernel, or status or error code),
removed rows likewise. Each group carries its rows as sorted bare ids and their description as
row-id patterns (`routectl.review.patterns.describe`).

The library API (`group_changes`, `ChangeGroup`, `SignatureField`) is what renderers and
other views (e.g. a route matrix) build on.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from routectl.review.compare import Comparison, FieldChange
from routectl.review.patterns import Description, describe
from routectl.review.snapshot import Row, qualified

# A place in a list: a position, or the key of an item placed by its M (a stage plan, a
# dispatch record: `compare.item_keys`). Items keyed by name are not generalised: another
# kernel's verdict is another change.
LIST_INDEX = re.compile(r"\[(?:[0-9]+|M=[0-9]+(?:,[0-9]+)?)\]")
# A mapping key that is not an identifier, as `format_path` writes it: `["x[3]"]`. Its text
# is a name, never a place in a list, whatever brackets it holds.
QUOTED_KEY = re.compile(r'\["(?:[^"\\]|\\.)*"\]')
GROUP_KINDS = ("changed", "added", "removed")


def outside_quoted_keys(
    path: str, rewrite: Callable[[str], str], key: Callable[[str], str] = str
) -> str:
    """`path` with `rewrite` applied to each stretch between quoted keys, and `key` (by
    default nothing) to each quoted key."""
    out, start = [], 0
    for found in QUOTED_KEY.finditer(path):
        out += [rewrite(path[start : found.start()]), key(found.group())]
        start = found.end()
    out.append(rewrite(path[start:]))
    return "".join(out)


def general_path(path: str) -> str:
    """`route.dispatch[*].plan.m` from `route.dispatch[M=8,0].plan.m` (or `[3]`); a quoted
    key (`route.flags["x[3]"]`) stays as it is: two such keys are two changes."""
    if '"' not in path:
        return LIST_INDEX.sub("[*]", path)
    return outside_quoted_keys(path, lambda part: LIST_INDEX.sub("[*]", part))


def canonical(value: Any) -> str:
    """A value's JSON text, for identity: 1, 1.0 and true stay apart."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class SignatureField:
    """One field change of a signature; `places` is how many times it occurs per row
    (min, max over the group's rows: a path with `[*]` may repeat); `concrete` is the one
    path it has in every row, when it has one (shown instead of the generalised path)."""

    path: str
    kind: str
    old: Any
    new: Any
    places: tuple[int, int] = (1, 1)
    concrete: str | None = None

    @property
    def shown_path(self) -> str:
        return self.concrete if self.concrete is not None else self.path

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "old": self.old,
            "new": self.new,
            "places": list(self.places),
        }


SignatureKey = tuple[tuple[str, str, str, str], ...]


def _key(change: FieldChange) -> tuple[str, str, str, str]:
    return (general_path(change.path), change.kind, canonical(change.old), canonical(change.new))


def signature_key(changes: Sequence[FieldChange]) -> SignatureKey:
    return tuple(sorted({_key(c) for c in changes}))


@dataclass(frozen=True)
class ChangeGroup:
    """Rows of one category that moved the same way. `fields` is the signature of a changed
    group (empty for added and removed groups); `label` what added or removed rows route to."""

    category: str
    kind: str  # one of GROUP_KINDS
    row_ids: tuple[str, ...]  # bare ids, sorted
    fields: tuple[SignatureField, ...] = ()
    label: str = ""
    # The declared invariances this change breaks (`routectl.review.invariances.breaks_of`).
    breaks: tuple[str, ...] = ()

    @cached_property
    def description(self) -> Description:
        return describe(self.row_ids)

    @property
    def patterns(self) -> tuple[str, ...] | None:
        """Qualified patterns denoting exactly the rows, or None (then the ids stand)."""
        found = self.description.patterns
        return None if found is None else tuple(qualified(self.category, p) for p in found)

    @property
    def qualified_ids(self) -> tuple[str, ...]:
        return tuple(qualified(self.category, i) for i in self.row_ids)

    def to_json(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "kind": self.kind,
            "label": self.label,
            "signature": [f.to_json() for f in self.fields],
            "rows": list(self.qualified_ids),
            "patterns": None if self.patterns is None else list(self.patterns),
            "breaks": list(self.breaks),
        }


def row_label(row: Row | None) -> str:
    """What a row routes to: its kernel, else its status or error code."""
    route = (row or {}).get("route")
    if not isinstance(route, dict):
        return "no route"
    if route.get("kernel"):
        return f"kernel {route['kernel']}"
    for key in ("status", "error"):
        item = route.get(key)
        if isinstance(item, dict) and item.get("code"):
            return f"{key} {item['code']}"
    return "no kernel"


def _changed_groups(
    category: str, changed: Mapping[str, Sequence[FieldChange]]
) -> list[ChangeGroup]:
    by_key: dict[SignatureKey, list[str]] = defaultdict(list)
    places: dict[SignatureKey, dict[tuple[str, str, str, str], list[int]]] = {}
    paths: dict[SignatureKey, dict[tuple[str, str, str, str], set[str]]] = {}
    for row_id, changes in changed.items():
        keys = [_key(c) for c in changes]
        counts = Counter(keys)
        key = tuple(sorted(counts))
        by_key[key].append(row_id)
        slot = places.setdefault(key, defaultdict(list))
        for item, n in counts.items():
            slot[item].append(n)
        seen = paths.setdefault(key, defaultdict(set))
        for item, change in zip(keys, changes, strict=True):
            seen[item].add(change.path)
    groups = []
    for key, ids in by_key.items():
        examples: dict[tuple[str, str, str, str], FieldChange] = {}
        for change in changed[ids[0]]:
            examples.setdefault(_key(change), change)
        fields = tuple(
            SignatureField(
                k[0],
                k[1],
                examples[k].old,
                examples[k].new,
                (min(places[key][k]), max(places[key][k])),
                next(iter(paths[key][k])) if len(paths[key][k]) == 1 else None,
            )
            for k in key
        )
        groups.append(ChangeGroup(category, "changed", tuple(sorted(ids)), fields))
    return groups


def _labelled_groups(
    category: str, kind: str, ids: Sequence[str], rows: Mapping[str, Row]
) -> list[ChangeGroup]:
    by_label: dict[str, list[str]] = defaultdict(list)
    for row_id in ids:
        by_label[row_label(rows.get(row_id))].append(row_id)
    return [ChangeGroup(category, kind, tuple(sorted(v)), label=k) for k, v in by_label.items()]


def _order(group: ChangeGroup) -> tuple[int, int, str]:
    # Largest first within a kind: the change that moves most rows is read first.
    return GROUP_KINDS.index(group.kind), -len(group.row_ids), group.row_ids[0]


def group_changes(
    category: str, comparison: Comparison, fresh: Mapping[str, Row], baseline: Mapping[str, Row]
) -> tuple[ChangeGroup, ...]:
    """The change groups of one category's comparison, in a fixed order: changed, added,
    removed; within a kind, more rows first, then by first row id. `fresh` and `baseline`
    are the rows by id (added rows are labelled from `fresh`, removed from `baseline`)."""
    groups = [
        *_changed_groups(category, comparison.changed),
        *_labelled_groups(category, "added", comparison.added, fresh),
        *_labelled_groups(category, "removed", comparison.removed, baseline),
    ]
    return tuple(sorted(groups, key=_order))


# --- clusters ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChangeCluster:
    """Changed groups of one category that share field changes, for reading one cause once:
    `fields` are the changes every row below has (beyond those of the clusters above), then
    each of `children` adds its own. A leaf holds one `group`; its `fields` are that group's
    changes not shown above."""

    fields: tuple[SignatureField, ...]
    children: tuple[ChangeCluster, ...] = ()
    group: ChangeGroup | None = None

    @property
    def groups(self) -> tuple[ChangeGroup, ...]:
        if self.group is not None:
            return (self.group,)
        return tuple(g for child in self.children for g in child.groups)

    @property
    def row_ids(self) -> tuple[str, ...]:
        return tuple(i for g in self.groups for i in g.row_ids)


FieldKey = tuple[str, str, str, str]


def _field_key(field: SignatureField) -> FieldKey:
    return (field.path, field.kind, canonical(field.old), canonical(field.new))


def _merged(fields: Sequence[SignatureField]) -> SignatureField:
    """One field change as several groups have it: places over all, its concrete path when
    every group has the same one."""
    first = fields[0]
    concrete = {f.concrete for f in fields}
    return SignatureField(
        first.path,
        first.kind,
        first.old,
        first.new,
        (min(f.places[0] for f in fields), max(f.places[1] for f in fields)),
        first.concrete if len(concrete) == 1 else None,
    )


Pending = tuple[ChangeGroup, dict[FieldKey, SignatureField]]


def _components(items: Sequence[Pending]) -> list[list[Pending]]:
    """The items linked by a shared field change, transitively, in the order of their
    first item (a group with no change left is its own)."""
    owner: dict[FieldKey, int] = {}
    parent = list(range(len(items)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for index, (_, rest) in enumerate(items):
        for key in rest:
            if key in owner:
                parent[root(index)] = root(owner[key])
            else:
                owner[key] = index
    parts: dict[int, list[Pending]] = {}
    for index, item in enumerate(items):
        parts.setdefault(root(index), []).append(item)
    return sorted(parts.values(), key=lambda part: items.index(part[0]))


def _first(part: Sequence[Pending], key: FieldKey) -> int:
    return next(i for i, (_, rest) in enumerate(part) if key in rest)


def _clusters(items: Sequence[Pending]) -> list[ChangeCluster]:
    out: list[ChangeCluster] = []
    for part in _components(items):
        if len(part) == 1:
            ((group, rest),) = part
            out.append(ChangeCluster(tuple(rest.values()), group=group))
            continue
        common = set.intersection(*(set(rest) for _, rest in part))
        if not common:
            # Linked, but by no change all share: the groups with the change most of them
            # have form one cluster, the others are clustered apart.
            counts = Counter(k for _, rest in part for k in rest)
            top = max(counts, key=lambda k: (counts[k], -_first(part, k)))
            out.extend(_clusters([item for item in part if top in item[1]]))
            out.extend(_clusters([item for item in part if top not in item[1]]))
            continue
        shared = tuple(_merged([rest[k] for _, rest in part]) for k in sorted(common))
        below = [(g, {k: f for k, f in rest.items() if k not in common}) for g, rest in part]
        out.append(ChangeCluster(shared, tuple(_clusters(below))))
    return out


def cluster_groups(groups: Sequence[ChangeGroup]) -> tuple[ChangeCluster, ...]:
    """The changed groups as clusters of shared changes: groups linked by a common field
    change (transitively) form one cluster, which holds the changes all its groups have and,
    below it, the clusters of what remains; the order is the groups' (largest first)."""
    changed = [(g, {_field_key(f): f for f in g.fields}) for g in groups if g.kind == "changed"]
    return tuple(_clusters(changed))
