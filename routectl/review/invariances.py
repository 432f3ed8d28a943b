"""Declared invariances, verified: a category states that some matrix dimensions never change
some row fields (`routectl.rows.Invariance`, returned by `Category.invariances`), and this
module proves or refutes each statement on a category's fresh rows.

The matrix rows (ids `model/kv/tpN/spec/cN/qN`; edge probes are not grid cells and are left
out) are split into classes that agree on every dimension the invariance does not name; the
statement holds when, within each class, every row has the same values at the declared
fields. A class that disagrees breaks it: the break names the first such class's pair of rows
that differ in the fewest dimensions (first in the category's declared order), the first field
change between them, and every row of the classes that disagree (the change groups that hold
one of those rows and move a declared field name the invariance).

The cost is one pass over the rows per declaration, each row's declared fields serialised
once (orjson, sorted keys, so 1, 1.0 and true stay apart as in the snapshot files); a pair is
diffed only for a class that disagrees.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from routectl.review.compare import FieldChange, field_changes
from routectl.review.matrix import split_matrix_id
from routectl.rows import MATRIX_DIMENSIONS, Invariance

Row = dict[str, Any]  # a row as read or replayed: {"id", "route"}
_ABSENT = [0]  # a declared field a row does not have: unequal to any value it could hold


@dataclass(frozen=True)
class InvarianceBreak:
    """One declared invariance the fresh rows refute: `rows` the first pair that breaks it
    (bare ids), `change` a declared field that differs between them (a changed value, the
    least deep, first), `classes` how many row classes disagree, `involved` every row of
    those classes."""

    category: str
    invariance: Invariance
    rows: tuple[str, str]
    change: FieldChange
    classes: int
    involved: frozenset[str]

    @property
    def name(self) -> str:
        return self.invariance.name

    def text(self) -> str:
        """`invariance NAME broken (kv, c and q never change ...): A and B differ at FIELD`;
        the values are the renderer's (`report.show_change`)."""
        a, b = self.rows
        more = f" (and {self.classes - 1} more row classes)" if self.classes > 1 else ""
        return (
            f"invariance {self.name} broken ({self.invariance.statement}): "
            f"{self.category}:{a} and {self.category}:{b} differ{more}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "invariance": self.name,
            "dimensions": list(self.invariance.dimensions),
            "fields": list(self.invariance.fields),
            "statement": self.invariance.statement,
            "rows": [f"{self.category}:{i}" for i in self.rows],
            "change": self.change.to_json(),
            "classes": self.classes,
        }


def _value(value: Any, parts: Sequence[str]) -> Any:
    """A row's value at a declared path; `*` maps over every key or item; absent: _ABSENT.
    Rows are plain JSON values (dicts and lists), so types are tested exactly (fast)."""
    for n, part in enumerate(parts):
        if part == "*":
            rest = parts[n + 1 :]
            if type(value) is dict:
                return {k: _value(v, rest) for k, v in value.items()}
            if type(value) is list:
                return [_value(v, rest) for v in value]
            return _ABSENT
        if type(value) is not dict or part not in value:
            return _ABSENT
        value = value[part]
    return [1, value]


def _dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # integers beyond 64 bits: what `row_text` falls back to
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def signature(row: Row, fields: Sequence[str]) -> bytes:
    """The declared fields' values of one row as canonical bytes (equal bytes: equal JSON)."""
    return _dumps([_value(row, f.split(".")) for f in fields])


class Signatures:
    """Each row's declared fields as canonical bytes, once per row and invariance (shared by
    a category's invariances). Given the canonical texts of all the rows (`replay_texts`:
    sorted keys, `{"id": ..., "route": ...}`), a declared whole `route` is the slice of its
    row's text, never serialised again, and rows with the same route text share one
    serialisation of their declared fields (most rows of a class are equal, status rows
    always): the cost is one pass over the texts plus one serialisation per distinct route."""

    def __init__(self, rows: Mapping[str, Row], texts: Mapping[str, str] | None = None) -> None:
        self._rows = rows
        self._routes: dict[str, str] = {}
        if texts is not None and rows.keys() <= texts.keys():
            found = {row_id: _route_slice(row_id, texts[row_id]) for row_id in rows}
            if all(v is not None for v in found.values()):
                self._routes = {k: v for k, v in found.items() if v is not None}
        self._memo: dict[tuple[str, tuple[str, ...]], bytes | str] = {}

    def of(self, row_id: str, fields: tuple[str, ...]) -> bytes | str:
        route = self._routes.get(row_id)
        if route is None:  # no texts: each row serialised
            return signature(self._rows[row_id], fields)
        if fields == ("route",):
            return route
        key = (route, fields)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = signature(self._rows[row_id], fields)
        return found


def _route_slice(row_id: str, text: str) -> str | None:
    """The canonical text of a row's route, cut from the row's text; None when the text is
    not `{"id":ID,"route":ROUTE}` as `row_text` writes it."""
    head = '{"id":' + orjson.dumps(row_id).decode() + ',"route":'
    if not text.startswith(head) or not text.endswith("}"):
        return None
    return text[len(head) : -1]


def _pair(members: Sequence[tuple[str, Mapping[str, str], bytes | str]]) -> tuple[int, int]:
    """The first pair of a disagreeing class with unequal values and the fewest differing
    dimensions (one, when the class has such a pair)."""
    best: tuple[int, int, int] | None = None
    for i, (_, dims_a, sig_a) in enumerate(members):
        for j in range(i + 1, len(members)):
            _, dims_b, sig_b = members[j]
            if sig_a == sig_b:
                continue
            apart = sum(1 for d in MATRIX_DIMENSIONS if dims_a[d] != dims_b[d])
            if best is None or apart < best[0]:
                best = (apart, i, j)
                if apart == 1:
                    return i, j
    assert best is not None, "a disagreeing class holds two unequal rows"
    return best[1], best[2]


class GridRows:
    """A category's rows as every invariance reads them: by id, the matrix rows in the
    declared order with their dimensions (parsed once), and their `Signatures`."""

    def __init__(
        self, rows: Sequence[Row], order: Sequence[str] = (), texts: Mapping[str, str] | None = None
    ) -> None:
        self.by_id = {r["id"]: r for r in rows}
        ids = [i for i in dict.fromkeys([*order, *sorted(self.by_id)]) if i in self.by_id]
        parsed = ((i, split_matrix_id(i)) for i in ids)
        self.grid = [(i, dims) for i, dims in parsed if dims is not None]
        self.signatures = Signatures(self.by_id, texts)


def verify_invariance(
    category: str,
    invariance: Invariance,
    rows: Sequence[Row],
    order: Sequence[str] = (),
    *,
    grid: GridRows | None = None,
) -> InvarianceBreak | None:
    """None when `rows` (the category's, `{"id", "route"}`) bear the invariance out, else its
    break. `order` is the category's declared row order (rows it does not list follow by id);
    `grid`, those rows prepared once for all of a category's invariances."""
    prepared = grid if grid is not None else GridRows(rows, order)
    free = [d for d in MATRIX_DIMENSIONS if d not in invariance.dimensions]
    sig = prepared.signatures.of
    fields = invariance.fields
    classes: dict[tuple[str, ...], list[tuple[str, Mapping[str, str], bytes | str]]] = {}
    for row_id, dims in prepared.grid:
        key = tuple(dims[d] for d in free)
        classes.setdefault(key, []).append((row_id, dims, sig(row_id, fields)))
    broken = [m for m in classes.values() if any(s != m[0][2] for _, _, s in m)]
    if not broken:
        return None
    first = broken[0]
    i, j = _pair(first)
    a, b = first[i][0], first[j][0]
    by_id = prepared.by_id
    changes = [c for c in field_changes(by_id[a], by_id[b]) if invariance.covers(c.path)]
    # The change a reader takes in first: a value that changed (not an item added or
    # removed), the least deep first (`route.kernel` before `route.bytes.total`). Equal
    # signatures are equal JSON, so two unequal ones differ at some declared path; the
    # fallback only guards a path spelling the pattern does not foresee.
    changes.sort(key=lambda c: (c.kind != "changed", c.path.count(".") + c.path.count("[")))
    change = changes[0] if changes else FieldChange(invariance.fields[0], "changed", None, None)
    involved = frozenset(row_id for m in broken for row_id, _, _ in m)
    return InvarianceBreak(category, invariance, (a, b), change, len(broken), involved)


def verify_category(
    category: Any, rows: Sequence[Row], *, texts: Sequence[tuple[str, str]] | None = None
) -> tuple[InvarianceBreak, ...]:
    """Every invariance `category` declares that its `rows` break, in declaration order.
    `texts` are the rows' canonical texts when the caller has them (`replay_texts`)."""
    declared = tuple(category.invariances())
    if not declared:
        return ()
    order = [spec.id for spec in category.rows()]
    grid = GridRows(rows, order, dict(texts) if texts is not None else None)
    found = (verify_invariance(category.name, inv, rows, grid=grid) for inv in declared)
    return tuple(b for b in found if b is not None)


def breaks_of(
    paths: Iterable[str], row_ids: Iterable[str], broken: Sequence[InvarianceBreak]
) -> tuple[str, ...]:
    """The names of the broken invariances a change breaks: it moves a declared field
    (`paths`: its change paths, none for an added row) of a row in a disagreeing class."""
    ids = set(row_ids)
    moved = list(paths)
    return tuple(
        b.name
        for b in broken
        if ids & b.involved and (not moved or any(b.invariance.covers(p) for p in moved))
    )


__all__ = [
    "GridRows",
    "InvarianceBreak",
    "breaks_of",
    "signature",
    "verify_category",
    "verify_invariance",
]
