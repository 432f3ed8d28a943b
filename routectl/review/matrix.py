"""The route matrix: a category's rows laid out as a grid over the row-id dimensions.

A matrix row id is `model/kv/tpN/spec/cN/qN`; each of those six dimensions can go to the
grid's rows or columns. Every cell gets a label (by default the selected kernel, or a row
field named by `--field`) and a short symbol from a legend built per category, so a grid of
hundreds of rows fits a terminal. Edge probes (`edge:NAME`) follow the grid as a list with
the reason that decided them. Given baseline rows, cells whose row changed, appeared or
disappeared are marked and the label transitions are listed.

This module builds the model only; `matrix_text` and `matrix_html` render it. It knows no
category: labels come from the shape of a route (kernel, status, error, MoE stages, a
multi-layer `layers` map), and a category may name its own with its `matrix_label(route)` and
`matrix_reason(route)` methods and say what its cells show with `matrix_subject` (the
defaults of routectl.category.Category give none).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from routectl.errors import InputError
from routectl.io.jsonread import shorten
from routectl.reasons import reason_text, refusal_text
from routectl.review.patterns import describe
from routectl.rows import Invariance
from routectl.suggest import did_you_mean

DIMENSIONS = ("model", "kv", "tp", "spec", "c", "q")
DIMENSION_ALIASES = {"concurrency": "c", "budget": "q", "tokens": "q", "tensor_parallel": "tp"}
DEFAULT_ROWS = ("model", "tp", "spec")
DEFAULT_COLS = ("kv", "c", "q")
# The prefix a dimension's value carries in the row id (tp2, c4, q8192).
PREFIXES = {"tp": "tp", "c": "c", "q": "q"}
MATRIX_ID = re.compile(
    r"^(?P<model>[a-z0-9_-]+)/(?P<kv>[a-z0-9_]+)/tp(?P<tp>[0-9]+)/(?P<spec>[a-z0-9]+)"
    r"/c(?P<c>[0-9]+)/q(?P<q>[0-9]+)$"
)

# Label kinds, in legend order. Symbols: kernels and field values upper-case letters, statuses
# lower-case letters, errors digits, a route with nothing to show a dash.
KINDS = ("kernel", "value", "status", "error", "none")
_SYMBOLS = {
    "kernel": "ABCDEFGHJKLMNPQRSTUVWXYZ",
    "value": "ABCDEFGHJKLMNPQRSTUVWXYZ",
    "status": "abcdefghjkmnpqrstuvwxyz",
    "error": "123456789",
    "none": "-",
}
CHANGE_MARKS = {"changed": "*", "added": "+", "removed": "-"}
# The value of a collapsed dimension in the grid: one cell stands for every value.
ANY = "*"

Route = Mapping[str, Any]
LabelHook = Callable[[Route], "tuple[str, str] | None"]


@dataclass(frozen=True)
class Label:
    """What a cell shows: the full text (legend) and its kind (kernel, status, ...)."""

    text: str
    kind: str


@dataclass(frozen=True)
class LegendEntry:
    symbol: str
    label: Label
    cells: int  # how many rows (grid and probes) carry it
    index: int  # position in the legend: the colour of the label

    def to_json(self) -> dict[str, Any]:
        return {
            "symbol": self.symbol,
            "label": self.label.text,
            "kind": self.label.kind,
            "rows": self.cells,
        }


@dataclass(frozen=True)
class CellRow:
    """One row of the category as the matrix sees it: its label now and, given a baseline,
    before; `change` is None, "changed", "added" or "removed"."""

    id: str
    label: Label
    route: Route | None
    change: str | None = None
    old_label: Label | None = None
    old_route: Route | None = None
    reason: str = ""


@dataclass(frozen=True)
class Transition:
    """Rows whose label went from `old` to `new` (equal labels: other fields moved)."""

    old: Label | None
    new: Label | None
    change: str
    ids: tuple[str, ...]


@dataclass(frozen=True)
class Matrix:
    category: str
    field_path: str | None
    rows_dims: tuple[str, ...]
    cols_dims: tuple[str, ...]
    row_keys: tuple[tuple[str, ...], ...]
    col_keys: tuple[tuple[str, ...], ...]
    grid: Mapping[tuple[tuple[str, ...], tuple[str, ...]], CellRow]
    probes: tuple[CellRow, ...]
    legend: tuple[LegendEntry, ...]
    transitions: tuple[Transition, ...] = ()
    compared: bool = False
    symbols: Mapping[Label, str] = field(default_factory=dict)
    # What a cell shows when no field is asked for: a kernel, or a category's own label
    # (`matrix_subject`, e.g. a policy category selects no kernel).
    subject: str = "kernel"
    # The dimensions a declared invariance collapsed (their value is ANY) and what the view
    # says about the collapse: the invariances applied, or why the grid is whole.
    collapsed: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    grid_rows: int = 0  # matrix rows the grid stands for (collapsed, more than its cells)
    # Each grid row's id -> the id of the row whose cell shows it: itself, unless a collapse
    # merged it into a cell that shows another row (the first that moved, else the first).
    shown_by: Mapping[str, str] = field(default_factory=dict)

    @property
    def total_rows(self) -> int:
        return self.grid_rows + len(self.probes)

    @property
    def shows(self) -> str:
        """What each cell shows, as the titles and legends name it."""
        return self.subject if self.field_path is None else self.field_path

    def symbol(self, label: Label) -> str:
        return self.symbols[label]

    def entry(self, label: Label) -> LegendEntry:
        return next(e for e in self.legend if e.label == label)

    @property
    def cells(self) -> list[CellRow]:
        return list(self.grid.values())

    def changed(self) -> list[CellRow]:
        return [c for c in (*self.grid.values(), *self.probes) if c.change is not None]


# --- dimensions ----------------------------------------------------------------------------


def parse_dimensions(text: str | None, default: Sequence[str]) -> tuple[str, ...]:
    """`model,tp` or `model x tp` -> ("model", "tp"); unknown or repeated names are input
    errors naming the known ones."""
    if text is None:
        return tuple(default)
    names = [n.strip() for n in re.split(r"[,x\s]+", text.strip()) if n.strip()]
    dims: list[str] = []
    for name in names:
        dim = DIMENSION_ALIASES.get(name, name)
        if dim not in DIMENSIONS:
            raise InputError(
                f"unknown matrix dimension {name!r}: choose from {', '.join(DIMENSIONS)}"
            )
        if dim in dims:
            raise InputError(f"matrix dimension {dim!r} is named twice")
        dims.append(dim)
    if not dims:
        raise InputError("name at least one matrix dimension")
    return tuple(dims)


def layout(rows_text: str | None, cols_text: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Rows and columns: a side not given takes its default less the other side's
    dimensions; dimensions named on neither side join the rows, so every cell is one row."""
    if rows_text is None and cols_text is None:
        return DEFAULT_ROWS, DEFAULT_COLS
    # The side given first, so that the other side's default can leave out what it named.
    named_rows = None if rows_text is None else parse_dimensions(rows_text, ())
    cols = parse_dimensions(cols_text, [d for d in DEFAULT_COLS if d not in (named_rows or ())])
    rows = named_rows or parse_dimensions(None, [d for d in DEFAULT_ROWS if d not in cols])
    if not cols:
        raise InputError("every matrix dimension is named for the rows: leave one for --cols")
    both = set(rows) & set(cols)
    if both:
        raise InputError(f"matrix dimension {sorted(both)[0]!r} is named for both rows and columns")
    rest = tuple(d for d in DIMENSIONS if d not in rows and d not in cols)
    if cols_text is None:
        cols = (*cols, *(d for d in rest if d in DEFAULT_COLS))
        rest = tuple(d for d in rest if d not in cols)
    return (*rows, *rest), cols


def split_matrix_id(row_id: str) -> dict[str, str] | None:
    found = MATRIX_ID.match(row_id)
    return None if found is None else found.groupdict()


def value_text(dim: str, value: str) -> str:
    """A dimension value as a header shows it: `tp2`, `c4`, `q8k`; a collapsed one `*`."""
    if value == ANY:
        return ANY
    if dim == "q":
        n = int(value)
        return f"q{n // 1024}k" if n >= 1024 and n % 1024 == 0 else f"q{n}"
    return f"{PREFIXES.get(dim, '')}{value}"


# --- labels --------------------------------------------------------------------------------


def _compact(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _m1_stage(route: Route) -> str | None:
    for entry in route.get("stages") or ():
        if entry.get("m") == 1:
            return " > ".join(entry.get("chosen") or ()) or None
    return None


def kernel_label(route: Route) -> Label:
    """The kernel a route selected, from its shape: an error, a multi-layer route, a kernel
    (with the M = 1 stages of an MoE route), a status, or nothing."""
    if "error" in route:
        return Label(f"error {route['error']['code']}", "error")
    layers = route.get("layers")
    if isinstance(layers, Mapping) and layers:
        parts = [(name, kernel_label(layer)) for name, layer in layers.items()]
        distinct = {label for _, label in parts}
        if len(distinct) == 1:
            return parts[0][1]
        text = "; ".join(f"{name} {label.text}" for name, label in parts)
        kind = (
            "error"
            if any(lb.kind == "error" for _, lb in parts)
            else "kernel"
            if any(lb.kind == "kernel" for _, lb in parts)
            else "status"
        )
        return Label(text, kind)
    kernel = route.get("kernel")
    if kernel:
        m1 = _m1_stage(route)
        return Label(f"{kernel}, M=1 {m1}" if m1 else str(kernel), "kernel")
    status = route.get("status")
    if isinstance(status, Mapping):
        return Label(f"status {status.get('code')}", "status")
    return Label("nothing selected", "none")


def _walk(route: Any, path: Sequence[str]) -> tuple[bool, Any]:
    here = route
    for part in path:
        if isinstance(here, Mapping) and part in here:
            here = here[part]
        else:
            return False, None
    return True, here


def route_fields(route: Any, prefix: str = "") -> Iterator[str]:
    """The dotted paths of a route's fields (a layer's fields as the layers' own: a field
    of a layered route is looked up in each layer)."""
    if not isinstance(route, Mapping):
        return
    for key, value in route.items():
        yield prefix + key
        if key == "layers" and not prefix and isinstance(value, Mapping):
            for layer in value.values():
                yield from route_fields(layer)
        yield from route_fields(value, f"{prefix}{key}.")


def check_field(path: str, routes: Iterable[Any]) -> None:
    """`path` must be a field of some route: a typo would show a grid of `no PATH`."""
    parts = path.split(".")
    seen: set[str] = set()
    for route in routes:
        if _walk(route, parts)[0] or any(
            _walk(layer, parts)[0] for layer in (route.get("layers") or {}).values()
        ):
            return
        seen.update(route_fields(route))
    raise InputError(f"no route has a field {shorten(path)}{did_you_mean(path, sorted(seen))}")


def field_label(route: Route, path: str) -> Label:
    """The value of a dotted route field (`prepared_layout`, `bytes.total`, `status`); a
    route without it shows its error or status instead."""
    if "error" in route:
        return kernel_label(route)
    parts = path.split(".")
    found, value = _walk(route, parts)
    if not found and isinstance(route.get("layers"), Mapping):
        values = [(name, _walk(layer, parts)) for name, layer in route["layers"].items()]
        shown = {_compact(v) for _, (ok, v) in values if ok}
        if shown:
            if len(shown) == 1:
                return Label(shown.pop(), "value")
            return Label(
                "; ".join(f"{n} {_compact(v) if ok else '-'}" for n, (ok, v) in values), "value"
            )
    if not found:
        status = route.get("status")
        if isinstance(status, Mapping):
            return Label(f"status {status.get('code')}", "status")
        return Label(f"no {path}", "none")
    if path == "status" and isinstance(value, Mapping):
        return Label(f"status {value.get('code')}", "status")
    if value is None:
        return Label(f"{path} none", "value")
    return Label(f"{path} {_compact(value)}", "value")


def row_label(route: Route, field_path: str | None, hook: LabelHook | None = None) -> Label:
    if field_path is None and hook is not None:
        custom = hook(route)
        if custom is not None:
            return Label(*custom)
    return kernel_label(route) if field_path is None else field_label(route, field_path)


def _refusals(verdicts: Iterable[Mapping[str, Any]], stop: str | None = None) -> list[str]:
    found: list[str] = []
    for verdict in verdicts:
        if stop is not None and verdict.get("name") == stop:
            break
        if not verdict.get("ok"):
            found.append(refusal_text(verdict["name"], verdict["code"], verdict["message"]))
    return found


def deciding_reason(route: Route) -> str:
    """Why a row routes where it does, in one line: its error; the candidates refused ahead
    of the chosen kernel, nearest first (or that the first candidate was admitted); for a
    status row its refusals, else its message."""
    if "error" in route:
        return reason_text(route["error"].get("code"), route["error"].get("message", ""))
    layers = route.get("layers")
    if isinstance(layers, Mapping) and layers:
        reasons = dict.fromkeys(deciding_reason(layer) for layer in layers.values())
        return "; ".join(reasons)
    kernel = route.get("kernel")
    if not kernel:
        refused = _refusals(route.get("verdicts") or ())
        status = route.get("status")
        if refused:
            return "refused: " + "; ".join(refused)
        if isinstance(status, Mapping):
            return f"[{status.get('code')}] {status.get('message', '')}"
        return ""
    ahead = _refusals(route.get("verdicts") or (), stop=str(kernel))
    m1 = next((e.get("rejected") or [] for e in route.get("stages") or () if e.get("m") == 1), [])
    parts = [f"over {r}" for r in reversed(ahead)]
    parts += [f"M=1 over {r}" for r in _refusals(m1)]
    return "; ".join(parts) if parts else "the first candidate in priority order was admitted"


# --- building ------------------------------------------------------------------------------


def _assign_symbols(labels: Iterable[Label]) -> dict[Label, str]:
    """Symbols by kind then label text: the same labels always get the same symbols."""
    by_kind: dict[str, list[Label]] = {k: [] for k in KINDS}
    for label in sorted(set(labels), key=lambda lb: (KINDS.index(lb.kind), lb.text)):
        by_kind[label.kind].append(label)
    symbols: dict[Label, str] = {}
    for kind, labels_of_kind in by_kind.items():
        alphabet = _SYMBOLS[kind]
        if len(labels_of_kind) <= len(alphabet):
            pool: Sequence[str] = alphabet
        else:  # more labels than one-character symbols: two characters each
            pool = ["".join(p) for p in itertools.product(alphabet, repeat=2)]
        for label, symbol in zip(labels_of_kind, pool, strict=False):
            symbols[label] = symbol
    return symbols


def _ordered(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def build_matrix(
    category: str,
    rows: Sequence[Mapping[str, Any]],
    *,
    order: Sequence[str] = (),
    field_path: str | None = None,
    rows_dims: Sequence[str] = DEFAULT_ROWS,
    cols_dims: Sequence[str] = DEFAULT_COLS,
    baseline: Sequence[Mapping[str, Any]] | None = None,
    hook: LabelHook | None = None,
    reason_hook: Callable[[Route], str | None] | None = None,
    subject: str = "kernel",
    collapse: Sequence[Invariance] = (),
) -> Matrix:
    """Lay `rows` ({"id", "route"}) out as a grid. `order` lists row ids in the category's
    declared order (dimension values appear in that order; numbers sort by value);
    `baseline`, when given, marks the rows that changed, appeared or disappeared; `hook` and
    `reason_hook` are a category's own label and deciding reason of a route, if it has them;
    `collapse` the declared invariances whose dimensions may collapse (`_collapse`)."""

    def reason(route: Route) -> str:
        own = reason_hook(route) if reason_hook is not None else None
        return own if own is not None else deciding_reason(route)

    fresh = {r["id"]: r["route"] for r in rows}
    old = {r["id"]: r["route"] for r in baseline} if baseline is not None else {}
    ids = _ordered([*(i for i in order if i in fresh or i in old), *fresh, *old])
    cells: dict[str, CellRow] = {}
    for row_id in ids:
        route = fresh.get(row_id)
        before = old.get(row_id)
        now = row_label(route, field_path, hook) if route is not None else None
        then = row_label(before, field_path, hook) if before is not None else None
        change: str | None = None
        if baseline is not None:
            if route is None:
                change = "removed"
            elif before is None:
                change = "added"
            elif route != before:
                change = "changed"
        shown = now if now is not None else then
        assert shown is not None
        cells[row_id] = CellRow(
            row_id,
            shown,
            route,
            change,
            then,
            before,
            reason(route if route is not None else before or {}),
        )

    grid_ids = {i: split_matrix_id(i) for i in ids}
    present = {i: dims for i, dims in grid_ids.items() if dims is not None}
    rows_dims, cols_dims = tuple(rows_dims), tuple(cols_dims)
    collapsed, notes = _collapse(collapse, present, cells)
    if collapsed:
        present = {i: {**p, **dict.fromkeys(collapsed, ANY)} for i, p in present.items()}

    def keys(dims: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
        values = {d: _ordered(p[d] for p in present.values()) for d in dims}
        for d in dims:
            if d in PREFIXES and d not in collapsed:
                values[d].sort(key=int)
        seen = {tuple(p[d] for d in dims) for p in present.values()}
        return tuple(k for k in itertools.product(*(values[d] for d in dims)) if k in seen)

    grid: dict[tuple[tuple[str, ...], tuple[str, ...]], CellRow] = {}
    for i, p in present.items():
        key = (tuple(p[d] for d in rows_dims), tuple(p[d] for d in cols_dims))
        # A collapsed cell stands for its rows: the first that moved, else the first.
        if key not in grid or (grid[key].change is None and cells[i].change is not None):
            grid[key] = cells[i]
    shown_by = {
        i: grid[(tuple(p[d] for d in rows_dims), tuple(p[d] for d in cols_dims))].id
        for i, p in present.items()
    }
    probes = tuple(cells[i] for i in ids if grid_ids[i] is None)

    counts: dict[Label, int] = {}
    for cell in cells.values():
        counts[cell.label] = counts.get(cell.label, 0) + 1
        if cell.old_label is not None and cell.old_label not in counts:
            counts[cell.old_label] = 0
    symbols = _assign_symbols(counts)
    ordered = sorted(symbols, key=lambda lb: (KINDS.index(lb.kind), lb.text))
    legend = tuple(LegendEntry(symbols[lb], lb, counts[lb], n) for n, lb in enumerate(ordered))
    return Matrix(
        category=category,
        field_path=field_path,
        rows_dims=rows_dims,
        cols_dims=cols_dims,
        row_keys=keys(rows_dims),
        col_keys=keys(cols_dims),
        grid=grid,
        probes=probes,
        legend=legend,
        transitions=_transitions(cells.values()),
        subject=subject,
        compared=baseline is not None,
        symbols=symbols,
        collapsed=collapsed,
        notes=notes,
        grid_rows=len(present),
        shown_by=shown_by,
    )


def _agrees(
    dims: set[str], present: Mapping[str, Mapping[str, str]], cells: Mapping[str, CellRow]
) -> bool:
    """Whether every class of grid rows equal but for `dims` shows one label (and had one
    before, against a baseline, among its rows that were there: a row new against the
    baseline has no label before, which differs from none)."""
    now: dict[tuple[str, ...], Label] = {}
    before: dict[tuple[str, ...], Label] = {}
    for row_id, p in present.items():
        key = tuple(p[d] for d in DIMENSIONS if d not in dims)
        cell = cells[row_id]
        if now.setdefault(key, cell.label) != cell.label:
            return False
        old = cell.old_label
        if old is not None and before.setdefault(key, old) != old:
            return False
    return True


def _collapse(
    declared: Sequence[Invariance],
    present: Mapping[str, Mapping[str, str]],
    cells: Mapping[str, CellRow],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The dimensions the declared invariances collapse, in DIMENSIONS order, and the notes
    that say so. An invariance applies only where every cell it would merge shows the same
    label (the view never hides a difference, even one `check` fails on): one that would
    merge different labels leaves its dimensions whole, and a note names it."""
    dims: set[str] = set()
    applied: list[Invariance] = []
    notes: list[str] = []
    for inv in declared:
        wanted = dims | set(inv.dimensions)
        if wanted == dims:
            applied.append(inv)
        elif _agrees(wanted, present, cells):
            dims = wanted
            applied.append(inv)
        else:
            notes.append(
                f"not collapsed by invariance {inv.name}: rows differing only in "
                f"{', '.join(inv.dimensions)} show different cells: the grid keeps them"
            )
    if not dims:
        return (), tuple(notes)
    shown = [d for d in DIMENSIONS if d in dims]
    head = (
        f"{', '.join(shown)} collapsed: a {ANY} cell stands for every value, by the declared "
        f"invariance{'s' if len(applied) > 1 else ''} (verified by routectl check):"
    )
    lines = [head, *(f"  {inv.name}: {inv.statement}" for inv in applied)]
    return tuple(shown), (*lines, *notes)


def _transitions(cells: Iterable[CellRow]) -> tuple[Transition, ...]:
    groups: dict[tuple[str, Label | None, Label | None], list[str]] = {}
    for cell in cells:
        if cell.change is None:
            continue
        new = None if cell.change == "removed" else cell.label
        groups.setdefault((cell.change, cell.old_label, new), []).append(cell.id)
    order = {"changed": 0, "added": 1, "removed": 2}
    return tuple(
        Transition(old, new, change, tuple(sorted(ids)))
        for (change, old, new), ids in sorted(
            groups.items(),
            key=lambda item: (
                order[item[0][0]],
                -len(item[1]),
                item[0][1].text if item[0][1] else "",
                item[0][2].text if item[0][2] else "",
            ),
        )
    )


def build_matrices(
    categories: Sequence[Any],
    fresh: Mapping[str, Any],
    baseline: Mapping[str, Any] | None,
    *,
    field_path: str | None,
    rows_dims: Sequence[str],
    cols_dims: Sequence[str],
    collapse: bool = True,
) -> list[Matrix]:
    """Each category's fresh rows laid out, marked against its baseline snapshot when a
    baseline is given (a category the baseline lacks: every row new), collapsed by its
    declared invariances unless `collapse` is false. A `field_path` no route has is an
    InputError naming the closest field."""
    if field_path is not None:
        routes = [r["route"] for c in categories for r in fresh[c.name].rows]
        check_field(field_path, routes)
    built = []
    for category in categories:
        old: Sequence[Mapping[str, Any]] | None = None
        if baseline is not None:
            snap = baseline.get(category.name)
            old = snap.rows if snap is not None else ()
        built.append(
            build_matrix(
                category.name,
                fresh[category.name].rows,
                order=[spec.id for spec in category.rows()],
                field_path=field_path,
                rows_dims=rows_dims,
                cols_dims=cols_dims,
                baseline=old,
                hook=category.matrix_label,
                reason_hook=category.matrix_reason,
                subject=category.matrix_subject,
                collapse=collapsible(category, field_path) if collapse else (),
            )
        )
    return built


def collapsible(category: Any, field_path: str | None) -> tuple[Invariance, ...]:
    """The declared invariances a matrix of `category` may collapse: all of them for the
    default view (which still collapses only where every merged cell shows one label),
    those declaring the field for `--field FIELD`."""
    declared = tuple(category.invariances())
    if field_path is None:
        return declared
    return tuple(inv for inv in declared if inv.covers(f"route.{field_path}"))


def transition_patterns(built: Sequence[Matrix]) -> dict[tuple[str, ...], list[str]]:
    """Each label transition's rows as the review's row patterns, where they describe them
    exactly."""
    found: dict[tuple[str, ...], list[str]] = {}
    for matrix in built:
        for t in matrix.transitions:
            patterns = describe(t.ids).patterns
            if patterns is not None:
                found[t.ids] = list(patterns)
    return found
